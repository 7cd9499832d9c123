//! The TCP server's table of open connections: how many each client address holds, and, when
//! the table is full, which connection makes room for a newcomer.
//!
//! Why evict rather than refuse at the cap: the cap exists so that slow or silent clients cannot
//! take every socket; refusing newcomers would hand exactly that to whoever opens connections
//! first. Dropping the connection that has waited longest for a query costs its client a
//! reconnect at worst (RFC 7766 §6.2.3 lets servers close idle connections at any time).

use std::{
    collections::HashMap,
    net::{IpAddr, Ipv6Addr},
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{sync::Notify, time::Instant};
use tracing::warn;

use crate::log_limit::LogLimiter;

/// What a connection is doing, in the order connections are evicted: an idle one (between
/// queries) first, then one in the middle of a query (its deadline runs anyway), never one
/// that is being answered (its write is bounded by the message timeout).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Phase {
    Idle,
    Reading,
    Answering,
}

/// Why a connection was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// Its address holds `max_per_address` connections already.
    PerAddress,
    /// Every connection is being answered; none can be dropped for it.
    Full,
}

struct Open {
    address: IpAddr,
    phase: Phase,
    /// When the connection entered `phase`.
    since: Instant,
    evict: Arc<Notify>,
}

#[derive(Default)]
struct Table {
    next_id: u64,
    open: HashMap<u64, Open>,
    per_address: HashMap<IpAddr, usize>,
    /// Refused or evicted connections: one line per `WARN_EVERY`.
    warnings: Option<LogLimiter>,
}

/// At most one warning line per this long about refused or evicted connections.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The open connections of one TCP listener.
pub(super) struct Conns {
    max_connections: usize,
    max_per_address: usize,
    table: Mutex<Table>,
}

/// A connection's place in the table; dropping it frees the place.
pub(super) struct Ticket {
    conns: Arc<Conns>,
    id: u64,
    /// Notified when the connection is dropped to make room for a newcomer.
    pub(super) evicted: Arc<Notify>,
}

/// The address whose connections are counted together: an IPv4 address (IPv4-mapped IPv6
/// included), or an IPv6 /64, the block one host is usually given.
fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & !((1u128 << 64) - 1))),
        },
        v4 @ IpAddr::V4(_) => v4,
    }
}

impl Conns {
    pub(super) fn new(max_connections: usize, max_per_address: usize) -> Arc<Self> {
        Arc::new(Conns {
            max_connections,
            max_per_address,
            table: Mutex::new(Table::default()),
        })
    }

    /// A place for a connection from `peer`, dropping the connection that has waited longest
    /// for a query when the table is full.
    pub(super) fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Ticket, Refused> {
        let address = address_key(peer);
        let now = Instant::now();
        let mut table = self.table.lock().expect("not poisoned");
        if table.per_address.get(&address).copied().unwrap_or(0) >= self.max_per_address {
            table.warn(
                now,
                peer,
                "tcp connection refused: per-address limit reached",
            );
            return Err(Refused::PerAddress);
        }
        if table.open.len() >= self.max_connections {
            let victim = table
                .open
                .iter()
                .filter(|(_, o)| o.phase != Phase::Answering)
                .min_by_key(|(_, o)| (o.phase, o.since))
                .map(|(id, _)| *id);
            let Some(victim) = victim else {
                table.warn(
                    now,
                    peer,
                    "tcp connection refused: every connection is answering",
                );
                return Err(Refused::Full);
            };
            let gone = table.remove(victim).expect("just found");
            gone.evict.notify_one();
            table.warn(
                now,
                gone.address,
                "tcp connection dropped for a newcomer: at the cap",
            );
        }
        let id = table.next_id;
        table.next_id += 1;
        let evict = Arc::new(Notify::new());
        table.open.insert(
            id,
            Open {
                address,
                phase: Phase::Idle,
                since: now,
                evict: evict.clone(),
            },
        );
        *table.per_address.entry(address).or_default() += 1;
        Ok(Ticket {
            conns: self.clone(),
            id,
            evicted: evict,
        })
    }

