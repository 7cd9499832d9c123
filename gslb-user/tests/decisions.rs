//! GSLB domains whose answer depends on more than the client's static view (a method other than
//! round robin, DNS policies, …) get no fast-path entry; the responder asks the decision engine
//! per query, with the client's location from the location database and the health state.

use std::{net::IpAddr, path::Path, sync::Arc};

use gslb_user::{
    compile::Snapshot,
    config::Config,
    location::db::LocationDb,
    responder::{Responder, Transport},
};
use hickory_proto::{
    op::{Message, Query},
    rr::{Name, RData, RecordType},
};

fn example(name: &str) -> Config {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples").join(name);
    Config::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn ask(responder: &Responder, name: &str, client: &str) -> Vec<IpAddr> {
    let mut query = Message::new();
    query.set_id(1).add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    let reply = responder
        .respond(&query.to_vec().unwrap(), client.parse().unwrap(), Transport::Udp)
        .expect("a reply");
    Message::from_vec(&reply)
        .unwrap()
        .answers()
        .iter()
        .filter_map(|r| match r.data() {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            _ => None,
        })
        .collect()
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|a| a.parse().unwrap()).collect()
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
        assert!(snapshot.engine_domains.iter().any(|d| d == "dr.example.com"));
        assert!(
            !snapshot.domains.iter().any(|d| d.name == "dr.example.com"),
            "the fast path must not answer a domain it cannot decide"
        );
        let responder = Responder::new(&config, &snapshot);
        for _ in 0..3 {
            assert_eq!(ask(&responder, "dr.example.com.", "192.0.2.7"), ips(want), "down {down:?}");
        }
    }
}

#[test]
fn static_proximity_answers_by_the_clients_location() {
    let config = example("static-proximity.toml");
    let mut sources = config.locations.clone();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    sources.netscaler = sources.netscaler.iter().map(|f| root.join(f)).collect();
    let db = LocationDb::from_sources(&sources, Path::new("static-proximity.toml")).unwrap();
    let snapshot = Snapshot::from_config(&config);
    let responder = Responder::new(&config, &snapshot);
    responder.replace_with_locations(&config, &snapshot, Some(Arc::new(db)));
    // (client, answer): London by the CSV, London by a custom entry, New York by the CSV.
    let table = [
        ("198.51.100.7", "198.51.100.10"),
        ("192.0.2.9", "198.51.100.10"),
        ("203.0.113.7", "203.0.113.10"),
    ];
    for (client, want) in table {
        assert_eq!(ask(&responder, "www.example.com.", client), ips(&[want]), "client {client}");
    }
}
