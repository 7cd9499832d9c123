//! Response rate limiting (`[rrl]`) for the UDP server loops: one bucket per source prefix
//! (/24, /56 by default), kept as GCRA's "theoretical arrival time" (one u64 a bucket, the same
//! arithmetic as the fast path's `gslb-ebpf/src/rrl.rs`), and slip: every Nth response over the
//! limit goes out truncated (TC=1, no records), so that a real resolver behind a spoofed flood
//! still gets through over TCP, which is never limited (its source is proven).
//!
//! The table is a fixed array of buckets in shards, indexed by a keyed hash of the prefix: a
//! prefix takes the place of another with the same index, so memory is bounded whatever the
//! number of sources, and a lookup is one lock of one shard.

use std::{
    net::IpAddr,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use arc_swap::ArcSwap;
use gslb_common::{V4_MAPPED_BITS, mapped_key};
use hickory_proto::op::Message;

pub use crate::model::RrlSettings;

/// Shards of the table (a loop's lock is one shard's; the loops share the table).
const SHARDS: usize = 64;
const NS_PER_S: u64 = 1_000_000_000;

/// What to do with one response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Send,
    /// Over the limit: nothing goes out.
    Drop,
    /// Over the limit, and this one's turn to slip: send it truncated ([`truncated`]).
    Slip,
}

#[derive(Clone, Copy, Default)]
struct Bucket {
    /// The masked prefix (IPv4 as IPv4-mapped).
    key: u128,
    /// GCRA: when the bucket would be empty again, in ns of the limiter's clock.
    tat: u64,
    /// Responses over the limit so far (counts the slips).
    over: u32,
}

/// The table and the settings it was built for.
struct Table {
    settings: RrlSettings,
    /// Nanoseconds a response costs (1 s / rate).
    interval: u64,
    /// How far ahead the arrival time may run (burst × interval).
    allowance: u64,
    hasher: ahash::RandomState,
    shards: Vec<Mutex<Vec<Bucket>>>,
}

/// Counters since start.
#[derive(Debug, Default)]
pub struct RrlStats {
    pub sent: AtomicU64,
    pub dropped: AtomicU64,
    pub slipped: AtomicU64,
}

/// The responder's rate limiter, replaced with the configuration (a reload with the same
/// settings keeps the buckets).
pub struct Limiter {
    table: ArcSwap<Option<Table>>,
    pub stats: RrlStats,
}

/// `addr` masked to the prefix it is counted by, in the maps' one form ([`mapped_key`]: the
/// fast path's `RRL` keys are the same bits). An IPv4-mapped IPv6 source (from a dual-stack
/// socket) is the IPv4 address it carries, counted by the IPv4 prefix.
fn prefix_key(addr: IpAddr, v4: u8, v6: u8) -> u128 {
    let len = match addr.to_canonical() {
        IpAddr::V4(_) => V4_MAPPED_BITS + u32::from(v4),
        IpAddr::V6(_) => u32::from(v6),
    };
    mapped_key(addr) & u128::MAX.checked_shl(128 - len).unwrap_or(0)
}

impl Table {
    fn new(settings: RrlSettings) -> Self {
        let interval = NS_PER_S / u64::from(settings.rate);
        let per_shard = (settings.table_size as usize).div_ceil(SHARDS);
        Table {
            settings,
            interval,
            allowance: interval * u64::from(settings.burst),
            hasher: ahash::RandomState::new(),
            shards: (0..SHARDS)
                .map(|_| Mutex::new(vec![Bucket::default(); per_shard]))
                .collect(),
        }
    }

    fn verdict(&self, client: IpAddr, now: u64) -> Verdict {
        let s = &self.settings;
        let key = prefix_key(client, s.ipv4_prefix, s.ipv6_prefix);
        let hash = self.hasher.hash_one(key);
        let mut shard = self.shards[hash as usize % SHARDS]
            .lock()
            .expect("not poisoned");
        let len = shard.len();
        let bucket = &mut shard[(hash >> 32) as usize % len];
        if bucket.key != key || bucket.tat == 0 {
            *bucket = Bucket {
                key,
                tat: now,
                over: 0,
            };
        }
        let tat = bucket.tat.max(now);
        if tat + self.interval - now <= self.allowance {
            bucket.tat = tat + self.interval;
            return Verdict::Send;
        }
        bucket.over = bucket.over.wrapping_add(1);
        if s.slip > 0 && bucket.over.is_multiple_of(s.slip) {
            Verdict::Slip
        } else {
            Verdict::Drop
        }
    }
}

impl Limiter {
    pub fn new(settings: &RrlSettings) -> Self {
        let limiter = Limiter {
            table: ArcSwap::from_pointee(None),
            stats: RrlStats::default(),
        };
        limiter.configure(settings);
        limiter
    }

    /// New settings (a reload); the same ones keep the buckets.
    pub fn configure(&self, settings: &RrlSettings) {
        let current = self.table.load();
        let same = match (current.as_ref(), settings.enabled) {
            (Some(t), true) => t.settings == *settings,
            (None, false) => true,
            _ => false,
        };
        if !same {
            self.table.store(std::sync::Arc::new(
                settings.enabled.then(|| Table::new(*settings)),
            ));
        }
    }

