//! Tables of (configuration, state, client) → candidates for every method and tier, the spec's
//! seed examples, and property tests.

use std::net::IpAddr;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::location::Location;
use crate::model::{
    Domain as DomainSpec, DomainId, Model as Spec, Service as ServiceSpec, ServiceId, Site, SiteId,
};

const A: u16 = 1;
const AAAA: u16 = 28;

fn loc(s: &str) -> Location {
    Location::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// Builds a [`Spec`] by name.
#[derive(Default)]
struct Lab {
    spec: Spec,
}

impl Lab {
    fn new(sites: &[&str]) -> Lab {
        let mut lab = Lab::default();
        lab.spec.sites = sites
            .iter()
            .map(|name| Site {
                name: (*name).to_string(),
            })
            .collect();
        lab
    }

    fn site(&self, name: &str) -> SiteId {
        SiteId::of(
            self.spec
                .sites
                .iter()
                .position(|s| s.name == name)
                .unwrap_or_else(|| panic!("site {name}")),
        )
    }

    fn service_index(&self, name: &str) -> ServiceId {
        ServiceId::of(
            self.spec
                .services
                .iter()
                .position(|s| s.name == name)
                .unwrap_or_else(|| panic!("service {name}")),
        )
    }

    /// A service at `site`; `location` "" for none; IPv6 when `ip` says so.
    fn svc_ip(mut self, name: &str, ip: &str, site: &str, location: &str) -> Lab {
        let site = self.site(site);
        self.spec.services.push(ServiceSpec {
            location: (!location.is_empty()).then(|| loc(location)),
            ..ServiceSpec::new(name, ip.parse().unwrap(), site)
        });
        self
    }

    fn svc(self, name: &str, site: &str, location: &str) -> Lab {
        let ip = format!("192.0.2.{}", self.spec.services.len() + 1);
        self.svc_ip(name, &ip, site, location)
    }

    /// Changes the last service.
    fn with(mut self, f: impl FnOnce(&mut ServiceSpec)) -> Lab {
        f(self.spec.services.last_mut().expect("a service"));
        self
    }

    fn domain(mut self, name: &str, services: &[&str], f: impl FnOnce(&mut DomainSpec)) -> Lab {
        let services = services.iter().map(|s| self.service_index(s)).collect();
        let mut d = DomainSpec::new(name, services);
        f(&mut d);
        self.spec.domains.push(d);
        self
    }

    fn policy(mut self, name: &str, priority: u32, expr: &str, preferred: &[&str]) -> Lab {
        self.spec.policies.push(Policy {
            name: name.into(),
            priority,
            expr: Expr::parse(expr).unwrap(),
            action: Action {
                name: format!("{name}-action"),
                preferred: preferred.iter().map(|p| loc(p)).collect(),
            },
        });
        self
    }

    fn topo(mut self, site: &str, ldns: &str, score: u32) -> Lab {
        let site = self.site(site);
        let ldns = match ldns.parse() {
            Ok(net) => Ldns::Prefix(net),
            Err(_) => Ldns::Location(loc(ldns)),
        };
        self.spec
            .topology
            .push(TopologyRecord { site, ldns, score });
        self
    }

    fn mode(mut self, mode: WildcardMode) -> Lab {
        self.spec.mode = mode;
        self
    }

    fn build(self) -> Engine {
        Engine::new(Arc::new(self.spec)).unwrap()
    }
}

/// One decision's inputs, by name.
struct Ask<'a> {
    engine: &'a Engine,
    domain: &'a str,
    client: IpAddr,
    location: Option<Location>,
    states: Vec<ServiceState>,
    rtt: Vec<Option<u32>>,
    qtype: u16,
    sticky: Option<ServiceKey>,
}

impl<'a> Ask<'a> {
    fn new(engine: &'a Engine, domain: &'a str) -> Ask<'a> {
        Ask {
            engine,
            domain,
            client: "198.51.100.7".parse().unwrap(),
            location: None,
            states: vec![ServiceState::UP; engine.services().len()],
            rtt: vec![None; engine.sites().len()],
            qtype: A,
            sticky: None,
        }
    }

    fn index(&self, service: &str) -> usize {
        self.engine
            .services()
            .iter()
            .position(|s| s.name == service)
            .unwrap_or_else(|| panic!("{service}"))
    }

    fn from(mut self, client: &str) -> Self {
        self.client = client.parse().unwrap();
        self
    }

    fn at(mut self, location: &str) -> Self {
        self.location = Some(loc(location));
        self
    }

    fn down(mut self, services: &[&str]) -> Self {
        for s in services {
            let i = self.index(s);
            self.states[i].up = false;
        }
        self
    }

    fn load(mut self, service: &str, connections: u64, bandwidth_kbps: u64) -> Self {
        let i = self.index(service);
        self.states[i].connections = connections;
        self.states[i].bandwidth = Bandwidth::from_kbps(bandwidth_kbps);
        self
    }

    /// RTT in milliseconds (fractions allowed) from `site`.
    fn rtt(mut self, site: &str, ms: f64) -> Self {
        let i = self
            .engine
            .sites()
            .iter()
            .position(|s| s.name == site)
            .unwrap();
        self.rtt[i] = Some((ms * 1000.0).round() as u32);
        self
    }

    fn qtype(mut self, qtype: u16) -> Self {
        self.qtype = qtype;
        self
    }

    fn sticky(mut self, service: &str) -> Self {
        self.sticky = Some(ServiceKey::from_name(service));
        self
    }

    fn decide(&self) -> Decision {
        let domain = self
            .engine
            .domain_index(self.domain)
            .unwrap_or_else(|| panic!("{}", self.domain));
        let client = Client {
            addr: self.client,
            location: self.location.as_ref(),
            view: 0,
            sticky: self.sticky,
        };
        let state = State {
            services: &self.states,
            rtt: &self.rtt,
            disabled_domains: &[],
        };
        self.engine.decide(
            domain,
            &Query {
                name: self.domain,
                qtype: self.qtype,
            },
            &client,
            &state,
        )
    }

    /// The candidates' names.
    fn names(&self) -> Vec<String> {
        names(self.engine, &self.decide())
    }

    /// The service one answer carries, by name.
    fn answer(&self, turn: u64) -> Vec<String> {
        let d = self.decide();
        self.engine
            .select(&d, self.client, turn)
            .iter()
            .map(|&s| self.engine.service(s).name.clone())
            .collect()
    }
}

fn names(engine: &Engine, d: &Decision) -> Vec<String> {
    d.candidates
        .iter()
        .map(|&s| engine.service(s).name.clone())
        .collect()
}

fn method(step: usize, method: Method) -> Tier {
    Tier::Method { step, method }
}

