//! Any number of services per domain, and `max_answers` (issue 29), through gslbd's own
//! sockets as dig sees them: 300 services of each family in a domain and in a view, one
//! address an answer by default, a window of two that moves, and 256 AAAA records that UDP
//! truncates (TC) and TCP carries whole.

use std::collections::BTreeSet;
use std::net::IpAddr;

use crate::common::{self, Gslbd, WAIT, dig_loopback, loopback_zone};
use gslb_tests::{TempDir, dig_answers, dig_flags};

/// Services v4-0..v4-299 and v6-0..v6-299 at site "s"; domains over all of them, and a view
/// (the loopback, where dig asks from) over the first 256 of each family.
fn config(port: u16) -> String {
    let mut text = loopback_zone(port);
    text += "[[site]]\nname = \"s\"\nip = \"127.0.0.1\"\n";
    text += "[[view]]\nname = \"local\"\nprefixes = [\"127.0.0.0/8\"]\n";
    let mut all = Vec::new();
    let mut view = Vec::new();
    for i in 0..300u32 {
        let (a, b) = (i / 250, i % 250);
        text += &format!(
            "[[service]]\nname = \"v4-{i}\"\nip = \"10.{a}.{b}.1\"\nsite = \"s\"\n\
             [[service]]\nname = \"v6-{i}\"\nip = \"2001:db8:{a:x}:{b:x}::1\"\nsite = \"s\"\n"
        );
        all.push(format!("\"v4-{i}\", \"v6-{i}\""));
        if i < 256 {
            view.push(format!("\"v4-{i}\", \"v6-{i}\""));
        }
    }
    let (all, view) = (all.join(", "), view.join(", "));
    for (name, settings) in [
        ("one", ""),
        ("pair", "max_answers = 2\n"),
        ("wide", "answer = \"all\"\nmax_answers = 256\n"),
    ] {
        text += &format!(
            "[[gslb_domain]]\nname = \"{name}.example.com\"\n{settings}services = [{all}]\n\
             [[gslb_domain.view]]\nview = \"local\"\nservices = [{view}]\n"
        );
    }
    text
}

fn addrs(out: &str) -> Vec<IpAddr> {
    dig_answers(out)
        .into_iter()
        .map(|(_, _, value)| value.parse().unwrap())
        .collect()
}

/// The view's services are the first 256 of the family: 10.0.0.1..10.0.249.1, 10.1.0.1..
fn in_view(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [_, a, b, _] = v4.octets();
            u32::from(a) * 250 + u32::from(b) < 256
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            u32::from(s[2]) * 250 + u32::from(s[3]) < 256
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dig_gets_max_answers_of_hundreds_of_services() {
    let dir = TempDir::new("max-answers");
    let path = dir.0.join("gslb.toml");
    let (port, dns) = common::bound_dns();
    std::fs::write(&path, config(port)).unwrap();
    let gslbd = Gslbd::start_bound(&path, dns, None, WAIT).await;

    // One address an answer, rotating through the view's 256.
    let mut seen = BTreeSet::new();
    for _ in 0..6 {
        let got = addrs(&dig_loopback(port, &["one.example.com", "A"]).await);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(in_view(got[0]), "{got:?}");
        seen.insert(got[0]);
    }
    assert_eq!(seen.len(), 6, "six answers, six addresses: {seen:?}");

    // Two distinct addresses an answer, the window moving one a turn.
    let first = addrs(&dig_loopback(port, &["pair.example.com", "AAAA"]).await);
    let second = addrs(&dig_loopback(port, &["pair.example.com", "AAAA"]).await);
    assert_eq!((first.len(), second.len()), (2, 2), "{first:?} {second:?}");
    assert_ne!(first[0], first[1]);
    assert_eq!(
        second[0], first[1],
        "the next window starts where the last went on"
    );
    assert!(
        first
            .iter()
            .chain(&second)
            .all(|&a| in_view(a) && a.is_ipv6())
    );

    // 256 AAAA records (7 KB): over UDP (no EDNS: 512 bytes) the reply says TC, and over TCP
    // they all come, each once, all of the view.
    let udp = dig_loopback(port, &["+ignore", "+noedns", "wide.example.com", "AAAA"]).await;
    assert!(dig_flags(&udp).contains(&"tc".to_owned()), "{udp}");
    assert!(udp.contains("status: NOERROR"), "{udp}");
    let tcp = dig_loopback(port, &["+tcp", "wide.example.com", "AAAA"]).await;
    let got = addrs(&tcp);
    assert!(!dig_flags(&tcp).contains(&"tc".to_owned()), "{tcp}");
    assert_eq!(got.len(), 256, "{tcp}");
    assert_eq!(got.iter().collect::<BTreeSet<_>>().len(), 256);
    assert!(got.iter().all(|&a| in_view(a) && a.is_ipv6()));
    // dig retries a truncated reply over TCP itself, as resolvers do.
    let retried = addrs(&dig_loopback(port, &["wide.example.com", "AAAA"]).await);
    assert_eq!(retried.len(), 256);
    gslbd.stop().await;
}
