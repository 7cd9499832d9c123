//! The compiled tables give every client the decision engine's answer (issue 5, "Compile").
//!
//! Two configurations are compiled with a location database (NetScaler CSV text and custom
//! `[[location]]` entries, nested, one range not aligned to prefixes, IPv4 and IPv6), RTT rows
//! for IPv4 and IPv6 LDNS prefixes, and service states (some down, some over their spillover
//! limits):
//!
//! - `rich`: DNS policies (MATCHES_LOCATION, IN_SUBNET over IPv4 and IPv6, question name and
//!   type), topology records by prefix and by location, static views, and a domain per method
//!   with alternate/fallback chains, backup domains, backup addresses and spillover. With a
//!   policy in the configuration the engine decides every domain.
//! - `split`: no policies, so round-robin domains are answered by static view while the others
//!   are decided by the engine, side by side in one snapshot.
//!
//! For random clients (seeded), most inside or at the edges of a configured range, the answer
//! the snapshot gives, looked up as the fast path does (longest prefix over `Snapshot::views`
//! giving the view and the LDNS view, none: the default view; the view's answer, else the
//! default view's; for a domain answered by RTT the answer of the outcome the LDNS view's
//! choice gives (`Snapshot::rtt_choices`) instead when it has
//! one), must mean the same as the engine's decision for that client, converted here
//! independently of `compile::decision_answer` (round-robin domains by static view: the
//! static-view rule, written here too). The privileged tests publish the snapshot into the real
//! maps and ask the XDP program (BPF_PROG_TEST_RUN) for a sample of the clients; the same again
//! after a sequence of health changes compiled incrementally and published in place.

mod clients;
mod configs;
mod health;
mod lookup;
mod meaning;
mod random;
mod world;
mod xdp;

use clients::*;
use lookup::*;
use meaning::*;
use world::*;

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use common::{Answers, Expect, Frame, assert_passed, assert_reply, query, run, wire};
use configs::{COMMON, CSV, RICH, RTT_MS, SPLIT, SPLIT_STATIC, STATES, TWINS};
use gslb_common::{
    Counter, DEFAULT_VIEW, MAX_ADDRS, QTYPE_A, QTYPE_AAAA, RTT_OUTCOME_BIT, ViewValue,
};
use gslb_user::compile::{Answer, Compiler, Inputs, LdnsRtt, Snapshot};
use gslb_user::config::Config;
use gslb_user::dataplane::{Dataplane, PublishStats};
use gslb_user::location::db::LocationDb;
use gslb_user::policy::{AnswerMode, DownResponse};
use gslb_user::policy::{
    Bandwidth, Client, Decision, Engine, Fallback, Ldns, Pick, Query as EngineQuery, ServiceState,
    State,
};
use hickory_proto::rr::RecordType;
use ipnet::IpNet;
use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};

/// Clients of the property over the rich configuration, and over the split one.
const CLIENTS: usize = 100_000;
const SPLIT_CLIENTS: usize = 30_000;
const SHARED_CLIENTS: usize = 20_000;
/// Of those, clients asked through the XDP program.
const XDP_CLIENTS: usize = 2_000;
const SPLIT_XDP_CLIENTS: usize = 200;
/// Clients checked after each health change, and of those asked through XDP.
const INCREMENTAL_CLIENTS: usize = 10_000;
const INCREMENTAL_XDP_CLIENTS: usize = 100;

// ---- The property ----

/// Every (client, domain, qtype) the snapshot answers otherwise than the engine, described.
struct Check {
    /// ((domain, qtype), description).
    mismatches: Vec<((String, u16), String)>,
    count: usize,
    /// Per domain, the distinct meanings seen: the test must exercise something.
    seen: BTreeMap<String, usize>,
    views: BTreeSet<(u32, u32)>,
    fast: usize,
    passed: usize,
    nodata: usize,
}

