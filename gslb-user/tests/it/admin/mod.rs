//! The admin endpoint (`[admin] listen`) of a gslbd run in this process: `/metrics` is a
//! Prometheus exposition `promtool check metrics` accepts, whose values follow known events;
//! `/status` is the same as JSON; `/healthz`, `/readyz`, 404 and 405; a killed endpoint task
//! comes back. `prometheus` has the real-Prometheus test; `slots` the limits on connections.
//!
//! promtool and prometheus are looked up in the usual places; without them a test says why
//! and skips, unless GSLB_REQUIRE_TOOLS=1 or CI=true (or GSLB_REQUIRE_PRIVILEGED=1, as
//! `gslb_tests::skip` does), where it fails. Every wait is bounded by [`WAIT`].

mod prometheus;
mod slots;

use crate::common;

use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use common::{Backend, Gslbd, WAIT, answer_becomes, ask_loopback};
use gslb_tests::TempDir;
use gslb_user::daemon::Overrides;
use hickory_proto::{op::ResponseCode, rr::RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// www.example.com over services "a" and "b", each with a TCP monitor on a loopback port (50 ms
/// interval), and the admin endpoint on 127.0.0.1 (any port: the test binds it). `backup` is
/// the domain's backup address (a reload changes it).
pub(super) fn config(dns_port: u16, backend_a: u16, backend_b: u16, backup: &str) -> String {
    let zone = common::loopback_zone(dns_port);
    let pair = common::monitored_pair(
        ("127.0.0.1", backend_a),
        ("127.0.0.1", backend_b),
        "weight = 3",
        backup,
    );
    format!("{zone}\n[admin]\nlisten = \"127.0.0.1:0\"\n{pair}")
}

/// A gslbd on `path` with `overrides`, on `listeners` (its DNS sockets, [`common::bound_dns`])
/// and an admin listener bound here on 127.0.0.1; and the admin address.
pub(super) async fn start(
    path: &Path,
    overrides: Overrides,
    mut listeners: gslb_user::daemon::Listeners,
) -> (Gslbd, SocketAddr) {
    let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    admin.set_nonblocking(true).unwrap();
    let addr = admin.local_addr().unwrap();
    listeners.admin = Some(admin);
    (
        Gslbd::start_bound_with(path, overrides, listeners, WAIT).await,
        addr,
    )
}

/// The two backends (the services' monitors connect to them).
pub(super) async fn backends() -> (Backend, Backend) {
    (
        Backend::bind("127.0.0.1").await,
        Backend::bind("127.0.0.1").await,
    )
}

/// One HTTP/1.1 request (`Connection: close`); the status code and the body.
pub(super) async fn http(addr: SocketAddr, method: &str, target: &str) -> (u16, String) {
    try_http(addr, method, target)
        .await
        .unwrap_or_else(|e| panic!("{method} {target}: {e}"))
}

/// One request on its own connection: the status and the body, or why the exchange failed.
async fn try_http(
    addr: SocketAddr,
    method: &str,
    target: &str,
) -> Result<(u16, String), std::io::Error> {
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
        .unwrap_or_else(|_| panic!("{method} {target}: no reply in time"))?;
    let reply = String::from_utf8(reply).expect("a text reply");
    // Closed before the end of the header (nothing at all, typically): what a connection
    // dropped with its task looks like.
    let (head, body) = reply
        .split_once("\r\n\r\n")
        .ok_or(std::io::ErrorKind::UnexpectedEof)?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {head}"));
    // Prometheus (Go's net/http) sends a body over 2 KiB chunked even with `Connection: close`.
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .replace(' ', "")
            .starts_with("transfer-encoding:chunked")
    });
    let body = if chunked {
        dechunk(body).ok_or(std::io::ErrorKind::UnexpectedEof)?
    } else {
        body.to_owned()
    };
    Ok((status, body))
}

/// The body of a chunked transfer coding (RFC 9112 §7.1), or None when it is cut short.
fn dechunk(mut rest: &str) -> Option<String> {
    let mut body = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(body);
        }
        body.push_str(after.get(..size)?);
        rest = after.get(size..)?.strip_prefix("\r\n")?;
    }
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
pub(super) fn tool(name: &str) -> Option<PathBuf> {
    ["/usr/bin", "/usr/local/bin", "/usr/sbin"]
        .into_iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.exists())
}

