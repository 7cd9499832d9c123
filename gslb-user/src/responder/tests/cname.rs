//! CNAME domains (issue 29) in the responder: the CNAME of the service the engine picks, for
//! every query type, followed into our zones (a static target, a GSLB target, a target
//! outside); views, health, persistence, wildcards, ECS scope and a MEP child's refusal.

use super::*;
use crate::compile::Inputs;
use crate::policy::ServiceState;

/// Services 0 `near` (→ target.example.com, in our zone), 1 `far` (→ edge.cdn.example.net,
/// outside, monitored at an IPv6 address), 2 `pooled` (→ pool.example.com, a GSLB domain),
/// 3 `web` (an address, pool.example.com's).
const CONFIG: &str = r#"
[server]
listen = ["192.0.2.1"]
edns_udp_size = 1232

[[view]]
name = "lab"
prefixes = ["198.51.100.0/24"]

[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"
[[zone.record]]
name = "target"
type = "A"
value = "192.0.2.80"
[[zone.record]]
name = "target"
type = "AAAA"
value = "2001:db8::80"
[[zone.record]]
name = "target"
type = "TXT"
value = "the target"

[[site]]
name = "eu"
ip = "192.0.2.201"
[[site]]
name = "us"
ip = "192.0.2.202"

[[service]]
name = "near"
ip = "192.0.2.10"
site = "eu"
location = "Europe.DE"
cname = "target.example.com"
[[service]]
name = "far"
ip = "2001:db8::11"
site = "us"
location = "NorthAmerica.US"
cname = "edge.cdn.example.net."
[[service]]
name = "pooled"
ip = "192.0.2.12"
site = "us"
cname = "pool.example.com"
[[service]]
name = "web"
ip = "192.0.2.20"
site = "us"

[[gslb_domain]]
name = "app.example.com"
record_type = "CNAME"
method = "globalavailability"
services = ["near", "far"]
ttl = 20
[[gslb_domain.view]]
view = "lab"
services = ["far"]

[[gslb_domain]]
name = "sticky.example.com"
record_type = "CNAME"
services = ["near", "far"]
persistence = { mask_v4 = 24, timeout_s = 300 }

[[gslb_domain]]
name = "chain.example.com"
record_type = "CNAME"
services = ["pooled"]

[[gslb_domain]]
name = "pool.example.com"
services = ["web"]

# Clients in 192.0.2.128/25 prefer the US: a DNS policy narrows a round robin's names.
[[action]]
name = "prefer-us"
preferred_locations = ["NorthAmerica.US"]
[[policy]]
name = "us-clients"
expression = 'CLIENT.IP.SRC.IN_SUBNET(192.0.2.128/25)'
action = "prefer-us"
priority = 10
[[gslb_domain]]
name = "pref.example.com"
record_type = "CNAME"
services = ["near", "far"]

[[gslb_domain]]
name = "primary.example.com"
record_type = "CNAME"
services = ["near"]
backup_domain = "*.w.example.com"

[[gslb_domain]]
name = "*.w.example.com"
record_type = "CNAME"
services = ["far"]
"#;

const LAB: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7));

fn config() -> Config {
    Config::parse(CONFIG, Path::new("cname.toml")).expect("the CNAME configuration loads")
}

/// The responder with service `down` (a configuration index) DOWN, every other UP.
fn responder_with(down: Option<usize>, refuse_gslb: bool) -> Responder {
    let services = (0..4)
        .map(|i| {
            if Some(i) == down {
                ServiceState::DOWN
            } else {
                ServiceState::UP
            }
        })
        .collect();
    let inputs = Inputs {
        services,
        refuse_gslb,
        ..Default::default()
    };
    Responder::new(&Snapshot::compile(&config(), &inputs))
}

/// min(zone TTL 3600, SOA minimum 60), of this file's zone.
const SOA_NEG: &str =
    "example.com. 60 SOA ns.example.net. hostmaster.example.com. 1 3600 600 604800 60";
const TO_NEAR: &str = "app.example.com. 20 CNAME target.example.com.";
const TO_FAR: &str = "app.example.com. 20 CNAME edge.cdn.example.net.";

#[test]
fn a_cname_domain_answers_every_type_with_its_cname_followed_into_our_zones() {
    let r = responder_with(None, false);
    let got = |qtype| ask(&r, "app.example.com", qtype, OUTSIDE);
    assert_eq!(
        got(RecordType::A),
        noerror(&[TO_NEAR, "target.example.com. 3600 A 192.0.2.80"])
    );
    assert_eq!(
        got(RecordType::AAAA),
        noerror(&[TO_NEAR, "target.example.com. 3600 AAAA 2001:db8::80"])
    );
    assert_eq!(
        got(RecordType::TXT),
        noerror(&[TO_NEAR, "target.example.com. 3600 TXT the target"])
    );
    // Asked for itself, or ANY: the CNAME alone.
    assert_eq!(got(RecordType::CNAME), noerror(&[TO_NEAR]));
    assert_eq!(got(RecordType::ANY), noerror(&[TO_NEAR]));
    // A type the target lacks: the CNAME, then the target zone's NODATA.
    assert_eq!(
        got(RecordType::MX),
        noerror(&[TO_NEAR]).authority(&[SOA_NEG])
    );
}

