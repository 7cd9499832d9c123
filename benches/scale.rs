//! `cargo bench -p gslb-user --bench scale` (or `cargo xtask bench scale`): the controller at
//! scale, on synthetic data the bench makes itself: 1,000,000 location ranges, 100,000 LDNS RTT
//! rows, 1,000 GSLB domains, 64 sites (4,000 services).
//!
//! The domains: one in five each of static proximity (alternate round robin), static proximity
//! with only the method, RTT (alternate static proximity), round robin and global availability.
//! Each domain has four services of its own, at the four sites of one of 64 layouts (site `k`
//! and its three neighbours), located in their site's country; so domains of one layout and
//! method share their decisions (`compile::Signature`). Locations: 10,000 distinct ones over 6
//! continents and 64 countries (one per site). RTT rows: random /24s, every site measured,
//! 1–200 ms.
//!
//! Measured (one plain run each, printed as `bench <name> <value> <unit>` lines):
//! - full compile from scratch (`Snapshot::compile`), and the process's peak RSS after it; the
//!   same compile with every decision the engine's (`Compiler::engine_only`: no RTT rule), for
//!   the rule's gain in the same run;
//! - what it produced: segments, classes, views, LDNS views, prefixes, entries, map bytes;
//! - one service flip (a service of a static-proximity domain goes down, then up): the
//!   incremental compile (`Compiler`), and with root the publish into real maps (in place);
//!   median of the flips;
//! - with root, every RTT domain asked (BPF_PROG_TEST_RUN) by a client inside an RTT row: how
//!   many XDP answers (`scale_rtt_fast_path_domains N of M`), each reply decoded and checked
//!   (checksums included) against the responder's answer from the same snapshot;
//! - one RTT change (a row's nearest site moves; the new rows are built before the clock
//!   starts, as the prober's table hands them over, naming the row that changed): the
//!   incremental compile and the publish (choices only), median of the changes
//!   (`scale_rtt_change_total`); interleaved with it, the same changes without the row named
//!   (every row compared) and published under a new generation, as before
//!   (`scale_rtt_change_total_before`);
//! - the same through gslbd's own path: a peer's new reading for one entry into the prober's
//!   RTT table, `World::snapshot` (the changed row patched and named) and the publish
//!   (`scale_rtt_change_daemon_total`); interleaved, with the whole table read and every row
//!   compared (`scale_rtt_change_daemon_total_full_read`);
//! - wide domains, 100 over the same 256 services of each family (`scale_wide.rs`): the full
//!   compile, its map memory, a flip's compile.

#[path = "../gslb-user/tests/it/common/mod.rs"]
mod common;
mod rng;
mod scale_wide;

