//! The MEP frame decoder on arbitrary bytes: it must never panic, only return a typed error;
//! whatever it accepts must encode back to the same bytes (the format has one encoding), and
//! take exactly the frame its header announces.
#![no_main]

use gslb_user::mep::frame::{
    DEFAULT_MAX_PAYLOAD, HEADER_LEN, MAX_HANDSHAKE_PAYLOAD, decode_frame, decode_header, encode,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The caps of an authenticated link and of the handshake, and a small one, so that the
    // oversized path is reached with short inputs.
    for max in [DEFAULT_MAX_PAYLOAD, MAX_HANDSHAKE_PAYLOAD, 64] {
        if let Ok((version, message, used)) = decode_frame(data, max) {
            let header = decode_header(data, max).expect("a decoded frame's header decodes");
            assert_eq!(
                used,
                HEADER_LEN + header.len,
                "the frame its header announces"
            );
            let again = encode(version, &message, max).expect("a decoded message encodes");
            assert_eq!(again, &data[..used], "one encoding per message");
        }
    }
});
