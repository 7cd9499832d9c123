//! The checks of the fast path's replies: the envelope turned around, the answers against what
//! the responder says for the same question, or the frame passed with its counter.

use std::net::IpAddr;

use etherparse::{IpNumber, Ipv4HeaderSlice, LinkSlice, NetSlice, SlicedPacket, TransportSlice};
use gslb_common::Counter;
use gslb_user::dataplane::Dataplane;
use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::{DNSClass, RData, RecordType};

use super::{
    Answers, EDNS_UDP_SIZE, Expect, Frame, Outcome, XDP_PASS, XDP_TX, ecs_options, hit_counter,
    opt_rdata, question_bytes, run,
};

/// The reply to `query` must be the query turned around, in a valid IP/UDP envelope sized
/// exactly to the DNS reply, with the expected answers. Returns the answered addresses.
pub(crate) fn assert_reply(
    case: &str,
    query: &[u8],
    out: &Outcome,
    expect: &Expect,
) -> Vec<IpAddr> {
    assert_reply_scoped(case, query, out, expect, None)
}

/// [`assert_reply`] for a query with an ECS option (`scope` given): the reply's OPT holds
/// exactly the query's ECS option, byte for byte (family, source prefix, address bytes), but
/// with the scope `scope`. Without `scope`, the OPT has no options.
pub(crate) fn assert_reply_scoped(
    case: &str,
    query: &[u8],
    out: &Outcome,
    expect: &Expect,
    scope: Option<u8>,
) -> Vec<IpAddr> {
    assert_reply_with(case, query, out, expect, scope, None)
}

/// [`assert_reply_scoped`] with our NSID option `nsid` (its payload) after the ECS option.
pub(crate) fn assert_reply_with(
    case: &str,
    query: &[u8],
    out: &Outcome,
    expect: &Expect,
    scope: Option<u8>,
    nsid: Option<&[u8]>,
) -> Vec<IpAddr> {
    assert_reply_echoing(case, query, out, expect, scope, None, nsid)
}

/// [`assert_reply_with`] with the COOKIE option `cookie` (its data) between the ECS option and
/// the NSID option.
pub(crate) fn assert_reply_echoing(
    case: &str,
    query: &[u8],
    out: &Outcome,
    expect: &Expect,
    scope: Option<u8>,
    cookie: Option<&[u8]>,
    nsid: Option<&[u8]>,
) -> Vec<IpAddr> {
    let TurnedAround {
        v6,
        asked,
        reply,
        question_len,
        rdns,
        counts,
    } = assert_turned_around_echoing(case, query, out, scope, cookie, nsid);
    let mut got = Vec::new();
    for rr in &reply.answers {
        assert_eq!(&rr.name, asked.queries[0].name(), "{case}: owner name");
        assert_eq!(
            (rr.record_type(), rr.dns_class, rr.ttl),
            (expect.rtype, DNSClass::IN, expect.ttl),
            "{case}: answer type, class, TTL"
        );
        got.push(match &rr.data {
            RData::A(a) => IpAddr::V4(a.0),
            RData::AAAA(a) => IpAddr::V6(a.0),
            other => panic!("{case}: answer {other:?}"),
        });
    }
    match &expect.answers {
        Answers::OneOf(set) => {
            assert_eq!(got.len(), 1, "{case}: one answer per query: {got:?}");
            assert!(
                set.contains(&got[0]),
                "{case}: {got:?} is not one of {set:?}"
            );
        }
        Answers::All(addrs) => assert_eq!(&got, addrs, "{case}: every address"),
    }

    let sent_opt = asked.edns.as_ref();
    // hickory accepts bytes past the last record; the fast path must not leave any.
    let opt_len = if sent_opt.is_some() {
        11 + opt_rdata(&rdns).map_or(0, <[u8]>::len)
    } else {
        0
    };
    let rr_len = 12 + if expect.rtype == RecordType::A { 4 } else { 16 };
    assert_eq!(
        counts,
        [1, got.len() as u16, 0, u16::from(opt_len != 0)],
        "{case}: counts"
    );
    assert_eq!(
        rdns.len(),
        12 + question_len + got.len() * rr_len + opt_len,
        "{case}: size"
    );

    assert_eq!(
        out.counted,
        [(hit_counter(v6, expect.rtype), 1)],
        "{case}: counters"
    );
    got
}

