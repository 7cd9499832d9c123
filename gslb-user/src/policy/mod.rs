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

pub mod expr;
mod pick;
pub mod topology;

#[cfg(test)]
mod tests;

use std::net::IpAddr;

use serde::Deserialize;

pub use self::expr::{Expr, ExprError, ExprErrorKind, Request};
pub use self::pick::stable_hash;
pub use self::topology::{Ldns, Topology, TopologyRecord};
use crate::location::{Context, Location, Match, Qualifier, WildcardMode};

/// Most entries of a preferred-location list (NetScaler's limit).
pub const MAX_PREFERRED_LOCATIONS: usize = 8;
/// Most methods in a domain's chain: preferred, alternate, fallback.
pub const MAX_CHAIN: usize = 3;

const QTYPE_A: u16 = 1;
const QTYPE_AAAA: u16 = 28;

/// A load-balancing method (NetScaler `lbMethod`, BIG-IP DNS load-balancing mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Every candidate in turn.
    RoundRobin,
    /// Every candidate in proportion to its weight.
    Ratio,
    /// One candidate per client prefix (the domain's source-IP mask).
    SourceIpHash,
    /// The candidates with the fewest reported connections.
    LeastConnection,
    /// The candidates whose location best matches the client's; declines without one.
    StaticProximity,
    /// The sites with the lowest RTT to the client's LDNS, within the tolerance; declines
    /// when no RTT is known for the LDNS.
    Rtt,
    /// The sites with the highest topology score; declines when no record matches.
    Topology,
    /// The first available candidate in the domain's order (disaster recovery).
    GlobalAvailability,
}

impl Method {
    pub const ALL: [Method; 8] = [
        Method::RoundRobin,
        Method::Ratio,
        Method::SourceIpHash,
        Method::LeastConnection,
        Method::StaticProximity,
        Method::Rtt,
        Method::Topology,
        Method::GlobalAvailability,
    ];

    /// Whether the method decides whenever the pool is not empty, so nothing after it in a chain
    /// is ever used.
    pub fn always_decides(self) -> bool {
        !matches!(
            self,
            Method::StaticProximity | Method::Rtt | Method::Topology
        )
    }

    /// The name the configuration uses.
    pub fn name(self) -> &'static str {
        match self {
            Method::RoundRobin => "roundrobin",
            Method::Ratio => "ratio",
            Method::SourceIpHash => "sourceiphash",
            Method::LeastConnection => "leastconnection",
            Method::StaticProximity => "staticproximity",
            Method::Rtt => "rtt",
            Method::Topology => "topology",
            Method::GlobalAvailability => "globalavailability",
        }
    }
}

/// Prefix lengths that group client addresses (source-IP hash, persistence).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SourceMask {
    pub v4: u8,
    pub v6: u8,
}

impl Default for SourceMask {
    /// Every address on its own, as NetScaler's default netmask 255.255.255.255 / 128.
    fn default() -> Self {
        SourceMask { v4: 32, v6: 128 }
    }
}

impl SourceMask {
    /// The client's prefix under this mask (v4-mapped clients count as IPv4).
    pub fn apply(self, ip: IpAddr) -> IpAddr {
        match expr::canonical(ip) {
            IpAddr::V4(a) => {
                let keep = u32::MAX
                    .checked_shl(32 - u32::from(self.v4.min(32)))
                    .unwrap_or(0);
                IpAddr::V4((u32::from(a) & keep).into())
            }
            IpAddr::V6(a) => {
                let keep = u128::MAX
                    .checked_shl(128 - u32::from(self.v6.min(128)))
                    .unwrap_or(0);
                IpAddr::V6((u128::from(a) & keep).into())
            }
        }
    }
}

