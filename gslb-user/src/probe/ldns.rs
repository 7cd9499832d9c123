//! Which resolvers (LDNS) to probe: those that queried us. The responder records each query's
//! source with an [`LdnsRecorder`]; the fast path records into its `LDNS` map, read by
//! [`crate::dataplane::LdnsMap::scan`] and fed to the same recorder
//! ([`LdnsRecorder::record_scan`]). The prober drains the recorder into an [`LdnsTable`], which
//! groups addresses by the LDNS mask and expires entries idle longer than the LDNS timeout.

use std::{
    collections::HashMap,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use tokio::time::Instant;

use crate::dataplane::LdnsScan;

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

/// Collects the sources of queries, cheaply, from any thread (the responder's loops, the task
/// that scans the fast path's map), until the prober drains them. Clones share one buffer.
#[derive(Clone, Debug, Default)]
pub struct LdnsRecorder {
    pending: Arc<Mutex<HashMap<IpAddr, Instant>>>,
    /// Set while nothing probes: the responder's loops keep their recorder for gslbd's life,
    /// and must not fill a buffer nobody drains (nor pay for its lock).
    off: Arc<AtomicBool>,
}

impl LdnsRecorder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Turns recording on (the default) or off; turning it off drops what is pending.
    pub fn set_enabled(&self, enabled: bool) {
        self.off.store(!enabled, Ordering::Relaxed);
        if !enabled {
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
        }
    }

    pub fn is_enabled(&self) -> bool {
        !self.off.load(Ordering::Relaxed)
    }

    /// A query from `addr` now. For the responder: call it with the source of every query it
    /// answers (not the EDNS client subnet: the resolver is the one to probe).
    pub fn record(&self, addr: IpAddr) {
        self.record_at(addr, Instant::now());
    }

    /// A query from `addr` at `at`.
    pub fn record_at(&self, addr: IpAddr, at: Instant) {
        if !self.is_enabled() {
            return;
        }
        let addr = addr.to_canonical();
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending.len() >= RECORDER_BACKLOG && !pending.contains_key(&addr) {
            return;
        }
        let seen = pending.entry(addr).or_insert(at);
        if at > *seen {
            *seen = at;
        }
    }

    /// The resolvers in a scan of the fast path's `LDNS` map (each at the address it is probed
    /// at, seen `idle` ago).
    pub fn record_scan(&self, scan: &LdnsScan) {
        let now = Instant::now();
        for seen in &scan.seen {
            self.record_at(seen.addr, now.checked_sub(seen.idle).unwrap_or(now));
        }
    }

    /// Everything recorded since the last drain: each address once, at its latest query.
    pub fn drain(&self) -> Vec<(IpAddr, Instant)> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.drain().collect()
    }
}

/// One LDNS entry: a resolver, or a masked prefix of resolvers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LdnsEntry {
    /// The key: the address with the mask's host bits cleared.
    pub group: IpAddr,
    /// The address probed: the first one seen in the group.
    pub addr: IpAddr,
    pub first_seen: Instant,
    pub last_seen: Instant,
    /// When the next probe round is due.
    pub(crate) next_probe: Instant,
    /// A probe round is running.
    pub(crate) in_flight: bool,
    /// Probe rounds done, and which of the last 32 got a reply (bit 0: the latest).
    pub(crate) rounds: u64,
    pub(crate) replies: u32,
}

impl LdnsEntry {
    /// Of the last (up to) 32 probe rounds, the share that got a reply, in hundredths of a
    /// percent (F5's `cur_completion_rate`: 10000 is 100%); `None` before the first round.
    pub fn completion_rate(&self) -> Option<u32> {
        let window = self.rounds.min(32) as u32;
        (window > 0).then(|| self.replies.count_ones() * 10_000 / window)
    }

    /// Probe rounds done so far.
    pub fn rounds(&self) -> u64 {
        self.rounds
    }
}

/// The resolvers to probe, by group.
#[derive(Debug)]
pub struct LdnsTable {
    mask: LdnsMask,
    timeout: Duration,
    entries: HashMap<IpAddr, LdnsEntry>,
}

impl LdnsTable {
    pub fn new(mask: LdnsMask, timeout: Duration) -> Self {
        LdnsTable {
            mask,
            timeout,
            entries: HashMap::new(),
        }
    }

