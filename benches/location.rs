//! `cargo bench -p gslb-user --bench location`: the static proximity database
//! (`gslb_user::location::db`) on synthetic data made by the bench (nothing is committed).
//!
//! - `location/lookup_v4_1M`, `location/lookup_v6_1M`: one lookup of a random address in a table
//!   built from 1,000,000 ranges (one in ten nested in the range before it, one in seven with a
//!   gap after it, so some lookups miss); the time per iteration is the time per lookup.
//! - `location/load_nsgeo_1M`: `LocationDb::builder().netscaler_csv(file).build()` of a
//!   1,000,000-range file in the shape Citrix ships (the NSGEO1.0 header of its converted
//!   GeoLite2 files, `Start`, the ranges with coordinates, `End`), written to a temporary
//!   directory by the bench.
//! - `location/reload_mmdb_city`: building the database from a City-sized `.mmdb` (written by
//!   the bench with mmdb-writer: 2,500,000 networks, 150,000 records with names in 8 languages,
//!   about the size of GeoLite2 City)
//!   while the previous database is still alive, as a reload does.
//!
//! Before the criterion runs it prints one plain measurement of each (ns/lookup over 10M
//! lookups, load seconds), and the process's memory (`/proc/self/status`: VmRSS, RssAnon,
//! RssFile, VmHWM) around a City reload, for the record in benches/RESULTS.md.

mod rng;

