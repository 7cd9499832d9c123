//! After health changes: incremental compilations give the engine's answers, in the snapshot
//! and through XDP.

use super::xdp::{ask_xdp_mostly_answered, dataplane, publish, sample};
use super::*;

// ---- After health changes ----

/// An incremental compilation decides a domain again when only its backup domain's services
/// changed state (the decision signature holds the backup chain's states too).
#[test]
fn incremental_compilation_follows_the_health_of_a_backup_domains_services() {
    let config = Config::parse(
        r#"
        [server]
        listen = ["192.0.2.53"]
        [[zone]]
        name = "example.com"
        ns = ["ns.example.net"]
        soa.rname = "hostmaster.example.com"
        [[site]]
        name = "s"
        ip = "192.0.2.1"
        [[service]]
        name = "a"
        ip = "192.0.2.10"
        site = "s"
        [[service]]
        name = "b"
        ip = "192.0.2.20"
        site = "s"
        [[service]]
        name = "c"
        ip = "192.0.2.30"
        site = "s"
        [[gslb_domain]]
        name = "www.example.com"
        services = ["a"]
        backup_domain = "backup.example.com"
        [[gslb_domain]]
        name = "backup.example.com"
        services = ["b", "c"]
        "#,
        Path::new("backup-health.toml"),
    )
    .unwrap();
    let states = |down: &[&str]| Inputs {
        services: config
            .services
            .iter()
            .map(|s| {
                if down.contains(&s.name.as_str()) {
                    ServiceState::DOWN
                } else {
                    ServiceState::UP
                }
            })
            .collect(),
        ..Inputs::default()
    };
    let www_a = |s: &Snapshot| {
        let entry = s
            .domains
            .iter()
            .find(|d| d.name == "www.example.com" && d.qtype == QTYPE_A)
            .unwrap();
        entry
            .answers
            .iter()
            .find(|(v, _)| *v == DEFAULT_VIEW)
            .unwrap()
            .1
            .addrs
            .clone()
    };
    let mut compiler = Compiler::default();
    // a down: the backup domain answers, b and c.
    assert_eq!(
        www_a(&compiler.compile(&config, &states(&["a"]))),
        common::ips(&["192.0.2.20", "192.0.2.30"])
    );
    // b down too: c alone, as a compilation from scratch says.
    let fresh = Snapshot::compile(&config, &states(&["a", "b"]));
    assert_eq!(www_a(&fresh), common::ips(&["192.0.2.30"]));
    let incremental = compiler.compile(&config, &states(&["a", "b"]));
    assert!(incremental.stats.incremental);
    assert_eq!(
        www_a(&incremental),
        common::ips(&["192.0.2.30"]),
        "still answers b, which is down"
    );
}

/// Health changes applied one after the other to [`STATES`] (the last goes back to it):
/// (service, down, connections, bandwidth kbit/s).
const CHANGES: [&[(&str, bool, u64, u64)]; 4] = [
    &[("us-2", false, 0, 0), ("eu-1", true, 10, 0)],
    &[
        ("full-1", false, 0, 0),
        ("ap-6b", false, 0, 0),
        ("us-6", true, 5, 0),
        ("bw-6", false, 0, 0),
    ],
    &[
        ("us-1", true, 3, 100),
        ("ap-1", true, 3, 0),
        ("ap-2", true, 7, 0),
        ("ap-6", true, 0, 0),
        ("eu-6", true, 0, 0),
        ("full-1", true, 0, 0),
        ("full-2", true, 10, 0),
        ("bw-6", true, 0, 0),
        ("us-2", true, 0, 0),
        ("us-6", false, 5, 0),
    ],
    &STATES,
];

/// Recompiles `world` after each of [`CHANGES`] with one [`Compiler`] that keeps its partition
/// and decisions between compilations, as the controller does, and hands each state to `each`.
fn after_health_changes(world: &mut World, mut each: impl FnMut(&World, usize)) {
    let mut compiler = Compiler::default();
    let inputs = |services: Vec<ServiceState>| Inputs {
        locations: Some(&world.db),
        services,
        rtt: world.rtt.clone(),
        ..Inputs::default()
    };
    let first = compiler.compile(&world.config, &inputs(world.services.clone()));
    assert_eq!(
        first, world.snapshot,
        "a compiler's first compilation is a fresh one"
    );
    for (step, changes) in CHANGES.iter().enumerate() {
        let mut services = world.services.clone();
        for &(name, down, connections, bandwidth_kbps) in *changes {
            let i = world
                .config
                .services
                .iter()
                .position(|s| s.name == name)
                .unwrap();
            services[i] = ServiceState {
                up: !down,
                connections,
                bandwidth: Bandwidth::from_kbps(bandwidth_kbps),
            };
        }
        let snapshot = compiler.compile(&world.config, &inputs(services.clone()));
        eprintln!("{} after change {step}: {:?}", world.name, snapshot.stats);
        assert!(
            snapshot.stats.incremental,
            "change {step}: the partition is kept"
        );
        world.services = services;
        world.snapshot = snapshot;
        each(world, step);
    }
}

#[test]
fn incremental_compilations_give_the_engines_answers() {
    let mut world = World::rich();
    let clients = clients(&world, 3, INCREMENTAL_CLIENTS);
    after_health_changes(&mut world, |world, step| {
        let checked = check(world, &clients);
        report(world, &clients, &checked);
        if !checked.mismatches.is_empty() {
            // Whether a compilation from scratch gets it right tells where the fault is.
            let fresh = Snapshot::compile(
                &world.config,
                &Inputs {
                    locations: Some(&world.db),
                    services: world.services.clone(),
                    rtt: world.rtt.clone(),
                    ..Inputs::default()
                },
            );
            let fresh = World {
                snapshot: fresh,
                ..world.clone()
            };
            let again = check(&fresh, &clients);
            panic!(
                "change {step}: {} mismatches (from scratch: {}), the first: {:#?}",
                checked.mismatches.len(),
                again.mismatches.len(),
                checked.mismatches.first()
            );
        }
    });
}

#[test]
fn xdp_answers_as_the_engine_after_health_changes() {
    let mut world = World::rich();
    let Some(mut dp) = dataplane(&world) else {
        return;
    };
    let clients = clients(&world, 3, INCREMENTAL_CLIENTS);
    let clients = sample(&clients, INCREMENTAL_XDP_CLIENTS);
    let mut in_place = 0;
    after_health_changes(&mut world, |world, _| {
        in_place += usize::from(publish(&mut dp, world).in_place);
        ask_xdp_mostly_answered(&dp, world, &clients);
    });
    eprintln!(
        "{in_place} of {} publishes edited the view trie in place",
        CHANGES.len()
    );
}
