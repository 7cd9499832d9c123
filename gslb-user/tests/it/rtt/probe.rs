//! The LDNS RTT prober (`gslb_user::probe`): the supervisor with a scripted prober on a paused
//! clock (order, interval, tolerance, expiry, limits, merge, dump), the real probers on the
//! loopback (TCP, DNS, ICMP), and the fast path's LDNS recording with BPF_PROG_TEST_RUN (root).

use crate::common;

use std::{
    collections::HashMap,
    future::Future,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpListener, UdpSocket},
    sync::{Arc, Mutex},
    time::Duration,
};

use aya::programs::{TestRun, TestRunOptions};
use gslb_user::{
    dataplane::Dataplane,
    probe::{
        LdnsMask, LdnsRecorder, NetProber, ProbeKind, ProbeOutcome, ProbeSettings, ProbeSupervisor,
        Prober, RttChange, RttRow, SourceFilter, format_report,
    },
};
use hickory_proto::{
    op::{Message, MessageType},
    rr::RecordType,
};
use tokio::time::{Instant, sleep};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

// ---- A scripted prober ----

/// What a target answers: per probe type, a reply after that long; other types are silent,
/// or fail at once (as a probe this host could not send, or refused itself).
#[derive(Default)]
struct Script {
    targets: HashMap<IpAddr, Vec<(ProbeKind, Duration)>>,
    failing: HashMap<IpAddr, Vec<ProbeKind>>,
}

/// Probes as the script says, on tokio's clock (paused in these tests), and logs them.
#[derive(Clone, Default)]
struct Fake {
    script: Arc<Mutex<Script>>,
    /// (when, type, target) of every probe.
    log: Arc<Mutex<Vec<(Instant, ProbeKind, IpAddr)>>>,
    running: Arc<Mutex<(usize, usize)>>,
}

impl Fake {
    fn answer(&self, target: &str, replies: &[(ProbeKind, u64)]) {
        let replies = replies.iter().map(|(k, n)| (*k, ms(*n))).collect();
        self.script
            .lock()
            .unwrap()
            .targets
            .insert(ip(target), replies);
    }

    fn fail(&self, target: &str, kinds: &[ProbeKind]) {
        self.script
            .lock()
            .unwrap()
            .failing
            .insert(ip(target), kinds.to_vec());
    }

    fn probes_to(&self, target: &str) -> Vec<(Instant, ProbeKind)> {
        let target = ip(target);
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, _, t)| *t == target)
            .map(|(at, k, _)| (*at, *k))
            .collect()
    }

    fn max_running(&self) -> usize {
        self.running.lock().unwrap().1
    }
}

impl Prober for Fake {
    fn probe(
        &self,
        kind: ProbeKind,
        target: IpAddr,
        timeout: Duration,
    ) -> impl Future<Output = ProbeOutcome> + Send {
        let (reply, fails) = {
            let script = self.script.lock().unwrap();
            let reply = script
                .targets
                .get(&target)
                .and_then(|r| r.iter().find(|(k, _)| *k == kind).map(|(_, rtt)| *rtt));
            let fails = script
                .failing
                .get(&target)
                .is_some_and(|f| f.contains(&kind));
            (reply, fails)
        };
        self.log
            .lock()
            .unwrap()
            .push((Instant::now(), kind, target));
        let running = self.running.clone();
        async move {
            {
                let mut r = running.lock().unwrap();
                r.0 += 1;
                r.1 = r.1.max(r.0);
            }
            let outcome = match reply {
                _ if fails => ProbeOutcome::Failed("refused by this host".into()),
                Some(rtt) if rtt <= timeout => {
                    sleep(rtt).await;
                    ProbeOutcome::Reply(rtt)
                }
                _ => {
                    sleep(timeout).await;
                    ProbeOutcome::NoReply
                }
            };
            running.lock().unwrap().0 -= 1;
            outcome
        }
    }
}

fn start(settings: ProbeSettings) -> (ProbeSupervisor, Fake) {
    let fake = Fake::default();
    // No host addresses: the test host's may be the documentation addresses used here.
    let recorder = LdnsRecorder::with_filter(SourceFilter::with_host_addresses(
        std::collections::HashSet::default(),
    ));
    let supervisor = ProbeSupervisor::start_with_recorder("east", settings, fake.clone(), recorder)
        .expect("valid settings");
    (supervisor, fake)
}

