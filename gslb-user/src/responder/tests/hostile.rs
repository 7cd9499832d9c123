//! Hostile requests: the costliest message of each class (`gslb_tests::hostile`), the protocol
//! corners a lenient server gets wrong, and the size every reply must fit.

use gslb_tests::hostile::{self, Class};

use super::*;

/// The reply to `request`, which must be one.
fn reply_to(r: &Responder, request: &[u8], transport: Transport) -> Vec<u8> {
    r.respond(request, OUTSIDE, transport)
        .unwrap_or_else(|| panic!("no reply over {transport:?}"))
}

/// `reply` is the header-only FORMERR to `request`: its ID, opcode and RD, nothing echoed.
fn assert_header_only_formerr(what: &str, request: &[u8], reply: &[u8]) {
    assert_eq!(reply.len(), 12, "{what}: {} bytes", reply.len());
    assert_eq!(&reply[..2], &request[..2], "{what}: ID");
    assert_eq!(
        reply[2],
        0x80 | (request[2] & 0x79),
        "{what}: QR, opcode, RD"
    );
    assert_eq!(reply[3], 1, "{what}: FORMERR");
    assert_eq!(&reply[4..], &[0; 8], "{what}: counts");
}

#[test]
fn the_costliest_messages_are_refused_from_their_header_or_answered_within_the_size() {
    let r = responder();
    for class in Class::ALL {
        let request = class.message(0x4242);
        for transport in [Transport::Udp, Transport::Tcp] {
            let what = format!("{} over {transport:?}", class.name());
            let reply = reply_to(&r, &request, transport);
            assert!(reply.len() <= client_limit(&request, transport), "{what}");
            match class {
                // 454 questions once got a 59,951-byte FORMERR echoing all of them.
                Class::MaxQuestions | Class::MaxRecords | Class::PointerChain => {
                    assert_header_only_formerr(&what, &request, &reply);
                }
                Class::MaxSize => {
                    let m = Message::from_vec(&reply).unwrap();
                    assert_eq!(m.response_code, ResponseCode::NoError, "{what}");
                    assert_eq!(m.answers.len(), 1, "{what}: the GSLB answer");
                    assert!(reply.len() < 100, "{what}: the padding is not echoed");
                }
                Class::MaxLabels => {
                    let m = Message::from_vec(&reply).unwrap();
                    assert_eq!(m.response_code, ResponseCode::Refused, "{what}: not ours");
                    assert_eq!(m.queries.len(), 1, "{what}: the question echoed");
                }
            }
        }
    }
}

/// The pointer chain once overflowed a debug build's stack (hickory 0.25 followed pointers by
/// recursion): no request may need more stack than its bytes do not control. Each class and a
/// thousand random large messages run on a thread with 128 KiB of stack, in whatever build.
#[test]
fn no_request_needs_a_stack_its_bytes_choose() {
    std::thread::Builder::new()
        .stack_size(128 * 1024)
        .spawn(|| {
            let r = responder();
            let mut rng = Rng(0x5bd1_e995);
            let mut requests: Vec<Vec<u8>> = Class::ALL.iter().map(|c| c.message(1)).collect();
            for _ in 0..1_000 {
                let mut m = rng.pick(&requests[..5]).clone();
                for _ in 0..8 {
                    let at = rng.below(m.len());
                    m[at] = rng.byte();
                }
                requests.push(m);
            }
            for request in &requests {
                for transport in [Transport::Udp, Transport::Tcp] {
                    if let Some(reply) = r.respond(request, OUTSIDE, transport) {
                        assert!(reply.len() <= client_limit(request, transport));
                    }
                }
            }
        })
        .unwrap()
        .join()
        .expect("every request answered on a small stack");
}

/// A record (owner `owner` on the wire, `rtype`, class IN, TTL 0, `rdata`).
fn record(owner: &[u8], rtype: u16, rdata: &[u8]) -> Vec<u8> {
    let mut rr = owner.to_vec();
    rr.extend_from_slice(&rtype.to_be_bytes());
    rr.extend_from_slice(&[0, 1, 0, 0, 0, 0]);
    rr.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    rr.extend_from_slice(rdata);
    rr
}

/// An OPT record with `payload`, version 0, no option.
fn opt_record(payload: u16) -> Vec<u8> {
    let mut rr = vec![0, 0, 41];
    rr.extend_from_slice(&payload.to_be_bytes());
    rr.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    rr
}

/// A query for `name` of `qtype` with the four counts and `rest` after the question.
fn with_sections(name: &str, qtype: u16, counts: [u16; 4], rest: &[u8]) -> Vec<u8> {
    let mut m = hostile::header(ID, counts);
    m.extend_from_slice(&hostile::question(name, qtype));
    m.extend_from_slice(rest);
    m
}

