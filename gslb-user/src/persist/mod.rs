//! Source-IP persistence, as NetScaler's `-persistenceType SOURCEIP -persistMask -timeout`
//! (spec §6): the first answer to a client (its address under the domain's persistence mask)
//! for a persistence domain makes an entry client → service; while that service is available
//! and the client asks again within the timeout, it gets that service, whatever happens to the
//! others. So a client moved to a backup site, or to the backup domain, stays there until its
//! entry times out, and does not flap back when the first site returns.
//!
//! What is implemented, and NetScaler's behaviour it follows:
//! - The timeout is an idle timeout: every answer from the entry refreshes it.
//! - An entry whose service is DOWN, or over its limits while another service has room, is not
//!   used: the domain's method picks again and the entry points at the new service from then on
//!   (NetScaler: "if a persistence session points to a data center that is DOWN, the method
//!   selects a new one, which becomes persistent"). It is not dropped when the service goes
//!   down: a service that is back before the client asks again keeps its clients. When nothing
//!   at all can answer (backup addresses, NODATA) the entry is left as it is, unrefreshed.
//! - A table holds at most `max_entries` clients (per domain); the least recently used goes
//!   first (counted: `gslbctl stats` `persistence_evicted`).
//! - Entries are per domain name (NetScaler's persistence id is the virtual server; here the
//!   domain's name is the same on every parent), per masked client, and per answer family (A
//!   and AAAA are decided among different services). The asked domain's settings apply; its
//!   entry may point at a service of its backup domain.
//! - Parents exchange entries over MEP (docs/mep.md, "Persistence"): each sends what it made or
//!   refreshed; a peer's entry is validated, not used while its service is DOWN here, and the
//!   most recent use wins a conflict.
//!
//! [`Store`] is shared by the responder (which consults and records per query) and gslbd's MEP
//! side; it survives reloads ([`Store::configure`]). [`Tables`] is one configuration's set, held
//! by the responder's answer data so that a query sees one configuration's indexes.

pub mod table;

use std::{
    net::IpAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use ahash::AHashMap as HashMap;
use arc_swap::ArcSwap;
use ipnet::IpNet;
use tokio::sync::Notify;

pub use self::table::{Counters, Export, Key, Merged, Recorded, Settings, Table};
use crate::policy::{Engine, ServiceKey, ServiceState, SourceMask};

/// One source-IP persistence entry as the parents exchange it ([`Store::export`],
/// [`Store::merge`]; MEP carries it, `mep/frame.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersistEntry {
    /// Client address or prefix (NetScaler's persistence mask).
    pub client: IpNet,
    /// The GSLB domain (vserver).
    pub domain: String,
    /// The service the client sticks to.
    pub service: String,
    /// Seconds the entry still lives.
    pub ttl_s: u32,
}

/// Most entries sent to the other parents per export (gslbd exports once a second): a burst of
/// new clients reaches the peers over a few seconds rather than in one huge table.
pub const MAX_EXPORT_ROWS: usize = 4096;
/// Most entries taken from one peer table; the rest are counted as rejected. A peer running
/// this code sends at most [`MAX_EXPORT_ROWS`].
pub const MAX_MERGE_ROWS: usize = 4 * MAX_EXPORT_ROWS;
/// An entry in use is sent again once a quarter of its timeout has passed since it was last
/// sent, and never more often than this.
const MIN_REFRESH: Duration = Duration::from_secs(1);

/// Milliseconds on a clock that only goes forward.
pub trait Clock: Send + Sync {
    fn now_ms(&self) -> u64;
}

/// Where the clocks below start: a peer's entry can have been used before this process
/// started, and its time must still be one (it is far beyond the longest timeout).
pub const CLOCK_START_MS: u64 = 1 << 32;

/// The process's monotonic clock.
pub struct MonotonicClock(Instant);

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock(Instant::now())
    }
}

impl Clock for MonotonicClock {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(CLOCK_START_MS)
    }
}

/// A clock that moves when told (tests).
pub struct ManualClock(AtomicU64);

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock(AtomicU64::new(CLOCK_START_MS))
    }
}

