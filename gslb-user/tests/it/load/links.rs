//! Inbound links (`[[link]]`, spec §5 bandwidth): the configuration section, with every rule a
//! bad file breaks reported at the value; the link monitor following reloads link by link; and
//! the answers through the controller's `World`, with gslbd's link wiring (`daemon::uplink`) fed
//! by counters the test grows: a domain over two services on links L1 and L2 answers both, only
//! L2's service while L1 is over its threshold, both again when both are over (spillover with
//! nowhere to go), and both when they are back under. Checked in the compiled snapshot, the
//! responder, and the XDP program (BPF_PROG_TEST_RUN, root; skipped otherwise unless
//! GSLB_REQUIRE_PRIVILEGED=1).
//!
//! Every wait is bounded by [`WAIT`], which only a broken monitor reaches.

use crate::common;

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use common::{
    Answers, CLIENT_V4, Expect, Frame, SERVER_V4, assert_refused_at_markers, ips, query,
    responder_addrs, wire,
};
use gslb_common::{DEFAULT_VIEW, QTYPE_A};
use gslb_user::{
    config::Config,
    daemon::uplink::Uplinks,
    dataplane::Dataplane,
    health::{
        HealthSupervisor,
        link::{LinkMonitor, LinkSpec},
    },
    responder::Responder,
    world::World,
};
use hickory_proto::rr::RecordType;
use tokio::{task::JoinHandle, time::timeout};

const WAIT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// Configuration

const SERVER: &str = "[server]\nlisten = [\"192.0.2.53\"]\n";
const BASE: &str = r#"[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

[[site]]
name = "dc"
ip = "192.0.2.1"

[[site]]
name = "far"
ip = "192.0.2.2"

[[service]]
name = "web-a"
ip = "198.51.100.1"
site = "dc"

[[service]]
name = "web-b"
ip = "198.51.100.2"
site = "dc"

[[service]]
name = "web-far"
ip = "198.51.100.3"
site = "far"
"#;

fn link(name: &str, interface: &str, extra: &str) -> String {
    format!(
        "[[link]]\nname = \"{name}\"\ninterface = \"{interface}\"\nthreshold_kbps = 8000\n{extra}"
    )
}

#[test]
fn link_section_and_defaults() {
    let text = format!(
        "{SERVER}site = \"dc\"\n{BASE}{}{}",
        link("isp-a", "eth1", "services = [\"web-a\"]\n"),
        link(
            "isp-b",
            ".hidden",
            "interval_ms = 10\nover_after = 1\nunder_after = 100\nservices = [\"web-b\"]\n"
        )
        .replace("threshold_kbps = 8000", "threshold_kbps = 10000000000"),
    );
    let config =
        Config::parse(&text, Path::new("links.toml")).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let got: Vec<_> = config
        .links
        .iter()
        .map(|l| {
            (
                l.name.as_str(),
                l.interface.as_str(),
                l.threshold_kbps,
                l.interval,
                l.over_after,
                l.under_after,
                l.services.clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "isp-a",
                "eth1",
                8000,
                Duration::from_secs(1),
                3,
                3,
                vec!["web-a".to_owned()]
            ),
            (
                "isp-b",
                ".hidden",
                10_000_000_000,
                Duration::from_millis(10),
                1,
                100,
                vec!["web-b".to_owned()]
            ),
        ]
    );
    assert_eq!(
        config.link_of("web-b").map(|l| l.name.as_str()),
        Some("isp-b")
    );
    assert!(config.link_of("web-far").is_none());
    // Without server.site any service may be on a link (one host, one site).
    let text = format!(
        "{SERVER}{BASE}{}",
        link("isp-a", "eth1", "services = [\"web-a\", \"web-far\"]\n")
    );
    let config =
        Config::parse(&text, Path::new("links.toml")).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(config.links[0].services, ["web-a", "web-far"]);

    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/links.toml");
    let config = Config::load(&example).unwrap_or_else(|e| panic!("{e}"));
    let links: Vec<_> = config
        .links
        .iter()
        .map(|l| (l.name.as_str(), l.interface.as_str(), l.threshold_kbps))
        .collect();
    assert_eq!(
        links,
        [("isp-a", "eth1", 800_000), ("isp-b", "eth2", 400_000)]
    );
}

