//! Which resolvers (LDNS) to probe: those that queried us. The responder records each query's
//! source with an [`LdnsRecorder`]; the fast path records into its `LDNS` map, which gslbd's
//! daemon scans and feeds to the same recorder as [`Sightings`] ([`LdnsRecorder::record_scan`]). Both go through the recorder's [`SourceFilter`] first, so a
//! source that can only be claimed (loopback, multicast, this host, `[rtt] deny`) is never
//! recorded. The prober drains the recorder into its [`super::table::LdnsTable`], which groups
//! addresses by the LDNS mask.

use std::{
    collections::HashMap,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::time::Instant;

use super::admit::{Refusal, SourceFilter};

/// NetScaler's LDNS entry timeout: an entry without a query for this long is dropped.
pub const DEFAULT_LDNS_TIMEOUT: Duration = Duration::from_secs(180);

/// Addresses waiting in a recorder between two drains, at most; more are dropped (a drain
/// happens every tick of the prober, so only a flood of new sources reaches this).
pub const RECORDER_BACKLOG: usize = 1 << 16;

/// How resolvers are grouped (NetScaler `ldnsmask`): addresses in one /`v4` (IPv4) or /`v6`
/// (IPv6) prefix are one LDNS entry, probed at one address and sharing one RTT. The default,
/// /32 and /128, keeps every address apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LdnsMask {
    pub v4: u8,
    pub v6: u8,
}

impl Default for LdnsMask {
    fn default() -> Self {
        LdnsMask { v4: 32, v6: 128 }
    }
}

impl LdnsMask {
    /// The entry (group) an address belongs to: its prefix's first address. IPv4-mapped IPv6
    /// addresses (a dual-stack socket's view of IPv4 clients) count as IPv4.
    pub fn group(&self, addr: IpAddr) -> IpAddr {
        match addr.to_canonical() {
            IpAddr::V4(a) => {
                let bits = u32::from(self.v4.min(32));
                let keep = if bits == 0 {
                    0
                } else {
                    u32::MAX << (32 - bits)
                };
                IpAddr::V4(Ipv4Addr::from(u32::from(a) & keep))
            }
            IpAddr::V6(a) => {
                let bits = u32::from(self.v6.min(128));
                let keep = if bits == 0 {
                    0
                } else {
                    u128::MAX << (128 - bits)
                };
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & keep))
            }
        }
    }

    /// Whether every address is its own group.
    pub fn is_exact(&self) -> bool {
        self.v4 >= 32 && self.v6 >= 128
    }

    /// `group` written as a prefix when the mask groups addresses ("198.51.100.0/24"), else as
    /// the address.
    pub fn display(&self, group: IpAddr) -> String {
        match group {
            IpAddr::V4(_) if self.v4 < 32 => format!("{group}/{}", self.v4),
            IpAddr::V6(_) if self.v6 < 128 => format!("{group}/{}", self.v6),
            _ => group.to_string(),
        }
    }
}

/// Sources seen some time ago, as a scan of the fast path's `LDNS` map reports them. The
/// daemon implements it for the dataplane's scan, so that this module needs no map.
pub trait Sightings {
    /// Each source, at the address it is probed at, and the time since its last query.
    fn sightings(&self) -> impl Iterator<Item = (IpAddr, Duration)> + '_;
}

/// Collects the sources of queries, cheaply, from any thread (the responder's loops, the task
/// that scans the fast path's map), until the prober drains them. Clones share one buffer and
/// one [`SourceFilter`]: a source it refuses is counted and never recorded.
#[derive(Clone, Debug, Default)]
pub struct LdnsRecorder {
    pending: Arc<Mutex<HashMap<IpAddr, Instant>>>,
    /// Set while nothing probes: the responder's loops keep their recorder for gslbd's life,
    /// and must not fill a buffer nobody drains (nor pay for its lock).
    off: Arc<AtomicBool>,
    filter: SourceFilter,
    counts: Arc<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    denied: AtomicU64,
    martian: AtomicU64,
    own: AtomicU64,
    dropped: AtomicU64,
}

