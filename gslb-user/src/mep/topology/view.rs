//! [`SiteView`]: one site's changing view of its sessions, backup lists and adoptions, as a pure
//! state machine (events in, [`Action`]s out).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    time::{Duration, Instant},
};

use super::super::frame::{MAX_BACKUPS, Message, RejectCode, Role, SiteStatus};
use super::tree::{SiteTree, TopologyError};
use crate::mep::session::Audience;

/// Timers of the adoption logic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopologyTiming {
    /// A parent adopts the children of a parent (and skips a higher-priority backup) only when
    /// its session to it has been down for this long.
    pub adopt_after: Duration,
    /// A child accepts an adoption only when its session to its parent has been down this long.
    pub accept_after: Duration,
    /// A session that has never been up counts as down only from this long after the view's start:
    /// during a cold start of many sites, parents still connecting are not taken for dead (their
    /// children would be adopted and handed back at once).
    pub startup_grace: Duration,
}

impl Default for TopologyTiming {
    fn default() -> Self {
        TopologyTiming {
            adopt_after: Duration::from_millis(1000),
            accept_after: Duration::from_millis(500),
            startup_grace: Duration::from_secs(5),
        }
    }
}

/// Why a session should be open.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Purpose {
    /// A configured session to another parent (we have the lower IP).
    Peer,
    /// A configured session to our own child.
    Child,
    /// An adoption of `original_parent`'s child.
    Adopt { original_parent: String },
}

/// What the view asks the node to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Send {
        to: String,
        message: Message,
    },
    Close {
        peer: String,
        code: RejectCode,
        reason: String,
    },
}

#[derive(Clone, Copy, Debug)]
struct SessionState {
    up: bool,
    since: Instant,
}

/// One site's view of the topology; see the module documentation.
#[derive(Clone, Debug)]
pub struct SiteView {
    topo: SiteTree,
    me: String,
    role: Role,
    timing: TopologyTiming,
    started: Instant,
    sessions: HashMap<String, SessionState>,
    /// Backup lists by parent: from the configuration, then as each parent sends its own.
    backups: HashMap<String, Vec<String>>,
    /// A parent's adopted children → their original parent.
    adopted: BTreeMap<String, String>,
    /// A parent's adoption offers waiting for an answer.
    offered: BTreeSet<String>,
    /// Which parent holds which child, as the other parents report.
    holders: BTreeMap<String, String>,
    /// A parent's children that left it for another parent, as they said before closing the
    /// session (child → the parent it went to): relayed to the other parents so that they keep
    /// the child's state until its new parent delivers it (docs/mep.md, "Handover").
    departed: BTreeMap<String, String>,
    /// A child's current parent (its own or an adopter).
    current: Option<String>,
}

impl SiteView {
    /// The view of `me` (which must be in `topo`), starting at `now` with every session down.
    pub fn new(
        topo: SiteTree,
        me: &str,
        timing: TopologyTiming,
        now: Instant,
    ) -> Result<SiteView, TopologyError> {
        let role = topo
            .site(me)
            .ok_or_else(|| TopologyError::UnknownSite(me.to_owned()))?
            .role;
        // Only lists actually configured: a child's configuration lists none, and learns its
        // parent's over MEP (an empty list received there means "cleared").
        let backups = topo
            .parents()
            .filter(|p| !p.backups.is_empty())
            .map(|p| (p.name.clone(), p.backups.clone()))
            .collect();
        Ok(SiteView {
            topo,
            me: me.to_owned(),
            role,
            timing,
            started: now,
            sessions: HashMap::new(),
            backups,
            adopted: BTreeMap::new(),
            offered: BTreeSet::new(),
            holders: BTreeMap::new(),
            departed: BTreeMap::new(),
            current: None,
        })
    }

    pub fn me(&self) -> &str {
        &self.me
    }

    pub fn role(&self) -> Role {
        self.role
    }

    pub fn topology(&self) -> &SiteTree {
        &self.topo
    }

    /// My configured parent (a child).
    pub fn own_parent(&self) -> Option<&str> {
        self.topo.site(&self.me).and_then(|s| s.parent.as_deref())
    }

    /// The parent a child is attached to now.
    pub fn current_parent(&self) -> Option<&str> {
        self.current.as_deref()
    }

