//! Response rate limiting in the fast path (`[rrl]`): the settings the controller writes to
//! `RRL_CONFIG` and the per-CPU buckets `RRL` the program keeps (gslb-ebpf/src/rrl.rs), the
//! same GCRA arithmetic as the responder's (gslb-user/src/responder/rrl.rs).

/// Slot 0 of the `RRL_CONFIG` array. All zero (as created): off.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RrlConfig {
    /// Non-zero: limit answers.
    pub enabled: u32,
    /// Every `slip`-th answer over the limit goes out truncated (TC=1, no records); 0: none.
    pub slip: u32,
    /// Nanoseconds one answer costs (1 s / rate).
    pub interval_ns: u64,
    /// How far ahead of now a bucket's arrival time may run: burst × interval.
    pub allowance_ns: u64,
    /// Masks of the source address, as the native words the program loads from the packet
    /// (bytes in network order): IPv4 (IPv4-mapped, so only the second word), IPv6.
    pub mask_v4_lo: u64,
    pub mask_v6_hi: u64,
    pub mask_v6_lo: u64,
}
const _: () = assert!(size_of::<RrlConfig>() == 48);

/// Key of `RRL`: the masked source address (IPv4-mapped for IPv4) as two native words.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RrlKey {
    pub hi: u64,
    pub lo: u64,
}
const _: () = assert!(size_of::<RrlKey>() == 16);

/// Value of `RRL` (per CPU): GCRA's theoretical arrival time and the answers over the limit.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RrlState {
    /// `bpf_ktime_get_ns` at which the bucket is full again.
    pub tat: u64,
    /// Answers over the limit so far (every `slip`-th slips).
    pub over: u32,
    pub reserved: u32,
}
const _: () = assert!(size_of::<RrlState>() == 16);

/// Buckets of `RRL` per CPU (an LRU: the least recently used prefix goes first).
pub const RRL_MAX: u32 = 1 << 16;

/// Slots of the per-CPU `RRL_COUNTERS` array.
pub const RRL_DROPPED: u32 = 0;
pub const RRL_SLIPPED: u32 = 1;
pub const RRL_COUNTERS_LEN: u32 = 2;

/// Map names in the object file.
pub const RRL_CONFIG_MAP: &str = "RRL_CONFIG";
pub const RRL_MAP: &str = "RRL";
pub const RRL_COUNTERS_MAP: &str = "RRL_COUNTERS";

// User side only: u128 arithmetic has no place in the BPF object.
#[cfg(feature = "user")]
impl RrlConfig {
    /// The settings for `rate` answers a second, `burst` at once, a slip every `slip`-th over
    /// the limit, sources counted by IPv4 `/v4` and IPv6 `/v6` prefixes.
    pub fn new(rate: u32, burst: u32, slip: u32, v4: u8, v6: u8) -> Self {
        let interval_ns = 1_000_000_000 / u64::from(rate.max(1));
        let mask = |len: u32| -> u128 { u128::MAX.checked_shl(128 - len.min(128)).unwrap_or(0) };
        let words = |m: u128| -> (u64, u64) {
            let b = m.to_be_bytes();
            let mut hi = [0u8; 8];
            let mut lo = [0u8; 8];
            hi.copy_from_slice(&b[..8]);
            lo.copy_from_slice(&b[8..]);
            (u64::from_ne_bytes(hi), u64::from_ne_bytes(lo))
        };
        let (_, mask_v4_lo) = words(mask(96 + u32::from(v4)));
        let (mask_v6_hi, mask_v6_lo) = words(mask(u32::from(v6)));
        RrlConfig {
            enabled: 1,
            slip,
            interval_ns,
            allowance_ns: interval_ns * u64::from(burst),
            mask_v4_lo,
            mask_v6_hi,
            mask_v6_lo,
        }
    }
}

#[cfg(feature = "user")]
mod pod {
    use super::{RrlConfig, RrlKey, RrlState};
    // SAFETY: repr(C), Copy, without padding (sizes asserted above); every bit pattern is valid.
    unsafe impl aya::Pod for RrlConfig {}
    unsafe impl aya::Pod for RrlKey {}
    unsafe impl aya::Pod for RrlState {}
}
