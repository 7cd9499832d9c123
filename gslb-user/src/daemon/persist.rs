//! gslbd's persistence exchange between parents (docs/mep.md, "Persistence"), one task beside
//! the MEP node:
//!
//! - Out: an entry made here (or pointed at another service) is published to the node
//!   [`FRESH_DELAY`] later, with the others made meanwhile, as this site's persistence table,
//!   which the node sends to the other parents: a client that asks another parent next finds
//!   its entry there. Every [`SYNC_INTERVAL`], the entries in use whose last copy sent is
//!   getting old are sent again (and whatever a batch had no room for). A batch holds at most
//!   `persist::MAX_EXPORT_ROWS`.
//!   When a session to another parent comes up, every entry is sent again, batch by batch: the
//!   peer may have started since.
//! - In: each batch a parent sent, as the node's view shows it, is merged into the responder's
//!   tables once (validated there: `persist::Tables::merge`).

use std::{collections::HashMap, sync::Arc, time::Duration};

use tokio::time::Instant;
use tracing::warn;

use crate::{
    mep::{MepNode, MepView, session::Audience},
    persist::{MAX_EXPORT_ROWS, PersistEntry, Store},
    supervise::{self, Supervised},
};

/// How often refreshed entries are sent.
pub const SYNC_INTERVAL: Duration = Duration::from_secs(1);
/// New entries made within this long go in one batch: at most ten batches of new entries a
/// second.
pub const FRESH_DELAY: Duration = Duration::from_millis(100);
/// A failure to publish is logged at most this often.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The running exchange; stopped when dropped.
pub struct PersistSync(Supervised);

impl PersistSync {
    /// Exchanges `store`'s entries through `node`.
    pub fn start(node: MepNode, store: Arc<Store>) -> PersistSync {
        PersistSync(supervise::spawn("mep-persist-sync", move |_| {
            run(node.clone(), store.clone())
        }))
    }
}

impl Drop for PersistSync {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn run(node: MepNode, store: Arc<Store>) {
    let mut views = node.subscribe();
    let mut tick = tokio::time::interval(SYNC_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut inbound = Inbound::default();
    // An empty batch replaces a sent one once, so that a session coming up later is not sent a
    // stale batch (its times left would be old).
    let mut sent_empty = true;
    let mut fresh_at: Option<Instant> = None;
    let mut warnings = crate::log_limit::LogLimiter::new(WARN_EVERY);
    let mut publish = |rows: Vec<PersistEntry>| {
        if let Err(error) = node.publish_persistence(rows)
            && let Some(suppressed) = warnings.allow(Instant::now())
        {
            warn!(%error, suppressed, "MEP: persistence entries cannot be sent");
        }
    };
    loop {
        tokio::select! {
            () = store.fresh(), if fresh_at.is_none() => {
                fresh_at = Some(Instant::now() + FRESH_DELAY);
            }
            () = tokio::time::sleep_until(fresh_at.unwrap_or_else(Instant::now)), if fresh_at.is_some() => {
                fresh_at = None;
                let rows = store.tables().export_fresh(MAX_EXPORT_ROWS);
                if !rows.is_empty() {
                    sent_empty = false;
                    publish(rows);
                }
            }
            _ = tick.tick() => {
                let rows = store.tables().export(MAX_EXPORT_ROWS);
                if rows.is_empty() && sent_empty {
                    continue;
                }
                sent_empty = rows.is_empty();
                publish(rows);
            }
            changed = views.changed() => {
                if changed.is_err() {
                    return; // the node is gone
                }
                let view = views.borrow_and_update().clone();
                inbound.absorb(&view, &store);
            }
        }
    }
}

/// What was taken from the views so far.
#[derive(Default)]
struct Inbound {
    /// Per peer, the batch last merged (the view shows it until the next one arrives).
    merged: HashMap<String, Arc<Vec<PersistEntry>>>,
    /// Sessions to other parents that are up, by when they came up.
    sessions: HashMap<String, std::time::Instant>,
}

impl Inbound {
    fn absorb(&mut self, view: &MepView, store: &Store) {
        let tables = store.tables();
        let parents = view
            .sessions
            .iter()
            .filter(|(_, l)| l.up && l.audience == Audience::PeerParent);
        let mut resync = false;
        for (peer, session) in parents.clone() {
            resync |= self.sessions.insert(peer.clone(), session.since) != Some(session.since);
        }
        self.sessions
            .retain(|peer, _| parents.clone().any(|(p, _)| p == peer));
        if resync {
            tables.resync();
        }
        for (site, remote) in &view.sites {
            if self
                .merged
                .get(site)
                .is_some_and(|m| Arc::ptr_eq(m, &remote.persistence))
            {
                continue;
            }
            tables.merge(&remote.persistence);
            self.merged.insert(site.clone(), remote.persistence.clone());
        }
        self.merged.retain(|site, _| view.sites.contains_key(site));
    }
}
