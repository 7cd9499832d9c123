//! The prober under attack, through the recorder API (as the responder's loops and the fast
//! path's feed record), on a paused clock: a million spoofed sources leave the LDNS table
//! bounded and the regular resolvers probed every interval; sources that can only be claimed
//! (loopback, multicast, this host, `[rtt] deny`) are never probed; a spoofed victim is probed
//! once per interval however often it is recorded and evicted; silent targets back off.

use std::{
    collections::{HashMap, HashSet},
    future::Future,
    net::{IpAddr, Ipv4Addr},
    sync::{Arc, Mutex},
    time::Duration,
};

use gslb_user::probe::{
    LdnsRecorder, ProbeKind, ProbeOutcome, ProbeSettings, ProbeSupervisor, Prober, SourceFilter,
    SourcePolicy,
};
use tokio::time::{Instant, sleep};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Answers the targets in `answering` after 10 ms (ICMP); the rest time out. Logs every probe.
#[derive(Clone, Default)]
struct Targets {
    answering: Arc<Mutex<HashSet<IpAddr>>>,
    log: Arc<Mutex<HashMap<IpAddr, Vec<Instant>>>>,
}

impl Targets {
    fn answer(&self, target: IpAddr) {
        self.answering.lock().unwrap().insert(target);
    }

    fn probes_to(&self, target: IpAddr) -> Vec<Instant> {
        self.log
            .lock()
            .unwrap()
            .get(&target)
            .cloned()
            .unwrap_or_default()
    }

    fn probed(&self) -> HashSet<IpAddr> {
        self.log.lock().unwrap().keys().copied().collect()
    }
}

impl Prober for Targets {
    fn probe(
        &self,
        kind: ProbeKind,
        target: IpAddr,
        timeout: Duration,
    ) -> impl Future<Output = ProbeOutcome> + Send {
        let answers = kind == ProbeKind::Icmp && self.answering.lock().unwrap().contains(&target);
        self.log
            .lock()
            .unwrap()
            .entry(target)
            .or_default()
            .push(Instant::now());
        async move {
            if answers {
                sleep(ms(10)).await;
                ProbeOutcome::Reply(ms(10))
            } else {
                sleep(timeout).await;
                ProbeOutcome::NoReply
            }
        }
    }
}

/// This host, for the filter: one address (the test host's own are not read).
const OWN: &str = "203.0.113.53";

fn start(settings: ProbeSettings) -> (ProbeSupervisor, LdnsRecorder, Targets) {
    let targets = Targets::default();
    let filter = SourceFilter::with_host_addresses([ip(OWN)].into());
    let recorder = LdnsRecorder::with_filter(filter);
    let supervisor =
        ProbeSupervisor::start_with_recorder("east", settings, targets.clone(), recorder.clone())
            .expect("valid settings");
    (supervisor, recorder, targets)
}

fn flood_source(n: u32) -> IpAddr {
    // 10.0.0.0/8 and on: distinct, none martian.
    IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n))
}

/// Consecutive gaps between `times`.
fn gaps(times: &[Instant]) -> Vec<Duration> {
    times.windows(2).map(|w| w[1] - w[0]).collect()
}

#[tokio::test(start_paused = true)]
async fn a_million_spoofed_sources_leave_the_table_bounded_and_resolvers_probed_every_interval() {
    let settings = ProbeSettings {
        sources: SourcePolicy {
            deny: vec!["192.0.2.0/24".parse().unwrap()],
            allow: vec![],
        },
        ..ProbeSettings::default()
    };
    let (max, interval) = (settings.max_ldns, settings.interval);
    assert_eq!(max, 100_000, "the default bound");
    let (supervisor, recorder, targets) = start(settings);
    let handle = supervisor.handle();
    let resolvers: Vec<IpAddr> = (1..=10).map(|i| ip(&format!("198.51.100.{i}"))).collect();
    for &r in &resolvers {
        targets.answer(r);
    }
    // Claims a spoofer would make: never recorded, never probed.
    let claims = [
        "127.0.0.1",
        "127.0.0.9",
        "::1",
        "0.0.0.0",
        "169.254.1.1",
        "fe80::1",
        "224.0.0.1",
        "ff02::1",
        "255.255.255.255",
        OWN,
        "192.0.2.7",
    ]
    .map(ip);

    // The resolvers queried before the flood (twice: regulars).
    for _ in 0..2 {
        for &r in &resolvers {
            recorder.record(r);
        }
        sleep(ms(1000)).await;
    }
    let flood_start = Instant::now();
    // 1,000,000 distinct sources over 10 s, 10,000 a tick; the resolvers every second, the
    // claims every tick.
    let mut next = 0u32;
    for step in 0..100 {
        for _ in 0..10_000 {
            recorder.record(flood_source(next));
            next += 1;
        }
        for &c in &claims {
            recorder.record(c);
        }
        if step % 10 == 0 {
            for &r in &resolvers {
                recorder.record(r);
            }
        }
        sleep(ms(100)).await;
        let stats = handle.stats();
        assert!(stats.ldns_entries <= max, "{} entries", stats.ldns_entries);
    }
    // Ten more seconds of the resolvers alone.
    for _ in 0..10 {
        for &r in &resolvers {
            recorder.record(r);
        }
        sleep(ms(1000)).await;
    }
    let end = Instant::now();

    let stats = handle.stats();
    println!("{stats:?}");
    assert_eq!(next, 1_000_000);
    assert!(stats.ldns_entries <= max);
    // Everything recorded but what the table holds was evicted (none expired yet).
    assert_eq!(
        stats.evicted as usize,
        1_000_000 + resolvers.len() - stats.ldns_entries
    );
    assert_eq!(stats.recorded.dropped, 0, "10,000 a tick fit the backlog");
    assert_eq!(stats.recorded.martian, 100 * 9);
    assert_eq!((stats.recorded.own, stats.recorded.denied), (100, 100));
    let probed = targets.probed();
    for c in &claims {
        assert!(!probed.contains(c), "{c} was probed");
        assert!(handle.ldns_entry(*c).is_none(), "{c} has an entry");
    }
    // The flood was probed too, within the rate limit (200/s).
    let total: usize = probed.iter().map(|t| targets.probes_to(*t).len()).sum();
    let elapsed = (end - flood_start).as_secs_f64() + 2.0;
    assert!(total as f64 <= 200.0 * elapsed + 1.0, "{total} probes");
    // Every resolver, every interval, through the flood: gaps within the pacer's queue (a
    // round may wait for its slot behind the flood's probes) of the interval.
    for &r in &resolvers {
        let times: Vec<Instant> = targets
            .probes_to(r)
            .into_iter()
            .filter(|t| *t >= flood_start)
            .collect();
        let want = ((end - flood_start).as_secs() / interval.as_secs()) as usize;
        assert!(times.len() >= want - 1, "{r}: {} probes", times.len());
        for gap in gaps(&times) {
            assert!(
                gap >= interval.checked_sub(ms(1500)).unwrap() && gap <= interval + ms(1500),
                "{r}: probes {gap:?} apart"
            );
        }
        assert!(handle.ldns_entry(r).is_some());
    }
}

