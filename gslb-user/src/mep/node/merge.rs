//! The merged view's site table: what each session brought about each site, which of it stands
//! for the site, and the handover grace (docs/mep.md, "Merged view" and "Handover").
//!
//! Pure (time passed in), driven by the node's controller and by the tests directly.
//!
//! Which session's data stands for a site: one that has it reachable (our own session to it, or a
//! peer parent relaying it as attached) before one that does not; among those, one that has
//! delivered the site's services before one that has only announced it (a session's status
//! frame and its services frame may be handled a moment apart); then our own session before a
//! relay. So a child moving to a parent that is connected to us keeps its services while the new
//! path's first frames are in flight.
//!
//! Handover: a child that leaves a parent for another one says so before closing (its status,
//! naming the new parent), and the parent it left relays it as not attached, naming the new
//! parent. Either way the site's last delivered state is kept, as reachable, until some path
//! delivers it again or `grace` (the dead-peer timeout) has passed. Without that, every other
//! parent would count the child's services DOWN for the moment the new parent takes to relay
//! them, although nothing is down. A session that just goes down, with no such word, drops what
//! it brought at once, as before.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::{Duration, Instant},
};

use super::RemoteSite;
use crate::mep::frame::{RttRow, ServiceReport, SiteStatus};
use crate::persist::PersistEntry;

/// What one session brought about one site.
#[derive(Clone, Debug, Default)]
pub(super) struct SiteData {
    pub status: Option<SiteStatus>,
    /// `None` until the site's services came over this session (a relayed child's again after
    /// each time it was relayed as not attached).
    pub services: Option<Arc<Vec<ServiceReport>>>,
    pub rtt: Arc<Vec<RttRow>>,
    pub persistence: Arc<Vec<PersistEntry>>,
    pub backups: Option<Vec<String>>,
}

impl SiteData {
    /// This data has the site reachable through the session `via` it came by.
    fn reachable(&self, via: &str, site: &str) -> bool {
        via == site || self.status.as_ref().is_some_and(|s| s.up)
    }
}

/// A site kept reachable across a handover: its last delivered state, until a path delivers
/// it again or `until`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Handover {
    /// The session the kept state came through.
    pub via: String,
    /// The parent the site said it moved to.
    pub to: String,
    pub status: Option<SiteStatus>,
    pub services: Arc<Vec<ServiceReport>>,
    pub until: Instant,
}

/// How well a session's data stands for a site: (reachable, delivered, our own session).
type Rank = (bool, bool, bool);

/// How a handover ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HandoverEnd {
    /// A path delivered the site's state.
    Delivered,
    /// No path delivered it within the grace: the site is unreachable now.
    Expired,
}

pub(super) struct SiteTable {
    /// The site it is about → the session it came through → data. By site first: what stands for
    /// a site, and whether a handover is over, look at that site's few sessions only.
    data: HashMap<String, BTreeMap<String, SiteData>>,
    handovers: BTreeMap<String, Handover>,
    grace: Duration,
}

impl SiteTable {
    pub(super) fn new(grace: Duration) -> SiteTable {
        SiteTable {
            data: HashMap::new(),
            handovers: BTreeMap::new(),
            grace,
        }
    }

    pub(super) fn get(&self, via: &str, site: &str) -> Option<&SiteData> {
        self.data.get(site)?.get(via)
    }

    /// The data `via` brought about `site`, created empty.
    pub(super) fn entry(&mut self, via: &str, site: &str) -> &mut SiteData {
        // Keys allocated only when new: this runs for every state frame.
        if !self.data.contains_key(site) {
            self.data.insert(site.to_owned(), BTreeMap::new());
        }
        let vias = self.data.get_mut(site).expect("inserted");
        if !vias.contains_key(via) {
            vias.insert(via.to_owned(), SiteData::default());
        }
        vias.get_mut(via).expect("inserted")
    }

