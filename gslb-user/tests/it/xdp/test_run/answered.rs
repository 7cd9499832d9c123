//! What the fast path answers: each reply checked down to its checksums.

use crate::common;

use std::net::IpAddr;

use common::*;
use gslb_common::QNAME_MAX;
use hickory_proto::rr::RecordType;
use hickory_proto::rr::rdata::opt::EdnsOption;

use super::{
    V4, V6, all, client_cookie, dataplane_with, ecs_frame, nsid, padding, with_edns, with_options,
    www, www_default,
};

#[test]
fn answers_ecs_from_the_subnets_view_and_echoes_the_scope() {
    let Some(dp) = dataplane() else { return };
    let v1 = |rtype| {
        www(
            rtype,
            if rtype == RecordType::A {
                &WWW_V1_A
            } else {
                &WWW_V1_AAAA
            },
        )
    };
    let (a, aaaa) = (RecordType::A, RecordType::AAAA);
    // (what, name, qtype, options, expected answer, scope). View v1 is 198.51.100.0/24 and
    // 2001:db8:1::/48; the default-view resolvers CLIENT_V4/CLIENT_V6 send every query, so an
    // answer of v1 comes from the subnet. www differs by view (scope: v1's block); all is the
    // same for every client (scope 0).
    #[rustfmt::skip]
    type Case<'a> = (&'a str, &'a str, RecordType, Vec<EdnsOption>, Expect, u8);
    let cases: Vec<Case> = vec![
        (
            "v1 /24",
            WWW,
            a,
            vec![ecs_subnet("198.51.100.0/24")],
            v1(a),
            24,
        ),
        (
            "v1 /25, scope shorter",
            WWW,
            a,
            vec![ecs_subnet("198.51.100.128/25")],
            v1(a),
            24,
        ),
        (
            "v1 /32",
            WWW,
            a,
            vec![ecs_subnet("198.51.100.7/32")],
            v1(a),
            24,
        ),
        (
            "v1 /26 in a partial byte",
            WWW,
            a,
            vec![ecs_subnet("198.51.100.192/26")],
            v1(a),
            24,
        ),
        (
            "v1 IPv6 /48",
            WWW,
            aaaa,
            vec![ecs_subnet("2001:db8:1::/48")],
            v1(aaaa),
            48,
        ),
        (
            "v1 IPv6 /56",
            WWW,
            aaaa,
            vec![ecs_subnet("2001:db8:1:ff00::/56")],
            v1(aaaa),
            48,
        ),
        (
            "v1 IPv6 /128",
            WWW,
            aaaa,
            vec![ecs_subnet("2001:db8:1::77/128")],
            v1(aaaa),
            48,
        ),
        (
            "v1 IPv6 /61",
            WWW,
            aaaa,
            vec![ecs_subnet("2001:db8:1:8::/61")],
            v1(aaaa),
            48,
        ),
        (
            "v1 after a cookie",
            WWW,
            a,
            vec![client_cookie(), ecs_subnet("198.51.100.0/24")],
            v1(a),
            24,
        ),
        (
            "v1 before padding",
            WWW,
            aaaa,
            vec![ecs_subnet("2001:db8:1::/48"), padding(3)],
            v1(aaaa),
            48,
        ),
        (
            "same everywhere, no view",
            ALL,
            a,
            vec![ecs_subnet("203.0.113.0/24")],
            all(a),
            0,
        ),
        (
            "same everywhere, v1",
            ALL,
            aaaa,
            vec![ecs_subnet("2001:db8:1::/48")],
            all(aaaa),
            0,
        ),
        (
            "/0 names no client",
            WWW,
            a,
            vec![ecs_subnet("0.0.0.0/0")],
            www_default(a),
            0,
        ),
        (
            "IPv6 /0",
            WWW,
            aaaa,
            vec![ecs_subnet("::/0")],
            www_default(aaaa),
            0,
        ),
    ];
    for server in [V4, V6] {
        let client = if server.is_ipv4() {
            IpAddr::V4(CLIENT_V4)
        } else {
            IpAddr::V6(CLIENT_V6)
        };
        for (what, name, rtype, options, expect, scope) in &cases {
            let frame = ecs_frame(client, server, name, *rtype, options.clone());
            ask_scoped(
                &dp,
                &format!("{what} over {server}"),
                &frame,
                expect,
                *scope,
            );
        }
    }
    // A /0 subnet: the resolver is the client, here one of v1.
    let frame = ecs_frame(
        IpAddr::V4(V1_CLIENT_V4),
        V4,
        WWW,
        a,
        vec![ecs_subnet("0.0.0.0/0")],
    );
    ask_scoped(&dp, "/0 from a v1 resolver", &frame, &v1(a), 0);
}

