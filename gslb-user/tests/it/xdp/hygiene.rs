//! What the fast path must not answer although it could (issue 12, "XDP hygiene"), and the
//! stale fast path: queries from martian sources or source port 0, frames to or from group MACs
//! or to another host's MAC, IPv6 UDP without a checksum, and everything once the controller's
//! heartbeat is older than its bound. Each is passed to the stack unchanged and counted by
//! reason; martian sources and names we do not serve never reach the `LDNS` map.
//! BPF_PROG_TEST_RUN; needs root (see `common::privileged`).

use crate::common;

use std::{net::IpAddr, time::Duration};

use common::*;
use gslb_common::Counter;
use gslb_user::dataplane::{Dataplane, monotonic_ns};
use hickory_proto::rr::RecordType;

const V4: IpAddr = IpAddr::V4(SERVER_V4);
const V6: IpAddr = IpAddr::V6(SERVER_V6);

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A www query from `src` to the server of its family (A over IPv4, AAAA over IPv6).
fn www_from(src: IpAddr) -> Frame {
    let (server, rtype) = match src {
        IpAddr::V4(_) => (V4, RecordType::A),
        IpAddr::V6(_) => (V6, RecordType::AAAA),
    };
    Frame::udp(src, server, wire(&query(0x4242, WWW, rtype)))
}

fn recorded(dp: &mut Dataplane) -> Vec<IpAddr> {
    let mut seen: Vec<IpAddr> = dp
        .ldns()
        .expect("the LDNS map")
        .scan(Duration::from_secs(180))
        .expect("scanning LDNS")
        .seen
        .iter()
        .map(|s| s.addr)
        .collect();
    seen.sort();
    seen
}

fn assert_answered(dp: &Dataplane, case: &str, frame: &[u8]) -> Outcome {
    let out = run(dp, frame);
    assert_eq!(
        out.action, XDP_TX,
        "{case}: action (counted {:?})",
        out.counted
    );
    out
}

#[test]
fn passes_queries_from_martian_sources_and_does_not_record_them() {
    let Some(mut dp) = dataplane() else { return };
    #[rustfmt::skip]
    let martians = [
        "0.0.0.0", "0.1.2.3", "127.0.0.1", "127.0.0.9", "169.254.1.1", "224.0.0.251",
        "239.255.255.250", "240.0.0.1", "255.255.255.255",
        "::", "::1", "fe80::1", "febf:ffff::1", "ff02::1", "ff0e::fb",
        "::ffff:127.0.0.1", "::ffff:0.0.0.0", "::ffff:224.0.0.1", "::ffff:169.254.9.9",
        "::ffff:255.255.255.255",
    ];
    for src in martians {
        let src = ip(src);
        assert!(
            match src {
                IpAddr::V4(a) => gslb_common::martian_v4(a.octets()),
                IpAddr::V6(a) => gslb_common::martian_v6(a.octets()),
            },
            "{src}: the shared rule agrees"
        );
        assert_passed(
            &format!("from {src}"),
            &dp,
            &www_from(src).bytes(),
            Counter::MartianSource,
        );
    }
    // On an IPv6 wire every IPv4-mapped source is passed: the kernel drops those.
    assert_passed(
        "IPv4-mapped resolver over IPv6",
        &dp,
        &www_from(ip("::ffff:198.51.100.7")).bytes(),
        Counter::MartianSource,
    );
    assert_eq!(recorded(&mut dp), [] as [IpAddr; 0], "martians recorded");
    // Their neighbours are resolvers like any other: answered and recorded.
    let near = [
        "1.0.0.1",
        "169.253.1.1",
        "223.255.255.254",
        "fec0::1",
        "::2",
    ];
    for src in near {
        assert_answered(&dp, src, &www_from(ip(src)).bytes());
    }
    let mut want: Vec<IpAddr> = near.iter().map(|s| ip(s)).collect();
    want.sort();
    assert_eq!(recorded(&mut dp), want);
}

