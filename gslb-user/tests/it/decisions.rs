//! GSLB domains decided by the engine (a method other than round robin, DNS policies, …) are
//! compiled per client view like every other domain: the fast path's tables and the responder
//! give the engine's answer, with the client's location from the location database and the
//! health state. Only a domain whose answer depends on the single address (source IP hash,
//! persistence) is left to the responder, which asks the engine per query.

use crate::common;

use std::{net::IpAddr, path::Path, sync::Arc};

use common::{answer_addrs, ips, responder_addrs};
use gslb_user::{
    compile::{Inputs, Snapshot},
    config::Config,
    location::db::LocationDb,
    responder::{Responder, Transport},
};
use hickory_proto::{op::Message, rr::RecordType};

fn example(name: &str) -> Config {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name);
    Config::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn ask(responder: &Responder, name: &str, client: &str) -> Vec<IpAddr> {
    responder_addrs(responder, name, RecordType::A, client.parse().unwrap())
}

#[test]
fn global_availability_answers_the_first_service_up() {
    let config = example("lb-methods.toml");
    // (services down, answer)
    let table: [(&[&str], &[&str]); 4] = [
        (&[], &["198.51.100.10"]),
        (&["eu-1"], &["198.51.100.11"]),
        (&["eu-1", "eu-2"], &["203.0.113.10"]),
        (&["eu-2"], &["198.51.100.10"]),
    ];
    for (down, want) in table {
        let snapshot = Snapshot::with_health(&config, |s| !down.contains(&s));
        assert!(
            !snapshot
                .engine_domains
                .iter()
                .any(|d| d == "dr.example.com")
        );
        let entry = snapshot
            .domains
            .iter()
            .find(|d| d.name == "dr.example.com" && d.qtype == 1)
            .expect("the fast path answers a compiled domain");
        assert_eq!(
            entry.answers[0].1.addrs,
            ips(want),
            "down {down:?}: the fast path's answer"
        );
        // Source IP hashing depends on the single address: left to the responder.
        assert!(
            snapshot
                .engine_domains
                .iter()
                .any(|d| d == "hash.example.com")
        );
        let responder = Responder::new(&snapshot);
        for _ in 0..3 {
            assert_eq!(
                ask(&responder, "dr.example.com.", "192.0.2.7"),
                ips(want),
                "down {down:?}"
            );
        }
    }
}

#[test]
fn static_proximity_answers_by_the_clients_location() {
    let config = example("static-proximity.toml");
    let mut sources = config.locations.clone();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for f in &mut sources.files {
        f.path = root.join(&f.path);
    }
    let db = LocationDb::from_sources(&sources, Path::new("static-proximity.toml")).unwrap();
    let snapshot = Snapshot::compile(
        &config,
        &Inputs {
            locations: Some(&db),
            ..Inputs::default()
        },
    );
    let responder = Responder::new(&snapshot);
    responder.replace_with_locations(&snapshot, Some(Arc::new(db.clone())));
    // Without the database every client is nowhere, and the fast path's answer is the same
    // for all of them.
    let blind = Snapshot::from_config(&config);
    assert!(blind.views.is_empty(), "{:?}", blind.views);
    assert!(
        !snapshot.views.is_empty(),
        "London and New York clients get their own views"
    );
    // (client, answer): London by the CSV, London by a custom entry, New York by the CSV,
    // London for a GB client of the IP2Location file (its continent, Europe, is derived).
    let table = [
        ("198.51.100.7", "198.51.100.10"),
        ("192.0.2.9", "198.51.100.10"),
        ("203.0.113.7", "203.0.113.10"),
        ("100.66.0.7", "198.51.100.10"),
    ];
    for (client, want) in table {
        assert_eq!(
            ask(&responder, "www.example.com.", client),
            ips(&[want]),
            "client {client}"
        );
    }
}

/// One road: a domain's TTL and backup addresses reach the fast path's maps (the compiled
/// entries) and the responder's per-query decisions from the same model. A compiled domain and
/// a per-query one (source IP hash) fall back to the same backup domain, which has a TTL of its
/// own: both answer as the backup domain does, with its TTL, the maps and the responder alike;
/// with the backup domain down too, each answers its backup addresses with its own TTL.
#[test]
fn the_maps_and_the_responder_agree_on_a_backup_domains_answer_and_ttl() {
    const CONFIG: &str = r#"
[server]
listen = ["192.0.2.53"]

[[zone]]
name = "example.com"
ns = ["ns1.example.net"]
soa.rname = "hostmaster.example.com"

[[site]]
name = "a"
ip = "198.51.100.1"

[[service]]
name = "web"
ip = "198.51.100.10"
site = "a"

[[service]]
name = "dr"
ip = "192.0.2.200"
site = "a"

[[gslb_domain]]
name = "www.example.com"
services = ["web"]
ttl = 30
backup_domain = "dr.example.com"
backup_ip = ["192.0.2.98"]

[[gslb_domain]]
name = "hash.example.com"
services = ["web"]
method = "sourceiphash"
ttl = 30
backup_domain = "dr.example.com"
backup_ip = ["192.0.2.98"]

[[gslb_domain]]
name = "dr.example.com"
services = ["dr"]
ttl = 300
"#;
    let config = Config::parse(CONFIG, Path::new("backup.toml")).unwrap();
    // (services down, the answer's TTL, its addresses)
    let table: [(&[&str], u32, &[&str]); 3] = [
        (&[], 30, &["198.51.100.10"]),
        (&["web"], 300, &["192.0.2.200"]),
        (&["web", "dr"], 30, &["192.0.2.98"]),
    ];
    let client: IpAddr = "203.0.113.7".parse().unwrap();
    for (down, ttl, addrs) in table {
        let want = (ttl, ips(addrs));
        let snapshot = Snapshot::with_health(&config, |s| !down.contains(&s));
        assert_eq!(snapshot.engine_domains, ["hash.example.com"]);
        let entry = snapshot
            .domains
            .iter()
            .find(|d| d.name == "www.example.com" && d.qtype == 1)
            .expect("the fast path answers the compiled domain");
        let [(_, answer)] = &entry.answers[..] else {
            panic!("down {down:?}: one answer for every client: {entry:?}");
        };
        assert_eq!(
            (answer.ttl, answer.addrs.clone()),
            want,
            "down {down:?}: maps"
        );
        let responder = Responder::new(&snapshot);
        for name in ["www.example.com.", "hash.example.com."] {
            assert_eq!(
                ttl_and_addrs(&responder, name, client),
                want,
                "down {down:?}: the responder's {name}"
            );
        }
    }
}

/// The TTL and the addresses of the responder's A answer (one TTL for the RRset).
fn ttl_and_addrs(responder: &Responder, name: &str, client: IpAddr) -> (u32, Vec<IpAddr>) {
    let request = common::wire(&common::query(1, name, RecordType::A));
    let reply = responder
        .respond(&request, client, Transport::Udp)
        .expect("a reply");
    let reply = Message::from_vec(&reply).expect("the reply parses");
    let ttls: Vec<u32> = reply.answers.iter().map(|r| r.ttl).collect();
    assert!(ttls.windows(2).all(|w| w[0] == w[1]), "{name}: {ttls:?}");
    (ttls.first().copied().unwrap_or(0), answer_addrs(&reply))
}
