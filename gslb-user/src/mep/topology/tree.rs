//! [`SiteTree`]: the configured sites, validated, and the static rules (who initiates a session,
//! who answers DNS, who exchanges metrics, who may call whom).

use std::{
    collections::HashMap,
    net::{IpAddr, SocketAddr},
};

use super::super::{
    auth::PublicKey,
    frame::{MAX_BACKUPS, MAX_SITE_NAME, RejectCode, Role},
};
use super::{DEFAULT_PORT, MAX_CHILDREN, MAX_PARENTS};

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
    /// Its public key: a session claiming this site's name is believed only once it proves the
    /// name with the matching private key (`auth`). Required for every site but one's own.
    pub key: Option<PublicKey>,
    /// Its sessions may come from any source address (it is behind a NAT whose outbound address is
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

    /// Which of `a` and `b` opens their configured session: between parents the lower IP (then
    /// port, then name, for sites sharing an address in tests); a parent to its own child.
    /// `None` when the two have no configured session (two children, a parent and another
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

    /// Whether `me` lets `from` (who says it is a `role`) open a session to it; the reason if not.
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
