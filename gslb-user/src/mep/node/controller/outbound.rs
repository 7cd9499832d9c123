//! What this site sends: the versioned parts of the outbound state (its status, services,
//! tables, backup list and relayed children), rebuilt when the local state or the view changes.

use std::{collections::BTreeSet, sync::Arc};

use super::Controller;
use crate::mep::{
    frame::{Role, ServiceStates, SiteStatus},
    session::{Outbound, Part, Relay},
};

impl Controller {
    pub(super) fn bump(&mut self) -> u64 {
        self.version += 1;
        self.version
    }

    /// Rebuilds the parts of `out` that come from the local state (or all of them).
    pub(super) fn refresh_local(&mut self, all: bool) {
        let local = self.local.borrow_and_update().clone();
        let me = self.view.me().to_owned();
        let services = ServiceStates {
            site: me.clone(),
            services: local.services.clone(),
        };
        if all
            || self
                .out
                .services
                .as_ref()
                .is_none_or(|p| *p.value != services)
        {
            let v = self.bump();
            self.out.services = Some(Part {
                version: v,
                value: Arc::new(services),
            });
        }
        if all || *self.out.rtt.value != local.rtt {
            let v = self.bump();
            self.out.rtt = Part {
                version: v,
                value: Arc::new(local.rtt.clone()),
            };
        }
        if all || *self.out.persistence.value != local.persistence {
            let v = self.bump();
            self.out.persistence = Part {
                version: v,
                value: Arc::new(local.persistence.clone()),
            };
        }
        self.refresh_topology_parts();
    }

    /// Our status, backup list and relayed children, from the view.
    pub(super) fn refresh_topology_parts(&mut self) {
        let me = self.view.me().to_owned();
        let status = SiteStatus {
            site: me.clone(),
            role: self.view.role(),
            parent: self.view.current_parent().map(str::to_owned),
            up: true,
        };
        if self.out.status.as_ref().is_none_or(|p| *p.value != status) {
            let v = self.bump();
            self.out.status = Some(Part {
                version: v,
                value: Arc::new(status),
            });
        }
        if self.view.role() == Role::Parent {
            let backups = self.view.own_backups().to_vec();
            if self
                .out
                .backups
                .as_ref()
                .is_none_or(|p| *p.value != backups)
            {
                let v = self.bump();
                self.out.backups = Some(Part {
                    version: v,
                    value: Arc::new(backups),
                });
            }
            // The children attached now, and those relayed before (to say they left).
            let mut children: BTreeSet<String> = self.out.children.keys().cloned().collect();
            children.extend(
                self.sessions
                    .keys()
                    .filter(|p| self.view.is_attached(p))
                    .cloned(),
            );
            for child in children {
                let status = self.view.child_status(&child);
                let known = self.out.children.get(&child);
                if known.is_none() && !status.up {
                    continue;
                }
                // Services only once the child sent them: relayed empty before that, they would
                // count as the child's whole list at the other parents.
                let reported = if status.up {
                    self.table
                        .get(&child, &child)
                        .and_then(|d| d.services.clone())
                } else {
                    None
                };
                if known.is_some_and(|r| {
                    r.status == status
                        && r.services.as_ref().map(|s| &s.services) == reported.as_deref()
                }) {
                    continue;
                }
                let services = reported.map(|s| {
                    Arc::new(ServiceStates {
                        site: child.clone(),
                        services: (*s).clone(),
                    })
                });
                let kept_status = known
                    .filter(|r| r.status == status)
                    .map(|r| r.status_version);
                let version = self.bump();
                let status_version = kept_status.unwrap_or(version);
                self.out.children.insert(
                    child,
                    Relay {
                        version,
                        status_version,
                        status,
                        services,
                    },
                );
            }
        }
    }
}

pub(super) fn same_versions(a: &Outbound, b: &Outbound) -> bool {
    let v = |p: &Option<Part<_>>| p.as_ref().map(|p: &Part<SiteStatus>| p.version);
    v(&a.status) == v(&b.status)
        && a.services.as_ref().map(|p| p.version) == b.services.as_ref().map(|p| p.version)
        && a.rtt.version == b.rtt.version
        && a.persistence.version == b.persistence.version
        && a.backups.as_ref().map(|p| p.version) == b.backups.as_ref().map(|p| p.version)
        && a.children.len() == b.children.len()
        && a.children
            .iter()
            .zip(&b.children)
            .all(|((k1, r1), (k2, r2))| k1 == k2 && r1.version == r2.version)
}