/// Spec section 3's test vector, step by step, with services taken down one group at a time.
#[test]
fn seed_preferred_locations() {
    let e = Lab::new(&["s"])
        .svc("in", "s", "Asia.IN")
        .svc("jpn", "s", "Asia.JPN")
        .svc("hk", "s", "Asia.HK")
        .svc("uk", "s", "Europe.UK")
        .svc("ru", "s", "Europe.RU")
        .svc("eg", "s", "Europe.EG")
        .svc("sd", "s", "Africa.SD")
        .svc("zmb", "s", "Africa.ZMB")
        .domain(
            "www.example.com",
            &["in", "jpn", "hk", "uk", "ru", "eg", "sd", "zmb"],
            |_| {},
        )
        .policy(
            "zmb",
            10,
            r#"CLIENT.IP.SRC.MATCHES_LOCATION("*.ZMB.*.*")"#,
            &["Asia.HK", "Europe.UK"],
        )
        .build();
    let zmb = || Ask::new(&e, "www.example.com").at("Africa.ZMB.Lusaka");
    let rr = method(0, Method::RoundRobin);
    let table: Vec<(&str, Ask<'_>, &[&str], Preference)> = vec![
        ("1. Asia.HK up", zmb(), &["hk"], Preference::Perfect(0)),
        (
            "2. Asia.HK down",
            zmb().down(&["hk"]),
            &["uk"],
            Preference::Perfect(1),
        ),
        (
            "3. both down: partial matches of Asia.HK",
            zmb().down(&["hk", "uk"]),
            &["in", "jpn"],
            Preference::Partial(0),
        ),
        (
            "3'. one of them down",
            zmb().down(&["hk", "uk", "in"]),
            &["jpn"],
            Preference::Partial(0),
        ),
        (
            "4. those down: partial matches of Europe.UK",
            zmb().down(&["hk", "uk", "in", "jpn"]),
            &["ru", "eg"],
            Preference::Partial(1),
        ),
        (
            "5. those down: the rest",
            zmb().down(&["hk", "uk", "in", "jpn", "ru", "eg"]),
            &["sd", "zmb"],
            Preference::Rest,
        ),
    ];
    for (step, ask, want, preference) in table {
        let d = ask.decide();
        assert_eq!(names(&e, &d), want, "{step}");
        assert_eq!(d.policy, Some((0, preference)), "{step}");
        assert_eq!((d.tier, &d.pick), (rr, &Pick::Rotate), "{step}");
    }
    // Several candidates are load-balanced: the rotation visits each.
    let both = zmb().down(&["hk", "uk"]);
    assert_eq!(
        [both.answer(0), both.answer(1), both.answer(2)],
        [["in"], ["jpn"], ["in"]]
    );
    // All down.
    let d = zmb()
        .down(&["in", "jpn", "hk", "uk", "ru", "eg", "sd", "zmb"])
        .decide();
    assert_eq!(
        (d.tier, d.fallback, d.candidates.len()),
        (Tier::Down, Some(Fallback::Empty), 0)
    );
    // A client not matching the policy gets the domain's normal method over every service.
    let uk = Ask::new(&e, "www.example.com").at("Europe.UK");
    let d = uk.decide();
    assert_eq!((d.policy, d.tier, d.candidates.len()), (None, rr, 8));
    // Nor does a client missing from the location database.
    assert_eq!(Ask::new(&e, "www.example.com").decide().policy, None);
}

/// Spec section 5 / seed 004: RTT → Topology → Global Availability.
#[test]
fn seed_f5_tiers() {
    let e = Lab::new(&["CNC", "TEL"])
        .svc_ip("vs1", "202.106.83.177", "CNC", "")
        .svc_ip("vs2", "219.17.66.100", "TEL", "")
        .domain("www.f5.com.cn", &["vs1", "vs2"], |d| {
            d.chain = vec![Method::Rtt, Method::Topology, Method::GlobalAvailability];
        })
        .topo("CNC", "202.106.0.0/16", 100)
        .topo("TEL", "219.172.0.0/16", 100)
        .topo("CNC", "200.100.0.0/16", 100)
        .build();
    let ask = || Ask::new(&e, "www.f5.com.cn");
    // The seed's proximity record: cur_rtt 189850 µs via CNC, 57209 µs via TEL.
    let probed = || {
        ask()
            .from("61.136.178.229")
            .rtt("CNC", 189.85)
            .rtt("TEL", 57.209)
    };
    let table: Vec<(&str, Ask<'_>, &[&str], Tier)> = vec![
        (
            "RTT known: TEL is faster",
            probed(),
            &["vs2"],
            method(0, Method::Rtt),
        ),
        (
            "RTT known, TEL down: CNC has an RTT too",
            probed().down(&["vs2"]),
            &["vs1"],
            method(0, Method::Rtt),
        ),
        (
            "no RTT, LDNS in 202.106.0.0/16: topology",
            ask().from("202.106.1.1"),
            &["vs1"],
            method(1, Method::Topology),
        ),
        (
            "no RTT, LDNS in 219.172.0.0/16: topology",
            ask().from("219.172.9.9"),
            &["vs2"],
            method(1, Method::Topology),
        ),
        (
            "topology's site down: global availability",
            ask().from("202.106.1.1").down(&["vs1"]),
            &["vs2"],
            method(2, Method::GlobalAvailability),
        ),
        (
            "neither: global availability order",
            ask().from("192.0.2.1"),
            &["vs1"],
            method(2, Method::GlobalAvailability),
        ),
        (
            "neither, first down: the next in order",
            ask().from("192.0.2.1").down(&["vs1"]),
            &["vs2"],
            method(2, Method::GlobalAvailability),
        ),
        (
            "RTT known for CNC only",
            ask().from("192.0.2.1").rtt("CNC", 300.0),
            &["vs1"],
            method(0, Method::Rtt),
        ),
    ];
    for (case, ask, want, tier) in table {
        let d = ask.decide();
        assert_eq!(names(&e, &d), want, "{case}");
        assert_eq!(d.tier, tier, "{case}");
    }
    assert_eq!(ask().from("192.0.2.1").decide().pick, Pick::First);
}

