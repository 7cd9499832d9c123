//! The engine's per-configuration indexes, built once: the model checked, each domain's members
//! and slots, its views' lists, and its policies' preferred-location matches as bit sets.

use std::sync::Arc;

use super::{
    Bits, Domain, Engine, MAX_CHAIN, MAX_PREFERRED_LOCATIONS, PolicyError, ServiceKey, Slot,
    Topology,
};
use crate::location::{Context, Match};
use crate::model::Model;

impl Engine {
    /// Checks `model` and builds the indexes.
    pub fn new(model: Arc<Model>) -> Result<Engine, PolicyError> {
        let spec = &*model;
        let sites = spec.sites.len();
        for s in &spec.services {
            if s.site.index() >= sites {
                return Err(PolicyError::UnknownSite {
                    service: s.name.clone(),
                    site: s.site.index(),
                    sites,
                });
            }
        }
        for (record, r) in spec.topology.iter().enumerate() {
            if r.site.index() >= sites {
                return Err(PolicyError::UnknownTopologySite {
                    record,
                    site: r.site.index(),
                    sites,
                });
            }
        }
        for p in &spec.policies {
            let len = p.action.preferred.len();
            if !(1..=MAX_PREFERRED_LOCATIONS).contains(&len) {
                return Err(PolicyError::PreferredLocations {
                    action: p.action.name.clone(),
                    len,
                });
            }
        }
        let mut policies = spec.policies.clone();
        policies.sort_by_key(|p| p.priority);
        if let Some(w) = policies.windows(2).find(|w| w[0].priority == w[1].priority) {
            return Err(PolicyError::DuplicatePriority {
                first: w[0].name.clone(),
                second: w[1].name.clone(),
                priority: w[0].priority,
            });
        }
        for d in &spec.domains {
            let domain = || d.name.clone();
            if !(1..=MAX_CHAIN).contains(&d.chain.len()) {
                return Err(PolicyError::ChainLength {
                    domain: domain(),
                    len: d.chain.len(),
                });
            }
            let lists = std::iter::once(&d.services).chain(d.views.iter().map(|(_, l)| l));
            for list in lists {
                let mut seen = vec![false; spec.services.len()];
                for s in list.iter().map(|s| s.index()) {
                    match seen.get_mut(s) {
                        None => {
                            let services = spec.services.len();
                            return Err(PolicyError::UnknownService {
                                domain: domain(),
                                service: s,
                                services,
                            });
                        }
                        Some(true) => {
                            let service = spec.services[s].name.clone();
                            return Err(PolicyError::DuplicateService {
                                domain: domain(),
                                service,
                            });
                        }
                        Some(seen) => *seen = true,
                    }
                }
            }
            let masks = [d.sourceip_mask]
                .into_iter()
                .chain(d.persistence.map(|p| p.mask));
            for m in masks {
                if m.v4 > 32 || m.v6 > 128 {
                    return Err(PolicyError::Mask {
                        domain: domain(),
                        v4: m.v4,
                        v6: m.v6,
                    });
                }
            }
            // Follow the backup chain; a cycle would make a down domain loop.
            let mut next = d.backup;
            for _ in 0..=spec.domains.len() {
                let Some(b) = next else { break };
                let Some(backup) = spec.domains.get(b.index()) else {
                    return Err(PolicyError::UnknownBackup {
                        domain: domain(),
                        backup: b.index(),
                    });
                };
                next = backup.backup;
            }
            if next.is_some() {
                return Err(PolicyError::BackupCycle { domain: domain() });
            }
        }

        let domains: Vec<Domain> = spec
            .domains
            .iter()
            .enumerate()
            .map(|(index, d)| {
                let mut members: Vec<usize> = d.services.iter().map(|s| s.index()).collect();
                let mut lists = Vec::with_capacity(d.views.len());
                for (view, services) in &d.views {
                    let start = members.len();
                    members.extend(services.iter().map(|s| s.index()));
                    lists.push((view.number(), start..members.len()));
                }
                let preferred = policies
                    .iter()
                    .map(|p| {
                        p.action
                            .preferred
                            .iter()
                            .map(|pattern| {
                                let mut perfect = Bits::new(members.len());
                                let mut partial = Bits::new(members.len());
                                for (pos, &s) in members.iter().enumerate() {
                                    // Which services an action picks is a proximity choice:
                                    // matchWildcardtoany EXPRESSION does not widen it.
                                    let m = spec.services[s]
                                        .location
                                        .as_ref()
                                        .map_or(Match::None, |l| {
                                            l.matches(pattern, spec.mode, Context::Proximity)
                                        });
                                    match m {
                                        Match::Perfect => perfect.set(pos),
                                        Match::Partial => partial.set(pos),
                                        Match::None => {}
                                    }
                                }
                                (perfect, partial)
                            })
                            .collect()
                    })
                    .collect();
                let slots = members
                    .iter()
                    .map(|&s| {
                        let svc = &spec.services[s];
                        Slot {
                            service: s,
                            site: svc.site.index(),
                            v6: svc.ip.is_ipv6(),
                            max_connections: svc.max_connections.unwrap_or(u64::MAX),
                            max_bandwidth_kbps: svc.max_bandwidth_kbps.unwrap_or(u64::MAX),
                        }
                    })
                    .collect();
                Domain {
                    index,
                    members,
                    slots,
                    lists,
                    preferred,
                }
            })
            .collect();
        let ids = spec
            .services
            .iter()
            .map(|s| ServiceKey::from_name(&s.name))
            .collect();
        let topology = Topology::new(spec.topology.clone());
        // The first of two names that differ only in case wins, as a scan would find it.
        let mut by_name: std::collections::HashMap<String, usize> =
            std::collections::HashMap::with_capacity(domains.len());
        for (i, d) in domains.iter().enumerate() {
            by_name
                .entry(
                    model.domains[d.index]
                        .name
                        .trim_end_matches('.')
                        .to_ascii_lowercase(),
                )
                .or_insert(i);
        }
        Ok(Engine {
            model,
            ids,
            domains,
            policies,
            topology,
            by_name,
        })
    }
}
