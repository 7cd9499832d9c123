//! Stage 1, per configuration: how each GSLB domain is decided ([`Kind`]): by round robin over
//! its static view's services, by the engine per class of clients, or by the engine per query
//! (left to the responder).

use crate::model::Model;
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

/// Whether domain `d`'s answer can differ between two clients of one static view: then the
/// engine decides it.
pub(super) fn needs_engine(model: &Model, d: usize) -> bool {
    let domain = &model.domains[d];
    // A service on a `[[link]]` is full while its link is over (`World::service_states`):
    // spillover, which only the engine honours. So is another site's service whose site
    // reports it full over MEP (its link is declared at that site only).
    let limited = domain.members().map(|s| model.service(s)).any(|s| {
        s.max_connections.is_some()
            || s.max_bandwidth_kbps.is_some()
            || s.link.is_some()
            || model.remote(s)
    });
    domain.chain != [Method::RoundRobin]
        || domain.persistence.is_some()
        || domain.backup.is_some()
        || !model.policies.is_empty()
        || limited
}

/// How domain `d` is decided: what its chain and its backup domains' chains read.
pub(super) fn kind(model: &Model, d: usize, engine: Option<&Engine>) -> Kind {
    if !needs_engine(model, d) {
        return Kind::Static;
    }
    let Some(engine) = engine else {
        return Kind::PerQuery {
            place: true,
            rtt: true,
        };
    };
    let (mut place, mut rtt, mut per_query) = (!model.policies.is_empty(), false, false);
    for d in engine.chain(d) {
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
