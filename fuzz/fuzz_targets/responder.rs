//! The responder's request path on arbitrary bytes, as the UDP and TCP loops call it (with
//! examples/demo.toml: zones, views, GSLB domains, a CNAME and a TXT set too big for 512
//! bytes). It must never panic, and every reply must be a DNS response (QR set) with the
//! request's ID; over UDP it must fit 512 bytes, or, when the request has an OPT, the size it
//! advertises (never less than 512, never more than ours: `server.edns_udp_size`); over TCP
//! the 65,535 bytes a length prefix can say.
#![no_main]

use std::{net::IpAddr, path::Path, sync::LazyLock};

use gslb_tests::xdp::opt_record;
use gslb_user::{
    compile::Snapshot,
    config::Config,
    responder::{Responder, Transport},
};
use hickory_proto::op::Message;
use libfuzzer_sys::fuzz_target;

struct Fixture {
    responder: Responder,
    /// `server.edns_udp_size`: the most we send over UDP.
    ours: u16,
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    let config = Config::parse(
        include_str!("../../examples/demo.toml"),
        Path::new("demo.toml"),
    )
    .expect("demo config");
    Fixture {
        responder: Responder::new(&Snapshot::from_config(&config)),
        ours: config.server.edns_udp_size,
    }
});

fuzz_target!(|data: &[u8]| {
    let fixture = &*FIXTURE;
    // The first byte picks the client, so views and ECS-less paths both get exercised.
    let client: IpAddr = if data.first().is_some_and(|b| b & 1 == 1) {
        [192, 0, 2, 10].into()
    } else {
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x10].into()
    };
    // The first OPT anywhere (more lenient than the responder, which takes one in the
    // additional section only): the limit is never below the one the responder must keep.
    let udp_limit = opt_record(data).map_or(512, |(theirs, _)| theirs.min(fixture.ours).max(512));
    for transport in [Transport::Udp, Transport::Tcp] {
        let Some(reply) = fixture.responder.respond(data, client, transport) else {
            continue;
        };
        assert!(data.len() >= 2, "a reply to {} bytes", data.len());
        assert!(reply.len() >= 12, "a reply of {} bytes", reply.len());
        assert_eq!(reply[..2], data[..2], "reply ID");
        assert!(reply[2] & 0x80 != 0, "QR clear in a reply");
        match transport {
            Transport::Udp => assert!(
                reply.len() <= usize::from(udp_limit),
                "UDP reply of {} bytes, limit {udp_limit}",
                reply.len()
            ),
            Transport::Tcp => assert!(reply.len() <= 65_535, "TCP reply of {}", reply.len()),
        }
        Message::from_vec(&reply).expect("every reply parses");
    }
});