#[test]
fn passes_ipv6_queries_to_an_ipv4_mapped_destination() {
    let Some(dp) = dataplane() else { return };
    let mapped = IpAddr::V6(SERVER_V4.to_ipv6_mapped());
    let frame = Frame::udp(
        IpAddr::V6(CLIENT_V6),
        mapped,
        wire(&query(6, WWW, RecordType::A)),
    );
    assert_passed(
        "to ::ffff:192.0.2.53",
        &dp,
        &frame.bytes(),
        Counter::OtherDestination,
    );
}

#[test]
fn passes_queries_from_source_port_zero() {
    let Some(mut dp) = dataplane() else { return };
    for server in [V4, V6] {
        let frame = Frame {
            src_port: 0,
            ..Frame::query_to(server, wire(&query(1, WWW, RecordType::A)))
        };
        assert_passed(
            &format!("port 0 over {server}"),
            &dp,
            &frame.bytes(),
            Counter::SourcePortZero,
        );
    }
    assert!(recorded(&mut dp).is_empty());
}

#[test]
fn passes_frames_to_or_from_group_macs() {
    let Some(dp) = dataplane() else { return };
    let broadcast = [0xff; 6];
    let ipv4_multicast = [0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb];
    let ipv6_multicast = [0x33, 0x33, 0x00, 0x00, 0x00, 0x01];
    for server in [V4, V6] {
        for (what, dst, src) in [
            ("to broadcast", broadcast, CLIENT_MAC),
            ("to IPv4 multicast", ipv4_multicast, CLIENT_MAC),
            ("to IPv6 multicast", ipv6_multicast, CLIENT_MAC),
            ("from a multicast MAC", SERVER_MAC, ipv4_multicast),
            ("from broadcast", SERVER_MAC, broadcast),
        ] {
            let frame = Frame {
                dst_mac: dst,
                src_mac: src,
                ..Frame::query_to(server, wire(&query(2, WWW, RecordType::A)))
            };
            assert_passed(
                &format!("{what} over {server}"),
                &dp,
                &frame.bytes(),
                Counter::GroupMac,
            );
        }
    }
}

#[test]
fn answers_only_frames_to_the_interfaces_own_mac_and_replies_from_it() {
    let Some(mut dp) = dataplane() else { return };
    let other_host = [0x02, 0x00, 0x00, 0x00, 0x00, 0x99];
    let to_other = Frame {
        dst_mac: other_host,
        ..Frame::v4(wire(&query(3, WWW, RecordType::A)))
    };
    // No interface attached (test_run only): the destination is not checked.
    assert_answered(&dp, "before any MAC is known", &to_other.bytes());
    dp.add_local_mac(SERVER_MAC).unwrap();
    for server in [V4, V6] {
        let ours = Frame::query_to(server, wire(&query(3, WWW, RecordType::A)));
        let out = assert_answered(&dp, "to our MAC", &ours.bytes());
        assert_eq!(out.frame[..6], CLIENT_MAC, "reply to the client");
        assert_eq!(out.frame[6..12], SERVER_MAC, "reply from our own MAC");
        let theirs = Frame {
            dst_mac: other_host,
            ..ours
        };
        assert_passed(
            &format!("to another host's MAC over {server}"),
            &dp,
            &theirs.bytes(),
            Counter::OtherMac,
        );
    }
    // A second interface's MAC is answered too.
    dp.add_local_mac(other_host).unwrap();
    assert_answered(&dp, "to the second MAC", &to_other.bytes());
}

#[test]
fn passes_ipv6_udp_without_a_checksum() {
    let Some(dp) = dataplane() else { return };
    let zero_checksum = |server| {
        let mut bytes = Frame::query_to(server, wire(&query(4, WWW, RecordType::A))).bytes();
        let l4 = 14 + if server == V6 { 40 } else { 20 };
        bytes[l4 + 6..l4 + 8].fill(0);
        bytes
    };
    assert_passed(
        "IPv6, checksum 0",
        &dp,
        &zero_checksum(V6),
        Counter::UdpChecksumZero,
    );
    // Over IPv4, 0 means "no checksum" and is valid.
    assert_answered(&dp, "IPv4, checksum 0", &zero_checksum(V4));
}

#[test]
fn passes_ipv4_with_a_wrong_header_checksum() {
    let Some(dp) = dataplane() else { return };
    let mut bytes = Frame::v4(wire(&query(7, WWW, RecordType::A))).bytes();
    // The identification field changed on the way, the checksum not.
    bytes[14 + 4] ^= 0x10;
    assert_passed("IPv4 header checksum", &dp, &bytes, Counter::Ipv4Checksum);
}