#[test]
fn methods() {
    let e = Lab::new(&["eu", "us", "ap"])
        .svc("eu1", "eu", "Europe.UK.London")
        .with(|s| s.weight = 3)
        .svc("eu2", "eu", "Europe.DE.Berlin")
        .svc("us1", "us", "NorthAmerica.US.Virginia")
        .with(|s| s.weight = 2)
        .svc("ap1", "ap", "Asia.JP.Tokyo")
        .domain("rr", &["eu1", "eu2", "us1", "ap1"], |_| {})
        .domain("ratio", &["eu1", "eu2", "us1", "ap1"], |d| {
            d.chain = vec![Method::Ratio];
        })
        .domain("hash", &["eu1", "eu2", "us1", "ap1"], |d| {
            d.chain = vec![Method::SourceIpHash];
            d.sourceip_mask = SourceMask { v4: 24, v6: 48 };
        })
        .domain("lc", &["eu1", "eu2", "us1", "ap1"], |d| {
            d.chain = vec![Method::LeastConnection];
        })
        .domain("sp", &["eu1", "eu2", "us1", "ap1"], |d| {
            d.chain = vec![Method::StaticProximity];
        })
        .domain("rtt", &["eu1", "eu2", "us1", "ap1"], |d| {
            d.chain = vec![Method::Rtt];
            d.tolerance_us = 5_000;
        })
        .domain("topo", &["eu1", "eu2", "us1", "ap1"], |d| {
            d.chain = vec![Method::Topology];
        })
        .domain("ga", &["ap1", "us1", "eu1", "eu2"], |d| {
            d.chain = vec![Method::GlobalAvailability];
        })
        .topo("eu", "198.51.100.0/24", 50)
        .topo("us", "198.51.0.0/16", 80)
        .topo("ap", "Asia", 60)
        .topo("us", "Asia.JP", 60)
        .build();
    let ask = |domain| Ask::new(&e, domain);
    let m = method;
    let all = ["eu1", "eu2", "us1", "ap1"];
    #[rustfmt::skip]
    let table: Vec<(&str, Ask<'_>, &[&str], Tier, Pick)> = vec![
        // ROUNDROBIN
        ("rr", ask("rr"), &all, m(0, Method::RoundRobin), Pick::Rotate),
        ("rr, one down", ask("rr").down(&["us1"]), &["eu1", "eu2", "ap1"], m(0, Method::RoundRobin), Pick::Rotate),
        // RATIO: the weights ride along with the candidates.
        ("ratio", ask("ratio"), &all, m(0, Method::Ratio), Pick::Weighted(vec![3, 1, 2, 1])),
        ("ratio, one down", ask("ratio").down(&["eu1"]), &["eu2", "us1", "ap1"], m(0, Method::Ratio), Pick::Weighted(vec![1, 2, 1])),
        // SOURCEIPHASH
        ("hash", ask("hash"), &all, m(0, Method::SourceIpHash), Pick::Hash { mask: SourceMask { v4: 24, v6: 48 }, weights: None }),
        // LEASTCONNECTION: the fewest reported connections; ties share.
        ("lc, no load reported: all tie", ask("lc"), &all, m(0, Method::LeastConnection), Pick::Rotate),
        ("lc", ask("lc").load("eu1", 10, 0).load("eu2", 3, 0).load("us1", 7, 0).load("ap1", 3, 0), &["eu2", "ap1"], m(0, Method::LeastConnection), Pick::Rotate),
        ("lc, least down", ask("lc").load("eu1", 10, 0).load("eu2", 3, 0).load("us1", 7, 0).load("ap1", 3, 0).down(&["eu2", "ap1"]), &["us1"], m(0, Method::LeastConnection), Pick::Rotate),
        // STATICPROXIMITY: most leading qualifiers equal.
        ("sp, city", ask("sp").at("Europe.UK.London"), &["eu1"], m(0, Method::StaticProximity), Pick::Rotate),
        ("sp, continent ties", ask("sp").at("Europe.FR.Paris"), &["eu1", "eu2"], m(0, Method::StaticProximity), Pick::Rotate),
        ("sp, best down", ask("sp").at("Europe.UK.London").down(&["eu1"]), &["eu2"], m(0, Method::StaticProximity), Pick::Rotate),
        ("sp, no match: round robin", ask("sp").at("Africa.ZA"), &all, Tier::Exhausted, Pick::Rotate),
        ("sp, no client location: round robin", ask("sp"), &all, Tier::Exhausted, Pick::Rotate),
        // RTT: lowest, and everything within the tolerance (5 ms).
        ("rtt", ask("rtt").rtt("eu", 20.0).rtt("us", 90.0).rtt("ap", 200.0), &["eu1", "eu2"], m(0, Method::Rtt), Pick::Rotate),
        ("rtt, within tolerance", ask("rtt").rtt("eu", 20.0).rtt("us", 25.0).rtt("ap", 25.001), &["eu1", "eu2", "us1"], m(0, Method::Rtt), Pick::Rotate),
        ("rtt, fastest site down", ask("rtt").rtt("eu", 20.0).rtt("us", 90.0).down(&["eu1", "eu2"]), &["us1"], m(0, Method::Rtt), Pick::Rotate),
        ("rtt, only unprobed sites up", ask("rtt").rtt("eu", 20.0).down(&["eu1", "eu2"]), &["us1", "ap1"], Tier::Exhausted, Pick::Rotate),
        ("rtt unknown: round robin", ask("rtt"), &all, Tier::Exhausted, Pick::Rotate),
        // TOPOLOGY: the client's best record per site; highest score wins, ties share.
        ("topo, /16 beats /24 on score", ask("topo").from("198.51.100.7"), &["us1"], m(0, Method::Topology), Pick::Rotate),
        ("topo, winner down", ask("topo").from("198.51.100.7").down(&["us1"]), &["eu1", "eu2"], m(0, Method::Topology), Pick::Rotate),
        ("topo, by location, tie", ask("topo").from("192.0.2.1").at("Asia.JP.Tokyo"), &["us1", "ap1"], m(0, Method::Topology), Pick::Rotate),
        // A prefix record is more specific than any location record: us's /16 wins for us.
        ("topo, prefix outranks location for one site", ask("topo").from("198.51.1.1").at("Asia.JP"), &["us1"], m(0, Method::Topology), Pick::Rotate),
        ("topo, no record: round robin", ask("topo").from("192.0.2.1"), &all, Tier::Exhausted, Pick::Rotate),
        // GLOBALAVAILABILITY: first up in the domain's order.
        ("ga", ask("ga"), &["ap1"], m(0, Method::GlobalAvailability), Pick::First),
        ("ga, first down", ask("ga").down(&["ap1"]), &["us1"], m(0, Method::GlobalAvailability), Pick::First),
        ("ga, all but last down", ask("ga").down(&["ap1", "us1", "eu1"]), &["eu2"], m(0, Method::GlobalAvailability), Pick::First),
    ];
    let mut failures = Vec::new();
    for (case, ask, want, tier, pick) in &table {
        let d = ask.decide();
        let got = (names(&e, &d), d.tier, d.pick.clone());
        let want = (
            want.iter().map(ToString::to_string).collect::<Vec<_>>(),
            *tier,
            pick.clone(),
        );
        if got != want {
            failures.push(format!("{case}: got {got:?}, want {want:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        table.len(),
        failures.join("\n")
    );
}

#[test]
fn picks_resolve_to_answers() {
    let e = Lab::new(&["s"])
        .svc("a", "s", "")
        .with(|s| s.weight = 2)
        .svc("b", "s", "")
        .svc("c", "s", "")
        .domain("rr", &["a", "b", "c"], |_| {})
        .domain("ratio", &["a", "b", "c"], |d| d.chain = vec![Method::Ratio])
        .domain("hash", &["a", "b", "c"], |d| {
            d.chain = vec![Method::SourceIpHash];
            d.sourceip_mask = SourceMask { v4: 24, v6: 56 };
        })
        .domain("all", &["a", "b", "c"], |d| {
            d.answer = AnswerMode::All;
            d.max_answers = 8;
        })
        // BIG-IP "maximum answers returned": the pick, then the candidates after it.
        .domain("rr2", &["a", "b", "c"], |d| d.max_answers = 2)
        .domain("ratio2", &["a", "b", "c"], |d| {
            d.chain = vec![Method::Ratio];
            d.max_answers = 2;
        })
        .domain("all2", &["a", "b", "c"], |d| {
            d.answer = AnswerMode::All;
            d.max_answers = 2;
        })
        .domain("hash2", &["a", "b", "c"], |d| {
            d.chain = vec![Method::SourceIpHash];
            d.sourceip_mask = SourceMask { v4: 24, v6: 56 };
            d.max_answers = 2;
        })
        .build();
    let turns = |ask: Ask<'_>, n| {
        (0..n)
            .map(|t| ask.answer(t).join(","))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(turns(Ask::new(&e, "rr"), 4), "a b c a");
    assert_eq!(turns(Ask::new(&e, "ratio"), 5), "a a b c a");
    assert_eq!(turns(Ask::new(&e, "all"), 2), "a,b,c a,b,c");
    assert_eq!(Ask::new(&e, "all").decide().pick, Pick::All);
    assert_eq!(turns(Ask::new(&e, "rr2"), 4), "a,b b,c c,a a,b");
    // a has weight 2: two answers start at it.
    assert_eq!(turns(Ask::new(&e, "ratio2"), 5), "a,b a,b b,c c,a a,b");
    // More candidates than the cap: a window that moves one a turn.
    assert_eq!(turns(Ask::new(&e, "all2"), 4), "a,b b,c c,a a,b");
    // A prefix keeps its hashed pick first, whatever the turn.
    let hashed = turns(Ask::new(&e, "hash2"), 3);
    let first = hashed.split(' ').next().unwrap();
    assert_eq!(first.split(',').count(), 2, "{hashed}");
    assert_eq!(hashed, [first; 3].join(" "), "{hashed}");
    // Hash: the same answer for every turn and every address of the /24 (or /56).
    for (one, other) in [
        ("198.51.100.7", "198.51.100.200"),
        ("2001:db8:0:1::1", "2001:db8:0:ff::9"),
    ] {
        let hash = Ask::new(&e, "hash").from(one);
        let first = hash.answer(0);
        assert!((1..10).all(|t| hash.answer(t) == first));
        assert_eq!(
            Ask::new(&e, "hash").from(other).answer(0),
            first,
            "{one} / {other}"
        );
    }
    // Over many prefixes every service gets some.
    let mut seen: Vec<String> = (0..64u32)
        .flat_map(|i| Ask::new(&e, "hash").from(&format!("10.{i}.0.1")).answer(0))
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen, ["a", "b", "c"]);
}

#[test]
fn chain_transitions() {
    let e = Lab::new(&["eu", "us"])
        .svc("eu1", "eu", "Europe.UK")
        .svc("us1", "us", "NorthAmerica.US")
        .svc("eu6", "eu", "Europe.UK")
        .svc("bk1", "us", "")
        .svc("bk2", "us", "")
        .domain("backup.example.com", &["bk1", "bk2"], |d| {
            d.chain = vec![Method::GlobalAvailability];
        })
        .domain("www.example.com", &["eu1", "us1"], |d| {
            d.chain = vec![Method::Rtt, Method::StaticProximity, Method::Ratio];
            d.backup = Some(DomainId(0));
            d.down = Fallback::BackupIp;
        })
        .domain("nobackup.example.com", &["eu1", "us1"], |d| {
            d.chain = vec![Method::Rtt, Method::Topology];
        })
        .topo("us", "NorthAmerica", 10)
        .build();
    let www = || Ask::new(&e, "www.example.com");
    type Case<'a> = (
        &'a str,
        Ask<'a>,
        &'a str,
        &'a [&'a str],
        Tier,
        Option<Fallback>,
    );
    let table: Vec<Case<'_>> = vec![
        (
            "preferred decides",
            www().rtt("us", 10.0),
            "www.example.com",
            &["us1"],
            method(0, Method::Rtt),
            None,
        ),
        (
            "preferred declines: alternate",
            www().at("Europe.UK"),
            "www.example.com",
            &["eu1"],
            method(1, Method::StaticProximity),
            None,
        ),
        (
            "both decline: fallback",
            www().at("Asia"),
            "www.example.com",
            &["eu1", "us1"],
            method(2, Method::Ratio),
            None,
        ),
        (
            "RTT only for a down site: alternate",
            www().rtt("us", 10.0).down(&["us1"]).at("Europe"),
            "www.example.com",
            &["eu1"],
            method(1, Method::StaticProximity),
            None,
        ),
        (
            "all down: the backup domain decides",
            www().down(&["eu1", "us1"]),
            "backup.example.com",
            &["bk1"],
            method(0, Method::GlobalAvailability),
            None,
        ),
        (
            "backup domain down too: backup IP",
            www().down(&["eu1", "us1", "bk1", "bk2"]),
            "www.example.com",
            &[],
            Tier::Down,
            Some(Fallback::BackupIp),
        ),
        (
            "no backup at all: empty answer",
            Ask::new(&e, "nobackup.example.com").down(&["eu1", "us1"]),
            "nobackup.example.com",
            &[],
            Tier::Down,
            Some(Fallback::Empty),
        ),
        (
            "every method declines: round robin",
            Ask::new(&e, "nobackup.example.com").at("Asia"),
            "nobackup.example.com",
            &["eu1", "us1"],
            Tier::Exhausted,
            None,
        ),
        (
            "topology alternate",
            Ask::new(&e, "nobackup.example.com").at("NorthAmerica.US"),
            "nobackup.example.com",
            &["us1"],
            method(1, Method::Topology),
            None,
        ),
    ];
    for (case, ask, domain, want, tier, fallback) in table {
        let d = ask.decide();
        assert_eq!(e.domain(d.domain).name, domain, "{case}");
        assert_eq!(names(&e, &d), want, "{case}");
        assert_eq!((d.tier, d.fallback), (tier, fallback), "{case}");
    }
}

