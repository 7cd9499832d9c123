//! DNS cookies in the fast path (`gslb_xdp_cookie`, issue 29): with `server.cookie_secret`, a
//! query that brings back a server cookie of ours, made for its address under the current
//! secret at most half an hour ago (or up to five minutes ahead), is answered with the cookie
//! echoed byte for byte (before our NSID, after nothing else); every other cookie goes to the
//! responder (`cookie`), which gives a new one. The RFC 9018 vectors are in the unit tests
//! (gslb-common's cookie.rs, the responder's cookies.rs).

use crate::common;

use std::net::IpAddr;

use common::*;
use gslb_common::Counter;
use gslb_user::dataplane::Dataplane;
use hickory_proto::rr::RecordType;
use hickory_proto::rr::rdata::opt::EdnsOption;

use super::{V4, V6, dataplane_with, ecs_frame, nsid, www_default};

const PREVIOUS: &str = "dd3bdf9344b678b185a6f5cb60fca715";
const CLIENT_COOKIE: [u8; 8] = [0x24, 0x64, 0xc4, 0xab, 0xcf, 0x10, 0xc9, 0x57];

/// The fast path with cookies configured (and a previous secret, and an identity), its
/// heartbeat written (the program's wall clock).
fn cookie_dataplane() -> Option<Dataplane> {
    let server = format!(
        "identity = \"xdp-1\"\ncookie_secret = \"{COOKIE_SECRET}\"\ncookie_previous_secret = \"{PREVIOUS}\"\n"
    );
    let mut dp = dataplane_with(&server, "")?;
    dp.take_heartbeat()
        .expect("the heartbeat map")
        .beat(None)
        .expect("a beat");
    Some(dp)
}

/// The client of `server`'s family that `Frame::query_to` sends from.
fn client_of(server: IpAddr) -> IpAddr {
    match server {
        IpAddr::V4(_) => IpAddr::V4(CLIENT_V4),
        IpAddr::V6(_) => IpAddr::V6(CLIENT_V6),
    }
}

/// www `rtype` from `server`'s client with an OPT carrying `options`.
fn frame(server: IpAddr, rtype: RecordType, options: Vec<EdnsOption>) -> Frame {
    ecs_frame(client_of(server), server, WWW, rtype, options)
}

#[test]
fn answers_a_fresh_cookie_of_ours_with_it_echoed() {
    let Some(dp) = cookie_dataplane() else { return };
    let now = unix_now();
    for server in [V4, V6] {
        let client = client_of(server);
        for rtype in [RecordType::A, RecordType::AAAA] {
            // Made now, a minute and 29 minutes ago, and by a node whose clock is 4 minutes
            // ahead of ours.
            for stamp in [now, now - 60, now - 1740, now + 240] {
                let cookie = cookie_made(COOKIE_SECRET, CLIENT_COOKIE, client, stamp);
                let case = format!(
                    "{rtype} over {server}, stamped {}",
                    i64::from(stamp) - i64::from(now)
                );
                let bytes = frame(server, rtype, vec![cookie_option(cookie.clone())]).bytes();
                let out = run(&dp, &bytes);
                let expect = www_default(rtype);
                assert_reply_echoing(&case, &bytes, &out, &expect, None, Some(&cookie), None);
                // With an NSID request, before or after the cookie: the cookie, then our NSID.
                for options in [
                    vec![nsid(), cookie_option(cookie.clone())],
                    vec![cookie_option(cookie.clone()), nsid()],
                ] {
                    let bytes = frame(server, rtype, options).bytes();
                    let out = run(&dp, &bytes);
                    let case = format!("{case}, NSID");
                    let id = Some(&b"xdp-1"[..]);
                    assert_reply_echoing(&case, &bytes, &out, &expect, None, Some(&cookie), id);
                }
            }
        }
    }
}

#[test]
fn passes_every_other_cookie() {
    let Some(dp) = cookie_dataplane() else { return };
    let now = unix_now();
    for server in [V4, V6] {
        let client = client_of(server);
        let made = |secret, stamp| cookie_made(secret, CLIENT_COOKIE, client, stamp);
        let fresh = made(COOKIE_SECRET, now);
        let edited = |edit: fn(&mut Vec<u8>)| {
            let mut c = fresh.clone();
            edit(&mut c);
            c
        };
        let other: IpAddr = if server.is_ipv4() {
            "203.0.113.8".parse().unwrap()
        } else {
            "2001:db8:2::8".parse().unwrap()
        };
        let one = |data: Vec<u8>| vec![cookie_option(data)];
        #[rustfmt::skip]
        let cases: Vec<(&str, Vec<EdnsOption>)> = vec![
            ("a client cookie alone", one(CLIENT_COOKIE.to_vec())),
            // Valid (the responder lets it through its RRL) but renewed there.
            ("31 minutes old", one(made(COOKIE_SECRET, now - 1860))),
            ("made under the previous secret", one(made(PREVIOUS, now))),
            // Not valid at all.
            ("61 minutes old", one(made(COOKIE_SECRET, now - 3660))),
            ("6 minutes ahead", one(made(COOKIE_SECRET, now + 360))),
            ("under another secret", one(made("00112233445566778899aabbccddeeff", now))),
            ("made for another address", one(cookie_made(COOKIE_SECRET, CLIENT_COOKIE, other, now))),
            ("its hash changed", one(edited(|c| c[23] ^= 1))),
            ("another client cookie", one(edited(|c| c[0] ^= 1))),
            ("version 2", one(edited(|c| c[8] = 2))),
            ("a server cookie of 8 bytes", one(edited(|c| c.truncate(16)))),
            ("a server cookie of 32 bytes", one(edited(|c| c.extend([0; 16])))),
            ("two cookies", vec![cookie_option(fresh.clone()), cookie_option(fresh.clone())]),
            // The responder's: `gslb_xdp_cookie` has no room for both.
            ("a cookie beside ECS", vec![ecs_subnet("198.51.100.0/24"), cookie_option(fresh.clone())]),
        ];
        for (case, options) in cases {
            let bytes = frame(server, RecordType::A, options).bytes();
            assert_passed(
                &format!("{case} over {server}"),
                &dp,
                &bytes,
                Counter::Cookie,
            );
        }
        // The fresh one itself is answered.
        let bytes = frame(server, RecordType::A, one(fresh.clone())).bytes();
        assert_eq!(
            run(&dp, &bytes).action,
            XDP_TX,
            "the fresh cookie over {server}"
        );
    }
}
