//! `cargo xtask bench peers`: the responder alone (gslbd `--no-xdp`) side by side with NSD and
//! Knot DNS, all three serving the same zone: gslbd the configuration of 1,000 GSLB domains
//! `dns_peers::gslbd_config` writes, the peers the zone with each domain's answer as static
//! records (`zone_files::write_zones`, as `bench dnsperf` gives Knot). dnsperf ([`CLIENTS`]
//! clients on [`THREADS`] threads, each run bounded by `-l`) sends two
//! workloads: A and AAAA of every domain (2,000 questions), and the same with 5% of the lines
//! names that do not exist (NXDOMAIN). In two places: `loopback`, dnsperf and the servers in the
//! lab's server namespace, each server on its own 127.0.0.x; `netns`, dnsperf in the lab's
//! client namespace, over the veth pair, each server on its own address of the server side.
//!
//! The three servers run all along (idle but for the one measured) and are stopped at the end,
//! also on a panic (the lab's processes); NSD and knotd keep their configuration, zone, pid
//! file and database in directories of the run's own. Before any timing, each server is asked
//! for A and AAAA of a rotating and an "all" domain and for a name that does not exist, in both
//! places, and must answer what gslbd's configuration says: a misconfigured peer would
//! otherwise post the qps of its refusals.
//!
//! The machine is shared, so noise is spread over the servers alike: each round measures every
//! (place, workload) with every server in turn, the servers' order turning by one each round.
//! A qps figure is the median of the rounds', a lost figure the sum over the rounds, and
//! `_cpu_us` the server's CPU per query: the user and system time of its processes (NSD's
//! forked servers included) over every round's run, over the queries answered in them.
//! `peers_<place>_<workload>_responder_vs_nsd` (and `_vs_knot`) is the responder's median qps
//! over the peer's; `peers_responder_vs_nsd` is the lowest of those four, the one the goal (at
//! least NSD's qps everywhere) is judged by.
//!
//! gslbd runs with `server.socket_affinity` (each UDP socket tied to a CPU, its loop's thread
//! there: on loopback and veth a datagram is received on its sender's CPU, so this answers on
//! the CPU that sent the query) and Knot with its equivalent, `socket-affinity`; NSD has none
//! (`gslb_tests::peers::Peer::command`). `GSLB_PEERS_AFFINITY=0` runs gslbd and Knot
//! without.
//!
//! To look at one case (a profile, a fix), `GSLB_PEERS_ONLY=netns/nx5` (a comma-separated list
//! of place/workload) measures only those, and `GSLB_PEERS_ROUNDS=N` sets the rounds. To
//! compare a change of the responder on a busy machine, `GSLB_PEERS_BASELINE=PATH` (another
//! build of gslbd, e.g. main's) runs it too, as the server `baseline`, in the same rounds, and
//! prints `_responder_vs_baseline` beside the peers' ratios.

mod dns_peers;
mod zone_files;

use std::{
    collections::BTreeSet,
    fmt::Write as _,
    net::{IpAddr, Ipv4Addr, SocketAddr},
    path::Path,
    process::Command,
    time::Duration,
};

use dns_peers::{
    clock_ticks_per_second, dnsperf, gslbd_config, have_dnsperf, machine_ticks, query_file,
    questions, responder_command, tree_ticks,
};
use gslb_tests::{
    DigReply, Lab, SERVER_IF, SERVER_V4, TempDir,
    peers::{Peer, wait_for_answers},
    privileged, run, skip,
};
use gslb_user::{compile::Snapshot, config::Config, policy::AnswerMode};

/// Seconds per dnsperf run (`-l`), rounds, and dnsperf's clients and threads: two threads,
/// because one (`-T 1`) sends at most ~170k queries/s here, which every server answered, so
/// that the generator, not the servers, was measured.
const SECONDS: &str = "3";
const ROUNDS: usize = 7;
const CLIENTS: &str = "8";
const THREADS: &str = "2";

/// A measured server, its address in each place, and (once started) its process id.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Server {
    pid: u32,
    name: &'static str,
    loopback: Ipv4Addr,
    netns: Ipv4Addr,
}

