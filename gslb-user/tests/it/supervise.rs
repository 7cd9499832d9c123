//! Nothing dies silently: every long-running task is supervised, and these tests kill the real
//! tasks on purpose (`supervise::inject_panic`, feature `fault-injection`, which the tests
//! enable) and show that each is counted, restarted, and does its work again:
//!
//! - gslbd's DNS loops (UDP and TCP, in-process with the responder alone on loopback): the
//!   daemon keeps answering, the loops answer again, `gslbctl stats` counts the restarts;
//! - a health monitor: a monitor that cannot run is a failing check, so its service goes
//!   DOWN after `fall` of them (never stays UP by default) and the answers are republished
//!   without it; it comes back when its task runs again; a check whose socket cannot even be
//!   made fails the same way;
//! - the RTT prober, the link monitor and a load monitor: they work again after a restart;
//! - a reload is all or nothing: a failed publish keeps the running configuration, its
//!   monitors and its answers, and says so.
//!
//! Every wait is bounded by [`WAIT`].

use crate::common;
use crate::mep::peer::{self as mep_peer, Peer};
use crate::mep_keys;

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use common::{Backend, Gslbd, WAIT, answer_addrs, answer_becomes, until, www};
use gslb_tests::TempDir;
use gslb_user::{
    control,
    health::{
        HealthSupervisor, MonitorKind, MonitorSpec, ServiceMonitors,
        link::{LinkMonitor, LinkSpec},
    },
    probe::{ProbeKind, ProbeOutcome, ProbeSettings, ProbeSupervisor, Prober},
    supervise::{inject_panic, task_stats},
};
use hickory_proto::rr::RecordType;

fn restarts(task: &str) -> u64 {
    task_stats(task).map_or(0, |s| s.restarts)
}

/// Injects `times` panics into `task`, which must be running.
fn kill(task: &str, times: u32) {
    assert!(inject_panic(task, times) >= 1, "no running task {task}");
}

// ---- gslbd ----

fn config(port: u16, service: &str, backend: u16, public: &str) -> String {
    let head = common::loopback_zone(port);
    format!(
        r#"{head}
[[monitor]]
name = "tcp"
type = "tcp"
interval_ms = 50
timeout_ms = 200
fall = 3
rise = 1

[[site]]
name = "dc"
ip = "192.0.2.1"

[[service]]
name = "{service}"
ip = "127.0.0.1"
port = {backend}
public_ip = "{public}"
site = "dc"
monitors = ["tcp"]

[[gslb_domain]]
name = "www.example.com"
answer = "all"
services = ["{service}"]
backup_ip = ["203.0.113.99"]
"#
    )
}

/// www.example.com over TCP.
async fn www_tcp(port: u16) -> Vec<IpAddr> {
    use hickory_proto::op::{Message, Query};
    use hickory_proto::rr::Name;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut q = Message::query();
    q.metadata.id = 9;
    q.add_query(Query::query(
        Name::from_ascii("www.example.com.").unwrap(),
        RecordType::A,
    ));
    let q = q.to_vec().unwrap();
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        let mut framed = (q.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&q);
        s.write_all(&framed).await?;
        let len = s.read_u16().await?;
        let mut buf = vec![0; len as usize];
        s.read_exact(&mut buf).await?;
        Ok::<_, std::io::Error>(buf)
    };
    let reply = tokio::time::timeout(WAIT, exchange)
        .await
        .expect("a TCP answer in time")
        .expect("a TCP answer");
    answer_addrs(&Message::from_vec(&reply).unwrap())
}

