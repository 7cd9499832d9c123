//! `server.ecs_allow`: whether the query's source may speak for its clients with EDNS Client
//! Subnet (RFC 7871), as the responder decides it (`responder::ecs::Allow`). The list is the
//! `ECS_ALLOW` trie, written by the controller for each generation's parity (see
//! `gslb_common::EcsAllowKey`). A source outside it gets what the responder gives it: the
//! option ignored, so its own address picks the view and the reply's OPT carries no option.
//!
//! Hook in main.rs: [`apply`] once the client (the packet's source) is known. Without ECS in
//! the query it reads no map; with ECS, the generation's `LISTEN_SET` slot (inlined) for
//! `ECS_ALLOW_LIST`, and with a list one trie lookup (~15 ns).

use aya_ebpf::{macros::map, maps::LpmTrie};
use gslb_common::{
    ECS_ALLOW_LIST, ECS_ALLOW_MAX, ECS_ALLOW_TAG_BITS, ECS_FAMILY_V4, ECS_FAMILY_V6, EcsAllowKey,
    ProgramConfig,
};

use crate::{
    LISTEN_SET, TrieKey,
    parse::{Client, Query, Subnet},
};

#[map]
static ECS_ALLOW: LpmTrie<EcsAllowKey, u8> = LpmTrie::with_max_entries(ECS_ALLOW_MAX, 0);

/// Drops the query's ECS option when `server.ecs_allow` is set and the source is not in it.
/// `config` is the one the packet read its generation from, so the parity (of the flag in
/// `LISTEN_SET` and of the list) matches the answers it reads.
#[inline(always)]
pub fn apply(q: &mut Query, config: &ProgramConfig, client: &Client) {
    if q.ecs.len == 0 {
        return;
    }
    // An inlined array lookup; the parse read the same slot.
    match LISTEN_SET.get(config.generation & 1) {
        Some(set) if set.flags & ECS_ALLOW_LIST != 0 => {}
        _ => return,
    }
    let family = if q.v6 { ECS_FAMILY_V6 } else { ECS_FAMILY_V4 };
    let (hi, lo) = client.source();
    // The key's bytes: parity, family, two zeros (one native word), then the source as
    // `Client` holds it (IPv4-mapped for IPv4).
    let key = TrieKey::<5> {
        prefix_len: ECS_ALLOW_TAG_BITS + 128,
        data: [
            u32::from_le_bytes([(config.generation & 1) as u8, family, 0, 0]),
            hi as u32,
            (hi >> 32) as u32,
            lo as u32,
            (lo >> 32) as u32,
        ],
    };
    if ECS_ALLOW.get(key.as_key::<EcsAllowKey>()).is_none() {
        q.ecs = Subnet::none();
    }
}
