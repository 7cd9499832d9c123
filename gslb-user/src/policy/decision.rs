//! What one decision reads (the services' [`ServiceState`], the [`Client`], the [`Query`]) and
//! what it gives ([`Decision`]: candidates, a [`Pick`] rule, the tier that decided).

use std::net::IpAddr;

use super::spec::ServiceKey;
pub use crate::health::state::{Bandwidth, ServiceState};
use crate::location::Location;
use crate::model::{Fallback, Method, SourceMask};

/// The dynamic inputs of a decision.
#[derive(Clone, Copy, Debug, Default)]
pub struct State<'a> {
    /// By service index; a service beyond the slice is UP with no load (no health known yet).
    pub services: &'a [ServiceState],
    /// RTT in microseconds from each site (by index) to this client's LDNS; `None` or beyond
    /// the slice: not known.
    pub rtt: &'a [Option<u32>],
    /// By domain index: the operator disabled it (`gslbctl domain disable`), so it answers as
    /// if all its services were down; beyond the slice: enabled.
    pub disabled_domains: &'a [bool],
}

impl State<'_> {
    /// Whether the domain `index` is disabled by the operator.
    pub fn domain_disabled(&self, index: usize) -> bool {
        self.disabled_domains.get(index).copied().unwrap_or(false)
    }
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
    pub sticky: Option<ServiceKey>,
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
