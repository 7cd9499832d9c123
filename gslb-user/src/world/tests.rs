//! The inputs that arrive by name follow their service through a reload that renumbers it.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::time::Duration;

use super::*;
use crate::config::Config;
use crate::health::load::LoadReading;
use crate::health::{MonitorKind, MonitorSpec, ServiceMonitors};
use crate::steering::{Command, Target};

/// Services `order` of one site, each with a connections monitor, in that file order.
fn config(order: &[&str]) -> Config {
    let mut text = String::from(
        r#"
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
"#,
    );
    for (i, name) in order.iter().enumerate() {
        text.push_str(&format!(
            "[[service]]\nname = \"{name}\"\nip = \"192.0.2.{}\"\nsite = \"dc\"\nload_monitors = [\"conns\"]\n",
            i + 1
        ));
    }
    Config::parse(&text, Path::new("world.toml")).unwrap_or_else(|e| panic!("{e}"))
}

fn reading(value: u64) -> LoadReading {
    LoadReading {
        measure: Measure::Connections,
        value: Some(value),
        checks: 1,
        failures: 0,
        fail_run: 0,
        aged_out: 0,
        last_error: None,
        at: None,
    }
}

/// (name, up, connections) of every service, in the model's order.
fn states(world: &World) -> Vec<(String, bool, u64)> {
    let model = world.model().clone();
    model
        .services
        .iter()
        .zip(world.service_states())
        .map(|(s, st)| (s.name.clone(), st.up, st.connections))
        .collect()
}

/// b is disabled by the operator, c is DOWN by its monitor, a and d carry their loads; a
/// reload that renumbers every service keeps each input on its service, and later changes of
/// each input reach the states.
#[tokio::test]
async fn inputs_follow_their_service_by_name_through_a_reload_that_renumbers_it() {
    let health = HealthSupervisor::new();
    // c starts DOWN, and its monitor (every hour, to a closed port) does not run before the end.
    let mut watched = ServiceMonitors::new("c", IpAddr::V4(Ipv4Addr::LOCALHOST), 1);
    watched.initial_up = false;
    let mut spec = MonitorSpec::new("tcp", MonitorKind::Tcp);
    spec.interval = Duration::from_secs(3600);
    watched = watched.monitor(spec);
    health.set_services(vec![watched]).await.unwrap();

    let mut world = World::new(&config(&["a", "b", "c", "d"]), health);
    world.update_admin(|a| {
        a.apply(&Command {
            target: Target::Service,
            name: "b".into(),
            enable: false,
        })
    });
    let mut loads = LoadReadings::default();
    loads.0.insert(("a".into(), "conns".into()), reading(7));
    loads.0.insert(("d".into(), "conns".into()), reading(9));
    world.set_loads(loads.clone());
    let want = |order: &[&str]| -> Vec<(String, bool, u64)> {
        order
            .iter()
            .map(|&n| match n {
                "a" => ("a".into(), true, 7),
                "d" => ("d".into(), true, 9),
                down => (down.into(), false, 0),
            })
            .collect()
    };
    assert_eq!(states(&world), want(&["a", "b", "c", "d"]));

    world.set_source(Source::from(&config(&["d", "c", "b", "a"])));
    assert_eq!(states(&world), want(&["d", "c", "b", "a"]));

    // Each input, changed after the reload, reaches its service.
    world.update_admin(|a| {
        a.apply(&Command {
            target: Target::Service,
            name: "b".into(),
            enable: true,
        })
    });
    loads.0.insert(("d".into(), "conns".into()), reading(3));
    world.set_loads(loads);
    world.health.set_services(Vec::new()).await.unwrap();
    assert_eq!(
        states(&world),
        vec![
            ("d".into(), true, 3),
            ("c".into(), true, UNKNOWN_LOAD),
            ("b".into(), true, UNKNOWN_LOAD),
            ("a".into(), true, 7),
        ]
    );
}