#[test]
fn answers_a_and_aaaa_over_ipv4_and_ipv6_with_and_without_edns() {
    let Some(dp) = dataplane() else { return };
    for server in [V4, V6] {
        for rtype in [RecordType::A, RecordType::AAAA] {
            for edns in [false, true] {
                let mut msg = query(0x1000, WWW, rtype);
                if edns {
                    msg.set_edns(common::edns());
                }
                let case = format!("{rtype} over {server}, EDNS {edns}");
                ask(
                    &dp,
                    &case,
                    &Frame::query_to(server, wire(&msg)),
                    &www_default(rtype),
                );
            }
        }
    }
}

#[test]
fn copies_rd_cd_and_do_and_clears_ad() {
    let Some(dp) = dataplane() else { return };
    let do_set = {
        let mut opt = edns();
        opt.set_dnssec_ok(true);
        opt
    };
    #[rustfmt::skip]
    let cases = [
        ("RD clear", { let mut m = query(0x2000, WWW, RecordType::A); m.metadata.recursion_desired = false; m }),
        ("CD set", { let mut m = query(0x2001, WWW, RecordType::A); m.metadata.checking_disabled = true; m }),
        ("AD set in the query", { let mut m = query(0x2002, WWW, RecordType::A); m.metadata.authentic_data = true; m }),
        ("DO set", query(0x2003, WWW, RecordType::A).set_edns(do_set).clone()),
        ("DO clear", with_edns(query(0x2004, WWW, RecordType::A))),
    ];
    for server in [V4, V6] {
        for (name, msg) in &cases {
            let frame = Frame::query_to(server, wire(msg));
            ask(
                &dp,
                &format!("{name} over {server}"),
                &frame,
                &www_default(RecordType::A),
            );
        }
    }
}

#[test]
fn keeps_the_vlan_tag() {
    let Some(dp) = dataplane() else { return };
    for server in [V4, V6] {
        for edns in [false, true] {
            let mut msg = query(0x3000, WWW, RecordType::AAAA);
            if edns {
                msg.set_edns(common::edns());
            }
            // PCP 5, VID 100: the whole TCI must come back.
            let frame = Frame {
                vlan: Some(0xa064),
                ..Frame::query_to(server, wire(&msg))
            };
            let case = format!("VLAN over {server}, EDNS {edns}");
            ask(&dp, &case, &frame, &www_default(RecordType::AAAA));
        }
    }
}

#[test]
fn matches_names_case_insensitively_and_echoes_the_case() {
    let Some(dp) = dataplane() else { return };
    for server in [V4, V6] {
        // assert_reply compares the question bytes, so the case must come back as sent.
        let frame = Frame::query_to(
            server,
            wire(&query(0x4000, "wWw.ExAmPlE.cOm", RecordType::A)),
        );
        ask(
            &dp,
            &format!("mixed case over {server}"),
            &frame,
            &www_default(RecordType::A),
        );
    }
}

