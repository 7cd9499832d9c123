//! The real probers on the loopback: TCP, DNS, ICMP.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpListener, UdpSocket},
    sync::{Arc, Mutex},
    time::Duration,
};

use gslb_user::probe::{NetProber, ProbeKind, ProbeOutcome, Prober};
use hickory_proto::{
    op::{Message, MessageType},
    rr::RecordType,
};
use tokio::time::Instant;

use super::{ms, secs};

// ---- The real probers, on the loopback ----

fn loopback_prober(dns_port: u16, tcp_port: u16) -> NetProber {
    NetProber { dns_port, tcp_port }
}

fn is_reply(outcome: &ProbeOutcome) -> bool {
    matches!(outcome, ProbeOutcome::Reply(rtt) if *rtt < ms(1000))
}

#[tokio::test]
async fn tcp_probes_take_a_syn_ack_or_a_reset_as_a_sample() {
    let open = TcpListener::bind("127.0.0.1:0").unwrap();
    let open_port = open.local_addr().unwrap().port();
    let closed_port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let localhost = IpAddr::V4(Ipv4Addr::LOCALHOST);
    for (port, what) in [
        (open_port, "open port (SYN-ACK)"),
        (closed_port, "closed port (RST)"),
    ] {
        let outcome = loopback_prober(53, port)
            .probe(ProbeKind::Tcp, localhost, secs(2))
            .await;
        assert!(is_reply(&outcome), "{what}: {outcome:?}");
    }
    drop(open);
}

/// A DNS server on the loopback answering every query with `rcode`, after `delay`; returns its
/// port and the queries it got.
fn dns_responder(rcode: u8, delay: Duration) -> (u16, Arc<Mutex<Vec<Message>>>) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let log = got.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((len, from)) = socket.recv_from(&mut buf) {
            if let Ok(m) = Message::from_vec(&buf[..len]) {
                log.lock().unwrap().push(m);
            }
            std::thread::sleep(delay);
            buf[2] |= 0x80;
            buf[3] = (buf[3] & 0xf0) | rcode;
            let _ = socket.send_to(&buf[..len], from);
        }
    });
    (port, got)
}

#[tokio::test]
async fn dns_probes_take_any_response_as_a_sample() {
    let localhost = IpAddr::V4(Ipv4Addr::LOCALHOST);
    // REFUSED, and NOERROR after 30 ms: both samples, the second about 30 ms.
    let (refused, queries) = dns_responder(5, Duration::ZERO);
    let (slow, _) = dns_responder(0, ms(30));
    for kind in [ProbeKind::DnsDot, ProbeKind::DnsRev] {
        let outcome = loopback_prober(refused, 53)
            .probe(kind, localhost, secs(2))
            .await;
        assert!(is_reply(&outcome), "{kind}: {outcome:?}");
        let ProbeOutcome::Reply(rtt) = loopback_prober(slow, 53)
            .probe(kind, localhost, secs(2))
            .await
        else {
            panic!("{kind}: no reply from the slow server")
        };
        assert!(rtt >= ms(30) && rtt < ms(500), "{kind}: {rtt:?}");
    }
    let queries = queries.lock().unwrap().clone();
    let asked: Vec<(String, RecordType, bool)> = queries
        .iter()
        .map(|m| {
            (
                m.queries[0].name().to_ascii(),
                m.queries[0].query_type(),
                m.recursion_desired,
            )
        })
        .collect();
    assert_eq!(
        asked,
        [
            (".".to_owned(), RecordType::NS, false),
            ("1.0.0.127.in-addr.arpa.".to_owned(), RecordType::PTR, false)
        ]
    );
    assert!(queries.iter().all(|m| m.message_type == MessageType::Query));

    // A closed port answers with an ICMP port unreachable: a sample too.
    let closed = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let outcome = loopback_prober(closed, 53)
        .probe(ProbeKind::DnsDot, localhost, secs(2))
        .await;
    assert!(is_reply(&outcome), "closed UDP port: {outcome:?}");

    // A server that never answers: no sample, after the timeout.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let started = Instant::now();
    let outcome = loopback_prober(silent.local_addr().unwrap().port(), 53)
        .probe(ProbeKind::DnsDot, localhost, ms(200))
        .await;
    assert_eq!(outcome, ProbeOutcome::NoReply);
    assert!(started.elapsed() >= ms(200));
}

#[tokio::test]
async fn icmp_probes_ping_the_loopback() {
    if gslb_user::health::icmp_mode(false).is_err() {
        gslb_tests::skip("no ICMP socket (neither ping group nor CAP_NET_RAW)");
        return;
    }
    for target in [
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(Ipv6Addr::LOCALHOST),
    ] {
        let outcome = NetProber::default()
            .probe(ProbeKind::Icmp, target, secs(2))
            .await;
        assert!(is_reply(&outcome), "{target}: {outcome:?}");
    }
}