/// Each case: the file, a `#<` marking the line the error must be on, the text the column
/// must point at (its first occurrence on that line), and a part of the reason.
#[test]
fn link_rules_are_reported_at_the_value() {
    let file = PathBuf::from("/etc/gslb/links.toml");
    let with = |links: &str| format!("{SERVER}{BASE}{links}");
    let web_a = "services = [\"web-a\"]\n";
    let cases: Vec<(String, &str, &str)> = vec![
        (
            with(&link("isp a", "eth1", web_a).replace("a\"\n", "a\" #<\n")),
            "\"isp a\"",
            "link name \"isp a\": only letters",
        ),
        (
            with(
                &(link("isp", "eth1", web_a)
                    + &link("isp", "eth2", "services = [\"web-b\"]\n").replacen(
                        "\"isp\"",
                        "\"isp\" #<",
                        1,
                    )),
            ),
            "\"isp\"",
            "link name \"isp\": defined twice (first on line",
        ),
        (
            with(&link("isp", "eth1:1", web_a).replace("eth1:1\"", "eth1:1\" #<")),
            "\"eth1:1\"",
            "link \"isp\": interface \"eth1:1\" is not a valid interface name",
        ),
        (
            with(&link("isp", "sixteen-chars-xx", web_a).replace("xx\"", "xx\" #<")),
            "\"sixteen",
            "is not a valid interface name",
        ),
        (
            with(
                &(link("a", "eth1", web_a)
                    + &link("b", "eth1", "services = [\"web-b\"]\n").replacen(
                        "\"eth1\"",
                        "\"eth1\" #<",
                        1,
                    )),
            ),
            "\"eth1\"",
            "link \"b\": interface \"eth1\" is already link \"a\" (line",
        ),
        (
            with(&link("isp", "eth1", web_a).replace("8000", "0 #<")),
            "0",
            "link \"isp\": threshold_kbps 0 out of range 1..=10000000000",
        ),
        (
            with(&link("isp", "eth1", web_a).replace("8000", "10000000001 #<")),
            "10000000001",
            "threshold_kbps 10000000001 out of range",
        ),
        (
            with(&link("isp", "eth1", web_a).replace("8000", "\"8000\" #<")),
            "\"8000\"",
            "invalid type: string",
        ),
        (
            with(&link(
                "isp",
                "eth1",
                "interval_ms = 9 #<\nservices = [\"web-a\"]\n",
            )),
            "9",
            "link \"isp\": interval_ms 9 out of range 10..=3600000",
        ),
        (
            with(&link(
                "isp",
                "eth1",
                "over_after = 0 #<\nservices = [\"web-a\"]\n",
            )),
            "0",
            "link \"isp\": over_after 0 out of range 1..=100",
        ),
        (
            with(&link(
                "isp",
                "eth1",
                "under_after = 101 #<\nservices = [\"web-a\"]\n",
            )),
            "101",
            "link \"isp\": under_after 101 out of range 1..=100",
        ),
        (
            with(&link("isp", "eth1", "services = [] #<\n")),
            "[]",
            "link \"isp\": services is empty",
        ),
        (
            with(&link(
                "isp",
                "eth1",
                "services = [\"web-a\", \"nope\"] #<\n",
            )),
            "\"nope\"",
            "link \"isp\": unknown service \"nope\" (defined services: web-a, web-b, web-far)",
        ),
        (
            with(&link(
                "isp",
                "eth1",
                "services = [\"web-a\", \"web-a\"] #<\n",
            )),
            "\"web-a\"]",
            "service \"web-a\" listed twice",
        ),
        (
            with(
                &(link("a", "eth1", web_a)
                    + &link("b", "eth2", "services = [\"web-b\", \"web-a\"] #<\n")),
            ),
            "\"web-a\"",
            "link \"b\": service \"web-a\" is already on link \"a\" (line",
        ),
        (
            format!(
                "{SERVER}site = \"dc\"\n{BASE}{}",
                link("isp", "eth1", "services = [\"web-a\", \"web-far\"] #<\n")
            ),
            "\"web-far\"",
            "service \"web-far\" is at site \"far\", but this server (server.site) is \"dc\"",
        ),
        (
            with(&link(
                "isp",
                "eth1",
                "threshold = 5 #<\nservices = [\"web-a\"]\n",
            )),
            "threshold ",
            "unknown field `threshold`",
        ),
        (
            with("[[link]] #<\nname = \"isp\"\ninterface = \"eth1\"\nservices = [\"web-a\"]\n"),
            "[[link]]",
            "missing field `threshold_kbps`",
        ),
        // server.interface keeps the same rule, now shared with the links'.
        (
            format!("[server]\nlisten = [\"192.0.2.53\"]\ninterface = \"a/b\" #<\n{BASE}"),
            "\"a/b\"",
            "server.interface: \"a/b\" is not a valid interface name",
        ),
    ];
    assert_refused_at_markers(&cases, &file);
}

