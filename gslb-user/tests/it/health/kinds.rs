//! Each kind of monitor against a real server on loopback: TCP, HTTP (status, body, a
//! hanging target, a server stopped and started again), HTTPS with a self-signed certificate,
//! DNS, ICMP.

use std::{
    net::{Ipv4Addr, Ipv6Addr},
    sync::{Arc, atomic::Ordering},
    time::{Duration, Instant},
};

use gslb_user::health::{
    CheckError, DnsCheck, HealthSupervisor, HttpCheck, IcmpMode, MonitorKind, ServiceMonitors,
    TlsCheck, check_once, icmp_mode,
};
use hickory_proto::{op::ResponseCode, rr::RecordType};
use tokio::net::{TcpListener, UdpSocket};
use tokio_rustls::{
    TlsAcceptor,
    rustls::{
        ServerConfig,
        pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer},
    },
};

use super::{
    DnsServer, HttpServer, LOCALHOST, Reply, checks, http, monitor, next_event, service, wait_until,
};

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
