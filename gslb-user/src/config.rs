//! Configuration file: TOML → validated, typed [`Config`].
//!
//! Loading is two-staged. serde deserializes the text into private `Raw*` mirrors
//! that keep byte spans ([`toml::Spanned`]) on every value a semantic check may
//! reject; [`Validator`] then checks and converts them. That way every error,
//! syntactic or semantic, names `file:line:column` of the offending value.
//!
//! Sections, in NetScaler / BIG-IP DNS vocabulary (`examples/` has a commented file per feature):
//! `[server]`, `[[view]]` (static client-prefix views), `[[zone]]` (authoritative zones with SOA,
//! NS and static records), `[[site]]` (GSLB sites), `[[service]]` (GSLB services, the answer
//! candidates), `[[gslb_domain]]` (names answered from services, with their load-balancing
//! method chain), `[[topology]]` (BIG-IP DNS topology records), `[[action]]` and `[[policy]]`
//! (NetScaler DNS actions with preferred locations, and the policies that apply them) and
//! `[engine]` (decision-engine settings), `[[link]]` (inbound links whose load moves answers
//! away, F5 link bandwidth). The semantics are those of [`crate::policy`].
//!
//! To add a section (monitors, policies, …): add a `Raw*` struct and a field to [`RawConfig`], a
//! typed struct and a field to [`Config`], and a `Validator` method called from
//! [`Validator::config`].

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::{Range, RangeInclusive};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;
use toml::Spanned;

use crate::location::{Location, WildcardMode};
use crate::policy::{Expr, Ldns, MAX_PREFERRED_LOCATIONS, Method, Persistence, SourceMask};

mod clients;
mod load;

pub use clients::RrlSettings;

/// Most addresses per family in one answer set; keeps "all" responses small
/// enough for the XDP fast path to build in place.
pub const MAX_ADDRS: usize = gslb_common::MAX_ADDRS;
/// Most qualifiers in a [`Service::location`]: `continent.country.region.city.isp.org`.
pub const MAX_LOCATION_QUALIFIERS: usize = 6;
/// Longest character-string in a TXT record (RFC 1035 §3.3); longer text is split.
pub const MAX_TXT_STRING: usize = 255;

const DEFAULT_DNS_PORT: u16 = 53;
const DEFAULT_EDNS_UDP_SIZE: u16 = 1232;
const EDNS_UDP_SIZE_RANGE: RangeInclusive<i64> = 512..=4096;
const DEFAULT_PIN_PATH: &str = "/sys/fs/bpf/gslb";
const DEFAULT_ZONE_TTL: u32 = 3600;
const DEFAULT_GSLB_TTL: u32 = 30;
const DEFAULT_SOA_SERIAL: u32 = 1;
const DEFAULT_SOA_REFRESH: u32 = 3600;
const DEFAULT_SOA_RETRY: u32 = 600;
const DEFAULT_SOA_EXPIRE: u32 = 604_800;
const DEFAULT_SOA_MINIMUM: u32 = 60;
const DEFAULT_SERVICE_PORT: u16 = 80;
const DEFAULT_WEIGHT: u32 = 1;
const MAX_TTL: i64 = i32::MAX as i64; // RFC 2181 §8
const TTL_RANGE: RangeInclusive<i64> = 0..=MAX_TTL;
const SERIAL_RANGE: RangeInclusive<i64> = 0..=u32::MAX as i64;
const PORT_RANGE: RangeInclusive<i64> = 1..=u16::MAX as i64;
const WEIGHT_RANGE: RangeInclusive<i64> = 1..=100;
const LIMIT_RANGE: RangeInclusive<i64> = 1..=i64::MAX;
/// RTT tolerance, in milliseconds (NetScaler allows up to 100; a little slack here).
const TOLERANCE_RANGE: RangeInclusive<i64> = 0..=10_000;
const MASK_V4_RANGE: RangeInclusive<i64> = 1..=32;
const MASK_V6_RANGE: RangeInclusive<i64> = 1..=128;
/// Persistence timeout, in seconds (NetScaler: 2 to 1440 minutes).
const PERSISTENCE_TIMEOUT_RANGE: RangeInclusive<i64> = 1..=86_400;
/// NetScaler's default persistence timeout, 2 minutes.
const DEFAULT_PERSISTENCE_TIMEOUT: u32 = 120;
/// Entries of one domain's persistence table: up to 16M (every /24 of IPv4 at mask 24).
const PERSISTENCE_ENTRIES_RANGE: RangeInclusive<i64> = 1..=(1 << 24);
/// 65,536 clients per domain by default: about 10 MiB of table (an entry costs ~150 bytes
/// with its hash slot and queue place), a mega-proxy's worth of clients without letting one
/// domain's table take the host's memory.
const DEFAULT_PERSISTENCE_ENTRIES: u32 = 65_536;
const SCORE_RANGE: RangeInclusive<i64> = 1..=u32::MAX as i64;
/// NetScaler bind priorities.
const PRIORITY_RANGE: RangeInclusive<i64> = 1..=i32::MAX as i64;
/// Implicit view of clients matching no `[[view]]`; answered from a domain's own services.
const DEFAULT_VIEW: &str = "default";
/// How many names an "unknown X" error lists.
const LIST_NAMES: usize = 10;
/// `[[link]]` threshold_kbps: up to 10 Tbit/s (the byte rate, ×125, stays far from overflow).
const LINK_THRESHOLD_RANGE: RangeInclusive<i64> = 1..=10_000_000_000;
/// `[[link]]` interval_ms: at least 10 ms (each sample reads a sysfs file), at most an hour.
const LINK_INTERVAL_RANGE: RangeInclusive<i64> = 10..=3_600_000;
const DEFAULT_LINK_INTERVAL_MS: u64 = 1000;
/// `[[link]]` over_after and under_after: one burst or one quiet second moves nothing.
const DEFAULT_LINK_SAMPLES: u32 = 3;
/// Stands in for the local site of a disabled `[mep]` without `server.site`.
static DISABLED_SITE: Site = Site {
    name: String::new(),
    ip: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    public_ip: None,
    role: crate::mep::Role::Parent,
    parent: None,
    backup_parents: Vec::new(),
    mep_port: crate::mep::DEFAULT_PORT,
    key: None,
    nat: false,
};

/// The whole validated configuration. Every name a section refers to (a service's site, a
/// domain's services and views) exists, so the lookups below only return `None` for names
/// that come from outside the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub server: Server,
    /// Static client-prefix views, in file order.
    pub views: Vec<View>,
    /// Authoritative zones, in file order; no zone is inside another.
    pub zones: Vec<Zone>,
    /// GSLB sites, in file order.
    pub sites: Vec<Site>,
    /// GSLB services, in file order.
    pub services: Vec<Service>,
    /// GSLB domains, in file order; each is inside one of `zones`.
    pub gslb_domains: Vec<GslbDomain>,
    /// Topology records, in file order.
    pub topology: Vec<TopologyRecord>,
    /// DNS actions, in file order.
    pub actions: Vec<DnsAction>,
    /// DNS policies, in file order (evaluation follows `priority`).
    pub policies: Vec<DnsPolicy>,
    pub engine: EngineSettings,
    pub locations: LocationSources,
    /// `[[monitor]]`s, by name.
    pub monitors: Vec<crate::health::MonitorSpec>,
    /// `[[monitor]]`s of type "load", by name (names are unique across both lists).
    pub load_monitors: Vec<crate::health::load::LoadMonitorSpec>,
    pub rtt: RttSettings,
    /// `[mep]`, when the section is written.
    pub mep: Option<MepSettings>,
    /// `[[link]]`s, in file order.
    pub links: Vec<Link>,
    /// `[rrl]`: response rate limiting (off without the section).
    pub rrl: RrlSettings,
}

/// `[[link]]`: an inbound link of this server's site (spec §5, F5 link bandwidth). Its
/// interface's inbound rate is sampled from the kernel's counters; while it is over the
/// threshold, its services take no new clients (spillover), so answers shift to services on
/// other links, and when every candidate is over they answer anyway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Unique; letters, digits, '-', '_' and '.', starting with a letter, digit or '_'.
    pub name: String,
    /// The interface of this host whose inbound bytes are counted (a valid name; one link per
    /// interface).
    pub interface: String,
    /// Inbound kilobits per second above which the link is over (≥ 1).
    pub threshold_kbps: u64,
    /// Time between samples (default 1 s).
    pub interval: Duration,
    /// Samples over the threshold in a row that make the link over (default 3).
    pub over_after: u32,
    /// Samples at or under it in a row that make it normal again (default 3).
    pub under_after: u32,
    /// The services whose answers travel over it: existing, none twice, none on another link,
    /// at `server.site` when that is set (this host measures only its own links); non-empty.
    pub services: Vec<String>,
}

impl Config {
    /// The link `service` is on, if any.
    pub fn link_of(&self, service: &str) -> Option<&Link> {
        self.links
            .iter()
            .find(|l| l.services.iter().any(|s| s == service))
    }
}

/// `[mep]`: this site's metric exchange with the other sites (docs/mep.md). The topology (roles,
/// parents, backup lists) is in the `[[site]]`s: [`Config::mep_topology`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MepSettings {
    /// Defaults to true when the section is written.
    pub enabled: bool,
    /// Where the listener binds: `listen` as written, else the local site's `ip` and `mep_port`.
    pub listen: SocketAddr,
    /// This site's private key (`private_key_file`, PEM PKCS#8 Ed25519); required when
    /// enabled. The other sites' public keys are their `[[site]] key`s.
    pub key: Option<crate::mep::SiteKey>,
    pub tls: Option<MepTlsFiles>,
    pub heartbeat: Duration,
    /// A link with no frame for this long is dead.
    pub dead_after: Duration,
}

/// Bytes never printed (Debug shows only their length).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

/// `[mep.tls]`: the files as written, and their contents as read when the configuration was
/// loaded (so a reload sees a renewed certificate, and a bad file fails the load).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MepTlsFiles {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub ca_file: PathBuf,
    pub cert_pem: Vec<u8>,
    pub key_pem: Secret,
    pub ca_pem: Vec<u8>,
}

impl MepTlsFiles {
    pub fn tls(&self) -> Result<crate::mep::MepTls, crate::mep::MepError> {
        crate::mep::MepTls::from_pem(&self.cert_pem, &self.key_pem.0, &self.ca_pem)
    }
}

impl Config {
    /// The MEP topology the `[[site]]`s describe (validated when the configuration was loaded,
    /// if it has a `[mep]` section or any site a role, parent or backup list). Other sites
    /// connect to a site at its `public_ip` when it has one.
    pub fn mep_topology(&self) -> Result<crate::mep::SiteTree, crate::mep::TopologyError> {
        crate::mep::SiteTree::new(site_specs(&self.sites))
    }

    /// `[mep]` when it is enabled.
    pub fn mep_enabled(&self) -> Option<&MepSettings> {
        self.mep.as_ref().filter(|m| m.enabled)
    }
}

fn site_specs(sites: &[Site]) -> Vec<crate::mep::SiteSpec> {
    sites
        .iter()
        .map(|s| crate::mep::SiteSpec {
            name: s.name.clone(),
            ip: s.ip,
            port: s.mep_port,
            connect: s.public_ip.map(|p| SocketAddr::new(p, s.mep_port)),
            role: s.role,
            parent: s.parent.clone(),
            backups: s.backup_parents.clone(),
            key: s.key,
            nat: s.nat,
        })
        .collect()
}

impl Config {
    /// The service called `name` (names are case-sensitive).
    pub fn service(&self, name: &str) -> Option<&Service> {
        self.services.iter().find(|s| s.name == name)
    }

    /// The site called `name` (names are case-sensitive).
    pub fn site(&self, name: &str) -> Option<&Site> {
        self.sites.iter().find(|s| s.name == name)
    }

    /// The GSLB domain `name` (case-insensitive, trailing dot optional).
    pub fn gslb_domain(&self, name: &str) -> Option<&GslbDomain> {
        let name = name.strip_suffix('.').unwrap_or(name);
        self.gslb_domains
            .iter()
            .find(|d| d.name.eq_ignore_ascii_case(name))
    }

    /// The zone `name` belongs to: the one with the longest apex that is `name` or an ancestor
    /// of it (case-insensitive, trailing dot optional); `None` outside every zone.
    pub fn zone_of(&self, name: &str) -> Option<&Zone> {
        self.zones
            .iter()
            .filter(|z| z.contains(name))
            .max_by_key(|z| z.name.len())
    }
}

/// `[server]`: where and how DNS is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// UDP/TCP port DNS is answered on (never 0).
    pub dns_port: u16,
    /// Addresses DNS is answered on; non-empty, no duplicates.
    pub listen: Vec<IpAddr>,
    /// EDNS(0) UDP payload size we advertise, 512..=4096.
    pub edns_udp_size: u16,
    /// Interface to attach the XDP program to, if any.
    pub interface: Option<String>,
    pub xdp_mode: XdpMode,
    /// bpffs directory where maps are pinned (absolute).
    pub pin_path: PathBuf,
    /// The `[[site]]` this gslbd runs at: it probes RTTs for that site's column and takes
    /// other sites' service states from MEP.
    pub site: Option<String>,
    /// TCP connection limits (`tcp_*` keys; `clients.rs`); changing them needs a restart.
    pub tcp: crate::server::TcpLimits,
    /// `ecs_allow`: the resolvers whose EDNS Client Subnet is used; from any other client the
    /// option is ignored and its source address is the client. `None` (absent): everyone's.
    pub ecs_allow: Option<Vec<IpNet>>,
    /// `stale_after_s` (seconds, default 60; 0 = never): how long the fast path keeps
    /// answering after the last heartbeat of a gslbd (which beats every quarter of it). Past
    /// it, XDP passes every frame (counted `stale`), so with gslbd dead and XDP left attached
    /// resolvers get no answer here and fail over to another server, instead of answers that
    /// no longer follow health. `None`: never stale. 1..=86400; changes need a restart.
    pub stale_after: Option<Duration>,
}

/// Default of `server.stale_after_s`.
pub const DEFAULT_STALE_AFTER_S: i64 = 60;
/// Values of `server.stale_after_s` other than 0: a second (the heartbeat beats four times
/// within it) to a day.
const STALE_AFTER_RANGE: RangeInclusive<i64> = 1..=86_400;

/// How the XDP program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    /// Native (driver) mode, falling back to skb (generic) mode if the driver refuses.
    #[default]
    Auto,
    /// Native (driver) mode only.
    Native,
    /// Generic (skb) mode only.
    Skb,
}

impl XdpMode {
    const NAMES: [(&str, XdpMode); 3] = [
        ("auto", XdpMode::Auto),
        ("native", XdpMode::Native),
        ("skb", XdpMode::Skb),
    ];
}

impl fmt::Display for XdpMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, _) = Self::NAMES
            .iter()
            .find(|(_, m)| m == self)
            .expect("all modes named");
        f.write_str(name)
    }
}

/// Error from parsing an [`XdpMode`] that is not "auto", "native" or "skb".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid XDP mode {0:?} (expected auto, native or skb)")]
pub struct ParseXdpModeError(pub String);

impl FromStr for XdpMode {
    type Err = ParseXdpModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::NAMES
            .iter()
            .find(|(name, _)| *name == s)
            .map(|&(_, mode)| mode)
            .ok_or_else(|| ParseXdpModeError(s.to_owned()))
    }
}

/// `[[view]]`: clients whose source address falls in `prefixes` get the view's answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// Unique, `[A-Za-z0-9_-]+`, never "default".
    pub name: String,
    /// Non-empty; host bits are zero; each prefix belongs to exactly one view.
    pub prefixes: Vec<IpNet>,
}

/// `[[zone]]`: a zone we are authoritative for.
///
/// Every name in it (apex, record owners and targets, NS, SOA names) is absolute, lower-case and
/// without the trailing dot; the root is `""` (only as an MX exchange or SRV target, "none").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    /// The apex; unique, neither inside nor above another zone.
    pub name: String,
    /// Default TTL of the zone's records, and the TTL of its SOA and apex NS records.
    pub ttl: u32,
    /// The apex NS records' targets; non-empty, no duplicates. A target inside a configured zone
    /// has an address (a static A/AAAA record or a GSLB domain).
    pub ns: Vec<String>,
    pub soa: Soa,
    /// Static records, in file order; all inside the zone, none at a GSLB domain's name, no apex
    /// NS (that is [`Zone::ns`]), a CNAME alone at its name and never at the apex, one TTL per
    /// RRset, at and below a delegation (an NS record below the apex) only NS and glue A/AAAA.
    pub records: Vec<StaticRecord>,
}

impl Zone {
    /// Whether `name` (any case, trailing dot optional) is the apex or below it.
    pub fn contains(&self, name: &str) -> bool {
        in_zone(name, &self.name)
    }
}

/// `[zone.soa]`: the zone's SOA record (RFC 1035 §3.3.13).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Soa {
    /// Primary name server; defaults to the first of [`Zone::ns`].
    pub mname: String,
    /// Mailbox of the person responsible, as a name (`hostmaster.example.com`).
    pub rname: String,
    pub serial: u32,
    pub refresh: u32,
    pub retry: u32,
    pub expire: u32,
    /// Negative-caching TTL (RFC 2308).
    pub minimum: u32,
}

/// `[[zone.record]]`: one static resource record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StaticRecord {
    /// Owner: absolute, lower-case, without the trailing dot.
    pub name: String,
    pub ttl: u32,
    pub data: RecordData,
}

/// The data of a static record. Names are absolute, lower-case, without trailing dot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RecordData {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    Cname(String),
    /// The character-strings, each at most [`MAX_TXT_STRING`] bytes (a longer text is split on
    /// character boundaries); at least one, possibly empty.
    Txt(Vec<String>),
    /// `exchange` is `""` for a null MX (RFC 7505, "this domain accepts no mail").
    Mx {
        preference: u16,
        exchange: String,
    },
    /// A delegation (below the apex only).
    Ns(String),
    /// `target` is `""` when the service is decidedly not available (RFC 2782).
    Srv {
        priority: u16,
        weight: u16,
        port: u16,
        target: String,
    },
}

impl RecordData {
    /// The RR TYPE number (RFC 1035, 2782, 3596).
    pub fn rtype(&self) -> u16 {
        match self {
            RecordData::A(_) => 1,
            RecordData::Ns(_) => 2,
            RecordData::Cname(_) => 5,
            RecordData::Mx { .. } => 15,
            RecordData::Txt(_) => 16,
            RecordData::Aaaa(_) => 28,
            RecordData::Srv { .. } => 33,
        }
    }

    /// The type's mnemonic, as written in the configuration ("A", "AAAA", …).
    pub fn type_name(&self) -> &'static str {
        match self {
            RecordData::A(_) => "A",
            RecordData::Ns(_) => "NS",
            RecordData::Cname(_) => "CNAME",
            RecordData::Mx { .. } => "MX",
            RecordData::Txt(_) => "TXT",
            RecordData::Aaaa(_) => "AAAA",
            RecordData::Srv { .. } => "SRV",
        }
    }
}

/// `[[site]]`: a GSLB site (data centre or edge node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// Unique; letters, digits, '-', '_' and '.', starting with a letter, digit or '_'.
    pub name: String,
    /// Its metric-exchange (MEP) address; unique among sites.
    pub ip: IpAddr,
    /// Its address as seen from other sites when it sits behind NAT; same family as `ip`.
    /// Other sites open MEP links to it there.
    pub public_ip: Option<IpAddr>,
    /// Parent (the default: answers DNS, peers with the other parents) or child.
    pub role: crate::mep::Role,
    /// A child's parent (an existing parent).
    pub parent: Option<String>,
    /// A parent's ordered backup parents: ≤ 5 other existing parents; empty clears the list.
    pub backup_parents: Vec<String>,
    /// The port its MEP listener is reached on (default 3011).
    pub mep_port: u16,
    /// Its MEP public key (`key`, the base64 line of `openssl pkey -pubout`, or `key_file`, a
    /// PEM file): its links are believed only once they prove its name with the private key.
    /// Required on every site but this server's own when `[mep]` is enabled.
    pub key: Option<crate::mep::PublicKey>,
    /// Its MEP links may come from any source address (behind a NAT); default false: only
    /// from `ip` or `public_ip`.
    pub nat: bool,
}

/// `[[service]]`: a GSLB service, one answer candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// Unique; letters, digits, '-', '_' and '.', starting with a letter, digit or '_'.
    pub name: String,
    /// The address monitors and metrics use; (`ip`, `port`) is unique among services.
    pub ip: IpAddr,
    /// 1..=65535.
    pub port: u16,
    /// The [`Site`] it belongs to (exists).
    pub site: String,
    /// Dotted location qualifiers as written (`Europe.UK.London`, quoted qualifiers allowed);
    /// valid for [`parse_location`].
    pub location: Option<String>,
    /// 1..=100.
    pub weight: u32,
    /// The address DNS answers carry when the service sits behind NAT; same family as `ip`.
    pub public_ip: Option<IpAddr>,
    /// Spillover: at this many connections the service takes no new clients (≥ 1).
    pub max_connections: Option<u64>,
    /// Spillover: at this bandwidth (kbit/s) the service takes no new clients (≥ 1).
    pub max_bandwidth_kbps: Option<u64>,
    /// Health monitors bound to it (`[[monitor]]` names); none: always up.
    pub monitors: Vec<String>,
    /// Load monitors bound to it (`[[monitor]]`s of type "load"), at most one per measure;
    /// they run at the service's site (config/load.rs).
    pub load_monitors: Vec<String>,
    /// NetScaler monThreshold: UP when the weights of its UP monitors add up to this; 0 means
    /// every monitor must be UP.
    pub monitor_threshold: u32,
}

impl Service {
    /// The address a DNS answer carries: the public IP if set, else the IP.
    pub fn answer_ip(&self) -> IpAddr {
        self.public_ip.unwrap_or(self.ip)
    }
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
    /// The domain's [`GslbDomain::backup_ip`] addresses (never empty with this mode).
    Backup,
    /// An empty NOERROR answer (NODATA; NetScaler "empty down response").
    Nodata,
}

/// `[[gslb_domain]]`: a name answered from GSLB services.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GslbDomain {
    /// Lower-case, without trailing dot; unique; inside a zone, not at or below one of its
    /// delegations, not the name of a static record. The apex may be one (its SOA and NS still
    /// come from the zone).
    pub name: String,
    pub ttl: u32,
    pub answer: AnswerMode,
    /// Services answered to clients in no view (the default view), in order; non-empty, no
    /// duplicates, each exists, at most [`MAX_ADDRS`] per address family.
    pub services: Vec<String>,
    /// Answered when every service is down; no duplicates, at most [`MAX_ADDRS`] per family.
    pub backup_ip: Vec<IpAddr>,
    /// `Backup` exactly when `backup_ip` is non-empty.
    pub down_response: DownResponse,
    /// Per-view services, in file order; each view exists (never "default") and appears once,
    /// its services follow the same rules as `services`.
    pub views: Vec<(String, Vec<String>)>,
    /// The load-balancing method (BIG-IP DNS "preferred"); default round robin.
    pub method: Method,
    /// Used when `method` cannot decide (BIG-IP DNS "alternate", NetScaler backup method).
    /// Never after a method that always decides, never a repeat.
    pub alternate: Option<Method>,
    /// Used when `method` and `alternate` cannot decide (BIG-IP DNS "fallback"); same rules.
    pub fallback: Option<Method>,
    /// RTT: sites within the lowest RTT plus this many milliseconds share the answers; only
    /// set (non-zero) when the chain has `rtt`.
    pub tolerance_ms: u32,
    /// Source-IP hash grouping; only set (not /32, /128) when the chain has `sourceiphash`.
    pub sourceip_mask: SourceMask,
    pub persistence: Option<Persistence>,
    /// Another GSLB domain (exists, not this one, no cycle) that answers when this one has no
    /// available service (NetScaler backup virtual server).
    pub backup_domain: Option<String>,
}

impl GslbDomain {
    /// The method chain: `method`, then `alternate` and `fallback` if set.
    pub fn chain(&self) -> Vec<Method> {
        [Some(self.method), self.alternate, self.fallback]
            .into_iter()
            .flatten()
            .collect()
    }
}

/// `[[topology]]`: a BIG-IP DNS topology record, `dc."NAME" <ldns> <score>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyRecord {
    /// A [`Site`] (exists).
    pub destination: String,
    /// A prefix (host bits zero) or a location pattern (`*` for any client); (destination,
    /// ldns) is unique.
    pub ldns: Ldns,
    /// 1..=4294967295.
    pub score: u32,
}

/// `[[action]]`: a NetScaler DNS action with a preferred-location list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsAction {
    /// Unique; letters, digits, '-', '_' and '.'.
    pub name: String,
    /// 1..=[`MAX_PREFERRED_LOCATIONS`], highest priority first, no duplicates.
    pub preferred_locations: Vec<Location>,
}

/// `[[policy]]`: a NetScaler DNS policy, bound globally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsPolicy {
    /// Unique; letters, digits, '-', '_' and '.'.
    pub name: String,
    pub expression: Expr,
    /// A [`DnsAction`] (exists).
    pub action: String,
    /// 1..=2147483647, unique; lower is evaluated first.
    pub priority: u32,
}

/// `[locations]` and `[[location]]`: where client locations come from (static proximity).
/// Files are as written (relative to gslbd's working directory); they are read when the
/// location database is built, so a missing file is reported then, with its name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LocationSources {
    /// NetScaler location files, in order: `[[locations.file]]` entries, after the files of
    /// the `netscaler = [...]` list (format `netscaler`).
    pub files: Vec<LocationFile>,
    /// A MaxMind GeoIP2/GeoLite2 City database.
    pub mmdb_city: Option<PathBuf>,
    /// A MaxMind ASN database, for the ISP qualifier.
    pub mmdb_asn: Option<PathBuf>,
    /// The continents gslbd supplies (the mmdb's, and those derived from a file's country)
    /// as codes (`EU`) instead of names (`Europe`).
    pub continent_codes: bool,
    /// Custom entries, which win over the files: (line in the config, from, to, location).
    pub custom: Vec<(usize, IpAddr, IpAddr, Location)>,
}

