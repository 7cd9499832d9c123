//! Rotation per answer set (issue 11): a name asked in any interleaving with other names, the
//! other qtype or clients of another view cycles through all its addresses, and ratio keeps its
//! proportions, in the responder and through the XDP program (BPF_PROG_TEST_RUN; needs root,
//! see `common::privileged`).
//!
//! With one rotation counter for everything, two round-robin names asked alternately each got
//! one address every time, and a ratio name asked between the queries for another got the
//! addresses at even turns only.

use crate::common;
/// Reproducible interleavings (xorshift64, the benches' generator).
use crate::rng;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use common::{Answers, Expect, Frame, SERVER_V4, ask, ips, query, responder_addrs, wire};
use gslb_user::{compile::Snapshot, config::Config, dataplane::Dataplane, responder::Responder};
use hickory_proto::rr::RecordType;

fn config_text() -> String {
    common::site_s_config(&[("v1", "198.51.100.0/24")], BODY)
}

/// The domains and their services, at site "s".
const BODY: &str = r#"
[[service]]
name = "rr1-a"
ip = "192.0.2.11"
site = "s"
[[service]]
name = "rr1-b"
ip = "192.0.2.12"
site = "s"
[[service]]
name = "rr1-6a"
ip = "2001:db8:1::11"
site = "s"
[[service]]
name = "rr1-6b"
ip = "2001:db8:1::12"
site = "s"
[[service]]
name = "rr1-v1a"
ip = "192.0.2.111"
site = "s"
[[service]]
name = "rr1-v1b"
ip = "192.0.2.112"
site = "s"
[[gslb_domain]]
name = "rr1.example.com"
ttl = 30
services = ["rr1-a", "rr1-b", "rr1-6a", "rr1-6b"]
[[gslb_domain.view]]
view = "v1"
services = ["rr1-v1a", "rr1-v1b"]

[[service]]
name = "rr2-a"
ip = "192.0.2.21"
site = "s"
[[service]]
name = "rr2-b"
ip = "192.0.2.22"
site = "s"
[[gslb_domain]]
name = "rr2.example.com"
ttl = 30
services = ["rr2-a", "rr2-b"]

[[service]]
name = "rr3-a"
ip = "192.0.2.31"
site = "s"
[[service]]
name = "rr3-b"
ip = "192.0.2.32"
site = "s"
[[service]]
name = "rr3-c"
ip = "192.0.2.33"
site = "s"
[[gslb_domain]]
name = "rr3.example.com"
ttl = 30
services = ["rr3-a", "rr3-b", "rr3-c"]

# Ratio 1:2:5, compiled (8 answers in the set: the fast path's whole capacity).
[[service]]
name = "ratio-1"
ip = "192.0.2.41"
site = "s"
weight = 1
[[service]]
name = "ratio-2"
ip = "192.0.2.42"
site = "s"
weight = 2
[[service]]
name = "ratio-5"
ip = "192.0.2.43"
site = "s"
weight = 5
[[gslb_domain]]
name = "ratio.example.com"
ttl = 30
method = "ratio"
services = ["ratio-1", "ratio-2", "ratio-5"]

# Ratio 1:3 decided per query: its backup domain hashes the client, so the responder asks the
# engine for every query.
[[service]]
name = "pq-1"
ip = "192.0.2.51"
site = "s"
weight = 1
[[service]]
name = "pq-3"
ip = "192.0.2.52"
site = "s"
weight = 3
[[gslb_domain]]
name = "ratio-pq.example.com"
ttl = 30
method = "ratio"
services = ["pq-1", "pq-3"]
backup_domain = "hash.example.com"
[[service]]
name = "hash-1"
ip = "192.0.2.61"
site = "s"
[[gslb_domain]]
name = "hash.example.com"
ttl = 30
method = "sourceiphash"
services = ["hash-1"]
"#;

/// A client in no view, and one in view "v1".
const DEFAULT_CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 7));
const V1_CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7));
const TTL: u32 = 30;

/// One answer set: a name and qtype as one client asks it, and the addresses it rotates over.
#[derive(Clone, Copy, Debug)]
struct Set {
    name: &'static str,
    rtype: RecordType,
    client: IpAddr,
    addrs: &'static [&'static str],
}

