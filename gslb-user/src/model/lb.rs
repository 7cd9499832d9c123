//! The decision vocabulary a configuration is written in: load-balancing methods, source
//! masks, persistence, answer modes and what a domain answers when it cannot. Owned by the
//! model (the configuration parses into it, the engine decides by it).

use std::net::IpAddr;

use serde::Deserialize;

use super::expr;

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

/// What a GSLB domain answers with (NetScaler `-dnsRecordType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
pub enum RecordType {
    /// A and AAAA records of its services' addresses.
    #[default]
    A,
    /// One CNAME record, the name of the service it picks (NetScaler CNAME-based GSLB, BIG-IP
    /// CNAME pools); its services answer names (`cname`). Decided for every query type: a
    /// CNAME answers them all (RFC 1034 §3.6.2).
    #[serde(rename = "CNAME")]
    Cname,
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
