//! The MEP frame decoder on arbitrary bytes: it must never panic, only return a typed error;
//! whatever it accepts must encode back to the same bytes (the format has one encoding).
#![no_main]

use gslb_user::mep::frame::{DEFAULT_MAX_PAYLOAD, decode_frame, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A small cap too, so that the oversized path is reached with short inputs.
    for max in [DEFAULT_MAX_PAYLOAD, 64] {
        if let Ok((version, message, used)) = decode_frame(data, max) {
            let again = encode(version, &message, max).expect("a decoded message encodes");
            assert_eq!(again, &data[..used], "one encoding per message");
        }
    }
});