    /// Connections open now (tests).
    #[cfg(test)]
    fn open(&self) -> usize {
        self.table.lock().expect("not poisoned").open.len()
    }
}

impl Table {
    fn remove(&mut self, id: u64) -> Option<Open> {
        let gone = self.open.remove(&id)?;
        if let Some(n) = self.per_address.get_mut(&gone.address) {
            *n -= 1;
            if *n == 0 {
                self.per_address.remove(&gone.address);
            }
        }
        Some(gone)
    }

    /// A warning, at most one line per [`WARN_EVERY`] (a flood would otherwise log per packet).
    fn warn(&mut self, now: Instant, peer: IpAddr, what: &'static str) {
        let warnings = self
            .warnings
            .get_or_insert_with(|| LogLimiter::new(WARN_EVERY));
        if let Some(suppressed) = warnings.allow(now) {
            warn!(%peer, open = self.open.len(), suppressed, "{what}");
        }
    }
}

impl Ticket {
    /// The connection is now in `phase`.
    pub(super) fn set(&self, phase: Phase) {
        let mut table = self.conns.table.lock().expect("not poisoned");
        if let Some(open) = table.open.get_mut(&self.id) {
            open.phase = phase;
            open.since = Instant::now();
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // Already gone when it was evicted.
        if let Ok(mut table) = self.conns.table.lock() {
            table.remove(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_the_longest_idle_connection_makes_room() {
        let conns = Conns::new(3, 3);
        let a = conns.admit(ip("192.0.2.1")).unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
        let b = conns.admit(ip("192.0.2.2")).unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
        let c = conns.admit(ip("192.0.2.3")).unwrap();
        // a is in a query, so b (idle the longest) goes, then a (reading), never c (answering).
        a.set(Phase::Reading);
        c.set(Phase::Answering);
        let d = conns.admit(ip("192.0.2.4")).unwrap();
        assert_eq!(conns.open(), 3);
        let notified = |t: &Ticket| {
            let n = t.evicted.clone();
            async move {
                tokio::time::timeout(Duration::from_millis(1), n.notified())
                    .await
                    .is_ok()
            }
        };
        assert!(notified(&b).await, "b evicted");
        assert!(!notified(&a).await && !notified(&c).await);
        d.set(Phase::Answering);
        let e = conns.admit(ip("192.0.2.5")).unwrap();
        assert!(notified(&a).await, "then a");
        // Now c, d and e are answering: nobody can make room.
        e.set(Phase::Answering);
        assert_eq!(conns.admit(ip("192.0.2.6")).err(), Some(Refused::Full));
        drop((a, b));
        assert_eq!(conns.open(), 3, "evicted tickets free nothing twice");
        drop(c);
        assert!(conns.admit(ip("192.0.2.6")).is_ok());
    }

    #[tokio::test]
    async fn an_address_holds_at_most_its_limit() {
        let conns = Conns::new(100, 2);
        let held: Vec<Ticket> = ["192.0.2.1", "::ffff:192.0.2.1"]
            .into_iter()
            .map(|a| conns.admit(ip(a)).unwrap())
            .collect();
        assert_eq!(
            conns.admit(ip("192.0.2.1")).err(),
            Some(Refused::PerAddress)
        );
        assert!(conns.admit(ip("192.0.2.2")).is_ok(), "another address");
        // One IPv6 /64 counts as one address.
        let _v6 = [
            conns.admit(ip("2001:db8::1")).unwrap(),
            conns.admit(ip("2001:db8::2")).unwrap(),
        ];
        assert_eq!(
            conns.admit(ip("2001:db8::ffff:1")).err(),
            Some(Refused::PerAddress)
        );
        assert!(conns.admit(ip("2001:db8:0:1::1")).is_ok());
        drop(held);
        assert!(
            conns.admit(ip("192.0.2.1")).is_ok(),
            "free again once closed"
        );
    }
}
