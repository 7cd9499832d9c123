//! The admin endpoint (`[admin] listen`) of a gslbd run in this process: `/metrics` is a
//! Prometheus exposition `promtool check metrics` accepts, whose values follow known events;
//! `/status` is the same as JSON; `/healthz`, `/readyz`, 404 and 405. Then a real Prometheus
//! (Debian package `prometheus`) scrapes it every second, and its HTTP API finds the expected
//! series and values after a service flip, a reload, a refused reload and a burst of queries,
//! and data for every query of the Grafana dashboard (contrib/grafana/gslb.json).
//!
//! promtool and prometheus are looked up in PATH's usual places; without them a test says why
//! and skips, unless GSLB_REQUIRE_TOOLS=1 or CI=true (or GSLB_REQUIRE_PRIVILEGED=1, as
//! `gslb_tests::skip` does), where it fails. Prometheus is killed when the test ends, also when
//! it fails. Every wait is bounded by [`WAIT`].

use crate::common;

use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use common::{Gslbd, WAIT, answer_becomes, ask_loopback};
use gslb_tests::TempDir;
use gslb_user::daemon::Overrides;
use hickory_proto::{op::ResponseCode, rr::RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// www.example.com over services "a" and "b", each with a TCP monitor on a loopback port (50 ms
/// interval), and the admin endpoint on 127.0.0.1 (any port: the test binds it). `backup` is
/// the domain's backup address (a reload changes it).
fn config(dns_port: u16, backend_a: u16, backend_b: u16, backup: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1"]
dns_port = {dns_port}

[admin]
listen = "127.0.0.1:0"

[[zone]]
name = "example.com"
ns = ["ns1.example.com"]
  [zone.soa]
  rname = "hostmaster.example.com"
  [[zone.record]]
  name = "ns1"
  type = "A"
  value = "127.0.0.1"

[[monitor]]
name = "tcp"
type = "tcp"
interval_ms = 50
timeout_ms = 200
fall = 2
rise = 1

[[site]]
name = "dc"
ip = "192.0.2.1"

[[service]]
name = "a"
ip = "127.0.0.1"
port = {backend_a}
public_ip = "198.51.100.1"
site = "dc"
weight = 3
monitors = ["tcp"]

[[service]]
name = "b"
ip = "127.0.0.1"
port = {backend_b}
public_ip = "198.51.100.2"
site = "dc"
monitors = ["tcp"]

[[gslb_domain]]
name = "www.example.com"
answer = "all"
services = ["a", "b"]
backup_ip = ["{backup}"]
"#
    )
}

/// A gslbd on `path` with `overrides`, on `listeners` (its DNS sockets, [`common::bound_dns`])
/// and an admin listener bound here on 127.0.0.1; and the admin address.
async fn start(
    path: &Path,
    overrides: Overrides,
    mut listeners: gslb_user::daemon::Listeners,
) -> (Gslbd, SocketAddr) {
    let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    admin.set_nonblocking(true).unwrap();
    let addr = admin.local_addr().unwrap();
    listeners.admin = Some(admin);
    (
        Gslbd::start_on(path, overrides, listeners, WAIT).await,
        addr,
    )
}

/// A service's backend on 127.0.0.1: accepts the monitor's connections (and closes them)
/// until dropped, when its port closes.
struct Backend {
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Backend {
    async fn start() -> Backend {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            // Accepted at once: a backlog of connections never accepted would fill up and
            // take the service down.
            while listener.accept().await.is_ok() {}
        });
        Backend { port, task }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The two backends (the services' monitors connect to them).
async fn backends() -> (Backend, Backend) {
    (Backend::start().await, Backend::start().await)
}

fn port(backend: &Backend) -> u16 {
    backend.port
}

/// One HTTP/1.1 request (`Connection: close`); the status code and the body.
async fn http(addr: SocketAddr, method: &str, target: &str) -> (u16, String) {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        let request =
            format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut reply = Vec::new();
        stream.read_to_end(&mut reply).await?;
        Ok::<_, std::io::Error>(reply)
    };
    let reply = tokio::time::timeout(WAIT, exchange)
        .await
        .unwrap_or_else(|_| panic!("{method} {target}: no reply in time"))
        .unwrap_or_else(|e| panic!("{method} {target}: {e}"));
    let reply = String::from_utf8(reply).expect("a text reply");
    let (head, body) = reply.split_once("\r\n\r\n").expect("a header and a body");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {head}"));
    (status, body.to_owned())
}

async fn get(addr: SocketAddr, target: &str) -> String {
    let (status, body) = http(addr, "GET", target).await;
    assert_eq!(status, 200, "GET {target}: {body}");
    body
}

/// A parsed exposition: samples by `name{labels}` (labels as written), and each family's TYPE.
#[derive(Debug, Default)]
struct Exposition {
    samples: BTreeMap<String, f64>,
    types: BTreeMap<String, String>,
}

/// Parses `text` as the text format, checking what the exposition promises: every family has
/// HELP then TYPE before its samples, every name starts with `gslb_`, every value is a number.
fn parse_exposition(text: &str) -> Exposition {
    let mut out = Exposition::default();
    let mut helped = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(name.starts_with("gslb_"), "{line}");
            helped.insert(name.to_owned());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(helped.contains(name), "TYPE before HELP: {line}");
            out.types.insert(name.to_owned(), kind.to_owned());
        } else {
            let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
            let name = series.split('{').next().unwrap();
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .filter(|f| out.types.get(*f).is_some_and(|t| t == "histogram"))
                .unwrap_or(name);
            assert!(
                out.types.contains_key(family),
                "sample without HELP and TYPE: {line}"
            );
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("value: {line}"));
            out.samples.insert(series.to_owned(), value);
        }
    }
    out
}

