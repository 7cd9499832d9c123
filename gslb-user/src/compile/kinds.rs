//! Stage 1, per configuration: how each GSLB domain is decided ([`Kind`]): by round robin over
//! its static view's services, by the engine per class of clients, or by the engine per query
//! (left to the responder).

use ahash::AHashMap as HashMap;

use crate::config::{Config, GslbDomain, Service};
use crate::policy::{Engine, Method};

/// How a domain is decided, and from what. Besides the client's static view, a decision
/// reads `place` (location and subnets) and `rtt` (the RTT row).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Round robin over the services of the client's static view.
    Static,
    /// By the engine, per segment class.
    Decided { place: bool, rtt: bool },
    /// By the engine, per query (it also reads the client's address).
    PerQuery { place: bool, rtt: bool },
}

impl Kind {
    pub(super) fn per_query(self) -> bool {
        matches!(self, Kind::PerQuery { .. })
    }

    /// What the decisions read of a client's class.
    pub(super) fn reads(self) -> (bool, bool) {
        match self {
            Kind::Static => (false, false),
            Kind::Decided { place, rtt } | Kind::PerQuery { place, rtt } => (place, rtt),
        }
    }
}

/// Whether `domain`'s answer can differ between two clients of one static view: then the
/// engine decides it.
pub(super) fn needs_engine(
    config: &Config,
    domain: &GslbDomain,
    services: &HashMap<&str, (usize, &Service)>,
) -> bool {
    // A service on a `[[link]]` is full while its link is over (`World::service_states`):
    // spillover, which only the engine honours. So is another site's service whose site
    // reports it full over MEP (its link is declared at that site only).
    let remote = |s: &Service| {
        config.mep_enabled().is_some() && config.server.site.as_deref() != Some(s.site.as_str())
    };
    let limited = domain
        .services
        .iter()
        .chain(domain.views.iter().flat_map(|(_, names)| names))
        .filter_map(|n| services.get(n.as_str()))
        .any(|(_, s)| {
            s.max_connections.is_some()
                || s.max_bandwidth_kbps.is_some()
                || config.link_of(&s.name).is_some()
                || remote(s)
        });
    domain.method != Method::RoundRobin
        || domain.alternate.is_some()
        || domain.fallback.is_some()
        || domain.persistence.is_some()
        || domain.backup_domain.is_some()
        || !config.policies.is_empty()
        || limited
}

/// How `domain` is decided: what its chain and its backup domains' chains read.
pub(super) fn kind(
    config: &Config,
    domain: &GslbDomain,
    services: &HashMap<&str, (usize, &Service)>,
    engine: Option<&Engine>,
) -> Kind {
    if !needs_engine(config, domain, services) {
        return Kind::Static;
    }
    let Some(engine) = engine else {
        return Kind::PerQuery {
            place: true,
            rtt: true,
        };
    };
    let (mut place, mut rtt, mut per_query) = (!config.policies.is_empty(), false, false);
    for d in engine
        .domain_index(&domain.name)
        .into_iter()
        .flat_map(|d| engine.chain(d))
    {
        let spec = engine.domain(d);
        per_query |= spec.persistence.is_some() || spec.chain.contains(&Method::SourceIpHash);
        place |= spec
            .chain
            .iter()
            .any(|m| matches!(m, Method::StaticProximity | Method::Topology));
        rtt |= spec.chain.contains(&Method::Rtt);
    }
    if per_query {
        Kind::PerQuery { place, rtt }
    } else {
        Kind::Decided { place, rtt }
    }
}

/// The configuration's services by name, with their index.
pub(super) fn service_index(config: &Config) -> HashMap<&str, (usize, &Service)> {
    config
        .services
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.as_str(), (i, s)))
        .collect()
}
