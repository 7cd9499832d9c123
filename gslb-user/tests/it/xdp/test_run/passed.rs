//! What the fast path leaves to the stack: each frame back unchanged, the reason counted.

use crate::common;

use std::net::{IpAddr, Ipv4Addr};

use aya::programs::ProgramError;
use common::*;
use gslb_common::Counter;
use gslb_user::dataplane::Dataplane;
use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::rdata::opt::EdnsOption;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};

use super::{
    V4, V6, client_cookie, dataplane_with, ecs, ecs_frame, nsid, padding, with_edns, with_options,
    www, www_default,
};

// ---- Passed to the stack ----

fn www_a() -> Message {
    query(0x8000, WWW, RecordType::A)
}

/// The standard query with one change, on the wire.
fn www_a_with(change: impl FnOnce(&mut Message)) -> Vec<u8> {
    let mut msg = www_a();
    change(&mut msg);
    wire(&msg)
}

/// The standard query on the wire with its bytes edited: for what hickory will not encode.
fn www_a_edited(edns: bool, edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut bytes = wire(&if edns { with_edns(www_a()) } else { www_a() });
    edit(&mut bytes);
    bytes
}

/// A query whose question name is given as wire bytes (header as hickory writes it).
fn raw_name_query(qname: &[u8]) -> Vec<u8> {
    let mut bytes = wire(&www_a());
    bytes.truncate(12);
    bytes.extend_from_slice(qname);
    bytes.extend_from_slice(&[0, 1, 0, 1]); // A, IN
    bytes
}

/// The standard query to `server` in a frame with one change.
fn frame_with(server: IpAddr, change: impl FnOnce(&mut Frame)) -> Vec<u8> {
    let mut frame = Frame::query_to(server, wire(&www_a()));
    change(&mut frame);
    frame.bytes()
}

fn an_a_record() -> Record {
    Record::from_rdata(
        Name::from_ascii(WWW).unwrap(),
        60,
        RData::A(A::new(192, 0, 2, 1)),
    )
}

/// Each DNS message, over IPv4 and over IPv6, must be passed for its reason.
fn assert_messages_passed(dp: &Dataplane, cases: &[(&str, Vec<u8>, Counter)]) {
    for server in [V4, V6] {
        for (case, dns, reason) in cases {
            let frame = Frame::query_to(server, dns.clone()).bytes();
            assert_passed(&format!("{case} over {server}"), dp, &frame, *reason);
        }
    }
}

#[test]
fn passes_queries_for_what_it_does_not_serve() {
    let Some(dp) = dataplane() else { return };
    #[rustfmt::skip]
    let cases = [
        ("unknown name", wire(&query(1, "nope.example.com", RecordType::A)), Counter::UnknownName),
        ("parent of a served name", wire(&query(2, "example.com", RecordType::A)), Counter::UnknownName),
        ("no answer for the client's view", wire(&query(3, V1_ONLY, RecordType::A)), Counter::NoAnswer),
        ("TXT", wire(&query(4, WWW, RecordType::TXT)), Counter::Qtype),
        ("ANY", wire(&query(5, WWW, RecordType::ANY)), Counter::Qtype),
        ("QCLASS CH", www_a_with(|m| { m.queries[0].set_query_class(DNSClass::CH); }), Counter::Qclass),
    ];
    assert_messages_passed(&dp, &cases);
}

#[test]
fn passes_messages_other_than_one_plain_query() {
    let Some(dp) = dataplane() else { return };
    let all_a = Query::query(Name::from_ascii(ALL).unwrap(), RecordType::A);
    #[rustfmt::skip]
    let cases = [
        ("QR=1", www_a_with(|m| { m.metadata.message_type = MessageType::Response; }), Counter::NotQuery),
        ("opcode NOTIFY", www_a_with(|m| { m.metadata.op_code = OpCode::Notify; }), Counter::Opcode),
        ("TC=1", www_a_with(|m| { m.metadata.truncation = true; }), Counter::Opcode),
        ("QDCOUNT=2", www_a_with(|m| { m.add_query(all_a); }), Counter::Sections),
        ("QDCOUNT=0", www_a_with(|m| { m.queries.clear(); }), Counter::Sections),
        ("ANCOUNT=1", www_a_with(|m| { m.add_answer(an_a_record()); }), Counter::Sections),
        ("NSCOUNT=1", www_a_with(|m| { m.add_authority(an_a_record()); }), Counter::Sections),
        ("OPT and another additional", www_a_with(|m| { m.set_edns(edns()).add_additional(an_a_record()); }),
            Counter::Additional),
        ("an additional that is not OPT", www_a_with(|m| { m.add_additional(an_a_record()); }), Counter::Additional),
    ];
    assert_messages_passed(&dp, &cases);
}

