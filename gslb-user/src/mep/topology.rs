//! The topology: which sites talk to which, and the backup-parent logic, as plain data and a
//! pure state machine (no I/O, time passed in), driven by the node (and by the tests directly).
//!
//! - [`SiteTree`]: the configured sites (validated: ≤ 32 parents, ≤ 1024 children, a child's
//!   parent exists and is a parent, backup lists of ≤ 5 existing other parents) and the static
//!   rules: who initiates a link ([`SiteTree::initiator`]), who answers DNS, who exchanges
//!   network metrics, who may call whom.
//! - [`SiteView`]: one site's changing view: its links up or down and since when, the backup
//!   lists it knows, the children it adopted (a parent) or the parent it is attached to (a
//!   child). Events in ([`SiteView::link_up`], [`SiteView::link_down`],
//!   [`SiteView::adopt_request`], …), [`Action`]s out, and the links it wants to open
//!   ([`SiteView::desired_outbound`]).
//!
//! A site is DOWN in a view when the view's own MEP link to it is down; a parent is taken as
//! DOWN for adoption only after `adopt_after` (a link never up counts from `startup_grace` after
//! the view's start, so a cold start adopts nothing while the real parents are still connecting).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    net::{IpAddr, SocketAddr},
    time::{Duration, Instant},
};

use super::{
    auth::PublicKey,
    frame::{MAX_BACKUPS, MAX_SITE_NAME, Message, RejectCode, Role, SiteStatus},
};

/// NetScaler's MEP port.
pub const DEFAULT_PORT: u16 = 3011;
/// Most parents in one deployment.
pub const MAX_PARENTS: usize = 32;
/// Most children in one deployment.
pub const MAX_CHILDREN: usize = 1024;

/// One configured site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteSpec {
    pub name: String,
    /// Its MEP address: identifies it, and orders parents (the lower IP initiates).
    pub ip: IpAddr,
    /// Its MEP port (default 3011).
    pub port: u16,
    /// Where to connect instead of (`ip`, `port`) (tests put a proxy there).
    pub connect: Option<SocketAddr>,
    pub role: Role,
    /// A child's parent.
    pub parent: Option<String>,
    /// A parent's ordered backup-parent list.
    pub backups: Vec<String>,
    /// Its public key: a link claiming this site's name is believed only once it proves the
    /// name with the matching private key (`auth`). Required for every site but one's own.
    pub key: Option<PublicKey>,
    /// Its links may come from any source address (it is behind a NAT whose outbound address is
    /// not `ip` nor `connect`); the key still proves who it is.
    pub nat: bool,
}

impl SiteSpec {
    pub fn parent(name: impl Into<String>, ip: IpAddr) -> Self {
        SiteSpec {
            name: name.into(),
            ip,
            port: DEFAULT_PORT,
            connect: None,
            role: Role::Parent,
            parent: None,
            backups: Vec::new(),
            key: None,
            nat: false,
        }
    }

    pub fn child(name: impl Into<String>, ip: IpAddr, parent: impl Into<String>) -> Self {
        SiteSpec {
            role: Role::Child,
            parent: Some(parent.into()),
            ..SiteSpec::parent(name, ip)
        }
    }

    pub fn with_key(mut self, key: PublicKey) -> Self {
        self.key = Some(key);
        self
    }

    pub fn with_port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    pub fn with_backups<S: Into<String>>(mut self, backups: impl IntoIterator<Item = S>) -> Self {
        self.backups = backups.into_iter().map(Into::into).collect();
        self
    }

    /// The address to connect to.
    pub fn mep_addr(&self) -> SocketAddr {
        self.connect.unwrap_or(SocketAddr::new(self.ip, self.port))
    }
}

