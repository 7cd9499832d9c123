//! Dynamic RTT across two real gslbd sites exchanging their RTT columns over MEP (issue 6's
//! scenario, end to end). Three namespaces:
//!
//! - "ldns": the resolver, 198.51.100.53 on its loopback, which asks both sites with `dig`;
//! - "site1": gslbd at site "site1", DNS on 192.0.2.2, with the XDP fast path attached to its
//!   link to the resolver; the link delays frames towards the resolver by 10 ms;
//! - "site2": gslbd at site "site2", DNS on 192.0.2.6, responder only (`--no-xdp`); its link
//!   delays frames towards the resolver by 40 ms.
//!
//! The delays are [`TapWire`]s (the kernel has no `sch_netem`), which can also drop frames. The
//! two gslbds are the two MEP parents of one flat deployment, linked by a veth of their own
//! (203.0.113.1 and .2); site1 (the lower address) opens the link through a [`TcpProxy`] in
//! site2's namespace, which the test can cut. Both probe (`[rtt]`, short intervals). One GSLB
//! domain, `method = "rtt"` with `fallback = "roundrobin"`, over one service per site.
//!
//! 1. While the wires drop the probes (ICMP, and TCP and UDP to port 53 of the resolver), the
//!    resolver is known to both sites but has no RTT: both answer the fallback, each address in
//!    turn; site1 from XDP.
//! 2. Probes let through: each site measures its own column, MEP brings the other's, and both
//!    answer site1's service (10 ms); `gslbctl ldns` at each shows both columns, the same
//!    (RTT and protocol) at both.
//! 3. Delays swapped: both answer site2's service.
//! 4. MEP cut: each site drops the other's column (docs/mep.md: "the whole column when its
//!    link went") and counts the other's service DOWN (unreachable, not monitored here), so
//!    each answers its own. 5. MEP restored: both columns again, both answer site2's service.
//!
//! Needs root (namespaces, TAP, XDP). Every wait is bounded; namespaces, processes, pins and
//! files go on drop, also when an assertion fails.

use std::{
    collections::BTreeMap,
    net::{IpAddr, Ipv4Addr, SocketAddr},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use gslb_tests::{
    DigReply, Direction, Netns, Processes, ProxyMode, TapWire, TcpProxy, TempPaths, gslbctl,
    ipv4_packet, ipv4_ports, privileged,
};
use gslb_user::dataplane::pinned_counters;

use crate::mep_keys;

/// The resolver (on the LDNS namespace's loopback).
const LDNS: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 53);
/// (LDNS end, site end) of each site's link to the resolver, /30s.
const LINK1: (Ipv4Addr, Ipv4Addr) = (Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(192, 0, 2, 2));
const LINK2: (Ipv4Addr, Ipv4Addr) = (Ipv4Addr::new(192, 0, 2, 5), Ipv4Addr::new(192, 0, 2, 6));
/// The sites' MEP addresses (a veth between the two, /30).
const MEP1: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 1);
const MEP2: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 2);
const MEP_PORT: u16 = 3011;
/// Where site1 reaches site2's MEP listener: the proxy in front of it.
const PROXY_PORT: u16 = 3012;
/// The services' answer addresses.
const WEB1: &str = "203.0.113.101";
const WEB2: &str = "203.0.113.102";
const NAME: &str = "www.example.com";
/// The longest any step takes (probes, MEP, republish pacing, reconnect backoff ≤ 5 s).
const WAIT: Duration = Duration::from_secs(20);
/// Measured RTTs are the wire's delay plus this much at most (a busy 2-core VM; the probe
/// tolerance keeps a stored value from moving by less than 5 ms).
const SLACK_MS: f64 = 12.0;

const IPPROTO_ICMP: u8 = 1;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Site {
    One,
    Two,
}

use Site::{One, Two};

