//! Response rate limiting on a real interface: gslbd with `[rrl]` attached in SKB mode to a veth
//! in a server namespace; from the client namespace, a UDP flood from one /24 (real sockets)
//! gets at most the burst plus the rate for its duration in answers, from XDP (the hit counters
//! rise by exactly those), plus the slips (TC=1, no records), while a client of another /24,
//! asking meanwhile at a tenth of the rate, gets every answer.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket},
    time::{Duration, Instant},
};

use gslb_tests::{CLIENT_IF, CLIENT_V4, GslbdLab, SERVER_IF, SERVER_V4, privileged, run};
use gslb_user::dataplane;
use hickory_proto::{
    op::{Message, MessageType, OpCode, Query},
    rr::{Name, RecordType},
};

const RATE: usize = 20;
const FLOOD: usize = 300;
/// The other client, in a /24 of its own.
const OTHER_V4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

const CONFIG: &str = r#"
[server]
listen = ["192.0.2.53"]

[rrl]
rate = 20
slip = 2

[[zone]]
name = "example.com"
ns = ["ns1.example.com"]
soa.rname = "hostmaster.example.com"
  [[zone.record]]
  name = "ns1"
  type = "A"
  value = "192.0.2.53"

[[site]]
name = "lab"
ip = "192.0.2.1"

[[service]]
name = "web"
ip = "203.0.113.10"
site = "lab"

[[gslb_domain]]
name = "www.example.com"
services = ["web"]
"#;

fn query(id: u16) -> Vec<u8> {
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    m.add_query(Query::query(
        Name::from_ascii("www.example.com.").unwrap(),
        RecordType::A,
    ));
    m.to_vec().unwrap()
}

fn hits(pin_path: &std::path::Path) -> u64 {
    dataplane::pinned_counters(pin_path)
        .expect("read counters")
        .0
        .iter()
        .zip(gslb_common::Counter::ALL)
        .filter(|(_, c)| c.is_hit())
        .map(|(n, _)| *n)
        .sum()
}

#[test]
fn a_udp_flood_from_one_prefix_is_limited_by_xdp_while_others_are_answered() {
    if !privileged("a_udp_flood_from_one_prefix_is_limited_by_xdp_while_others_are_answered") {
        return;
    }
    let mut lab = GslbdLab::new("rrl", CONFIG);
    let pin_path = lab.pins.clone();
    // The other client's address, and the way back to it for anything the stack answers.
    run(lab.exec(&lab.client_ns, "ip").args([
        "addr",
        "add",
        &format!("{OTHER_V4}/32"),
        "dev",
        CLIENT_IF,
    ]));
    run(lab
        .exec(&lab.server_ns, "ip")
        .args(["route", "add", "198.51.100.0/24", "dev", SERVER_IF]));
    lab.start(lab.gslbd(env!("CARGO_BIN_EXE_gslbd")));

    let server = SocketAddr::new(IpAddr::V4(SERVER_V4), 53);
    let hits_before = hits(&pin_path);
    let (full, slips, answered, secs) = lab.in_netns(&lab.client_ns.clone(), || {
        // The fast path's buckets are per CPU (a flood a NIC spreads over N queues gets the
        // rate once per queue, docs/security.md), and a veth runs XDP on the sender's CPU: a
        // sender the scheduler moves between CPUs meets two buckets and gets up to twice the
        // burst. One CPU, as one receive queue would be, is what the limits below assume.
        crate::common::pin_to_current_cpu();
        let flooder = UdpSocket::bind((CLIENT_V4, 0)).unwrap();
        let other = UdpSocket::bind((OTHER_V4, 0)).unwrap();
        other
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut buf = vec![0u8; 4096];
        let mut answered = 0;
        let started = Instant::now();
        for i in 0..FLOOD {
            flooder.send_to(&query(i as u16), server).unwrap();
            if i % 10 == 9 {
                std::thread::sleep(Duration::from_millis(10));
            }
            // Ten queries meanwhile from the other /24.
            if i % 30 == 0 {
                other.send_to(&query(10_000 + i as u16), server).unwrap();
                if let Ok((len, _)) = other.recv_from(&mut buf) {
                    let reply = Message::from_vec(&buf[..len]).unwrap();
                    if !reply.truncation && reply.answers.len() == 1 {
                        answered += 1;
                    }
                }
            }
        }
        let secs = started.elapsed().as_secs_f64();
        flooder
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let (mut full, mut slips) = (0usize, 0usize);
        while let Ok((len, _)) = flooder.recv_from(&mut buf) {
            let reply = Message::from_vec(&buf[..len]).expect("replies decode");
            if reply.truncation {
                assert!(reply.answers.is_empty(), "a slip carries no records");
                slips += 1;
            } else {
                full += 1;
            }
        }
        (full, slips, answered, secs)
    });
    let xdp_hits = hits(&pin_path) - hits_before;
    println!(
        "flood: {full} full, {slips} slips of {FLOOD} in {secs:.2} s; other: {answered}/10; \
         XDP hits {xdp_hits}"
    );
    let allowed = RATE + (RATE as f64 * secs).ceil() as usize;
    assert!(
        full >= RATE && full <= allowed,
        "{full} answers, {allowed} allowed"
    );
    let over = FLOOD - full;
    assert!(
        slips.abs_diff(over / 2) <= 1,
        "{slips} slips for {over} over the limit"
    );
    assert_eq!(answered, 10, "the other /24 lost answers");
    assert_eq!(
        xdp_hits as usize,
        full + answered,
        "the answers came from XDP"
    );
    // Stops gslbd, then removes its files.
    drop(lab);
}
