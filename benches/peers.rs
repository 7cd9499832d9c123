//! `cargo xtask bench peers`: the responder alone (gslbd `--no-xdp`) side by side with NSD and
//! Knot DNS, all three serving the same zone: gslbd a configuration of 1,000 GSLB domains, the
//! peers the zone with each domain's answer as static records (`dns_peers::write_zones`, as
//! `bench dnsperf` gives Knot). dnsperf (`-c 4 -T 1`, each run bounded by `-l`) sends two
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
//! A qps figure is the median of the rounds', a lost figure the sum over the rounds.
//! `peers_<place>_<workload>_responder_vs_nsd` (and `_vs_knot`) is the responder's median qps
//! over the peer's; `peers_responder_vs_nsd` is the lowest of those four, the one the goal (at
//! least NSD's qps everywhere) is judged by.

mod dns_peers;

use std::{
    collections::BTreeSet,
    fmt::Write as _,
    net::{IpAddr, Ipv4Addr},
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use dns_peers::{Peer, dnsperf, query_file, wait_for_answers};
use gslb_tests::{DigReply, Lab, SERVER_IF, SERVER_V4, TempDir, privileged, run, skip};
use gslb_user::{compile::Snapshot, config::Config, policy::AnswerMode};

/// Seconds per dnsperf run (`-l`), rounds, and dnsperf's clients and threads (as the outside
/// check that found the responder at 0.57–0.74× NSD).
const SECONDS: &str = "2";
const ROUNDS: usize = 5;
const CLIENTS: &str = "4";
const THREADS: &str = "1";
/// GSLB domains: even ones rotate through two addresses per family, odd ones answer both.
const DOMAINS: usize = 1000;

/// A measured server and its address in each place.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Server {
    name: &'static str,
    loopback: Ipv4Addr,
    netns: Ipv4Addr,
}

const RESPONDER: Server = Server {
    name: "responder",
    loopback: Ipv4Addr::LOCALHOST,
    netns: SERVER_V4,
};
const NSD: Server = Server {
    name: "nsd",
    loopback: Ipv4Addr::new(127, 0, 0, 2),
    netns: Ipv4Addr::new(192, 0, 2, 54),
};
const KNOT: Server = Server {
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
}

fn main() {
    if !privileged("bench peers") {
        return;
    }
    if Command::new("dnsperf").arg("-h").output().is_err() {
        skip("bench peers: dnsperf is not installed (`cargo xtask setup` installs it)");
        return;
    }
    let tmp = TempDir::new("peers");
    let dir = &tmp.0;
    let config_path = dir.join("gslbd.toml");
    std::fs::write(&config_path, gslbd_config(dir)).unwrap();
    let config = Config::load(&config_path).expect("the bench's configuration");
    let snapshot = Snapshot::from_config(&config);
    let questions: Vec<String> = (0..DOMAINS)
        .flat_map(|i| {
            [
                format!("g{i}.example.com A"),
                format!("g{i}.example.com AAAA"),
            ]
        })
        .collect();
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
    for server in [NSD, KNOT] {
        run(Command::new("ip")
            .args(["-n", &lab.server_ns, "addr", "add"])
            .args([&format!("{}/24", server.netns), "dev", SERVER_IF]));
    }
    let servers = start(&mut lab, dir, &config_path, &config);
    for place in PLACES {
        for &server in &servers {
            check(&lab, &snapshot, place, server);
        }
    }

    println!("# dnsperf -l {SECONDS} -c {CLIENTS} -T {THREADS}, {ROUNDS} rounds, servers in turn");
    let mut runs = Vec::new();
    for round in 0..ROUNDS {
        for place in PLACES {
            for (workload, file) in &workloads {
                for k in 0..servers.len() {
                    let server = servers[(round + k) % servers.len()];
                    let figures = dnsperf(
                        lab.exec(place.client(&lab), "dnsperf")
                            .args(["-s", &place.addr(server).to_string()])
                            .arg("-d")
                            .arg(file)
                            .args(["-l", SECONDS, "-c", CLIENTS, "-T", THREADS, "-t", "2"]),
                    );
                    println!(
                        "# round {} {} {workload} {}: {:.0} qps, {} lost, {:.0} us average",
                        round + 1,
                        place.name(),
                        server.name,
                        figures.qps,
                        figures.lost,
                        figures.latency_s * 1e6
                    );
                    runs.push(Run {
                        place,
                        workload,
                        server,
                        qps: figures.qps,
                        lost: figures.lost,
                    });
                }
            }
        }
    }
    report(&runs, &servers, &workloads.map(|(w, _)| w));
}