impl ManualClock {
    pub fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.0.fetch_add(ms, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Every persistence table of this process, across reloads.
pub struct Store {
    clock: Arc<dyn Clock>,
    counters: Arc<Counters>,
    fresh: Arc<Notify>,
    current: ArcSwap<Tables>,
}

/// One configuration's persistence tables.
pub struct Tables {
    clock: Arc<dyn Clock>,
    counters: Arc<Counters>,
    /// Told when an entry is made or points at another service ([`Store::fresh`]).
    fresh: Arc<Notify>,
    /// By engine domain index; `None` for a domain without persistence.
    domains: Vec<Option<DomainTable>>,
    /// Lower-case domain name → index.
    by_name: HashMap<String, usize>,
    /// By engine service index.
    services: Vec<ServiceInfo>,
    by_service: HashMap<String, usize>,
    by_id: HashMap<ServiceKey, usize>,
}

struct DomainTable {
    name: String,
    mask: SourceMask,
    table: Arc<Table>,
    /// Services an entry may point at: the domain's and its backup domains'.
    reach: Vec<usize>,
}

struct ServiceInfo {
    name: String,
    id: ServiceKey,
    v6: bool,
    down: bool,
}

/// A persistence domain's look-up for one query: where its entry is filed, and its service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sticky {
    domain: usize,
    key: Key,
    /// The entry's service, when the client has a live entry.
    pub service: Option<ServiceKey>,
}

/// What gslbctl stats shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub entries: u64,
    pub created: u64,
    pub replaced: u64,
    pub expired: u64,
    pub evicted: u64,
    pub merged: u64,
    pub rejected: u64,
    pub ignored: u64,
    pub sent: u64,
}

impl Stats {
    /// `name value` pairs, for the control socket.
    pub fn lines(&self) -> [(&'static str, u64); 9] {
        [
            ("persistence_entries", self.entries),
            ("persistence_created", self.created),
            ("persistence_replaced", self.replaced),
            ("persistence_expired", self.expired),
            ("persistence_evicted", self.evicted),
            ("persistence_sent", self.sent),
            ("persistence_peer_merged", self.merged),
            ("persistence_peer_rejected", self.rejected),
            ("persistence_peer_ignored", self.ignored),
        ]
    }
}

/// The prefix length `mask` keeps of `addr`'s family.
fn mask_len(mask: SourceMask, addr: IpAddr) -> u8 {
    if addr.is_ipv4() {
        mask.v4.min(32)
    } else {
        mask.v6.min(128)
    }
}

impl Store {
    /// An empty store on the process's monotonic clock.
    pub fn new() -> Arc<Store> {
        Store::with_clock(Arc::new(MonotonicClock::default()))
    }

    pub fn with_clock(clock: Arc<dyn Clock>) -> Arc<Store> {
        let counters = Arc::new(Counters::default());
        let fresh = Arc::new(Notify::new());
        let empty = Tables::empty(clock.clone(), counters.clone(), fresh.clone());
        Arc::new(Store {
            clock,
            counters,
            fresh,
            current: ArcSwap::from_pointee(empty),
        })
    }

    /// The tables for a new configuration (`None`: this site answers no persistence domain)
    /// with the service states it answers with. A domain keeps its entries when it is still
    /// there with the same persistence mask (a new timeout or bound applies to them); the
    /// entries of a domain that went, or whose mask changed, are dropped.
    pub fn configure(&self, engine: Option<&Engine>, states: &[ServiceState]) -> Arc<Tables> {
        let old = self.current.load_full();
        let tables = match engine {
            None => Tables::empty(
                self.clock.clone(),
                self.counters.clone(),
                self.fresh.clone(),
            ),
            Some(engine) => Tables::build(engine, states, &old, self.clock.now_ms()),
        };
        let tables = Arc::new(tables);
        self.current.store(tables.clone());
        tables
    }

    /// The current configuration's tables.
    pub fn tables(&self) -> Arc<Tables> {
        self.current.load_full()
    }

    /// Resolves once an entry was made or pointed at another service since the last time (then
    /// [`Tables::export_fresh`] has something to send).
    pub async fn fresh(&self) {
        self.fresh.notified().await;
    }

    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            entries: self.current.load().len() as u64,
            created: get(&c.created),
            replaced: get(&c.replaced),
            expired: get(&c.expired),
            evicted: get(&c.evicted),
            merged: get(&c.merged),
            rejected: get(&c.rejected),
            ignored: get(&c.ignored),
            sent: get(&c.sent),
        }
    }
}