#[test]
fn only_a_queries_shape_is_answered_and_meta_types_get_their_rcode() {
    let r = responder();
    let www_a = || hostile::question("www.example.com", 1);
    let a_record = record(&[0], 1, &[192, 0, 2, 1]);
    let tsig = record(&hostile::question("key", 1)[..5], 250, &[0; 16]);
    let compressed_question = {
        let mut m = hostile::header(ID, [1, 0, 0, 0]);
        m.extend_from_slice(&[3, b'w', b'w', b'w', 0xc0, 4, 0, 1, 0, 1]);
        m
    };
    // (what, request, RCODE, question echoed)
    let cases: Vec<(&str, Vec<u8>, u8, bool)> = vec![
        (
            "an OPT in the authority section",
            with_sections("www.example.com", 1, [1, 0, 1, 0], &opt_record(1232)),
            1,
            false,
        ),
        (
            "an OPT in the answer section",
            with_sections("www.example.com", 1, [1, 1, 0, 0], &opt_record(1232)),
            1,
            false,
        ),
        (
            "two OPT records",
            with_sections(
                "www.example.com",
                1,
                [1, 0, 0, 2],
                &[opt_record(1232), opt_record(1232)].concat(),
            ),
            1,
            false,
        ),
        (
            "an OPT not owned by the root",
            with_sections(
                "www.example.com",
                1,
                [1, 0, 0, 1],
                &[&[3, b'w', b'w', b'w'][..], &opt_record(1232)].concat(),
            ),
            1,
            false,
        ),
        (
            "an A record in the additional section",
            with_sections("www.example.com", 1, [1, 0, 0, 1], &a_record),
            1,
            false,
        ),
        (
            "an OPT whose option runs past its data",
            {
                let mut opt = opt_record(1232);
                let len = opt.len();
                opt[len - 2..].copy_from_slice(&4u16.to_be_bytes());
                opt.extend_from_slice(&[0, 10, 0, 8]);
                with_sections("www.example.com", 1, [1, 0, 0, 1], &opt)
            },
            1,
            false,
        ),
        (
            "a TSIG before the OPT",
            with_sections(
                "www.example.com",
                1,
                [1, 0, 0, 2],
                &[tsig.clone(), opt_record(1232)].concat(),
            ),
            1,
            false,
        ),
        ("a compressed question name", compressed_question, 1, false),
        (
            "qtype OPT",
            with_sections("www.example.com", 41, [1, 0, 0, 0], &[]),
            1,
            true,
        ),
        (
            "qtype TSIG",
            with_sections("www.example.com", 250, [1, 0, 0, 0], &[]),
            1,
            true,
        ),
        (
            "IXFR",
            with_sections("example.com", 251, [1, 0, 0, 0], &[]),
            5,
            true,
        ),
        (
            "TKEY",
            with_sections("example.com", 249, [1, 0, 0, 0], &[]),
            4,
            true,
        ),
        (
            "MAILB",
            with_sections("example.com", 253, [1, 0, 0, 0], &[]),
            4,
            true,
        ),
        (
            "an unassigned meta-type",
            with_sections("www.example.com", 200, [1, 0, 0, 0], &[]),
            4,
            true,
        ),
        (
            "a TSIG-signed query",
            with_sections("www.example.com", 1, [1, 0, 0, 1], &tsig),
            9,
            true,
        ),
        (
            "NOTIFY with an answer",
            {
                let mut m = with_sections("example.com", 6, [1, 1, 0, 0], &a_record);
                m[2] = 4 << 3;
                m
            },
            4,
            false,
        ),
        (
            "a query of the shape",
            [hostile::header(ID, [1, 0, 0, 1]), www_a(), opt_record(1232)].concat(),
            0,
            true,
        ),
    ];
    for (what, request, rcode, echoed) in cases {
        for transport in [Transport::Udp, Transport::Tcp] {
            let reply = reply_to(&r, &request, transport);
            assert_eq!(reply[3] & 0x0f, rcode, "{what} over {transport:?}: RCODE");
            if rcode != 0 {
                assert_eq!(reply[2] & 0x04, 0, "{what}: AA clear");
            }
            let questions = u16::from_be_bytes([reply[4], reply[5]]);
            assert_eq!(questions, u16::from(echoed), "{what}: question echoed");
            if !echoed {
                assert_eq!(reply.len(), 12, "{what}: the header alone");
            }
        }
    }
}

/// Every reply over UDP fits 512 bytes without EDNS and the client's size with it, whatever
/// the request carries: big questions, long names, many options, sizes below 512.
#[test]
fn every_udp_reply_fits_the_clients_size() {
    let r = responder();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let seeds = seeds();
    let mut over_512 = 0;
    for i in 0..20_000 {
        let mut request = mutant(&mut rng, &seeds);
        if i % 3 == 0 && request.len() >= 12 {
            // Grown to a few KB: a second question, junk records, padding.
            let len = rng.below(6_000);
            request.extend(rng.bytes(len));
        }
        for transport in [Transport::Udp, Transport::Tcp] {
            if let Some(reply) = r.respond(&request, OUTSIDE, transport) {
                let limit = client_limit(&request, transport);
                assert!(
                    reply.len() <= limit,
                    "{} bytes for {limit} over {transport:?}: {request:02x?}",
                    reply.len()
                );
                over_512 += usize::from(transport == Transport::Udp && reply.len() > 512);
            }
        }
    }
    // The EDNS sizes are honoured, not just 512 for everyone.
    assert!(over_512 > 0, "no reply over 512 bytes");
}
