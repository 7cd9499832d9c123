//! `server.ecs_allow` in the fast path (BPF_PROG_TEST_RUN): the program holds the list
//! (`ECS_ALLOW`), so a query from a listed resolver is answered from its subnet's view with the
//! scope echoed, and one from any other source from the source's own view with no option
//! echoed, each reply byte for byte one the responder gives to the same bytes from the same
//! source. A republish that changes the list changes it for whole generations only.
//! Needs root (see `common::privileged`).

use crate::common;

use std::{
    net::{IpAddr, Ipv4Addr},
    path::Path,
};

use common::*;
use gslb_common::{Counter, MAX_ADDRS};
use gslb_user::{
    compile::Snapshot,
    config::Config,
    dataplane::Dataplane,
    responder::{Responder, Transport},
};
use hickory_proto::rr::{RData, RecordType, rdata::opt::EdnsOption};

/// The list of most cases: CLIENT_V4 (203.0.113.7) and CLIENT_V6 (2001:db8:2::7) are in it,
/// the v1 clients are not. The /25 puts a boundary inside CLIENT_V4's /24.
const LIST: &str = r#"["203.0.113.0/25", "2001:db8:2::/48"]"#;

/// The test configuration with `ecs_allow = list` (none: the key absent).
fn config(list: Option<&str>) -> Config {
    let text = match list {
        Some(list) => {
            config_text().replacen("[server]\n", &format!("[server]\necs_allow = {list}\n"), 1)
        }
        None => config_text(),
    };
    Config::parse(&text, Path::new("ecs-allow.toml")).expect("test configuration")
}

/// Publishes the configuration with `list` and returns the responder of the same snapshot.
fn publish(dp: &mut Dataplane, config: &Config) -> Responder {
    let snapshot = Snapshot::from_config(config);
    dp.table.publish(&snapshot).expect("publishing");
    Responder::new(&snapshot)
}

fn loaded(list: Option<&str>) -> Option<(Dataplane, Responder)> {
    if !privileged() {
        return None;
    }
    let mut dp = Dataplane::load(None).expect("loading the XDP object");
    let responder = publish(&mut dp, &config(list));
    Some((dp, responder))
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// The DNS message of a frame as `Frame` builds it (untagged, no IP options).
fn dns(frame: &[u8]) -> &[u8] {
    let ip = if frame[12..14] == [0x86, 0xdd] {
        40
    } else {
        20
    };
    &frame[14 + ip + 8..]
}

/// The fast path's reply is byte for byte one the responder gives to the same query from the
/// same source (asked round a rotating set: the two keep separate turns).
fn assert_responder_agrees(case: &str, responder: &Responder, query: &Frame, out: &Outcome) {
    let (asked, ours) = (query.bytes(), dns(&out.frame).to_vec());
    let mut theirs = Vec::new();
    for _ in 0..MAX_ADDRS {
        let reply = responder
            .respond(dns(&asked), query.src, Transport::Udp)
            .expect("the responder answers");
        if reply == ours {
            return;
        }
        theirs.push(reply);
    }
    panic!("{case}: XDP {ours:02x?}\nis none of the responder's {theirs:02x?}");
}

/// www `rtype` from `src` with an OPT carrying `options`.
fn ecs_query(src: IpAddr, name: &str, rtype: RecordType, options: Vec<EdnsOption>) -> Frame {
    let mut opt = edns();
    for option in options {
        opt.options_mut().insert(option);
    }
    let mut msg = query(0xeca1, name, rtype);
    msg.set_edns(opt);
    Frame::query_from(src, wire(&msg))
}

fn www_view(rtype: RecordType, v1: bool) -> Expect {
    let addrs: &[&str] = match (rtype, v1) {
        (RecordType::A, false) => &WWW_A,
        (RecordType::A, true) => &WWW_V1_A,
        (_, false) => &WWW_AAAA,
        (_, true) => &WWW_V1_AAAA,
    };
    Expect {
        rtype,
        ttl: WWW_TTL,
        answers: Answers::OneOf(ips(addrs)),
    }
}

/// One case: (what, source, name, qtype, options, expected answer, echoed scope; `None`: the
/// OPT carries no option).
type Case<'a> = (
    &'a str,
    IpAddr,
    &'a str,
    RecordType,
    Vec<EdnsOption>,
    Expect,
    Option<u8>,
);

