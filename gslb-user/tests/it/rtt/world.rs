//! The rtt method end to end through the controller's `World`: the RTT table of a running
//! prober (other sites' columns merged in as MEP delivers them) is compiled into the answers,
//! and both the responder and the XDP fast path (BPF_PROG_TEST_RUN, root) answer a resolver
//! the site with the lowest RTT to its LDNS entry (a /24 here), swap when the RTTs swap, and
//! answer a resolver without an RTT by the domain's fallback method.
//!
//! This site ("south") cannot reach the resolvers (its prober hears nothing), so its column
//! stays empty: the RTT method only weighs sites with an RTT, and the fallback, global
//! availability, answers south's service first, which the RTT answers never are.

use crate::common;

use std::{
    net::{IpAddr, Ipv4Addr},
    path::Path,
    time::Duration,
};

use common::{Answers, Expect, Frame, SERVER_V4, query, responder_addrs, wire};
use gslb_user::{
    config::Config,
    health::HealthSupervisor,
    probe::{ProbeKind, ProbeOutcome, ProbeSupervisor, Prober, RttRow},
    responder::Responder,
    world::World,
};
use hickory_proto::rr::RecordType;

const CONFIG: &str = r#"
[server]
listen = ["192.0.2.53"]
site = "south"

[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

[[site]]
name = "south"
ip = "192.0.2.1"

[[site]]
name = "east"
ip = "192.0.2.2"

[[site]]
name = "west"
ip = "192.0.2.3"

[[service]]
name = "web-south"
ip = "198.51.100.1"
site = "south"

[[service]]
name = "web-east"
ip = "198.51.100.2"
site = "east"

[[service]]
name = "web-west"
ip = "198.51.100.3"
site = "west"

[[gslb_domain]]
name = "www.example.com"
ttl = 30
services = ["web-south", "web-east", "web-west"]
method = "rtt"
fallback = "globalavailability"

[rtt]
ldns_mask_v4 = 24
"#;

const TTL: u32 = 30;
const SOUTH: &str = "198.51.100.1";
const EAST: &str = "198.51.100.2";
const WEST: &str = "198.51.100.3";

/// The LDNS entry: resolvers in 203.0.113.0/24 share it.
const LDNS: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 0);
/// Two resolvers of that entry, and one of no entry.
const RESOLVER: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 7);
const NEIGHBOUR: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 200);
const STRANGER: Ipv4Addr = Ipv4Addr::new(203, 0, 114, 7);

/// A prober that never hears back: this site's column stays empty.
struct Unreachable;

impl Prober for Unreachable {
    async fn probe(&self, _: ProbeKind, _: IpAddr, _: Duration) -> ProbeOutcome {
        ProbeOutcome::NoReply
    }
}

fn row(ms: u64) -> [RttRow; 1] {
    [RttRow {
        ldns: LDNS.into(),
        rtt: Some(Duration::from_millis(ms)),
        kind: Some(ProbeKind::Icmp),
    }]
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[tokio::test]
async fn the_lowest_rtt_site_answers_its_ldns_prefix_in_the_responder_and_the_fast_path() {
    let config = Config::parse(CONFIG, Path::new("rtt-world.toml")).expect("configuration");
    assert!(
        config.rtt_probing(),
        "rtt domain and server.site: this site probes"
    );
    let supervisor = ProbeSupervisor::start("south", config.rtt.probe.clone(), Unreachable)
        .expect("valid settings");
    let handle = supervisor.handle();
    let mut world = World::new(&config, HealthSupervisor::new());
    world.rtt = Some(handle.clone());
    // Loaded once: every snapshot is published into the same maps, as gslbd does.
    let mut dataplane = if common::privileged() {
        Some(gslb_user::dataplane::Dataplane::load(None).expect("loading the XDP object"))
    } else {
        None
    };

    // (what the table holds, east's and west's RTT in ms, then per client the answer)
    type Step<'a> = (&'a str, Option<(u64, u64)>, [(Ipv4Addr, &'a str); 3]);
    let steps: [Step; 3] = [
        (
            "no RTT yet",
            None,
            [(RESOLVER, SOUTH), (NEIGHBOUR, SOUTH), (STRANGER, SOUTH)],
        ),
        (
            "east 10 ms, west 40 ms",
            Some((10, 40)),
            [(RESOLVER, EAST), (NEIGHBOUR, EAST), (STRANGER, SOUTH)],
        ),
        (
            "swapped",
            Some((40, 10)),
            [(RESOLVER, WEST), (NEIGHBOUR, WEST), (STRANGER, SOUTH)],
        ),
    ];
    for (case, rtts, answers) in steps {
        if let Some((east, west)) = rtts {
            // As MEP delivers them: each site's column from that site.
            handle.merge_remote("east", &row(east));
            handle.merge_remote("west", &row(west));
        }
        let snapshot = world.snapshot();
        let responder = Responder::new(&snapshot);
        if let Some(dp) = dataplane.as_mut() {
            dp.table.publish(&snapshot).expect("publishing");
        }
        for (client, want) in answers {
            let case = format!("{case}: {client}");
            assert_eq!(
                responder_addrs(&responder, "www.example.com", RecordType::A, client.into()),
                [ip(want)],
                "{case}: the responder"
            );
            if let Some(dp) = &dataplane {
                let frame = Frame::udp(
                    client.into(),
                    SERVER_V4.into(),
                    wire(&query(7, "www.example.com", RecordType::A)),
                );
                let expect = Expect {
                    rtype: RecordType::A,
                    ttl: TTL,
                    answers: Answers::OneOf(vec![ip(want)]),
                };
                common::ask(dp, &format!("{case}: the fast path"), &frame, &expect);
            }
        }
    }
    // This site's prober never filled its column.
    assert!(
        handle
            .rtts(RESOLVER.into())
            .iter()
            .all(|(site, _)| site != "south")
    );
    supervisor.shutdown().await;
}
