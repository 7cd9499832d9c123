//! The floor program (`gslb_floor`, benches only: the answering program's parse and reply
//! without a map lookup) run through BPF_PROG_TEST_RUN: it must turn a query around into a
//! valid reply (the checks of every fast-path reply, by etherparse and hickory), with no
//! records, for any name (it looks nothing up), and pass what the real program's parse
//! refuses, unchanged and uncounted; and its growing twin (`gslb_floor_grow`) must answer an A
//! query with its one constant record in a frame grown for it. Needs root; see
//! `common::privileged`.

use crate::common;

use std::net::IpAddr;

use common::*;
use gslb_user::dataplane::Dataplane;
use hickory_proto::op::{Message, MessageType};
use hickory_proto::rr::rdata::opt::EdnsOption;
use hickory_proto::rr::{RData, RecordType, rdata::A};

/// The test dataplane with the floor program loaded too.
fn floor_dataplane() -> Option<Dataplane> {
    let mut dp = dataplane()?;
    dp.load_floor().expect("loading the floor program");
    Some(dp)
}

/// `msg` with an OPT record, its DO bit `dnssec_ok`.
fn with_edns(mut msg: Message, dnssec_ok: bool) -> Message {
    let mut opt = edns();
    opt.set_dnssec_ok(dnssec_ok);
    msg.set_edns(opt);
    msg
}

fn run_floor(dp: &Dataplane, frame: &[u8]) -> Outcome {
    try_run_program(dp, dp.floor_program(), frame).expect("BPF_PROG_TEST_RUN")
}

#[test]
fn floor_turns_queries_around_without_records() {
    let Some(dp) = floor_dataplane() else {
        return;
    };
    let mut tagged = Frame::v4(wire(&query(7, WWW, RecordType::A)));
    tagged.vlan = Some(0x0064);
    let cases = [
        (
            "A over IPv4",
            Frame::v4(wire(&query(1, WWW, RecordType::A))),
        ),
        (
            "AAAA over IPv6",
            Frame::v6(wire(&query(2, WWW, RecordType::AAAA))),
        ),
        (
            "A with an OPT and DO",
            Frame::v4(wire(&with_edns(query(3, WWW, RecordType::A), true))),
        ),
        (
            "AAAA over IPv6 with an OPT",
            Frame::v6(wire(&with_edns(query(4, WWW, RecordType::AAAA), false))),
        ),
        // No lookup: a name nobody serves is turned around alike.
        (
            "a name not served",
            Frame::v4(wire(&query(5, "Not-Served.Example.ORG", RecordType::A))),
        ),
        ("VLAN-tagged", tagged),
    ];
    for (case, frame) in cases {
        let bytes = frame.bytes();
        let out = run_floor(&dp, &bytes);
        let t = assert_turned_around(case, &bytes, &out, None);
        assert!(t.reply.answers.is_empty(), "{case}: no records");
        let opt = t.asked.edns.is_some();
        assert_eq!(t.counts, [1, 0, 0, u16::from(opt)], "{case}: counts");
        assert_eq!(
            t.rdns.len(),
            12 + t.question_len + if opt { 11 } else { 0 },
            "{case}: size"
        );
        assert_eq!(
            out.frame.len(),
            bytes.len(),
            "{case}: the frame keeps its size"
        );
        assert!(out.counted.is_empty(), "{case}: counted {:?}", out.counted);
    }
}

#[test]
fn floor_passes_what_the_parse_refuses() {
    let Some(dp) = floor_dataplane() else {
        return;
    };
    let a = wire(&query(1, WWW, RecordType::A));
    let mut other_port = Frame::v4(a.clone());
    other_port.dst_port = 5353;
    let mut tcp = Frame::v4(a.clone());
    tcp.protocol = IPPROTO_TCP;
    let mut response = query(1, WWW, RecordType::A);
    response.metadata.message_type = MessageType::Response;
    // A query the reply would shrink (our OPT carries no options): the floor never resizes.
    let mut cookie = query(1, WWW, RecordType::A);
    let mut opt = edns();
    opt.options_mut().insert(EdnsOption::Unknown(
        10,
        vec![0x5e, 0x1f, 0x2a, 0x3b, 0x4c, 0x5d, 0x6e, 0x7f],
    ));
    cookie.set_edns(opt);
    let mut padded = Frame::v4(a.clone());
    padded.trailer = 4;
    let cases = [
        ("ARP", arp_request()),
        ("UDP to another port", other_port.bytes()),
        ("TCP", tcp.bytes()),
        ("a response", Frame::v4(wire(&response)).bytes()),
        (
            "MX",
            Frame::v4(wire(&query(1, WWW, RecordType::MX))).bytes(),
        ),
        ("an OPT with a cookie", Frame::v4(wire(&cookie)).bytes()),
        ("Ethernet padding", padded.bytes()),
        (
            "truncated in the name",
            Frame::query_to(IpAddr::V4(SERVER_V4), a[..20].to_vec()).bytes(),
        ),
    ];
    for (case, bytes) in cases {
        let out = run_floor(&dp, &bytes);
        assert_eq!(out.action, XDP_PASS, "{case}: action");
        assert!(out.frame == bytes, "{case}: passed unchanged");
        assert!(out.counted.is_empty(), "{case}: counted {:?}", out.counted);
    }
}

#[test]
fn floor_grow_answers_a_queries_with_one_record_in_a_grown_frame() {
    let Some(dp) = floor_dataplane() else {
        return;
    };
    let cases = [
        (
            "A over IPv4",
            Frame::v4(wire(&query(1, WWW, RecordType::A))),
        ),
        (
            "A over IPv6",
            Frame::v6(wire(&query(2, WWW, RecordType::A))),
        ),
        (
            "A with an OPT",
            Frame::v4(wire(&with_edns(query(3, WWW, RecordType::A), false))),
        ),
        (
            "a name not served",
            Frame::v4(wire(&query(4, "Not-Served.Example.ORG", RecordType::A))),
        ),
    ];
    for (case, frame) in cases {
        let bytes = frame.bytes();
        let out = try_run_program(&dp, dp.floor_grow_program(), &bytes).expect("test run");
        let t = assert_turned_around(case, &bytes, &out, None);
        let answers: Vec<(String, RData, u32)> = t
            .reply
            .answers
            .iter()
            .map(|r| (r.name.to_string(), r.data.clone(), r.ttl))
            .collect();
        let name = t.asked.queries[0].name().to_string();
        assert_eq!(
            answers,
            [(name, RData::A(A::new(192, 0, 2, 1)), 60)],
            "{case}: the one record"
        );
        assert_eq!(
            out.frame.len(),
            bytes.len() + 16,
            "{case}: grown by the record"
        );
        assert!(out.counted.is_empty(), "{case}: counted {:?}", out.counted);
    }
    // AAAA is not its to answer.
    let bytes = Frame::v4(wire(&query(5, WWW, RecordType::AAAA))).bytes();
    let out = try_run_program(&dp, dp.floor_grow_program(), &bytes).expect("test run");
    assert_eq!(out.action, XDP_PASS, "AAAA: action");
    assert!(out.frame == bytes, "AAAA: passed unchanged");
}
