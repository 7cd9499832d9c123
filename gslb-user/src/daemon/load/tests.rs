use std::net::IpAddr;
use std::path::Path;

use super::*;
use crate::health::{
    HealthSupervisor,
    load::{LoadReading, Measure, UNKNOWN_LOAD},
};

/// One site; a (limit 10), b and d (no limit) with a connections monitor each; c without one.
const CONFIG: &str = r#"
[server]
listen = ["127.0.0.1"]
[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"
[[site]]
name = "dc"
ip = "10.0.0.1"
[[monitor]]
name = "conns"
type = "load"
format = "prometheus"
metric = "conns"
[[service]]
name = "a"
ip = "192.0.2.1"
site = "dc"
load_monitors = ["conns"]
max_connections = 10
[[service]]
name = "b"
ip = "192.0.2.2"
site = "dc"
load_monitors = ["conns"]
[[service]]
name = "c"
ip = "192.0.2.3"
site = "dc"
[[service]]
name = "d"
ip = "192.0.2.4"
site = "dc"
load_monitors = ["conns"]
[[gslb_domain]]
name = "least-nolimit.example.com"
services = ["b", "d"]
method = "leastconnection"
answer = "all"
[[gslb_domain]]
name = "least.example.com"
answer = "all"
services = ["a", "b"]
method = "leastconnection"
[[gslb_domain]]
name = "spill.example.com"
services = ["a", "b"]
answer = "all"
[[gslb_domain]]
name = "rr.example.com"
services = ["a", "c"]
answer = "all"
"#;

fn world() -> World {
    let config = Config::parse(CONFIG, Path::new("load.toml")).unwrap_or_else(|e| panic!("{e}"));
    World::new(&config, HealthSupervisor::new())
}

/// `a` and `b`'s readings; `None`: unknown.
fn set(world: &mut World, a: Option<u64>, b: Option<u64>) {
    let mut loads = world.loads().clone();
    for (service, value) in [("a", a), ("b", b)] {
        loads.0.insert(
            (service.into(), "conns".into()),
            LoadReading {
                measure: Measure::Connections,
                value,
                checks: 1,
                failures: 0,
                fail_run: 0,
                aged_out: 0,
                last_error: None,
                at: None,
            },
        );
    }
    world.set_loads(loads);
}

/// The default view's A answer of `name` in the compiled snapshot (what the fast path
/// answers and the responder reads).
fn answer(world: &World, name: &str) -> Vec<IpAddr> {
    let snapshot = world.snapshot();
    let entry = snapshot
        .domains
        .iter()
        .find(|d| d.name == name && d.qtype == 1)
        .unwrap_or_else(|| panic!("{name} compiled: {:?}", snapshot.engine_domains));
    let (_, answer) = entry
        .answers
        .iter()
        .find(|(view, _)| *view == gslb_common::DEFAULT_VIEW)
        .expect("a default answer");
    let mut addrs = answer.addrs.clone();
    addrs.sort();
    addrs.dedup();
    addrs
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|a| a.parse().unwrap()).collect()
}

#[test]
fn loads_decide_leastconnection_and_spillover_in_the_compiled_answers() {
    let (a, b) = ("192.0.2.1", "192.0.2.2");
    // (a, b readings) → (least, spill)
    type Case<'a> = (Option<u64>, Option<u64>, &'a [&'a str], &'a [&'a str]);
    let table: [Case; 6] = [
        (Some(3), Some(7), &[a], &[a, b]),
        (Some(9), Some(7), &[b], &[a, b]),
        // a at its limit spills over; b has none.
        (Some(12), Some(7), &[b], &[b]),
        (Some(3), Some(3), &[a, b], &[a, b]),
        // Unknown: ranks last; full with a limit, not without.
        (None, Some(700), &[b], &[b]),
        (Some(3), None, &[a], &[a, b]),
    ];
    let mut w = world();
    for (ra, rb, least, spill) in table {
        set(&mut w, ra, rb);
        assert_eq!(answer(&w, "least.example.com"), ips(least), "{ra:?} {rb:?}");
        assert_eq!(answer(&w, "spill.example.com"), ips(spill), "{ra:?} {rb:?}");
    }
    // All unknown: a is full (it has a limit), so b takes the clients in both domains; where
    // no service has a limit, unknown ones tie and answer in turn (d has no reading at all).
    set(&mut w, None, None);
    assert_eq!(answer(&w, "least.example.com"), ips(&[b]));
    assert_eq!(answer(&w, "spill.example.com"), ips(&[b]));
    assert_eq!(
        answer(&w, "least-nolimit.example.com"),
        ips(&[b, "192.0.2.4"])
    );
    set(&mut w, Some(4), Some(5));
    assert_eq!(
        answer(&w, "least-nolimit.example.com"),
        ips(&[b]),
        "d unknown ranks last"
    );
    // A domain that reads no load is not moved by one (c has no monitor at all).
    assert_eq!(answer(&w, "rr.example.com"), ips(&[a, "192.0.2.3"]));
}

#[test]
fn service_states_carry_the_readings_and_unknown() {
    let mut w = world();
    // No reading yet: unknown for the monitored, 0 for c.
    let states = w.service_states();
    assert_eq!(
        states.iter().map(|s| s.connections).collect::<Vec<_>>(),
        [UNKNOWN_LOAD, UNKNOWN_LOAD, 0, UNKNOWN_LOAD]
    );
    set(&mut w, Some(4), None);
    let states = w.service_states();
    assert_eq!(states[0].connections, 4);
    assert_eq!(states[1].connections, UNKNOWN_LOAD);
    assert!(states.iter().all(|s| s.up && s.bandwidth.kbps() == 0));
}

#[test]
fn only_loads_that_change_a_decision_are_facts() {
    let w = world();
    let facts = |a: u64, b: u64, c: u64| {
        let st = |connections| ServiceState {
            connections,
            ..ServiceState::UP
        };
        LoadFacts::of(w.model(), &[st(a), st(b), st(c), st(0)])
    };
    let base = facts(3, 7, 0);
    // Counts that move within the same order and under the limit: nothing to republish.
    assert_eq!(facts(4, 40, 0), base);
    // c is in no leastconnection domain and has no limit.
    assert_eq!(facts(3, 7, 1000), base);
    // The order flips, or ties; a reaches its limit.
    assert_ne!(facts(8, 7, 0), base);
    assert_ne!(facts(7, 7, 0), base);
    assert_eq!(
        facts(3, 10, 0),
        facts(3, 9, 0),
        "b has no limit and stays second"
    );
    assert_ne!(facts(10, 70, 0), facts(9, 70, 0), "a's limit is 10");
    // A DOWN service's load is not read.
    let down = |a: u64| {
        let a = ServiceState {
            up: false,
            connections: a,
            bandwidth: crate::health::state::Bandwidth::ZERO,
        };
        let b = ServiceState {
            connections: 7,
            ..ServiceState::UP
        };
        LoadFacts::of(w.model(), &[a, b, ServiceState::UP, ServiceState::UP])
    };
    assert_eq!(down(1), down(100));
}
