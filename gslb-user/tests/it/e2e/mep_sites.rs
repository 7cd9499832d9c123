//! Three gslbd sites exchanging state over MEP, end to end: parents A and B, and C, a child of
//! A, each a real gslbd process with its own configuration and its own services (TCP backends
//! with TCP monitors), all on the loopback of one network namespace (127.0.0.1, .2 and .3 are
//! their MEP addresses), answering DNS on 192.0.2.53 (ports 5301, 5302 and 5303) to `dig` in
//! the client namespace. A's MEP links to B and to C go through proxies the test can cut.
//! C runs with the XDP fast path (attached to the server's veth), A and B with the responder
//! only.
//!
//! Services: `a` at A, `b` at B, `c1` and `c2` at C. A monitors `a`; B monitors `b` and, as
//! well, `c2`; C monitors `c1` and `c2`. One GSLB domain answers all up services' addresses.
//!
//! 1. Both parents answer all four, identically.
//! 2. The child refuses GSLB queries (its fast path passes them) and serves static data.
//! 3. `c1`'s backend stops: C's monitor sees it, and both parents drop it (over MEP).
//! 4. The A–C link is cut: A has no MEP path to C, so C's services are DOWN at A; B's path to
//!    C was through A (A relays its child), so C is unreachable for B too, but B monitors `c2`
//!    itself and keeps it. B does not adopt C: A, its parent, is up in B's view.
//! 5. The A–B link is cut too: B sees A down and, first in A's backup list, adopts C (C has
//!    lost A): B answers its own and C's services, A only its own.
//! 6. The A–B link is restored: A sees C again, through B. Then the A–C link: C goes back to
//!    A, a planned handover (B lets go, A takes over relaying C), during which neither parent
//!    may change its answers, even for a moment.
//!
//! Needs root (namespaces, XDP). Every wait is bounded.

use std::{
    collections::BTreeSet,
    net::{IpAddr, SocketAddr},
    path::PathBuf,
    time::{Duration, Instant},
};

use crate::mep_keys;

use gslb_common::Counter;
use gslb_tests::{DigReply, Lab, ProxyMode, SERVER_IF, SERVER_V4, TcpProxy, TempPaths, privileged};
use gslb_user::dataplane::pinned_counters;

/// The longest any state takes to travel (monitors, MEP, adoption, reconnect backoff).
const WAIT: Duration = Duration::from_secs(30);
const MEP_PORT: u16 = 3011;
/// Where A reaches B and C: a proxy in front of each.
const PROXY_PORT: u16 = 3012;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Site {
    A,
    B,
    C,
}

impl Site {
    fn name(self) -> &'static str {
        match self {
            Site::A => "A",
            Site::B => "B",
            Site::C => "C",
        }
    }

    fn dns_port(self) -> u16 {
        5301 + self as u16
    }

    fn mep_ip(self) -> IpAddr {
        IpAddr::from([127, 0, 0, 1 + self as u8])
    }
}

/// (name, site, backend address, answer address).
const SERVICES: [(&str, Site, &str, &str); 4] = [
    ("a", Site::A, "127.0.0.1:8001", "198.51.100.1"),
    ("b", Site::B, "127.0.0.2:8002", "198.51.100.2"),
    ("c1", Site::C, "127.0.0.3:8003", "198.51.100.3"),
    ("c2", Site::C, "127.0.0.3:8004", "198.51.100.4"),
];

/// The configuration of `me`: the same sites and services everywhere; its own monitors; and
/// for A, B and C reached through the proxies.
fn config(me: Site, monitored: &[&str]) -> String {
    let port = |to: Site| {
        if me == Site::A && to != Site::A {
            PROXY_PORT
        } else {
            MEP_PORT
        }
    };
    let mut text = format!(
        r#"[server]
listen = ["{SERVER_V4}"]
dns_port = {dns}
site = "{name}"

[mep]
listen = "{mep_ip}:{MEP_PORT}"
heartbeat_ms = 200
dead_after_ms = 1000

[[zone]]
name = "example.com"
ns = ["ns1.example.com"]
soa.rname = "hostmaster.example.com"
  [[zone.record]]
  name = "ns1"
  type = "A"
  value = "{SERVER_V4}"

[[site]]
name = "A"
ip = "127.0.0.1"
mep_port = {a}
backup_parents = ["B"]

[[site]]
name = "B"
ip = "127.0.0.2"
mep_port = {b}
backup_parents = ["A"]

[[site]]
name = "C"
ip = "127.0.0.3"
mep_port = {c}
role = "child"
parent = "A"

[[monitor]]
name = "tcp"
type = "tcp"
interval_ms = 200
timeout_ms = 500
fall = 2
rise = 1
"#,
        dns = me.dns_port(),
        name = me.name(),
        mep_ip = me.mep_ip(),
        a = port(Site::A),
        b = port(Site::B),
        c = port(Site::C),
    );
    for (name, site, backend, answer) in SERVICES {
        let addr: SocketAddr = backend.parse().unwrap();
        let monitors = if monitored.contains(&name) {
            "monitors = [\"tcp\"]\n"
        } else {
            ""
        };
        text += &format!(
            "\n[[service]]\nname = \"{name}\"\nip = \"{}\"\nport = {}\npublic_ip = \"{answer}\"\nsite = \"{}\"\n{monitors}",
            addr.ip(),
            addr.port(),
            site.name()
        );
    }
    text += "\n[[gslb_domain]]\nname = \"www.example.com\"\nanswer = \"all\"\nservices = [\"a\", \"b\", \"c1\", \"c2\"]\n";
    mep_keys::keyed(&text, me.name())
}

