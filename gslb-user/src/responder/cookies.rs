//! DNS cookies (RFC 7873), server cookies as RFC 9018 makes them: to a query that carries a
//! client cookie, a server cookie of version 1, a timestamp and SipHash-2-4 under the site's
//! secret of (client cookie, version, reserved, timestamp, client address). A query that
//! brings back one of ours, fresh and made for its address, proves that address answers: the
//! response rate limiter lets it through (as NSD and Knot do). Nothing is demanded: a query
//! without a cookie, or with one that is not ours, is answered as before, with a new cookie.
//! One of ours made under the current secret at most half an hour ago is given back as it
//! came, as the fast path does (gslb-common's cookie.rs), so both give the same bytes.

use std::hash::Hasher as _;
use std::net::IpAddr;

use gslb_common::{
    COOKIE_DATA_LEN, COOKIE_MAX_AGE_S, COOKIE_MAX_AHEAD_S, COOKIE_VERSION, cookie_echoed,
};
use siphasher::sip::SipHasher24;

use super::canonical;
use crate::model::CookieSecrets;

pub(super) use gslb_common::OPTION_COOKIE;
const CLIENT_LEN: usize = 8;
/// The server cookie this server gives: version, reserved, timestamp, hash (RFC 9018 §4.2).
const SERVER_LEN: usize = COOKIE_DATA_LEN - CLIENT_LEN;
const VERSION: u8 = COOKIE_VERSION;

/// A COOKIE option's data, checked for length (RFC 7873 §5.2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Cookie<'a> {
    pub(super) client: [u8; CLIENT_LEN],
    /// Empty, or 8 to 32 bytes.
    pub(super) server: &'a [u8],
}

/// The option's data is 8 bytes, or 16 to 40: anything else is malformed, answered FORMERR.
pub(super) fn parse(data: &[u8]) -> Option<Cookie<'_>> {
    if data.len() != CLIENT_LEN && !(16..=40).contains(&data.len()) {
        return None;
    }
    let (client, server) = data.split_at(CLIENT_LEN);
    Some(Cookie {
        client: client.try_into().expect("8 bytes"),
        server,
    })
}

/// The server cookie for `client_cookie` from `client` at `timestamp` (seconds since the
/// epoch, mod 2^32) with `reserved` as the client sent it back (zeros when made here). Public
/// for tests that play a client coming back with one.
pub fn server_cookie(
    secret: &[u8; 16],
    client_cookie: [u8; CLIENT_LEN],
    reserved: [u8; 3],
    timestamp: u32,
    client: IpAddr,
) -> [u8; SERVER_LEN] {
    let mut hasher = SipHasher24::new_with_key(secret);
    hasher.write(&client_cookie);
    hasher.write(&[VERSION]);
    hasher.write(&reserved);
    hasher.write(&timestamp.to_be_bytes());
    match canonical(client) {
        IpAddr::V4(a) => hasher.write(&a.octets()),
        IpAddr::V6(a) => hasher.write(&a.octets()),
    }
    let mut out = [0u8; SERVER_LEN];
    out[0] = VERSION;
    out[4..8].copy_from_slice(&timestamp.to_be_bytes());
    // The hash as RFC 9018's examples write it: SipHash's 64-bit result, little-endian.
    out[8..].copy_from_slice(&hasher.finish().to_le_bytes());
    out
}

/// Whether `cookie` is [`verified`], and the COOKIE option data of the response to it: the
/// client cookie and the server cookie it brought, when that is ours under the current secret
/// and at most half an hour old (`cookie_echoed`), else a new one. One hash under the current
/// secret answers both (the previous secret's only when that one fails).
pub(super) fn respond(
    secrets: &CookieSecrets,
    cookie: &Cookie<'_>,
    client: IpAddr,
    now: u32,
) -> (bool, Vec<u8>) {
    let current = ours(&secrets.current, cookie, client, now);
    let verified = current.is_some()
        || secrets
            .previous
            .is_some_and(|previous| ours(&previous, cookie, client, now).is_some());
    let mut data = Vec::with_capacity(CLIENT_LEN + SERVER_LEN);
    data.extend_from_slice(&cookie.client);
    if current.is_some_and(|stamp| cookie_echoed(stamp, now)) {
        data.extend_from_slice(cookie.server);
        return (verified, data);
    }
    data.extend_from_slice(&server_cookie(
        &secrets.current,
        cookie.client,
        [0; 3],
        now,
        client,
    ));
    (verified, data)
}

/// [`respond`]'s option data alone.
#[cfg(test)]
fn response(secrets: &CookieSecrets, cookie: &Cookie<'_>, client: IpAddr, now: u32) -> Vec<u8> {
    respond(secrets, cookie, client, now).1
}

/// Whether `cookie`'s server part is one of ours for `client`: version 1, stamped at most an
/// hour before `now` and at most five minutes after it (serial arithmetic, RFC 1982: the
/// timestamp wraps in 2106), its hash that of the current or the previous secret ([`respond`]'s
/// first half).
#[cfg(test)]
fn verified(secrets: &CookieSecrets, cookie: &Cookie<'_>, client: IpAddr, now: u32) -> bool {
    respond(secrets, cookie, client, now).0
}

