//! `cargo bench -p gslb-user --bench location`: the static proximity database
//! (`gslb_user::location::db`) on synthetic data.
//!
//! - `location/lookup_v4_1M`, `location/lookup_v6_1M`: one lookup of a random address in a table
//!   built from 1,000,000 ranges (one in ten nested in the range before it, one in seven with a
//!   gap after it, so some lookups miss); the time per iteration is the time per lookup.
//! - `location/load_csv_1M`: `LocationDb::builder().netscaler_csv(file).build()` of a
//!   1,000,000-line "netscaler" file written to a temporary directory by the bench.
//!
//! Before the criterion runs it prints one plain measurement of each (ns/lookup over 10M
//! lookups, load seconds), for the record in benches/RESULTS.md.

mod rng;

use std::{
    fmt::Write as _,
    hint::black_box,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    path::PathBuf,
    time::{Duration, Instant},
};

use criterion::{Criterion, criterion_group, criterion_main};
use gslb_user::location::db::LocationDb;
use rng::Rng;

const RANGES: usize = 1_000_000;
const PROBES: usize = 1 << 16;
const CONTINENTS: [&str; 6] = [
    "Africa",
    "Asia",
    "Europe",
    "North America",
    "Oceania",
    "South America",
];

/// The qualifier columns of location `n` (10,000 distinct ones).
fn location(out: &mut String, n: usize) {
    let n = n % 10_000;
    let _ = write!(
        out,
        "{},C{},R{},\"City {n}\",ISP{},Org{}",
        CONTINENTS[n % CONTINENTS.len()],
        n % 200,
        n % 50,
        n % 300,
        n % 1000
    );
}

/// One million lines; `range(i)` gives the i-th top-level range as (from, to) text.
fn csv(mut range: impl FnMut(usize, bool) -> (String, String)) -> String {
    let mut text = String::with_capacity(RANGES * 80);
    text.push_str("NSGEO1.0\n# synthetic location file for benches/location.rs\n");
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for i in 0..RANGES {
        // One line in ten is nested in the line before it.
        let (from, to) = range(i, i % 10 == 9);
        let _ = write!(text, "{from},{to},");
        location(&mut text, (rng.next() % 1_000_000) as usize);
        if i % 2 == 0 {
            let _ = write!(
                text,
                ",{:.4},{:.4}",
                -120.5 + (i % 240) as f64,
                45.25 - (i % 90) as f64
            );
        }
        text.push('\n');
    }
    text
}

/// IPv4: range k covers k * 4096 .. +4095 (the last 1024 missing for one k in seven); a
/// nested line covers 256 addresses inside the previous range.
fn csv_v4() -> String {
    let mut k = 0u32;
    csv(|i, nested| {
        if nested {
            let base = (k - 1) * 4096 + 256;
            return (
                Ipv4Addr::from(base).to_string(),
                Ipv4Addr::from(base + 255).to_string(),
            );
        }
        let from = k * 4096;
        let to = from + if k.is_multiple_of(7) { 3071 } else { 4095 };
        k += 1;
        // Some lines use numeric addresses, as ip2location-derived files do.
        if i % 5 == 0 {
            (from.to_string(), to.to_string())
        } else {
            (
                Ipv4Addr::from(from).to_string(),
                Ipv4Addr::from(to).to_string(),
            )
        }
    })
}

/// IPv6: range k is the /48 2001:kkkk:kkkk::/48 (minus its top half for one k in seven).
fn csv_v6() -> String {
    let mut k = 0u128;
    let v6 = |k: u128, low: u128| Ipv6Addr::from((0x2001u128 << 112) | (k << 80) | low).to_string();
    csv(|_, nested| {
        if nested {
            return (v6(k - 1, 1 << 64), v6(k - 1, (2 << 64) - 1));
        }
        let last = if k.is_multiple_of(7) {
            (1u128 << 79) - 1
        } else {
            (1u128 << 80) - 1
        };
        let range = (v6(k, 0), v6(k, last));
        k += 1;
        range
    })
}

