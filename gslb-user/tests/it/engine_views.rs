//! A domain's per-view services hold for clients in that view whatever decides the domain
//! (issue 11, defect 1): round robin by static view, the engine per client class (a DNS
//! policy anywhere in the configuration, another method, a method chain, spillover limits, a
//! backup domain, a `[[link]]`) or the engine per query (source-IP hash, persistence). Before,
//! anything that made the engine decide silently gave view clients the public services.
//!
//! And the ECS scope each answer carries (RFC 7871 §7.2.1), per method: the shortest prefix
//! within which that answer cannot change.

use crate::common;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::Path;

use common::{answer_addrs, ips, query, responder_addrs, wire};
use gslb_user::{
    compile::Snapshot,
    config::Config,
    responder::{Responder, Transport},
};
use hickory_proto::op::{Edns, Message};
use hickory_proto::rr::RecordType;
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption};

/// Two sites; the public services 198.51.100.10-11 (eu) and the corp view's 203.0.113.20-21
/// (us); corp is 192.0.2.0/24 and 2001:db8:c0::/48.
const BASE: &str = r#"
[server]
listen = ["192.0.2.53"]
[[view]]
name = "corp"
prefixes = ["192.0.2.0/24", "2001:db8:c0::/48"]
[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"
[[site]]
name = "eu"
ip = "198.51.100.1"
[[site]]
name = "us"
ip = "203.0.113.1"
[[service]]
name = "pub-1"
ip = "198.51.100.10"
site = "eu"
location = "Europe.UK"
weight = 1
[[service]]
name = "pub-2"
ip = "198.51.100.11"
site = "eu"
location = "Europe.DE"
weight = 3
[[service]]
name = "corp-1"
ip = "203.0.113.20"
site = "us"
location = "NorthAmerica.US"
weight = 1
[[service]]
name = "corp-2"
ip = "203.0.113.21"
site = "us"
location = "NorthAmerica.CA"
weight = 2
[[service]]
name = "spare"
ip = "198.51.100.99"
site = "eu"
"#;

/// The domain, with `extra` lines in its table, and `tail` after it.
fn config(extra: &str, tail: &str) -> Config {
    let text = format!(
        r#"{BASE}
[[gslb_domain]]
name = "www.example.com"
ttl = 30
services = ["pub-1", "pub-2"]
{extra}
[[gslb_domain.view]]
view = "corp"
services = ["corp-1", "corp-2"]
{tail}
"#
    );
    Config::parse(&text, Path::new("engine_views.toml")).unwrap_or_else(|e| panic!("{e}"))
}

const PUBLIC: [&str; 2] = ["198.51.100.10", "198.51.100.11"];
const CORP: [&str; 2] = ["203.0.113.20", "203.0.113.21"];
const IN_CORP: &str = "192.0.2.77";
const OUTSIDE: &str = "198.18.0.9";

/// The variants an operator writes on day one: each once made view clients get the public
/// services.
fn variants() -> Vec<(&'static str, Config)> {
    let unrelated_policy = r#"
[[action]]
name = "prefer-spare"
preferred_locations = ["Antarctica"]
[[policy]]
name = "nobody"
expression = 'CLIENT.IP.SRC.IN_SUBNET(100.64.0.0/10)'
action = "prefer-spare"
priority = 10
"#;
    let backup = r#"
[[gslb_domain]]
name = "backup.example.com"
services = ["spare"]
"#;
    vec![
        ("round robin by static view", config("", "")),
        ("an unrelated policy", config("", unrelated_policy)),
        ("ratio", config(r#"method = "ratio""#, "")),
        (
            "a method chain",
            config(
                "method = \"staticproximity\"\nalternate = \"roundrobin\"",
                "",
            ),
        ),
        (
            "global availability",
            config(r#"method = "globalavailability""#, ""),
        ),
        (
            "a backup domain",
            config(r#"backup_domain = "backup.example.com""#, backup),
        ),
        (
            "a link",
            config(
                "",
                "[[link]]\nname = \"isp\"\ninterface = \"lo\"\nthreshold_kbps = 1000000\nservices = [\"pub-1\"]",
            ),
        ),
        (
            "source IP hash",
            config(
                "method = \"sourceiphash\"\nsourceip_mask = { mask_v4 = 24, mask_v6 = 56 }",
                "",
            ),
        ),
        (
            "persistence",
            config(
                "persistence = { mask_v4 = 24, mask_v6 = 56, timeout_s = 60 }",
                "",
            ),
        ),
    ]
}

fn responder(config: &Config) -> Responder {
    Responder::new(&Snapshot::from_config(config))
}

/// The addresses `client` gets over 40 queries.
fn answers(r: &Responder, client: &str) -> BTreeSet<IpAddr> {
    (0..40)
        .flat_map(|_| {
            responder_addrs(
                r,
                "www.example.com.",
                RecordType::A,
                client.parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn views_hold_whatever_decides_the_domain() {
    for (what, config) in variants() {
        let r = responder(&config);
        let corp: BTreeSet<IpAddr> = ips(&CORP).into_iter().collect();
        let public: BTreeSet<IpAddr> = ips(&PUBLIC).into_iter().collect();
        let got = answers(&r, IN_CORP);
        assert!(
            !got.is_empty() && got.is_subset(&corp),
            "{what}: a corp client got {got:?}"
        );
        let got = answers(&r, OUTSIDE);
        assert!(
            !got.is_empty() && got.is_subset(&public),
            "{what}: an outside client got {got:?}"
        );
        // The same through ECS from a resolver outside the view.
        let (got, _) = ecs_answer(&r, "www.example.com.", RecordType::A, "192.0.2.0", 24);
        assert!(
            !got.is_empty() && got.iter().all(|a| corp.contains(a)),
            "{what}: an ECS corp subnet got {got:?}"
        );
    }
}

#[test]
fn a_view_with_nothing_up_falls_back_to_the_domains_services_under_the_engine() {
    let config = config(r#"method = "ratio""#, "");
    let snapshot = Snapshot::with_health(&config, |s| !s.starts_with("corp-"));
    let r = Responder::new(&snapshot);
    let got = answers(&r, IN_CORP);
    let public: BTreeSet<IpAddr> = ips(&PUBLIC).into_iter().collect();
    assert_eq!(got, public, "corp clients fall back to the public services");
}

#[test]
fn a_views_own_order_decides_global_availability() {
    // corp lists corp-2 first: global availability answers it, not corp-1.
    let text = format!(
        r#"{BASE}
[[gslb_domain]]
name = "www.example.com"
services = ["pub-1", "pub-2"]
method = "globalavailability"
[[gslb_domain.view]]
view = "corp"
services = ["corp-2", "corp-1"]
"#
    );
    let config = Config::parse(&text, Path::new("ga-view.toml")).unwrap();
    let r = responder(&config);
    assert_eq!(
        answers(&r, IN_CORP),
        ips(&["203.0.113.21"]).into_iter().collect()
    );
    let snapshot = Snapshot::with_health(&config, |s| s != "corp-2");
    let r = Responder::new(&snapshot);
    assert_eq!(
        answers(&r, IN_CORP),
        ips(&["203.0.113.20"]).into_iter().collect()
    );
}

/// The addresses and the echoed scope of an A/AAAA query with ECS `subnet`/`source` from a
/// resolver in no view.
fn ecs_answer(
    r: &Responder,
    name: &str,
    qtype: RecordType,
    subnet: &str,
    source: u8,
) -> (Vec<IpAddr>, u8) {
    let mut m = query(7, name, qtype);
    let mut edns = Edns::new();
    edns.set_max_payload(1232);
    edns.options_mut()
        .insert(EdnsOption::Subnet(ClientSubnet::new(
            subnet.parse().unwrap(),
            source,
            0,
        )));
    m.set_edns(edns);
    let bytes = r
        .respond(&wire(&m), OUTSIDE.parse().unwrap(), Transport::Udp)
        .expect("a reply");
    let reply = Message::from_vec(&bytes).expect("the reply parses");
    let scope = match reply.edns.as_ref().and_then(|e| e.option(EdnsCode::Subnet)) {
        Some(EdnsOption::Subnet(s)) => s.scope_prefix(),
        other => panic!("{name}: ECS not echoed: {other:?}"),
    };
    (answer_addrs(&reply), scope)
}

#[test]
fn the_ecs_scope_is_where_the_answer_cannot_change() {
    // (what, extra domain lines, subnet, source, scope)
    let table: [(&str, &str, &str, u8, u8); 12] = [
        // corp is 192.0.2.0/24: inside it every address gets corp's answer.
        ("view by static view", "", "192.0.2.0", 24, 24),
        ("view, narrower subnet", "", "192.0.2.128", 25, 24),
        // A /16 that holds corp: the public answer for 192.0.0.0 holds in 192.0.0.0/23, which
        // leaves corp out (the subnet was not specific enough: a scope longer than the source
        // makes the resolver ask again with more bits).
        ("view, wider subnet", "", "192.0.0.0", 16, 23),
        (
            "view under ratio",
            r#"method = "ratio""#,
            "192.0.2.0",
            24,
            24,
        ),
        // Outside corp, IPv4: 196.0.0.0/6 holds no corp address, 192.0.0.0/5 does.
        ("public by static view", "", "198.18.0.0", 15, 6),
        // No IPv6 service anywhere: NODATA for every client.
        ("IPv6 NODATA", "", "2001:db8:c0::", 48, 0),
        // Per-query domains: at least the mask, as far as the subnet carries it.
        (
            "source IP hash, /24 mask",
            "method = \"sourceiphash\"\nsourceip_mask = { mask_v4 = 24, mask_v6 = 56 }",
            "198.18.7.0",
            24,
            24,
        ),
        (
            "source IP hash, subnet shorter than the mask",
            "method = \"sourceiphash\"\nsourceip_mask = { mask_v4 = 24, mask_v6 = 56 }",
            "198.18.0.0",
            16,
            16,
        ),
        (
            "persistence, /28 mask",
            "persistence = { mask_v4 = 28, mask_v6 = 64, timeout_s = 60 }",
            "198.18.7.16",
            32,
            28,
        ),
        (
            "persistence inside the view: the view's run and the mask",
            "persistence = { mask_v4 = 20, mask_v6 = 64, timeout_s = 60 }",
            "192.0.2.0",
            24,
            24,
        ),
        // A /0 subnet asks for an answer good for everyone.
        ("/0 source", "", "0.0.0.0", 0, 0),
        (
            "/0 source, per query",
            "method = \"sourceiphash\"\nsourceip_mask = { mask_v4 = 24, mask_v6 = 56 }",
            "0.0.0.0",
            0,
            0,
        ),
    ];
    for (what, extra, subnet, source, want) in table {
        let config = config(extra, "");
        let r = responder(&config);
        let qtype = if subnet.contains(':') {
            RecordType::AAAA
        } else {
            RecordType::A
        };
        let (_, scope) = ecs_answer(&r, "www.example.com.", qtype, subnet, source);
        assert_eq!(scope, want, "{what}: {subnet}/{source}");
    }
}

#[test]
fn an_answer_the_same_for_every_client_has_scope_0() {
    // No view answers differently: every client, every subnet, scope 0.
    let text = format!(
        r#"{BASE}
[[gslb_domain]]
name = "www.example.com"
services = ["pub-1", "pub-2"]
method = "ratio"
"#
    );
    let config = Config::parse(&text, Path::new("uniform.toml")).unwrap();
    let r = responder(&config);
    for (subnet, source) in [("192.0.2.0", 24), ("198.18.0.0", 16), ("203.0.113.7", 32)] {
        let (addrs, scope) = ecs_answer(&r, "www.example.com.", RecordType::A, subnet, source);
        assert!(!addrs.is_empty());
        assert_eq!(scope, 0, "{subnet}/{source}");
    }
    // A per-query domain with a /0 subnet: answered for the resolver, scope 0.
    let (addrs, scope) = ecs_answer(&r, "www.example.com.", RecordType::A, "0.0.0.0", 0);
    assert!(!addrs.is_empty());
    assert_eq!(scope, 0);
}

#[test]
fn the_views_example_does_what_its_comments_say() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/views.toml");
    let config = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let r = responder(&config);
    let ask = |client: &str| -> BTreeSet<IpAddr> {
        (0..40)
            .flat_map(|_| {
                responder_addrs(
                    &r,
                    "api.example.com.",
                    RecordType::A,
                    client.parse().unwrap(),
                )
            })
            .collect()
    };
    let set = |a: &[&str]| ips(a).into_iter().collect::<BTreeSet<IpAddr>>();
    // In "us", outside the policy's /25: both US API services.
    assert_eq!(ask("203.0.113.200"), set(&["203.0.113.30", "203.0.113.31"]));
    // In "us" and in the policy's subnet: the preferred location only.
    assert_eq!(ask("203.0.113.7"), set(&["203.0.113.30"]));
    // In no view: the domain's own services.
    assert_eq!(
        ask("192.0.2.7"),
        set(&[
            "198.51.100.10",
            "203.0.113.10",
            "203.0.113.30",
            "203.0.113.31"
        ])
    );
    // The us view's ratio: 1:3 over many answers (within 2%).
    let mut counts = std::collections::BTreeMap::new();
    for _ in 0..4_000 {
        for a in responder_addrs(
            &r,
            "api.example.com.",
            RecordType::A,
            "203.0.113.200".parse().unwrap(),
        ) {
            *counts.entry(a).or_insert(0usize) += 1;
        }
    }
    let ca = counts[&"203.0.113.31".parse::<IpAddr>().unwrap()] as f64 / 4_000.0;
    assert!((ca - 0.75).abs() < 0.02, "api-us-ca's share {ca}");
}

#[test]
fn per_query_rotation_has_a_turn_per_view() {
    // Decided per query (its backup domain hashes the source), rotating among the view's list:
    // clients of two views asked alternately each cycle through their own list.
    let backup = r#"
[[gslb_domain]]
name = "backup.example.com"
method = "sourceiphash"
services = ["spare"]
"#;
    let config = config(r#"backup_domain = "backup.example.com""#, backup);
    let snapshot = Snapshot::from_config(&config);
    assert!(
        snapshot
            .engine_domains
            .iter()
            .any(|d| d == "www.example.com"),
        "decided per query"
    );
    let r = Responder::new(&snapshot);
    let (mut corp, mut public) = (BTreeSet::new(), BTreeSet::new());
    for _ in 0..8 {
        corp.extend(responder_addrs(
            &r,
            "www.example.com.",
            RecordType::A,
            IN_CORP.parse().unwrap(),
        ));
        public.extend(responder_addrs(
            &r,
            "www.example.com.",
            RecordType::A,
            OUTSIDE.parse().unwrap(),
        ));
    }
    assert_eq!(corp, ips(&CORP).into_iter().collect());
    assert_eq!(public, ips(&PUBLIC).into_iter().collect());
}
