//! Loads travel over MEP: two gslbd parents in this process (responder alone), p1 at
//! 127.0.0.1 and p2 at 127.0.0.2, linked by a real MEP session on the loopback. Each measures
//! its own service's connections from a Prometheus page (a test server on the loopback); the
//! other takes them from MEP. Shown: both parents answer `leastconnection` and spillover from
//! both loads, and move together when either changes; a load that changes no decision
//! republishes nothing at either; a value that ages out at its site is unknown at the other
//! too; each site runs only its own service's monitor.
//!
//! Every wait is bounded by [`WAIT`].

use crate::common;
use crate::mep_keys;

use std::{net::SocketAddr, path::Path, time::Duration};

use common::{
    Gslbd,
    metrics::{MetricsServer, answers_become},
};
use gslb_tests::TempDir;
use gslb_user::control;

const WAIT: Duration = Duration::from_secs(20);
/// The addresses answers carry.
const WEB_A: &str = "192.0.2.1";
const WEB_B: &str = "192.0.2.2";

/// What the test varies: ports.
struct Ports {
    dns: [u16; 2],
    mep: [u16; 2],
    metrics: [SocketAddr; 2],
}

/// The file of site `site` (0: p1, 1: p2): the same but for `server.site` and the DNS port.
fn config(ports: &Ports, site: usize) -> String {
    let (ma, mb) = (ports.metrics[0], ports.metrics[1]);
    mep_keys::keyed(
        &format!(
            r#"
[server]
listen = ["127.0.0.1"]
dns_port = {}
site = "p{}"

[mep]
heartbeat_ms = 100
# Generous: a busy machine's stall must not drop the link (and republish) in the test's quiet
# window; no site goes away here.
dead_after_ms = 3000

[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

[[site]]
name = "p1"
ip = "127.0.0.1"
mep_port = {}

[[site]]
name = "p2"
ip = "127.0.0.2"
mep_port = {}

[[monitor]]
name = "conns"
type = "load"
format = "prometheus"
metric = "backend_connections"
labels = {{ pool = "web" }}
interval_ms = 100
timeout_ms = 500
unknown_after = 2

[[service]]
name = "a"
ip = "{}"
port = {}
public_ip = "{WEB_A}"
site = "p1"
load_monitors = ["conns"]
max_connections = 15

[[service]]
name = "b"
ip = "{}"
port = {}
public_ip = "{WEB_B}"
site = "p2"
load_monitors = ["conns"]

[[gslb_domain]]
name = "least.example.com"
answer = "all"
services = ["a", "b"]
method = "leastconnection"

[[gslb_domain]]
name = "spill.example.com"
answer = "all"
services = ["a", "b"]
"#,
            ports.dns[site],
            site + 1,
            ports.mep[0],
            ports.mep[1],
            ma.ip(),
            ma.port(),
            mb.ip(),
            mb.port(),
        ),
        &format!("p{}", site + 1),
    )
}

/// A page where pool "web" has `n` connections (and another pool, which must not be read).
fn page(n: u64) -> String {
    format!(
        "# HELP backend_connections Open connections.\n# TYPE backend_connections gauge\n\
         backend_connections{{pool=\"web\"}} {n} 1712345678000\nbackend_connections{{pool=\"admin\"}} 1000\n"
    )
}

/// Both sites answer `name` with `want`.
async fn both_answer(ports: &Ports, name: &'static str, want: &[&str], what: &str) {
    for (i, dns) in ports.dns.iter().enumerate() {
        answers_become(*dns, name, want, &format!("p{}: {what}", i + 1), WAIT).await;
    }
}

async fn stats(socket: &Path) -> String {
    control::request(socket, "stats", WAIT).await.unwrap()
}

fn stat<'a>(stats: &'a str, name: &str) -> Option<&'a str> {
    stats
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_parent_decides_on_every_sites_load() {
    // Its gslbd runs `mep-persist-sync`, which supervise's MEP tests kill by name.
    let _shared = common::running_same_named_tasks().await;
    let dir = TempDir::new("load-mep");
    let server_a = MetricsServer::start("127.0.0.31:0".parse().unwrap(), &page(10)).await;
    let server_b = MetricsServer::start("127.0.0.32:0".parse().unwrap(), &page(3)).await;
    // Each parent's sockets (DNS on 127.0.0.1, MEP on its site's address), bound before either
    // file is written: each file names both MEP ports.
    let bound = ["127.0.0.1", "127.0.0.2"].map(|mep_ip| {
        let (dns, mut listeners) = common::bound_dns();
        let (mep, listener) = common::bound_mep(mep_ip);
        listeners.mep = Some(listener);
        (dns, mep, listeners)
    });
    let ports = Ports {
        dns: [bound[0].0, bound[1].0],
        mep: [bound[0].1, bound[1].1],
        metrics: [server_a.addr, server_b.addr],
    };
    let mut gslbd = Vec::new();
    let mut sockets = Vec::new();
    for (site, (_, _, listeners)) in bound.into_iter().enumerate() {
        let path = dir.0.join(format!("p{}.toml", site + 1));
        let socket = dir.0.join(format!("p{}.sock", site + 1));
        std::fs::write(&path, config(&ports, site)).unwrap();
        gslbd.push(Gslbd::start_bound(&path, listeners, Some(socket.clone()), WAIT).await);
        sockets.push(socket);
    }
    let (least, spill) = ("least.example.com.", "spill.example.com.");

    // a 10 (measured at p1), b 3 (at p2): both parents answer b.
    both_answer(&ports, least, &[WEB_B], "a 10, b 3").await;
    both_answer(&ports, spill, &[WEB_A, WEB_B], "a under 15").await;
    // Each site runs its own service's monitor only.
    for socket in &sockets {
        assert_eq!(stat(&stats(socket).await, "load_monitors"), Some("1"));
    }

    // b's load rises at p2: both move to a.
    server_b.set(&page(20));
    both_answer(&ports, least, &[WEB_A], "a 10, b 20").await;

    // A change that leaves every decision as it was republishes nothing, at either site,
    // although p1 reads it and p2 gets it over MEP.
    let republishes = |s: &str| stat(s, "republishes").unwrap().to_owned();
    let before = [
        republishes(&stats(&sockets[0]).await),
        republishes(&stats(&sockets[1]).await),
    ];
    server_a.set(&page(12));
    let labels = "{service=\"a\",monitor=\"conns\",measure=\"connections\"}";
    let deadline = std::time::Instant::now() + WAIT;
    while stat(&stats(&sockets[0]).await, &format!("load_value{labels}")) != Some("12") {
        assert!(std::time::Instant::now() < deadline, "p1 reads 12");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Several more samples, and MEP's delivery, meanwhile.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = [
        republishes(&stats(&sockets[0]).await),
        republishes(&stats(&sockets[1]).await),
    ];
    assert_eq!(
        after, before,
        "republishes before and after a load that decides nothing"
    );

    // a reaches its max_connections at p1: both spill to b, in every domain (least too,
    // although a's 16 is under b's 20).
    server_a.set(&page(16));
    both_answer(&ports, spill, &[WEB_B], "a at its limit").await;
    both_answer(&ports, least, &[WEB_B], "a full at 16, b 20").await;

    // a drops, then its page goes away: at p1 a's value ages out, and p2 learns it is unknown
    // over MEP: both rank it last and count it full.
    server_b.set(&page(5));
    server_a.set(&page(1));
    both_answer(&ports, least, &[WEB_A], "a 1, b 5").await;
    both_answer(&ports, spill, &[WEB_A, WEB_B], "a 1").await;
    drop(server_a);
    both_answer(&ports, least, &[WEB_B], "a unknown").await;
    both_answer(&ports, spill, &[WEB_B], "a unknown is full").await;
    let p1 = stats(&sockets[0]).await;
    assert_eq!(stat(&p1, &format!("load_known{labels}")), Some("0"), "{p1}");
    assert_eq!(stat(&p1, "load_aged_out"), Some("1"), "{p1}");

    for g in gslbd {
        g.stop().await;
    }
    drop(server_b);
}
