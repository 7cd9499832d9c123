//! The LDNS table: the resolvers to probe, by group (the LDNS mask), bounded, and when each is
//! due. Pure: the clock is passed in, and every operation costs what it touches (entries
//! recorded, expired, evicted or due), never a walk of the table.
//!
//! - **Two tiers.** A new entry is on *probation*; it is *protected* once it is seen again at
//!   least [`PROMOTE_AFTER`] after its first sighting, or answers a probe. A flood of spoofed
//!   sources, each seen once, stays on probation.
//! - **Bounded** (`[rtt] max_ldns`): a new entry in a full table evicts the least recently seen
//!   probation entry, or when there is none, the least recently seen protected one. Evictions
//!   are counted. So a resolver that queries us regularly keeps its entry through any flood of
//!   one-time sources.
//! - **Due order.** Per tier, entries not in flight are kept by the time their next round is
//!   due; the prober takes the due ones from the protected tier first.
//! - **Per-target budget.** A target (the address probed) gets at most one round per interval:
//!   the next round is due one interval after the start of the last (several tiers or entries
//!   cannot change that: an entry has one target, and the budget of a target whose entry was
//!   removed is kept until it runs out, so an evicted or expired entry that comes back is not
//!   probed again early). A round without an answer backs off: the next is due
//!   `interval × 2^failures` after it started (at most [`MAX_BACKOFF_SHIFT`] doublings); an
//!   answer resets it.

use std::{
    collections::{BTreeSet, HashMap},
    net::IpAddr,
    time::Duration,
};

use tokio::time::Instant;

use super::ldns::LdnsMask;

/// `[rtt] max_ldns` default: LDNS entries kept at most.
pub const DEFAULT_MAX_LDNS: usize = 100_000;

/// An entry seen again at least this long after its first sighting is protected (a resolver
/// querying again; the responder's loops record a source at most once a second).
pub const PROMOTE_AFTER: Duration = Duration::from_secs(1);

/// Budgets of removed entries kept at least (more when `max_ldns` is larger).
pub const MIN_BUDGETS: usize = 1 << 16;

/// Rounds without an answer double the wait before the next, up to 2^this intervals.
pub const MAX_BACKOFF_SHIFT: u32 = 4;

/// Which part of the table an entry is in; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    Probation = 0,
    Protected = 1,
}

/// One LDNS entry: a resolver, or a masked prefix of resolvers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LdnsEntry {
    /// The key: the address with the mask's host bits cleared.
    pub group: IpAddr,
    /// The address probed (the target): the first one seen in the group.
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
    /// Rounds without an answer since the last answer (the backoff).
    pub(crate) failures: u32,
    pub(crate) tier: Tier,
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

    /// When the next round is due (if none is running).
    pub fn next_probe(&self) -> Instant {
        self.next_probe
    }

    /// Rounds without an answer in a row.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    pub fn tier(&self) -> Tier {
        self.tier
    }
}

/// A removed entry's target budget: no round before `not_before` (or while one runs).
#[derive(Clone, Copy, Debug)]
struct Budget {
    not_before: Instant,
    failures: u32,
    in_flight: bool,
}

/// Counters of the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Entries evicted to make room (the table was full).
    pub evicted: u64,
    /// Entries expired (no query for the LDNS timeout).
    pub expired: u64,
    /// Entries moved from probation to protected.
    pub promoted: u64,
    /// Rounds without an answer (each pushes the next one further out).
    pub backoffs: u64,
    /// Entries created while their target's budget (of a removed entry) still held them back.
    pub held: u64,
    /// Entries visited by any operation: what the per-tick work is measured in.
    pub work: u64,
}

/// The bounded, scheduled LDNS table; see the module documentation.
#[derive(Debug)]
pub struct LdnsTable {
    mask: LdnsMask,
    timeout: Duration,
    max_entries: usize,
    entries: HashMap<IpAddr, LdnsEntry>,
    /// Per tier: (last seen, group), least recently seen first.
    lru: [BTreeSet<(Instant, IpAddr)>; 2],
    /// Per tier: (due, group) of the entries not in flight, soonest first.
    due: [BTreeSet<(Instant, IpAddr)>; 2],
    /// Budgets of targets whose entry was removed, by target; `cooldown_order` has those not in
    /// flight by `not_before`.
    cooldown: HashMap<IpAddr, Budget>,
    cooldown_order: BTreeSet<(Instant, IpAddr)>,
    /// Groups removed (expired or evicted) since [`LdnsTable::take_removed`].
    removed: Vec<IpAddr>,
    stats: TableStats,
}