use std::{
    collections::HashMap,
    fmt::Write as _,
    hint::black_box,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use criterion::{Criterion, criterion_group, criterion_main};
use gslb_user::location::db::LocationDb;
use mmdb_writer::{Value, Writer};
use rng::Rng;

const RANGES: usize = 1_000_000;
const PROBES: usize = 1 << 16;
const CONTINENTS: [&str; 6] = ["AF", "AS", "EU", "NA", "OC", "SA"];

/// The qualifier and coordinate columns of location `n` (10,000 distinct ones) in Citrix's
/// converted-GeoLite2 shape: continent, country, subdivision 1, subdivision 2 (read past),
/// city, the empty sixth qualifier, longitude, latitude.
fn location(out: &mut String, n: usize, i: usize) {
    let n = n % 10_000;
    let _ = write!(
        out,
        "{},C{},R{},{},\"City {n}\",,{:.4},{:.4}",
        CONTINENTS[n % CONTINENTS.len()],
        n % 200,
        n % 50,
        if n.is_multiple_of(3) { "Sub" } else { "" },
        -120.5 + (i % 240) as f64,
        45.25 - (i % 90) as f64
    );
}

/// One million ranges; `range(i, nested)` gives the i-th range as (from, to) text.
fn nsgeo(mut range: impl FnMut(usize, bool) -> (String, String)) -> String {
    let mut text = String::with_capacity(RANGES * 80);
    text.push_str(
        "NSGEO1.0\nQualifier1=Continent\nQualifier2=Country_Code\nQualifier3=Subdivision_1_Name\n\
         Qualifier4=Subdivision_2_Name\nQualifier5=City\nStart\n",
    );
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for i in 0..RANGES {
        // One line in ten is nested in the line before it.
        let (from, to) = range(i, i % 10 == 9);
        let _ = write!(text, "{from},{to},");
        location(&mut text, (rng.next() % 1_000_000) as usize, i);
        text.push('\n');
    }
    text.push_str("End\n");
    text
}

/// IPv4: range k covers k * 4096 .. +4095 (the last 1024 missing for one k in seven); a
/// nested line covers 256 addresses inside the previous range.
fn nsgeo_v4() -> String {
    let mut k = 0u32;
    nsgeo(|i, nested| {
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
fn nsgeo_v6() -> String {
    let mut k = 0u128;
    let v6 = |k: u128, low: u128| Ipv6Addr::from((0x2001u128 << 112) | (k << 80) | low).to_string();
    nsgeo(|_, nested| {
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

/// The bench's temporary directory.
fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gslb-bench-location-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
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

// ---- a City-sized MaxMind database ----

const CITY_NETWORKS_V4: u32 = 2_000_000;
const CITY_NETWORKS_V6: u64 = 500_000;
const CITY_RECORDS: usize = 150_000;

/// Names in the eight languages GeoLite2 carries.
fn names(what: &str, n: usize) -> Value {
    Value::map(
        ["de", "en", "es", "fr", "ja", "pt-BR", "ru", "zh-CN"]
            .map(|lang| (lang, Value::from(format!("{what} {n} ({lang})")))),
    )
}

/// Record `n`, shaped like a GeoLite2 City record.
fn city_record(n: usize) -> Value {
    let continent = n % CONTINENTS.len();
    Value::map([
        (
            "city",
            Value::map([
                ("geoname_id", Value::from(n as u32)),
                ("names", names("City", n)),
            ]),
        ),
        (
            "continent",
            Value::map([
                ("code", Value::from(CONTINENTS[continent])),
                ("geoname_id", Value::from(continent as u32)),
                ("names", names("Continent", continent)),
            ]),
        ),
        (
            "country",
            Value::map([
                ("geoname_id", Value::from((n % 250) as u32)),
                ("iso_code", Value::from(format!("C{}", n % 250))),
                ("names", names("Country", n % 250)),
            ]),
        ),
        (
            "location",
            Value::map([
                ("accuracy_radius", Value::from(((n % 500) + 1) as u16)),
                ("latitude", Value::from(-60.0 + (n % 120) as f64 + 0.5)),
                ("longitude", Value::from(-170.0 + (n % 340) as f64 + 0.25)),
                ("time_zone", Value::from(format!("Zone/{}", n % 400))),
            ]),
        ),
        (
            "postal",
            Value::map([("code", Value::from(format!("{:05}", n % 100_000)))]),
        ),
        (
            "subdivisions",
            Value::array([Value::map([
                ("geoname_id", Value::from((n % 5000) as u32)),
                ("iso_code", Value::from(format!("S{}", n % 5000))),
                ("names", names("Region", n % 5000)),
            ])]),
        ),
    ])
}

/// Writes the City database; returns its path and size in bytes.
fn write_city(dir: &Path) -> (PathBuf, usize) {
    let records: Vec<Value> = (0..CITY_RECORDS).map(city_record).collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut w = Writer::new("GeoLite2-City");
    // IPv4 /24s from 1.0.0.0 with one in five skipped; IPv6 /48s under 2a00::/16 (mmdb-writer
    // refuses the IPv4 aliases, 2001::/32 and 2002::/16).
    let mut net = 0x0100_0000u32;
    for _ in 0..CITY_NETWORKS_V4 {
        net += if rng.next().is_multiple_of(5) {
            512
        } else {
            256
        };
        let record = records[(rng.next() % CITY_RECORDS as u64) as usize].clone();
        let prefix = ipnet::Ipv4Net::new(Ipv4Addr::from(net), 24).unwrap();
        w.insert_value(prefix, record).unwrap();
    }
    for k in 0..CITY_NETWORKS_V6 {
        let addr = Ipv6Addr::from((0x2a00u128 << 112) | (u128::from(k) << 80));
        let record = records[(rng.next() % CITY_RECORDS as u64) as usize].clone();
        let prefix = ipnet::Ipv6Net::new(addr, 48).unwrap();
        w.insert_value(prefix, record).unwrap();
    }
    let bytes = w.to_bytes().unwrap();
    let path = dir.join("synthetic-city.mmdb");
    std::fs::write(&path, &bytes).unwrap();
    (path, bytes.len())
}

/// `/proc/self/status` memory lines, in MB.
fn memory() -> HashMap<&'static str, f64> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    ["VmRSS", "RssAnon", "RssFile", "VmHWM"]
        .into_iter()
        .map(|key| {
            let kb: f64 = status
                .lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .unwrap_or(f64::NAN);
            (key, kb / 1024.0)
        })
        .collect()
}

fn show(what: &str, m: &HashMap<&str, f64>) {
    println!(
        "# memory {what}: VmRSS {:.0} MB (RssAnon {:.0}, RssFile {:.0}), VmHWM {:.0} MB",
        m["VmRSS"], m["RssAnon"], m["RssFile"], m["VmHWM"]
    );
}

/// Samples RssAnon and RssFile every 2 ms on a thread, for their peaks (VmHWM has only their
/// sum).
struct Sampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(f64, f64)>,
}

impl Sampler {
    fn start() -> Sampler {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let (mut anon, mut file) = (0f64, 0f64);
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let m = memory();
                anon = anon.max(m["RssAnon"]);
                file = file.max(m["RssFile"]);
                std::thread::sleep(Duration::from_millis(2));
            }
            (anon, file)
        });
        Sampler { stop, thread }
    }

    /// The peaks (MB) of RssAnon and RssFile.
    fn stop(self) -> (f64, f64) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// Gives freed heap back to the system and resets the peak (VmHWM) to the current RSS, so
/// that the next figures are the next step's.
fn settle() {
    // SAFETY: malloc_trim only releases free memory of the allocator.
    unsafe { libc::malloc_trim(0) };
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// This thread's CPU time: unlike the wall clock, it does not count the time the (shared,
/// often busy) machine gives to other processes.
fn cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
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
        per(cpu_time().checked_sub(cpu).unwrap()),
        hits as f64 / N as f64,
    )
}

/// `build` timed once: (result, wall, CPU).
fn timed<T>(build: impl FnOnce() -> T) -> (T, Duration, Duration) {
    let (wall, cpu) = (Instant::now(), cpu_time());
    let out = build();
    (out, wall.elapsed(), cpu_time().checked_sub(cpu).unwrap())
}

fn bench(c: &mut Criterion) {
    let dir = temp_dir();
    let text = nsgeo_v4();
    let path = dir.join("synthetic-nsgeo-1M.csv");
    std::fs::write(&path, &text).unwrap();
    let bytes = text.len();
    drop(text);

    let (v4, load, load_cpu) =
        timed(|| LocationDb::builder().netscaler_csv(&path).build().unwrap());
    let v6 = LocationDb::builder()
        .netscaler_csv_text("synthetic-v6", nsgeo_v6())
        .build()
        .unwrap();
    let (p4, p6) = (probes_v4(), probes_v6());
    println!(
        "# load NSGEO1.0 file: {RANGES} ranges ({:.1} MB) in {:.3} s ({:.3} s CPU); {:?}",
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
        });
    });
    g.bench_function("lookup_v6_1M", |b| {
        b.iter(|| {
            i = (i + 1) & (PROBES - 1);
            black_box(v6.lookup(black_box(p6[i]))).map(|l| l.0.len())
        });
    });
    drop((v4, v6));
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    g.bench_function("load_nsgeo_1M", |b| {
        b.iter(|| {
            LocationDb::builder()
                .netscaler_csv(&path)
                .build()
                .unwrap()
                .len()
        });
    });

    // A City reload: the new database is built while the old one answers.
    let ((city_path, size), write, _) = timed(|| write_city(&dir));
    println!(
        "# City database: {:.1} MB, {CITY_NETWORKS_V4} IPv4 + {CITY_NETWORKS_V6} IPv6 networks, \
         {CITY_RECORDS} records (written in {:.1} s)",
        size as f64 / 1e6,
        write.as_secs_f64()
    );
    settle();
    show("before the first load", &memory());
    let load_city = || LocationDb::builder().mmdb_city(&city_path).build().unwrap();
    let (old, first, _) = timed(load_city);
    settle();
    let loaded = memory();
    show("with the database loaded", &loaded);
    let sampler = Sampler::start();
    let (new, reload, reload_cpu) = timed(load_city);
    let (anon, file) = sampler.stop();
    show("after a reload, both databases alive", &memory());
    println!(
        "# City load {:.3} s; reload {:.3} s ({:.3} s CPU); during the reload RssAnon peaked at \
         {anon:.0} MB ({:+.0} MB over the loaded process) and RssFile at {file:.0} MB (the \
         mapped file); {:?}",
        first.as_secs_f64(),
        reload.as_secs_f64(),
        reload_cpu.as_secs_f64(),
        anon - loaded["RssAnon"],
        new.stats()
    );
    drop(old);
    settle();
    show("once the old database is dropped", &memory());
    g.bench_function("reload_mmdb_city", |b| {
        b.iter(|| load_city().len());
    });
    drop(new);
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
