//! MEP in: every view the node publishes becomes `world.mep`, other parents' RTT columns are
//! merged into `world.rtt`, and the answers are recomputed only when what they read changed
//! (which sites are reachable and what they report); after a node restart the last view is
//! held until the links are back (bounded).

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use tracing::{info, warn};

use super::Mep;
use crate::{
    mep::{MepView, RttProtocol, RttRow},
    probe::{ProbeKind, RttHandle},
    world::World,
};

/// What the answers read from a view at once: whether this site answers, and for each
/// reachable site which of its services it reports and whether they are UP (an unreachable
/// site's services are DOWN whatever it reported last). Their loads are read too, but through
/// the load pacer (daemon/load.rs), which republishes only for a load that changes a decision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Facts {
    pub(super) answers_dns: bool,
    pub(super) reachable: BTreeMap<String, Vec<(String, bool)>>,
}

impl Facts {
    pub(super) fn of(view: &MepView) -> Facts {
        Facts {
            answers_dns: view.answers_dns,
            reachable: view
                .sites
                .iter()
                .filter(|(_, r)| r.reachable)
                .map(|(name, r)| {
                    let states = r
                        .services
                        .iter()
                        .map(|s| (s.name.clone(), s.state.up))
                        .collect();
                    (name.clone(), states)
                })
                .collect(),
        }
    }
}

/// The last view kept after a node restart until the sites reachable before are again, or
/// `until`.
pub(super) struct Hold {
    pub(super) until: Instant,
    pub(super) want: BTreeSet<String>,
}

/// One site's RTT column: LDNS entry → (µs, how it was measured).
type Cells = BTreeMap<IpAddr, (u32, Option<ProbeKind>)>;

/// A remote parent's RTT column as last merged into the RTT table.
#[derive(Default)]
pub(super) struct MergedRtt {
    pub(super) table: Arc<Vec<RttRow>>,
    pub(super) cells: Cells,
}

impl Mep {
    /// Resolves when the node has a new view (or a kept view's time is up); then call
    /// [`Mep::apply`]. Pending forever without MEP. Cancel-safe.
    pub async fn changed(mep: &mut Option<Mep>) {
        let Some(m) = mep else {
            return std::future::pending().await;
        };
        let until = m.hold.as_ref().map(|h| h.until);
        tokio::select! {
            r = m.running.views.changed() => {
                if r.is_err() {
                    // The node's handle keeps the sender: not reached.
                    std::future::pending::<()>().await;
                }
            }
            () = tokio::time::sleep_until(until.unwrap_or_else(Instant::now).into()), if until.is_some() => {}
        }
    }

    /// Takes the node's latest view into `world`: `world.mep`, and other parents' RTT rows into
    /// `world.rtt`. True when the answers may change at once (a site became reachable or
    /// unreachable, or a reachable site reported other service states, or the role changed);
    /// a change of load only is for the load pacer to weigh (`Loads::note`).
    pub fn apply(&mut self, world: &mut World) -> bool {
        let view = self.running.views.borrow_and_update().clone();
        // The node's placeholder before its first view has no site.
        let reachable =
            |s: &String| !view.site.is_empty() && view.sites.get(s).is_some_and(|r| r.reachable);
        if let Some(hold) = &self.hold {
            if !hold.want.iter().all(reachable) && Instant::now() < hold.until {
                return false;
            }
            let missing: Vec<&String> = hold.want.iter().filter(|s| !reachable(s)).collect();
            info!(?missing, "MEP: restarted node's view in force");
            self.hold = None;
        }
        if view.site.is_empty() {
            return false;
        }
        if let Some(rtt) = &world.rtt {
            self.merge_rtt(rtt, &view);
        }
        let facts = Facts::of(&view);
        world.mep = Some(view);
        if facts == self.applied {
            return false;
        }
        for (site, _) in facts
            .reachable
            .iter()
            .filter(|(s, _)| !self.applied.reachable.contains_key(*s))
        {
            info!(%site, "MEP: site reachable");
        }
        for (site, _) in self
            .applied
            .reachable
            .iter()
            .filter(|(s, _)| !facts.reachable.contains_key(*s))
        {
            warn!(%site, "MEP: site unreachable; its services count as DOWN unless monitored here");
        }
        self.applied = facts;
        true
    }

    /// Merges each other parent's RTT column, as its link brought it, into the RTT table: only
    /// what changed since the last merge, and removals for rows that went (or for the whole
    /// column when its link went down).
    pub(super) fn merge_rtt(&mut self, rtt: &RttHandle, view: &MepView) {
        for parent in &self.parents {
            let table = view
                .sites
                .get(parent)
                .map(|r| r.rtt.clone())
                .unwrap_or_default();
            let merged = self.rtt.entry(parent.clone()).or_default();
            if Arc::ptr_eq(&merged.table, &table) || (table.is_empty() && merged.cells.is_empty()) {
                continue;
            }
            let (cells, rows) = rtt_changes(parent, &merged.cells, &table);
            if !rows.is_empty() {
                rtt.merge_remote(parent, &rows);
            }
            *merged = MergedRtt { table, cells };
        }
    }
}

/// `site`'s column in `table` (its rows only: a parent speaks for itself), and the rows that
/// turn `merged` into it: changed cells, and removals for cells that went.
pub(super) fn rtt_changes(
    site: &str,
    merged: &Cells,
    table: &[RttRow],
) -> (Cells, Vec<crate::probe::RttRow>) {
    let cells: Cells = table
        .iter()
        .filter(|r| r.site == site)
        .map(|r| (r.ldns.network(), (r.rtt_us, probe_kind(r.protocol))))
        .collect();
    let mut rows: Vec<crate::probe::RttRow> = cells
        .iter()
        .filter(|(ldns, cell)| merged.get(*ldns) != Some(*cell))
        .map(|(ldns, (us, kind))| crate::probe::RttRow {
            ldns: *ldns,
            rtt: Some(Duration::from_micros(u64::from(*us))),
            kind: *kind,
        })
        .collect();
    rows.extend(
        merged
            .keys()
            .filter(|ldns| !cells.contains_key(*ldns))
            .map(|ldns| crate::probe::RttRow {
                ldns: *ldns,
                rtt: None,
                kind: None,
            }),
    );
    (cells, rows)
}

fn probe_kind(protocol: RttProtocol) -> Option<ProbeKind> {
    match protocol {
        RttProtocol::Icmp => Some(ProbeKind::Icmp),
        RttProtocol::Tcp => Some(ProbeKind::Tcp),
        RttProtocol::Dns => Some(ProbeKind::DnsDot),
        RttProtocol::Udp => None,
    }
}