/// A test that needs `name`, which is missing: fails where the tools are required (CI,
/// `cargo xtask test`), else says why and skips.
pub(super) fn missing_tool(name: &str) {
    let reason = format!(
        "admin: {name} is not installed (Debian package prometheus; cargo xtask setup installs it)"
    );
    let required = std::env::var("GSLB_REQUIRE_TOOLS").as_deref() == Ok("1")
        || std::env::var("CI").as_deref() == Ok("true");
    assert!(!required, "{reason} (GSLB_REQUIRE_TOOLS=1 or CI=true)");
    gslb_tests::skip(&reason);
}

/// `promtool check metrics` accepts `text` (skipped, saying why, without promtool).
fn assert_promtool_accepts(text: &str) {
    match tool("promtool") {
        Some(promtool) => {
            if let Err(said) = promtool_check(&promtool, text) {
                panic!("promtool check metrics:\n{said}\non:\n{text}");
            }
        }
        None => missing_tool("promtool"),
    }
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
pub(super) async fn ask(port: u16, name: &'static str) -> ResponseCode {
    tokio::task::spawn_blocking(move || ask_loopback(port, name, RecordType::A).response_code)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_status_and_probes_follow_the_daemon() {
    let dir = TempDir::new("admin");
    let path = dir.0.join("gslb.toml");
    let (dns, listeners) = common::bound_dns();
    let (a, b) = backends().await;
    std::fs::write(&path, config(dns, a.port(), b.port(), "203.0.113.99")).unwrap();
    let overrides = Overrides {
        no_xdp: true,
        ..Overrides::default()
    };
    let (gslbd, admin) = start(&path, overrides, listeners).await;
    answer_becomes(dns, &["198.51.100.1", "198.51.100.2"]).await;

    assert_eq!(http(admin, "GET", "/healthz").await.0, 200);
    // Started (Gslbd::start_bound_with waits for that): ready.
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

    assert_promtool_accepts(&text);

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
    std::fs::write(&path, config(dns, 1, b.port(), "203.0.113.98")).unwrap();
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
    // open: a connection made meanwhile waits in its backlog), and the metrics count the
    // restart. A connection the dying task had already accepted is reset with it: that
    // exchange is "not yet", not a failure.
    let task = format!("admin/{admin}");
    assert_eq!(
        gslb_user::supervise::inject_panic(&task, 1),
        1,
        "{task} runs"
    );
    let restarts = format!("gslb_task_restarts_total{{task=\"{task}\"}}");
    use std::io::ErrorKind;
    common::until("the admin endpoint restarted", async || {
        match try_http(admin, "GET", "/metrics").await {
            Ok((200, body)) => parse_exposition(&body).samples.get(&restarts) == Some(&1.0),
            Ok((status, body)) => panic!("GET /metrics: {status} {body}"),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::ConnectionReset
                        | ErrorKind::ConnectionAborted
                        | ErrorKind::BrokenPipe
                        | ErrorKind::UnexpectedEof
                ) =>
            {
                false
            }
            Err(e) => panic!("GET /metrics: {e}"),
        }
    })
    .await;
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
            address: "192.0.2.1".parse().unwrap(),
            cname: None,
            up: true,
            admin_state: "enabled",
            weight: 1,
            connections: None,
            bandwidth_kbps: Some(u64::MAX),
            why: "no monitor".into(),
            last_change_unix_s: None,
        }],
        domains: vec![DomainStatus {
            name: "www.example.com".into(),
            admin_state: "disabled",
            views: vec![],
        }],
        sites: vec![],
        mep: Some(MepStatus {
            sessions: vec![MepSession {
                peer: "dc2".into(),
                up: false,
                version: None,
                last_error: Some("refused\nagain".into()),
                last_reason: Some("connect_failed"),
            }],
            sites: vec![MepSite {
                name: "dc2".into(),
                reachable: false,
                via: None,
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
    assert_eq!(
        m.samples["gslb_mep_link_last_error_info{peer=\"dc2\",reason=\"connect_failed\"}"],
        1.0
    );
    assert_eq!(m.samples["gslb_rtt_rows"], 6.0);
    assert_eq!(m.samples["gslb_xdp_hits_total{counter=\"hit_a_v4\"}"], 10.0);
    assert_eq!(
        m.samples["gslb_republish_duration_seconds_bucket{le=\"+Inf\"}"],
        3.0
    );
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["mep"]["links"][0]["last_error"], "refused\nagain");
    assert_promtool_accepts(&text);
}

/// The operator's admin state (`gslbctl service|site|domain disable`, through the control
/// socket) shows in `/status` (`admin_state` of each service and domain) and `/metrics`
/// (`gslb_service_admin_enabled`, `gslb_domain_admin_enabled`), and a disabled service is not
/// up there either; enabled, it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_state_shows_in_status_and_metrics() {
    let dir = TempDir::new("admin-steer");
    let (path, ctl) = (dir.0.join("gslb.toml"), dir.0.join("control.sock"));
    let (dns, listeners) = common::bound_dns();
    let (a, b) = backends().await;
    let text = config(dns, a.port(), b.port(), "203.0.113.99").replacen(
        &format!("dns_port = {dns}\n"),
        &format!(
            "dns_port = {dns}\nstate_file = \"{}\"\n",
            dir.0.join("admin-state").display()
        ),
        1,
    );
    std::fs::write(&path, text).unwrap();
    let (gslbd, admin) = start(&path, Gslbd::responder_only(Some(ctl.clone())), listeners).await;
    answer_becomes(dns, &["198.51.100.1", "198.51.100.2"]).await;
    let service = |m: &Exposition, name: &str, s: &str| {
        m.samples[&format!("gslb_{name}{{service=\"{s}\",site=\"dc\"}}")]
    };
    let www_enabled = "gslb_domain_admin_enabled{domain=\"www.example.com\"}";
    let m = parse_exposition(&get(admin, "/metrics").await);
    assert_eq!(service(&m, "service_admin_enabled", "a"), 1.0);
    assert_eq!(m.samples[www_enabled], 1.0);

    let steer = async |request: &str| {
        gslb_user::control::request(&ctl, request, WAIT)
            .await
            .unwrap()
    };
    steer("service disable a").await;
    steer("domain disable www.example.com").await;
    let text = get(admin, "/metrics").await;
    let m = parse_exposition(&text);
    assert_eq!(service(&m, "service_admin_enabled", "a"), 0.0);
    assert_eq!(service(&m, "service_up", "a"), 0.0);
    assert_eq!(service(&m, "service_admin_enabled", "b"), 1.0);
    assert_eq!(service(&m, "service_up", "b"), 1.0);
    assert_eq!(m.samples[www_enabled], 0.0);
    assert_eq!(m.types["gslb_service_admin_enabled"], "gauge");
    assert_promtool_accepts(&text);
    let status: serde_json::Value = serde_json::from_str(&get(admin, "/status").await).unwrap();
    let states: BTreeMap<&str, (&str, bool)> = status["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap(),
                (
                    s["admin_state"].as_str().unwrap(),
                    s["up"].as_bool().unwrap(),
                ),
            )
        })
        .collect();
    assert_eq!(
        states,
        BTreeMap::from([("a", ("disabled", false)), ("b", ("enabled", true))])
    );
    assert_eq!(
        status["domains"],
        serde_json::json!([{
            "name": "www.example.com",
            "admin_state": "disabled",
            "views": [{"view": "default", "services": [], "fallback": "backup_ip"}],
        }])
    );

    steer("service enable a").await;
    steer("domain enable www.example.com").await;
    let m = parse_exposition(&get(admin, "/metrics").await);
    assert_eq!(service(&m, "service_admin_enabled", "a"), 1.0);
    assert_eq!(service(&m, "service_up", "a"), 1.0);
    assert_eq!(m.samples[www_enabled], 1.0);
    gslbd.stop().await;
}

/// The test client reads chunked bodies (as Prometheus sends them) whole, and refuses cut ones.
#[test]
fn chunked_bodies_are_read_whole() {
    assert_eq!(
        dechunk("5\r\n{\"a\":\r\n3;x=1\r\n 1}\r\n0\r\n\r\n").as_deref(),
        Some("{\"a\": 1}")
    );
    assert_eq!(dechunk("5\r\n{\"a\""), None);
}