#[test]
fn records_only_queries_for_names_it_serves() {
    let Some(mut dp) = dataplane() else { return };
    let (hit, no_answer, unknown, txt) = (
        ip("198.51.100.1"),
        ip("203.0.113.2"),
        ip("203.0.113.3"),
        ip("203.0.113.4"),
    );
    assert_answered(&dp, "hit", &www_from(hit).bytes());
    let cases = [
        (no_answer, V1_ONLY, RecordType::A, Counter::NoAnswer),
        (
            unknown,
            "nope.example.com",
            RecordType::A,
            Counter::UnknownName,
        ),
        (txt, "nope.example.com", RecordType::TXT, Counter::Qtype),
    ];
    for (src, name, rtype, reason) in cases {
        let frame = Frame::udp(src, V4, wire(&query(5, name, rtype)));
        assert_passed(&format!("{name} {rtype}"), &dp, &frame.bytes(), reason);
    }
    // A name known without an answer for this client is ours; the others are not.
    let mut want = vec![hit, no_answer];
    want.sort();
    assert_eq!(recorded(&mut dp), want);
}

/// Issue 29: a domain's answer set holds at most `MAX_ADDRS` records and gives all of them or
/// one in turn; ten services one at a time, or a window of two that moves, are the
/// responder's (no answer in the map), and the same domain's other family is the program's.
#[test]
fn leaves_answers_its_set_cannot_give_to_the_responder() {
    let Some(dp) = dataplane() else { return };
    let src = ip("198.51.100.7");
    for (name, rtype) in [
        (MANY, RecordType::A),
        (WINDOW, RecordType::A),
        (WINDOW, RecordType::AAAA),
    ] {
        let frame = Frame::udp(src, V4, wire(&query(5, name, rtype)));
        assert_passed(
            &format!("{name} {rtype}"),
            &dp,
            &frame.bytes(),
            Counter::NoAnswer,
        );
    }
    let frame = Frame::udp(src, V4, wire(&query(5, MANY, RecordType::AAAA)));
    assert_answered(&dp, "many AAAA: one service", &frame.bytes());
}

#[test]
fn passes_everything_once_the_heartbeat_is_stale() {
    let Some(mut dp) = dataplane() else { return };
    let mut heartbeat = dp.take_heartbeat().expect("the heartbeat map");
    let bound = Duration::from_secs(3);
    let query = www_from(ip("198.51.100.9")).bytes();
    let arp = arp_request();
    // The program keeps its verdict per CPU for one kernel tick (at most 10 ms): wait one
    // out after each change.
    let tick = || std::thread::sleep(Duration::from_millis(20));

    // Never written (a dataplane no controller beats for), or fresh: answered.
    assert_answered(&dp, "no heartbeat", &query);
    heartbeat.beat(Some(bound)).unwrap();
    tick();
    assert_answered(&dp, "fresh heartbeat", &query);
    assert_passed("ARP, fresh", &dp, &arp, Counter::NotIp);

    // Older than the bound: passed, whatever the frame.
    let old = monotonic_ns() - 10_000_000_000;
    heartbeat.beat_at(old, Some(bound)).unwrap();
    tick();
    assert_passed("stale query", &dp, &query, Counter::Stale);
    assert_passed("stale ARP", &dp, &arp, Counter::Stale);
    // Just inside the bound: answered.
    heartbeat
        .beat_at(monotonic_ns() - 2_000_000_000, Some(bound))
        .unwrap();
    tick();
    assert_answered(&dp, "2 s old, bound 3 s", &query);
    // `stale_after_s = 0`: never stale.
    heartbeat.beat_at(old, None).unwrap();
    tick();
    assert_answered(&dp, "old heartbeat, never stale", &query);
    // A beat taken just now may be ahead of the program's coarse clock: not stale.
    heartbeat
        .beat_at(monotonic_ns() + 5_000_000, Some(bound))
        .unwrap();
    tick();
    assert_answered(&dp, "beat ahead of the coarse clock", &query);
}
