//! The decision engine: given a GSLB domain, a client and the current state of services, which
//! services may answer and how to pick among them.
//!
//! Pure: no I/O, no clock, no randomness. Health, load, RTT and the client's location come in
//! as arguments, and the result is a candidate set with a [`Pick`] rule rather than one draw, so
//! the map compiler can precompute the answer per client prefix, and the controller, the
//! compiler and the responder all decide alike.
//!
//! [`Engine::new`] builds the per-configuration indexes once (preferred-location matches per
//! policy and domain, the topology table sorted for longest match); [`Engine::decide`] runs one
//! decision:
//!
//! 1. The pool: the domain's services of the query's address family that are UP and under their
//!    connection and bandwidth limits (spillover).
//! 2. Persistence: a client's persistence entry (kept by the caller, which owns the clock:
//!    `crate::persist`) wins while its service is in the pool of the domain or of one of its
//!    backup domains, so that a client moved to a backup stays there. Without an entry, the
//!    domain's method decides; the caller then makes the entry from the answer.
//! 3. DNS policies, in priority order: the first whose expression is true narrows the pool with
//!    its preferred locations (spec section 3: first entry with an UP perfect match, else first
//!    with an UP partial match, else the whole pool).
//! 4. The method chain (F5 preferred → alternate → fallback; NetScaler method → backup method):
//!    the first method that can decide does; when none can, round robin over the pool.
//! 5. Nothing in the pool: the backup domain decides instead; when it cannot either, the
//!    domain's down response (backup addresses or an empty answer). When services are UP but all
//!    over their limits and no backup domain has room, they answer anyway, marked overloaded.

mod bits;
mod build;
mod decision;
mod method;
mod pick;
mod rtt;
mod spec;
pub mod topology;

#[cfg(test)]
mod tests;

use std::net::IpAddr;
use std::sync::Arc;

use self::bits::Bits;
pub use self::decision::{
    Bandwidth, Client, Decision, Pick, Preference, Query, ServiceState, State, Tier,
};
pub use self::pick::{carried, stable_hash};
use self::rtt::RTT_PICK;
pub use self::rtt::RttFirst;
pub use self::spec::{PolicyError, ServiceKey};
pub use self::topology::{Ldns, Topology, TopologyRecord};
use crate::location::WildcardMode;
/// The configuration's vocabulary, which the engine decides by (owned by the model).
pub use crate::model::expr;
pub use crate::model::{
    Action, AnswerMode, DownResponse, Expr, ExprError, ExprErrorKind, Fallback, MAX_CHAIN,
    MAX_PREFERRED_LOCATIONS, Method, Persistence, Policy, Request, SourceMask,
};
use crate::model::{Domain as DomainSpec, Model, RecordType, Service as ServiceSpec};

const QTYPE_A: u16 = 1;
const QTYPE_AAAA: u16 = 28;

/// What a decision reads about a domain's service, kept together for the hot loops.
#[derive(Clone, Copy, Debug)]
struct Slot {
    service: usize,
    site: usize,
    v6: bool,
    max_connections: u64,
    max_bandwidth_kbps: u64,
}

/// A domain with its precomputed preferred-location matches.
///
/// Positions number the domain's *members*: its services, then each view's services (a
/// service in several lists has a position in each), so that a view's list keeps its own
/// order (global availability) and a decision's pool is one bit set whatever list it uses.
#[derive(Clone, Debug)]
struct Domain {
    /// Its index in the model.
    index: usize,
    /// Service index by position.
    members: Vec<usize>,
    /// One per position.
    slots: Vec<Slot>,
    /// The positions of each view's list, by view number; the default list is
    /// `0..spec.services.len()`.
    lists: Vec<(u32, std::ops::Range<usize>)>,
    /// Per policy (in priority order), per preferred entry: (perfect, partial) matches, as
    /// bit sets over the positions.
    preferred: Vec<Vec<(Bits, Bits)>>,
}

