//! HTTP and HTTPS GET monitors: one fresh HTTP/1.1 connection per check (hyper's connection
//! API, driven inside the check so that aborting the check closes the connection), TLS by
//! rustls with the ring provider.

use std::{
    net::SocketAddr,
    path::Path,
    pin::pin,
    sync::{Arc, OnceLock},
};

use http_body_util::{BodyExt, Empty};
use hyper::{
    Request, Uri,
    body::Bytes,
    header::{self, HeaderValue},
};
use hyper_util::rt::TokioIo;
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpStream,
};
use tokio_rustls::{
    TlsConnector,
    rustls::{
        self, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
        client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
        crypto::CryptoProvider,
        pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject},
    },
};
use tracing::debug;

use super::{CheckError, HttpCheck, MonitorSpecError, TlsCheck, needle::Needle};

/// Body bytes searched for `body_contains`; the rest is not read.
const BODY_LIMIT: usize = 64 * 1024;

pub(super) struct HttpChecker {
    addr: SocketAddr,
    path: Uri,
    host: HeaderValue,
    expect_status: Vec<u16>,
    body_contains: Option<Needle>,
    tls: Option<(TlsConnector, ServerName<'static>)>,
}

impl HttpChecker {
    pub(super) fn new(
        addr: SocketAddr,
        check: &HttpCheck,
        tls: Option<&TlsCheck>,
    ) -> Result<Self, MonitorSpecError> {
        if !check.path.starts_with('/') {
            return Err(MonitorSpecError::PathNotAbsolute {
                path: check.path.clone(),
            });
        }
        let path: Uri = check
            .path
            .parse()
            .map_err(|source| MonitorSpecError::Path {
                path: check.path.clone(),
                source,
            })?;
        let host = check.host.clone().unwrap_or_else(|| addr.to_string());
        let Ok(host_header) = HeaderValue::from_str(&host) else {
            return Err(MonitorSpecError::HostHeader { host });
        };
        let tls = match tls {
            None => None,
            Some(tls) => {
                let name = match (&tls.sni, &check.host) {
                    (Some(sni), _) => sni.clone(),
                    (None, Some(host)) => strip_port(host).to_owned(),
                    (None, None) => addr.ip().to_string(),
                };
                let Ok(name) = ServerName::try_from(name.clone()) else {
                    return Err(MonitorSpecError::ServerName { name });
                };
                Some((TlsConnector::from(client_config(tls)?), name))
            }
        };
        Ok(HttpChecker {
            addr,
            path,
            host: host_header,
            expect_status: check.expect_status.clone(),
            body_contains: check
                .body_contains
                .as_ref()
                .map(|s| Needle::new(s.as_bytes())),
            tls,
        })
    }

    pub(super) async fn check(&self) -> Result<(), CheckError> {
        self.get(Read::Check).await.map(drop)
    }

    /// `GET path`: the whole body of a response with an accepted status, at most `limit` bytes
    /// (a longer one is an error, not cut: a cut metrics page could lose the sample wanted).
    pub(super) async fn fetch(&self, limit: usize) -> Result<Vec<u8>, CheckError> {
        self.get(Read::Whole(limit)).await
    }

    async fn get(&self, read: Read) -> Result<Vec<u8>, CheckError> {
        let tcp = TcpStream::connect(self.addr)
            .await
            .map_err(CheckError::Connect)?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => self.exchange(tcp, read).await,
            Some((connector, name)) => {
                let stream = connector
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(CheckError::Tls)?;
                self.exchange(stream, read).await
            }
        }
    }