fn assert_cases(dp: &Dataplane, responder: &Responder, cases: Vec<Case>) {
    for (case, src, name, rtype, options, expect, scope) in cases {
        let frame = ecs_query(src, name, rtype, options);
        let bytes = frame.bytes();
        let out = run(dp, &bytes);
        assert_reply_scoped(case, &bytes, &out, &expect, scope);
        assert_responder_agrees(case, responder, &frame, &out);
    }
}

#[test]
fn a_listed_resolver_speaks_for_its_subnet() {
    let Some((dp, responder)) = loaded(Some(LIST)) else {
        return;
    };
    let (a, aaaa) = (RecordType::A, RecordType::AAAA);
    let v1 = ecs_subnet("198.51.100.0/24");
    let v1_6 = ecs_subnet("2001:db8:1::/48");
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        ("IPv4 resolver, v1 /24", CLIENT_V4.into(), WWW, a, vec![v1.clone()], www_view(a, true), Some(24)),
        ("IPv6 resolver, v1 /48", CLIENT_V6.into(), WWW, aaaa, vec![v1_6.clone()], www_view(aaaa, true), Some(48)),
        ("IPv6 resolver, an IPv4 subnet", CLIENT_V6.into(), WWW, a, vec![v1.clone()], www_view(a, true), Some(24)),
        ("the listed /25's first address", ip("203.0.113.0"), WWW, a, vec![v1.clone()], www_view(a, true), Some(24)),
        ("the listed /25's last address", ip("203.0.113.127"), WWW, a, vec![v1.clone()], www_view(a, true), Some(24)),
        ("the listed /48's last address", ip("2001:db8:2:ffff:ffff:ffff:ffff:ffff"), WWW, aaaa,
            vec![v1_6.clone()], www_view(aaaa, true), Some(48)),
        // A /0 names no client: the resolver's own view, scope 0, still echoed.
        ("a /0 subnet", CLIENT_V4.into(), WWW, a, vec![ecs_subnet("0.0.0.0/0")], www_view(a, false), Some(0)),
        ("an IPv6 /0 subnet", CLIENT_V6.into(), WWW, aaaa, vec![ecs_subnet("::/0")], www_view(aaaa, false), Some(0)),
    ];
    assert_cases(&dp, &responder, cases);
}

#[test]
fn any_other_source_is_its_own_client_and_gets_no_option() {
    let Some((dp, responder)) = loaded(Some(LIST)) else {
        return;
    };
    let (a, aaaa) = (RecordType::A, RecordType::AAAA);
    let v1 = ecs_subnet("198.51.100.0/24");
    // A subnet of the default view: the fast path cannot scope it, so taking it would pass.
    let default = ecs_subnet("203.0.113.0/24");
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        // Just past the listed /25: its own (default) view, though it claims v1.
        ("past the /25's end", ip("203.0.113.128"), WWW, a, vec![v1.clone()], www_view(a, false), None),
        ("past the /48's end", ip("2001:db8:3::"), WWW, aaaa, vec![ecs_subnet("2001:db8:1::/48")],
            www_view(aaaa, false), None),
        // A v1 client claiming the default view gets v1's answer, answered in XDP.
        ("a v1 client claiming another view", V1_CLIENT_V4.into(), WWW, a, vec![default.clone()],
            www_view(a, true), None),
        ("an IPv6 v1 client", V1_CLIENT_V6.into(), WWW, aaaa, vec![ecs_subnet("2001:db8:2::/48")],
            www_view(aaaa, true), None),
        ("a /0 subnet", V1_CLIENT_V4.into(), WWW, a, vec![ecs_subnet("0.0.0.0/0")], www_view(a, true), None),
        ("after a cookie", V1_CLIENT_V4.into(), WWW, a, vec![client_cookie(), default.clone()],
            www_view(a, true), None),
        ("all mode", ip("192.0.2.99"), ALL, a, vec![v1.clone()],
            Expect { rtype: a, ttl: ALL_TTL, answers: Answers::All(ips(&ALL_A)) }, None),
    ];
    assert_cases(&dp, &responder, cases);
}

