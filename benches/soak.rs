//! `cargo xtask bench soak --minutes N` (default 10): gslbd under steady load while everything
//! that changes its state at run time happens over and over, to show that none of it loses
//! queries or leaks memory or file descriptors.
//!
//! In the server namespace of a lab, on its loopback: gslbd (the bench profile's build,
//! `--no-xdp`) is site `dc` at 127.0.0.1 with the benches' 1,000 GSLB domains
//! (`dns_peers::gslbd_config`), plus `flip.example.com` over two services: `web-dc`, watched
//! by a TCP monitor (200 ms, fall 2, rise 1) against a listener of the bench on 127.0.0.1:8080,
//! and `web-p2`, of site `p2`, whose state comes over MEP from a second gslbd at 127.0.0.2.
//! For the N minutes:
//!
//! - dnsperf sends the A and AAAA of every domain and `flip.example.com` A at [`QPS`] queries a
//!   second (`-Q`, 4 clients, 2 s timeout);
//! - every second, the configuration file is replaced by the other of two valid ones (every
//!   domain's TTL 30 or 31) and `gslbctl reload` asks gslbd to load it; the replies that are
//!   not `ok` are counted;
//! - every 2 s, the monitored listener is closed or opened again (a health flip); 1.7 s after
//!   each flip, `dig flip.example.com A` says whether the answers followed it;
//! - every [`MEP_RESTART_EVERY`], the MEP peer is killed (SIGKILL) and started again;
//! - every second, gslbd's resident memory (`VmRSS`) and open file descriptors are recorded.
//!
//! Growth is the median of the last ten samples over the median of the ten after the first
//! minute (the first minute is the warm-up: allocator pools, the first reloads' buffers).
//! Prints `soak_lost` (dnsperf's lost queries), `soak_rss_growth_pct`, `soak_fd_growth_pct`
//! and the reloads, flips and restarts done (the goal for N = 10: 0 lost, growth within 5%).

#[expect(
    dead_code,
    reason = "this bench uses the benches' configuration and dnsperf, not the peer servers"
)]
mod dns_peers;
#[path = "../gslb-user/tests/mep_keys/mod.rs"]
mod mep_keys;