const RR1_A: Set = Set {
    name: "rr1.example.com",
    rtype: RecordType::A,
    client: DEFAULT_CLIENT,
    addrs: &["192.0.2.11", "192.0.2.12"],
};
const RR1_AAAA: Set = Set {
    rtype: RecordType::AAAA,
    addrs: &["2001:db8:1::11", "2001:db8:1::12"],
    ..RR1_A
};
const RR1_A_V1: Set = Set {
    client: V1_CLIENT,
    addrs: &["192.0.2.111", "192.0.2.112"],
    ..RR1_A
};
const RR2_A: Set = Set {
    name: "rr2.example.com",
    addrs: &["192.0.2.21", "192.0.2.22"],
    ..RR1_A
};
const RR3_A: Set = Set {
    name: "rr3.example.com",
    addrs: &["192.0.2.31", "192.0.2.32", "192.0.2.33"],
    ..RR1_A
};
const RATIO: Set = Set {
    name: "ratio.example.com",
    addrs: &["192.0.2.41", "192.0.2.42", "192.0.2.43"],
    ..RR1_A
};
const RATIO_WEIGHTS: [u32; 3] = [1, 2, 5];
const RATIO_PQ: Set = Set {
    name: "ratio-pq.example.com",
    addrs: &["192.0.2.51", "192.0.2.52"],
    ..RR1_A
};
const RATIO_PQ_WEIGHTS: [u32; 2] = [1, 3];

fn config() -> Config {
    Config::parse(&config_text(), Path::new("rotation.toml")).expect("the test configuration")
}

/// Whatever answers: the responder or the XDP program.
trait Asker {
    /// The one address answered to `set`'s query.
    fn ask(&mut self, case: &str, set: &Set) -> IpAddr;
}

impl Asker for Responder {
    fn ask(&mut self, case: &str, set: &Set) -> IpAddr {
        let got = responder_addrs(self, set.name, set.rtype, set.client);
        assert!(
            got.len() == 1 && ips(set.addrs).contains(&got[0]),
            "{case}: {} {} from {}: one of {:?}, got {got:?}",
            set.name,
            set.rtype,
            set.client,
            set.addrs
        );
        got[0]
    }
}

/// The XDP program with the test configuration published, on this thread's CPU (the turns are
/// per CPU: consecutive runs on one CPU take consecutive turns).
struct Xdp {
    dp: Dataplane,
    id: u16,
}

impl Xdp {
    fn new(snapshot: &Snapshot) -> Option<Xdp> {
        if !common::privileged() {
            return None;
        }
        common::pin_to_current_cpu();
        let mut dp = Dataplane::load(None).expect("loading the XDP object");
        dp.table.publish(snapshot).expect("publishing");
        Some(Xdp { dp, id: 0 })
    }
}

impl Asker for Xdp {
    fn ask(&mut self, case: &str, set: &Set) -> IpAddr {
        self.id = self.id.wrapping_add(1);
        let frame = Frame::udp(
            set.client,
            IpAddr::V4(SERVER_V4),
            wire(&query(self.id, set.name, set.rtype)),
        );
        let expect = Expect {
            rtype: set.rtype,
            ttl: TTL,
            answers: Answers::OneOf(ips(set.addrs)),
        };
        let case = format!("{case}: {} {} from {}", set.name, set.rtype, set.client);
        ask(&self.dp, &case, &frame, &expect)[0]
    }
}

/// The interleavings every test runs: round robin over the sets, then random ones (fixed
/// seeds), each `len` queries long.
fn interleavings(sets: usize, len: usize) -> Vec<(String, Vec<usize>)> {
    let mut out = vec![(
        "alternating".to_owned(),
        (0..len).map(|i| i % sets).collect(),
    )];
    for seed in [1u64, 0x5eed, 0xdead_beef, 42, 0x1234_5678_9abc] {
        let mut rng = rng::Rng(seed);
        out.push((
            format!("random (seed {seed:#x})"),
            (0..len)
                .map(|_| (rng.next() % sets as u64) as usize)
                .collect(),
        ));
    }
    out
}

