//! `cargo xtask bench dnsperf`: queries per second of the whole server, measured with dnsperf
//! from the client namespace of the lab, against gslbd with the XDP fast path attached (native
//! mode) and with the responder alone (`--no-xdp`), on the same query files: A/AAAA hits of
//! GSLB domains, and the same with 5% NXDOMAIN. Each run is bounded in time (`-l`).

use std::{fmt::Write as _, path::Path, time::Duration};

use gslb_tests::{CLIENT_IF, Lab, SERVER_IF, SERVER_V4, privileged, run};
use gslb_user::{config::XdpMode, dataplane::Dataplane};

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
    let files = [("hits", query_file(&dir, "hits", 0)), ("nx5", query_file(&dir, "nx5", 5))];

    let mut lab = Lab::new("perf");
    // Native XDP_TX on veth: the client end needs an XDP program and no checksum offload.
    run(lab.exec(&lab.client_ns, "ethtool").args(["-K", CLIENT_IF, "tx", "off"]));
    let _peer = lab.in_netns(&lab.client_ns.clone(), || {
        let mut dp = Dataplane::load(None).expect("load the pass program");
        dp.attach_pass(CLIENT_IF, XdpMode::Native).expect("attach the pass program");
        dp
    });

    let pin_path = format!("/sys/fs/bpf/{}", lab.server_ns);
    println!("# dnsperf -l {SECONDS} -c {CLIENTS} -q {OUTSTANDING} from the lab's client namespace");
    for (mode, flags) in [
        ("xdp", vec!["--interface", SERVER_IF, "--xdp-mode", "native", "--pin-path", &pin_path]),
        ("responder", vec!["--no-xdp"]),
    ] {
        let mut gslbd = lab.nsenter(&lab.server_ns, env!("CARGO_BIN_EXE_gslbd").as_ref());
        gslbd.env("RUST_LOG", "warn").arg("--config").arg(&config).args(&flags);
        let gslbd = lab.spawn_until(gslbd, "gslbd: ready", Duration::from_secs(30));
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
            println!("bench dnsperf_{mode}_{mix}_qps {qps:.0} qps");
            println!("bench dnsperf_{mode}_{mix}_lost {lost} queries");
            println!("bench dnsperf_{mode}_{mix}_latency {:.0} us", latency * 1e6);
        }
        lab.stop(gslbd);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A dnsperf data file: A and AAAA of the demo's GSLB domains (what the fast path answers),
/// with `nx_percent` of the lines replaced by names that do not exist.
fn query_file(dir: &Path, name: &str, nx_percent: usize) -> std::path::PathBuf {
    let hot = ["www.example.com A", "www.example.com AAAA", "all.example.com A"];
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

