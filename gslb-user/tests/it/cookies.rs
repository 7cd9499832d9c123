//! DNS cookies over gslbd's own sockets (issue 29): dig's `+cookie` gets a server cookie it
//! calls good, and a client that brings its server cookie back is let through response rate
//! limiting, while the same client without it is limited (RFC 7873 §5.2.3; NSD and Knot
//! exempt cookie-verified clients the same way).

use std::net::UdpSocket;
use std::time::Duration;

use crate::common::{self, Gslbd, WAIT, dig_loopback, loopback_zone};
use gslb_tests::TempDir;
use hickory_proto::op::{Edns, Message, Query};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use hickory_proto::rr::{Name, RecordType};

const SECRET: &str = "e5e973e5a6b2a43f48e7dc849e37bfcf";
const RATE: usize = 5;

fn config(port: u16) -> String {
    loopback_zone(port).replacen(
        "[server]\n",
        &format!("[server]\ncookie_secret = \"{SECRET}\"\n"),
        1,
    ) + &format!("[rrl]\nrate = {RATE}\nslip = 0\n")
}

fn query(id: u16, cookie: Option<&[u8]>) -> Vec<u8> {
    let mut q = Message::query();
    q.metadata.id = id;
    q.add_query(Query::query(
        Name::from_ascii("ns1.example.com.").unwrap(),
        RecordType::A,
    ));
    let mut edns = Edns::new();
    edns.set_max_payload(1232);
    if let Some(cookie) = cookie {
        edns.options_mut()
            .insert(EdnsOption::Unknown(10, cookie.to_vec()));
    }
    q.set_edns(edns);
    q.to_vec().unwrap()
}

/// Sends `n` queries at once from `socket`, then counts the replies with an answer that come
/// within 500 ms of the last; the last reply's cookie.
fn ask_n(
    socket: &UdpSocket,
    port: u16,
    n: usize,
    cookie: Option<&[u8]>,
) -> (usize, Option<Vec<u8>>) {
    socket
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    for i in 0..n {
        socket
            .send_to(&query(i as u16, cookie), ("127.0.0.1", port))
            .unwrap();
    }
    let (mut answered, mut last) = (0, None);
    let mut buf = [0u8; 1500];
    while let Ok(len) = socket.recv(&mut buf) {
        let reply = Message::from_vec(&buf[..len]).unwrap();
        if reply.answers.len() == 1 {
            answered += 1;
        }
        last = reply
            .edns
            .as_ref()
            .and_then(|e| e.option(EdnsCode::Cookie))
            .map(|o| match o {
                EdnsOption::Unknown(10, data) => data.clone(),
                other => panic!("{other:?}"),
            });
    }
    (answered, last)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookies_are_given_and_let_their_clients_through_rrl() {
    let dir = TempDir::new("cookies");
    let path = dir.0.join("gslb.toml");
    let (port, dns) = common::bound_dns();
    std::fs::write(&path, config(port)).unwrap();
    let gslbd = Gslbd::start_bound(&path, dns, None, WAIT).await;

    let out = dig_loopback(port, &["+cookie", "ns1.example.com", "A"]).await;
    let line = out
        .lines()
        .find(|l| l.starts_with("; COOKIE: "))
        .unwrap_or_else(|| panic!("no cookie: {out}"));
    // dig's 8-byte client cookie and our 16-byte server cookie, the client's matched.
    assert!(line.ends_with("(good)"), "{line}");
    assert_eq!(
        line.split_whitespace().nth(2).map(str::len),
        Some(48),
        "{line}"
    );

    let port_copy = port;
    let (without, with) = tokio::task::spawn_blocking(move || {
        let port = port_copy;
        // Without a cookie, 40 queries at once from one address: the bucket's burst, then
        // dropped (slip 0).
        let plain = UdpSocket::bind("127.0.0.3:0").unwrap();
        let (without, _) = ask_n(&plain, port, 40, None);
        // An address of another /24 (its own bucket) learns a server cookie, then asks 40 times bringing it back: all
        // answered, though as fast.
        let polite = UdpSocket::bind("127.0.1.4:0").unwrap();
        let (_, cookie) = ask_n(&polite, port, 1, Some(&[7; 8]));
        let cookie = cookie.expect("a server cookie");
        assert_eq!((cookie.len(), &cookie[..8]), (24, &[7u8; 8][..]));
        let (with, _) = ask_n(&polite, port, 40, Some(&cookie));
        (without, with)
    })
    .await
    .unwrap();
    assert!(
        without <= 2 * RATE,
        "without a cookie: {without} of 40 answered"
    );
    assert_eq!(with, 40, "with our cookie every query is answered");
    gslbd.stop().await;
}