/// Asks `sets` in `order` and checks that each set's answers are a rotation: its first
/// answers are all its addresses, each once, and then they repeat in that order.
fn assert_each_cycles(asker: &mut impl Asker, case: &str, sets: &[Set], order: &[usize]) {
    let mut got: Vec<Vec<IpAddr>> = vec![Vec::new(); sets.len()];
    for &i in order {
        let addr = asker.ask(case, &sets[i]);
        got[i].push(addr);
    }
    for (set, got) in sets.iter().zip(&got) {
        let n = set.addrs.len();
        let what = format!("{case}: {} {} from {}", set.name, set.rtype, set.client);
        assert!(got.len() >= 2 * n, "{what}: asked only {} times", got.len());
        let mut first: Vec<IpAddr> = got[..n].to_vec();
        first.sort();
        let mut all = ips(set.addrs);
        all.sort();
        assert_eq!(first, all, "{what}: the first {n} answers, {got:?}");
        for k in n..got.len() {
            assert_eq!(
                got[k],
                got[k - n],
                "{what}: answer {k} breaks the rotation, {got:?}"
            );
        }
    }
}

/// The round-robin sets asked together: three names, A and AAAA of one, and two clients in
/// two views of one.
const ROUND_ROBIN: [Set; 5] = [RR1_A, RR2_A, RR3_A, RR1_AAAA, RR1_A_V1];

/// The interleavings the round-robin tests run, over every subset that makes the old single
/// counter stick: two names, A and AAAA, two views, and all of them.
fn round_robin_cases() -> Vec<(String, Vec<Set>, Vec<usize>)> {
    let groups: [(&str, Vec<Set>); 4] = [
        ("two names", vec![RR1_A, RR2_A]),
        ("A and AAAA", vec![RR1_A, RR1_AAAA]),
        ("two views", vec![RR1_A, RR1_A_V1]),
        ("five sets", ROUND_ROBIN.to_vec()),
    ];
    let mut cases = Vec::new();
    for (group, sets) in groups {
        for (how, order) in interleavings(sets.len(), 24 * sets.len()) {
            cases.push((format!("{group}, {how}"), sets.clone(), order));
        }
    }
    cases
}

/// Asks `ratio` `answers` times, alternating with `other`, and checks each address's share
/// against its weight's, within 2 points.
fn assert_ratio(asker: &mut impl Asker, ratio: &Set, weights: &[u32], other: &Set) {
    const ANSWERS: usize = 10_000;
    let mut counts: HashMap<IpAddr, usize> = HashMap::new();
    for i in 0..ANSWERS {
        asker.ask("ratio, alternating", other);
        let addr = asker.ask(&format!("ratio, answer {i}"), ratio);
        *counts.entry(addr).or_default() += 1;
    }
    let total: u32 = weights.iter().sum();
    for (addr, weight) in ips(ratio.addrs).iter().zip(weights) {
        let share = *counts.get(addr).unwrap_or(&0) as f64 / ANSWERS as f64;
        let want = f64::from(*weight) / f64::from(total);
        assert!(
            (share - want).abs() <= 0.02,
            "{}: {addr} (weight {weight}) got {:.2}% of {ANSWERS} answers, want {:.2}% ± 2: {counts:?}",
            ratio.name,
            100.0 * share,
            100.0 * want
        );
    }
}

// ---- The responder ----

fn new_responder() -> (Responder, Config, Snapshot) {
    let config = config();
    let snapshot = Snapshot::from_config(&config);
    (Responder::new(&snapshot), config, snapshot)
}

#[test]
fn responder_rotates_each_set_in_any_interleaving() {
    for (case, sets, order) in round_robin_cases() {
        // A responder of its own per case: each starts from fresh turns.
        let (mut responder, _, _) = new_responder();
        assert_each_cycles(&mut responder, &case, &sets, &order);
    }
}

#[test]
fn responder_ratio_keeps_its_proportions_between_other_queries() {
    let (mut responder, _, snapshot) = new_responder();
    assert!(
        !snapshot.engine_domains.contains(&RATIO.name.to_owned()),
        "ratio.example.com is compiled"
    );
    assert_ratio(&mut responder, &RATIO, &RATIO_WEIGHTS, &RR2_A);
}