    /// A parent's adopted children → their original parent.
    pub fn adopted(&self) -> &BTreeMap<String, String> {
        &self.adopted
    }

    /// Which parent holds `child`, as far as this view knows: itself, or what other parents
    /// report.
    pub fn holder(&self, child: &str) -> Option<&str> {
        if self.is_attached(child) {
            return Some(&self.me);
        }
        self.holders.get(child).map(String::as_str)
    }

    /// The parent my child `child` said it moved to when it left me (until it attaches to me
    /// again).
    pub fn departed_to(&self, child: &str) -> Option<&str> {
        self.departed.get(child).map(String::as_str)
    }

    /// The backup list of `parent` as known here.
    pub fn backups(&self, parent: &str) -> &[String] {
        self.backups.get(parent).map_or(&[], Vec::as_slice)
    }

    /// My own backup list (sent to my children and peers).
    pub fn own_backups(&self) -> &[String] {
        self.backups(&self.me)
    }

    /// Whether my session to `site` is up (I am always up to myself).
    pub fn is_up(&self, site: &str) -> bool {
        site == self.me || self.sessions.get(site).is_some_and(|l| l.up)
    }

    /// How long my session to `site` has been down (if it never came up: since `startup_grace`
    /// after my start).
    pub fn down_for(&self, site: &str, now: Instant) -> Option<Duration> {
        if self.is_up(site) {
            return None;
        }
        let since = self
            .sessions
            .get(site)
            .map_or(self.started + self.timing.startup_grace, |l| l.since);
        Some(now.saturating_duration_since(since))
    }

    fn down_long(&self, site: &str, now: Instant, after: Duration) -> bool {
        self.down_for(site, now).is_some_and(|d| d >= after)
    }

    /// A child connected to me as my child (own, or adopted and accepted).
    pub fn is_attached(&self, child: &str) -> bool {
        self.role == Role::Parent
            && self.is_up(child)
            && (self.is_own_child(child) || self.adopted.contains_key(child))
    }

    fn is_own_child(&self, site: &str) -> bool {
        self.topo
            .site(site)
            .is_some_and(|s| s.parent.as_deref() == Some(self.me.as_str()))
    }

    fn is_peer_parent(&self, site: &str) -> bool {
        site != self.me && self.topo.site(site).is_some_and(|s| s.role == Role::Parent)
    }

    /// Whether I should adopt the children of `parent` now: it has been down long enough, I am
    /// in its backup list, and every backup before me is down long enough too.
    pub fn should_adopt_from(&self, parent: &str, now: Instant) -> bool {
        if self.role != Role::Parent
            || parent == self.me
            || !self.down_long(parent, now, self.timing.adopt_after)
        {
            return false;
        }
        for b in self.backups(parent) {
            if *b == self.me {
                return true;
            }
            if !self.down_long(b, now, self.timing.adopt_after) {
                return false;
            }
        }
        false
    }

    /// The sessions I should have open, and why.
    pub fn desired_outbound(&self, now: Instant) -> BTreeMap<String, Purpose> {
        let mut out = BTreeMap::new();
        if self.role != Role::Parent {
            return out;
        }
        for s in self.topo.sites() {
            if s.name == self.me {
                continue;
            }
            match s.role {
                Role::Parent
                    if self.topo.initiator(&self.me, &s.name) == Some(self.me.as_str()) =>
                {
                    out.insert(s.name.clone(), Purpose::Peer);
                }
                Role::Parent => {}
                Role::Child => {
                    let parent = s.parent.as_deref().unwrap_or_default();
                    if parent == self.me {
                        out.insert(s.name.clone(), Purpose::Child);
                    } else if (self.adopted.contains_key(&s.name) && self.is_up(&s.name))
                        || self.should_adopt_from(parent, now)
                    {
                        out.insert(
                            s.name.clone(),
                            Purpose::Adopt {
                                original_parent: parent.to_owned(),
                            },
                        );
                    }
                }
            }
        }
        out
    }

    /// What my session to `peer` carries.
    pub fn audience(&self, peer: &str) -> Audience {
        match self.role {
            Role::Parent if self.is_peer_parent(peer) => Audience::PeerParent,
            Role::Parent if self.is_own_child(peer) || self.adopted.contains_key(peer) => {
                Audience::Child
            }
            Role::Parent => Audience::None,
            Role::Child if self.current.as_deref() == Some(peer) => Audience::Parent,
            Role::Child => Audience::None,
        }
    }