/// A topology that cannot be used; nothing was changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    #[error("site {0:?} is defined twice")]
    DuplicateSite(String),
    #[error("site name {0:?} is empty or longer than 63 bytes")]
    BadName(String),
    #[error("sites {0:?} and {1:?} have the same MEP address {2}")]
    DuplicateIp(String, String, IpAddr),
    #[error("{0} parents, at most {MAX_PARENTS}")]
    TooManyParents(usize),
    #[error("{0} children, at most {MAX_CHILDREN}")]
    TooManyChildren(usize),
    #[error("child {0:?} has no parent")]
    NoParent(String),
    #[error("parent {0:?} has a parent of its own")]
    ParentWithParent(String),
    #[error("child {child:?}: parent {parent:?} {why}")]
    BadParent {
        child: String,
        parent: String,
        why: &'static str,
    },
    #[error("site {0:?} is unknown")]
    UnknownSite(String),
    #[error("site {site:?}: only parents have backup parents")]
    ChildWithBackups { site: String },
    #[error("site {site:?}: {n} backup parents, at most {MAX_BACKUPS}")]
    TooManyBackups { site: String, n: usize },
    #[error("site {site:?}: backup parent {backup:?} {why}")]
    BadBackup {
        site: String,
        backup: String,
        why: &'static str,
    },
}

/// The configured sites.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteTree {
    sites: Vec<SiteSpec>,
    index: HashMap<String, usize>,
}

impl SiteTree {
    /// Validates `sites`. A child's own configuration may hold only itself and its parent.
    pub fn new(sites: Vec<SiteSpec>) -> Result<SiteTree, TopologyError> {
        let mut index = HashMap::new();
        let mut ips: HashMap<IpAddr, &str> = HashMap::new();
        for (i, s) in sites.iter().enumerate() {
            if s.name.is_empty() || s.name.len() > MAX_SITE_NAME {
                return Err(TopologyError::BadName(s.name.clone()));
            }
            if index.insert(s.name.clone(), i).is_some() {
                return Err(TopologyError::DuplicateSite(s.name.clone()));
            }
            if let Some(other) = ips.insert(s.ip, &s.name) {
                return Err(TopologyError::DuplicateIp(
                    other.to_owned(),
                    s.name.clone(),
                    s.ip,
                ));
            }
        }
        let parents = sites.iter().filter(|s| s.role == Role::Parent).count();
        if parents > MAX_PARENTS {
            return Err(TopologyError::TooManyParents(parents));
        }
        if sites.len() - parents > MAX_CHILDREN {
            return Err(TopologyError::TooManyChildren(sites.len() - parents));
        }
        let topo = SiteTree { sites, index };
        for s in &topo.sites {
            match s.role {
                Role::Child => {
                    let parent = s
                        .parent
                        .as_ref()
                        .ok_or_else(|| TopologyError::NoParent(s.name.clone()))?;
                    let bad = |why| TopologyError::BadParent {
                        child: s.name.clone(),
                        parent: parent.clone(),
                        why,
                    };
                    match topo.site(parent) {
                        None => return Err(bad("is not defined")),
                        Some(p) if p.role != Role::Parent => return Err(bad("is not a parent")),
                        Some(_) => {}
                    }
                    if !s.backups.is_empty() {
                        return Err(TopologyError::ChildWithBackups {
                            site: s.name.clone(),
                        });
                    }
                }
                Role::Parent => {
                    if s.parent.is_some() {
                        return Err(TopologyError::ParentWithParent(s.name.clone()));
                    }
                    topo.check_backups(&s.name, &s.backups)?;
                }
            }
        }
        Ok(topo)
    }

    fn check_backups(&self, site: &str, backups: &[String]) -> Result<(), TopologyError> {
        if backups.len() > MAX_BACKUPS {
            return Err(TopologyError::TooManyBackups {
                site: site.to_owned(),
                n: backups.len(),
            });
        }
        for (i, b) in backups.iter().enumerate() {
            let bad = |why| TopologyError::BadBackup {
                site: site.to_owned(),
                backup: b.clone(),
                why,
            };
            match self.site(b) {
                None => return Err(bad("is not defined (add the site first)")),
                Some(p) if p.role != Role::Parent => return Err(bad("is not a parent")),
                Some(_) => {}
            }
            if b == site {
                return Err(bad("is the site itself"));
            }
            if backups[..i].contains(b) {
                return Err(bad("is listed twice"));
            }
        }
        Ok(())
    }

