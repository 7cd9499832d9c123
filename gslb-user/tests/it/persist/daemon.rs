//! Persistence between two gslbd parents, in-process on loopback (responder only, no
//! privileges): p1 at 127.0.0.1 and p2 at 127.0.0.2 exchange MEP. One client (127.0.0.1) asks
//! both. Its entry made on p1 is honoured by p2, which by its own method would answer
//! otherwise; the client keeps its service across another service's flip and restore on both
//! parents, and moves once its entry has timed out everywhere.
//!
//! Every wait is bounded by [`WAIT`]; the only timing the test relies on is the timeout (3 s)
//! against gaps of at most a second between the client's queries, and an idle time of twice
//! the timeout before the move.

use crate::common;
use crate::mep_keys;

use std::{
    net::{IpAddr, SocketAddr},
    time::{Duration, Instant},
};

use common::{Backend, Gslbd, WEB1, WEB2, answer_addrs, ask_server};
use gslb_tests::TempDir;
use gslb_user::control;
use hickory_proto::rr::RecordType;

const WAIT: Duration = Duration::from_secs(20);
const TIMEOUT: Duration = Duration::from_secs(3);

/// Ports of both sites and the backend.
struct Ports {
    dns: [u16; 2],
    mep: [u16; 2],
    backend: SocketAddr,
}