/// `name` `rtype` asked of `site`: the status and the addresses answered.
fn ask(lab: &Lab, site: Site, name: &str, rtype: &str) -> (String, BTreeSet<String>) {
    let out = lab.dig(
        IpAddr::V4(SERVER_V4),
        &["-p", &site.dns_port().to_string(), name, rtype],
    );
    let reply = DigReply::parse(&out);
    let addrs = reply
        .answer
        .iter()
        .filter_map(|r| r.split_whitespace().nth(3).map(str::to_owned))
        .collect();
    (reply.status, addrs)
}

/// The answer addresses of `services`.
fn of(services: &[&str]) -> BTreeSet<String> {
    services
        .iter()
        .map(|s| SERVICES.iter().find(|x| x.0 == *s).unwrap().3.to_owned())
        .collect()
}

/// Waits until parent A answers `at_a` and B `at_b` (NOERROR both), for at most WAIT.
fn parents_answer(lab: &Lab, at_a: &[&str], at_b: &[&str], what: &str) {
    let want = (of(at_a), of(at_b));
    let deadline = Instant::now() + WAIT;
    loop {
        let (sa, a) = ask(lab, Site::A, "www.example.com", "A");
        let (sb, b) = ask(lab, Site::B, "www.example.com", "A");
        if sa == "NOERROR" && sb == "NOERROR" && (&a, &b) == (&want.0, &want.1) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: A answers {sa} {a:?} (want {:?}), B answers {sb} {b:?} (want {:?})",
            want.0,
            want.1
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Checks for `hold` that the parents keep answering `at_a` and `at_b`.
fn parents_keep_answering(lab: &Lab, at_a: &[&str], at_b: &[&str], hold: Duration, what: &str) {
    let until = Instant::now() + hold;
    while Instant::now() < until {
        assert_eq!(
            ask(lab, Site::A, "www.example.com", "A").1,
            of(at_a),
            "{what}: A"
        );
        assert_eq!(
            ask(lab, Site::B, "www.example.com", "A").1,
            of(at_b),
            "{what}: B"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn parents_answer_consistently_from_mep_state() {
    if !privileged("parents_answer_consistently_from_mep_state") {
        return;
    }
    let mut lab = Lab::new("mep");
    // The configuration files, removed on drop.
    let dir = std::env::temp_dir().join(&lab.server_ns);
    let _files = TempPaths(vec![dir.clone()]);
    std::fs::create_dir_all(&dir).unwrap();
    let pin_path = PathBuf::from(format!("/sys/fs/bpf/{}", lab.server_ns));

    let backend = |lab: &Lab, name: &str| {
        let addr = SERVICES
            .iter()
            .find(|s| s.0 == name)
            .unwrap()
            .2
            .parse()
            .unwrap();
        lab.tcp_backend(&lab.server_ns, addr)
    };
    let (_a, _b, mut c1, _c2) = (
        backend(&lab, "a"),
        backend(&lab, "b"),
        Some(backend(&lab, "c1")),
        backend(&lab, "c2"),
    );

    // A's links to B and to C (A opens both: the lower IP, and C's parent).
    let proxy = |to: Site| {
        let listen = SocketAddr::new(to.mep_ip(), PROXY_PORT);
        let target = SocketAddr::new(to.mep_ip(), MEP_PORT);
        lab.in_netns(&lab.server_ns, || TcpProxy::start(listen, target))
    };
    let (a_to_b, a_to_c) = (proxy(Site::B), proxy(Site::C));

    let gslbd = env!("CARGO_BIN_EXE_gslbd");
    for (site, monitored) in [
        (Site::A, &["a"][..]),
        (Site::B, &["b", "c2"]),
        (Site::C, &["c1", "c2"]),
    ] {
        let path = dir.join(format!("{}.toml", site.name()));
        std::fs::write(&path, config(site, monitored)).unwrap();
        let mut cmd = lab.nsenter(&lab.server_ns, gslbd.as_ref());
        let control = dir.join(format!("{}.sock", site.name()));
        cmd.args([
            "--config",
            path.to_str().unwrap(),
            "--control",
            control.to_str().unwrap(),
        ]);
        if site == Site::C {
            cmd.args([
                "--interface",
                SERVER_IF,
                "--xdp-mode",
                "skb",
                "--pin-path",
                pin_path.to_str().unwrap(),
            ]);
        } else {
            cmd.arg("--no-xdp");
        }
        lab.spawn_until(cmd, "gslbd: ready", Duration::from_secs(30));
    }

    // 1. One picture of the world at both parents.
    parents_answer(
        &lab,
        &["a", "b", "c1", "c2"],
        &["a", "b", "c1", "c2"],
        "all sites linked",
    );

    // 2. The child: GSLB names REFUSED (its fast path has no entry, so it passes them, counted
    //    as unknown names), static data answered.
    let before = pinned_counters(&pin_path).expect("C's counters");
    for rtype in ["A", "AAAA"] {
        let (status, addrs) = ask(&lab, Site::C, "www.example.com", rtype);
        assert_eq!(
            (status.as_str(), addrs.len()),
            ("REFUSED", 0),
            "C, www {rtype}"
        );
    }
    let (status, addrs) = ask(&lab, Site::C, "ns1.example.com", "A");
    assert_eq!(
        (status.as_str(), addrs),
        ("NOERROR", BTreeSet::from([SERVER_V4.to_string()])),
        "C, static data"
    );
    let after = pinned_counters(&pin_path).expect("C's counters");
    assert_eq!(
        after.hits(),
        before.hits(),
        "C's fast path answered a GSLB query"
    );
    assert!(
        after.get(Counter::UnknownName) >= before.get(Counter::UnknownName) + 2,
        "C's fast path saw the GSLB queries: {:?}",
        after.delta(&before)
    );

    // 3. A service only C monitors goes down: both parents learn it over MEP.
    c1.take();
    parents_answer(&lab, &["a", "b", "c2"], &["a", "b", "c2"], "c1 down at C");
    c1 = Some(backend(&lab, "c1"));
    parents_answer(
        &lab,
        &["a", "b", "c1", "c2"],
        &["a", "b", "c1", "c2"],
        "c1 back",
    );

    // 4. A loses C: C's services are DOWN at A; at B too (C's state came through A), except
    //    c2, which B monitors itself. B does not adopt C while A is up.
    a_to_c.set(ProxyMode::Cut);
    parents_answer(&lab, &["a", "b"], &["a", "b", "c2"], "A–C cut");
    parents_keep_answering(
        &lab,
        &["a", "b"],
        &["a", "b", "c2"],
        Duration::from_secs(3),
        "A–C cut, A up",
    );
    assert_eq!(ask(&lab, Site::C, "www.example.com", "A").0, "REFUSED");

    // 5. A loses B too: B, A's first backup, adopts C; A is alone.
    a_to_b.set(ProxyMode::Cut);
    parents_answer(
        &lab,
        &["a"],
        &["b", "c1", "c2"],
        "A isolated, C adopted by B",
    );

    // 6. A–B back: one picture again, C's state coming to A through B, its adopter. Then A–C
    //    back: once A has reached C (C then leaves B for A), the answers must not move.
    a_to_b.set(ProxyMode::Open);
    let all = ["a", "b", "c1", "c2"];
    parents_answer(&lab, &all, &all, "A–B restored, C with B");
    let dialed = a_to_c.forwarded();
    a_to_c.set(ProxyMode::Open);
    let deadline = Instant::now() + WAIT;
    while a_to_c.forwarded() == dialed {
        assert!(Instant::now() < deadline, "A does not call C again");
        std::thread::sleep(Duration::from_millis(20));
    }
    parents_keep_answering(
        &lab,
        &all,
        &all,
        Duration::from_secs(3),
        "C handed back from B to A",
    );

    drop(lab); // SIGTERM to every gslbd: C detaches and unpins
    assert!(!pin_path.exists(), "C's pins left behind");
    drop((a_to_b, a_to_c, c1));
}