fn client_cookie() -> EdnsOption {
    EdnsOption::Unknown(10, vec![0x5e, 0x1f, 0x2a, 0x3b, 0x4c, 0x5d, 0x6e, 0x7f])
}

/// What the program still leaves to the responder under a list, whoever sends it.
#[test]
fn passes_what_it_cannot_decide_under_a_list() {
    let Some((dp, _)) = loaded(Some(LIST)) else {
        return;
    };
    let v1 = || vec![ecs_subnet("198.51.100.0/24")];
    let mapped = |a: Ipv4Addr| IpAddr::V6(a.to_ipv6_mapped());
    #[rustfmt::skip]
    let cases = [
        // The kernel drops an IPv4-mapped source on an IPv6 wire; the responder never sees it.
        ("an IPv4-mapped listed source", ecs_query(mapped(CLIENT_V4), WWW, RecordType::A, v1()), Counter::MartianSource),
        ("an IPv4-mapped other source", ecs_query(mapped(V1_CLIENT_V4), WWW, RecordType::A, v1()), Counter::MartianSource),
        // Malformed is FORMERR from the responder whoever sends it.
        ("malformed from a listed source", ecs_query(CLIENT_V4.into(), WWW, RecordType::A,
            vec![ecs_option(1, 24, 8, &[198, 51, 100])]), Counter::EcsInvalid),
        ("malformed from another source", ecs_query(V1_CLIENT_V4.into(), WWW, RecordType::A,
            vec![ecs_option(1, 24, 0, &[198, 51, 100, 0])]), Counter::EcsInvalid),
        // A listed resolver's subnet in the default view: its scope is the responder's to say.
        ("a listed resolver's default-view subnet", ecs_query(CLIENT_V4.into(), WWW, RecordType::A,
            vec![ecs_subnet("192.0.2.0/24")]), Counter::ClientSubnet),
        // Taken for an IPv4 client by the responder; checked in the parse, before the source.
        ("an IPv6 subnet of IPv4-mapped addresses", ecs_query(V1_CLIENT_V6.into(), WWW, RecordType::AAAA,
            vec![ecs_subnet("::ffff:198.51.100.0/120")]), Counter::ClientSubnet),
    ];
    for (case, frame, reason) in cases {
        assert_passed(case, &dp, &frame.bytes(), reason);
    }
}

/// An IPv6 prefix around `::ffff:0:0/96` does not list IPv4 resolvers: the responder matches
/// an IPv4 source against IPv4 prefixes only, and so does the trie (its keys carry the family),
/// even for a listed IPv6 /128 with the very bytes of the resolver's IPv4-mapped key.
#[test]
fn an_ipv6_list_does_not_cover_ipv4_sources() {
    let mapped = format!(r#"["{}/128"]"#, CLIENT_V4.to_ipv6_mapped());
    for list in [r#"["::/0"]"#, r#"["::ffff:0:0/96"]"#, mapped.as_str()] {
        let Some((dp, responder)) = loaded(Some(list)) else {
            return;
        };
        let (a, aaaa) = (RecordType::A, RecordType::AAAA);
        let v1 = ecs_subnet("198.51.100.0/24");
        let v6_listed = list.contains("::/0");
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("an IPv4 resolver", CLIENT_V4.into(), WWW, a, vec![v1.clone()], www_view(a, false), None),
            ("an IPv6 resolver", CLIENT_V6.into(), WWW, aaaa, vec![ecs_subnet("2001:db8:1::/48")],
                www_view(aaaa, v6_listed), v6_listed.then_some(48)),
        ];
        assert_cases(&dp, &responder, cases);
    }
}