/// What [`assert_turned_around`] checked and decoded.
pub(crate) struct TurnedAround {
    pub v6: bool,
    pub asked: Message,
    pub reply: Message,
    /// Wire length of the question (name, type, class).
    pub question_len: usize,
    /// The reply's DNS message as sent.
    pub rdns: Vec<u8>,
    /// Its header's QDCOUNT, ANCOUNT, NSCOUNT and ARCOUNT.
    pub counts: [u16; 4],
}

/// The frame `out` is `query` turned around: TX, MACs, addresses and ports swapped, TTL 64,
/// both checksums right, lengths exact, a DNS response with AA (RD and CD copied, NOERROR) and
/// the question echoed byte for byte, no authority or additional records, our OPT (DO copied;
/// no options, or the query's ECS with `scope` when given) iff the query had one. The answers,
/// counts and size are the caller's to check.
pub(crate) fn assert_turned_around(
    case: &str,
    query: &[u8],
    out: &Outcome,
    scope: Option<u8>,
) -> TurnedAround {
    assert_turned_around_with(case, query, out, scope, None)
}

/// [`assert_turned_around`], the OPT with our NSID option `nsid` (its payload) after the ECS
/// option, when given.
pub(crate) fn assert_turned_around_with(
    case: &str,
    query: &[u8],
    out: &Outcome,
    scope: Option<u8>,
    nsid: Option<&[u8]>,
) -> TurnedAround {
    assert_turned_around_echoing(case, query, out, scope, None, nsid)
}

