//! `cargo xtask bench dnsperf`: queries per second of the whole server, measured with dnsperf
//! from the client namespace of the lab, against gslbd with the XDP fast path attached (native
//! mode) and with the responder alone (`--no-xdp`), on the same query files: A/AAAA hits of
//! GSLB domains, and the same with 5% NXDOMAIN. Each run is bounded in time (`-l`). Where Knot
//! DNS is installed it is measured too, serving the same zone (GSLB names as static records).

#[expect(
    dead_code,
    reason = "this bench measures Knot only on the demo's configuration, benches/peers.rs NSD \
              too on its own"
)]
mod dns_peers;
mod zone_files;

use std::{
    net::{IpAddr, SocketAddr},
    path::Path,
    time::Duration,
};

use dns_peers::{dnsperf, query_file};
use gslb_tests::{
    CLIENT_IF, Lab, SERVER_IF, SERVER_V4,
    peers::{Peer, wait_for_answers},
    privileged, run,
};
use gslb_user::{config::Config, dataplane::Dataplane, dataplane::XdpMode};

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
    // A and AAAA of the demo's GSLB domains (what the fast path answers).
    let hot = [
        "www.example.com A",
        "www.example.com AAAA",
        "all.example.com A",
    ]
    .map(String::from);
    let files = [
        ("hits", query_file(&dir, "hits", &hot, 1000, 0)),
        ("nx5", query_file(&dir, "nx5", &hot, 1000, 5)),
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
        // Its control socket in the run's directory, not the system's /run/gslbd.sock.
        cmd.env("RUST_LOG", "warn")
            .arg("--config")
            .arg(&config)
            .arg("--control")
            .arg(dir.join("gslbd.sock"))
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
    let demo = Config::load(&config).expect("demo config");
    let knot_dir = dir.join("knot");
    std::fs::create_dir_all(&knot_dir).unwrap();
    match Peer::Knot.command(
        &zone_files::write_zones(&demo, &knot_dir),
        &knot_dir,
        &[SocketAddr::from((SERVER_V4, 53))],
        None,
        false,
        lab.exec(&lab.server_ns, "sh"),
    ) {
        Ok(knotd) => servers.push(("knot", knotd)),
        Err(why) => println!("# knot: {why}, not measured"),
    }

    println!(
        "# dnsperf -l {SECONDS} -c {CLIENTS} -q {OUTSTANDING} from the lab's client namespace"
    );
    for (server, cmd) in servers {
        let pid = lab.spawn_until(cmd, "ready", Duration::from_secs(30));
        if server == "knot" {
            wait_for_answers("knot", || {
                lab.dig(IpAddr::V4(SERVER_V4), &["www.example.com", "A"])
            });
        }
        for (mix, file) in &files {
            let figures = dnsperf(
                lab.exec(&lab.client_ns, "dnsperf")
                    .args(["-s", &SERVER_V4.to_string(), "-d", file.to_str().unwrap()])
                    .args(["-l", SECONDS, "-c", CLIENTS, "-q", OUTSTANDING, "-t", "2"]),
            );
            let (qps, lost) = (figures.qps, figures.lost);
            println!("bench dnsperf_{server}_{mix}_qps {qps:.0} qps");
            println!("bench dnsperf_{server}_{mix}_lost {lost} queries");
            println!(
                "bench dnsperf_{server}_{mix}_latency {:.0} us",
                figures.latency_s * 1e6
            );
        }
        lab.stop(pid);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