#[test]
fn address_family_follows_the_query_type() {
    let e = Lab::new(&["s"])
        .svc_ip("v4", "192.0.2.1", "s", "")
        .svc_ip("v6", "2001:db8::1", "s", "")
        .svc_ip("v6b", "2001:db8::2", "s", "")
        .domain("d", &["v4", "v6", "v6b"], |d| {
            d.chain = vec![Method::GlobalAvailability];
        })
        .build();
    assert_eq!(Ask::new(&e, "d").names(), ["v4"]);
    assert_eq!(Ask::new(&e, "d").qtype(AAAA).names(), ["v6"]);
    assert_eq!(Ask::new(&e, "d").qtype(AAAA).down(&["v6"]).names(), ["v6b"]);
    // The IPv4 service being up does not save an AAAA query.
    let d = Ask::new(&e, "d").qtype(AAAA).down(&["v6", "v6b"]).decide();
    assert_eq!((d.tier, d.fallback), (Tier::Down, Some(Fallback::Empty)));
    // Other types see both families.
    assert_eq!(Ask::new(&e, "d").qtype(255).names(), ["v4"]);
}

#[test]
fn wildcard_modes() {
    // Services with a wildcard country; a client whose city is unknown.
    let lab = |mode| {
        Lab::new(&["eu", "af"])
            .svc("eu-any", "eu", "Europe")
            .svc("eu-uk", "eu", "Europe.UK")
            .svc("af-zmb", "af", "Africa.ZMB")
            .domain("pref", &["eu-any", "af-zmb"], |_| {})
            .domain("sp", &["eu-any", "af-zmb"], |d| {
                d.chain = vec![Method::StaticProximity];
            })
            .domain("sp2", &["eu-any", "eu-uk"], |d| {
                d.chain = vec![Method::StaticProximity];
            })
            .domain("topo", &["eu-any", "af-zmb"], |d| {
                d.chain = vec![Method::Topology];
            })
            .policy(
                "africa",
                1,
                r#"CLIENT.IP.SRC.MATCHES_LOCATION("Africa.ZMB")"#,
                &["Europe.UK"],
            )
            .topo("eu", "Europe.UK", 5)
            .mode(mode)
            .build()
    };
    use WildcardMode::*;
    // (mode, domain, client location, candidates, policy outcome)
    #[rustfmt::skip]
    type Case<'a> = (WildcardMode, &'a str, &'a str, &'a [&'a str], Option<Preference>);
    let table: Vec<Case<'_>> = vec![
        // The policy: client "Africa" (country unknown) vs "Africa.ZMB" — an expression.
        // The action: service "Europe" (country unknown) vs "Europe.UK" — a proximity choice.
        (
            Yes,
            "pref",
            "Africa",
            &["eu-any"],
            Some(Preference::Perfect(0)),
        ),
        (No, "pref", "Africa", &["eu-any", "af-zmb"], None),
        (
            Expression,
            "pref",
            "Africa",
            &["eu-any"],
            Some(Preference::Partial(0)),
        ),
        (
            Yes,
            "pref",
            "Africa.ZMB",
            &["eu-any"],
            Some(Preference::Perfect(0)),
        ),
        (
            No,
            "pref",
            "Africa.ZMB",
            &["eu-any"],
            Some(Preference::Partial(0)),
        ),
        // Static proximity: the service's wildcard lets the walk go on under YES only.
        (Yes, "sp", "Europe.UK", &["eu-any"], None),
        (No, "sp", "Europe.UK", &["eu-any"], None),
        (Yes, "sp2", "Europe.UK", &["eu-uk"], None),
        (Yes, "sp2", "Europe.FR", &["eu-any", "eu-uk"], None),
        (No, "sp2", "Europe.FR", &["eu-any", "eu-uk"], None),
        // Topology location records: the client's wildcard matches under YES only.
        (Yes, "topo", "Europe", &["eu-any"], None),
        (No, "topo", "Europe", &["eu-any", "af-zmb"], None),
        (Expression, "topo", "Europe", &["eu-any", "af-zmb"], None),
    ];
    for (mode, domain, at, want, preference) in table {
        let e = lab(mode);
        let d = Ask::new(&e, domain).at(at).decide();
        assert_eq!(names(&e, &d), want, "{mode:?} {domain} {at}");
        assert_eq!(d.policy.map(|p| p.1), preference, "{mode:?} {domain} {at}");
    }
    // Proximity score under YES: a wildcard continent still lets the country count.
    let e = Lab::new(&["s"])
        .svc("any-uk", "s", "*.UK")
        .svc("eu", "s", "Europe.DE")
        .domain("sp", &["any-uk", "eu"], |d| {
            d.chain = vec![Method::StaticProximity];
        })
        .build();
    assert_eq!(
        Ask::new(&e, "sp").at("Europe.UK.London").names(),
        ["any-uk", "eu"]
    );
    let e = Lab::new(&["s"])
        .svc("any-uk", "s", "*.UK")
        .svc("eu", "s", "Europe.DE")
        .domain("sp", &["any-uk", "eu"], |d| {
            d.chain = vec![Method::StaticProximity];
        })
        .mode(No)
        .build();
    assert_eq!(Ask::new(&e, "sp").at("Europe.UK.London").names(), ["eu"]);
}