/// The UDP loops and the TCP loop, killed: gslbd answers throughout (the other loops, and the
/// killed one's socket stays open, so its queries wait for the restart), each loop is counted
/// and restarted, and answers on its own again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_dns_loops_restart_and_answer_again() {
    let dir = TempDir::new("supervise-loops");
    let (path, ctl) = (dir.0.join("gslb.toml"), dir.0.join("control.sock"));
    let (port, dns) = common::bound_dns();
    let backend = Backend::bind("127.0.0.1").await;
    let bport = backend.port();
    std::fs::write(&path, config(port, "loops", bport, "198.51.100.1")).unwrap();
    let gslbd = Gslbd::start_bound(&path, dns, Some(ctl.clone()), WAIT).await;
    answer_becomes(port, &["198.51.100.1"]).await;

    let udp: Vec<String> = gslb_user::supervise::stats()
        .into_iter()
        .filter(|(name, s)| {
            name.starts_with(&format!("dns-udp/127.0.0.1:{port}/")) && s.running > 0
        })
        .map(|(name, _)| name)
        .collect();
    assert!(!udp.is_empty(), "the UDP loops are supervised");
    let tcp = format!("dns-tcp/127.0.0.1:{port}");
    // The TCP loop may start after the first UDP answer on a loaded machine.
    until(&format!("{tcp} running"), async || {
        task_stats(&tcp).is_some_and(|s| s.running > 0)
    })
    .await;
    for task in udp.iter().chain([&tcp]) {
        kill(task, 1);
    }
    // Asked at once, while the loops wait out their first backoff: still answered.
    assert_eq!(www(port).await, ["198.51.100.1".parse::<IpAddr>().unwrap()]);
    for task in udp.iter().chain([&tcp]) {
        until(&format!("{task} restarted"), async || restarts(task) >= 1).await;
    }
    for _ in 0..20 {
        assert_eq!(www(port).await, ["198.51.100.1".parse::<IpAddr>().unwrap()]);
    }
    assert_eq!(
        www_tcp(port).await,
        ["198.51.100.1".parse::<IpAddr>().unwrap()]
    );
    let s = common::control_stats(&ctl).await;
    assert!(
        s["task_restarts"] > udp.len() as u64,
        "every loop's restart: {s:?}"
    );
    assert_eq!(s[&format!("task_panics{{task=\"{tcp}\"}}")], 1, "{s:?}");
    assert_eq!(s[&format!("task_restarts{{task=\"{tcp}\"}}")], 1, "{s:?}");
    gslbd.stop().await;
}

/// A monitor whose task dies at every start cannot check: after `fall` (3) deaths its service
/// is DOWN and the answers are republished without it (the backup address), although its
/// backend answers; once the task runs again, the service comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitor_that_cannot_run_takes_its_service_out_of_the_answers() {
    let dir = TempDir::new("supervise-monitor");
    let path = dir.0.join("gslb.toml");
    let (port, dns) = common::bound_dns();
    let backend = Backend::bind("127.0.0.1").await;
    let bport = backend.port();
    std::fs::write(&path, config(port, "mon-daemon", bport, "198.51.100.2")).unwrap();
    let gslbd = Gslbd::start_bound(&path, dns, None, WAIT).await;
    answer_becomes(port, &["198.51.100.2"]).await;

    let task = "monitor/mon-daemon/tcp";
    // Three deaths take it DOWN; three more (backing off 0.8, 1.6 and 3.2 s) keep it DOWN long
    // enough to be seen in the answers.
    kill(task, 6);
    answer_becomes(port, &["203.0.113.99"]).await;
    assert!(restarts(task) >= 3, "{:?}", task_stats(task));
    answer_becomes(port, &["198.51.100.2"]).await;
    gslbd.stop().await;
}

/// A reload whose answers cannot be published changes nothing: the reply says it failed, the
/// running answers stay, and so do the running monitors (the new configuration's monitor
/// probes a dead port, which would take the service DOWN within 150 ms); the counter says
/// so. The same file reloaded without the fault then switches everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_whose_publish_fails_keeps_everything_as_before() {
    let dir = TempDir::new("supervise-reload");
    let (path, ctl) = (dir.0.join("gslb.toml"), dir.0.join("control.sock"));
    let (port, dns) = common::bound_dns();
    let backend = Backend::bind("127.0.0.1").await;
    let bport = backend.port();
    let (dead, _held) = common::refusing_tcp_port("127.0.0.1");
    std::fs::write(&path, config(port, "rl", bport, "198.51.100.3")).unwrap();
    let gslbd = Gslbd::start_bound(&path, dns, Some(ctl.clone()), WAIT).await;
    answer_becomes(port, &["198.51.100.3"]).await;

    std::fs::write(&path, config(port, "rl", dead, "198.51.100.4")).unwrap();
    gslb_user::daemon::fail_next_publish(port, 1);
    let refused = control::request(&ctl, "reload", WAIT).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("publishing its answers failed"),
        "{refused}"
    );
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        assert_eq!(
            www(port).await,
            ["198.51.100.3".parse::<IpAddr>().unwrap()],
            "the old answers and the old monitor stay in force"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let s = common::control_stats(&ctl).await;
    assert_eq!(s["reloads_failed"], 1, "{s:?}");

    // Without the fault: published, then the new monitor switches in and finds the dead port.
    control::request(&ctl, "reload", WAIT).await.unwrap();
    answer_becomes(port, &["203.0.113.99"]).await;
    assert_eq!(common::control_stats(&ctl).await["reloads_failed"], 1);
    gslbd.stop().await;
}

