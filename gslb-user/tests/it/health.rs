//! Health monitors against real servers on loopback (port 0, started inside each test): TCP,
//! HTTP (stopped, restarted, answering 500, a wrong body, hanging), HTTPS with a self-signed
//! certificate, DNS, ICMP (root or ping sockets; skipped otherwise unless
//! GSLB_REQUIRE_PRIVILEGED=1), weights and threshold, removal, flap counting; and the link
//! load monitor over counters written by the test, and the real loopback's counter.
//!
//! Intervals are tens of milliseconds; every wait is bounded by [`WAIT`], which only a broken
//! monitor reaches.

use std::{
    collections::HashMap,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use gslb_user::health::{
    CheckError, DnsCheck, HealthError, HealthEvent, HealthSupervisor, HttpCheck, IcmpMode,
    MonitorKind, MonitorSpec, ServiceMonitors, TlsCheck, check_once, icmp_mode,
    link::{LinkMonitor, LinkSpec, SYS_CLASS_NET, rx_bytes},
};
use hickory_proto::{
    op::{Message, MessageType, ResponseCode},
    rr::{Name, RData, Record, RecordType, rdata::A},
};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::{TcpListener, UdpSocket},
    sync::broadcast,
    task::{JoinHandle, JoinSet},
    time::{sleep, timeout},
};
use tokio_rustls::{
    TlsAcceptor,
    rustls::{
        ServerConfig,
        pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer},
    },
};

/// Upper bound of every wait for something that should happen (a broken monitor only).
const WAIT: Duration = Duration::from_secs(5);
const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

// ---------------------------------------------------------------------------------------------
// Test servers

/// What the test HTTP server does with a request.
#[derive(Clone, Debug)]
enum Reply {
    /// Answers with this status and body.
    Status(u16, &'static str),
    /// Reads the request and never answers.
    Hang,
}

#[derive(Default)]
struct HttpStats {
    accepted: AtomicUsize,
    /// Responses sent, by status.
    served: Mutex<HashMap<u16, usize>>,
    /// Requests left unanswered, and how many of those the client closed.
    hanging: AtomicUsize,
    closed_by_client: AtomicUsize,
}

/// An HTTP/1.1 server (plain or TLS) on 127.0.0.1 that can be stopped, restarted on the same
/// port and told how to answer.
struct HttpServer {
    addr: SocketAddr,
    reply: Arc<Mutex<Reply>>,
    stats: Arc<HttpStats>,
    tls: Option<TlsAcceptor>,
    task: Option<JoinHandle<()>>,
}

impl HttpServer {
    async fn start(reply: Reply) -> Self {
        Self::start_with(reply, None).await
    }

    async fn start_with(reply: Reply, tls: Option<TlsAcceptor>) -> Self {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let mut server = HttpServer {
            addr: listener.local_addr().unwrap(),
            reply: Arc::new(Mutex::new(reply)),
            stats: Arc::default(),
            tls,
            task: None,
        };
        server.spawn(listener);
        server
    }

    fn spawn(&mut self, listener: TcpListener) {
        let (reply, stats, tls) = (self.reply.clone(), self.stats.clone(), self.tls.clone());
        self.task = Some(tokio::spawn(async move {
            // Dropped with the accept loop: stopping the server closes its connections too.
            let mut connections = JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                stats.accepted.fetch_add(1, Ordering::SeqCst);
                let (reply, stats, tls) = (reply.clone(), stats.clone(), tls.clone());
                connections.spawn(async move {
                    match tls {
                        None => handle(stream, reply, stats).await,
                        Some(acceptor) => {
                            if let Ok(Ok(stream)) = timeout(WAIT, acceptor.accept(stream)).await {
                                handle(stream, reply, stats).await;
                            }
                        }
                    }
                });
                while connections.try_join_next().is_some() {}
            }
        }));
    }

    fn set(&self, reply: Reply) {
        *self.reply.lock().unwrap() = reply;
    }

    /// Closes the listener and every connection: connections are refused from now on.
    async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }

    /// Listens again on the same port.
    async fn restart(&mut self) {
        let listener = TcpListener::bind(self.addr).await.unwrap();
        self.spawn(listener);
    }

    fn accepted(&self) -> usize {
        self.stats.accepted.load(Ordering::SeqCst)
    }

    fn served(&self, status: u16) -> usize {
        self.stats
            .served
            .lock()
            .unwrap()
            .get(&status)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

async fn handle<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    reply: Arc<Mutex<Reply>>,
    stats: Arc<HttpStats>,
) {
    let mut request = Vec::new();
    let mut chunk = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match timeout(WAIT, stream.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 && request.len() < 16 * 1024 => {
                request.extend_from_slice(&chunk[..n]);
            }
            _ => return,
        }
    }
    let reply = reply.lock().unwrap().clone();
    match reply {
        Reply::Hang => {
            stats.hanging.fetch_add(1, Ordering::SeqCst);
            // Until the client gives up (end of file), within a bound.
            if let Ok(Ok(0) | Err(_)) =
                timeout(Duration::from_secs(20), stream.read(&mut chunk)).await
            {
                stats.closed_by_client.fetch_add(1, Ordering::SeqCst);
            }
        }
        Reply::Status(status, body) => {
            let response = format!(
                "HTTP/1.1 {status} Whatever\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
            if stream.write_all(response.as_bytes()).await.is_ok() {
                *stats.served.lock().unwrap().entry(status).or_default() += 1;
            }
            let _ = stream.shutdown().await;
        }
    }
}