/// Gives the OPT record (the last 11 bytes) the owner name "x." instead of the root.
fn opt_owner_x(message: &mut Vec<u8>) {
    let at = message.len() - 11;
    message.splice(at..=at, [1, b'x', 0]);
}

#[test]
fn passes_edns_it_does_not_answer() {
    let Some(dp) = dataplane() else { return };
    let version_1 = {
        let mut opt = edns();
        opt.set_version(1);
        opt
    };
    #[rustfmt::skip]
    let cases = [
        ("EDNS version 1", www_a_with(|m| { m.set_edns(version_1); }), Counter::EdnsVersion),
        ("ECS without a known scope", wire(&with_options(vec![ecs()])), Counter::ClientSubnet),
        ("ECS after a cookie", wire(&with_options(vec![client_cookie(), ecs()])), Counter::ClientSubnet),
        ("more options than looked through", wire(&with_options(vec![padding(0); 5])), Counter::Additional),
        ("an option longer than any query's", wire(&with_options(vec![padding(257)])), Counter::Additional),
        ("OPT not at the root", www_a_edited(true, opt_owner_x), Counter::Additional),
    ];
    assert_messages_passed(&dp, &cases);
}

/// The resolver that sends an ECS query is the one recorded in `LDNS` for probing, not the
/// subnet it speaks for.
#[test]
fn an_ecs_query_records_the_resolver_not_the_subnet() {
    let Some(mut dp) = dataplane() else { return };
    let mut ldns = dp.take_ldns().expect("the LDNS map");
    ldns.set_masks(32, 128).unwrap();
    ldns.set_enabled(true).unwrap();
    let resolver = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 5));
    let frame = ecs_frame(
        resolver,
        V4,
        WWW,
        RecordType::A,
        vec![ecs_subnet("198.51.100.0/24")],
    );
    let out = run(&dp, &frame.bytes());
    assert_eq!(out.action, XDP_TX, "answered: {:?}", out.counted);
    let seen: Vec<IpAddr> = ldns
        .scan(std::time::Duration::from_secs(60))
        .unwrap()
        .seen
        .iter()
        .map(|s| s.addr)
        .collect();
    assert_eq!(seen, [resolver]);
}

#[test]
fn passes_ecs_it_cannot_answer_exactly() {
    let Some(dp) = dataplane() else { return };
    let ecs_query = |options: Vec<EdnsOption>| wire(&with_options(options));
    #[rustfmt::skip]
    let cases = [
        // Valid, but the program does not know the scope.
        ("a subnet in the default view", ecs_query(vec![ecs_subnet("203.0.113.0/24")]), Counter::ClientSubnet),
        ("an IPv6 subnet of IPv4-mapped addresses",
            ecs_query(vec![ecs_subnet("::ffff:198.51.100.0/120")]), Counter::ClientSubnet),
        // Invalid in a query (RFC 7871 §6, §7.1): the responder answers FORMERR.
        ("/33", ecs_query(vec![ecs_option(1, 33, 0, &[198, 51, 100, 0, 0])]), Counter::EcsInvalid),
        ("IPv6 /129", ecs_query(vec![ecs_option(2, 129, 0, &[0x20; 17])]), Counter::EcsInvalid),
        ("/24 in 4 bytes", ecs_query(vec![ecs_option(1, 24, 0, &[198, 51, 100, 0])]), Counter::EcsInvalid),
        ("/24 in 2 bytes", ecs_query(vec![ecs_option(1, 24, 0, &[198, 51])]), Counter::EcsInvalid),
        ("/0 with an address byte", ecs_query(vec![ecs_option(1, 0, 0, &[0])]), Counter::EcsInvalid),
        ("IPv6 /48 in 16 bytes", ecs_query(vec![ecs_option(2, 48, 0, &[0x20, 1, 0xd, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])]),
            Counter::EcsInvalid),
        ("a bit beyond /20", ecs_query(vec![ecs_option(1, 20, 0, &[198, 51, 0x65])]), Counter::EcsInvalid),
        ("a bit beyond /127", ecs_query(vec![ecs_option(2, 127, 0, &[0x20, 1, 0xd, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])]),
            Counter::EcsInvalid),
        ("a scope in the query", ecs_query(vec![ecs_option(1, 24, 24, &[198, 51, 100])]), Counter::EcsInvalid),
        ("family 3", ecs_query(vec![ecs_option(3, 8, 0, &[1])]), Counter::EcsInvalid),
        ("no family", ecs_query(vec![EdnsOption::Unknown(8, vec![0, 1, 0])]), Counter::EcsInvalid),
        ("two ECS options", ecs_query(vec![ecs_subnet("198.51.100.0/24"), ecs_subnet("198.51.100.0/24")]),
            Counter::EcsInvalid),
    ];
    assert_messages_passed(&dp, &cases);
}