    /// Whether limiting is on.
    pub fn is_enabled(&self) -> bool {
        self.table.load().is_some()
    }

    /// The verdict on one UDP response to `client` at `now` (ns of a monotonic clock, > 0).
    pub fn verdict(&self, client: IpAddr, now: u64) -> Verdict {
        let table = self.table.load();
        // Off: not even a shared counter is touched.
        let Some(table) = table.as_ref() else {
            return Verdict::Send;
        };
        let verdict = table.verdict(client, now);
        let counter = match verdict {
            Verdict::Send => &self.stats.sent,
            Verdict::Drop => &self.stats.dropped,
            Verdict::Slip => &self.stats.slipped,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        verdict
    }
}

/// `response` cut to its header, question and OPT, with TC set and no records: what a slip
/// sends (the client retries over TCP), as the fast path's slip. `None` for bytes that do not
/// decode (never, for the responder's own responses).
pub fn truncated(response: &[u8]) -> Option<Vec<u8>> {
    // `truncate` keeps the whole header (AA included) and sets TC.
    Message::from_vec(response).ok()?.truncate().to_vec().ok()
}

/// A monotonic clock in ns for [`Limiter::verdict`], never 0.
pub fn now_ns() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = START.get_or_init(std::time::Instant::now);
    start.elapsed().as_nanos() as u64 + 1
}

#[cfg(test)]
mod tests {
    use gslb_common::{RrlConfig, RrlKey, V4_MAPPED};

    use super::*;