    /// Drops everything `peer` brought; returns what it brought about itself.
    fn drop_session(&mut self, peer: &str) -> Option<SiteData> {
        let mut own = None;
        self.data.retain(|site, vias| {
            if let Some(d) = vias.remove(peer)
                && site == peer
            {
                own = Some(d);
            }
            !vias.is_empty()
        });
        own
    }

    /// A session to `peer` came up: whatever an older session of the peer left goes.
    pub(super) fn session_up(&mut self, peer: &str) {
        self.drop_session(peer);
    }

    /// The session to `peer` went down: what it brought goes. When the peer had said it was
    /// moving to the parent `moved_to`, its last delivered state is kept for the grace; the
    /// handover is returned then.
    pub(super) fn session_down(
        &mut self,
        peer: &str,
        moved_to: Option<&str>,
        now: Instant,
    ) -> Option<Handover> {
        let own = self.drop_session(peer);
        let (to, own) = (moved_to?, own?);
        self.start_handover(peer, peer, to, own.status, own.services?, now)
    }

    /// `via` sent `status`. When a relaying parent says its child is no longer attached and
    /// names the parent it moved to, the child's state it delivered is kept for the grace (the
    /// handover is returned); a relayed child's services are dropped whenever it is relayed as
    /// not attached, so that they do not count as delivered when it is attached again.
    pub(super) fn status(
        &mut self,
        via: &str,
        status: SiteStatus,
        now: Instant,
    ) -> Option<Handover> {
        let site = status.site.clone();
        let d = self.entry(via, &site);
        let mut left = None;
        if via != site && !status.up {
            let was_up = d.status.as_ref().is_some_and(|s| s.up);
            let services = d.services.take();
            if was_up && let (Some(services), Some(to)) = (services, status.parent.clone()) {
                left = Some((d.status.clone(), services, to));
            }
        }
        d.status = Some(status);
        let (old, services, to) = left?;
        self.start_handover(&site, via, &to, old, services, now)
    }

    /// `via` sent `site`'s services (they replace the previous list).
    pub(super) fn services(&mut self, via: &str, site: &str, services: Vec<ServiceReport>) {
        self.entry(via, site).services = Some(Arc::new(services));
    }

    fn start_handover(
        &mut self,
        site: &str,
        via: &str,
        to: &str,
        status: Option<SiteStatus>,
        services: Arc<Vec<ServiceReport>>,
        now: Instant,
    ) -> Option<Handover> {
        // Another path has it already: nothing to bridge.
        if self.delivered(site) {
            return None;
        }
        let h = Handover {
            via: via.to_owned(),
            to: to.to_owned(),
            status,
            services,
            until: now + self.grace,
        };
        self.handovers.insert(site.to_owned(), h.clone());
        Some(h)
    }

    /// Some path has `site` reachable and has delivered its services.
    fn delivered(&self, site: &str) -> bool {
        self.data.get(site).is_some_and(|vias| {
            vias.iter()
                .any(|(via, d)| d.services.is_some() && d.reachable(via, site))
        })
    }

    /// Ends the handovers that are over: the site delivered again, or the grace passed.
    pub(super) fn settle(&mut self, now: Instant) -> Vec<(String, Handover, HandoverEnd)> {
        if self.handovers.is_empty() {
            return Vec::new();
        }
        let ended: Vec<(String, HandoverEnd)> = self
            .handovers
            .iter()
            .filter_map(|(site, h)| {
                if self.delivered(site) {
                    Some((site.clone(), HandoverEnd::Delivered))
                } else if now >= h.until {
                    Some((site.clone(), HandoverEnd::Expired))
                } else {
                    None
                }
            })
            .collect();
        ended
            .into_iter()
            .filter_map(|(site, end)| self.handovers.remove(&site).map(|h| (site, h, end)))
            .collect()
    }

