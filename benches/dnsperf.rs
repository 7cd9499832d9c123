//! `cargo xtask bench dnsperf`: queries per second of the whole server, measured with dnsperf
//! from the client namespace of the lab, against gslbd with the XDP fast path attached (native
//! mode) and with the responder alone (`--no-xdp`), on the same query files: A/AAAA hits of
//! GSLB domains, and the same with 5% NXDOMAIN. Each run is bounded in time (`-l`). Where Knot
//! DNS is installed it is measured too, serving the same zone (GSLB names as static records).

use std::{fmt::Write as _, net::IpAddr, path::Path, process::Command, time::Duration};

use gslb_tests::{CLIENT_IF, Lab, SERVER_IF, SERVER_V4, privileged, run};
use gslb_user::{
    compile::Snapshot,
    config::{Config, RecordData, XdpMode},
    dataplane::Dataplane,
    policy::AnswerMode,
};

const SECONDS: &str = "8";
const CLIENTS: &str = "8";
const OUTSTANDING: &str = "200";

fn main() {
    if !privileged("bench dnsperf") {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let config = root.join("examples/demo.toml");
    let dir = std::env::temp_dir().join(format!("gslb-dnsperf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let files = [
        ("hits", query_file(&dir, "hits", 0)),
        ("nx5", query_file(&dir, "nx5", 5)),
    ];

    let mut lab = Lab::new("perf");
    // Native XDP_TX on veth: the client end needs an XDP program and no checksum offload.
    run(lab
        .exec(&lab.client_ns, "ethtool")
        .args(["-K", CLIENT_IF, "tx", "off"]));
    let _peer = lab.in_netns(&lab.client_ns.clone(), || {
        let mut dp = Dataplane::load(None).expect("load the pass program");
        dp.attach_pass(CLIENT_IF, XdpMode::Native)
            .expect("attach the pass program");
        dp
    });

    let pin_path = format!("/sys/fs/bpf/{}", lab.server_ns);
    let gslbd = |flags: &[&str]| {
        let mut cmd = lab.nsenter(&lab.server_ns, env!("CARGO_BIN_EXE_gslbd").as_ref());
        cmd.env("RUST_LOG", "warn")
            .arg("--config")
            .arg(&config)
            .args(flags);
        cmd
    };
    let mut servers = vec![
        (
            "xdp",
            gslbd(&[
                "--interface",
                SERVER_IF,
                "--xdp-mode",
                "native",
                "--pin-path",
                &pin_path,
            ]),
        ),
        ("responder", gslbd(&["--no-xdp"])),
    ];
    match knot(&lab, &dir, &config) {
        Some(knotd) => servers.push(("knot", knotd)),
        None => println!("# knot: knotd not installed, not measured"),
    }

    println!(
        "# dnsperf -l {SECONDS} -c {CLIENTS} -q {OUTSTANDING} from the lab's client namespace"
    );
    for (server, cmd) in servers {
        let pid = lab.spawn_until(cmd, "ready", Duration::from_secs(30));
        if server == "knot" {
            wait_for_answers(&lab);
        }
        for (mix, file) in &files {
            let out = run(lab
                .exec(&lab.client_ns, "dnsperf")
                .args(["-s", &SERVER_V4.to_string(), "-d", file.to_str().unwrap()])
                .args(["-l", SECONDS, "-c", CLIENTS, "-q", OUTSTANDING, "-t", "2"]));
            let text = String::from_utf8_lossy(&out.stdout);
            let field = |label: &str| {
                text.lines()
                    .find_map(|l| l.trim().strip_prefix(label))
                    .and_then(|v| v.split_whitespace().next())
                    .unwrap_or_else(|| panic!("dnsperf output has no {label:?}:\n{text}"))
                    .to_owned()
            };
            let qps: f64 = field("Queries per second:").parse().unwrap();
            let lost = field("Queries lost:");
            let latency: f64 = field("Average Latency (s):").parse().unwrap();
            println!("bench dnsperf_{server}_{mix}_qps {qps:.0} qps");
            println!("bench dnsperf_{server}_{mix}_lost {lost} queries");
            println!(
                "bench dnsperf_{server}_{mix}_latency {:.0} us",
                latency * 1e6
            );
        }
        lab.stop(pid);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A dnsperf data file: A and AAAA of the demo's GSLB domains (what the fast path answers),
/// with `nx_percent` of the lines replaced by names that do not exist.
fn query_file(dir: &Path, name: &str, nx_percent: usize) -> std::path::PathBuf {
    let hot = [
        "www.example.com A",
        "www.example.com AAAA",
        "all.example.com A",
    ];
    let mut text = String::new();
    for i in 0..1000 {
        if i % 100 < nx_percent {
            writeln!(text, "nx{i}.example.com A").unwrap();
        } else {
            writeln!(text, "{}", hot[i % hot.len()]).unwrap();
        }
    }
    let path = dir.join(format!("{name}.txt"));
    std::fs::write(&path, text).unwrap();
    path
}

/// knotd serving the demo's zone on the lab's server address, or `None` when it is not
/// installed. The GSLB names become static records: one address for a rotating domain, every
/// address for an "all" domain, so the answers are the same size as gslb's.
fn knot(lab: &Lab, dir: &Path, config: &Path) -> Option<Command> {
    let knotd = ["/usr/sbin/knotd", "/usr/bin/knotd"]
        .into_iter()
        .find(|p| Path::new(p).exists())?;
    let config = Config::load(config).expect("demo config");
    let snapshot = Snapshot::from_config(&config);
    let mut zones = String::new();
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
            let data = match &r.data {
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
                } => {
                    format!("SRV {priority} {weight} {port} {target}.")
                }
            };
            writeln!(text, "{}. {} {data}", r.name, r.ttl).unwrap();
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
        std::fs::write(dir.join(format!("{}.zone", zone.name)), text).unwrap();
        writeln!(
            zones,
            "  - domain: {}\n    file: \"{}.zone\"",
            zone.name, zone.name
        )
        .unwrap();
    }
    let d = dir.display();
    let conf = format!(
        "server:\n  rundir: \"{d}\"\n  user: root:root\n  listen: [ {SERVER_V4}@53 ]\n\
         database:\n  storage: \"{d}\"\ntemplate:\n  - id: default\n    storage: \"{d}\"\n\
         zone:\n{zones}"
    );
    let path = dir.join("knot.conf");
    std::fs::write(&path, conf).unwrap();
    // knotd logs to stderr and prints nothing on stdout: `sh` announces the start itself.
    let mut cmd = lab.exec(&lab.server_ns, "sh");
    cmd.arg("-c")
        .arg(format!("echo ready; exec {knotd} -c {}", path.display()));
    Some(cmd)
}

/// Until the server answers (knotd has no readiness signal of its own).
fn wait_for_answers(lab: &Lab) {
    for _ in 0..100 {
        if lab
            .dig(IpAddr::V4(SERVER_V4), &["www.example.com", "A"])
            .contains("status: NOERROR")
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the server in the lab never answered");
}
