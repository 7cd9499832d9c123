//! The floor of the hit path, for benches only (gslbd never attaches them): what every answer
//! costs before any map is read. The same parse as `gslb_xdp` (parse.rs's map-free parts:
//! Ethernet/VLAN, IPv4/IPv6, UDP to `dns_port`, the DNS header and the question name walked,
//! lower-cased and hashed as the real program walks it, the OPT), then the frame turned around
//! in place by reply.rs's [`reply::turn_around`]:
//! - `gslb_floor`: with no records: a NOERROR reply with AA and no answers, MACs, addresses and
//!   ports swapped, both checksums right;
//! - `gslb_floor_grow`: with one A record of a constant address, for which the frame grows by
//!   `bpf_xdp_adjust_tail` as every real answer's does: the floor plus the one kernel call no
//!   answer can do without, so a bench shows what that call costs on its machine.
//!
//! Left out, so that `xdp_a_hit_v4` minus `xdp_floor` is what the lookups and the records
//! cost: the heartbeat, the served-address and MAC checks, the client and its view, the answer
//! lookups, rotation, rate limiting, counters, `LDNS`, and (but in `gslb_floor_grow`) growing
//! the frame. The one map read is `CONFIG` (an inlined array lookup) for `dns_port` and the
//! OPT's UDP size; the name's words go to the stack, not to `SCRATCH`.

use aya_ebpf::{
    bindings::xdp_action, helpers::bpf_xdp_adjust_tail, macros::xdp, programs::XdpContext,
};
use gslb_common::{QNAME_WORDS, QTYPE_A};

use crate::{
    CONFIG, Miss, csum,
    hdr::{ptr_at, st},
    parse, reply,
};

/// Answers a plain A/AAAA query (as `gslb_xdp` would parse it) with an empty NOERROR reply;
/// passes everything else, uncounted.
#[xdp]
pub fn gslb_floor(ctx: XdpContext) -> u32 {
    floor::<false>(&ctx).unwrap_or(xdp_action::XDP_PASS)
}

/// Answers a plain A query (as `gslb_xdp` would parse it) with [`RECORD`], the frame grown for
/// it; passes everything else (AAAA included), uncounted.
#[xdp]
pub fn gslb_floor_grow(ctx: XdpContext) -> u32 {
    floor::<true>(&ctx).unwrap_or(xdp_action::XDP_PASS)
}

/// `gslb_floor_grow`'s answer: a pointer to the question name, A, IN, TTL 60, RDLENGTH 4,
/// 192.0.2.1 (TEST-NET-1).
const RECORD: [u8; 16] = [0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1];

#[inline(always)]
fn floor<const GROW: bool>(ctx: &XdpContext) -> Result<u32, Miss> {
    // Verifier only: element 0 of an array always exists.
    let config = CONFIG.get(0).ok_or(Miss::OtherPort)?;
    let datagram = parse::datagram(ctx, config)?;
    // Written by the walk before anything reads it (nothing here does).
    let mut name = core::mem::MaybeUninit::<[u64; QNAME_WORDS]>::uninit();
    let (mut len, mut cookie_at) = (0u32, 0u32);
    let q = parse::message::<false>(
        ctx,
        &datagram,
        name.as_mut_ptr() as *mut u8,
        &mut len,
        &mut cookie_at,
        config,
    )?;
    if !GROW {
        let layout = reply::Layout::new(&q, 0, 0, 0);
        // Only a reply of the query's size (this floor never grows or shrinks the frame):
        // every query without EDNS options or Ethernet padding.
        if layout.msg_end != ctx.data_end() - ctx.data() {
            return Err(Miss::Additional);
        }
        reply::turn_around(ctx, &q, config, &layout, 0, 0, false, 0, None, false)?;
        return Ok(xdp_action::XDP_TX);
    }
    if q.qtype != QTYPE_A {
        return Err(Miss::Qtype);
    }
    let layout = reply::Layout::new(&q, RECORD.len(), 0, 0);
    let delta = layout.msg_end as i32 - (ctx.data_end() - ctx.data()) as i32;
    // SAFETY: plain helper call on our own context; every pointer is re-derived afterwards.
    // (No growth at the head when the frame has no tailroom, as `reply` falls back to: the
    // bench's frames have it.)
    if delta <= 0 || unsafe { bpf_xdp_adjust_tail(ctx.ctx, delta) } != 0 {
        return Err(Miss::NoTailroom);
    }
    // SAFETY: 16 bytes either way, and every bit pattern is a u64.
    let words = unsafe { core::mem::transmute::<[u8; 16], [u64; 2]>(RECORD) };
    for (i, word) in words.iter().enumerate() {
        let p = ptr_at::<u64>(ctx, layout.answers_off + 8 * i, Miss::NoTailroom)?;
        // SAFETY: bounds-checked by `ptr_at`.
        unsafe { st(p, *word) };
    }
    reply::turn_around(
        ctx,
        &q,
        config,
        &layout,
        1,
        csum::bytes(&RECORD),
        false,
        0,
        None,
        false,
    )?;
    Ok(xdp_action::XDP_TX)
}
