//! The authoritative responder: answers every query the fast path passes on, by the same data
//! (the compiled [`Snapshot`]) for GSLB names, plus what XDP does not do: static zone records,
//! CNAME chains, NXDOMAIN and NODATA with the SOA, REFUSED outside our zones, FORMERR, NOTIMP,
//! BADVERS, minimal ANY (RFC 8482) and truncation. Pure: bytes in, bytes out; the sockets are in
//! `server`.

use std::{
    collections::{HashMap, HashSet},
    net::IpAddr,
    sync::atomic::{AtomicU32, Ordering},
};

use gslb_common::{DEFAULT_VIEW, QTYPE_A, QTYPE_AAAA};
use hickory_proto::{
    op::{Edns, Header, Message, MessageType, OpCode, Query, ResponseCode},
    rr::{
        DNSClass, Name, RData, Record, RecordType,
        rdata::{A, AAAA, CNAME, MX, NS, SOA, SRV, TXT},
    },
    serialize::binary::BinEncodable,
};
use ipnet::IpNet;

use crate::{
    compile::{Answer, DomainEntry, Snapshot},
    config::{AnswerMode, Config, RecordData, Zone},
};

/// How the query arrived, which bounds the response size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
}

/// Where a response goes; the servers send it, tests collect it.
pub trait ResponseSink {
    fn send(&mut self, response: &[u8]);
}

impl ResponseSink for Vec<Vec<u8>> {
    fn send(&mut self, response: &[u8]) {
        self.push(response.to_vec());
    }
}

/// UDP responses without EDNS are limited to 512 bytes (RFC 1035 §4.2.1).
const CLASSIC_UDP_SIZE: usize = 512;
/// CNAME chains longer than this are cut (loops cannot happen in a validated config, but a
/// bound keeps the handler total).
const MAX_CNAME_CHAIN: usize = 8;

pub struct Responder {
    zones: Vec<ZoneData>,
    gslb: GslbIndex,
    edns_udp_size: u16,
    rotor: AtomicU32,
}

/// One zone, indexed for lookups. Keys are lower-case names without the trailing dot.
struct ZoneData {
    apex: String,
    soa: Record,
    /// Negative-caching TTL: min(SOA TTL, SOA minimum) (RFC 2308 §5).
    negative_ttl: u32,
    ns: Vec<Record>,
    /// Static records by owner.
    records: HashMap<String, Vec<Record>>,
    /// Every name that exists: owners, GSLB domains and the empty non-terminals above them.
    names: HashSet<String>,
    /// Delegation points (NS records below the apex).
    cuts: HashSet<String>,
    /// GSLB domains in this zone.
    gslb: HashSet<String>,
}

/// The fast path's tables, looked up the way the XDP program does.
struct GslbIndex {
    /// (prefix, view), longest prefix first.
    views: Vec<(IpNet, u32)>,
    domains: HashMap<(String, u16), DomainEntry>,
}

impl GslbIndex {
    fn new(snapshot: &Snapshot) -> Self {
        let mut views = snapshot.views.clone();
        views.sort_by_key(|(net, _)| std::cmp::Reverse(net_bits(net)));
        let domains =
            snapshot.domains.iter().map(|d| ((d.name.clone(), d.qtype), d.clone())).collect();
        GslbIndex { views, domains }
    }

    /// The answer XDP gives `client` for (`name`, `qtype`): the client's view, falling back to
    /// the default view.
    fn answer(&self, name: &str, qtype: u16, client: IpAddr) -> Option<&Answer> {
        let entry = self.domains.get(&(name.to_owned(), qtype))?;
        let client = canonical(client);
        let view = self
            .views
            .iter()
            .find(|(net, _)| net.contains(&client))
            .map_or(DEFAULT_VIEW, |(_, v)| *v);
        let find = |v| entry.answers.iter().find(|(view, _)| *view == v).map(|(_, a)| a);
        find(view).or_else(|| find(DEFAULT_VIEW))
    }
}

/// Prefix length as the fast path's trie sees it (IPv4 is IPv4-mapped), so that ordering by it
/// is longest-match order across families.
fn net_bits(net: &IpNet) -> u8 {
    match net {
        IpNet::V4(n) => 96 + n.prefix_len(),
        IpNet::V6(n) => n.prefix_len(),
    }
}

/// An IPv4-mapped IPv6 client (dual-stack socket) is the IPv4 client it maps.
fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    }
}

fn name(s: &str) -> Name {
    let mut n = Name::from_ascii(s).expect("validated by config");
    n.set_fqdn(true);
    n
}

fn key(name: &Name) -> String {
    let s = name.to_lowercase().to_ascii();
    s.trim_end_matches('.').to_owned()
}