/// Source-IP persistence: a client prefix keeps its service while that service is available
/// and it asks again within the timeout. The entries are the caller's (`crate::persist`); the
/// engine honours the one it is given ([`Client::sticky`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Persistence {
    pub mask: SourceMask,
    /// An entry not used for this long is gone (NetScaler's idle timeout).
    pub timeout_s: u32,
    /// Most entries the domain's table holds; the least recently used goes first.
    pub max_entries: u32,
}

/// How a GSLB domain's addresses are handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnswerMode {
    /// One address per query, rotating through the set.
    #[default]
    Rotate,
    /// Every address in each response (NetScaler "multiple IP response").
    All,
}

/// What a GSLB domain answers when every one of its services is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DownResponse {
    /// The domain's backup addresses (configuration `backup_ip`; never empty with this mode).
    Backup,
    /// An empty NOERROR answer (NODATA; NetScaler "empty down response").
    Nodata,
}

/// What a domain answers when nothing can.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fallback {
    /// The domain's backup addresses.
    BackupIp,
    /// An empty answer (NODATA).
    Empty,
}

/// A stable identity of a service: the same name gives the same id in every configuration
/// and every process, so hashed picks survive reloads and reordering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceId(pub u64);

impl ServiceId {
    pub fn from_name(name: &str) -> ServiceId {
        ServiceId(stable_hash(name.as_bytes()))
    }
}

/// A service as configured (what does not change between decisions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceSpec {
    pub name: String,
    /// The address answers carry (the public one behind NAT).
    pub ip: IpAddr,
    /// Index into [`Spec::sites`].
    pub site: usize,
    /// `None`: no location configured; it then matches no preferred location or proximity.
    pub location: Option<Location>,
    pub weight: u32,
    pub max_connections: Option<u64>,
    pub max_bandwidth_kbps: Option<u64>,
}

/// A GSLB domain's decision settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DomainSpec {
    pub name: String,
    /// Indexes into [`Spec::services`], in the domain's order (global availability's order).
    pub services: Vec<usize>,
    /// Per static view (its number, as [`Client::view`] gives it; never 0): the services that
    /// answer the view's clients instead of `services`, in their order. A view none of whose
    /// services of the query's family is UP is answered from `services`.
    pub views: Vec<(u32, Vec<usize>)>,
    /// 1..=[`MAX_CHAIN`] methods: preferred, alternate, fallback.
    pub chain: Vec<Method>,
    /// RTT: sites within the lowest RTT plus this many microseconds share the answers.
    pub tolerance_us: u32,
    /// Source-IP hash grouping.
    pub sourceip_mask: SourceMask,
    pub persistence: Option<Persistence>,
    pub answer: AnswerMode,
    /// Index into [`Spec::domains`]: decides when this domain has nothing to answer with.
    pub backup_domain: Option<usize>,
    pub down: Fallback,
}

impl DomainSpec {
    /// A round-robin domain over `services`, every other setting at its default.
    pub fn new(name: impl Into<String>, services: Vec<usize>) -> DomainSpec {
        DomainSpec {
            name: name.into(),
            services,
            views: Vec::new(),
            chain: vec![Method::RoundRobin],
            tolerance_us: 0,
            sourceip_mask: SourceMask::default(),
            persistence: None,
            answer: AnswerMode::Rotate,
            backup_domain: None,
            down: Fallback::Empty,
        }
    }
}

/// A DNS action: preferred locations, highest priority first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    pub name: String,
    /// 1..=[`MAX_PREFERRED_LOCATIONS`] entries.
    pub preferred: Vec<Location>,
}

/// A DNS policy, bound globally.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub name: String,
    /// Lower is evaluated first (NetScaler bind priorities); unique.
    pub priority: u32,
    pub expr: Expr,
    pub action: Action,
}

/// Everything the engine is built from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Spec {
    pub mode: WildcardMode,
    /// Site names; services, topology records and RTT rows refer to sites by index.
    pub sites: Vec<String>,
    pub services: Vec<ServiceSpec>,
    pub domains: Vec<DomainSpec>,
    pub topology: Vec<TopologyRecord>,
    pub policies: Vec<Policy>,
}