const RESPONDER: Server = Server {
    pid: 0,
    name: "responder",
    loopback: Ipv4Addr::LOCALHOST,
    netns: SERVER_V4,
};
const NSD: Server = Server {
    pid: 0,
    name: "nsd",
    loopback: Ipv4Addr::new(127, 0, 0, 2),
    netns: Ipv4Addr::new(192, 0, 2, 54),
};
/// Another build of gslbd (`GSLB_PEERS_BASELINE`), on the same configuration but its own
/// addresses.
const BASELINE: Server = Server {
    pid: 0,
    name: "baseline",
    loopback: Ipv4Addr::new(127, 0, 0, 4),
    netns: Ipv4Addr::new(192, 0, 2, 56),
};
const KNOT: Server = Server {
    pid: 0,
    name: "knot",
    loopback: Ipv4Addr::new(127, 0, 0, 3),
    netns: Ipv4Addr::new(192, 0, 2, 55),
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Loopback,
    Netns,
}

const PLACES: [Place; 2] = [Place::Loopback, Place::Netns];

impl Place {
    fn name(self) -> &'static str {
        match self {
            Place::Loopback => "loopback",
            Place::Netns => "netns",
        }
    }

    /// Where dnsperf and dig run.
    fn client(self, lab: &Lab) -> &str {
        match self {
            Place::Loopback => &lab.server_ns,
            Place::Netns => &lab.client_ns,
        }
    }

    fn addr(self, server: Server) -> IpAddr {
        IpAddr::V4(match self {
            Place::Loopback => server.loopback,
            Place::Netns => server.netns,
        })
    }
}

/// One dnsperf run's figures.
struct Run {
    place: Place,
    workload: &'static str,
    server: Server,
    qps: f64,
    lost: u64,
    /// Queries answered, and the server's CPU time (clock ticks, all its processes) meanwhile.
    completed: u64,
    ticks: u64,
}

fn main() {
    if !privileged("bench peers") {
        return;
    }
    if !have_dnsperf("bench peers") {
        return;
    }
    let tmp = TempDir::new("peers");
    let dir = &tmp.0;
    let config_path = dir.join("gslbd.toml");
    let listen = [RESPONDER.loopback, RESPONDER.netns].map(IpAddr::V4);
    let affinity = std::env::var("GSLB_PEERS_AFFINITY").as_deref() != Ok("0");
    let mut text = gslbd_config(dir, &listen);
    if affinity {
        text = text.replacen("[server]\n", "[server]\nsocket_affinity = true\n", 1);
        assert!(
            text.contains("socket_affinity"),
            "gslbd_config has a [server] line"
        );
    }
    std::fs::write(&config_path, text).unwrap();
    let config = Config::load(&config_path).expect("the bench's configuration");
    let snapshot = Snapshot::from_config(&config);
    let questions = questions();
    let workloads = [
        (
            "hits",
            query_file(dir, "hits", &questions, questions.len(), 0),
        ),
        (
            "nx5",
            query_file(dir, "nx5", &questions, questions.len(), 5),
        ),
    ];

    // Declared after `tmp`: dropped first, stopping every daemon before their files go.
    let mut lab = Lab::new("peers");
    for server in [NSD, KNOT, BASELINE] {
        run(Command::new("ip")
            .args(["-n", &lab.server_ns, "addr", "add"])
            .args([&format!("{}/24", server.netns), "dev", SERVER_IF]));
    }
    let servers = start(&mut lab, dir, &config_path, &config, affinity);
    for place in PLACES {
        for &server in &servers {
            check(&lab, &snapshot, place, server);
        }
    }

    println!(
        "# dnsperf -l {SECONDS} -c {CLIENTS} -T {THREADS}, servers in turn each round; \
         cpu = the server's processes' user + system time over the run, idle = the machine's; \
         gslbd and Knot with socket affinity: {affinity}"
    );
    let tick_s = 1.0 / clock_ticks_per_second();
    let only = std::env::var("GSLB_PEERS_ONLY").ok();
    let measured = |place: Place, workload: &str| {
        only.as_deref().is_none_or(|only| {
            only.split(',')
                .any(|case| case.trim() == format!("{}/{workload}", place.name()))
        })
    };
    let rounds = std::env::var("GSLB_PEERS_ROUNDS")
        .ok()
        .map_or(ROUNDS, |r| r.parse().expect("GSLB_PEERS_ROUNDS: a number"));
    let mut runs = Vec::new();
    for round in 0..rounds {
        for place in PLACES {
            for (workload, file) in &workloads {
                if !measured(place, workload) {
                    continue;
                }
                for k in 0..servers.len() {
                    let server = servers[(round + k) % servers.len()];
                    let (ticks, machine) = (tree_ticks(server.pid), machine_ticks());
                    let figures = dnsperf(
                        lab.exec(place.client(&lab), "dnsperf")
                            .args(["-s", &place.addr(server).to_string()])
                            .arg("-d")
                            .arg(file)
                            .args(["-l", SECONDS, "-c", CLIENTS, "-T", THREADS, "-t", "2"]),
                    );
                    let ticks = tree_ticks(server.pid) - ticks;
                    let machine: Vec<u64> = machine_ticks()
                        .iter()
                        .zip(machine)
                        .map(|(after, before)| after - before)
                        .collect();
                    // /proc/stat's idle and iowait over all its ticks.
                    let idle =
                        (machine[3] + machine[4]) as f64 / machine.iter().sum::<u64>() as f64;
                    let seconds: f64 = SECONDS.parse().unwrap();
                    println!(
                        "# round {} {} {workload} {}: {:.0} qps, {} lost, {:.0} us average, \
                         cpu {:.2} us/query ({:.0}% of a core), idle {:.0}%",
                        round + 1,
                        place.name(),
                        server.name,
                        figures.qps,
                        figures.lost,
                        figures.latency_s * 1e6,
                        ticks as f64 * tick_s * 1e6 / figures.completed.max(1) as f64,
                        100.0 * ticks as f64 * tick_s / seconds,
                        100.0 * idle
                    );
                    runs.push(Run {
                        place,
                        workload,
                        server,
                        qps: figures.qps,
                        lost: figures.lost,
                        completed: figures.completed,
                        ticks,
                    });
                }
            }
        }
    }
    report(&runs, &servers, &workloads.map(|(w, _)| w), tick_s);
}