/// A query that asks for our identity (NSID, RFC 5001) whose answer with it would not fit
/// the client's UDP size goes to the responder, which answers within it: eight AAAA records
/// and a 255-byte identity make 529 bytes, over a client's 512 (or less, which counts as 512),
/// and answered within 1232.
#[test]
fn passes_nsid_answers_that_do_not_fit_the_clients_size() {
    let mut eight = String::new();
    for i in 0..8 {
        eight += &format!(
            "[[service]]\nname = \"eight-{i}\"\nip = \"2001:db8:80::{i}\"\nsite = \"s\"\n"
        );
    }
    let names: Vec<String> = (0..8).map(|i| format!("\"eight-{i}\"")).collect();
    eight += &format!(
        "[[gslb_domain]]\nname = \"eight.example.com\"\nanswer = \"all\"\nttl = 60\nservices = [{}]\n",
        names.join(", ")
    );
    let identity = [b'n'; 255];
    let server = format!("identity = \"{}\"\n", "n".repeat(255));
    let Some(dp) = dataplane_with(&server, &eight) else {
        return;
    };
    let query = |size: u16| {
        let mut msg = query(0x5157, "eight.example.com", RecordType::AAAA);
        let mut opt = edns();
        opt.set_max_payload(size);
        opt.options_mut().insert(nsid());
        msg.set_edns(opt);
        wire(&msg)
    };
    #[rustfmt::skip]
    let cases = [
        ("512 bytes", query(512), Counter::Nsid),
        ("100 bytes, as 512", query(100), Counter::Nsid),
    ];
    assert_messages_passed(&dp, &cases);
    let addrs: Vec<String> = (0..8).map(|i| format!("2001:db8:80::{i}")).collect();
    let addrs: Vec<&str> = addrs.iter().map(String::as_str).collect();
    let expect = Expect {
        rtype: RecordType::AAAA,
        ttl: 60,
        answers: Answers::All(ips(&addrs)),
    };
    let fits = Frame::query_to(V4, query(1232));
    ask_with(&dp, "1232 bytes", &fits, &expect, None, Some(&identity));
}

