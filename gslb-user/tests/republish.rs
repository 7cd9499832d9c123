//! Republishing is atomic for the fast path: while one CPU runs the program in a loop
//! (BPF_PROG_TEST_RUN), the other publishes two answer sets alternately hundreds of times; every
//! reply is a whole reply of exactly one of them (address and TTL together), never a pass, an
//! empty answer or a mix.

mod common;

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
    let Some(mut dp) = common::dataplane() else { return };
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        panic!("this test needs two CPUs: one runs the program while the other publishes");
    }
    let sets = [snapshot("198.51.100.1", 100), snapshot("198.51.100.2", 200)];
    let frame = Frame::v4(wire(&query(1, "www.example.com", RecordType::A))).bytes();
    let (program, table) = dp.program_and_table();
    table.publish(&sets[0]).unwrap();
    let done = AtomicBool::new(false);

    let seen = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            common::pin_to_cpu(0);
            let mut seen: BTreeMap<String, u64> = BTreeMap::new();
            let mut out = vec![0u8; 4096];
            // Until the publisher is done, and a bounded number of runs in any case.
            for _ in 0..5_000_000 {
                if done.load(Ordering::Relaxed) {
                    break;
                }
                let result = program
                    .test_run(TestRunOptions {
                        data_in: Some(&frame),
                        data_out: Some(&mut out),
                        ..TestRunOptions::new()
                    })
                    .unwrap();
                let reply = if result.return_value == XDP_TX {
                    // Ethernet 14 + IPv4 20 + UDP 8.
                    let msg = Message::from_vec(&out[42..result.data_size_out as usize]).unwrap();
                    let answers: Vec<String> = msg
                        .answers()
                        .iter()
                        .map(|r| match r.data() {
                            RData::A(a) => format!("{} ttl {}", IpAddr::V4(a.0), r.ttl()),
                            other => format!("{other:?}"),
                        })
                        .collect();
                    answers.join(", ")
                } else {
                    format!("XDP action {}", result.return_value)
                };
                *seen.entry(reply).or_default() += 1;
            }
            seen
        });
        common::pin_to_cpu(1);
        for i in 0..PUBLISHES {
            table.publish(&sets[(i + 1) % 2]).unwrap();
        }
        done.store(true, Ordering::Relaxed);
        reader.join().unwrap()
    });

    eprintln!("replies over {PUBLISHES} publishes: {seen:?}");
    let allowed = ["198.51.100.1 ttl 100", "198.51.100.2 ttl 200"];
    let unexpected: Vec<_> = seen.iter().filter(|(r, _)| !allowed.contains(&r.as_str())).collect();
    assert!(unexpected.is_empty(), "replies of no single generation: {unexpected:?} (all: {seen:?})");
    for want in allowed {
        assert!(seen.get(want).is_some_and(|n| *n > 0), "never saw {want}: {seen:?}");
    }
}
