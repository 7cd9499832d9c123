//! What the program leaves for userspace to read: the per-CPU counters (`COUNTERS`: every miss
//! by reason, every hit by family and type) and the resolvers that query us (`LDNS`, which the
//! controller probes for dynamic RTT). RRL keeps its own counters (rrl.rs).

use aya_ebpf::{bindings::BPF_NOEXIST, helpers::bpf_ktime_get_ns};
use gslb_common::{Counter, LDNS_CACHE_SLOTS, LDNS_OFF, LdnsKey, LdnsValue, ldns_slot};

use crate::{
    COUNTERS, LDNS, LDNS_CONFIG, Scratch,
    hdr::{ld_addr6, st},
    parse::Client,
};

#[inline(always)]
pub fn count(counter: Counter) {
    if let Some(slot) = COUNTERS.get_ptr_mut(counter as u32) {
        // SAFETY: per-CPU slot, only this CPU writes it while the program runs.
        unsafe { *slot += 1 };
    }
}

/// The counter of an answer sent, by family and qtype.
#[inline(always)]
pub fn hit(v6: bool, aaaa: bool) -> Counter {
    match (v6, aaaa) {
        (false, false) => Counter::HitAV4,
        (false, true) => Counter::HitAaaaV4,
        (true, false) => Counter::HitAV6,
        (true, true) => Counter::HitAaaaV6,
    }
}

/// Records the client's address in `LDNS`: key, the address with the LDNS mask's host bits
/// cleared; value, when it was last seen and the address to probe. The common case, a resolver
/// already refreshed in this epoch on this CPU, costs an inlined array lookup, a multiply and a
/// compare with the cache slot in `scratch`; otherwise one LRU lookup and an in-place store of
/// the time, or an insert for a new resolver. (An LRU value may be recycled under the program:
/// the worst that can happen is another resolver's time refreshed once.)
#[inline(always)]
pub fn source(scratch: &mut Scratch, v6: bool, client: &Client) {
    let (hi, lo) = client.source();
    let Some(config) = LDNS_CONFIG.get(0) else {
        return;
    };
    let host = if v6 { &config.host_v6 } else { &config.host_v4 };
    // SAFETY: 16 bytes of the map value.
    let (host_hi, host_lo) = unsafe { ld_addr6(host) };
    let key = [hi & !host_hi, lo & !host_lo];
    // Verifier only: the slot index is below LDNS_CACHE_SLOTS already.
    let i = ldns_slot(key) as usize & (LDNS_CACHE_SLOTS - 1);
    // SAFETY: i < LDNS_CACHE_SLOTS.
    let slot = unsafe { scratch.ldns.get_unchecked_mut(i) };
    // (Recording off: checked after the cache, which never holds a key then, so that the
    // common case does not pay for it.)
    if slot.key[0] == key[0] && slot.key[1] == key[1] && slot.epoch == config.epoch
        || config.flags & LDNS_OFF != 0
    {
        return;
    }
    // SAFETY: a helper without arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    // SAFETY: same size, and every byte pattern is an address.
    let map_key: LdnsKey = unsafe { core::mem::transmute::<[u64; 2], LdnsKey>(key) };
    match LDNS.get_ptr_mut(&map_key) {
        // SAFETY: a map value; a plain store of one word.
        Some(value) => unsafe { st(&raw mut (*value).last_seen_ns, now) },
        None => {
            let value = LdnsValue {
                last_seen_ns: now,
                // SAFETY: as above.
                addr: unsafe { core::mem::transmute::<[u64; 2], [u8; 16]>([hi, lo]) },
            };
            // Another CPU may have inserted it meanwhile: then its entry stays.
            let _ = LDNS.insert(&map_key, &value, BPF_NOEXIST as u64);
        }
    }
    slot.key = key;
    slot.epoch = config.epoch;
}
