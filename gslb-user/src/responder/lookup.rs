//! Answer building for one question: the zone that holds it (REFUSED outside our zones),
//! referrals below a delegation, CNAME chains, NXDOMAIN and NODATA with the negative SOA, the
//! RRsets at a name (apex SOA and NS, static records, GSLB answers), the addresses of the
//! hosts beside an NS, MX or SRV answer, and minimal ANY.

use std::{collections::HashSet, net::IpAddr, sync::atomic::Ordering};

use gslb_common::{QTYPE_A, QTYPE_AAAA};
use hickory_proto::{
    op::{Query, ResponseCode},
    rr::{
        DNSClass, Name, RData, Record, RecordType,
        rdata::{A, AAAA, CNAME, NS, TXT},
    },
};

use super::zone::{ZoneData, key};
use super::{Authority, Responder};

/// CNAME chains longer than this are cut (loops are detected on their own; the configuration
/// does not rule them out).
const MAX_CNAME_CHAIN: usize = 8;

/// The CH TXT names that say who answered (RFC 4892), and those that say which version.
const IDENTITY_NAMES: [&str; 2] = ["id.server", "hostname.bind"];
const VERSION_NAMES: [&str; 2] = ["version.bind", "version.server"];

/// What the lookup found for the question.
pub(super) struct Lookup {
    pub(super) rcode: ResponseCode,
    pub(super) authoritative: bool,
    pub(super) answers: Vec<Record>,
    pub(super) authority: Vec<Record>,
    pub(super) additional: Vec<Record>,
}

impl Responder {
    pub(super) fn lookup(data: &Authority, question: &Query, client: IpAddr) -> Lookup {
        let mut out = Lookup {
            rcode: ResponseCode::NoError,
            authoritative: true,
            answers: Vec::new(),
            authority: Vec::new(),
            additional: Vec::new(),
        };
        let qname = key(question.name());
        if question.query_class() == DNSClass::CH {
            return chaos(data, question, &qname);
        }
        // QCLASS ANY (RFC 1035 §3.2.5) matches our data, all of it class IN; the answer is not
        // authoritative (`Responder::answer`).
        let Some(zone) = matches!(question.query_class(), DNSClass::IN | DNSClass::ANY)
            .then(|| data.config.zones.iter().find(|z| z.contains(&qname)))
            .flatten()
        else {
            out.rcode = ResponseCode::Refused;
            out.authoritative = false;
            return out;
        };
        let qtype = question.query_type();
        // A MEP child answers no GSLB query (spec §6): the GSLB types of a GSLB name, and ANY,
        // which would carry them. The zone's other types at that name are static, answered as
        // everywhere.
        // A CNAME domain's answer is GSLB for every type.
        if data.gslb_refused
            && zone.source_of(&qname).is_some_and(|source| {
                zone.gslb_cname.contains(source.as_ref())
                    || zone.gslb.contains(source.as_ref())
                        && matches!(qtype, RecordType::A | RecordType::AAAA | RecordType::ANY)
            })
        {
            out.rcode = ResponseCode::Refused;
            out.authoritative = false;
            return out;
        }

        if let Some(cut) = zone.cut_for(&qname, qtype) {
            // A referral: not ours to answer, the delegated servers are.
            out.authoritative = false;
            referral(zone, cut, &mut out);
            return out;
        }

        let mut owner = question.name().clone();
        let mut current = qname;
        let mut visited = HashSet::from([current.clone()]);
        for _ in 0..MAX_CNAME_CHAIN {
            let Some(z) = data.config.zones.iter().find(|z| z.contains(&current)) else {
                return out; // the chain left our zones: the resolver follows it
            };
            if let Some(cut) = z.cut_for(&current, qtype) {
                // The chain entered a delegation: its servers answer for the target, and the
                // referral to them follows our CNAMEs (RFC 1034 §4.3.2, step 3b after a
                // restart; NSD and Knot give it too). The CNAMEs stay authoritative.
                referral(z, cut, &mut out);
                return out;
            }
            // The name's own data, or a wildcard's synthesised at it (RFC 4592 §3.3.1).
            let Some(source) = z.source_of(&current) else {
                // Also after a CNAME: the RCODE is that of the last name (RFC 6604 §2).
                out.rcode = ResponseCode::NXDomain;
                out.authority.push(z.negative_soa());
                return out;
            };
            let rrs = Self::rrset(data, z, &source, &owner, qtype, client);
            if !rrs.is_empty() {
                out.additional = server_addresses(data, &rrs);
                out.answers.extend(rrs);
                return out;
            }
            // A CNAME answers every type but CNAME itself (which `rrset` returned above): a
            // CNAME domain's, decided for this client, or a static one.
            let cname = if z.gslb_cname.contains(source.as_ref()) {
                Self::gslb_cname(data, &source, &owner, client)
            } else {
                z.records.get(source.as_ref()).and_then(|rs| {
                    rs.iter().find_map(|r| match &r.data {
                        RData::CNAME(CNAME(target)) => Some((r.clone(), target.clone())),
                        _ => None,
                    })
                })
            };
            match cname {
                Some((mut record, target)) => {
                    record.name = owner.clone();
                    out.answers.push(record);
                    current = key(&target);
                    if !visited.insert(current.clone()) {
                        return out; // a loop: each CNAME once, then the resolver gives up
                    }
                    owner = target;
                }
                None => {
                    out.authority.push(z.negative_soa()); // NODATA
                    return out;
                }
            }
        }
        out
    }

