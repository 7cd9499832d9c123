//! What peers say: each frame checked against who may say it (a site about itself, a parent
//! about its children), then merged, and the handovers of children moving between parents.

use std::{
    collections::HashMap,
    sync::{Arc, atomic::Ordering},
    time::Instant,
};

use tracing::{debug, info, warn};

use super::Controller;
use crate::mep::{
    frame::{Message, Role},
    node::{
        MAX_PERSIST_ROWS, MAX_TABLE_ROWS,
        merge::{Handover, HandoverEnd},
    },
    session::CloseReason,
    topology::Action,
};

impl Controller {
    pub(super) fn handover_started(&self, child: &str, h: &Handover) {
        info!(site = %self.view.me(), %child, from = %h.via, to = %h.to,
            grace_ms = u64::try_from(self.ctx.cfg.dead_after.as_millis()).unwrap_or(u64::MAX),
            "child moving to another parent: its last state kept until that parent relays it");
    }

    /// Ends the handovers whose child was delivered again or whose grace is over.
    pub(super) fn settle_handovers(&mut self, now: Instant) {
        for (child, h, end) in self.table.settle(now) {
            self.view_dirty = true;
            match end {
                HandoverEnd::Delivered => {
                    debug!(site = %self.view.me(), %child, from = %h.via, to = %h.to, "handover done");
                }
                HandoverEnd::Expired => {
                    info!(site = %self.view.me(), %child, from = %h.via, to = %h.to,
                    "handover not done within the grace: the child is unreachable until a parent relays it");
                }
            }
        }
    }

    /// Whether `peer` may make statements about `site`: every site about itself; a peer parent
    /// (to a parent) about a child whose configured parent it is or whose parent's backup
    /// parent it is (an adopter), never about a parent or about us.
    pub(super) fn may_speak_for(&self, peer: &str, site: &str) -> bool {
        let topo = self.view.topology();
        if site == self.view.me() {
            return false;
        }
        if site == peer {
            return true;
        }
        if self.view.role() != Role::Parent
            || topo.site(peer).is_none_or(|p| p.role != Role::Parent)
        {
            return false;
        }
        let Some(parent) = topo
            .site(site)
            .filter(|s| s.role == Role::Child)
            .and_then(|s| s.parent.as_deref())
        else {
            return false;
        };
        parent == peer
            || topo
                .site(parent)
                .is_some_and(|p| p.backups.iter().any(|b| b == peer))
            || self.view.backups(parent).iter().any(|b| b == peer)
    }

    /// A statement `peer` may not make: dropped, counted, logged (rate-limited).
    pub(super) fn refuse_statement(&self, peer: &str, what: &str, site: &str) {
        self.ctx
            .counters
            .refused_statements
            .fetch_add(1, Ordering::Relaxed);
        if let Some(quiet) = self.ctx.log_gate.admit(CloseReason::NotAllowed) {
            warn!(site = %self.view.me(), %peer, about = %site, what, suppressed = quiet,
                "MEP statement about another site refused: a site speaks only for itself, a parent for its own children");
        }
    }

    pub(super) fn frame(&mut self, peer: &str, message: Message, now: Instant) {
        let me = self.view.me().to_owned();
        match message {
            Message::SiteStatus(s) => {
                if !self.may_speak_for(peer, &s.site) {
                    return self.refuse_statement(peer, "status", &s.site);
                }
                self.view.site_status(peer, &s);
                let child = s.site.clone();
                if let Some(h) = self.table.status(peer, s, now) {
                    self.handover_started(&child, &h);
                }
            }
            Message::ServiceStates(s) => {
                if !self.may_speak_for(peer, &s.site) {
                    return self.refuse_statement(peer, "services", &s.site);
                }
                self.table.services(peer, &s.site, s.services);
            }
            Message::RttRows(mut chunk) => {
                if !self.view.topology().syncs_network_metrics(&me, peer) {
                    return;
                }
                // A parent's RTT table is its own column: rows it says another site measured
                // are not its to give.
                if let Some(other) = chunk.items.iter().find(|r| r.site != peer) {
                    self.refuse_statement(peer, "rtt rows", &other.site.clone());
                    chunk.items.retain(|r| r.site == peer);
                }
                if let Some(rows) = collect(
                    &mut self.pending_rtt,
                    peer,
                    chunk.first,
                    chunk.last,
                    chunk.items,
                    MAX_TABLE_ROWS,
                ) {
                    self.table.entry(peer, peer).rtt = Arc::new(rows);
                }
            }
            Message::Persistence(chunk) => {
                if !self.view.topology().syncs_network_metrics(&me, peer) {
                    return;
                }
                if let Some(rows) = collect(
                    &mut self.pending_persist,
                    peer,
                    chunk.first,
                    chunk.last,
                    chunk.items,
                    MAX_PERSIST_ROWS,
                ) {
                    self.table.entry(peer, peer).persistence = Arc::new(rows);
                }
            }
            Message::BackupParents { parent, backups } => {
                if parent != peer {
                    return;
                }
                self.view.backup_list(peer, &parent, backups.clone());
                self.table.entry(peer, peer).backups = Some(backups);
            }
            Message::AdoptRequest {
                original_parent,
                backups,
            } => {
                let actions = self
                    .view
                    .adopt_request(peer, &original_parent, &backups, now);
                if actions.iter().any(|a| {
                    matches!(
                        a,
                        Action::Send {
                            message: Message::AdoptAccept { .. },
                            ..
                        }
                    )
                }) {
                    info!(site = %me, adopter = %peer, %original_parent, "adopted by a backup parent");
                }
                self.apply(actions);
            }
            Message::AdoptAccept { original_parent } => {
                info!(site = %me, child = %peer, %original_parent, "child adopted");
                let actions = self.view.adopt_answer(peer, true, "");
                self.apply(actions);
            }
            Message::AdoptReject {
                original_parent,
                reason,
            } => {
                info!(site = %me, child = %peer, %original_parent, %reason, "adoption rejected");
                let actions = self.view.adopt_answer(peer, false, &reason);
                self.apply(actions);
            }
            Message::Hello(_)
            | Message::Auth(_)
            | Message::Reject { .. }
            | Message::Heartbeat { .. } => {}
        }
    }
}

/// Adds a chunk to `peer`'s table being received; the whole table once the last chunk came.
/// A table over `max` rows is dropped.
fn collect<T>(
    pending: &mut HashMap<String, Vec<T>>,
    peer: &str,
    first: bool,
    last: bool,
    items: Vec<T>,
    max: usize,
) -> Option<Vec<T>> {
    if first {
        pending.insert(peer.to_owned(), Vec::new());
    }
    let table = pending.get_mut(peer)?;
    if table.len() + items.len() > max {
        warn!(%peer, max, "table too large, dropped");
        pending.remove(peer);
        return None;
    }
    table.extend(items);
    if last { pending.remove(peer) } else { None }
}