/// `[[locations.file]]`: one NetScaler location file and the format NetScaler would load it
/// with (`add locationfile <path> -format <format>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocationFile {
    pub path: PathBuf,
    pub format: crate::location::netscaler::FileFormat,
}

/// `[rtt]`: probing the resolvers (LDNS) that query us, for the rtt method (spec §4).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RttSettings {
    /// `enabled` as written: `None` probes when a domain's method chain has rtt.
    pub enabled: Option<bool>,
    pub probe: crate::probe::ProbeSettings,
}

impl Config {
    /// Whether this server probes RTTs: `[rtt] enabled`, else whether any domain's method
    /// chain has rtt; never without `server.site`, the column the probes fill.
    pub fn rtt_probing(&self) -> bool {
        let wanted = self.rtt.enabled.unwrap_or_else(|| {
            self.gslb_domains
                .iter()
                .any(|d| d.chain().contains(&Method::Rtt))
        });
        // A MEP child answers no GSLB query and parents take no RTT rows from children.
        let child = self.mep_enabled().is_some()
            && self
                .server
                .site
                .as_deref()
                .and_then(|s| self.site(s))
                .is_some_and(|s| s.role == crate::mep::Role::Child);
        wanted && self.server.site.is_some() && !child
    }
}

/// `[engine]`: decision-engine settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EngineSettings {
    /// NetScaler `matchWildcardtoany`.
    pub wildcard_mode: WildcardMode,
}

/// Splits a location (`Europe.UK."St. Albans"`) into its qualifiers, unquoted.
///
/// Qualifiers are separated by '.'; a qualifier containing '.' or a space is double-quoted.
/// There are 1..=[`MAX_LOCATION_QUALIFIERS`], none empty; `*` is a wildcard, and so is an
/// omitted trailing qualifier (matching is a later concern; this only checks the syntax).
pub fn parse_location(location: &str) -> Result<Vec<String>, String> {
    let mut qualifiers = Vec::new();
    let mut chars = location.chars().peekable();
    loop {
        let mut q = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some(c) => q.push(c),
                    None => {
                        return Err(format!(
                            "unterminated quote in qualifier {}",
                            qualifiers.len() + 1
                        ));
                    }
                }
            }
            if !matches!(chars.peek(), None | Some('.')) {
                return Err(format!(
                    "qualifier {} continues after its closing quote",
                    qualifiers.len() + 1
                ));
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == '.' {
                    break;
                }
                if c == '"' || c.is_whitespace() {
                    return Err(format!(
                        "qualifier {} contains {c:?}; double-quote a qualifier with spaces or dots",
                        qualifiers.len() + 1
                    ));
                }
                q.push(c);
                chars.next();
            }
        }
        if q.trim().is_empty() {
            return Err(format!(
                "qualifier {} is empty (use * for any)",
                qualifiers.len() + 1
            ));
        }
        qualifiers.push(q);
        // The next character, if any, is the '.' that ended the qualifier.
        if chars.next().is_none() {
            break;
        }
    }
    if qualifiers.len() > MAX_LOCATION_QUALIFIERS {
        return Err(format!(
            "{} qualifiers, at most {MAX_LOCATION_QUALIFIERS} (continent.country.region.city.isp.org)",
            qualifiers.len()
        ));
    }
    Ok(qualifiers)
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {}", file.display())]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    /// Syntax, schema or semantic error at a 1-based `line`/`column` (in characters).
    #[error("{}:{line}:{column}: {reason}", file.display())]
    Invalid {
        file: PathBuf,
        line: usize,
        column: usize,
        reason: String,
    },
}

impl Config {
    /// Reads and validates the configuration file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            file: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Validates configuration `text`; `file` is only used to name it in errors.
    pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
        let v = Validator { text, file };
        let raw: RawConfig = toml::from_str(text).map_err(|e| v.toml_error(&e))?;
        v.config(raw)
    }
}

// ---- Raw (as-written) structure: Spanned wherever validation may point. ----

type Str = Spanned<String>;
type List = Spanned<Vec<Str>>;
type Int = Spanned<i64>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    server: RawServer,
    #[serde(default, rename = "view")]
    views: Vec<RawView>,
    #[serde(default, rename = "zone")]
    zones: Vec<RawZone>,
    #[serde(default, rename = "site")]
    sites: Vec<RawSite>,
    #[serde(default, rename = "service")]
    services: Vec<RawService>,
    #[serde(default, rename = "gslb_domain")]
    gslb_domains: Vec<RawGslbDomain>,
    #[serde(default)]
    topology: Vec<RawTopology>,
    #[serde(default, rename = "action")]
    actions: Vec<RawAction>,
    #[serde(default, rename = "policy")]
    policies: Vec<RawPolicy>,
    #[serde(default)]
    engine: RawEngine,
    #[serde(default, rename = "locations")]
    location_files: RawLocationFiles,
    #[serde(default, rename = "location")]
    custom_locations: Vec<RawCustomLocation>,
    #[serde(default, rename = "monitor")]
    monitors: Vec<RawMonitor>,
    rtt: Option<Spanned<RawRtt>>,
    mep: Option<Spanned<RawMep>>,
    #[serde(default, rename = "link")]
    links: Vec<RawLink>,
    rrl: Option<Spanned<clients::RawRrl>>,
    /// The schema before zones and services; only read to say what replaced it.
    #[serde(rename = "domain")]
    old_domain: Option<Spanned<toml::Value>>,
}

