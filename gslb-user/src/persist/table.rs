//! One persistence domain's table: masked client → service, bounded, least recently used out
//! first. Pure: every call takes the time (`now`, milliseconds of the caller's clock).
//!
//! Sharded by key, each shard behind its own lock, so that the server loops of several cores
//! rarely wait on each other; a small table has one shard, so its bound is exact and its
//! eviction strictly least recently used. A shard keeps its keys in use order in a queue whose
//! stale places (a key used again later) are skipped when they come to the front, so that a use
//! costs a hash look-up and a push.

use std::{
    collections::VecDeque,
    net::IpAddr,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use ahash::AHashMap as HashMap;

use crate::policy::ServiceId;

/// Tables smaller than this have one shard.
const SHARD_MIN_ENTRIES: usize = 4096;
/// Most shards of a table.
const MAX_SHARDS: usize = 16;
/// Expired entries removed from the front of a shard's queue per use, besides the one used.
const EXPIRE_PER_USE: usize = 2;

/// Who asks, as the table files it: the masked client and the answer's family (A and AAAA are
/// decided among different services, so each family has its own entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// The answer is AAAA.
    pub v6: bool,
    /// The client address under the domain's persistence mask.
    pub client: IpAddr,
}

/// A table's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// An entry not used for longer than this is gone.
    pub timeout_ms: u64,
    pub max_entries: usize,
}

/// Counters shared by every table of a store (they survive reloads).
#[derive(Debug, Default)]
pub struct Counters {
    /// Entries made by a first answer (or a new answer after the entry's service went).
    pub created: AtomicU64,
    /// Entries whose service was replaced by a new answer (it was down or over its limits).
    pub replaced: AtomicU64,
    /// Entries dropped after their timeout.
    pub expired: AtomicU64,
    /// Live entries dropped to stay within `max_entries` (least recently used first).
    pub evicted: AtomicU64,
    /// Peer entries taken in (new, or more recent than ours).
    pub merged: AtomicU64,
    /// Peer entries refused: unknown domain or service, a prefix that is not the domain's mask,
    /// or over the per-peer bound.
    pub rejected: AtomicU64,
    /// Peer entries for a service that is down here: not used.
    pub ignored: AtomicU64,
    /// Entries sent to the other parents.
    pub sent: AtomicU64,
}

impl Counters {
    fn add(counter: &AtomicU64, n: u64) {
        if n > 0 {
            counter.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// What [`Table::record`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    Created,
    Refreshed,
    Replaced,
}

/// What [`Table::merge`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merged {
    /// The peer's entry is now ours (new, or used more recently than ours).
    Taken,
    /// Ours stays (more recent, or the peer's had expired).
    Kept,
}

/// One entry to send to the other parents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Export {
    pub key: Key,
    pub service: ServiceId,
    /// How long the entry still lives.
    pub remaining_ms: u64,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    service: ServiceId,
    last_used: u64,
    /// Its place in the shard's queue.
    seq: u64,
    /// What the peers were last sent of it: `None`, nothing yet (or a resync asked for it).
    sent: Option<Sent>,
}

#[derive(Clone, Copy, Debug)]
struct Sent {
    at: u64,
    service: ServiceId,
    last_used: u64,
}

#[derive(Default)]
struct Shard {
    map: HashMap<Key, Entry>,
    /// Keys by last use (or merge), oldest first; a place whose seq is not its entry's is stale.
    order: VecDeque<(Key, u64)>,
    seq: u64,
    /// Keys made or pointed at another service since the last [`Table::export_fresh`] (at most
    /// the shard's share of the bound; beyond that, the periodic [`Table::export`] finds them).
    fresh: Vec<Key>,
}

impl Shard {
    fn touch(&mut self, key: Key) -> u64 {
        self.seq += 1;
        self.order.push_back((key, self.seq));
        if self.order.len() > 2 * self.map.len() + 64 {
            self.compact();
        }
        self.seq
    }

    /// Rebuilds the queue without its stale places.
    fn compact(&mut self) {
        let map = &self.map;
        self.order
            .retain(|(k, seq)| map.get(k).is_some_and(|e| e.seq == *seq));
    }

    /// Removes the least recently used entry; whether it had expired.
    fn pop_oldest(&mut self, now: u64, timeout: u64) -> Option<bool> {
        while let Some((key, seq)) = self.order.pop_front() {
            if self.map.get(&key).is_some_and(|e| e.seq == seq) {
                let e = self.map.remove(&key)?;
                return Some(expired(e.last_used, now, timeout));
            }
        }
        None
    }