#[test]
fn policies_in_priority_order_and_expressions() {
    let e = Lab::new(&["s"])
        .svc("asia", "s", "Asia.JP")
        .svc("eu", "s", "Europe.UK")
        .svc("us", "s", "NorthAmerica.US")
        .domain("www.example.com", &["asia", "eu", "us"], |_| {})
        .domain("api.example.com", &["asia", "eu", "us"], |_| {})
        // Added out of order: priority, not position, decides.
        .policy("catch-all", 100, "TRUE", &["NorthAmerica"])
        .policy(
            "lab",
            5,
            "CLIENT.IP.SRC.IN_SUBNET(10.0.0.0/8) || CLIENT.IPV6.SRC.IN_SUBNET(2001:db8::/32)",
            &["Asia"],
        )
        .policy(
            "api-v6",
            7,
            r#"DNS.REQ.QUESTION.DOMAIN.EQ("api.example.com") && !DNS.REQ.QUESTION.TYPE.EQ(A)"#,
            &["Europe"],
        )
        .build();
    assert_eq!(
        e.policies().iter().map(|p| p.priority).collect::<Vec<_>>(),
        [5, 7, 100]
    );
    let table = [
        ("www.example.com", "10.1.2.3", A, "asia", 0),
        ("www.example.com", "2001:db8::5", A, "asia", 0),
        ("www.example.com", "192.0.2.1", A, "us", 2),
        ("api.example.com", "192.0.2.1", A, "us", 2),
        ("api.example.com", "192.0.2.1", 255, "eu", 1),
        ("api.example.com", "10.9.9.9", 255, "asia", 0),
    ];
    for (domain, client, qtype, want, policy) in table {
        let d = Ask::new(&e, domain).from(client).qtype(qtype).decide();
        assert_eq!(names(&e, &d), [want], "{domain} {client} {qtype}");
        assert_eq!(
            d.policy.map(|p| p.0),
            Some(policy),
            "{domain} {client} {qtype}"
        );
    }
}

#[test]
fn preferred_locations_then_method() {
    // The action narrows the pool; the domain's method decides within it.
    let e = Lab::new(&["a", "b"])
        .svc("uk1", "a", "Europe.UK")
        .svc("uk2", "b", "Europe.UK")
        .svc("de", "a", "Europe.DE")
        .domain("d", &["uk1", "uk2", "de"], |d| {
            d.chain = vec![Method::Rtt, Method::GlobalAvailability];
        })
        .policy("p", 1, "TRUE", &["Europe.UK"])
        .build();
    let d = Ask::new(&e, "d").rtt("b", 5.0).rtt("a", 50.0).decide();
    assert_eq!(
        (names(&e, &d), d.tier),
        (vec!["uk2".into()], method(0, Method::Rtt))
    );
    let d = Ask::new(&e, "d").decide();
    assert_eq!(
        (names(&e, &d), d.tier),
        (vec!["uk1".into()], method(1, Method::GlobalAvailability))
    );
    // RTT says site a, but only "de" is there: the action's UK services still win.
    let d = Ask::new(&e, "d").rtt("a", 5.0).decide();
    assert_eq!(names(&e, &d), ["uk1"]);
}

#[test]
fn persistence() {
    let e = Lab::new(&["s"])
        .svc("a", "s", "")
        .svc("b", "s", "")
        .with(|s| s.weight = 4)
        .svc("c", "s", "")
        .svc("d", "s", "")
        .domain("p", &["a", "b", "c", "d"], |d| {
            d.persistence = Some(Persistence {
                mask: SourceMask { v4: 24, v6: 56 },
                timeout_s: 300,
                max_entries: 1000,
            });
        })
        .domain("pr", &["a", "b", "c", "d"], |d| {
            d.chain = vec![Method::Ratio];
            d.persistence = Some(Persistence {
                mask: SourceMask { v4: 24, v6: 56 },
                timeout_s: 300,
                max_entries: 1000,
            });
        })
        .domain("ga", &["a", "b", "c", "d"], |d| {
            d.chain = vec![Method::GlobalAvailability];
            d.persistence = Some(Persistence {
                mask: SourceMask::default(),
                timeout_s: 300,
                max_entries: 1000,
            });
        })
        .build();
    // Without an entry the domain's method decides, per answer: the caller (crate::persist)
    // makes the entry from the answer given.
    assert_eq!(Ask::new(&e, "p").decide().pick, Pick::Rotate);
    assert_eq!(
        Ask::new(&e, "pr").decide().pick,
        Pick::Weighted(vec![1, 4, 1, 1])
    );
    assert_eq!(Ask::new(&e, "ga").decide().pick, Pick::First);

    // An explicit persistence entry (held by the caller, which owns the clock) wins while its
    // service is available, over every method and policy.
    let d = Ask::new(&e, "ga").sticky("c").decide();
    assert_eq!(
        (names(&e, &d), d.tier, d.pick),
        (vec!["c".into()], Tier::Persistence, Pick::First)
    );
    let d = Ask::new(&e, "ga").sticky("c").down(&["c"]).decide();
    assert_eq!(
        (names(&e, &d), d.tier),
        (vec!["a".into()], method(0, Method::GlobalAvailability))
    );
    assert_eq!(Ask::new(&e, "ga").sticky("nonexistent").names(), ["a"]);
}