impl ZoneData {
    fn new(zone: &Zone, config: &Config) -> Self {
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
            .map(|n| Record::from_rdata(apex_name.clone(), zone.ttl, RData::NS(NS(name(n)))))
            .collect();
        let mut records: HashMap<String, Vec<Record>> = HashMap::new();
        let mut cuts = HashSet::new();
        for r in &zone.records {
            let rdata = match &r.data {
                RecordData::A(a) => RData::A(A(*a)),
                RecordData::Aaaa(a) => RData::AAAA(AAAA(*a)),
                RecordData::Cname(t) => RData::CNAME(CNAME(name(t))),
                RecordData::Txt(t) => RData::TXT(TXT::new(t.clone())),
                RecordData::Mx { preference, exchange } => {
                    RData::MX(MX::new(*preference, name(exchange)))
                }
                RecordData::Ns(t) => {
                    cuts.insert(r.name.clone());
                    RData::NS(NS(name(t)))
                }
                RecordData::Srv { priority, weight, port, target } => {
                    RData::SRV(SRV::new(*priority, *weight, *port, name(target)))
                }
            };
            records.entry(r.name.clone()).or_default().push(Record::from_rdata(name(&r.name), r.ttl, rdata));
        }
        let gslb: HashSet<String> = config
            .gslb_domains
            .iter()
            .filter(|d| zone.contains(&d.name))
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
            names,
            cuts,
            gslb,
        }
    }

    fn contains(&self, qname: &str) -> bool {
        self.apex.is_empty()
            || qname == self.apex
            || qname.strip_suffix(&self.apex).is_some_and(|p| p.ends_with('.'))
    }

    /// The delegation point at or above `qname`, if any.
    fn cut_above(&self, qname: &str) -> Option<&str> {
        let mut n = qname;
        while n != self.apex {
            if self.cuts.contains(n) {
                return Some(self.cuts.get(n).expect("just checked"));
            }
            n = n.split_once('.')?.1;
        }
        None
    }

    fn negative_soa(&self) -> Record {
        let mut soa = self.soa.clone();
        soa.set_ttl(self.negative_ttl);
        soa
    }
}

/// What the lookup found for the question.
struct Lookup {
    rcode: ResponseCode,
    authoritative: bool,
    answers: Vec<Record>,
    authority: Vec<Record>,
    additional: Vec<Record>,
}

impl Responder {
    pub fn new(config: &Config, snapshot: &Snapshot) -> Self {
        let mut zones: Vec<ZoneData> = config.zones.iter().map(|z| ZoneData::new(z, config)).collect();
        // Longest apex first: the first zone that contains a name is its zone.
        zones.sort_by_key(|z| std::cmp::Reverse(z.apex.len()));
        Responder {
            zones,
            gslb: GslbIndex::new(snapshot),
            edns_udp_size: snapshot.edns_udp_size,
            rotor: AtomicU32::new(0),
        }
    }

    /// Answers `request` from `client` into `sink`; sends nothing for what must not be answered
    /// (responses, fragments of a header).
    pub fn handle<S: ResponseSink>(
        &self,
        request: &[u8],
        client: IpAddr,
        transport: Transport,
        sink: &mut S,
    ) {
        if let Some(response) = self.respond(request, client, transport) {
            sink.send(&response);
        }
    }

    /// The response to `request`, or `None` when nothing may be sent back.
    pub fn respond(&self, request: &[u8], client: IpAddr, transport: Transport) -> Option<Vec<u8>> {
        // Too short for a header: nothing to address a reply to. A response: never answer one
        // (that way lie reflection loops).
        if request.len() < 12 || request[2] & 0x80 != 0 {
            return None;
        }
        let query = match Message::from_vec(request) {
            Ok(q) => q,
            Err(_) => return Some(formerr(request)),
        };
        let mut response = Message::new();
        response
            .set_id(query.id())
            .set_message_type(MessageType::Response)
            .set_op_code(query.op_code())
            .set_recursion_desired(query.recursion_desired())
            .set_checking_disabled(query.checking_disabled());
        for q in query.queries() {
            response.add_query(q.clone());
        }
        let edns = query.extensions().as_ref();
        if let Some(e) = edns {
            let mut ours = Edns::new();
            ours.set_max_payload(self.edns_udp_size.max(CLASSIC_UDP_SIZE as u16));
            ours.set_version(0);
            ours.set_dnssec_ok(e.flags().dnssec_ok);
            response.set_edns(ours);
        }
        let limit = match (transport, edns) {
            (Transport::Tcp, _) => u16::MAX as usize,
            (Transport::Udp, None) => CLASSIC_UDP_SIZE,
            (Transport::Udp, Some(e)) => (e.max_payload() as usize).max(CLASSIC_UDP_SIZE),
        };

        if query.op_code() != OpCode::Query {
            response.set_response_code(ResponseCode::NotImp);
        } else if query.queries().len() != 1 || !query.answers().is_empty() {
            response.set_response_code(ResponseCode::FormErr);
        } else if edns.is_some_and(|e| e.version() > 0) {
            response.set_response_code(ResponseCode::BADVERS);
        } else {
            let question = &query.queries()[0];
            let found = self.lookup(question, client);
            response
                .set_response_code(found.rcode)
                .set_authoritative(found.authoritative);
            response.insert_answers(found.answers);
            for r in found.authority {
                response.add_name_server(r);
            }
            for r in found.additional {
                response.add_additional(r);
            }
        }

        let bytes = response.to_vec().ok()?;
        if bytes.len() <= limit {
            return Some(bytes);
        }
        // Too big for the client's UDP size: header, question and OPT, with TC set, so that the
        // client retries over TCP (RFC 7766).
        let mut truncated = response.truncate();
        truncated.set_authoritative(response.authoritative());
        truncated.to_vec().ok()
    }

