//! Static zone data, indexed for lookups: the SOA (and the negative-caching SOA of NXDOMAIN and
//! NODATA), the apex NS, static records by owner, the names that exist and the delegation
//! points. Built once per configuration ([`Zones`]).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use hickory_proto::rr::{
    Name, RData, Record, RecordType,
    rdata::{A, AAAA, CNAME, MX, NS, NULL, SOA, SRV, TXT},
};

use crate::model::{Model, RecordData, RecordType as GslbRecordType, Zone};

/// One zone, indexed for lookups. Keys are lower-case names without the trailing dot.
pub(super) struct ZoneData {
    pub(super) apex: String,
    pub(super) soa: Record,
    /// Negative-caching TTL: min(SOA TTL, SOA minimum) (RFC 2308 §5).
    pub(super) negative_ttl: u32,
    pub(super) ns: Vec<Record>,
    /// Static records by owner.
    pub(super) records: HashMap<String, Vec<Record>>,
    /// Every name that exists: owners, GSLB domains and the empty non-terminals above them.
    pub(super) names: HashSet<String>,
    /// Delegation points (NS records below the apex).
    pub(super) cuts: HashSet<String>,
    /// GSLB domains in this zone.
    pub(super) gslb: HashSet<String>,
    /// Those of them that answer a CNAME (`record_type = "CNAME"`): for every query type.
    pub(super) gslb_cname: HashSet<String>,
    /// Some name of `names` is a wildcard (`*` leftmost): only then does a name that does not
    /// exist look for one ([`ZoneData::source_of`]).
    wildcards: bool,
}

pub(super) fn name(s: &str) -> Name {
    let mut n = Name::from_ascii(s).expect("validated by config");
    n.set_fqdn(true);
    n
}

pub(super) fn key(name: &Name) -> String {
    let s = name.to_lowercase().to_ascii();
    s.trim_end_matches('.').to_owned()
}

impl ZoneData {
    pub(super) fn new(zone: &Zone, model: &Model) -> Self {
        let apex_name = name(&zone.name);
        let soa = Record::from_rdata(
            apex_name.clone(),
            zone.ttl,
            RData::SOA(SOA::new(
                name(&zone.soa.mname),
                name(&zone.soa.rname),
                zone.soa.serial,
                zone.soa.refresh as i32,
                zone.soa.retry as i32,
                zone.soa.expire as i32,
                zone.soa.minimum,
            )),
        );
        let ns = zone
            .ns
            .iter()
            .map(|n| Record::from_rdata(apex_name.clone(), zone.ns_ttl, RData::NS(NS(name(n)))))
            .collect();
        let mut records: HashMap<String, Vec<Record>> = HashMap::new();
        let mut cuts = HashSet::new();
        for r in &zone.records {
            let rdata = match &r.data {
                RecordData::A(a) => RData::A(A(*a)),
                RecordData::Aaaa(a) => RData::AAAA(AAAA(*a)),
                RecordData::Cname(t) => RData::CNAME(CNAME(name(t))),
                RecordData::Txt(t) => RData::TXT(TXT::new(t.clone())),
                RecordData::Mx {
                    preference,
                    exchange,
                } => RData::MX(MX::new(*preference, name(exchange))),
                RecordData::Ns(t) => {
                    cuts.insert(r.name.clone());
                    RData::NS(NS(name(t)))
                }
                RecordData::Srv {
                    priority,
                    weight,
                    port,
                    target,
                } => RData::SRV(SRV::new(*priority, *weight, *port, name(target))),
                // Served as the bytes checked at load (RFC 3597 §4: no name in them is
                // compressed).
                RecordData::Generic { rtype, rdata } => RData::Unknown {
                    code: RecordType::from(*rtype),
                    rdata: if rdata.is_empty() {
                        NULL::new()
                    } else {
                        NULL::with(rdata.clone())
                    },
                },
            };
            records
                .entry(r.name.clone())
                .or_default()
                .push(Record::from_rdata(name(&r.name), r.ttl, rdata));
        }
        let gslb: HashSet<String> = model
            .domains
            .iter()
            .filter(|d| zone.contains(&d.name))
            .map(|d| d.name.clone())
            .collect();
        let gslb_cname = model
            .domains
            .iter()
            .filter(|d| d.record_type == GslbRecordType::Cname && gslb.contains(&d.name))
            .map(|d| d.name.clone())
            .collect();
        let mut names = HashSet::from([zone.name.clone()]);
        for owner in records.keys().chain(gslb.iter()) {
            // The owner and every name between it and the apex exist (empty non-terminals).
            let mut n = owner.as_str();
            loop {
                names.insert(n.to_owned());
                if n == zone.name {
                    break;
                }
                match n.split_once('.') {
                    Some((_, parent)) => n = parent,
                    None => break,
                }
            }
        }
        ZoneData {
            apex: zone.name.clone(),
            negative_ttl: zone.ttl.min(zone.soa.minimum),
            soa,
            ns,
            records,
            wildcards: names.iter().any(|n| n.starts_with("*.")),
            names,
            cuts,
            gslb,
            gslb_cname,
        }
    }

    pub(super) fn contains(&self, qname: &str) -> bool {
        self.apex.is_empty()
            || qname == self.apex
            || qname
                .strip_suffix(&self.apex)
                .is_some_and(|p| p.ends_with('.'))
    }

    /// The owner whose data answers `qname`, a name of this zone not below a delegation: the
    /// name itself when it exists, else the wildcard `*.` + its closest encloser when that
    /// exists (RFC 4592 §3.3.1: the closest encloser is the longest existing ancestor, so
    /// `ghost.*.example` is not synthesised from `*.example`, nor a name below an existing
    /// one from a wildcard above it); `None`: NXDOMAIN.
    pub(super) fn source_of<'a>(&self, qname: &'a str) -> Option<Cow<'a, str>> {
        if self.names.contains(qname) {
            return Some(Cow::Borrowed(qname));
        }
        if !self.wildcards {
            return None;
        }
        let mut n = qname;
        loop {
            let (_, parent) = n.split_once('.')?;
            if self.names.contains(parent) {
                let wildcard = format!("*.{parent}");
                return self
                    .names
                    .contains(&wildcard)
                    .then_some(Cow::Owned(wildcard));
            }
            n = parent;
        }
    }

    /// The delegation that answers for (`qname`, `qtype`): the one at or above `qname`
    /// ([`ZoneData::cut_above`]), except for DS at the cut itself, which the parent's side
    /// holds and answers (RFC 4035 §3.1.4.1, RFC 4034 §5).
    pub(super) fn cut_for(&self, qname: &str, qtype: RecordType) -> Option<&str> {
        self.cut_above(qname)
            .filter(|&cut| !(qtype == RecordType::DS && cut == qname))
    }

    pub(super) fn cut_above(&self, qname: &str) -> Option<&str> {
        let mut n = qname;
        while n != self.apex {
            if self.cuts.contains(n) {
                return Some(self.cuts.get(n).expect("just checked"));
            }
            n = n.split_once('.')?.1;
        }
        None
    }

    pub(super) fn negative_soa(&self) -> Record {
        let mut soa = self.soa.clone();
        soa.ttl = self.negative_ttl;
        soa
    }
}

/// Every zone of `model`, longest apex first: the first zone that contains a name is its zone.
pub(super) fn zones_of(model: &Model) -> Vec<ZoneData> {
    let mut zones: Vec<ZoneData> = model
        .zones
        .iter()
        .map(|z| ZoneData::new(z, model))
        .collect();
    zones.sort_by_key(|z| std::cmp::Reverse(z.apex.len()));
    zones
}