    /// The remote sites as the view shows them: every name in `sites`, plus any other site a
    /// session brought. `session_up(peer)`: our session to `peer` is up (a site connected directly is
    /// reachable even before its first frame).
    pub(super) fn sites<'a>(
        &self,
        sites: impl IntoIterator<Item = &'a str>,
        session_up: impl Fn(&str) -> bool,
        now: Instant,
    ) -> BTreeMap<String, RemoteSite> {
        // Per site, the data that stands for it; the rank orders (reachable, delivered, ours),
        // ties going to the first session by name (`max_by_key` keeps the last of equal ones).
        let mut best: BTreeMap<&str, (Rank, &str, &SiteData)> = BTreeMap::new();
        for (site, vias) in &self.data {
            let rank = |(via, d): &(&String, &SiteData)| {
                (d.reachable(via, site), d.services.is_some(), *via == site)
            };
            let top = vias.iter().rev().max_by_key(rank);
            if let Some((via, d)) = top {
                best.insert(site, (rank(&(via, d)), via, d));
            }
        }
        let unknown = RemoteSite::unknown();
        let mut out: BTreeMap<String, RemoteSite> = sites
            .into_iter()
            .map(|s| (s.to_owned(), unknown.clone()))
            .collect();
        for (site, ((reachable, _, _), via, d)) in &best {
            let entry = out
                .entry((*site).to_owned())
                .or_insert_with(|| unknown.clone());
            *entry = RemoteSite {
                reachable: *reachable,
                via: Some((*via).to_owned()),
                status: d.status.clone(),
                services: d
                    .services
                    .clone()
                    .unwrap_or_else(|| unknown.services.clone()),
                rtt: d.rtt.clone(),
                persistence: d.persistence.clone(),
                backups: d.backups.clone(),
                handover: None,
            };
        }
        for (site, entry) in &mut out {
            let delivered = best
                .get(site.as_str())
                .is_some_and(|((r, s, _), _, _)| *r && *s);
            if delivered {
                continue;
            }
            if let Some(h) = self.handovers.get(site)
                && now < h.until
            {
                *entry = RemoteSite {
                    reachable: true,
                    via: Some(h.via.clone()),
                    status: h.status.clone(),
                    services: h.services.clone(),
                    handover: Some(h.to.clone()),
                    ..unknown.clone()
                };
            } else if !entry.reachable && session_up(site) {
                *entry = RemoteSite {
                    reachable: true,
                    via: Some(site.clone()),
                    ..unknown.clone()
                };
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mep::frame::Role;

    const GRACE: Duration = Duration::from_secs(2);

    fn svc(name: &str) -> Vec<ServiceReport> {
        vec![ServiceReport {
            name: name.into(),
            state: crate::health::state::ServiceState::UP,
        }]
    }

    /// `child`'s status as a parent relays it (`up`: attached to the relaying parent).
    fn relayed(child: &str, up: bool, parent: Option<&str>) -> SiteStatus {
        SiteStatus {
            site: child.into(),
            role: Role::Child,
            parent: parent.map(str::to_owned),
            up,
        }
    }

    fn view(t: &SiteTable, sessions: &[&str], now: Instant) -> BTreeMap<String, RemoteSite> {
        t.sites(["A", "B", "C"], |p| sessions.contains(&p), now)
    }

    /// The site as the answers read it: reachable, and its services.
    fn seen(v: &BTreeMap<String, RemoteSite>, site: &str) -> (bool, Vec<String>) {
        let r = &v[site];
        (
            r.reachable,
            r.services.iter().map(|s| s.name.clone()).collect(),
        )
    }

    fn up(services: &str) -> (bool, Vec<String>) {
        (true, vec![services.to_owned()])
    }

    /// B's side of step 6 of tests/e2e/mep_sites.rs: B had adopted C; C goes back to A and
    /// closes B's session, having said so; A's relay reaches B a moment later. C must stay UP at
    /// B all along.
    #[test]
    fn the_parent_a_child_leaves_keeps_it_until_the_new_parent_relays_it() {
        let t0 = Instant::now();
        let mut t = SiteTable::new(GRACE);
        t.status("C", relayed("C", true, Some("B")), t0);
        t.services("C", "C", svc("c1"));
        t.status("A", relayed("C", false, None), t0);
        assert_eq!(seen(&view(&t, &["A", "C"], t0), "C"), up("c1"));
        // C names its new parent, then closes.
        assert!(
            t.status("C", relayed("C", true, Some("A")), t0).is_none(),
            "a child's own word starts nothing"
        );
        let h = t.session_down("C", Some("A"), t0).expect("a handover");
        assert_eq!(
            (h.via.as_str(), h.to.as_str(), h.until),
            ("C", "A", t0 + GRACE)
        );
        let v = view(&t, &["A"], t0);
        assert_eq!(seen(&v, "C"), up("c1"), "kept across the handover");
        assert_eq!(v["C"].handover.as_deref(), Some("A"));
        // A relays C attached: its status first, its services in the next frame. Still the
        // kept state in between (A's status alone would have C reachable without services).
        t.status("A", relayed("C", true, Some("A")), t0);
        assert_eq!(seen(&view(&t, &["A"], t0), "C"), up("c1"));
        assert!(t.settle(t0).is_empty(), "not delivered yet");
        t.services("A", "C", svc("c1"));
        let v = view(&t, &["A"], t0);
        assert_eq!(
            (
                seen(&v, "C"),
                v["C"].via.as_deref(),
                v["C"].handover.as_deref()
            ),
            (up("c1"), Some("A"), None)
        );
        let ended = t.settle(t0);
        assert_eq!(
            ended
                .iter()
                .map(|(s, _, e)| (s.as_str(), *e))
                .collect::<Vec<_>>(),
            [("C", HandoverEnd::Delivered)]
        );
        assert!(t.settle(t0).is_empty(), "ended once");
    }

    /// A's side of step 6: C's state came through B (its adopter); A's own session to C comes up
    /// and, before C's services arrive over it, B relays that C left for A. C must stay UP at A.
    #[test]
    fn the_parent_a_child_returns_to_keeps_it_until_its_own_link_delivers() {
        let t0 = Instant::now();
        let mut t = SiteTable::new(GRACE);
        t.status("B", relayed("C", true, Some("B")), t0);
        t.services("B", "C", svc("c1"));
        // A's session to C is up, C's status came, its services not yet: B's relay still stands.
        t.status("C", relayed("C", true, Some("A")), t0);
        let v = view(&t, &["B", "C"], t0);
        assert_eq!(
            (seen(&v, "C"), v["C"].via.as_deref()),
            (up("c1"), Some("B"))
        );
        // B: C left for A.
        assert!(t.status("B", relayed("C", false, Some("A")), t0).is_some());
        assert_eq!(seen(&view(&t, &["B", "C"], t0), "C"), up("c1"));
        t.services("C", "C", svc("c1"));
        let v = view(&t, &["B", "C"], t0);
        assert_eq!(
            (seen(&v, "C"), v["C"].via.as_deref()),
            (up("c1"), Some("C"))
        );
        assert_eq!(t.settle(t0).len(), 1);
    }

    /// A handover that never completes ends with the grace: the site is unreachable then, as a
    /// silent session would be after the dead-peer timeout.
    #[test]
    fn a_handover_not_completed_within_the_grace_leaves_the_site_unreachable() {
        let t0 = Instant::now();
        let mut t = SiteTable::new(GRACE);
        t.status("C", relayed("C", true, Some("B")), t0);
        t.services("C", "C", svc("c1"));
        t.status("C", relayed("C", true, Some("A")), t0);
        t.session_down("C", Some("A"), t0);
        let almost = (t0 + GRACE).checked_sub(Duration::from_millis(1)).unwrap();
        assert_eq!(seen(&view(&t, &["A"], almost), "C"), up("c1"));
        assert!(t.settle(almost).is_empty());
        let v = view(&t, &["A"], t0 + GRACE);
        assert!(
            !v["C"].reachable && v["C"].handover.is_none(),
            "{:?}",
            v["C"]
        );
        let ended = t.settle(t0 + GRACE);
        assert_eq!(
            ended
                .iter()
                .map(|(s, _, e)| (s.as_str(), *e))
                .collect::<Vec<_>>(),
            [("C", HandoverEnd::Expired)]
        );
        // A later relay of C as attached brings it back the usual way.
        t.status("A", relayed("C", true, Some("A")), t0 + GRACE);
        t.services("A", "C", svc("c1"));
        assert_eq!(seen(&view(&t, &["A"], t0 + GRACE), "C"), up("c1"));
    }

    /// Without a word of a move, a lost path is lost at once: a session down, a relaying parent
    /// saying its child is gone (parent none), a relaying parent's own session down.
    #[test]
    fn a_path_lost_without_a_handover_drops_the_site_at_once() {
        let t0 = Instant::now();
        // Our session to the child goes down; it had named no other parent.
        let mut t = SiteTable::new(GRACE);
        t.status("C", relayed("C", true, Some("B")), t0);
        t.services("C", "C", svc("c1"));
        assert!(t.session_down("C", None, t0).is_none());
        assert!(!view(&t, &[], t0)["C"].reachable);
        // The relaying parent lost its child.
        let mut t = SiteTable::new(GRACE);
        t.status("A", relayed("C", true, Some("A")), t0);
        t.services("A", "C", svc("c1"));
        assert!(t.status("A", relayed("C", false, None), t0).is_none());
        let v = view(&t, &["A"], t0);
        assert!(
            !v["C"].reachable && v["C"].services.is_empty(),
            "{:?}",
            v["C"]
        );
        // The relaying parent itself went.
        t.status("A", relayed("C", true, Some("A")), t0);
        t.services("A", "C", svc("c1"));
        assert!(t.session_down("A", None, t0).is_none());
        assert!(!view(&t, &[], t0)["C"].reachable);
        // A move announced by a child whose state never arrived: nothing to keep.
        let mut t = SiteTable::new(GRACE);
        t.status("C", relayed("C", true, Some("A")), t0);
        assert!(t.session_down("C", Some("A"), t0).is_none());
    }

    /// A relayed child attached again counts as delivered only once its services came again,
    /// not with the list it was relayed with before it left.
    #[test]
    fn a_relayed_childs_services_are_not_carried_over_a_detachment() {
        let t0 = Instant::now();
        let mut t = SiteTable::new(GRACE);
        t.status("A", relayed("C", true, Some("A")), t0);
        t.services("A", "C", svc("old"));
        t.status("A", relayed("C", false, None), t0);
        t.status("A", relayed("C", true, Some("A")), t0);
        let v = view(&t, &["A"], t0);
        assert!(
            v["C"].reachable && v["C"].services.is_empty(),
            "{:?}",
            v["C"]
        );
        t.services("A", "C", svc("new"));
        assert_eq!(seen(&view(&t, &["A"], t0), "C"), up("new"));
    }

    /// Our own session before a relay once both have delivered; a site connected directly is
    /// reachable before its first frame.
    #[test]
    fn precedence_between_paths() {
        let t0 = Instant::now();
        let mut t = SiteTable::new(GRACE);
        assert!(
            view(&t, &["C"], t0)["C"].reachable,
            "linked, nothing received yet"
        );
        assert_eq!(view(&t, &["C"], t0)["C"].via.as_deref(), Some("C"));
        t.status("B", relayed("C", true, Some("B")), t0);
        t.services("B", "C", svc("relayed"));
        t.services("C", "C", svc("direct"));
        assert_eq!(seen(&view(&t, &["B", "C"], t0), "C"), up("direct"));
        t.session_down("C", None, t0);
        assert_eq!(seen(&view(&t, &["B"], t0), "C"), up("relayed"));
    }
}