// ---- Monitors, prober, links, load ----

fn tcp_monitor(fall: u32) -> MonitorSpec {
    MonitorSpec {
        interval: Duration::from_millis(20),
        timeout: Duration::from_millis(200),
        fall,
        rise: 1,
        ..MonitorSpec::new("tcp", MonitorKind::Tcp)
    }
}

/// Killed `fall` times in a row, a monitor of a reachable target takes its service DOWN, with
/// the reason in the event, after exactly `fall` failed checks (two deaths are not enough);
/// then it checks again and the service returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitor_task_that_dies_counts_as_failed_checks() {
    let backend = Backend::bind("127.0.0.1").await;
    let addr = backend.addr;
    let health = HealthSupervisor::new();
    let mut events = health.subscribe();
    let spec = ServiceMonitors {
        monitors: vec![tcp_monitor(3)],
        ..ServiceMonitors::new("mon-lib", addr.ip(), addr.port())
    };
    health.set_services(vec![spec]).await.unwrap();
    let checks = |h: &HealthSupervisor| h.snapshot()["mon-lib"].monitors[0].checks;
    until("a first check", async || checks(&health) >= 1).await;
    let task = "monitor/mon-lib/tcp";

    kill(task, 2);
    until("two restarts", async || restarts(task) >= 2).await;
    until("the failures recorded", async || {
        health.snapshot()["mon-lib"].monitors[0].failures >= 2
    })
    .await;
    assert_eq!(
        health.is_up("mon-lib"),
        Some(true),
        "two of three: still UP"
    );
    // The third run checks the (reachable) target: the run of failures ends.
    until("a success after the deaths", async || {
        health.snapshot()["mon-lib"].monitors[0].consecutive_successes >= 1
    })
    .await;

    kill(task, 3);
    let down = tokio::time::timeout(WAIT, events.recv())
        .await
        .expect("an event in time")
        .unwrap();
    assert!(!down.up, "{down:?}");
    assert!(down.reason.contains("could not check"), "{down:?}");
    assert!(down.reason.contains("fault injected"), "{down:?}");
    let up = tokio::time::timeout(WAIT, events.recv())
        .await
        .expect("an event in time")
        .unwrap();
    assert!(up.up, "back once the task runs: {up:?}");
    assert_eq!(task_stats(task).unwrap().panics, 5);
    health.shutdown().await;
}

/// A check that cannot even be attempted (a TCP connect to the broadcast address, which the
/// kernel refuses before sending anything) is a failed check: the service starts UP and goes
/// DOWN by its fall rule.
#[tokio::test]
async fn a_check_that_cannot_be_attempted_fails() {
    let health = HealthSupervisor::new();
    let mut events = health.subscribe();
    let spec = ServiceMonitors {
        monitors: vec![tcp_monitor(2)],
        ..ServiceMonitors::new("mon-bcast", IpAddr::V4(Ipv4Addr::BROADCAST), 80)
    };
    health.set_services(vec![spec]).await.unwrap();
    assert_eq!(health.is_up("mon-bcast"), Some(true));
    let down = tokio::time::timeout(WAIT, events.recv())
        .await
        .expect("DOWN in time")
        .unwrap();
    assert!(!down.up, "{down:?}");
    assert!(health.snapshot()["mon-bcast"].monitors[0].failures >= 2);
    health.shutdown().await;
}

