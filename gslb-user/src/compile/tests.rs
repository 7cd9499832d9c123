//! The compiler's own rules, on small configurations: view numbering, down services,
//! incremental compilation and the RTT budget.

use std::path::Path;

use gslb_common::DEFAULT_VIEW;

use super::*;
use crate::config::Config;

fn snapshot(toml: &str) -> Snapshot {
    Snapshot::from_config(&Config::parse(toml, Path::new("test.toml")).unwrap())
}

#[test]
fn views_and_answers_are_numbered_and_split_by_family() {
    let s = snapshot(
        r#"
            [server]
            listen = ["192.0.2.1"]
            [[view]]
            name = "eu"
            prefixes = ["198.51.100.0/24", "2001:db8:100::/48"]
            [[view]]
            name = "us"
            prefixes = ["203.0.113.0/24"]
            [[zone]]
            name = "example.com"
            ns = ["ns.example.net"]
            soa.rname = "hostmaster.example.com"
            [[site]]
            name = "s"
            ip = "192.0.2.200"
            [[service]]
            name = "w10"
            ip = "192.0.2.10"
            site = "s"
            [[service]]
            name = "w10-8080"
            ip = "192.0.2.10"
            port = 8080
            site = "s"
            [[service]]
            name = "w11"
            ip = "192.0.2.11"
            site = "s"
            [[service]]
            name = "w30"
            ip = "192.0.2.30"
            site = "s"
            [[service]]
            name = "w30v6"
            ip = "2001:db8::30"
            site = "s"
            [[service]]
            name = "nat"
            ip = "10.0.0.5"
            public_ip = "192.0.2.50"
            site = "s"
            [[gslb_domain]]
            name = "WWW.Example.com."
            ttl = 60
            answer = "all"
            services = ["w10", "w11"]
            backup_ip = ["192.0.2.99"]
            [[gslb_domain.view]]
            view = "us"
            services = ["w30", "w30v6"]
            [[gslb_domain.view]]
            view = "eu"
            services = ["w30v6"]
            [[gslb_domain]]
            name = "nat.example.com"
            services = ["nat", "w10-8080", "w10"]
            "#,
    );
    assert_eq!(
        *s.views,
        // In address order (IPv4 as IPv4-mapped IPv6), numbered in that order.
        vec![
            (
                "198.51.100.0/24".parse().unwrap(),
                ViewValue {
                    view: 1,
                    rtt_view: 0,
                    scope: 24,
                    reserved: [0; 3],
                }
            ),
            (
                "203.0.113.0/24".parse().unwrap(),
                ViewValue {
                    view: 2,
                    rtt_view: 0,
                    scope: 24,
                    reserved: [0; 3],
                }
            ),
            (
                "2001:db8:100::/48".parse().unwrap(),
                ViewValue {
                    view: 1,
                    rtt_view: 0,
                    scope: 48,
                    reserved: [0; 3],
                }
            ),
        ]
    );
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    // The configuration's default max_answers: 8 with answer = "all", else 1.
    let answer = |ttl, mode, addrs: &[&str]| Answer {
        ttl,
        mode,
        max_answers: if mode == AnswerMode::All { 8 } else { 1 },
        addrs: addrs.iter().map(|a| ip(a)).collect(),
        names: Vec::new(),
    };
    let all = |addrs: &[&str]| answer(60, AnswerMode::All, addrs);
    assert_eq!(
        s.domains,
        vec![
            DomainEntry {
                name: "www.example.com".into(),
                qtype: QTYPE_A,
                id: 0,
                // "eu" has no IPv4 service: no entry, its clients get the default view's.
                answers: vec![
                    (DEFAULT_VIEW, all(&["192.0.2.10", "192.0.2.11"])),
                    (2, all(&["192.0.2.30"]))
                ],
                ..Default::default()
            },
            // No default-view AAAA: the domain's own services are all IPv4.
            DomainEntry {
                name: "www.example.com".into(),
                qtype: QTYPE_AAAA,
                id: 1,
                answers: vec![(1, all(&["2001:db8::30"])), (2, all(&["2001:db8::30"]))],
                ..Default::default()
            },
            // The public IP is answered; an address shared by two services appears once.
            DomainEntry {
                name: "nat.example.com".into(),
                qtype: QTYPE_A,
                id: 2,
                answers: vec![(
                    DEFAULT_VIEW,
                    answer(30, AnswerMode::Rotate, &["192.0.2.50", "192.0.2.10"])
                )],
                ..Default::default()
            },
        ]
    );
}