    /// Drops up to `n` expired entries from the front of the queue; how many.
    fn expire_front(&mut self, now: u64, timeout: u64, n: usize) -> u64 {
        let mut dropped = 0;
        for _ in 0..n {
            let Some(&(key, seq)) = self.order.front() else {
                break;
            };
            match self.map.get(&key) {
                Some(e) if e.seq == seq => {
                    if !expired(e.last_used, now, timeout) {
                        break;
                    }
                    self.map.remove(&key);
                    dropped += 1;
                }
                _ => {}
            }
            self.order.pop_front();
        }
        dropped
    }
}

fn expired(last_used: u64, now: u64, timeout: u64) -> bool {
    now.saturating_sub(last_used) > timeout
}

/// One domain's persistence entries.
pub struct Table {
    settings: Settings,
    shards: Box<[Mutex<Shard>]>,
    /// Entries per shard at most (the shards' sum is `max_entries`).
    cap: Box<[usize]>,
    /// Where the next export starts, so that a bounded export reaches every shard.
    cursor: AtomicU64,
}

impl Table {
    pub fn new(settings: Settings) -> Table {
        let max = settings.max_entries.max(1);
        let n = (max / SHARD_MIN_ENTRIES).clamp(1, MAX_SHARDS);
        let cap = (0..n).map(|i| max / n + usize::from(i < max % n)).collect();
        Table {
            settings: Settings {
                max_entries: max,
                ..settings
            },
            shards: (0..n).map(|_| Mutex::default()).collect(),
            cap,
            cursor: AtomicU64::new(0),
        }
    }

    pub fn settings(&self) -> Settings {
        self.settings
    }