    /// The records of `qtype` at `name` in `zone` (GSLB, apex or static), owned by `owner` (the
    /// name as asked, so the answer compresses to the question).
    fn rrset(
        data: &Authority,
        zone: &ZoneData,
        name: &str,
        owner: &Name,
        qtype: RecordType,
        client: IpAddr,
    ) -> Vec<Record> {
        let mut rrs: Vec<Record> = Vec::new();
        let want = |t: RecordType| qtype == t || qtype == RecordType::ANY;
        if name == zone.apex {
            if want(RecordType::SOA) {
                rrs.push(zone.soa.clone());
            }
            if want(RecordType::NS) {
                rrs.extend(zone.ns.iter().cloned());
            }
        }
        // A GSLB name's addresses before the zone's other types there: the RRset a minimal ANY
        // answers (below) is then the GSLB answer, as at a GSLB name without static records.
        if zone.gslb_cname.contains(name) {
            // Only asked for itself (or ANY): other types follow it (`lookup`).
            if want(RecordType::CNAME) {
                rrs.extend(Self::gslb_cname(data, name, owner, client).map(|(r, _)| r));
            }
        } else if zone.gslb.contains(name) {
            for (t, code) in [(RecordType::A, QTYPE_A), (RecordType::AAAA, QTYPE_AAAA)] {
                if want(t) {
                    rrs.extend(Self::gslb_records(data, name, code, client));
                }
            }
        }
        if let Some(static_rrs) = zone.records.get(name) {
            rrs.extend(static_rrs.iter().filter(|r| want(r.record_type())).cloned());
        }
        if qtype == RecordType::ANY && !rrs.is_empty() {
            // RFC 8482: a minimal answer to ANY instead of every RRset.
            let first = rrs[0].record_type();
            rrs.retain(|r| r.record_type() == first);
        }
        for r in &mut rrs {
            r.name = owner.clone();
        }
        rrs
    }

    /// A CNAME domain's answer for this client: its CNAME record, owned by `owner`, and the
    /// target; `None`: no service can answer (NODATA).
    fn gslb_cname(
        data: &Authority,
        name: &str,
        owner: &Name,
        client: IpAddr,
    ) -> Option<(Record, Name)> {
        let (ttl, target) = match &data.decisions {
            Some(d) if let Some(&domain) = d.domains.get(name) => d.cname(name, domain, client)?,
            // Compiled: one answer for every type, kept under A (as the fast path's AAAA
            // entry holds the same names).
            _ => {
                let (answer, turn) = data.gslb.answer(name, QTYPE_A, client)?;
                let target =
                    answer.carried_name(|| turn.fetch_add(1, Ordering::Relaxed) as usize)?;
                (answer.ttl, target.name.as_str())
            }
        };
        let target = super::zone::name(target);
        let record = Record::from_rdata(owner.clone(), ttl, RData::CNAME(CNAME(target.clone())));
        Some((record, target))
    }

