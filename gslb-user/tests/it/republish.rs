//! Republishing is atomic for the fast path: while one CPU runs the program in a loop
//! (BPF_PROG_TEST_RUN), the other publishes two answer sets alternately hundreds of times; every
//! reply is a whole reply of exactly one of them (address and TTL together), never a pass, an
//! empty answer or a mix.

use crate::common;

use std::{
    collections::BTreeMap,
    net::IpAddr,
    path::Path,
    sync::atomic::{AtomicBool, Ordering},
};

use aya::programs::{TestRun, TestRunOptions};
use common::{Frame, query, wire};
use gslb_user::{compile::Snapshot, config::Config};
use hickory_proto::{
    op::Message,
    rr::{RData, RecordType},
};

const PUBLISHES: usize = 400;
const XDP_TX: u32 = 3;

fn snapshot(addr: &str, ttl: u32) -> Snapshot {
    let text = format!(
        r#"
[server]
listen = ["192.0.2.53", "2001:db8::53"]
[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"
[[site]]
name = "s"
ip = "192.0.2.1"
[[service]]
name = "web"
ip = "{addr}"
site = "s"
[[gslb_domain]]
name = "www.example.com"
ttl = {ttl}
services = ["web"]
"#
    );
    Snapshot::from_config(&Config::parse(&text, Path::new("republish.toml")).unwrap())
}

#[test]
fn every_reply_belongs_to_exactly_one_generation() {
    let Some(mut dp) = common::dataplane() else {
        return;
    };
    assert!(
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get) >= 2,
        "this test needs two CPUs: one runs the program while the other publishes"
    );
    let sets = [snapshot("198.51.100.1", 100), snapshot("198.51.100.2", 200)];
    let frame = Frame::v4(wire(&query(1, "www.example.com", RecordType::A))).bytes();
    let (program, table) = dp.program_and_table();
    let seen =
        common::replies_while_publishing(program, table, &frame, &sets, PUBLISHES, |_, msg| {
            let answers: Vec<String> = msg
                .answers
                .iter()
                .map(|r| match &r.data {
                    RData::A(a) => format!("{} ttl {}", IpAddr::V4(a.0), r.ttl),
                    other => format!("{other:?}"),
                })
                .collect();
            answers.join(", ")
        });

    eprintln!("replies over {PUBLISHES} publishes: {seen:?}");
    let allowed = ["198.51.100.1 ttl 100", "198.51.100.2 ttl 200"];
    let unexpected: Vec<_> = seen
        .iter()
        .filter(|(r, _)| !allowed.contains(&r.as_str()))
        .collect();
    assert!(
        unexpected.is_empty(),
        "replies of no single generation: {unexpected:?} (all: {seen:?})"
    );
    for want in allowed {
        assert!(
            seen.get(want).is_some_and(|n| *n > 0),
            "never saw {want}: {seen:?}"
        );
    }
}