use std::{
    fmt::Write as _,
    net::{IpAddr, Ipv4Addr, SocketAddr},
    path::Path,
    sync::{
        Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use dns_peers::{dnsperf, gslbd_config, have_dnsperf, query_file, questions, responder_command};
use gslb_tests::{DigReply, Lab, Processes, TempDir, gslbctl, privileged};

/// Ordinary queries a second.
const QPS: &str = "3000";
const RELOAD_EVERY: Duration = Duration::from_secs(1);
const FLIP_EVERY: Duration = Duration::from_secs(2);
const MEP_RESTART_EVERY: Duration = Duration::from_secs(15);
/// How long after each flip the answers are checked for it (the monitor needs ~0.4 s).
const CHECK_AFTER: Duration = Duration::from_millis(1700);
/// Samples (one a second) in each median of the growth figures.
const WINDOW: usize = 10;

const DC: Ipv4Addr = Ipv4Addr::LOCALHOST;
const P2: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
/// The monitored listener, and the address answers carry for its service.
const BACKEND: SocketAddr = SocketAddr::new(IpAddr::V4(DC), 8080);
const WEB_DC: &str = "198.51.100.201";
/// The address answers carry for `web-p2`, the MEP peer's service.
const WEB_P2: &str = "198.51.100.202";

fn main() {
    if !privileged("bench soak") {
        return;
    }
    if !have_dnsperf("bench soak") {
        return;
    }
    let minutes: u64 = std::env::var("GSLB_SOAK_MINUTES")
        .ok()
        .map_or(10, |m| m.parse().expect("GSLB_SOAK_MINUTES: a number"));
    assert!(minutes >= 2, "GSLB_SOAK_MINUTES: at least 2");
    let tmp = TempDir::new("soak");
    let dir = &tmp.0;
    let p2_dir = dir.join("p2");
    std::fs::create_dir_all(&p2_dir).unwrap();
    let config = dir.join("gslbd.toml");
    let p2_config = p2_dir.join("gslbd.toml");
    std::fs::write(&config, soak_config(dir, "dc", 0)).unwrap();
    std::fs::write(&p2_config, soak_config(&p2_dir, "p2", 0)).unwrap();
    let mut questions = questions();
    questions.push("flip.example.com A".to_owned());
    let queries = query_file(dir, "queries", &questions, questions.len(), 0);

    // Declared after `tmp`: dropped first, stopping both gslbd before their files go.
    let mut lab = Lab::new("soak");
    let control = dir.join("gslbd.sock");
    // Its errors only: the flips, restarts and reloads it warns of are the bench's doing.
    let gslbd = |lab: &Lab, config: &Path, control: &Path| {
        responder_command(
            lab,
            env!("CARGO_BIN_EXE_gslbd").as_ref(),
            config,
            control,
            "error",
        )
    };
    let mut backend = Some(lab.tcp_backend(&lab.server_ns, BACKEND));
    let (dir, config, control) = (dir.as_path(), config.as_path(), control.as_path());
    let pid = lab.spawn_until(
        gslbd(&lab, config, control),
        "ready",
        Duration::from_secs(30),
    );
    let ready = |p2: &mut Processes| {
        p2.spawn_until(
            gslbd(&lab, &p2_config, &p2_dir.join("gslbd.sock")),
            "ready",
            Duration::from_secs(30),
        )
    };
    let flip_answer = || {
        let out = lab.dig_in(&lab.server_ns, IpAddr::V4(DC), &["flip.example.com", "A"]);
        DigReply::parse(&out).answer.join("\n")
    };

    println!(
        "# {minutes} min: dnsperf -Q {QPS} on {DC}; a reload every {RELOAD_EVERY:?}, a health \
         flip every {FLIP_EVERY:?}, the MEP peer killed and restarted every \
         {MEP_RESTART_EVERY:?}; RSS and fds of gslbd each second"
    );
    let stop = AtomicBool::new(false);
    let counts = Counts::default();
    let samples = Mutex::new(Vec::new());
    let (stop, counts, samples, ready, flip_answer) =
        (&stop, &counts, &samples, &ready, &flip_answer);
    // The MEP peer (stopped when the thread that restarts it ends); the run begins with its
    // link up.
    let mut p2 = Processes::default();
    let mut p2_pid = ready(&mut p2);
    wait_until("web-p2 up over MEP and web-dc up", || {
        let a = flip_answer();
        a.contains(WEB_P2) && a.contains(WEB_DC)
    });
    let (figures, first_minute) = std::thread::scope(|s| {
        let lab = &lab;
        s.spawn(move || {
            let mut next = Instant::now() + MEP_RESTART_EVERY;
            while sleep_until(next, stop) {
                p2.kill(p2_pid);
                p2_pid = ready(&mut p2);
                counts.restarts.fetch_add(1, Ordering::Relaxed);
                next += MEP_RESTART_EVERY;
            }
        });
        s.spawn(move || {
            let mut next = Instant::now() + RELOAD_EVERY;
            let mut variant = 0;
            while sleep_until(next, stop) {
                variant ^= 1;
                let staged = dir.join("gslbd.toml.next");
                std::fs::write(&staged, soak_config(dir, "dc", variant)).unwrap();
                std::fs::rename(&staged, config).unwrap();
                let out = gslbctl(env!("CARGO_BIN_EXE_gslbctl"), control, "reload");
                if out.status.success() {
                    counts.reloads.fetch_add(1, Ordering::Relaxed);
                } else {
                    counts.reloads_failed.fetch_add(1, Ordering::Relaxed);
                    println!(
                        "# reload failed: {}{}",
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                next += RELOAD_EVERY;
            }
        });
        s.spawn(move || {
            // The listener is open from the start; each flip is checked CHECK_AFTER after it
            // (just before the next), so a late turn of this thread delays the next flip
            // rather than shortening the check's wait.
            let mut last = Instant::now();
            while sleep_until(last + CHECK_AFTER, stop) {
                let up = backend.is_some();
                if flip_answer().contains(WEB_DC) == up {
                    counts.flips_seen.fetch_add(1, Ordering::Relaxed);
                } else {
                    counts.flips_missed.fetch_add(1, Ordering::Relaxed);
                    println!(
                        "# flip {:.1} s ago (web-dc {}) not in the answers",
                        last.elapsed().as_secs_f64(),
                        if up { "up" } else { "down" }
                    );
                }
                if !sleep_until(last + FLIP_EVERY, stop) {
                    break;
                }
                backend = if up {
                    None
                } else {
                    Some(lab.tcp_backend(&lab.server_ns, BACKEND))
                };
                last = Instant::now();
                counts.flips.fetch_add(1, Ordering::Relaxed);
            }
        });
        // Returns gslbd's mappings after the first minute, to tell where memory grew.
        let sampler = s.spawn(move || {
            let start = Instant::now();
            let mut next = start;
            let mut first_minute = Vec::new();
            while sleep_until(next, stop) {
                let sample = Sample::of(pid);
                let t = start.elapsed().as_secs();
                // With the first sample of the window the growth is measured from.
                if samples.lock().unwrap().len() == 60 {
                    first_minute = mappings(pid);
                }
                if t.is_multiple_of(60) {
                    println!(
                        "# {t} s: rss {} KiB, {} fds; reloads {}, flips {}, restarts {}",
                        sample.rss_kib,
                        sample.fds,
                        counts.reloads.load(Ordering::Relaxed),
                        counts.flips.load(Ordering::Relaxed),
                        counts.restarts.load(Ordering::Relaxed)
                    );
                }
                samples.lock().unwrap().push(sample);
                next += Duration::from_secs(1);
            }
            first_minute
        });
        let figures = dnsperf(
            lab.exec(&lab.server_ns, "dnsperf")
                .args(["-s", &DC.to_string(), "-d"])
                .arg(&queries)
                .args(["-l", &(minutes * 60).to_string(), "-Q", QPS])
                .args(["-c", "4", "-t", "2"]),
        );
        stop.store(true, Ordering::Relaxed);
        (figures, sampler.join().expect("the sampler"))
    });
    let at_end = mappings(pid);
    lab.stop(pid);

    let samples = samples.lock().unwrap();
    let growth = |what: &str, value: fn(&Sample) -> u64| {
        let window = |from: usize| {
            let mut v: Vec<u64> = samples[from..from + WINDOW].iter().map(value).collect();
            v.sort_unstable();
            v[WINDOW / 2]
        };
        let (first, last) = (window(60), window(samples.len() - WINDOW));
        let max = samples.iter().map(value).max().unwrap();
        println!("# {what}: {first} after the first minute, {last} at the end, at most {max}");
        100.0 * (last as f64 - first as f64) / first as f64
    };
    let rss = growth("rss KiB", |s| s.rss_kib);
    mapping_growth(&first_minute, &at_end);
    let fds = growth("fds", |s| s.fds);
    println!(
        "# dnsperf: {} completed, {:.0} qps, {:.0} us average",
        figures.completed,
        figures.qps,
        figures.latency_s * 1e6
    );
    println!("bench soak_lost {} queries", figures.lost);
    println!("bench soak_rss_growth_pct {rss:.2} %");
    println!("bench soak_fd_growth_pct {fds:.2} %");
    let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
    println!("bench soak_reloads {}", count(&counts.reloads));
    println!(
        "bench soak_reloads_failed {}",
        count(&counts.reloads_failed)
    );
    println!("bench soak_flips {}", count(&counts.flips));
    println!("bench soak_flips_seen {}", count(&counts.flips_seen));
    println!("bench soak_flips_missed {}", count(&counts.flips_missed));
    println!("bench soak_mep_restarts {}", count(&counts.restarts));
}

#[derive(Default)]
struct Counts {
    reloads: AtomicU64,
    reloads_failed: AtomicU64,
    flips: AtomicU64,
    /// Flips whose answers were right just before the next, and those whose were not.
    flips_seen: AtomicU64,
    flips_missed: AtomicU64,
    restarts: AtomicU64,
}

/// Sleeps until `when` or `stop`, looking every 100 ms; false once `stop` is set.
fn sleep_until(when: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let Some(left) = when.checked_duration_since(Instant::now()) else {
            return true;
        };
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

/// Polls `done` every 100 ms for at most 30 s; panics naming `what` after that.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what}: not after 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One second's look at a process.
struct Sample {
    rss_kib: u64,
    fds: u64,
}

impl Sample {
    fn of(pid: u32) -> Sample {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_else(|e| panic!("gslbd (pid {pid}) is gone: {e}"));
        let rss_kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("VmRSS in /proc/PID/status");
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .expect("/proc/PID/fd")
            .count() as u64;
        Sample { rss_kib, fds }
    }
}

/// gslbd's memory mappings (/proc/PID/smaps): each one's start address, permissions and name
/// (the key that stays the same while a heap grows in place), its size and its resident KiB.
fn mappings(pid: u32) -> Vec<(String, u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).expect("/proc/PID/smaps");
    let mut out: Vec<(String, u64, u64)> = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let range = f
            .first()
            .and_then(|r| r.split_once('-'))
            .and_then(|(a, b)| {
                Some((
                    u64::from_str_radix(a, 16).ok()?,
                    u64::from_str_radix(b, 16).ok()?,
                ))
            });
        if let Some((start, end)) = range {
            // A mapping's header: start-end perms offset dev inode [name].
            let name = f.get(5).copied().unwrap_or("[anon]");
            out.push((
                format!("{start:x} {} {name}", f[1]),
                (end - start) / 1024,
                0,
            ));
        } else if let (Some(&"Rss:"), Some(kib), Some(last)) = (f.first(), f.get(1), out.last_mut())
        {
            last.2 = kib.parse().expect("Rss in KiB");
        }
    }
    out
}

/// Prints the mappings whose resident memory grew or shrank by 64 KiB or more between the two
/// looks (a new mapping grew from 0), largest first, and the rest's sum.
fn mapping_growth(first: &[(String, u64, u64)], last: &[(String, u64, u64)]) {
    let mut deltas: Vec<(i64, &str, u64)> = last
        .iter()
        .map(|(key, size, rss)| {
            let before = first.iter().find(|m| &m.0 == key).map_or(0, |m| m.2);
            (*rss as i64 - before as i64, key.as_str(), *size)
        })
        .chain(
            first
                .iter()
                .filter(|m| !last.iter().any(|l| l.0 == m.0))
                .map(|(key, size, rss)| (-(*rss as i64), key.as_str(), *size)),
        )
        .collect();
    deltas.sort_by_key(|d| std::cmp::Reverse(d.0.abs()));
    let (big, small): (Vec<_>, Vec<_>) = deltas.iter().partition(|d| d.0.abs() >= 64);
    for (delta, key, size) in big {
        println!("# rss growth by mapping: {delta:+} KiB in {key} ({size} KiB mapped)");
    }
    let rest: i64 = small.iter().map(|d| d.0).sum();
    println!("# rss growth by mapping: {rest:+} KiB in the others");
}

/// The configuration of site `site` (`dc` at 127.0.0.1, `p2` at 127.0.0.2: both list both,
/// with their public keys; `site`'s private key is written into `dir`): the benches' 1,000
/// domains (every one's TTL 30 + `variant`) and `flip.example.com` over `web-dc` (monitored)
/// and `web-p2`, answering both while up, else a backup address.
fn soak_config(dir: &Path, site: &str, variant: u32) -> String {
    let listen = if site == "dc" { DC } else { P2 };
    let base = gslbd_config(dir, &[IpAddr::V4(listen)]);
    let mut text = base
        .replacen("[server]\n", &format!("[server]\nsite = \"{site}\"\n"), 1)
        .replacen(
            "name = \"dc\"\nip = \"198.51.100.1\"\n",
            &format!(
                "name = \"dc\"\nip = \"{DC}\"\n{}",
                mep_keys::site_line("dc")
            ),
            1,
        )
        .replace("ttl = 30\n", &format!("ttl = {}\n", 30 + variant));
    assert!(
        text.contains(&format!("site = \"{site}\"")) && text.contains(&format!("ip = \"{DC}\"")),
        "gslbd_config's [server] and site dc are as this bench expects"
    );
    let key = mep_keys::write_private(dir, site);
    let ttl = 30 + variant;
    write!(
        text,
        r#"
[mep]
private_key_file = "{key}"

[[site]]
name = "p2"
ip = "{P2}"
{p2_key}
[[monitor]]
name = "soak-tcp"
type = "tcp"
interval_ms = 200
timeout_ms = 200
fall = 2
rise = 1

[[service]]
name = "web-dc"
ip = "{backend_ip}"
port = {backend_port}
public_ip = "{WEB_DC}"
site = "dc"
monitors = ["soak-tcp"]

[[service]]
name = "web-p2"
ip = "{WEB_P2}"
site = "p2"

[[gslb_domain]]
name = "flip.example.com"
ttl = {ttl}
answer = "all"
services = ["web-dc", "web-p2"]
backup_ip = ["203.0.113.99"]
"#,
        key = key.display(),
        p2_key = mep_keys::site_line("p2"),
        backend_ip = BACKEND.ip(),
        backend_port = BACKEND.port(),
    )
    .unwrap();
    text
}