    /// The GSLB answer, exactly as the fast path gives it (`Answer::carried`).
    fn gslb_records(data: &Authority, name: &str, qtype: u16, client: IpAddr) -> Vec<Record> {
        if let Some(d) = &data.decisions
            && let Some(&domain) = d.domains.get(name)
        {
            return d.records(name, domain, qtype, client);
        }
        let Some((answer, turn)) = data.gslb.answer(name, qtype, client) else {
            return Vec::new();
        };
        let addrs = answer.carried(|| turn.fetch_add(1, Ordering::Relaxed) as usize);
        address_records(name, answer.ttl, addrs.iter().copied())
    }
}

/// The addresses we hold of the hosts an answer's NS, MX and SRV records name (RFC 1035
/// §3.3.11 and §3.3.9: "additional section processing"; RFC 2782: "urged"), as NSD and Knot
/// give them (Knot for all three, NSD with `minimal-responses` for NS only): each target's A
/// and AAAA records in whichever of our zones holds it, unless it lies below a delegation
/// there (its addresses are the child's). Optional data: a reply that cannot hold them drops
/// them (`message::encode`).
fn server_addresses(data: &Authority, answers: &[Record]) -> Vec<Record> {
    let mut additional = Vec::new();
    for r in answers {
        let target = match &r.data {
            RData::NS(NS(target)) => target,
            RData::MX(mx) => &mx.exchange,
            RData::SRV(srv) => &srv.target,
            _ => continue,
        };
        let target = key(target);
        let Some(zone) = data.config.zones.iter().find(|z| z.contains(&target)) else {
            continue;
        };
        if zone.cut_above(&target).is_some() {
            continue;
        }
        if let Some(records) = zone.records.get(&target) {
            additional.extend(
                records
                    .iter()
                    .filter(|r| matches!(r.record_type(), RecordType::A | RecordType::AAAA))
                    .cloned(),
            );
        }
    }
    additional
}

/// The referral to the delegation at `cut` in `zone` into `out`: its NS records in the
/// authority section, and the addresses the zone holds for them (glue) in the additional.
fn referral(zone: &ZoneData, cut: &str, out: &mut Lookup) {
    out.authority.extend(
        zone.records[cut]
            .iter()
            .filter(|r| r.record_type() == RecordType::NS)
            .cloned(),
    );
    for ns in &zone.records[cut] {
        if let RData::NS(NS(target)) = &ns.data
            && let Some(glue) = zone.records.get(&key(target))
        {
            out.additional.extend(
                glue.iter()
                    .filter(|r| matches!(r.record_type(), RecordType::A | RecordType::AAAA))
                    .cloned(),
            );
        }
    }
}

/// A and AAAA records of `name` for `addrs`.
pub(super) fn address_records(
    name: &str,
    ttl: u32,
    addrs: impl IntoIterator<Item = IpAddr>,
) -> Vec<Record> {
    let owner = super::zone::name(name);
    addrs
        .into_iter()
        .map(|a| {
            let rdata = match a {
                IpAddr::V4(v4) => RData::A(A(v4)),
                IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
            };
            Record::from_rdata(owner.clone(), ttl, rdata)
        })
        .collect()
}

/// A class CH question: `id.server` and `hostname.bind` are answered with `server.identity`,
/// `version.bind` and `version.server` with `server.version`, each a TXT of TTL 0 when
/// configured (other types: no record); everything else, and those when not configured, is
/// REFUSED, as before they were.
fn chaos(data: &Authority, question: &Query, qname: &str) -> Lookup {
    let identity = &data.config.identity;
    let text = if IDENTITY_NAMES.contains(&qname) {
        identity.name.as_ref()
    } else if VERSION_NAMES.contains(&qname) {
        identity.version.as_ref()
    } else {
        None
    };
    let Some(text) = text else {
        return Lookup {
            rcode: ResponseCode::Refused,
            authoritative: false,
            answers: Vec::new(),
            authority: Vec::new(),
            additional: Vec::new(),
        };
    };
    let mut answers = Vec::new();
    if matches!(question.query_type(), RecordType::TXT | RecordType::ANY) {
        let mut record = Record::from_rdata(
            question.name().clone(),
            0,
            RData::TXT(TXT::new(vec![text.clone()])),
        );
        record.dns_class = DNSClass::CH;
        answers.push(record);
    }
    Lookup {
        rcode: ResponseCode::NoError,
        authoritative: true,
        answers,
        authority: Vec::new(),
        additional: Vec::new(),
    }
}