    /// `set gslb site <parent> -backupParentlist …`: replaces the list (sites must exist).
    pub fn set_backups(&mut self, parent: &str, backups: Vec<String>) -> Result<(), TopologyError> {
        let i = *self
            .index
            .get(parent)
            .ok_or_else(|| TopologyError::UnknownSite(parent.to_owned()))?;
        if self.sites[i].role != Role::Parent {
            return Err(TopologyError::ChildWithBackups {
                site: parent.to_owned(),
            });
        }
        self.check_backups(parent, &backups)?;
        self.sites[i].backups = backups;
        Ok(())
    }

    /// `unset gslb site <parent> -backupParentlist`: removes the whole list.
    pub fn clear_backups(&mut self, parent: &str) -> Result<(), TopologyError> {
        self.set_backups(parent, Vec::new())
    }

    pub fn site(&self, name: &str) -> Option<&SiteSpec> {
        self.index.get(name).map(|&i| &self.sites[i])
    }

    pub fn sites(&self) -> &[SiteSpec] {
        &self.sites
    }

    pub fn parents(&self) -> impl Iterator<Item = &SiteSpec> {
        self.sites.iter().filter(|s| s.role == Role::Parent)
    }

    pub fn children_of<'a>(&'a self, parent: &'a str) -> impl Iterator<Item = &'a SiteSpec> + 'a {
        self.sites
            .iter()
            .filter(move |s| s.parent.as_deref() == Some(parent))
    }

    /// Every site is a parent: a full mesh.
    pub fn is_flat(&self) -> bool {
        self.sites.iter().all(|s| s.role == Role::Parent)
    }

    /// Which of `a` and `b` opens their configured link: between parents the lower IP (then
    /// port, then name, for sites sharing an address in tests); a parent to its own child.
    /// `None` when the two have no configured link (two children, a parent and another
    /// parent's child).
    pub fn initiator<'a>(&'a self, a: &'a str, b: &'a str) -> Option<&'a str> {
        let (sa, sb) = (self.site(a)?, self.site(b)?);
        match (sa.role, sb.role) {
            (Role::Parent, Role::Parent) if a != b => {
                Some(if (sa.ip, sa.port, a) < (sb.ip, sb.port, b) {
                    a
                } else {
                    b
                })
            }
            (Role::Parent, Role::Child) if sb.parent.as_deref() == Some(a) => Some(a),
            (Role::Child, Role::Parent) if sa.parent.as_deref() == Some(b) => Some(b),
            _ => None,
        }
    }

    /// Only parents answer DNS.
    pub fn answers_dns(&self, site: &str) -> bool {
        self.site(site).is_some_and(|s| s.role == Role::Parent)
    }

    /// Network metrics (LDNS RTT, persistence) are exchanged only between parents.
    pub fn syncs_network_metrics(&self, a: &str, b: &str) -> bool {
        self.answers_dns(a) && self.answers_dns(b)
    }

    /// Whether `me` lets `from` (who says it is a `role`) open a link to it; the reason if not.
    pub fn inbound_allowed(
        &self,
        me: &str,
        from: &str,
        role: Role,
    ) -> Result<(), (RejectCode, String)> {
        let Some(my) = self.site(me) else {
            return Err((
                RejectCode::UnknownSite,
                format!("{me:?} is not configured here"),
            ));
        };
        let known = self.site(from);
        if let Some(s) = known
            && s.role != role
        {
            return Err((
                RejectCode::UnknownSite,
                format!(
                    "{from:?} says it is a {}, configured as a {}",
                    role.as_str(),
                    s.role.as_str()
                ),
            ));
        }
        match (my.role, known) {
            (Role::Parent, None) => Err((
                RejectCode::UnknownSite,
                format!("site {from:?} is not configured here"),
            )),
            (Role::Parent, Some(_)) => match self.initiator(from, me) {
                Some(i) if i == from => Ok(()),
                Some(_) => Err((
                    RejectCode::NotAllowed,
                    format!("{me:?} initiates the link to {from:?}"),
                )),
                None => Err((
                    RejectCode::NotAllowed,
                    format!("{from:?} has no link to {me:?}"),
                )),
            },
            // A child accepts its parent, and any parent offering adoption that its
            // configuration lists with a key (the node checks the key; the offer is vetted by
            // the backup list).
            (Role::Child, _) if role == Role::Parent => Ok(()),
            (Role::Child, _) => Err((
                RejectCode::NotAllowed,
                "children talk only to parents".into(),
            )),
        }
    }
}