// ---------------------------------------------------------------------------------------------
// Counters

/// A directory laid out like `/sys/class/net`, whose interfaces' `rx_bytes` a task grows at
/// the rate the test sets. The counter follows the time that passed, not the number of writes,
/// so a writer that runs late still shows the rate. Removed on drop, also when a test fails.
struct FakeNet {
    root: PathBuf,
    /// Bytes per second, by interface.
    rates: Vec<(String, Arc<AtomicU64>)>,
    writer: JoinHandle<()>,
}

impl FakeNet {
    fn new(tag: &str, interfaces: &[&str]) -> FakeNet {
        let root = std::env::temp_dir().join(format!("gslb-links-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let mut counters = Vec::new();
        let mut rates = Vec::new();
        for interface in interfaces {
            let dir = root.join(interface).join("statistics");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("rx_bytes"), "0\n").unwrap();
            let rate = Arc::new(AtomicU64::new(0));
            counters.push((dir.join("rx_bytes"), rate.clone(), 0u64));
            rates.push((interface.to_string(), rate));
        }
        let writer = tokio::spawn(async move {
            let mut last = Instant::now();
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                let now = Instant::now();
                let elapsed = now - last;
                last = now;
                for (path, rate, total) in &mut counters {
                    *total += (rate.load(Ordering::Relaxed) as f64 * elapsed.as_secs_f64()) as u64;
                    // Replaced whole, as the kernel's file is never seen half written.
                    let next = path.with_extension("next");
                    std::fs::write(&next, format!("{total}\n")).unwrap();
                    std::fs::rename(&next, &path).unwrap();
                }
            }
        });
        FakeNet {
            root,
            rates,
            writer,
        }
    }

    fn set_rate(&self, interface: &str, bytes_per_sec: u64) {
        let (_, rate) = self
            .rates
            .iter()
            .find(|(i, _)| i == interface)
            .expect("an interface of the test");
        rate.store(bytes_per_sec, Ordering::Relaxed);
    }
}

