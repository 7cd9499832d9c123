//! `[rrl]`'s settings: one value read by two limiters, the fast path's (published from the
//! snapshot) and the responder's (`responder::rrl`), so it travels with the model.

/// `[rrl]`: response rate limiting over UDP (as Knot, NSD and BIND do it), in the fast path
/// (per-CPU buckets, gslb-ebpf/src/rrl.rs) and in the responder (`responder::rrl`), each with
/// buckets of its own. The clients of one source prefix share a token bucket: `rate`
/// responses a second, `burst` at once; a response over the limit is dropped, except every
/// `slip`-th, which goes out truncated (TC=1, no records), so that a real resolver behind a
/// spoofed flood retries over TCP, which is never limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RrlSettings {
    /// Defaults to true when the section is written; without the section, nothing is limited.
    pub enabled: bool,
    /// Responses per second per prefix (1..=1,000,000; default 20, Knot's).
    pub rate: u32,
    /// Responses a prefix may get at once after a quiet spell (1..=1,000,000; default `rate`).
    pub burst: u32,
    /// Every `slip`-th response over the limit goes out truncated; 0: none (0..=100; default 2).
    pub slip: u32,
    /// The prefix clients of IPv4 are counted by (8..=32; default 24).
    pub ipv4_prefix: u8,
    /// The prefix clients of IPv6 are counted by (32..=128; default 56).
    pub ipv6_prefix: u8,
    /// Buckets the responder keeps (each server loop's table; 1,024..=16,777,216, default
    /// 65,536); when full, a new prefix takes the place of another with the same hash, so
    /// memory stays bounded under any number of sources.
    pub table_size: u32,
}

impl Default for RrlSettings {
    fn default() -> Self {
        RrlSettings {
            enabled: false,
            rate: 20,
            burst: 20,
            slip: 2,
            ipv4_prefix: 24,
            ipv6_prefix: 56,
            table_size: 65_536,
        }
    }
}