/// Timers of the adoption logic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopologyTiming {
    /// A parent adopts the children of a parent (and skips a higher-priority backup) only when
    /// its link to it has been down for this long.
    pub adopt_after: Duration,
    /// A child accepts an adoption only when its link to its parent has been down this long.
    pub accept_after: Duration,
    /// A link that has never been up counts as down only from this long after the view's start:
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

/// Why a link should be open.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Purpose {
    /// A configured link to another parent (we have the lower IP).
    Peer,
    /// A configured link to our own child.
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

pub use super::session::Audience;

#[derive(Clone, Copy, Debug)]
struct LinkState {
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
    links: HashMap<String, LinkState>,
    /// Backup lists by parent: from the configuration, then as each parent sends its own.
    backups: HashMap<String, Vec<String>>,
    /// A parent's adopted children → their original parent.
    adopted: BTreeMap<String, String>,
    /// A parent's adoption offers waiting for an answer.
    offered: BTreeSet<String>,
    /// Which parent holds which child, as the other parents report.
    holders: BTreeMap<String, String>,
    /// A parent's children that left it for another parent, as they said before closing the
    /// link (child → the parent it went to): relayed to the other parents so that they keep
    /// the child's state until its new parent delivers it (docs/mep.md, "Handover").
    departed: BTreeMap<String, String>,
    /// A child's current parent (its own or an adopter).
    current: Option<String>,
}

impl SiteView {
    /// The view of `me` (which must be in `topo`), starting at `now` with every link down.
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
            links: HashMap::new(),
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

    /// Whether my link to `site` is up (I am always up to myself).
    pub fn is_up(&self, site: &str) -> bool {
        site == self.me || self.links.get(site).is_some_and(|l| l.up)
    }

    /// How long my link to `site` has been down (if it never came up: since `startup_grace`
    /// after my start).
    pub fn down_for(&self, site: &str, now: Instant) -> Option<Duration> {
        if self.is_up(site) {
            return None;
        }
        let since = self
            .links
            .get(site)
            .map_or(self.started + self.timing.startup_grace, |l| l.since);
        Some(now.saturating_duration_since(since))
    }

    fn down_long(&self, site: &str, now: Instant, after: Duration) -> bool {
        self.down_for(site, now).is_some_and(|d| d >= after)
    }

    /// A child linked to me as my child (own, or adopted and accepted).
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

    /// The links I should have open, and why.
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

    /// What my link to `peer` carries.
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

    /// My link to `peer` is up (handshake done).
    pub fn link_up(&mut self, peer: &str, now: Instant) -> Vec<Action> {
        self.links.insert(
            peer.to_owned(),
            LinkState {
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

    /// My link to `peer` is down.
    pub fn link_down(&mut self, peer: &str, now: Instant) -> Vec<Action> {
        let was_up = self.is_up(peer);
        if was_up || !self.links.contains_key(peer) {
            self.links.insert(
                peer.to_owned(),
                LinkState {
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

    /// What a child tells the parent it is leaving, just before closing the link: its new
    /// parent. Sent ahead of the close on the same link, so the old parent knows the child is
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

/// Whether a remote service is UP: a local monitor watching it decides; otherwise the state
/// its site reported over MEP, and DOWN when the MEP path to its site is down.
pub fn remote_service_up(
    local_monitor: Option<bool>,
    site_reachable: bool,
    reported_up: Option<bool>,
) -> bool {
    local_monitor.unwrap_or(site_reachable && reported_up == Some(true))
}

#[cfg(test)]
mod tests;
