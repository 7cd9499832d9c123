//! DNS server cookies in the fast path (RFC 7873, made as RFC 9018 says): what `gslb_xdp_cookie`
//! needs to take a query that brings back a fresh server cookie of ours and answer it with
//! that cookie echoed, exempt from rate limiting, as the responder does (responder/cookies.rs).
//!
//! The program never makes a cookie: it echoes one the responder (or another node of the site)
//! gave at most half an hour before, which RFC 9018 §4.3 allows ("SHOULD generate a new Server
//! Cookie at least if the received Server Cookie from the client is more than half an hour
//! old"). Anything else (a client cookie alone, another server's, an older one, one made under
//! the previous secret) is passed, and the responder gives a new one.

/// The EDNS option code of COOKIE (RFC 7873 §4).
pub const OPTION_COOKIE: u16 = 10;
/// The option's data as this server gives it: the client cookie (8) and the server cookie
/// (16: version, 3 reserved bytes, timestamp, hash).
pub const COOKIE_DATA_LEN: usize = 24;
/// The option on the wire: code, length, data.
pub const COOKIE_OPTION_LEN: usize = 4 + COOKIE_DATA_LEN;
/// The server cookie's version (RFC 9018 §4.1).
pub const COOKIE_VERSION: u8 = 1;
/// A server cookie of ours is valid up to an hour after its timestamp (RFC 9018 §4.3) ...
pub const COOKIE_MAX_AGE_S: u32 = 3600;
/// ... and up to five minutes before it, for the clocks of the site's nodes.
pub const COOKIE_MAX_AHEAD_S: u32 = 300;
/// A valid cookie stamped at most this long ago is echoed as it came; an older one is renewed.
pub const COOKIE_ECHO_MAX_AGE_S: u32 = 1800;

/// Whether a cookie of ours stamped at `timestamp` is echoed at `now` rather than renewed
/// (seconds since the epoch mod 2^32, compared in serial arithmetic, RFC 1982): at most
/// [`COOKIE_ECHO_MAX_AGE_S`] old, or at most [`COOKIE_MAX_AHEAD_S`] ahead of our clock. The
/// responder and the program decide alike, so they give the same bytes.
#[inline(always)]
pub const fn cookie_echoed(timestamp: u32, now: u32) -> bool {
    now.wrapping_sub(timestamp) <= COOKIE_ECHO_MAX_AGE_S
        || timestamp.wrapping_sub(now) <= COOKIE_MAX_AHEAD_S
}

/// Value of `COOKIE_KEY`, one per generation parity (slot `generation & 1`, written before the
/// switch to its generation like `NSID`): SipHash-2-4's key, the current `server.cookie_secret`
/// as two little-endian words. Only the current secret: a cookie made under the previous one
/// is renewed by the responder.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CookieKey {
    pub k0: u64,
    pub k1: u64,
}
const _: () = assert!(size_of::<CookieKey>() == 16);

impl CookieKey {
    pub const fn new(secret: [u8; 16]) -> CookieKey {
        let [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p] = secret;
        CookieKey {
            k0: u64::from_le_bytes([a, b, c, d, e, f, g, h]),
            k1: u64::from_le_bytes([i, j, k, l, m, n, o, p]),
        }
    }
}

/// RFC 9018's hash of a server cookie: SipHash-2-4 under `key` of the client cookie, the
/// server cookie's first 8 bytes (version, reserved, timestamp) and the client's address,
/// every word as a little-endian load of its wire bytes gives it. `addr`: the IPv6 address's
/// two words (`v6`), or the IPv4 address's in the low half of `addr[0]`. The result is the
/// server cookie's last 8 bytes as a little-endian load.
///
/// Written out here rather than taken from a crate because the program needs it straight-line,
/// in registers, for a fixed length: a general hasher keeps its state and buffer on a stack
/// the program has no room on. The userspace tests hold it to the `siphasher` crate the
/// responder uses.
#[inline(always)]
pub fn cookie_hash(key: &CookieKey, client: u64, head: u64, v6: bool, addr: [u64; 2]) -> u64 {
    let mut s = CookieHasher::new(key);
    s.write(client);
    s.write(head);
    if v6 {
        s.write(addr[0]);
        s.write(addr[1]);
        s.finish_v6()
    } else {
        s.finish_v4(addr[0] as u32)
    }
}

