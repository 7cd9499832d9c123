//! Load monitors against a small HTTP server on the loopback serving fixed texts: a Prometheus
//! exposition page as exporters write it (HELP/TYPE, escapes, +Inf/NaN, timestamps, series
//! sharing a prefix) and an nginx stub_status page; then a [`LoadMonitor`] following a changing
//! value, aging it out when the server goes, and taking it back.
//!
//! Every wait is bounded by [`WAIT`].

use crate::common;

use std::{
    net::{IpAddr, SocketAddr},
    time::{Duration, Instant},
};

use common::metrics::MetricsServer;
use gslb_user::health::load::{
    Aggregate, LoadMonitor, LoadMonitorSpec, LoadReadings, LoadSource, Measure, PromSelector,
    ServiceLoadMonitors, read_once,
};

const WAIT: Duration = Duration::from_secs(10);

const PAGE: &str = r#"# HELP http_connections Open client connections.
# TYPE http_connections gauge
http_connections{listener="public",path="C:\\www\\\"main\"\n"} 41 1712345678901
http_connections{listener="admin"} 2
http_connections_total{listener="public"} 99999
# HELP idle Idle ratio.
# TYPE idle gauge
idle NaN
# TYPE rx_kbps gauge
rx_kbps{iface="eth0"} +Inf
rx_kbps{iface="eth1"} 1.2e3
# TYPE accepted counter
accepted 12
"#;

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn prometheus(metric: &str, labels: &[(&str, &str)], aggregate: Aggregate) -> LoadMonitorSpec {
    let mut spec = LoadMonitorSpec::new(
        "prom",
        LoadSource::Prometheus(PromSelector {
            metric: metric.into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            aggregate,
        }),
        "/metrics",
    );
    spec.timeout = Duration::from_secs(2);
    spec
}

#[tokio::test]
async fn a_prometheus_page_gives_the_sample_the_labels_pick() {
    let server = MetricsServer::start(localhost(), PAGE).await;
    let (ip, port) = (server.addr.ip(), server.addr.port());
    let one = Aggregate::One;
    let table: [(LoadMonitorSpec, Result<u64, &str>); 8] = [
        // The escaped label value is decoded before it is compared.
        (
            prometheus("http_connections", &[("path", "C:\\www\\\"main\"\n")], one),
            Ok(41),
        ),
        (
            prometheus("http_connections", &[("listener", "admin")], one),
            Ok(2),
        ),
        (
            prometheus("http_connections", &[], one),
            Err("2 samples of http_connections (lines 3, 4)"),
        ),
        (prometheus("http_connections", &[], Aggregate::Sum), Ok(43)),
        (prometheus("rx_kbps", &[("iface", "eth1")], one), Ok(1200)),
        (
            prometheus("rx_kbps", &[("iface", "eth0")], one),
            Err("the value is inf"),
        ),
        (prometheus("idle", &[], one), Err("the value is NaN")),
        (
            prometheus("accepted", &[], one),
            Err("accepted is a counter"),
        ),
    ];
    for (spec, want) in table {
        let got = read_once(ip, port, &spec).await.map_err(|e| e.to_string());
        match (&got, want) {
            (Ok(v), Ok(w)) => assert_eq!(*v, w, "{spec:?}"),
            (Err(e), Err(w)) => assert!(e.contains(w), "{spec:?}: {e}"),
            _ => panic!("{spec:?}: {got:?}, want {want:?}"),
        }
    }
    // A malformed page is an error naming its line, whatever the sample wanted.
    server.set("http_connections{listener=\"admin\"} 2\nbroken{ 1\n");
    let err = read_once(ip, port, &prometheus("http_connections", &[], one))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 2:"), "{err}");
    // stub_status through the same client.
    server.set("Active connections: 7 \nserver accepts handled requests\n 10 10 20 \nReading: 0 Writing: 1 Waiting: 6 \n");
    let stub = LoadMonitorSpec::new("nginx", LoadSource::StubStatus, "/status");
    assert_eq!(read_once(ip, port, &stub).await.unwrap(), 7);
    // A page that is not one.
    server.set("<html>It works!</html>\n");
    let err = read_once(ip, port, &stub).await.unwrap_err().to_string();
    assert!(err.contains("not an nginx stub_status page"), "{err}");
    assert!(server.requests() >= 11);
}