use std::{
    fmt::Write as _,
    net::Ipv4Addr,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use gslb_user::{
    compile::{Compiler, Inputs, LdnsRtt, RttChanges, Snapshot},
    config::Config,
    dataplane::Dataplane,
    health::HealthSupervisor,
    location::db::LocationDb,
    policy::ServiceState,
    probe::{LdnsMask, NetProber, ProbeSettings, ProbeSupervisor, RttRow},
    responder::Responder,
    world::World,
};
use hickory_proto::rr::RecordType;
use rng::Rng;

const RANGES: u32 = 1_000_000;
const RTT_ROWS: usize = 100_000;
const DOMAINS: usize = 1_000;
const SITES: usize = 64;
const SERVICES_PER_DOMAIN: usize = 4;
const FLIPS: usize = 10;
const RTT_CHANGES: usize = 10;
/// Of each kind, through the daemon's path (noisier: the machine is shared).
const DAEMON_CHANGES: usize = 20;
const CONTINENTS: usize = 6;

fn country(site: usize) -> String {
    format!("C{}.K{site}", site % CONTINENTS)
}

/// The server, zone example.com and sites s0..s63 of the bench's configurations, in a string
/// of `capacity` bytes for the rest.
fn server_zone_and_sites(capacity: usize) -> String {
    let mut t = String::with_capacity(capacity);
    t.push_str(
        "[server]\nlisten = [\"192.0.2.53\"]\n[[zone]]\nname = \"example.com\"\nns = [\"ns.example.net\"]\nsoa.rname = \"hostmaster.example.com\"\n",
    );
    for s in 0..SITES {
        let _ = write!(
            t,
            "[[site]]\nname = \"s{s}\"\nip = \"198.18.0.{}\"\n",
            s + 1
        );
    }
    t
}

fn config_text() -> String {
    let mut t = server_zone_and_sites(2 << 20);
    for d in 0..DOMAINS {
        let layout = d % SITES;
        for k in 0..SERVICES_PER_DOMAIN {
            let site = (layout + k) % SITES;
            let n = d * SERVICES_PER_DOMAIN + k;
            let ip = Ipv4Addr::from(0xc612_0000u32 + 256 + n as u32);
            let _ = write!(
                t,
                "[[service]]\nname = \"d{d}-{k}\"\nip = \"{ip}\"\nsite = \"s{site}\"\nlocation = \"{}\"\n",
                country(site)
            );
        }
    }
    for d in 0..DOMAINS {
        let services: Vec<String> = (0..SERVICES_PER_DOMAIN)
            .map(|k| format!("\"d{d}-{k}\""))
            .collect();
        let method = match d % 5 {
            0 => "method = \"staticproximity\"\nalternate = \"roundrobin\"",
            1 => "method = \"staticproximity\"",
            2 => "method = \"rtt\"\nalternate = \"staticproximity\"",
            3 => "method = \"roundrobin\"",
            _ => "method = \"globalavailability\"",
        };
        let _ = write!(
            t,
            "[[gslb_domain]]\nname = \"d{d}.example.com\"\n{method}\nservices = [{}]\n",
            services.join(", ")
        );
    }
    t
}

/// One million IPv4 ranges of 4,096 addresses from 1.0.0.0, over 10,000 locations.
fn locations_csv() -> String {
    let mut text = String::with_capacity(RANGES as usize * 48);
    text.push_str("NSGEO1.0\nStart\n");
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for i in 0..RANGES {
        let from = 0x0100_0000 + i * 4096;
        let n = (rng.next() % 10_000) as usize;
        let site = n % SITES;
        let _ = writeln!(
            text,
            "{from},{},{},R{},City{n}",
            from + 4095,
            country(site).replace('.', ","),
            n % 50
        );
    }
    text
}

fn rtt_rows() -> Vec<LdnsRtt> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut seen = std::collections::HashSet::new();
    let mut rows = Vec::with_capacity(RTT_ROWS);
    while rows.len() < RTT_ROWS {
        // Inside the located space, so RTT and location classes meet.
        let net = 0x0100_0000 + (rng.next() % (u64::from(RANGES) * 16)) as u32 * 256;
        if !seen.insert(net) {
            continue;
        }
        let rtt_us = (0..SITES)
            .map(|_| Some(1_000 + (rng.next() % 199_000) as u32))
            .collect();
        rows.push(LdnsRtt {
            ldns: format!("{}/24", Ipv4Addr::from(net)).parse().unwrap(),
            rtt_us,
        });
    }
    rows
}