/// An inconsistent [`Spec`]. A validated configuration never produces one; the configuration
/// reports the same problems with file positions.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("service {service:?}: site {site} does not exist ({sites} sites)")]
    UnknownSite {
        service: String,
        site: usize,
        sites: usize,
    },
    #[error("topology record {record}: site {site} does not exist ({sites} sites)")]
    UnknownTopologySite {
        record: usize,
        site: usize,
        sites: usize,
    },
    #[error("domain {domain:?}: service {service} does not exist ({services} services)")]
    UnknownService {
        domain: String,
        service: usize,
        services: usize,
    },
    #[error("domain {domain:?}: service {service:?} is bound twice")]
    DuplicateService { domain: String, service: String },
    #[error("domain {domain:?}: {len} methods in the chain, 1..={MAX_CHAIN} allowed")]
    ChainLength { domain: String, len: usize },
    #[error("domain {domain:?}: backup domain {backup} does not exist")]
    UnknownBackup { domain: String, backup: usize },
    #[error("domain {domain:?}: its backup domains lead back to it")]
    BackupCycle { domain: String },
    #[error("domain {domain:?}: source mask /{v4} /{v6} is longer than an address")]
    Mask { domain: String, v4: u8, v6: u8 },
    #[error("action {action:?}: {len} preferred locations, 1..={MAX_PREFERRED_LOCATIONS} allowed")]
    PreferredLocations { action: String, len: usize },
    #[error("policies {first:?} and {second:?} have the same priority {priority}")]
    DuplicatePriority {
        first: String,
        second: String,
        priority: u32,
    },
    #[error("unknown {kind} {name:?}")]
    UnknownName { kind: &'static str, name: String },
}

/// One service's current state; the default is UP with no load reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ServiceState {
    pub down: bool,
    pub connections: u64,
    pub bandwidth_kbps: u64,
}

impl ServiceState {
    pub const UP: ServiceState = ServiceState {
        down: false,
        connections: 0,
        bandwidth_kbps: 0,
    };
    pub const DOWN: ServiceState = ServiceState {
        down: true,
        connections: 0,
        bandwidth_kbps: 0,
    };
}

/// The dynamic inputs of a decision.
#[derive(Clone, Copy, Debug, Default)]
pub struct State<'a> {
    /// By service index; a service beyond the slice is UP with no load (no health known yet).
    pub services: &'a [ServiceState],
    /// RTT in microseconds from each site (by index) to this client's LDNS; `None` or beyond
    /// the slice: not known.
    pub rtt: &'a [Option<u32>],
}

/// Who asks.
#[derive(Clone, Copy, Debug)]
pub struct Client<'a> {
    /// The LDNS address, or the ECS subnet's address.
    pub addr: IpAddr,
    /// From the location database (looked up by the caller).
    pub location: Option<&'a Location>,
    /// The client's static view (`[[view]]` number, 1-based); 0: the default view.
    pub view: u32,
    /// The service of the client's persistence entry, if the caller holds one that has not
    /// timed out.
    pub sticky: Option<ServiceId>,
}

impl Client<'_> {
    pub fn new(addr: IpAddr) -> Client<'static> {
        Client {
            addr,
            location: None,
            view: 0,
            sticky: None,
        }
    }
}

/// What is asked.
#[derive(Clone, Copy, Debug)]
pub struct Query<'a> {
    pub name: &'a str,
    /// A (IPv4 services only), AAAA (IPv6 only); any other type considers both families.
    pub qtype: u16,
}

/// How to choose among the candidates for one answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pick {
    /// The only candidate.
    First,
    /// Every candidate in every answer (multiple IP response).
    All,
    /// One per answer, in turn.
    Rotate,
    /// One per answer, in proportion to these weights (one per candidate, in order).
    Weighted(Vec<u32>),
    /// One per client prefix under `mask`, by rendezvous hashing: a prefix keeps its service
    /// while that service stays a candidate, whatever happens to the others. With `weights`, in
    /// proportion to them.
    Hash {
        mask: SourceMask,
        weights: Option<Vec<u32>>,
    },
}