impl Tables {
    fn empty(clock: Arc<dyn Clock>, counters: Arc<Counters>, fresh: Arc<Notify>) -> Tables {
        Tables {
            clock,
            counters,
            fresh,
            domains: Vec::new(),
            by_name: HashMap::new(),
            services: Vec::new(),
            by_service: HashMap::new(),
            by_id: HashMap::new(),
        }
    }

    fn build(engine: &Engine, states: &[ServiceState], old: &Tables, now: u64) -> Tables {
        let services: Vec<ServiceInfo> = engine
            .services()
            .iter()
            .enumerate()
            .map(|(i, s)| ServiceInfo {
                name: s.name.clone(),
                id: engine.service_id(i),
                v6: s.ip.is_ipv6(),
                down: states.get(i).is_some_and(|st| !st.up),
            })
            .collect();
        let mut by_name = HashMap::new();
        let domains = (0..engine.domain_count())
            .map(|d| {
                let spec = engine.domain(d);
                let p = spec.persistence?;
                let name = spec.name.to_ascii_lowercase();
                by_name.insert(name.clone(), d);
                let settings = Settings {
                    timeout_ms: u64::from(p.timeout_s) * 1000,
                    max_entries: p.max_entries as usize,
                };
                let kept = old
                    .by_name
                    .get(&name)
                    .and_then(|&i| old.domains.get(i)?.as_ref())
                    .filter(|t| t.mask == p.mask);
                let table = match kept {
                    Some(t) if t.table.settings() == settings => t.table.clone(),
                    Some(t) => Arc::new(t.table.resized(settings, now, &old.counters)),
                    None => Arc::new(Table::new(settings)),
                };
                let mut reach = Vec::new();
                let mut next = Some(d);
                // Backup chains are acyclic (the engine checks); the bound is only a guard.
                for _ in 0..=engine.domain_count() {
                    let Some(b) = next else { break };
                    reach.extend(engine.domain(b).services.iter().map(|s| s.index()));
                    next = engine.domain(b).backup.map(crate::model::DomainId::index);
                }
                reach.sort_unstable();
                reach.dedup();
                Some(DomainTable {
                    name,
                    mask: p.mask,
                    table,
                    reach,
                })
            })
            .collect();
        Tables {
            clock: old.clock.clone(),
            counters: old.counters.clone(),
            fresh: old.fresh.clone(),
            domains,
            by_name,
            by_service: services
                .iter()
                .enumerate()
                .map(|(i, s)| (s.name.clone(), i))
                .collect(),
            by_id: services
                .iter()
                .enumerate()
                .map(|(i, s)| (s.id, i))
                .collect(),
            services,
        }
    }