/// [`cookie_hash`] a word at a time, for a caller that loads each word only when it is hashed
/// (the program: fewer values live at once, so none spills to its full stack). SipHash-2-4
/// (Aumasson and Bernstein, 2012) over whole words, then the address's last.
pub struct CookieHasher([u64; 4]);

impl CookieHasher {
    #[inline(always)]
    pub fn new(key: &CookieKey) -> CookieHasher {
        CookieHasher([
            key.k0 ^ 0x736f_6d65_7073_6575,
            key.k1 ^ 0x646f_7261_6e64_6f6d,
            key.k0 ^ 0x6c79_6765_6e65_7261,
            key.k1 ^ 0x7465_6462_7974_6573,
        ])
    }

    #[inline(always)]
    fn round(&mut self) {
        let v = &mut self.0;
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }

    /// The client cookie, the server cookie's head, and an IPv6 address's two words.
    #[inline(always)]
    pub fn write(&mut self, m: u64) {
        self.compress(m);
    }

    /// The end after an IPv6 address: 32 bytes were hashed.
    #[inline(always)]
    pub fn finish_v6(mut self) -> u64 {
        self.compress(32 << 56);
        self.finish()
    }

    /// The end with an IPv4 address (`addr`: its wire bytes as a little-endian load): 20
    /// bytes in all.
    #[inline(always)]
    pub fn finish_v4(mut self, addr: u32) -> u64 {
        self.compress(u64::from(addr) | 20 << 56);
        self.finish()
    }

    /// One message word, two rounds (the "2" of 2-4).
    #[inline(always)]
    fn compress(&mut self, m: u64) {
        self.0[3] ^= m;
        self.round();
        self.round();
        self.0[0] ^= m;
    }

    /// Four rounds (the "4").
    #[inline(always)]
    fn finish(mut self) -> u64 {
        self.0[2] ^= 0xff;
        self.round();
        self.round();
        self.round();
        self.round();
        self.0[0] ^ self.0[1] ^ self.0[2] ^ self.0[3]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(bytes: &[u8]) -> u64 {
        let mut w = [0u8; 8];
        w[..bytes.len()].copy_from_slice(bytes);
        u64::from_le_bytes(w)
    }

    /// RFC 9018 Appendix A.1 and A.4: the hashes of the RFC's cookies, IPv4 and IPv6.
    #[test]
    fn rfc_9018_appendix_a() {
        let cases: [(&str, &str, &[u8], &str); 2] = [
            (
                "e5e973e5a6b2a43f48e7dc849e37bfcf",
                "2464c4abcf10c957010000005cf79f11",
                &[198, 51, 100, 100],
                "1f8130c3eee29480",
            ),
            (
                "dd3bdf9344b678b185a6f5cb60fca715",
                "22681ab97d52c298010000005cf7c579",
                &[
                    0x20, 0x01, 0x0d, 0xb8, 0x02, 0x20, 0x00, 0x01, 0x59, 0xde, 0xd0, 0xf4, 0x87,
                    0x69, 0x82, 0xb8,
                ],
                "26556bd0934c72f8",
            ),
        ];
        for (secret, cookie, addr, hash) in cases {
            let secret = hex(secret);
            let cookie = hex(cookie);
            let key = CookieKey::new(secret);
            let v6 = addr.len() == 16;
            let a = if v6 {
                [word(&addr[..8]), word(&addr[8..])]
            } else {
                [word(addr), 0]
            };
            let got = cookie_hash(&key, word(&cookie[..8]), word(&cookie[8..16]), v6, a);
            assert_eq!(got, word(&hex(hash)[..8]), "{v6}");
        }
    }

    #[test]
    fn echoed_for_half_an_hour_and_five_minutes_ahead_across_the_wrap() {
        assert!(cookie_echoed(1000, 1000) && cookie_echoed(1000, 2800));
        assert!(!cookie_echoed(1000, 2801));
        assert!(cookie_echoed(1300, 1000) && !cookie_echoed(1301, 1000));
        assert!(cookie_echoed(u32::MAX - 100, 1000) && !cookie_echoed(u32::MAX - 1000, 1000));
    }

    fn hex(s: &str) -> [u8; 16] {
        let mut out = [0u8; 16];
        for (i, pair) in s.as_bytes().chunks(2).enumerate() {
            out[i] = u8::from_str_radix(core::str::from_utf8(pair).unwrap(), 16).unwrap();
        }
        out
    }
}
