//! GSLB domains decided by the engine (a method other than round robin, DNS policies, …) are
//! compiled per client view like every other domain: the fast path's tables and the responder
//! give the engine's answer, with the client's location from the location database and the
//! health state. Only a domain whose answer depends on the single address (source IP hash,
//! persistence) is left to the responder, which asks the engine per query.

use crate::common;

use std::{net::IpAddr, path::Path, sync::Arc};

use common::{ips, responder_addrs};
use gslb_user::{
    compile::{Inputs, Snapshot},
    config::Config,
    location::db::LocationDb,
    responder::Responder,
};
use hickory_proto::rr::RecordType;

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