/// What a recorder refused or dropped so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordStats {
    /// Sources in a `[rtt] deny` prefix.
    pub denied: u64,
    /// Martian sources (loopback, multicast, ...; see [`super::admit`]).
    pub martian: u64,
    /// Sources claiming one of this host's addresses.
    pub own: u64,
    /// New sources dropped because [`RECORDER_BACKLOG`] were already waiting.
    pub dropped: u64,
}

impl LdnsRecorder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A recorder judging sources with `filter` (tests give one with chosen host addresses).
    pub fn with_filter(filter: SourceFilter) -> Self {
        LdnsRecorder {
            filter,
            ..Self::default()
        }
    }

    /// The rule sources are judged by (its policy follows `[rtt] deny` / `allow`).
    pub fn filter(&self) -> &SourceFilter {
        &self.filter
    }

    /// Turns recording on (the default) or off; turning it off drops what is pending.
    pub fn set_enabled(&self, enabled: bool) {
        self.off.store(!enabled, Ordering::Relaxed);
        if !enabled {
            self.pending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clear();
        }
    }

    pub fn is_enabled(&self) -> bool {
        !self.off.load(Ordering::Relaxed)
    }

    /// A query from `addr` now. For the responder: call it with the source of every query it
    /// answers authoritatively (not the EDNS client subnet: the resolver is the one to probe).
    pub fn record(&self, addr: IpAddr) {
        self.record_at(addr, Instant::now());
    }

    /// A query from `addr` at `at`. A source the filter refuses is counted, not recorded.
    pub fn record_at(&self, addr: IpAddr, at: Instant) {
        if !self.is_enabled() {
            return;
        }
        let addr = addr.to_canonical();
        if let Err(refusal) = self.filter.check(addr) {
            let counter = match refusal {
                Refusal::Denied => &self.counts.denied,
                Refusal::Martian => &self.counts.martian,
                Refusal::OwnAddress => &self.counts.own,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if pending.len() >= RECORDER_BACKLOG && !pending.contains_key(&addr) {
            self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let seen = pending.entry(addr).or_insert(at);
        if at > *seen {
            *seen = at;
        }
    }

    /// The resolvers in a scan of the fast path's `LDNS` map (each at the address it is probed
    /// at, seen `idle` ago), judged like the responder's.
    pub fn record_scan(&self, scan: &impl Sightings) {
        let now = Instant::now();
        for (addr, idle) in scan.sightings() {
            self.record_at(addr, now.checked_sub(idle).unwrap_or(now));
        }
    }

    /// Everything recorded since the last drain: each address once, at its latest query.
    pub fn drain(&self) -> Vec<(IpAddr, Instant)> {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        pending.drain().collect()
    }

    pub fn stats(&self) -> RecordStats {
        let c = &self.counts;
        RecordStats {
            denied: c.denied.load(Ordering::Relaxed),
            martian: c.martian.load(Ordering::Relaxed),
            own: c.own.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// A recorder whose host has no addresses (the test host's might be the documentation
    /// addresses these tests use).
    fn recorder() -> LdnsRecorder {
        LdnsRecorder::with_filter(SourceFilter::with_host_addresses(
            std::collections::HashSet::default(),
        ))
    }

    #[test]
    fn masks_group_addresses_by_prefix() {
        // (mask v4, mask v6, address, group)
        let table = [
            (32, 128, "198.51.100.7", "198.51.100.7"),
            (24, 128, "198.51.100.7", "198.51.100.0"),
            (20, 128, "198.51.127.250", "198.51.112.0"),
            (1, 128, "198.51.100.7", "128.0.0.0"),
            (32, 128, "2001:db8:1:2::7", "2001:db8:1:2::7"),
            (32, 56, "2001:db8:1:2ff::7", "2001:db8:1:200::"),
            (32, 64, "2001:db8:1:2ff::7", "2001:db8:1:2ff::"),
            // IPv4-mapped: an IPv4 resolver seen on a dual-stack socket.
            (24, 56, "::ffff:198.51.100.7", "198.51.100.0"),
            // Lengths above the family's are the whole address.
            (40, 200, "198.51.100.7", "198.51.100.7"),
        ];
        for (v4, v6, addr, group) in table {
            let mask = LdnsMask { v4, v6 };
            assert_eq!(mask.group(ip(addr)), ip(group), "/{v4} /{v6} {addr}");
        }
        assert!(LdnsMask::default().is_exact());
        let mask = LdnsMask { v4: 24, v6: 128 };
        assert!(!mask.is_exact());
        assert_eq!(mask.display(ip("198.51.100.0")), "198.51.100.0/24");
        assert_eq!(mask.display(ip("2001:db8::7")), "2001:db8::7");
    }

    #[test]
    fn the_recorder_keeps_the_latest_sighting_of_each_address() {
        let t0 = Instant::now();
        let recorder = recorder();
        let other = recorder.clone();
        recorder.record_at(ip("192.0.2.1"), t0 + Duration::from_secs(2));
        other.record_at(ip("192.0.2.1"), t0);
        other.record_at(ip("::ffff:192.0.2.2"), t0);
        let mut drained = recorder.drain();
        drained.sort();
        assert_eq!(
            drained,
            [
                (ip("192.0.2.1"), t0 + Duration::from_secs(2)),
                (ip("192.0.2.2"), t0)
            ]
        );
        assert!(other.drain().is_empty());
    }

    #[test]
    fn a_recorder_turned_off_records_nothing_and_drops_what_was_pending() {
        let t0 = Instant::now();
        let recorder = recorder();
        let other = recorder.clone();
        recorder.record_at(ip("192.0.2.1"), t0);
        other.set_enabled(false);
        assert!(!recorder.is_enabled());
        recorder.record_at(ip("192.0.2.2"), t0);
        assert!(recorder.drain().is_empty());
        other.set_enabled(true);
        recorder.record_at(ip("192.0.2.3"), t0);
        assert_eq!(recorder.drain(), [(ip("192.0.2.3"), t0)]);
    }

    #[test]
    fn the_recorder_refuses_what_its_filter_refuses_and_counts_why() {
        use std::collections::HashSet;
        let t0 = Instant::now();
        let own: HashSet<IpAddr> = [ip("203.0.113.53")].into();
        let recorder = LdnsRecorder::with_filter(SourceFilter::with_host_addresses(own));
        recorder
            .filter()
            .set_policy(super::super::admit::SourcePolicy {
                deny: vec!["198.51.100.0/24".parse().unwrap()],
                allow: vec![],
            });
        for a in [
            "127.0.0.1",
            "127.0.0.9",
            "::1",
            "224.0.0.5",
            "203.0.113.53",
            "198.51.100.7",
        ] {
            recorder.record_at(ip(a), t0);
        }
        recorder.record_at(ip("192.0.2.1"), t0);
        assert_eq!(recorder.drain(), [(ip("192.0.2.1"), t0)]);
        let want = RecordStats {
            denied: 1,
            martian: 4,
            own: 1,
            dropped: 0,
        };
        assert_eq!(recorder.stats(), want);
    }

    #[test]
    fn a_full_backlog_drops_new_sources_and_counts_them() {
        let t0 = Instant::now();
        let recorder = recorder();
        for i in 0..RECORDER_BACKLOG as u32 + 10 {
            recorder.record_at(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)), t0);
        }
        // One already waiting is still refreshed.
        recorder.record_at(ip("10.0.0.0"), t0 + Duration::from_secs(1));
        assert_eq!(recorder.stats().dropped, 10);
        let drained = recorder.drain();
        assert_eq!(drained.len(), RECORDER_BACKLOG);
        assert!(drained.contains(&(ip("10.0.0.0"), t0 + Duration::from_secs(1))));
    }
}
