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

/// The rollover the configuration describes, through a running gslbd's reloads: with the old
/// secret moved to `cookie_previous_secret`, a cookie made under it still lets its client
/// through RRL (a forged one does not); once the previous secret is dropped, it no longer does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_over_secret_still_verifies_until_it_is_dropped() {
    const NEW: &str = "dd3bdf9344b678b185a6f5cb60fca715";
    let dir = TempDir::new("cookie-rollover");
    let path = dir.0.join("gslb.toml");
    let (port, dns) = common::bound_dns();
    std::fs::write(&path, config(port)).unwrap();
    let gslbd = Gslbd::start_bound(&path, dns, None, WAIT).await;

    // Three clients, each of its own /24 (its own RRL bucket), learn a cookie under SECRET.
    let clients: Vec<(UdpSocket, Vec<u8>)> = tokio::task::spawn_blocking(move || {
        ["127.0.2.5", "127.0.3.5", "127.0.4.5"]
            .map(|ip| {
                let socket = UdpSocket::bind((ip, 0)).unwrap();
                let (_, cookie) = ask_n(&socket, port, 1, Some(&[9; 8]));
                (socket, cookie.expect("a server cookie"))
            })
            .into()
    })
    .await
    .unwrap();
    let [rolled, forged, dropped]: [(UdpSocket, Vec<u8>); 3] = clients.try_into().unwrap();

    let with_secrets = |previous: Option<&str>| {
        let mut text = config(port).replacen(SECRET, NEW, 1);
        if let Some(previous) = previous {
            text = text.replacen(
                "[server]\n",
                &format!("[server]\ncookie_previous_secret = \"{previous}\"\n"),
                1,
            );
        }
        text
    };
    std::fs::write(&path, with_secrets(Some(SECRET))).unwrap();
    gslbd.reload().await.expect("the rollover loads");
    let (rolled_answered, forged_answered) = tokio::task::spawn_blocking(move || {
        let (rolled_answered, _) = ask_n(&rolled.0, port, 40, Some(&rolled.1));
        let mut bad = forged.1.clone();
        bad[20] ^= 1;
        let (forged_answered, _) = ask_n(&forged.0, port, 40, Some(&bad));
        (rolled_answered, forged_answered)
    })
    .await
    .unwrap();
    assert_eq!(
        rolled_answered, 40,
        "a cookie of the previous secret is verified"
    );
    assert!(
        forged_answered <= 2 * RATE,
        "a forged cookie: {forged_answered} of 40 answered"
    );

    std::fs::write(&path, with_secrets(None)).unwrap();
    gslbd.reload().await.expect("the previous secret dropped");
    let dropped_answered =
        tokio::task::spawn_blocking(move || ask_n(&dropped.0, port, 40, Some(&dropped.1)).0)
            .await
            .unwrap();
    assert!(
        dropped_answered <= 2 * RATE,
        "after the previous secret is dropped: {dropped_answered} of 40 answered"
    );
    gslbd.stop().await;
}