/// A configuration where service `gb` coming up splits one view: London and Berlin clients
/// both get `fr` while `gb` and `de` are down (their only match is the continent), and London
/// gets `gb` once it is up, while Berlin then rotates over `gb` and `fr` (both match its
/// continent only).
const SPLIT: &str = r#"
[server]
listen = ["192.0.2.53"]
[[location]]
from = "198.51.100.0"
to = "198.51.100.255"
location = "Europe.GB.England.London"
[[location]]
from = "203.0.113.0"
to = "203.0.113.255"
location = "Europe.DE.Berlin"
[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"
[[site]]
name = "s"
ip = "192.0.2.1"
[[service]]
name = "gb"
ip = "192.0.2.10"
site = "s"
location = "Europe.GB"
[[service]]
name = "de"
ip = "192.0.2.20"
site = "s"
location = "Europe.DE"
[[service]]
name = "fr"
ip = "192.0.2.30"
site = "s"
location = "Europe.FR"
[[gslb_domain]]
name = "www.example.com"
ttl = 60
method = "staticproximity"
services = ["gb", "de", "fr"]
"#;

/// Health flips that split and re-join views are published by editing the trie in place, and
/// still atomically: every reply to a London or a Berlin client is the answer of one of the two
/// states for that client, never a pass or another client's answer. (Berlin's `gb` answers come
/// from its rotation in the "up" state; until rotation was per answer set, London's queries
/// between Berlin's advanced the same turn and Berlin only ever got `fr`.)
#[test]
fn in_place_view_edits_are_atomic() {
    use gslb_user::{
        compile::{Compiler, Inputs},
        location::db::LocationDb,
        policy::ServiceState,
    };
    let Some(mut dp) = common::dataplane() else {
        return;
    };
    assert!(
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get) >= 2,
        "this test needs two CPUs: one runs the program while the other publishes"
    );
    let config = Config::parse(SPLIT, Path::new("split.toml")).unwrap();
    let db = LocationDb::from_sources(&config.locations, Path::new("split.toml")).unwrap();
    // Service states by configuration index: gb, de, fr.
    let state = |gb_up: bool| Inputs {
        locations: Some(&db),
        services: vec![
            if gb_up {
                ServiceState::UP
            } else {
                ServiceState::DOWN
            },
            ServiceState::DOWN,
            ServiceState::UP,
        ],
        ..Inputs::default()
    };
    let (down, up) = (state(false), state(true));
    let mut compiler = Compiler::default();
    let (program, table) = dp.program_and_table();
    let first = compiler.compile(&config, &down);
    table.publish(&first).unwrap();
    let london = "198.51.100.7".parse::<IpAddr>().unwrap();
    let berlin = "203.0.113.7".parse::<IpAddr>().unwrap();
    let frame = |client: IpAddr| {
        Frame::udp(
            client,
            common::SERVER_V4.into(),
            wire(&query(1, "www.example.com", RecordType::A)),
        )
        .bytes()
    };
    let frames = [(london, frame(london)), (berlin, frame(berlin))];
    let done = AtomicBool::new(false);

    let (seen, in_place) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            common::pin_to_cpu(0);
            let mut seen: BTreeMap<(IpAddr, String), u64> = BTreeMap::new();
            let mut out = vec![0u8; 4096];
            for i in 0..5_000_000usize {
                if done.load(Ordering::Relaxed) {
                    break;
                }
                let (client, frame) = &frames[i % 2];
                let result = program
                    .test_run(TestRunOptions {
                        data_in: Some(frame),
                        data_out: Some(&mut out),
                        ..TestRunOptions::new()
                    })
                    .unwrap();
                let reply = if result.return_value == XDP_TX {
                    let msg = Message::from_vec(&out[42..result.data_size_out as usize]).unwrap();
                    msg.answers
                        .iter()
                        .map(|r| match &r.data {
                            RData::A(a) => IpAddr::V4(a.0).to_string(),
                            other => format!("{other:?}"),
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                } else {
                    format!("XDP action {}", result.return_value)
                };
                *seen.entry((*client, reply)).or_default() += 1;
            }
            seen
        });
        common::pin_to_cpu(1);
        let mut in_place = 0;
        for i in 0..PUBLISHES {
            let snapshot = compiler.compile(&config, if i % 2 == 0 { &up } else { &down });
            let stats = table.publish(&snapshot).unwrap();
            assert!(
                snapshot.stats.incremental,
                "publish {i}: the partition is reused"
            );
            in_place += usize::from(stats.in_place);
        }
        done.store(true, Ordering::Relaxed);
        (reader.join().unwrap(), in_place)
    });

    eprintln!("replies over {PUBLISHES} in-place publishes: {seen:?}");
    assert_eq!(
        in_place, PUBLISHES,
        "every publish after the first edits the trie in place"
    );
    let allowed = [
        (london, "192.0.2.30"),
        (london, "192.0.2.10"),
        (berlin, "192.0.2.30"),
        (berlin, "192.0.2.10"),
    ];
    let unexpected: Vec<_> = seen
        .iter()
        .filter(|((c, r), _)| !allowed.iter().any(|(ac, ar)| ac == c && ar == r))
        .collect();
    assert!(
        unexpected.is_empty(),
        "replies of no single state: {unexpected:?} (all: {seen:?})"
    );
    for (client, answer) in allowed {
        assert!(
            seen.get(&(client, answer.to_string()))
                .is_some_and(|n| *n > 0),
            "never saw {client} → {answer}: {seen:?}"
        );
    }
}
