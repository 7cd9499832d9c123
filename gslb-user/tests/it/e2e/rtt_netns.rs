//! Dynamic RTT end to end, in network namespaces: one "LDNS" host and two sites whose links to
//! it have 10 ms and 40 ms of delay. Each site runs a prober; site A learns the resolvers from
//! its XDP fast path (the queries they send it), site B from its recorder (as the responder
//! feeds it). The kernel has no `sch_netem`, so the delays (and the LDNS firewalls) are
//! [`TapWire`]s: TAP links whose frames a thread forwards after the delay, or drops.
//!
//! The LDNS host has one address per behaviour, on its loopback:
//! - `.53` answers everything (ICMP echo; a closed TCP port resets): measured by ICMP;
//! - `.54` drops ICMP both ways but resets TCP: measured by TCP (its DNS probe gets no port
//!   unreachable back);
//! - `.55` answers only DNS (a UDP responder; ICMP and TCP dropped): measured by DNS;
//! - `.56` answers nothing: no RTT;
//! - `.57` never queries: never probed.
//!
//! Needs root (namespaces, TAP, XDP).

use std::{
    net::{IpAddr, Ipv4Addr, UdpSocket},
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    time::{Duration, Instant},
};

use gslb_tests::{Direction, Netns, TapWire, ipv4_packet, ipv4_ports, privileged};
use gslb_user::{
    compile::Snapshot,
    config::Config,
    dataplane::Dataplane,
    dataplane::XdpMode,
    probe::{
        LdnsRecorder, NetProber, ProbeKind, ProbeSettings, ProbeSupervisor, RttHandle,
        format_report,
    },
};

const SITE_A: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 2);
const SITE_B: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 2);
const ALL: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 53);
const NO_ICMP: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 54);
const DNS_ONLY: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 55);
const SILENT: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 56);
const NEVER_ASKED: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 57);
const QUERYING: [Ipv4Addr; 4] = [ALL, NO_ICMP, DNS_ONLY, SILENT];
const TOLERANCE: Duration = Duration::from_millis(5);
/// How far one sample may stray on this shared machine. A stored RTT is one sample (the first
/// that differed from the last stored by more than `TOLERANCE`), and the samples after it stay
/// within the tolerance of it, so a stray one stays stored: runs stored 35.4 for 30 ms and
/// 45.5 for 40. Convergence is thus checked within both (the 10 and 40 ms links stay 30 apart).
const SAMPLE_NOISE: Duration = Duration::from_millis(5);

const IPPROTO_ICMP: u8 = 1;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// (protocol, source, destination, source port, destination port) of an IPv4 frame; ports 0
/// for other protocols than UDP and TCP.
fn packet(frame: &[u8]) -> Option<(u8, Ipv4Addr, Ipv4Addr, u16, u16)> {
    let (proto, src, dst) = ipv4_packet(frame)?;
    let (sport, dport) = ipv4_ports(frame).unwrap_or((0, 0));
    Some((proto, src, dst, sport, dport))
}

/// The firewalls in front of the LDNS addresses. Each lets its resolver's own queries out
/// and their responses in; the rest depends on the resolver.
fn ldns_firewall(_: Direction, frame: &[u8]) -> bool {
    let Some((proto, src, dst, sport, dport)) = packet(frame) else {
        return false;
    };
    let involves = |a: Ipv4Addr| src == a || dst == a;
    let own_dns = (proto == IPPROTO_UDP && src == SILENT && dport == 53)
        || (proto == IPPROTO_UDP && dst == SILENT && sport == 53);
    (involves(NO_ICMP) && proto == IPPROTO_ICMP)
        || (involves(DNS_ONLY) && (proto == IPPROTO_ICMP || proto == IPPROTO_TCP))
        || (involves(SILENT) && !own_dns)
}

