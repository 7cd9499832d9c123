//! DNS cookies in the fast path (`gslb_xdp_cookie`; the rules are gslb-common's cookie.rs): a
//! query whose COOKIE option brings back a server cookie of ours, made for its source address
//! under the current secret at most half an hour ago, is answered with that option echoed and
//! without rate limiting; any other cookie is passed, and the responder gives a new one.

use aya_ebpf::{helpers::bpf_ktime_get_coarse_ns, macros::map, maps::Array, programs::XdpContext};
use gslb_common::{
    COOKIE_DATA_LEN, COOKIE_VERSION, CookieHasher, CookieKey, ProgramConfig, cookie_echoed,
};

use crate::{
    HEARTBEAT, Miss, Scratch, csum,
    hdr::{Ipv4Hdr, Ipv6Hdr, ld, ld_addr6, ptr_at, st},
    parse::Query,
};

/// The current secret as SipHash's key, by generation parity (see `CookieKey`).
#[map]
static COOKIE_KEY: Array<CookieKey> = Array::with_max_entries(2, 0);

/// The COOKIE option as the query carries it when it brings a server cookie back: code and
/// length, the client cookie, the server cookie's head (version, reserved, timestamp) and hash.
#[repr(C)]
struct CookieOption {
    code_len: [u8; 4],
    client: [u8; 8],
    head: [u8; 8],
    hash: [u8; 8],
}
const _: () = assert!(core::mem::size_of::<CookieOption>() == 4 + COOKIE_DATA_LEN);

/// The COOKIE option a reply echoes, as it goes on the wire, and its checksum sum (native
/// 16-bit words from its first byte, folded): copied into the reply by one helper call
/// (reply.rs), which needs no room on the program's stack.
#[repr(C)]
pub struct Echo {
    pub option: [u8; 4 + COOKIE_DATA_LEN],
    pub sum: u32,
}

/// Whether the query's cookie (at `scratch.cookie_at`) is one the reply echoes, which it
/// leaves in `scratch.cookie` either way. A miss (`Cookie`) otherwise: no cookie, a client
/// cookie alone or a server cookie of another length, another version, not fresh
/// (`cookie_echoed`, by the wall clock: the coarse monotonic clock plus the controller's
/// offset in its heartbeat), or not ours for this source under the current secret.
///
/// The option is copied to `scratch` first and each word loaded from there when it is used:
/// the program's stack is full, and values live across the map lookups (calls) or beside
/// SipHash's four words spilled past its 512 bytes.
#[inline(always)]
pub fn check(
    ctx: &XdpContext,
    q: &Query,
    config: &ProgramConfig,
    scratch: &mut Scratch,
) -> Result<(), Miss> {
    // Verifier only, the mask: an offset read back from memory is any u32 to it, and a packet
    // pointer needs a bounded one (the parse's offsets are far below 4096: a question name of
    // at most 128 bytes and at most four options of bounded length before it).
    let at = scratch.cookie_at as usize & 0xfff;
    if at == 0 {
        return Err(Miss::Cookie);
    }
    let o = ptr_at::<CookieOption>(ctx, at, Miss::Cookie)?;
    let echo = &mut scratch.cookie;
    let p = echo.option.as_mut_ptr();
    // SAFETY: `o` bounds-checked by `ptr_at`; `p` is `option`'s 28 bytes.
    unsafe {
        st(p, ld::<u32>(o));
        st(p.add(4), ld::<u64>(&raw const (*o).client));
        st(p.add(12), ld::<u64>(&raw const (*o).head));
        st(p.add(20), ld::<u64>(&raw const (*o).hash));
    }
    // SAFETY (every `word`): inside `option`.
    let word = |at: usize| unsafe { ld::<u64>(p.add(at)) };
    // The length (bytes 2 and 3, big-endian) and the version (the head's first byte).
    let code_len = unsafe { ld::<u32>(p) };
    if code_len >> 16 != (COOKIE_DATA_LEN as u16).to_be() as u32 || word(12) as u8 != COOKIE_VERSION
    {
        return Err(Miss::Cookie);
    }
    // Verifier only: element 0 of an array always exists; so do both parities.
    let (Some(beat), Some(key)) = (HEARTBEAT.get(0), COOKIE_KEY.get(config.generation & 1)) else {
        return Err(Miss::Cookie);
    };
    // SAFETY: a helper without arguments.
    let mono_ns = unsafe { bpf_ktime_get_coarse_ns() };
    let now = (mono_ns.wrapping_add(beat.wall_offset_ns) / 1_000_000_000) as u32;
    // The timestamp: the head's last 4 bytes, big-endian.
    if !cookie_echoed(u32::from_be((word(12) >> 32) as u32), now) {
        return Err(Miss::Cookie);
    }
    let mut h = CookieHasher::new(key);
    h.write(word(4));
    h.write(word(12));
    // The source address as its wire bytes load.
    let hash = if q.v6 {
        let ip = ptr_at::<Ipv6Hdr>(ctx, q.l4 - Ipv6Hdr::LEN, Miss::Malformed)?;
        // SAFETY: bounds-checked by `ptr_at`.
        let (hi, lo) = unsafe { ld_addr6(&raw const (*ip).saddr) };
        h.write(hi);
        h.write(lo);
        h.finish_v6()
    } else {
        let ip = ptr_at::<Ipv4Hdr>(ctx, q.l4 - Ipv4Hdr::LEN, Miss::Malformed)?;
        // SAFETY: bounds-checked by `ptr_at`.
        h.finish_v4(unsafe { ld::<u32>(&raw const (*ip).saddr) })
    };
    if hash != word(20) {
        return Err(Miss::Cookie);
    }
    let sum =
        csum::w64(code_len as u64) + csum::w64(word(4)) + csum::w64(word(12)) + csum::w64(hash);
    scratch.cookie.sum = csum::fold64(sum) as u32;
    Ok(())
}
