//! The configuration resolved once into ids: what the decision engine, the compiler, the world
//! and the responder read of a configuration. `config` builds it from the validated file
//! (`Config::model`); every reference (a service's site and link, a domain's services, views and
//! backup domain, a topology record's site) is a typed index here, so nothing downstream looks
//! a name up again.
//!
//! Plain data: this module imports no runtime module. Besides std, `ipnet` and `serde` (the
//! vocabulary types parse from the file), it imports `crate::location`'s `Location` and
//! `WildcardMode`, which services, actions, expressions and topology records are written in.

pub mod expr;
mod lb;
mod rrl;
mod zone;

use std::net::IpAddr;

use ipnet::IpNet;

use crate::location::{Location, WildcardMode};

pub use self::expr::{Expr, ExprError, ExprErrorKind, Request};
pub use self::lb::{
    AnswerMode, DownResponse, Fallback, Method, Persistence, RecordType, SourceMask,
};
pub use self::rrl::RrlSettings;
pub use self::zone::{MAX_TXT_STRING, RecordData, Soa, StaticRecord, Zone, in_zone};

/// Most methods in a domain's chain: preferred, alternate, fallback.
pub const MAX_CHAIN: usize = 3;

/// The most addresses one GSLB answer may carry ([`Domain::max_answers`]): bounded so that one
/// query's work is; 256 AAAA records are 7 KB, which TCP carries and UDP truncates.
pub const MAX_ANSWERS: u16 = 256;
/// Most entries of a preferred-location list (NetScaler's limit).
pub const MAX_PREFERRED_LOCATIONS: usize = 8;

macro_rules! id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl $name {
            /// The id of the `index`th entry of its list.
            pub fn of(index: usize) -> $name {
                $name(u32::try_from(index).expect("a model list fits u32 indexes"))
            }

            /// Its position in its list.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl From<usize> for $name {
            fn from(index: usize) -> $name {
                $name::of(index)
            }
        }
    };
}

id!(
    /// A site: index into [`Model::sites`].
    SiteId
);
id!(
    /// A service: index into [`Model::services`].
    ServiceId
);
id!(
    /// A GSLB domain: index into [`Model::domains`].
    DomainId
);
id!(
    /// A static view: index into [`Model::views`]; its number is the index + 1 (0 is the
    /// default view, clients in no `[[view]]`).
    ViewId
);
id!(
    /// An inbound link: index into [`Model::links`].
    LinkId
);

impl ViewId {
    /// The view's number as the compiler and the engine count views (0: the default view).
    pub fn number(self) -> u32 {
        self.0 + 1
    }
}

/// The whole configuration as the answers read it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    /// NetScaler `matchWildcardtoany`.
    pub mode: WildcardMode,
    /// In file order.
    pub sites: Vec<Site>,
    /// In file order.
    pub services: Vec<Service>,
    /// Static client-prefix views, in file order.
    pub views: Vec<View>,
    /// GSLB domains, in file order.
    pub domains: Vec<Domain>,
    /// Authoritative zones with their records, in file order.
    pub zones: Vec<Zone>,
    /// `[[link]]`s, in file order.
    pub links: Vec<Link>,
    /// Topology records, in file order.
    pub topology: Vec<TopologyRecord>,
    /// DNS policies with their actions, in file order (the engine sorts them by priority).
    pub policies: Vec<Policy>,
    /// Every DNS action, bound or not, in file order.
    pub actions: Vec<Action>,
    /// `server.site`: this server's site.
    pub here: Option<SiteId>,
    /// MEP is on: services of other sites take their state (and load) from their site.
    pub mep: bool,
    /// What the DNS side serves with.
    pub dns: Dns,
}

/// `[server]`'s DNS settings that the answers carry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dns {
    pub port: u16,
    pub edns_udp_size: u16,
    /// Destination addresses answered.
    pub listen: Vec<IpAddr>,
    /// `server.ecs_allow`: the resolvers whose client subnets are used; `None`: everyone's.
    pub ecs_allow: Option<Vec<IpNet>>,
    /// `[rrl]`, for both limiters.
    pub rrl: RrlSettings,
    /// What this node tells about itself.
    pub identity: Identity,
    /// DNS cookies (RFC 7873, RFC 9018); `None`: the option is ignored, as before.
    pub cookies: Option<CookieSecrets>,
}

/// The secrets of DNS server cookies (`server.cookie_secret`, `server.cookie_previous_secret`):
/// the nodes of a site share them, so that a cookie one gave is valid at the others (RFC 9018
/// §4.1); a rollover puts the old secret in `previous`, still accepted, and gives the new one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CookieSecrets {
    pub current: [u8; 16],
    pub previous: Option<[u8; 16]>,
}

/// What this node tells about itself (`server.identity`, `server.nsid`, `server.version`):
/// nothing by default, since a node's name and version help an attacker more than a client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// The TXT of CH `id.server` and `hostname.bind` (RFC 4892); `None`: those are REFUSED.
    pub name: Option<String>,
    /// The NSID option's payload (RFC 5001), given to queries that carry the option; `None`:
    /// no option.
    pub nsid: Option<Vec<u8>>,
    /// The TXT of CH `version.bind` and `version.server`; `None`: those are REFUSED.
    pub version: Option<String>,
}