/// [`assert_turned_around_with`], the OPT with the COOKIE option `cookie` (its data) after
/// the ECS option and before the NSID option, when given.
pub(crate) fn assert_turned_around_echoing(
    case: &str,
    query: &[u8],
    out: &Outcome,
    scope: Option<u8>,
    cookie: Option<&[u8]>,
    nsid: Option<&[u8]>,
) -> TurnedAround {
    assert_eq!(
        out.action, XDP_TX,
        "{case}: action (counted {:?})",
        out.counted
    );
    let q = SlicedPacket::from_ethernet(query).unwrap_or_else(|e| panic!("{case}: query: {e}"));
    let r = SlicedPacket::from_ethernet(&out.frame)
        .unwrap_or_else(|e| panic!("{case}: reply does not parse: {e}"));

    let (Some(LinkSlice::Ethernet2(qeth)), Some(LinkSlice::Ethernet2(reth))) = (&q.link, &r.link)
    else {
        panic!("{case}: not Ethernet II");
    };
    assert_eq!(
        (reth.source(), reth.destination()),
        (qeth.destination(), qeth.source()),
        "{case}: MACs swapped"
    );
    assert_eq!(
        r.link_exts.len(),
        q.link_exts.len(),
        "{case}: link extensions"
    );
    let l3 = 14
        + r.link_exts
            .iter()
            .map(etherparse::LinkExtSlice::header_len)
            .sum::<usize>();
    assert_eq!(
        out.frame[12..l3],
        query[12..l3],
        "{case}: VLAN tag and EtherType kept"
    );

    let (v6, ip_header_len) = match (&q.net, &r.net) {
        (Some(NetSlice::Ipv4(qip)), Some(NetSlice::Ipv4(rip))) => {
            let (qh, rh) = (qip.header(), rip.header());
            assert_eq!(
                (rh.source(), rh.destination()),
                (qh.destination(), qh.source()),
                "{case}: addresses swapped"
            );
            assert_eq!(
                (rh.ttl(), rh.ihl(), rh.protocol()),
                (64, 5, IpNumber::UDP),
                "{case}: IPv4"
            );
            assert_eq!(
                rh.total_len() as usize,
                out.frame.len() - l3,
                "{case}: IPv4 total length"
            );
            let want = rh.to_header().calc_header_checksum();
            assert_eq!(rh.header_checksum(), want, "{case}: IPv4 header checksum");
            let kept =
                |h: &Ipv4HeaderSlice| (h.identification(), h.dont_fragment(), h.dcp(), h.ecn());
            assert_eq!(kept(&rh), kept(&qh), "{case}: other IPv4 fields kept");
            (false, 20)
        }
        (Some(NetSlice::Ipv6(qip)), Some(NetSlice::Ipv6(rip))) => {
            let (qh, rh) = (qip.header(), rip.header());
            assert_eq!(
                (rh.source(), rh.destination()),
                (qh.destination(), qh.source()),
                "{case}: addresses swapped"
            );
            assert_eq!(
                (rh.hop_limit(), rh.next_header()),
                (64, IpNumber::UDP),
                "{case}: IPv6"
            );
            let payload_len = out.frame.len() - l3 - 40;
            assert_eq!(
                rh.payload_length() as usize,
                payload_len,
                "{case}: IPv6 payload length"
            );
            assert_eq!(
                (rh.traffic_class(), rh.flow_label()),
                (qh.traffic_class(), qh.flow_label()),
                "{case}: traffic class and flow label kept"
            );
            (true, 40)
        }
        _ => panic!("{case}: reply is not IP of the query's version"),
    };

    let (Some(TransportSlice::Udp(qudp)), Some(TransportSlice::Udp(rudp))) =
        (&q.transport, &r.transport)
    else {
        panic!("{case}: not UDP");
    };
    assert_eq!(
        (rudp.source_port(), rudp.destination_port()),
        (qudp.destination_port(), qudp.source_port()),
        "{case}: ports swapped"
    );
    // The reply ends where the datagram does: no padding or trailer is carried over.
    assert_eq!(
        rudp.length() as usize,
        out.frame.len() - l3 - ip_header_len,
        "{case}: UDP length"
    );
    assert_udp_checksum(case, &r);

    let (qdns, rdns) = (qudp.payload(), rudp.payload());
    let asked = Message::from_vec(qdns).expect("test query decodes");
    let reply =
        Message::from_vec(rdns).unwrap_or_else(|e| panic!("{case}: reply does not decode: {e}"));
    assert_eq!(reply.id, asked.id, "{case}: id");
    assert_eq!(reply.message_type, MessageType::Response, "{case}: QR");
    assert_eq!(reply.op_code, OpCode::Query, "{case}: opcode");
    assert!(reply.authoritative, "{case}: AA");
    assert!(!reply.truncation, "{case}: TC");
    assert_eq!(
        reply.recursion_desired, asked.recursion_desired,
        "{case}: RD copied"
    );
    assert!(!reply.recursion_available, "{case}: RA");
    assert!(!reply.authentic_data, "{case}: AD");
    assert_eq!(
        reply.checking_disabled, asked.checking_disabled,
        "{case}: CD copied"
    );
    assert_eq!(reply.response_code, ResponseCode::NoError, "{case}: RCODE");
    let question = question_bytes(qdns);
    assert_eq!(
        question_bytes(rdns),
        question,
        "{case}: question echoed byte for byte"
    );
    assert!(
        reply.authorities.is_empty() && reply.additionals.is_empty(),
        "{case}: sections"
    );

    let sent_opt = asked.edns.as_ref();
    assert_eq!(
        reply.edns.is_some(),
        sent_opt.is_some(),
        "{case}: OPT iff the query's"
    );
    if let (Some(sent), Some(opt)) = (sent_opt, &reply.edns) {
        assert_eq!(
            (opt.max_payload(), opt.version(), opt.rcode_high()),
            (EDNS_UDP_SIZE, 0, 0),
            "{case}: OPT"
        );
        let mut want = Vec::new();
        if let Some(scope) = scope {
            let [mut ecs] = <[Vec<u8>; 1]>::try_from(ecs_options(qdns))
                .unwrap_or_else(|o| panic!("{case}: the query has ECS options {o:?}"));
            ecs[7] = scope;
            want.extend(ecs);
        }
        if let Some(cookie) = cookie {
            want.extend([0, 10]);
            want.extend((cookie.len() as u16).to_be_bytes());
            want.extend(cookie);
        }
        if let Some(id) = nsid {
            want.extend([0, 3]);
            want.extend((id.len() as u16).to_be_bytes());
            want.extend(id);
        }
        assert_eq!(
            opt_rdata(rdns).unwrap_or_default(),
            want.as_slice(),
            "{case}: OPT options: the query's ECS (scope {scope:?}), its cookie ({cookie:02x?}), then our NSID ({:?})",
            nsid.map(String::from_utf8_lossy)
        );
        assert_eq!(
            opt.flags().dnssec_ok,
            sent.flags().dnssec_ok,
            "{case}: DO copied"
        );
    }
    TurnedAround {
        v6,
        asked,
        reply,
        question_len: question.len(),
        rdns: rdns.to_vec(),
        counts: [0, 1, 2, 3].map(|i| u16::from_be_bytes([rdns[4 + 2 * i], rdns[5 + 2 * i]])),
    }
}

