//! The prober's supervisor with a scripted prober on a paused clock: order, interval,
//! tolerance, expiry, limits, pacing, other sites' columns, the dump, settings refused.

use std::{
    collections::HashMap,
    future::Future,
    net::IpAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use gslb_user::probe::{
    LdnsMask, LdnsRecorder, ProbeKind, ProbeOutcome, ProbeSettings, ProbeSupervisor, Prober,
    RttChange, RttRow, SourceFilter, format_report,
};
use tokio::time::{Instant, sleep};

use super::{ip, ms, secs};

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