    fn shard_of(&self, key: &Key) -> usize {
        if self.shards.len() == 1 {
            return 0;
        }
        let bits = match key.client {
            IpAddr::V4(a) => u128::from(u32::from(a)),
            IpAddr::V6(a) => u128::from(a),
        };
        // The masked address's bits, folded: clients of one table differ in their prefix.
        let h = (bits ^ (bits >> 64)) as u64 ^ u64::from(key.v6);
        (h.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize % self.shards.len()
    }

    fn lock(&self, i: usize) -> std::sync::MutexGuard<'_, Shard> {
        // A panic while holding a shard leaves plain data: still usable.
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The service of `key`'s entry, unless it expired (then it is dropped).
    pub fn get(&self, key: &Key, now: u64, counters: &Counters) -> Option<ServiceId> {
        let mut shard = self.lock(self.shard_of(key));
        let e = *shard.map.get(key)?;
        if expired(e.last_used, now, self.settings.timeout_ms) {
            shard.map.remove(key);
            Counters::add(&counters.expired, 1);
            return None;
        }
        Some(e.service)
    }

    /// `key` was answered `service`: makes or refreshes its entry (the timeout counts from the
    /// last answer, as NetScaler's idle timeout does), or points it at `service` when it held
    /// another.
    pub fn record(&self, key: Key, service: ServiceId, now: u64, counters: &Counters) -> Recorded {
        let timeout = self.settings.timeout_ms;
        let i = self.shard_of(&key);
        let mut shard = self.lock(i);
        let expired_now = shard.expire_front(now, timeout, EXPIRE_PER_USE);
        Counters::add(&counters.expired, expired_now);
        let held = shard.map.get(&key).map(|e| (e.service, e.last_used));
        let seq = shard.touch(key);
        let outcome = match held {
            Some((held, last_used)) if !expired(last_used, now, timeout) => {
                let e = shard.map.get_mut(&key).expect("held");
                e.seq = seq;
                e.last_used = last_used.max(now);
                if held == service {
                    Recorded::Refreshed
                } else {
                    e.service = service;
                    Recorded::Replaced
                }
            }
            held => {
                if held.is_some() {
                    Counters::add(&counters.expired, 1);
                }
                shard.map.insert(
                    key,
                    Entry {
                        service,
                        last_used: now,
                        seq,
                        sent: None,
                    },
                );
                Recorded::Created
            }
        };
        match outcome {
            Recorded::Created => Counters::add(&counters.created, 1),
            Recorded::Replaced => Counters::add(&counters.replaced, 1),
            Recorded::Refreshed => {}
        }
        if outcome != Recorded::Refreshed && shard.fresh.len() < self.cap[i] {
            shard.fresh.push(key);
        }
        self.bound(&mut shard, i, now, counters);
        outcome
    }

    /// Evicts the least recently used entries of a shard over its share of the bound.
    fn bound(&self, shard: &mut Shard, i: usize, now: u64, counters: &Counters) {
        while shard.map.len() > self.cap[i] {
            match shard.pop_oldest(now, self.settings.timeout_ms) {
                Some(true) => Counters::add(&counters.expired, 1),
                Some(false) => Counters::add(&counters.evicted, 1),
                None => break,
            }
        }
    }

    /// A peer's entry: `key` → `service`, last used at `last_used` (on our clock). Taken when we
    /// have none or ours was used less recently (equal times: the higher service id, so that
    /// every parent settles on the same); kept as sent, so it is not sent back.
    pub fn merge(
        &self,
        key: Key,
        service: ServiceId,
        last_used: u64,
        now: u64,
        counters: &Counters,
    ) -> Merged {
        let timeout = self.settings.timeout_ms;
        let last_used = last_used.min(now);
        if expired(last_used, now, timeout) {
            return Merged::Kept;
        }
        let i = self.shard_of(&key);
        let mut shard = self.lock(i);
        let sent = Some(Sent {
            at: now,
            service,
            last_used,
        });
        let held = shard
            .map
            .get(&key)
            .filter(|e| !expired(e.last_used, now, timeout))
            .map(|e| (e.service, e.last_used));
        match held {
            Some((held, used)) if held == service => {
                if last_used > used {
                    let seq = shard.touch(key);
                    let e = shard.map.get_mut(&key).expect("held");
                    e.last_used = last_used;
                    e.seq = seq;
                }
                return Merged::Kept;
            }
            Some((held, used)) if (last_used, service) <= (used, held) => return Merged::Kept,
            _ => {}
        }
        let seq = shard.touch(key);
        shard.map.insert(
            key,
            Entry {
                service,
                last_used,
                seq,
                sent,
            },
        );
        self.bound(&mut shard, i, now, counters);
        Counters::add(&counters.merged, 1);
        Merged::Taken
    }

    /// Appends to `out`, up to `budget` rows, the entries the peers need: new ones, ones that
    /// point at another service than they were sent with, and ones used since they were sent
    /// once `refresh_ms` has passed since (so a peer's copy of an entry in use never times
    /// out, and an entry used a thousand times a second is sent once per `refresh_ms`).
    /// Expired entries met on the way are dropped. What is appended counts as sent.
    pub fn export(
        &self,
        now: u64,
        refresh_ms: u64,
        budget: usize,
        out: &mut Vec<Export>,
        counters: &Counters,
    ) {
        let timeout = self.settings.timeout_ms;
        let n = self.shards.len();
        let start = self.cursor.fetch_add(1, Ordering::Relaxed) as usize;
        for s in 0..n {
            let mut left = budget.saturating_sub(out.len());
            if left == 0 {
                return;
            }
            let mut shard = self.lock((start + s) % n);
            let mut gone = 0;
            shard.map.retain(|key, e| {
                if expired(e.last_used, now, timeout) {
                    gone += 1;
                    return false;
                }
                let due = match e.sent {
                    None => true,
                    Some(s) => {
                        s.service != e.service
                            || (e.last_used > s.last_used && now.saturating_sub(s.at) >= refresh_ms)
                    }
                };
                if due && left > 0 {
                    left -= 1;
                    e.sent = Some(Sent {
                        at: now,
                        service: e.service,
                        last_used: e.last_used,
                    });
                    out.push(Export {
                        key: *key,
                        service: e.service,
                        remaining_ms: (e.last_used + timeout).saturating_sub(now),
                    });
                }
                true
            });
            Counters::add(&counters.expired, gone);
        }
    }

    /// As [`Table::export`], only for the entries made or pointed at another service since the
    /// last call: what the peers must learn at once (a client may ask another parent next).
    pub fn export_fresh(&self, now: u64, budget: usize, out: &mut Vec<Export>) {
        let timeout = self.settings.timeout_ms;
        for i in 0..self.shards.len() {
            let mut shard = self.lock(i);
            let fresh = std::mem::take(&mut shard.fresh);
            for key in fresh {
                if out.len() >= budget {
                    // The rest stay due: the next periodic export sends them.
                    return;
                }
                let Some(e) = shard.map.get_mut(&key) else {
                    continue;
                };
                let due = e.sent.is_none_or(|s| s.service != e.service);
                if !due || expired(e.last_used, now, timeout) {
                    continue;
                }
                e.sent = Some(Sent {
                    at: now,
                    service: e.service,
                    last_used: e.last_used,
                });
                out.push(Export {
                    key,
                    service: e.service,
                    remaining_ms: (e.last_used + timeout).saturating_sub(now),
                });
            }
        }
    }

    /// Every entry is sent again (a parent link came up: the peer may know none of them).
    pub fn resync(&self) {
        for i in 0..self.shards.len() {
            for e in self.lock(i).map.values_mut() {
                e.sent = None;
            }
        }
    }

    /// Entries held, expired ones not yet dropped included.
    pub fn len(&self) -> usize {
        (0..self.shards.len()).map(|i| self.lock(i).map.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A table with `settings` holding this one's live entries (a reload changed the timeout or
    /// the bound); the most recently used are kept when the new bound is smaller.
    pub fn resized(&self, settings: Settings, now: u64, counters: &Counters) -> Table {
        let mut all: Vec<(Key, Entry)> = Vec::new();
        for i in 0..self.shards.len() {
            let shard = self.lock(i);
            all.extend(shard.map.iter().map(|(k, e)| (*k, *e)));
        }
        all.sort_by_key(|(_, e)| e.last_used);
        let table = Table::new(settings);
        for (key, e) in all {
            if expired(e.last_used, now, settings.timeout_ms) {
                continue;
            }
            let i = table.shard_of(&key);
            let mut shard = table.lock(i);
            let seq = shard.touch(key);
            shard.map.insert(key, Entry { seq, ..e });
            table.bound(&mut shard, i, now, counters);
        }
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1000;

    fn key(client: &str) -> Key {
        Key {
            v6: false,
            client: client.parse().unwrap(),
        }
    }

    fn svc(name: &str) -> ServiceId {
        ServiceId::from_name(name)
    }

    fn table(timeout_s: u64, max: usize) -> Table {
        Table::new(Settings {
            timeout_ms: timeout_s * SEC,
            max_entries: max,
        })
    }

    #[test]
    fn an_entry_is_made_refreshed_by_use_and_gone_after_its_timeout() {
        let c = Counters::default();
        let t = table(10, 100);
        let k = key("192.0.2.0");
        assert_eq!(t.get(&k, 0, &c), None);
        assert_eq!(t.record(k, svc("a"), 0, &c), Recorded::Created);
        assert_eq!(
            t.get(&k, 10 * SEC, &c),
            Some(svc("a")),
            "alive at the timeout"
        );
        // Used at 8 s: the timeout counts from there (idle timeout).
        assert_eq!(t.record(k, svc("a"), 8 * SEC, &c), Recorded::Refreshed);
        assert_eq!(t.get(&k, 18 * SEC, &c), Some(svc("a")));
        assert_eq!(t.get(&k, 18 * SEC + 1, &c), None, "idle past the timeout");
        assert_eq!(c.expired.load(Ordering::Relaxed), 1);
        assert!(t.is_empty(), "an expired entry met is dropped");
        // A new answer after that is a new entry.
        assert_eq!(t.record(k, svc("b"), 20 * SEC, &c), Recorded::Created);
        assert_eq!(c.created.load(Ordering::Relaxed), 2);
        // The family is part of the key.
        let v6 = Key { v6: true, ..k };
        assert_eq!(t.get(&v6, 20 * SEC, &c), None);
    }

    #[test]
    fn a_new_answer_replaces_the_service() {
        let c = Counters::default();
        let t = table(10, 100);
        let k = key("192.0.2.0");
        t.record(k, svc("a"), 0, &c);
        assert_eq!(t.record(k, svc("b"), SEC, &c), Recorded::Replaced);
        assert_eq!(t.get(&k, SEC, &c), Some(svc("b")));
        assert_eq!(c.replaced.load(Ordering::Relaxed), 1);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn the_least_recently_used_entry_is_evicted_at_the_bound_and_counted() {
        let c = Counters::default();
        let t = table(100, 3);
        for (i, client) in ["10.0.0.1", "10.0.0.2", "10.0.0.3"].iter().enumerate() {
            t.record(key(client), svc("a"), i as u64, &c);
        }
        // 10.0.0.1 used again: 10.0.0.2 is now the least recently used.
        t.record(key("10.0.0.1"), svc("a"), 10, &c);
        t.record(key("10.0.0.4"), svc("a"), 11, &c);
        assert_eq!(t.len(), 3);
        assert_eq!(c.evicted.load(Ordering::Relaxed), 1);
        assert_eq!(t.get(&key("10.0.0.2"), 12, &c), None);
        for kept in ["10.0.0.1", "10.0.0.3", "10.0.0.4"] {
            assert_eq!(t.get(&key(kept), 12, &c), Some(svc("a")), "{kept}");
        }
        // Many uses of one key do not grow the queue without bound.
        for now in 0..10_000 {
            t.record(key("10.0.0.1"), svc("a"), 20 + now, &c);
        }
        assert!(t.lock(0).order.len() <= 2 * 3 + 64 + 1);
        assert_eq!(c.evicted.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_large_table_is_sharded_and_its_bound_holds() {
        let c = Counters::default();
        let t = table(1000, 50_000);
        assert_eq!(t.shards.len(), 12);
        assert_eq!(t.cap.iter().sum::<usize>(), 50_000);
        for i in 0..60_000u32 {
            let client = IpAddr::V4((0x0a00_0000 + (i << 8)).into());
            t.record(Key { v6: false, client }, svc("a"), u64::from(i), &c);
        }
        // Each shard holds its share: together at most the bound, and every entry made is
        // held or was counted out.
        let (len, evicted) = (t.len(), c.evicted.load(Ordering::Relaxed) as usize);
        assert!((45_000..=50_000).contains(&len), "{len}");
        assert_eq!(len + evicted, 60_000);
        // The newest survive: every shard dropped its oldest.
        let newest = IpAddr::V4((0x0a00_0000 + (59_999 << 8)).into());
        assert!(
            t.get(
                &Key {
                    v6: false,
                    client: newest
                },
                60_000,
                &c
            )
            .is_some()
        );
    }

    #[test]
    fn expired_entries_leave_from_the_front_as_the_table_is_used() {
        let c = Counters::default();
        let t = table(1, 100);
        for i in 0..4 {
            t.record(key(&format!("10.0.0.{i}")), svc("a"), 0, &c);
        }
        t.record(key("10.0.1.1"), svc("a"), 5 * SEC, &c);
        assert_eq!(t.len(), 3, "two expired ones dropped on the way");
        t.record(key("10.0.1.1"), svc("a"), 5 * SEC, &c);
        assert_eq!(t.len(), 1);
        assert_eq!(c.expired.load(Ordering::Relaxed), 4);
    }

    #[test]
    fn merges_take_the_most_recent_use_and_are_not_sent_back() {
        let c = Counters::default();
        let t = table(10, 100);
        let k = key("192.0.2.0");
        t.record(k, svc("a"), 5 * SEC, &c);
        // Older elsewhere: ours stays.
        assert_eq!(t.merge(k, svc("b"), 4 * SEC, 6 * SEC, &c), Merged::Kept);
        assert_eq!(t.get(&k, 6 * SEC, &c), Some(svc("a")));
        // More recent elsewhere: theirs.
        assert_eq!(t.merge(k, svc("b"), 6 * SEC, 6 * SEC, &c), Merged::Taken);
        assert_eq!(t.get(&k, 6 * SEC, &c), Some(svc("b")));
        // Same time: the higher service id, whichever side merges.
        let (lo, hi) = if svc("x") < svc("y") {
            (svc("x"), svc("y"))
        } else {
            (svc("y"), svc("x"))
        };
        let k2 = key("192.0.2.128");
        t.record(k2, lo, 7 * SEC, &c);
        assert_eq!(t.merge(k2, hi, 7 * SEC, 7 * SEC, &c), Merged::Taken);
        let t2 = table(10, 100);
        t2.record(k2, hi, 7 * SEC, &c);
        assert_eq!(t2.merge(k2, lo, 7 * SEC, 7 * SEC, &c), Merged::Kept);
        // An entry that has expired by our clock is not taken.
        assert_eq!(
            t.merge(key("198.51.100.0"), svc("a"), 0, 11 * SEC, &c),
            Merged::Kept
        );
        // A time in the future is taken as now.
        t.merge(key("198.51.100.1"), svc("a"), u64::MAX, 7 * SEC, &c);
        assert_eq!(t.get(&key("198.51.100.1"), 17 * SEC, &c), Some(svc("a")));
        assert_eq!(t.get(&key("198.51.100.1"), 17 * SEC + 1, &c), None);
        // What was merged is not sent back; our own entry is.
        let mut out = Vec::new();
        t.export(7 * SEC, SEC, 100, &mut out, &c);
        assert_eq!(out, []);
        t.record(key("203.0.113.0"), svc("a"), 7 * SEC, &c);
        t.export(7 * SEC, SEC, 100, &mut out, &c);
        assert_eq!(
            out,
            [Export {
                key: key("203.0.113.0"),
                service: svc("a"),
                remaining_ms: 10 * SEC
            }]
        );
    }

    #[test]
    fn exports_send_new_changed_and_refreshed_entries_within_the_budget() {
        let c = Counters::default();
        let t = table(10, 100);
        for i in 0..5 {
            t.record(key(&format!("10.0.0.{i}")), svc("a"), 0, &c);
        }
        let mut out = Vec::new();
        t.export(0, 2 * SEC, 3, &mut out, &c);
        assert_eq!(out.len(), 3, "the budget");
        out.clear();
        t.export(0, 2 * SEC, 3, &mut out, &c);
        assert_eq!(out.len(), 2, "the rest");
        out.clear();
        t.export(0, 2 * SEC, 3, &mut out, &c);
        assert_eq!(out, [], "nothing new");
        // Used again at 1 s: sent again only once the refresh interval has passed.
        t.record(key("10.0.0.1"), svc("a"), SEC, &c);
        t.export(SEC, 2 * SEC, 10, &mut out, &c);
        assert_eq!(out, []);
        t.export(2 * SEC, 2 * SEC, 10, &mut out, &c);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].remaining_ms, 9 * SEC);
        out.clear();
        // Another service: sent at once.
        t.record(key("10.0.0.2"), svc("b"), 2 * SEC, &c);
        t.export(2 * SEC, 2 * SEC, 10, &mut out, &c);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].service, svc("b"));
        out.clear();
        // New and replaced entries are also sent on their own, at once; once only.
        t.record(key("10.0.0.9"), svc("a"), 2 * SEC, &c);
        t.record(key("10.0.0.3"), svc("b"), 2 * SEC, &c);
        t.record(key("10.0.0.4"), svc("a"), 2 * SEC, &c);
        t.export_fresh(2 * SEC, 10, &mut out);
        let mut fresh: Vec<Key> = out.iter().map(|e| e.key).collect();
        fresh.sort_by_key(|k| k.client);
        assert_eq!(fresh, [key("10.0.0.3"), key("10.0.0.9")]);
        out.clear();
        t.export_fresh(2 * SEC, 10, &mut out);
        // (10.0.0.4 was refreshed, not made: the periodic export sends it once its refresh
        // interval has passed, not before.)
        t.export(2 * SEC, 10 * SEC, 10, &mut out, &c);
        assert_eq!(out, [], "sent already");
        for i in 0..3 {
            t.record(key(&format!("10.0.1.{i}")), svc("a"), 2 * SEC, &c);
        }
        t.export_fresh(2 * SEC, 2, &mut out);
        assert_eq!(out.len(), 2, "the budget");
        out.clear();
        t.export(2 * SEC, 10 * SEC, 10, &mut out, &c);
        assert_eq!(out.len(), 1, "the rest, by the periodic export");
        out.clear();
        // A resync sends everything again; expired entries are dropped on the way.
        t.resync();
        t.export(10 * SEC + 1, 2 * SEC, 10, &mut out, &c);
        assert_eq!(out.len(), 8, "{out:?}");
        assert_eq!(t.len(), 8);
    }

    #[test]
    fn resizing_keeps_the_most_recent_entries() {
        let c = Counters::default();
        let t = table(10, 10);
        for i in 0..6 {
            t.record(key(&format!("10.0.0.{i}")), svc("a"), i * SEC, &c);
        }
        let smaller = t.resized(
            Settings {
                timeout_ms: 3 * SEC,
                max_entries: 2,
            },
            6 * SEC,
            &c,
        );
        assert_eq!(smaller.len(), 2);
        assert_eq!(smaller.get(&key("10.0.0.5"), 6 * SEC, &c), Some(svc("a")));
        assert_eq!(smaller.get(&key("10.0.0.4"), 6 * SEC, &c), Some(svc("a")));
        assert_eq!(smaller.get(&key("10.0.0.4"), 7 * SEC + 1, &c), None);
    }
}