#[test]
fn answers_by_the_clients_view() {
    let Some(dp) = dataplane() else { return };
    let (v4, v6) = (IpAddr::V4, IpAddr::V6);
    #[rustfmt::skip]
    let cases = [
        (v4(V1_CLIENT_V4), V4, RecordType::A, &WWW_V1_A),
        (v4(CLIENT_V4), V4, RecordType::A, &WWW_A),
        (v6(V1_CLIENT_V6), V6, RecordType::AAAA, &WWW_V1_AAAA),
        (v6(CLIENT_V6), V6, RecordType::AAAA, &WWW_AAAA),
        // The view follows the client's address, whatever the record type.
        (v4(V1_CLIENT_V4), V4, RecordType::AAAA, &WWW_V1_AAAA),
        (v6(V1_CLIENT_V6), V6, RecordType::A, &WWW_V1_A),
        (v6(CLIENT_V6), V6, RecordType::A, &WWW_A),
    ];
    for (client, server, rtype, addrs) in cases {
        let frame = Frame::udp(client, server, wire(&query(0x5000, WWW, rtype)));
        ask(
            &dp,
            &format!("{rtype} from {client}"),
            &frame,
            &www(rtype, addrs),
        );
    }
}

#[test]
fn rotates_one_address_per_query() {
    let Some(dp) = dataplane() else { return };
    // The rotor is per CPU: stay on one so that consecutive runs take consecutive turns.
    pin_to_current_cpu();
    for (server, rtype) in [(V4, RecordType::A), (V6, RecordType::AAAA)] {
        let expect = www_default(rtype);
        let got: Vec<IpAddr> = (0..4)
            .map(|i| {
                let frame = Frame::query_to(server, wire(&query(0x6000 + i, WWW, rtype)));
                ask(&dp, &format!("{rtype} turn {i}"), &frame, &expect)[0]
            })
            .collect();
        let Answers::OneOf(set) = &expect.answers else {
            unreachable!()
        };
        assert!(
            got.windows(2).all(|w| w[0] != w[1]),
            "{rtype}: consecutive answers: {got:?}"
        );
        assert!(
            set.iter().all(|a| got.contains(a)),
            "{rtype}: every address in turn: {got:?}"
        );
    }
}

#[test]
fn answers_every_address_in_all_mode() {
    let Some(dp) = dataplane() else { return };
    for server in [V4, V6] {
        for rtype in [RecordType::A, RecordType::AAAA] {
            for msg in [
                query(0x7000, ALL, rtype),
                with_edns(query(0x7001, ALL, rtype)),
            ] {
                let case = format!("all {rtype} over {server}");
                ask(
                    &dp,
                    &case,
                    &Frame::query_to(server, wire(&msg)),
                    &all(rtype),
                );
            }
        }
    }
}

#[test]
fn answers_queries_with_cookies_or_padding_and_sends_no_options() {
    let Some(dp) = dataplane() else { return };
    let server_cookie = EdnsOption::Unknown(10, (0..24).collect());
    #[rustfmt::skip]
    let cases = [
        ("client cookie", vec![client_cookie()]),
        ("client and server cookie", vec![server_cookie]),
        ("padding", vec![padding(37)]),
        ("cookie and padding", vec![client_cookie(), padding(37)]),
        // As many options as the fast path looks through.
        ("four options", vec![client_cookie(), padding(1), EdnsOption::Unknown(65001, vec![]), padding(0)]),
    ];
    for server in [V4, V6] {
        for (name, options) in &cases {
            let frame = Frame::query_to(server, wire(&with_options(options.clone())));
            ask(
                &dp,
                &format!("{name} over {server}"),
                &frame,
                &www_default(RecordType::A),
            );
        }
    }
}