/// Replies to every probe at once.
#[derive(Clone, Default)]
struct Echo {
    probes: Arc<std::sync::atomic::AtomicU64>,
}

impl Prober for Echo {
    fn probe(
        &self,
        _kind: ProbeKind,
        _target: IpAddr,
        _timeout: Duration,
    ) -> impl Future<Output = ProbeOutcome> + Send {
        self.probes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        async { ProbeOutcome::Reply(Duration::from_millis(3)) }
    }
}

/// The prober, killed, comes back with its table and probes its resolvers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_prober_probes_again() {
    let echo = Echo::default();
    let settings = ProbeSettings {
        interval: Duration::from_millis(50),
        tick: Duration::from_millis(10),
        ..ProbeSettings::default()
    };
    let prober = ProbeSupervisor::start("sv-east", settings, echo.clone()).unwrap();
    prober.recorder().record("198.51.100.9".parse().unwrap());
    let probes = || echo.probes.load(std::sync::atomic::Ordering::Relaxed);
    until("a first probe", async || probes() >= 1).await;
    let task = "rtt-prober/sv-east";
    kill(task, 1);
    until("restarted", async || restarts(task) == 1).await;
    let before = probes();
    until("probes after the restart", async || probes() >= before + 2).await;
    assert_eq!(
        prober.handle().report().len(),
        1,
        "the table survives the restart"
    );
    prober.shutdown().await;
}

/// The link monitor's sampler, killed, samples again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_link_sampler_samples_again() {
    let spec = LinkSpec {
        link: "sv-lan".into(),
        interface: "lo".into(),
        interval: Duration::from_millis(20),
        threshold_bytes_per_sec: 0,
        over_after: 1,
        under_after: 1,
    };
    let monitor = LinkMonitor::spawn(vec![spec]);
    let loads = monitor.loads();
    let at = || loads.borrow().get("sv-lan").map(|l| l.at);
    until("a first sample", async || at().is_some()).await;
    kill("link/sv-lan", 1);
    until("restarted", async || restarts("link/sv-lan") == 1).await;
    let before = at();
    until("a sample after the restart", async || at() != before).await;
    drop(monitor);
}

/// A load monitor's task, killed, checks again, and each death counted as a failed check
/// (with a 10 s interval, only the first check and the one right after the last restart are
/// real: the other failures are the three deaths).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_load_monitor_checks_again() {
    use gslb_user::health::load::{LoadMonitor, LoadMonitorSpec, LoadSource, ServiceLoadMonitors};
    let mut monitor = LoadMonitor::new();
    let spec = LoadMonitorSpec {
        interval: Duration::from_secs(10),
        timeout: Duration::from_millis(200),
        ..LoadMonitorSpec::new("nginx", LoadSource::StubStatus, "/status")
    };
    let (dead_port, _held) = common::refusing_tcp_port("127.0.0.1");
    let dead = SocketAddr::from(([127, 0, 0, 1], dead_port));
    monitor
        .set_services(&[ServiceLoadMonitors {
            service: "sv-load".into(),
            target: dead.ip(),
            port: dead.port(),
            monitors: vec![spec],
        }])
        .unwrap();
    let readings = monitor.readings();
    let failures = || {
        readings
            .borrow()
            .0
            .values()
            .map(|r| r.failures)
            .sum::<u64>()
    };
    until("a first check", async || failures() >= 1).await;
    let task = "load/sv-load/nginx";
    kill(task, 3);
    until("three restarts", async || restarts(task) == 3).await;
    until("each death and the check after counted", async || {
        failures() >= 5
    })
    .await;
}

