//! What a configuration gives the engine: methods, masks, persistence, answer modes, the
//! services, domains, DNS actions and policies ([`Spec`]), and why a spec is refused
//! ([`PolicyError`]).

use std::net::IpAddr;

use serde::Deserialize;

use super::expr::{self, Expr};
use super::pick::stable_hash;
use super::topology::TopologyRecord;
use super::{MAX_CHAIN, MAX_PREFERRED_LOCATIONS};
use crate::location::{Location, WildcardMode};

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
