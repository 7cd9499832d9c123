//! Zones with their records: the static data a configuration serves, as validated (every name
//! absolute, lower-case, without the trailing dot).

use std::net::{Ipv4Addr, Ipv6Addr};

/// `[[zone]]`: a zone we are authoritative for.
///
/// Every name in it (apex, record owners and targets, NS, SOA names) is absolute, lower-case and
/// without the trailing dot; the root is `""` (only as an MX exchange or SRV target, "none").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    /// The apex; unique, neither inside nor above another zone.
    pub name: String,
    /// The TTL of the SOA record (and the default of the `[[zone.record]]`s).
    pub ttl: u32,
    /// The TTL of the apex NS records: `ttl` unless the zone file gives them their own.
    pub ns_ttl: u32,
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

/// Longest character-string in a TXT record (RFC 1035 §3.3); longer text is split.
pub const MAX_TXT_STRING: usize = 255;

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
    /// Any other type (CAA, PTR, NAPTR, SVCB, HTTPS, TLSA, SSHFP, DS, or a type gslbd does not
    /// know, RFC 3597), kept as its RDATA in wire form, checked and encoded once at load and
    /// served as it is. None of these types' names is compressed (RFC 3597 §4).
    Generic {
        rtype: u16,
        rdata: Vec<u8>,
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
            RecordData::Generic { rtype, .. } => *rtype,
        }
    }

    /// The type's mnemonic, as written in the configuration ("A", "AAAA", …; `TYPE65534` for a
    /// type without one, RFC 3597 §5).
    pub fn type_name(&self) -> std::borrow::Cow<'static, str> {
        let name = match self {
            RecordData::A(_) => "A",
            RecordData::Ns(_) => "NS",
            RecordData::Cname(_) => "CNAME",
            RecordData::Mx { .. } => "MX",
            RecordData::Txt(_) => "TXT",
            RecordData::Aaaa(_) => "AAAA",
            RecordData::Srv { .. } => "SRV",
            RecordData::Generic { rtype, .. } => return type_label(*rtype),
        };
        name.into()
    }
}

/// The mnemonic of RR type `code`, `TYPE{code}` when it has none (RFC 3597 §5).
fn type_label(code: u16) -> std::borrow::Cow<'static, str> {
    match hickory_proto::rr::RecordType::from(code) {
        hickory_proto::rr::RecordType::Unknown(_) => format!("TYPE{code}").into(),
        known => known.to_string().into(),
    }
}

/// Whether `name` (any case, trailing dot optional) is `apex` or below it; every name is in
/// the root zone `""`.
pub fn in_zone(name: &str, apex: &str) -> bool {
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