/// The fast-path LDNS feed (privileged: it reads the loaded program's `LDNS` map), killed, is
/// restarted on a duplicate of the map, which its task keeps open: the fast path still
/// detaches (the detach reloads the program, which needs the map open), and the restarted feed
/// ends on its own signal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_ldns_feed_restarts_on_the_same_map() {
    if !common::privileged() {
        return;
    }
    // Only parsed: nothing binds its DNS port or checks its backend.
    let config = gslb_user::config::Config::parse(
        &config(5353, "feed", 1, "198.51.100.8"),
        Path::new("feed.toml"),
    )
    .unwrap();
    let mut dp = gslb_user::dataplane::Dataplane::load(None).expect("loading the XDP object");
    let rtt = gslb_user::daemon::rtt::RttProbing::new(&config, dp.take_ldns());
    until("the feed running", async || {
        task_stats("ldns-feed").is_some_and(|s| s.running >= 1)
    })
    .await;
    let before = restarts("ldns-feed");
    kill("ldns-feed", 1);
    until("the feed restarted", async || {
        restarts("ldns-feed") > before
    })
    .await;
    dp.detach().expect("detach after the feed's restart");
    tokio::time::timeout(WAIT, rtt.shutdown())
        .await
        .expect("the restarted feed ends on its signal");
}

// ---- MEP ----

/// gslbd as parent `me` at `me_ip`, beside parent p2 at 127.0.0.2.
pub(crate) fn mep_config(dns: u16, me: &str, me_ip: &str, me_mep: u16, p2_mep: u16) -> String {
    mep_keys::keyed(
        &format!(
            r#"
[server]
listen = ["127.0.0.1"]
dns_port = {dns}
site = "{me}"

[mep]
heartbeat_ms = 100
dead_after_ms = 500

[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

[[site]]
name = "{me}"
ip = "{me_ip}"
mep_port = {me_mep}

[[site]]
name = "p2"
ip = "127.0.0.2"
mep_port = {p2_mep}

[[service]]
name = "web1"
ip = "192.0.2.1"
site = "{me}"

[[service]]
name = "web2"
ip = "192.0.2.2"
site = "p2"

[[gslb_domain]]
name = "www.example.com"
answer = "all"
services = ["web1", "web2"]
"#
        ),
        me,
    )
}

/// gslbd's MEP node and its persistence exchange, killed: the node comes back on the same
/// socket and its link to the other parent comes up again (the peer sees a new link), while
/// gslbd answers throughout. Here gslbd (127.0.0.1, the lower address) dials the peer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_mep_node_links_up_again() {
    killed_mep_node("sv-p1", "127.0.0.1").await;
}

/// The same with the peer dialling (gslbd at 127.0.0.3): the restarted node's accept loop
/// takes the link, not a stale one left by the node that died.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_mep_node_accepts_links_again() {
    killed_mep_node("sv-p3", "127.0.0.3").await;
}

async fn killed_mep_node(me: &str, me_ip: &str) {
    // It kills `mep-persist-sync`, which every in-process gslbd with MEP runs.
    let _alone = common::killing_same_named_tasks().await;
    use gslb_user::mep::{LocalState, ServiceReport, SiteSpec};
    let dir = TempDir::new(&format!("supervise-mep-{me}"));
    let path = dir.0.join("gslb.toml");
    let (dns, mut dns_sockets) = common::bound_dns();
    let (p1_mep, mep_listener) = common::bound_mep(me_ip);
    let peer_listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let p2_mep = peer_listener.local_addr().unwrap().port();
    std::fs::write(&path, mep_config(dns, me, me_ip, p1_mep, p2_mep)).unwrap();
    dns_sockets.mep = Some(mep_listener);
    let gslbd = Gslbd::start_bound(&path, dns_sockets, None, WAIT).await;

    let sites = vec![
        SiteSpec::parent(me, me_ip.parse().unwrap()).with_port(p1_mep),
        SiteSpec::parent("p2", "127.0.0.2".parse().unwrap()).with_port(p2_mep),
    ];
    let peer = Peer::start(peer_listener, mep_peer::config("p2", sites)).await;
    peer.node
        .publish_local(LocalState {
            services: vec![ServiceReport {
                name: "web2".into(),
                state: gslb_user::health::state::ServiceState::UP,
            }],
            rtt: vec![],
            persistence: vec![],
        })
        .unwrap();
    let link = || {
        peer.node
            .view()
            .sessions
            .get(me)
            .filter(|l| l.up)
            .map(|l| l.since)
    };
    until("the link to gslbd up", async || link().is_some()).await;
    answer_becomes(dns, &["192.0.2.1", "192.0.2.2"]).await;
    let first = link().unwrap();

    let node = format!("mep-node/{me}");
    let sync_restarts = restarts("mep-persist-sync");
    for task in [node.as_str(), "mep-persist-sync"] {
        kill(task, 1);
    }
    until("the MEP node restarted", async || restarts(&node) >= 1).await;
    until("the persistence exchange restarted", async || {
        restarts("mep-persist-sync") > sync_restarts
    })
    .await;
    until("a new link to gslbd up", async || {
        link().is_some_and(|since| since > first)
    })
    .await;
    // p2's service was kept (the view holds until the link is back) or is back by now.
    answer_becomes(dns, &["192.0.2.1", "192.0.2.2"]).await;

    peer.stop().await;
    gslbd.stop().await;
}

