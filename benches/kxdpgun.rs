//! `cargo xtask bench kxdpgun`: the XDP servers under kxdpgun (Knot's AF_XDP generator, package
//! knot-dnsutils), from the lab's client namespace over its one veth pair: gslbd with its fast
//! path attached (native mode) on the benches' configuration (`dns_peers::gslbd_config`: 1,000
//! GSLB domains, answers of one or two addresses), Knot in XDP mode
//! (`gslb_tests::peers::Peer::Knot` with `xdp: listen` on the server's interface) with the
//! same names as static records (`zone_files::write_zones`), and
//! the floor program (`gslb_floor`: the parse and turn-around of the fast path without a
//! lookup) attached alone. The query file is A and AAAA of every domain; each server is driven at 200k queries/s and at the generator's maximum,
//! `SECONDS` each (kxdpgun's `-t`, and the run is killed past twice that).
//!
//! Per run: replies/s, % of the queries answered, and the CPU per answer: `_cpu`, the system,
//! IRQ and softirq ticks of the whole machine (/proc/stat) over the run, over the replies. That
//! is all the kernel work of both ends (the generator's sends, both veth ends, the XDP program
//! or Knot's AF_XDP path), not the server's alone, and, on a shared machine, whatever else ran.
//! A server's own user and system time (its processes', /proc/PID/stat: knotd answers in user
//! space; gslbd's controller idles) is given apart as `_process_cpu`; its system time is in both.
//!
//! kxdpgun puts its own XDP program on the client end, which receives the servers' native
//! XDP_TX frames there; no pass program is attached.

#[expect(
    dead_code,
    reason = "this bench drives kxdpgun, not dnsperf, and measures Knot only"
)]
mod dns_peers;
mod zone_files;

