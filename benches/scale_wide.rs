//! `bench scale` with wide domains (issue 29): 100 GSLB domains each over the same 256 IPv4
//! and 256 IPv6 services (at the 64 sites, located in their site's country), with the same
//! locations and RTT rows as the rest of the bench. One in five each of static proximity
//! (alternate round robin), RTT (alternate static proximity), round robin, ratio with two
//! addresses an answer, and "all" with eight; each domain lists the services from its own
//! starting point, so that domains do not share decisions by accident.
//!
//! Measured: the full compile, its map memory, and one service flip's incremental compile
//! (median of the flips), printed as `scale_wide_*` lines.

use std::{fmt::Write as _, path::Path, sync::Arc, time::Instant};

use gslb_user::{
    compile::{Compiler, Inputs, LdnsRtt, Snapshot},
    config::Config,
    location::db::LocationDb,
    policy::ServiceState,
};

use super::{SITES, country, median, server_zone_and_sites};

const DOMAINS: usize = 100;
/// Per family.
const SERVICES: usize = 256;
const FLIPS: usize = 10;

fn config_text() -> String {
    let mut t = server_zone_and_sites(4 << 20);
    for k in 0..SERVICES {
        let site = k % SITES;
        let location = country(site);
        let _ = write!(
            t,
            "[[service]]\nname = \"v4-{k}\"\nip = \"198.19.{}.{}\"\nsite = \"s{site}\"\nlocation = \"{location}\"\n\
             [[service]]\nname = \"v6-{k}\"\nip = \"2001:db8:19::{k:x}\"\nsite = \"s{site}\"\nlocation = \"{location}\"\n",
            k / 200,
            k % 200 + 1,
        );
    }
    for d in 0..DOMAINS {
        let services: Vec<String> = (0..SERVICES)
            .map(|i| (i + d) % SERVICES)
            .flat_map(|k| [format!("\"v4-{k}\""), format!("\"v6-{k}\"")])
            .collect();
        let method = match d % 5 {
            0 => "method = \"staticproximity\"\nalternate = \"roundrobin\"",
            1 => "method = \"rtt\"\nalternate = \"staticproximity\"",
            2 => "method = \"roundrobin\"",
            3 => "method = \"ratio\"\nmax_answers = 2",
            _ => "answer = \"all\"",
        };
        let _ = write!(
            t,
            "[[gslb_domain]]\nname = \"w{d}.example.com\"\n{method}\nservices = [{}]\n",
            services.join(", ")
        );
    }
    t
}

/// The wide domains' compile, map memory and flips, with the bench's `db` and RTT `rows`.
pub(super) fn run(db: &Arc<LocationDb>, rows: &Arc<Vec<LdnsRtt>>) {
    let config = Arc::new(
        Config::parse(&config_text(), Path::new("scale-wide.toml"))
            .expect("synthetic wide configuration"),
    );
    let mut services = vec![ServiceState::UP; config.services.len()];
    let inputs = |services: &[ServiceState]| Inputs {
        locations: Some(&**db),
        services: services.to_vec(),
        rtt: rows.clone(),
        ..Inputs::default()
    };
    let t = Instant::now();
    let full = Snapshot::compile(&*config, &inputs(&services));
    println!(
        "bench scale_wide_compile_full {:.3} s ({} domains of {} services each, {} per family)",
        t.elapsed().as_secs_f64(),
        config.gslb_domains.len(),
        2 * SERVICES,
        SERVICES
    );
    let s = full.stats;
    println!(
        "bench scale_wide_map_bytes {:.1} MiB ({} prefixes, {} entries, {} signatures, {} decisions)",
        s.map_bytes as f64 / f64::from(1 << 20),
        s.prefixes,
        s.entries,
        s.signatures,
        s.decisions
    );
    // How much of it the fast path answers: the per-prefix answers it holds whole.
    let (mut fast, mut all) = (0, 0);
    for (_, answer) in full.domains.iter().flat_map(|d| &d.answers) {
        all += 1;
        fast += usize::from(!answer.addrs.is_empty() && answer.fast());
    }
    println!("wide: {fast} of {all} answer sets held by the fast path");
    drop(full);

    let source = gslb_user::compile::Source::from(&*config);
    let mut compiler = Compiler::default();
    let _ = compiler.compile(&source, &inputs(&services));
    let mut compiles = Vec::new();
    for i in 0..FLIPS {
        // A service every domain binds: down, then up again.
        let service = i / 2 * 7;
        services[service] = if i % 2 == 0 {
            ServiceState::DOWN
        } else {
            ServiceState::UP
        };
        let t = Instant::now();
        let _ = compiler.compile(&source, &inputs(&services));
        compiles.push(t.elapsed());
    }
    println!(
        "bench scale_wide_flip_compile {:.1} ms (median of {FLIPS}: a service all {DOMAINS} domains bind)",
        median(compiles).as_secs_f64() * 1e3
    );
}