/// The engine for one configuration.
#[derive(Clone, Debug)]
pub struct Engine {
    /// The configuration it decides for: services, sites and domain settings.
    model: Arc<Model>,
    ids: Vec<ServiceKey>,
    domains: Vec<Domain>,
    /// Sorted by priority.
    policies: Vec<Policy>,
    topology: Topology,
    /// Engine domain index by name, lower case without the final dot.
    by_name: std::collections::HashMap<String, usize>,
}

impl Engine {
    /// The model it decides for.
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    pub fn service(&self, index: usize) -> &ServiceSpec {
        &self.model.services[index]
    }

    pub fn service_id(&self, index: usize) -> ServiceKey {
        self.ids[index]
    }

    pub fn services(&self) -> &[ServiceSpec] {
        &self.model.services
    }

    pub fn sites(&self) -> &[crate::model::Site] {
        &self.model.sites
    }

    pub fn domain(&self, index: usize) -> &DomainSpec {
        &self.model.domains[index]
    }

    /// Every service a decision of domain `index` can name, by position: its services, then
    /// each view's (see [`DomainSpec::views`]); a service may repeat.
    pub fn members(&self, index: usize) -> &[usize] {
        &self.domains[index].members
    }

    /// `domain`, then its backup domains in chain order.
    pub fn chain(&self, domain: usize) -> impl Iterator<Item = usize> + '_ {
        // Validation forbids cycles; the bound keeps a bug from looping.
        std::iter::successors(Some(domain), |&d| {
            self.model.domains[d]
                .backup
                .map(crate::model::DomainId::index)
        })
        .take(self.domains.len() + 1)
    }

    /// How many domains there are (indexes `0..domain_count()`).
    pub fn domain_count(&self) -> usize {
        self.domains.len()
    }

    /// The engine domain index of `name` (any case, final dot or not). Callers resolve a name
    /// once per configuration or snapshot, not per query.
    pub fn domain_index(&self, name: &str) -> Option<usize> {
        let name = name.strip_suffix('.').unwrap_or(name);
        self.by_name.get(&name.to_ascii_lowercase()).copied()
    }

    /// Policies in the order they are evaluated.
    pub fn policies(&self) -> &[Policy] {
        &self.policies
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    pub fn mode(&self) -> WildcardMode {
        self.model.mode
    }

    /// Decides which services of `domain` may answer `query` from `client`.
    pub fn decide(
        &self,
        domain: usize,
        query: &Query<'_>,
        client: &Client<'_>,
        state: &State<'_>,
    ) -> Decision {
        // The client's persistence entry, if its service is available (UP, under its limits)
        // in the domain or a backup domain: it stays where an earlier answer sent it. (When
        // every service is over its limits, the overload pass below still honours it.)
        if let Some(id) = client.sticky {
            for i in self.chain(domain) {
                if self.available(i, id, query, state)
                    && let Some(decision) = self.decide_one(i, query, client, state, false)
                {
                    return decision;
                }
            }
        }
        // The domain, then its backup domains: first with room, then (spillover with nowhere
        // to spill to) the first with UP services even over their limits.
        let family = self.family(domain, query.qtype);
        let mut family_served = false;
        for overload in [false, true] {
            for i in self.chain(domain) {
                if let Some(decision) = self.decide_one(i, query, client, state, overload) {
                    return decision;
                }
                family_served |= self.domains[i]
                    .slots
                    .iter()
                    .any(|s| family.is_none_or(|v6| s.v6 == v6));
            }
        }
        Decision {
            domain,
            candidates: Vec::new(),
            positions: Vec::new(),
            pick: Pick::All,
            tier: Tier::Down,
            policy: None,
            overloaded: false,
            // Backup addresses stand in for services that are down: a family no service of
            // the chain has is NODATA, as it is with every service up (and as a round-robin
            // domain answers it).
            fallback: Some(if family_served {
                self.model.domains[domain].down
            } else {
                Fallback::Empty
            }),
        }
    }

    /// Whether the service `id` is in the pool of domain `index`: UP, of the query's family,
    /// under its limits.
    fn available(
        &self,
        index: usize,
        id: ServiceKey,
        query: &Query<'_>,
        state: &State<'_>,
    ) -> bool {
        let family = self.family(index, query.qtype);
        !state.domain_disabled(index)
            && self.domains[index]
                .slots
                .iter()
                .find(|slot| self.ids[slot.service] == id)
                .is_some_and(|slot| {
                    let st = state
                        .services
                        .get(slot.service)
                        .copied()
                        .unwrap_or_default();
                    let full = st.connections >= slot.max_connections
                        || st.bandwidth.kbps() >= slot.max_bandwidth_kbps;
                    st.up && family.is_none_or(|v6| slot.v6 == v6) && !full
                })
    }

    /// One domain's decision; `None` when its pool is empty.
    fn decide_one(
        &self,
        index: usize,
        query: &Query<'_>,
        client: &Client<'_>,
        state: &State<'_>,
        overload: bool,
    ) -> Option<Decision> {
        if state.domain_disabled(index) {
            return None;
        }
        let domain = &self.domains[index];
        let spec = &self.model.domains[domain.index];
        let (mut pool, overloaded) = self.pool(index, query.qtype, client.view, state, overload);
        if pool.is_empty() {
            return None;
        }
        let decision = |pool: &Bits, pick: Pick, tier: Tier, policy| {
            self.decision(index, pool, pick, tier, policy, overloaded)
        };

        if let Some(id) = client.sticky
            && let Some(pos) = pool.iter().find(|&pos| self.ids[domain.members[pos]] == id)
        {
            let mut only = Bits::new(domain.members.len());
            only.set(pos);
            return Some(decision(&only, Pick::First, Tier::Persistence, None));
        }

        let mut policy = None;
        if !self.policies.is_empty() {
            let req = Request {
                client: client.addr,
                location: client.location,
                qname: query.name,
                qtype: query.qtype,
            };
            if let Some(p) = self
                .policies
                .iter()
                .position(|p| p.expr.eval(&req, self.model.mode))
            {
                let entries = &domain.preferred[p];
                let perfect = entries
                    .iter()
                    .position(|(perfect, _)| perfect.intersects(&pool));
                let preference = match perfect {
                    Some(e) => {
                        pool.intersect(&entries[e].0);
                        Preference::Perfect(e)
                    }
                    None => match entries
                        .iter()
                        .position(|(_, partial)| partial.intersects(&pool))
                    {
                        Some(e) => {
                            pool.intersect(&entries[e].1);
                            Preference::Partial(e)
                        }
                        None => Preference::Rest,
                    },
                };
                policy = Some((p, preference));
            }
        }

        for (step, &method) in spec.chain.iter().enumerate() {
            if let Some((chosen, pick)) = self.method(method, domain, &pool, client, state) {
                return Some(decision(
                    &chosen,
                    pick,
                    Tier::Method { step, method },
                    policy,
                ));
            }
        }
        Some(decision(&pool, Pick::Rotate, Tier::Exhausted, policy))
    }

    /// The pool of domain `index` for a query of `qtype` from a client in static view `view`:
    /// the positions of the view's list when one of its services can answer, else of the
    /// domain's own (as a round-robin domain's view falls back to the default view), that are
    /// UP, of the family and under their limits, or (`overload`) over them too; and whether
    /// any of them is over its limits.
    fn pool(
        &self,
        index: usize,
        qtype: u16,
        view: u32,
        state: &State<'_>,
        overload: bool,
    ) -> (Bits, bool) {
        let domain = &self.domains[index];
        let family = self.family(index, qtype);
        let service_state = |s: usize| state.services.get(s).copied().unwrap_or_default();
        let available =
            |slot: &Slot| service_state(slot.service).up && family.is_none_or(|v6| slot.v6 == v6);
        let list = domain
            .lists
            .iter()
            .find(|(v, _)| view != 0 && *v == view)
            .map(|(_, positions)| positions.clone())
            .filter(|positions| domain.slots[positions.clone()].iter().any(available))
            .unwrap_or(0..self.model.domains[index].services.len());

        let mut pool = Bits::new(domain.members.len());
        let mut overloaded = false;
        for pos in list {
            let slot = &domain.slots[pos];
            if !available(slot) {
                continue;
            }
            let st = service_state(slot.service);
            let full = st.connections >= slot.max_connections
                || st.bandwidth.kbps() >= slot.max_bandwidth_kbps;
            if !full {
                pool.set(pos);
            } else if overload {
                overloaded = true;
                pool.set(pos);
            }
        }
        (pool, overloaded)
    }

    /// The decision of domain `index` for the positions `chosen`.
    fn decision(
        &self,
        index: usize,
        chosen: &Bits,
        pick: Pick,
        tier: Tier,
        policy: Option<(usize, Preference)>,
        overloaded: bool,
    ) -> Decision {
        let domain = &self.domains[index];
        let positions: Vec<usize> = chosen.iter().collect();
        let candidates: Vec<usize> = positions.iter().map(|&pos| domain.members[pos]).collect();
        let pick = self.finish_pick(&self.model.domains[index], &candidates, pick);
        Decision {
            domain: index,
            candidates,
            positions,
            pick,
            tier,
            policy,
            overloaded,
            fallback: None,
        }
    }

    /// Applies the domain's answer mode to a method's pick. Persistence changes nothing here: a
    /// client without an entry gets the method's pick, and its entry then holds that answer.
    fn finish_pick(&self, spec: &DomainSpec, candidates: &[usize], pick: Pick) -> Pick {
        let weights = || {
            candidates
                .iter()
                .map(|&s| self.model.services[s].weight)
                .collect()
        };
        match pick {
            Pick::First => Pick::First,
            _ if spec.answer == AnswerMode::All => Pick::All,
            Pick::Weighted(_) => Pick::Weighted(weights()),
            pick @ (Pick::Rotate | Pick::All | Pick::Hash { .. }) => pick,
        }
    }

    /// The services one answer carries under `decision` ([`carried`]: the pick, then the
    /// candidates after it, up to the deciding domain's `max_answers`): `turn` counts the
    /// answers given so far (rotation and weights), `client` is hashed for hashed picks.
    pub fn select(&self, decision: &Decision, client: IpAddr, turn: u64) -> Vec<usize> {
        let c = &decision.candidates;
        let Some(spec) = self.model.domains.get(decision.domain) else {
            return Vec::new();
        };
        let mode = if decision.pick == Pick::All {
            AnswerMode::All
        } else {
            AnswerMode::Rotate
        };
        let start = || match &decision.pick {
            Pick::First => 0,
            Pick::All | Pick::Rotate => (turn % c.len() as u64) as usize,
            Pick::Weighted(w) => pick::weighted(w, turn),
            Pick::Hash { mask, weights } => {
                let ids: Vec<ServiceKey> = c.iter().map(|&s| self.ids[s]).collect();
                pick::rendezvous(mask.apply(client), &ids, weights.as_deref())
            }
        };
        carried(c, mode, spec.max_answers, start).into_owned()
    }
}

impl Engine {
    /// The address family a query of domain `index` asks for: IPv6 for AAAA, IPv4 for A,
    /// either for other types and for a CNAME domain (its services answer names, whatever the
    /// family of the address their monitors probe).
    fn family(&self, index: usize, qtype: u16) -> Option<bool> {
        if self.model.domains[self.domains[index].index].record_type == RecordType::Cname {
            return None;
        }
        match qtype {
            QTYPE_A => Some(false),
            QTYPE_AAAA => Some(true),
            _ => None,
        }
    }
}