/// Which step of the chain decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// The client's persistence entry.
    Persistence,
    /// Method number `step` (0 preferred, 1 alternate, 2 fallback) of the chain.
    Method { step: usize, method: Method },
    /// Every method of the chain declined: round robin over the pool.
    Exhausted,
    /// Nothing to answer with: see [`Decision::fallback`].
    Down,
}

/// How a policy's preferred locations narrowed the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preference {
    /// Entry `entry` had UP perfect matches.
    Perfect(usize),
    /// No entry had; entry `entry` had UP partial matches.
    Partial(usize),
    /// No entry had either: the whole pool.
    Rest,
}

/// The outcome of one decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The domain whose services answer: the one asked, or its backup domain.
    pub domain: usize,
    /// Service indexes, in the domain's order; empty exactly when `tier` is [`Tier::Down`].
    pub candidates: Vec<usize>,
    /// The same candidates as positions among the deciding domain's members
    /// ([`Engine::members`]): a service in two lists is told apart by its position.
    pub positions: Vec<usize>,
    pub pick: Pick,
    pub tier: Tier,
    /// The policy (index in priority order) that matched, and what its action did.
    pub policy: Option<(usize, Preference)>,
    /// Every available service is over its limits and answers anyway.
    pub overloaded: bool,
    /// Set exactly when there are no candidates.
    pub fallback: Option<Fallback>,
}

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
    spec: DomainSpec,
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
    mode: WildcardMode,
    sites: Vec<String>,
    services: Vec<ServiceSpec>,
    ids: Vec<ServiceId>,
    domains: Vec<Domain>,
    /// Sorted by priority.
    policies: Vec<Policy>,
    topology: Topology,
}