/// With `server.ecs_allow`, the program holds the list (`ECS_ALLOW`): a listed resolver's
/// subnet is answered from its view with the scope echoed, anyone else's option is ignored (its
/// own view, no option echoed), and malformed ones stay `ecs_invalid` (xdp_ecs_allow.rs has
/// the rest).
#[test]
fn answers_ecs_when_an_allow_list_decides() {
    let Some(dp) = dataplane_with("ecs_allow = [\"203.0.113.0/24\"]\n", "") else {
        return;
    };
    let v1 = || vec![ecs_subnet("198.51.100.0/24")];
    let a = RecordType::A;
    // CLIENT_V4 (203.0.113.7) is listed: the subnet's view v1, scope 24; a /0: its own view.
    let listed = |options| ecs_frame(IpAddr::V4(CLIENT_V4), V4, WWW, a, options);
    ask_scoped(
        &dp,
        "listed, v1 subnet",
        &listed(v1()),
        &www(a, &WWW_V1_A),
        24,
    );
    let zero = listed(vec![ecs_subnet("0.0.0.0/0")]);
    ask_scoped(&dp, "listed, /0", &zero, &www_default(a), 0);
    // CLIENT_V6 is not: its own (default) view, and an OPT without the option.
    let other = ecs_frame(IpAddr::V6(CLIENT_V6), V6, WWW, a, v1());
    ask(&dp, "not listed, v1 subnet", &other, &www_default(a));
    let malformed = vec![ecs_option(1, 24, 8, &[198, 51, 100])];
    #[rustfmt::skip]
    let cases = [
        ("malformed", wire(&with_options(malformed)), Counter::EcsInvalid),
    ];
    assert_messages_passed(&dp, &cases);
}

#[test]
fn passes_names_it_cannot_key() {
    let Some(dp) = dataplane() else { return };
    let too_long = format!("{}.{}", "a".repeat(63), "b".repeat(63));
    #[rustfmt::skip]
    let cases = [
        ("compression pointer after a label", raw_name_query(b"\x03www\xc0\x0c"), Counter::NameCompressed),
        ("compression pointer as the name", raw_name_query(b"\xc0\x0c"), Counter::NameCompressed),
        ("reserved label type", raw_name_query(b"\x03www\x41\x00"), Counter::NameCompressed),
        ("name of QNAME_MAX + 1 wire bytes", wire(&query(6, &too_long, RecordType::A)), Counter::NameTooLong),
    ];
    assert_messages_passed(&dp, &cases);
}

#[test]
fn passes_messages_whose_lengths_disagree() {
    let Some(dp) = dataplane() else { return };
    #[rustfmt::skip]
    let cases = [
        ("bytes after the question", www_a_edited(false, |b| b.extend_from_slice(&[0; 4])), Counter::TrailingData),
        ("bytes after the OPT record", www_a_edited(true, |b| b.push(0)), Counter::TrailingData),
        ("OPT RDLENGTH past the message", www_a_edited(true, |b| *b.last_mut().unwrap() = 4), Counter::Malformed),
        ("shorter than a DNS header", vec![0x12, 0x34, 0x01, 0x00, 0x00, 0x01], Counter::Malformed),
    ];
    assert_messages_passed(&dp, &cases);
}

#[test]
fn passes_frames_other_than_plain_udp_to_the_service() {
    let Some(dp) = dataplane() else { return };
    let mut udp_len_too_long = frame_with(V4, |_| {});
    udp_len_too_long[14 + 20 + 5] += 1;
    let mut ipv4_total_short = frame_with(V4, |_| {});
    ipv4_total_short[14 + 3] -= 1;
    // With the header checksum fixed, so that the length is what is wrong.
    ipv4_total_short[14 + 10..14 + 12].fill(0);
    let check = internet_checksum(&ipv4_total_short[14..14 + 20]);
    ipv4_total_short[14 + 10..14 + 12].copy_from_slice(&check.to_be_bytes());
    #[rustfmt::skip]
    let cases = [
        ("other port", frame_with(V4, |f| f.dst_port = 5353), Counter::OtherPort),
        ("other port, IPv6", frame_with(V6, |f| f.dst_port = 5353), Counter::OtherPort),
        ("other destination", frame_with(V4, |f| f.dst = "192.0.2.99".parse().unwrap()), Counter::OtherDestination),
        ("other destination, IPv6", frame_with(V6, |f| f.dst = "2001:db8::99".parse().unwrap()), Counter::OtherDestination),
        ("IPv4 options (IHL=6)", frame_with(V4, |f| f.ipv4_options = vec![1, 1, 1, 0]), Counter::Ipv4Options),
        ("IPv4 first fragment (MF)", frame_with(V4, |f| f.ipv4_frag = 0x2000), Counter::Fragment),
        ("IPv4 later fragment (offset)", frame_with(V4, |f| f.ipv4_frag = 185), Counter::Fragment),
        ("IPv6 hop-by-hop options", frame_with(V6, |f| f.ipv6_ext = vec![hop_by_hop_padding()]), Counter::Ipv6ExtHeader),
        ("IPv6 fragment header", frame_with(V6, |f| f.ipv6_ext = vec![ipv6_first_fragment()]), Counter::Fragment),
        ("TCP", frame_with(V4, |f| f.protocol = IPPROTO_TCP), Counter::NotUdp),
        ("TCP, IPv6", frame_with(V6, |f| f.protocol = IPPROTO_TCP), Counter::NotUdp),
        ("ARP", arp_request(), Counter::NotIp),
        ("UDP length past the IP payload", udp_len_too_long, Counter::Malformed),
        ("IPv4 total length short of the datagram", ipv4_total_short, Counter::Malformed),
    ];
    for (case, frame, reason) in &cases {
        assert_passed(case, &dp, frame, *reason);
    }
}