fn temp_file(text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gslb-bench-location-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("synthetic-1M.csv");
    std::fs::write(&path, text).unwrap();
    path
}

fn probes_v4() -> Vec<IpAddr> {
    let mut rng = Rng(7);
    // Over the covered space (4096 * ~900k), plus a little past it (misses).
    (0..PROBES)
        .map(|_| IpAddr::V4(Ipv4Addr::from((rng.next() % (4096 * 950_000)) as u32)))
        .collect()
}

fn probes_v6() -> Vec<IpAddr> {
    let mut rng = Rng(11);
    (0..PROBES)
        .map(|_| {
            let k = u128::from(rng.next() % 950_000);
            let low = u128::from(rng.next()) << 16;
            IpAddr::V6(Ipv6Addr::from((0x2001u128 << 112) | (k << 80) | low))
        })
        .collect()
}

/// This thread's CPU time: unlike the wall clock, it does not count the time the (shared,
/// often busy) machine gives to other processes.
fn cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Plain timing of 10M lookups: (wall ns, CPU ns) per lookup, and the hit ratio.
fn ns_per_lookup(db: &LocationDb, probes: &[IpAddr]) -> (f64, f64, f64) {
    const N: usize = 10_000_000;
    let mut hits = 0usize;
    let (wall, cpu) = (Instant::now(), cpu_time());
    for i in 0..N {
        hits += usize::from(black_box(db.lookup(black_box(probes[i % PROBES]))).is_some());
    }
    let per = |d: Duration| d.as_nanos() as f64 / N as f64;
    (
        per(wall.elapsed()),
        per(cpu_time() - cpu),
        hits as f64 / N as f64,
    )
}

fn bench(c: &mut Criterion) {
    let text = csv_v4();
    let path = temp_file(&text);
    let bytes = text.len();
    drop(text);

    let (wall, cpu) = (Instant::now(), cpu_time());
    let v4 = LocationDb::builder().netscaler_csv(&path).build().unwrap();
    let (load, load_cpu) = (wall.elapsed(), cpu_time() - cpu);
    let v6 = LocationDb::builder()
        .netscaler_csv_text("synthetic-v6", csv_v6())
        .build()
        .unwrap();
    let (p4, p6) = (probes_v4(), probes_v6());
    println!(
        "# load: {RANGES} lines ({:.1} MB) in {:.3} s ({:.3} s CPU); {:?}",
        bytes as f64 / 1e6,
        load.as_secs_f64(),
        load_cpu.as_secs_f64(),
        v4.stats()
    );
    for (family, db, probes) in [("IPv4", &v4, &p4), ("IPv6", &v6, &p6)] {
        let (wall, cpu, hits) = ns_per_lookup(db, probes);
        println!(
            "# lookup {family}, 1M ranges: {wall:.1} ns/lookup ({cpu:.1} ns CPU; {:.0}% hits)",
            hits * 100.0
        );
    }

    let mut g = c.benchmark_group("location");
    let mut i = 0usize;
    g.bench_function("lookup_v4_1M", |b| {
        b.iter(|| {
            i = (i + 1) & (PROBES - 1);
            black_box(v4.lookup(black_box(p4[i]))).map(|l| l.0.len())
        })
    });
    g.bench_function("lookup_v6_1M", |b| {
        b.iter(|| {
            i = (i + 1) & (PROBES - 1);
            black_box(v6.lookup(black_box(p6[i]))).map(|l| l.0.len())
        })
    });
    drop((v4, v6));
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    g.bench_function("load_csv_1M", |b| {
        b.iter(|| {
            LocationDb::builder()
                .netscaler_csv(&path)
                .build()
                .unwrap()
                .len()
        })
    });
    g.finish();
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

criterion_group!(benches, bench);
criterion_main!(benches);
