//! A byte stream as a TCP client sends it (pipelined queries, each behind its 2-byte length),
//! through the framing the server's connection loop runs (`server::tcp_frame`) and the
//! responder (examples/demo.toml). The splitter must take exactly each prefixed message in
//! order and leave only an incomplete one; every reply must be a response with its query's
//! ID, fit a length prefix, and frame so that the splitter reads it back whole.
#![no_main]

use std::{net::IpAddr, path::Path, sync::LazyLock};

use gslb_user::{
    compile::Snapshot,
    config::Config,
    responder::{Responder, Transport},
    server::tcp_frame,
};
use libfuzzer_sys::fuzz_target;

static RESPONDER: LazyLock<Responder> = LazyLock::new(|| {
    let config = Config::parse(
        include_str!("../../examples/demo.toml"),
        Path::new("demo.toml"),
    )
    .expect("demo config");
    Responder::new(&Snapshot::from_config(&config))
});

fuzz_target!(|data: &[u8]| {
    let clients: [IpAddr; 2] = [
        [192, 0, 2, 10].into(),
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x10].into(),
    ];
    let mut rest = data;
    let mut index = 0;
    while let Some((message, used)) = tcp_frame::split(rest) {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        assert_eq!((message, used), (&rest[2..2 + len], 2 + len), "split");
        let client = clients[index % 2];
        if let Some(reply) = RESPONDER.respond(message, client, Transport::Tcp) {
            assert!(
                message.len() >= 2 && reply.len() >= 12,
                "a reply of {}",
                reply.len()
            );
            assert_eq!(reply[..2], message[..2], "reply ID");
            assert!(reply[2] & 0x80 != 0, "QR clear in a reply");
            let framed = tcp_frame::frame(&reply).expect("a TCP reply fits its length prefix");
            assert_eq!(
                tcp_frame::split(&framed),
                Some((reply.as_slice(), framed.len())),
                "a framed reply reads back"
            );
        }
        rest = &rest[used..];
        index += 1;
    }
    // What is left is a query not complete yet: shorter than its prefix says.
    if rest.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        assert!(rest.len() < 2 + len, "a whole message left unsplit");
    }
});