#[test]
fn down_services_leave_the_answers() {
    let config = Config::parse(
        r#"
            [server]
            listen = ["192.0.2.53"]
            [[view]]
            name = "lab"
            prefixes = ["192.0.2.0/24"]
            [[zone]]
            name = "example.com"
            ns = ["ns.example.net"]
            soa.rname = "hostmaster.example.com"
            [[site]]
            name = "s"
            ip = "192.0.2.1"
            [[service]]
            name = "a"
            ip = "198.51.100.1"
            site = "s"
            [[service]]
            name = "b"
            ip = "198.51.100.2"
            site = "s"
            [[service]]
            name = "lab"
            ip = "192.0.2.80"
            site = "s"
            [[gslb_domain]]
            name = "www.example.com"
            answer = "all"
            services = ["a", "b"]
            backup_ip = ["203.0.113.99"]
              [[gslb_domain.view]]
              view = "lab"
              services = ["lab"]
            [[gslb_domain]]
            name = "empty.example.com"
            services = ["a"]
            "#,
        Path::new("test.toml"),
    )
    .unwrap();
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    // (services down, www default view, www lab view, empty.example.com default view)
    type Case<'a> = (
        &'a [&'a str],
        Option<Vec<IpAddr>>,
        Option<Vec<IpAddr>>,
        Option<Vec<IpAddr>>,
    );
    let table: [Case; 4] = [
        (
            &[],
            Some(vec![ip("198.51.100.1"), ip("198.51.100.2")]),
            Some(vec![ip("192.0.2.80")]),
            Some(vec![ip("198.51.100.1")]),
        ),
        (
            &["a"],
            Some(vec![ip("198.51.100.2")]),
            Some(vec![ip("192.0.2.80")]),
            None,
        ),
        // The lab view's only service down: its clients get the default view's answer.
        (
            &["lab"],
            Some(vec![ip("198.51.100.1"), ip("198.51.100.2")]),
            None,
            Some(vec![ip("198.51.100.1")]),
        ),
        // Everything down: the backup address; no backup: nothing (NODATA).
        (
            &["a", "b", "lab"],
            Some(vec![ip("203.0.113.99")]),
            None,
            None,
        ),
    ];
    for (down, www, lab, empty) in table {
        let s = Snapshot::with_health(&config, |name| !down.contains(&name));
        let get = |name: &str, view: u32| {
            s.domains
                .iter()
                .find(|d| d.name == name && d.qtype == QTYPE_A)
                .and_then(|d| d.answers.iter().find(|(v, _)| *v == view))
                .map(|(_, a)| a.addrs.clone())
        };
        assert_eq!(
            get("www.example.com", DEFAULT_VIEW),
            www,
            "down {down:?}: www"
        );
        assert_eq!(
            get("www.example.com", 1),
            lab,
            "down {down:?}: www, lab view"
        );
        assert_eq!(
            get("empty.example.com", DEFAULT_VIEW),
            empty,
            "down {down:?}: empty"
        );
    }
}

/// The answer a snapshot gives `client` for (`name`, `qtype`), looked up as the fast path
/// does: the view's answer, else the default view's, for RTT domains the answer of the outcome
/// the LDNS view's choice gives.
fn resolve(s: &Snapshot, name: &str, qtype: u16, client: IpAddr) -> Option<Vec<IpAddr>> {
    let entry = s
        .domains
        .iter()
        .find(|d| d.name == name && d.qtype == qtype)?;
    let (view, rtt_view, _) = s.segments.lookup_both(client);
    let find =
        |list: &[(u32, Answer)], v: u32| list.iter().find(|(x, _)| *x == v).map(|(_, a)| a.clone());
    let by_view = find(&entry.answers, view).or_else(|| find(&entry.answers, DEFAULT_VIEW))?;
    let answer = match (entry.by_rtt, rtt_view) {
        (true, r) if r != 0 => s
            .rtt_choices
            .choice(r, entry.rtt_slot)
            .and_then(|o| find(&entry.rtt_answers, u32::from(o)))
            .unwrap_or(by_view),
        _ => by_view,
    };
    let mut addrs = answer.addrs;
    addrs.sort();
    Some(addrs)
}

