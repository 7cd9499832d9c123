//! Shared by the dnsperf, kxdpgun, peers, hostile and soak benches (each includes it with
//! `mod dns_peers;`); not a bench itself: the benches' generated gslbd configuration
//! ([`gslbd_config`], [`DOMAINS`] GSLB domains) and its questions, gslbd with the responder
//! alone in a lab, a gslb configuration's zones as zone files with its GSLB names as static
//! records, NSD and Knot DNS serving them from directories of their own, dnsperf query files,
//! dnsperf's figures, and the CPU time of a server's processes.

use std::{
    fmt::Write as _,
    net::IpAddr,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use gslb_tests::{Lab, SERVER_V4, run, skip};
use gslb_user::{
    compile::Snapshot,
    config::{Config, RecordData},
    policy::AnswerMode,
};

/// An authoritative server measured beside gslbd, on the zone [`write_zones`] makes of the
/// same configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Peer {
    Nsd,
    Knot,
}

impl Peer {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Peer::Nsd => "nsd",
            Peer::Knot => "knot",
        }
    }

    /// The daemon's path, or why it cannot run here.
    pub(crate) fn binary(self) -> Result<&'static str, String> {
        let (candidates, package): (&[&'static str], _) = match self {
            Peer::Nsd => (&["/usr/sbin/nsd", "/usr/bin/nsd"], "nsd"),
            Peer::Knot => (&["/usr/sbin/knotd", "/usr/bin/knotd"], "knot"),
        };
        candidates
            .iter()
            .copied()
            .find(|p| Path::new(p).exists())
            .ok_or_else(|| {
                format!(
                    "{} is not installed (none of {}; `cargo xtask setup` or `apt-get install \
                     {package}` installs it)",
                    self.name(),
                    candidates.join(", ")
                )
            })
    }

    /// Writes the peer's configuration and `config`'s zones ([`write_zones`]) into `dir`, its
    /// own directory (made here; also its pid file, database and control socket: nothing of
    /// the system's service is read or written), to serve on port 53 of `listen` with one
    /// worker per CPU, as gslbd has one socket per core. NSD gets `minimal-responses` (no NS
    /// and glue beside an answer, the answers gslbd and Knot give) and no response rate
    /// limiting (Debian builds it in, at 200 answers a second per /24: dnsperf's one source
    /// would be slipped and dropped). With `xdp` (an interface), Knot also answers over
    /// AF_XDP on port 53 of it (`xdp: listen`; NSD has no such mode). With `socket_affinity`,
    /// Knot ties each UDP worker's socket to a CPU (`socket-affinity: on`, what gslbd's
    /// `server.socket_affinity` does; NSD has no such option: its `cpu-affinity` pins the
    /// servers only, the sockets still take datagrams by hash). Returns `sh` (a shell
    /// placed where the peer is to run, e.g. in a namespace) set to run it in the foreground
    /// as root, saying `ready` first: neither daemon signals readiness, see
    /// [`wait_for_answers`].
    pub(crate) fn command(
        self,
        config: &Config,
        dir: &Path,
        listen: &[IpAddr],
        xdp: Option<&str>,
        socket_affinity: bool,
        mut sh: Command,
    ) -> Result<Command, String> {
        let binary = self.binary()?;
        if let (Peer::Nsd, Some(_)) = (self, xdp) {
            return Err("NSD has no XDP mode".to_owned());
        }
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let zones = write_zones(config, dir);
        let workers = std::thread::available_parallelism().map_or(1, usize::from);
        let d = dir.display();
        let (path, conf, start) = match self {
            Peer::Nsd => {
                let mut conf = String::from("server:\n");
                for addr in listen {
                    writeln!(conf, "  ip-address: {addr}").unwrap();
                }
                write!(
                    conf,
                    "  port: 53\n  server-count: {workers}\n  reuseport: yes\n  username: \"\"\n  \
                     chroot: \"\"\n  zonesdir: \"{d}\"\n  database: \"\"\n  \
                     zonelistfile: \"{d}/zone.list\"\n  pidfile: \"{d}/nsd.pid\"\n  \
                     xfrdfile: \"{d}/xfrd.state\"\n  xfrdir: \"{d}\"\n  verbosity: 1\n  \
                     minimal-responses: yes\n  rrl-ratelimit: 0\n\
                     remote-control:\n  control-enable: no\n"
                )
                .unwrap();
                for zone in &zones {
                    write!(conf, "zone:\n  name: {zone}\n  zonefile: \"{zone}.zone\"\n").unwrap();
                }
                let path = dir.join("nsd.conf");
                // -d: in the foreground, logging to stderr.
                let start = format!("exec {binary} -d -c {}", path.display());
                (path, conf, start)
            }
            Peer::Knot => {
                let listen = listen
                    .iter()
                    .map(|a| format!("{a}@53"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let xdp = xdp.map_or(String::new(), |i| format!("xdp:\n  listen: [ {i}@53 ]\n"));
                let affinity = if socket_affinity {
                    "  socket-affinity: on\n"
                } else {
                    ""
                };
                let mut conf = format!(
                    "server:\n  rundir: \"{d}\"\n  user: root:root\n  listen: [ {listen} ]\n  \
                     udp-workers: {workers}\n{affinity}{xdp}\
                     log:\n  - target: stderr\n    any: warning\n\
                     database:\n  storage: \"{d}\"\ntemplate:\n  - id: default\n    \
                     storage: \"{d}\"\nzone:\n"
                );
                for zone in &zones {
                    writeln!(conf, "  - domain: {zone}\n    file: \"{zone}.zone\"").unwrap();
                }
                let path = dir.join("knot.conf");
                // In the foreground; its warnings and errors on stderr (the `log` section).
                let start = format!("exec {binary} -c {}", path.display());
                (path, conf, start)
            }
        };
        std::fs::write(&path, conf).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        sh.arg("-c").arg(format!("echo ready; {start}"));
        Ok(sh)
    }
}

/// `config`'s zones written into `dir` as `{zone}.zone` files; returns the zone names. The
/// GSLB names become static records of their default view's answer: one address for a
/// rotating domain, every address for an "all" domain, so the answers are the same size as
/// gslb's.
pub(crate) fn write_zones(config: &Config, dir: &Path) -> Vec<String> {
    let snapshot = Snapshot::from_config(config);
    let mut names = Vec::new();
    for zone in &config.zones {
        let mut text = format!("$ORIGIN {}.\n$TTL {}\n", zone.name, zone.ttl);
        let soa = &zone.soa;
        writeln!(
            text,
            "@ SOA {}. {}. {} {} {} {} {}",
            soa.mname, soa.rname, soa.serial, soa.refresh, soa.retry, soa.expire, soa.minimum
        )
        .unwrap();
        for ns in &zone.ns {
            writeln!(text, "@ NS {ns}.").unwrap();
        }
        for r in &zone.records {
            writeln!(text, "{}. {} {}", r.name, r.ttl, record_data(&r.data)).unwrap();
        }
        for d in snapshot.domains.iter().filter(|d| zone.contains(&d.name)) {
            let Some((_, answer)) = d.answers.first() else {
                continue;
            };
            let n = if answer.mode == AnswerMode::All {
                answer.addrs.len()
            } else {
                1
            };
            for addr in &answer.addrs[..n] {
                let rtype = if matches!(addr, IpAddr::V4(_)) {
                    "A"
                } else {
                    "AAAA"
                };
                writeln!(text, "{}. {} {rtype} {addr}", d.name, answer.ttl).unwrap();
            }
        }
        let path = dir.join(format!("{}.zone", zone.name));
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        names.push(zone.name.clone());
    }
    names
}

/// A static record's type and data in zone file syntax.
fn record_data(data: &RecordData) -> String {
    match data {
        RecordData::A(a) => format!("A {a}"),
        RecordData::Aaaa(a) => format!("AAAA {a}"),
        RecordData::Cname(t) => format!("CNAME {t}."),
        RecordData::Txt(t) => format!(
            "TXT {}",
            t.iter()
                .map(|s| format!("\"{s}\""))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        RecordData::Mx {
            preference,
            exchange,
        } => format!("MX {preference} {exchange}."),
        RecordData::Ns(t) => format!("NS {t}."),
        RecordData::Srv {
            priority,
            weight,
            port,
            target,
        } => format!("SRV {priority} {weight} {port} {target}."),
    }
}

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

/// Waits (at most 10 s) until `dig` (one query to the server `what`) gets NOERROR: NSD and
/// knotd have no readiness signal of their own.
pub(crate) fn wait_for_answers(what: &str, dig: impl Fn() -> String) {
    let mut last = String::new();
    for _ in 0..100 {
        last = dig();
        if last.contains("status: NOERROR") {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what} never answered (its log is on stderr above); the last reply:\n{last}");
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