    /// Sends the request over `stream`, checks the response and reads its body as `read` says.
    async fn exchange<S>(&self, stream: S, read: Read) -> Result<Vec<u8>, CheckError>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let http_error = |e: hyper::Error| CheckError::Http(e.to_string());
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(http_error)?;
        let request = Request::get(self.path.clone())
            .header(header::HOST, self.host.clone())
            .header(header::USER_AGENT, "gslb-health")
            .header(header::ACCEPT, "*/*")
            .header(header::CONNECTION, "close")
            .body(Empty::<Bytes>::new())
            .map_err(|e| CheckError::Http(e.to_string()))?;
        let work = async {
            let response = sender.send_request(request).await.map_err(http_error)?;
            let status = response.status().as_u16();
            let status_ok = if self.expect_status.is_empty() {
                (200..300).contains(&status)
            } else {
                self.expect_status.contains(&status)
            };
            if !status_ok {
                let expected = if self.expect_status.is_empty() {
                    "2xx".to_owned()
                } else {
                    format!("{:?}", self.expect_status)
                };
                return Err(CheckError::Status {
                    got: status,
                    expected,
                });
            }
            let (needle, limit) = match read {
                Read::Check => match &self.body_contains {
                    None => return Ok(Vec::new()),
                    Some(needle) => (Some(needle), BODY_LIMIT),
                },
                Read::Whole(limit) => (None, limit),
            };
            let mut body = response.into_body();
            // A check keeps no body, only its search's state: each byte is looked at once
            // however the body is cut into frames. A whole body is kept.
            let mut search = needle.map(Needle::search);
            let mut seen = Vec::new();
            let mut read = 0usize;
            while let Some(frame) = body.frame().await {
                if let Ok(data) = frame.map_err(http_error)?.into_data() {
                    read += data.len();
                    match &mut search {
                        Some(search) => {
                            if search.feed(&data) {
                                return Ok(Vec::new());
                            }
                        }
                        None => seen.extend_from_slice(&data),
                    }
                    // A check reads no more than the limit; a whole body may not exceed it.
                    if read > limit || (needle.is_some() && read >= limit) {
                        break;
                    }
                }
            }
            match needle {
                Some(needle) => Err(CheckError::Body(
                    String::from_utf8_lossy(needle.bytes()).into_owned(),
                )),
                None if read > limit => Err(CheckError::Http(format!(
                    "response body longer than {limit} bytes"
                ))),
                None => Ok(seen),
            }
        };
        // The connection is driven here, not in a task of its own, so that it ends with the
        // check. When it ends first, what it read is already queued for `work`.
        let mut conn = pin!(conn);
        let mut work = pin!(work);
        tokio::select! {
            result = &mut work => result,
            ended = &mut conn => {
                if let Err(error) = ended {
                    debug!(%error, addr = %self.addr, "http connection");
                }
                work.await
            }
        }
    }
}

/// The check of an HTTP monitor (`check`: status and `body_contains`) over `stream`, already
/// connected to the server at `addr` (which names the default `Host`), in plain HTTP: what
/// each check does once connected, also for the `http_body` fuzz target, which plays the
/// server with bytes of its own.
pub async fn http_check_over<S>(
    addr: SocketAddr,
    stream: S,
    check: &HttpCheck,
) -> Result<(), CheckError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let checker = HttpChecker::new(addr, check, None)?;
    checker.exchange(stream, Read::Check).await.map(drop)
}

/// What [`HttpChecker::get`] reads of the body.
#[derive(Clone, Copy)]
enum Read {
    /// As far as needed for `body_contains` (at most [`BODY_LIMIT`] bytes), else nothing.
    Check,
    /// All of it, at most this many bytes.
    Whole(usize),
}

/// `host` without a `:port` (an IPv6 literal in brackets loses its brackets).
fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name
        }
        _ => host,
    }
}

/// The client configuration of `tls`; the common ones are built once and shared.
fn client_config(tls: &TlsCheck) -> Result<Arc<ClientConfig>, MonitorSpecError> {
    static VERIFIED: OnceLock<Arc<ClientConfig>> = OnceLock::new();
    static INSECURE: OnceLock<Arc<ClientConfig>> = OnceLock::new();
    if tls.insecure {
        return Ok(INSECURE
            .get_or_init(|| build_config(None, true).expect("no CA file"))
            .clone());
    }
    match &tls.ca_file {
        None => Ok(VERIFIED
            .get_or_init(|| build_config(None, false).expect("no CA file"))
            .clone()),
        Some(path) => build_config(Some(path), false),
    }
}

