//! The publish's shortcuts for the fast path (`dataplane::shortcuts`), through BPF_PROG_TEST_RUN
//! against the responder: the default view's set copied under a view without its own answers
//! what the responder answers, in the same rotation (it shares the default set's turn), and
//! any-view names answer scope 0 from their hint. Needs root, see `common::privileged`. (The
//! hint's map-level cases, a planted view answer it skips and stale bits it survives, are
//! `dataplane::shortcuts`'s unit tests.)

use crate::common;

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use common::{
    Answers, Expect, Frame, SERVER_V4, ask, ask_scoped, ecs_subnet, edns, ips, query,
    responder_addrs, wire,
};
use gslb_user::{compile::Snapshot, config::Config, dataplane::Dataplane, responder::Responder};
use hickory_proto::rr::RecordType;

/// `rr` rotates three addresses, with an answer of its own in v1 only: a client of v2 gets the
/// default's, from a copy. `other` gives v2 its view. `any` is the same for every client.
fn config_text() -> String {
    common::site_s_config(
        &[("v1", "198.51.100.0/24"), ("v2", "198.51.101.0/24")],
        BODY,
    )
}

/// The domains and their services, at site "s".
const BODY: &str = r#"
[[service]]
name = "rr-a"
ip = "192.0.2.11"
site = "s"
[[service]]
name = "rr-b"
ip = "192.0.2.12"
site = "s"
[[service]]
name = "rr-c"
ip = "192.0.2.13"
site = "s"
[[service]]
name = "rr-v1a"
ip = "192.0.2.111"
site = "s"
[[service]]
name = "rr-v1b"
ip = "192.0.2.112"
site = "s"
[[gslb_domain]]
name = "rr.example.com"
ttl = 30
services = ["rr-a", "rr-b", "rr-c"]
[[gslb_domain.view]]
view = "v1"
services = ["rr-v1a", "rr-v1b"]

[[service]]
name = "other-a"
ip = "192.0.2.21"
site = "s"
[[service]]
name = "other-v2"
ip = "192.0.2.22"
site = "s"
[[gslb_domain]]
name = "other.example.com"
ttl = 30
services = ["other-a"]
[[gslb_domain.view]]
view = "v2"
services = ["other-v2"]

[[service]]
name = "any-a"
ip = "192.0.2.31"
site = "s"
[[service]]
name = "any-b"
ip = "192.0.2.32"
site = "s"
[[gslb_domain]]
name = "any.example.com"
ttl = 30
services = ["any-a", "any-b"]
"#;

const RR: &str = "rr.example.com";
const RR_DEFAULT: [&str; 3] = ["192.0.2.11", "192.0.2.12", "192.0.2.13"];
const RR_V1: [&str; 2] = ["192.0.2.111", "192.0.2.112"];
const ANY: &str = "any.example.com";
const ANY_ADDRS: [&str; 2] = ["192.0.2.31", "192.0.2.32"];

const DEFAULT_CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 7));
const V1_CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7));
const V2_CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 51, 101, 7));

fn config() -> Config {
    Config::parse(&config_text(), Path::new("shortcuts.toml")).expect("the configuration")
}

fn snapshot() -> Snapshot {
    Snapshot::from_config(&config())
}

fn one_of(addrs: &[&str]) -> Expect {
    Expect {
        rtype: RecordType::A,
        ttl: 30,
        answers: Answers::OneOf(ips(addrs)),
    }
}

/// The XDP program with `snapshot` published (with or without the shortcuts), on this
/// thread's CPU: the turns are per CPU.
fn xdp(snapshot: &Snapshot, shortcuts: bool) -> Option<(Dataplane, usize)> {
    if !common::privileged() {
        return None;
    }
    common::pin_to_current_cpu();
    common::init_tracing();
    let mut dp = Dataplane::load(None).expect("loading the XDP object");
    if !shortcuts {
        dp.table.without_shortcuts();
    }
    let stats = dp.table.publish(snapshot).expect("publishing");
    Some((dp, stats.default_copies))
}

/// Queries for `rr` from the three clients, interleaved, each answered by XDP as by the
/// responder: the v2 client (the default's copy) and the default client take turns of one
/// rotation, the v1 client its own.
#[test]
fn a_view_without_its_own_set_answers_from_the_copy_in_the_defaults_rotation() {
    let snapshot = snapshot();
    let Some((dp, copies)) = xdp(&snapshot, true) else {
        return;
    };
    assert!(copies > 0, "rr's default copied under v2");
    let responder = Responder::new(&snapshot);
    let order = [
        V2_CLIENT,
        DEFAULT_CLIENT,
        V2_CLIENT,
        V1_CLIENT,
        V2_CLIENT,
        V2_CLIENT,
        DEFAULT_CLIENT,
        V1_CLIENT,
        DEFAULT_CLIENT,
        V2_CLIENT,
        V1_CLIENT,
        DEFAULT_CLIENT,
    ];
    let (mut from_xdp, mut from_responder) = (Vec::new(), Vec::new());
    for (i, client) in order.into_iter().enumerate() {
        let expect = one_of(if client == V1_CLIENT {
            &RR_V1
        } else {
            &RR_DEFAULT
        });
        let frame = Frame::udp(
            client,
            IpAddr::V4(SERVER_V4),
            wire(&query(i as u16, RR, RecordType::A)),
        );
        from_xdp.extend(ask(
            &dp,
            &format!("query {i} from {client}"),
            &frame,
            &expect,
        ));
        from_responder.extend(responder_addrs(&responder, RR, RecordType::A, client));
    }
    assert_eq!(from_xdp, from_responder, "XDP and the responder, in order");
    // The default's three addresses, one each, over its first three turns (v2, default, v2):
    // one rotation for both clients.
    let mut shared = from_xdp[..3].to_vec();
    shared.sort();
    assert_eq!(shared, ips(&RR_DEFAULT));
}

/// An any-view name asked with a subnet in a view, in no view, and without ECS: the same
/// answer, at scope 0, as without the hint (the trie's way).
#[test]
fn an_any_view_name_answers_scope_0_from_its_hint_as_through_the_trie() {
    let snapshot = snapshot();
    for shortcuts in [true, false] {
        let Some((dp, _)) = xdp(&snapshot, shortcuts) else {
            return;
        };
        for subnet in ["198.51.100.0/24", "198.51.101.0/24", "203.0.113.0/24"] {
            let mut opt = edns();
            opt.options_mut().insert(ecs_subnet(subnet));
            let mut msg = query(7, ANY, RecordType::A);
            msg.set_edns(opt);
            let frame = Frame::udp(DEFAULT_CLIENT, IpAddr::V4(SERVER_V4), wire(&msg));
            let case = format!("{ANY} for {subnet}, shortcuts {shortcuts}");
            ask_scoped(&dp, &case, &frame, &one_of(&ANY_ADDRS), 0);
        }
        let frame = Frame::udp(
            V1_CLIENT,
            IpAddr::V4(SERVER_V4),
            wire(&query(8, ANY, RecordType::A)),
        );
        ask(&dp, "from v1", &frame, &one_of(&ANY_ADDRS));
    }
}
