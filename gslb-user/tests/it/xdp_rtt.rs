//! A domain answered by RTT, through the fast path (BPF_PROG_TEST_RUN): a client whose LDNS has
//! an RTT row gets the nearest site (its LDNS view), both families; a client without one gets
//! the next method of the chain (the view's answer); the responder gives the same answers.

use crate::common;

use std::{net::IpAddr, path::Path, sync::Arc};

use common::{Answers, Expect, Frame, assert_reply, query, responder_addrs, run, wire};
use gslb_user::{
    compile::{Inputs, LdnsRtt, Snapshot},
    config::Config,
    dataplane::Dataplane,
    responder::Responder,
};
use hickory_proto::rr::RecordType;

const CONFIG: &str = r#"
[server]
listen = ["192.0.2.53", "2001:db8::53"]
[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"
[[site]]
name = "near"
ip = "192.0.2.1"
[[site]]
name = "far"
ip = "192.0.2.2"
[[service]]
name = "near-v4"
ip = "192.0.2.10"
site = "near"
[[service]]
name = "far-v4"
ip = "192.0.2.20"
site = "far"
[[service]]
name = "near-v6"
ip = "2001:db8::10"
site = "near"
[[service]]
name = "far-v6"
ip = "2001:db8::20"
site = "far"
[[gslb_domain]]
name = "www.example.com"
ttl = 30
method = "rtt"
alternate = "roundrobin"
services = ["near-v4", "far-v4", "near-v6", "far-v6"]
"#;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A query for www.example.com from `client` to the server of its family, as a frame.
fn www_query(client: IpAddr, rtype: RecordType) -> Vec<u8> {
    Frame::query_from(client, wire(&query(7, "www.example.com", rtype))).bytes()
}

/// Rows: 198.51.100.0/24 and 2001:db8:1::/48 are 10 ms from "near" and 40 ms from "far";
/// 203.0.113.0/24 the other way round.
fn rows() -> Arc<Vec<LdnsRtt>> {
    let row = |net: &str, near: u32, far: u32| LdnsRtt {
        ldns: net.parse().unwrap(),
        rtt_us: vec![Some(near * 1000), Some(far * 1000)],
    };
    Arc::new(vec![
        row("198.51.100.0/24", 10, 40),
        row("203.0.113.0/24", 40, 10),
        row("2001:db8:1::/48", 10, 40),
    ])
}

#[test]
fn rtt_answers_come_from_the_ldns_view() {
    let config = Config::parse(CONFIG, Path::new("rtt.toml")).unwrap();
    let snapshot = Snapshot::compile(
        &config,
        &Inputs {
            rtt: rows(),
            ..Inputs::default()
        },
    );
    let entry = snapshot
        .domains
        .iter()
        .find(|d| d.qtype == 1)
        .expect("an A entry");
    assert!(entry.by_rtt, "{entry:?}");
    assert!(snapshot.stats.rtt_views >= 2, "{:?}", snapshot.stats);

    // (client, qtype, answers): one of the set when the answer rotates.
    let table: [(&str, RecordType, &[&str]); 6] = [
        ("198.51.100.7", RecordType::A, &["192.0.2.10"]),
        ("203.0.113.7", RecordType::A, &["192.0.2.20"]),
        ("2001:db8:1::7", RecordType::AAAA, &["2001:db8::10"]),
        // No RTT row: round robin over both sites.
        ("192.0.2.99", RecordType::A, &["192.0.2.10", "192.0.2.20"]),
        (
            "2001:db8:2::7",
            RecordType::AAAA,
            &["2001:db8::10", "2001:db8::20"],
        ),
        // An LDNS view, but AAAA from a v4 client in a row: near's IPv6 service.
        ("198.51.100.8", RecordType::AAAA, &["2001:db8::10"]),
    ];

    // Each query four times: a rotating answer would show its other address.
    let table: Vec<_> = table.iter().flat_map(|row| [*row; 4]).collect();
    let responder = Responder::new(&config, &snapshot);
    for &(client, rtype, want) in &table {
        let want: Vec<IpAddr> = want.iter().map(|a| ip(a)).collect();
        let got = responder_addrs(&responder, "www.example.com", rtype, ip(client));
        assert!(
            got.len() == 1 && want.contains(&got[0]),
            "responder, {client} {rtype}: {got:?}, want one of {want:?}"
        );
    }

    if !common::privileged() {
        return;
    }
    let mut dp = Dataplane::load(None).expect("loading the XDP object");
    dp.table.publish(&snapshot).expect("publishing");
    for &(client, rtype, want) in &table {
        let want: Vec<IpAddr> = want.iter().map(|a| ip(a)).collect();
        let frame = www_query(ip(client), rtype);
        let out = run(&dp, &frame);
        let expect = Expect {
            rtype,
            ttl: 30,
            answers: Answers::OneOf(want.clone()),
        };
        assert_reply(&format!("{client} {rtype}"), &frame, &out, &expect);
    }
}

/// The RTT answers live in the choice map (`RTT_CHOICE`: LDNS view × signature → outcome
/// index) and in one answer set per outcome, not per LDNS view; through it, XDP's reply
/// (decoded, checksums checked) is the responder's, from the same snapshot, for clients with
/// an RTT row and without one.
#[test]
fn the_choice_map_answers_as_the_responder() {
    let config = Config::parse(CONFIG, Path::new("rtt.toml")).unwrap();
    let snapshot = Snapshot::compile(
        &config,
        &Inputs {
            rtt: rows(),
            ..Inputs::default()
        },
    );
    let choices = &snapshot.rtt_choices;
    assert!(
        !snapshot.stats.rtt_to_responder && choices.slots == 2,
        "one RTT slot per family: {:?}",
        snapshot.stats
    );
    for entry in snapshot.domains.iter().filter(|d| d.by_rtt) {
        // near or far: two outcomes, whatever the number of LDNS views.
        let outcomes: Vec<u32> = entry.rtt_answers.iter().map(|(o, _)| *o).collect();
        assert!(outcomes.len() <= 2, "{entry:?}");
        for view in 1..choices.views() as u32 {
            if let Some(o) = choices.choice(view, entry.rtt_slot) {
                assert!(outcomes.contains(&u32::from(o)), "view {view}: {o}");
            }
        }
    }
    if !common::privileged() {
        return;
    }
    let responder = Responder::new(&config, &snapshot);
    let mut dp = Dataplane::load(None).expect("loading the XDP object");
    let stats = dp.table.publish(&snapshot).expect("publishing");
    // The v4 and v6 rows nearest "near" share one LDNS view (the same choices), "far" another.
    assert_eq!(snapshot.stats.rtt_views, 2, "{:?}", snapshot.stats);
    assert_eq!(stats.choices, 2, "a page per LDNS view: {stats:?}");
    // (client, qtype, the nearest site's address for a client with an RTT row)
    let table = [
        ("198.51.100.7", RecordType::A, Some("192.0.2.10")),
        ("203.0.113.7", RecordType::A, Some("192.0.2.20")),
        ("2001:db8:1::7", RecordType::AAAA, Some("2001:db8::10")),
        ("192.0.2.99", RecordType::A, None),
        ("2001:db8:2::7", RecordType::AAAA, None),
    ];
    for (client, rtype, nearest) in table {
        let frame = www_query(ip(client), rtype);
        let out = run(&dp, &frame);
        let want = responder_addrs(&responder, "www.example.com", rtype, ip(client));
        assert_eq!(want.len(), 1, "{client}: one address");
        let got = assert_reply(
            &format!("{client} {rtype}"),
            &frame,
            &out,
            &Expect {
                rtype,
                ttl: 30,
                answers: Answers::OneOf(want.clone()),
            },
        );
        assert_eq!(got, want, "{client} {rtype}: XDP and the responder");
        if let Some(nearest) = nearest {
            assert_eq!(got, [ip(nearest)], "{client} {rtype}: the nearest site");
        }
    }
}