fn check(world: &World, clients: &[IpAddr]) -> Check {
    let tables = Tables::new(&world.snapshot);
    let mut out = Check {
        mismatches: Vec::new(),
        count: 0,
        seen: BTreeMap::new(),
        views: BTreeSet::new(),
        fast: 0,
        passed: 0,
        nodata: 0,
    };
    let domains = &world.config.gslb_domains;
    let per_query: Vec<bool> = domains
        .iter()
        .map(|d| world.snapshot.engine_domains.contains(&d.name))
        .collect();
    // Per domain and type, the distinct answers the engine gave.
    let mut seen: Vec<[HashSet<Meaning>; 2]> = vec![Default::default(); domains.len()];
    for (i, &client) in clients.iter().enumerate() {
        let view = tables.view(client);
        out.views.insert((view.view, view.rtt_view));
        let location = world.db.lookup(client);
        for (d, domain) in domains.iter().enumerate() {
            for (t, qtype) in [QTYPE_A, QTYPE_AAAA].into_iter().enumerate() {
                if per_query[d] {
                    if tables.known(&domain.name, qtype) {
                        out.mismatches.push((
                            (domain.name.clone(), qtype),
                            "a per-query domain has an entry".into(),
                        ));
                    }
                    continue;
                }
                out.count += 1;
                let stored = tables.answer(&domain.name, qtype, view);
                let got = Meaning::of_answer(stored);
                let want = world.expected(d, qtype, client, location.as_deref());
                match stored {
                    Some(a) if !a.addrs.is_empty() && a.fast() => out.fast += 1,
                    _ if got == Meaning::Nodata => out.nodata += 1,
                    _ => out.passed += 1,
                }
                // (Of every 16th client: hashing answers is not free.)
                if let Ok(want) = &want
                    && i % 16 == 0
                    && !seen[d][t].contains(want)
                {
                    seen[d][t].insert(want.clone());
                }
                if want.as_ref() != Ok(&got) {
                    out.mismatches.push(((domain.name.clone(), qtype), format!(
                        "{}: client {client} (location {:?}, view {view:?}), {} type {qtype}: snapshot {got:?} \
                         (stored {stored:?}), engine {want:?}",
                        world.name,
                        location.as_deref().map(ToString::to_string),
                        domain.name,
                    )));
                }
            }
        }
    }
    for (d, [a, aaaa]) in seen.iter().enumerate() {
        if !per_query[d] {
            out.seen
                .insert(domains[d].name.clone(), a.len() + aaaa.len());
        }
    }
    out
}

impl Check {
    /// The clients met every view and every LDNS view, and each named domain (`www` for
    /// www.example.com) answered them at least this many ways (the two types counted apart).
    fn assert_met(&self, world: &World, domains: &[(&str, usize)]) {
        let views: BTreeSet<u32> = self.views.iter().map(|v| v.0).collect();
        let rtt_views: BTreeSet<u32> = self.views.iter().map(|v| v.1).filter(|&r| r != 0).collect();
        let stats = world.snapshot.stats;
        assert_eq!(
            (views.len(), rtt_views.len()),
            (stats.views, stats.rtt_views),
            "views and LDNS views met"
        );
        for &(name, least) in domains {
            let name = format!("{name}.example.com");
            let seen = self.seen[&name];
            assert!(seen >= least, "{name}: only {seen} distinct answers");
        }
    }
}

fn report(world: &World, clients: &[IpAddr], check: &Check) {
    let v4 = clients.iter().filter(|c| c.is_ipv4()).count();
    eprintln!(
        "{}: {} clients ({v4} IPv4, {} IPv6), {} answers compared: {} by the fast path, {} passed to \
         the responder (more than {MAX_ADDRS} records, or a window that moves), {} NODATA; {} (view, LDNS view) pairs met",
        world.name,
        clients.len(),
        clients.len() - v4,
        check.count,
        check.fast,
        check.passed,
        check.nodata,
        check.views.len(),
    );
    let kinds: Vec<String> = check
        .seen
        .iter()
        .map(|(name, seen)| format!("{name} {seen}"))
        .collect();
    eprintln!(
        "{}: distinct answers per domain: {}",
        world.name,
        kinds.join(", ")
    );
    // The first mismatch of each domain and type, and how many there are.
    let mut first: BTreeMap<(String, u16), (usize, &String)> = BTreeMap::new();
    for (key, m) in &check.mismatches {
        first.entry(key.clone()).or_insert((0, m)).0 += 1;
    }
    for ((name, qtype), (n, m)) in &first {
        eprintln!("MISMATCH {name} type {qtype}: {n} clients, e.g. {m}");
    }
}

#[test]
fn the_rich_configuration_compiles_to_the_engines_answers() {
    let world = World::rich();
    let started = Instant::now();
    let clients = clients(&world, 1, CLIENTS);
    let check = check(&world, &clients);
    eprintln!("rich: checked in {:?}", started.elapsed());
    report(&world, &clients, &check);
    assert!(
        check.mismatches.is_empty(),
        "{} mismatches, the first: {:#?}",
        check.mismatches.len(),
        check.mismatches.first()
    );
    // The property must have met what it is about: clients in several views, and the domains
    // whose answer depends on the client answering several ways.
    check.assert_met(
        &world,
        &[
            ("ratio", 4),
            ("least", 4),
            ("near", 4),
            ("rtt", 4),
            ("topo", 4),
            ("spill", 4),
            ("chain", 4),
            ("rr", 4),
            ("v4only", 4),
            ("ga", 3),
            ("shared", 2),
            ("down", 2),
            ("overload", 2),
            ("ratio-window", 3),
            ("all-window", 2),
        ],
    );
    assert!(
        check.fast > check.count / 2,
        "the fast path answers most queries"
    );
    assert!(
        check.passed > 0 && check.nodata > 0,
        "some answers are passed, some are NODATA"
    );
}

