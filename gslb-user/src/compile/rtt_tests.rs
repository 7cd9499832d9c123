//! Answers by RTT as choices: entries grow with outcomes, not LDNS views, and an RTT change
//! keeps the partition and the view numbers.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use gslb_common::DEFAULT_VIEW;

use super::*;
use crate::config::Config;

const SITES: usize = 16;
const ROWS: usize = 200;

/// Sixteen sites, and per site `k` one domain answered by RTT with a service at `k` and one at
/// `k + 1`: sixteen signatures of two outcomes each.
fn config() -> Config {
    let mut t = String::from(
        "[server]\nlisten = [\"192.0.2.53\"]\n[[zone]]\nname = \"example.com\"\nns = [\"ns.example.net\"]\nsoa.rname = \"hostmaster.example.com\"\n",
    );
    for s in 0..SITES {
        let _ = write!(t, "[[site]]\nname = \"s{s}\"\nip = \"192.0.2.{}\"\n", s + 1);
    }
    for d in 0..SITES {
        for k in 0..2 {
            let site = (d + k) % SITES;
            let _ = write!(
                t,
                "[[service]]\nname = \"d{d}-{k}\"\nip = \"198.18.{d}.{}\"\nsite = \"s{site}\"\n",
                k + 1
            );
        }
        let _ = write!(
            t,
            "[[gslb_domain]]\nname = \"d{d}.example.com\"\nmethod = \"rtt\"\nservices = [\"d{d}-0\", \"d{d}-1\"]\n"
        );
    }
    Config::parse(&t, Path::new("rtt.toml")).unwrap()
}

/// Rows 10.0.r.0/24 with pseudo-random RTTs from every site.
fn rows() -> Vec<LdnsRtt> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..ROWS)
        .map(|r| LdnsRtt {
            ldns: format!("10.0.{r}.0/24").parse().unwrap(),
            rtt_us: (0..SITES)
                .map(|_| {
                    x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    Some(1_000 + (x >> 40) as u32 % 100_000)
                })
                .collect(),
        })
        .collect()
}

/// What the maps answer `client` for domain `d`'s A record, looked up as the fast path does.
fn answered(s: &Snapshot, d: usize, client: IpAddr) -> Vec<IpAddr> {
    let entry = s
        .domains
        .iter()
        .find(|e| e.name == format!("d{d}.example.com") && e.qtype == QTYPE_A)
        .expect("an A entry");
    assert!(entry.by_rtt, "{entry:?}");
    let (view, rtt_view, _) = s.segments.lookup_both(client);
    let by_view = || {
        entry
            .answers
            .iter()
            .find(|(v, _)| *v == view)
            .or_else(|| entry.answers.iter().find(|(v, _)| *v == DEFAULT_VIEW))
            .map(|(_, a)| a.addrs.clone())
            .unwrap_or_default()
    };
    match s.rtt_choices.choice(rtt_view, entry.rtt_slot) {
        Some(o) => entry
            .rtt_answers
            .iter()
            .find(|(i, _)| *i == u32::from(o))
            .map(|(_, a)| a.addrs.clone())
            .expect("an answer for every outcome the choices give"),
        None => by_view(),
    }
}

/// The nearer of domain `d`'s two services for a row, by hand.
fn nearest(row: &LdnsRtt, d: usize) -> IpAddr {
    let (a, b) = (row.rtt_us[d], row.rtt_us[(d + 1) % SITES]);
    let k = if a <= b { 1 } else { 2 };
    IpAddr::V4(Ipv4Addr::new(198, 18, d as u8, k))
}

fn client_of(row: &LdnsRtt) -> IpAddr {
    match row.ldns.network() {
        IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a) + 9)),
        other @ IpAddr::V6(_) => other,
    }
}

#[test]
fn rtt_entries_grow_with_outcomes_not_with_ldns_views() {
    let config = config();
    let rows = Arc::new(rows());
    let s = Snapshot::compile(
        &config,
        &Inputs {
            rtt: rows.clone(),
            ..Inputs::default()
        },
    );
    assert!(!s.stats.rtt_to_responder, "{:?}", s.stats);
    // Sixteen independent two-way choices: nearly every row its own LDNS view.
    assert!(s.stats.rtt_views >= ROWS / 2, "{:?}", s.stats);
    assert_eq!(
        s.rtt_choices.slots, SITES,
        "one slot per signature (A only)"
    );
    assert_eq!(
        s.stats.rtt_choices,
        2 * s.stats.rtt_views,
        "one page per view and parity"
    );
    for e in s.domains.iter().filter(|e| e.by_rtt) {
        assert!(e.rtt_answers.len() <= 2, "{}: {:?}", e.name, e.rtt_answers);
    }
    // Per LDNS view answer sets would be 16 × LDNS views.
    assert!(s.stats.entries < 4 * SITES, "{:?}", s.stats);
    for row in rows.iter() {
        for d in 0..SITES {
            assert_eq!(
                answered(&s, d, client_of(row)),
                [nearest(row, d)],
                "d{d} from {}",
                row.ldns
            );
        }
    }
    // Without a row: the view's answer, both services.
    assert_eq!(answered(&s, 0, "192.0.2.99".parse().unwrap()).len(), 2);
}