/// The timestamp of `cookie`'s server part, when it is one of ours for `client` under
/// `secret` and valid at `now` (see [`respond`]).
fn ours(secret: &[u8; 16], cookie: &Cookie<'_>, client: IpAddr, now: u32) -> Option<u32> {
    let server = <&[u8; SERVER_LEN]>::try_from(cookie.server).ok()?;
    if server[0] != VERSION {
        return None;
    }
    let timestamp = u32::from_be_bytes(server[4..8].try_into().expect("4 bytes"));
    let age = now.wrapping_sub(timestamp);
    if age > COOKIE_MAX_AGE_S && timestamp.wrapping_sub(now) > COOKIE_MAX_AHEAD_S {
        return None;
    }
    let reserved = [server[1], server[2], server[3]];
    // The hash: the version and timestamp are in it, and were read from `server`.
    (server_cookie(secret, cookie.client, reserved, timestamp, client)[8..] == server[8..])
        .then_some(timestamp)
}

/// Seconds since the epoch, mod 2^32, the cookies' clock.
pub(super) fn now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        data_encoding::HEXLOWER.decode(s.as_bytes()).unwrap()
    }

    fn secrets(current: &str, previous: Option<&str>) -> CookieSecrets {
        CookieSecrets {
            current: hex(current).try_into().unwrap(),
            previous: previous.map(|p| hex(p).try_into().unwrap()),
        }
    }

    const SECRET: &str = "e5e973e5a6b2a43f48e7dc849e37bfcf";

    /// RFC 9018 Appendix A: the cookies a server with these secrets gives and takes.
    #[test]
    fn rfc_9018_appendix_a() {
        let s = secrets(SECRET, None);
        let ip = |a: &str| a.parse::<IpAddr>().unwrap();
        // A.1: a new client learns a server cookie.
        let client = hex("2464c4abcf10c957");
        let a1 = parse(&client).unwrap();
        let given = response(&s, &a1, ip("198.51.100.100"), 1_559_731_985);
        assert_eq!(
            given,
            hex("2464c4abcf10c957010000005cf79f111f8130c3eee29480")
        );
        // A.2: it comes back 40 minutes later, valid; the renewed one is the RFC's.
        let back = parse(&given).unwrap();
        assert!(verified(&s, &back, ip("198.51.100.100"), 1_559_734_385));
        assert_eq!(
            response(&s, &back, ip("198.51.100.100"), 1_559_734_385),
            hex("2464c4abcf10c957010000005cf7a871d4a564a1442aca77")
        );
        // From another address, or after more than an hour, it is not ours.
        assert!(!verified(&s, &back, ip("198.51.100.101"), 1_559_734_385));
        assert!(!verified(
            &s,
            &back,
            ip("198.51.100.100"),
            1_559_731_985 + 3601
        ));
        assert!(verified(
            &s,
            &back,
            ip("198.51.100.100"),
            1_559_731_985 + 3600
        ));
        // A.3: another client's cookie, reserved bytes set by another server of the site,
        // is valid within its hour (they are hashed as sent); at the RFC's time, 1h52m after
        // it was made, it is stale, and the renewal is the RFC's.
        let a3 = hex("fc93fc62807ddb8601abcdef5cf78f71a314227b6679ebf5");
        let a3 = parse(&a3).unwrap();
        assert!(verified(&s, &a3, ip("203.0.113.203"), 1_559_727_985 + 60));
        assert!(!verified(&s, &a3, ip("203.0.113.203"), 1_559_734_700));
        assert_eq!(
            response(&s, &a3, ip("203.0.113.203"), 1_559_734_700),
            hex("fc93fc62807ddb86010000005cf7a9acf73a7810aca2381e")
        );
        // A.4: an IPv6 client's cookie made with the old secret is valid while that secret is
        // the previous one, not under the new secret alone.
        let a4 = hex("22681ab97d52c298010000005cf7c57926556bd0934c72f8");
        let a4 = parse(&a4).unwrap();
        let v6 = ip("2001:db8:220:1:59de:d0f4:8769:82b8");
        let new = "445536bcd2513298075a5d379663c962";
        let old = "dd3bdf9344b678b185a6f5cb60fca715";
        assert!(verified(&secrets(new, Some(old)), &a4, v6, 1_559_741_961));
        assert!(!verified(&secrets(new, None), &a4, v6, 1_559_741_961));
    }

    /// RFC 7873 §5.2.2: 8 bytes, or 16 to 40; the rest is FORMERR.
    #[test]
    fn lengths() {
        for len in 0..=48 {
            let ok = len == 8 || (16..=40).contains(&len);
            assert_eq!(parse(&vec![1; len]).is_some(), ok, "{len}");
        }
        // A server part of another length, or another version, is never ours.
        let s = secrets(SECRET, None);
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let mut cookie = vec![1; 8];
        cookie.extend(server_cookie(&s.current, [1; 8], [0; 3], 100, ip));
        assert!(verified(&s, &parse(&cookie).unwrap(), ip, 100));
        cookie[8] = 2;
        assert!(!verified(&s, &parse(&cookie).unwrap(), ip, 100));
        cookie.extend([0; 8]);
        assert!(!verified(&s, &parse(&cookie).unwrap(), ip, 100));
    }

    /// A cookie of ours under the current secret at most half an hour old is given back as
    /// it came (reserved bytes and all), as the fast path gives it; an older one, one under
    /// the previous secret, or another address's is renewed.
    #[test]
    fn a_fresh_cookie_is_echoed_and_an_older_one_renewed() {
        let ip = |a: &str| a.parse::<IpAddr>().unwrap();
        let a3 = hex("fc93fc62807ddb8601abcdef5cf78f71a314227b6679ebf5");
        let a3c = parse(&a3).unwrap();
        let s = secrets(SECRET, None);
        let made = 1_559_727_985;
        for (after, echoed) in [
            (0, true),
            (60, true),
            (1800, true),
            (1801, false),
            (3000, false),
        ] {
            let got = response(&s, &a3c, ip("203.0.113.203"), made + after);
            assert_eq!(got == a3, echoed, "{after} s after");
            assert_eq!(&got[..8], &a3[..8]);
        }
        // Ahead of our clock by up to five minutes (another node's), echoed too.
        assert_eq!(response(&s, &a3c, ip("203.0.113.203"), made - 300), a3);
        // Another address: renewed.
        assert_ne!(response(&s, &a3c, ip("203.0.113.204"), made), a3);
        // Made under what is now the previous secret: valid, but renewed under the new one.
        let rolled = secrets("445536bcd2513298075a5d379663c962", Some(SECRET));
        assert!(verified(&rolled, &a3c, ip("203.0.113.203"), made + 60));
        let renewed = response(&rolled, &a3c, ip("203.0.113.203"), made + 60);
        assert_ne!(renewed, a3);
        assert!(verified(
            &secrets("445536bcd2513298075a5d379663c962", None),
            &parse(&renewed).unwrap(),
            ip("203.0.113.203"),
            made + 60
        ));
    }

    /// The fast path's hash (gslb-common's, written out for the program) is this one, which
    /// the `siphasher` crate computes, for every length the program hashes.
    #[test]
    fn the_fast_paths_hash_is_siphasher_s() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for i in 0..2000 {
            let secret: [u8; 16] = [next().to_le_bytes(), next().to_le_bytes()]
                .concat()
                .try_into()
                .unwrap();
            let client = next().to_le_bytes();
            let head = next();
            let (reserved, stamp) = (
                [(head >> 8) as u8, (head >> 16) as u8, (head >> 24) as u8],
                u32::from_be((head >> 32) as u32),
            );
            let v6 = i % 2 == 1;
            let (a, b) = (next(), next());
            let addr: IpAddr = if v6 {
                let mut o = [0u8; 16];
                o[..8].copy_from_slice(&a.to_le_bytes());
                o[8..].copy_from_slice(&b.to_le_bytes());
                // Not IPv4-mapped: the responder hashes those as the IPv4 address.
                o[0] = 0x20;
                std::net::Ipv6Addr::from(o).into()
            } else {
                std::net::Ipv4Addr::from((a as u32).to_le_bytes()).into()
            };
            let words = match addr {
                IpAddr::V6(x) => {
                    let o = x.octets();
                    [
                        u64::from_le_bytes(o[..8].try_into().unwrap()),
                        u64::from_le_bytes(o[8..].try_into().unwrap()),
                    ]
                }
                IpAddr::V4(x) => [u64::from(u32::from_le_bytes(x.octets())), 0],
            };
            let want = server_cookie(&secret, client, reserved, stamp, addr);
            let key = gslb_common::CookieKey::new(secret);
            // The head as the program loads it: version 1, then what was hashed.
            let head = (head & !0xff) | 1;
            let got = gslb_common::cookie_hash(&key, u64::from_le_bytes(client), head, v6, words);
            assert_eq!(got.to_le_bytes(), want[8..], "case {i}");
        }
    }

    /// The window: an hour back, five minutes ahead, across the wrap of the 32-bit clock.
    #[test]
    fn the_timestamp_window_wraps() {
        let s = secrets(SECRET, None);
        let ip: IpAddr = "2001:db8::1".parse().unwrap();
        let at = |stamp: u32, now: u32| {
            let mut cookie = vec![7; 8];
            cookie.extend(server_cookie(&s.current, [7; 8], [0; 3], stamp, ip));
            verified(&s, &parse(&cookie).unwrap(), ip, now)
        };
        assert!(at(1000, 1000) && at(1000, 4600) && !at(1000, 4601));
        assert!(at(1300, 1000) && !at(1301, 1000));
        assert!(at(u32::MAX - 100, 1000) && !at(u32::MAX - 3000, 1000));
    }
}