/// A query that asks for our identity (NSID, RFC 5001) gets it beside the answer, as from
/// the responder: alone, with data in the request (ignored), and after ECS options of odd and
/// even length (which move the option's checksum by a byte), for identities of 1 to 255 bytes.
/// Without `server.identity` the request is ignored, as the responder ignores it.
#[test]
fn answers_nsid_requests_with_the_identity() {
    let a = RecordType::A;
    for identity in [
        "a".to_owned(),
        "node".into(),
        "fra-1".into(),
        "xdp-fuzz".into(),
        "n".repeat(255),
    ] {
        let Some(dp) = dataplane_with(&format!("identity = \"{identity}\"\n"), "") else {
            return;
        };
        let id = Some(identity.as_bytes());
        let size = identity.len();
        for server in [V4, V6] {
            for (what, options) in [
                ("NSID", vec![nsid()]),
                ("NSID with data", vec![EdnsOption::Unknown(3, vec![1, 2])]),
                ("NSID before a cookie", vec![nsid(), client_cookie()]),
            ] {
                let frame = Frame::query_to(server, wire(&with_options(options)));
                let case = format!("{what}, a {size}-byte identity, over {server}");
                ask_with(&dp, &case, &frame, &www_default(a), None, id);
            }
        }
        // v1's subnets from the default view's resolvers: ECS options of 11, 12 and 14 bytes.
        for (subnet, client, server, scope) in [
            ("198.51.100.0/24", IpAddr::V4(CLIENT_V4), V4, 24),
            ("198.51.100.7/32", IpAddr::V4(CLIENT_V4), V4, 24),
            ("2001:db8:1::/48", IpAddr::V6(CLIENT_V6), V6, 48),
        ] {
            let frame = ecs_frame(client, server, WWW, a, vec![ecs_subnet(subnet), nsid()]);
            let case = format!("ECS {subnet}, then NSID, a {size}-byte identity");
            ask_with(&dp, &case, &frame, &www(a, &WWW_V1_A), Some(scope), id);
        }
    }
    let Some(dp) = dataplane() else { return };
    let frame = Frame::query_to(V4, wire(&with_options(vec![nsid()])));
    ask(&dp, "NSID without an identity", &frame, &www_default(a));
}

#[test]
fn answers_the_longest_name_that_fits_the_key() {
    let Some(dp) = dataplane() else { return };
    let msg = query(0x7100, &longest_name(), RecordType::A);
    assert_eq!(
        question_bytes(&wire(&msg)).len(),
        QNAME_MAX + 4,
        "name of QNAME_MAX bytes"
    );
    let expect = Expect {
        rtype: RecordType::A,
        ttl: 30,
        answers: Answers::OneOf(ips(&[LONGEST_A])),
    };
    for server in [V4, V6] {
        let case = format!("{QNAME_MAX}-byte name over {server}");
        ask(&dp, &case, &Frame::query_to(server, wire(&msg)), &expect);
    }
}

#[test]
fn answers_frames_with_ethernet_padding_or_a_trailer() {
    let Some(dp) = dataplane() else { return };
    // The shortest query the fast path answers does not fit a 60-byte frame (the root's query
    // alone is 59 bytes over IPv4), so a padded minimum frame is among the passed cases; here
    // the trailing zeros come in several sizes, odd ones included.
    for server in [V4, V6] {
        for trailer in [1, 2, 3, 7, 46] {
            for vlan in [None, Some(7)] {
                let msg = with_edns(query(0x7200, WWW, RecordType::A));
                let frame = Frame {
                    vlan,
                    trailer,
                    ..Frame::query_to(server, wire(&msg))
                };
                let case = format!("{trailer} trailing bytes, VLAN {vlan:?}, over {server}");
                ask(&dp, &case, &frame, &www_default(RecordType::A));
            }
        }
    }
}

#[test]
fn answers_ipv4_with_dont_fragment() {
    let Some(dp) = dataplane() else { return };
    let frame = Frame {
        ipv4_frag: 0x4000,
        ..Frame::v4(wire(&query(0x7300, WWW, RecordType::A)))
    };
    ask(&dp, "DF", &frame, &www_default(RecordType::A));
}