/// The UDP checksum of the reply `packet` is present and right (computed by etherparse: a
/// third implementation, beside the fast path's and the kit's builders').
pub(crate) fn assert_udp_checksum(case: &str, packet: &SlicedPacket) {
    let Some(TransportSlice::Udp(udp)) = &packet.transport else {
        panic!("{case}: not UDP");
    };
    let want = match &packet.net {
        Some(NetSlice::Ipv4(ip)) => udp.to_header().calc_checksum_ipv4_raw(
            ip.header().source(),
            ip.header().destination(),
            udp.payload(),
        ),
        Some(NetSlice::Ipv6(ip)) => udp.to_header().calc_checksum_ipv6_raw(
            ip.header().source(),
            ip.header().destination(),
            udp.payload(),
        ),
        _ => panic!("{case}: not IP"),
    }
    .expect("UDP checksum");
    assert_ne!(udp.checksum(), 0, "{case}: UDP checksum present");
    assert_eq!(udp.checksum(), want, "{case}: UDP checksum");
}

/// Sends `frame` and checks the reply; returns the answered addresses.
pub(crate) fn ask(dp: &Dataplane, case: &str, frame: &Frame, expect: &Expect) -> Vec<IpAddr> {
    let bytes = frame.bytes();
    assert_reply(case, &bytes, &run(dp, &bytes), expect)
}

/// [`ask`] with an ECS query: the reply echoes the option with `scope`.
pub(crate) fn ask_scoped(
    dp: &Dataplane,
    case: &str,
    frame: &Frame,
    expect: &Expect,
    scope: u8,
) -> Vec<IpAddr> {
    let bytes = frame.bytes();
    assert_reply_scoped(case, &bytes, &run(dp, &bytes), expect, Some(scope))
}

/// [`ask_scoped`] with `scope` optional and our NSID option `nsid` (its payload) expected
/// after the ECS option.
pub(crate) fn ask_with(
    dp: &Dataplane,
    case: &str,
    frame: &Frame,
    expect: &Expect,
    scope: Option<u8>,
    nsid: Option<&[u8]>,
) -> Vec<IpAddr> {
    let bytes = frame.bytes();
    assert_reply_with(case, &bytes, &run(dp, &bytes), expect, scope, nsid)
}

/// A frame the fast path cannot answer exactly goes to the stack untouched, for `reason`.
pub(crate) fn assert_passed(case: &str, dp: &Dataplane, frame: &[u8], reason: Counter) {
    let out = run(dp, frame);
    assert_eq!(out.action, XDP_PASS, "{case}: action");
    assert_eq!(out.counted, [(reason, 1)], "{case}: counters");
    assert!(
        out.frame == frame,
        "{case}: a passed frame must reach the stack unchanged"
    );
}