/// Peak and current resident set size of this process, in MiB.
fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0.0, |kib| kib / 1024.0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes --bench; a filter argument names benches to run: only this one.
    if std::env::args()
        .skip(1)
        .any(|a| a != "--bench" && !"scale".contains(a.as_str()))
    {
        return;
    }
    let started = Instant::now();
    let config =
        Config::parse(&config_text(), Path::new("scale.toml")).expect("synthetic configuration");
    let db = LocationDb::builder()
        .netscaler_csv_text("scale.csv", locations_csv())
        .build()
        .expect("locations");
    // Shared, as the daemon's world holds it (its last case).
    let db = Arc::new(db);
    let rows = Arc::new(rtt_rows());
    let mut services = vec![ServiceState::UP; config.services.len()];
    let (hwm_inputs, _) = rss_mib();
    println!(
        "inputs: {} services, {} domains, {} location ranges, {} RTT rows, built in {:.2} s; peak RSS {hwm_inputs:.0} MiB",
        config.services.len(),
        config.gslb_domains.len(),
        db.len(),
        rows.len(),
        started.elapsed().as_secs_f64()
    );

    let inputs = |services: &[ServiceState]| Inputs {
        locations: Some(&*db),
        services: services.to_vec(),
        rtt: rows.clone(),
        ..Inputs::default()
    };
    let t = Instant::now();
    let full = Snapshot::compile(&config, &inputs(&services));
    let compile = t.elapsed();
    let (hwm, rss) = rss_mib();
    let s = full.stats;
    println!("bench scale_compile_full {:.3} s", compile.as_secs_f64());
    println!(
        "bench scale_peak_rss {hwm:.0} MiB (inputs alone {hwm_inputs:.0} MiB, after compile {rss:.0} MiB)"
    );
    println!(
        "bench scale_map_bytes {:.1} MiB",
        s.map_bytes as f64 / f64::from(1 << 20)
    );
    println!(
        "produced: {} segments, {} classes, {} views, {} LDNS views, {} prefixes, {} entries, {} RTT choice pages, {} signatures, {} decisions ({} by the RTT rule); RTT domains to the responder: {}",
        s.segments,
        s.classes,
        s.views,
        s.rtt_views,
        s.prefixes,
        s.entries,
        s.rtt_choices,
        s.signatures,
        s.decisions,
        s.rtt_rule_decisions,
        s.rtt_to_responder
    );
    // The same compile with every decision the engine's (no RTT rule), in this run: the rule's
    // gain, free of the machine's load of the moment. Its snapshot must be the same.
    let t = Instant::now();
    let by_engine = Compiler::engine_only().compile(&config, &inputs(&services));
    println!(
        "bench scale_compile_full_engine_only {:.3} s ({} decisions, by the RTT rule {}: the rule's compile is {:.2} of this)",
        t.elapsed().as_secs_f64(),
        by_engine.stats.decisions,
        by_engine.stats.rtt_rule_decisions,
        compile.as_secs_f64() / t.elapsed().as_secs_f64()
    );
    assert!(
        by_engine.domains == full.domains
            && by_engine.rtt_choices == full.rtt_choices
            && by_engine.views == full.views,
        "the RTT rule compiles what the engine does"
    );
    drop((full, by_engine));

    // Flips: a static-proximity domain's first service down, then up again. The
    // configuration is shared as the daemon's world shares it, so a flip costs what it
    // costs there (the spec is known by identity, not by comparing configurations).
    let config = Arc::new(config);
    let source = gslb_user::compile::Source::from(&*config);
    let mut compiler = Compiler::default();
    let _ = compiler.compile(&source, &inputs(&services));
    let mut dataplane = (unsafe { libc::geteuid() } == 0)
        .then(|| Dataplane::load(None).expect("loading the XDP object"));
    if dataplane.is_none() {
        println!("publishing skipped: loading XDP programs needs root");
    }
    if let Some(dp) = dataplane.as_mut() {
        let t = Instant::now();
        let first = compiler.compile(&source, &inputs(&services));
        let stats = dp.table.publish(&first).expect("publishing");
        println!(
            "bench scale_publish_full {:.3} s ({} prefixes, {} answer sets, {} RTT choice pages)",
            t.elapsed().as_secs_f64(),
            stats.prefixes,
            stats.answers,
            stats.choices
        );
        rtt_fast_path(dp, &config, &first, &rows);
    }
    let (mut compiles, mut publishes, mut totals) = (Vec::new(), Vec::new(), Vec::new());
    let mut in_place = 0;
    for i in 0..FLIPS {
        let service = (i / 2 * 5) * SERVICES_PER_DOMAIN;
        services[service] = if i % 2 == 0 {
            ServiceState::DOWN
        } else {
            ServiceState::UP
        };
        let t = Instant::now();
        let snapshot = compiler.compile(&source, &inputs(&services));
        let compiled = t.elapsed();
        compiles.push(compiled);
        if let Some(dp) = dataplane.as_mut() {
            let stats = dp.table.publish(&snapshot).expect("publishing");
            in_place += usize::from(stats.in_place);
            publishes.push(t.elapsed().checked_sub(compiled).unwrap());
            println!(
                "flip {i}: compile {:.1} ms, publish {:.1} ms; {} views, {} trie prefixes written, {} answer sets copied, {} decisions",
                compiled.as_secs_f64() * 1e3,
                t.elapsed().checked_sub(compiled).unwrap().as_secs_f64() * 1e3,
                snapshot.stats.views,
                stats.prefixes,
                stats.copied,
                snapshot.stats.decisions
            );
        }
        totals.push(t.elapsed());
        assert!(snapshot.stats.incremental, "flip {i} reuses the partition");
    }
    println!(
        "bench scale_flip_compile {:.1} ms (median of {FLIPS})",
        median(compiles).as_secs_f64() * 1e3
    );
    if !publishes.is_empty() {
        println!(
            "bench scale_flip_publish {:.1} ms (median of {FLIPS}; {in_place} of {FLIPS} in place)",
            median(publishes).as_secs_f64() * 1e3
        );
    }
    println!(
        "bench scale_flip_total {:.1} ms (median of {FLIPS}, event to maps updated)",
        median(totals).as_secs_f64() * 1e3
    );

    // RTT changes: row i's nearest site moves (its RTTs are rotated by one site). Interleaved
    // with changes published as before this branch (every row compared, every answer set
    // rewritten under a new generation), for the same-run comparison.
    let (mut compiles, mut publishes, mut totals) = (Vec::new(), Vec::new(), Vec::new());
    let (mut compiles_before, mut publishes_before, mut totals_before) =
        (Vec::new(), Vec::new(), Vec::new());
    let mut current = rows.clone();
    for i in 0..2 * RTT_CHANGES {
        // Even: as the prober hands a change over (the rows it changed named), odd: as before.
        let now = i % 2 == 0;
        let row = i * 997;
        let mut next = (*current).clone();
        Arc::make_mut(&mut next[row].rtt_us).rotate_left(1);
        let next = Arc::new(next);
        if let Some(dp) = dataplane.as_mut() {
            dp.table.choice_only_publishes(now);
        }
        let t = Instant::now();
        let snapshot = compiler.compile(
            &source,
            &Inputs {
                locations: Some(&*db),
                services: services.clone(),
                rtt: next.clone(),
                rtt_changes: now.then(|| RttChanges {
                    since: current.clone(),
                    rows: vec![row],
                }),
                ..Inputs::default()
            },
        );
        let compiled = t.elapsed();
        let (compiles, publishes, totals) = if now {
            (&mut compiles, &mut publishes, &mut totals)
        } else {
            (
                &mut compiles_before,
                &mut publishes_before,
                &mut totals_before,
            )
        };
        compiles.push(compiled);
        if let Some(dp) = dataplane.as_mut() {
            let stats = dp.table.publish(&snapshot).expect("publishing");
            publishes.push(t.elapsed().checked_sub(compiled).unwrap());
            println!(
                "rtt change {i}{}: compile {:.1} ms, publish {:.1} ms; {} LDNS views, {} trie prefixes written, {} choice pages written, {} answer sets written, choices only {}, {} decisions, incremental {}",
                if now { "" } else { " (as before)" },
                compiled.as_secs_f64() * 1e3,
                t.elapsed().checked_sub(compiled).unwrap().as_secs_f64() * 1e3,
                snapshot.stats.rtt_views,
                stats.prefixes,
                stats.choices,
                stats.answers,
                stats.choices_only,
                snapshot.stats.decisions,
                snapshot.stats.incremental
            );
            assert_eq!(stats.choices_only, now, "rtt change {i}");
        }
        totals.push(t.elapsed());
        current = next;
    }
    for (name, compiles, publishes, totals) in [
        ("", compiles, publishes, totals),
        ("_before", compiles_before, publishes_before, totals_before),
    ] {
        println!(
            "bench scale_rtt_change_compile{name} {:.1} ms (median of {RTT_CHANGES})",
            median(compiles).as_secs_f64() * 1e3
        );
        if !publishes.is_empty() {
            println!(
                "bench scale_rtt_change_publish{name} {:.1} ms (median of {RTT_CHANGES})",
                median(publishes).as_secs_f64() * 1e3
            );
        }
        println!(
            "bench scale_rtt_change_total{name} {:.1} ms (median of {RTT_CHANGES}, new rows to maps updated)",
            median(totals).as_secs_f64() * 1e3
        );
    }
    if let Some(dp) = dataplane.as_mut() {
        dp.table.choice_only_publishes(true);
    }
    drop(compiler);
    rtt_change_daemon(&config, &db, &rows, dataplane.as_mut());
    drop((dataplane, config));
    scale_wide::run(&db, &rows);
}