#[test]
fn parses_a_padded_minimum_size_frame() {
    let Some(dp) = dataplane() else { return };
    // A query for the root: 59 bytes, padded to 60. The padding must not stop the parse, which
    // gets as far as the lookup.
    let frame = Frame {
        trailer: 1,
        ..Frame::v4(wire(&query(0x8100, ".", RecordType::A)))
    };
    let bytes = frame.bytes();
    assert_eq!(bytes.len(), 60);
    assert_passed(
        "root query padded to 60 bytes",
        &dp,
        &bytes,
        Counter::UnknownName,
    );
}

#[test]
fn never_answers_a_truncated_frame() {
    let Some(dp) = dataplane() else { return };
    let cookie_query = with_options(vec![client_cookie()]);
    let frames = [
        (
            "IPv4 with EDNS",
            Frame::v4(wire(&with_edns(query(0x9000, WWW, RecordType::A)))),
        ),
        (
            "IPv6",
            Frame::v6(wire(&query(0x9001, WWW, RecordType::AAAA))),
        ),
        (
            "VLAN IPv4 with a cookie",
            Frame {
                vlan: Some(5),
                ..Frame::v4(wire(&cookie_query))
            },
        ),
    ];
    for (name, frame) in frames {
        let full = frame.bytes();
        // The whole frame is answered: what follows is about the cuts only.
        assert_eq!(run(&dp, &full).action, XDP_TX, "{name}: whole frame");
        for len in 0..full.len() {
            let case = format!("{name} cut to {len} of {} bytes", full.len());
            let cut = &full[..len];
            match try_run(&dp, cut) {
                // The kernel runs XDP only on a frame with a whole Ethernet header.
                Err(ProgramError::SyscallError(e)) if len < 14 => {
                    assert_eq!(e.io_error.raw_os_error(), Some(libc::EINVAL), "{case}: {e}");
                }
                Err(e) => panic!("{case}: {e}"),
                Ok(out) => {
                    assert_eq!(out.action, XDP_PASS, "{case}: action");
                    assert!(out.frame == cut, "{case}: frame changed");
                    let [(reason, 1)] = out.counted[..] else {
                        panic!("{case}: counted {:?}", out.counted);
                    };
                    // Headers cut short are "not IP"; a datagram cut short is malformed.
                    assert!(
                        matches!(reason, Counter::NotIp | Counter::Malformed),
                        "{case}: counted {reason:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn never_answers_a_dns_message_cut_short() {
    let Some(dp) = dataplane() else { return };
    // Unlike a cut frame, the IP and UDP lengths here agree with the cut: only the DNS
    // message's own structure shows that it is incomplete.
    let messages = [
        ("A", wire(&query(0x9100, WWW, RecordType::A))),
        (
            "A with a cookie",
            wire(&with_options(vec![client_cookie()])),
        ),
    ];
    for server in [V4, V6] {
        for (name, dns) in &messages {
            for len in 0..dns.len() {
                let case = format!("{name} over {server} cut to {len} of {} bytes", dns.len());
                let frame = Frame::query_to(server, dns[..len].to_vec()).bytes();
                assert_passed(&case, &dp, &frame, Counter::Malformed);
            }
        }
    }
}