impl Engine {
    /// Checks `spec` and builds the indexes.
    pub fn new(mut spec: Spec) -> Result<Engine, PolicyError> {
        let sites = spec.sites.len();
        for s in &spec.services {
            if s.site >= sites {
                return Err(PolicyError::UnknownSite {
                    service: s.name.clone(),
                    site: s.site,
                    sites,
                });
            }
        }
        for (record, r) in spec.topology.iter().enumerate() {
            if r.site >= sites {
                return Err(PolicyError::UnknownTopologySite {
                    record,
                    site: r.site,
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
        spec.policies.sort_by_key(|p| p.priority);
        if let Some(w) = spec
            .policies
            .windows(2)
            .find(|w| w[0].priority == w[1].priority)
        {
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
                for &s in list {
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
            let mut next = d.backup_domain;
            for _ in 0..=spec.domains.len() {
                let Some(b) = next else { break };
                let Some(backup) = spec.domains.get(b) else {
                    return Err(PolicyError::UnknownBackup {
                        domain: domain(),
                        backup: b,
                    });
                };
                next = backup.backup_domain;
            }
            if next.is_some() {
                return Err(PolicyError::BackupCycle { domain: domain() });
            }
        }

        let domains = spec
            .domains
            .into_iter()
            .map(|d| {
                let mut members = d.services.clone();
                let mut lists = Vec::with_capacity(d.views.len());
                for (view, services) in &d.views {
                    let start = members.len();
                    members.extend_from_slice(services);
                    lists.push((*view, start..members.len()));
                }
                let preferred = spec
                    .policies
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
                            site: svc.site,
                            v6: svc.ip.is_ipv6(),
                            max_connections: svc.max_connections.unwrap_or(u64::MAX),
                            max_bandwidth_kbps: svc.max_bandwidth_kbps.unwrap_or(u64::MAX),
                        }
                    })
                    .collect();
                Domain {
                    spec: d,
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
            .map(|s| ServiceId::from_name(&s.name))
            .collect();
        Ok(Engine {
            mode: spec.mode,
            sites: spec.sites,
            services: spec.services,
            ids,
            domains,
            policies: spec.policies,
            topology: Topology::new(spec.topology),
        })
    }

    pub fn service(&self, index: usize) -> &ServiceSpec {
        &self.services[index]
    }

    pub fn service_id(&self, index: usize) -> ServiceId {
        self.ids[index]
    }

    pub fn services(&self) -> &[ServiceSpec] {
        &self.services
    }

    pub fn sites(&self) -> &[String] {
        &self.sites
    }

    pub fn domain(&self, index: usize) -> &DomainSpec {
        &self.domains[index].spec
    }

    /// Every service a decision of domain `index` can name, by position: its services, then
    /// each view's (see [`DomainSpec::views`]); a service may repeat.
    pub fn members(&self, index: usize) -> &[usize] {
        &self.domains[index].members
    }

    /// `domain`, then its backup domains in chain order.
    pub fn chain(&self, domain: usize) -> impl Iterator<Item = usize> + '_ {
        // Validation forbids cycles; the bound keeps a bug from looping.
        std::iter::successors(Some(domain), |&d| self.domains[d].spec.backup_domain)
            .take(self.domains.len() + 1)
    }

    /// How many domains there are (indexes `0..domain_count()`).
    pub fn domain_count(&self) -> usize {
        self.domains.len()
    }

    pub fn domain_index(&self, name: &str) -> Option<usize> {
        let name = name.strip_suffix('.').unwrap_or(name);
        self.domains
            .iter()
            .position(|d| d.spec.name.eq_ignore_ascii_case(name))
    }

    /// Policies in the order they are evaluated.
    pub fn policies(&self) -> &[Policy] {
        &self.policies
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    pub fn mode(&self) -> WildcardMode {
        self.mode
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
        let family = query_family(query.qtype);
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
                self.domains[domain].spec.down
            } else {
                Fallback::Empty
            }),
        }
    }

    /// Whether the service `id` is in the pool of domain `index`: UP, of the query's family,
    /// under its limits.
    fn available(&self, index: usize, id: ServiceId, query: &Query<'_>, state: &State<'_>) -> bool {
        let family = query_family(query.qtype);
        self.domains[index]
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
                    || st.bandwidth_kbps >= slot.max_bandwidth_kbps;
                !st.down && family.is_none_or(|v6| slot.v6 == v6) && !full
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
        let domain = &self.domains[index];
        let spec = &domain.spec;
        let family = query_family(query.qtype);
        let service_state = |s: usize| state.services.get(s).copied().unwrap_or_default();
        let available = |slot: &Slot| {
            !service_state(slot.service).down && family.is_none_or(|v6| slot.v6 == v6)
        };
        // The client's view's list when one of its services can answer, else the domain's own
        // (as a round-robin domain's view falls back to the default view).
        let list = domain
            .lists
            .iter()
            .find(|(view, _)| client.view != 0 && *view == client.view)
            .map(|(_, positions)| positions.clone())
            .filter(|positions| domain.slots[positions.clone()].iter().any(available))
            .unwrap_or(0..spec.services.len());

        let mut pool = Bits::new(domain.members.len());
        let mut overloaded = false;
        for pos in list {
            let slot = &domain.slots[pos];
            if !available(slot) {
                continue;
            }
            let st = service_state(slot.service);
            let full = st.connections >= slot.max_connections
                || st.bandwidth_kbps >= slot.max_bandwidth_kbps;
            if !full {
                pool.set(pos);
            } else if overload {
                overloaded = true;
                pool.set(pos);
            }
        }
        if pool.is_empty() {
            return None;
        }
        let decision =
            |pool: &Bits, pick: Pick, tier: Tier, policy: Option<(usize, Preference)>| {
                let positions: Vec<usize> = pool.iter().collect();
                let candidates: Vec<usize> =
                    positions.iter().map(|&pos| domain.members[pos]).collect();
                let pick = self.finish_pick(spec, &candidates, pick);
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
                .position(|p| p.expr.eval(&req, self.mode))
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

    /// Applies the domain's answer mode to a method's pick. Persistence changes nothing here: a
    /// client without an entry gets the method's pick, and its entry then holds that answer.
    fn finish_pick(&self, spec: &DomainSpec, candidates: &[usize], pick: Pick) -> Pick {
        let weights = || {
            candidates
                .iter()
                .map(|&s| self.services[s].weight)
                .collect()
        };
        match pick {
            Pick::First => Pick::First,
            _ if spec.answer == AnswerMode::All => Pick::All,
            Pick::Weighted(_) => Pick::Weighted(weights()),
            pick @ (Pick::Rotate | Pick::All | Pick::Hash { .. }) => pick,
        }
    }

    /// One method over `pool`: the chosen positions and the pick, or `None` if it declines.
    fn method(
        &self,
        method: Method,
        domain: &Domain,
        pool: &Bits,
        client: &Client<'_>,
        state: &State<'_>,
    ) -> Option<(Bits, Pick)> {
        let spec = &domain.spec;
        let service = |pos: usize| &self.services[domain.members[pos]];
        let site = |pos: usize| domain.slots[pos].site;
        // The positions of `pool` with the best key (max), if any position has a key.
        let best_by = |key: &dyn Fn(usize) -> Option<i128>| {
            let mut best: Option<i128> = None;
            let mut chosen = Bits::new(domain.members.len());
            for pos in pool.iter() {
                let Some(k) = key(pos) else { continue };
                match best {
                    Some(b) if k < b => {}
                    Some(b) if k == b => chosen.set(pos),
                    _ => {
                        best = Some(k);
                        chosen.clear();
                        chosen.set(pos);
                    }
                }
            }
            best.map(|b| (chosen, b))
        };
        match method {
            Method::RoundRobin => Some((pool.clone(), Pick::Rotate)),
            // The weights are filled in by finish_pick, once the candidates are known.
            Method::Ratio => Some((pool.clone(), Pick::Weighted(Vec::new()))),
            Method::SourceIpHash => Some((
                pool.clone(),
                Pick::Hash {
                    mask: spec.sourceip_mask,
                    weights: None,
                },
            )),
            Method::LeastConnection => {
                let connections = |pos: usize| {
                    let s = domain.members[pos];
                    -i128::from(
                        state
                            .services
                            .get(s)
                            .copied()
                            .unwrap_or_default()
                            .connections,
                    )
                };
                best_by(&|pos| Some(connections(pos))).map(|(chosen, _)| (chosen, Pick::Rotate))
            }
            Method::StaticProximity => {
                let client = client.location?;
                let score = |pos: usize| {
                    let l = service(pos).location.as_ref()?;
                    Some(proximity(l, client, self.mode) as i128)
                };
                match best_by(&score) {
                    Some((chosen, best)) if best > 0 => Some((chosen, Pick::Rotate)),
                    _ => None,
                }
            }
            Method::Rtt => {
                let rtt = |pos: usize| state.rtt.get(site(pos)).copied().flatten();
                let lowest = pool.iter().filter_map(rtt).min()?;
                let limit = lowest.saturating_add(spec.tolerance_us);
                let mut chosen = Bits::new(domain.members.len());
                for pos in pool
                    .iter()
                    .filter(|&pos| rtt(pos).is_some_and(|r| r <= limit))
                {
                    chosen.set(pos);
                }
                Some((chosen, Pick::Rotate))
            }
            Method::Topology => {
                let sites = pool.iter().map(site).max()? + 1;
                // Sites of a domain are few; keep their scores off the heap when they fit.
                let mut inline = [None; 64];
                let mut heap = Vec::new();
                let best = if sites <= inline.len() {
                    &mut inline[..sites]
                } else {
                    heap.resize(sites, None);
                    &mut heap[..]
                };
                self.topology
                    .scores(client.addr, client.location, self.mode, best);
                let score = |pos: usize| best[site(pos)].map(|(_, s)| i128::from(s));
                best_by(&score).map(|(chosen, _)| (chosen, Pick::Rotate))
            }
            Method::GlobalAvailability => {
                let first = pool.iter().next()?;
                let mut chosen = Bits::new(domain.members.len());
                chosen.set(first);
                Some((chosen, Pick::First))
            }
        }
    }

    /// The services one answer carries under `decision`: `turn` counts the answers given so
    /// far (rotation and weights), `client` is hashed for hashed picks.
    pub fn select(&self, decision: &Decision, client: IpAddr, turn: u64) -> Vec<usize> {
        let c = &decision.candidates;
        if c.is_empty() {
            return Vec::new();
        }
        match &decision.pick {
            Pick::First => vec![c[0]],
            Pick::All => c.clone(),
            Pick::Rotate => vec![c[(turn % c.len() as u64) as usize]],
            Pick::Weighted(w) => vec![c[pick::weighted(w, turn)]],
            Pick::Hash { mask, weights } => {
                let ids: Vec<ServiceId> = c.iter().map(|&s| self.ids[s]).collect();
                vec![c[pick::rendezvous(mask.apply(client), &ids, weights.as_deref())]]
            }
        }
    }
}

/// The address family a query asks for: IPv6 for AAAA, IPv4 for A, either for other types.
fn query_family(qtype: u16) -> Option<bool> {
    match qtype {
        QTYPE_A => Some(false),
        QTYPE_AAAA => Some(true),
        _ => None,
    }
}

/// How many leading qualifiers of the client's location the service's location confirms
/// (static proximity: most leading qualifiers equal wins). A wildcard in the service's location
/// lets the walk go on under matchWildcardtoany YES but confirms nothing; the walk stops where
/// the client's location has nothing more to say.
fn proximity(service: &Location, client: &Location, mode: WildcardMode) -> usize {
    let mut equal = 0;
    for (c, s) in client.0.iter().zip(&service.0) {
        match (c, s) {
            (Qualifier::Any, _) => break,
            (Qualifier::Is(a), Qualifier::Is(b)) if a == b => equal += 1,
            (Qualifier::Is(_), Qualifier::Any) if mode == WildcardMode::Yes => {}
            _ => break,
        }
    }
    equal
}

/// A set of service positions within one domain; inline up to 128 positions, so a decision
/// over a domain of that size allocates only its result.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Bits {
    small: [u64; 2],
    large: Vec<u64>,
}

impl Bits {
    fn new(len: usize) -> Bits {
        let large = if len <= 128 {
            Vec::new()
        } else {
            vec![0; len.div_ceil(64)]
        };
        Bits {
            small: [0; 2],
            large,
        }
    }

    fn words(&self) -> &[u64] {
        if self.large.is_empty() {
            &self.small
        } else {
            &self.large
        }
    }

    fn words_mut(&mut self) -> &mut [u64] {
        if self.large.is_empty() {
            &mut self.small
        } else {
            &mut self.large
        }
    }

    fn set(&mut self, i: usize) {
        self.words_mut()[i / 64] |= 1 << (i % 64);
    }

    fn clear(&mut self) {
        self.words_mut().fill(0);
    }

    fn is_empty(&self) -> bool {
        self.words().iter().all(|&w| w == 0)
    }

    fn intersects(&self, other: &Bits) -> bool {
        self.words()
            .iter()
            .zip(other.words())
            .any(|(a, b)| a & b != 0)
    }

    fn intersect(&mut self, other: &Bits) {
        for (a, b) in self.words_mut().iter_mut().zip(other.words()) {
            *a &= b;
        }
    }

    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words().iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let bit = w.trailing_zeros() as usize;
                    w &= w - 1;
                    i * 64 + bit
                })
            })
        })
    }
}