// ---- A reload the maps cannot hold (privileged) ----

/// The A answer of www.example.com that the fast path (the maps pinned at `pins`, adopted by a
/// second program instance, run by BPF_PROG_TEST_RUN) gives a client asking 127.0.0.1:`port`.
pub(crate) fn xdp_www(pins: &Path, port: u16) -> Vec<IpAddr> {
    let dp = gslb_user::dataplane::Dataplane::load(Some(pins)).expect("adopting the pins");
    let query = common::wire(&common::query(7, "www.example.com.", RecordType::A));
    let frame = common::Frame {
        dst_port: port,
        ..common::Frame::query_to(IpAddr::V4(Ipv4Addr::LOCALHOST), query)
    };
    let out = common::run(&dp, &frame.bytes());
    assert_eq!(out.action, common::XDP_TX, "the fast path answers");
    let dns = &out.frame[14 + 20 + 8..];
    answer_addrs(&hickory_proto::op::Message::from_vec(dns).unwrap())
}

/// With the fast path loaded: a reload whose publish fails (injected where the map writes
/// begin) leaves the fast path's maps and the responder answering the running configuration;
/// the reply and the counter say it failed; the next good reload reaches both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_publish_keeps_the_fast_path_answers() {
    if !common::privileged() {
        return;
    }
    let dir = TempDir::new("supervise-xdpreload");
    let (path, ctl) = (dir.0.join("gslb.toml"), dir.0.join("control.sock"));
    // Pins live on bpffs; removed on the way out, also when the test fails.
    struct Pins(std::path::PathBuf);
    impl Drop for Pins {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let pins = Pins(format!("/sys/fs/bpf/gslb-test-supervise-{}", std::process::id()).into());
    let pins = &pins.0;
    let (port, dns) = common::bound_dns();
    let backend = Backend::bind("127.0.0.1").await;
    let bport = backend.port();
    std::fs::write(&path, config(port, "xdp", bport, "198.51.100.5")).unwrap();
    // XDP loaded (not attached: no interface), its maps pinned on bpffs.
    let overrides = gslb_user::daemon::Overrides {
        pin_path: Some(pins.to_owned()),
        control: Some(control::ControlPath {
            path: ctl.clone(),
            required: true,
        }),
        ..gslb_user::daemon::Overrides::default()
    };
    let gslbd = Gslbd::start_bound_with(&path, overrides, dns, WAIT).await;
    let old: Vec<IpAddr> = vec!["198.51.100.5".parse().unwrap()];
    answer_becomes(port, &["198.51.100.5"]).await;
    assert_eq!(xdp_www(pins, port), old);

    std::fs::write(&path, config(port, "xdp", bport, "198.51.100.6")).unwrap();
    gslb_user::daemon::fail_next_publish(port, 1);
    let failed = control::request(&ctl, "reload", WAIT).await.unwrap_err();
    assert!(
        failed.to_string().contains("publishing its answers failed"),
        "{failed}"
    );
    assert_eq!(common::control_stats(&ctl).await["reloads_failed"], 1);
    assert_eq!(xdp_www(pins, port), old, "the fast path's answers stay");
    assert_eq!(www(port).await, old, "the responder's answers stay");

    control::request(&ctl, "reload", WAIT).await.unwrap();
    let new: Vec<IpAddr> = vec!["198.51.100.6".parse().unwrap()];
    assert_eq!(xdp_www(pins, port), new);
    assert_eq!(www(port).await, new);
    gslbd.stop().await;
}
