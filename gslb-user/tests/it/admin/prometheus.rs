//! The real-Prometheus test: a Prometheus server (Debian package `prometheus`) on 127.0.0.1
//! scrapes the admin endpoint every second; its HTTP API finds the expected series and values
//! after known events (a burst of queries to the responder and, with root, through the fast
//! path; a service flip; a reload; a refused reload), and data for every query of the Grafana
//! dashboard
//! (contrib/grafana/gslb.json). Prometheus is killed when the test ends, also when it fails.

use crate::common;

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use common::{WAIT, answer_becomes};
use gslb_tests::TempDir;
use gslb_user::daemon::Overrides;
use hickory_proto::{op::ResponseCode, rr::RecordType};

use super::{ask, backends, config, http, missing_tool, start, tool};
/// A Prometheus server on 127.0.0.1 scraping `target` every second, with its data in `dir`;
/// killed when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Prometheus {
    fn start(binary: &Path, dir: &Path, target: SocketAddr) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: gslb\n    scrape_interval: 1s\n    \
                 scrape_timeout: 900ms\n    static_configs:\n      - targets: [\"{target}\"]\n"
            ),
        )
        .unwrap();
        // Prometheus binds the port it is given itself (it cannot take port 0 and say which it
        // got): a port free a moment ago, picked again if another process took it meanwhile.
        let mut attempt = 0;
        common::start_on_picked_port("127.0.0.1", "prometheus", |port| {
            attempt += 1;
            let addr: SocketAddr = ([127, 0, 0, 1], port).into();
            let log = dir.join(format!("prometheus-{attempt}.log"));
            let child = Command::new(binary)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.join("data").display()
                ))
                .arg(format!("--web.listen-address={addr}"))
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .expect("prometheus starts");
            let mut prometheus = Prometheus { child, addr, log };
            let deadline = Instant::now() + WAIT;
            loop {
                if let Ok(Some(status)) = prometheus.child.try_wait() {
                    let said = prometheus.log_text();
                    assert!(
                        said.contains("address already in use"),
                        "prometheus exited with {status}: {said}"
                    );
                    return Err(common::PortTaken(said));
                }
                // Ready once its storage is open and its API answers (503 before).
                if let Ok(mut stream) = std::net::TcpStream::connect(addr) {
                    use std::io::{Read as _, Write as _};
                    let mut reply = String::new();
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                    let asked = stream.write_all(
                        b"GET /-/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                    );
                    if asked.is_ok()
                        && stream.read_to_string(&mut reply).is_ok()
                        && reply.starts_with("HTTP/1.1 200")
                    {
                        return Ok(prometheus);
                    }
                }
                assert!(
                    Instant::now() < deadline,
                    "prometheus not listening on {addr}: {}",
                    prometheus.log_text()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The instant vector of `query`: each series' labels and value.
    async fn query(&self, query: &str) -> Vec<(BTreeMap<String, String>, f64)> {
        let target = format!("/api/v1/query?query={}", percent_encode(query));
        let (status, body) = http(self.addr, "GET", &target).await;
        assert_eq!(status, 200, "{query}: {body}");
        let reply: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(reply["status"], "success", "{query}: {body}");
        let data = &reply["data"];
        let as_value = |v: &serde_json::Value| -> f64 {
            v[1].as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or(f64::NAN)
        };
        match data["resultType"].as_str() {
            Some("scalar") => vec![(BTreeMap::new(), as_value(&data["result"]))],
            _ => data["result"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    let labels = s["metric"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                        .collect();
                    (labels, as_value(&s["value"]))
                })
                .collect(),
        }
    }

    /// Polls `query` until its one series' value satisfies `want`, or panics after [`WAIT`].
    async fn until(&self, query: &str, want: impl Fn(f64) -> bool) -> f64 {
        let deadline = Instant::now() + WAIT;
        loop {
            let got = self.query(query).await;
            if let [(_, value)] = got.as_slice()
                && want(*value)
            {
                return *value;
            }
            assert!(
                Instant::now() < deadline,
                "{query}: still {got:?} after {WAIT:?}; prometheus log:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `s` with every byte but unreserved ones percent-encoded (RFC 3986), for a query string.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Every panel's `targets[].expr` in the dashboard (rows' nested panels included).
fn dashboard_exprs() -> Vec<(String, String)> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib/grafana/gslb.json");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("the dashboard parses");
    fn walk(panels: &serde_json::Value, out: &mut Vec<(String, String)>) {
        for panel in panels.as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or("?").to_owned();
            for target in panel["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = target["expr"].as_str() {
                    out.push((title.clone(), expr.to_owned()));
                }
            }
            walk(&panel["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    assert!(!out.is_empty(), "no panel queries in {}", file.display());
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_the_events_and_the_dashboard_has_data() {
    let Some(binary) = tool("prometheus") else {
        missing_tool("prometheus");
        return;
    };
    let dir = TempDir::new("admin-prometheus");
    let path = dir.0.join("gslb.toml");
    let (dns, listeners) = common::bound_dns();
    let (a, b) = backends().await;
    std::fs::write(&path, config(dns, a.port(), b.port(), "203.0.113.99")).unwrap();
    // With root the fast path is loaded too (not attached: no interface), so that its series
    // exist; without, the XDP panels are not checked (said below).
    struct Pins(PathBuf);
    impl Drop for Pins {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let pins = Pins(format!("/sys/fs/bpf/gslb-test-admin-{}", std::process::id()).into());
    let xdp = common::privileged();
    let overrides = Overrides {
        no_xdp: !xdp,
        pin_path: xdp.then(|| pins.0.clone()),
        ..Overrides::default()
    };
    let (gslbd, admin) = start(&path, overrides, listeners).await;
    answer_becomes(dns, &["198.51.100.1", "198.51.100.2"]).await;
    let prometheus = Prometheus::start(&binary, &dir.0, admin);
    prometheus.until("gslb_ready", |v| v == 1.0).await;
    prometheus.until("up{job=\"gslb\"}", |v| v == 1.0).await;

    // A burst of N queries: the counter Prometheus holds rises by exactly N.
    const N: usize = 40;
    let noerror = "gslb_responder_answers_total{transport=\"udp\",rcode=\"NOERROR\"}";
    let before = prometheus.until(noerror, |v| v >= 1.0).await;
    for _ in 0..N {
        assert_eq!(ask(dns, "www.example.com.").await, ResponseCode::NoError);
    }
    prometheus.until(noerror, |v| v == before + N as f64).await;
    // And N answered by the fast path (its pinned maps, run by BPF_PROG_TEST_RUN): its hit
    // counter, summed over CPUs, rises by N.
    if xdp {
        let hit = "gslb_xdp_hits_total{counter=\"hit_a_v4\"}";
        let before = prometheus.until(hit, |_| true).await;
        let pins = pins.0.clone();
        tokio::task::spawn_blocking(move || fast_path_queries(&pins, dns, N))
            .await
            .unwrap();
        prometheus.until(hit, |v| v == before + N as f64).await;
    }

    // The flip: a's backend stops.
    prometheus
        .until("gslb_service_up{service=\"a\"}", |v| v == 1.0)
        .await;
    drop(a);
    answer_becomes(dns, &["198.51.100.2"]).await;
    prometheus
        .until("gslb_service_up{service=\"a\"}", |v| v == 0.0)
        .await;
    prometheus
        .until("gslb_republishes_total{trigger=\"health\"}", |v| v >= 1.0)
        .await;

    // A reload, then one refused.
    prometheus
        .until("gslb_config_generation", |v| v == 1.0)
        .await;
    std::fs::write(&path, config(dns, 1, b.port(), "203.0.113.98")).unwrap();
    gslbd.reload().await.unwrap();
    std::fs::write(&path, "[server]\nlisten = [\n").unwrap();
    gslbd.reload().await.unwrap_err();
    prometheus
        .until("gslb_config_generation", |v| v == 2.0)
        .await;
    prometheus
        .until("gslb_config_reloads_refused_total", |v| v == 1.0)
        .await;
    prometheus
        .until("gslb_republishes_total{trigger=\"reload\"}", |v| v == 1.0)
        .await;
    prometheus
        .until("gslb_republish_duration_seconds_count", |v| v >= 3.0)
        .await;

    // Every panel of the dashboard has data (rates need two scrapes in their window: the
    // waits above took several).
    let mut empty = Vec::new();
    for (title, expr) in dashboard_exprs() {
        if !xdp && expr.contains("gslb_xdp_") {
            eprintln!("admin: panel {title:?} not checked: no fast path without root ({expr})");
            continue;
        }
        let deadline = Instant::now() + WAIT;
        while prometheus.query(&expr).await.is_empty() {
            if Instant::now() >= deadline {
                empty.push(format!("{title}: {expr}"));
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    assert!(
        empty.is_empty(),
        "panels without data:\n{}",
        empty.join("\n")
    );
    drop(prometheus);
    drop(b);
    gslbd.stop().await;
}

/// `n` queries for www.example.com A to 127.0.0.1:`port`, run through the fast path of the
/// maps pinned at `pins` (adopted by a second program instance, BPF_PROG_TEST_RUN), each
/// answered there.
fn fast_path_queries(pins: &Path, port: u16, n: usize) {
    let dp = gslb_user::dataplane::Dataplane::load(Some(pins)).expect("adopting the pins");
    let query = common::wire(&common::query(7, "www.example.com.", RecordType::A));
    let frame = common::Frame {
        dst_port: port,
        ..common::Frame::query_to(std::net::Ipv4Addr::LOCALHOST.into(), query)
    };
    for _ in 0..n {
        let out = common::run(&dp, &frame.bytes());
        assert_eq!(out.action, common::XDP_TX, "the fast path answers");
    }
}