    fn lookup(&self, question: &Query, client: IpAddr) -> Lookup {
        let mut out = Lookup {
            rcode: ResponseCode::NoError,
            authoritative: true,
            answers: Vec::new(),
            authority: Vec::new(),
            additional: Vec::new(),
        };
        let qname = key(question.name());
        let Some(zone) = (question.query_class() == DNSClass::IN)
            .then(|| self.zones.iter().find(|z| z.contains(&qname)))
            .flatten()
        else {
            out.rcode = ResponseCode::Refused;
            out.authoritative = false;
            return out;
        };
        let qtype = question.query_type();

        if let Some(cut) = zone.cut_above(&qname) {
            // A referral: not ours to answer, the delegated servers are.
            out.authoritative = false;
            out.authority = zone.records[cut].iter().filter(|r| r.record_type() == RecordType::NS).cloned().collect();
            for ns in &out.authority {
                if let RData::NS(NS(target)) = ns.data() {
                    if let Some(glue) = zone.records.get(&key(target)) {
                        out.additional.extend(glue.iter().filter(|r| matches!(r.record_type(), RecordType::A | RecordType::AAAA)).cloned());
                    }
                }
            }
            return out;
        }

        let mut owner = question.name().clone();
        let mut current = qname;
        for _ in 0..MAX_CNAME_CHAIN {
            let Some(z) = self.zones.iter().find(|z| z.contains(&current)) else {
                return out; // the chain left our zones: the resolver follows it
            };
            if !z.names.contains(&current) {
                if out.answers.is_empty() {
                    out.rcode = ResponseCode::NXDomain;
                }
                out.authority.push(z.negative_soa());
                return out;
            }
            let rrs = self.rrset(z, &current, &owner, qtype, client);
            if !rrs.is_empty() {
                out.answers.extend(rrs);
                return out;
            }
            // A CNAME answers every type but CNAME itself (which `rrset` returned above).
            let cname = z.records.get(&current).and_then(|rs| {
                rs.iter().find_map(|r| match r.data() {
                    RData::CNAME(CNAME(target)) => Some((r, target.clone())),
                    _ => None,
                })
            });
            match cname {
                Some((record, target)) => {
                    let mut record = record.clone();
                    record.set_name(owner.clone());
                    out.answers.push(record);
                    current = key(&target);
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
    fn rrset(&self, zone: &ZoneData, name: &str, owner: &Name, qtype: RecordType, client: IpAddr) -> Vec<Record> {
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
        if let Some(static_rrs) = zone.records.get(name) {
            rrs.extend(static_rrs.iter().filter(|r| want(r.record_type())).cloned());
        }
        if zone.gslb.contains(name) {
            for (t, code) in [(RecordType::A, QTYPE_A), (RecordType::AAAA, QTYPE_AAAA)] {
                if want(t) {
                    rrs.extend(self.gslb_records(name, code, client));
                }
            }
        }
        if qtype == RecordType::ANY && !rrs.is_empty() {
            // RFC 8482: a minimal answer to ANY instead of every RRset.
            let first = rrs[0].record_type();
            rrs.retain(|r| r.record_type() == first);
        }
        for r in &mut rrs {
            r.set_name(owner.clone());
        }
        rrs
    }

    /// The GSLB answer, exactly as the fast path gives it: one rotating address or all of them.
    fn gslb_records(&self, name: &str, qtype: u16, client: IpAddr) -> Vec<Record> {
        let Some(answer) = self.gslb.answer(name, qtype, client) else {
            return Vec::new();
        };
        let addrs: Vec<IpAddr> = match answer.mode {
            AnswerMode::All => answer.addrs.clone(),
            AnswerMode::Rotate => {
                let turn = self.rotor.fetch_add(1, Ordering::Relaxed) as usize;
                vec![answer.addrs[turn % answer.addrs.len()]]
            }
        };
        let owner = self::name(name);
        addrs
            .into_iter()
            .map(|a| {
                let rdata = match a {
                    IpAddr::V4(v4) => RData::A(A(v4)),
                    IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
                };
                Record::from_rdata(owner.clone(), answer.ttl, rdata)
            })
            .collect()
    }
}

/// FORMERR for a message that does not parse: the header's ID and opcode, nothing else.
fn formerr(request: &[u8]) -> Vec<u8> {
    let mut header = Header::new();
    header
        .set_id(u16::from_be_bytes([request[0], request[1]]))
        .set_message_type(MessageType::Response)
        .set_op_code(OpCode::from_u8((request[2] >> 3) & 0x0f))
        .set_recursion_desired(request[2] & 0x01 != 0)
        .set_response_code(ResponseCode::FormErr);
    header.to_bytes().expect("a header always encodes")
}