fn build_config(
    ca_file: Option<&Path>,
    insecure: bool,
) -> Result<Arc<ClientConfig>, MonitorSpecError> {
    let builder = ClientConfig::builder_with_provider(crate::tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(|source| MonitorSpecError::Tls {
            source: Box::new(source),
        })?;
    let mut config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(
                AcceptAnyCertificate(crate::tls::provider()),
            ))
            .with_no_client_auth()
    } else {
        let mut roots = system_roots().clone();
        if let Some(path) = ca_file {
            let read = |source| MonitorSpecError::CaFileRead {
                path: path.to_owned(),
                source: Box::new(source),
            };
            let certs = CertificateDer::pem_file_iter(path).map_err(read)?;
            let mut added = 0;
            for cert in certs {
                roots.add(cert.map_err(read)?).map_err(|source| {
                    MonitorSpecError::CaFileCertificate {
                        path: path.to_owned(),
                        source: Box::new(source),
                    }
                })?;
                added += 1;
            }
            if added == 0 {
                return Err(MonitorSpecError::CaFileEmpty {
                    path: path.to_owned(),
                });
            }
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The system's trusted roots, loaded once.
fn system_roots() -> &'static RootCertStore {
    static ROOTS: OnceLock<RootCertStore> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        for error in &found.errors {
            debug!(%error, "system root certificates");
        }
        let mut roots = RootCertStore::empty();
        let (added, ignored) = roots.add_parsable_certificates(found.certs);
        debug!(added, ignored, "system root certificates loaded");
        roots
    })
}

/// `insecure` mode: any certificate is accepted; the handshake signatures are still checked,
/// so the peer does hold the key of the certificate it sent.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_without_port() {
        assert_eq!(strip_port("www.example.com"), "www.example.com");
        assert_eq!(strip_port("www.example.com:8443"), "www.example.com");
        assert_eq!(strip_port("192.0.2.1:80"), "192.0.2.1");
        assert_eq!(strip_port("[2001:db8::1]:443"), "2001:db8::1");
        assert_eq!(strip_port("[2001:db8::1]"), "2001:db8::1");
        assert_eq!(strip_port("2001:db8::1"), "2001:db8::1");
    }

    #[test]
    fn invalid_checks_are_refused() {
        let addr: SocketAddr = "192.0.2.1:80".parse().unwrap();
        assert!(HttpChecker::new(addr, &HttpCheck::get("health"), None).is_err());
        let bad_host = HttpCheck {
            host: Some("a\nb".into()),
            ..HttpCheck::get("/")
        };
        assert!(HttpChecker::new(addr, &bad_host, None).is_err());
        let tls = TlsCheck {
            sni: Some("not a name".into()),
            ..TlsCheck::default()
        };
        assert!(HttpChecker::new(addr, &HttpCheck::get("/"), Some(&tls)).is_err());
        let missing_ca = TlsCheck {
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..TlsCheck::default()
        };
        assert!(HttpChecker::new(addr, &HttpCheck::get("/"), Some(&missing_ca)).is_err());
        assert!(
            HttpChecker::new(
                addr,
                &HttpCheck::get("/healthz?full=1"),
                Some(&TlsCheck::default())
            )
            .is_ok()
        );
    }

    /// The check over a stream whose server's side the test plays: a needle cut across
    /// chunks is found, an absent one and a refused status are each their own error.
    #[tokio::test]
    async fn a_check_over_a_stream_reads_status_and_body() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        async fn check(response: &str, needle: &str) -> Result<(), CheckError> {
            let (client, mut server) = tokio::io::duplex(1 << 16);
            let serve = async {
                // The request first (hyper refuses a response before its request), then the
                // response and the end of the stream.
                let mut request = Vec::new();
                while !request.ends_with(b"\r\n\r\n") {
                    request.push(server.read_u8().await.unwrap());
                }
                server.write_all(response.as_bytes()).await.unwrap();
                server.shutdown().await.unwrap();
            };
            let check = HttpCheck {
                body_contains: Some(needle.into()),
                ..HttpCheck::get("/")
            };
            let addr = "192.0.2.1:80".parse().unwrap();
            tokio::join!(serve, http_check_over(addr, client, &check)).1
        }
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                       3\r\nsta\r\n4\r\ntus:\r\n3\r\n OK\r\n0\r\n\r\n";
        let found = check(chunked, "status: OK").await;
        assert!(found.is_ok(), "{found:?}");
        assert!(matches!(
            check(chunked, "down").await,
            Err(CheckError::Body(_))
        ));
        let refused = "HTTP/1.1 503 Unavailable\r\nContent-Length: 2\r\n\r\nOK";
        assert!(matches!(
            check(refused, "OK").await,
            Err(CheckError::Status { got: 503, .. })
        ));
    }
}