fn local_rtt(supervisor: &ProbeSupervisor, ldns: &str) -> Option<(Duration, Option<ProbeKind>)> {
    let report = supervisor
        .handle()
        .report()
        .into_iter()
        .find(|r| r.ldns == ip(ldns))?;
    report
        .paths
        .into_iter()
        .find(|p| p.local)
        .map(|p| (p.rtt, p.kind))
}

// ---- The supervisor, on a paused clock ----

#[tokio::test(start_paused = true)]
async fn only_resolvers_that_queried_are_probed_once_per_interval() {
    use ProbeKind::*;
    let (supervisor, fake) = start(ProbeSettings::default());
    for target in ["192.0.2.1", "192.0.2.2", "192.0.2.3"] {
        fake.answer(target, &[(Icmp, 10), (DnsDot, 11), (Tcp, 12)]);
    }
    let t0 = Instant::now();
    let recorder = supervisor.recorder();
    recorder.record(ip("192.0.2.1"));
    recorder.record(ip("192.0.2.2"));
    sleep(ms(12_050)).await;
    for target in ["192.0.2.1", "192.0.2.2"] {
        let probes = fake.probes_to(target);
        // Rounds at 0, 5 and 10 s (give or take a tick), ICMP only: it answers.
        assert_eq!(probes.len(), 3, "{target}: {probes:?}");
        for (i, (at, kind)) in probes.iter().enumerate() {
            assert_eq!(*kind, Icmp);
            let offset = at.duration_since(t0);
            assert!(
                offset >= secs(5 * i as u64) && offset < secs(5 * i as u64) + ms(200),
                "{target} round {i} at {offset:?}"
            );
        }
        assert_eq!(local_rtt(&supervisor, target), Some((ms(10), Some(Icmp))));
    }
    // Never queried, never probed.
    assert!(fake.probes_to("192.0.2.3").is_empty());
    assert_eq!(local_rtt(&supervisor, "192.0.2.3"), None);
    let stats = supervisor.handle().stats();
    assert_eq!((stats.rounds, stats.samples, stats.probes), (6, 6, 6));
}

#[tokio::test(start_paused = true)]
async fn each_resolver_is_measured_by_the_first_type_that_answers() {
    use ProbeKind::*;
    // One round each within the interval: three timeouts of 2 s at most.
    let (supervisor, fake) = start(ProbeSettings {
        interval: secs(10),
        ..ProbeSettings::default()
    });
    // (resolver, what it answers, the type that measures it, probes per round)
    type Case<'a> = (
        &'a str,
        &'a [(ProbeKind, u64)],
        Option<(ProbeKind, u64)>,
        usize,
    );
    let table: [Case; 5] = [
        (
            "192.0.2.1",
            &[(Icmp, 10), (DnsDot, 11), (Tcp, 12)],
            Some((Icmp, 10)),
            1,
        ),
        ("192.0.2.2", &[(Tcp, 12)], Some((Tcp, 12)), 3),
        ("192.0.2.3", &[(DnsDot, 11)], Some((DnsDot, 11)), 2),
        ("192.0.2.4", &[], None, 3),
        // A reply after the response timeout is no reply.
        ("192.0.2.5", &[(Icmp, 2_500), (Tcp, 30)], Some((Tcp, 30)), 3),
    ];
    for (target, replies, _, _) in &table {
        fake.answer(target, replies);
        supervisor.recorder().record(ip(target));
    }
    sleep(secs(7)).await;
    for (target, _, measured, probes) in table {
        assert_eq!(
            local_rtt(&supervisor, target),
            measured.map(|(k, n)| (ms(n), Some(k))),
            "{target}"
        );
        let kinds: Vec<ProbeKind> = fake.probes_to(target).into_iter().map(|(_, k)| k).collect();
        assert_eq!(kinds, [Icmp, DnsDot, Tcp][..probes], "{target}");
    }
    let silent = supervisor
        .handle()
        .report()
        .into_iter()
        .find(|r| r.ldns == ip("192.0.2.4"))
        .unwrap();
    assert!(silent.paths.is_empty());
    assert_eq!((silent.rounds, silent.completion_rate), (1, Some(0)));
}