/// The site's DNS configuration: served on its link address, so that the XDP program parses
/// (and records) the resolvers' queries.
fn site_config(listen: Ipv4Addr) -> Snapshot {
    let text = format!(
        r#"
[server]
listen = ["{listen}"]

[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

[[site]]
name = "site"
ip = "{listen}"

[[service]]
name = "web"
ip = "198.51.100.10"
site = "site"

[[gslb_domain]]
name = "www.example.com"
services = ["web"]
"#
    );
    Snapshot::from_config(
        &Config::parse(&text, Path::new("rtt-site.toml")).expect("site configuration"),
    )
}

fn settings() -> ProbeSettings {
    ProbeSettings {
        interval: ms(300),
        timeout: ms(300),
        tolerance: TOLERANCE,
        tick: ms(50),
        ..ProbeSettings::default()
    }
}

/// A site: a thread in its namespace running a prober (and, for `xdp`, the fast path on
/// `interface` with a feed of its LDNS map). Stops when dropped.
struct Site {
    handle: RttHandle,
    recorder: LdnsRecorder,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Site {
    fn start(ns: &Netns, name: &'static str, xdp: Option<(&'static str, Ipv4Addr)>) -> Site {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = ns.spawn(move || {
            // The probes are timed on this thread: woken late, it would add to the RTT.
            gslb_tests::realtime_thread();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let supervisor =
                    ProbeSupervisor::start(name, settings(), NetProber::default()).unwrap();
                let recorder = supervisor.recorder();
                // The fast path, attached in generic mode (the TAP peer runs no XDP program).
                let _dataplane = xdp.map(|(interface, listen)| {
                    let mut dp = Dataplane::load(None).expect("loading XDP");
                    dp.table.publish(&site_config(listen)).expect("publishing");
                    dp.attach(interface, XdpMode::Skb).expect("attaching XDP");
                    let map = dp.take_ldns().expect("the LDNS map");
                    tokio::spawn(gslb_user::daemon::rtt::run_xdp_feed(
                        map,
                        recorder.clone(),
                        settings().mask,
                        settings().ldns_timeout,
                        ms(100),
                    ));
                    dp
                });
                ready_tx.send((supervisor.handle(), recorder)).unwrap();
                let _ = stopped.await;
                supervisor.shutdown().await;
            });
        });
        let (handle, recorder) = ready_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("site started");
        Site {
            handle,
            recorder,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// This site's RTT to `ldns`, if it has one.
    fn rtt(&self, ldns: Ipv4Addr) -> Option<(Duration, Option<ProbeKind>)> {
        let report = self
            .handle
            .report()
            .into_iter()
            .find(|r| r.ldns == IpAddr::V4(ldns))?;
        report
            .paths
            .into_iter()
            .find(|p| p.local)
            .map(|p| (p.rtt, p.kind))
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Waits until `site`'s RTT to each LDNS is within the tolerance of `want` (and by `kind`).
fn converge(site: &Site, name: &str, want: &[(Ipv4Addr, Duration, ProbeKind)]) {
    if let Err(why) = converged(site, name, want) {
        panic!("{why}");
    }
}

/// [`converge`], its failure an error (for an attempt that may be repeated).
fn converged(
    site: &Site,
    name: &str,
    want: &[(Ipv4Addr, Duration, ProbeKind)],
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got: Vec<Option<(Duration, Option<ProbeKind>)>> =
            want.iter().map(|(l, _, _)| site.rtt(*l)).collect();
        let ok = want.iter().zip(&got).all(|((_, rtt, kind), got)| {
            got.is_some_and(|(g, k)| {
                g.abs_diff(*rtt) <= TOLERANCE + SAMPLE_NOISE && k == Some(*kind)
            })
        });
        if ok {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{name}: RTTs did not converge to {want:?}; got {got:?}\n{}",
                format_report(&site.handle.report())
            ));
        }
        std::thread::sleep(ms(100));
    }
}

/// Waits (20 s at most) until `site`'s stored RTT to each of `resolvers` is `ok`; `what` and
/// the stored values otherwise.
fn stored_within(
    site: &Site,
    resolvers: &[Ipv4Addr],
    what: &str,
    ok: impl Fn(Duration) -> bool,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stored: Vec<Option<Duration>> = resolvers
            .iter()
            .map(|l| site.rtt(*l).map(|(r, _)| r))
            .collect();
        if stored.iter().all(|r| r.is_some_and(&ok)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{what}: {stored:?}"));
        }
        std::thread::sleep(ms(100));
    }
}

