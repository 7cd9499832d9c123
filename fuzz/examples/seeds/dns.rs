//! The DNS targets' seeds: responder, responder_tcp, xdp.

use std::net::IpAddr;

use gslb_tests::{hostile, xdp};
use gslb_user::server::tcp_frame;

use crate::{Corpus, capture::Received};

/// A DNS message behind its TCP length prefix.
fn framed(message: &[u8]) -> Vec<u8> {
    tcp_frame::frame(message).expect("a message of at most 65,535 bytes")
}

pub(crate) fn seeds(corpus: &mut Corpus, captured: &[(String, Received)]) {
    let mut udp = Vec::new();
    for (name, r) in captured {
        match r {
            Received::Udp(m) => {
                corpus.add("responder", name.clone(), m.clone());
                udp.push((name.clone(), m.clone()));
            }
            Received::Tcp(stream) => {
                corpus.add("responder_tcp", name.clone(), stream.clone());
                // Each message of the connection, as the responder sees it.
                let mut rest = stream.as_slice();
                let mut i = 0;
                while let Some((m, used)) = tcp_frame::split(rest) {
                    i += 1;
                    corpus.add("responder", format!("{name}-{i}"), m.to_vec());
                    rest = &rest[used..];
                }
            }
        }
    }
    // Every captured datagram pipelined on one connection, as a busy resolver sends them.
    let pipelined: Vec<u8> = udp.iter().flat_map(|(_, m)| framed(m)).collect();
    corpus.add("responder_tcp", "pipelined-captured-udp", pipelined);
    for class in hostile::Class::ALL {
        let m = class.message(0x4854);
        let name = format!("hostile-{}", class.name());
        corpus.add("responder_tcp", name.clone(), framed(&m));
        // The fast path sees frames, at most a page in a test run: the small classes only.
        if m.len() < 3000 {
            corpus.add("xdp", name.clone(), [&[0][..], &m].concat());
        }
        corpus.add("responder", name, m);
    }
    // The XDP target: a choice byte (client, 802.1Q tag, padding; see fuzz_targets/xdp.rs),
    // then the DNS message: each captured datagram from a client taken in turn.
    for (i, (name, m)) in udp.iter().enumerate() {
        corpus.add("xdp", name.clone(), [&[(i % 32) as u8][..], m].concat());
    }
    // Whole frames (choice bit 5): the names the fast path answers, in envelopes it must
    // read past (IPv4 options, an IPv6 extension header) or pass.
    let query = |name: &str, qtype: u16| {
        [
            hostile::header(0x5844, [1, 0, 0, 0]),
            hostile::question(name, qtype),
        ]
        .concat()
    };
    let longest = xdp::longest_name();
    let frames = [
        ("frame-v4-www-a", xdp::Frame::v4(query(xdp::WWW, 1))),
        ("frame-v6-all-aaaa", xdp::Frame::v6(query(xdp::ALL, 28))),
        ("frame-v4-longest-a", xdp::Frame::v4(query(&longest, 1))),
        (
            "frame-v4-options",
            xdp::Frame {
                ipv4_options: vec![1, 1, 1, 0],
                ..xdp::Frame::v4(query(xdp::WWW, 1))
            },
        ),
        (
            "frame-v6-hop-by-hop",
            xdp::Frame {
                ipv6_ext: vec![xdp::hop_by_hop_padding()],
                ..xdp::Frame::v6(query(xdp::WWW, 28))
            },
        ),
        (
            "frame-v1-client-vlan",
            xdp::Frame {
                vlan: Some(100),
                ..xdp::Frame::query_from(IpAddr::V4(xdp::V1_CLIENT_V4), query(xdp::V1_ONLY, 1))
            },
        ),
    ];
    for (name, frame) in frames {
        corpus.add("xdp", name, [&[0x20][..], &frame.bytes()].concat());
    }
}