/// A probe that fails here (not sent, or refused by this host itself) is never a sample: the
/// next type is tried, and each failure is counted (`probe_local_errors`).
#[tokio::test(start_paused = true)]
async fn local_failures_are_counted_and_never_a_sample() {
    use ProbeKind::*;
    let (supervisor, fake) = start(ProbeSettings {
        interval: secs(10),
        ..ProbeSettings::default()
    });
    fake.fail("192.0.2.1", &[Icmp]);
    fake.answer("192.0.2.1", &[(DnsDot, 11)]);
    fake.fail("192.0.2.2", &[Icmp, DnsDot, Tcp]);
    for target in ["192.0.2.1", "192.0.2.2"] {
        supervisor.recorder().record(ip(target));
    }
    sleep(secs(3)).await;
    assert_eq!(
        local_rtt(&supervisor, "192.0.2.1"),
        Some((ms(11), Some(DnsDot)))
    );
    assert_eq!(local_rtt(&supervisor, "192.0.2.2"), None);
    let stats = supervisor.handle().stats();
    assert_eq!(
        (
            stats.rounds,
            stats.samples,
            stats.probes,
            stats.local_errors
        ),
        (2, 1, 5, 4)
    );
}

#[tokio::test(start_paused = true)]
async fn the_probe_order_is_configurable() {
    use ProbeKind::*;
    let settings = ProbeSettings {
        order: vec![DnsRev, Tcp, Icmp],
        ..ProbeSettings::default()
    };
    let (supervisor, fake) = start(settings);
    fake.answer("192.0.2.1", &[(Icmp, 10), (Tcp, 12)]);
    supervisor.recorder().record(ip("192.0.2.1"));
    sleep(secs(3)).await;
    let kinds: Vec<ProbeKind> = fake
        .probes_to("192.0.2.1")
        .into_iter()
        .map(|(_, k)| k)
        .collect();
    assert_eq!(kinds, [DnsRev, Tcp]);
    assert_eq!(
        local_rtt(&supervisor, "192.0.2.1"),
        Some((ms(12), Some(Tcp)))
    );
}