#[test]
fn an_rtt_change_keeps_the_partition_and_decides_only_its_row_again() {
    let config = config();
    let before = Arc::new(rows());
    let mut compiler = Compiler::default();
    let inputs = |rtt: &Arc<Vec<LdnsRtt>>| Inputs {
        rtt: rtt.clone(),
        ..Inputs::default()
    };
    let first = compiler.compile(&config, &inputs(&before));
    // Two rows alone in their LDNS views (a view shared by rows that now differ splits).
    let ldns_view = |row: &LdnsRtt| first.segments.lookup_both(client_of(row)).1;
    let alone: Vec<usize> = (0..ROWS)
        .filter(|&r| {
            let v = ldns_view(&before[r]);
            before.iter().filter(|row| ldns_view(row) == v).count() == 1
        })
        .take(2)
        .collect();
    assert_eq!(alone.len(), 2, "{:?}", first.stats);
    let mut changed = (*before).clone();
    for &r in &alone {
        Arc::make_mut(&mut changed[r].rtt_us).reverse();
    }
    let changed = Arc::new(changed);
    let next = compiler.compile(&config, &inputs(&changed));
    assert!(next.stats.incremental, "{:?}", next.stats);
    // Two rows × sixteen signatures at most.
    assert!(next.stats.decisions <= 2 * SITES, "{:?}", next.stats);
    let scratch = Snapshot::compile(&config, &inputs(&changed));
    for row in changed.iter() {
        for d in 0..SITES {
            let client = client_of(row);
            assert_eq!(
                answered(&next, d, client),
                [nearest(row, d)],
                "d{d} {}",
                row.ldns
            );
            assert_eq!(answered(&next, d, client), answered(&scratch, d, client));
        }
    }
    assert!(
        first.stats.rtt_views == next.stats.rtt_views && first.views == next.views,
        "the rows keep their LDNS views, so the trie is not touched: {:?}, then {:?}",
        first.stats,
        next.stats
    );
    assert_ne!(first.rtt_choices, next.rtt_choices, "the choices moved");
}

/// The RTT rule ([`crate::policy::RttFirst`]) compiles what the engine does: over rows with
/// unmeasured sites, tolerances, answer modes, chains with the RTT method first and later, and
/// services going down, a compiler that decides rows by the rule gives the snapshot of one
/// that asks the engine for every decision (incrementally too, through an RTT change).
#[test]
fn the_rtt_rule_compiles_what_the_engine_does() {
    let mut t = String::from(
        "[server]\nlisten = [\"192.0.2.53\"]\n[[zone]]\nname = \"example.com\"\nns = [\"ns.example.net\"]\nsoa.rname = \"hostmaster.example.com\"\n\
         [[location]]\nfrom = \"10.0.0.0\"\nto = \"10.0.127.255\"\nlocation = \"Europe.GB\"\n\
         [[location]]\nfrom = \"10.0.128.0\"\nto = \"10.0.255.255\"\nlocation = \"NorthAmerica.US\"\n",
    );
    let locations = ["Europe.GB", "Europe.DE", "NorthAmerica.US", "Asia.JP"];
    for (s, location) in locations.iter().enumerate() {
        let _ = write!(t, "[[site]]\nname = \"s{s}\"\nip = \"192.0.2.{}\"\n", s + 1);
        for k in 0..3 {
            let ip = if k == 2 {
                format!("2001:db8::{s}")
            } else {
                format!("198.18.{s}.{k}")
            };
            let _ = write!(
                t,
                "[[service]]\nname = \"v{s}-{k}\"\nip = \"{ip}\"\nsite = \"s{s}\"\nlocation = \"{location}\"\n"
            );
        }
    }
    let all: Vec<String> = (0..4)
        .flat_map(|s| (0..3).map(move |k| format!("\"v{s}-{k}\"")))
        .collect();
    let domains = [
        "method = \"rtt\"",
        "method = \"rtt\"\ntolerance_ms = 20",
        "method = \"rtt\"\nalternate = \"staticproximity\"\ntolerance_ms = 5",
        "method = \"rtt\"\nalternate = \"roundrobin\"\nanswer = \"all\"\ntolerance_ms = 50",
        "method = \"staticproximity\"\nalternate = \"rtt\"",
        "method = \"rtt\"\nalternate = \"staticproximity\"\nfallback = \"globalavailability\"",
    ];
    for (d, method) in domains.iter().enumerate() {
        let _ = write!(
            t,
            "[[gslb_domain]]\nname = \"d{d}.example.com\"\n{method}\nservices = [{}]\n",
            all.join(", ")
        );
    }
    let config = Config::parse(&t, Path::new("rule.toml")).unwrap();
    let db = LocationDb::from_sources(&config.locations, Path::new("rule.toml")).unwrap();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |n: u64| {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (x >> 33) % n
    };
    let mut rows: Vec<LdnsRtt> = (0..256)
        .map(|r| LdnsRtt {
            ldns: format!("10.0.{r}.0/24").parse().unwrap(),
            // A fifth unmeasured; some rows measure no site, some only one.
            rtt_us: (0..4)
                .map(|_| (next(5) != 0).then(|| 1_000 + next(60) as u32 * 1_000))
                .collect(),
        })
        .collect();
    let index = |name: &str| config.services.iter().position(|s| s.name == name).unwrap();
    let steps: [&[&str]; 4] = [
        &[],
        &["v0-0", "v1-1"],
        &[
            "v0-0", "v0-1", "v1-0", "v1-1", "v2-0", "v2-1", "v3-0", "v3-1",
        ],
        &["v2-0", "v3-1", "v1-2"],
    ];
    // Both keep their caches, so they number views alike.
    let mut compiler = Compiler::default();
    let mut engine_only = Compiler::engine_only();
    let mut rule_decisions = 0;
    for (i, down) in steps.iter().enumerate() {
        if i == 3 {
            for r in rows.iter_mut().step_by(7) {
                Arc::make_mut(&mut r.rtt_us).rotate_left(1);
            }
        }
        let mut services = vec![ServiceState::UP; config.services.len()];
        for name in *down {
            services[index(name)] = ServiceState::DOWN;
        }
        let inputs = Inputs {
            locations: Some(&db),
            services,
            rtt: Arc::new(rows.clone()),
            ..Inputs::default()
        };
        let by_rule = compiler.compile(&config, &inputs);
        let mut by_engine = engine_only.compile(&config, &inputs);
        assert_eq!(by_engine.stats.rtt_rule_decisions, 0);
        assert!(!by_rule.stats.rtt_to_responder, "{:?}", by_rule.stats);
        rule_decisions += by_rule.stats.rtt_rule_decisions;
        // The snapshots alike, but for how many decisions each took.
        by_engine.stats.decisions = by_rule.stats.decisions;
        by_engine.stats.rtt_rule_decisions = by_rule.stats.rtt_rule_decisions;
        assert_eq!(by_rule.domains, by_engine.domains, "step {i}: {down:?}");
        assert_eq!(by_rule.rtt_choices, by_engine.rtt_choices, "step {i}");
        assert_eq!(by_rule.stats, by_engine.stats, "step {i}");
        assert!(by_rule == by_engine, "step {i}: {down:?}");
    }
    assert!(rule_decisions > 0, "the rule decided none");
}

