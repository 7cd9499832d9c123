//! The floor of the hit path, for benches only (gslbd never attaches it): what every answer
//! costs before any map is read. The same parse as `gslb_xdp` (parse.rs's map-free parts:
//! Ethernet/VLAN, IPv4/IPv6, UDP to `dns_port`, the DNS header and the question name walked,
//! lower-cased and hashed as the real program walks it, the OPT), then the frame turned around
//! in place by reply.rs's [`reply::turn_around`] with no records: a NOERROR reply with AA and
//! no answers, MACs, addresses and ports swapped, both checksums right.
//!
//! Left out, so that `xdp_a_hit_v4` minus `xdp_floor` is what the lookups and the records
//! cost: the heartbeat, the served-address and MAC checks, the client and its view, the answer
//! lookups, rotation, rate limiting, counters, `LDNS`, and growing the frame
//! (`bpf_xdp_adjust_tail`). The one map read is `CONFIG` (an inlined array lookup) for
//! `dns_port` and the OPT's UDP size; the name's words go to the stack, not to `SCRATCH`.

use aya_ebpf::{bindings::xdp_action, macros::xdp, programs::XdpContext};
use gslb_common::QNAME_WORDS;

use crate::{CONFIG, Miss, parse, reply};

/// Answers a plain A/AAAA query (as `gslb_xdp` would parse it) with an empty NOERROR reply;
/// passes everything else, uncounted.
#[xdp]
pub fn gslb_floor(ctx: XdpContext) -> u32 {
    floor(&ctx).unwrap_or(xdp_action::XDP_PASS)
}

#[inline(always)]
fn floor(ctx: &XdpContext) -> Result<u32, Miss> {
    // Verifier only: element 0 of an array always exists.
    let config = CONFIG.get(0).ok_or(Miss::OtherPort)?;
    let datagram = parse::datagram(ctx, config)?;
    // Written by the walk before anything reads it (nothing here does).
    let mut name = core::mem::MaybeUninit::<[u64; QNAME_WORDS]>::uninit();
    let mut len = 0u32;
    let q = parse::message(ctx, &datagram, name.as_mut_ptr() as *mut u8, &mut len)?;
    let layout = reply::Layout::new(&q, 0);
    // Only a reply of the query's size (the floor never grows or shrinks the frame): every
    // query without EDNS options or Ethernet padding.
    if layout.msg_end != ctx.data_end() - ctx.data() {
        return Err(Miss::Additional);
    }
    reply::turn_around(ctx, &q, config, &layout, 0, 0, false, 0)?;
    Ok(xdp_action::XDP_TX)
}
