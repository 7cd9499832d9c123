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

use crate::policy::ServiceKey;

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
    pub service: ServiceKey,
    /// How long the entry still lives.
    pub remaining_ms: u64,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    service: ServiceKey,
    last_used: u64,
    /// Its place in the shard's queue.
    seq: u64,
    /// What the peers were last sent of it: `None`, nothing yet (or a resync asked for it).
    sent: Option<Sent>,
}

#[derive(Clone, Copy, Debug)]
struct Sent {
    at: u64,
    service: ServiceKey,
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
        self.shards[i]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The service of `key`'s entry, unless it expired (then it is dropped).
    pub fn get(&self, key: &Key, now: u64, counters: &Counters) -> Option<ServiceKey> {
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
    pub fn record(&self, key: Key, service: ServiceKey, now: u64, counters: &Counters) -> Recorded {
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
        service: ServiceKey,
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
                    // A peer's refresh is known to the peers: counted as sent, so it is not
                    // sent back as a use here. Otherwise each round trip added the rounding
                    // of the remaining time to whole seconds again, and an entry used at two
                    // parents never expired.
                    e.sent = sent;
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
mod tests;