/// An RTT change whose rows the caller names ([`RttChanges`]) compiles what one whose rows
/// are all compared does, through changes of one row, of many, of a row named but unchanged,
/// and of rows named since other rows than the compiler's (then compared after all); and it
/// decides only the named rows again.
#[test]
fn rtt_changes_named_by_the_caller_compile_what_comparing_every_row_does() {
    let config = config();
    let mut rows = Arc::new(rows());
    let inputs = |rtt: &Arc<Vec<LdnsRtt>>, changes: Option<RttChanges>| Inputs {
        rtt: rtt.clone(),
        rtt_changes: changes,
        ..Inputs::default()
    };
    // Both keep their caches, so they number views alike.
    let mut named = Compiler::default();
    let mut compared = Compiler::default();
    let (first, first_compared) = (
        named.compile(&config, &inputs(&rows, None)),
        compared.compile(&config, &inputs(&rows, None)),
    );
    assert!(first == first_compared, "the first compilation");
    let changes: [&[usize]; 5] = [&[3], &[0, 57, 199], &[11], &[], &[42, 43]];
    for (step, change) in changes.iter().enumerate() {
        let mut next = (*rows).clone();
        for &r in *change {
            Arc::make_mut(&mut next[r].rtt_us).rotate_left(1 + step);
        }
        // Named: the changed rows and one that did not change.
        let mut named_rows = change.to_vec();
        named_rows.push(100 + step);
        // Step 2 names them since rows the compiler never saw: it must compare them all.
        let since = if step == 2 {
            Arc::new((*rows).clone())
        } else {
            rows.clone()
        };
        let next = Arc::new(next);
        let hinted = named.compile(
            &config,
            &inputs(
                &next,
                Some(RttChanges {
                    since,
                    rows: named_rows,
                }),
            ),
        );
        let by_comparing = compared.compile(&config, &inputs(&next, None));
        assert!(hinted.stats.incremental, "step {step}: {:?}", hinted.stats);
        assert!(
            hinted.stats.decisions <= change.len() * SITES,
            "step {step}: only the changed rows are decided again: {:?}",
            hinted.stats
        );
        assert_eq!(hinted.rtt_choices, by_comparing.rtt_choices, "step {step}");
        assert!(hinted == by_comparing, "step {step}");
        let scratch = Snapshot::compile(&config, &inputs(&next, None));
        for row in next.iter() {
            for d in 0..SITES {
                let client = client_of(row);
                assert_eq!(
                    answered(&hinted, d, client),
                    [nearest(row, d)],
                    "step {step}"
                );
                assert_eq!(answered(&hinted, d, client), answered(&scratch, d, client));
            }
        }
        rows = next;
    }
}
