//! `cargo bench -p gslb-user --bench rtt_flood` (root): does a health flip still reach the
//! fast path's maps in the usual time while a flood of spoofed sources fills the LDNS table?
//!
//! gslbd runs in the lab's server namespace with XDP (skb mode) on the veth, RTT probing on
//! (`max_ldns = 2000`, interval 2 s) and a TCP monitor (100 ms, fall 1, rise 1) on the backend
//! of service `web-east` (in the client namespace). The domain answers by global
//! availability: `web-east` while it is up, `web-west` when it is down. A flip: the backend
//! stops (or starts); measured, the time until the answer the client gets from XDP (asked
//! every 2 ms) changes. `FLIPS` flips without a flood, then `FLIPS` with 20,000 spoofed
//! distinct sources a second (plus loopback, multicast and the server's own address) sent
//! from a raw socket in the client namespace the whole time. Printed: each flip, the medians,
//! and gslbd's LDNS counters after the flood.

use std::{
    net::{Ipv4Addr, SocketAddr, UdpSocket},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use gslb_tests::{
    CLIENT_V4, GslbdLab, Lab, SERVER_V4, enter_netns, gslbctl, privileged,
    spoof::{SpoofSender, www_query},
};

const GSLBCTL: &str = env!("CARGO_BIN_EXE_gslbctl");
const FLIPS: usize = 10;
const EAST: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
const WEST: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
const BACKEND_PORT: u16 = 8080;

fn config() -> String {
    format!(
        r#"
[server]
listen = ["{SERVER_V4}"]
site = "east"

[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

[[monitor]]
name = "tcp"
type = "tcp"
interval_ms = 100
timeout_ms = 100
fall = 1
rise = 1

[[site]]
name = "east"
ip = "{SERVER_V4}"

[[site]]
name = "west"
ip = "203.0.113.1"

[[service]]
name = "web-east"
ip = "{CLIENT_V4}"
port = {BACKEND_PORT}
public_ip = "{EAST}"
site = "east"
monitors = ["tcp"]

[[service]]
name = "web-west"
ip = "{WEST}"
site = "west"

[[gslb_domain]]
name = "www.example.com"
services = ["web-east", "web-west"]
method = "globalavailability"

[rtt]
enabled = true
interval_ms = 2000
timeout_ms = 1000
max_ldns = 2000
"#
    )
}

/// The A answer to a query from the client namespace (`socket` is there), if any.
fn answer(socket: &UdpSocket, id: u16) -> Option<Ipv4Addr> {
    socket
        .send_to(&www_query(id), SocketAddr::from((SERVER_V4, 53)))
        .ok()?;
    let mut buf = [0u8; 512];
    let len = socket.recv(&mut buf).ok()?;
    // One A record at the end (no OPT in the query, none in the answer).
    (len >= 16 && buf[7] == 1)
        .then(|| Ipv4Addr::new(buf[len - 4], buf[len - 3], buf[len - 2], buf[len - 1]))
}

/// Flips the backend `FLIPS` times; the time from each flip to the answer following it.
fn flips(lab: &Lab, backend: &mut Option<gslb_tests::TcpBackend>, label: &str) -> Vec<Duration> {
    let backend_addr = SocketAddr::from((CLIENT_V4, BACKEND_PORT));
    let ns = lab.client_ns.clone();
    let (tx, rx) = std::sync::mpsc::channel::<Ipv4Addr>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Duration>();
    // The asker lives in the client namespace; it waits for `want` and reports the time.
    let asker = std::thread::spawn(move || {
        enter_netns(&ns);
        let socket = UdpSocket::bind((CLIENT_V4, 0)).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let mut id = 0u16;
        while let Ok(want) = rx.recv() {
            let start = Instant::now();
            loop {
                id = id.wrapping_add(1);
                if answer(&socket, id) == Some(want) {
                    break;
                }
                assert!(start.elapsed() < Duration::from_secs(20), "never {want}");
                std::thread::sleep(Duration::from_millis(2));
            }
            done_tx.send(start.elapsed()).unwrap();
        }
    });
    let mut out = Vec::new();
    for i in 0..FLIPS {
        let want = if backend.is_some() {
            *backend = None; // down
            WEST
        } else {
            *backend = Some(lab.tcp_backend(&lab.client_ns, backend_addr));
            EAST
        };
        tx.send(want).unwrap();
        let took = done_rx.recv().unwrap();
        println!(
            "{label} flip {i} → {want}: {:.1} ms",
            took.as_secs_f64() * 1e3
        );
        out.push(took);
        std::thread::sleep(Duration::from_millis(300));
    }
    drop(tx);
    asker.join().unwrap();
    out
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

fn main() {
    if !privileged("rtt_flood bench") {
        return;
    }
    let mut lab = GslbdLab::new("rttbench", &config());
    let control = lab.control.clone();
    let mut backend =
        Some(lab.tcp_backend(&lab.client_ns, SocketAddr::from((CLIENT_V4, BACKEND_PORT))));
    let pid = lab.start(lab.with_control(env!("CARGO_BIN_EXE_gslbd")));
    std::thread::sleep(Duration::from_secs(2));

    let quiet = flips(&lab, &mut backend, "quiet");

    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let (ns, stop) = (lab.client_ns.clone(), stop.clone());
        std::thread::spawn(move || {
            enter_netns(&ns);
            let claims = [Ipv4Addr::LOCALHOST, Ipv4Addr::new(224, 0, 0, 1), SERVER_V4];
            SpoofSender::new(SERVER_V4)
                .flood(0, u32::MAX, 2000, &claims, || stop.load(Ordering::Relaxed))
        })
    };
    // Let the table fill (the feed scans once a second).
    std::thread::sleep(Duration::from_secs(3));
    let flooded = flips(&lab, &mut backend, "flood");
    stop.store(true, Ordering::Relaxed);
    let sent = flood.join().unwrap();
    let stats = String::from_utf8_lossy(&gslbctl(GSLBCTL, &control, "stats").stdout).into_owned();
    for line in stats
        .lines()
        .filter(|l| l.starts_with("ldns_") || l.starts_with("probe"))
    {
        println!("gslbd {line}");
    }
    println!("bench rtt_flood_sources {sent}");
    println!(
        "bench rtt_flood_flip_quiet {:.1} ms (median of {FLIPS})",
        median(quiet)
    );
    println!(
        "bench rtt_flood_flip_flooded {:.1} ms (median of {FLIPS})",
        median(flooded)
    );
    lab.stop(pid);
}
