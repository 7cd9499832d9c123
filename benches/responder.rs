//! `cargo bench -p gslb-user --bench responder`: what one answer of the responder costs
//! (`Responder::respond`, bytes in, bytes out, no sockets), and what EDNS Client Subnet adds:
//! the ECS scope of the answer (RFC 7871 §7.2.1) is computed per answer.
//!
//! The configuration has 1,024 static view prefixes (/24s of 10.0.0.0/14, alternating between
//! two views, so a client's segment has neighbours of the other view on both sides) and three
//! domains:
//! - `www`: decided by the engine (ratio) with per-view services: its scope walks the segments
//!   around the client;
//! - `flat`: ratio with no views: the same answer everywhere, scope 0 at once;
//! - `hash`: source IP hash with a /24 mask, decided per query.
//!
//! Benchmarks: `plain` (no EDNS), `edns` (an OPT without ECS), and ECS queries `ecs_view`,
//! `ecs_flat`, `ecs_hash`.

use std::fmt::Write as _;
use std::hint::black_box;
use std::net::IpAddr;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use gslb_user::compile::Snapshot;
use gslb_user::config::Config;
use gslb_user::responder::{Responder, Transport};
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsOption};
use hickory_proto::rr::{Name, RecordType};
use hickory_proto::serialize::binary::BinEncodable;

fn config() -> Config {
    let mut text = String::from(
        r#"
[server]
listen = ["192.0.2.53"]
[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"
[[site]]
name = "a"
ip = "192.0.2.1"
[[site]]
name = "b"
ip = "198.51.100.1"
"#,
    );
    for (name, ip, site, weight) in [
        ("p1", "192.0.2.10", "a", 1),
        ("p2", "192.0.2.11", "a", 2),
        ("v1", "198.51.100.10", "b", 1),
        ("v2", "198.51.100.11", "b", 3),
        ("w1", "203.0.113.10", "b", 1),
        ("w2", "203.0.113.11", "b", 1),
    ] {
        writeln!(
            text,
            "[[service]]\nname = \"{name}\"\nip = \"{ip}\"\nsite = \"{site}\"\nweight = {weight}"
        )
        .unwrap();
    }
    for view in ["odd", "even"] {
        let prefixes: Vec<String> = (0..1024)
            .filter(|i| (i % 2 == 1) == (view == "odd"))
            .map(|i| format!("\"10.{}.{}.0/24\"", i / 256, i % 256))
            .collect();
        writeln!(
            text,
            "[[view]]\nname = \"{view}\"\nprefixes = [{}]",
            prefixes.join(", ")
        )
        .unwrap();
    }
    text += r#"
[[gslb_domain]]
name = "www.example.com"
method = "ratio"
services = ["p1", "p2"]
[[gslb_domain.view]]
view = "odd"
services = ["v1", "v2"]
[[gslb_domain.view]]
view = "even"
services = ["w1", "w2"]
[[gslb_domain]]
name = "flat.example.com"
method = "ratio"
services = ["p1", "p2"]
[[gslb_domain]]
name = "hash.example.com"
method = "sourceiphash"
sourceip_mask = { mask_v4 = 24, mask_v6 = 56 }
services = ["p1", "p2", "v1"]
"#;
    Config::parse(&text, Path::new("responder-bench.toml")).expect("bench configuration")
}

fn request(name: &str, ecs: Option<(&str, u8)>, edns: bool) -> Vec<u8> {
    let mut m = Message::new(7, MessageType::Query, OpCode::Query);
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    if edns || ecs.is_some() {
        let mut e = Edns::new();
        e.set_max_payload(1232);
        if let Some((subnet, source)) = ecs {
            e.options_mut().insert(EdnsOption::Subnet(ClientSubnet::new(
                subnet.parse().unwrap(),
                source,
                0,
            )));
        }
        m.set_edns(e);
    }
    m.to_bytes().unwrap()
}

fn bench(c: &mut Criterion) {
    let config = config();
    let responder = Responder::new(&Snapshot::from_config(&config));
    let resolver: IpAddr = "10.1.7.9".parse().unwrap();
    let cases = [
        ("plain", request("www.example.com.", None, false)),
        ("edns", request("www.example.com.", None, true)),
        (
            "ecs_view",
            request("www.example.com.", Some(("10.1.7.0", 24)), true),
        ),
        (
            "ecs_flat",
            request("flat.example.com.", Some(("10.1.7.0", 24)), true),
        ),
        (
            "ecs_hash",
            request("hash.example.com.", Some(("10.1.7.0", 24)), true),
        ),
    ];
    let mut group = c.benchmark_group("responder");
    for (name, bytes) in &cases {
        assert!(responder.respond(bytes, resolver, Transport::Udp).is_some());
        group.bench_function(*name, |b| {
            b.iter(|| responder.respond(black_box(bytes), black_box(resolver), Transport::Udp));
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