#[test]
fn responder_per_query_ratio_keeps_its_proportions_between_other_queries() {
    let (mut responder, _, snapshot) = new_responder();
    assert!(
        snapshot.engine_domains.contains(&RATIO_PQ.name.to_owned()),
        "ratio-pq.example.com is decided per query: {:?}",
        snapshot.engine_domains
    );
    assert_ratio(&mut responder, &RATIO_PQ, &RATIO_PQ_WEIGHTS, &RR2_A);
    // And between queries for its own AAAA (NODATA, but asked of the engine all the same).
    let (mut responder, _, _) = new_responder();
    let aaaa = Set {
        rtype: RecordType::AAAA,
        ..RATIO_PQ
    };
    let mut counts = [0usize; 2];
    let addrs = ips(RATIO_PQ.addrs);
    for _ in 0..400 {
        assert!(responder_addrs(&responder, aaaa.name, aaaa.rtype, aaaa.client).is_empty());
        let got = responder.ask("ratio-pq between AAAA", &RATIO_PQ);
        counts[addrs
            .iter()
            .position(|a| *a == got)
            .expect("one of its addresses")] += 1;
    }
    assert_eq!(counts, [100, 300], "1:3 over 400 answers");
}

/// A republish (here: one service of another name down) does not restart the rotations, and
/// each set goes on from where it was.
#[test]
fn responder_rotation_goes_on_across_a_republish() {
    let (mut responder, config, _) = new_responder();
    assert_goes_on(&mut responder, |r| r.replace(&degraded(&config)));
}

/// The snapshot with one service of rr3 down.
fn degraded(config: &Config) -> Snapshot {
    Snapshot::with_health(config, |s| s != "rr3-c")
}

/// Asks three sets of two addresses once each, `republish`es, and asks them twice more: the
/// answer after the republish is each set's next address, and the one after that its first
/// again.
fn assert_goes_on<A: Asker>(asker: &mut A, republish: impl FnOnce(&mut A)) {
    let sets = [RR1_A, RR2_A, RR1_A_V1];
    let before: Vec<IpAddr> = sets.iter().map(|s| asker.ask("before", s)).collect();
    republish(asker);
    let after: Vec<IpAddr> = sets.iter().map(|s| asker.ask("after", s)).collect();
    for ((set, b), a) in sets.iter().zip(&before).zip(&after) {
        assert_ne!(
            a, b,
            "{} from {}: the rotation restarted",
            set.name, set.client
        );
    }
    let again: Vec<IpAddr> = sets.iter().map(|s| asker.ask("again", s)).collect();
    assert_eq!(again, before);
}

// ---- Through the XDP program ----

#[test]
fn xdp_rotates_each_set_in_any_interleaving() {
    let snapshot = Snapshot::from_config(&config());
    for (case, sets, order) in round_robin_cases() {
        let Some(mut xdp) = Xdp::new(&snapshot) else {
            return;
        };
        assert_each_cycles(&mut xdp, &case, &sets, &order);
    }
}

#[test]
fn xdp_ratio_keeps_its_proportions_between_other_queries() {
    let Some(mut xdp) = Xdp::new(&Snapshot::from_config(&config())) else {
        return;
    };
    assert_ratio(&mut xdp, &RATIO, &RATIO_WEIGHTS, &RR2_A);
}

/// A republish (a new generation, one service of another name down) keeps each set's slot:
/// its rotation goes on from where it was. The set that lost its third address, asked twice
/// before (its slot then points at that third record), starts again at its first.
#[test]
fn xdp_rotation_goes_on_across_a_republish() {
    let config = config();
    let Some(mut xdp) = Xdp::new(&Snapshot::from_config(&config)) else {
        return;
    };
    let first_two: Vec<IpAddr> = (0..2).map(|_| xdp.ask("rr3 before", &RR3_A)).collect();
    assert_ne!(first_two[0], first_two[1]);
    assert_goes_on(&mut xdp, |xdp| {
        let stats = xdp
            .dp
            .table
            .publish(&degraded(&config))
            .expect("republishing");
        assert_eq!(stats.shared_rotors, 0);
    });
    // The name that lost a service rotates over the two left.
    let rr3 = Set {
        addrs: &["192.0.2.31", "192.0.2.32"],
        ..RR3_A
    };
    assert_eq!(xdp.ask("rr3 after", &rr3), first_two[0], "rr3 starts again");
    assert_each_cycles(
        &mut xdp,
        "rr3 degraded",
        &[rr3, RR2_A],
        &[0, 1, 0, 1, 0, 1, 0, 1],
    );
}
