//! The HTTP monitor's check of a response (`health::http_check_over`: hyper's response parser,
//! the status check and the `body_contains` match), with the server played by the input over
//! an in-memory stream. Input: a mode byte, a needle (its length, then its bytes), then either
//! the body of a 200 response the target frames (chunked, at chunk sizes the input gives, or
//! with a Content-Length) or, in raw mode, the whole response as the server sends it.
//!
//! It must never panic or hang; a framed body passes the check exactly when it contains the
//! needle, however it is cut into chunks (the bodies here are within the 64 KiB the check
//! reads).
#![no_main]

use std::{net::SocketAddr, sync::LazyLock};

use gslb_user::health::{CheckError, HttpCheck, http_check_over};
use libfuzzer_sys::{Corpus, fuzz_target};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
});

const RAW: u8 = 0;
const CHUNKED: u8 = 1;

/// `body` in a 200 response: chunked at `sizes` (cycled), or with a Content-Length.
fn response(body: &[u8], sizes: &[u8], chunked: bool) -> Vec<u8> {
    let mut r = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n".to_vec();
    if !chunked {
        r.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        r.extend_from_slice(body);
        return r;
    }
    r.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
    let mut rest = body;
    for &size in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (chunk, after) = rest.split_at((usize::from(size) + 1).min(rest.len()));
        r.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        r.extend_from_slice(chunk);
        r.extend_from_slice(b"\r\n");
        rest = after;
    }
    r.extend_from_slice(b"0\r\n\r\n");
    r
}

fuzz_target!(|data: &[u8]| -> Corpus {
    let [mode, len, rest @ ..] = data else {
        return Corpus::Reject;
    };
    let len = usize::from(len % 32) + 1;
    if rest.len() < len {
        return Corpus::Reject;
    }
    let (needle, rest) = rest.split_at(len);
    let needle = String::from_utf8_lossy(needle).into_owned();
    let mode = mode % 3;
    let (sent, body) = match (mode, rest) {
        (RAW, _) => (rest.to_vec(), None),
        (_, [count, rest @ ..]) => {
            let count = usize::from(count % 8) + 1;
            if rest.len() < count {
                return Corpus::Reject;
            }
            let (sizes, body) = rest.split_at(count);
            (response(body, sizes, mode == CHUNKED), Some(body))
        }
        _ => return Corpus::Reject,
    };
    let check = HttpCheck {
        body_contains: Some(needle.clone()),
        ..HttpCheck::get("/")
    };
    let addr = SocketAddr::from(([192, 0, 2, 80], 80));
    let result = RUNTIME.block_on(async {
        let (client, mut server) = tokio::io::duplex(1 << 17);
        let serve = async {
            // The request first (hyper refuses a response before its request), then the
            // response and the end of the stream.
            // (The client ending first, on an error of its own, ends the pipe too.)
            let mut request = Vec::new();
            while !request.ends_with(b"\r\n\r\n") {
                let Ok(b) = server.read_u8().await else {
                    return;
                };
                request.push(b);
            }
            let _ = server.write_all(&sent).await;
            let _ = server.shutdown().await;
        };
        tokio::join!(serve, http_check_over(addr, client, &check)).1
    });
    if let Some(body) = body {
        let found = body.windows(needle.len()).any(|w| w == needle.as_bytes());
        match (&result, found) {
            (Ok(()), true) | (Err(CheckError::Body(_)), false) => {}
            _ => panic!("needle {needle:?} found {found}, check gave {result:?}"),
        }
    }
    Corpus::Keep
});