    /// My session to `peer` is up (handshake done).
    pub fn session_up(&mut self, peer: &str, now: Instant) -> Vec<Action> {
        self.sessions.insert(
            peer.to_owned(),
            SessionState {
                up: true,
                since: now,
            },
        );
        let mut actions = Vec::new();
        match self.role {
            Role::Child => {
                if Some(peer) == self.own_parent() {
                    if let Some(adopter) = self.current.take()
                        && adopter != peer
                    {
                        actions.push(self.moving_to(&adopter, peer));
                        actions.push(Action::Close {
                            peer: adopter,
                            code: RejectCode::Closing,
                            reason: format!("original parent {peer} is back"),
                        });
                    }
                    self.current = Some(peer.to_owned());
                }
            }
            Role::Parent => {
                // Our own child that left us is ours again (an adopted one once it accepts).
                if self.is_own_child(peer) {
                    self.departed.remove(peer);
                }
                if let Some(Purpose::Adopt { original_parent }) =
                    self.desired_outbound(now).get(peer).cloned()
                {
                    if !self.adopted.contains_key(peer) {
                        self.offered.insert(peer.to_owned());
                        let backups = self.backups(&original_parent).to_vec();
                        actions.push(Action::Send {
                            to: peer.to_owned(),
                            message: Message::AdoptRequest {
                                original_parent,
                                backups,
                            },
                        });
                    }
                } else if !self.is_peer_parent(peer) && !self.is_own_child(peer) {
                    actions.push(Action::Close {
                        peer: peer.to_owned(),
                        code: RejectCode::NotAllowed,
                        reason: "not adopting this child any more".into(),
                    });
                }
            }
        }
        actions
    }

    /// My session to `peer` is down.
    pub fn session_down(&mut self, peer: &str, now: Instant) -> Vec<Action> {
        let was_up = self.is_up(peer);
        if was_up || !self.sessions.contains_key(peer) {
            self.sessions.insert(
                peer.to_owned(),
                SessionState {
                    up: false,
                    since: now,
                },
            );
        }
        if self.current.as_deref() == Some(peer) {
            self.current = None;
        }
        self.adopted.remove(peer);
        self.offered.remove(peer);
        self.holders.retain(|_, holder| holder != peer);
        Vec::new()
    }

    /// `from` sent `parent`'s backup list; kept when `from` is that parent itself.
    pub fn backup_list(&mut self, from: &str, parent: &str, list: Vec<String>) {
        if from == parent && list.len() <= MAX_BACKUPS && !list.iter().any(|b| b == parent) {
            self.backups.insert(parent.to_owned(), list);
        }
    }

    /// A site's status: from a peer parent, a child's (who holds it); from my attached child
    /// itself, the parent it is leaving me for, if it names another one.
    pub fn site_status(&mut self, from: &str, status: &SiteStatus) {
        if status.role == Role::Child && status.site == from && self.is_attached(from) {
            if let Some(to) = status.parent.as_deref().filter(|p| *p != self.me) {
                self.departed.insert(from.to_owned(), to.to_owned());
            }
            return;
        }
        if status.role != Role::Child || !self.is_peer_parent(from) || status.site == self.me {
            return;
        }
        if status.up && status.parent.as_deref() == Some(from) {
            self.holders.insert(status.site.clone(), from.to_owned());
        } else if self.holders.get(&status.site).map(String::as_str) == Some(from) {
            self.holders.remove(&status.site);
        }
    }

