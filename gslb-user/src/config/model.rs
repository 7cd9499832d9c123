//! The [`Model`] of a validated configuration: every name a section refers to resolved once
//! into the id of what it names.

use std::collections::HashMap;
use std::sync::Arc;

use super::Config;
use crate::health::load::Measure;
use crate::model::{
    Action, Dns, Domain, DomainId, Fallback, LinkId, LoadMeasures, Model, Policy, Service,
    ServiceId, Site, SiteId, TopologyRecord, View, ViewId,
};
use crate::policy::{DownResponse, Engine, PolicyError};

impl Config {
    /// The decision engine of this configuration. A validated [`Config`] always gives one.
    pub fn engine(&self) -> Result<Engine, PolicyError> {
        Engine::new(Arc::new(self.model()))
    }

    /// This configuration resolved into ids. Every name is known: validation refused any
    /// that is not, so the lookups here cannot fail.
    pub fn model(&self) -> Model {
        fn ids<'a, T: From<usize>>(names: impl Iterator<Item = &'a str>) -> HashMap<&'a str, T> {
            names.enumerate().map(|(i, n)| (n, T::from(i))).collect()
        }
        let site: HashMap<&str, SiteId> = ids(self.sites.iter().map(|s| s.name.as_str()));
        let service: HashMap<&str, ServiceId> = ids(self.services.iter().map(|s| s.name.as_str()));
        let view: HashMap<&str, ViewId> = ids(self.views.iter().map(|v| v.name.as_str()));
        let domain: HashMap<&str, DomainId> =
            ids(self.gslb_domains.iter().map(|d| d.name.as_str()));
        let mut link_of: HashMap<&str, LinkId> = HashMap::new();
        for (i, l) in self.links.iter().enumerate() {
            for s in &l.services {
                link_of.insert(s.as_str(), LinkId::from(i));
            }
        }
        let measure: HashMap<&str, Measure> = self
            .load_monitors
            .iter()
            .map(|m| (m.name.as_str(), m.measure))
            .collect();
        let services_of = |names: &[String]| names.iter().map(|n| service[n.as_str()]).collect();
        Model {
            mode: self.engine.wildcard_mode,
            sites: self
                .sites
                .iter()
                .map(|s| Site {
                    name: s.name.clone(),
                })
                .collect(),
            services: self
                .services
                .iter()
                .map(|s| {
                    let has = |m| {
                        s.load_monitors
                            .iter()
                            .any(|n| measure.get(n.as_str()) == Some(&m))
                    };
                    Service {
                        name: s.name.clone(),
                        ip: s.answer_ip(),
                        cname: s.cname.clone(),
                        site: site[s.site.as_str()],
                        location: s.location.clone(),
                        weight: s.weight,
                        max_connections: s.max_connections,
                        max_bandwidth_kbps: s.max_bandwidth_kbps,
                        link: link_of.get(s.name.as_str()).copied(),
                        load: LoadMeasures {
                            connections: has(Measure::Connections),
                            bandwidth_kbps: has(Measure::BandwidthKbps),
                        },
                    }
                })
                .collect(),
            views: self
                .views
                .iter()
                .map(|v| View {
                    name: v.name.clone(),
                    prefixes: v.prefixes.clone(),
                })
                .collect(),
            domains: self
                .gslb_domains
                .iter()
                .map(|d| Domain {
                    name: d.name.clone(),
                    record_type: d.record_type,
                    ttl: d.ttl,
                    answer: d.answer,
                    max_answers: d.max_answers,
                    services: services_of(&d.services),
                    views: d
                        .views
                        .iter()
                        .map(|(v, services)| (view[v.as_str()], services_of(services)))
                        .collect(),
                    chain: d.chain(),
                    tolerance_us: d.tolerance_ms.saturating_mul(1000),
                    sourceip_mask: d.sourceip_mask,
                    persistence: d.persistence,
                    backup: d.backup_domain.as_deref().map(|b| domain[b]),
                    backup_ip: d.backup_ip.clone(),
                    down: match d.down_response {
                        DownResponse::Backup => Fallback::BackupIp,
                        DownResponse::Nodata => Fallback::Empty,
                    },
                })
                .collect(),
            zones: self.zones.clone(),
            links: self
                .links
                .iter()
                .map(|l| crate::model::Link {
                    name: l.name.clone(),
                })
                .collect(),
            topology: self
                .topology
                .iter()
                .map(|r| TopologyRecord {
                    site: site[r.destination.as_str()],
                    ldns: r.ldns.clone(),
                    score: r.score,
                })
                .collect(),
            policies: self
                .policies
                .iter()
                .map(|p| {
                    let action = self
                        .actions
                        .iter()
                        .find(|a| a.name == p.action)
                        .expect("validated: a policy's action exists");
                    Policy {
                        name: p.name.clone(),
                        priority: p.priority,
                        expr: p.expression.clone(),
                        action: Action {
                            name: action.name.clone(),
                            preferred: action.preferred_locations.clone(),
                        },
                    }
                })
                .collect(),
            actions: self
                .actions
                .iter()
                .map(|a| Action {
                    name: a.name.clone(),
                    preferred: a.preferred_locations.clone(),
                })
                .collect(),
            here: self.server.site.as_deref().map(|s| site[s]),
            mep: self.mep_enabled().is_some(),
            dns: Dns {
                port: self.server.dns_port,
                edns_udp_size: self.server.edns_udp_size,
                listen: self.server.listen.clone(),
                ecs_allow: self.server.ecs_allow.clone(),
                rrl: self.rrl,
                identity: self.server.identity.clone(),
                cookies: self.server.cookies.clone(),
            },
        }
    }
}

/// What the compiler takes of this configuration: its model.
impl From<&Config> for crate::compile::Source {
    fn from(config: &Config) -> crate::compile::Source {
        crate::compile::Source {
            model: Arc::new(config.model()),
        }
    }
}