/// A GSLB site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    pub name: String,
}

/// A GSLB service: one answer candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Service {
    pub name: String,
    /// The address answers carry (the public one behind NAT); with `cname`, the address that
    /// name stands for (monitored, never answered).
    pub ip: IpAddr,
    /// The name a CNAME domain answers with for this service (lower-case, no trailing dot).
    pub cname: Option<String>,
    pub site: SiteId,
    /// `None`: no location configured; it then matches no preferred location or proximity.
    pub location: Option<Location>,
    pub weight: u32,
    pub max_connections: Option<u64>,
    pub max_bandwidth_kbps: Option<u64>,
    /// The `[[link]]` its answers travel over.
    pub link: Option<LinkId>,
    /// It has a load monitor of connections, of bandwidth: their readings are its load.
    pub load: LoadMeasures,
}

/// Which loads a service's load monitors measure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadMeasures {
    pub connections: bool,
    pub bandwidth_kbps: bool,
}

impl Service {
    /// A service of `site` answering `ip`, every other setting at its default.
    pub fn new(name: impl Into<String>, ip: IpAddr, site: SiteId) -> Service {
        Service {
            name: name.into(),
            ip,
            cname: None,
            site,
            location: None,
            weight: 1,
            max_connections: None,
            max_bandwidth_kbps: None,
            link: None,
            load: LoadMeasures::default(),
        }
    }
}

/// A static view: clients in its prefixes get the view's services.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    pub name: String,
    pub prefixes: Vec<IpNet>,
}

/// An inbound link of this server's site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub name: String,
}

/// A GSLB domain: what it answers with and how it decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Domain {
    /// Lower-case, without the trailing dot.
    pub name: String,
    /// A and AAAA, or one CNAME (then every service has a `cname`, `max_answers` is 1 and
    /// there are no backup addresses).
    pub record_type: RecordType,
    /// The TTL of its answers, its backup addresses' included.
    pub ttl: u32,
    pub answer: AnswerMode,
    /// The most addresses one answer carries, 1..=[`MAX_ANSWERS`] (BIG-IP "maximum answers
    /// returned"); see [`crate::policy::carried`] for which.
    pub max_answers: u16,
    /// Its services, in its order (global availability's order).
    pub services: Vec<ServiceId>,
    /// Per static view: the services that answer the view's clients instead of `services`, in
    /// their order. A view none of whose services of the query's family is UP is answered
    /// from `services`.
    pub views: Vec<(ViewId, Vec<ServiceId>)>,
    /// 1..=[`MAX_CHAIN`] methods: preferred, alternate, fallback.
    pub chain: Vec<Method>,
    /// RTT: sites within the lowest RTT plus this many microseconds share the answers.
    pub tolerance_us: u32,
    /// Source-IP hash grouping.
    pub sourceip_mask: SourceMask,
    pub persistence: Option<Persistence>,
    /// Decides when this domain has nothing to answer with.
    pub backup: Option<DomainId>,
    /// Answered when no service can (with `down` = [`Fallback::BackupIp`]).
    pub backup_ip: Vec<IpAddr>,
    pub down: Fallback,
}

impl Domain {
    /// A round-robin domain over `services`, every other setting at its default.
    pub fn new(name: impl Into<String>, services: Vec<ServiceId>) -> Domain {
        Domain {
            name: name.into(),
            record_type: RecordType::A,
            ttl: 30,
            answer: AnswerMode::Rotate,
            max_answers: 1,
            services,
            views: Vec::new(),
            chain: vec![Method::RoundRobin],
            tolerance_us: 0,
            sourceip_mask: SourceMask::default(),
            persistence: None,
            backup: None,
            backup_ip: Vec::new(),
            down: Fallback::Empty,
        }
    }

    /// Its services, then each view's (a service may repeat).
    pub fn members(&self) -> impl Iterator<Item = ServiceId> + '_ {
        self.services
            .iter()
            .chain(self.views.iter().flat_map(|(_, s)| s))
            .copied()
    }
}

/// What a topology record matches the client (its LDNS or ECS subnet) by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ldns {
    Prefix(IpNet),
    /// A location pattern; all wildcards (`*`) matches every client, even one with no location.
    Location(Location),
}

/// One BIG-IP DNS topology record: clients matching `ldns` give `site` this `score`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyRecord {
    pub site: SiteId,
    pub ldns: Ldns,
    pub score: u32,
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

impl Model {
    pub fn site(&self, id: SiteId) -> &Site {
        &self.sites[id.index()]
    }

    pub fn service(&self, id: ServiceId) -> &Service {
        &self.services[id.index()]
    }

    pub fn domain(&self, id: DomainId) -> &Domain {
        &self.domains[id.index()]
    }

    /// Whether `service` is of another site than this server's while MEP is on: its state and
    /// load are what its site reports.
    pub fn remote(&self, service: &Service) -> bool {
        self.mep && self.here != Some(service.site)
    }
}