/// Where a tool is installed, if it is.
fn tool(name: &str) -> Option<PathBuf> {
    ["/usr/bin", "/usr/local/bin", "/usr/sbin"]
        .into_iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.exists())
}

/// A test that needs `name`, which is missing: fails where the tools are required (CI,
/// `cargo xtask test`), else says why and skips.
fn missing_tool(name: &str) {
    let reason = format!(
        "admin: {name} is not installed (Debian package prometheus; cargo xtask setup installs it)"
    );
    let required = std::env::var("GSLB_REQUIRE_TOOLS").as_deref() == Ok("1")
        || std::env::var("CI").as_deref() == Ok("true");
    assert!(!required, "{reason} (GSLB_REQUIRE_TOOLS=1 or CI=true)");
    gslb_tests::skip(&reason);
}

/// `promtool check metrics` on `text`: its complaints, if any.
fn promtool_check(promtool: &Path, text: &str) -> Result<(), String> {
    use std::io::Write as _;
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Lint findings are printed, with a failing status, even for a valid exposition.
    if out.status.success() && said.trim().is_empty() {
        Ok(())
    } else {
        Err(said)
    }
}

/// A UDP query to the gslbd on `port`, off the runtime's threads; the reply's RCODE.
async fn ask(port: u16, name: &'static str) -> ResponseCode {
    tokio::task::spawn_blocking(move || ask_loopback(port, name, RecordType::A).response_code())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_status_and_probes_follow_the_daemon() {
    let dir = TempDir::new("admin");
    let path = dir.0.join("gslb.toml");
    let (dns, listeners) = common::bound_dns();
    let (a, b) = backends().await;
    std::fs::write(&path, config(dns, port(&a), port(&b), "203.0.113.99")).unwrap();
    let overrides = Overrides {
        no_xdp: true,
        ..Overrides::default()
    };
    let (gslbd, admin) = start(&path, overrides, listeners).await;
    answer_becomes(dns, &["198.51.100.1", "198.51.100.2"]).await;

    assert_eq!(http(admin, "GET", "/healthz").await.0, 200);
    // Started (Gslbd::start_on waits for that): ready.
    assert_eq!(http(admin, "GET", "/readyz").await, (200, "ready\n".into()));
    assert_eq!(http(admin, "GET", "/nope").await.0, 404);
    assert_eq!(http(admin, "POST", "/metrics").await.0, 405);

    // Known queries: answer_becomes asked www until it had both; then 5 more and 2 outside
    // every zone (REFUSED) and 1 NXDOMAIN.
    let before = parse_exposition(&get(admin, "/metrics").await);
    let noerror = "gslb_responder_answers_total{transport=\"udp\",rcode=\"NOERROR\"}";
    let asked_before = before.samples[noerror];
    for _ in 0..5 {
        assert_eq!(ask(dns, "www.example.com.").await, ResponseCode::NoError);
    }
    for _ in 0..2 {
        assert_eq!(ask(dns, "www.example.org.").await, ResponseCode::Refused);
    }
    assert_eq!(ask(dns, "nope.example.com.").await, ResponseCode::NXDomain);

    let text = get(admin, "/metrics").await;
    let m = parse_exposition(&text);
    assert_eq!(m.samples[noerror], asked_before + 5.0);
    assert_eq!(
        m.samples["gslb_responder_answers_total{transport=\"udp\",rcode=\"REFUSED\"}"],
        2.0
    );
    assert_eq!(
        m.samples["gslb_responder_answers_total{transport=\"udp\",rcode=\"NXDOMAIN\"}"],
        1.0
    );
    assert_eq!(m.samples["gslb_ready"], 1.0);
    assert_eq!(m.samples["gslb_config_generation"], 1.0);
    assert_eq!(m.samples["gslb_service_up{service=\"a\",site=\"dc\"}"], 1.0);
    assert_eq!(
        m.samples["gslb_service_weight{service=\"a\",site=\"dc\"}"],
        3.0
    );
    assert_eq!(m.types["gslb_republish_duration_seconds"], "histogram");
    // No fast path here: no XDP series.
    assert!(!text.contains("gslb_xdp_"), "{text}");

    match tool("promtool") {
        Some(promtool) => {
            if let Err(said) = promtool_check(&promtool, &text) {
                panic!("promtool check metrics:\n{said}\non:\n{text}");
            }
        }
        None => missing_tool("promtool"),
    }

    // The flip: a's backend stops; a leaves the answers, and the metrics and status say so.
    drop(a);
    answer_becomes(dns, &["198.51.100.2"]).await;
    let m = parse_exposition(&get(admin, "/metrics").await);
    assert_eq!(m.samples["gslb_service_up{service=\"a\",site=\"dc\"}"], 0.0);
    assert!(m.samples["gslb_republishes_total{trigger=\"health\"}"] >= 1.0);
    let status: serde_json::Value = serde_json::from_str(&get(admin, "/status").await).unwrap();
    let services = status["services"].as_array().unwrap();
    let up: BTreeMap<&str, bool> = services
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["up"].as_bool().unwrap()))
        .collect();
    assert_eq!(up, BTreeMap::from([("a", false), ("b", true)]));
    assert_eq!(status["config"]["generation"], 1);
    assert_eq!(status["ready"], true);

    // A reload puts generation 2 in force; one that changes [admin] is refused.
    std::fs::write(&path, config(dns, 1, port(&b), "203.0.113.98")).unwrap();
    gslbd.reload().await.unwrap();
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("127.0.0.1:0", "127.0.0.1:1");
    std::fs::write(&path, text).unwrap();
    let refused = gslbd.reload().await.unwrap_err();
    assert!(refused.contains("[admin]"), "{refused}");
    let m = parse_exposition(&get(admin, "/metrics").await);
    assert_eq!(m.samples["gslb_config_generation"], 2.0);
    assert_eq!(m.samples["gslb_config_reloads_refused_total"], 1.0);
    assert_eq!(m.samples["gslb_republishes_total{trigger=\"reload\"}"], 1.0);

    // The endpoint's task killed: the supervisor restarts it on the same listener (kept
    // open: a request meanwhile waits in its backlog), and the metrics count the restart.
    let task = format!("admin/{admin}");
    assert_eq!(
        gslb_user::supervise::inject_panic(&task, 1),
        1,
        "{task} runs"
    );
    let restarts = format!("gslb_task_restarts_total{{task=\"{task}\"}}");
    common::until("the admin endpoint restarted", async || {
        let m = parse_exposition(&get(admin, "/metrics").await);
        m.samples.get(&restarts) == Some(&1.0)
    })
    .await;
    drop(b);
    gslbd.stop().await;
}

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
        // Prometheus reports the address it was given, not the port it got: a port free a
        // moment ago, tried again if another process took it meanwhile.
        let mut last = String::new();
        for attempt in 0..3 {
            let addr: SocketAddr = ([127, 0, 0, 1], common::free_port()).into();
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
                    last = format!("exited with {status}: {}", prometheus.log_text());
                    break;
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
                        return prometheus;
                    }
                }
                assert!(
                    Instant::now() < deadline,
                    "prometheus not listening on {addr}: {}",
                    prometheus.log_text()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!("prometheus did not start: {last}");
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
    std::fs::write(&path, config(dns, port(&a), port(&b), "203.0.113.99")).unwrap();
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
    std::fs::write(&path, config(dns, 1, port(&b), "203.0.113.98")).unwrap();
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

/// Every section of the exposition (fast path, MEP, RTT, unknown loads, a task restarted,
/// label values that need escaping), as `render` writes it, passes `promtool check metrics`
/// and the format's rules: the sections a small daemon does not have are checked here.
#[test]
fn every_section_of_the_exposition_is_valid() {
    use gslb_user::admin::{metrics, status::*};
    let status = Status {
        ready: true,
        config: ConfigStatus {
            generation: 3,
            reloads_refused: 1,
            reloads_failed: 0,
        },
        republish: RepublishStatus {
            trigger_events: 9,
            by_trigger: [("health", 2), ("reload", 1)].into(),
            duration: Histogram {
                buckets: vec![(0.001, 1), (0.01, 3)],
                count: 3,
                sum: 0.012,
            },
        },
        responder: ResponderStatus {
            answers: vec![Answers {
                transport: "tcp",
                rcode: "NOERROR",
                count: 4,
            }],
            rrl_sent: 5,
            rrl_dropped: 2,
            rrl_slipped: 1,
        },
        xdp: Some(XdpStatus {
            hits: [("hit_a_v4", 10)].into(),
            passes: [("qtype", 3), ("stale", 0)].into(),
            rrl_dropped: 0,
            rrl_slipped: 0,
        }),
        services: vec![ServiceStatus {
            name: "web \"1\"\\".into(),
            site: "dc".into(),
            up: true,
            weight: 1,
            connections: None,
            bandwidth_kbps: Some(u64::MAX),
        }],
        mep: Some(MepStatus {
            links: vec![MepLink {
                peer: "dc2".into(),
                up: false,
                version: None,
                last_error: Some("refused\nagain".into()),
            }],
            sites: vec![MepSite {
                name: "dc2".into(),
                reachable: false,
            }],
            adopted: [("child".to_owned(), "dc3".to_owned())].into(),
        }),
        rtt: Some(RttStatus {
            ldns_entries: 7,
            rtt_rows: 6,
            probes_sent: 20,
            probe_rounds: 10,
            probe_samples: 8,
        }),
        tasks: [(
            "dns-udp/127.0.0.1:53/0".to_owned(),
            TaskStatus {
                running: 1,
                panics: 1,
                errors: 0,
                restarts: 1,
            },
        )]
        .into(),
    };
    let text = metrics::render(&status);
    let m = parse_exposition(&text);
    assert!(
        m.samples["gslb_service_connections{service=\"web \\\"1\\\"\\\\\",site=\"dc\"}"].is_nan()
    );
    assert_eq!(m.samples["gslb_mep_link_up{peer=\"dc2\"}"], 0.0);
    assert_eq!(m.samples["gslb_rtt_rows"], 6.0);
    assert_eq!(m.samples["gslb_xdp_hits_total{counter=\"hit_a_v4\"}"], 10.0);
    assert_eq!(
        m.samples["gslb_republish_duration_seconds_bucket{le=\"+Inf\"}"],
        3.0
    );
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["mep"]["links"][0]["last_error"], "refused\nagain");
    match tool("promtool") {
        Some(promtool) => {
            if let Err(said) = promtool_check(&promtool, &text) {
                panic!("promtool check metrics:\n{said}\non:\n{text}");
            }
        }
        None => missing_tool("promtool"),
    }
}

