//! A domain answered by RTT, through the fast path (BPF_PROG_TEST_RUN): a client whose LDNS has
//! an RTT row gets the nearest site (its LDNS view), both families; a client without one gets
//! the next method of the chain (the view's answer); the responder gives the same answers.

use crate::common;

use std::{net::IpAddr, path::Path, sync::Arc};

use common::{Answers, Expect, Frame, assert_reply, query, responder_addrs, run, wire};
use gslb_user::{
    compile::{Inputs, LdnsRtt, Snapshot},
    config::Config,
    dataplane::Dataplane,
    responder::Responder,
};
use hickory_proto::rr::RecordType;

const CONFIG: &str = r#"
[server]
listen = ["192.0.2.53", "2001:db8::53"]
[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"
[[site]]
name = "near"
ip = "192.0.2.1"
[[site]]
name = "far"
ip = "192.0.2.2"
[[service]]
name = "near-v4"
ip = "192.0.2.10"
site = "near"
[[service]]
name = "far-v4"
ip = "192.0.2.20"
site = "far"
[[service]]
name = "near-v6"
ip = "2001:db8::10"
site = "near"
[[service]]
name = "far-v6"
ip = "2001:db8::20"
site = "far"
[[gslb_domain]]
name = "www.example.com"
ttl = 30
method = "rtt"
alternate = "roundrobin"
services = ["near-v4", "far-v4", "near-v6", "far-v6"]
"#;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A query for www.example.com from `client` to the server of its family, as a frame.
fn www_query(client: IpAddr, rtype: RecordType) -> Vec<u8> {
    Frame::query_from(client, wire(&query(7, "www.example.com", rtype))).bytes()
}

/// Rows: 198.51.100.0/24 and 2001:db8:1::/48 are 10 ms from "near" and 40 ms from "far";
/// 203.0.113.0/24 the other way round.
fn rows() -> Arc<Vec<LdnsRtt>> {
    let row = |net: &str, near: u32, far: u32| LdnsRtt {
        ldns: net.parse().unwrap(),
        rtt_us: vec![Some(near * 1000), Some(far * 1000)].into(),
    };
    Arc::new(vec![
        row("198.51.100.0/24", 10, 40),
        row("203.0.113.0/24", 40, 10),
        row("2001:db8:1::/48", 10, 40),
    ])
}

#[test]
fn rtt_answers_come_from_the_ldns_view() {
    let config = Config::parse(CONFIG, Path::new("rtt.toml")).unwrap();
    let snapshot = Snapshot::compile(
        &config,
        &Inputs {
            rtt: rows(),
            ..Inputs::default()
        },
    );
    let entry = snapshot
        .domains
        .iter()
        .find(|d| d.qtype == 1)
        .expect("an A entry");
    assert!(entry.by_rtt, "{entry:?}");
    assert!(snapshot.stats.rtt_views >= 2, "{:?}", snapshot.stats);

    // (client, qtype, answers): one of the set when the answer rotates.
    let table: [(&str, RecordType, &[&str]); 6] = [
        ("198.51.100.7", RecordType::A, &["192.0.2.10"]),
        ("203.0.113.7", RecordType::A, &["192.0.2.20"]),
        ("2001:db8:1::7", RecordType::AAAA, &["2001:db8::10"]),
        // No RTT row: round robin over both sites.
        ("192.0.2.99", RecordType::A, &["192.0.2.10", "192.0.2.20"]),
        (
            "2001:db8:2::7",
            RecordType::AAAA,
            &["2001:db8::10", "2001:db8::20"],
        ),
        // An LDNS view, but AAAA from a v4 client in a row: near's IPv6 service.
        ("198.51.100.8", RecordType::AAAA, &["2001:db8::10"]),
    ];

    // Each query four times: a rotating answer would show its other address.
    let table: Vec<_> = table.iter().flat_map(|row| [*row; 4]).collect();
    let responder = Responder::new(&snapshot);
    for &(client, rtype, want) in &table {
        let want: Vec<IpAddr> = want.iter().map(|a| ip(a)).collect();
        let got = responder_addrs(&responder, "www.example.com", rtype, ip(client));
        assert!(
            got.len() == 1 && want.contains(&got[0]),
            "responder, {client} {rtype}: {got:?}, want one of {want:?}"
        );
    }

    if !common::privileged() {
        return;
    }
    let mut dp = Dataplane::load(None).expect("loading the XDP object");
    dp.table.publish(&snapshot).expect("publishing");
    for &(client, rtype, want) in &table {
        let want: Vec<IpAddr> = want.iter().map(|a| ip(a)).collect();
        let frame = www_query(ip(client), rtype);
        let out = run(&dp, &frame);
        let expect = Expect {
            rtype,
            ttl: 30,
            answers: Answers::OneOf(want.clone()),
        };
        assert_reply(&format!("{client} {rtype}"), &frame, &out, &expect);
    }
}

/// The RTT answers live in the choice map (`RTT_CHOICE`: LDNS view × signature → outcome
/// index) and in one answer set per outcome, not per LDNS view; through it, XDP's reply
/// (decoded, checksums checked) is the responder's, from the same snapshot, for clients with
/// an RTT row and without one.
#[test]
fn the_choice_map_answers_as_the_responder() {
    let config = Config::parse(CONFIG, Path::new("rtt.toml")).unwrap();
    let snapshot = Snapshot::compile(
        &config,
        &Inputs {
            rtt: rows(),
            ..Inputs::default()
        },
    );
    let choices = &snapshot.rtt_choices;
    assert!(
        !snapshot.stats.rtt_to_responder && choices.slots == 2,
        "one RTT slot per family: {:?}",
        snapshot.stats
    );
    for entry in snapshot.domains.iter().filter(|d| d.by_rtt) {
        // near or far: two outcomes, whatever the number of LDNS views.
        let outcomes: Vec<u32> = entry.rtt_answers.iter().map(|(o, _)| *o).collect();
        assert!(outcomes.len() <= 2, "{entry:?}");
        for view in 1..choices.views() as u32 {
            if let Some(o) = choices.choice(view, entry.rtt_slot) {
                assert!(outcomes.contains(&u32::from(o)), "view {view}: {o}");
            }
        }
    }
    if !common::privileged() {
        return;
    }
    let responder = Responder::new(&snapshot);
    let mut dp = Dataplane::load(None).expect("loading the XDP object");
    let stats = dp.table.publish(&snapshot).expect("publishing");
    // The v4 and v6 rows nearest "near" share one LDNS view (the same choices), "far" another.
    assert_eq!(snapshot.stats.rtt_views, 2, "{:?}", snapshot.stats);
    assert_eq!(stats.choices, 2, "a page per LDNS view: {stats:?}");
    // (client, qtype, the nearest site's address for a client with an RTT row)
    let table = [
        ("198.51.100.7", RecordType::A, Some("192.0.2.10")),
        ("203.0.113.7", RecordType::A, Some("192.0.2.20")),
        ("2001:db8:1::7", RecordType::AAAA, Some("2001:db8::10")),
        ("192.0.2.99", RecordType::A, None),
        ("2001:db8:2::7", RecordType::AAAA, None),
    ];
    for (client, rtype, nearest) in table {
        let frame = www_query(ip(client), rtype);
        let out = run(&dp, &frame);
        let want = responder_addrs(&responder, "www.example.com", rtype, ip(client));
        assert_eq!(want.len(), 1, "{client}: one address");
        let got = assert_reply(
            &format!("{client} {rtype}"),
            &frame,
            &out,
            &Expect {
                rtype,
                ttl: 30,
                answers: Answers::OneOf(want.clone()),
            },
        );
        assert_eq!(got, want, "{client} {rtype}: XDP and the responder");
        if let Some(nearest) = nearest {
            assert_eq!(got, [ip(nearest)], "{client} {rtype}: the nearest site");
        }
    }
}

/// Three rows, each alone in its LDNS view (three distinct choices): 198.51.100.0/24 and
/// 203.0.113.0/24 nearest "near" (`true`) or "far" as `near` says, 192.0.2.0/24 as near to
/// both (within the tolerance: both answer).
fn three_rows(near: [bool; 2]) -> Vec<LdnsRtt> {
    let row = |net: &str, rtt_us: Vec<Option<u32>>| LdnsRtt {
        ldns: net.parse().unwrap(),
        rtt_us: rtt_us.into(),
    };
    let by = |near: bool| {
        if near {
            vec![Some(10_000), Some(40_000)]
        } else {
            vec![Some(40_000), Some(10_000)]
        }
    };
    vec![
        row("198.51.100.0/24", by(near[0])),
        row("203.0.113.0/24", by(near[1])),
        row("192.0.2.0/24", vec![Some(20_000), Some(20_000)]),
    ]
}

/// Snapshots of RTT changes, one after another from one compiler (as gslbd's world compiles
/// them): each row keeps its LDNS view, only the choices move.
fn rtt_changes(steps: &[[bool; 2]]) -> Vec<Snapshot> {
    let config = Arc::new(Config::parse(CONFIG, Path::new("rtt.toml")).unwrap());
    let mut compiler = gslb_user::compile::Compiler::default();
    steps
        .iter()
        .map(|near| {
            compiler.compile(
                &*config,
                &Inputs {
                    rtt: Arc::new(three_rows(*near)),
                    ..Inputs::default()
                },
            )
        })
        .collect()
}

/// LDNS views whose choices differ between `a` and `b` (one page each here).
fn views_differing(a: &Snapshot, b: &Snapshot) -> usize {
    let (a, b) = (&a.rtt_choices, &b.rtt_choices);
    (1..b.views() as u32)
        .filter(|&v| (0..b.slots as u32).any(|s| a.choice(v, s) != b.choice(v, s)))
        .count()
}

/// An RTT change whose answer sets are all in the maps already is published by its choices
/// alone: the generation stays, no answer set or domain key is written or removed, and the
/// choice pages written are those that differ from what the parity written held (the
/// snapshot two publishes before); every reply is then the responder's from the new snapshot.
#[test]
fn an_rtt_change_publishes_only_its_choice_pages() {
    let steps = [
        [true, false],
        [false, false],
        [false, true],
        [true, true],
        [true, true],
    ];
    let snapshots = rtt_changes(&steps);
    for s in &snapshots[1..] {
        assert!(
            s.views == snapshots[0].views && s.domains == snapshots[0].domains,
            "only the choices move"
        );
    }
    if !common::privileged() {
        return;
    }
    let mut dp = Dataplane::load(None).expect("loading the XDP object");
    let first = dp.table.publish(&snapshots[0]).expect("publishing");
    assert!(!first.choices_only && first.answers > 0, "{first:?}");
    for (i, snapshot) in snapshots.iter().enumerate().skip(1) {
        let stats = dp.table.publish(snapshot).expect("publishing");
        // The parity written was last written two publishes ago; the first time, never.
        let pages = match i {
            1 => snapshot.stats.rtt_views,
            _ => views_differing(&snapshots[i - 2], snapshot),
        };
        assert!(
            stats.choices_only
                && stats.generation == first.generation
                && (stats.answers, stats.domains, stats.removed) == (0, 0, 0)
                && stats.choices == pages,
            "step {i}: {pages} pages: {stats:?}"
        );
        let responder = Responder::new(snapshot);
        // The rows that move (the third rotates over both sites).
        for (row, near) in three_rows(steps[i]).iter().zip(steps[i]) {
            let client = match row.ldns.network() {
                IpAddr::V4(a) => IpAddr::V4((u32::from(a) + 7).into()),
                IpAddr::V6(_) => unreachable!("v4 rows"),
            };
            let frame = www_query(client, RecordType::A);
            let want = responder_addrs(&responder, "www.example.com", RecordType::A, client);
            let nearest = ip(if near { "192.0.2.10" } else { "192.0.2.20" });
            assert_eq!(want, [nearest], "step {i}, {client}: the responder");
            let got = assert_reply(
                &format!("step {i}, {client}"),
                &frame,
                &run(&dp, &frame),
                &Expect {
                    rtype: RecordType::A,
                    ttl: 30,
                    answers: Answers::OneOf(want.clone()),
                },
            );
            assert_eq!(got, want, "step {i}, {client}: XDP and the responder");
        }
    }
}

/// A choice-only publish is atomic: a client whose nearest site moves back and forth, asked
/// through `test_run` on one CPU while the other publishes the two snapshots 400 times (each
/// by flipping `CHOICE_FLIP`, the generation kept), only ever gets the old nearest site or the
/// new one, and nothing is passed.
#[test]
fn a_choice_only_publish_switches_atomically() {
    const PUBLISHES: usize = 400;
    let snapshots = rtt_changes(&[[true, false], [false, false]]);
    if !common::privileged() {
        return;
    }
    let mut dp = Dataplane::load(None).expect("loading the XDP object");
    let first = dp.table.publish(&snapshots[1]).expect("publishing");
    let frame = www_query(ip("198.51.100.7"), RecordType::A);
    let (program, table) = dp.program_and_table();
    let pair = [snapshots[0].clone(), snapshots[1].clone()];
    let seen =
        common::replies_while_publishing(program, table, &frame, &pair, PUBLISHES, |_, m| {
            let answers: Vec<String> = m.answers.iter().map(|r| format!("{:?}", r.data)).collect();
            answers.join(", ")
        });
    // Each of those publishes was choice-only: the generation never moved.
    let last = table.publish(&pair[0]).expect("publishing");
    assert!(
        last.choices_only && last.generation == first.generation,
        "{first:?}, then {last:?}"
    );
    eprintln!("replies over {PUBLISHES} choice-only publishes: {seen:?}");
    let allowed = ["A(A(192.0.2.10))", "A(A(192.0.2.20))"];
    let unexpected: Vec<_> = seen
        .iter()
        .filter(|(r, _)| !allowed.contains(&r.as_str()))
        .collect();
    assert!(
        unexpected.is_empty(),
        "replies of neither choice: {unexpected:?} (all: {seen:?})"
    );
    for want in allowed {
        assert!(
            seen.get(want).is_some_and(|n| *n > 0),
            "never saw {want}: {seen:?}"
        );
    }
}

/// An RTT change that splits an LDNS view (two rows shared one; one row's nearest site moves
/// to the other site, whose answer sets a third row keeps in the maps) edits the trie, so it
/// takes a full publish, not a choice-only one: the program caches each source's trie value
/// per CPU for the generation, and a choice-only flip keeps the generation. Asked on one CPU
/// before and after, both rows' clients get their nearest sites, as the responder says (with
/// the flip alone, the client whose row took the new LDNS view number kept the shared view's
/// number from the cache, and with it the moved row's new choice).
#[test]
fn an_ldns_view_split_is_seen_by_a_source_the_program_cached() {
    let rows = |first_near: bool| {
        let mut rows = three_rows([first_near, true]);
        // Nearest "far": that outcome's answer sets stay in the maps throughout.
        rows.push(LdnsRtt {
            ldns: "198.18.0.0/24".parse().unwrap(),
            rtt_us: vec![Some(40_000), Some(10_000)].into(),
        });
        Arc::new(rows)
    };
    let config = Arc::new(Config::parse(CONFIG, Path::new("rtt.toml")).unwrap());
    let mut compiler = gslb_user::compile::Compiler::default();
    let snapshots: Vec<Snapshot> = [true, false]
        .into_iter()
        .map(|near| {
            compiler.compile(
                &*config,
                &Inputs {
                    rtt: rows(near),
                    ..Inputs::default()
                },
            )
        })
        .collect();
    assert!(
        snapshots[0].stats.rtt_views < snapshots[1].stats.rtt_views
            && snapshots[0].domains == snapshots[1].domains,
        "the change splits an LDNS view, the answer sets stay: {:?} then {:?}",
        snapshots[0].stats,
        snapshots[1].stats
    );
    if !common::privileged() {
        return;
    }
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // One CPU: its cache is the one the later queries read.
                common::pin_to_cpu(0);
                let mut dp = Dataplane::load(None).expect("loading the XDP object");
                for (i, snapshot) in snapshots.iter().enumerate() {
                    let stats = dp.table.publish(snapshot).expect("publishing");
                    if i > 0 {
                        assert!(!stats.choices_only, "a split is a full publish: {stats:?}");
                    }
                    let responder = Responder::new(snapshot);
                    // The moved row's client, and the one of the row that stays (either may
                    // keep the shared view's number).
                    for (client, near) in [("198.51.100.7", i == 0), ("203.0.113.7", true)] {
                        let client = ip(client);
                        let frame = www_query(client, RecordType::A);
                        let want =
                            responder_addrs(&responder, "www.example.com", RecordType::A, client);
                        let nearest = ip(if near { "192.0.2.10" } else { "192.0.2.20" });
                        assert_eq!(want, [nearest], "step {i}, {client}: the responder");
                        // Twice: the second from the cache.
                        for _ in 0..2 {
                            let got = assert_reply(
                                &format!("step {i}, {client}"),
                                &frame,
                                &run(&dp, &frame),
                                &Expect {
                                    rtype: RecordType::A,
                                    ttl: 30,
                                    answers: Answers::OneOf(want.clone()),
                                },
                            );
                            assert_eq!(got, want, "step {i}, {client}: XDP and the responder");
                        }
                    }
                }
            })
            .join()
            .expect("the pinned thread");
    });
}
