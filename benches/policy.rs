//! `cargo bench -p gslb-user --bench policy`: one decision of the policy engine
//! (`gslb_user::policy::Engine::decide`) for a domain of 64 services at 16 sites, with a DNS
//! policy whose action has 8 preferred locations, 1,000 topology records and an RTT row.
//!
//! - `policy/preferred_8th_then_rtt`: the policy matches; the services of the first 7 preferred
//!   locations are down, so all 8 entries are tried; RTT decides among the 8th entry's services.
//! - `policy/rtt`: the policy does not match; RTT decides over the 64 services.
//! - `policy/topology_1000`: no RTT for the client; topology (1,000 records) decides.
//! - `policy/global_availability`: neither RTT nor a topology record; global availability.
//!
//! Target: under 1 µs per decision.

mod rng;

use std::hint::black_box;
use std::net::IpAddr;

use criterion::{Criterion, criterion_group, criterion_main};
use gslb_user::location::Location;
use gslb_user::model::{Domain, Model, Service, ServiceId, Site, SiteId};
use gslb_user::policy::{
    Action, Bandwidth, Client, Engine, Expr, Ldns, Method, Policy, Query, ServiceState, State,
    TopologyRecord,
};
use rng::Rng;

const SITES: usize = 16;
const SERVICES: usize = 64;
const TOPOLOGY: usize = 1000;

fn loc(s: &str) -> Location {
    Location::parse(s).unwrap()
}

fn engine() -> Engine {
    let sites: Vec<Site> = (0..SITES)
        .map(|i| Site {
            name: format!("site{i}"),
        })
        .collect();
    // Service i is at site i / 4, in country C(i % 16): each preferred country has 4 services.
    let services: Vec<Service> = (0..SERVICES)
        .map(|i| Service {
            location: Some(loc(&format!("Asia.C{}.City{i}", i % 16))),
            max_connections: Some(10_000),
            ..Service::new(
                format!("svc{i}"),
                IpAddr::V4([192, 0, 2, i as u8 + 1].into()),
                SiteId::of(i / 4),
            )
        })
        .collect();
    let mut domain = Domain::new(
        "www.example.com",
        (0..SERVICES).map(ServiceId::of).collect(),
    );
    domain.chain = vec![Method::Rtt, Method::Topology, Method::GlobalAvailability];
    domain.tolerance_us = 2_000;

    // 1,000 records: prefixes from /8 to /24 under 10.0.0.0/8 and 172.16.0.0/12, and a few
    // location records.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let topology = (0..TOPOLOGY)
        .map(|i| {
            let site = (rng.next() % SITES as u64) as usize;
            let score = (rng.next() % 200) as u32 + 1;
            let ldns = if i % 50 == 0 {
                Ldns::Location(loc(&format!("Africa.C{}", i % 7)))
            } else {
                let len = 8 + (rng.next() % 17) as u8;
                let base: u32 = if i % 2 == 0 { 0x0a00_0000 } else { 0xac10_0000 };
                let addr = base | (rng.next() as u32 & 0x00ff_ffff);
                let net = ipnet::Ipv4Net::new(addr.into(), len).unwrap().trunc();
                Ldns::Prefix(net.into())
            };
            TopologyRecord {
                site: SiteId::of(site),
                ldns,
                score,
            }
        })
        .collect();
    let policies = vec![
        Policy {
            name: "lab".into(),
            priority: 1,
            expr: Expr::parse("CLIENT.IP.SRC.IN_SUBNET(192.168.0.0/16)").unwrap(),
            action: Action {
                name: "lab".into(),
                preferred: vec![loc("Asia.C15")],
            },
        },
        Policy {
            name: "zmb".into(),
            priority: 10,
            expr: Expr::parse(
                r#"CLIENT.IP.SRC.MATCHES_LOCATION("*.ZMB") && DNS.REQ.QUESTION.TYPE.EQ(A)"#,
            )
            .unwrap(),
            action: Action {
                name: "prefer".into(),
                preferred: (0..8).map(|c| loc(&format!("Asia.C{c}"))).collect(),
            },
        },
    ];
    Engine::new(std::sync::Arc::new(Model {
        sites,
        services,
        domains: vec![domain],
        topology,
        policies,
        ..Model::default()
    }))
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let engine = engine();
    let query = Query {
        name: "www.example.com",
        qtype: 1,
    };
    // Countries C0..C6 down: the action walks all 8 entries before finding UP services.
    let states: Vec<ServiceState> = (0..SERVICES)
        .map(|i| ServiceState {
            up: i % 16 >= 7,
            connections: i as u64 * 10,
            bandwidth: Bandwidth::ZERO,
        })
        .collect();
    let rtt: Vec<Option<u32>> = (0..SITES)
        .map(|i| Some(20_000 + (i as u32 * 7_919) % 150_000))
        .collect();
    let no_rtt = vec![None; SITES];
    let zmb = loc("Africa.ZMB.Lusaka");
    let fr = loc("Europe.FR");
    let in_topology: IpAddr = "10.1.2.3".parse().unwrap();
    let nowhere: IpAddr = "198.51.100.7".parse().unwrap();

    let cases: [(&str, Client<'_>, &[Option<u32>]); 4] = [
        (
            "preferred_8th_then_rtt",
            Client {
                addr: nowhere,
                location: Some(&zmb),
                view: 0,
                sticky: None,
            },
            &rtt,
        ),
        (
            "rtt",
            Client {
                addr: nowhere,
                location: Some(&fr),
                view: 0,
                sticky: None,
            },
            &rtt,
        ),
        (
            "topology_1000",
            Client {
                addr: in_topology,
                location: Some(&fr),
                view: 0,
                sticky: None,
            },
            &no_rtt,
        ),
        (
            "global_availability",
            Client {
                addr: nowhere,
                location: Some(&fr),
                view: 0,
                sticky: None,
            },
            &no_rtt,
        ),
    ];
    for (name, client, rtt) in &cases {
        let state = State {
            services: &states,
            rtt,
            disabled_domains: &[],
        };
        let d = engine.decide(0, &query, client, &state);
        eprintln!(
            "policy/{name}: {:?}, policy {:?}, {} candidates",
            d.tier,
            d.policy,
            d.candidates.len()
        );
    }

    let mut group = c.benchmark_group("policy");
    for (name, client, rtt) in &cases {
        let state = State {
            services: &states,
            rtt,
            disabled_domains: &[],
        };
        group.bench_function(*name, |b| {
            b.iter(|| {
                engine.decide(
                    black_box(0),
                    black_box(&query),
                    black_box(client),
                    black_box(&state),
                )
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