/// One run of the tolerance check on `site` (see its caller), whose link delay `set_delay`
/// sets (round trip, ms).
fn tolerance_attempt(site: &Site, set_delay: &dyn Fn(u64)) -> Result<(), String> {
    let resolvers = [ALL, NO_ICMP, DNS_ONLY];
    // A fresh stored value near 10 ms: from 30 ms (stored: 20 ms away), to 10. The reset only
    // needs every stored value far from 10 ms, not near 30: a TCP handshake delayed by a busy
    // CPU was stored as 35 ms on a CI run, and a later 30 ms is within the tolerance of it,
    // so it would never come nearer.
    set_delay(30);
    stored_within(site, &resolvers, "no reset to 30 ms", |r| r >= ms(25))?;
    set_delay(10);
    stored_within(site, &resolvers, "no clean 10 ms value stored", |r| {
        r >= ms(10) && r < ms(11) + ms(1) / 2
    })?;
    let drain = |changes: &mut tokio::sync::broadcast::Receiver<gslb_user::probe::RttChange>| {
        let mut published = Vec::new();
        while let Ok(change) = changes.try_recv() {
            published.push(change);
        }
        published
    };
    let mut changes = site.handle.subscribe();
    let rounds_before = site.handle.stats().rounds;
    set_delay(13);
    // Several rounds of every resolver at 13 ms (a round is a few hundred ms).
    let deadline = Instant::now() + Duration::from_secs(20);
    while site.handle.stats().rounds < rounds_before + 4 * 4 {
        assert!(Instant::now() < deadline, "the site stopped probing");
        std::thread::sleep(ms(100));
    }
    let published = drain(&mut changes);
    if !published.is_empty() {
        return Err(format!("a 3 ms change was published: {published:?}"));
    }
    set_delay(18);
    // Stored past the tolerance (not "converged": within it and the noise, the old 10 ms
    // value would pass before the change is published).
    stored_within(site, &resolvers, "no +8 ms value stored", |r| r >= ms(16))?;
    let published = drain(&mut changes);
    for ldns in resolvers {
        if !published
            .iter()
            .any(|c| c.ldns == IpAddr::V4(ldns) && c.rtt.is_some_and(|r| r >= ms(16)))
        {
            return Err(format!(
                "{ldns}: the 8 ms change was not published: {published:?}"
            ));
        }
    }
    Ok(())
}

/// Each resolver that answers something, measured by the type it answers, at `rtt` ms.
fn want(rtt: u64) -> Vec<(Ipv4Addr, Duration, ProbeKind)> {
    vec![
        (ALL, ms(rtt), ProbeKind::Icmp),
        (NO_ICMP, ms(rtt), ProbeKind::Tcp),
        (DNS_ONLY, ms(rtt), ProbeKind::DnsDot),
    ]
}

/// A DNS query for www.example.com A from `src` to `server`:53.
fn query_from(ns: &Netns, src: Ipv4Addr, server: Ipv4Addr) {
    ns.enter(|| {
        let socket = UdpSocket::bind((src, 0)).expect("bind the LDNS address");
        let query = [
            0x12, 0x34, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // header
            3, b'w', b'w', b'w', 7, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 3, b'c', b'o', b'm',
            0, // name
            0x00, 0x01, 0x00, 0x01, // A IN
        ];
        socket
            .send_to(&query, (server, 53))
            .expect("send the query");
    });
}