/// Each publish's list holds from its switch on: list A, then B, then none (everyone), then A
/// again (the parity written two publishes before, rewritten).
#[test]
fn a_republished_list_takes_effect() {
    let Some((mut dp, _)) = loaded(None) else {
        return;
    };
    let a = RecordType::A;
    let v1 = || vec![ecs_subnet("198.51.100.0/24")];
    let (first, second) = (IpAddr::V4(CLIENT_V4), ip("192.0.2.99"));
    // (list, whether `first` and `second` are listed)
    let steps = [
        (Some(r#"["203.0.113.0/24"]"#), [true, false]),
        (Some(r#"["192.0.2.0/24"]"#), [false, true]),
        (None, [true, true]),
        (Some(r#"["203.0.113.0/24"]"#), [true, false]),
        (Some(r#"["203.0.113.7/32", "192.0.2.99/32"]"#), [true, true]),
        (Some(r#"["2001:db8::/32"]"#), [false, false]),
    ];
    for (i, (list, listed)) in steps.into_iter().enumerate() {
        let responder = publish(&mut dp, &config(list));
        for (src, listed) in [(first, listed[0]), (second, listed[1])] {
            let case = format!("step {i} ({list:?}), {src}");
            let frame = ecs_query(src, WWW, a, v1());
            let bytes = frame.bytes();
            let out = run(&dp, &bytes);
            let scope = listed.then_some(24);
            assert_reply_scoped(&case, &bytes, &out, &www_view(a, listed), scope);
            assert_responder_agrees(&case, &responder, &frame, &out);
        }
    }
}

/// While one CPU runs the program in a loop, the other publishes two configurations
/// alternately: one lists the querying resolver and answers v1 with addresses X, the other
/// does not list it and answers everything with addresses Y. Every reply is one of the two
/// (v1's X with the option echoed, or the default view's Y without), never the list of one
/// generation with the answers of the other.
#[test]
fn a_republished_list_switches_with_its_answers() {
    let Some((mut dp, _)) = loaded(None) else {
        return;
    };
    assert!(
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get) >= 2,
        "this test needs two CPUs: one runs the program while the other publishes"
    );
    let listed = config(Some(r#"["203.0.113.0/24"]"#));
    // Every www address moved: 192.0.2.1x and .2x to .11x and .12x.
    let mut other_text = config_text().replacen(
        "[server]\n",
        "[server]\necs_allow = [\"192.0.2.0/24\"]\n",
        1,
    );
    for x in ["10", "11", "20", "21"] {
        other_text = other_text.replace(&format!("\"192.0.2.{x}\""), &format!("\"192.0.2.1{x}\""));
    }
    let other = Config::parse(&other_text, Path::new("ecs-allow-y.toml")).unwrap();
    let snapshots = [
        Snapshot::from_config(&listed),
        Snapshot::from_config(&other),
    ];
    let frame = ecs_query(
        CLIENT_V4.into(),
        WWW,
        RecordType::A,
        vec![ecs_subnet("198.51.100.0/24")],
    )
    .bytes();
    let (program, table) = dp.program_and_table();
    let seen = replies_while_publishing(program, table, &frame, &snapshots, 200, |dns, msg| {
        let answers: Vec<String> = msg
            .answers
            .iter()
            .map(|r| match &r.data {
                RData::A(a) => a.0.to_string(),
                other => format!("{other:?}"),
            })
            .collect();
        let echoed = if ecs_options(dns).is_empty() {
            "no option"
        } else {
            "echoed"
        };
        format!("{} {echoed}", answers.join(", "))
    });
    eprintln!("replies: {seen:?}");
    // X: v1's addresses; Y: the default view's of the other configuration.
    let allowed = [
        "192.0.2.20 echoed",
        "192.0.2.21 echoed",
        "192.0.2.110 no option",
        "192.0.2.111 no option",
    ];
    let unexpected: Vec<_> = seen
        .keys()
        .filter(|r| !allowed.contains(&r.as_str()))
        .collect();
    assert!(
        unexpected.is_empty(),
        "replies of no single generation: {unexpected:?} (all: {seen:?})"
    );
    assert!(
        seen.keys().any(|r| r.ends_with("echoed")) && seen.keys().any(|r| r.ends_with("option")),
        "both generations answered: {seen:?}"
    );
}
