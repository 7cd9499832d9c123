//! `[engine]`, and the policy engine a configuration describes: names become the indexes of
//! [`crate::policy::Spec`], which [`Engine::new`] checks again.

use serde::Deserialize;

use super::Config;
use crate::location::WildcardMode;
use crate::policy::{
    Action, DomainSpec, DownResponse, Engine, Fallback, Policy, PolicyError, ServiceSpec, Spec,
    TopologyRecord,
};

/// `[engine]`: decision-engine settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EngineSettings {
    /// NetScaler `matchWildcardtoany`.
    pub wildcard_mode: WildcardMode,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEngine {
    #[serde(default)]
    pub(super) wildcard_mode: WildcardMode,
}

impl Config {
    /// The engine for this configuration. A validated [`Config`] always gives one.
    pub fn engine(&self) -> Result<Engine, PolicyError> {
        Engine::new(self.engine_spec()?)
    }

    /// What the engine is built from; the indexes are those of the configuration's lists
    /// (sites, services, GSLB domains).
    pub fn engine_spec(&self) -> Result<Spec, PolicyError> {
        let config = self;
        fn index<'a>(
            kind: &'static str,
            mut names: impl Iterator<Item = &'a str>,
            name: &str,
        ) -> Result<usize, PolicyError> {
            names
                .position(|n| n == name)
                .ok_or_else(|| PolicyError::UnknownName {
                    kind,
                    name: name.into(),
                })
        }
        let site = |name: &str| index("site", config.sites.iter().map(|s| s.name.as_str()), name);
        let service = |name: &str| {
            index(
                "service",
                config.services.iter().map(|s| s.name.as_str()),
                name,
            )
        };
        let domain = |name: &str| {
            index(
                "gslb_domain",
                config.gslb_domains.iter().map(|d| d.name.as_str()),
                name,
            )
        };

        let services = config
            .services
            .iter()
            .map(|s| {
                Ok(ServiceSpec {
                    name: s.name.clone(),
                    ip: s.answer_ip(),
                    site: site(&s.site)?,
                    location: s.location.clone(),
                    weight: s.weight,
                    max_connections: s.max_connections,
                    max_bandwidth_kbps: s.max_bandwidth_kbps,
                })
            })
            .collect::<Result<_, PolicyError>>()?;
        let domains = config
            .gslb_domains
            .iter()
            .map(|d| {
                Ok(DomainSpec {
                    name: d.name.clone(),
                    services: d
                        .services
                        .iter()
                        .map(|s| service(s))
                        .collect::<Result<_, _>>()?,
                    views: d
                        .views
                        .iter()
                        .map(|(view, services)| {
                            let number =
                                index("view", config.views.iter().map(|v| v.name.as_str()), view)?
                                    as u32
                                    + 1;
                            let services = services
                                .iter()
                                .map(|s| service(s))
                                .collect::<Result<_, _>>()?;
                            Ok((number, services))
                        })
                        .collect::<Result<_, PolicyError>>()?,
                    chain: d.chain(),
                    tolerance_us: d.tolerance_ms.saturating_mul(1000),
                    sourceip_mask: d.sourceip_mask,
                    persistence: d.persistence,
                    answer: d.answer,
                    backup_domain: d.backup_domain.as_deref().map(domain).transpose()?,
                    down: match d.down_response {
                        DownResponse::Backup => Fallback::BackupIp,
                        DownResponse::Nodata => Fallback::Empty,
                    },
                })
            })
            .collect::<Result<_, PolicyError>>()?;
        let topology = config
            .topology
            .iter()
            .map(|r| {
                Ok(TopologyRecord {
                    site: site(&r.destination)?,
                    ldns: r.ldns.clone(),
                    score: r.score,
                })
            })
            .collect::<Result<_, PolicyError>>()?;
        let policies = config
            .policies
            .iter()
            .map(|p| {
                let action = config
                    .actions
                    .iter()
                    .find(|a| a.name == p.action)
                    .ok_or_else(|| PolicyError::UnknownName {
                        kind: "action",
                        name: p.action.clone(),
                    })?;
                Ok(Policy {
                    name: p.name.clone(),
                    priority: p.priority,
                    expr: p.expression.clone(),
                    action: Action {
                        name: action.name.clone(),
                        preferred: action.preferred_locations.clone(),
                    },
                })
            })
            .collect::<Result<_, PolicyError>>()?;
        Ok(Spec {
            mode: config.engine.wildcard_mode,
            sites: config.sites.iter().map(|s| s.name.clone()).collect(),
            services,
            domains,
            topology,
            policies,
        })
    }
}
