//! Shared by the dnsperf, kxdpgun, peers, hostile and soak benches (each includes it with
//! `mod dns_peers;`); not a bench itself: the benches' generated gslbd configuration
//! ([`gslbd_config`], [`DOMAINS`] GSLB domains) and its questions, gslbd with the responder
//! alone in a lab, dnsperf query files, dnsperf's figures, and the CPU time of a server's
//! processes. NSD and Knot themselves are run by
//! `gslb_tests::peers`, on the zone files `zone_files::write_zones` makes.

use std::{
    fmt::Write as _,
    net::IpAddr,
    path::{Path, PathBuf},
    process::Command,
};

use gslb_tests::{Lab, SERVER_V4, run, skip};

/// A dnsperf data file `dir/{name}.txt` of `lines` lines: `questions` ("name TYPE") over and
/// over, with `nx_percent` of the lines (the first of every hundred) replaced by names that do
/// not exist.
pub(crate) fn query_file(
    dir: &Path,
    name: &str,
    questions: &[String],
    lines: usize,
    nx_percent: usize,
) -> PathBuf {
    let mut text = String::new();
    for i in 0..lines {
        if i % 100 < nx_percent {
            writeln!(text, "nx{i}.example.com A").unwrap();
        } else {
            writeln!(text, "{}", questions[i % questions.len()]).unwrap();
        }
    }
    let path = dir.join(format!("{name}.txt"));
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path
}

/// True when dnsperf runs here; else `bench` skips (`gslb_tests::skip`), saying why.
pub(crate) fn have_dnsperf(bench: &str) -> bool {
    if Command::new("dnsperf").arg("-h").output().is_ok() {
        return true;
    }
    skip(&format!(
        "{bench}: dnsperf is not installed (`cargo xtask setup` installs it)"
    ));
    false
}

/// gslbd (`binary`) in `lab`'s server namespace with the responder alone (`--no-xdp`) on
/// `config`, its control socket at `control` (not the system's /run/gslbd.sock), logging
/// `log` (a `RUST_LOG` filter) on stderr; start it with `Lab::spawn_until(.., "ready", ..)`.
pub(crate) fn responder_command(
    lab: &Lab,
    binary: &Path,
    config: &Path,
    control: &Path,
    log: &str,
) -> Command {
    let mut cmd = lab.nsenter(&lab.server_ns, binary);
    cmd.env("RUST_LOG", log)
        .arg("--config")
        .arg(config)
        .arg("--no-xdp")
        .arg("--control")
        .arg(control);
    cmd
}

/// What dnsperf reports at the end of a run.
pub(crate) struct Figures {
    pub(crate) completed: u64,
    pub(crate) qps: f64,
    pub(crate) lost: u64,
    pub(crate) latency_s: f64,
}

/// Runs dnsperf (`cmd`: placed and given its arguments by the caller) to the end of its run
/// and reads its summary; panics with its output when a figure is missing.
pub(crate) fn dnsperf(cmd: &mut Command) -> Figures {
    let out = run(cmd);
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |label: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(label))
            .and_then(|v| v.split_whitespace().next())
            .unwrap_or_else(|| panic!("dnsperf output has no {label:?}:\n{text}"))
            .to_owned()
    };
    let number = |label: &str| {
        let v = field(label);
        v.parse::<f64>()
            .unwrap_or_else(|e| panic!("dnsperf's {label:?} {v:?}: {e}"))
    };
    Figures {
        completed: field("Queries completed:")
            .parse()
            .unwrap_or_else(|e| panic!("dnsperf's completed count: {e}\n{text}")),
        qps: number("Queries per second:"),
        lost: field("Queries lost:")
            .parse()
            .unwrap_or_else(|e| panic!("dnsperf's lost count: {e}\n{text}")),
        latency_s: number("Average Latency (s):"),
    }
}

/// GSLB domains of [`gslbd_config`]: `g{i}.example.com`.
pub(crate) const DOMAINS: usize = 1000;

/// The benches' gslbd configuration, serving on `listen`: one zone, 8 IPv4 and 8 IPv6
/// services, and [`DOMAINS`] domains `g{i}.example.com` with two services of each family;
/// even ones rotate (one address per answer), odd ones answer all (two), so that answers of
/// both sizes are measured. Its admin state file is in `dir`, not the system's.
pub(crate) fn gslbd_config(dir: &Path, listen: &[IpAddr]) -> String {
    let listen = listen
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let mut text = format!(
        r#"
[server]
listen = [{listen}]
state_file = "{}"

[[zone]]
name = "example.com"
ttl = 3600
ns = ["ns1.example.com"]
  [zone.soa]
  rname = "hostmaster.example.com"
  serial = 1
  [[zone.record]]
  name = "ns1"
  type = "A"
  value = "{SERVER_V4}"

[[site]]
name = "dc"
ip = "198.51.100.1"
"#,
        dir.join("admin-state").display()
    );
    for k in 0..8 {
        write!(
            text,
            "\n[[service]]\nname = \"v4-{k}\"\nip = \"198.51.100.{}\"\nsite = \"dc\"\n\
             \n[[service]]\nname = \"v6-{k}\"\nip = \"2001:db8:100::{:x}\"\nsite = \"dc\"\n",
            10 + k,
            0x10 + k
        )
        .unwrap();
    }
    for i in 0..DOMAINS {
        let (a, b) = (i % 8, (i + 1) % 8);
        let answer = if i % 2 == 0 { "rotate" } else { "all" };
        write!(
            text,
            "\n[[gslb_domain]]\nname = \"g{i}.example.com\"\nttl = 30\nanswer = \"{answer}\"\n\
             services = [\"v4-{a}\", \"v4-{b}\", \"v6-{a}\", \"v6-{b}\"]\n"
        )
        .unwrap();
    }
    text
}

/// The questions of [`gslbd_config`]'s names, A and AAAA of each ("name TYPE", dnsperf's and
/// kxdpgun's query file lines).
pub(crate) fn questions() -> Vec<String> {
    (0..DOMAINS)
        .flat_map(|i| {
            [
                format!("g{i}.example.com A"),
                format!("g{i}.example.com AAAA"),
            ]
        })
        .collect()
}

/// The user and system time so far of process `pid` and of every process descended from it
/// (NSD answers in forked children; Knot and gslbd in threads, which the process's own line
/// sums), in clock ticks. Children that already exited are not counted.
pub(crate) fn tree_ticks(pid: u32) -> u64 {
    // (pid, parent, utime + stime) of every process.
    let mut procs = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // A process may end between the listing and the read.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the command's parenthesised name: state is field 3, the parent 4, utime and
        // stime 14 and 15.
        let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let number = |i: usize| f[i].parse::<u64>().expect("a number in /proc/PID/stat");
        procs.push((p, number(1) as u32, number(11) + number(12)));
    }
    let mut tree = vec![pid];
    let mut ticks = 0;
    let mut i = 0;
    while i < tree.len() {
        for &(p, parent, t) in &procs {
            if p == tree[i] {
                ticks += t;
            } else if parent == tree[i] {
                tree.push(p);
            }
        }
        i += 1;
    }
    ticks
}

/// The `cpu` line of /proc/stat: the whole machine's time so far in clock ticks, by kind
/// (user nice system idle iowait irq softirq steal ...).
pub(crate) fn machine_ticks() -> Vec<u64> {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let line = stat.lines().next().expect("the cpu line");
    line.split_whitespace()
        .skip(1)
        .map(|v| v.parse().expect("a tick count"))
        .collect()
}

pub(crate) fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}