#[tokio::test(start_paused = true)]
async fn a_spoofed_victim_evicted_and_recorded_again_is_probed_once_per_interval() {
    let settings = ProbeSettings {
        max_ldns: 100,
        ..ProbeSettings::default()
    };
    let interval = settings.interval;
    let (supervisor, recorder, targets) = start(settings);
    // Silent (a spoofer's victim need not answer us): it stays a one-time-looking entry.
    let victim = ip("198.51.100.99");
    // Every tick 200 new sources (evicting every other one-time entry), and the victim every
    // 300 ms: evicted and recorded again some hundred times.
    for step in 0..300u32 {
        for i in 0..200 {
            recorder.record(flood_source(step * 200 + i));
        }
        if step % 3 == 0 {
            recorder.record(victim);
        }
        sleep(ms(100)).await;
    }
    let stats = supervisor.handle().stats();
    println!("{stats:?}");
    assert!(stats.evicted > 50_000, "{stats:?}");
    assert!(
        stats.held > 0,
        "the victim came back held by its budget: {stats:?}"
    );
    // One round (three probe types) per due time, never closer than the backoff allows (10 s
    // after an unanswered round); once due again it competes with the flood's new entries for
    // the slots left, so it may get no second round within these 30 s.
    let rounds: Vec<Instant> = targets.probes_to(victim).chunks(3).map(|c| c[0]).collect();
    assert!(!rounds.is_empty(), "probed at its first query");
    for gap in gaps(&rounds) {
        assert!(
            gap >= (interval * 2).checked_sub(ms(100)).unwrap(),
            "the victim's rounds {gap:?} apart"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn silent_targets_back_off_and_an_answer_resets_the_interval() {
    let settings = ProbeSettings {
        order: vec![ProbeKind::Icmp],
        timeout: ms(1000),
        ldns_timeout: Duration::from_secs(600),
        ..ProbeSettings::default()
    };
    let (supervisor, recorder, targets) = start(settings);
    let silent = ip("198.51.100.7");
    let t0 = Instant::now();
    recorder.record(silent);
    // Recorded every second (it keeps querying), for 160 s.
    for _ in 0..160 {
        sleep(ms(1000)).await;
        recorder.record(silent);
    }
    let offsets: Vec<u64> = targets
        .probes_to(silent)
        .iter()
        .map(|t| (*t - t0).as_secs())
        .collect();
    // Rounds at 0, then 2, 4, 8 and 16 intervals (5 s) after each start: 10, 30, 70, 150.
    assert_eq!(offsets, [0, 10, 30, 70, 150], "probe times (s)");
    assert_eq!(supervisor.handle().stats().backoffs, 5);
    // It answers: the round at 150 + 80 s finds it, and then every interval again.
    targets.answer(silent);
    for _ in 0..100 {
        sleep(ms(1000)).await;
        recorder.record(silent);
    }
    let offsets: Vec<u64> = targets
        .probes_to(silent)
        .iter()
        .map(|t| (*t - t0).as_secs())
        .collect();
    assert_eq!(
        offsets[5..11],
        [230, 235, 240, 245, 250, 255],
        "after the answer"
    );
    assert_eq!(supervisor.handle().stats().backoffs, 5);
}
