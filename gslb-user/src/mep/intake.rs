//! Taking the node's views in: which view is taken, and whether taking it changes what the
//! answers read (which sites are reachable and what they report, and whether this site
//! answers). The node republishes its view on heartbeats too, and those must not cost a
//! recompute each. After a node restart the last view is held until the sites reachable before
//! are again (bounded), so that a reload does not drop remote services from the answers for the
//! moment the links take to reconnect.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Instant,
};

use tracing::{info, warn};

use super::MepView;

/// What the answers read from a view at once: whether this site answers, and for each
/// reachable site which of its services it reports and whether they are UP (an unreachable
/// site's services are DOWN whatever it reported last). Their loads are read too, but through
/// the load pacer (daemon/load.rs), which republishes only for a load that changes a decision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    answers_dns: bool,
    reachable: BTreeMap<String, Vec<(String, bool)>>,
}

impl Facts {
    pub fn of(view: &MepView) -> Facts {
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
struct Hold {
    until: Instant,
    want: BTreeSet<String>,
}

/// The facts of the view in force, and the hold after a node restart.
#[derive(Default)]
pub struct Intake {
    applied: Facts,
    hold: Option<Hold>,
}

impl Intake {
    /// Starting from `view` (the view in force, if any).
    pub fn new(view: Option<&MepView>) -> Intake {
        Intake {
            applied: view.map(Facts::of).unwrap_or_default(),
            hold: None,
        }
    }

    /// Holds the view in force until the sites of `want` are reachable in a new view, or
    /// `until`.
    pub fn hold(&mut self, want: BTreeSet<String>, until: Instant) {
        self.hold = Some(Hold { until, want });
    }

    /// When a held view's time is up, if one is held.
    pub fn held_until(&self) -> Option<Instant> {
        self.hold.as_ref().map(|h| h.until)
    }

    /// Whether `view` is to be taken now: not while a hold waits for sites it lacks, and never
    /// the node's placeholder before its first view (it has no site).
    pub fn admit(&mut self, view: &MepView) -> bool {
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
        !view.site.is_empty()
    }

    /// Takes `view` (admitted) as the view in force. True when the answers may change at once:
    /// a site became reachable or unreachable, a reachable site reported other service states,
    /// or the role changed.
    pub fn take(&mut self, view: &MepView) -> bool {
        let facts = Facts::of(view);
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
}

/// The sites `view` reaches (what a hold waits for after a node restart).
pub fn reachable_sites(view: Option<&MepView>) -> BTreeSet<String> {
    view.map(|v| {
        v.sites
            .iter()
            .filter(|(_, r)| r.reachable)
            .map(|(s, _)| s.clone())
            .collect()
    })
    .unwrap_or_default()
}
