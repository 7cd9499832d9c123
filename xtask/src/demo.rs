//! `cargo xtask demo`: a two-namespace lab, gslbd serving examples/demo.toml in one namespace,
//! real `dig` queries from the other, each printed with the path that answered it (from the
//! fast path's counters). Serves until Ctrl-C (or exits after the queries with `--once`); the
//! lab is removed on the way out, also after a failure.

use std::{collections::BTreeMap, net::IpAddr, path::Path, process::Command, time::Duration};

use anyhow::{Context, Result, bail};
use gslb_tests::{Lab, SERVER_V4, SERVER_V6, dig_answers, dig_flags};

use crate::{setup, util};

const CONFIG: &str = "examples/demo.toml";
/// The lab service web-lab's address and port in examples/demo.toml.
const BACKEND: &str = "192.0.2.80:8080";
/// `server.pin_path` of examples/demo.toml.
const PIN_PATH: &str = "/sys/fs/bpf/gslb-demo";

struct Query {
    what: &'static str,
    server: IpAddr,
    args: &'static [&'static str],
}

pub(crate) fn run(once: bool) -> Result<()> {
    let env = setup::run()?;
    util::run_inherit(
        "demo build",
        env.cargo().args(["build", "-p", "gslb-user", "--bins"]),
    )?;
    let bin = util::target_dir(&env.root).join("debug");

    let mut lab = Lab::new("demo");
    // The backend of the lab view's service web-lab, watched by a TCP monitor.
    gslb_tests::run(lab.exec(&lab.server_ns, "ip").args([
        "addr",
        "add",
        "192.0.2.80/32",
        "dev",
        "lo",
    ]));
    let backend = lab.tcp_backend(&lab.server_ns, BACKEND.parse().expect("an address"));
    // The lab is a veth pair: generic (SKB) XDP needs nothing from the peer, while native XDP_TX
    // on veth needs an XDP program on the client end too. On a real NIC, "auto" picks native.
    let mut gslbd = lab.nsenter(&lab.server_ns, &bin.join("gslbd"));
    gslbd
        .current_dir(&env.root)
        .args(["--config", CONFIG, "--xdp-mode", "skb"]);
    println!(
        "demo: starting gslbd with {CONFIG} in namespace {}",
        lab.server_ns
    );
    lab.spawn_until(gslbd, "gslbd: ready", Duration::from_secs(60));

    let v4 = IpAddr::V4(SERVER_V4);
    let v6 = IpAddr::V6(SERVER_V6);
    let queries = [
        Query {
            what: "GSLB domain, A over IPv4",
            server: v4,
            args: &["www.example.com", "A"],
        },
        Query {
            what: "GSLB domain, AAAA over IPv6",
            server: v6,
            args: &["www.example.com", "AAAA"],
        },
        Query {
            what: "GSLB domain, all addresses",
            server: v4,
            args: &["all.example.com", "A"],
        },
        Query {
            what: "a name that does not exist",
            server: v4,
            args: &["nope.example.com", "A"],
        },
        Query {
            what: "static TXT record",
            server: v6,
            args: &["txt.example.com", "TXT"],
        },
        Query {
            what: "GSLB domain over TCP",
            server: v4,
            args: &["www.example.com", "A", "+tcp"],
        },
        Query {
            what: "too big for 512-byte UDP: TC, then TCP",
            server: v4,
            args: &["big.example.com", "TXT", "+noedns"],
        },
    ];
    for q in &queries {
        let before = stats(&bin)?;
        let out = lab.dig(q.server, q.args);
        let after = stats(&bin)?;
        show(q, &out, &before, &after);
    }

    // Health: the backend stops, its monitor takes web-lab down, the answers move to the
    // default view's services (in the maps too: XDP answers the new answer); then it returns.
    let www = Query {
        what: "GSLB domain, A over IPv4",
        server: v4,
        args: &["www.example.com", "A"],
    };
    println!();
    println!("== web-lab's backend ({BACKEND}) stops; its TCP monitor takes the service down");
    drop(backend);
    wait_for_answer(&lab, &bin, &www, |a| a != "192.0.2.80")?;
    println!();
    println!("== web-lab's backend comes back; the service is answered again");
    let _backend = lab.tcp_backend(&lab.server_ns, BACKEND.parse().expect("an address"));
    wait_for_answer(&lab, &bin, &www, |a| a == "192.0.2.80")?;

    if once {
        println!("demo: done (--once); removing the lab");
        return Ok(());
    }
    println!("demo: gslbd keeps serving at {SERVER_V4} and {SERVER_V6}; try");
    println!(
        "  ip netns exec {} dig @{SERVER_V4} www.example.com",
        lab.client_ns
    );
    println!(
        "  {} --pin-path {PIN_PATH} stats",
        bin.join("gslbctl").display()
    );
    println!("demo: Ctrl-C to stop and remove the lab");
    let (tx, rx) = std::sync::mpsc::channel();
    ctrlc::set_handler(move || {
        let _ = tx.send(());
    })
    .context("installing the Ctrl-C handler")?;
    let _ = rx.recv();
    println!("demo: stopping");
    Ok(())
}

/// Repeats `q` until its first answer satisfies `want` (monitors take a few intervals), then
/// shows it; fails after 10 s.
fn wait_for_answer(lab: &Lab, bin: &Path, q: &Query, want: impl Fn(&str) -> bool) -> Result<()> {
    let start = std::time::Instant::now();
    loop {
        let before = stats(bin)?;
        let out = lab.dig(q.server, q.args);
        let answers = dig_answers(&out);
        if answers.first().is_some_and(|(_, _, data)| want(data)) {
            let after = stats(bin)?;
            println!("   after {:.1} s:", start.elapsed().as_secs_f64());
            show(q, &out, &before, &after);
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(10) {
            bail!("the answer did not change within 10 s: {answers:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The fast path's counters, from `gslbctl stats`.
fn stats(bin: &Path) -> Result<BTreeMap<String, u64>> {
    let mut cmd = Command::new(bin.join("gslbctl"));
    cmd.args(["--pin-path", PIN_PATH, "stats"]);
    let out = util::run_captured("gslbctl stats", &mut cmd)?;
    out.lines()
        .map(|l| match l.split_once(' ') {
            Some((name, v)) => Ok((name.to_owned(), v.parse()?)),
            None => bail!("gslbctl stats: unexpected line {l:?}"),
        })
        .collect()
}

fn show(q: &Query, out: &str, before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) {
    println!();
    println!("== {}: dig @{} {}", q.what, q.server, q.args.join(" "));
    let status = out
        .lines()
        .find_map(|l| l.split("status: ").nth(1))
        .and_then(|s| s.split(',').next())
        .unwrap_or("no answer");
    println!("   status {status}, flags {}", dig_flags(out).join(" "));
    if out.contains("Truncated, retrying in TCP mode") {
        println!("   UDP answer was truncated (TC); dig retried over TCP");
    }
    for (name, rtype, data) in dig_answers(out) {
        let data = if data.len() > 60 {
            format!("{}...", &data[..60])
        } else {
            data
        };
        println!("   {name} {rtype} {data}");
    }
    let hits: Vec<String> = after
        .iter()
        .filter(|(name, _)| name.starts_with("hit_"))
        .filter_map(|(name, v)| {
            let d = v - before.get(name).copied().unwrap_or(0);
            (d > 0).then(|| format!("{name} +{d}"))
        })
        .collect();
    if hits.is_empty() {
        println!("   answered by: the responder (the fast path passed it on)");
    } else {
        println!("   answered by: the XDP fast path ({})", hits.join(", "));
    }
}