#[tokio::test(start_paused = true)]
async fn a_change_within_the_tolerance_is_not_propagated() {
    use ProbeKind::*;
    let (supervisor, fake) = start(ProbeSettings::default());
    let handle = supervisor.handle();
    let mut changes = handle.subscribe();
    let mut version = handle.watch();
    fake.answer("192.0.2.1", &[(Icmp, 10)]);
    supervisor.recorder().record(ip("192.0.2.1"));
    sleep(secs(1)).await;
    let first = changes.try_recv().expect("the first sample is published");
    assert_eq!(
        first,
        RttChange {
            ldns: ip("192.0.2.1"),
            site: "east".into(),
            rtt: Some(ms(10)),
            kind: Some(Icmp)
        }
    );
    assert!(version.has_changed().unwrap());
    version.mark_unchanged();
    // (new RTT, published): each lasts one round.
    let steps = [
        (13, false),
        (7, false),
        (15, false),
        (18, true),
        (14, false),
        (12, true),
    ];
    let mut stored = 10;
    for (rtt, published) in steps {
        fake.answer("192.0.2.1", &[(Icmp, rtt)]);
        sleep(secs(5)).await;
        let change = changes.try_recv().ok();
        assert_eq!(
            change.is_some(),
            published,
            "{stored} ms -> {rtt} ms: {change:?}"
        );
        assert_eq!(
            version.has_changed().unwrap(),
            published,
            "{stored} -> {rtt}: version"
        );
        version.mark_unchanged();
        if published {
            stored = rtt;
            assert_eq!(change.unwrap().rtt, Some(ms(rtt)));
        }
        assert_eq!(
            local_rtt(&supervisor, "192.0.2.1"),
            Some((ms(stored), Some(Icmp))),
            "after {rtt} ms"
        );
        // The peers' view (the local column MEP sends) moves only with published changes.
        assert_eq!(
            handle.local_column(),
            [RttRow {
                ldns: ip("192.0.2.1"),
                rtt: Some(ms(stored)),
                kind: Some(Icmp)
            }]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn idle_entries_expire_with_their_rtt_and_come_back_when_queried_again() {
    use ProbeKind::*;
    let settings = ProbeSettings {
        ldns_timeout: secs(30),
        ..ProbeSettings::default()
    };
    let (supervisor, fake) = start(settings);
    let handle = supervisor.handle();
    let mut changes = handle.subscribe();
    fake.answer("192.0.2.1", &[(Icmp, 10)]);
    fake.answer("192.0.2.2", &[(Tcp, 20)]);
    let recorder = supervisor.recorder();
    recorder.record(ip("192.0.2.1"));
    recorder.record(ip("192.0.2.2"));
    sleep(secs(20)).await;
    recorder.record(ip("192.0.2.2"));
    // 192.0.2.1 was last seen at 0 s: gone after 30 s; 192.0.2.2 (seen at 20 s) stays.
    sleep(secs(12)).await;
    assert_eq!(local_rtt(&supervisor, "192.0.2.1"), None);
    assert!(handle.ldns_entry(ip("192.0.2.1")).is_none());
    assert_eq!(
        local_rtt(&supervisor, "192.0.2.2"),
        Some((ms(20), Some(Tcp)))
    );
    let mut seen = Vec::new();
    while let Ok(change) = changes.try_recv() {
        seen.push(change);
    }
    assert!(
        seen.contains(&RttChange {
            ldns: ip("192.0.2.1"),
            site: "east".into(),
            rtt: None,
            kind: Some(Icmp)
        }),
        "the removal is published: {seen:?}"
    );
    assert_eq!(handle.stats().expired, 1);
    let rounds = fake.probes_to("192.0.2.1").len();
    sleep(secs(20)).await;
    assert_eq!(
        fake.probes_to("192.0.2.1").len(),
        rounds,
        "an expired entry is not probed"
    );
    // Queried again: a new entry, probed at once.
    recorder.record(ip("192.0.2.1"));
    sleep(secs(1)).await;
    assert_eq!(
        local_rtt(&supervisor, "192.0.2.1"),
        Some((ms(10), Some(Icmp)))
    );
}

#[tokio::test(start_paused = true)]
async fn a_mask_groups_resolvers_into_one_entry_probed_at_the_first_address() {
    use ProbeKind::*;
    let settings = ProbeSettings {
        mask: LdnsMask { v4: 24, v6: 56 },
        ..ProbeSettings::default()
    };
    let (supervisor, fake) = start(settings);
    for target in [
        "198.51.100.7",
        "198.51.100.8",
        "2001:db8:1:2aa::53",
        "2001:db8:1:2bb::53",
    ] {
        fake.answer(target, &[(Icmp, 10)]);
    }
    let recorder = supervisor.recorder();
    recorder.record(ip("198.51.100.7"));
    recorder.record(ip("2001:db8:1:2aa::53"));
    sleep(ms(200)).await;
    recorder.record(ip("198.51.100.8"));
    recorder.record(ip("2001:db8:1:2bb::53"));
    sleep(secs(6)).await;
    assert_eq!(fake.probes_to("198.51.100.7").len(), 2);
    assert_eq!(fake.probes_to("2001:db8:1:2aa::53").len(), 2);
    assert!(fake.probes_to("198.51.100.8").is_empty());
    assert!(fake.probes_to("2001:db8:1:2bb::53").is_empty());
    let handle = supervisor.handle();
    // Any resolver of the group gets the group's RTT.
    assert_eq!(
        handle.rtts(ip("198.51.100.200")),
        [("east".to_owned(), ms(10))]
    );
    assert_eq!(
        handle.rtts(ip("2001:db8:1:2ff::1")),
        [("east".to_owned(), ms(10))]
    );
    assert!(handle.rtts(ip("198.51.101.1")).is_empty());
    let text = format_report(&handle.report());
    assert!(
        text.contains("ldns 198.51.100.0/24  address 198.51.100.7"),
        "{text}"
    );
    assert!(
        text.contains("ldns 2001:db8:1:200::/56  address 2001:db8:1:2aa::53"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn rounds_are_capped_in_number_at_once() {
    use ProbeKind::*;
    let (supervisor, fake) = start(ProbeSettings {
        max_concurrent: 4,
        // Pacing far above what 4 rounds at once can use: the cap is what limits here.
        max_rate: 1_000_000,
        ..ProbeSettings::default()
    });
    let recorder = supervisor.recorder();
    for i in 1..=30u8 {
        let target = format!("192.0.2.{i}");
        fake.answer(&target, &[(Icmp, 300)]);
        recorder.record(ip(&target));
    }
    sleep(secs(3)).await;
    assert_eq!(
        fake.max_running(),
        4,
        "at most 4 rounds at once, and 4 while there is work"
    );
    assert_eq!(supervisor.handle().stats().max_in_flight, 4);
    // 30 rounds of 300 ms, 4 at a time: all done in 3 s.
    let handle = supervisor.handle();
    for i in 1..=30u8 {
        assert_eq!(
            handle.rtts(ip(&format!("192.0.2.{i}"))),
            [("east".to_owned(), ms(300))],
            "192.0.2.{i}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn probes_are_paced_to_the_rate_limit() {
    use ProbeKind::*;
    // One round each in this test.
    let (supervisor, fake) = start(ProbeSettings {
        max_rate: 10,
        interval: secs(60),
        ..ProbeSettings::default()
    });
    let recorder = supervisor.recorder();
    for i in 1..=30u8 {
        let target = format!("192.0.2.{i}");
        // Every other one answers only TCP: three probes per round.
        if i % 2 == 0 {
            fake.answer(&target, &[(Tcp, 5)]);
        } else {
            fake.answer(&target, &[(Icmp, 5)]);
        }
        recorder.record(ip(&target));
    }
    let t0 = Instant::now();
    sleep(secs(4)).await;
    let mut times: Vec<Instant> = fake
        .log
        .lock()
        .unwrap()
        .iter()
        .map(|(at, _, _)| *at)
        .collect();
    times.sort();
    // 10 per second: about 40 in 4 s, 100 ms apart.
    assert!(
        (38..=41).contains(&times.len()),
        "{} probes in 4 s",
        times.len()
    );
    for pair in times.windows(2) {
        assert!(
            pair[1].duration_since(pair[0]) >= ms(99),
            "probes {:?} apart",
            pair[1].duration_since(pair[0])
        );
    }
    assert!(times[0].duration_since(t0) < ms(200));
    // 15 + 3 × 15 = 60 probes for one round of all, paced over 6 s, the last TCP probes
    // after two timeouts.
    sleep(secs(6)).await;
    let handle = supervisor.handle();
    for i in 1..=30u8 {
        assert_eq!(
            handle.rtts(ip(&format!("192.0.2.{i}"))).len(),
            1,
            "192.0.2.{i}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn other_sites_columns_merge_in_and_the_table_reads_lowest_first() {
    use ProbeKind::*;
    let (supervisor, fake) = start(ProbeSettings::default());
    let handle = supervisor.handle();
    fake.answer("192.0.2.1", &[(Icmp, 40)]);
    supervisor.recorder().record(ip("192.0.2.1"));
    sleep(secs(1)).await;
    let mut version = handle.watch();
    version.mark_unchanged();
    handle.merge_remote(
        "west",
        &[
            RttRow {
                ldns: ip("192.0.2.1"),
                rtt: Some(ms(10)),
                kind: Some(Tcp),
            },
            // A resolver that only queried the other site.
            RttRow {
                ldns: ip("192.0.2.9"),
                rtt: Some(ms(25)),
                kind: Some(Icmp),
            },
        ],
    );
    assert!(version.has_changed().unwrap(), "a merge is republished");
    assert_eq!(
        handle.rtts(ip("192.0.2.1")),
        [("west".to_owned(), ms(10)), ("east".to_owned(), ms(40))]
    );
    assert_eq!(handle.rtts(ip("192.0.2.9")), [("west".to_owned(), ms(25))]);
    let map = handle.to_map();
    assert_eq!(map[&ip("192.0.2.1")].len(), 2);
    let text = format_report(&handle.report());
    assert!(
        text.contains("ldns 192.0.2.9  (known from peers only)"),
        "{text}"
    );
    assert!(text.contains("  west   10.000 ms  tcp"), "{text}");
    assert!(text.contains("  east   40.000 ms  icmp"), "{text}");
    // The peer leaves.
    handle.forget_site("west");
    assert_eq!(handle.rtts(ip("192.0.2.1")), [("east".to_owned(), ms(40))]);
    assert!(handle.rtts(ip("192.0.2.9")).is_empty());
}

#[test]
fn invalid_settings_are_refused() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let settings = ProbeSettings {
            order: vec![],
            ..ProbeSettings::default()
        };
        let err = ProbeSupervisor::start("east", settings, Fake::default())
            .err()
            .unwrap();
        assert_eq!(err.to_string(), "the probe order is empty");
    });
}

// ---- The real probers, on the loopback ----

fn loopback_prober(dns_port: u16, tcp_port: u16) -> NetProber {
    NetProber { dns_port, tcp_port }
}

fn is_reply(outcome: &ProbeOutcome) -> bool {
    matches!(outcome, ProbeOutcome::Reply(rtt) if *rtt < ms(1000))
}

#[tokio::test]
async fn tcp_probes_take_a_syn_ack_or_a_reset_as_a_sample() {
    let open = TcpListener::bind("127.0.0.1:0").unwrap();
    let open_port = open.local_addr().unwrap().port();
    let closed_port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let localhost = IpAddr::V4(Ipv4Addr::LOCALHOST);
    for (port, what) in [
        (open_port, "open port (SYN-ACK)"),
        (closed_port, "closed port (RST)"),
    ] {
        let outcome = loopback_prober(53, port)
            .probe(ProbeKind::Tcp, localhost, secs(2))
            .await;
        assert!(is_reply(&outcome), "{what}: {outcome:?}");
    }
    drop(open);
}

/// A DNS server on the loopback answering every query with `rcode`, after `delay`; returns its
/// port and the queries it got.
fn dns_responder(rcode: u8, delay: Duration) -> (u16, Arc<Mutex<Vec<Message>>>) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let log = got.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((len, from)) = socket.recv_from(&mut buf) {
            if let Ok(m) = Message::from_vec(&buf[..len]) {
                log.lock().unwrap().push(m);
            }
            std::thread::sleep(delay);
            buf[2] |= 0x80;
            buf[3] = (buf[3] & 0xf0) | rcode;
            let _ = socket.send_to(&buf[..len], from);
        }
    });
    (port, got)
}

#[tokio::test]
async fn dns_probes_take_any_response_as_a_sample() {
    let localhost = IpAddr::V4(Ipv4Addr::LOCALHOST);
    // REFUSED, and NOERROR after 30 ms: both samples, the second about 30 ms.
    let (refused, queries) = dns_responder(5, Duration::ZERO);
    let (slow, _) = dns_responder(0, ms(30));
    for kind in [ProbeKind::DnsDot, ProbeKind::DnsRev] {
        let outcome = loopback_prober(refused, 53)
            .probe(kind, localhost, secs(2))
            .await;
        assert!(is_reply(&outcome), "{kind}: {outcome:?}");
        let ProbeOutcome::Reply(rtt) = loopback_prober(slow, 53)
            .probe(kind, localhost, secs(2))
            .await
        else {
            panic!("{kind}: no reply from the slow server")
        };
        assert!(rtt >= ms(30) && rtt < ms(500), "{kind}: {rtt:?}");
    }
    let queries = queries.lock().unwrap().clone();
    let asked: Vec<(String, RecordType, bool)> = queries
        .iter()
        .map(|m| {
            (
                m.queries[0].name().to_ascii(),
                m.queries[0].query_type(),
                m.recursion_desired,
            )
        })
        .collect();
    assert_eq!(
        asked,
        [
            (".".to_owned(), RecordType::NS, false),
            ("1.0.0.127.in-addr.arpa.".to_owned(), RecordType::PTR, false)
        ]
    );
    assert!(queries.iter().all(|m| m.message_type == MessageType::Query));

    // A closed port answers with an ICMP port unreachable: a sample too.
    let closed = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let outcome = loopback_prober(closed, 53)
        .probe(ProbeKind::DnsDot, localhost, secs(2))
        .await;
    assert!(is_reply(&outcome), "closed UDP port: {outcome:?}");

    // A server that never answers: no sample, after the timeout.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let started = Instant::now();
    let outcome = loopback_prober(silent.local_addr().unwrap().port(), 53)
        .probe(ProbeKind::DnsDot, localhost, ms(200))
        .await;
    assert_eq!(outcome, ProbeOutcome::NoReply);
    assert!(started.elapsed() >= ms(200));
}

#[tokio::test]
async fn icmp_probes_ping_the_loopback() {
    if gslb_user::health::icmp_mode(false).is_err() {
        gslb_tests::skip("no ICMP socket (neither ping group nor CAP_NET_RAW)");
        return;
    }
    for target in [
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(Ipv6Addr::LOCALHOST),
    ] {
        let outcome = NetProber::default()
            .probe(ProbeKind::Icmp, target, secs(2))
            .await;
        assert!(is_reply(&outcome), "{target}: {outcome:?}");
    }
}

// ---- The fast path's recording (root) ----

fn run(dp: &Dataplane, frame: &[u8]) -> u32 {
    let mut out = vec![0u8; 4096];
    dp.program()
        .test_run(TestRunOptions {
            data_in: Some(frame),
            data_out: Some(&mut out),
            ..TestRunOptions::new()
        })
        .expect("BPF_PROG_TEST_RUN")
        .return_value
}

fn www_from(src: IpAddr, rtype: RecordType) -> Vec<u8> {
    let server = match src {
        IpAddr::V4(_) => IpAddr::V4(common::SERVER_V4),
        IpAddr::V6(_) => IpAddr::V6(common::SERVER_V6),
    };
    common::Frame::udp(
        src,
        server,
        common::wire(&common::query(1, common::WWW, rtype)),
    )
    .bytes()
}

fn scan(dp: &mut Dataplane, timeout: Duration) -> gslb_user::dataplane::LdnsScan {
    let mut scan = dp
        .ldns()
        .expect("the LDNS map")
        .scan(timeout)
        .expect("scanning LDNS");
    scan.seen.sort_by_key(|s| s.group);
    scan
}

#[test]
fn the_fast_path_records_the_sources_of_queries() {
    let Some(mut dp) = common::dataplane() else {
        return;
    };
    common::pin_to_current_cpu();
    const XDP_TX: u32 = 3;
    const XDP_PASS: u32 = 2;
    let v4 = IpAddr::V4(common::CLIENT_V4);
    let v6 = IpAddr::V6(common::V1_CLIENT_V6);
    let unknown = ip("203.0.113.99");
    let response = ip("203.0.113.98");
    let other_port = ip("203.0.113.97");
    let mut not_a_query = common::query(1, common::WWW, RecordType::A);
    not_a_query.metadata.message_type = MessageType::Response;
    let www_a = common::wire(&common::query(1, common::WWW, RecordType::A));
    let mut to_other_port = common::Frame::udp(other_port, IpAddr::V4(common::SERVER_V4), www_a);
    to_other_port.dst_port = 5353;
    // (frame, action): hits are recorded; a name we do not serve, a response and another
    // port are not (only queries for our names make a resolver).
    let cases: Vec<(Vec<u8>, u32)> = vec![
        (www_from(v4, RecordType::A), XDP_TX),
        (www_from(v4, RecordType::AAAA), XDP_TX),
        (www_from(v6, RecordType::AAAA), XDP_TX),
        (
            common::Frame::udp(
                unknown,
                IpAddr::V4(common::SERVER_V4),
                common::wire(&common::query(1, "nope.example.com", RecordType::A)),
            )
            .bytes(),
            XDP_PASS,
        ),
        (
            common::Frame::udp(
                response,
                IpAddr::V4(common::SERVER_V4),
                common::wire(&not_a_query),
            )
            .bytes(),
            XDP_PASS,
        ),
        (to_other_port.bytes(), XDP_PASS),
    ];
    for (i, (frame, action)) in cases.iter().enumerate() {
        assert_eq!(run(&dp, frame), *action, "case {i}");
    }
    let found = scan(&mut dp, secs(180));
    let seen: Vec<(IpAddr, IpAddr)> = found.seen.iter().map(|s| (s.group, s.addr)).collect();
    let mut want = vec![(v4, v4), (v6, v6)];
    want.sort();
    assert_eq!(seen, want);
    assert!(found.seen.iter().all(|s| s.idle < secs(5)), "{found:?}");
    assert_eq!(found.expired, 0);

    // Fed to a recorder, they are the resolvers to probe.
    let recorder = LdnsRecorder::new();
    recorder.record_scan(&found);
    let mut drained: Vec<IpAddr> = recorder.drain().into_iter().map(|(a, _)| a).collect();
    drained.sort();
    assert_eq!(drained, [v4, v6]);

    // Idle longer than the timeout: deleted.
    std::thread::sleep(ms(20));
    let expired = scan(&mut dp, ms(10));
    assert_eq!((expired.seen.len(), expired.expired), (0, 2));
    assert!(scan(&mut dp, secs(180)).seen.is_empty());

    // Recording off.
    dp.ldns().unwrap().set_enabled(false).unwrap();
    run(&dp, &www_from(v4, RecordType::A));
    assert!(scan(&mut dp, secs(180)).seen.is_empty());
    dp.ldns().unwrap().set_enabled(true).unwrap();
    run(&dp, &www_from(v4, RecordType::A));
    assert_eq!(scan(&mut dp, secs(180)).seen.len(), 1);
}

#[test]
fn the_fast_path_refreshes_a_resolver_once_per_epoch() {
    let Some(mut dp) = common::dataplane() else {
        return;
    };
    common::pin_to_current_cpu();
    let src = IpAddr::V4(common::CLIENT_V4);
    // Each scan also starts a new epoch.
    let idle = |dp: &mut Dataplane| dp.ldns().unwrap().scan(secs(180)).unwrap().seen[0].idle;
    run(&dp, &www_from(src, RecordType::A));
    // The scan started a new epoch: the next query refreshes the time...
    std::thread::sleep(ms(50));
    assert!(idle(&mut dp) >= ms(50));
    run(&dp, &www_from(src, RecordType::A));
    assert!(idle(&mut dp) < ms(40), "refreshed in the new epoch");
    // ...but within one epoch only the first query does.
    let epoch = dp.ldns().unwrap().new_epoch().unwrap();
    run(&dp, &www_from(src, RecordType::A));
    std::thread::sleep(ms(50));
    for _ in 0..10 {
        run(&dp, &www_from(src, RecordType::A));
    }
    assert!(
        idle(&mut dp) >= ms(50),
        "not refreshed again in epoch {epoch}"
    );
}

#[test]
fn the_fast_path_groups_resolvers_by_the_ldns_mask() {
    let Some(mut dp) = common::dataplane() else {
        return;
    };
    dp.ldns().unwrap().set_masks(24, 48).unwrap();
    let sources = [
        "198.51.100.7",
        "198.51.100.8",
        "198.51.101.9",
        "2001:db8:1:aa::7",
        "2001:db8:1:bb::8",
        "2001:db8:2::9",
    ];
    for src in sources {
        let rtype = if src.contains(':') {
            RecordType::AAAA
        } else {
            RecordType::A
        };
        run(&dp, &www_from(ip(src), rtype));
    }
    let seen: Vec<(IpAddr, IpAddr)> = scan(&mut dp, secs(180))
        .seen
        .iter()
        .map(|s| (s.group, s.addr))
        .collect();
    assert_eq!(
        seen,
        [
            (ip("198.51.100.0"), ip("198.51.100.7")),
            (ip("198.51.101.0"), ip("198.51.101.9")),
            (ip("2001:db8:1::"), ip("2001:db8:1:aa::7")),
            (ip("2001:db8:2::"), ip("2001:db8:2::9")),
        ]
    );
    // The user-space grouping agrees with the kernel's.
    let mask = LdnsMask { v4: 24, v6: 48 };
    for src in sources {
        assert!(
            seen.iter().any(|(group, _)| *group == mask.group(ip(src))),
            "{src}"
        );
    }
}