#[test]
fn views_health_and_backup_move_the_cname() {
    let up = responder_with(None, false);
    // The view's list: a target outside our zones, left to the resolver. The service is
    // monitored at an IPv6 address and still answers an A query: its answer is a name.
    assert_eq!(
        ask(&up, "app.example.com", RecordType::A, LAB),
        noerror(&[TO_FAR])
    );
    // `near` down: global availability goes on to `far` for everyone.
    let near_down = responder_with(Some(0), false);
    assert_eq!(
        ask(&near_down, "app.example.com", RecordType::A, OUTSIDE),
        noerror(&[TO_FAR])
    );
    // `far` down: the view falls back to the domain's own list.
    let far_down = responder_with(Some(1), false);
    assert_eq!(
        ask(&far_down, "app.example.com", RecordType::A, LAB),
        noerror(&[TO_NEAR, "target.example.com. 3600 A 192.0.2.80"])
    );
    // `near` down: its backup domain (a wildcard) answers for primary.example.com.
    assert_eq!(
        ask(&near_down, "primary.example.com", RecordType::A, OUTSIDE),
        noerror(&["primary.example.com. 30 CNAME edge.cdn.example.net."])
    );
    // Nothing up (the wildcard domain has `far` only): NODATA, no CNAME.
    assert_eq!(
        ask(&far_down, "x.w.example.com", RecordType::A, OUTSIDE),
        noerror(&[]).authority(&[SOA_NEG])
    );
}

#[test]
fn a_dns_policy_narrows_a_cname_domain() {
    let r = responder_with(None, false);
    let answers = |client: IpAddr| {
        (0..4)
            .map(|_| ask(&r, "pref.example.com", RecordType::A, client).answer[0].clone())
            .collect::<std::collections::BTreeSet<_>>()
    };
    let (near, far) = (
        "pref.example.com. 30 CNAME target.example.com.",
        "pref.example.com. 30 CNAME edge.cdn.example.net.",
    );
    // The policy's clients get the US name every time; the others both names in turn.
    let matched = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 200));
    assert_eq!(answers(matched), [far.to_owned()].into());
    assert_eq!(answers(OUTSIDE), [near.to_owned(), far.to_owned()].into());
}

#[test]
fn a_gslb_target_is_decided_for_the_same_client_and_wildcards_synthesise() {
    let r = responder_with(None, false);
    assert_eq!(
        ask(&r, "chain.example.com", RecordType::A, OUTSIDE),
        noerror(&[
            "chain.example.com. 30 CNAME pool.example.com.",
            "pool.example.com. 30 A 192.0.2.20"
        ])
    );
    // pool.example.com has no IPv6 service: the CNAME, then its NODATA.
    assert_eq!(
        ask(&r, "chain.example.com", RecordType::AAAA, OUTSIDE),
        noerror(&["chain.example.com. 30 CNAME pool.example.com."]).authority(&[SOA_NEG])
    );
    assert_eq!(
        ask(&r, "a.b.w.example.com", RecordType::AAAA, OUTSIDE),
        noerror(&["a.b.w.example.com. 30 CNAME edge.cdn.example.net."])
    );
}

#[test]
fn persistence_keeps_a_client_prefix_on_its_cname() {
    let r = responder_with(None, false);
    let target = |client: IpAddr| {
        let reply = ask(&r, "sticky.example.com", RecordType::A, client);
        reply.answer[0].clone()
    };
    let client = |i: u8| IpAddr::V4(Ipv4Addr::new(203, 0, 113, i));
    // Round robin hands the two names out in turn, but each /24 keeps its first one, whatever
    // the type asked.
    let first = target(client(1));
    for i in 2..10 {
        assert_eq!(target(client(i)), first, "client {i}");
        let aaaa = ask(&r, "sticky.example.com", RecordType::AAAA, client(i));
        assert_eq!(aaaa.answer[0], first, "client {i}, AAAA");
    }
    let other = target(IpAddr::V4(Ipv4Addr::new(203, 0, 114, 1)));
    assert_ne!(other, first, "another /24 takes the next turn");
}

#[test]
fn the_ecs_scope_of_a_cname_answer_is_its_decision_s() {
    use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption};
    let r = responder_with(None, false);
    let scope = |name: &str, qtype: RecordType, subnet: Ipv4Addr| {
        let mut m = query(name, qtype);
        let mut edns = Edns::new();
        edns.set_max_payload(1232);
        edns.options_mut()
            .insert(EdnsOption::Subnet(ClientSubnet::new(
                IpAddr::V4(subnet),
                24,
                0,
            )));
        m.set_edns(edns);
        let bytes = r.respond(&wire(&m), OUTSIDE, Transport::Udp).unwrap();
        let reply = Message::from_vec(&bytes).unwrap();
        let echoed = reply
            .edns
            .as_ref()
            .and_then(|e| e.option(EdnsCode::Subnet).cloned());
        let Some(EdnsOption::Subnet(echoed)) = echoed else {
            panic!("{name} {qtype}: ECS not echoed")
        };
        (reply.answers.len(), echoed.scope_prefix())
    };
    // The view's clients get another CNAME: the answer holds for the view's /24, for every
    // type (TXT included: it follows the CNAME).
    let lab = Ipv4Addr::new(198, 51, 100, 0);
    assert_eq!(scope("app.example.com", RecordType::A, lab), (1, 24));
    assert_eq!(scope("app.example.com", RecordType::TXT, lab), (1, 24));
    // A static name's answer is everyone's.
    assert_eq!(scope("target.example.com", RecordType::TXT, lab), (1, 0));
}

#[test]
fn a_mep_child_refuses_every_type_of_a_cname_domain() {
    let r = responder_with(None, true);
    for qtype in [RecordType::A, RecordType::TXT, RecordType::CNAME] {
        let reply = ask(&r, "app.example.com", qtype, OUTSIDE);
        assert_eq!(reply.rcode, ResponseCode::Refused, "{qtype}: {reply:?}");
    }
    // Its static target is answered as everywhere.
    let target = ask(&r, "target.example.com", RecordType::A, OUTSIDE);
    assert_eq!(
        target.answer,
        strings(&["target.example.com. 3600 A 192.0.2.80"])
    );
}