// Integers are read as i64 (TOML's integer type) so out-of-range values get our
// message rather than a generic serde one.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    dns_port: Option<Int>,
    listen: List,
    edns_udp_size: Option<Int>,
    interface: Option<Str>,
    #[serde(default)]
    xdp_mode: XdpMode,
    pin_path: Option<Str>,
    site: Option<Str>,
    tcp_max_connections: Option<Int>,
    tcp_max_per_address: Option<Int>,
    tcp_idle_timeout_ms: Option<Int>,
    tcp_message_timeout_ms: Option<Int>,
    ecs_allow: Option<List>,
    stale_after_s: Option<Int>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawView {
    name: Str,
    prefixes: List,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawZone {
    name: Str,
    ttl: Option<Int>,
    ns: List,
    soa: RawSoa,
    #[serde(default, rename = "record")]
    records: Vec<RawRecord>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSoa {
    mname: Option<Str>,
    rname: Str,
    serial: Option<Int>,
    refresh: Option<Int>,
    retry: Option<Int>,
    expire: Option<Int>,
    minimum: Option<Int>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRecord {
    name: Str,
    #[serde(rename = "type")]
    rtype: Str,
    value: Str,
    ttl: Option<Int>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSite {
    name: Str,
    ip: Str,
    public_ip: Option<Str>,
    role: Option<Spanned<RawRole>>,
    parent: Option<Str>,
    backup_parents: Option<List>,
    mep_port: Option<Int>,
    key: Option<Str>,
    key_file: Option<Str>,
    nat: Option<Spanned<bool>>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum RawRole {
    Parent,
    Child,
}

/// `[mep]`: the metric exchange with the other sites (docs/mep.md). Times in milliseconds.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMep {
    enabled: Option<Spanned<bool>>,
    listen: Option<Str>,
    /// Refused with the way to per-site keys (MEP 1's one secret for every site).
    secret: Option<Str>,
    secret_file: Option<Str>,
    private_key_file: Option<Str>,
    tls: Option<Spanned<RawMepTls>>,
    heartbeat_ms: Option<Int>,
    dead_after_ms: Option<Int>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMepTls {
    cert_file: Str,
    key_file: Str,
    ca_file: Str,
}

/// `[[link]]`. Times in milliseconds.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    name: Str,
    interface: Str,
    threshold_kbps: Int,
    interval_ms: Option<Int>,
    over_after: Option<Int>,
    under_after: Option<Int>,
    services: List,
}

/// Where each `[[site]]`'s MEP settings were written, for topology errors.
struct SiteSpans {
    name: Range<usize>,
    key: Option<Range<usize>>,
    role: Option<Range<usize>>,
    parent: Option<Range<usize>>,
    backups: Option<(Range<usize>, Vec<Range<usize>>)>,
}

impl SiteSpans {
    fn of(raw: &RawSite) -> SiteSpans {
        SiteSpans {
            name: raw.name.span(),
            key: raw.key.as_ref().or(raw.key_file.as_ref()).map(|k| k.span()),
            role: raw.role.as_ref().map(|r| r.span()),
            parent: raw.parent.as_ref().map(|p| p.span()),
            backups: raw
                .backup_parents
                .as_ref()
                .map(|l| (l.span(), l.get_ref().iter().map(|b| b.span()).collect())),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawService {
    name: Str,
    ip: Str,
    port: Option<Int>,
    site: Str,
    location: Option<Str>,
    weight: Option<Int>,
    public_ip: Option<Str>,
    max_connections: Option<Int>,
    max_bandwidth_kbps: Option<Int>,
    monitors: Option<List>,
    monitor_threshold: Option<Int>,
    load_monitors: Option<List>,
}

/// `[[monitor]]`: a health monitor, bound to services by name. Times in milliseconds.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMonitor {
    name: Str,
    #[serde(rename = "type")]
    kind: Spanned<RawMonitorType>,
    port: Option<Int>,
    interval_ms: Option<Int>,
    timeout_ms: Option<Int>,
    fall: Option<Int>,
    rise: Option<Int>,
    weight: Option<Int>,
    // http, https
    path: Option<Str>,
    host: Option<Str>,
    expect_status: Option<Spanned<Vec<i64>>>,
    body_contains: Option<Str>,
    // https
    insecure: Option<Spanned<bool>>,
    sni: Option<Str>,
    ca_file: Option<Str>,
    // dns
    qname: Option<Str>,
    qtype: Option<Str>,
    expect_rcode: Option<Str>,
    expect_answer: Option<Str>,
    // load
    format: Option<Spanned<load::RawLoadFormat>>,
    metric: Option<Str>,
    labels: Option<load::RawLabels>,
    aggregate: Option<Spanned<load::RawAggregate>>,
    measure: Option<Spanned<load::RawMeasure>>,
    scheme: Option<Spanned<load::RawScheme>>,
    unknown_after: Option<Int>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum RawMonitorType {
    Tcp,
    Http,
    Https,
    Dns,
    Icmp,
    Load,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGslbDomain {
    name: Str,
    ttl: Option<Int>,
    #[serde(default)]
    answer: AnswerMode,
    services: List,
    backup_ip: Option<List>,
    down_response: Option<Spanned<DownResponse>>,
    #[serde(default, rename = "view")]
    views: Vec<RawGslbView>,
    method: Option<Spanned<Method>>,
    alternate: Option<Spanned<Method>>,
    fallback: Option<Spanned<Method>>,
    tolerance_ms: Option<Int>,
    sourceip_mask: Option<Spanned<RawMask>>,
    persistence: Option<Spanned<RawPersistence>>,
    backup_domain: Option<Str>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMask {
    mask_v4: Option<Int>,
    mask_v6: Option<Int>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPersistence {
    mask_v4: Option<Int>,
    mask_v6: Option<Int>,
    timeout_s: Option<Int>,
    max_entries: Option<Int>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTopology {
    destination: Str,
    ldns: Str,
    score: Int,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAction {
    name: Str,
    preferred_locations: List,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    name: Str,
    expression: Str,
    action: Str,
    priority: Int,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLocationFiles {
    #[serde(default)]
    netscaler: Vec<String>,
    #[serde(default)]
    file: Vec<RawLocationFile>,
    mmdb_city: Option<String>,
    mmdb_asn: Option<String>,
    #[serde(default)]
    continent: RawContinent,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLocationFile {
    path: Str,
    format: Option<Str>,
}

#[derive(Deserialize, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum RawContinent {
    #[default]
    Name,
    Code,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCustomLocation {
    from: Str,
    to: Str,
    location: Str,
}

/// `[rtt]`. Times in milliseconds, except the LDNS entry timeout (seconds).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRtt {
    enabled: Option<Spanned<bool>>,
    order: Option<List>,
    interval_ms: Option<Int>,
    timeout_ms: Option<Int>,
    tolerance_ms: Option<Int>,
    ldns_timeout_s: Option<Int>,
    ldns_mask_v4: Option<Int>,
    ldns_mask_v6: Option<Int>,
    max_rate: Option<Int>,
    max_concurrent: Option<Int>,
    /// LDNS entries kept at most (default 100,000); more evict the least recently seen.
    max_ldns: Option<Int>,
    /// Prefixes whose sources are never recorded nor probed (wins over `allow`).
    deny: Option<List>,
    /// Prefixes admitted although martian or this host's (loopback labs), unless denied.
    allow: Option<List>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawEngine {
    #[serde(default)]
    wildcard_mode: RawWildcardMode,
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum RawWildcardMode {
    #[default]
    Yes,
    No,
    Expression,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGslbView {
    view: Str,
    services: List,
}

// ---- Validation ----

/// A domain's load-balancing settings as written (borrowed: the domain is partly moved by then).
#[derive(Clone, Copy)]
struct RawLb<'a> {
    name: &'a Str,
    method: &'a Option<Spanned<Method>>,
    alternate: &'a Option<Spanned<Method>>,
    fallback: &'a Option<Spanned<Method>>,
    tolerance_ms: &'a Option<Int>,
    sourceip_mask: &'a Option<Spanned<RawMask>>,
    persistence: &'a Option<Spanned<RawPersistence>>,
}

/// A domain's load-balancing settings, validated.
struct LbSettings {
    method: Method,
    alternate: Option<Method>,
    fallback: Option<Method>,
    tolerance_ms: u32,
    sourceip_mask: SourceMask,
    persistence: Option<Persistence>,
}

struct Validator<'a> {
    text: &'a str,
    file: &'a Path,
}

/// Remembers where each key was first seen, to report duplicates with both places.
struct Seen<K>(HashMap<K, usize>);

impl<K: Eq + Hash> Seen<K> {
    fn new() -> Self {
        Seen(HashMap::new())
    }

    /// Records `key` at `line`; if it was already recorded, returns the first line.
    fn first(&mut self, key: K, line: usize) -> Option<usize> {
        match self.0.entry(key) {
            Entry::Occupied(e) => Some(*e.get()),
            Entry::Vacant(e) => {
                e.insert(line);
                None
            }
        }
    }
}

/// What later checks need to know about one zone's records.
#[derive(Default)]
struct ZoneFacts {
    /// Owner name → line of its first record.
    owners: HashMap<String, usize>,
    /// Delegation point (owner of an NS record below the apex) → line of its first NS record.
    delegations: HashMap<String, usize>,
    /// Every name server (apex `ns` and NS records) and where it was written.
    ns_targets: Vec<(String, Range<usize>)>,
}

impl ZoneFacts {
    /// The topmost delegation `name` is at or below, with its line.
    fn delegation_of(&self, name: &str) -> Option<(&str, usize)> {
        self.delegations
            .iter()
            .filter(|(d, _)| in_zone(name, d))
            .min_by_key(|(d, _)| d.len())
            .map(|(d, line)| (d.as_str(), *line))
    }
}

/// The defined objects of one kind, for "unknown X" messages.
struct Names<'a> {
    kind: &'a str,
    set: HashSet<&'a str>,
    order: Vec<&'a str>,
}

impl<'a> Names<'a> {
    fn new(kind: &'a str, names: impl IntoIterator<Item = &'a str>) -> Self {
        let order: Vec<&str> = names.into_iter().collect();
        Names {
            kind,
            set: order.iter().copied().collect(),
            order,
        }
    }

    fn contains(&self, name: &str) -> bool {
        self.set.contains(name)
    }

    /// "unknown site "x" (defined sites: a, b)".
    fn unknown(&self, name: &str) -> String {
        let kind = self.kind;
        if self.order.is_empty() {
            return format!("unknown {kind} {name:?} (no {kind}s are defined)");
        }
        let mut list = self.order[..self.order.len().min(LIST_NAMES)].join(", ");
        if self.order.len() > LIST_NAMES {
            list += &format!(", … ({} more)", self.order.len() - LIST_NAMES);
        }
        format!("unknown {kind} {name:?} (defined {kind}s: {list})")
    }
}

impl Validator<'_> {
    fn error(&self, span: Range<usize>, reason: impl Into<String>) -> ConfigError {
        let (line, column) = line_col(self.text, span.start);
        ConfigError::Invalid {
            file: self.file.to_owned(),
            line,
            column,
            reason: reason.into(),
        }
    }

    fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
        let span = e.span().unwrap_or(0..0);
        let reason = e.message().trim_end();
        // toml does not name the key, but its span covers it.
        match self.text.get(span.clone()) {
            Some(key) if reason == "duplicate key" && !key.is_empty() => {
                self.error(span, format!("duplicate key `{key}`"))
            }
            _ => self.error(span, reason),
        }
    }

    fn line(&self, span: Range<usize>) -> usize {
        line_col(self.text, span.start).0
    }

    fn config(&self, raw: RawConfig) -> Result<Config, ConfigError> {
        if let Some(old) = raw.old_domain {
            return Err(self.error(
                old.span(),
                "[[domain]] is no longer supported: declare the addresses as [[service]]s at a \
                 [[site]] and bind them to a [[gslb_domain]] inside a [[zone]] (see examples/)",
            ));
        }
        let site_span = raw.server.site.as_ref().map(|s| s.span());
        let server = self.server(raw.server)?;
        let views = self.views(raw.views)?;
        let (zones, facts) = self.zones(raw.zones)?;
        let site_spans: Vec<SiteSpans> = raw.sites.iter().map(SiteSpans::of).collect();
        let mep_written = raw.mep.is_some()
            || raw
                .sites
                .iter()
                .any(|s| s.role.is_some() || s.parent.is_some() || s.backup_parents.is_some());
        // The first MEP-only setting of each site, if any: (site, key, where).
        let mep_only: Vec<(String, &'static str, Range<usize>)> = raw
            .sites
            .iter()
            .filter_map(|s| {
                let written = [
                    ("role", s.role.as_ref().map(|r| r.span())),
                    ("parent", s.parent.as_ref().map(|p| p.span())),
                    (
                        "backup_parents",
                        s.backup_parents.as_ref().map(|l| l.span()),
                    ),
                    ("public_ip", s.public_ip.as_ref().map(|p| p.span())),
                    ("mep_port", s.mep_port.as_ref().map(|p| p.span())),
                    ("key", s.key.as_ref().map(|p| p.span())),
                    ("key_file", s.key_file.as_ref().map(|p| p.span())),
                    ("nat", s.nat.as_ref().map(|p| p.span())),
                ];
                written
                    .into_iter()
                    .find_map(|(key, span)| span.map(|span| (key, span)))
                    .map(|(key, span)| (s.name.get_ref().clone(), key, span))
            })
            .collect();
        let sites = self.sites(raw.sites)?;
        if let (Some(site), Some(span)) = (&server.site, site_span)
            && !sites.iter().any(|s| &s.name == site)
        {
            let names = Names::new("site", sites.iter().map(|s| s.name.as_str()));
            return Err(self.error(span, format!("server.site: {}", names.unknown(site))));
        }
        let monitor_weights: Vec<(String, Range<usize>)> = raw
            .monitors
            .iter()
            .filter_map(|m| {
                m.weight
                    .as_ref()
                    .map(|w| (m.name.get_ref().clone(), w.span()))
            })
            .collect();
        let (monitors, load_monitors) = self.monitors(raw.monitors)?;
        let load_spans = load::LoadSpans::of(&raw.services, &raw.gslb_domains);
        let load_bound = self.load_bindings(&raw.services, &monitors, &load_monitors)?;
        let mut services = self.services(raw.services, &sites, &monitors)?;
        for (service, bound) in services.iter_mut().zip(load_bound) {
            service.load_monitors = bound;
        }
        // A monitor's weight only counts toward a service's monitor_threshold.
        if let Some((name, span)) = monitor_weights.into_iter().find(|(name, _)| {
            !services
                .iter()
                .any(|s| s.monitor_threshold > 0 && s.monitors.contains(name))
        }) {
            return Err(self.error(
                span,
                format!(
                    "monitor {name:?}: weight only counts toward a service's monitor_threshold, \
                     and no service binding it sets one (without, every monitor must be UP)"
                ),
            ));
        }
        let topology = self.topology(raw.topology, &sites)?;
        let gslb_domains = self.gslb_domains(
            raw.gslb_domains,
            &zones,
            &facts,
            &views,
            &services,
            &topology,
        )?;
        self.name_servers_have_addresses(&zones, &facts, &gslb_domains)?;
        let actions = self.actions(raw.actions)?;
        let policies = self.policies(raw.policies, &actions)?;
        let engine = EngineSettings {
            wildcard_mode: match raw.engine.wildcard_mode {
                RawWildcardMode::Yes => WildcardMode::Yes,
                RawWildcardMode::No => WildcardMode::No,
                RawWildcardMode::Expression => WildcardMode::Expression,
            },
        };
        let locations = self.locations(raw.location_files, raw.custom_locations)?;
        let rtt = self.rtt(raw.rtt, server.site.is_some())?;
        // Without MEP settings the sites are only answer locations: no topology limits apply.
        if mep_written {
            self.mep_topology(&sites, &site_spans)?;
        }
        let mep = self.mep(raw.mep, &server, &sites, &site_spans)?;
        // Roles, parents, backup lists, MEP ports and public addresses only act through MEP:
        // without it a "child" would answer GSLB queries like a parent. (`enabled = false`
        // keeps them, switched off on purpose: the site then runs standalone.)
        if mep.is_none()
            && let Some((site, key, span)) = mep_only.into_iter().next()
        {
            return Err(self.error(
                span,
                format!(
                    "site {site:?}: {key} is a metric exchange setting, and there is no [mep] \
                     section: configure [mep] (enabled = false to keep it off) or remove it"
                ),
            ));
        }
        let links = self.links(raw.links, &services, server.site.as_deref())?;
        self.load_sources(
            &load_spans,
            &server,
            mep.as_ref(),
            &services,
            &gslb_domains,
            &links,
            &load_monitors,
        )?;
        let rrl = self.rrl(raw.rrl)?;
        Ok(Config {
            rrl,
            links,
            mep,
            rtt,
            monitors,
            load_monitors,
            server,
            views,
            zones,
            sites,
            services,
            gslb_domains,
            topology,
            actions,
            policies,
            engine,
            locations,
        })
    }

    /// An integer setting: `default` when absent, else checked against `range`.
    fn int<T>(
        &self,
        owner: &str,
        key: &str,
        raw: Option<Int>,
        range: RangeInclusive<i64>,
        default: T,
    ) -> Result<T, ConfigError>
    where
        T: TryFrom<i64>,
        T::Error: fmt::Debug,
    {
        match raw {
            None => Ok(default),
            Some(v) if range.contains(v.get_ref()) => {
                Ok(T::try_from(*v.get_ref()).expect("range fits the type"))
            }
            Some(v) => Err(self.error(
                v.span(),
                format!("{owner}: {key} {} out of range {range:?}", v.get_ref()),
            )),
        }
    }

    fn ttl(&self, owner: &str, raw: Option<Int>, default: u32) -> Result<u32, ConfigError> {
        self.int(owner, "ttl", raw, TTL_RANGE, default)
    }

    /// A DNS name checked by `check`; errors read "{what} "as written": reason".
    fn dns_name(
        &self,
        raw: &Str,
        what: &str,
        check: impl FnOnce(&str) -> Result<String, String>,
    ) -> Result<String, ConfigError> {
        check(raw.get_ref()).map_err(|reason| {
            self.error(raw.span(), format!("{what} {:?}: {reason}", raw.get_ref()))
        })
    }

    /// `[[monitor]]`s: the health monitors, and the load monitors (config/load.rs).
    #[allow(clippy::type_complexity)]
    fn monitors(
        &self,
        raw: Vec<RawMonitor>,
    ) -> Result<
        (
            Vec<crate::health::MonitorSpec>,
            Vec<crate::health::load::LoadMonitorSpec>,
        ),
        ConfigError,
    > {
        use crate::health::{DnsCheck, HttpCheck, MonitorKind, MonitorSpec, TlsCheck};
        let mut names = Seen::new();
        let mut out = Vec::new();
        let mut load = Vec::new();
        for rm in raw {
            let name = self.object_name("monitor", &rm.name, &mut names)?;
            let owner = format!("monitor {name:?}");
            let kind = *rm.kind.get_ref();
            if kind == RawMonitorType::Load {
                load.push(self.load_monitor(&rm, name)?);
                continue;
            }
            self.no_load_keys(&rm, &owner)?;
            // A setting of another monitor type is a mistake worth saying, not ignoring.
            let only = |present: bool,
                        span: Option<Range<usize>>,
                        key: &str,
                        types: &[RawMonitorType],
                        label: &str| {
                if present && !types.contains(&kind) {
                    return Err(self.error(
                        span.unwrap_or(rm.kind.span()),
                        format!("{owner}: {key} applies to {label} monitors only"),
                    ));
                }
                Ok(())
            };
            use RawMonitorType::*;
            only(
                rm.path.is_some(),
                rm.path.as_ref().map(|v| v.span()),
                "path",
                &[Http, Https],
                "http and https",
            )?;
            only(
                rm.host.is_some(),
                rm.host.as_ref().map(|v| v.span()),
                "host",
                &[Http, Https],
                "http and https",
            )?;
            only(
                rm.expect_status.is_some(),
                rm.expect_status.as_ref().map(|v| v.span()),
                "expect_status",
                &[Http, Https],
                "http and https",
            )?;
            only(
                rm.body_contains.is_some(),
                rm.body_contains.as_ref().map(|v| v.span()),
                "body_contains",
                &[Http, Https],
                "http and https",
            )?;
            only(
                rm.insecure.is_some(),
                rm.insecure.as_ref().map(|v| v.span()),
                "insecure",
                &[Https],
                "https",
            )?;
            only(
                rm.sni.is_some(),
                rm.sni.as_ref().map(|v| v.span()),
                "sni",
                &[Https],
                "https",
            )?;
            only(
                rm.ca_file.is_some(),
                rm.ca_file.as_ref().map(|v| v.span()),
                "ca_file",
                &[Https],
                "https",
            )?;
            // An ICMP echo has no port to check.
            only(
                rm.port.is_some(),
                rm.port.as_ref().map(|v| v.span()),
                "port",
                &[Tcp, Http, Https, Dns],
                "tcp, http, https and dns",
            )?;
            // A certificate that is not verified needs no CA to verify it.
            if let (Some(i), Some(ca)) = (&rm.insecure, &rm.ca_file)
                && *i.get_ref()
            {
                return Err(self.error(
                    ca.span(),
                    format!(
                        "{owner}: ca_file is not read with insecure = true (the certificate is \
                         not verified): remove one"
                    ),
                ));
            }
            for (v, key) in [
                (&rm.qname, "qname"),
                (&rm.qtype, "qtype"),
                (&rm.expect_rcode, "expect_rcode"),
                (&rm.expect_answer, "expect_answer"),
            ] {
                only(
                    v.is_some(),
                    v.as_ref().map(|v| v.span()),
                    key,
                    &[Dns],
                    "dns",
                )?;
            }
            let mut expect_status = Vec::new();
            if let Some(list) = &rm.expect_status {
                for code in list.get_ref() {
                    let Ok(code) = u16::try_from(*code).map_err(drop).and_then(|c| {
                        if (100..=599).contains(&c) {
                            Ok(c)
                        } else {
                            Err(())
                        }
                    }) else {
                        return Err(self.error(
                            list.span(),
                            format!(
                                "{owner}: expect_status {code} is not an HTTP status (100-599)"
                            ),
                        ));
                    };
                    expect_status.push(code);
                }
            }
            let http = || HttpCheck {
                path: rm
                    .path
                    .as_ref()
                    .map_or("/".to_owned(), |p| p.get_ref().clone()),
                host: rm.host.as_ref().map(|h| h.get_ref().clone()),
                expect_status: expect_status.clone(),
                body_contains: rm.body_contains.as_ref().map(|b| b.get_ref().clone()),
            };
            let kind = match kind {
                Tcp => MonitorKind::Tcp,
                Icmp => MonitorKind::Icmp,
                Http => MonitorKind::Http(http()),
                Https => MonitorKind::Https(
                    http(),
                    TlsCheck {
                        insecure: rm.insecure.as_ref().is_some_and(|i| *i.get_ref()),
                        sni: rm.sni.as_ref().map(|s| s.get_ref().clone()),
                        // Relative to the configuration file, as every other file it names.
                        ca_file: rm.ca_file.as_ref().map(|f| self.path(f.get_ref())),
                    },
                ),
                Load => unreachable!("load monitors are read above"),
                Dns => {
                    let Some(qname) = &rm.qname else {
                        return Err(self.error(
                            rm.kind.span(),
                            format!("{owner}: a dns monitor needs qname"),
                        ));
                    };
                    let qtype = match &rm.qtype {
                        Some(t) => t.get_ref().to_uppercase().parse().map_err(|_| {
                            self.error(
                                t.span(),
                                format!("{owner}: qtype {:?} is not a DNS type", t.get_ref()),
                            )
                        })?,
                        None => hickory_proto::rr::RecordType::A,
                    };
                    let mut check = DnsCheck::new(qname.get_ref().clone(), qtype);
                    if let Some(r) = &rm.expect_rcode {
                        check.expect_rcode = match r.get_ref().to_uppercase().as_str() {
                            "NOERROR" => hickory_proto::op::ResponseCode::NoError,
                            "NXDOMAIN" => hickory_proto::op::ResponseCode::NXDomain,
                            "REFUSED" => hickory_proto::op::ResponseCode::Refused,
                            "SERVFAIL" => hickory_proto::op::ResponseCode::ServFail,
                            other => return Err(self.error(r.span(), format!("{owner}: expect_rcode {other:?}: one of NOERROR, NXDOMAIN, REFUSED, SERVFAIL"))),
                        };
                    }
                    if let Some(a) = &rm.expect_answer {
                        check.expect_answer = Some(self.ip(&owner, "expect_answer", a)?);
                    }
                    MonitorKind::Dns(check)
                }
            };
            let mut spec = MonitorSpec::new(name, kind);
            if rm.port.is_some() {
                spec.port = Some(self.int(&owner, "port", rm.port, PORT_RANGE, 0)?);
            }
            let ms =
                |v: Option<Int>, key: &str, default: Duration| -> Result<Duration, ConfigError> {
                    Ok(match v {
                        None => default,
                        v => Duration::from_millis(self.int(&owner, key, v, 1..=3_600_000, 0)?),
                    })
                };
            spec.interval = ms(rm.interval_ms, "interval_ms", spec.interval)?;
            spec.timeout = ms(rm.timeout_ms, "timeout_ms", spec.timeout)?;
            spec.fall = self.int(&owner, "fall", rm.fall, 1..=100, spec.fall)?;
            spec.rise = self.int(&owner, "rise", rm.rise, 1..=100, spec.rise)?;
            spec.weight = self.int(&owner, "weight", rm.weight, 1..=100, spec.weight)?;
            out.push(spec);
        }
        Ok((out, load))
    }

    fn locations(
        &self,
        files: RawLocationFiles,
        custom: Vec<RawCustomLocation>,
    ) -> Result<LocationSources, ConfigError> {
        use crate::location::netscaler::FileFormat;
        let mut entries = Vec::new();
        for c in custom {
            let owner = format!("location {:?}", c.location.get_ref());
            let from = self.ip(&owner, "from", &c.from)?;
            let to = self.ip(&owner, "to", &c.to)?;
            if from.is_ipv4() != to.is_ipv4() {
                return Err(self.error(
                    c.to.span(),
                    format!("{owner}: from {from} and to {to} are of different families"),
                ));
            }
            let ordered = match (from, to) {
                (IpAddr::V4(a), IpAddr::V4(b)) => a <= b,
                (IpAddr::V6(a), IpAddr::V6(b)) => a <= b,
                _ => false,
            };
            if !ordered {
                return Err(self.error(
                    c.to.span(),
                    format!("{owner}: to {to} is below from {from}"),
                ));
            }
            let location = Location::parse(c.location.get_ref())
                .map_err(|reason| self.error(c.location.span(), format!("{owner}: {reason}")))?;
            entries.push((self.line(c.location.span()), from, to, location));
        }
        let mut located: Vec<LocationFile> = files
            .netscaler
            .into_iter()
            .map(|path| LocationFile {
                path: path.into(),
                format: FileFormat::Netscaler,
            })
            .collect();
        for f in files.file {
            let owner = format!("locations.file {:?}", f.path.get_ref());
            if f.path.get_ref().is_empty() {
                return Err(self.error(f.path.span(), format!("{owner}: path is empty")));
            }
            let format = match &f.format {
                None => FileFormat::Netscaler,
                Some(name) => FileFormat::from_name(name.get_ref()).ok_or_else(|| {
                    self.error(
                        name.span(),
                        format!(
                            "{owner}: unknown format {:?}; NetScaler's formats are {}",
                            name.get_ref(),
                            FileFormat::names().collect::<Vec<_>>().join(", ")
                        ),
                    )
                })?,
            };
            located.push(LocationFile {
                path: f.path.into_inner().into(),
                format,
            });
        }
        Ok(LocationSources {
            files: located,
            mmdb_city: files.mmdb_city.map(PathBuf::from),
            mmdb_asn: files.mmdb_asn.map(PathBuf::from),
            continent_codes: files.continent == RawContinent::Code,
            custom: entries,
        })
    }

    fn ip(&self, owner: &str, key: &str, raw: &Str) -> Result<IpAddr, ConfigError> {
        raw.get_ref().parse().map_err(|_| {
            self.error(
                raw.span(),
                format!("{owner}: {key} {:?} is not an IP address", raw.get_ref()),
            )
        })
    }

    /// The optional `public_ip` of something whose `ip` is `ip`: same family.
    fn public_ip(
        &self,
        owner: &str,
        ip: IpAddr,
        raw: Option<Str>,
    ) -> Result<Option<IpAddr>, ConfigError> {
        let Some(raw) = raw else {
            return Ok(None);
        };
        let public = self.ip(owner, "public_ip", &raw)?;
        if public.is_ipv4() != ip.is_ipv4() {
            return Err(self.error(
                raw.span(),
                format!(
                    "{owner}: public_ip {public} is {} but ip {ip} is {}; they must be of one family",
                    family(public),
                    family(ip)
                ),
            ));
        }
        Ok(Some(public))
    }

    /// The name of a site or service, unique among `seen`.
    fn object_name(
        &self,
        kind: &str,
        raw: &Str,
        seen: &mut Seen<String>,
    ) -> Result<String, ConfigError> {
        let name = raw.get_ref();
        let err = |reason: &str| self.error(raw.span(), format!("{kind} name {name:?}: {reason}"));
        let mut chars = name.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
            return Err(err(
                "only letters, digits, '-', '_' and '.' are allowed, starting with a letter, digit or '_'",
            ));
        }
        if let Some(first) = seen.first(name.clone(), self.line(raw.span())) {
            return Err(err(&format!("defined twice (first on line {first})")));
        }
        Ok(name.clone())
    }

    fn server(&self, raw: RawServer) -> Result<Server, ConfigError> {
        let dns_port = match raw.dns_port {
            None => DEFAULT_DNS_PORT,
            Some(p) => match u16::try_from(*p.get_ref()) {
                Ok(port) if port != 0 => port,
                _ => {
                    return Err(self.error(
                        p.span(),
                        format!("server.dns_port: {} is not a port (1..=65535)", p.get_ref()),
                    ));
                }
            },
        };

        let edns_udp_size = match raw.edns_udp_size {
            None => DEFAULT_EDNS_UDP_SIZE,
            Some(s) if EDNS_UDP_SIZE_RANGE.contains(s.get_ref()) => *s.get_ref() as u16,
            Some(s) => {
                return Err(self.error(
                    s.span(),
                    format!(
                        "server.edns_udp_size: {} out of range {EDNS_UDP_SIZE_RANGE:?}",
                        s.get_ref()
                    ),
                ));
            }
        };

        if raw.listen.get_ref().is_empty() {
            return Err(self.error(
                raw.listen.span(),
                "server.listen: at least one address is required",
            ));
        }
        let mut seen = Seen::new();
        let mut listen = Vec::new();
        for s in raw.listen.into_inner() {
            let ip: IpAddr = s.get_ref().parse().map_err(|_| {
                self.error(
                    s.span(),
                    format!("server.listen: {:?} is not an IP address", s.get_ref()),
                )
            })?;
            if let Some(first) = seen.first(ip, self.line(s.span())) {
                return Err(self.error(
                    s.span(),
                    format!("server.listen: {ip} listed twice (first on line {first})"),
                ));
            }
            listen.push(ip);
        }

        let interface = match raw.interface {
            None => None,
            Some(i) => {
                // The kernel's own rule, so a typo fails here, not at attach time.
                let name = i.get_ref();
                if !crate::health::link::valid_interface_name(name) {
                    return Err(self.error(
                        i.span(),
                        format!("server.interface: {name:?} is not a valid interface name"),
                    ));
                }
                Some(i.into_inner())
            }
        };

        let pin_path = match raw.pin_path {
            None => PathBuf::from(DEFAULT_PIN_PATH),
            // A relative pin path would depend on the daemon's working directory.
            Some(p) if Path::new(p.get_ref()).is_absolute() => PathBuf::from(p.into_inner()),
            Some(p) => {
                return Err(self.error(
                    p.span(),
                    format!(
                        "server.pin_path: {:?} must be an absolute path",
                        p.get_ref()
                    ),
                ));
            }
        };

        let tcp = self.tcp_limits(
            raw.tcp_max_connections,
            raw.tcp_max_per_address,
            raw.tcp_idle_timeout_ms,
            raw.tcp_message_timeout_ms,
        )?;
        let ecs_allow = raw.ecs_allow.map(|l| self.ecs_allow(l)).transpose()?;
        let stale_after = match raw.stale_after_s {
            None => Some(Duration::from_secs(DEFAULT_STALE_AFTER_S as u64)),
            Some(s) if *s.get_ref() == 0 => None,
            Some(s) if STALE_AFTER_RANGE.contains(s.get_ref()) => {
                Some(Duration::from_secs(*s.get_ref() as u64))
            }
            Some(s) => {
                return Err(self.error(
                    s.span(),
                    format!(
                        "server.stale_after_s: {} out of range (0 = never, or {STALE_AFTER_RANGE:?} seconds)",
                        s.get_ref()
                    ),
                ));
            }
        };

        Ok(Server {
            dns_port,
            listen,
            edns_udp_size,
            interface,
            xdp_mode: raw.xdp_mode,
            pin_path,
            // Checked against the sites once they are read (Validator::config).
            site: raw.site.map(Spanned::into_inner),
            tcp,
            ecs_allow,
            stale_after,
        })
    }

    fn views(&self, raw: Vec<RawView>) -> Result<Vec<View>, ConfigError> {
        let mut names = Seen::new();
        // Prefix → (owning view, line); also catches a prefix repeated within one view.
        let mut owners: HashMap<IpNet, (String, usize)> = HashMap::new();
        let mut views = Vec::new();
        for rv in raw {
            let name = rv.name.get_ref();
            let name_err =
                |reason: &str| self.error(rv.name.span(), format!("view name {name:?}: {reason}"));
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(name_err("only letters, digits, '-' and '_' are allowed"));
            }
            if name.eq_ignore_ascii_case(DEFAULT_VIEW) {
                return Err(name_err(
                    "reserved for clients in no view; choose another name",
                ));
            }
            if let Some(first) = names.first(name.clone(), self.line(rv.name.span())) {
                return Err(name_err(&format!("defined twice (first on line {first})")));
            }

            if rv.prefixes.get_ref().is_empty() {
                return Err(self.error(
                    rv.prefixes.span(),
                    format!("view {name:?}: prefixes is empty"),
                ));
            }
            let mut prefixes = Vec::new();
            for p in rv.prefixes.get_ref() {
                let err = |reason: String| self.error(p.span(), format!("view {name:?}: {reason}"));
                let net = self.prefix(p, &format!("view {name:?}"))?;
                match owners.entry(net) {
                    Entry::Occupied(e) => {
                        let (owner, line) = e.get();
                        return Err(err(if owner == name {
                            format!("prefix {net} listed twice (first on line {line})")
                        } else {
                            format!(
                                "prefix {net} is already in view {owner:?} (line {line}); a prefix may be in only one view"
                            )
                        }));
                    }
                    Entry::Vacant(e) => {
                        e.insert((name.clone(), self.line(p.span())));
                    }
                }
                prefixes.push(net);
            }
            views.push(View {
                name: rv.name.into_inner(),
                prefixes,
            });
        }
        Ok(views)
    }

    fn zones(&self, raw: Vec<RawZone>) -> Result<(Vec<Zone>, Vec<ZoneFacts>), ConfigError> {
        let mut apexes: Vec<(String, usize)> = Vec::new();
        let mut zones = Vec::new();
        let mut all_facts = Vec::new();
        for rz in raw {
            let name = self.dns_name(&rz.name, "zone name", domain_name)?;
            for (other, line) in &apexes {
                let reason = if *other == name {
                    format!("zone {name:?} defined twice (first on line {line})")
                } else if in_zone(&name, other) {
                    format!(
                        "zone {name:?} is inside zone {other:?} (line {line}); nested zones are not \
                         supported: put its records in {other:?}, or delegate it there with NS records"
                    )
                } else if in_zone(other, &name) {
                    format!(
                        "zone {name:?} contains zone {other:?} (line {line}); nested zones are not \
                         supported: merge them into one"
                    )
                } else {
                    continue;
                };
                return Err(self.error(rz.name.span(), reason));
            }
            apexes.push((name.clone(), self.line(rz.name.span())));
            let owner = format!("zone {name:?}");
            let ttl = self.ttl(&owner, rz.ttl, DEFAULT_ZONE_TTL)?;

            if rz.ns.get_ref().is_empty() {
                return Err(self.error(
                    rz.ns.span(),
                    format!("{owner}: ns is empty; list the zone's name servers"),
                ));
            }
            let mut facts = ZoneFacts::default();
            let mut seen = Seen::new();
            let mut ns = Vec::new();
            for s in rz.ns.get_ref() {
                let target = self.dns_name(s, &format!("{owner}: ns"), host_name)?;
                if let Some(first) = seen.first(target.clone(), self.line(s.span())) {
                    return Err(self.error(
                        s.span(),
                        format!("{owner}: ns {target} listed twice (first on line {first})"),
                    ));
                }
                facts.ns_targets.push((target.clone(), s.span()));
                ns.push(target);
            }
            let soa = self.soa(&owner, rz.soa, &ns[0])?;
            let records = self.records(&owner, &name, ttl, rz.records, &mut facts)?;
            zones.push(Zone {
                name,
                ttl,
                ns,
                soa,
                records,
            });
            all_facts.push(facts);
        }
        Ok((zones, all_facts))
    }

    fn soa(&self, owner: &str, raw: RawSoa, first_ns: &str) -> Result<Soa, ConfigError> {
        let mname = match raw.mname {
            None => first_ns.to_owned(),
            Some(m) => self.dns_name(&m, &format!("{owner}: soa.mname"), host_name)?,
        };
        let rname = self.dns_name(&raw.rname, &format!("{owner}: soa.rname"), |r| {
            if r.contains('@') {
                return Err(format!(
                    "write the mailbox as a name, with '.' for '@' ({:?})",
                    r.replace('@', ".")
                ));
            }
            host_name(r)
        })?;
        let key = |k: &str| format!("soa.{k}");
        Ok(Soa {
            mname,
            rname,
            serial: self.int(
                owner,
                &key("serial"),
                raw.serial,
                SERIAL_RANGE,
                DEFAULT_SOA_SERIAL,
            )?,
            refresh: self.int(
                owner,
                &key("refresh"),
                raw.refresh,
                TTL_RANGE,
                DEFAULT_SOA_REFRESH,
            )?,
            retry: self.int(
                owner,
                &key("retry"),
                raw.retry,
                TTL_RANGE,
                DEFAULT_SOA_RETRY,
            )?,
            expire: self.int(
                owner,
                &key("expire"),
                raw.expire,
                TTL_RANGE,
                DEFAULT_SOA_EXPIRE,
            )?,
            minimum: self.int(
                owner,
                &key("minimum"),
                raw.minimum,
                TTL_RANGE,
                DEFAULT_SOA_MINIMUM,
            )?,
        })
    }

    /// One zone's static records; fills `facts` (owners, delegations, NS targets).
    fn records(
        &self,
        owner: &str,
        apex: &str,
        default_ttl: u32,
        raw: Vec<RawRecord>,
        facts: &mut ZoneFacts,
    ) -> Result<Vec<StaticRecord>, ConfigError> {
        let mut records = Vec::new();
        let mut written = Vec::new();
        for rr in raw {
            let name = self.dns_name(&rr.name, &format!("{owner}: record name"), |n| {
                owner_name(n, apex)
            })?;
            let data = self.record_data(owner, apex, &name, &rr)?;
            let ttl = self.ttl(
                &format!("{owner}, record {name} {}", data.type_name()),
                rr.ttl.clone(),
                default_ttl,
            )?;
            records.push(StaticRecord { name, ttl, data });
            written.push(rr);
        }

        // Delegations first: a record written before its delegation's NS is still below it.
        for (r, rr) in records.iter().zip(&written) {
            if let RecordData::Ns(target) = &r.data {
                facts.ns_targets.push((target.clone(), rr.value.span()));
                if r.name != apex {
                    facts
                        .delegations
                        .entry(r.name.clone())
                        .or_insert(self.line(rr.name.span()));
                }
            }
        }

        let mut seen = Seen::new();
        // (owner, type) → (TTL, line): an RRset has one TTL (RFC 2181 §5.2).
        let mut rrsets: HashMap<(&str, u16), (u32, usize)> = HashMap::new();
        // Owner → (line, type) of its first record and of its CNAME.
        let mut first_at: HashMap<&str, (usize, &str)> = HashMap::new();
        let mut cname_at: HashMap<&str, usize> = HashMap::new();
        for (r, rr) in records.iter().zip(&written) {
            let (name, rtype) = (r.name.as_str(), r.data.type_name());
            let line = self.line(rr.name.span());
            let what = format!("{owner}, record {name} {rtype}");
            let at_name = |reason: String| self.error(rr.name.span(), format!("{what}: {reason}"));

            if name == apex {
                match r.data {
                    RecordData::Ns(_) => {
                        return Err(at_name(
                            "the apex NS records are the zone's ns list; add the name server there"
                                .into(),
                        ));
                    }
                    RecordData::Cname(_) => {
                        return Err(at_name(
                            "a CNAME cannot be at the apex, which has SOA and NS records".into(),
                        ));
                    }
                    _ => {}
                }
            }
            if let Some(first) = seen.first(r.clone(), line) {
                return Err(self.error(
                    rr.value.span(),
                    format!(
                        "{what}: {:?} listed twice (first on line {first})",
                        rr.value.get_ref()
                    ),
                ));
            }
            let is_cname = matches!(r.data, RecordData::Cname(_));
            if let Some(&(first, first_type)) = first_at.get(name) {
                let clash = if is_cname {
                    Some((first, first_type))
                } else {
                    cname_at.get(name).map(|&l| (l, "CNAME"))
                };
                if let Some((other, other_type)) = clash {
                    return Err(at_name(format!(
                        "a CNAME must be the only record at its name ({other_type} on line {other})"
                    )));
                }
            }
            first_at.entry(name).or_insert((line, rtype));
            facts.owners.entry(name.to_owned()).or_insert(line);
            if is_cname {
                cname_at.insert(name, line);
            }
            match rrsets.entry((name, r.data.rtype())) {
                Entry::Occupied(e) if e.get().0 != r.ttl => {
                    let (ttl, first) = *e.get();
                    let span = rr.ttl.as_ref().map_or(rr.name.span(), |t| t.span());
                    return Err(self.error(
                        span,
                        format!(
                            "{what}: TTL {} differs from TTL {ttl} of the {name} {rtype} record on \
                             line {first}; the records of one name and type share one TTL",
                            r.ttl
                        ),
                    ));
                }
                Entry::Occupied(_) => {}
                Entry::Vacant(e) => {
                    e.insert((r.ttl, line));
                }
            }
            if let Some((cut, cut_line)) = facts.delegation_of(name) {
                let allowed = match r.data {
                    RecordData::A(_) | RecordData::Aaaa(_) => true,
                    RecordData::Ns(_) => name == cut,
                    _ => false,
                };
                if !allowed {
                    return Err(at_name(format!(
                        "{name} is at or below the delegation of {cut} (NS on line {cut_line}), \
                         where only NS records and glue A/AAAA records belong"
                    )));
                }
            }
        }
        Ok(records)
    }

    /// The data of one record; errors point at its type or value.
    fn record_data(
        &self,
        owner: &str,
        apex: &str,
        name: &str,
        rr: &RawRecord,
    ) -> Result<RecordData, ConfigError> {
        let rtype = rr.rtype.get_ref().to_ascii_uppercase();
        let value = rr.value.get_ref();
        let what = format!("{owner}, record {name} {rtype}");
        let err = |reason: String| self.error(rr.value.span(), format!("{what}: {reason}"));
        let target = |raw: &str, allow_root: bool| {
            target_name(raw, apex, allow_root).map_err(|reason| err(format!("{raw:?}: {reason}")))
        };
        let number = |raw: &str, field: &str| {
            raw.parse::<u16>()
                .map_err(|_| err(format!("{field} {raw:?} is not a number in 0..=65535")))
        };
        let fields: Vec<&str> = value.split_whitespace().collect();
        Ok(match rtype.as_str() {
            "A" | "AAAA" => {
                let ip: IpAddr = value
                    .parse()
                    .map_err(|_| err(format!("{value:?} is not an IP address")))?;
                match (ip, rtype.as_str()) {
                    (IpAddr::V4(v4), "A") => RecordData::A(v4),
                    (IpAddr::V6(v6), "AAAA") => RecordData::Aaaa(v6),
                    (IpAddr::V4(_), _) => {
                        return Err(err(format!("{ip} is an IPv4 address (use type A)")));
                    }
                    (IpAddr::V6(_), _) => {
                        return Err(err(format!("{ip} is an IPv6 address (use type AAAA)")));
                    }
                }
            }
            "CNAME" => RecordData::Cname(target(value, false)?),
            "NS" => RecordData::Ns(target(value, false)?),
            "TXT" => {
                let strings = txt_strings(value);
                let rdata_len = value.len() + strings.len();
                if rdata_len > usize::from(u16::MAX) {
                    return Err(err(format!(
                        "{} bytes of text in {} strings make {rdata_len} bytes of record data, at \
                         most 65535",
                        value.len(),
                        strings.len(),
                    )));
                }
                RecordData::Txt(strings)
            }
            "MX" => match fields[..] {
                [preference, exchange] => RecordData::Mx {
                    preference: number(preference, "preference")?,
                    exchange: target(exchange, true)?,
                },
                _ => {
                    return Err(err(format!(
                        "{value:?} is not \"preference exchange\" (e.g. \"10 mail.example.com.\")"
                    )));
                }
            },
            "SRV" => match fields[..] {
                [priority, weight, port, srv_target] => RecordData::Srv {
                    priority: number(priority, "priority")?,
                    weight: number(weight, "weight")?,
                    port: number(port, "port")?,
                    target: target(srv_target, true)?,
                },
                _ => {
                    return Err(err(format!(
                        "{value:?} is not \"priority weight port target\" (e.g. \"10 5 443 sip.example.com.\")"
                    )));
                }
            },
            "SOA" => {
                return Err(self.error(
                    rr.rtype.span(),
                    format!("{what}: the SOA record is [zone.soa]"),
                ));
            }
            _ => {
                return Err(self.error(
                    rr.rtype.span(),
                    format!(
                        "{owner}, record {name}: unknown type {:?} (supported: A, AAAA, CNAME, TXT, MX, NS, SRV)",
                        rr.rtype.get_ref()
                    ),
                ));
            }
        })
    }

    fn sites(&self, raw: Vec<RawSite>) -> Result<Vec<Site>, ConfigError> {
        let mut names = Seen::new();
        let mut ips: HashMap<IpAddr, (String, usize)> = HashMap::new();
        let mut sites = Vec::new();
        for rs in raw {
            let name = self.object_name("site", &rs.name, &mut names)?;
            let owner = format!("site {name:?}");
            let ip = self.ip(&owner, "ip", &rs.ip)?;
            if let Some((other, line)) = ips.get(&ip) {
                return Err(self.error(
                    rs.ip.span(),
                    format!("{owner}: ip {ip} is already site {other:?}'s (line {line})"),
                ));
            }
            ips.insert(ip, (name.clone(), self.line(rs.ip.span())));
            let public_ip = self.public_ip(&owner, ip, rs.public_ip)?;
            let mep_port = self.int(
                &owner,
                "mep_port",
                rs.mep_port,
                PORT_RANGE,
                crate::mep::DEFAULT_PORT,
            )?;
            let key = self.site_key(&owner, rs.key, rs.key_file)?;
            // References are checked with the whole topology (Validator::mep_topology).
            sites.push(Site {
                name,
                ip,
                public_ip,
                role: match rs.role.map(Spanned::into_inner) {
                    None | Some(RawRole::Parent) => crate::mep::Role::Parent,
                    Some(RawRole::Child) => crate::mep::Role::Child,
                },
                parent: rs.parent.map(Spanned::into_inner),
                backup_parents: rs
                    .backup_parents
                    .map(|l| {
                        l.into_inner()
                            .into_iter()
                            .map(Spanned::into_inner)
                            .collect()
                    })
                    .unwrap_or_default(),
                mep_port,
                key,
                nat: rs.nat.is_some_and(|n| n.into_inner()),
            });
        }
        Ok(sites)
    }

    /// A `[[site]]`'s public key, inline (`key`) or in a PEM file (`key_file`).
    fn site_key(
        &self,
        owner: &str,
        key: Option<Str>,
        key_file: Option<Str>,
    ) -> Result<Option<crate::mep::PublicKey>, ConfigError> {
        let (text, raw, what) = match (key, key_file) {
            (None, None) => return Ok(None),
            (Some(_), Some(f)) => {
                return Err(self.error(
                    f.span(),
                    format!("{owner}: key and key_file are both set; keep one"),
                ));
            }
            (Some(k), None) => (k.get_ref().clone(), k, "key"),
            (None, Some(f)) => {
                let bytes = self.read_file(owner, "key_file", &f)?;
                (String::from_utf8_lossy(&bytes).into_owned(), f, "key_file")
            }
        };
        crate::mep::PublicKey::parse(&text).map(Some).map_err(|e| {
            self.error(
                raw.span(),
                format!("{owner}: {what}: {e} (`openssl pkey -in site.pem -pubout` prints it)"),
            )
        })
    }

    /// The `[[site]]`s as a MEP topology; a [`crate::mep::TopologyError`] is reported at the
    /// value that causes it.
    fn mep_topology(&self, sites: &[Site], spans: &[SiteSpans]) -> Result<(), ConfigError> {
        use crate::mep::TopologyError as E;
        let Err(error) = crate::mep::SiteTree::new(site_specs(sites)) else {
            return Ok(());
        };
        let at = |name: &str| sites.iter().position(|s| s.name == name).map(|i| &spans[i]);
        let first = spans.first().map_or(0..0, |s| s.name.clone());
        let (span, hint) = match &error {
            E::DuplicateSite(n) | E::BadName(n) | E::UnknownSite(n) => {
                (at(n).map(|s| s.name.clone()), "")
            }
            E::DuplicateIp(_, n, _) => (at(n).map(|s| s.name.clone()), ""),
            // The first site over the limit.
            E::TooManyParents(_) | E::TooManyChildren(_) => {
                let child = matches!(error, E::TooManyChildren(_));
                let limit = if child {
                    crate::mep::topology::MAX_CHILDREN
                } else {
                    crate::mep::topology::MAX_PARENTS
                };
                let over = sites
                    .iter()
                    .zip(spans)
                    .filter(|(s, _)| (s.role == crate::mep::Role::Child) == child)
                    .nth(limit)
                    .map(|(_, sp)| sp.role.clone().unwrap_or_else(|| sp.name.clone()));
                (over, "")
            }
            E::NoParent(n) => (
                at(n).map(|s| s.role.clone().unwrap_or_else(|| s.name.clone())),
                " (set parent = \"…\")",
            ),
            E::ParentWithParent(n) => (
                at(n).and_then(|s| s.parent.clone()),
                " (a child needs role = \"child\")",
            ),
            E::BadParent { child, .. } => (at(child).and_then(|s| s.parent.clone()), ""),
            E::ChildWithBackups { site } | E::TooManyBackups { site, .. } => (
                at(site).and_then(|s| s.backups.as_ref().map(|b| b.0.clone())),
                "",
            ),
            E::BadBackup { site, backup, why } => {
                // The entry the check stopped at: the second of a name listed twice.
                let nth = usize::from(why.contains("twice"));
                let entry = at(site).and_then(|s| {
                    let list = &sites.iter().find(|x| &x.name == site)?.backup_parents;
                    let i = list
                        .iter()
                        .enumerate()
                        .filter(|(_, b)| *b == backup)
                        .nth(nth)?
                        .0;
                    s.backups.as_ref().map(|b| b.1[i].clone())
                });
                (entry, "")
            }
        };
        Err(self.error(
            span.unwrap_or(first),
            format!("[[site]] MEP topology: {error}{hint}"),
        ))
    }

    /// `[mep]`: needs `server.site`; this site's private key (read now, relative to the
    /// configuration file) matching its `[[site]] key`, and every other site's key; TLS files
    /// read and checked now. MEP 1's shared `secret` is refused with the way to keys.
    fn mep(
        &self,
        raw: Option<Spanned<RawMep>>,
        server: &Server,
        sites: &[Site],
        spans: &[SiteSpans],
    ) -> Result<Option<MepSettings>, ConfigError> {
        let Some(raw) = raw else { return Ok(None) };
        let section = raw.span();
        let raw = raw.into_inner();
        let owner = "mep";
        let enabled = raw.enabled.as_ref().is_none_or(|e| *e.get_ref());
        let local = server
            .site
            .as_deref()
            .and_then(|n| sites.iter().find(|s| s.name == n));
        let local = match local {
            Some(site) => site,
            None if !enabled => {
                // Off: nothing below is used, but what is written must still make sense.
                sites.first().map_or(&DISABLED_SITE, |s| s)
            }
            None => {
                let span = raw.enabled.as_ref().map_or(section.clone(), |e| e.span());
                return Err(self.error(
                    span,
                    "mep: needs server.site, the [[site]] this server is (its MEP identity and address)",
                ));
            }
        };
        let listen = match &raw.listen {
            None => SocketAddr::new(local.ip, local.mep_port),
            Some(l) => {
                let text = l.get_ref();
                match (text.parse::<SocketAddr>(), text.parse::<IpAddr>()) {
                    (Ok(addr), _) if addr.port() != 0 => addr,
                    (_, Ok(ip)) => SocketAddr::new(ip, local.mep_port),
                    _ => {
                        return Err(self.error(
                            l.span(),
                            format!("mep: listen {text:?} is not an address or address:port (port 1..=65535; IPv6 with a port as [addr]:port)"),
                        ));
                    }
                }
            }
        };
        if let Some(old) = raw.secret.as_ref().or(raw.secret_file.as_ref()) {
            return Err(self.error(
                old.span(),
                "mep: secret and secret_file (one secret shared by every site) are no longer \
                 accepted: each site now proves its name with its own key. Give this site \
                 private_key_file (`openssl genpkey -algorithm ed25519 -out site.pem`) and \
                 every [[site]] its public key (key = the base64 line of `openssl pkey -in \
                 site.pem -pubout`); see docs/mep.md",
            ));
        }
        let key = match &raw.private_key_file {
            None if enabled => {
                return Err(self.error(
                    section,
                    "mep: private_key_file is missing: this site's Ed25519 private key (PEM), \
                     which proves its name to the other sites",
                ));
            }
            None => None,
            Some(f) => {
                let pem = Secret(self.read_file(owner, "private_key_file", f)?);
                let key = crate::mep::SiteKey::from_pem(&pem.0)
                    .map_err(|e| self.error(f.span(), format!("mep: private_key_file: {e}")))?;
                Some(key)
            }
        };
        if enabled && let Some(key) = &key {
            for (site, spans) in sites.iter().zip(spans) {
                match site.key {
                    Some(k) if site.name == local.name && k != key.public() => {
                        return Err(self.error(
                            spans.key.clone().unwrap_or(spans.name.clone()),
                            format!(
                                "site {:?}: key is not the public key of mep.private_key_file \
                                 (this server's site; its public key is {})",
                                site.name,
                                key.public().fingerprint()
                            ),
                        ));
                    }
                    None if site.name != local.name => {
                        return Err(self.error(
                            spans.name.clone(),
                            format!(
                                "site {:?}: key (or key_file) is missing: a site's MEP links are \
                                 believed only once they prove its name with its key",
                                site.name
                            ),
                        ));
                    }
                    _ => {}
                }
            }
        }
        let tls = match raw.tls {
            None => None,
            Some(t) => {
                let span = t.span();
                let t = t.into_inner();
                let files = MepTlsFiles {
                    cert_file: self.path(t.cert_file.get_ref()),
                    key_file: self.path(t.key_file.get_ref()),
                    ca_file: self.path(t.ca_file.get_ref()),
                    cert_pem: self.read_file(owner, "tls.cert_file", &t.cert_file)?,
                    key_pem: Secret(self.read_file(owner, "tls.key_file", &t.key_file)?),
                    ca_pem: self.read_file(owner, "tls.ca_file", &t.ca_file)?,
                };
                if let Err(e) = files.tls() {
                    let at = match &e {
                        crate::mep::MepError::Tls(m) if m.starts_with("CA") => t.ca_file.span(),
                        crate::mep::MepError::Tls(m) if m.starts_with("private key") => {
                            t.key_file.span()
                        }
                        crate::mep::MepError::Tls(m) if m.starts_with("certificate:") => {
                            t.cert_file.span()
                        }
                        _ => span,
                    };
                    return Err(self.error(at, format!("mep: {e}")));
                }
                Some(files)
            }
        };
        let ms = |v: Option<Int>, key: &str, range: RangeInclusive<i64>, default: u64| {
            self.int(owner, key, v, range, default)
                .map(Duration::from_millis)
        };
        let dead_span = raw.dead_after_ms.as_ref().map(|d| d.span());
        let heartbeat = ms(raw.heartbeat_ms, "heartbeat_ms", 10..=60_000, 500)?;
        let dead_after = ms(raw.dead_after_ms, "dead_after_ms", 20..=600_000, 2_000)?;
        if dead_after <= heartbeat {
            return Err(self.error(
                dead_span.unwrap_or(section),
                format!(
                    "mep: dead_after_ms ({}) must be longer than heartbeat_ms ({})",
                    dead_after.as_millis(),
                    heartbeat.as_millis()
                ),
            ));
        }
        Ok(Some(MepSettings {
            enabled,
            listen,
            key,
            tls,
            heartbeat,
            dead_after,
        }))
    }

    /// `[[link]]`s: see [`Link`] for the rules.
    fn links(
        &self,
        raw: Vec<RawLink>,
        services: &[Service],
        local_site: Option<&str>,
    ) -> Result<Vec<Link>, ConfigError> {
        let service_names = Names::new("service", services.iter().map(|s| s.name.as_str()));
        let mut names = Seen::new();
        let mut interfaces: HashMap<String, (String, usize)> = HashMap::new();
        // Service → (its link, line).
        let mut carried: HashMap<String, (String, usize)> = HashMap::new();
        let mut out = Vec::new();
        for rl in raw {
            let name = self.object_name("link", &rl.name, &mut names)?;
            let owner = format!("link {name:?}");
            let interface = rl.interface.get_ref();
            if !crate::health::link::valid_interface_name(interface) {
                return Err(self.error(
                    rl.interface.span(),
                    format!("{owner}: interface {interface:?} is not a valid interface name"),
                ));
            }
            if let Some((other, line)) = interfaces.get(interface) {
                return Err(self.error(
                    rl.interface.span(),
                    format!(
                        "{owner}: interface {interface:?} is already link {other:?} (line {line})"
                    ),
                ));
            }
            interfaces.insert(interface.clone(), (name.clone(), self.line(rl.name.span())));
            let threshold_kbps = self.int(
                &owner,
                "threshold_kbps",
                Some(rl.threshold_kbps),
                LINK_THRESHOLD_RANGE,
                0,
            )?;
            let interval = Duration::from_millis(self.int(
                &owner,
                "interval_ms",
                rl.interval_ms,
                LINK_INTERVAL_RANGE,
                DEFAULT_LINK_INTERVAL_MS,
            )?);
            let over_after = self.int(
                &owner,
                "over_after",
                rl.over_after,
                1..=100,
                DEFAULT_LINK_SAMPLES,
            )?;
            let under_after = self.int(
                &owner,
                "under_after",
                rl.under_after,
                1..=100,
                DEFAULT_LINK_SAMPLES,
            )?;
            if rl.services.get_ref().is_empty() {
                return Err(self.error(
                    rl.services.span(),
                    format!("{owner}: services is empty; list the services whose answers travel over this link"),
                ));
            }
            let mut bound = Vec::new();
            for s in rl.services.get_ref() {
                let service = s.get_ref();
                let err = |reason: String| Err(self.error(s.span(), format!("{owner}: {reason}")));
                let Some(spec) = services.iter().find(|x| &x.name == service) else {
                    return err(service_names.unknown(service));
                };
                if bound.contains(service) {
                    return err(format!("service {service:?} listed twice"));
                }
                if let Some((other, line)) = carried.get(service) {
                    return err(format!(
                        "service {service:?} is already on link {other:?} (line {line}); a service is on one link at most"
                    ));
                }
                // This server samples its own interfaces only: another site's service does not
                // travel over them.
                if let Some(here) = local_site
                    && spec.site != here
                {
                    return err(format!(
                        "service {service:?} is at site {:?}, but this server (server.site) is {here:?}: a link is measured here, so only this site's services can be on it",
                        spec.site
                    ));
                }
                carried.insert(service.clone(), (name.clone(), self.line(s.span())));
                bound.push(service.clone());
            }
            out.push(Link {
                name,
                interface: rl.interface.into_inner(),
                threshold_kbps,
                interval,
                over_after,
                under_after,
                services: bound,
            });
        }
        Ok(out)
    }

    /// A path as written: relative ones are relative to the configuration file's directory.
    fn path(&self, written: &str) -> PathBuf {
        let p = Path::new(written);
        if p.is_absolute() {
            return p.to_owned();
        }
        self.file
            .parent()
            .map_or_else(|| p.to_owned(), |dir| dir.join(p))
    }

    fn read_file(&self, owner: &str, key: &str, raw: &Str) -> Result<Vec<u8>, ConfigError> {
        let path = self.path(raw.get_ref());
        std::fs::read(&path).map_err(|e| {
            self.error(
                raw.span(),
                format!("{owner}: {key}: cannot read {}: {e}", path.display()),
            )
        })
    }

    fn services(
        &self,
        raw: Vec<RawService>,
        sites: &[Site],
        monitors: &[crate::health::MonitorSpec],
    ) -> Result<Vec<Service>, ConfigError> {
        let monitor_names = Names::new("monitor", monitors.iter().map(|m| m.name.as_str()));
        let site_names = Names::new("site", sites.iter().map(|s| s.name.as_str()));
        let mut names = Seen::new();
        let mut endpoints: HashMap<(IpAddr, u16), (String, usize)> = HashMap::new();
        let mut services = Vec::new();
        for rs in raw {
            let name = self.object_name("service", &rs.name, &mut names)?;
            let owner = format!("service {name:?}");
            let ip = self.ip(&owner, "ip", &rs.ip)?;
            let port_span = rs.port.as_ref().map_or(rs.ip.span(), |p| p.span());
            let port = self.int(&owner, "port", rs.port, PORT_RANGE, DEFAULT_SERVICE_PORT)?;
            if let Some((other, line)) = endpoints.get(&(ip, port)) {
                return Err(self.error(
                    port_span,
                    format!(
                        "{owner}: {} port {port} is already service {other:?} (line {line})",
                        ip
                    ),
                ));
            }
            endpoints.insert((ip, port), (name.clone(), self.line(rs.name.span())));
            if !site_names.contains(rs.site.get_ref()) {
                return Err(self.error(
                    rs.site.span(),
                    format!("{owner}: {}", site_names.unknown(rs.site.get_ref())),
                ));
            }
            if let Some(l) = &rs.location {
                parse_location(l.get_ref()).map_err(|reason| {
                    self.error(
                        l.span(),
                        format!("{owner}: location {:?}: {reason}", l.get_ref()),
                    )
                })?;
            }
            let weight = self.int(&owner, "weight", rs.weight, WEIGHT_RANGE, DEFAULT_WEIGHT)?;
            let public_ip = self.public_ip(&owner, ip, rs.public_ip)?;
            let max_connections = rs
                .max_connections
                .map(|m| self.int(&owner, "max_connections", Some(m), LIMIT_RANGE, 0))
                .transpose()?;
            let max_bandwidth_kbps = rs
                .max_bandwidth_kbps
                .map(|m| self.int(&owner, "max_bandwidth_kbps", Some(m), LIMIT_RANGE, 0))
                .transpose()?;
            let mut bound = Vec::new();
            if let Some(list) = &rs.monitors {
                for m in list.get_ref() {
                    if !monitor_names.contains(m.get_ref()) {
                        return Err(self.error(
                            m.span(),
                            format!("{owner}: {}", monitor_names.unknown(m.get_ref())),
                        ));
                    }
                    if bound.contains(m.get_ref()) {
                        return Err(self.error(
                            m.span(),
                            format!("{owner}: monitor {:?} bound twice", m.get_ref()),
                        ));
                    }
                    bound.push(m.get_ref().clone());
                }
            }
            let weights: u32 = monitors
                .iter()
                .filter(|m| bound.contains(&m.name))
                .map(|m| m.weight)
                .sum();
            let threshold_span = rs.monitor_threshold.as_ref().map(|t| t.span());
            let monitor_threshold = self.int(
                &owner,
                "monitor_threshold",
                rs.monitor_threshold,
                0..=1_000_000,
                0,
            )?;
            if monitor_threshold > weights {
                return Err(self.error(
                    threshold_span.expect("a threshold above 0 was written"),
                    format!("{owner}: monitor_threshold {monitor_threshold} is more than the {weights} its monitors' weights add up to: it could never be UP"),
                ));
            }
            services.push(Service {
                monitors: bound,
                monitor_threshold,
                // Bound by `load_bindings`, checked before.
                load_monitors: Vec::new(),
                name,
                ip,
                port,
                site: rs.site.into_inner(),
                location: rs.location.map(Spanned::into_inner),
                weight,
                public_ip,
                max_connections,
                max_bandwidth_kbps,
            });
        }
        Ok(services)
    }

    fn gslb_domains(
        &self,
        raw: Vec<RawGslbDomain>,
        zones: &[Zone],
        facts: &[ZoneFacts],
        views: &[View],
        services: &[Service],
        topology: &[TopologyRecord],
    ) -> Result<Vec<GslbDomain>, ConfigError> {
        let view_names = Names::new("view", views.iter().map(|v| v.name.as_str()));
        let by_name: HashMap<&str, &Service> =
            services.iter().map(|s| (s.name.as_str(), s)).collect();
        let service_names = Names::new("service", services.iter().map(|s| s.name.as_str()));
        let mut names = Seen::new();
        let mut domains = Vec::new();
        // (domain index, written backup_domain) for the checks once every domain is known.
        let mut backups: Vec<(usize, Str)> = Vec::new();
        for rd in raw {
            let name = self.dns_name(&rd.name, "gslb_domain name", domain_name)?;
            let owner = format!("gslb_domain {name:?}");
            let err = |reason: String| self.error(rd.name.span(), format!("{owner}: {reason}"));
            if let Some(first) = names.first(name.clone(), self.line(rd.name.span())) {
                return Err(err(format!("defined twice (first on line {first})")));
            }
            let Some(z) = zones
                .iter()
                .enumerate()
                .filter(|(_, z)| z.contains(&name))
                .max_by_key(|(_, z)| z.name.len())
                .map(|(i, _)| i)
            else {
                let apexes: Vec<&str> = zones.iter().map(|z| z.name.as_str()).collect();
                return Err(err(if apexes.is_empty() {
                    "not inside any zone (no [[zone]] is defined)".into()
                } else {
                    format!("not inside any zone (zones: {})", apexes.join(", "))
                }));
            };
            let zone = &zones[z].name;
            if let Some(line) = facts[z].owners.get(&name) {
                return Err(err(format!(
                    "zone {zone:?} has a static record of this name (line {line}); a name is either \
                     static or GSLB"
                )));
            }
            if let Some((cut, line)) = facts[z].delegation_of(&name) {
                return Err(err(format!(
                    "at or below the delegation of {cut} (NS on line {line}); it is not ours to answer"
                )));
            }

            let ttl = self.ttl(&owner, rd.ttl, DEFAULT_GSLB_TTL)?;
            let bound = self.bound_services(&owner, rd.services, &service_names, &by_name)?;

            let (backup_ip, down_response) =
                self.down_response(&owner, rd.backup_ip, rd.down_response)?;

            let mut seen = Seen::new();
            let mut domain_views = Vec::new();
            for dv in rd.views {
                let view = dv.view.get_ref();
                let err = |reason: String| self.error(dv.view.span(), format!("{owner}: {reason}"));
                if view.eq_ignore_ascii_case(DEFAULT_VIEW) {
                    return Err(err(format!(
                        "view {view:?} is implicit; its services are the domain's own services"
                    )));
                }
                if !view_names.contains(view) {
                    return Err(err(view_names.unknown(view)));
                }
                if let Some(first) = seen.first(view.clone(), self.line(dv.view.span())) {
                    return Err(err(format!(
                        "view {view:?} listed twice (first on line {first})"
                    )));
                }
                let bound = self.bound_services(
                    &format!("{owner}, view {view:?}"),
                    dv.services,
                    &service_names,
                    &by_name,
                )?;
                domain_views.push((dv.view.into_inner(), bound));
            }

            let lb_raw = RawLb {
                name: &rd.name,
                method: &rd.method,
                alternate: &rd.alternate,
                fallback: &rd.fallback,
                tolerance_ms: &rd.tolerance_ms,
                sourceip_mask: &rd.sourceip_mask,
                persistence: &rd.persistence,
            };
            let lb = self.lb_settings(&owner, lb_raw, &bound, &by_name, topology)?;
            if let (Some(p), AnswerMode::All) = (&rd.persistence, rd.answer) {
                return Err(self.error(
                    p.span(),
                    format!(
                        "{owner}: persistence keeps a client on one service, and answer = \"all\" \
                         gives every service in every answer: use one or the other"
                    ),
                ));
            }
            // A method that picks one service per answer, first in the chain (where it always
            // decides), would never let answer = "all" act. Later in a chain they are fine: the
            // earlier methods' candidate sets are answered whole.
            if rd.answer == AnswerMode::All
                && let Some(m) = rd.method.as_ref().filter(|m| {
                    matches!(
                        m.get_ref(),
                        Method::Ratio | Method::SourceIpHash | Method::GlobalAvailability
                    )
                })
            {
                let why = match m.get_ref() {
                    Method::Ratio => "hands out services in proportion to their weights",
                    Method::SourceIpHash => "gives each client prefix one service",
                    _ => "answers the first available service only",
                };
                return Err(self.error(
                    m.span(),
                    format!(
                        "{owner}: {} {why}, and answer = \"all\" gives every service in every \
                         answer: use one or the other",
                        m.get_ref().name()
                    ),
                ));
            }
            if let Some(b) = rd.backup_domain {
                backups.push((domains.len(), b));
            }
            domains.push(GslbDomain {
                name,
                ttl,
                answer: rd.answer,
                services: bound,
                backup_ip,
                down_response,
                views: domain_views,
                method: lb.method,
                alternate: lb.alternate,
                fallback: lb.fallback,
                tolerance_ms: lb.tolerance_ms,
                sourceip_mask: lb.sourceip_mask,
                persistence: lb.persistence,
                backup_domain: None,
            });
        }
        self.backup_domains(&mut domains, backups)?;
        Ok(domains)
    }

    /// A domain's method chain and the settings that go with it.
    fn lb_settings(
        &self,
        owner: &str,
        rd: RawLb<'_>,
        bound: &[String],
        by_name: &HashMap<&str, &Service>,
        topology: &[TopologyRecord],
    ) -> Result<LbSettings, ConfigError> {
        let method = rd
            .method
            .as_ref()
            .map_or(Method::RoundRobin, |m| *m.get_ref());
        let (alternate, fallback) = (rd.alternate, rd.fallback);
        // Each later method must be reachable: not a repeat, and not after one that always
        // decides (only staticproximity, rtt and topology can decline).
        let mut chain: Vec<(&str, Method)> = vec![("method", method)];
        for (key, raw) in [("alternate", alternate), ("fallback", fallback)] {
            let Some(m) = raw else { continue };
            let m_name = m.get_ref().name();
            if let Some((earlier, _)) = chain.iter().find(|(_, e)| e == m.get_ref()) {
                return Err(self.error(
                    m.span(),
                    format!("{owner}: {key} \"{m_name}\" repeats the {earlier}"),
                ));
            }
            if let Some((earlier, e)) = chain.iter().find(|(_, e)| e.always_decides()) {
                return Err(self.error(
                    m.span(),
                    format!(
                        "{owner}: {key} \"{m_name}\" is never used: {earlier} \"{}\" always \
                         decides (only staticproximity, rtt and topology fall through)",
                        e.name()
                    ),
                ));
            }
            chain.push((key, *m.get_ref()));
        }
        let has = |m: Method| chain.iter().any(|(_, c)| *c == m);
        // Where to point for a problem with a method in the chain.
        let method_span = |m: Method| {
            [rd.method, alternate, fallback]
                .into_iter()
                .find_map(|r| r.as_ref().filter(|r| *r.get_ref() == m).map(|r| r.span()))
                .unwrap_or(rd.name.span())
        };
        if has(Method::StaticProximity)
            && !bound.iter().any(|s| by_name[s.as_str()].location.is_some())
        {
            return Err(self.error(
                method_span(Method::StaticProximity),
                format!(
                    "{owner}: staticproximity needs services with a location, and none of this \
                     domain's has one"
                ),
            ));
        }
        if has(Method::Topology) {
            let sites: HashSet<&str> = bound
                .iter()
                .map(|s| by_name[s.as_str()].site.as_str())
                .collect();
            if !topology
                .iter()
                .any(|r| sites.contains(r.destination.as_str()))
            {
                return Err(self.error(
                    method_span(Method::Topology),
                    format!(
                        "{owner}: topology needs [[topology]] records whose destination is a site \
                         of this domain's services, and there are none"
                    ),
                ));
            }
        }

        let tolerance_ms = self.int(
            owner,
            "tolerance_ms",
            rd.tolerance_ms.clone(),
            TOLERANCE_RANGE,
            0,
        )?;
        if let Some(t) = rd.tolerance_ms
            && !has(Method::Rtt)
        {
            return Err(self.error(t.span(), format!("{owner}: tolerance_ms is only used by the rtt method, which this domain does not use")));
        }

        let sourceip_mask = match rd.sourceip_mask {
            None => SourceMask::default(),
            Some(m) => {
                if !has(Method::SourceIpHash) {
                    return Err(self.error(
                        m.span(),
                        format!("{owner}: sourceip_mask is only used by the sourceiphash method, which this domain does not use"),
                    ));
                }
                let key = |k: &str| format!("sourceip_mask.{k}");
                SourceMask {
                    v4: self.int(
                        owner,
                        &key("mask_v4"),
                        m.get_ref().mask_v4.clone(),
                        MASK_V4_RANGE,
                        32,
                    )?,
                    v6: self.int(
                        owner,
                        &key("mask_v6"),
                        m.get_ref().mask_v6.clone(),
                        MASK_V6_RANGE,
                        128,
                    )?,
                }
            }
        };

        let persistence = match rd.persistence {
            None => None,
            Some(p) => {
                let p = p.get_ref();
                let key = |k: &str| format!("persistence.{k}");
                Some(Persistence {
                    mask: SourceMask {
                        v4: self.int(
                            owner,
                            &key("mask_v4"),
                            p.mask_v4.clone(),
                            MASK_V4_RANGE,
                            32,
                        )?,
                        v6: self.int(
                            owner,
                            &key("mask_v6"),
                            p.mask_v6.clone(),
                            MASK_V6_RANGE,
                            128,
                        )?,
                    },
                    timeout_s: self.int(
                        owner,
                        &key("timeout_s"),
                        p.timeout_s.clone(),
                        PERSISTENCE_TIMEOUT_RANGE,
                        DEFAULT_PERSISTENCE_TIMEOUT,
                    )?,
                    max_entries: self.int(
                        owner,
                        &key("max_entries"),
                        p.max_entries.clone(),
                        PERSISTENCE_ENTRIES_RANGE,
                        DEFAULT_PERSISTENCE_ENTRIES,
                    )?,
                })
            }
        };
        Ok(LbSettings {
            method,
            alternate: alternate.as_ref().map(|m| *m.get_ref()),
            fallback: fallback.as_ref().map(|m| *m.get_ref()),
            tolerance_ms,
            sourceip_mask,
            persistence,
        })
    }

    /// Resolves each domain's backup domain: it exists, is another domain, and following
    /// backups never comes back (a down domain would loop).
    fn backup_domains(
        &self,
        domains: &mut [GslbDomain],
        backups: Vec<(usize, Str)>,
    ) -> Result<(), ConfigError> {
        let names = Names::new("gslb_domain", domains.iter().map(|d| d.name.as_str()));
        let mut next: HashMap<usize, usize> = HashMap::new();
        for (i, raw) in &backups {
            let owner = format!("gslb_domain {:?}", domains[*i].name);
            let written = raw.get_ref();
            let target = written.strip_suffix('.').unwrap_or(written);
            let Some(b) = domains
                .iter()
                .position(|d| d.name.eq_ignore_ascii_case(target))
            else {
                return Err(self.error(
                    raw.span(),
                    format!("{owner}: backup_domain: {}", names.unknown(written)),
                ));
            };
            if b == *i {
                return Err(self.error(
                    raw.span(),
                    format!("{owner}: backup_domain is the domain itself"),
                ));
            }
            next.insert(*i, b);
        }
        for (i, raw) in &backups {
            let mut path = vec![domains[*i].name.as_str()];
            let mut at = next[i];
            while let Some(&n) = next.get(&at) {
                path.push(domains[at].name.as_str());
                if n == *i {
                    path.push(domains[*i].name.as_str());
                    return Err(self.error(
                        raw.span(),
                        format!(
                            "gslb_domain {:?}: backup domains form a cycle ({})",
                            domains[*i].name,
                            path.join(" → ")
                        ),
                    ));
                }
                if path.len() > domains.len() {
                    break; // a cycle further on, reported from one of its own members
                }
                at = n;
            }
        }
        for (i, b) in next {
            domains[i].backup_domain = Some(domains[b].name.clone());
        }
        Ok(())
    }

    fn topology(
        &self,
        raw: Vec<RawTopology>,
        sites: &[Site],
    ) -> Result<Vec<TopologyRecord>, ConfigError> {
        let site_names = Names::new("site", sites.iter().map(|s| s.name.as_str()));
        let mut seen: Seen<(String, String)> = Seen::new();
        let mut records = Vec::new();
        for rt in raw {
            let destination = rt.destination.get_ref();
            let owner = format!("topology record {destination:?} {:?}", rt.ldns.get_ref());
            if !site_names.contains(destination) {
                return Err(self.error(
                    rt.destination.span(),
                    format!(
                        "topology record: destination: {}",
                        site_names.unknown(destination)
                    ),
                ));
            }
            let written = rt.ldns.get_ref();
            let err =
                |reason: String| self.error(rt.ldns.span(), format!("{owner}: ldns {reason}"));
            let ldns = if let Ok(net) = written.parse::<IpNet>() {
                if net.trunc() != net {
                    return Err(err(format!(
                        "{net} has host bits set (did you mean {}?)",
                        net.trunc()
                    )));
                }
                Ldns::Prefix(net)
            } else if let Ok(ip) = written.parse::<IpAddr>() {
                let len = if ip.is_ipv4() { 32 } else { 128 };
                return Err(err(format!(
                    "{ip} is an address; write a prefix ({ip}/{len})"
                )));
            } else if written.contains('/') {
                return Err(err(format!(
                    "{written:?} is not a prefix (e.g. 202.106.0.0/16)"
                )));
            } else {
                let location = Location::parse(written).map_err(|reason| {
                    err(format!(
                        "{written:?}: not a prefix, nor a location: {reason}"
                    ))
                })?;
                Ldns::Location(location)
            };
            let key = match &ldns {
                Ldns::Prefix(net) => net.to_string(),
                Ldns::Location(l) => l.to_string(),
            };
            if let Some(first) = seen.first((destination.clone(), key), self.line(rt.ldns.span())) {
                return Err(err(format!(
                    "for this destination is already on line {first}"
                )));
            }
            let score = self.int(&owner, "score", Some(rt.score), SCORE_RANGE, 0)?;
            records.push(TopologyRecord {
                destination: destination.clone(),
                ldns,
                score,
            });
        }
        Ok(records)
    }

    fn actions(&self, raw: Vec<RawAction>) -> Result<Vec<DnsAction>, ConfigError> {
        let mut names = Seen::new();
        let mut actions = Vec::new();
        for ra in raw {
            let name = self.object_name("action", &ra.name, &mut names)?;
            let owner = format!("action {name:?}");
            let list = ra.preferred_locations.get_ref();
            if list.is_empty() {
                return Err(self.error(
                    ra.preferred_locations.span(),
                    format!("{owner}: preferred_locations is empty; list 1 to {MAX_PREFERRED_LOCATIONS} locations"),
                ));
            }
            let mut seen = Seen::new();
            let mut preferred = Vec::new();
            for (i, l) in list.iter().enumerate() {
                if i == MAX_PREFERRED_LOCATIONS {
                    return Err(self.error(
                        l.span(),
                        format!(
                            "{owner}: {} preferred locations, at most {MAX_PREFERRED_LOCATIONS}",
                            list.len()
                        ),
                    ));
                }
                let location = Location::parse(l.get_ref()).map_err(|reason| {
                    self.error(
                        l.span(),
                        format!("{owner}: location {:?}: {reason}", l.get_ref()),
                    )
                })?;
                if let Some(first) = seen.first(location.clone(), self.line(l.span())) {
                    return Err(self.error(
                        l.span(),
                        format!(
                            "{owner}: location {:?} listed twice (first on line {first})",
                            l.get_ref()
                        ),
                    ));
                }
                preferred.push(location);
            }
            actions.push(DnsAction {
                name,
                preferred_locations: preferred,
            });
        }
        Ok(actions)
    }

    fn policies(
        &self,
        raw: Vec<RawPolicy>,
        actions: &[DnsAction],
    ) -> Result<Vec<DnsPolicy>, ConfigError> {
        let action_names = Names::new("action", actions.iter().map(|a| a.name.as_str()));
        let mut names = Seen::new();
        let mut priorities: HashMap<u32, (String, usize)> = HashMap::new();
        let mut policies = Vec::new();
        for rp in raw {
            let name = self.object_name("policy", &rp.name, &mut names)?;
            let owner = format!("policy {name:?}");
            let expression = Expr::parse(rp.expression.get_ref()).map_err(|e| {
                let at = self.expression_offset(&rp.expression, e.offset);
                self.error(at..at, format!("{owner}: expression: {e}"))
            })?;
            if !action_names.contains(rp.action.get_ref()) {
                return Err(self.error(
                    rp.action.span(),
                    format!("{owner}: {}", action_names.unknown(rp.action.get_ref())),
                ));
            }
            let span = rp.priority.span();
            let priority: u32 =
                self.int(&owner, "priority", Some(rp.priority), PRIORITY_RANGE, 0)?;
            if let Some((other, line)) = priorities.get(&priority) {
                return Err(self.error(
                    span,
                    format!(
                        "{owner}: priority {priority} is already policy {other:?}'s (line {line}); \
                         priorities decide the order, so they are unique"
                    ),
                ));
            }
            priorities.insert(priority, (name.clone(), self.line(span)));
            policies.push(DnsPolicy {
                name,
                expression,
                action: rp.action.into_inner(),
                priority,
            });
        }
        Ok(policies)
    }

    /// The file offset of byte `offset` of an expression string. Exact when the string is
    /// written on one line without escapes (a literal '…' string, the usual way since the
    /// expression has quotes of its own); otherwise the string's start.
    fn expression_offset(&self, raw: &Str, offset: usize) -> usize {
        let span = raw.span();
        let written = &self.text[span.clone()];
        let simple = (written.starts_with('\'') && !written.starts_with("'''"))
            || (written.starts_with('"')
                && !written.starts_with("\"\"\"")
                && !written.contains('\\'));
        if simple && written.len() == raw.get_ref().len() + 2 {
            span.start + 1 + offset
        } else {
            span.start
        }
    }

    /// A GSLB domain's backup addresses, and what it answers when every service is down.
    fn down_response(
        &self,
        owner: &str,
        backup: Option<List>,
        response: Option<Spanned<DownResponse>>,
    ) -> Result<(Vec<IpAddr>, DownResponse), ConfigError> {
        let mut backup_ip = Vec::new();
        let mut backup_span = None;
        if let Some(list) = backup {
            backup_span = Some(list.span());
            let mut seen = Seen::new();
            let mut per_family = [0; 2];
            for s in list.get_ref() {
                let ip = self.ip(owner, "backup_ip", s)?;
                if let Some(first) = seen.first(ip, self.line(s.span())) {
                    return Err(self.error(
                        s.span(),
                        format!("{owner}: backup_ip {ip} listed twice (first on line {first})"),
                    ));
                }
                let count = &mut per_family[usize::from(ip.is_ipv6())];
                *count += 1;
                if *count > MAX_ADDRS {
                    return Err(self.error(
                        s.span(),
                        format!(
                            "{owner}: more than {MAX_ADDRS} {} backup_ip addresses",
                            family(ip)
                        ),
                    ));
                }
                backup_ip.push(ip);
            }
        }
        let response = match response {
            None if backup_ip.is_empty() => DownResponse::Nodata,
            None => DownResponse::Backup,
            Some(r) => match (*r.get_ref(), backup_span) {
                (DownResponse::Backup, _) if backup_ip.is_empty() => {
                    return Err(self.error(
                        r.span(),
                        format!("{owner}: down_response \"backup\" needs backup_ip addresses"),
                    ));
                }
                (DownResponse::Nodata, Some(span)) if !backup_ip.is_empty() => {
                    return Err(self.error(
                        span,
                        format!(
                            "{owner}: backup_ip is never answered with down_response \"nodata\" \
                             (line {}); remove one of them",
                            self.line(r.span())
                        ),
                    ));
                }
                (response, _) => response,
            },
        };
        Ok((backup_ip, response))
    }

    /// The services bound to a GSLB domain (or one of its views).
    fn bound_services(
        &self,
        owner: &str,
        raw: List,
        names: &Names,
        by_name: &HashMap<&str, &Service>,
    ) -> Result<Vec<String>, ConfigError> {
        if raw.get_ref().is_empty() {
            return Err(self.error(
                raw.span(),
                format!("{owner}: services is empty; bind at least one [[service]]"),
            ));
        }
        let mut seen = Seen::new();
        let mut per_family = [0; 2];
        let mut out = Vec::new();
        for s in raw.into_inner() {
            let name = s.get_ref();
            let err = |reason: String| self.error(s.span(), format!("{owner}: {reason}"));
            let Some(service) = by_name.get(name.as_str()) else {
                return Err(err(names.unknown(name)));
            };
            if let Some(first) = seen.first(name.clone(), self.line(s.span())) {
                return Err(err(format!(
                    "service {name:?} listed twice (first on line {first})"
                )));
            }
            let ip = service.answer_ip();
            let count = &mut per_family[usize::from(ip.is_ipv6())];
            *count += 1;
            if *count > MAX_ADDRS {
                return Err(err(format!(
                    "service {name:?} is the {}th {} service; at most {MAX_ADDRS} per address \
                     family (the fast path's answer limit)",
                    *count,
                    family(ip)
                )));
            }
            out.push(s.into_inner());
        }
        Ok(out)
    }

    /// A prefix as written in a list (`owner: ` starts the error): address/length, no host
    /// bits set.
    fn prefix(&self, p: &Str, owner: &str) -> Result<IpNet, ConfigError> {
        let err = |reason: String| self.error(p.span(), format!("{owner}: {reason}"));
        let net: IpNet = p.get_ref().parse().map_err(|_| {
            err(format!(
                "{:?} is not a prefix (expected address/length, e.g. 198.51.100.0/24)",
                p.get_ref()
            ))
        })?;
        if net.trunc() != net {
            return Err(err(format!(
                "prefix {net} has host bits set (did you mean {}?)",
                net.trunc()
            )));
        }
        Ok(net)
    }

    /// `[rtt] deny` and `allow`: prefixes (no host bits, none twice); an allow prefix inside a
    /// deny prefix would do nothing (deny wins), so it is refused.
    fn rtt_sources(
        &self,
        deny: Option<&List>,
        allow: Option<&List>,
    ) -> Result<crate::probe::SourcePolicy, ConfigError> {
        let parse = |key: &str,
                     list: Option<&List>|
         -> Result<Vec<(IpNet, Range<usize>)>, ConfigError> {
            let mut out: Vec<(IpNet, Range<usize>)> = Vec::new();
            for p in list.map(|l| l.get_ref().as_slice()).unwrap_or_default() {
                let err = |reason: String| self.error(p.span(), format!("rtt: {key}: {reason}"));
                let net = self.prefix(p, &format!("rtt: {key}"))?;
                if let Some((_, first)) = out.iter().find(|(n, _)| *n == net) {
                    let line = self.line(first.clone());
                    return Err(err(format!(
                        "prefix {net} listed twice (first on line {line})"
                    )));
                }
                out.push((net, p.span()));
            }
            Ok(out)
        };
        let deny = parse("deny", deny)?;
        let allow = parse("allow", allow)?;
        for (net, span) in &allow {
            if let Some((d, _)) = deny.iter().find(|(d, _)| d.contains(net)) {
                return Err(self.error(
                    span.clone(),
                    format!(
                        "rtt: allow: prefix {net} is inside deny prefix {d}, which always wins: it would admit nothing"
                    ),
                ));
            }
        }
        Ok(crate::probe::SourcePolicy {
            deny: deny.into_iter().map(|(n, _)| n).collect(),
            allow: allow.into_iter().map(|(n, _)| n).collect(),
        })
    }

    /// `[rtt]`: ranges here; what [`crate::probe::ProbeSettings::validate`] checks (the order)
    /// is reported at the order, so there is one definition of runnable settings.
    fn rtt(
        &self,
        raw: Option<Spanned<RawRtt>>,
        has_site: bool,
    ) -> Result<RttSettings, ConfigError> {
        use crate::probe::{LdnsMask, ProbeKind, ProbeSettings};
        let Some(raw) = raw else {
            return Ok(RttSettings::default());
        };
        let section = raw.span();
        let raw = raw.into_inner();
        let owner = "rtt";
        let d = ProbeSettings::default();
        if let Some(e) = &raw.enabled
            && *e.get_ref()
            && !has_site
        {
            return Err(self.error(
                e.span(),
                "rtt: probing needs server.site, the [[site]] whose RTT column this server measures",
            ));
        }
        // Without a site nothing is probed: settings other than `enabled = false` would be
        // read and ignored.
        if !has_site && raw.enabled.as_ref().is_none_or(|e| *e.get_ref()) {
            return Err(self.error(
                section,
                "rtt: probing needs server.site, the [[site]] whose RTT column this server \
                 measures (or enabled = false)",
            ));
        }
        let mut order = d.order.clone();
        if let Some(list) = &raw.order {
            order = list
                .get_ref()
                .iter()
                .map(|k| {
                    k.get_ref()
                        .parse::<ProbeKind>()
                        .map_err(|e| self.error(k.span(), format!("rtt: order: {e}")))
                })
                .collect::<Result<_, _>>()?;
        }
        let ms = |v: Option<Int>,
                  key: &str,
                  range: RangeInclusive<i64>,
                  default: Duration|
         -> Result<Duration, ConfigError> {
            let default = u64::try_from(default.as_millis()).unwrap_or(u64::MAX);
            Ok(Duration::from_millis(
                self.int(owner, key, v, range, default)?,
            ))
        };
        let settings = ProbeSettings {
            order,
            interval: ms(raw.interval_ms, "interval_ms", 1..=3_600_000, d.interval)?,
            timeout: ms(raw.timeout_ms, "timeout_ms", 1..=60_000, d.timeout)?,
            tolerance: ms(
                raw.tolerance_ms,
                "tolerance_ms",
                TOLERANCE_RANGE,
                d.tolerance,
            )?,
            ldns_timeout: Duration::from_secs(self.int(
                owner,
                "ldns_timeout_s",
                raw.ldns_timeout_s,
                1..=86_400,
                d.ldns_timeout.as_secs(),
            )?),
            mask: LdnsMask {
                v4: self.int(
                    owner,
                    "ldns_mask_v4",
                    raw.ldns_mask_v4,
                    MASK_V4_RANGE,
                    d.mask.v4,
                )?,
                v6: self.int(
                    owner,
                    "ldns_mask_v6",
                    raw.ldns_mask_v6,
                    MASK_V6_RANGE,
                    d.mask.v6,
                )?,
            },
            max_rate: self.int(owner, "max_rate", raw.max_rate, 0..=1_000_000, d.max_rate)?,
            max_concurrent: self.int(
                owner,
                "max_concurrent",
                raw.max_concurrent,
                1..=65_536,
                d.max_concurrent,
            )?,
            tick: d.tick,
            max_ldns: self.int(owner, "max_ldns", raw.max_ldns, 1..=10_000_000, d.max_ldns)?,
            sources: self.rtt_sources(raw.deny.as_ref(), raw.allow.as_ref())?,
        };
        if let Err(reason) = settings.validate() {
            let span = raw.order.as_ref().map_or(section, |o| o.span());
            return Err(self.error(span, format!("rtt: {reason}")));
        }
        Ok(RttSettings {
            enabled: raw.enabled.map(Spanned::into_inner),
            probe: settings,
        })
    }

    /// A name server inside a zone served here needs an address there, or nobody can reach it.
    fn name_servers_have_addresses(
        &self,
        zones: &[Zone],
        facts: &[ZoneFacts],
        gslb_domains: &[GslbDomain],
    ) -> Result<(), ConfigError> {
        let addressed: HashSet<&str> = zones
            .iter()
            .flat_map(|z| &z.records)
            .filter(|r| matches!(r.data, RecordData::A(_) | RecordData::Aaaa(_)))
            .map(|r| r.name.as_str())
            .chain(gslb_domains.iter().map(|d| d.name.as_str()))
            .collect();
        for (zone, facts) in zones.iter().zip(facts) {
            for (target, span) in &facts.ns_targets {
                if zones.iter().any(|z| z.contains(target)) && !addressed.contains(target.as_str())
                {
                    return Err(self.error(
                        span.clone(),
                        format!(
                            "zone {:?}: name server {target} is inside a zone served here but has \
                             no address; add an A or AAAA [[zone.record]] for it",
                            zone.name
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

fn family(ip: IpAddr) -> &'static str {
    if ip.is_ipv4() { "IPv4" } else { "IPv6" }
}

/// Whether `name` (any case, trailing dot optional) is `apex` (lower-case, no trailing dot) or
/// below it.
fn in_zone(name: &str, apex: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name).as_bytes();
    let apex = apex.as_bytes();
    if apex.is_empty() {
        return true;
    }
    let Some(cut) = name.len().checked_sub(apex.len()) else {
        return false;
    };
    name[cut..].eq_ignore_ascii_case(apex) && (cut == 0 || name[cut - 1] == b'.')
}

/// Checks a domain name and returns it lower-cased without trailing dot.
fn domain_name(raw: &str) -> Result<String, String> {
    let name = raw.strip_suffix('.').unwrap_or(raw);
    if name.is_empty() {
        return Err("the root is not allowed here".into());
    }
    let mut wire_len = 1; // root label
    for label in name.split('.') {
        if label.is_empty() {
            return Err("empty label".into());
        }
        if label == "*" {
            return Err("wildcard names are not supported".into());
        }
        if label.len() > 63 {
            return Err(format!(
                "label {label:?} is {} bytes, at most 63",
                label.len()
            ));
        }
        if let Some(c) = label
            .chars()
            .find(|&c| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        {
            return Err(format!(
                "invalid character {c:?} (letters, digits, '-' and '_' only; write IDNs as xn-- punycode)"
            ));
        }
        wire_len += 1 + label.len();
    }
    if wire_len > 255 {
        return Err(format!("{wire_len} bytes in wire format, at most 255"));
    }
    Ok(name.to_ascii_lowercase())
}

/// An absolute host or mailbox name (NS, SOA mname and rname): trailing dot optional, but never
/// one label, which would almost always be a relative name by mistake.
fn host_name(raw: &str) -> Result<String, String> {
    let name = domain_name(raw)?;
    if !name.contains('.') {
        return Err(
            "a single label; write the full name (e.g. ns1.example.com), relative names are not \
             allowed here"
                .into(),
        );
    }
    Ok(name)
}

/// A name in a zone's records: "@" is the apex, a name with a trailing dot is absolute, any
/// other is relative to the apex.
fn zone_name(raw: &str, apex: &str) -> Result<String, String> {
    if raw == "@" {
        return Ok(apex.to_owned());
    }
    if raw.ends_with('.') {
        return domain_name(raw);
    }
    let relative = domain_name(raw)?;
    // "www.example.com" in zone example.com means www.example.com.example.com: surely a
    // forgotten trailing dot.
    if in_zone(&relative, apex) {
        let instead = match relative.len().checked_sub(apex.len() + 1) {
            Some(len) => format!("\"{}\" or \"{raw}.\"", &relative[..len]),
            None => "\"@\"".to_owned(),
        };
        return Err(format!(
            "relative names are relative to the zone, so this is {relative}.{apex}; write {instead}"
        ));
    }
    domain_name(&format!("{relative}.{apex}"))
}

/// A record's owner: a [`zone_name`] inside the zone.
fn owner_name(raw: &str, apex: &str) -> Result<String, String> {
    let name = zone_name(raw, apex)?;
    if !in_zone(&name, apex) {
        return Err(format!("{name} is outside the zone {apex}"));
    }
    Ok(name)
}

/// A name in record data: a [`zone_name`], or `""` for "." (the root) where `allow_root`.
fn target_name(raw: &str, apex: &str, allow_root: bool) -> Result<String, String> {
    if raw == "." {
        return if allow_root {
            Ok(String::new())
        } else {
            Err("the root is not allowed here".into())
        };
    }
    zone_name(raw, apex)
}

/// `text` as TXT character-strings of at most [`MAX_TXT_STRING`] bytes, split on character
/// boundaries; `""` gives one empty string.
fn txt_strings(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let (chunk, tail) = rest.split_at(rest.floor_char_boundary(MAX_TXT_STRING));
        out.push(chunk.to_owned());
        rest = tail;
        if rest.is_empty() {
            return out;
        }
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..text.floor_char_boundary(offset)];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVER: &str = "[server]\nlisten = [\"192.0.2.1\"]\n";
    /// Lines 3–6 after SERVER; its name server is outside every zone, so it needs no glue.
    const ZONE: &str = "[[zone]]\nname = \"example.com\"\nns = [\"ns.example.net\"]\nsoa.rname = \"hostmaster.example.com\"\n";

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("test.toml"))
    }

    fn server(listen: &[&str]) -> Server {
        Server {
            dns_port: 53,
            listen: listen.iter().map(|s| s.parse().unwrap()).collect(),
            edns_udp_size: 1232,
            interface: None,
            xdp_mode: XdpMode::Auto,
            pin_path: "/sys/fs/bpf/gslb".into(),
            site: None,
            tcp: crate::server::TcpLimits::default(),
            ecs_allow: None,
            stale_after: Some(Duration::from_secs(60)),
        }
    }

    fn empty() -> Config {
        Config {
            server: server(&["192.0.2.1"]),
            views: vec![],
            zones: vec![],
            sites: vec![],
            services: vec![],
            gslb_domains: vec![],
            topology: vec![],
            actions: vec![],
            policies: vec![],
            engine: EngineSettings::default(),
            locations: LocationSources::default(),
            monitors: vec![],
            load_monitors: vec![],
            rtt: RttSettings::default(),
            mep: None,
            links: vec![],
            rrl: RrlSettings::default(),
        }
    }

    /// A zone with every default and an out-of-zone name server, as [`ZONE`] writes it.
    fn zone(name: &str) -> Zone {
        Zone {
            name: name.into(),
            ttl: 3600,
            ns: vec!["ns.example.net".into()],
            soa: Soa {
                mname: "ns.example.net".into(),
                rname: "hostmaster.example.com".into(),
                serial: 1,
                refresh: 3600,
                retry: 600,
                expire: 604800,
                minimum: 60,
            },
            records: vec![],
        }
    }

    fn rec(name: &str, ttl: u32, data: RecordData) -> StaticRecord {
        StaticRecord {
            name: name.into(),
            ttl,
            data,
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn service(name: &str, addr: &str, site: &str) -> Service {
        Service {
            name: name.into(),
            ip: ip(addr),
            port: 80,
            site: site.into(),
            location: None,
            weight: 1,
            public_ip: None,
            max_connections: None,
            max_bandwidth_kbps: None,
            monitors: vec![],
            monitor_threshold: 0,
            load_monitors: vec![],
        }
    }

    fn gslb(name: &str, services: &[&str]) -> GslbDomain {
        GslbDomain {
            name: name.into(),
            ttl: 30,
            answer: AnswerMode::Rotate,
            services: services.iter().map(|s| s.to_string()).collect(),
            backup_ip: vec![],
            down_response: DownResponse::Nodata,
            views: vec![],
            method: Method::RoundRobin,
            alternate: None,
            fallback: None,
            tolerance_ms: 0,
            sourceip_mask: SourceMask::default(),
            persistence: None,
            backup_domain: None,
        }
    }

    #[test]
    fn valid() {
        let server_and_views = r#"
            [server]
            dns_port = 5353
            listen = ["192.0.2.1", "2001:db8::1"]
            edns_udp_size = 4096
            interface = "eth0"
            xdp_mode = "skb"
            pin_path = "/sys/fs/bpf/other"
            stale_after_s = 0

            [[view]]
            name = "europe"
            prefixes = ["198.51.100.0/24", "2001:db8:100::/48"]

            [[view]]
            name = "us-east_1"
            prefixes = ["203.0.113.0/25"]
        "#;
        let long_txt = "x".repeat(300);
        let utf8_txt = "é".repeat(200); // 400 bytes: split after 127 characters (254 bytes)
        let zones = format!(
            r#"
            [server]
            listen = ["192.0.2.1"]

            [[zone]]
            name = "Example.COM."
            ttl = 600
            ns = ["NS1.example.com.", "ns2.example.net"]
              [zone.soa]
              mname = "ns0.example.com"
              rname = "hostmaster.example.com."
              serial = 4294967295
              refresh = 1
              retry = 2
              expire = 3
              minimum = 0
              [[zone.record]]
              name = "ns1"
              type = "A"
              value = "192.0.2.53"
              [[zone.record]]
              name = "NS1.Example.com."
              type = "aaaa"
              value = "2001:db8::53"
              [[zone.record]]
              name = "@"
              type = "TXT"
              value = "{long_txt}"
              [[zone.record]]
              name = "@"
              type = "TXT"
              value = "{utf8_txt}"
              [[zone.record]]
              name = "empty"
              type = "TXT"
              value = ""
              [[zone.record]]
              name = "@"
              type = "MX"
              value = "10  mail"
              [[zone.record]]
              name = "nomail"
              type = "MX"
              value = "0 ."
              [[zone.record]]
              name = "alias"
              type = "CNAME"
              value = "WWW.example.net."
              [[zone.record]]
              name = "_sip._tcp"
              type = "SRV"
              value = "10 5 5060 sip"
              ttl = 60
              [[zone.record]]
              name = "_none._tcp"
              type = "SRV"
              value = "0 0 0 ."
              # Glue may come before its delegation.
              [[zone.record]]
              name = "ns.sub"
              type = "A"
              value = "192.0.2.54"
              [[zone.record]]
              name = "sub"
              type = "NS"
              value = "ns.sub"

            # Its name server is in another zone served here, which has its address.
            [[zone]]
            name = "example.org"
            ns = ["ns1.example.com"]
            soa.rname = "hostmaster.example.org"
        "#
        );
        let gslb_text = r#"
            [server]
            listen = ["192.0.2.1"]
            [[view]]
            name = "europe"
            prefixes = ["198.51.100.0/24"]
            [[zone]]
            name = "example.com"
            ns = ["ns.example.net"]
            soa.rname = "hostmaster.example.com"
            [[site]]
            name = "eu-west"
            ip = "192.0.2.201"
            [[site]]
            name = "us_east.1"
            ip = "2001:db8::201"
            [[service]]
            name = "web-eu-1"
            ip = "10.0.0.10"
            port = 8080
            site = "eu-west"
            location = 'Europe.UK."St. Albans".*'
            weight = 100
            public_ip = "198.51.100.10"
            [[service]]
            name = "web-us-1"
            ip = "192.0.2.10"
            site = "us_east.1"
            [[service]]
            name = "web6"
            ip = "2001:db8::10"
            site = "eu-west"
            [[gslb_domain]]
            name = "WWW.example.com."
            ttl = 0
            answer = "all"
            services = ["web-eu-1", "web6"]
            backup_ip = ["192.0.2.99", "2001:db8::99"]
              [[gslb_domain.view]]
              view = "europe"
              services = ["web-us-1"]
            [[gslb_domain]]
            name = "example.com"
            ttl = 2147483647
            services = ["web-us-1"]
            down_response = "nodata"
            [[gslb_domain]]
            name = "api.example.com"
            services = ["web-us-1"]
            backup_ip = ["192.0.2.99"]
            down_response = "backup"
        "#;

        let zones_want = {
            let mut com = zone("example.com");
            com.ttl = 600;
            com.ns = vec!["ns1.example.com".into(), "ns2.example.net".into()];
            com.soa = Soa {
                mname: "ns0.example.com".into(),
                rname: "hostmaster.example.com".into(),
                serial: u32::MAX,
                refresh: 1,
                retry: 2,
                expire: 3,
                minimum: 0,
            };
            let name = |n: &str| n.to_owned();
            com.records = vec![
                rec(
                    "ns1.example.com",
                    600,
                    RecordData::A("192.0.2.53".parse().unwrap()),
                ),
                rec(
                    "ns1.example.com",
                    600,
                    RecordData::Aaaa("2001:db8::53".parse().unwrap()),
                ),
                rec(
                    "example.com",
                    600,
                    RecordData::Txt(vec!["x".repeat(255), "x".repeat(45)]),
                ),
                rec(
                    "example.com",
                    600,
                    RecordData::Txt(vec!["é".repeat(127), "é".repeat(73)]),
                ),
                rec(
                    "empty.example.com",
                    600,
                    RecordData::Txt(vec![String::new()]),
                ),
                rec(
                    "example.com",
                    600,
                    RecordData::Mx {
                        preference: 10,
                        exchange: name("mail.example.com"),
                    },
                ),
                rec(
                    "nomail.example.com",
                    600,
                    RecordData::Mx {
                        preference: 0,
                        exchange: String::new(),
                    },
                ),
                rec(
                    "alias.example.com",
                    600,
                    RecordData::Cname(name("www.example.net")),
                ),
                rec(
                    "_sip._tcp.example.com",
                    60,
                    RecordData::Srv {
                        priority: 10,
                        weight: 5,
                        port: 5060,
                        target: name("sip.example.com"),
                    },
                ),
                rec(
                    "_none._tcp.example.com",
                    600,
                    RecordData::Srv {
                        priority: 0,
                        weight: 0,
                        port: 0,
                        target: String::new(),
                    },
                ),
                rec(
                    "ns.sub.example.com",
                    600,
                    RecordData::A("192.0.2.54".parse().unwrap()),
                ),
                rec(
                    "sub.example.com",
                    600,
                    RecordData::Ns(name("ns.sub.example.com")),
                ),
            ];
            let mut org = zone("example.org");
            org.ns = vec!["ns1.example.com".into()];
            org.soa.mname = "ns1.example.com".into();
            org.soa.rname = "hostmaster.example.org".into();
            Config {
                zones: vec![com, org],
                ..empty()
            }
        };

        let cases: Vec<(&str, Config)> = vec![
            (SERVER, empty()),
            (
                server_and_views,
                Config {
                    server: Server {
                        dns_port: 5353,
                        edns_udp_size: 4096,
                        interface: Some("eth0".into()),
                        xdp_mode: XdpMode::Skb,
                        pin_path: "/sys/fs/bpf/other".into(),
                        stale_after: None,
                        ..server(&["192.0.2.1", "2001:db8::1"])
                    },
                    views: vec![
                        View {
                            name: "europe".into(),
                            prefixes: vec![
                                "198.51.100.0/24".parse().unwrap(),
                                "2001:db8:100::/48".parse().unwrap(),
                            ],
                        },
                        View {
                            name: "us-east_1".into(),
                            prefixes: vec!["203.0.113.0/25".parse().unwrap()],
                        },
                    ],
                    ..empty()
                },
            ),
            (&zones, zones_want),
            (
                gslb_text,
                Config {
                    views: vec![View {
                        name: "europe".into(),
                        prefixes: vec!["198.51.100.0/24".parse().unwrap()],
                    }],
                    zones: vec![zone("example.com")],
                    sites: vec![
                        Site {
                            name: "eu-west".into(),
                            ip: ip("192.0.2.201"),
                            public_ip: None,
                            role: crate::mep::Role::Parent,
                            parent: None,
                            backup_parents: vec![],
                            mep_port: 3011,
                            key: None,
                            nat: false,
                        },
                        Site {
                            name: "us_east.1".into(),
                            ip: ip("2001:db8::201"),
                            public_ip: None,
                            role: crate::mep::Role::Parent,
                            parent: None,
                            backup_parents: vec![],
                            mep_port: 3011,
                            key: None,
                            nat: false,
                        },
                    ],
                    services: vec![
                        Service {
                            port: 8080,
                            location: Some("Europe.UK.\"St. Albans\".*".into()),
                            weight: 100,
                            public_ip: Some(ip("198.51.100.10")),
                            ..service("web-eu-1", "10.0.0.10", "eu-west")
                        },
                        service("web-us-1", "192.0.2.10", "us_east.1"),
                        service("web6", "2001:db8::10", "eu-west"),
                    ],
                    gslb_domains: vec![
                        GslbDomain {
                            ttl: 0,
                            answer: AnswerMode::All,
                            backup_ip: vec![ip("192.0.2.99"), ip("2001:db8::99")],
                            down_response: DownResponse::Backup,
                            views: vec![("europe".into(), vec!["web-us-1".into()])],
                            ..gslb("www.example.com", &["web-eu-1", "web6"])
                        },
                        GslbDomain {
                            ttl: 2147483647,
                            ..gslb("example.com", &["web-us-1"])
                        },
                        GslbDomain {
                            backup_ip: vec![ip("192.0.2.99")],
                            down_response: DownResponse::Backup,
                            ..gslb("api.example.com", &["web-us-1"])
                        },
                    ],
                    ..empty()
                },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(
                parse(text).unwrap_or_else(|e| panic!("{e}\n{text}")),
                want,
                "{text}"
            );
        }
    }

    #[test]
    fn lookups() {
        let config = parse(&format!(
            "{SERVER}{ZONE}[[zone]]\nname = \"sub.example.org\"\nns = [\"ns.example.net\"]\nsoa.rname = \"h.example.org\"\n\
             [[site]]\nname = \"s\"\nip = \"192.0.2.9\"\n\
             [[service]]\nname = \"nat\"\nip = \"10.0.0.1\"\npublic_ip = \"192.0.2.1\"\nsite = \"s\"\n\
             [[service]]\nname = \"plain\"\nip = \"2001:db8::1\"\nsite = \"s\"\n\
             [[gslb_domain]]\nname = \"www.example.com\"\nservices = [\"nat\"]\n"
        ))
        .unwrap();
        assert_eq!(config.service("nat").unwrap().answer_ip(), ip("192.0.2.1"));
        assert_eq!(
            config.service("plain").unwrap().answer_ip(),
            ip("2001:db8::1")
        );
        assert!(config.service("NAT").is_none());
        assert_eq!(config.site("s").unwrap().ip, ip("192.0.2.9"));
        assert!(config.site("t").is_none());
        let zone = |name: &str| config.zone_of(name).map(|z| z.name.as_str());
        assert_eq!(zone("example.com"), Some("example.com"));
        assert_eq!(zone("A.B.Example.COM."), Some("example.com"));
        assert_eq!(zone("x.sub.example.org"), Some("sub.example.org"));
        assert_eq!(zone("example.org"), None);
        assert_eq!(zone("badexample.com"), None);
        assert_eq!(zone("com"), None);
        assert_eq!(
            config
                .gslb_domain("WWW.example.com.")
                .map(|d| d.name.as_str()),
            Some("www.example.com")
        );
        assert!(config.gslb_domain("example.com").is_none());
        assert_eq!(
            RecordData::Srv {
                priority: 0,
                weight: 0,
                port: 0,
                target: String::new()
            }
            .rtype(),
            33
        );
        assert_eq!(RecordData::Aaaa(Ipv6Addr::LOCALHOST).type_name(), "AAAA");
    }

    #[test]
    fn zone_of_prefers_the_longest_apex() {
        // Validation forbids nested zones, but the lookup does not rely on it.
        let mut config = empty();
        config.zones = vec![zone("example.com"), zone("a.example.com")];
        assert_eq!(
            config.zone_of("x.a.example.com").unwrap().name,
            "a.example.com"
        );
        assert_eq!(config.zone_of("x.example.com").unwrap().name, "example.com");
    }

    #[test]
    fn locations() {
        let ok = |s: &str| parse_location(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(ok("Europe"), ["Europe"]);
        assert_eq!(ok("Europe.UK.London"), ["Europe", "UK", "London"]);
        assert_eq!(
            ok("NA.US.\"New York\".\"N.Y.C\".*.org"),
            ["NA", "US", "New York", "N.Y.C", "*", "org"]
        );
        for (bad, reason) in [
            ("", "qualifier 1 is empty"),
            ("a..b", "qualifier 2 is empty"),
            ("a.", "qualifier 2 is empty"),
            ("a.b.c.d.e.f.g", "7 qualifiers, at most 6"),
            ("a.\"b", "unterminated quote in qualifier 2"),
            ("\"a\"b", "continues after its closing quote"),
            ("New York", "contains ' '"),
            ("a.b\"c\"", "contains '\"'"),
            ("\"\"", "qualifier 1 is empty"),
        ] {
            let got = parse_location(bad).expect_err(bad);
            assert!(got.contains(reason), "{bad:?}: {got:?} lacks {reason:?}");
        }
    }

    #[test]
    fn txt_splits_on_character_boundaries() {
        assert_eq!(txt_strings(""), [""]);
        assert_eq!(txt_strings(&"a".repeat(255)), ["a".repeat(255)]);
        assert_eq!(txt_strings(&"a".repeat(256)), ["a".repeat(255), "a".into()]);
        let s = format!("{}€", "a".repeat(254)); // the euro sign (3 bytes) would straddle 255
        assert_eq!(txt_strings(&s), ["a".repeat(254), "€".into()]);
    }

    /// Each case marks the offending line with `#<`; the error must point there.
    #[test]
    fn rejected() {
        const VIEW: &str = "[[view]]\nname = \"europe\"\nprefixes = [\"198.51.100.0/24\"]\n";
        const SITE: &str = "[[site]]\nname = \"eu\"\nip = \"192.0.2.201\"\n";
        const SERVICES: &str = "[[service]]\nname = \"web1\"\nip = \"192.0.2.10\"\nsite = \"eu\"\n\
            [[service]]\nname = \"web2\"\nip = \"192.0.2.11\"\nsite = \"eu\"\n\
            [[service]]\nname = \"web6\"\nip = \"2001:db8::10\"\nsite = \"eu\"\n";
        let long_label = format!("{}.example.com", "a".repeat(64));
        let long_name = format!("{}.example.com", vec!["a".repeat(63); 4].join("."));
        // Body of a record in ZONE: its first line is line 8.
        let record = |body: &str| format!("{SERVER}{ZONE}[[zone.record]]\n{body}\n");
        // Body of a gslb_domain www.example.com: its first line is line 27.
        let dom = |body: &str| {
            format!(
                "{SERVER}{VIEW}{ZONE}{SITE}{SERVICES}[[gslb_domain]]\nname = \"www.example.com\"\n{body}\n"
            )
        };
        let svc = |body: &str| format!("{SERVER}{SITE}[[service]]\nname = \"web\"\n{body}\n");
        let nine_services: String = (1..=9)
            .map(|i| format!("[[service]]\nname = \"s{i}\"\nip = \"192.0.2.{i}\"\nsite = \"eu\"\n"))
            .collect();
        let nine_names: Vec<String> = (1..=9).map(|i| format!("\"s{i}\"")).collect();
        let nine_v6: Vec<String> = (1..=9).map(|i| format!("\"2001:db8::{i}\"")).collect();

        let cases: Vec<(String, &str)> = vec![
            // ---- syntax and schema ----
            // ---- health monitors ----
            (
                format!(
                    "{SERVER}{SITE}[[service]]\nname = \"web\"\nip = \"192.0.2.10\"\nsite = \"eu\"\nmonitors = [\"nope\"] #<"
                ),
                "unknown monitor \"nope\"",
            ),
            (
                format!("{SERVER}[[monitor]]\nname = \"m\"\ntype = \"tcp\"\npath = \"/\" #<"),
                "path applies to http and https monitors only",
            ),
            (
                format!("{SERVER}[[monitor]]\nname = \"m\"\ntype = \"tcp\"\nweight = 3 #<"),
                "monitor \"m\": weight only counts toward a service's monitor_threshold",
            ),
            (
                format!("{SERVER}[[monitor]]\nname = \"m\"\ntype = \"icmp\"\nport = 80 #<"),
                "port applies to tcp, http, https and dns monitors only",
            ),
            (
                format!(
                    "{SERVER}[[monitor]]\nname = \"m\"\ntype = \"https\"\ninsecure = true\nca_file = \"ca.pem\" #<"
                ),
                "ca_file is not read with insecure = true",
            ),
            (
                format!("{SERVER}[[monitor]]\nname = \"m\"\ntype = \"dns\" #<"),
                "a dns monitor needs qname",
            ),
            (
                format!(
                    "{SERVER}[[monitor]]\nname = \"m\"\ntype = \"http\"\nexpect_status = [200, 700] #<"
                ),
                "is not an HTTP status",
            ),
            (
                format!("{SERVER}[[monitor]]\nname = \"m\"\ntype = \"smtp\" #<"),
                "unknown variant `smtp`",
            ),
            (
                format!("{SERVER}[[monitor]]\nname = \"m\"\ntype = \"tcp\"\nfall = 0 #<"),
                "fall",
            ),
            (
                format!(
                    "{SERVER}[[monitor]]\nname = \"m\"\ntype = \"tcp\"\n{SITE}[[service]]\nname = \"web\"\nip = \"192.0.2.10\"\nsite = \"eu\"\nmonitors = [\"m\"]\nmonitor_threshold = 2 #<"
                ),
                "could never be UP",
            ),
            // ---- client locations ----
            (
                format!(
                    "{SERVER}[[location]]\nfrom = \"192.0.2.0\"\nto = \"nope\" #<\nlocation = \"Europe\""
                ),
                "to \"nope\" is not an IP address",
            ),
            (
                format!(
                    "{SERVER}[[location]]\nfrom = \"192.0.2.9\"\nto = \"192.0.2.1\" #<\nlocation = \"Europe\""
                ),
                "is below from",
            ),
            (
                format!(
                    "{SERVER}[[location]]\nfrom = \"192.0.2.0\"\nto = \"2001:db8::1\" #<\nlocation = \"Europe\""
                ),
                "different families",
            ),
            (
                format!(
                    "{SERVER}[[location]]\nfrom = \"192.0.2.0\"\nto = \"192.0.2.9\"\nlocation = \"a.b.c.d.e.f.g\" #<"
                ),
                "qualifiers, at most 6",
            ),
            (
                format!("{SERVER}[locations]\nmaxmind = \"x.mmdb\" #<"),
                "unknown field `maxmind`",
            ),
            (
                format!("{SERVER}[locations]\ncontinent = \"short\" #<"),
                "unknown variant `short`",
            ),
            (
                format!(
                    "{SERVER}[[locations.file]]\npath = \"geo.csv\"\nformat = \"ip-countryy\" #<"
                ),
                "locations.file \"geo.csv\": unknown format \"ip-countryy\"; NetScaler's formats \
                 are netscaler, netscaler6, ip-country,",
            ),
            (
                format!("{SERVER}[[locations.file]] #<\nformat = \"ip-country\""),
                "missing field `path`",
            ),
            (
                format!("{SERVER}[[locations.file]]\npath = \"\" #<"),
                "locations.file \"\": path is empty",
            ),
            (
                format!("{SERVER}[[locations.file]]\npath = \"geo.csv\"\ncontext = \"custom\" #<"),
                "unknown field `context`",
            ),
            (format!("{SERVER}bogus = 1 #<"), "unknown field `bogus`"),
            (
                "[server]\nlisten = [\"192.0.2.1\"\n[view] #<\n".into(),
                "expected",
            ),
            (
                format!("{SERVER}dns_port = 1\ndns_port = 2 #<"),
                "duplicate key `dns_port`",
            ),
            (
                format!("{VIEW}{SERVER}[server] #<"),
                "duplicate key `server`",
            ),
            (
                "# comment\n\n[server] #<\ndns_port = 53".into(),
                "missing field `listen`",
            ),
            (
                format!("{SERVER}[[domain]] #<\nname = \"www.example.com\"\na = [\"192.0.2.1\"]"),
                "[[domain]] is no longer supported",
            ),
            // ---- [server] ----
            ("[server]\nlisten = [] #<\n".into(), "at least one address"),
            (
                "[server]\nlisten = [\n  \"192.0.2.1\",\n  \"192.0.2.300\", #<\n]\n".into(),
                "\"192.0.2.300\" is not an IP address",
            ),
            (
                "[server]\nlisten = [\"2001:db8::1\",\n \"2001:DB8::1\"] #<\n".into(),
                "2001:db8::1 listed twice (first on line 2)",
            ),
            (format!("{SERVER}dns_port = 0 #<"), "0 is not a port"),
            (
                format!("{SERVER}edns_udp_size = 511 #<"),
                "511 out of range 512..=4096",
            ),
            (
                format!("{SERVER}edns_udp_size = 4097 #<"),
                "4097 out of range",
            ),
            (
                format!("{SERVER}stale_after_s = -1 #<"),
                "server.stale_after_s: -1 out of range (0 = never, or 1..=86400 seconds)",
            ),
            (
                format!("{SERVER}stale_after_s = 86401 #<"),
                "86401 out of range",
            ),
            (
                format!("{SERVER}xdp_mode = \"generic\" #<"),
                "unknown variant `generic`",
            ),
            (
                format!("{SERVER}pin_path = \"bpf/gslb\" #<"),
                "must be an absolute path",
            ),
            (
                format!("{SERVER}interface = \"eth0:1\" #<"),
                "not a valid interface name",
            ),
            // ---- [[view]] ----
            (
                format!(
                    "{SERVER}{VIEW}[[view]]\nname = \"europe\" #<\nprefixes = [\"10.0.0.0/8\"]"
                ),
                "defined twice (first on line 4)",
            ),
            (
                format!("{SERVER}[[view]]\nname = \"default\" #<\nprefixes = [\"10.0.0.0/8\"]"),
                "reserved",
            ),
            (
                format!("{SERVER}[[view]]\nname = \"eu west\" #<\nprefixes = [\"10.0.0.0/8\"]"),
                "only letters, digits",
            ),
            (
                format!("{SERVER}[[view]]\nname = \"eu\"\nprefixes = [] #<"),
                "prefixes is empty",
            ),
            (
                format!("{SERVER}[[view]]\nname = \"eu\"\nprefixes = [\"198.51.100.0\"] #<"),
                "is not a prefix",
            ),
            (
                format!("{SERVER}[[view]]\nname = \"eu\"\nprefixes = [\"198.51.100.1/24\"] #<"),
                "view \"eu\": prefix 198.51.100.1/24 has host bits set (did you mean 198.51.100.0/24?)",
            ),
            (
                format!(
                    "{SERVER}{VIEW}[[view]]\nname = \"eu2\"\nprefixes = [\n \"10.0.0.0/8\",\n \"198.51.100.0/24\"] #<"
                ),
                "already in view \"europe\" (line 5)",
            ),
            (
                format!(
                    "{SERVER}[[view]]\nname = \"eu\"\nprefixes = [\"10.0.0.0/8\",\n \"10.0.0.0/8\"] #<"
                ),
                "listed twice",
            ),
            (
                format!("{SERVER}[[view]] #<\nname = \"eu\""),
                "missing field `prefixes`",
            ),
            // ---- [[zone]] ----
            (
                format!(
                    "{SERVER}{ZONE}[[zone]]\nname = \"EXAMPLE.com.\" #<\nns = [\"ns.example.net\"]\nsoa.rname = \"h.example.com\""
                ),
                "zone \"example.com\" defined twice (first on line 4)",
            ),
            (
                format!(
                    "{SERVER}{ZONE}[[zone]]\nname = \"sub.example.com\" #<\nns = [\"ns.example.net\"]\nsoa.rname = \"h.example.com\""
                ),
                "zone \"sub.example.com\" is inside zone \"example.com\" (line 4); nested zones are not supported",
            ),
            (
                format!(
                    "{SERVER}[[zone]]\nname = \"sub.example.com\"\nns = [\"ns.example.net\"]\nsoa.rname = \"h.example.com\"\n\
                     [[zone]]\nname = \"example.com\" #<\nns = [\"ns.example.net\"]\nsoa.rname = \"h.example.com\""
                ),
                "zone \"example.com\" contains zone \"sub.example.com\" (line 4)",
            ),
            (
                format!(
                    "{SERVER}[[zone]]\nname = \"exa mple.com\" #<\nns = [\"ns.example.net\"]\nsoa.rname = \"h.example.com\""
                ),
                "zone name \"exa mple.com\": invalid character ' '",
            ),
            (
                format!(
                    "{SERVER}[[zone]]\nname = \".\" #<\nns = [\"ns.example.net\"]\nsoa.rname = \"h.example.com\""
                ),
                "the root is not allowed",
            ),
            (
                format!("{SERVER}{ZONE}ttl = -1 #<"),
                "zone \"example.com\": ttl -1 out of range 0..=2147483647",
            ),
            (
                format!(
                    "{SERVER}[[zone]]\nname = \"example.com\"\nns = [] #<\nsoa.rname = \"h.example.com\""
                ),
                "zone \"example.com\": ns is empty",
            ),
            (
                format!(
                    "{SERVER}[[zone]]\nname = \"example.com\"\nns = [\"ns1\"] #<\nsoa.rname = \"h.example.com\""
                ),
                "ns \"ns1\": a single label",
            ),
            (
                format!(
                    "{SERVER}[[zone]]\nname = \"example.com\"\nns = [\"ns.example.net\",\n \"NS.example.net.\"] #<\nsoa.rname = \"h.example.com\""
                ),
                "ns ns.example.net listed twice (first on line 5)",
            ),
            (
                format!("{SERVER}[[zone]] #<\nname = \"example.com\"\nns = [\"ns.example.net\"]"),
                "missing field `soa`",
            ),
            (
                format!(
                    "{SERVER}[[zone]]\nname = \"example.com\"\nns = [\"ns.example.net\"]\n[zone.soa] #<\nserial = 1"
                ),
                "missing field `rname`",
            ),
            (
                format!(
                    "{SERVER}[[zone]]\nname = \"example.com\"\nns = [\"ns.example.net\"]\nsoa.rname = \"hostmaster@example.com\" #<"
                ),
                "write the mailbox as a name, with '.' for '@' (\"hostmaster.example.com\")",
            ),
            (
                format!("{SERVER}{ZONE}soa.mname = \"ns..example.com\" #<"),
                "soa.mname \"ns..example.com\": empty label",
            ),
            (
                format!("{SERVER}{ZONE}soa.serial = 4294967296 #<"),
                "soa.serial 4294967296 out of range 0..=4294967295",
            ),
            (
                format!("{SERVER}{ZONE}soa.minimum = -5 #<"),
                "soa.minimum -5 out of range",
            ),
            (
                format!("{SERVER}{ZONE}soa.bogus = 1 #<"),
                "unknown field `bogus`",
            ),
            (
                format!(
                    "{SERVER}[[zone]]\nname = \"example.com\"\nns = [\"ns1.example.com\"] #<\nsoa.rname = \"h.example.com\""
                ),
                "name server ns1.example.com is inside a zone served here but has no address",
            ),
            // ---- [[zone.record]] ----
            (
                record("name = \"x\"\ntype = \"PTR\" #<\nvalue = \"x\""),
                "record x.example.com: unknown type \"PTR\" (supported: A, AAAA, CNAME, TXT, MX, NS, SRV)",
            ),
            (
                record("name = \"@\"\ntype = \"soa\" #<\nvalue = \"x\""),
                "the SOA record is [zone.soa]",
            ),
            (
                record("name = \"x\"\ntype = \"A\"\ndata = \"192.0.2.1\" #<"),
                "unknown field `data`",
            ),
            (
                format!("{SERVER}{ZONE}[[zone.record]] #<\nname = \"x\"\ntype = \"A\""),
                "missing field `value`",
            ),
            (
                record("name = \"www.example.net.\" #<\ntype = \"A\"\nvalue = \"192.0.2.1\""),
                "www.example.net is outside the zone example.com",
            ),
            (
                record("name = \"www.Example.com\" #<\ntype = \"A\"\nvalue = \"192.0.2.1\""),
                "so this is www.example.com.example.com; write \"www\" or \"www.Example.com.\"",
            ),
            (
                record("name = \"example.com\" #<\ntype = \"A\"\nvalue = \"192.0.2.1\""),
                "write \"@\"",
            ),
            (
                record("name = \"*\" #<\ntype = \"A\"\nvalue = \"192.0.2.1\""),
                "wildcard names are not supported",
            ),
            (
                record(&format!(
                    "name = \"{}\" #<\ntype = \"A\"\nvalue = \"192.0.2.1\"",
                    "a".repeat(64)
                )),
                "is 64 bytes, at most 63",
            ),
            (
                record("name = \"x\"\ntype = \"A\"\nvalue = \"2001:db8::1\" #<"),
                "record x.example.com A: 2001:db8::1 is an IPv6 address (use type AAAA)",
            ),
            (
                record("name = \"x\"\ntype = \"AAAA\"\nvalue = \"192.0.2.1\" #<"),
                "192.0.2.1 is an IPv4 address (use type A)",
            ),
            (
                record("name = \"x\"\ntype = \"A\"\nvalue = \"192.0.2\" #<"),
                "\"192.0.2\" is not an IP address",
            ),
            (
                record("name = \"x\"\ntype = \"CNAME\"\nvalue = \".\" #<"),
                "the root is not allowed here",
            ),
            (
                record("name = \"x\"\ntype = \"CNAME\"\nvalue = \"www.example.com\" #<"),
                "\"www.example.com\": relative names are relative to the zone",
            ),
            (
                record("name = \"x\"\ntype = \"NS\"\nvalue = \"ns..example.net.\" #<"),
                "empty label",
            ),
            (
                record("name = \"@\"\ntype = \"MX\"\nvalue = \"mail.example.com.\" #<"),
                "is not \"preference exchange\"",
            ),
            (
                record("name = \"@\"\ntype = \"MX\"\nvalue = \"70000 mail\" #<"),
                "preference \"70000\" is not a number in 0..=65535",
            ),
            (
                record("name = \"_x._tcp\"\ntype = \"SRV\"\nvalue = \"1 2 sip.example.com.\" #<"),
                "is not \"priority weight port target\"",
            ),
            (
                record("name = \"_x._tcp\"\ntype = \"SRV\"\nvalue = \"1 2 http sip\" #<"),
                "port \"http\" is not a number",
            ),
            (
                record(&format!(
                    "name = \"big\"\ntype = \"TXT\"\nvalue = \"{}\" #<",
                    "x".repeat(65_300)
                )),
                "65300 bytes of text in 257 strings make 65557 bytes of record data",
            ),
            (
                record("name = \"x\"\ntype = \"A\"\nvalue = \"192.0.2.1\"\nttl = 2147483648 #<"),
                "record x.example.com A: ttl 2147483648 out of range",
            ),
            (
                record("name = \"@\" #<\ntype = \"NS\"\nvalue = \"ns2.example.net.\""),
                "the apex NS records are the zone's ns list",
            ),
            (
                record("name = \"@\" #<\ntype = \"CNAME\"\nvalue = \"www.example.net.\""),
                "a CNAME cannot be at the apex",
            ),
            (
                record(
                    "name = \"x\"\ntype = \"A\"\nvalue = \"192.0.2.1\"\n[[zone.record]]\nname = \"x\"\ntype = \"A\"\nvalue = \"192.0.2.1\" #<",
                ),
                "\"192.0.2.1\" listed twice (first on line 8)",
            ),
            (
                record(
                    "name = \"x\"\ntype = \"A\"\nvalue = \"192.0.2.1\"\n[[zone.record]]\nname = \"x\" #<\ntype = \"CNAME\"\nvalue = \"y\"",
                ),
                "record x.example.com CNAME: a CNAME must be the only record at its name (A on line 8)",
            ),
            (
                record(
                    "name = \"x\"\ntype = \"CNAME\"\nvalue = \"y\"\n[[zone.record]]\nname = \"X.example.com.\" #<\ntype = \"TXT\"\nvalue = \"t\"",
                ),
                "a CNAME must be the only record at its name (CNAME on line 8)",
            ),
            (
                record(
                    "name = \"x\"\ntype = \"CNAME\"\nvalue = \"y\"\n[[zone.record]]\nname = \"x\" #<\ntype = \"CNAME\"\nvalue = \"z\"",
                ),
                "(CNAME on line 8)",
            ),
            (
                record(
                    "name = \"x\"\ntype = \"A\"\nvalue = \"192.0.2.1\"\nttl = 60\n[[zone.record]]\nname = \"x\"\ntype = \"A\"\nvalue = \"192.0.2.2\"\nttl = 120 #<",
                ),
                "TTL 120 differs from TTL 60 of the x.example.com A record on line 8",
            ),
            (
                record(
                    "name = \"x\"\ntype = \"TXT\"\nvalue = \"a\"\nttl = 60\n[[zone.record]]\nname = \"x\" #<\ntype = \"TXT\"\nvalue = \"b\"",
                ),
                "TTL 3600 differs from TTL 60",
            ),
            (
                record(
                    "name = \"sub\"\ntype = \"NS\"\nvalue = \"ns.example.net.\"\n[[zone.record]]\nname = \"x.sub\" #<\ntype = \"TXT\"\nvalue = \"t\"",
                ),
                "x.sub.example.com is at or below the delegation of sub.example.com (NS on line 8)",
            ),
            (
                record(
                    "name = \"sub\" #<\ntype = \"TXT\"\nvalue = \"t\"\n[[zone.record]]\nname = \"sub\"\ntype = \"NS\"\nvalue = \"ns.example.net.\"",
                ),
                "is at or below the delegation of sub.example.com (NS on line 12)",
            ),
            (
                record(
                    "name = \"sub\"\ntype = \"NS\"\nvalue = \"ns.example.net.\"\n[[zone.record]]\nname = \"a.sub\" #<\ntype = \"NS\"\nvalue = \"ns.example.net.\"",
                ),
                "below the delegation of sub.example.com",
            ),
            (
                record("name = \"sub\"\ntype = \"NS\"\nvalue = \"ns.sub\" #<"),
                "name server ns.sub.example.com is inside a zone served here but has no address",
            ),
            // ---- [[site]] ----
            (
                format!("{SERVER}[[site]]\nname = \"eu west\" #<\nip = \"192.0.2.1\""),
                "site name \"eu west\": only letters, digits, '-', '_' and '.'",
            ),
            (
                format!("{SERVER}[[site]]\nname = \"-eu\" #<\nip = \"192.0.2.1\""),
                "starting with a letter, digit or '_'",
            ),
            (
                format!("{SERVER}{SITE}[[site]]\nname = \"eu\" #<\nip = \"192.0.2.2\""),
                "site name \"eu\": defined twice (first on line 4)",
            ),
            (
                format!("{SERVER}[[site]]\nname = \"eu\"\nip = \"eu.example.com\" #<"),
                "site \"eu\": ip \"eu.example.com\" is not an IP address",
            ),
            (
                format!("{SERVER}{SITE}[[site]]\nname = \"us\"\nip = \"192.0.2.201\" #<"),
                "site \"us\": ip 192.0.2.201 is already site \"eu\"'s (line 5)",
            ),
            (
                format!("{SERVER}{SITE}public_ip = \"2001:db8::1\" #<"),
                "site \"eu\": public_ip 2001:db8::1 is IPv6 but ip 192.0.2.201 is IPv4",
            ),
            // MEP-only settings without MEP.
            (
                format!("{SERVER}{SITE}public_ip = \"203.0.113.201\" #<"),
                "site \"eu\": public_ip is a metric exchange setting, and there is no [mep]",
            ),
            (
                format!("{SERVER}{SITE}role = \"parent\" #<"),
                "site \"eu\": role is a metric exchange setting, and there is no [mep]",
            ),
            (
                format!("{SERVER}{SITE}mep_port = 3012 #<"),
                "site \"eu\": mep_port is a metric exchange setting, and there is no [mep]",
            ),
            (
                format!("{SERVER}{SITE}region = \"eu\" #<"),
                "unknown field `region`",
            ),
            (
                format!("{SERVER}[[site]] #<\nname = \"eu\""),
                "missing field `ip`",
            ),
            // ---- [[service]] ----
            (
                svc("ip = \"192.0.2.10\"\nsite = \"asia\" #<"),
                "service \"web\": unknown site \"asia\" (defined sites: eu)",
            ),
            (
                format!(
                    "{SERVER}[[service]]\nname = \"web\"\nip = \"192.0.2.10\"\nsite = \"eu\" #<"
                ),
                "unknown site \"eu\" (no sites are defined)",
            ),
            (
                format!("{SERVER}[[service]] #<\nname = \"web\"\nip = \"192.0.2.10\""),
                "missing field `site`",
            ),
            (
                svc("ip = \"192.0.2.10\"\nsite = \"eu\"\nport = 0 #<"),
                "service \"web\": port 0 out of range 1..=65535",
            ),
            (
                svc("ip = \"192.0.2.10\"\nsite = \"eu\"\nport = 65536 #<"),
                "port 65536 out of range",
            ),
            (
                svc("ip = \"192.0.2.10\"\nsite = \"eu\"\nweight = 0 #<"),
                "weight 0 out of range 1..=100",
            ),
            (
                svc("ip = \"192.0.2.10\"\nsite = \"eu\"\nweight = 101 #<"),
                "weight 101 out of range 1..=100",
            ),
            (
                svc("ip = \"192.0.2.10\"\nsite = \"eu\"\nlocation = \"a.b.c.d.e.f.g\" #<"),
                "service \"web\": location \"a.b.c.d.e.f.g\": 7 qualifiers, at most 6",
            ),
            (
                svc("ip = \"192.0.2.10\"\nsite = \"eu\"\nlocation = \"Europe..London\" #<"),
                "qualifier 2 is empty",
            ),
            (
                svc("ip = \"192.0.2.10\"\nsite = \"eu\"\nlocation = 'Europe.\"St. Albans' #<"),
                "unterminated quote",
            ),
            (
                svc("ip = \"10.0.0.1\"\nsite = \"eu\"\npublic_ip = \"2001:db8::1\" #<"),
                "public_ip 2001:db8::1 is IPv6 but ip 10.0.0.1 is IPv4",
            ),
            (
                svc("ip = \"10.0.0.1\"\nsite = \"eu\"\npublic_ip = \"any\" #<"),
                "public_ip \"any\" is not an IP address",
            ),
            (
                svc(
                    "ip = \"10.0.0.1\"\nsite = \"eu\"\n[[service]]\nname = \"web\" #<\nip = \"10.0.0.2\"\nsite = \"eu\"",
                ),
                "service name \"web\": defined twice (first on line 7)",
            ),
            (
                svc(
                    "ip = \"10.0.0.1\"\nsite = \"eu\"\n[[service]]\nname = \"web2\"\nip = \"10.0.0.1\" #<\nsite = \"eu\"",
                ),
                "service \"web2\": 10.0.0.1 port 80 is already service \"web\" (line 7)",
            ),
            (
                svc(
                    "ip = \"10.0.0.1\"\nport = 443\nsite = \"eu\"\n[[service]]\nname = \"web2\"\nip = \"10.0.0.1\"\nport = 443 #<\nsite = \"eu\"",
                ),
                "10.0.0.1 port 443 is already service \"web\"",
            ),
            (
                svc("ip = \"10.0.0.1\"\nsite = \"eu\"\nprotocol = \"HTTP\" #<"),
                "unknown field `protocol`",
            ),
            // ---- [[gslb_domain]] ----
            (
                format!(
                    "{SERVER}{SITE}{SERVICES}[[gslb_domain]]\nname = \"www.example.com\" #<\nservices = [\"web1\"]"
                ),
                "gslb_domain \"www.example.com\": not inside any zone (no [[zone]] is defined)",
            ),
            (
                format!(
                    "{SERVER}{ZONE}{SITE}{SERVICES}[[gslb_domain]]\nname = \"www.example.org\" #<\nservices = [\"web1\"]"
                ),
                "not inside any zone (zones: example.com)",
            ),
            (
                dom(
                    "services = [\"web1\"]\n[[gslb_domain]]\nname = \"WWW.example.com.\" #<\nservices = [\"web1\"]",
                ),
                "gslb_domain \"www.example.com\": defined twice (first on line 26)",
            ),
            (
                format!(
                    "{SERVER}{ZONE}[[zone.record]]\nname = \"www\"\ntype = \"TXT\"\nvalue = \"t\"\n{SITE}{SERVICES}\
                     [[gslb_domain]]\nname = \"www.example.com\" #<\nservices = [\"web1\"]"
                ),
                "zone \"example.com\" has a static record of this name (line 8); a name is either static or GSLB",
            ),
            (
                format!(
                    "{SERVER}{ZONE}[[zone.record]]\nname = \"sub\"\ntype = \"NS\"\nvalue = \"ns.example.net.\"\n{SITE}{SERVICES}\
                     [[gslb_domain]]\nname = \"www.sub.example.com\" #<\nservices = [\"web1\"]"
                ),
                "at or below the delegation of sub.example.com (NS on line 8)",
            ),
            (
                format!(
                    "{SERVER}{ZONE}[[gslb_domain]]\nname = \"{long_label}\" #<\nservices = [\"x\"]"
                ),
                "is 64 bytes, at most 63",
            ),
            (
                format!(
                    "{SERVER}{ZONE}[[gslb_domain]]\nname = \"{long_name}\" #<\nservices = [\"x\"]"
                ),
                "269 bytes in wire format",
            ),
            (
                format!(
                    "{SERVER}{ZONE}[[gslb_domain]]\nname = \"www.exa$mple.com\" #<\nservices = [\"x\"]"
                ),
                "gslb_domain name \"www.exa$mple.com\": invalid character '$'",
            ),
            (
                format!(
                    "{SERVER}{ZONE}[[gslb_domain]]\nname = \"*.example.com\" #<\nservices = [\"x\"]"
                ),
                "wildcard",
            ),
            (
                format!(
                    "{SERVER}{ZONE}[[gslb_domain]]\nname = \"a..example.com\" #<\nservices = [\"x\"]"
                ),
                "empty label",
            ),
            (
                format!("{SERVER}{ZONE}[[gslb_domain]] #<\nname = \"www.example.com\""),
                "missing field `services`",
            ),
            (dom("services = [] #<"), "services is empty"),
            (
                dom("services = [\"web1\", \"nope\"] #<"),
                "gslb_domain \"www.example.com\": unknown service \"nope\" (defined services: web1, web2, web6)",
            ),
            (
                dom("services = [\"web1\",\n \"web1\"] #<"),
                "service \"web1\" listed twice (first on line 27)",
            ),
            (
                format!(
                    "{SERVER}{ZONE}{SITE}{nine_services}[[gslb_domain]]\nname = \"www.example.com\"\nservices = [{},\n {}] #<",
                    nine_names[..8].join(", "),
                    nine_names[8]
                ),
                "service \"s9\" is the 9th IPv4 service; at most 8 per address family",
            ),
            (
                dom("services = [\"web1\"]\nttl = 2147483648 #<"),
                "gslb_domain \"www.example.com\": ttl 2147483648 out of range 0..=2147483647",
            ),
            (
                dom("services = [\"web1\"]\nanswer = \"first\" #<"),
                "unknown variant `first`",
            ),
            (
                dom("services = [\"web1\"]\na = [\"192.0.2.1\"] #<"),
                "unknown field `a`",
            ),
            (
                dom("services = [\"web1\"]\ndown_response = \"backup\" #<"),
                "down_response \"backup\" needs backup_ip addresses",
            ),
            (
                dom(
                    "services = [\"web1\"]\nbackup_ip = [\"192.0.2.99\"] #<\ndown_response = \"nodata\"",
                ),
                "backup_ip is never answered with down_response \"nodata\" (line 29)",
            ),
            (
                dom("services = [\"web1\"]\ndown_response = \"empty\" #<"),
                "unknown variant `empty`",
            ),
            (
                dom("services = [\"web1\"]\nbackup_ip = [\"backup.example.net\"] #<"),
                "backup_ip \"backup.example.net\" is not an IP address",
            ),
            (
                dom(
                    "services = [\"web1\"]\nbackup_ip = [\"2001:db8::99\",\n \"2001:db8:0::99\"] #<",
                ),
                "backup_ip 2001:db8::99 listed twice (first on line 28)",
            ),
            (
                dom(&format!(
                    "services = [\"web1\"]\nbackup_ip = [{},\n {}] #<",
                    nine_v6[..8].join(", "),
                    nine_v6[8]
                )),
                "more than 8 IPv6 backup_ip addresses",
            ),
            (
                dom(
                    "services = [\"web1\"]\n[[gslb_domain.view]]\nview = \"asia\" #<\nservices = [\"web2\"]",
                ),
                "unknown view \"asia\" (defined views: europe)",
            ),
            (
                dom(
                    "services = [\"web1\"]\n[[gslb_domain.view]]\nview = \"default\" #<\nservices = [\"web2\"]",
                ),
                "implicit",
            ),
            (
                dom(
                    "services = [\"web1\"]\n[[gslb_domain.view]]\nview = \"europe\"\nservices = [\"web2\"]\n\
                     [[gslb_domain.view]]\nview = \"europe\" #<\nservices = [\"web6\"]",
                ),
                "view \"europe\" listed twice (first on line 29)",
            ),
            (
                dom(
                    "services = [\"web1\"]\n[[gslb_domain.view]]\nview = \"europe\"\nservices = [] #<",
                ),
                "gslb_domain \"www.example.com\", view \"europe\": services is empty",
            ),
            (
                dom(
                    "services = [\"web1\"]\n[[gslb_domain.view]]\nview = \"europe\"\nservices = [\"web9\"] #<",
                ),
                "view \"europe\": unknown service \"web9\"",
            ),
            (
                dom("services = [\"web1\"]\n[[gslb_domain.view]] #<\nview = \"europe\""),
                "missing field `services`",
            ),
        ];
        assert_rejected(&cases);
    }

    /// Each case marks the offending line with `#<`; the error must point there and contain the
    /// reason. Every failing case is reported, not only the first.
    fn assert_rejected(cases: &[(String, &str)]) {
        let mut failures = Vec::new();
        for (text, reason) in cases {
            let want_line = text
                .lines()
                .position(|l| l.contains("#<"))
                .expect("case has a #< marker")
                + 1;
            let failure = match parse(text) {
                Ok(_) => "accepted".to_owned(),
                Err(ConfigError::Invalid {
                    line,
                    reason: got,
                    file,
                    ..
                }) => {
                    if !got.contains(reason) {
                        format!("reason {got:?} lacks {reason:?}")
                    } else if line != want_line {
                        format!("line {line} instead of {want_line} for {got:?}")
                    } else if file != Path::new("test.toml") {
                        format!("file {}", file.display())
                    } else {
                        continue;
                    }
                }
                Err(e) => format!("unexpected {e:?}"),
            };
            let shown = &text[..text.floor_char_boundary(2000)];
            failures.push(format!("{failure}\n{shown}"));
        }
        assert!(
            failures.is_empty(),
            "{} of {} cases failed:\n\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n\n")
        );
    }

    /// Sites, services (two with locations, one without) for the load-balancing sections.
    const LB: &str = "[[site]]\nname = \"eu\"\nip = \"192.0.2.201\"\n\
        [[site]]\nname = \"us\"\nip = \"192.0.2.202\"\n\
        [[service]]\nname = \"web1\"\nip = \"192.0.2.10\"\nsite = \"eu\"\nlocation = \"Europe.UK\"\n\
        [[service]]\nname = \"web2\"\nip = \"192.0.2.11\"\nsite = \"us\"\nlocation = \"NorthAmerica.US\"\n\
        [[service]]\nname = \"plain\"\nip = \"192.0.2.12\"\nsite = \"us\"\n";

    #[test]
    fn load_balancing_sections() {
        let text = format!(
            r#"{SERVER}{ZONE}{LB}
            [engine]
            wildcard_mode = "expression"

            [[monitor]]
            name = "busy-load"
            type = "load"
            format = "prometheus"
            metric = "connections"
            [[link]]
            name = "uplink"
            interface = "eth1"
            threshold_kbps = 100000
            services = ["busy"]

            [[service]]
            name = "busy"
            ip = "192.0.2.13"
            site = "eu"
            load_monitors = ["busy-load"]
            max_connections = 1000
            max_bandwidth_kbps = 50000

            [[gslb_domain]]
            name = "www.example.com"
            services = ["web1", "web2", "plain"]
            method = "rtt"
            alternate = "topology"
            fallback = "globalavailability"
            tolerance_ms = 5
            persistence = {{ mask_v4 = 24, mask_v6 = 56, timeout_s = 300, max_entries = 1000 }}
            backup_domain = "Backup.example.com."

            [[gslb_domain]]
            name = "backup.example.com"
            services = ["busy"]
            method = "sourceiphash"
            sourceip_mask = {{ mask_v4 = 16 }}
            persistence = {{}}

            [[gslb_domain]]
            name = "near.example.com"
            services = ["web1", "plain"]
            method = "staticproximity"
            alternate = "ratio"

            [[topology]]
            destination = "eu"
            ldns = "202.106.0.0/16"
            score = 100
            [[topology]]
            destination = "us"
            ldns = "Asia.CN"
            score = 4294967295
            [[topology]]
            destination = "us"
            ldns = "*"
            score = 1

            [[action]]
            name = "prefer-asia"
            preferred_locations = ["Asia.HK", "Europe.UK", 'Europe.UK."St. Albans"']

            [[policy]]
            name = "zmb"
            expression = 'CLIENT.IP.SRC.MATCHES_LOCATION("*.ZMB.*.*")'
            action = "prefer-asia"
            priority = 100

            [[policy]]
            name = "lab"
            expression = "CLIENT.IP.SRC.IN_SUBNET(10.0.0.0/8) && DNS.REQ.QUESTION.TYPE.EQ(A)"
            action = "prefer-asia"
            priority = 1
            "#
        );
        let config = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(config.engine.wildcard_mode, WildcardMode::Expression);
        let busy = config.service("busy").unwrap();
        assert_eq!(
            (busy.max_connections, busy.max_bandwidth_kbps),
            (Some(1000), Some(50000))
        );
        assert_eq!(config.service("web1").unwrap().max_connections, None);

        let www = config.gslb_domain("www.example.com").unwrap();
        assert_eq!(
            www.chain(),
            [Method::Rtt, Method::Topology, Method::GlobalAvailability]
        );
        assert_eq!(www.tolerance_ms, 5);
        assert_eq!(
            www.persistence,
            Some(Persistence {
                mask: SourceMask { v4: 24, v6: 56 },
                timeout_s: 300,
                max_entries: 1000,
            })
        );
        assert_eq!(www.backup_domain.as_deref(), Some("backup.example.com"));
        assert_eq!(www.sourceip_mask, SourceMask::default());

        let backup = config.gslb_domain("backup.example.com").unwrap();
        assert_eq!(backup.chain(), [Method::SourceIpHash]);
        assert_eq!(backup.sourceip_mask, SourceMask { v4: 16, v6: 128 });
        // Every persistence setting has a default (NetScaler's: one address, two minutes; 65,536
        // entries).
        assert_eq!(
            backup.persistence,
            Some(Persistence {
                mask: SourceMask::default(),
                timeout_s: 120,
                max_entries: 65_536,
            })
        );
        assert_eq!(backup.backup_domain, None);
        let near = config.gslb_domain("near.example.com").unwrap();
        assert_eq!(near.chain(), [Method::StaticProximity, Method::Ratio]);
        assert_eq!(near.tolerance_ms, 0);
        assert_eq!(near.persistence, None);

        let loc = |s: &str| Location::parse(s).unwrap();
        assert_eq!(
            config.topology,
            [
                TopologyRecord {
                    destination: "eu".into(),
                    ldns: Ldns::Prefix("202.106.0.0/16".parse().unwrap()),
                    score: 100
                },
                TopologyRecord {
                    destination: "us".into(),
                    ldns: Ldns::Location(loc("Asia.CN")),
                    score: u32::MAX
                },
                TopologyRecord {
                    destination: "us".into(),
                    ldns: Ldns::Location(loc("*")),
                    score: 1
                },
            ]
        );
        assert_eq!(
            config.actions,
            [DnsAction {
                name: "prefer-asia".into(),
                preferred_locations: vec![
                    loc("Asia.HK"),
                    loc("Europe.UK"),
                    loc("Europe.UK.\"St. Albans\"")
                ],
            }]
        );
        assert_eq!(config.policies.len(), 2);
        assert_eq!(
            config.policies[0],
            DnsPolicy {
                name: "zmb".into(),
                expression: Expr::parse("CLIENT.IP.SRC.MATCHES_LOCATION(\"*.ZMB\")").unwrap(),
                action: "prefer-asia".into(),
                priority: 100,
            }
        );
        assert_eq!(config.policies[1].priority, 1);

        // And the engine takes it as it is.
        let engine = crate::policy::Engine::from_config(&config).unwrap();
        assert_eq!(engine.policies()[0].name, "lab");
        assert_eq!(engine.domain(0).backup_domain, Some(1));
        assert_eq!(engine.domain(0).tolerance_us, 5000);
        assert_eq!(engine.topology().len(), 3);
    }

    #[test]
    fn load_balancing_sections_rejected() {
        let lb = |body: &str| format!("{SERVER}{ZONE}{LB}{body}\n");
        // A domain over web1 (eu, located) and web2 (us, located).
        let dom = |body: &str| {
            lb(&format!(
                "[[gslb_domain]]\nname = \"www.example.com\"\nservices = [\"web1\", \"web2\"]\n{body}"
            ))
        };
        let topo = |body: &str| lb(&format!("[[topology]]\n{body}"));
        let action = |body: &str| lb(&format!("[[action]]\nname = \"prefer\"\n{body}"));
        let policy = |body: &str| {
            lb(&format!(
                "[[action]]\nname = \"prefer\"\npreferred_locations = [\"Asia\"]\n\
                 [[policy]]\nname = \"p\"\nexpression = \"TRUE\"\naction = \"prefer\"\npriority = 10\n{body}"
            ))
        };
        let nine: Vec<String> = (1..=9).map(|i| format!("\"Asia.C{i}\"")).collect();
        let cases: Vec<(String, &str)> = vec![
            // ---- [[service]] limits ----
            (
                lb(
                    "[[service]]\nname = \"s\"\nip = \"192.0.2.50\"\nsite = \"eu\"\nmax_connections = 0 #<",
                ),
                "service \"s\": max_connections 0 out of range 1..=",
            ),
            (
                lb(
                    "[[service]]\nname = \"s\"\nip = \"192.0.2.50\"\nsite = \"eu\"\nmax_bandwidth_kbps = -5 #<",
                ),
                "max_bandwidth_kbps -5 out of range",
            ),
            // ---- [[gslb_domain]] method chain ----
            (
                dom("method = \"fastest\" #<"),
                "unknown variant `fastest`, expected one of `roundrobin`",
            ),
            (
                dom("method = \"roundrobin\"\nalternate = \"rtt\" #<"),
                "alternate \"rtt\" is never used: method \"roundrobin\" always decides",
            ),
            (
                dom("fallback = \"rtt\" #<"),
                "fallback \"rtt\" is never used: method \"roundrobin\"",
            ),
            (
                dom("method = \"rtt\"\nalternate = \"rtt\" #<"),
                "alternate \"rtt\" repeats the method",
            ),
            (
                dom(
                    "method = \"rtt\"\nalternate = \"staticproximity\"\nfallback = \"staticproximity\" #<",
                ),
                "fallback \"staticproximity\" repeats the alternate",
            ),
            (
                dom(
                    "method = \"rtt\"\nalternate = \"ratio\"\nfallback = \"globalavailability\" #<",
                ),
                "fallback \"globalavailability\" is never used: alternate \"ratio\" always decides",
            ),
            (
                lb(
                    "[[gslb_domain]]\nname = \"www.example.com\"\nservices = [\"plain\"]\nmethod = \"rtt\"\nalternate = \"staticproximity\" #<",
                ),
                "staticproximity needs services with a location",
            ),
            (
                dom("method = \"topology\" #<"),
                "topology needs [[topology]] records",
            ),
            (
                lb(
                    "[[topology]]\ndestination = \"eu\"\nldns = \"10.0.0.0/8\"\nscore = 1\n\
                    [[gslb_domain]]\nname = \"www.example.com\"\nservices = [\"web2\"]\nmethod = \"topology\" #<",
                ),
                "whose destination is a site of this domain's services",
            ),
            (
                dom("tolerance_ms = 5 #<"),
                "tolerance_ms is only used by the rtt method",
            ),
            (
                dom("method = \"rtt\"\ntolerance_ms = 10001 #<"),
                "tolerance_ms 10001 out of range 0..=10000",
            ),
            (
                dom("sourceip_mask = { mask_v4 = 24 } #<"),
                "sourceip_mask is only used by the sourceiphash method",
            ),
            (
                dom("method = \"sourceiphash\"\nsourceip_mask = { mask_v4 = 33 } #<"),
                "sourceip_mask.mask_v4 33 out of range 1..=32",
            ),
            (
                dom("method = \"sourceiphash\"\nsourceip_mask = { mask_v4 = 24, bits = 3 } #<"),
                "unknown field `bits`",
            ),
            (
                dom("persistence = { mask_v6 = 129 } #<"),
                "persistence.mask_v6 129 out of range 1..=128",
            ),
            (
                dom("persistence = { mask_v4 = 0 } #<"),
                "persistence.mask_v4 0 out of range 1..=32",
            ),
            (
                dom("persistence = { timeout_s = 0 } #<"),
                "persistence.timeout_s 0 out of range 1..=86400",
            ),
            (
                dom("persistence = { mask = 24 } #<"),
                "unknown field `mask`",
            ),
            (
                dom("persistence = { max_entries = 0 } #<"),
                "persistence.max_entries 0 out of range 1..=16777216",
            ),
            (
                dom("answer = \"all\"\npersistence = { timeout_s = 60 } #<"),
                "persistence keeps a client on one service, and answer = \"all\" gives every service",
            ),
            (
                dom("answer = \"all\"\nmethod = \"ratio\" #<"),
                "ratio hands out services in proportion to their weights, and answer = \"all\"",
            ),
            (
                dom("answer = \"all\"\nmethod = \"globalavailability\" #<"),
                "globalavailability answers the first available service only, and answer = \"all\"",
            ),
            (
                dom("answer = \"all\"\nmethod = \"sourceiphash\" #<"),
                "sourceiphash gives each client prefix one service, and answer = \"all\"",
            ),
            // ---- backup_domain ----
            (
                dom("backup_domain = \"nope.example.com\" #<"),
                "backup_domain: unknown gslb_domain \"nope.example.com\" (defined gslb_domains: www.example.com)",
            ),
            (
                dom("backup_domain = \"WWW.example.com\" #<"),
                "backup_domain is the domain itself",
            ),
            (
                dom("backup_domain = \"api.example.com\" #<\n\
                     [[gslb_domain]]\nname = \"api.example.com\"\nservices = [\"web1\"]\nbackup_domain = \"www.example.com\""),
                "backup domains form a cycle (www.example.com → api.example.com → www.example.com)",
            ),
            // ---- [[topology]] ----
            (
                topo("destination = \"asia\" #<\nldns = \"10.0.0.0/8\"\nscore = 1"),
                "destination: unknown site \"asia\" (defined sites: eu, us)",
            ),
            (
                topo("destination = \"eu\"\nldns = \"10.0.0.1/8\" #<\nscore = 1"),
                "10.0.0.1/8 has host bits set (did you mean 10.0.0.0/8?)",
            ),
            (
                topo("destination = \"eu\"\nldns = \"10.0.0.1\" #<\nscore = 1"),
                "10.0.0.1 is an address; write a prefix (10.0.0.1/32)",
            ),
            (
                topo("destination = \"eu\"\nldns = \"10.0.0.0/33\" #<\nscore = 1"),
                "\"10.0.0.0/33\" is not a prefix",
            ),
            (
                topo("destination = \"eu\"\nldns = \"a.b.c.d.e.f.g\" #<\nscore = 1"),
                "not a prefix, nor a location: 7 qualifiers",
            ),
            (
                topo("destination = \"eu\"\nldns = \"Asia\"\nscore = 0 #<"),
                "score 0 out of range 1..=4294967295",
            ),
            (
                topo("destination = \"eu\"\nldns = \"Asia\"\nscore = 4294967296 #<"),
                "score 4294967296 out of range",
            ),
            (
                topo("destination = \"eu\"\nldns = \"Asia\"\nscore = 1\nweight = 2 #<"),
                "unknown field `weight`",
            ),
            (
                lb("[[topology]] #<\ndestination = \"eu\"\nscore = 1"),
                "missing field `ldns`",
            ),
            (
                topo(
                    "destination = \"eu\"\nldns = \"asia.*\"\nscore = 1\n[[topology]]\ndestination = \"eu\"\nldns = \"ASIA\" #<\nscore = 2",
                ),
                "for this destination is already on line",
            ),
            // ---- [[action]] ----
            (
                action("preferred_locations = [] #<"),
                "action \"prefer\": preferred_locations is empty",
            ),
            (
                action(&format!(
                    "preferred_locations = [{},\n {}] #<",
                    nine[..8].join(", "),
                    nine[8]
                )),
                "action \"prefer\": 9 preferred locations, at most 8",
            ),
            (
                action("preferred_locations = [\"a..b\"] #<"),
                "location \"a..b\": qualifier 2 is empty",
            ),
            (
                action("preferred_locations = [\"Asia.HK\",\n \"asia.hk.*\"] #<"),
                "location \"asia.hk.*\" listed twice",
            ),
            (
                action(
                    "preferred_locations = [\"Asia\"]\n[[action]]\nname = \"prefer\" #<\npreferred_locations = [\"Asia\"]",
                ),
                "action name \"prefer\": defined twice",
            ),
            // ---- [[policy]] ----
            (
                policy(
                    "[[policy]]\nname = \"q\"\nexpression = 'CLIENT.IP.SRC.IN_SUBNET(10.0.0.1/8)' #<\naction = \"prefer\"\npriority = 11",
                ),
                "policy \"q\": expression: column 25: IN_SUBNET: 10.0.0.1/8 has host bits set",
            ),
            (
                policy(
                    "[[policy]]\nname = \"q\"\nexpression = \"\" #<\naction = \"prefer\"\npriority = 11",
                ),
                "expression: column 1: the expression is empty",
            ),
            (
                policy(
                    "[[policy]]\nname = \"q\"\nexpression = \"TRUE\"\naction = \"nope\" #<\npriority = 11",
                ),
                "policy \"q\": unknown action \"nope\" (defined actions: prefer)",
            ),
            (
                policy(
                    "[[policy]]\nname = \"q\"\nexpression = \"TRUE\"\naction = \"prefer\"\npriority = 0 #<",
                ),
                "priority 0 out of range 1..=2147483647",
            ),
            (
                policy(
                    "[[policy]]\nname = \"q\"\nexpression = \"TRUE\"\naction = \"prefer\"\npriority = 10 #<",
                ),
                "policy \"q\": priority 10 is already policy \"p\"'s",
            ),
            (
                policy(
                    "[[policy]]\nname = \"p\" #<\nexpression = \"TRUE\"\naction = \"prefer\"\npriority = 11",
                ),
                "policy name \"p\": defined twice",
            ),
            (
                policy("[[policy]] #<\nname = \"q\"\nexpression = \"TRUE\"\naction = \"prefer\""),
                "missing field `priority`",
            ),
            // ---- [engine] ----
            (
                lb("[engine]\nwildcard_mode = \"maybe\" #<"),
                "unknown variant `maybe`, expected one of `yes`, `no`, `expression`",
            ),
            (lb("[engine]\nbogus = 1 #<"), "unknown field `bogus`"),
        ];
        assert_rejected(&cases);
    }

    #[test]
    fn server_site_and_rtt_section() {
        use crate::probe::{LdnsMask, ProbeKind, ProbeSettings};
        let site = "site = \"eu\"\n";
        let rtt_domain = "[[gslb_domain]]\nname = \"www.example.com\"\nservices = [\"web1\", \"web2\"]\n\
                          method = \"rtt\"\nfallback = \"roundrobin\"\n";
        let full = "[rtt]\nenabled = true\norder = [\"tcp\", \"dns_rev\"]\ninterval_ms = 1000\n\
                    timeout_ms = 300\ntolerance_ms = 0\nldns_timeout_s = 60\nldns_mask_v4 = 24\n\
                    ldns_mask_v6 = 56\nmax_rate = 0\nmax_concurrent = 8\nmax_ldns = 500\n\
                    deny = [\"198.51.100.0/24\", \"2001:db8::/32\"]\n\
                    allow = [\"127.0.0.0/8\", \"::1/128\"]\n";
        // The issue's defaults, written out so that a changed default fails here.
        let defaults = ProbeSettings {
            order: vec![ProbeKind::Icmp, ProbeKind::DnsDot, ProbeKind::Tcp],
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            tolerance: Duration::from_millis(5),
            ldns_timeout: Duration::from_secs(180),
            mask: LdnsMask { v4: 32, v6: 128 },
            max_ldns: 100_000,
            sources: crate::probe::SourcePolicy::default(),
            ..ProbeSettings::default()
        };
        let written = ProbeSettings {
            order: vec![ProbeKind::Tcp, ProbeKind::DnsRev],
            interval: Duration::from_secs(1),
            timeout: Duration::from_millis(300),
            tolerance: Duration::ZERO,
            ldns_timeout: Duration::from_secs(60),
            mask: LdnsMask { v4: 24, v6: 56 },
            max_rate: 0,
            max_concurrent: 8,
            tick: ProbeSettings::default().tick,
            max_ldns: 500,
            sources: crate::probe::SourcePolicy {
                deny: vec![
                    "198.51.100.0/24".parse().unwrap(),
                    "2001:db8::/32".parse().unwrap(),
                ],
                allow: vec!["127.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()],
            },
        };
        // (server extra, rest of the file, server.site, rtt.enabled, probe settings, probing)
        type Case<'a> = (
            &'a str,
            String,
            Option<&'a str>,
            Option<bool>,
            &'a ProbeSettings,
            bool,
        );
        let cases: Vec<Case> = vec![
            ("", String::new(), None, None, &defaults, false),
            (site, LB.to_owned(), Some("eu"), None, &defaults, false),
            // A domain using rtt turns probing on, given the site to measure from.
            (
                site,
                format!("{LB}{rtt_domain}"),
                Some("eu"),
                None,
                &defaults,
                true,
            ),
            (
                "",
                format!("{LB}{rtt_domain}"),
                None,
                None,
                &defaults,
                false,
            ),
            (
                site,
                format!("{LB}{rtt_domain}[rtt]\nenabled = false\n"),
                Some("eu"),
                Some(false),
                &defaults,
                false,
            ),
            (
                site,
                format!("{LB}[rtt]\n"),
                Some("eu"),
                None,
                &defaults,
                false,
            ),
            (
                site,
                format!("{LB}{full}"),
                Some("eu"),
                Some(true),
                &written,
                true,
            ),
            // NetScaler's names for the probe types.
            (
                site,
                format!("{LB}[rtt]\norder = [\"PING\", \"DNS\", \"TCP\"]\n"),
                Some("eu"),
                None,
                &defaults,
                false,
            ),
        ];
        for (extra, rest, want_site, enabled, probe, probing) in cases {
            let text = format!("{SERVER}{extra}{ZONE}{rest}");
            let config = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(config.server.site.as_deref(), want_site, "{text}");
            assert_eq!(config.rtt.enabled, enabled, "{text}");
            assert_eq!(&config.rtt.probe, probe, "{text}");
            assert_eq!(config.rtt_probing(), probing, "{text}");
        }
    }

    #[test]
    fn server_site_and_rtt_section_rejected() {
        let with_site = |body: &str| format!("{SERVER}site = \"eu\"\n{ZONE}{LB}[rtt]\n{body}\n");
        let cases: Vec<(String, &str)> = vec![
            (
                format!("{SERVER}site = \"mars\" #<\n{ZONE}{LB}"),
                "server.site: unknown site \"mars\" (defined sites: eu, us)",
            ),
            (
                format!("{SERVER}site = \"eu\" #<\n"),
                "server.site: unknown site \"eu\" (no sites are defined)",
            ),
            (
                format!("{SERVER}{ZONE}{LB}[rtt]\nenabled = true #<\n"),
                "rtt: probing needs server.site",
            ),
            (
                with_site("order = [\"icmp\", \"http\"] #<"),
                "rtt: order: unknown probe type \"http\"",
            ),
            (
                with_site("order = [\"tcp\", \"TCP\"] #<"),
                "rtt: probe type tcp is listed twice",
            ),
            (with_site("order = [] #<"), "rtt: the probe order is empty"),
            (
                with_site("interval_ms = 0 #<"),
                "rtt: interval_ms 0 out of range 1..=3600000",
            ),
            (
                with_site("timeout_ms = 60001 #<"),
                "rtt: timeout_ms 60001 out of range",
            ),
            (
                with_site("tolerance_ms = -1 #<"),
                "rtt: tolerance_ms -1 out of range",
            ),
            (
                with_site("ldns_timeout_s = 0 #<"),
                "rtt: ldns_timeout_s 0 out of range",
            ),
            (
                with_site("ldns_mask_v4 = 33 #<"),
                "rtt: ldns_mask_v4 33 out of range 1..=32",
            ),
            (
                with_site("ldns_mask_v6 = 0 #<"),
                "rtt: ldns_mask_v6 0 out of range 1..=128",
            ),
            (
                with_site("max_rate = -1 #<"),
                "rtt: max_rate -1 out of range",
            ),
            (
                with_site("max_concurrent = 0 #<"),
                "rtt: max_concurrent 0 out of range 1..=",
            ),
            (
                with_site("enabled = \"yes\" #<"),
                "invalid type: string \"yes\", expected a boolean",
            ),
            (
                with_site("probe_interval = 5 #<"),
                "unknown field `probe_interval`",
            ),
            (
                with_site("max_ldns = 0 #<"),
                "rtt: max_ldns 0 out of range 1..=10000000",
            ),
            (
                with_site("deny = [\"10.0.0.0/8\", \"10.0.0.1/8\"] #<"),
                "rtt: deny: prefix 10.0.0.1/8 has host bits set (did you mean 10.0.0.0/8?)",
            ),
            (
                with_site("deny = [\"10.0.0.0\"] #<"),
                "rtt: deny: \"10.0.0.0\" is not a prefix",
            ),
            (
                with_site("allow = [\"127.0.0.0/8\",\n\"127.0.0.0/8\"] #<"),
                "rtt: allow: prefix 127.0.0.0/8 listed twice (first on line",
            ),
            (
                with_site("deny = [\"127.0.0.0/8\"]\nallow = [\"127.0.0.0/16\"] #<"),
                "rtt: allow: prefix 127.0.0.0/16 is inside deny prefix 127.0.0.0/8, which always wins",
            ),
        ];
        assert_rejected(&cases);
    }

    #[test]
    fn expression_errors_point_into_the_expression() {
        let text = format!(
            "{SERVER}[[action]]\nname = \"a\"\npreferred_locations = [\"Asia\"]\n\
             [[policy]]\nname = \"p\"\naction = \"a\"\npriority = 1\n\
             expression = 'TRUE && CLIENT.IP.SRC.MATCHES_LOCATION(\"Asia..x\")'\n"
        );
        let err = parse(&text).unwrap_err().to_string();
        // Line 10; the string opens at column 14, the bad argument is its 40th character.
        assert!(
            err.starts_with("test.toml:10:54: policy \"p\": expression: column 40: "),
            "{err}"
        );
        // With escapes in a basic string, the error points at the string.
        let escaped = text.replace(
            "'TRUE && CLIENT.IP.SRC.MATCHES_LOCATION(\"Asia..x\")'",
            "\"TRUE && CLIENT.IP.SRC.MATCHES_LOCATION(\\\"Asia..x\\\")\"",
        );
        let err = parse(&escaped).unwrap_err().to_string();
        assert!(
            err.starts_with("test.toml:10:14: policy \"p\": expression: column 40: "),
            "{err}"
        );
    }

    #[test]
    fn error_display_points_at_value() {
        let err = parse("[server]\nlisten = [\"192.0.2.1\",  \"nope\"]\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "test.toml:2:25: server.listen: \"nope\" is not an IP address"
        );
        let err = Config::load(Path::new("/nonexistent/gslb.toml")).unwrap_err();
        assert!(matches!(err, ConfigError::Io { .. }), "{err:?}");
        assert_eq!(err.to_string(), "cannot read /nonexistent/gslb.toml");
    }

    #[test]
    fn xdp_mode_round_trips() {
        for mode in [XdpMode::Auto, XdpMode::Native, XdpMode::Skb] {
            assert_eq!(mode.to_string().parse::<XdpMode>(), Ok(mode));
        }
        assert!("Native".parse::<XdpMode>().is_err());
    }

    #[test]
    fn line_col_counts_characters() {
        assert_eq!(line_col("ab\né\u{1F600}x", 9), (2, 3));
        assert_eq!(line_col("", 0), (1, 1));
    }
}