/// Starts gslbd and every peer that is installed (a missing one is skipped, saying why) in the
/// lab's server namespace, each until it answers; the servers that run.
fn start(lab: &mut Lab, dir: &Path, config_path: &Path, config: &Config) -> Vec<Server> {
    let mut gslbd = lab.nsenter(&lab.server_ns, env!("CARGO_BIN_EXE_gslbd").as_ref());
    gslbd
        .env("RUST_LOG", "warn")
        .arg("--config")
        .arg(config_path)
        .arg("--no-xdp")
        .arg("--control")
        .arg(dir.join("gslbd.sock"));
    lab.spawn_until(gslbd, "ready", Duration::from_secs(30));
    let mut servers = vec![RESPONDER];
    for (peer, server) in [(Peer::Nsd, NSD), (Peer::Knot, KNOT)] {
        let listen = [IpAddr::V4(server.loopback), IpAddr::V4(server.netns)];
        let sh = lab.exec(&lab.server_ns, "sh");
        match peer.command(config, &dir.join(peer.name()), &listen, sh) {
            Ok(cmd) => {
                lab.spawn_until(cmd, "ready", Duration::from_secs(10));
                wait_for_answers(peer.name(), || {
                    lab.dig_in(&lab.server_ns, listen[0], &["g0.example.com", "A"])
                });
                servers.push(server);
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

/// The `bench` lines: per (place, workload, server) the median qps and the lost queries, then
/// the responder's ratios to the peers.
fn report(runs: &[Run], servers: &[Server], workloads: &[&str]) {
    let median = |place: Place, workload: &str, server: Server| {
        let mut qps: Vec<f64> = runs
            .iter()
            .filter(|r| r.place == place && r.workload == workload && r.server == server)
            .map(|r| r.qps)
            .collect();
        qps.sort_by(f64::total_cmp);
        qps[qps.len() / 2]
    };
    let mut worst_vs_nsd: Option<f64> = None;
    for place in PLACES {
        for &workload in workloads {
            let prefix = format!("peers_{}_{workload}", place.name());
            for &server in servers {
                let lost: u64 = runs
                    .iter()
                    .filter(|r| r.place == place && r.workload == workload && r.server == server)
                    .map(|r| r.lost)
                    .sum();
                let qps = median(place, workload, server);
                println!("bench {prefix}_{}_qps {qps:.0} qps", server.name);
                println!("bench {prefix}_{}_lost {lost} queries", server.name);
            }
            let responder = median(place, workload, RESPONDER);
            for &peer in servers.iter().filter(|s| **s != RESPONDER) {
                let ratio = responder / median(place, workload, peer);
                println!("bench {prefix}_responder_vs_{} {ratio:.2}", peer.name);
                if peer == NSD {
                    worst_vs_nsd = Some(worst_vs_nsd.map_or(ratio, |w| w.min(ratio)));
                }
            }
        }
    }
    if let Some(ratio) = worst_vs_nsd {
        println!("bench peers_responder_vs_nsd {ratio:.2}");
    }
}

/// gslbd's configuration: one zone, 8 IPv4 and 8 IPv6 services, and [`DOMAINS`] domains
/// `g{i}.example.com` with two services of each family, served on [`RESPONDER`]'s addresses.
/// Its admin state file is in `dir`, not the system's.
fn gslbd_config(dir: &Path) -> String {
    let state: PathBuf = dir.join("admin-state");
    let mut text = format!(
        r#"
[server]
listen = ["{}", "{}"]
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
        RESPONDER.loopback,
        RESPONDER.netns,
        state.display()
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