/// A DNS server on 127.0.0.1 for one name: `www.example.com. A 192.0.2.1`, NXDOMAIN for other
/// names; silent while `silent` is set.
struct DnsServer {
    addr: SocketAddr,
    silent: Arc<AtomicBool>,
    queries: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl DnsServer {
    async fn start() -> Self {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = socket.local_addr().unwrap();
        let silent = Arc::new(AtomicBool::new(false));
        let queries = Arc::new(AtomicUsize::new(0));
        let (s, q) = (silent.clone(), queries.clone());
        let task = tokio::spawn(async move {
            let mut buf = [0u8; 1500];
            let www = Name::from_ascii("www.example.com.").unwrap();
            loop {
                let Ok((len, peer)) = socket.recv_from(&mut buf).await else {
                    continue;
                };
                q.fetch_add(1, Ordering::SeqCst);
                if s.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(query) = Message::from_vec(&buf[..len]) else {
                    continue;
                };
                let Some(question) = query.queries.first().cloned() else {
                    continue;
                };
                let mut response = Message::new(query.id, MessageType::Response, query.op_code);
                response.metadata.authoritative = true;
                response.add_query(question.clone());
                if question.name().eq_case(&www) || question.name() == &www {
                    if question.query_type() == RecordType::A {
                        response.add_answer(Record::from_rdata(
                            www.clone(),
                            60,
                            RData::A(A::new(192, 0, 2, 1)),
                        ));
                    }
                } else {
                    response.metadata.response_code = ResponseCode::NXDomain;
                }
                let _ = socket.send_to(&response.to_vec().unwrap(), peer).await;
            }
        });
        DnsServer {
            addr,
            silent,
            queries,
            task,
        }
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// A monitor checking every `interval_ms` with a 200 ms timeout.
fn monitor(name: &str, kind: MonitorKind, interval_ms: u64, fall: u32, rise: u32) -> MonitorSpec {
    MonitorSpec {
        interval: Duration::from_millis(interval_ms),
        timeout: Duration::from_millis(200),
        fall,
        rise,
        ..MonitorSpec::new(name, kind)
    }
}

fn http(path: &str) -> MonitorKind {
    MonitorKind::Http(HttpCheck::get(path))
}

fn service(id: &str, addr: SocketAddr, monitors: Vec<MonitorSpec>) -> ServiceMonitors {
    ServiceMonitors {
        monitors,
        ..ServiceMonitors::new(id, addr.ip(), addr.port())
    }
}

/// The next event of `service` (others are skipped).
async fn next_event(events: &mut broadcast::Receiver<HealthEvent>, service: &str) -> HealthEvent {
    let wait = async {
        loop {
            match events.recv().await {
                Ok(event) if event.service == service => return event,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => panic!("event channel closed"),
            }
        }
    };
    timeout(WAIT, wait)
        .await
        .unwrap_or_else(|_| panic!("no event of {service} within {WAIT:?}"))
}

/// Asserts that `service` has no event for `during`.
async fn no_event(events: &mut broadcast::Receiver<HealthEvent>, service: &str, during: Duration) {
    let deadline = Instant::now() + during;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match timeout(left, events.recv()).await {
            Err(_) => return,
            Ok(Ok(event)) if event.service == service => panic!("unexpected event {event:?}"),
            Ok(_) => {}
        }
    }
}

/// Waits until `condition` holds, polling every 5 ms, at most [`WAIT`].
async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !condition() {
        assert!(Instant::now() < deadline, "not within {WAIT:?}: {what}");
        sleep(Duration::from_millis(5)).await;
    }
}

/// Checks done by monitor `index` of `service`.
fn checks(supervisor: &HealthSupervisor, service: &str, index: usize) -> u64 {
    supervisor.snapshot()[service].monitors[index].checks
}

// ---------------------------------------------------------------------------------------------
// Tests

#[tokio::test]
async fn tcp_up_down_up() {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let supervisor = HealthSupervisor::new();
    let mut events = supervisor.subscribe();
    let spec = service(
        "tcp",
        addr,
        vec![monitor("tcp", MonitorKind::Tcp, 20, 2, 2)],
    );
    supervisor.set_services(vec![spec]).await.unwrap();

    // Connections are accepted by the kernel from the backlog; the listener need not accept.
    wait_until("3 checks", || checks(&supervisor, "tcp", 0) >= 3).await;
    let health = &supervisor.snapshot()["tcp"];
    assert!(
        health.up && health.transitions == 0 && health.last_change.is_none(),
        "{health:?}"
    );
    assert_eq!(health.monitors[0].failures, 0, "{health:?}");

    drop(listener);
    let down = next_event(&mut events, "tcp").await;
    assert!(!down.up, "{down:?}");
    assert!(down.reason.contains("connect"), "{down:?}");
    assert_eq!(down.transitions, 1);
    assert_eq!(supervisor.is_up("tcp"), Some(false));

    let _listener = TcpListener::bind(addr).await.unwrap();
    let up = next_event(&mut events, "tcp").await;
    assert!(up.up, "{up:?}");
    let health = &supervisor.snapshot()["tcp"];
    assert_eq!(health.transitions, 2);
    assert!(health.monitors[0].consecutive_successes >= 2, "{health:?}");
    assert_eq!(supervisor.is_up("nonexistent"), None);
}

#[tokio::test]
async fn http_status_fall_and_rise() {
    let server = HttpServer::start(Reply::Status(200, "ok")).await;
    let supervisor = HealthSupervisor::new();
    let mut events = supervisor.subscribe();
    let (fall, rise) = (3, 2);
    let spec = service(
        "web",
        server.addr,
        vec![monitor("http", http("/health"), 15, fall, rise)],
    );
    supervisor.set_services(vec![spec]).await.unwrap();

    wait_until("3 answers 200", || server.served(200) >= 3).await;
    assert_eq!(supervisor.is_up("web"), Some(true));

    server.set(Reply::Status(500, "broken"));
    let down = next_event(&mut events, "web").await;
    assert!(!down.up);
    assert!(down.reason.contains("HTTP status 500"), "{down:?}");
    assert!(
        server.served(500) >= fall as usize,
        "down after {} answers 500",
        server.served(500)
    );

    let served_200 = server.served(200);
    server.set(Reply::Status(200, "ok"));
    let up = next_event(&mut events, "web").await;
    assert!(up.up);
    assert!(
        server.served(200) - served_200 >= rise as usize,
        "up after {} answers 200",
        server.served(200) - served_200
    );
    let monitor = &supervisor.snapshot()["web"].monitors[0];
    assert_eq!(
        (monitor.kind, monitor.transitions),
        ("http", 2),
        "{monitor:?}"
    );
    assert!(monitor.failures >= u64::from(fall), "{monitor:?}");
    assert_eq!(monitor.last.as_ref().unwrap().error, None);
}

#[tokio::test]
async fn http_expected_status_and_body() {
    let server = HttpServer::start(Reply::Status(200, "status: degraded")).await;
    let (ip, port) = (server.addr.ip(), server.addr.port());
    let mut check = HttpCheck::get("/");
    check.body_contains = Some("status: ok".into());
    let spec = monitor("body", MonitorKind::Http(check.clone()), 15, 1, 1);
    match check_once(ip, port, &spec).await {
        Err(CheckError::Body(needle)) => assert_eq!(needle, "status: ok"),
        other => panic!("{other:?}"),
    }
    server.set(Reply::Status(200, "build 7, status: ok, 3 workers"));
    check_once(ip, port, &spec).await.unwrap();

    // Status lists: 204 accepted only when listed; empty accepts 2xx only.
    server.set(Reply::Status(302, ""));
    let any_2xx = monitor("s", http("/"), 15, 1, 1);
    assert!(matches!(
        check_once(ip, port, &any_2xx).await,
        Err(CheckError::Status { got: 302, .. })
    ));
    let mut redirect_ok = HttpCheck::get("/");
    redirect_ok.expect_status = vec![200, 302];
    check_once(
        ip,
        port,
        &monitor("s", MonitorKind::Http(redirect_ok), 15, 1, 1),
    )
    .await
    .unwrap();

    // Through the supervisor: a body mismatch takes the service down, the right body back up.
    server.set(Reply::Status(200, "status: degraded"));
    let supervisor = HealthSupervisor::new();
    let mut events = supervisor.subscribe();
    supervisor
        .set_services(vec![service("body", server.addr, vec![spec])])
        .await
        .unwrap();
    let down = next_event(&mut events, "body").await;
    assert!(
        !down.up && down.reason.contains("does not contain"),
        "{down:?}"
    );
    server.set(Reply::Status(200, "status: ok"));
    assert!(next_event(&mut events, "body").await.up);
}

#[tokio::test]
async fn a_hanging_target_delays_no_other_check() {
    let hanging = HttpServer::start(Reply::Hang).await;
    let healthy = HttpServer::start(Reply::Status(200, "ok")).await;
    let supervisor = HealthSupervisor::new();
    let mut events = supervisor.subscribe();
    let mut slow = monitor("hang", http("/"), 20, 2, 1);
    slow.timeout = Duration::from_millis(150);
    supervisor
        .set_services(vec![
            service("hang", hanging.addr, vec![slow]),
            service(
                "fine",
                healthy.addr,
                vec![monitor("http", http("/"), 20, 2, 1)],
            ),
        ])
        .await
        .unwrap();

    let started = Instant::now();
    let down = next_event(&mut events, "hang").await;
    let took = started.elapsed();
    assert!(
        !down.up && down.reason.contains("no answer within 150ms"),
        "{down:?}"
    );
    // Two timeouts in a row: at least 2 × 150 ms.
    assert!(took >= Duration::from_millis(290), "down after {took:?}");
    // Meanwhile the other service was checked every 20 ms, not once per hang.
    let snapshot = supervisor.snapshot();
    let fine = &snapshot["fine"];
    let expected = took.as_millis() as u64 / 20;
    assert!(fine.up && fine.transitions == 0, "{fine:?}");
    assert!(
        fine.monitors[0].checks * 2 >= expected,
        "{} checks in {took:?}",
        fine.monitors[0].checks
    );
    let hang = &snapshot["hang"].monitors[0];
    assert!(hang.checks <= 4, "{hang:?}");
    assert!(
        hang.last.as_ref().unwrap().elapsed >= Duration::from_millis(150),
        "{hang:?}"
    );
    // The timed-out checks closed their connections.
    wait_until("hanging connections closed", || {
        hanging.stats.closed_by_client.load(Ordering::SeqCst) >= 2
    })
    .await;
}

#[tokio::test]
async fn http_server_stopped_and_started_again() {
    let mut server = HttpServer::start(Reply::Status(200, "ok")).await;
    let supervisor = HealthSupervisor::new();
    let mut events = supervisor.subscribe();
    supervisor
        .set_services(vec![service(
            "web",
            server.addr,
            vec![monitor("http", http("/"), 15, 2, 2)],
        )])
        .await
        .unwrap();
    wait_until("2 answers", || server.served(200) >= 2).await;

    server.stop().await;
    let down = next_event(&mut events, "web").await;
    assert!(!down.up && down.reason.contains("connect"), "{down:?}");

    server.restart().await;
    let up = next_event(&mut events, "web").await;
    assert!(up.up, "{up:?}");
    assert_eq!(supervisor.snapshot()["web"].transitions, 2);
}

/// A TLS acceptor with a self-signed certificate for localhost and 127.0.0.1; and the
/// certificate in PEM.
fn self_signed() -> (TlsAcceptor, String) {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let cert = CertificateDer::from(certified.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let provider = gslb_user::tls::provider();
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    (TlsAcceptor::from(Arc::new(config)), certified.cert.pem())
}

#[tokio::test]
async fn https_self_signed() {
    let (acceptor, pem) = self_signed();
    let server = HttpServer::start_with(Reply::Status(200, "tls ok"), Some(acceptor)).await;
    let (ip, port) = (server.addr.ip(), server.addr.port());
    let https = |tls: TlsCheck| {
        let mut check = HttpCheck::get("/health");
        check.body_contains = Some("tls ok".into());
        monitor("https", MonitorKind::Https(check, tls), 15, 1, 1)
    };
    let insecure = https(TlsCheck {
        insecure: true,
        ..TlsCheck::default()
    });
    check_once(ip, port, &insecure).await.unwrap();

    // Verified: the system's roots do not know this certificate.
    match check_once(ip, port, &https(TlsCheck::default())).await {
        Err(CheckError::Tls(error)) => {
            assert!(error.to_string().contains("certificate"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    // Trusted through a CA file, by IP address and by name.
    let ca_file = std::env::temp_dir().join(format!("gslb-health-test-{}.pem", std::process::id()));
    std::fs::write(&ca_file, &pem).unwrap();
    let trusted = TlsCheck {
        ca_file: Some(ca_file.clone()),
        ..TlsCheck::default()
    };
    let by_ip = check_once(ip, port, &https(trusted.clone())).await;
    let by_name = check_once(
        ip,
        port,
        &https(TlsCheck {
            sni: Some("localhost".into()),
            ..trusted.clone()
        }),
    )
    .await;
    let other_name = check_once(
        ip,
        port,
        &https(TlsCheck {
            sni: Some("example.com".into()),
            ..trusted
        }),
    )
    .await;
    std::fs::remove_file(&ca_file).unwrap();
    by_ip.unwrap();
    by_name.unwrap();
    assert!(
        matches!(other_name, Err(CheckError::Tls(_))),
        "{other_name:?}"
    );

    // Through the supervisor: up, then 500 takes it down.
    let supervisor = HealthSupervisor::new();
    let mut events = supervisor.subscribe();
    supervisor
        .set_services(vec![service("tls", server.addr, vec![insecure])])
        .await
        .unwrap();
    wait_until("2 answers", || server.served(200) >= 2).await;
    assert_eq!(supervisor.is_up("tls"), Some(true));
    server.set(Reply::Status(500, "tls ok"));
    let down = next_event(&mut events, "tls").await;
    assert!(!down.up && down.reason.contains("500"), "{down:?}");
}

#[tokio::test]
async fn dns_rcode_and_answer() {
    let server = DnsServer::start().await;
    let (ip, port) = (server.addr.ip(), server.addr.port());
    let dns = |check: DnsCheck| monitor("dns", MonitorKind::Dns(check), 15, 2, 1);

    let mut www = DnsCheck::new("www.example.com", RecordType::A);
    check_once(ip, port, &dns(www.clone())).await.unwrap();
    www.expect_answer = Some(Ipv4Addr::new(192, 0, 2, 1).into());
    check_once(ip, port, &dns(www.clone())).await.unwrap();
    www.expect_answer = Some(Ipv4Addr::new(192, 0, 2, 99).into());
    assert!(matches!(
        check_once(ip, port, &dns(www)).await,
        Err(CheckError::Answer(_))
    ));
    let other = DnsCheck::new("nope.example.com", RecordType::A);
    match check_once(ip, port, &dns(other.clone())).await {
        Err(CheckError::Rcode { got, expected }) => {
            assert_eq!(
                (got, expected),
                (ResponseCode::NXDomain, ResponseCode::NoError)
            );
        }
        other => panic!("{other:?}"),
    }
    let nxdomain_expected = DnsCheck {
        expect_rcode: ResponseCode::NXDomain,
        ..other
    };
    check_once(ip, port, &dns(nxdomain_expected)).await.unwrap();
    // An expected address needs an address query.
    let mut mx = DnsCheck::new("www.example.com", RecordType::MX);
    mx.expect_answer = Some(LOCALHOST);
    assert!(matches!(
        check_once(ip, port, &dns(mx)).await,
        Err(CheckError::Invalid(_))
    ));

    // A closed port is reported at once, not waited out.
    let closed = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let started = Instant::now();
    let refused = check_once(
        ip,
        closed.port(),
        &dns(DnsCheck::new("www.example.com", RecordType::A)),
    )
    .await;
    assert!(matches!(refused, Err(CheckError::Dns(_))), "{refused:?}");
    assert!(
        started.elapsed() < Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );

    // Through the supervisor: a silent server goes down by timeout, and comes back.
    let supervisor = HealthSupervisor::new();
    let mut events = supervisor.subscribe();
    let spec = dns(DnsCheck::new("www.example.com", RecordType::A));
    supervisor
        .set_services(vec![service("dns", server.addr, vec![spec])])
        .await
        .unwrap();
    wait_until("2 checks", || checks(&supervisor, "dns", 0) >= 2).await;
    assert_eq!(supervisor.is_up("dns"), Some(true));
    server.silent.store(true, Ordering::SeqCst);
    let down = next_event(&mut events, "dns").await;
    assert!(
        !down.up && down.reason.contains("no answer within"),
        "{down:?}"
    );
    server.silent.store(false, Ordering::SeqCst);
    assert!(next_event(&mut events, "dns").await.up);
    assert!(server.queries.load(Ordering::SeqCst) >= 4);
}

/// Whether ICMP tests can run here; prints why not, or fails under GSLB_REQUIRE_PRIVILEGED=1.
fn icmp_usable(ipv6: bool) -> Option<IcmpMode> {
    match icmp_mode(ipv6) {
        Ok(mode) => Some(mode),
        Err(error) => {
            gslb_tests::skip(&error.to_string());
            None
        }
    }
}

#[tokio::test]
async fn icmp_echo_to_loopback() {
    let Some(mode) = icmp_usable(false) else {
        return;
    };
    println!("ICMP socket: {mode:?}");
    let spec = monitor("ping", MonitorKind::Icmp, 20, 2, 1);
    check_once(LOCALHOST, 0, &spec).await.unwrap();
    // Several pings at once, each matched to its own reply.
    let many = (0..8).map(|_| {
        let spec = spec.clone();
        async move { check_once(LOCALHOST, 0, &spec).await }
    });
    for result in futures_join_all(many).await {
        result.unwrap();
    }
    // IPv6, when this host has ::1.
    if UdpSocket::bind((Ipv6Addr::LOCALHOST, 0)).await.is_ok() && icmp_usable(true).is_some() {
        check_once(Ipv6Addr::LOCALHOST.into(), 0, &spec)
            .await
            .unwrap();
    }

    let supervisor = HealthSupervisor::new();
    let mut ping = ServiceMonitors::new("ping", LOCALHOST, 80).monitor(spec);
    ping.initial_up = false;
    let mut events = supervisor.subscribe();
    supervisor.set_services(vec![ping]).await.unwrap();
    let up = next_event(&mut events, "ping").await;
    assert!(up.up && up.reason.contains("monitor ping up"), "{up:?}");
    wait_until("3 checks", || checks(&supervisor, "ping", 0) >= 3).await;
    assert_eq!(supervisor.snapshot()["ping"].monitors[0].failures, 0);
}

/// Awaits all of `futures` concurrently (no futures crate needed).
async fn futures_join_all<F: Future + Send + 'static>(
    futures: impl Iterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for handle in handles {
        out.push(handle.await.unwrap());
    }
    out
}

#[tokio::test]
async fn weights_and_threshold() {
    // One service, three monitors on three ports: tcp (weight 2), http a and b (weight 1 each);
    // threshold 3: up while tcp and one of a/b are up.
    let tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let mut a = HttpServer::start(Reply::Status(200, "a")).await;
    let mut b = HttpServer::start(Reply::Status(200, "b")).await;
    let on = |mut m: MonitorSpec, port: u16, weight: u32| {
        m.port = Some(port);
        m.weight = weight;
        m
    };
    let mut spec = ServiceMonitors::new("svc", LOCALHOST, 1)
        .monitor(on(
            monitor("tcp", MonitorKind::Tcp, 15, 1, 1),
            tcp.local_addr().unwrap().port(),
            2,
        ))
        .monitor(on(monitor("a", http("/"), 15, 1, 1), a.addr.port(), 1))
        .monitor(on(monitor("b", http("/"), 15, 1, 1), b.addr.port(), 1));
    spec.threshold = 3;
    let supervisor = HealthSupervisor::new();
    let mut events = supervisor.subscribe();
    supervisor.set_services(vec![spec]).await.unwrap();
    wait_until("checks of every monitor", || {
        (0..3).all(|i| checks(&supervisor, "svc", i) >= 2)
    })
    .await;

    // a down: 2 + 1 >= 3, still up.
    a.stop().await;
    wait_until("monitor a down", || {
        !supervisor.snapshot()["svc"].monitors[1].up
    })
    .await;
    no_event(&mut events, "svc", Duration::from_millis(100)).await;
    assert_eq!(supervisor.is_up("svc"), Some(true));

    // b down too: 2 < 3.
    b.stop().await;
    let down = next_event(&mut events, "svc").await;
    assert!(
        !down.up && down.reason.contains("monitor b down"),
        "{down:?}"
    );

    // a back: 3 again.
    a.restart().await;
    let up = next_event(&mut events, "svc").await;
    assert!(up.up && up.reason.contains("monitor a up"), "{up:?}");
    let health = &supervisor.snapshot()["svc"];
    let states: Vec<(&str, bool, u32)> = health
        .monitors
        .iter()
        .map(|m| (m.name.as_str(), m.up, m.weight))
        .collect();
    assert_eq!(states, [("tcp", true, 2), ("a", true, 1), ("b", false, 1)]);
    drop(b);
}

#[tokio::test]
async fn removed_services_stop_at_once() {
    let hanging = HttpServer::start(Reply::Hang).await;
    let busy = HttpServer::start(Reply::Status(200, "ok")).await;
    let kept = HttpServer::start(Reply::Status(200, "ok")).await;
    let supervisor = HealthSupervisor::new();
    let mut slow = monitor("hang", http("/"), 10, 3, 1);
    slow.timeout = Duration::from_secs(10);
    let services = |with_removed: bool| {
        let mut v = vec![service(
            "kept",
            kept.addr,
            vec![monitor("http", http("/"), 10, 2, 1)],
        )];
        if with_removed {
            v.push(service("hang", hanging.addr, vec![slow.clone()]));
            v.push(service(
                "busy",
                busy.addr,
                vec![
                    monitor("http", http("/"), 10, 2, 1),
                    monitor("tcp", MonitorKind::Tcp, 10, 2, 1),
                ],
            ));
        }
        v
    };
    supervisor.set_services(services(true)).await.unwrap();
    wait_until("checks under way", || {
        busy.accepted() >= 6 && hanging.stats.hanging.load(Ordering::SeqCst) >= 1
    })
    .await;

    let started = Instant::now();
    supervisor.set_services(services(false)).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(100),
        "{:?}",
        started.elapsed()
    );
    let snapshot = supervisor.snapshot();
    assert_eq!(snapshot.keys().collect::<Vec<_>>(), ["kept"]);

    // The check stuck on the hanging server was aborted: its connection is closed.
    wait_until("hanging connection closed", || {
        hanging.stats.closed_by_client.load(Ordering::SeqCst) >= 1
    })
    .await;
    // Connections already in the backlog may still be accepted; none are made afterwards.
    sleep(Duration::from_millis(30)).await;
    let (busy_seen, hang_seen) = (busy.accepted(), hanging.accepted());
    let kept_seen = kept.accepted();
    sleep(Duration::from_millis(200)).await;
    assert_eq!(
        (busy.accepted(), hanging.accepted()),
        (busy_seen, hang_seen)
    );
    // The kept service went on.
    assert!(
        kept.accepted() >= kept_seen + 5,
        "{} → {}",
        kept_seen,
        kept.accepted()
    );
}

#[tokio::test]
async fn flaps_are_counted() {
    let server = HttpServer::start(Reply::Status(200, "ok")).await;
    let supervisor = HealthSupervisor::new();
    let mut events = supervisor.subscribe();
    supervisor
        .set_services(vec![service(
            "flappy",
            server.addr,
            vec![monitor("http", http("/"), 10, 1, 1)],
        )])
        .await
        .unwrap();
    for round in 1..=3u64 {
        server.set(Reply::Status(503, "no"));
        let down = next_event(&mut events, "flappy").await;
        assert_eq!(
            (down.up, down.transitions),
            (false, 2 * round - 1),
            "{down:?}"
        );
        server.set(Reply::Status(200, "ok"));
        let up = next_event(&mut events, "flappy").await;
        assert_eq!((up.up, up.transitions), (true, 2 * round), "{up:?}");
        assert!(up.at >= down.at);
    }
    let health = &supervisor.snapshot()["flappy"];
    assert_eq!(health.transitions, 6);
    assert_eq!(health.monitors[0].transitions, 6);
    assert!(health.last_change.is_some());
}

#[tokio::test]
async fn changes_restart_only_changed_services_and_keep_their_state() {
    let mut server = HttpServer::start(Reply::Status(200, "ok")).await;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let tcp_addr = listener.local_addr().unwrap();
    let supervisor = HealthSupervisor::new();
    let mut events = supervisor.subscribe();
    let web_addr = server.addr;
    let web = |interval_ms| {
        service(
            "web",
            web_addr,
            vec![monitor("http", http("/"), interval_ms, 1, 1)],
        )
    };
    let tcp = service(
        "tcp",
        tcp_addr,
        vec![monitor("tcp", MonitorKind::Tcp, 10, 1, 1)],
    );
    supervisor
        .set_services(vec![web(10), tcp.clone()])
        .await
        .unwrap();
    server.stop().await;
    assert!(!next_event(&mut events, "web").await.up);
    wait_until("tcp checks", || checks(&supervisor, "tcp", 0) >= 5).await;

    // The same set again: nothing restarts (the counters go on).
    let before = checks(&supervisor, "tcp", 0);
    supervisor
        .set_services(vec![web(10), tcp.clone()])
        .await
        .unwrap();
    assert!(checks(&supervisor, "tcp", 0) >= before);

    // web changes: restarted, still down, no event, its flap count kept; tcp untouched.
    let web_checks = checks(&supervisor, "web", 0);
    supervisor.set_services(vec![web(12), tcp]).await.unwrap();
    let after = supervisor.snapshot();
    assert!(
        !after["web"].up && after["web"].transitions == 1,
        "{:?}",
        after["web"]
    );
    assert!(
        after["web"].monitors[0].checks <= 1 && web_checks >= 1,
        "{:?}",
        after["web"]
    );
    assert!(after["tcp"].monitors[0].checks >= before);
    no_event(&mut events, "web", Duration::from_millis(100)).await;
    assert!(checks(&supervisor, "web", 0) >= 3);

    server.restart().await;
    let up = next_event(&mut events, "web").await;
    assert_eq!((up.up, up.transitions), (true, 2));
}

#[tokio::test]
async fn invalid_configurations_change_nothing() {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let supervisor = HealthSupervisor::new();
    let good = service("a", addr, vec![monitor("tcp", MonitorKind::Tcp, 10, 1, 1)]);
    supervisor.set_services(vec![good.clone()]).await.unwrap();

    let duplicate = supervisor
        .set_services(vec![good.clone(), good.clone()])
        .await;
    assert!(
        matches!(duplicate, Err(HealthError::DuplicateService(ref s)) if s == "a"),
        "{duplicate:?}"
    );
    let bad_path = service("b", addr, vec![monitor("web", http("health"), 10, 1, 1)]);
    match supervisor.set_services(vec![bad_path]).await {
        Err(HealthError::InvalidMonitor {
            service,
            monitor,
            reason,
        }) => {
            assert_eq!((service.as_str(), monitor.as_str()), ("b", "web"));
            assert!(reason.to_string().contains("path"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let mut zero = monitor("tcp", MonitorKind::Tcp, 10, 1, 1);
    zero.interval = Duration::ZERO;
    assert!(
        supervisor
            .set_services(vec![service("c", addr, vec![zero])])
            .await
            .is_err()
    );
    let bad_name = monitor(
        "dns",
        MonitorKind::Dns(DnsCheck::new("a..b", RecordType::A)),
        10,
        1,
        1,
    );
    assert!(
        supervisor
            .set_services(vec![service("d", addr, vec![bad_name])])
            .await
            .is_err()
    );

    // "a" kept running through all of it.
    let snapshot = supervisor.snapshot();
    assert_eq!(snapshot.keys().collect::<Vec<_>>(), ["a"]);
    let before = checks(&supervisor, "a", 0);
    wait_until("a still checked", || {
        checks(&supervisor, "a", 0) > before + 2
    })
    .await;
}

#[tokio::test]
async fn initial_state_and_services_without_monitors() {
    let server = HttpServer::start(Reply::Status(500, "down")).await;
    let supervisor = HealthSupervisor::new();
    let mut events = supervisor.subscribe();
    // Starting up: a dead target is withdrawn after `fall` checks.
    let assumed_up = service(
        "assumed",
        server.addr,
        vec![monitor("http", http("/"), 10, 3, 1)],
    );
    // Starting down: a live target is answered after `rise` checks.
    let mut starts_down = service(
        "cautious",
        "127.0.0.1:1".parse().unwrap(),
        vec![monitor("tcp", MonitorKind::Tcp, 10, 1, 2)],
    );
    let ok = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    starts_down.port = ok.local_addr().unwrap().port();
    starts_down.initial_up = false;
    // No monitors: always up, even with a threshold.
    let mut bare = ServiceMonitors::new("bare", LOCALHOST, 80);
    bare.threshold = 5;
    supervisor
        .set_services(vec![assumed_up, starts_down, bare])
        .await
        .unwrap();

    let initial = supervisor.snapshot();
    assert!(initial["assumed"].up && !initial["cautious"].up && initial["bare"].up);
    let mut got = HashMap::new();
    for _ in 0..2 {
        let event = timeout(WAIT, events.recv()).await.unwrap().unwrap();
        got.insert(event.service.clone(), event);
    }
    assert!(
        !got["assumed"].up && server.served(500) >= 3,
        "{:?}",
        got["assumed"]
    );
    assert!(
        got["cautious"].up && got["cautious"].reason.contains("2 in a row"),
        "{:?}",
        got["cautious"]
    );
    assert!(supervisor.snapshot()["bare"].up);
    assert!(supervisor.snapshot()["bare"].monitors.is_empty());
}

#[tokio::test]
async fn link_load_over_and_back_under_threshold() {
    // Counters in a directory laid out like /sys/class/net, written by the test.
    let root = std::env::temp_dir().join(format!("gslb-health-links-{}", std::process::id()));
    let stats = root.join("wan0/statistics");
    std::fs::create_dir_all(&stats).unwrap();
    let counter = stats.join("rx_bytes");
    std::fs::write(&counter, "0\n").unwrap();
    let spec = LinkSpec {
        link: "wan".into(),
        interface: "wan0".into(),
        interval: Duration::from_millis(20),
        threshold_bytes_per_sec: 1_000_000,
        over_after: 2,
        under_after: 2,
    };
    let missing = LinkSpec {
        link: "gone".into(),
        interface: "nope0".into(),
        ..spec.clone()
    };
    let monitor = LinkMonitor::spawn_with_root(vec![spec, missing], root.clone());
    let mut loads = monitor.loads();

    // ~10 MB/s: 100 kB every 10 ms.
    let writer = {
        let counter = counter.clone();
        tokio::spawn(async move {
            let mut total: u64 = 0;
            for _ in 0..(WAIT.as_millis() / 10) {
                total += 100_000;
                // Replaced whole, as the kernel's file is never seen half written.
                let next = counter.with_extension("next");
                std::fs::write(&next, format!("{total}\n")).unwrap();
                std::fs::rename(&next, &counter).unwrap();
                sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let over = timeout(
        WAIT,
        loads.wait_for(|l| l.get("wan").is_some_and(|l| l.over)),
    )
    .await
    .unwrap()
    .unwrap()
    .clone();
    let wan = &over["wan"];
    assert!(
        wan.rx_bytes_per_sec.unwrap() > 1_000_000 && wan.transitions == 1 && wan.error.is_none(),
        "{wan:?}"
    );
    assert!(
        over["gone"]
            .error
            .as_ref()
            .unwrap()
            .contains("No such file"),
        "{:?}",
        over["gone"]
    );
    assert!(!over["gone"].over && over["gone"].rx_bytes_per_sec.is_none());

    // Traffic stops: back under after two quiet samples.
    writer.abort();
    let _ = writer.await;
    let under = timeout(
        WAIT,
        loads.wait_for(|l| l.get("wan").is_some_and(|l| !l.over)),
    )
    .await
    .unwrap()
    .unwrap()
    .clone();
    assert_eq!(
        (under["wan"].rx_bytes_per_sec, under["wan"].transitions),
        (Some(0), 2),
        "{:?}",
        under["wan"]
    );
    drop(monitor);
    std::fs::remove_dir_all(&root).unwrap();
}

#[tokio::test]
async fn link_counter_of_the_real_loopback() {
    let root = std::path::Path::new(SYS_CLASS_NET);
    let before = match rx_bytes(root, "lo") {
        Ok(value) => value,
        Err(error) => {
            println!("skipped: {error}");
            return;
        }
    };
    // 64 datagrams of 1000 bytes through lo.
    let receiver = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let sender = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    for _ in 0..64 {
        sender
            .send_to(&[0u8; 1000], receiver.local_addr().unwrap())
            .await
            .unwrap();
    }
    let after = rx_bytes(root, "lo").unwrap();
    assert!(after >= before + 64_000, "{before} → {after}");
}