impl Drop for FakeNet {
    fn drop(&mut self) {
        self.writer.abort();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// 1 MB/s, the links' threshold below (8000 kbit/s), and rates far on either side of it.
const THRESHOLD_KBPS: u64 = 8000;
const BUSY: u64 = 20_000_000;
const QUIET: u64 = 0;

// ---------------------------------------------------------------------------------------------
// The monitor across reloads

fn spec(link: &str, interface: &str) -> LinkSpec {
    LinkSpec {
        link: link.into(),
        interface: interface.into(),
        interval: Duration::from_millis(20),
        threshold_bytes_per_sec: THRESHOLD_KBPS * 125,
        over_after: 2,
        // Once over, they stay over for this test.
        under_after: 1000,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_monitor_follows_new_links_link_by_link() {
    let net = FakeNet::new("reload", &["a0", "b0"]);
    net.set_rate("a0", BUSY);
    net.set_rate("b0", BUSY);
    let mut monitor =
        LinkMonitor::spawn_with_root(vec![spec("a", "a0"), spec("b", "b0")], net.root.clone());
    let mut loads = monitor.loads();
    let both_over = |l: &std::collections::HashMap<String, gslb_user::health::link::LinkLoad>| {
        ["a", "b"].iter().all(|k| l.get(*k).is_some_and(|l| l.over))
    };
    timeout(WAIT, loads.wait_for(both_over))
        .await
        .expect("both links over")
        .unwrap();

    // "a" unchanged, "b" with another threshold: "a" carries on, over since its first
    // transition; "b" starts again, and is not over at the new threshold.
    let mut b = spec("b", "b0");
    b.threshold_bytes_per_sec = BUSY * 10;
    monitor.set_links(vec![spec("a", "a0"), b]);
    let a = loads.borrow().get("a").cloned();
    assert!(
        a.as_ref().is_some_and(|a| a.over && a.transitions == 1),
        "a kept its task and state: {a:?}"
    );
    let b_sampled = |l: &std::collections::HashMap<String, gslb_user::health::link::LinkLoad>| {
        l.get("b")
            .is_some_and(|b| b.rx_bytes_per_sec.is_some_and(|r| r > THRESHOLD_KBPS * 125))
    };
    let now = timeout(WAIT, loads.wait_for(b_sampled))
        .await
        .expect("b sampled again")
        .unwrap()
        .clone();
    assert!(
        !now["b"].over && now["b"].transitions == 0,
        "b restarted: {:?}",
        now["b"]
    );
    assert!(now["a"].over && now["a"].transitions == 1, "{:?}", now["a"]);

    // Removed links leave the loads at once, and a sample still in flight does not bring them
    // back.
    monitor.set_links(Vec::new());
    assert!(
        loads.borrow_and_update().is_empty(),
        "{:?}",
        *loads.borrow()
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!loads.has_changed().unwrap(), "{:?}", *loads.borrow());
    assert!(loads.borrow().is_empty());
}

// ---------------------------------------------------------------------------------------------
// The answers

const WORLD: &str = r#"
[server]
listen = ["192.0.2.53"]
site = "dc"

[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

[[site]]
name = "dc"
ip = "192.0.2.1"

[[service]]
name = "via-l1"
ip = "198.51.100.1"
site = "dc"

[[service]]
name = "via-l2"
ip = "198.51.100.2"
site = "dc"

[[link]]
name = "L1"
interface = "wan1"
threshold_kbps = 8000
interval_ms = 40
over_after = 2
under_after = 3
services = ["via-l1"]

[[link]]
name = "L2"
interface = "wan2"
threshold_kbps = 8000
interval_ms = 40
over_after = 2
under_after = 3
services = ["via-l2"]

[[gslb_domain]]
name = "www.example.com"
ttl = 30
answer = "all"
services = ["via-l1", "via-l2"]
"#;

const WWW: &str = "www.example.com";
const L1_ADDR: &str = "198.51.100.1";
const L2_ADDR: &str = "198.51.100.2";

/// Applies samples until the links that are over are `want`. Returns how many samples that
/// took and how many of them asked for a recompute.
async fn until_over(links: &mut Uplinks, world: &mut World, want: &[&str]) -> (usize, usize) {
    let want: BTreeSet<&str> = want.iter().copied().collect();
    let deadline = tokio::time::Instant::now() + WAIT;
    let (mut samples, mut triggers) = (0, 0);
    loop {
        tokio::time::timeout_at(deadline, links.changed())
            .await
            .unwrap_or_else(|_| panic!("links over never became {want:?}: {:?}", world.links()));
        samples += 1;
        triggers += usize::from(links.apply(world));
        let over: BTreeSet<&str> = world
            .links()
            .iter()
            .filter(|(_, l)| l.over)
            .map(|(k, _)| k.as_str())
            .collect();
        if over == want && world.links().len() == 2 {
            return (samples, triggers);
        }
    }
}

/// The answer for www.example.com A must be `want` (all of it, in configuration order) in the
/// snapshot, from the responder and, with root, from the fast path.
fn assert_answers(case: &str, world: &World, dataplane: Option<&mut Dataplane>, want: &[&str]) {
    let want = ips(want);
    let snapshot = world.snapshot();
    assert!(
        snapshot.engine_domains.is_empty(),
        "{case}: compiled, not left to the responder"
    );
    let entry = snapshot
        .domains
        .iter()
        .find(|d| d.name == WWW && d.qtype == QTYPE_A)
        .expect("www A");
    assert_eq!(
        entry.answers.len(),
        1,
        "{case}: one view: {:?}",
        entry.answers
    );
    assert_eq!(
        (entry.answers[0].0, &entry.answers[0].1.addrs),
        (DEFAULT_VIEW, &want),
        "{case}: snapshot"
    );

    let responder = Responder::new(&snapshot);
    assert_eq!(
        responder_addrs(&responder, WWW, RecordType::A, CLIENT_V4.into()),
        want,
        "{case}: responder"
    );

    if let Some(dp) = dataplane {
        dp.table.publish(&snapshot).expect("publishing");
        let frame = Frame::udp(
            CLIENT_V4.into(),
            SERVER_V4.into(),
            wire(&query(7, WWW, RecordType::A)),
        );
        let expect = Expect {
            rtype: RecordType::A,
            ttl: 30,
            answers: Answers::All(want),
        };
        common::ask(dp, &format!("{case}: fast path"), &frame, &expect);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_leave_a_link_over_its_threshold_and_come_back() {
    let config =
        Config::parse(WORLD, Path::new("links-world.toml")).unwrap_or_else(|e| panic!("{e}"));
    let net = FakeNet::new("world", &["wan1", "wan2"]);
    let mut world = World::new(&config, HealthSupervisor::new());
    let mut links = Uplinks::start_with_root(&config, net.root.clone());
    // Loaded once: every snapshot is published into the same maps, as gslbd does.
    let mut dataplane =
        common::privileged().then(|| Dataplane::load(None).expect("loading the XDP object"));

    // Quiet: both answer, and samples that change no link's state ask for no recompute.
    let (samples, triggers) = until_over(&mut links, &mut world, &[]).await;
    assert_eq!(
        triggers, 0,
        "nothing over in {samples} samples, yet a trigger"
    );
    for _ in 0..5 {
        timeout(WAIT, links.changed()).await.expect("a sample");
        assert!(
            !links.apply(&mut world),
            "a sample that moves no link is no trigger: {:?}",
            world.links()
        );
    }
    assert_answers("quiet", &world, dataplane.as_mut(), &[L1_ADDR, L2_ADDR]);

    // (case, rates of wan1 and wan2, links over then, the answer)
    type Step<'a> = (&'a str, u64, u64, &'a [&'a str], &'a [&'a str]);
    let steps: [Step; 3] = [
        ("L1 over", BUSY, QUIET, &["L1"], &[L2_ADDR]),
        (
            "both over: answered anyway",
            BUSY,
            BUSY,
            &["L1", "L2"],
            &[L1_ADDR, L2_ADDR],
        ),
        ("both back under", QUIET, QUIET, &[], &[L1_ADDR, L2_ADDR]),
    ];
    for (case, wan1, wan2, over, want) in steps {
        net.set_rate("wan1", wan1);
        net.set_rate("wan2", wan2);
        let (samples, triggers) = until_over(&mut links, &mut world, over).await;
        // One trigger per link that moved; the samples that did not move one cost nothing.
        assert!(
            (1..=2).contains(&triggers) && samples > triggers,
            "{case}: {triggers} triggers in {samples} samples"
        );
        assert_answers(case, &world, dataplane.as_mut(), want);
    }
}