/// A compiler that keeps its partition and decisions between compilations answers every
/// client exactly as a compilation from scratch does, through a sequence of state changes
/// that split and re-join views; and it reuses the partition (and the view numbers of the
/// classes whose answers did not change).
#[test]
fn incremental_compilation_equals_compiling_from_scratch() {
    let text = r#"
            [server]
            listen = ["192.0.2.53"]
            [[location]]
            from = "198.51.100.0"
            to = "198.51.100.127"
            location = "Europe.GB.England.London"
            [[location]]
            from = "198.51.100.128"
            to = "198.51.100.255"
            location = "Europe.DE.Berlin"
            [[location]]
            from = "203.0.113.0"
            to = "203.0.113.255"
            location = "NorthAmerica.US.NY"
            [[location]]
            from = "2001:db8:1::"
            to = "2001:db8:1:ffff:ffff:ffff:ffff:ffff"
            location = "Europe.FR.Paris"
            [[zone]]
            name = "example.com"
            ns = ["ns.example.net"]
            soa.rname = "hostmaster.example.com"
            [[site]]
            name = "eu"
            ip = "192.0.2.1"
            [[site]]
            name = "us"
            ip = "192.0.2.2"
            [[service]]
            name = "gb"
            ip = "192.0.2.10"
            site = "eu"
            location = "Europe.GB"
            [[service]]
            name = "de"
            ip = "192.0.2.20"
            site = "eu"
            location = "Europe.DE"
            [[service]]
            name = "us"
            ip = "192.0.2.30"
            site = "us"
            location = "NorthAmerica.US"
            [[service]]
            name = "fr6"
            ip = "2001:db8::40"
            site = "eu"
            location = "Europe.FR"
            [[gslb_domain]]
            name = "near.example.com"
            method = "staticproximity"
            alternate = "roundrobin"
            services = ["gb", "de", "us", "fr6"]
            [[gslb_domain]]
            name = "near2.example.com"
            method = "staticproximity"
            services = ["gb", "de", "us", "fr6"]
            [[gslb_domain]]
            name = "dr.example.com"
            method = "globalavailability"
            services = ["us", "gb", "de"]
            [[gslb_domain]]
            name = "rr.example.com"
            services = ["gb", "us"]
            backup_ip = ["192.0.2.99"]
            down_response = "backup"
        "#;
    let config = Config::parse(text, Path::new("test.toml")).unwrap();
    let db = LocationDb::from_sources(&config.locations, Path::new("test.toml")).unwrap();
    let rows = Arc::new(Vec::new());
    // Down services per step (by name).
    let steps: [&[&str]; 7] = [
        &[],
        &["gb"],
        &["gb", "de"],
        &[],
        &["us"],
        &["gb", "us", "de"],
        &["de"],
    ];
    let clients: Vec<IpAddr> = [
        "198.51.100.1",
        "198.51.100.127",
        "198.51.100.128",
        "198.51.100.255",
        "203.0.113.9",
        "192.0.2.7",
        "0.0.0.0",
        "255.255.255.255",
        "2001:db8:1::1",
        "2001:db8:2::1",
        "::1",
    ]
    .iter()
    .map(|a| a.parse().unwrap())
    .collect();
    let names = [
        "near.example.com",
        "near2.example.com",
        "dr.example.com",
        "rr.example.com",
    ];
    let mut compiler = Compiler::default();
    for (i, down) in steps.iter().enumerate() {
        let services = config
            .services
            .iter()
            .map(|s| {
                if down.contains(&s.name.as_str()) {
                    ServiceState::DOWN
                } else {
                    ServiceState::UP
                }
            })
            .collect();
        let inputs = Inputs {
            locations: Some(&db),
            services,
            rtt: rows.clone(),
            ..Inputs::default()
        };
        let incremental = compiler.compile(&config, &inputs);
        let fresh = Snapshot::compile(&config, &inputs);
        assert_eq!(incremental.stats.incremental, i > 0, "step {i}");
        for &client in &clients {
            for name in names {
                for qtype in [QTYPE_A, QTYPE_AAAA] {
                    assert_eq!(
                        resolve(&incremental, name, qtype, client),
                        resolve(&fresh, name, qtype, client),
                        "step {i} (down {down:?}): {name} {qtype} for {client}"
                    );
                }
            }
        }
        // The same decisions were not taken again.
        if i == 3 {
            assert_eq!(
                incremental.stats.decisions, 0,
                "step {i}: every state was seen before"
            );
        }
    }
}