    /// Entries held (expired ones not yet dropped included).
    pub fn len(&self) -> usize {
        self.domains.iter().flatten().map(|d| d.table.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The client's entry for `domain` (engine index) and an answer of the family `v6`; `None`
    /// when the domain has no persistence.
    pub fn lookup(&self, domain: usize, v6: bool, client: IpAddr) -> Option<Sticky> {
        let d = self.domains.get(domain)?.as_ref()?;
        let key = Key {
            v6,
            client: d.mask.apply(client),
        };
        let service = d.table.get(&key, self.clock.now_ms(), &self.counters);
        Some(Sticky {
            domain,
            key,
            service,
        })
    }

    /// The answer given after `sticky`'s look-up: `picked` (engine service indexes). One
    /// service makes or refreshes the entry (or points it there); no service (backup addresses,
    /// NODATA) leaves the entry as it is.
    pub fn note(&self, sticky: Option<&Sticky>, picked: &[usize]) {
        let (Some(s), [service]) = (sticky, picked) else {
            return;
        };
        let Some(d) = self.domains.get(s.domain).and_then(Option::as_ref) else {
            return;
        };
        let Some(id) = self.services.get(*service).map(|s| s.id) else {
            return;
        };
        let outcome = d
            .table
            .record(s.key, id, self.clock.now_ms(), &self.counters);
        if outcome != Recorded::Refreshed {
            self.fresh.notify_one();
        }
    }

    /// Up to `budget` entries for the other parents: new ones, ones that changed service, and
    /// ones in use whose last copy sent is getting old (see [`Table::export`]).
    pub fn export(&self, budget: usize) -> Vec<PersistEntry> {
        self.export_with(budget, false)
    }

    /// Up to `budget` of the entries made or pointed at another service since the last call,
    /// not sent yet (see [`Table::export_fresh`]).
    pub fn export_fresh(&self, budget: usize) -> Vec<PersistEntry> {
        self.export_with(budget, true)
    }

    fn export_with(&self, budget: usize, fresh: bool) -> Vec<PersistEntry> {
        let now = self.clock.now_ms();
        let mut out = Vec::new();
        let mut rows = Vec::new();
        for d in self.domains.iter().flatten() {
            if out.len() >= budget {
                break;
            }
            let timeout = d.table.settings().timeout_ms;
            let refresh = (timeout / 4).max(MIN_REFRESH.as_millis() as u64);
            rows.clear();
            let left = budget - out.len();
            if fresh {
                d.table.export_fresh(now, left, &mut rows);
            } else {
                d.table
                    .export(now, refresh, left, &mut rows, &self.counters);
            }
            out.extend(rows.iter().filter_map(|e| {
                let service = &self.services[*self.by_id.get(&e.service)?];
                Some(PersistEntry {
                    client: IpNet::new(e.key.client, mask_len(d.mask, e.key.client)).ok()?,
                    domain: d.name.clone(),
                    service: service.name.clone(),
                    ttl_s: u32::try_from(e.remaining_ms.div_ceil(1000)).unwrap_or(u32::MAX),
                })
            }));
        }
        self.counters
            .sent
            .fetch_add(out.len() as u64, Ordering::Relaxed);
        out
    }

    /// Every entry is sent again by the next exports (a parent link came up).
    pub fn resync(&self) {
        for d in self.domains.iter().flatten() {
            d.table.resync();
        }
    }

    /// Takes in a peer's entries. Refused (counted as rejected): a domain without persistence
    /// here, a service that is not the domain's or its backup domains', a client prefix that
    /// is not the domain's mask of a masked address, beyond [`MAX_MERGE_ROWS`]. Not used
    /// (counted as ignored): an entry for a service that is DOWN here. The peer's remaining
    /// time is capped at our timeout.
    pub fn merge(&self, rows: &[PersistEntry]) {
        let now = self.clock.now_ms();
        let mut rejected = rows.len().saturating_sub(MAX_MERGE_ROWS) as u64;
        let mut ignored = 0;
        for row in rows.iter().take(MAX_MERGE_ROWS) {
            match self.check(row) {
                Err(Refused::Invalid) => rejected += 1,
                Err(Refused::Down) => ignored += 1,
                Ok((d, key, service)) => {
                    let timeout = d.table.settings().timeout_ms;
                    let remaining = (u64::from(row.ttl_s) * 1000).min(timeout);
                    if remaining == 0 {
                        continue;
                    }
                    let last_used = now.saturating_sub(timeout - remaining);
                    d.table.merge(key, service, last_used, now, &self.counters);
                }
            }
        }
        self.counters
            .rejected
            .fetch_add(rejected, Ordering::Relaxed);
        self.counters.ignored.fetch_add(ignored, Ordering::Relaxed);
    }

    fn check(&self, row: &PersistEntry) -> Result<(&DomainTable, Key, ServiceKey), Refused> {
        let d = self
            .by_name
            .get(row.domain.to_ascii_lowercase().as_str())
            .and_then(|&i| self.domains[i].as_ref())
            .ok_or(Refused::Invalid)?;
        let addr = row.client.addr();
        let v4_mapped = matches!(addr, IpAddr::V6(a) if a.to_ipv4_mapped().is_some());
        if v4_mapped
            || row.client.prefix_len() != mask_len(d.mask, addr)
            || row.client.network() != addr
        {
            return Err(Refused::Invalid);
        }
        let &s = self
            .by_service
            .get(row.service.as_str())
            .ok_or(Refused::Invalid)?;
        if d.reach.binary_search(&s).is_err() {
            return Err(Refused::Invalid);
        }
        let info = &self.services[s];
        if info.down {
            return Err(Refused::Down);
        }
        Ok((
            d,
            Key {
                v6: info.v6,
                client: addr,
            },
            info.id,
        ))
    }
}

enum Refused {
    Invalid,
    Down,
}

#[cfg(test)]
mod tests;