#[test]
fn a_persistence_entry_over_its_limits_is_not_used_while_another_service_has_room() {
    let e = Lab::new(&["s"])
        .svc("a", "s", "")
        .with(|s| s.max_connections = Some(10))
        .svc("b", "s", "")
        .with(|s| s.max_connections = Some(10))
        .domain("p", &["a", "b"], |d| {
            d.chain = vec![Method::GlobalAvailability];
            d.persistence = Some(Persistence {
                mask: SourceMask::default(),
                timeout_s: 300,
                max_entries: 1000,
            });
        })
        .build();
    assert_eq!(Ask::new(&e, "p").sticky("b").names(), ["b"]);
    // b is full and a has room: spillover wins, the caller's entry then follows a.
    assert_eq!(
        Ask::new(&e, "p").sticky("b").load("b", 10, 0).names(),
        ["a"]
    );
    // Both full: the client keeps b.
    let d = Ask::new(&e, "p")
        .sticky("b")
        .load("a", 10, 0)
        .load("b", 10, 0)
        .decide();
    assert_eq!(
        (names(&e, &d), d.tier, d.overloaded),
        (vec!["b".into()], Tier::Persistence, true)
    );
}

#[test]
fn a_persistence_entry_on_a_backup_domain_holds_when_the_domain_is_back() {
    let persistence = Some(Persistence {
        mask: SourceMask::default(),
        timeout_s: 300,
        max_entries: 1000,
    });
    let e = Lab::new(&["s", "dr"])
        .svc("dr1", "dr", "")
        .svc("dr2", "dr", "")
        .svc("a", "s", "")
        .domain("dr", &["dr1", "dr2"], |_| {})
        .domain("p", &["a"], |d| {
            d.persistence = persistence;
            d.backup = Some(DomainId(0));
        })
        .build();
    // a is back, but the client was sent to the backup domain's dr2: it stays there.
    let d = Ask::new(&e, "p").sticky("dr2").decide();
    assert_eq!(
        (names(&e, &d), d.tier, d.domain),
        (vec!["dr2".into()], Tier::Persistence, 0)
    );
    // Until dr2 goes down: then the domain decides again.
    let d = Ask::new(&e, "p").sticky("dr2").down(&["dr2"]).decide();
    assert_eq!((names(&e, &d), d.domain), (vec!["a".into()], 1));
    // Without an entry, the domain first.
    assert_eq!(Ask::new(&e, "p").names(), ["a"]);
    // A service outside the domain and its backups is no entry of it.
    let e2 = Lab::new(&["s"])
        .svc("x", "s", "")
        .svc("a", "s", "")
        .domain("other", &["x"], |_| {})
        .domain("p", &["a"], |d| d.persistence = persistence)
        .build();
    assert_eq!(Ask::new(&e2, "p").sticky("x").names(), ["a"]);
}

#[test]
fn spillover() {
    let e = Lab::new(&["s"])
        .svc("a", "s", "")
        .with(|s| s.max_connections = Some(100))
        .svc("b", "s", "")
        .with(|s| s.max_bandwidth_kbps = Some(1000))
        .svc("c", "s", "")
        .svc("bk", "s", "")
        .domain("backup", &["bk"], |_| {})
        .domain("d", &["a", "b"], |d| {
            d.chain = vec![Method::GlobalAvailability];
        })
        .domain("with-backup", &["a", "b"], |d| {
            d.backup = Some(DomainId(0));
            d.down = Fallback::BackupIp;
        })
        .domain("lc", &["a", "b", "c"], |d| {
            d.chain = vec![Method::LeastConnection];
        })
        .build();
    let d = || Ask::new(&e, "d");
    let table: Vec<(&str, Ask<'_>, &[&str], bool)> = vec![
        ("under limits", d().load("a", 99, 0), &["a"], false),
        (
            "a at its connection limit",
            d().load("a", 100, 0),
            &["b"],
            false,
        ),
        // Both full and nowhere to spill to: global availability over the full ones.
        (
            "a at its limit, b over its bandwidth",
            d().load("a", 100, 0).load("b", 0, 1000),
            &["a"],
            true,
        ),
        (
            "b's bandwidth does not matter while a has room",
            d().load("b", 0, 5000),
            &["a"],
            false,
        ),
        (
            "a full and b down: a answers anyway",
            d().load("a", 500, 0).down(&["b"]),
            &["a"],
            true,
        ),
        // Least connection never sees a full service.
        (
            "lc skips the full one",
            Ask::new(&e, "lc")
                .load("a", 100, 0)
                .load("b", 50, 0)
                .load("c", 60, 0),
            &["b"],
            false,
        ),
    ];
    for (case, ask, want, overloaded) in table {
        let dec = ask.decide();
        assert_eq!(
            (names(&e, &dec), dec.overloaded),
            (want.iter().map(ToString::to_string).collect(), overloaded),
            "{case}"
        );
    }
    // With a backup domain, spillover goes there, and comes back to the full services only when
    // the backup has no room either.
    let wb = || {
        Ask::new(&e, "with-backup")
            .load("a", 100, 0)
            .load("b", 0, 1000)
    };
    let dec = wb().decide();
    assert_eq!(
        (
            e.domain(dec.domain).name.as_str(),
            names(&e, &dec),
            dec.overloaded
        ),
        ("backup", vec!["bk".into()], false)
    );
    let dec = wb().down(&["bk"]).decide();
    assert_eq!(
        (
            e.domain(dec.domain).name.as_str(),
            names(&e, &dec),
            dec.overloaded
        ),
        ("with-backup", vec!["a".into(), "b".into()], true)
    );
}

#[test]
fn engine_rejects_inconsistent_specs() {
    let base = || {
        Lab::new(&["s"])
            .svc("a", "s", "")
            .svc("b", "s", "")
            .domain("d", &["a", "b"], |_| {})
    };
    let err = |lab: Lab| Engine::new(Arc::new(lab.spec)).unwrap_err().to_string();
    let mut lab = base();
    lab.spec.services[0].site = SiteId(3);
    assert_eq!(err(lab), "service \"a\": site 3 does not exist (1 sites)");
    let mut lab = base();
    lab.spec.domains[0].services.push(ServiceId(7));
    assert!(err(lab).contains("service 7 does not exist"));
    let mut lab = base();
    lab.spec.domains[0].services.push(ServiceId(0));
    assert!(err(lab).contains("\"a\" is bound twice"));
    let mut lab = base();
    lab.spec.domains[0].chain = vec![Method::Rtt; 4];
    assert!(err(lab).contains("4 methods"));
    let mut lab = base();
    lab.spec.domains[0].chain.clear();
    assert!(err(lab).contains("0 methods"));
    let lab = base().policy(
        "p",
        1,
        "TRUE",
        &["a", "b", "c", "d", "e", "f", "g", "h", "i"],
    );
    assert_eq!(
        err(lab),
        "action \"p-action\": 9 preferred locations, 1..=8 allowed"
    );
    let lab = base().policy("p", 1, "TRUE", &[]);
    assert!(err(lab).contains("0 preferred locations"));
    let lab = base()
        .policy("p", 1, "TRUE", &["a"])
        .policy("q", 1, "FALSE", &["b"]);
    assert!(err(lab).contains("same priority 1"));
    let lab = base().domain("e", &["a"], |d| d.backup = Some(DomainId(0)));
    let mut lab = lab;
    lab.spec.domains[0].backup = Some(DomainId(1));
    assert!(err(lab).contains("lead back to it"));
    let lab = base().domain("e", &["a"], |d| d.backup = Some(DomainId(5)));
    assert!(err(lab).contains("backup domain 5 does not exist"));
    let lab = base().domain("e", &["a"], |d| d.sourceip_mask.v4 = 33);
    assert!(err(lab).contains("/33"));
    let mut lab = base().topo("s", "10.0.0.0/8", 1);
    lab.spec.topology[0].site = SiteId(1);
    assert!(err(lab).contains("topology record 0: site 1"));
    // A self-reference is a cycle too.
    let lab = base().domain("e", &["a"], |d| d.backup = Some(DomainId(1)));
    assert!(err(lab).contains("lead back to it"));
}