/// The reading of service "web", waited for until `want` holds.
async fn reading_becomes(
    rx: &mut tokio::sync::watch::Receiver<LoadReadings>,
    what: &str,
    want: impl Fn(Option<Option<u64>>) -> bool,
) {
    let deadline = Instant::now() + WAIT;
    loop {
        if want(rx.borrow_and_update().value("web", Measure::Connections)) {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let changed = tokio::time::timeout(left, rx.changed()).await;
        assert!(
            changed.is_ok(),
            "{what}: the reading stayed {:?}",
            rx.borrow().0
        );
    }
}

#[tokio::test]
async fn a_monitor_follows_the_value_ages_it_out_and_takes_it_back() {
    let server = MetricsServer::start(localhost(), "conns 3\n").await;
    let addr = server.addr;
    let mut spec = prometheus("conns", &[], Aggregate::One);
    spec.interval = Duration::from_millis(50);
    spec.timeout = Duration::from_millis(500);
    spec.unknown_after = 3;
    let service = ServiceLoadMonitors {
        service: "web".into(),
        target: addr.ip(),
        port: addr.port(),
        monitors: vec![spec.clone()],
    };
    let mut monitor = LoadMonitor::new();
    monitor
        .set_services(std::slice::from_ref(&service))
        .unwrap();
    let mut rx = monitor.readings();
    monitor.first_readings(WAIT).await;
    reading_becomes(&mut rx, "first reading", |v| v == Some(Some(3))).await;
    server.set("conns 8\n");
    reading_becomes(&mut rx, "new value", |v| v == Some(Some(8))).await;

    // The server goes: the last value stays for two failed checks, then it is unknown.
    drop(server);
    reading_becomes(&mut rx, "aged out", |v| v == Some(None)).await;
    let stats = rx.borrow().clone();
    let r = &stats.0[&("web".to_owned(), "prom".to_owned())];
    assert!(r.failures >= 3 && r.aged_out == 1, "{r:?}");
    assert!(
        r.last_error
            .as_deref()
            .is_some_and(|e| e.contains("connect")),
        "{r:?}"
    );
    let lines = stats.stats_lines();
    assert!(
        lines.contains("load_aged_out 1\n") && lines.contains("load_unknown 1\n"),
        "{lines}"
    );

    // Back on the same address.
    let server = MetricsServer::start(addr, "conns 5\n").await;
    reading_becomes(&mut rx, "known again", |v| v == Some(Some(5))).await;

    // A reload that keeps the spec keeps the reading; one that changes it starts unknown.
    monitor
        .set_services(std::slice::from_ref(&service))
        .unwrap();
    assert_eq!(
        rx.borrow().value("web", Measure::Connections),
        Some(Some(5))
    );
    let mut changed = service.clone();
    changed.monitors[0].unknown_after = 5;
    monitor.set_services(&[changed]).unwrap();
    assert_eq!(rx.borrow().value("web", Measure::Connections), Some(None));
    reading_becomes(&mut rx, "restarted", |v| v == Some(Some(5))).await;
    // Removed: the reading leaves at once.
    monitor.set_services(&[]).unwrap();
    assert_eq!(rx.borrow().value("web", Measure::Connections), None);
    drop(server);
}

#[tokio::test]
async fn a_monitor_that_cannot_be_built_changes_nothing() {
    let mut monitor = LoadMonitor::new();
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let mut bad = LoadMonitorSpec::new("nginx", LoadSource::StubStatus, "/status");
    bad.host = Some("a\nb".into());
    let service = ServiceLoadMonitors {
        service: "web".into(),
        target: ip,
        port: 80,
        monitors: vec![bad],
    };
    let err = monitor.set_services(&[service]).unwrap_err().to_string();
    assert!(err.contains("not a header value"), "{err}");
    assert!(monitor.readings().borrow().0.is_empty());
}