    fn on(rate: u32, burst: u32, slip: u32) -> RrlSettings {
        RrlSettings {
            enabled: true,
            rate,
            burst,
            slip,
            ..RrlSettings::default()
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Verdicts for `n` responses to `client`, one every `every` ns from `start`.
    fn run(l: &Limiter, client: &str, start: u64, every: u64, n: u64) -> (u64, u64, u64) {
        let mut counts = (0, 0, 0);
        for i in 0..n {
            match l.verdict(ip(client), start + i * every) {
                Verdict::Send => counts.0 += 1,
                Verdict::Drop => counts.1 += 1,
                Verdict::Slip => counts.2 += 1,
            }
        }
        counts
    }

    /// The fast path's `RRL` key for `addr` (gslb-ebpf/src/rrl.rs): the address in the maps'
    /// form as two native words, masked by the words [`RrlConfig::new`] computes.
    fn fast_path_key(addr: IpAddr, v4: u8, v6: u8) -> RrlKey {
        let c = RrlConfig::new(1, 1, 0, v4, v6);
        let RrlKey { hi, lo } = words(mapped_key(addr));
        if addr.is_ipv4() {
            RrlKey {
                hi,
                lo: lo & c.mask_v4_lo,
            }
        } else {
            RrlKey {
                hi: hi & c.mask_v6_hi,
                lo: lo & c.mask_v6_lo,
            }
        }
    }

    fn words(key: u128) -> RrlKey {
        let b = key.to_be_bytes();
        RrlKey {
            hi: u64::from_ne_bytes(b[..8].try_into().unwrap()),
            lo: u64::from_ne_bytes(b[8..].try_into().unwrap()),
        }
    }

    #[test]
    fn prefix_keys_are_the_mapped_form_masked_as_the_fast_path_masks_it() {
        let cases: [(&str, u8, u8, u128); 7] = [
            ("192.0.2.77", 24, 56, V4_MAPPED | 0xc000_0200),
            ("192.0.2.77", 32, 56, V4_MAPPED | 0xc000_024d),
            ("192.0.2.77", 0, 56, V4_MAPPED),
            ("2001:db8:aa:bbcc::1", 24, 56, 0x2001_0db8_00aa_bb00 << 64),
            (
                "2001:db8:aa:bbcc::1",
                24,
                128,
                0x2001_0db8_00aa_bbcc_0000_0000_0000_0001,
            ),
            ("2001:db8:aa:bbcc::1", 24, 0, 0),
            // A dual-stack socket's IPv4-mapped source: the IPv4 prefix, not the IPv6 one.
            ("::ffff:192.0.2.77", 24, 128, V4_MAPPED | 0xc000_0200),
        ];
        for (addr, v4, v6, want) in cases {
            let key = prefix_key(ip(addr), v4, v6);
            assert_eq!(key, want, "{addr} /{v4} /{v6}: {key:#x}");
            // The fast path never sees an IPv4-mapped source (it is martian there).
            if ip(addr).to_canonical() == ip(addr) {
                assert_eq!(words(key), fast_path_key(ip(addr), v4, v6), "{addr}");
            }
        }
    }

    #[test]
    fn a_flood_from_one_prefix_gets_the_rate_plus_slips_and_others_all() {
        let l = Limiter::new(&on(10, 5, 2));
        // 1,000 responses a second for 2 s from one /24 (different hosts).
        let mut sent = 0;
        let mut slipped = 0;
        for i in 0..2000u64 {
            let host = format!("198.51.100.{}", i % 250);
            match l.verdict(ip(&host), NS_PER_S + i * NS_PER_S / 1000) {
                Verdict::Send => sent += 1,
                Verdict::Slip => slipped += 1,
                Verdict::Drop => {}
            }
        }
        // The burst, then 10 a second for the 2 s.
        assert!((24..=26).contains(&sent), "sent {sent}");
        assert_eq!(
            slipped,
            (2000 - sent) / 2,
            "every second one over the limit slips"
        );
        // Meanwhile another /24, at its rate, gets every answer.
        assert_eq!(
            run(&l, "198.51.101.1", NS_PER_S, NS_PER_S / 10, 20),
            (20, 0, 0)
        );
        // IPv6: one /56 shares a bucket, the next /56 does not.
        let l = Limiter::new(&on(1, 2, 0));
        assert_eq!(run(&l, "2001:db8:0:1::1", 1, 1, 3), (2, 1, 0));
        assert_eq!(run(&l, "2001:db8:0:ff::2", 1, 1, 1), (0, 1, 0), "same /56");
        assert_eq!(run(&l, "2001:db8:0:100::1", 1, 1, 1), (1, 0, 0), "next /56");
        // The IPv4-mapped form is the IPv4 client.
        let l = Limiter::new(&on(1, 1, 0));
        assert_eq!(run(&l, "192.0.2.1", 1, 1, 1), (1, 0, 0));
        assert_eq!(run(&l, "::ffff:192.0.2.77", 1, 1, 1), (0, 1, 0));
        assert_eq!(l.stats.sent.load(Ordering::Relaxed), 1);
        assert_eq!(l.stats.dropped.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_quiet_prefix_gets_its_burst_back_and_slip_zero_never_slips() {
        let l = Limiter::new(&on(100, 10, 0));
        assert_eq!(run(&l, "192.0.2.1", 1, 0, 30), (10, 20, 0));
        // 100 ms later: ten more.
        assert_eq!(run(&l, "192.0.2.1", 1 + NS_PER_S / 10, 0, 30), (10, 20, 0));
        let slip_all = Limiter::new(&on(1, 1, 1));
        assert_eq!(run(&slip_all, "192.0.2.1", 1, 0, 5), (1, 0, 4));
    }

    #[test]
    fn off_sends_everything_and_a_reload_with_the_same_settings_keeps_the_buckets() {
        let l = Limiter::new(&RrlSettings::default());
        assert!(!l.is_enabled());
        assert_eq!(run(&l, "192.0.2.1", 1, 0, 100), (100, 0, 0));
        l.configure(&on(1, 1, 0));
        assert_eq!(run(&l, "192.0.2.1", 1, 0, 2), (1, 1, 0));
        l.configure(&on(1, 1, 0));
        assert_eq!(run(&l, "192.0.2.1", 1, 0, 1), (0, 1, 0), "bucket kept");
        l.configure(&on(1, 2, 0));
        assert_eq!(
            run(&l, "192.0.2.1", 1, 0, 3),
            (2, 1, 0),
            "new settings, new buckets"
        );
    }

    #[test]
    fn a_million_sources_leave_the_table_at_its_size_and_limiting_working() {
        let settings = RrlSettings {
            table_size: 1024,
            ..on(1, 1, 0)
        };
        let l = Limiter::new(&settings);
        let buckets = || -> usize {
            let table = l.table.load();
            let table = table.as_ref().as_ref().expect("enabled");
            table.shards.iter().map(|s| s.lock().unwrap().len()).sum()
        };
        assert_eq!(buckets(), 1024);
        // A million /24s, each over its limit once.
        for i in 0..1_000_000u32 {
            let a = IpAddr::V4(std::net::Ipv4Addr::from_bits(0x0a00_0000 + (i << 8)));
            l.verdict(a, 1);
            l.verdict(a, 1);
        }
        assert_eq!(buckets(), 1024, "no bucket allocated beyond the table");
        assert_eq!(l.stats.dropped.load(Ordering::Relaxed), 1_000_000);
        // And a flood still meets its limit afterwards.
        assert_eq!(run(&l, "192.0.2.1", 2, 0, 3), (1, 2, 0));
    }

    #[test]
    fn a_slip_is_the_header_question_and_opt_with_tc() {
        let mut response = vec![0x12, 0x34, 0x84, 0x00, 0, 1, 0, 1, 0, 0, 0, 1];
        let question = b"\x03www\x07example\x03com\x00\x00\x01\x00\x01";
        response.extend_from_slice(question);
        response.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 192, 0, 2, 1]);
        let opt = [0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0];
        response.extend_from_slice(&opt);
        let slip = truncated(&response).unwrap();
        let mut want = vec![0x12, 0x34, 0x86, 0x00, 0, 1, 0, 0, 0, 0, 0, 1];
        want.extend_from_slice(question);
        want.extend_from_slice(&opt);
        assert_eq!(slip, want);
        assert_eq!(truncated(&response[..10]), None);
    }
}
