//! Wildcard GSLB domains in the fast path (RFC 4592, issue 29): a name one label below the
//! parent of a wildcard that nothing else is below gets the wildcard's answer, its owner the
//! name asked (a pointer to the question, in the client's case), per view and over ECS; what
//! the fast path leaves to the responder (deeper names, the parent itself, a wildcard with a
//! name beside it, a CNAME whose target's records follow it, other types).

use crate::common;

use std::net::IpAddr;

use common::*;
use gslb_common::Counter;
use hickory_proto::rr::RecordType;

use super::{V4, V6, assert_records, dataplane_with, ecs_frame, nsid};

/// `WILD`'s answer record for `name`.
fn wild(name: &str, rtype: RecordType, addr: &str) -> String {
    format!("{name}. {WILD_TTL} {rtype} {addr}")
}

#[test]
fn answers_every_name_one_label_below_the_parent() {
    let Some(dp) = dataplane_with("identity = \"xdp-1\"\n", "") else {
        return;
    };
    let (a, aaaa) = (RecordType::A, RecordType::AAAA);
    let label63 = "l".repeat(63);
    let long = format!("{label63}.gw.example.com");
    // Names of every length class (one label, 63 bytes; the wildcard itself asked; capitals,
    // answered as asked).
    let names = ["a.gw.example.com", "Host-42.GW.Example.COM", &long, WILD];
    for server in [V4, V6] {
        for name in names {
            for (rtype, addr) in [(a, "192.0.2.10"), (aaaa, "2001:db8:10::10")] {
                let msg = query(0x1d1d, name, rtype);
                let case = format!("{name} {rtype} over {server}");
                let frame = Frame::query_to(server, wire(&msg));
                let records = [wild(name, rtype, addr)];
                assert_records(&dp, &case, &frame, rtype, None, None, &records);
            }
        }
    }
    // View v1's answer, by source and over ECS (with NSID beside it).
    let v1 = IpAddr::V4(V1_CLIENT_V4);
    let frame = Frame::query_from(v1, wire(&query(0x1d1e, "x.gw.example.com", a)));
    let records = [wild("x.gw.example.com", a, "192.0.2.20")];
    assert_records(&dp, "v1 client", &frame, a, None, None, &records);
    let options = vec![ecs_subnet("2001:db8:1::/48"), nsid()];
    let frame = ecs_frame(IpAddr::V6(CLIENT_V6), V6, "y.gw.example.com", aaaa, options);
    let records = [wild("y.gw.example.com", aaaa, "2001:db8:20::20")];
    let id = Some(&b"xdp-1"[..]);
    assert_records(&dp, "v1 over ECS", &frame, aaaa, Some(48), id, &records);
    // A wildcard CNAME domain: the CNAME alone (view v1's) is answered with the name asked.
    let frame = Frame::query_from(v1, wire(&query(0x1d1f, "cdn.wc.example.com", aaaa)));
    let records = ["cdn.wc.example.com. 120 CNAME o.cdn.example.net.".to_owned()];
    assert_records(&dp, "wildcard CNAME", &frame, aaaa, None, None, &records);
}

#[test]
fn passes_what_the_wildcard_does_not_answer_alone() {
    let Some(dp) = dataplane_with("", "") else {
        return;
    };
    let cases: Vec<(&str, &str, RecordType, Counter)> = vec![
        // Two labels below: the closest encloser is for the responder to find.
        (
            "deeper",
            "a.b.gw.example.com",
            RecordType::A,
            Counter::UnknownName,
        ),
        // The parent is an empty non-terminal (NODATA), not the wildcard's.
        (
            "the parent",
            "gw.example.com",
            RecordType::A,
            Counter::UnknownName,
        ),
        // A static name beside the wildcard below its parent: only the responder knows which
        // names exist there.
        (
            "beside",
            "x.beside.example.com",
            RecordType::A,
            Counter::UnknownName,
        ),
        (
            "the static one",
            "static.beside.example.com",
            RecordType::A,
            Counter::UnknownName,
        ),
        // The CNAME whose target's addresses follow it: their owner points into a question
        // of the query's length.
        (
            "CNAME and its target",
            "x.wc.example.com",
            RecordType::A,
            Counter::NoAnswer,
        ),
        // Other types: the static wildcard TXT is the responder's.
        ("TXT", "a.gw.example.com", RecordType::TXT, Counter::Qtype),
    ];
    for (case, name, rtype, reason) in cases {
        let frame = Frame::v4(wire(&query(7, name, rtype)));
        assert_passed(case, &dp, &frame.bytes(), reason);
    }
}

/// examples/gslb-domain.toml's wildcard does what its comment says: names one label below
/// app.example.com are answered in the fast path, deeper ones by the responder.
#[test]
fn the_examples_wildcard_is_answered_one_label_below_its_parent() {
    if !privileged() {
        return;
    }
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/gslb-domain.toml");
    let config = gslb_user::config::Config::load(&path).expect("the example loads");
    let mut dp = gslb_user::dataplane::Dataplane::load(None).expect("loading the XDP object");
    dp.table
        .publish(&gslb_user::compile::Snapshot::from_config(&config))
        .expect("publishing");
    let name = "tenant-1.app.example.com";
    let frame = Frame::v4(wire(&query(0x7e7e, name, RecordType::A))).bytes();
    let expect = Expect {
        rtype: RecordType::A,
        ttl: 30,
        answers: Answers::OneOf(ips(&["198.51.100.10", "203.0.113.10"])),
    };
    assert_reply("the example's wildcard", &frame, &run(&dp, &frame), &expect);
    let deeper = Frame::v4(wire(&query(0x7e7f, "a.b.app.example.com", RecordType::A)));
    assert_passed("deeper", &dp, &deeper.bytes(), Counter::UnknownName);
}