#[test]
fn domains_of_one_structure_share_decisions_and_keep_their_own_answers() {
    let world = World::shared();
    let clients = clients(&world, 4, SHARED_CLIENTS);
    let check = check(&world, &clients);
    report(&world, &clients, &check);
    assert!(
        check.mismatches.is_empty(),
        "{} mismatches, the first: {:#?}",
        check.mismatches.len(),
        check.mismatches.first()
    );
    check.assert_met(
        &world,
        &[("twin-a", 4), ("twin-b", 4), ("rtt-a", 3), ("rtt-b", 3)],
    );
    // Fewer signatures than decided (domain, type) entries: some were decided once for two.
    let decided = 2 * (world.config.gslb_domains.len() - world.snapshot.engine_domains.len());
    assert!(
        world.snapshot.stats.signatures < decided,
        "{:?}",
        world.snapshot.stats
    );
}

#[test]
fn static_views_and_decided_domains_share_one_snapshot() {
    let world = World::split();
    let clients = clients(&world, 2, SPLIT_CLIENTS);
    let check = check(&world, &clients);
    report(&world, &clients, &check);
    assert!(
        check.mismatches.is_empty(),
        "{} mismatches, the first: {:#?}",
        check.mismatches.len(),
        check.mismatches.first()
    );
    check.assert_met(
        &world,
        &[
            ("www", 4),
            ("all", 3),
            ("rr-window", 2),
            ("dead", 3),
            ("near", 4),
            ("rtt", 4),
            ("topo", 4),
            ("twin-a", 4),
            ("twin-b", 4),
        ],
    );
}

#[test]
fn the_compile_is_not_trivial() {
    for world in [World::rich(), World::split()] {
        let s = &world.snapshot;
        let stats = s.stats;
        eprintln!("{}: {stats:#?}", world.name);
        let per_view = s.domains.iter().filter(|d| d.answers.len() > 1).count();
        let v6 = s
            .views
            .iter()
            .filter(|(n, _)| matches!(n, IpNet::V6(_)))
            .count();
        eprintln!(
            "{}: {} prefixes ({v6} IPv6), {} (name, type) entries, {per_view} with per-view answers, \
             engine domains {:?}",
            world.name,
            s.views.len(),
            s.domains.len(),
            s.engine_domains
        );
        assert!(stats.views >= 8, "{}: {} views", world.name, stats.views);
        assert_eq!(stats.prefixes, s.views.len());
        assert!(
            s.views.len() >= 50 && v6 >= 10 && s.views.len() - v6 >= 10,
            "{}: {} prefixes, {v6} IPv6",
            world.name,
            s.views.len()
        );
        assert!(
            per_view >= 4,
            "{}: {per_view} entries with per-view answers",
            world.name
        );
        // RTT domains answer per LDNS view too.
        let by_rtt = s
            .domains
            .iter()
            .filter(|d| d.by_rtt && !d.rtt_answers.is_empty())
            .count();
        assert!(
            stats.rtt_views >= 3 && by_rtt >= 2,
            "{}: {by_rtt} entries by RTT, {stats:?}",
            world.name
        );
        assert!(
            stats.classes >= stats.views && stats.segments >= stats.classes,
            "{stats:?}"
        );
        assert!(
            stats.entries >= s.domains.len() && stats.map_bytes > 0,
            "{stats:?}"
        );
        // A view's NODATA beside the default view's addresses is stored as an empty answer.
        let empty = s
            .domains
            .iter()
            .flat_map(|d| &d.answers)
            .filter(|(_, a)| a.addrs.is_empty())
            .count();
        eprintln!("{}: {empty} per-view NODATA answers", world.name);
    }
    let rich = World::rich();
    let mut engine: Vec<&str> = rich
        .snapshot
        .engine_domains
        .iter()
        .map(String::as_str)
        .collect();
    engine.sort_unstable();
    assert_eq!(
        engine,
        [
            "hash-window.example.com",
            "hash.example.com",
            "sticky.example.com",
            "viahash.example.com"
        ]
    );
}