/// Starts gslbd and every peer that is installed (a missing one is skipped, saying why) in the
/// lab's server namespace, each until it answers; the servers that run.
fn start(
    lab: &mut Lab,
    dir: &Path,
    config_path: &Path,
    config: &Config,
    affinity: bool,
) -> Vec<Server> {
    let gslbd = responder_command(
        lab,
        env!("CARGO_BIN_EXE_gslbd").as_ref(),
        config_path,
        &dir.join("gslbd.sock"),
        "warn",
    );
    let pid = lab.spawn_until(gslbd, "ready", Duration::from_secs(30));
    let mut servers = vec![Server { pid, ..RESPONDER }];
    if let Some(binary) = std::env::var_os("GSLB_PEERS_BASELINE") {
        let listen = [BASELINE.loopback, BASELINE.netns].map(IpAddr::V4);
        let baseline_dir = dir.join("baseline");
        std::fs::create_dir_all(&baseline_dir).unwrap();
        let path = baseline_dir.join("gslbd.toml");
        std::fs::write(&path, gslbd_config(&baseline_dir, &listen)).unwrap();
        let cmd = responder_command(
            lab,
            binary.as_ref(),
            &path,
            &baseline_dir.join("gslbd.sock"),
            "warn",
        );
        let pid = lab.spawn_until(cmd, "ready", Duration::from_secs(30));
        servers.push(Server { pid, ..BASELINE });
    }
    for (peer, server) in [(Peer::Nsd, NSD), (Peer::Knot, KNOT)] {
        let listen = [server.loopback, server.netns].map(|a| SocketAddr::from((a, 53)));
        let sh = lab.exec(&lab.server_ns, "sh");
        let peer_dir = dir.join(peer.name());
        std::fs::create_dir_all(&peer_dir).unwrap();
        let zones = zone_files::write_zones(config, &peer_dir);
        match peer.command(&zones, &peer_dir, &listen, None, affinity, sh) {
            Ok(cmd) => {
                let pid = lab.spawn_until(cmd, "ready", Duration::from_secs(10));
                wait_for_answers(peer.name(), || {
                    lab.dig_in(&lab.server_ns, listen[0].ip(), &["g0.example.com", "A"])
                });
                servers.push(Server { pid, ..server });
            }
            Err(why) => {
                println!("# {}: not measured: {why}", peer.name());
                skip(&format!("bench peers: {why}"));
            }
        }
    }
    servers
}