/// The daemon's own path of an RTT change: a prober's RTT table ([`gslb_user::probe::RttHandle`])
/// holding every row (this site, `s0`, restored as its own column; the other 63 sites merged
/// as MEP delivers them), read by a [`World`] as gslbd's is. Each change is one new reading for
/// one entry (a peer's, through `merge_remote`, as MEP's inbound merge gives it), then
/// `World::snapshot` (the rows patched and named, the compile) and the publish: timed from the
/// reading to the maps (`scale_rtt_change_daemon_total`). Interleaved, the same changes after
/// [`World::reread_rtt`]: the whole table read into new rows and every row compared, as every
/// daemon snapshot did before (`_full_read`; before, the read also copied the table into a map
/// of site names first).
fn rtt_change_daemon(
    config: &Arc<Config>,
    db: &Arc<LocationDb>,
    rows: &[LdnsRtt],
    mut dataplane: Option<&mut Dataplane>,
) {
    // The world's rows are in address order (the table's): changes name rows of that order.
    let mut rows = rows.to_vec();
    rows.sort_by_key(|r| r.ldns.addr());
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let entered = runtime.enter();
    let settings = ProbeSettings {
        mask: LdnsMask { v4: 24, v6: 128 },
        ..ProbeSettings::default()
    };
    // No resolver is recorded: it probes nothing, the table is what the bench puts in it.
    let supervisor =
        ProbeSupervisor::start("s0", settings, NetProber::default()).expect("probe settings");
    let handle = supervisor.handle();
    let t = Instant::now();
    for site in 0..SITES {
        let column: Vec<RttRow> = rows
            .iter()
            .map(|r| RttRow {
                ldns: r.ldns.network(),
                rtt: r.rtt_us[site].map(|us| Duration::from_micros(u64::from(us))),
                kind: None,
            })
            .collect();
        if site == 0 {
            handle.restore_local(&column);
        } else {
            handle.merge_remote(&format!("s{site}"), &column);
        }
    }
    let (hwm, _) = rss_mib();
    println!(
        "daemon RTT table: {} entries × {SITES} sites filled in {:.1} s; peak RSS now {hwm:.0} MiB",
        handle.rtt_rows(),
        t.elapsed().as_secs_f64()
    );
    // What every daemon snapshot read the table through before this branch, made and dropped:
    // a cost the `_full_read` case no longer has.
    let maps: Vec<Duration> = (0..3)
        .map(|_| {
            let t = Instant::now();
            drop(handle.to_map());
            t.elapsed()
        })
        .collect();
    println!(
        "bench scale_rtt_table_to_map {:.1} ms (median of 3: RttHandle::to_map made and dropped, as every snapshot did before)",
        median(maps).as_secs_f64() * 1e3
    );
    let mut world = World::new(&**config, HealthSupervisor::new());
    world.locations = Some(db.clone());
    world.rtt = Some(handle.clone());
    let t = Instant::now();
    let first = world.snapshot();
    assert!(
        *first.rtt == rows,
        "the world reads the rows the table was given"
    );
    if let Some(dp) = dataplane.as_deref_mut() {
        dp.table.publish(&first).expect("publishing");
    }
    println!(
        "daemon first snapshot and publish (whole table read, full compile) {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let first_rows = first.rtt.clone();
    drop(first);
    let mut runs: [[Vec<Duration>; 3]; 2] = Default::default();
    for i in 0..2 * DAEMON_CHANGES {
        // Even: the rows patched (this branch); odd: the whole table read, as before.
        let patched = i % 2 == 0;
        if !patched {
            world.reread_rtt();
        }
        let row = &first_rows[1 + i * 997];
        // A peer's new reading, lower than any: that site becomes the entry's nearest.
        let site = 1 + (i * 7) % (SITES - 1);
        let reading = [RttRow {
            ldns: row.ldns.network(),
            rtt: Some(Duration::from_micros(500)),
            kind: None,
        }];
        let t = Instant::now();
        handle.merge_remote(&format!("s{site}"), &reading);
        let snapshot = world.snapshot();
        let compiled = t.elapsed();
        let [compiles, publishes, totals] = &mut runs[usize::from(!patched)];
        compiles.push(compiled);
        if let Some(dp) = dataplane.as_deref_mut() {
            let stats = dp.table.publish(&snapshot).expect("publishing");
            publishes.push(t.elapsed().checked_sub(compiled).unwrap());
            println!(
                "daemon rtt change {i}{}: reading + snapshot {:.1} ms, publish {:.1} ms; {} choice pages written, choices only {}, {} decisions, incremental {}",
                if patched { "" } else { " (whole table read)" },
                compiled.as_secs_f64() * 1e3,
                t.elapsed().checked_sub(compiled).unwrap().as_secs_f64() * 1e3,
                stats.choices,
                stats.choices_only,
                snapshot.stats.decisions,
                snapshot.stats.incremental
            );
        }
        totals.push(t.elapsed());
        assert!(snapshot.stats.incremental, "daemon rtt change {i}");
        assert_eq!(
            snapshot.rtt[1 + i * 997].rtt_us[site],
            Some(500),
            "daemon rtt change {i}: the reading is in the rows"
        );
    }
    for (name, [compiles, publishes, totals]) in ["", "_full_read"].into_iter().zip(runs) {
        println!(
            "bench scale_rtt_change_daemon_snapshot{name} {:.1} ms (median of {DAEMON_CHANGES}: the reading, the rows, the compile)",
            median(compiles).as_secs_f64() * 1e3
        );
        if !publishes.is_empty() {
            println!(
                "bench scale_rtt_change_daemon_publish{name} {:.1} ms (median of {DAEMON_CHANGES})",
                median(publishes).as_secs_f64() * 1e3
            );
        }
        println!(
            "bench scale_rtt_change_daemon_total{name} {:.1} ms (median of {DAEMON_CHANGES}, reading to maps updated)",
            median(totals).as_secs_f64() * 1e3
        );
    }
    drop((world, entered));
    runtime.block_on(supervisor.shutdown());
}

/// Asks the fast path (BPF_PROG_TEST_RUN) every RTT domain's A record from a client inside an
/// RTT row; prints how many XDP answers. Each reply is decoded and checked (envelope,
/// checksums, TTL) against the responder's answer to the same client from the same snapshot.
fn rtt_fast_path(dp: &Dataplane, config: &Config, snapshot: &Snapshot, rows: &[LdnsRtt]) {
    let responder = Responder::new(snapshot);
    let (mut answered, mut asked) = (0, 0);
    for (d, domain) in config.gslb_domains.iter().enumerate() {
        if d % 5 != 2 {
            continue;
        }
        asked += 1;
        // A row of a resolver that can send queries (the random rows include martian space,
        // 127/8 and 224/4 and above, whose queries the fast path never answers).
        let client = (0..rows.len())
            .map(|i| &rows[(d * 31 + i) % rows.len()])
            .find_map(|row| match row.ldns.network() {
                std::net::IpAddr::V4(a) if !gslb_common::martian_v4(a.octets()) => {
                    Some(std::net::IpAddr::V4(Ipv4Addr::from(u32::from(a) + 7)))
                }
                _ => None,
            })
            .expect("a row outside martian space");
        let frame = common::Frame::udp(
            client,
            common::SERVER_V4.into(),
            common::wire(&common::query(7, &domain.name, RecordType::A)),
        )
        .bytes();
        let out = common::run(dp, &frame);
        if out.action != common::XDP_TX {
            println!("{} from {client}: passed ({:?})", domain.name, out.counted);
            continue;
        }
        let want = common::responder_addrs(&responder, &domain.name, RecordType::A, client);
        let expect = common::Expect {
            rtype: RecordType::A,
            ttl: domain.ttl,
            answers: common::Answers::OneOf(want),
        };
        common::assert_reply(
            &format!("{} from {client}", domain.name),
            &frame,
            &out,
            &expect,
        );
        answered += 1;
    }
    println!("bench scale_rtt_fast_path_domains {answered} of {asked}");
}