// ---- Property tests ----

const LOCATIONS: [&str; 6] = ["Europe.UK", "Europe.DE", "Asia.JP", "Asia", "*.UK", ""];

/// (site, location index, weight, down, connections, max connections, v6)
type WorldService = (usize, usize, u32, bool, u64, Option<u64>, bool);

#[derive(Clone, Debug)]
struct World {
    services: Vec<WorldService>,
    chain: Vec<Method>,
    rtt: Vec<Option<u32>>,
    client: u32,
    client_location: Option<usize>,
    persistence: bool,
    answer_all: bool,
    policy: Option<Vec<usize>>,
    mode: WildcardMode,
    qtype: u16,
    tolerance_us: u32,
}

fn world() -> impl Strategy<Value = World> {
    let service = (
        0..3usize,
        0..LOCATIONS.len(),
        1..5u32,
        any::<bool>(),
        0..20u64,
        proptest::option::of(1..20u64),
        proptest::bool::weighted(0.2),
    );
    (
        proptest::collection::vec(service, 1..10),
        proptest::collection::vec(proptest::sample::select(Method::ALL.to_vec()), 1..=3),
        proptest::collection::vec(proptest::option::of(1..300_000u32), 3),
        any::<u32>(),
        proptest::option::of(0..LOCATIONS.len() - 1),
        any::<bool>(),
        proptest::bool::weighted(0.2),
        proptest::option::of(proptest::collection::vec(0..LOCATIONS.len() - 1, 1..4)),
        proptest::sample::select(vec![
            WildcardMode::Yes,
            WildcardMode::No,
            WildcardMode::Expression,
        ]),
        proptest::sample::select(vec![A, AAAA, 255]),
        proptest::sample::select(vec![0, 1, 10_000, 150_000]),
    )
        .prop_map(
            |(
                services,
                chain,
                rtt,
                client,
                client_location,
                persistence,
                answer_all,
                policy,
                mode,
                qtype,
                tolerance_us,
            )| World {
                services,
                chain,
                rtt,
                client,
                client_location,
                persistence,
                answer_all,
                policy,
                mode,
                qtype,
                tolerance_us,
            },
        )
}