impl LdnsTable {
    /// A table of at most [`DEFAULT_MAX_LDNS`] entries.
    pub fn new(mask: LdnsMask, timeout: Duration) -> Self {
        Self::with_capacity(mask, timeout, DEFAULT_MAX_LDNS)
    }

    /// A table of at most `max_entries` (≥ 1) entries.
    pub fn with_capacity(mask: LdnsMask, timeout: Duration, max_entries: usize) -> Self {
        LdnsTable {
            mask,
            timeout,
            max_entries: max_entries.max(1),
            entries: HashMap::new(),
            lru: Default::default(),
            due: Default::default(),
            cooldown: HashMap::new(),
            cooldown_order: BTreeSet::new(),
            removed: Vec::new(),
            stats: TableStats::default(),
        }
    }

    pub fn mask(&self) -> LdnsMask {
        self.mask
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    pub fn stats(&self) -> TableStats {
        self.stats
    }

    /// A query from `addr` at `at`. Returns the group when it is a new entry (due at once,
    /// unless its target's budget holds it back). A new entry in a full table evicts one.
    pub fn see(&mut self, addr: IpAddr, at: Instant) -> Option<IpAddr> {
        self.stats.work += 1;
        let addr = addr.to_canonical();
        let group = self.mask.group(addr);
        if let Some(entry) = self.entries.get_mut(&group) {
            if at > entry.last_seen {
                let tier = entry.tier as usize;
                self.lru[tier].remove(&(entry.last_seen, group));
                entry.last_seen = at;
                self.lru[tier].insert((at, group));
            }
            if entry.tier == Tier::Probation
                && entry.last_seen.saturating_duration_since(entry.first_seen) >= PROMOTE_AFTER
            {
                self.promote(group);
            }
            return None;
        }
        if self.entries.len() >= self.max_entries {
            self.evict_one();
        }
        let budget = self.cooldown.remove(&addr);
        if let Some(b) = &budget {
            if !b.in_flight {
                self.cooldown_order.remove(&(b.not_before, addr));
            }
            if b.in_flight || b.not_before > at {
                self.stats.held += 1;
            }
        }
        let entry = LdnsEntry {
            group,
            addr,
            first_seen: at,
            last_seen: at,
            next_probe: budget.map_or(at, |b| b.not_before.max(at)),
            in_flight: budget.is_some_and(|b| b.in_flight),
            rounds: 0,
            replies: 0,
            failures: budget.map_or(0, |b| b.failures),
            tier: Tier::Probation,
        };
        self.lru[0].insert((at, group));
        if !entry.in_flight {
            self.due[0].insert((entry.next_probe, group));
        }
        self.entries.insert(group, entry);
        Some(group)
    }

    fn promote(&mut self, group: IpAddr) {
        let Some(entry) = self.entries.get_mut(&group) else {
            return;
        };
        if entry.tier == Tier::Protected {
            return;
        }
        self.lru[0].remove(&(entry.last_seen, group));
        self.lru[1].insert((entry.last_seen, group));
        if !entry.in_flight {
            self.due[0].remove(&(entry.next_probe, group));
            self.due[1].insert((entry.next_probe, group));
        }
        entry.tier = Tier::Protected;
        self.stats.promoted += 1;
    }

    fn evict_one(&mut self) {
        let victim = self.lru[0]
            .first()
            .or_else(|| self.lru[1].first())
            .map(|&(_, g)| g);
        if let Some(group) = victim {
            self.remove(group);
            self.stats.evicted += 1;
        }
    }

    /// Removes an entry, keeping its target's budget while it still holds.
    fn remove(&mut self, group: IpAddr) -> Option<LdnsEntry> {
        self.stats.work += 1;
        let entry = self.entries.remove(&group)?;
        let tier = entry.tier as usize;
        self.lru[tier].remove(&(entry.last_seen, group));
        if !entry.in_flight {
            self.due[tier].remove(&(entry.next_probe, group));
        }
        // A budget that holds the target back (it was probed, or came back held): kept until
        // it runs out. An entry never probed is due at once anyway.
        if entry.in_flight || entry.next_probe > entry.first_seen {
            self.keep_budget(
                entry.addr,
                Budget {
                    not_before: entry.next_probe,
                    failures: entry.failures,
                    in_flight: entry.in_flight,
                },
            );
        }
        self.removed.push(group);
        Some(entry)
    }

    fn keep_budget(&mut self, target: IpAddr, budget: Budget) {
        if let Some(old) = self.cooldown.insert(target, budget)
            && !old.in_flight
        {
            self.cooldown_order.remove(&(old.not_before, target));
        }
        if !budget.in_flight {
            self.cooldown_order.insert((budget.not_before, target));
        }
        // Bounded: the budget that runs out first goes first. Budgets are only kept for
        // targets probed within the last backoff window, at most `max_rate` × 80 s by default
        // (16,000), so the bound is never reached unless the rate limit is off.
        while self.cooldown.len() > self.max_entries.max(MIN_BUDGETS) {
            let Some((_, t)) = self.cooldown_order.pop_first() else {
                break;
            };
            self.cooldown.remove(&t);
        }
    }

    /// Removes the entries idle longer than the timeout at `now` (and budgets that ran out);
    /// returns how many entries expired.
    pub fn expire(&mut self, now: Instant) -> usize {
        let mut expired = 0;
        for tier in 0..2 {
            while let Some(&(seen, group)) = self.lru[tier].first() {
                if now.saturating_duration_since(seen) <= self.timeout {
                    break;
                }
                self.remove(group);
                expired += 1;
            }
        }
        while let Some(&(until, target)) = self.cooldown_order.first() {
            if until > now {
                break;
            }
            self.stats.work += 1;
            self.cooldown_order.pop_first();
            self.cooldown.remove(&target);
        }
        self.stats.expired += expired as u64;
        expired
    }

    /// The groups removed (expired or evicted) since the last call: their local RTT goes.
    pub fn take_removed(&mut self) -> Vec<IpAddr> {
        std::mem::take(&mut self.removed)
    }

    /// The entry of `tier` due soonest, if it is due at `now`: marked in flight and returned as
    /// (group, target). The caller runs the round and reports it with [`LdnsTable::finish`].
    pub fn take_due(&mut self, tier: Tier, now: Instant) -> Option<(IpAddr, IpAddr)> {
        let &(due, group) = self.due[tier as usize].first()?;
        if due > now {
            return None;
        }
        self.stats.work += 1;
        self.due[tier as usize].pop_first();
        let entry = self.entries.get_mut(&group).expect("due entries exist");
        entry.in_flight = true;
        Some((group, entry.addr))
    }

    /// Whether an entry of `tier` is due at `now`.
    pub fn has_due(&self, tier: Tier, now: Instant) -> bool {
        self.due[tier as usize]
            .first()
            .is_some_and(|&(due, _)| due <= now)
    }

    /// The round to `target` (for `group`) that started at `started` ended; `answered`: it got
    /// a sample. Schedules the next round by the budget and the backoff. Returns false when
    /// the entry is gone (the round's sample is then not stored).
    pub fn finish(
        &mut self,
        group: IpAddr,
        target: IpAddr,
        answered: bool,
        started: Instant,
        interval: Duration,
    ) -> bool {
        self.stats.work += 1;
        if !answered {
            self.stats.backoffs += 1;
        }
        let next = |failures: u32| started + interval * (1u32 << failures.min(MAX_BACKOFF_SHIFT));
        let live = self
            .entries
            .get(&group)
            .is_some_and(|e| e.addr == target && e.in_flight);
        if !live {
            // Removed while the round ran: its budget is the target's.
            if let Some(b) = self.cooldown.get(&target).copied()
                && b.in_flight
            {
                let failures = if answered { 0 } else { b.failures + 1 };
                self.keep_budget(
                    target,
                    Budget {
                        not_before: next(failures),
                        failures,
                        in_flight: false,
                    },
                );
            }
            return false;
        }
        let entry = self.entries.get_mut(&group).expect("checked above");
        entry.in_flight = false;
        entry.rounds += 1;
        entry.replies = entry.replies << 1 | u32::from(answered);
        entry.failures = if answered { 0 } else { entry.failures + 1 };
        entry.next_probe = next(entry.failures);
        let tier = entry.tier;
        self.due[tier as usize].insert((entry.next_probe, group));
        if answered {
            self.promote(group);
        }
        true
    }

    /// Takes an entry out of the table for good (its target was refused at probe time).
    pub fn drop_entry(&mut self, group: IpAddr) -> Option<LdnsEntry> {
        self.remove(group)
    }

    pub fn get(&self, group: &IpAddr) -> Option<&LdnsEntry> {
        self.entries.get(group)
    }

    #[cfg(test)]
    pub(crate) fn get_mut(&mut self, group: &IpAddr) -> Option<&mut LdnsEntry> {
        self.entries.get_mut(group)
    }

    /// The entry `addr` belongs to.
    pub fn lookup(&self, addr: IpAddr) -> Option<&LdnsEntry> {
        self.entries.get(&self.mask.group(addr))
    }

    /// Every entry (for the dump: the only walk of the table, on request).
    pub fn iter(&self) -> impl Iterator<Item = &LdnsEntry> {
        self.entries.values()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests;
