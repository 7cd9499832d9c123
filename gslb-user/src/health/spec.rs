//! What a monitor is configured to do: [`MonitorSpec`] (its kind, timing, weight) and a
//! service's [`ServiceMonitors`]; [`MonitorSpecError`] when a spec cannot run.

use std::{net::IpAddr, path::PathBuf, time::Duration};

use hickory_proto::{op::ResponseCode, rr::RecordType};

use super::dns::DnsCheckError;

/// One monitor bound to a service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonitorSpec {
    /// Name for logs and the snapshot (a NetScaler monitor name); need not be unique.
    pub name: String,
    pub kind: MonitorKind,
    /// Destination port; `None` checks the service's port. Ignored by ICMP.
    pub port: Option<u16>,
    /// Time from the start of one check to the start of the next.
    pub interval: Duration,
    /// A check that has not succeeded within this time has failed.
    pub timeout: Duration,
    /// Failed checks in a row that take an UP monitor DOWN (NetScaler `retries`); 0 acts as 1.
    pub fall: u32,
    /// Successful checks in a row that take a DOWN monitor UP (NetScaler `successRetries`);
    /// 0 acts as 1.
    pub rise: u32,
    /// Weight in the service's threshold sum.
    pub weight: u32,
}

impl MonitorSpec {
    /// A monitor with NetScaler's defaults: every 5 s, 2 s timeout, 3 failures to go DOWN,
    /// 1 success to go UP, weight 1.
    pub fn new(name: impl Into<String>, kind: MonitorKind) -> Self {
        MonitorSpec {
            name: name.into(),
            kind,
            port: None,
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            fall: 3,
            rise: 1,
            weight: 1,
        }
    }
}

/// What a monitor checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MonitorKind {
    /// A TCP connection is accepted (then closed).
    Tcp,
    /// `GET path` over HTTP/1.1.
    Http(HttpCheck),
    /// `GET path` over HTTP/1.1 in TLS.
    Https(HttpCheck, TlsCheck),
    /// A DNS query over UDP.
    Dns(DnsCheck),
    /// ICMP (or ICMPv6) echo.
    Icmp,
}

impl MonitorKind {
    /// Short name of the kind for logs.
    pub fn label(&self) -> &'static str {
        match self {
            MonitorKind::Tcp => "tcp",
            MonitorKind::Http(_) => "http",
            MonitorKind::Https(..) => "https",
            MonitorKind::Dns(_) => "dns",
            MonitorKind::Icmp => "icmp",
        }
    }
}

/// The request and the expected response of an HTTP(S) monitor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpCheck {
    /// Request target, starting with `/` (may carry a query).
    pub path: String,
    /// `Host` header; `None` sends the checked address (`ip:port`).
    pub host: Option<String>,
    /// Accepted status codes; empty accepts any 2xx.
    pub expect_status: Vec<u16>,
    /// A string the first 64 KiB of the body must contain.
    pub body_contains: Option<String>,
}

impl HttpCheck {
    /// `GET path`, any 2xx, any body.
    pub fn get(path: impl Into<String>) -> Self {
        HttpCheck {
            path: path.into(),
            host: None,
            expect_status: Vec::new(),
            body_contains: None,
        }
    }
}

/// TLS settings of an HTTPS monitor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsCheck {
    /// Accept any certificate (self-signed, expired, other name): checks that TLS and HTTP
    /// work, not who answers. The handshake signature is still verified.
    pub insecure: bool,
    /// Server name sent as SNI and verified; `None` uses the `Host` (without port) when set,
    /// else the checked IP address (verified against the certificate's IP names, no SNI sent).
    pub sni: Option<String>,
    /// PEM file of further trusted certificates, beside the system's roots.
    pub ca_file: Option<PathBuf>,
}

/// The query and the expected response of a DNS monitor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsCheck {
    pub qname: String,
    pub qtype: RecordType,
    /// The response code the answer must have (usually NOERROR).
    pub expect_rcode: ResponseCode,
    /// An address that must be among the answer's A/AAAA records.
    pub expect_answer: Option<IpAddr>,
}

impl DnsCheck {
    /// `qname qtype`, NOERROR, any answer.
    pub fn new(qname: impl Into<String>, qtype: RecordType) -> Self {
        DnsCheck {
            qname: qname.into(),
            qtype,
            expect_rcode: ResponseCode::NoError,
            expect_answer: None,
        }
    }
}

/// The monitors of one service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceMonitors {
    /// The service id (key of the snapshot and of the events).
    pub service: String,
    /// The address checked: the private address of a service behind NAT.
    pub target: IpAddr,
    pub port: u16,
    pub monitors: Vec<MonitorSpec>,
    /// NetScaler `monThreshold`: UP when the weights of the UP monitors add up to at least
    /// this; 0 requires every monitor UP.
    pub threshold: u32,
    /// The state monitors start in (see the module documentation); default `true`.
    pub initial_up: bool,
}

impl ServiceMonitors {
    /// A service with no monitors yet, threshold 0, starting UP.
    pub fn new(service: impl Into<String>, target: IpAddr, port: u16) -> Self {
        ServiceMonitors {
            service: service.into(),
            target,
            port,
            monitors: Vec::new(),
            threshold: 0,
            initial_up: true,
        }
    }

    /// Adds a monitor.
    pub fn monitor(mut self, spec: MonitorSpec) -> Self {
        self.monitors.push(spec);
        self
    }
}

/// Why a monitor cannot be built from its [`MonitorSpec`] or [`LoadMonitorSpec`](load::LoadMonitorSpec).
///
/// The cause is in the message too (as in [`DnsCheckError`]): these end up as text in
/// configuration errors and in the reply to a refused reload.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MonitorSpecError {
    #[error("interval must be more than 0")]
    ZeroInterval,
    #[error("timeout must be more than 0")]
    ZeroTimeout,
    /// A `stub_status` page has one number, the active connections.
    #[error("stub_status reports connections")]
    StubStatusMeasure,
    #[error("path {path:?} does not start with /")]
    PathNotAbsolute { path: String },
    #[error("path {path:?}: {source}")]
    Path {
        path: String,
        source: hyper::http::uri::InvalidUri,
    },
    #[error("host {host:?} is not a header value")]
    HostHeader { host: String },
    #[error("TLS server name {name:?}")]
    ServerName { name: String },
    #[error("TLS: {source}")]
    Tls {
        source: Box<tokio_rustls::rustls::Error>,
    },
    #[error("CA file {}: {source}", path.display())]
    CaFileRead {
        path: PathBuf,
        source: Box<tokio_rustls::rustls::pki_types::pem::Error>,
    },
    #[error("CA file {}: {source}", path.display())]
    CaFileCertificate {
        path: PathBuf,
        source: Box<tokio_rustls::rustls::Error>,
    },
    #[error("CA file {}: no certificate", path.display())]
    CaFileEmpty { path: PathBuf },
    #[error(transparent)]
    Dns(#[from] DnsCheckError),
}
