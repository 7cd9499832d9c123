//! Response rate limiting in the fast path (`[rrl]`), as NLnet Labs' XDPeriments RRL does it:
//! a per-CPU LRU map keyed by the masked source address, so CPUs never contend for a bucket.
//! Each bucket is GCRA's theoretical arrival time (`RrlState::tat`); the arithmetic is the
//! responder's (gslb-user/src/responder/rrl.rs). Because buckets are per CPU, a flood whose
//! packets the NIC spreads over N receive queues may get up to N times the rate; one source
//! address hashes to one queue on RSS NICs.
//!
//! Hooks in main.rs: `verdict` before a reply is built; a slip is the reply with no records and
//! TC=1.

use aya_ebpf::{
    helpers::bpf_ktime_get_ns,
    macros::map,
    maps::{Array, LruPerCpuHashMap, PerCpuArray},
};
use gslb_common::{
    RRL_COUNTERS_LEN, RRL_DROPPED, RRL_MAX, RRL_SLIPPED, RrlConfig, RrlKey, RrlState,
};

#[map]
static RRL_CONFIG: Array<RrlConfig> = Array::with_max_entries(1, 0);
#[map]
static RRL: LruPerCpuHashMap<RrlKey, RrlState> = LruPerCpuHashMap::with_max_entries(RRL_MAX, 0);
#[map]
static RRL_COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(RRL_COUNTERS_LEN, 0);

/// What to do with an answer.
pub enum Verdict {
    Send,
    /// Over the limit: XDP_DROP.
    Drop,
    /// Over the limit, and this one's turn: the reply goes out with TC=1 and no records.
    Slip,
}

#[inline(always)]
fn count(slot: u32) {
    if let Some(c) = RRL_COUNTERS.get_ptr_mut(slot) {
        // SAFETY: per-CPU slot, only this CPU writes it while the program runs.
        unsafe { *c += 1 };
    }
}

/// The verdict on an answer to the source `hi`, `lo` (the address as two native words,
/// IPv4-mapped for IPv4). Off (the array as created, or `[rrl]` absent): one inlined array
/// lookup.
#[inline(always)]
pub fn verdict(v6: bool, hi: u64, lo: u64) -> Verdict {
    let Some(c) = RRL_CONFIG.get(0) else {
        return Verdict::Send;
    };
    if c.enabled == 0 {
        return Verdict::Send;
    }
    let key = if v6 {
        RrlKey {
            hi: hi & c.mask_v6_hi,
            lo: lo & c.mask_v6_lo,
        }
    } else {
        RrlKey {
            hi,
            lo: lo & c.mask_v4_lo,
        }
    };
    // SAFETY: plain helper call.
    let now = unsafe { bpf_ktime_get_ns() };
    let Some(state) = RRL.get_ptr_mut(&key) else {
        // A new prefix: a full bucket, this answer taken from it.
        let fresh = RrlState {
            tat: now + c.interval_ns,
            over: 0,
            reserved: 0,
        };
        let _ = RRL.insert(&key, &fresh, 0);
        return Verdict::Send;
    };
    // SAFETY: this CPU's copy of the value; nothing else writes it while the program runs.
    let state = unsafe { &mut *state };
    let tat = if state.tat > now { state.tat } else { now };
    if tat + c.interval_ns - now <= c.allowance_ns {
        state.tat = tat + c.interval_ns;
        return Verdict::Send;
    }
    state.over = state.over.wrapping_add(1);
    // A division is costly in BPF, but only answers over the limit pay it.
    if c.slip != 0 && state.over % c.slip == 0 {
        count(RRL_SLIPPED);
        Verdict::Slip
    } else {
        count(RRL_DROPPED);
        Verdict::Drop
    }
}