#[test]
fn sites_measure_the_ldns_rtt_by_whatever_answers() {
    if !privileged("rtt_netns") {
        return;
    }
    let ldns = Netns::new("rtt", "ldns");
    let site_a_ns = Netns::new("rtt", "a");
    let site_b_ns = Netns::new("rtt", "b");
    let wire_a = TapWire::new(&ldns, "to-a", &site_a_ns, "site0");
    let wire_b = TapWire::new(&ldns, "to-b", &site_b_ns, "site0");
    ldns.ip(&["addr", "add", "10.1.0.1/24", "dev", "to-a"]);
    ldns.ip(&["addr", "add", "10.2.0.1/24", "dev", "to-b"]);
    for addr in QUERYING.iter().chain([&NEVER_ASKED]) {
        ldns.ip(&["addr", "add", &format!("{addr}/32"), "dev", "lo"]);
    }
    for (ns, addr, gateway) in [
        (&site_a_ns, SITE_A, "10.1.0.1"),
        (&site_b_ns, SITE_B, "10.2.0.1"),
    ] {
        ns.ip(&["addr", "add", &format!("{addr}/24"), "dev", "site0"]);
        ns.ip(&["route", "add", "203.0.113.0/24", "via", gateway]);
    }
    // All of it on the way to the LDNS (the wires' second ends are the sites): a sample then
    // has the delay in force when its request left, never half an old one and half a new.
    let delay = |wire: &TapWire, rtt: u64| wire.set_delay(Duration::ZERO, ms(rtt));
    delay(&wire_a, 10);
    delay(&wire_b, 40);
    wire_a.set_drop(Some(Box::new(ldns_firewall)));
    wire_b.set_drop(Some(Box::new(ldns_firewall)));

    // The DNS-only resolver: answers any query (REFUSED, as a resolver does to a stranger).
    let stop_responder = Arc::new(AtomicBool::new(false));
    let responder = {
        let (ready_tx, ready_rx) = mpsc::channel();
        let stop = stop_responder.clone();
        let thread = ldns.spawn(move || {
            gslb_tests::realtime_thread();
            let socket = UdpSocket::bind((DNS_ONLY, 53)).expect("bind the DNS-only resolver");
            socket.set_read_timeout(Some(ms(100))).unwrap();
            ready_tx.send(()).unwrap();
            let mut buf = [0u8; 512];
            while !stop.load(Ordering::Relaxed) {
                let Ok((len, from)) = socket.recv_from(&mut buf) else {
                    continue;
                };
                if len >= 12 {
                    buf[2] |= 0x80;
                    buf[3] = (buf[3] & 0xf0) | 5;
                    let _ = socket.send_to(&buf[..len], from);
                }
            }
        });
        ready_rx.recv().unwrap();
        thread
    };

    let site_a = Site::start(&site_a_ns, "site-a", Some(("site0", SITE_A)));
    let site_b = Site::start(&site_b_ns, "site-b", None);

    // The resolvers query site A (whose fast path records them) and site B (whose responder
    // would record them: here the test does).
    for addr in QUERYING {
        query_from(&ldns, addr, SITE_A);
        site_b.recorder.record(IpAddr::V4(addr));
    }

    converge(&site_a, "site A", &want(10));
    converge(&site_b, "site B", &want(40));

    // The silent resolver is an entry without an RTT, however long it is probed; the one that
    // never queried was never probed.
    for site in [&site_a, &site_b] {
        // Its rounds take three timeouts: wait for two.
        let deadline = Instant::now() + Duration::from_secs(10);
        let silent_rounds = || {
            site.handle
                .report()
                .iter()
                .find(|r| r.ldns == IpAddr::V4(SILENT))
                .map_or(0, |r| r.rounds)
        };
        while silent_rounds() < 2 {
            assert!(
                Instant::now() < deadline,
                "{}",
                format_report(&site.handle.report())
            );
            std::thread::sleep(ms(100));
        }
        let reports = site.handle.report();
        let silent = reports
            .iter()
            .find(|r| r.ldns == IpAddr::V4(SILENT))
            .expect("the silent LDNS is an entry");
        assert!(silent.paths.is_empty(), "{}", format_report(&reports));
        assert_eq!(silent.completion_rate, Some(0));
        assert!(site.handle.rtts(IpAddr::V4(SILENT)).is_empty());
        assert!(
            reports.iter().all(|r| r.ldns != IpAddr::V4(NEVER_ASKED)),
            "{}",
            format_report(&reports)
        );
    }
    assert_eq!(
        wire_a.carried_to(NEVER_ASKED) + wire_b.carried_to(NEVER_ASKED),
        0,
        "probes to an address that never queried"
    );

    // Both columns at site A (site B's arrives over MEP; here the test carries it).
    site_a
        .handle
        .merge_remote("site-b", &site_b.handle.local_column());
    let order = |handle: &RttHandle, ldns: Ipv4Addr| -> Vec<String> {
        handle
            .rtts(IpAddr::V4(ldns))
            .into_iter()
            .map(|(site, _)| site)
            .collect()
    };
    for ldns in [ALL, NO_ICMP, DNS_ONLY] {
        assert_eq!(order(&site_a.handle, ldns), ["site-a", "site-b"], "{ldns}");
    }

    // Swap the delays: the measurements swap.
    delay(&wire_a, 40);
    delay(&wire_b, 10);
    converge(&site_a, "site A, swapped", &want(40));
    converge(&site_b, "site B, swapped", &want(10));
    site_a
        .handle
        .merge_remote("site-b", &site_b.handle.local_column());
    for ldns in [ALL, NO_ICMP, DNS_ONLY] {
        assert_eq!(order(&site_a.handle, ldns), ["site-b", "site-a"], "{ldns}");
    }

    // Tolerance (5 ms): site B's link goes from 10 to 13 ms, which is neither stored nor
    // published; then to 18 ms, which is. The margins are 2 and 3 ms, and a sample on this
    // shared VM is now and then that much late even so (a busy CPU): an attempt whose
    // measurements were disturbed is repeated, up to ten in all (five were seen disturbed
    // in a row on a clean CI run). (Without the rule, every attempt would publish; the rule
    // itself is tested exactly in tests/it/probe.rs.)
    const ATTEMPTS: usize = 10;
    let mut failures = Vec::new();
    for attempt in 1..=ATTEMPTS {
        match tolerance_attempt(&site_b, &|rtt| delay(&wire_b, rtt)) {
            Ok(()) => break,
            Err(why) => failures.push(format!("attempt {attempt}: {why}")),
        }
        assert!(
            failures.len() < ATTEMPTS,
            "tolerance:\n{}",
            failures.join("\n")
        );
    }
    if !failures.is_empty() {
        println!("tolerance attempts disturbed by noise: {failures:?}");
    }

    println!("site A:\n{}", format_report(&site_a.handle.report()));
    drop(site_a);
    drop(site_b);
    stop_responder.store(true, Ordering::Relaxed);
    responder.join().unwrap();
}