/// A client that connects and sends half a request is closed once the header timeout passes,
/// and does not hold up another client meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_client_is_closed_and_others_are_served() {
    use gslb_user::{
        admin::{self, AdminState, status::WorldFeed},
        compile::Snapshot,
        config::Config,
        responder::Responder,
    };
    let config = Config::parse(
        "[server]\nlisten = [\"127.0.0.1\"]\n",
        Path::new("admin.toml"),
    )
    .unwrap();
    let responder = std::sync::Arc::new(Responder::new(&config, &Snapshot::from_config(&config)));
    let state = std::sync::Arc::new(AdminState::new(
        std::sync::Arc::default(),
        responder,
        None,
        WorldFeed::default().subscribe(),
        tokio::sync::watch::channel(None).1,
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(admin::run(listener, state, async {
        let _ = stopped.await;
    }));

    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    silent
        .write_all(b"GET /metrics HTTP/1.1\r\nHo")
        .await
        .unwrap();
    assert_eq!(http(addr, "GET", "/healthz").await.0, 200);
    let started = Instant::now();
    let mut rest = Vec::new();
    // Closed by the server (the read ends), within the header timeout (5 s) and some slack.
    tokio::time::timeout(Duration::from_secs(10), silent.read_to_end(&mut rest))
        .await
        .expect("the silent connection is closed")
        .ok();
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );

    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, server)
        .await
        .expect("the endpoint stops")
        .unwrap()
        .unwrap();
}