use std::{
    net::{IpAddr, SocketAddr},
    path::Path,
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use dns_peers::{
    DOMAINS, clock_ticks_per_second, gslbd_config, machine_ticks, query_file, questions, tree_ticks,
};
use gslb_tests::{
    CLIENT_IF, Lab, SERVER_IF, SERVER_V4, TempDir, peers::Peer, privileged, run, skip,
};
use gslb_user::{compile::Snapshot, config::Config, dataplane::Dataplane, dataplane::XdpMode};

const SECONDS: u64 = 5;
/// kxdpgun's `-Q` for its maximum: more than one core can send.
const UNBOUNDED_QPS: u64 = 100_000_000;
const RATES: [(&str, u64); 2] = [("200k", 200_000), ("max", UNBOUNDED_QPS)];

fn main() {
    if !privileged("bench kxdpgun") {
        return;
    }
    let Some(kxdpgun) = ["/usr/sbin/kxdpgun", "/usr/bin/kxdpgun"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        skip("bench kxdpgun: kxdpgun is not installed (package knot-dnsutils)");
        return;
    };
    let dir = TempDir::new("kxdpgun");
    let config_path = dir.0.join("gslb.toml");
    std::fs::write(&config_path, gslbd_config(&dir.0, &[IpAddr::V4(SERVER_V4)])).unwrap();
    let config = Config::load(&config_path).expect("the bench configuration");
    let questions = questions();
    let queries = query_file(&dir.0, "queries", &questions, questions.len(), 0);

    let mut lab = Lab::new("kxdp");
    let server_mac = String::from_utf8(
        run(lab
            .exec(&lab.server_ns, "cat")
            .arg(format!("/sys/class/net/{SERVER_IF}/address")))
        .stdout,
    )
    .unwrap()
    .trim()
    .to_owned();
    let gun = |lab: &Lab, qps: u64, seconds: u64| {
        let mut cmd = lab.exec(&lab.client_ns, kxdpgun);
        cmd.args(["-t", &seconds.to_string(), "-Q", &qps.to_string()])
            .args(["-I", CLIENT_IF, "-R", &server_mac, "-i"])
            .arg(&queries)
            .arg(SERVER_V4.to_string());
        cmd
    };
    // What the rest of the machine spends in the kernel meanwhile (it is shared): the same
    // ticks over a quiet spell, per second.
    let quiet = kernel_ticks();
    std::thread::sleep(Duration::from_secs(SECONDS));
    println!(
        "bench kxdpgun_quiet_kernel {:.0} ticks/s",
        (kernel_ticks() - quiet) as f64 / SECONDS as f64
    );
    println!(
        "# kxdpgun -t {SECONDS} on {CLIENT_IF} (client namespace) -> {SERVER_V4} on {SERVER_IF}, \
         {DOMAINS} names x A/AAAA; cpu = (system + irq + softirq ticks of /proc/stat) / replies, \
         {} ticks/s",
        clock_ticks_per_second()
    );

    for server in ["gslbd", "knot", "floor"] {
        // Whatever serves for this server's runs: a process of the lab, or the floor's loaded
        // dataplane (detached when dropped).
        let mut pid = None;
        let mut floor = None;
        match server {
            "gslbd" => {
                let pin_path = format!("/sys/fs/bpf/{}", lab.server_ns);
                let mut cmd = lab.nsenter(&lab.server_ns, env!("CARGO_BIN_EXE_gslbd").as_ref());
                cmd.env("RUST_LOG", "warn")
                    .arg("--config")
                    .arg(&config_path)
                    .args(["--interface", SERVER_IF, "--xdp-mode", "native"])
                    .args(["--pin-path", &pin_path]);
                pid = Some(lab.spawn_until(cmd, "ready", Duration::from_secs(30)));
            }
            "knot" => {
                // Over XDP on the server's interface, and over sockets on its address.
                let knot_dir = dir.0.join("knot");
                std::fs::create_dir_all(&knot_dir).unwrap();
                let cmd = match Peer::Knot.command(
                    &zone_files::write_zones(&config, &knot_dir),
                    &knot_dir,
                    &[SocketAddr::from((SERVER_V4, 53))],
                    Some(SERVER_IF),
                    false,
                    lab.exec(&lab.server_ns, "sh"),
                ) {
                    Ok(cmd) => cmd,
                    Err(why) => {
                        println!("# knot: {why}, not measured");
                        continue;
                    }
                };
                pid = Some(lab.spawn_until(cmd, "ready", Duration::from_secs(30)));
            }
            _ => {
                let snapshot = Snapshot::from_config(&config);
                floor = Some(lab.in_netns(&lab.server_ns.clone(), || {
                    let mut dp = Dataplane::load(None).expect("loading the XDP object");
                    // For CONFIG: the DNS port and the OPT's size.
                    dp.table.publish(&snapshot).expect("publishing");
                    dp.load_floor().expect("loading the floor program");
                    dp.attach_floor(SERVER_IF, XdpMode::Native)
                        .expect("attaching the floor program");
                    dp
                }));
            }
        }
        // Until it answers (knotd has no readiness signal; XDP programs are attached by then).
        let mut tries = 0;
        while Kxdpgun::parse(&bounded(gun(&lab, 1000, 1), Duration::from_secs(10))).replies == 0 {
            tries += 1;
            assert!(tries < 20, "{server}: no reply to kxdpgun in 20 tries");
            std::thread::sleep(Duration::from_millis(250));
        }

        for (rate, qps) in RATES {
            let (before, process_before) = (kernel_ticks(), pid.map(tree_ticks));
            let out = bounded(
                gun(&lab, qps, SECONDS),
                Duration::from_secs(2 * SECONDS + 10),
            );
            let (after, process_after) = (kernel_ticks(), pid.map(tree_ticks));
            let r = Kxdpgun::parse(&out);
            let name = format!("kxdpgun_{server}_{rate}");
            let replies_per_s = r.replies as f64 / r.seconds;
            println!(
                "bench {name}_sent {:.0} queries/s",
                r.queries as f64 / r.seconds
            );
            println!("bench {name}_replies {replies_per_s:.0} replies/s");
            println!(
                "bench {name}_answered {:.1} %",
                100.0 * r.replies as f64 / r.queries.max(1) as f64
            );
            let ns_per_tick = 1e9 / clock_ticks_per_second();
            let per_answer = |ticks: u64| ticks as f64 * ns_per_tick / r.replies.max(1) as f64;
            println!(
                "bench {name}_cpu {:.0} ns/answer",
                per_answer(after - before)
            );
            if let (Some(b), Some(a)) = (process_before, process_after) {
                println!(
                    "bench {name}_process_cpu {:.0} ns/answer",
                    per_answer(a - b)
                );
            }
        }
        if let Some(pid) = pid {
            lab.stop(pid);
        }
        drop(floor);
        // knotd leaves its XDP program attached (through netlink, not a link) when it stops;
        // gslbd's and the floor's links are gone with them, and then this is a no-op.
        run(lab
            .exec(&lab.server_ns, "ip")
            .args(["link", "set", "dev", SERVER_IF, "xdp", "off"]));
    }
}

/// `cmd`'s output once it exits, killed (and the bench failed) past `limit`.
fn bounded(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let start = Instant::now();
    while child.try_wait().expect("waiting for kxdpgun").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} still running after {limit:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("kxdpgun's output");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// What a kxdpgun run reports (its summary lines, e.g. `total replies:     20010 (10005 pps)
/// (100%)` and `duration: 2 s`).
struct Kxdpgun {
    queries: u64,
    replies: u64,
    seconds: f64,
}

impl Kxdpgun {
    fn parse(out: &Output) -> Kxdpgun {
        let text = String::from_utf8_lossy(&out.stdout);
        let field = |label: &str| -> f64 {
            text.lines()
                .find_map(|l| l.trim().strip_prefix(label))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("kxdpgun's output has no {label:?}:\n{text}"))
        };
        Kxdpgun {
            queries: field("total queries:") as u64,
            replies: field("total replies:") as u64,
            seconds: field("duration:").max(1.0),
        }
    }
}

/// The machine's kernel time so far (system + irq + softirq of the `cpu` line of /proc/stat),
/// in clock ticks.
fn kernel_ticks() -> u64 {
    // cpu user nice system idle iowait irq softirq ...
    let f = machine_ticks();
    f[2] + f[5] + f[6]
}