/// The same deployment seen from `site` (p1 or p2): web1 is p1's, checked by a TCP monitor on
/// the backend; web2 is p2's. shop.example.com answers web1 while it is UP (global
/// availability), with persistence; all.example.com answers every UP service (the test reads
/// there what a parent thinks of web1).
fn config(site: usize, p: &Ports) -> String {
    let ip = ["127.0.0.1", "127.0.0.2"][site];
    mep_keys::keyed(
        &format!(
            r#"
[server]
listen = ["{ip}"]
dns_port = {dns}
site = "p{n}"

[mep]
heartbeat_ms = 100
dead_after_ms = 500

[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

{parents}
[[gslb_domain]]
name = "shop.example.com"
services = ["web1", "web2"]
method = "globalavailability"
persistence = {{ timeout_s = {timeout} }}

[[gslb_domain]]
name = "all.example.com"
answer = "all"
services = ["web1", "web2"]
"#,
            dns = p.dns[site],
            n = site + 1,
            parents = common::two_parents(p.mep[0], p.mep[1], p.backend.port(), ""),
            timeout = TIMEOUT.as_secs(),
        ),
        &format!("p{}", site + 1),
    )
}

/// `name` A asked of parent `site` from the client 127.0.0.1: the addresses, sorted.
async fn ask(p: &Ports, site: usize, name: &'static str) -> Vec<IpAddr> {
    let server = SocketAddr::from(([127, 0, 0, 1 + site as u8], p.dns[site]));
    let reply = tokio::task::spawn_blocking(move || ask_server(server, name, RecordType::A))
        .await
        .unwrap();
    let mut v = answer_addrs(&reply);
    v.sort();
    v
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    let mut v: Vec<IpAddr> = list.iter().map(|a| a.parse().unwrap()).collect();
    v.sort();
    v
}

/// Waits until `all.example.com` at both parents answers `want`, asking shop.example.com of
/// parent 0 every 300 ms meanwhile when `keep` is given (so that the client's entry stays in
/// use), and checking it answers `keep`.
async fn both_see(p: &Ports, want: &[&str], keep: Option<&str>, what: &str) {
    let want = ips(want);
    let deadline = Instant::now() + WAIT;
    let mut last_keep = Instant::now();
    loop {
        let (a, b) = (
            ask(p, 0, "all.example.com.").await,
            ask(p, 1, "all.example.com.").await,
        );
        if a == want && b == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: all.example.com is {a:?} at p1, {b:?} at p2, not {want:?}"
        );
        if let Some(keep) = keep
            && last_keep.elapsed() >= Duration::from_millis(300)
        {
            last_keep = Instant::now();
            assert_eq!(
                ask(p, 0, "shop.example.com.").await,
                ips(&[keep]),
                "{what}: the client at p1"
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Asks shop.example.com of both parents, in turn, for `total`: always `want`.
async fn stays(p: &Ports, want: &str, total: Duration, what: &str) {
    let until = Instant::now() + total;
    let mut site = 0;
    while Instant::now() < until {
        assert_eq!(
            ask(p, site, "shop.example.com.").await,
            ips(&[want]),
            "{what}: the client at p{}",
            site + 1
        );
        site = 1 - site;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_parents_answer_a_persistent_client_alike_across_a_flip_and_a_restore() {
    // Its gslbd runs `mep-persist-sync`, which supervise's MEP tests kill by name.
    let _shared = common::running_same_named_tasks().await;
    let dir = TempDir::new("persist-parents");
    // Each parent's sockets, bound before either file is written: each file names both MEP
    // ports.
    let bound = ["127.0.0.1", "127.0.0.2"].map(|ip| {
        let (dns, mut sockets) = common::bound_dns_on(ip.parse().unwrap());
        let (mep, listener) = common::bound_mep(ip);
        sockets.mep = Some(listener);
        (dns, mep, sockets)
    });
    let first_backend = Backend::bind("127.0.0.1").await;
    let p = Ports {
        dns: [bound[0].0, bound[1].0],
        mep: [bound[0].1, bound[1].1],
        backend: first_backend.addr,
    };
    let mut backend = Some(first_backend);
    let mut parents = Vec::new();
    for (site, (_, _, sockets)) in bound.into_iter().enumerate() {
        let path = dir.0.join(format!("p{}.toml", site + 1));
        std::fs::write(&path, config(site, &p)).unwrap();
        let socket = dir.0.join(format!("p{}.sock", site + 1));
        parents.push((
            Gslbd::start_bound(&path, sockets, Some(socket.clone()), WAIT).await,
            socket,
        ));
    }
    // Each parent sees the other's service once their link is up.
    both_see(&p, &[WEB1, WEB2], None, "the link up").await;

    // The client's first answer at p1: web1, the method's.
    assert_eq!(ask(&p, 0, "shop.example.com.").await, ips(&[WEB1]));
    // web1 goes: at p1 the client is answered web2, and its entry follows.
    backend.take();
    both_see(&p, &[WEB2], None, "web1 DOWN").await;
    assert_eq!(ask(&p, 0, "shop.example.com.").await, ips(&[WEB2]));
    // web1 is back (the method's first choice again); p1 keeps the client on web2.
    backend = Some(Backend::start(p.backend).await);
    both_see(&p, &[WEB1, WEB2], Some(WEB2), "web1 back").await;
    // The client goes on asking p1 for a second (time for the entry to reach p2, which takes
    // a tenth of that here), then asks p2 too.
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        assert_eq!(ask(&p, 0, "shop.example.com.").await, ips(&[WEB2]));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // p2 was never asked by this client: it answers web2 by p1's entry (its own method says
    // web1, as all.example.com just showed), and so do both from now on.
    stays(&p, WEB2, Duration::from_secs(2), "after the restore").await;

    // web1 flips again, down and up: the client stays on web2 at both parents.
    backend.take();
    both_see(&p, &[WEB2], Some(WEB2), "web1 DOWN again").await;
    stays(&p, WEB2, Duration::from_millis(600), "web1 DOWN again").await;
    backend = Some(Backend::start(p.backend).await);
    both_see(&p, &[WEB1, WEB2], Some(WEB2), "web1 back again").await;
    stays(&p, WEB2, Duration::from_secs(2), "web1 back again").await;

    // Idle for twice the timeout: the entry is gone at both parents; the method answers.
    tokio::time::sleep(2 * TIMEOUT).await;
    assert_eq!(ask(&p, 1, "shop.example.com.").await, ips(&[WEB1]), "p2");
    assert_eq!(ask(&p, 0, "shop.example.com.").await, ips(&[WEB1]), "p1");

    // gslbctl stats shows the exchange: p1 sent entries, p2 took them in.
    let stat = async |site: usize, name: &str| -> u64 {
        let body = control::request(&parents[site].1, "stats", WAIT)
            .await
            .unwrap();
        body.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {body}"))
    };
    assert!(stat(0, "persistence_sent").await >= 1);
    assert!(stat(1, "persistence_peer_merged").await >= 1);
    assert_eq!(stat(1, "persistence_peer_rejected").await, 0);

    for (gslbd, _) in parents {
        gslbd.stop().await;
    }
    drop(backend);
}
