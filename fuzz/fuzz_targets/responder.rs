//! The responder's request path on arbitrary bytes: it must never panic, and whatever it sends
//! back must be a DNS message with the request's ID.
#![no_main]

use std::{net::IpAddr, path::Path, sync::LazyLock};

use gslb_user::{
    compile::Snapshot,
    config::Config,
    responder::{Responder, Transport},
};
use hickory_proto::op::Message;
use libfuzzer_sys::fuzz_target;

static RESPONDER: LazyLock<Responder> = LazyLock::new(|| {
    let config = Config::parse(
        include_str!("../../examples/demo.toml"),
        Path::new("demo.toml"),
    )
    .expect("demo config");
    Responder::new(&config, &Snapshot::from_config(&config))
});

fuzz_target!(|data: &[u8]| {
    // The first byte picks the client, so views and ECS-less paths both get exercised.
    let client: IpAddr = if data.first().is_some_and(|b| b & 1 == 1) {
        [192, 0, 2, 10].into()
    } else {
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x10].into()
    };
    for transport in [Transport::Udp, Transport::Tcp] {
        if let Some(reply) = RESPONDER.respond(data, client, transport) {
            let parsed = Message::from_vec(&reply).expect("every reply parses");
            assert_eq!(
                parsed.id(),
                u16::from_be_bytes([data[0], data[1]]),
                "reply ID"
            );
            if transport == Transport::Udp {
                assert!(reply.len() <= 4096, "UDP reply of {} bytes", reply.len());
            }
        }
    }
});
