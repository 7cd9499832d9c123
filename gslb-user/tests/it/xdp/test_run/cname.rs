//! CNAME domains in the fast path (issue 29): the CNAME and the records after it, decoded and
//! checked down to the checksums, from both views, with and without EDNS, ECS and NSID (an
//! answer section of an odd length moves the OPT to the other parity); and what it leaves to
//! the responder (names in turn, a GSLB target, other types).

use crate::common;

use std::net::IpAddr;

use common::*;
use gslb_common::Counter;
use hickory_proto::op::Message;
use hickory_proto::rr::RecordType;

use super::{V4, V6, assert_records, dataplane_with, ecs_frame, nsid};

fn cname_to(target: &str) -> String {
    format!("{CNAME}. {CNAME_TTL} CNAME {target}.")
}

#[test]
fn answers_a_cname_with_the_addresses_that_follow_it() {
    let Some(dp) = dataplane_with("identity = \"xdp-1\"\n", "") else {
        return;
    };
    let (a, aaaa) = (RecordType::A, RecordType::AAAA);
    let edge = cname_to("edge.example.com");
    let edge_a = [
        edge.clone(),
        "edge.example.com. 3600 A 192.0.2.80".into(),
        "edge.example.com. 3600 A 192.0.2.81".into(),
    ];
    let edge_aaaa = [
        edge.clone(),
        "edge.example.com. 3600 AAAA 2001:db8::80".into(),
    ];
    // View v1: the CDN's name alone, 31 bytes.
    let cdn = [cname_to("o.cdn.example.net")];
    let v1_v4 = IpAddr::V4(V1_CLIENT_V4);
    let id = Some(&b"xdp-1"[..]);
    for server in [V4, V6] {
        for (rtype, records) in [(a, &edge_a[..]), (aaaa, &edge_aaaa[..])] {
            let msg = query(0x0c0c, CNAME, rtype);
            let case = format!("{rtype} over {server}");
            assert_records(
                &dp,
                &case,
                &Frame::query_to(server, wire(&msg)),
                rtype,
                None,
                None,
                records,
            );
            // With an OPT: empty, then asking for NSID.
            for (what, options, id) in [("EDNS", vec![], None), ("NSID", vec![nsid()], id)] {
                let client = if server == V4 {
                    IpAddr::V4(CLIENT_V4)
                } else {
                    IpAddr::V6(CLIENT_V6)
                };
                let frame = ecs_frame(client, server, CNAME, rtype, options);
                let case = format!("{rtype} with {what} over {server}");
                assert_records(&dp, &case, &frame, rtype, None, id, records);
            }
        }
    }
    // From view v1, and for v1's subnet over ECS (odd ECS lengths too), with and without NSID.
    let frame = Frame::query_from(v1_v4, wire(&query(0x0c0d, CNAME, a)));
    assert_records(&dp, "v1 client", &frame, a, None, None, &cdn);
    for options_id in [None, id] {
        for (subnet, client, server, scope) in [
            ("198.51.100.0/24", IpAddr::V4(CLIENT_V4), V4, 24),
            ("198.51.100.7/32", IpAddr::V4(CLIENT_V4), V4, 24),
            ("2001:db8:1::/48", IpAddr::V6(CLIENT_V6), V6, 48),
        ] {
            let mut options = vec![ecs_subnet(subnet)];
            if options_id.is_some() {
                options.push(nsid());
            }
            let frame = ecs_frame(client, server, CNAME, aaaa, options);
            let case = format!("ECS {subnet}, NSID {}", options_id.is_some());
            assert_records(&dp, &case, &frame, aaaa, Some(scope), options_id, &cdn);
        }
    }
}

#[test]
fn passes_cname_answers_it_cannot_give_whole() {
    let Some(dp) = dataplane_with("", "") else {
        return;
    };
    let cases: Vec<(&str, Message, Counter)> = vec![
        // Two names in turn: the set does not rotate names.
        (
            "names in turn",
            query(1, CNAMES, RecordType::A),
            Counter::NoAnswer,
        ),
        // The target is a GSLB domain, decided per client by the responder.
        (
            "a GSLB target",
            query(2, CHASE, RecordType::AAAA),
            Counter::NoAnswer,
        ),
        // Other types: the responder follows the CNAME.
        ("TXT", query(3, CNAME, RecordType::TXT), Counter::Qtype),
        ("CNAME", query(4, CNAME, RecordType::CNAME), Counter::Qtype),
    ];
    for (case, msg, reason) in cases {
        assert_passed(case, &dp, &Frame::v4(wire(&msg)).bytes(), reason);
    }
}