/// Asserts that `server` answers in `place` what the configuration says: A and AAAA of a
/// rotating domain (one of its addresses) and of an "all" one (every address), authoritative,
/// and NXDOMAIN for a name that does not exist.
fn check(lab: &Lab, snapshot: &Snapshot, place: Place, server: Server) {
    let (client, addr) = (place.client(lab), place.addr(server));
    let what = format!("{} in {}", server.name, place.name());
    let mut seen = String::new();
    for name in ["g0.example.com", "g1.example.com"] {
        for (qtype, code) in [("A", 1), ("AAAA", 28)] {
            let out = lab.dig_in(client, addr, &[name, qtype]);
            let reply = DigReply::parse(&out);
            assert!(
                reply.status == "NOERROR" && reply.has_flag("aa"),
                "{what}: {name} {qtype} is not an authoritative answer:\n{out}"
            );
            let got: BTreeSet<IpAddr> = reply
                .answer
                .iter()
                .filter_map(|r| match r.split_whitespace().collect::<Vec<_>>()[..] {
                    [owner, _ttl, t, data] if owner == format!("{name}.") && t == qtype => {
                        data.parse().ok()
                    }
                    _ => None,
                })
                .collect();
            let entry = snapshot
                .domains
                .iter()
                .find(|d| d.name == name && d.qtype == code)
                .unwrap_or_else(|| panic!("the configuration has no {name} {qtype}"));
            let answer = &entry.answers[0].1;
            let want: BTreeSet<IpAddr> = answer.addrs.iter().copied().collect();
            let right = if answer.mode == AnswerMode::All {
                got == want
            } else {
                got.len() == 1 && got.is_subset(&want)
            };
            assert!(
                right,
                "{what}: {name} {qtype} answered {got:?}, configured {:?} of {want:?}:\n{out}",
                answer.mode
            );
            write!(seen, " {name} {qtype} {got:?};").unwrap();
        }
    }
    let out = lab.dig_in(client, addr, &["nx.example.com", "A"]);
    assert_eq!(
        DigReply::parse(&out).status,
        "NXDOMAIN",
        "{what}: nx.example.com A:\n{out}"
    );
    println!("# {what} answers as configured:{seen} nx.example.com NXDOMAIN");
}

/// The `bench` lines: per (place, workload, server) the median qps, the lost queries and the
/// CPU per query (all rounds' ticks over all their queries), then the responder's ratios to
/// the peers. Servers are told apart by name (their pids are in `servers`, not the consts).
fn report(runs: &[Run], servers: &[Server], workloads: &[&'static str], tick_s: f64) {
    let of = |place: Place, workload: &'static str, server: Server| {
        runs.iter().filter(move |r| {
            r.place == place && r.workload == workload && r.server.name == server.name
        })
    };
    let median = |place: Place, workload: &'static str, server: Server| {
        let mut qps: Vec<f64> = of(place, workload, server).map(|r| r.qps).collect();
        qps.sort_by(f64::total_cmp);
        qps[qps.len() / 2]
    };
    let mut worst_vs_nsd: Option<f64> = None;
    for place in PLACES {
        for &workload in workloads {
            // Not measured (`GSLB_PEERS_ONLY`).
            if of(place, workload, RESPONDER).next().is_none() {
                continue;
            }
            let prefix = format!("peers_{}_{workload}", place.name());
            for &server in servers {
                let lost: u64 = of(place, workload, server).map(|r| r.lost).sum();
                let ticks: u64 = of(place, workload, server).map(|r| r.ticks).sum();
                let completed: u64 = of(place, workload, server).map(|r| r.completed).sum();
                let qps = median(place, workload, server);
                let cpu_us = ticks as f64 * tick_s * 1e6 / completed.max(1) as f64;
                println!("bench {prefix}_{}_qps {qps:.0} qps", server.name);
                println!("bench {prefix}_{}_lost {lost} queries", server.name);
                println!("bench {prefix}_{}_cpu_us {cpu_us:.2} us/query", server.name);
            }
            let responder = median(place, workload, RESPONDER);
            for &peer in servers.iter().filter(|s| s.name != RESPONDER.name) {
                let ratio = responder / median(place, workload, peer);
                println!("bench {prefix}_responder_vs_{} {ratio:.2}", peer.name);
                if peer.name == NSD.name {
                    worst_vs_nsd = Some(worst_vs_nsd.map_or(ratio, |w| w.min(ratio)));
                }
            }
        }
    }
    if let Some(ratio) = worst_vs_nsd {
        println!("bench peers_responder_vs_nsd {ratio:.2}");
    }
}