    pub fn mask(&self) -> LdnsMask {
        self.mask
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// A query from `addr` at `at`. Returns the group when it is a new entry (due for a probe
    /// at once).
    pub fn see(&mut self, addr: IpAddr, at: Instant) -> Option<IpAddr> {
        let addr = addr.to_canonical();
        let group = self.mask.group(addr);
        match self.entries.get_mut(&group) {
            Some(entry) => {
                if at > entry.last_seen {
                    entry.last_seen = at;
                }
                None
            }
            None => {
                self.entries.insert(
                    group,
                    LdnsEntry {
                        group,
                        addr,
                        first_seen: at,
                        last_seen: at,
                        next_probe: at,
                        in_flight: false,
                        rounds: 0,
                        replies: 0,
                    },
                );
                Some(group)
            }
        }
    }

    /// Removes the entries idle longer than the timeout at `now`, and returns them.
    pub fn expire(&mut self, now: Instant) -> Vec<LdnsEntry> {
        let timeout = self.timeout;
        let stale: Vec<IpAddr> = self
            .entries
            .values()
            .filter(|e| now.saturating_duration_since(e.last_seen) > timeout)
            .map(|e| e.group)
            .collect();
        stale
            .into_iter()
            .filter_map(|g| self.entries.remove(&g))
            .collect()
    }

    pub fn get(&self, group: &IpAddr) -> Option<&LdnsEntry> {
        self.entries.get(group)
    }

    pub(crate) fn get_mut(&mut self, group: &IpAddr) -> Option<&mut LdnsEntry> {
        self.entries.get_mut(group)
    }

    /// The entry `addr` belongs to.
    pub fn lookup(&self, addr: IpAddr) -> Option<&LdnsEntry> {
        self.entries.get(&self.mask.group(addr))
    }

    pub fn iter(&self) -> impl Iterator<Item = &LdnsEntry> {
        self.entries.values()
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut LdnsEntry> {
        self.entries.values_mut()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
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
    fn a_group_is_one_entry_probed_at_its_first_address() {
        let t0 = Instant::now();
        let mut table = LdnsTable::new(LdnsMask { v4: 24, v6: 128 }, DEFAULT_LDNS_TIMEOUT);
        assert_eq!(table.see(ip("198.51.100.7"), t0), Some(ip("198.51.100.0")));
        assert_eq!(
            table.see(ip("198.51.100.8"), t0 + Duration::from_secs(1)),
            None
        );
        assert_eq!(table.see(ip("198.51.101.8"), t0), Some(ip("198.51.101.0")));
        assert_eq!(table.len(), 2);
        let entry = table.lookup(ip("198.51.100.200")).unwrap();
        assert_eq!(
            (entry.group, entry.addr),
            (ip("198.51.100.0"), ip("198.51.100.7"))
        );
        assert_eq!(entry.last_seen, t0 + Duration::from_secs(1));
        // An older sighting (a late scan of the fast path's map) does not move it back.
        table.see(ip("198.51.100.9"), t0);
        assert_eq!(
            table.lookup(ip("198.51.100.9")).unwrap().last_seen,
            t0 + Duration::from_secs(1)
        );
    }

    #[test]
    fn entries_idle_longer_than_the_timeout_expire() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut table = LdnsTable::new(LdnsMask::default(), DEFAULT_LDNS_TIMEOUT);
        table.see(ip("192.0.2.1"), t0);
        table.see(ip("192.0.2.2"), t0);
        table.see(ip("192.0.2.2"), t0 + s(100));
        // (time of the expiry run, entries left)
        let steps = [(179, 2), (180, 2), (181, 1), (280, 1), (281, 0)];
        for (at, left) in steps {
            table.expire(t0 + s(at));
            assert_eq!(table.len(), left, "at {at} s");
        }
        assert!(table.expire(t0 + s(1000)).is_empty());
    }

    #[test]
    fn the_recorder_keeps_the_latest_sighting_of_each_address() {
        let t0 = Instant::now();
        let recorder = LdnsRecorder::new();
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
        let recorder = LdnsRecorder::new();
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
    fn completion_rate_covers_the_last_32_rounds() {
        let t0 = Instant::now();
        let mut table = LdnsTable::new(LdnsMask::default(), DEFAULT_LDNS_TIMEOUT);
        let group = table.see(ip("192.0.2.1"), t0).unwrap();
        let entry = table.get_mut(&group).unwrap();
        assert_eq!(entry.completion_rate(), None);
        // (rounds, reply bits, rate)
        let table_ = [
            (1, 1, 10_000),
            (4, 0b0101, 5_000),
            (40, u32::MAX, 10_000),
            (40, 0xffff, 5_000),
        ];
        for (rounds, replies, rate) in table_ {
            entry.rounds = rounds;
            entry.replies = replies;
            assert_eq!(entry.completion_rate(), Some(rate), "{rounds} {replies:b}");
        }
    }
}