impl World {
    /// The engine with the services listed in `order` (a permutation of their indexes), both
    /// in the configuration and in the domain.
    fn engine(&self, config_order: &[usize], domain_order: &[usize]) -> Engine {
        let mut lab = Lab::new(&["s0", "s1", "s2"]).mode(self.mode);
        for &i in config_order {
            let (site, l, weight, _, _, max, v6) = self.services[i];
            let ip = if v6 {
                format!("2001:db8::{}", i + 1)
            } else {
                format!("192.0.2.{}", i + 1)
            };
            lab = lab
                .svc_ip(&format!("svc{i}"), &ip, &format!("s{site}"), LOCATIONS[l])
                .with(|s| {
                    s.weight = weight;
                    s.max_connections = max;
                });
        }
        let names: Vec<String> = domain_order.iter().map(|i| format!("svc{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        lab = lab
            .domain("d", &names, |d| {
                d.chain = self.chain.clone();
                d.tolerance_us = self.tolerance_us;
                d.sourceip_mask = SourceMask { v4: 24, v6: 64 };
                d.persistence = self.persistence.then_some(Persistence {
                    mask: SourceMask { v4: 16, v6: 48 },
                    timeout_s: 60,
                    max_entries: 1000,
                });
                (d.answer, d.max_answers) = if self.answer_all {
                    (AnswerMode::All, 8)
                } else {
                    (AnswerMode::Rotate, 1)
                };
            })
            .topo("s0", "10.0.0.0/8", 10)
            .topo("s1", "10.1.0.0/16", 5)
            .topo("s2", "Asia", 7)
            .topo("s1", "Europe", 7);
        if let Some(preferred) = &self.policy {
            let preferred: Vec<&str> = preferred.iter().map(|&l| LOCATIONS[l]).collect();
            lab = lab.policy("p", 1, r#"CLIENT.IP.SRC.MATCHES_LOCATION("Europe") || CLIENT.IP.SRC.IN_SUBNET(10.0.0.0/9)"#, &preferred);
        }
        lab.build()
    }

    fn decide(&self, e: &Engine) -> (Decision, Vec<ServiceState>) {
        let states: Vec<ServiceState> = e
            .services()
            .iter()
            .map(|s| {
                let i: usize = s.name[3..].parse().unwrap();
                let (_, _, _, down, connections, _, _) = self.services[i];
                ServiceState {
                    up: !down,
                    connections,
                    bandwidth: Bandwidth::ZERO,
                }
            })
            .collect();
        let location = self.client_location.map(|l| loc(LOCATIONS[l]));
        let client = Client {
            addr: IpAddr::V4(self.client.into()),
            location: location.as_ref(),
            view: 0,
            sticky: None,
        };
        let d = e.decide(
            0,
            &Query {
                name: "d",
                qtype: self.qtype,
            },
            &client,
            &State {
                services: &states,
                rtt: &self.rtt,
                disabled_domains: &[],
            },
        );
        (d, states)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// A DOWN service is never a candidate; there are candidates whenever a service of the
    /// query's family is UP.
    #[test]
    fn down_services_are_never_answered(w in world()) {
        let order: Vec<usize> = (0..w.services.len()).collect();
        let e = w.engine(&order, &order);
        let (d, states) = w.decide(&e);
        let family_ok = |s: usize| match w.qtype {
            A => e.service(s).ip.is_ipv4(),
            AAAA => e.service(s).ip.is_ipv6(),
            _ => true,
        };
        let any_up = (0..states.len()).any(|s| states[s].up && family_ok(s));
        for &c in &d.candidates {
            prop_assert!(states[c].up, "{} is down: {d:?}", e.service(c).name);
            prop_assert!(family_ok(c));
        }
        prop_assert_eq!(d.candidates.is_empty(), !any_up, "{:?}", d);
        prop_assert_eq!(d.fallback.is_some(), d.candidates.is_empty());
        // Every candidate respects its limit unless all are overloaded.
        if !d.overloaded {
            for &c in &d.candidates {
                let max = e.service(c).max_connections;
                prop_assert!(max.is_none_or(|m| states[c].connections < m));
            }
        }
        // Whatever the pick, an answer carries only candidates.
        for turn in 0..3 {
            for s in e.select(&d, IpAddr::V4(w.client.into()), turn) {
                prop_assert!(d.candidates.contains(&s));
            }
        }
    }

    /// The compiler's per-row RTT evaluation ([`RttFirst`], made once per state and applied
    /// to every row) takes the engine's decision for every row it answers, and answers every
    /// row the engine decides by the RTT method first without a policy and with room.
    #[test]
    fn rtt_first_decides_as_the_engine(
        mut w in world(),
        rtt_first in any::<bool>(),
        rows in proptest::collection::vec(
            proptest::collection::vec(proptest::option::of(1..300_000u32), 0..4),
            1..6,
        ),
    ) {
        if rtt_first {
            w.chain[0] = Method::Rtt;
        }
        let order: Vec<usize> = (0..w.services.len()).collect();
        let e = w.engine(&order, &order);
        let (_, states) = w.decide(&e);
        let state = State { services: &states, rtt: &[], disabled_domains: &[] };
        let fast = e.rtt_first(0, w.qtype, &state);
        for row in rows {
            w.rtt = row;
            let (d, _) = w.decide(&e);
            match fast.as_ref().and_then(|f| f.chosen(&w.rtt).map(|c| f.decision(&e, c))) {
                Some(f) => prop_assert_eq!(f, d),
                // Every service over its limits: the overload pass decides (the rule declines).
                None => prop_assert!(
                    w.policy.is_some() || d.overloaded || d.tier != method(0, Method::Rtt),
                    "the engine decided by RTT: {:?}", d
                ),
            }
        }
    }

    /// Reordering the [[service]] list changes nothing; reordering the domain's own list
    /// changes nothing but global availability's choice, whose order it is.
    #[test]
    fn order_of_configuration_does_not_matter(w in world(), seed in any::<u64>()) {
        let n = w.services.len();
        let order: Vec<usize> = (0..n).collect();
        let mut shuffled = order.clone();
        // A deterministic shuffle from the seed (Fisher–Yates).
        let mut x = seed;
        for i in (1..n).rev() {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            shuffled.swap(i, (x >> 33) as usize % (i + 1));
        }
        let normalise = |e: &Engine, d: &Decision| {
            let mut named: Vec<(String, Option<u32>)> = d
                .candidates
                .iter()
                .enumerate()
                .map(|(i, &s)| {
                    let w = match &d.pick {
                        Pick::Weighted(w) | Pick::Hash { weights: Some(w), .. } => Some(w[i]),
                        _ => None,
                    };
                    (e.service(s).name.clone(), w)
                })
                .collect();
            named.sort();
            let pick = match &d.pick {
                Pick::Weighted(_) => "weighted".to_string(),
                Pick::Hash { mask, weights } => format!("hash {mask:?} {}", weights.is_some()),
                other => format!("{other:?}"),
            };
            let hashed: Vec<String> = (0..4u32)
                .flat_map(|i| e.select(d, IpAddr::V4((w.client ^ (i << 20)).into()), 0))
                .map(|s| e.service(s).name.clone())
                .collect();
            let hashed = if matches!(d.pick, Pick::Hash { .. }) { hashed } else { vec![] };
            (named, pick, d.tier, d.policy.map(|p| p.1), d.overloaded, d.fallback, hashed)
        };
        let e = w.engine(&order, &order);
        let (d, _) = w.decide(&e);
        let want = normalise(&e, &d);

        let e2 = w.engine(&shuffled, &order);
        let (d2, _) = w.decide(&e2);
        prop_assert_eq!(normalise(&e2, &d2), want.clone(), "[[service]] order {:?}", shuffled);

        let ga = w.chain.iter().position(|m| *m == Method::GlobalAvailability);
        let decided_by_ga = matches!(d.tier, Tier::Method { method: Method::GlobalAvailability, .. });
        let e3 = w.engine(&order, &shuffled);
        let (d3, _) = w.decide(&e3);
        if ga.is_none() || !decided_by_ga {
            // Preferred-location entries are positions in the action, not in the domain, so
            // they do not move either.
            prop_assert_eq!(normalise(&e3, &d3), want, "domain order {:?}", shuffled);
        } else {
            // Global availability answers the first available in the domain's order.
            let first = d3.candidates[0];
            let pos = e3.domain(0).services.iter().position(|s| s.index() == first).unwrap();
            for &earlier in &e3.domain(0).services[..pos] {
                let name = &e3.service(earlier.index()).name;
                let i: usize = name[3..].parse().unwrap();
                let (_, _, _, down, connections, max, v6) = w.services[i];
                let family_skip = (w.qtype == A && v6) || (w.qtype == AAAA && !v6);
                let full = max.is_some_and(|m| connections >= m);
                let narrowed_out = d3.policy.is_some_and(|p| p.1 != Preference::Rest);
                prop_assert!(down || family_skip || full || narrowed_out, "{name} was available before {}", e3.service(first).name);
            }
        }
    }
}

// ---- The example configurations, through the configuration ----

fn example(name: &str) -> Engine {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name);
    let config = crate::config::Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    config.engine().unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn example_preferred_locations() {
    let e = example("preferred-locations.toml");
    let zmb = || Ask::new(&e, "www.example.com").at("Africa.ZMB");
    let steps: [(&[&str], &[&str]); 5] = [
        (&[], &["hk"]),
        (&["hk"], &["uk"]),
        (&["hk", "uk"], &["in", "jpn"]),
        (&["hk", "uk", "in", "jpn"], &["ru", "eg"]),
        (&["hk", "uk", "in", "jpn", "ru", "eg"], &["sd", "zmb"]),
    ];
    for (down, want) in steps {
        assert_eq!(zmb().down(down).names(), want, "down: {down:?}");
    }
    // The lab policy (priority 50) comes first, for A queries of www only.
    let lab = Ask::new(&e, "www.example.com")
        .from("10.1.1.1")
        .at("Europe.FR");
    assert_eq!(lab.names(), ["hk"]);
    assert_eq!(
        lab.decide().policy.map(|p| e.policies()[p.0].name.as_str()),
        Some("lab")
    );
    assert_eq!(
        Ask::new(&e, "www.example.com")
            .from("10.1.1.1")
            .qtype(AAAA)
            .decide()
            .policy,
        None
    );
}

#[test]
fn example_rtt_topology() {
    let e = example("rtt-topology.toml");
    let ask = |client| Ask::new(&e, "www.f5.com.cn").from(client);
    assert_eq!(
        ask("61.136.178.229")
            .rtt("CNC", 189.85)
            .rtt("TEL", 57.209)
            .names(),
        ["vs2"]
    );
    // Within the 5 ms tolerance both links share.
    assert_eq!(
        ask("61.136.178.229")
            .rtt("CNC", 60.0)
            .rtt("TEL", 57.209)
            .names(),
        ["vs1", "vs2"]
    );
    assert_eq!(ask("202.106.0.1").names(), ["vs1"]);
    assert_eq!(ask("219.172.0.1").names(), ["vs2"]);
    assert_eq!(ask("192.0.2.1").names(), ["vs1"]);
    let d = ask("192.0.2.1").down(&["vs1", "vs2"]).decide();
    assert_eq!(d.fallback, Some(Fallback::BackupIp));
}

#[test]
fn example_lb_methods() {
    let e = example("lb-methods.toml");
    let ask = |domain| Ask::new(&e, domain);
    assert_eq!(ask("rr.example.com").names(), ["eu-1", "eu-2", "us-1"]);
    assert_eq!(ask("rr.example.com").qtype(AAAA).names(), ["us-1-v6"]);
    assert_eq!(
        ask("ratio.example.com").decide().pick,
        Pick::Weighted(vec![3, 1, 1])
    );
    assert_eq!(
        ask("hash.example.com").decide().pick,
        Pick::Hash {
            mask: SourceMask { v4: 24, v6: 56 },
            weights: None
        }
    );
    assert_eq!(
        ask("least.example.com")
            .load("eu-1", 10, 0)
            .load("eu-2", 4, 0)
            .load("us-1", 4, 0)
            .names(),
        ["eu-2", "us-1"]
    );
    assert_eq!(ask("near.example.com").at("Europe.DE").names(), ["eu-2"]);
    assert_eq!(ask("near.example.com").names(), ["eu-1", "eu-2", "us-1"]);
    assert_eq!(
        ask("dr.example.com").load("eu-1", 5000, 0).names(),
        ["eu-2"]
    );
    let shop = ask("shop.example.com").down(&["eu-1", "eu-2"]).decide();
    assert_eq!(
        (e.domain(shop.domain).name.as_str(), names(&e, &shop)),
        ("dr-site.example.com", vec!["dr".into()])
    );
    let shop = ask("shop.example.com")
        .down(&["eu-1", "eu-2", "dr"])
        .decide();
    assert_eq!(shop.fallback, Some(Fallback::BackupIp));
}