/// LDNS views that would take more entries than the budget leave the domains answered by
/// RTT to the responder (per query, with the same RTT rows), and everything else compiled.
#[test]
fn rtt_domains_over_the_budget_go_to_the_responder() {
    let text = r#"
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
            ip = "192.0.2.2"
            [[service]]
            name = "a"
            ip = "192.0.2.10"
            site = "a"
            [[service]]
            name = "b"
            ip = "192.0.2.20"
            site = "b"
            [[gslb_domain]]
            name = "rtt.example.com"
            method = "rtt"
            services = ["a", "b"]
            [[gslb_domain]]
            name = "rr.example.com"
            services = ["a", "b"]
        "#;
    let config = Config::parse(text, Path::new("test.toml")).unwrap();
    let row = |net: &str, a: u32, b: u32| LdnsRtt {
        ldns: net.parse().unwrap(),
        rtt_us: vec![Some(a), Some(b)].into(),
    };
    // Two distinct LDNS views (a nearer, b nearer): one choice page each in both parities (4),
    // and the A entry's answer for each of the two outcomes (2); AAAA has no service to
    // choose.
    let rows = Arc::new(vec![
        row("198.51.100.0/24", 10_000, 40_000),
        row("203.0.113.0/24", 40_000, 10_000),
    ]);
    let inputs = Inputs {
        rtt: rows,
        ..Inputs::default()
    };
    // (budget, left to the responder)
    for (budget, responder) in [(6, false), (5, true)] {
        let s = Compiler::with_rtt_budget(budget).compile(&config, &inputs);
        assert_eq!(s.stats.rtt_to_responder, responder, "budget {budget}");
        assert_eq!(
            s.engine_domains.contains(&"rtt.example.com".to_string()),
            responder,
            "budget {budget}"
        );
        assert_eq!(
            s.domains.iter().any(|d| d.name == "rtt.example.com"),
            !responder,
            "budget {budget}"
        );
        assert!(
            s.domains.iter().any(|d| d.name == "rr.example.com"),
            "budget {budget}"
        );
        assert_eq!(
            s.stats.rtt_views,
            if responder { 0 } else { 2 },
            "budget {budget}"
        );
        // Either way the answer is by RTT: from the maps, or decided per query.
        let responder = crate::responder::Responder::new(&s);
        for (client, want) in [
            ("198.51.100.9", "192.0.2.10"),
            ("203.0.113.9", "192.0.2.20"),
        ] {
            let mut q = hickory_proto::op::Message::query();
            q.metadata.id = 1;
            q.add_query(hickory_proto::op::Query::query(
                hickory_proto::rr::Name::from_ascii("rtt.example.com.").unwrap(),
                hickory_proto::rr::RecordType::A,
            ));
            let reply = responder
                .respond(
                    &q.to_vec().unwrap(),
                    client.parse().unwrap(),
                    crate::responder::Transport::Udp,
                )
                .expect("a reply");
            let reply = hickory_proto::op::Message::from_vec(&reply).unwrap();
            let got: Vec<String> = reply.answers.iter().map(|r| r.data.to_string()).collect();
            assert_eq!(
                got,
                vec![want.to_string()],
                "budget {budget}, client {client}"
            );
        }
    }
}

/// A zone, two services and one domain answered by `method`.
fn two_services(method: &str, ttl: u32) -> Config {
    let domain = format!("method = \"{method}\"\nttl = {ttl}");
    let text = gslb_tests::two_services_config("", &domain);
    Config::parse(&text, Path::new("test.toml")).unwrap()
}

#[test]
fn the_spec_is_built_once_per_configuration() {
    let config = two_services("globalavailability", 30);
    let inputs = |services: Vec<ServiceState>, rtt: Vec<LdnsRtt>| Inputs {
        services,
        rtt: Arc::new(rtt),
        ..Inputs::default()
    };
    let mut compiler = Compiler::default();
    let up = compiler.compile(&config, &inputs(vec![ServiceState::UP; 2], Vec::new()));
    let down = compiler.compile(
        &config,
        &inputs(vec![ServiceState::DOWN, ServiceState::UP], Vec::new()),
    );
    // New RTT rows drop the compiler's cache, not the configuration's spec.
    let measured = compiler.compile(
        &config,
        &inputs(
            vec![ServiceState::UP; 2],
            vec![LdnsRtt {
                ldns: "198.51.100.0/24".parse().unwrap(),
                rtt_us: vec![Some(1_000)].into(),
            }],
        ),
    );
    assert_eq!(down.down_services, ["a"], "the second state differs");
    let spec = up
        .spec
        .clone()
        .expect("a compiled snapshot carries its spec");
    let engine = spec
        .engine
        .clone()
        .expect("global availability needs the engine");
    for other in [&down, &measured] {
        let other = other.spec.as_ref().unwrap();
        assert!(Arc::ptr_eq(&spec, other), "one spec per configuration");
        assert!(Arc::ptr_eq(&engine, other.engine.as_ref().unwrap()));
    }
    // Another configuration (a reload) gets its own spec, equal configurations equal ones.
    let reloaded = compiler.compile(
        &two_services("globalavailability", 60),
        &inputs(vec![ServiceState::UP; 2], Vec::new()),
    );
    assert!(!Arc::ptr_eq(&spec, reloaded.spec.as_ref().unwrap()));
    assert_eq!(Snapshot::from_config(&config).spec, up.spec);
    // Round robin alone needs no engine.
    let plain = Snapshot::from_config(&two_services("roundrobin", 30));
    assert!(plain.spec.unwrap().engine.is_none());
}