impl Site {
    fn name(self) -> &'static str {
        match self {
            One => "site1",
            Two => "site2",
        }
    }

    fn dns(self) -> Ipv4Addr {
        match self {
            One => LINK1.1,
            Two => LINK2.1,
        }
    }
}

/// `me`'s configuration: the same sites, services and domain everywhere; site1 reaches site2
/// through the proxy.
fn config(me: Site) -> String {
    let site2_port = if me == One { PROXY_PORT } else { MEP_PORT };
    mep_keys::keyed(
        &format!(
            r#"[server]
listen = ["{dns}"]
site = "{site}"

[mep]
heartbeat_ms = 200
dead_after_ms = 1000

[rtt]
interval_ms = 300
timeout_ms = 300

[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

[[site]]
name = "site1"
ip = "{MEP1}"
mep_port = {MEP_PORT}
# Its links reach site2 through a proxy in site2's namespace, so they arrive from site2's own
# address: the source is not site1's (its key still proves it).
nat = true

[[site]]
name = "site2"
ip = "{MEP2}"
mep_port = {site2_port}

[[service]]
name = "web1"
ip = "{WEB1}"
site = "site1"

[[service]]
name = "web2"
ip = "{WEB2}"
site = "site2"

[[gslb_domain]]
name = "{NAME}"
ttl = 5
services = ["web1", "web2"]
method = "rtt"
fallback = "roundrobin"
"#,
            dns = me.dns(),
            site = me.name(),
        ),
        me.name(),
    )
}

/// The wires' firewall while probing is blocked: frames from the site to the resolver that
/// are probes (ICMP, TCP or UDP to port 53). DNS replies (UDP from port 53) and ARP pass.
fn probes(direction: Direction, frame: &[u8]) -> bool {
    let Some((proto, _, dst)) = ipv4_packet(frame) else {
        return false;
    };
    direction == Direction::BToA
        && dst == LDNS
        && (proto == IPPROTO_ICMP || ipv4_ports(frame).is_some_and(|(_, dport)| dport == 53))
}

/// The lab: namespaces, wires, the MEP proxy, the gslbds. Fields drop in order: the
/// processes first (SIGTERM: site1 detaches XDP and unpins), the namespaces and files last.
struct Sites {
    gslbds: Processes,
    proxy: TcpProxy,
    wires: [TapWire; 2],
    ldns: Netns,
    site_ns: [Netns; 2],
    pin_path: PathBuf,
    dir: PathBuf,
    _files: TempPaths,
}

impl Sites {
    fn start() -> Sites {
        let dir = std::env::temp_dir().join(format!("gslb-rtt-mep-{}", std::process::id()));
        let pin_path = PathBuf::from(format!("/sys/fs/bpf/gslb-rtt-mep-{}", std::process::id()));
        let files = TempPaths(vec![dir.clone(), pin_path.clone()]);
        std::fs::create_dir_all(&dir).unwrap();

        let ldns = Netns::new("rttmep", "ldns");
        let site_ns = [Netns::new("rttmep", "s1"), Netns::new("rttmep", "s2")];
        // Site ends second: their frames to the resolver (BToA) carry the delay, so that a
        // probe's sample has the delay in force when it left.
        let wires = [
            TapWire::new(&ldns, "to-s1", &site_ns[0], "ldns0"),
            TapWire::new(&ldns, "to-s2", &site_ns[1], "ldns0"),
        ];
        ldns.ip(&["addr", "add", &format!("{LDNS}/32"), "dev", "lo"]);
        for ((ns, (ldns_end, site_end)), to) in
            site_ns.iter().zip([LINK1, LINK2]).zip(["to-s1", "to-s2"])
        {
            ldns.ip(&["addr", "add", &format!("{ldns_end}/30"), "dev", to]);
            ns.ip(&["addr", "add", &format!("{site_end}/30"), "dev", "ldns0"]);
            ns.ip(&[
                "route",
                "add",
                &format!("{LDNS}/32"),
                "via",
                &ldns_end.to_string(),
            ]);
        }
        // MEP: a veth of the sites' own.
        site_ns[0].ip(&[
            "link",
            "add",
            "mep0",
            "type",
            "veth",
            "peer",
            "name",
            "mep0",
            "netns",
            &site_ns[1].name,
        ]);
        for (ns, addr) in site_ns.iter().zip([MEP1, MEP2]) {
            ns.ip(&["addr", "add", &format!("{addr}/30"), "dev", "mep0"]);
            ns.ip(&["link", "set", "mep0", "up"]);
        }
        let proxy = site_ns[1].enter(|| {
            TcpProxy::start(
                SocketAddr::from((MEP2, PROXY_PORT)),
                SocketAddr::from((MEP2, MEP_PORT)),
            )
        });

        let mut sites = Sites {
            gslbds: Processes::default(),
            proxy,
            wires,
            ldns,
            site_ns,
            pin_path,
            dir,
            _files: files,
        };
        sites.set_delays(10, 40);
        sites.block_probes(true);
        let gslbd = Path::new(env!("CARGO_BIN_EXE_gslbd"));
        for site in [One, Two] {
            let config_path = sites.dir.join(format!("{}.toml", site.name()));
            std::fs::write(&config_path, config(site)).unwrap();
            let mut cmd = sites.site_ns[site as usize].nsenter(gslbd);
            cmd.arg("--config")
                .arg(&config_path)
                .arg("--control")
                .arg(sites.control(site));
            if site == One {
                cmd.args(["--interface", "ldns0", "--xdp-mode", "skb"])
                    .arg("--pin-path")
                    .arg(&sites.pin_path);
            } else {
                cmd.arg("--no-xdp");
            }
            sites
                .gslbds
                .spawn_until(cmd, "gslbd: ready", Duration::from_secs(30));
        }
        sites
    }

    fn control(&self, site: Site) -> PathBuf {
        self.dir.join(format!("{}.sock", site.name()))
    }

    /// Round-trip delays (ms) of the resolver's links to site1 and site2.
    fn set_delays(&self, site1: u64, site2: u64) {
        for (wire, ms) in self.wires.iter().zip([site1, site2]) {
            wire.set_delay(Duration::ZERO, Duration::from_millis(ms));
        }
    }

    fn block_probes(&self, block: bool) {
        for wire in &self.wires {
            wire.set_drop(block.then(|| Box::new(probes) as _));
        }
    }

    /// The resolver asks `site` for www A: the addresses answered, and (site1) how many
    /// fast-path hits the query made.
    fn ask(&self, site: Site) -> (Vec<String>, Option<u64>) {
        let hits = || {
            (site == One).then(|| {
                pinned_counters(&self.pin_path)
                    .expect("site1's counters")
                    .hits()
            })
        };
        let before = hits();
        let out = self.ldns.dig(
            IpAddr::V4(site.dns()),
            &["-b", &LDNS.to_string(), NAME, "A"],
        );
        let hits = hits().zip(before).map(|(after, before)| after - before);
        let reply = DigReply::parse(&out);
        assert_eq!(reply.status, "NOERROR", "{} answered:\n{out}", site.name());
        let addrs = reply
            .answer
            .iter()
            .filter_map(|r| r.split_whitespace().nth(3).map(str::to_owned))
            .collect();
        (addrs, hits)
    }

    /// Asks `site` `n` times; every answer is one address, and site1's come from XDP. The
    /// addresses answered, in order.
    fn ask_n(&self, site: Site, n: usize) -> Vec<String> {
        (0..n)
            .map(|_| {
                let (addrs, hits) = self.ask(site);
                assert_eq!(
                    addrs.len(),
                    1,
                    "{}: one address per answer: {addrs:?}",
                    site.name()
                );
                if let Some(hits) = hits {
                    assert_eq!(hits, 1, "site1 answers from XDP ({addrs:?})");
                }
                addrs.into_iter().next().unwrap()
            })
            .collect()
    }

    /// `gslbctl ldns` at `site`.
    fn ldns_report(&self, site: Site) -> String {
        let out = gslbctl(env!("CARGO_BIN_EXE_gslbctl"), &self.control(site), "ldns");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "gslbctl ldns at {}: {}{text}",
            site.name(),
            String::from_utf8_lossy(&out.stderr)
        );
        text
    }

    /// Both sites' reports, for failure messages.
    fn reports(&self) -> String {
        format!(
            "site1's gslbctl ldns:\n{}site2's gslbctl ldns:\n{}",
            self.ldns_report(One),
            self.ldns_report(Two)
        )
    }

    /// Waits until both sites answer the resolver `want` (five times in a row) and their
    /// tables hold, for it, exactly the columns `rtts` (site → (RTT ms it must be near, local
    /// at that site?)) — per site, since after a MEP cut each has its own.
    fn converge(&self, what: &str, want: [&str; 2], rtts: [&[(Site, u64)]; 2]) {
        let deadline = Instant::now() + WAIT;
        for (i, site) in [One, Two].into_iter().enumerate() {
            loop {
                let table = columns(&self.ldns_report(site), LDNS);
                let table_ok = table.len() == rtts[i].len()
                    && rtts[i].iter().all(|(s, ms)| {
                        table.get(s.name()).is_some_and(|c| {
                            c.local == (*s == site)
                                && c.rtt_ms >= *ms as f64
                                && c.rtt_ms < *ms as f64 + SLACK_MS
                        })
                    });
                // Five in a row once the table is right; one (for the message) until then.
                let answers = if table_ok {
                    self.ask_n(site, 5)
                } else {
                    self.ask(site).0
                };
                if table_ok && answers.iter().all(|a| a == want[i]) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{what}: {} answers {answers:?} (want {}), its table for {LDNS}: {table:?} (want {:?})\n{}",
                    site.name(),
                    want[i],
                    rtts[i],
                    self.reports()
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

/// One site's cell of an LDNS row, as `gslbctl ldns` prints it.
#[derive(Debug)]
struct Column {
    rtt_ms: f64,
    protocol: String,
    local: bool,
}

/// The columns `gslbctl ldns` shows for `ldns`, by site; none when it has no RTT yet.
fn columns(report: &str, ldns: Ipv4Addr) -> BTreeMap<String, Column> {
    let head = format!("ldns {ldns} ");
    report
        .lines()
        .skip_while(|l| !l.starts_with(&head))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(
            |l| match l.split_whitespace().collect::<Vec<_>>().as_slice() {
                // site, "10.123", "ms", protocol, age, confirmed, ["(local)"]
                [site, rtt, "ms", protocol, _age, _confirmed, rest @ ..] => Some((
                    (*site).to_owned(),
                    Column {
                        rtt_ms: rtt.parse().ok()?,
                        protocol: (*protocol).to_owned(),
                        local: rest == ["(local)"],
                    },
                )),
                _ => None,
            },
        )
        .collect()
}

#[test]
fn both_sites_answer_the_nearest_site_from_both_rtt_columns() {
    if !privileged("rtt_mep_netns") {
        return;
    }
    let started = Instant::now();
    let sites = Sites::start();
    eprintln!(
        "[{:.1} s] 0. lab and gslbds up",
        started.elapsed().as_secs_f64()
    );

    // 1. Probes dropped on the wires: the resolver has no RTT anywhere. Once MEP is up (until
    //    then the other site's service is DOWN), both sites answer by the fallback, round
    //    robin. The queries make the resolver known to both sites (site1 from its XDP LDNS
    //    map, site2 from its responder), which probe it in vain.
    let deadline = Instant::now() + WAIT;
    for site in [One, Two] {
        loop {
            let answers = sites.ask_n(site, 6);
            if [WEB1, WEB2].iter().all(|w| answers.iter().any(|a| a == w)) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{}: the fallback (round robin) never answered both services: {answers:?}\n{}",
                site.name(),
                sites.reports()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let deadline = Instant::now() + WAIT;
    for site in [One, Two] {
        loop {
            let report = sites.ldns_report(site);
            let probed = report
                .lines()
                .skip_while(|l| !l.starts_with(&format!("ldns {LDNS} ")))
                .take(2)
                .collect::<Vec<_>>();
            let rounds = probed.first().and_then(|l| {
                l.split("rounds ")
                    .nth(1)?
                    .split_whitespace()
                    .next()?
                    .parse::<u64>()
                    .ok()
            });
            if rounds.is_some_and(|r| r >= 1) {
                assert_eq!(
                    probed.get(1).map(|l| l.trim()),
                    Some("no RTT yet"),
                    "{}:\n{report}",
                    site.name()
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{} never probed {LDNS}:\n{report}",
                site.name()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    for site in [One, Two] {
        let answers = sites.ask_n(site, 6);
        assert!(
            [WEB1, WEB2].iter().all(|w| answers.iter().any(|a| a == w)),
            "{}: a probed resolver without an RTT still gets the fallback: {answers:?}",
            site.name()
        );
    }

    eprintln!(
        "[{:.1} s] 1. fallback before any RTT: done",
        started.elapsed().as_secs_f64()
    );

    // 2. Probes through: each site measures its column (by the first probe type that gets
    //    through: ICMP, or TCP or DNS when the wire opened during a round), MEP carries it to
    //    the other, and both answer site1's service.
    sites.block_probes(false);
    let both = [(One, 10), (Two, 40)];
    sites.converge(
        "site1 at 10 ms, site2 at 40 ms",
        [WEB1, WEB1],
        [&both, &both],
    );
    // One picture: each column as its site measured it (RTT and protocol), at both sites.
    let deadline = Instant::now() + WAIT;
    loop {
        let (t1, t2) = (
            columns(&sites.ldns_report(One), LDNS),
            columns(&sites.ldns_report(Two), LDNS),
        );
        let same = |c1: &Column, c2: &Column| c1.rtt_ms == c2.rtt_ms && c1.protocol == c2.protocol;
        if t1.len() == 2
            && t1
                .iter()
                .all(|(s, c1)| t2.get(s).is_some_and(|c2| same(c1, c2)))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sites disagree on the columns:\n{}",
            sites.reports()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "[{:.1} s] 2. both answer site1 (10 ms): done",
        started.elapsed().as_secs_f64()
    );

    // 3. Delays swapped: both columns follow, both answer site2's service.
    sites.set_delays(40, 10);
    let swapped = [(One, 40), (Two, 10)];
    sites.converge("delays swapped", [WEB2, WEB2], [&swapped, &swapped]);
    eprintln!(
        "[{:.1} s] 3. swapped, both answer site2: done",
        started.elapsed().as_secs_f64()
    );

    // 4. MEP cut: each site keeps only its own column, and the other site's service is DOWN
    //    there (unreachable, not monitored locally): each answers its own.
    sites.proxy.set(ProxyMode::Cut);
    sites.converge("MEP cut", [WEB1, WEB2], [&[(One, 40)], &[(Two, 10)]]);
    eprintln!(
        "[{:.1} s] 4. MEP cut, own columns only: done",
        started.elapsed().as_secs_f64()
    );

    // 5. MEP back: the columns are exchanged again (on the new link), and both answer site2's.
    sites.proxy.set(ProxyMode::Open);
    sites.converge("MEP restored", [WEB2, WEB2], [&swapped, &swapped]);

    println!("{}", sites.reports());
    let mut sites = sites;
    sites.gslbds.stop_all();
    assert!(
        !sites.pin_path.exists(),
        "site1's pins left behind (gslbd did not exit cleanly)"
    );
    drop(sites);
    println!("rtt_mep_netns: {:.1} s", started.elapsed().as_secs_f64());
}