    /// A child's decision on `from`'s offer to adopt it in place of `original_parent`.
    pub fn adopt_request(
        &mut self,
        from: &str,
        original_parent: &str,
        offered: &[String],
        now: Instant,
    ) -> Vec<Action> {
        match self.decide_adoption(from, original_parent, offered, now) {
            Ok(replaced) => {
                let mut actions = Vec::new();
                if let Some(previous) = replaced {
                    actions.push(self.moving_to(&previous, from));
                    actions.push(Action::Close {
                        peer: previous,
                        code: RejectCode::Closing,
                        reason: format!(
                            "adopted by {from}, a higher-priority backup of {original_parent}"
                        ),
                    });
                }
                self.current = Some(from.to_owned());
                actions.push(Action::Send {
                    to: from.to_owned(),
                    message: Message::AdoptAccept {
                        original_parent: original_parent.to_owned(),
                    },
                });
                actions
            }
            Err(reason) => vec![
                Action::Send {
                    to: from.to_owned(),
                    message: Message::AdoptReject {
                        original_parent: original_parent.to_owned(),
                        reason: reason.clone(),
                    },
                },
                Action::Close {
                    peer: from.to_owned(),
                    code: RejectCode::NotAllowed,
                    reason: format!("adoption rejected: {reason}"),
                },
            ],
        }
    }

    /// Ok(the adopter being replaced, if any) or Err(why the offer is rejected).
    fn decide_adoption(
        &mut self,
        from: &str,
        original_parent: &str,
        offered: &[String],
        now: Instant,
    ) -> Result<Option<String>, String> {
        let Some(parent) = self.own_parent().map(str::to_owned) else {
            return Err(format!("{} is not a child", self.me));
        };
        if original_parent != parent {
            return Err(format!("my parent is {parent}, not {original_parent}"));
        }
        if from == parent {
            return Ok(self.current.clone().filter(|c| *c != parent));
        }
        if self.is_up(&parent) {
            return Err(format!("my parent {parent} is up"));
        }
        if !self.down_long(&parent, now, self.timing.accept_after) {
            return Err(format!("my parent {parent} is down only since a moment"));
        }
        // My parent's own list when it sent me one; else the one offered (the offer comes
        // from a parent that proved its name with the key this child's configuration lists).
        if !self.backups.contains_key(&parent) && offered.len() <= MAX_BACKUPS {
            self.backups.insert(parent.clone(), offered.to_vec());
        }
        let list = self.backups(&parent);
        let Some(rank) = list.iter().position(|b| b == from) else {
            return Err(format!("{from} is not in {parent}'s backup list {list:?}"));
        };
        match self.current.clone() {
            Some(current) if current != from && self.is_up(&current) => {
                let current_rank = list
                    .iter()
                    .position(|b| *b == current)
                    .unwrap_or(usize::MAX);
                if current_rank <= rank {
                    Err(format!(
                        "already adopted by {current}, a higher-priority backup of {parent}"
                    ))
                } else {
                    Ok(Some(current))
                }
            }
            _ => Ok(None),
        }
    }

    /// The child's answer to my adoption offer.
    pub fn adopt_answer(&mut self, child: &str, accepted: bool, reason: &str) -> Vec<Action> {
        let was_offered = self.offered.remove(child);
        if !accepted || !was_offered {
            self.adopted.remove(child);
            return vec![Action::Close {
                peer: child.to_owned(),
                code: RejectCode::NotAllowed,
                reason: if accepted {
                    "no adoption offered".into()
                } else {
                    format!("adoption rejected: {reason}")
                },
            }];
        }
        let original = self
            .topo
            .site(child)
            .and_then(|s| s.parent.clone())
            .unwrap_or_default();
        self.adopted.insert(child.to_owned(), original);
        self.departed.remove(child);
        Vec::new()
    }

    /// The status of my attached children, as I relay them to the other parents. A child that
    /// left me for another parent is relayed as not attached, naming that parent: the other
    /// parents then keep its last state until that parent delivers it, rather than dropping
    /// it for the moment the handover takes.
    pub fn child_status(&self, child: &str) -> SiteStatus {
        let up = self.is_attached(child);
        let parent = if up {
            Some(self.me.clone())
        } else {
            self.departed.get(child).cloned()
        };
        SiteStatus {
            site: child.to_owned(),
            role: Role::Child,
            parent,
            up,
        }
    }

    /// What a child tells the parent it is leaving, just before closing the session: its new
    /// parent. Sent ahead of the close on the same session, so the old parent knows the child is
    /// moving, not gone.
    fn moving_to(&self, old: &str, new: &str) -> Action {
        Action::Send {
            to: old.to_owned(),
            message: Message::SiteStatus(SiteStatus {
                site: self.me.clone(),
                role: Role::Child,
                parent: Some(new.to_owned()),
                up: true,
            }),
        }
    }
}
