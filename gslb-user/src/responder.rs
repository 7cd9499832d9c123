//! The authoritative responder: answers every query the fast path passes on, by the same data
//! (the compiled [`Snapshot`]) for GSLB names, plus what XDP does not do: static zone records,
//! CNAME chains, NXDOMAIN and NODATA with the SOA, REFUSED outside our zones, FORMERR, NOTIMP,
//! BADVERS, minimal ANY (RFC 8482) and truncation. Pure: bytes in, bytes out; the sockets are in
//! `server`. The one state it keeps is the persistence entries (`crate::persist`, on a clock
//! the caller can inject) and the rotation turn of each answer set (`turns`); the rate limiter
//! of UDP responses (`rrl`) lives here to be configured with the rest, but `respond` does not
//! read it: the server loops ask it before sending.

mod ecs;
pub mod rrl;
mod turns;

use std::{
    collections::{HashMap, HashSet},
    net::IpAddr,
    sync::Arc,
    sync::atomic::{AtomicBool, AtomicU32, Ordering},
};

use arc_swap::ArcSwap;
use gslb_common::{DEFAULT_VIEW, QTYPE_A, QTYPE_AAAA};
use hickory_proto::{
    op::{Edns, Header, Message, MessageType, OpCode, Query, ResponseCode},
    rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption},
    rr::{
        DNSClass, Name, RData, Record, RecordType,
        rdata::{A, AAAA, CNAME, MX, NS, SOA, SRV, TXT},
    },
    serialize::binary::{BinDecodable, BinDecoder, BinEncodable},
};

use crate::{
    compile::{Answer, DomainEntry, Snapshot, partition::key_of},
    config::{AnswerMode, Config, RecordData, Zone},
    location::db::LocationDb,
    persist::{Store as PersistStore, Tables as PersistTables},
    policy::{
        Client as EngineClient, Engine, Fallback, Query as EngineQuery, ServiceState,
        State as EngineState,
    },
};

use self::turns::Turns;

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
/// CNAME chains longer than this are cut (loops are detected on their own; the configuration
/// does not rule them out).
const MAX_CNAME_CHAIN: usize = 8;

pub struct Responder {
    /// Replaced whole on a configuration reload; a query in flight keeps the data it started
    /// with.
    data: ArcSwap<Authority>,
    /// This site is a MEP child: GSLB names are REFUSED (see [`Responder::set_gslb_refused`]).
    gslb_refused: AtomicBool,
    /// Source-IP persistence entries, kept across reloads (`crate::persist`).
    persistence: Arc<PersistStore>,
    /// `[rrl]`: asked by the UDP loops, configured with every reload.
    rrl: rrl::Limiter,
}

/// Everything the responder answers from, built from one configuration.
struct Authority {
    zones: Vec<ZoneData>,
    gslb: GslbIndex,
    edns_udp_size: u16,
    decisions: Option<Decisions>,
    /// `server.ecs_allow`.
    ecs_allow: ecs::Allow,
}

/// Per-query decisions for the domains the fast path leaves to the responder
/// (`Snapshot::engine_domains`).
struct Decisions {
    engine: Engine,
    domains: HashSet<String>,
    /// By configuration service index.
    states: Vec<ServiceState>,
    /// The RTT rows and the step function client → row + 1 (0: none).
    rtt: Arc<Vec<crate::compile::LdnsRtt>>,
    rtt_rows: Arc<crate::compile::partition::Steps>,
    /// Client → static view number.
    static_views: Arc<crate::compile::partition::Steps>,
    /// Runs of one class (everything a decision reads but the address): the ECS scope.
    classes: Arc<crate::compile::partition::Segments>,
    /// By engine domain index: how many leading bits of the client address its decisions
    /// read besides the class (source-IP hash and persistence masks along its backup chain),
    /// IPv4 and IPv6.
    address_bits: Vec<(u8, u8)>,
    /// By configuration service index.
    answer_ips: Vec<IpAddr>,
    /// By engine domain index: (TTL, backup addresses).
    domain_info: Vec<(u32, Vec<IpAddr>)>,
    locations: Option<Arc<LocationDb>>,
    /// This configuration's persistence tables.
    persist: Arc<PersistTables>,
    /// Rotation turns by asked domain, qtype and the client's static view
    /// ([`Decisions::turn_index`]): clients of two views interleaved do not share a turn.
    turns: Turns,
    /// Static views in the configuration.
    views: usize,
}

impl Authority {
    fn new(
        config: &Config,
        snapshot: &Snapshot,
        locations: Option<Arc<LocationDb>>,
        persistence: &PersistStore,
    ) -> Self {
        let mut zones: Vec<ZoneData> = config
            .zones
            .iter()
            .map(|z| ZoneData::new(z, config))
            .collect();
        // Longest apex first: the first zone that contains a name is its zone.
        zones.sort_by_key(|z| std::cmp::Reverse(z.apex.len()));
        let decisions = if snapshot.engine_domains.is_empty() {
            None
        } else {
            match config.engine() {
                Ok(engine) => Some(Decisions {
                    persist: persistence.configure(Some(&engine), &snapshot.services),
                    domains: snapshot.engine_domains.iter().cloned().collect(),
                    states: snapshot.services.clone(),
                    rtt: snapshot.rtt.clone(),
                    rtt_rows: snapshot.rtt_rows.clone(),
                    static_views: snapshot.static_views.clone(),
                    classes: snapshot.classes.clone(),
                    address_bits: address_bits(&engine),
                    answer_ips: config.services.iter().map(|s| s.answer_ip()).collect(),
                    domain_info: config
                        .gslb_domains
                        .iter()
                        .map(|d| (d.ttl, d.backup_ip.clone()))
                        .collect(),
                    turns: Turns::new(2 * config.gslb_domains.len() * (config.views.len() + 1)),
                    views: config.views.len(),
                    engine,
                    locations,
                }),
                Err(error) => {
                    // Validation makes this unreachable; answering nothing for those names is
                    // the safe side if it ever is not.
                    tracing::error!(%error, "decision engine rejected the configuration");
                    None
                }
            }
        };
        if decisions.is_none() {
            persistence.configure(None, &[]);
        }
        Authority {
            zones,
            gslb: GslbIndex::new(snapshot),
            edns_udp_size: snapshot.edns_udp_size,
            decisions,
            ecs_allow: ecs::Allow::new(config.server.ecs_allow.as_deref()),
        }
    }

    /// Every answer set continues its rotation from `old` (the data before a republish).
    fn carry_turns(&self, old: &Authority) {
        self.gslb.carry_turns(&old.gslb);
        if let (Some(new), Some(old)) = (&self.decisions, &old.decisions) {
            for name in &new.domains {
                if let (Some(i), Some(j)) =
                    (new.engine.domain_index(name), old.engine.domain_index(name))
                {
                    // View numbers follow the configuration's order: carried while it has as
                    // many views (a reload that changes the views restarts these turns).
                    let views = if new.views == old.views {
                        new.views + 1
                    } else {
                        0
                    };
                    for (aaaa, view) in [false, true]
                        .into_iter()
                        .flat_map(|a| (0..views as u32).map(move |v| (a, v)))
                    {
                        new.turns.carry(
                            new.turn_index(i, aaaa, view),
                            &old.turns,
                            old.turn_index(j, aaaa, view),
                        );
                    }
                }
            }
        }
    }
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
    segments: Arc<crate::compile::partition::Segments>,
    /// Each entry with the rotation turns of its answer sets (see `turns::entry_set`).
    domains: HashMap<(String, u16), (DomainEntry, Turns)>,
}

impl GslbIndex {
    fn new(snapshot: &Snapshot) -> Self {
        let domains = snapshot
            .domains
            .iter()
            .map(|d| {
                let turns = Turns::new(turns::entry_sets(d));
                ((d.name.clone(), d.qtype), (d.clone(), turns))
            })
            .collect();
        GslbIndex {
            segments: snapshot.segments.clone(),
            domains,
        }
    }

    /// The answer XDP gives `client` for (`name`, `qtype`): the client's view, falling back to
    /// the default view. An answer without addresses is NODATA. With the answer set's turn.
    fn answer(&self, name: &str, qtype: u16, client: IpAddr) -> Option<(&Answer, &AtomicU32)> {
        let (entry, turns) = self.domains.get(&(name.to_owned(), qtype))?;
        let (view, rtt_view) = self.segments.views_of(canonical(client));
        let set = entry_set_of(entry, view, rtt_view)?;
        let answer = set_answer(entry, set);
        (!answer.addrs.is_empty()).then(|| (answer, turns.at(set)))
    }

    /// Each answer set continues the rotation of the same set in `old` (the table before a
    /// republish).
    fn carry_turns(&self, old: &GslbIndex) {
        for (key, (entry, turns)) in &self.domains {
            if let Some((old_entry, old_turns)) = old.domains.get(key) {
                turns::carry_entry(entry, turns, old_entry, old_turns);
            }
        }
    }

    fn is_gslb(&self, name: &str) -> bool {
        [QTYPE_A, QTYPE_AAAA]
            .iter()
            .any(|t| self.domains.contains_key(&(name.to_owned(), *t)))
    }

    /// The ECS scope of the answer to `client` for (`name`, `qtype`) (RFC 7871 §7.2.1): the
    /// shortest prefix length within which that answer cannot change.
    fn scope(&self, name: &str, qtype: u16, client: IpAddr) -> u8 {
        let Some((entry, _)) = self.domains.get(&(name.to_owned(), qtype)) else {
            // No answer of this type for any client.
            return 0;
        };
        // The same answer in every view (the list holds only the views that differ).
        if entry.rtt_answers.is_empty() && entry.answers.iter().all(|(v, _)| *v == DEFAULT_VIEW) {
            return 0;
        }
        let client = canonical(client);
        let (view, rtt_view) = self.segments.views_of(client);
        let mine = entry_answer(entry, view, rtt_view);
        self.segments
            .scope_where(client, |v, r| entry_answer(entry, v, r) == mine)
    }
}

/// The answer set (numbered as in `turns`) of `entry` in (view, LDNS view), as the fast path
/// takes it: the view's, else the default view's; for a domain answered by RTT, the LDNS
/// view's when it has one.
fn entry_set_of(entry: &DomainEntry, view: u32, rtt_view: u32) -> Option<usize> {
    let find = |v| turns::entry_set(entry, v, false);
    let by_view = find(view).or_else(|| find(DEFAULT_VIEW));
    let by_rtt = (entry.by_rtt && by_view.is_some() && rtt_view != 0)
        .then(|| turns::entry_set(entry, rtt_view, true))
        .flatten();
    by_rtt.or(by_view)
}

/// Set `set` of `entry` (see [`entry_set_of`]).
fn set_answer(entry: &DomainEntry, set: usize) -> &Answer {
    match set.checked_sub(entry.answers.len()) {
        Some(i) => &entry.rtt_answers[i].1,
        None => &entry.answers[set].1,
    }
}

/// `entry`'s answer in (view, LDNS view); `None`: NODATA.
fn entry_answer(entry: &DomainEntry, view: u32, rtt_view: u32) -> Option<&Answer> {
    let answer = set_answer(entry, entry_set_of(entry, view, rtt_view)?);
    (!answer.addrs.is_empty()).then_some(answer)
}

/// Per engine domain: the longest source-IP hash or persistence mask (IPv4, IPv6) along its
/// backup chain, the address bits its per-query decisions read.
fn address_bits(engine: &Engine) -> Vec<(u8, u8)> {
    (0..engine.domain_count())
        .map(|d| {
            let mut bits = (0, 0);
            for b in engine.chain(d) {
                let spec = engine.domain(b);
                let hash = spec.chain.contains(&crate::policy::Method::SourceIpHash);
                let masks = hash
                    .then_some(spec.sourceip_mask)
                    .into_iter()
                    .chain(spec.persistence.map(|p| p.mask));
                for m in masks {
                    bits = (bits.0.max(m.v4), bits.1.max(m.v6));
                }
            }
            bits
        })
        .collect()
}

impl Decisions {
    /// The turn of (engine domain, qtype, static view number).
    fn turn_index(&self, domain: usize, aaaa: bool, view: u32) -> usize {
        (2 * domain + usize::from(aaaa)) * (self.views + 1) + view as usize
    }

    /// The ECS scope of a per-query answer to a client subnet of `source` bits: its class's
    /// run, and at least the address bits the decision read, as far as the subnet has them
    /// (the rest of its address is zeros, read alike for every client in it).
    fn scope(&self, name: &str, client: IpAddr, source: u8) -> u8 {
        let client = canonical(client);
        let class = self.classes.lookup(client).1;
        let bits = self
            .engine
            .domain_index(name)
            .and_then(|d| self.address_bits.get(d))
            .map_or(0, |&(v4, v6)| if client.is_ipv4() { v4 } else { v6 });
        class.max(bits.min(source))
    }
}

impl Authority {
    /// The ECS scope of the answer to `client` (a subnet of `source` bits) for (`name`,
    /// `qtype`), `None` when `name` is not a GSLB name (static data is the same for every
    /// client). It may be longer than `source` (RFC 7871 §7.2.1: the subnet was not specific
    /// enough, and the resolver asks again with more bits).
    fn scope(&self, name: &str, qtype: u16, client: IpAddr, source: u8) -> Option<u8> {
        if let Some(d) = self.decisions.as_ref().filter(|d| d.domains.contains(name)) {
            return Some(d.scope(name, client, source));
        }
        self.gslb
            .is_gslb(name)
            .then(|| self.gslb.scope(name, qtype, client))
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
            };
            records
                .entry(r.name.clone())
                .or_default()
                .push(Record::from_rdata(name(&r.name), r.ttl, rdata));
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
            || qname
                .strip_suffix(&self.apex)
                .is_some_and(|p| p.ends_with('.'))
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
        Responder::with_persistence(config, snapshot, PersistStore::new())
    }

    /// As [`Responder::new`], with persistence entries kept in `persistence` (tests give it a
    /// clock of their own).
    pub fn with_persistence(
        config: &Config,
        snapshot: &Snapshot,
        persistence: Arc<PersistStore>,
    ) -> Self {
        Responder {
            data: ArcSwap::from_pointee(Authority::new(config, snapshot, None, &persistence)),
            gslb_refused: AtomicBool::new(false),
            persistence,
            rrl: rrl::Limiter::new(&config.rrl),
        }
    }

    /// The persistence entries (gslbd exchanges them with the other parents over MEP).
    pub fn persistence(&self) -> &Arc<PersistStore> {
        &self.persistence
    }

    /// Whether GSLB names are REFUSED. Only parent sites answer GSLB queries (spec §6): a child
    /// refuses them, so that the resolver asks another name server (a parent), while the
    /// zones' static data is answered as before.
    pub fn set_gslb_refused(&self, refused: bool) {
        self.gslb_refused.store(refused, Ordering::Relaxed);
    }

    /// Answers from `config` and `snapshot` from now on (a configuration reload), keeping the
    /// location database.
    pub fn replace(&self, config: &Config, snapshot: &Snapshot) {
        let locations = self
            .data
            .load()
            .decisions
            .as_ref()
            .and_then(|d| d.locations.clone());
        self.replace_with_locations(config, snapshot, locations);
    }

    /// As [`Responder::replace`], with client locations from `locations` (static proximity,
    /// MATCHES_LOCATION policies).
    pub fn replace_with_locations(
        &self,
        config: &Config,
        snapshot: &Snapshot,
        locations: Option<Arc<LocationDb>>,
    ) {
        let next = Authority::new(config, snapshot, locations, &self.persistence);
        next.carry_turns(&self.data.load());
        self.data.store(Arc::new(next));
        self.rrl.configure(&config.rrl);
    }

    /// The rate limiter of UDP responses (`[rrl]`), which the server loops ask before sending:
    /// kept here so that a reload configures it with the rest.
    pub fn rrl(&self) -> &rrl::Limiter {
        &self.rrl
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
        // Bytes after the last record are as malformed as missing ones (RFC 1035 §4.1; BIND and
        // Knot answer FORMERR too); the fast path passes such queries on as `TrailingData`.
        let mut decoder = BinDecoder::new(request);
        let query = match Message::read(&mut decoder) {
            Ok(q) if decoder.is_empty() => q,
            _ => return Some(formerr(request)),
        };
        let data = self.data.load();
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
            ours.set_max_payload(data.edns_udp_size.max(CLASSIC_UDP_SIZE as u16));
            ours.set_version(0);
            ours.set_dnssec_ok(e.flags().dnssec_ok);
            response.set_edns(ours);
        }
        // EDNS Client Subnet: the subnet, not the resolver, is the client (RFC 7871).
        let ecs = edns.and_then(|e| match e.option(EdnsCode::Subnet) {
            Some(EdnsOption::Subnet(ecs)) => Some(*ecs),
            _ => None,
        });
        // Over UDP the smaller of the client's size and ours, so that answers stay below the
        // size we chose to avoid fragmentation (RFC 9715 R5), but never below 512.
        let limit = match (transport, edns) {
            (Transport::Tcp, _) => u16::MAX as usize,
            (Transport::Udp, None) => CLASSIC_UDP_SIZE,
            (Transport::Udp, Some(e)) => {
                usize::from(e.max_payload().min(data.edns_udp_size)).max(CLASSIC_UDP_SIZE)
            }
        };

        if query.op_code() != OpCode::Query {
            response.set_response_code(ResponseCode::NotImp);
        } else if query.queries().len() != 1 || !query.answers().is_empty() {
            response.set_response_code(ResponseCode::FormErr);
        } else if edns.is_some_and(|e| e.version() > 0) {
            response.set_response_code(ResponseCode::BADVERS);
        } else if ecs.is_some_and(|ecs| !ecs::valid(&ecs) || !ecs::exact_lengths(request)) {
            response.set_response_code(ResponseCode::FormErr);
        } else {
            let question = &query.queries()[0];
            // From a client not in `server.ecs_allow`, the option is ignored: not used, not
            // echoed (`responder::ecs`).
            let ecs = ecs.filter(|_| data.ecs_allow.allows(canonical(client)));
            // A /0 subnet carries no client information (RFC 7871 §7.1.2): the resolver is the
            // client, as without ECS, and the answer's scope is 0.
            let client = ecs
                .filter(|ecs| ecs.source_prefix() > 0)
                .map_or(client, |ecs| ecs.addr());
            let found = self.lookup(&data, question, client);
            if let (Some(ecs), Some(edns)) = (ecs, response.extensions_mut()) {
                // Scope 0 (valid for every client) unless a GSLB name, whose answer may depend
                // on the client, took part.
                let qtype = u16::from(question.query_type());
                let source = ecs.source_prefix();
                let scope = std::iter::once(question.name())
                    .chain(found.answers.iter().map(|r| r.name()))
                    .filter(|_| source > 0)
                    .filter_map(|n| data.scope(&key(n), qtype, client, source))
                    .max()
                    .unwrap_or(0);
                edns.options_mut()
                    .insert(EdnsOption::Subnet(ClientSubnet::new(
                        ecs.addr(),
                        ecs.source_prefix(),
                        scope,
                    )));
            }
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

    fn lookup(&self, data: &Authority, question: &Query, client: IpAddr) -> Lookup {
        let mut out = Lookup {
            rcode: ResponseCode::NoError,
            authoritative: true,
            answers: Vec::new(),
            authority: Vec::new(),
            additional: Vec::new(),
        };
        let qname = key(question.name());
        let Some(zone) = (question.query_class() == DNSClass::IN)
            .then(|| data.zones.iter().find(|z| z.contains(&qname)))
            .flatten()
        else {
            out.rcode = ResponseCode::Refused;
            out.authoritative = false;
            return out;
        };
        if zone.gslb.contains(&qname) && self.gslb_refused.load(Ordering::Relaxed) {
            out.rcode = ResponseCode::Refused;
            out.authoritative = false;
            return out;
        }
        let qtype = question.query_type();

        if let Some(cut) = zone.cut_above(&qname) {
            // A referral: not ours to answer, the delegated servers are.
            out.authoritative = false;
            out.authority = zone.records[cut]
                .iter()
                .filter(|r| r.record_type() == RecordType::NS)
                .cloned()
                .collect();
            for ns in &out.authority {
                if let RData::NS(NS(target)) = ns.data()
                    && let Some(glue) = zone.records.get(&key(target))
                {
                    out.additional.extend(
                        glue.iter()
                            .filter(|r| matches!(r.record_type(), RecordType::A | RecordType::AAAA))
                            .cloned(),
                    );
                }
            }
            return out;
        }

        let mut owner = question.name().clone();
        let mut current = qname;
        let mut visited = HashSet::from([current.clone()]);
        for _ in 0..MAX_CNAME_CHAIN {
            let Some(z) = data.zones.iter().find(|z| z.contains(&current)) else {
                return out; // the chain left our zones: the resolver follows it
            };
            if z.cut_above(&current).is_some() {
                return out; // the chain entered a delegation: its servers answer for the target
            }
            if !z.names.contains(&current) {
                // Also after a CNAME: the RCODE is that of the last name (RFC 6604 §2).
                out.rcode = ResponseCode::NXDomain;
                out.authority.push(z.negative_soa());
                return out;
            }
            let rrs = self.rrset(data, z, &current, &owner, qtype, client);
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
        &self,
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
        if let Some(static_rrs) = zone.records.get(name) {
            rrs.extend(static_rrs.iter().filter(|r| want(r.record_type())).cloned());
        }
        if zone.gslb.contains(name) {
            for (t, code) in [(RecordType::A, QTYPE_A), (RecordType::AAAA, QTYPE_AAAA)] {
                if want(t) {
                    rrs.extend(self.gslb_records(data, name, code, client));
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
    fn gslb_records(
        &self,
        data: &Authority,
        name: &str,
        qtype: u16,
        client: IpAddr,
    ) -> Vec<Record> {
        if let Some(d) = data.decisions.as_ref().filter(|d| d.domains.contains(name)) {
            return self.decided_records(d, name, qtype, client);
        }
        let Some((answer, turn)) = data.gslb.answer(name, qtype, client) else {
            return Vec::new();
        };
        let addrs: Vec<IpAddr> = match answer.mode {
            AnswerMode::All => answer.addrs.clone(),
            AnswerMode::Rotate => {
                let turn = turn.fetch_add(1, Ordering::Relaxed) as usize;
                vec![answer.addrs[turn % answer.addrs.len()]]
            }
        };
        address_records(name, answer.ttl, addrs)
    }

    /// The decision engine's answer for this client (its location from the database).
    fn decided_records(
        &self,
        d: &Decisions,
        name: &str,
        qtype: u16,
        client: IpAddr,
    ) -> Vec<Record> {
        let Some(domain) = d.engine.domain_index(name) else {
            return Vec::new();
        };
        let client = canonical(client);
        let location = d.locations.as_ref().and_then(|db| db.lookup(client));
        let rtt = match d.rtt_rows.get(key_of(client)) {
            0 => &[][..],
            row => &d.rtt[row as usize - 1].rtt_us[..],
        };
        let sticky = d.persist.lookup(domain, qtype == QTYPE_AAAA, client);
        let view = d.static_views.get(key_of(client));
        let decision = d.engine.decide(
            domain,
            &EngineQuery { name, qtype },
            &EngineClient {
                addr: client,
                location: location.as_deref(),
                view,
                sticky: sticky.and_then(|s| s.service),
            },
            &EngineState {
                services: &d.states,
                rtt,
            },
        );
        let (ttl, backup) = &d.domain_info[decision.domain.min(d.domain_info.len() - 1)];
        let family = |ip: &IpAddr| ip.is_ipv6() == (qtype == QTYPE_AAAA);
        let turn = d
            .turns
            .next(d.turn_index(domain, qtype == QTYPE_AAAA, view)) as u64;
        let addrs: Vec<IpAddr> = match decision.fallback {
            Some(Fallback::BackupIp) => backup.iter().copied().filter(family).collect(),
            Some(Fallback::Empty) => Vec::new(),
            None => {
                let picked = d.engine.select(&decision, client, turn);
                d.persist.note(sticky.as_ref(), &picked);
                picked
                    .into_iter()
                    .map(|i| d.answer_ips[i])
                    .filter(family)
                    .collect()
            }
        };
        address_records(name, *ttl, addrs)
    }
}

/// A and AAAA records of `name` for `addrs`.
fn address_records(name: &str, ttl: u32, addrs: Vec<IpAddr>) -> Vec<Record> {
    let owner = self::name(name);
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

#[cfg(test)]
mod tests {
    //! The responder's rules, one row each, without sockets: every case of
    //! `gslb_tests::responder_config` sent to [`Responder::respond`] and its reply compared
    //! section by section. Then the request-path fuzz test.

    use std::{
        net::{Ipv4Addr, Ipv6Addr},
        path::Path,
    };

    use gslb_tests::{BIG_TXT_LEN, HUGE_TXT_LEN, responder_config};
    use hickory_proto::{
        op::{Message, MessageType, OpCode, Query, ResponseCode},
        rr::{DNSClass, Name, RecordType},
    };

    use super::*;

    fn responder() -> Responder {
        let config = Config::parse(&responder_config(), Path::new("responder.toml"))
            .expect("the shared test configuration is valid");
        Responder::new(&config, &Snapshot::from_config(&config))
    }

    // ---- Clients (see the views of `responder_config`) ----

    /// In views "wide" (/24) and "host" (/32): gets "host" by longest prefix.
    const HOST: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10));
    /// The same client on a dual-stack socket.
    const HOST_MAPPED: IpAddr = IpAddr::V6(Ipv4Addr::new(192, 0, 2, 10).to_ipv6_mapped());
    /// In view "wide" only.
    const WIDE: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 99));
    /// In no view: the default view.
    const OUTSIDE: IpAddr = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 5));
    const OUTSIDE_V6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, 1));

    /// Our EDNS UDP size (`server.edns_udp_size`).
    const OUR_SIZE: u16 = 1232;
    const ID: u16 = 0x1234;

    // ---- Requests ----

    /// A query as a resolver sends it (ID, RD clear, QUERY, one IN question), without EDNS.
    fn query(name: &str, qtype: RecordType) -> Message {
        let mut m = Message::new();
        m.set_id(ID)
            .set_message_type(MessageType::Query)
            .set_op_code(OpCode::Query);
        m.add_query(Query::query(
            Name::from_ascii(name).expect("test name"),
            qtype,
        ));
        m
    }

    fn edns(mut m: Message, payload: u16, version: u8) -> Message {
        let mut e = Edns::new();
        e.set_max_payload(payload).set_version(version);
        m.set_edns(e);
        m
    }

    fn class(mut m: Message, class: DNSClass) -> Message {
        let mut q = m.queries()[0].clone();
        q.set_query_class(class);
        m.take_queries();
        m.add_query(q);
        m
    }

    fn opcode(mut m: Message, op: OpCode) -> Message {
        m.set_op_code(op);
        m
    }

    fn wire(m: &Message) -> Vec<u8> {
        m.to_vec().expect("test query encodes")
    }

    // ---- Replies ----

    /// A reply reduced to what the rules are about: records as "owner TTL TYPE data".
    #[derive(Clone, Debug, PartialEq, Eq)]
    struct Reply {
        rcode: ResponseCode,
        aa: bool,
        tc: bool,
        answer: Vec<String>,
        authority: Vec<String>,
        additional: Vec<String>,
        /// The OPT record's UDP payload size; `None` without an OPT.
        opt: Option<u16>,
    }

    fn show(r: &Record) -> String {
        format!("{} {} {} {}", r.name(), r.ttl(), r.record_type(), r.data())
    }

    fn strings(rrs: &[&str]) -> Vec<String> {
        rrs.iter().map(|s| s.to_string()).collect()
    }

    impl Reply {
        fn of(m: &Message) -> Reply {
            // 16 is BADVERS with an OPT and BADSIG with a TSIG; hickory decodes it as BADSIG.
            let rcode = match m.response_code() {
                ResponseCode::BADSIG => ResponseCode::BADVERS,
                rcode => rcode,
            };
            Reply {
                rcode,
                aa: m.authoritative(),
                tc: m.truncated(),
                answer: m.answers().iter().map(show).collect(),
                authority: m.name_servers().iter().map(show).collect(),
                additional: m.additionals().iter().map(show).collect(),
                opt: m.extensions().as_ref().map(|e| e.max_payload()),
            }
        }
        fn answer(mut self, rrs: &[&str]) -> Self {
            self.answer = strings(rrs);
            self
        }
        fn authority(mut self, rrs: &[&str]) -> Self {
            self.authority = strings(rrs);
            self
        }
        fn additional(mut self, rrs: &[&str]) -> Self {
            self.additional = strings(rrs);
            self
        }
        fn not_aa(mut self) -> Self {
            self.aa = false;
            self
        }
        fn tc(mut self) -> Self {
            self.tc = true;
            self
        }
        fn opt(mut self) -> Self {
            self.opt = Some(OUR_SIZE);
            self
        }
    }

    /// An authoritative reply with `rcode` and empty sections.
    fn reply(rcode: ResponseCode) -> Reply {
        Reply {
            rcode,
            aa: true,
            tc: false,
            answer: vec![],
            authority: vec![],
            additional: vec![],
            opt: None,
        }
    }

    fn noerror(answer: &[&str]) -> Reply {
        reply(ResponseCode::NoError).answer(answer)
    }

    /// NODATA: NOERROR, no answer (or only the CNAME chain), the SOA with the negative TTL.
    fn nodata() -> Reply {
        reply(ResponseCode::NoError).authority(&[SOA_COM_NEG])
    }

    fn nxdomain(soa: &str) -> Reply {
        reply(ResponseCode::NXDomain).authority(&[soa])
    }

    /// An error without records, AA clear (REFUSED, FORMERR, NOTIMP, BADVERS).
    fn error(rcode: ResponseCode) -> Reply {
        reply(rcode).not_aa()
    }

    const SOA_COM: &str =
        "example.com. 3600 SOA ns1.example.com. hostmaster.example.com. 7 3600 600 604800 60";
    /// min(zone TTL 3600, SOA minimum 60).
    const SOA_COM_NEG: &str =
        "example.com. 60 SOA ns1.example.com. hostmaster.example.com. 7 3600 600 604800 60";
    /// min(zone TTL 30, SOA minimum 300).
    const SOA_ORG_NEG: &str =
        "example.org. 30 SOA ns1.example.com. hostmaster.example.org. 1 3600 600 604800 300";
    const WWW_HOST_A: &str = "www.example.com. 30 A 192.0.2.80";
    const LAB_NS: &str = "lab.example.com. 3600 NS ns.lab.example.com.";
    const LAB_GLUE: &str = "ns.lab.example.com. 3600 A 192.0.2.70";
    const ALL_A: [&str; 8] = [
        "all.example.com. 20 A 203.0.113.21",
        "all.example.com. 20 A 203.0.113.22",
        "all.example.com. 20 A 203.0.113.23",
        "all.example.com. 20 A 203.0.113.24",
        "all.example.com. 20 A 203.0.113.25",
        "all.example.com. 20 A 203.0.113.26",
        "all.example.com. 20 A 203.0.113.27",
        "all.example.com. 20 A 203.0.113.28",
    ];

    fn txt_answer(name: &str, len: usize, letter: &str) -> String {
        format!("{name}.example.com. 3600 TXT {}", letter.repeat(len))
    }

    // ---- The table ----

    struct Case {
        what: &'static str,
        request: Vec<u8>,
        client: IpAddr,
        transport: Transport,
        /// The reply to each sending of the request, in order (several for rotation); `None`:
        /// no reply at all.
        replies: Vec<Option<Reply>>,
    }

    /// `request` over UDP from a client in no view, answered with `reply`.
    fn case(what: &'static str, request: Vec<u8>, reply: Reply) -> Case {
        Case {
            what,
            request,
            client: OUTSIDE,
            transport: Transport::Udp,
            replies: vec![Some(reply)],
        }
    }

    fn silent(what: &'static str, request: Vec<u8>) -> Case {
        Case {
            what,
            request,
            client: OUTSIDE,
            transport: Transport::Udp,
            replies: vec![None],
        }
    }

    impl Case {
        fn from(mut self, client: IpAddr) -> Self {
            self.client = client;
            self
        }
        fn tcp(mut self) -> Self {
            self.transport = Transport::Tcp;
            self
        }
        /// The reply to the request sent once more.
        fn then(mut self, reply: Reply) -> Self {
            self.replies.push(Some(reply));
            self
        }
    }

    /// The header of a query with the given counts, then `rest`.
    fn raw(qdcount: u16, arcount: u16, rest: &[u8]) -> Vec<u8> {
        let mut m = Vec::from(ID.to_be_bytes());
        m.extend_from_slice(&[0x00, 0x00]); // QR=0, QUERY
        for count in [qdcount, 0, 0, arcount] {
            m.extend_from_slice(&count.to_be_bytes());
        }
        m.extend_from_slice(rest);
        m
    }

    /// The question section of a query for `name` A IN, uncompressed.
    fn question(name: &str) -> Vec<u8> {
        let mut q = Vec::new();
        for label in name.split('.') {
            q.push(label.len() as u8);
            q.extend_from_slice(label.as_bytes());
        }
        q.extend_from_slice(&[0, 0, 1, 0, 1]);
        q
    }

    fn cases() -> Vec<Case> {
        use RecordType::*;
        use ResponseCode::*;
        let q = |name, qtype| wire(&query(name, qtype));
        let two_questions = [question("txt.example.com"), question("www.example.com")].concat();
        let mut a_response = query("www.example.com", A);
        a_response.set_message_type(MessageType::Response);
        vec![
            // Authoritative data.
            case(
                "SOA at the apex",
                q("example.com", SOA),
                noerror(&[SOA_COM]),
            ),
            case(
                "NS at the apex",
                q("example.com", NS),
                noerror(&[
                    "example.com. 3600 NS ns1.example.com.",
                    "example.com. 3600 NS ns2.example.net.",
                ]),
            ),
            case(
                "static A",
                q("ns1.example.com", A),
                noerror(&["ns1.example.com. 3600 A 192.0.2.53"]),
            ),
            case(
                "static AAAA",
                q("ns1.example.com", AAAA),
                noerror(&["ns1.example.com. 3600 AAAA 2001:db8::53"]),
            ),
            case(
                "static A with its own TTL",
                q("mail.example.com", A),
                noerror(&["mail.example.com. 300 A 192.0.2.25"]),
            ),
            case(
                "static TXT",
                q("txt.example.com", TXT),
                noerror(&["txt.example.com. 3600 TXT hello"]),
            ),
            case(
                "static MX at the apex",
                q("example.com", MX),
                noerror(&["example.com. 3600 MX 10 mail.example.com."]),
            ),
            case(
                "static SRV",
                q("_sip._tcp.example.com", SRV),
                noerror(&["_sip._tcp.example.com. 3600 SRV 10 60 5060 sip.example.com."]),
            ),
            case(
                "static CNAME asked for itself",
                q("alias.example.com", CNAME),
                noerror(&["alias.example.com. 3600 CNAME www.example.com."]),
            ),
            case(
                "names match case-insensitively",
                q("TXT.Example.COM", TXT),
                noerror(&["TXT.Example.COM. 3600 TXT hello"]),
            ),
            case(
                "the question is echoed as sent (0x20), answers point at it",
                q("WwW.eXaMpLe.CoM", A),
                noerror(&["WwW.eXaMpLe.CoM. 30 A 192.0.2.80"]),
            )
            .from(HOST),
            // CNAME chains.
            case(
                "CNAME to a GSLB name: the CNAME and the target's answer",
                q("alias.example.com", A),
                noerror(&["alias.example.com. 3600 CNAME www.example.com.", WWW_HOST_A]),
            )
            .from(HOST),
            case(
                "CNAME chain of two inside the zone",
                q("chain.example.com", A),
                noerror(&[
                    "chain.example.com. 3600 CNAME alias.example.com.",
                    "alias.example.com. 3600 CNAME www.example.com.",
                    WWW_HOST_A,
                ]),
            )
            .from(HOST),
            case(
                "CNAME into another of our zones",
                q("to-org.example.com", A),
                noerror(&[
                    "to-org.example.com. 3600 CNAME www.example.org.",
                    "www.example.org. 30 A 192.0.2.90",
                ]),
            ),
            case(
                "CNAME leaving our zones stops at the CNAME",
                q("cdn.example.com", A),
                noerror(&["cdn.example.com. 3600 CNAME edge.cdn.example.net."]),
            ),
            case(
                "CNAME to a name without the type: the CNAME, then NODATA",
                q("alias.example.com", TXT),
                nodata().answer(&["alias.example.com. 3600 CNAME www.example.com."]),
            ),
            case(
                "CNAME to a missing name: NXDOMAIN for the last name (RFC 6604)",
                q("dangling.example.com", A),
                nxdomain(SOA_COM_NEG)
                    .answer(&["dangling.example.com. 3600 CNAME nowhere.example.com."]),
            ),
            case(
                "CNAME loop: each CNAME once",
                q("loop1.example.com", A),
                noerror(&[
                    "loop1.example.com. 3600 CNAME loop2.example.com.",
                    "loop2.example.com. 3600 CNAME loop1.example.com.",
                ]),
            ),
            case(
                "CNAME into a delegation stops at the CNAME",
                q("into-lab.example.com", A),
                noerror(&["into-lab.example.com. 3600 CNAME host.lab.example.com."]),
            ),
            // Names and types that do not exist.
            case(
                "NXDOMAIN with the SOA at min(TTL, minimum)",
                q("nope.example.com", A),
                nxdomain(SOA_COM_NEG),
            ),
            case(
                "NXDOMAIN, zone TTL below the SOA minimum",
                q("nope.example.org", A),
                nxdomain(SOA_ORG_NEG),
            ),
            case(
                "NXDOMAIN below an existing leaf",
                q("x.txt.example.com", A),
                nxdomain(SOA_COM_NEG),
            ),
            case(
                "NODATA: static name without the type",
                q("txt.example.com", A),
                nodata(),
            ),
            case("NODATA: the apex without A", q("example.com", A), nodata()),
            case(
                "NODATA: GSLB name without the type",
                q("www.example.com", TXT),
                nodata(),
            ),
            case(
                "NODATA: GSLB name without IPv6 services",
                q("all.example.com", AAAA),
                nodata(),
            ),
            case(
                "NODATA: empty non-terminal",
                q("dept.example.com", A),
                nodata(),
            ),
            case(
                "NODATA: empty non-terminal of a SRV owner",
                q("_tcp.example.com", SRV),
                nodata(),
            ),
            // Not ours.
            case(
                "REFUSED outside our zones",
                q("www.example.net", A),
                error(Refused),
            ),
            case("REFUSED above our zone", q("com", NS), error(Refused)),
            case(
                "REFUSED for a name that only ends like our zone",
                q("notexample.com", A),
                error(Refused),
            ),
            case(
                "REFUSED for class CH",
                wire(&class(query("version.bind", TXT), DNSClass::CH)),
                error(Refused),
            ),
            case(
                "REFUSED for class CH of one of our names",
                wire(&class(query("txt.example.com", TXT), DNSClass::CH)),
                error(Refused),
            ),
            case(
                "referral below a delegation: NS in authority, glue in additional",
                q("host.lab.example.com", A),
                reply(NoError)
                    .not_aa()
                    .authority(&[LAB_NS])
                    .additional(&[LAB_GLUE]),
            ),
            case(
                "referral at the delegation point",
                q("lab.example.com", NS),
                reply(NoError)
                    .not_aa()
                    .authority(&[LAB_NS])
                    .additional(&[LAB_GLUE]),
            ),
            // Malformed and unsupported.
            case(
                "FORMERR: garbage after a valid header",
                raw(1, 0, &[0xff; 20]),
                error(FormErr),
            ),
            case(
                "FORMERR: truncated question",
                raw(1, 0, &question("www.example.com")[..9]),
                error(FormErr),
            ),
            case(
                "FORMERR: QDCOUNT=2",
                raw(2, 0, &two_questions),
                error(FormErr),
            ),
            case("FORMERR: QDCOUNT=0", raw(0, 0, &[]), error(FormErr)),
            case(
                "FORMERR: bytes after a complete query",
                [q("www.example.com", A), vec![0; 4]].concat(),
                error(FormErr),
            ),
            case(
                "NOTIMP: NOTIFY",
                wire(&opcode(query("example.com", SOA), OpCode::Notify)),
                error(NotImp),
            ),
            case(
                "NOTIMP: UPDATE",
                wire(&opcode(query("example.com", SOA), OpCode::Update)),
                error(NotImp),
            ),
            case(
                "NOTIMP: STATUS",
                wire(&opcode(query("example.com", SOA), OpCode::Status)),
                error(NotImp),
            ),
            silent("no reply to a response (QR=1)", wire(&a_response)),
            silent("no reply to 11 bytes", raw(1, 0, &[])[..11].to_vec()),
            silent("no reply to nothing", vec![]),
            // ANY (RFC 8482): one RRset.
            case(
                "ANY at the apex: one RRset",
                q("example.com", ANY),
                noerror(&[SOA_COM]),
            ),
            case(
                "ANY at a static name: one RRset",
                q("ns1.example.com", ANY),
                noerror(&["ns1.example.com. 3600 A 192.0.2.53"]),
            ),
            case(
                "ANY at an all-addresses GSLB name: its A RRset",
                q("all.example.com", ANY),
                noerror(&ALL_A),
            ),
            // GSLB answers: the fast path's.
            case(
                "GSLB: longest prefix picks the view",
                q("www.example.com", A),
                noerror(&[WWW_HOST_A]),
            )
            .from(HOST),
            case(
                "GSLB: IPv4-mapped client is the IPv4 client",
                q("www.example.com", A),
                noerror(&[WWW_HOST_A]),
            )
            .from(HOST_MAPPED),
            case(
                "GSLB: AAAA of the view",
                q("www.example.com", AAAA),
                noerror(&["www.example.com. 30 AAAA 2001:db8::80"]),
            )
            .from(HOST),
            case(
                "GSLB: the shorter prefix's view",
                q("www.example.com", A),
                noerror(&["www.example.com. 30 A 192.0.2.81"]),
            )
            .from(WIDE),
            case(
                "GSLB: rotate through the default view's set in order",
                q("www.example.com", A),
                noerror(&["www.example.com. 30 A 198.51.100.10"]),
            )
            .then(noerror(&["www.example.com. 30 A 198.51.100.11"]))
            .then(noerror(&["www.example.com. 30 A 198.51.100.10"])),
            case(
                "GSLB: a view without the family falls back to the default view",
                q("www.example.com", AAAA),
                noerror(&["www.example.com. 30 AAAA 2001:db8:100::10"]),
            )
            .from(WIDE)
            .then(noerror(&["www.example.com. 30 AAAA 2001:db8:100::11"])),
            case(
                "GSLB: an IPv6 client in no view",
                q("www.example.com", A),
                noerror(&["www.example.com. 30 A 198.51.100.10"]),
            )
            .from(OUTSIDE_V6),
            case(
                "GSLB: all addresses, in order",
                q("all.example.com", A),
                noerror(&ALL_A),
            ),
            // EDNS(0).
            case(
                "EDNS: OPT with our size",
                wire(&edns(query("txt.example.com", TXT), 4096, 0)),
                noerror(&["txt.example.com. 3600 TXT hello"]).opt(),
            ),
            case(
                "EDNS: BADVERS for version 1",
                wire(&edns(query("txt.example.com", TXT), 4096, 1)),
                error(BADVERS).opt(),
            ),
            case(
                "TC: too big for 512 without EDNS",
                q("big.example.com", TXT),
                reply(NoError).tc(),
            ),
            case(
                "TC: too big for the client's EDNS size",
                wire(&edns(query("big.example.com", TXT), 512, 0)),
                reply(NoError).tc().opt(),
            ),
            case(
                "EDNS: the client's size is honoured",
                wire(&edns(query("big.example.com", TXT), 1232, 0)),
                noerror(&[&txt_answer("big", BIG_TXT_LEN, "b")]).opt(),
            ),
            case(
                "TC: too big for our size, whatever the client offers",
                wire(&edns(query("huge.example.com", TXT), 4096, 0)),
                reply(NoError).tc().opt(),
            ),
            case(
                "TCP: the whole answer without EDNS",
                q("big.example.com", TXT),
                noerror(&[&txt_answer("big", BIG_TXT_LEN, "b")]),
            )
            .tcp(),
            case(
                "TCP: the whole answer beyond our UDP size",
                wire(&edns(query("huge.example.com", TXT), 4096, 0)),
                noerror(&[&txt_answer("huge", HUGE_TXT_LEN, "h")]).opt(),
            )
            .tcp(),
        ]
    }

    /// The question section of a message with one uncompressed question, as bytes.
    fn question_bytes(message: &[u8]) -> Option<&[u8]> {
        let mut end = 12;
        while *message.get(end)? != 0 {
            end += 1 + message[end] as usize;
        }
        message.get(12..end + 5)
    }

    /// What is wrong with `bytes` as the reply to `case` wanted as `want`, if anything.
    fn mismatch(case: &Case, bytes: &[u8], want: &Reply) -> Option<String> {
        let m = match Message::from_vec(bytes) {
            Ok(m) => m,
            Err(e) => return Some(format!("the reply does not parse: {e}")),
        };
        let mut wrong = Vec::new();
        if m.id() != ID || m.message_type() != MessageType::Response {
            wrong.push(format!("ID {:#x}, {:?}", m.id(), m.message_type()));
        }
        if u8::from(m.op_code()) != (case.request[2] >> 3) & 0x0f {
            wrong.push(format!("opcode {:?} not echoed", m.op_code()));
        }
        if case.transport == Transport::Udp && bytes.len() > OUR_SIZE as usize {
            wrong.push(format!("{} bytes over UDP", bytes.len()));
        }
        if m.response_code() != ResponseCode::FormErr
            && question_bytes(bytes) != question_bytes(&case.request)
        {
            wrong.push("the question is not echoed byte for byte".into());
        }
        let got = Reply::of(&m);
        if got != *want {
            wrong.push(format!("want {want:#?}\n  got {got:#?}"));
        }
        (!wrong.is_empty()).then(|| wrong.join("\n  "))
    }

    #[test]
    fn handler_table() {
        let mut failures = Vec::new();
        for case in cases() {
            // A responder per case: rotation starts at the first address.
            let responder = responder();
            for (i, want) in case.replies.iter().enumerate() {
                let mut sink: Vec<Vec<u8>> = Vec::new();
                responder.handle(&case.request, case.client, case.transport, &mut sink);
                let wrong = match (sink.as_slice(), want) {
                    ([], None) => None,
                    ([bytes], Some(want)) => mismatch(&case, bytes, want),
                    (sent, _) => Some(format!("{} replies, want {want:?}", sent.len())),
                };
                if let Some(wrong) = wrong {
                    failures.push(format!("{} (reply {}):\n  {wrong}", case.what, i + 1));
                }
            }
        }
        assert!(
            failures.is_empty(),
            "{} failed:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    // ---- The request-path fuzz test ----

    /// SplitMix64: a small deterministic generator, so that a failure replays from its seed.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn byte(&mut self) -> u8 {
            self.next() as u8
        }
        fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.byte()).collect()
        }
        fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
            &items[self.below(items.len())]
        }
    }

    /// Valid queries to start mutations from: every name of the configuration and some outside
    /// it, with the types the responder treats differently, with and without EDNS.
    fn seeds() -> Vec<Vec<u8>> {
        use RecordType::*;
        let names = [
            "example.com",
            "www.example.com",
            "all.example.com",
            "alias.example.com",
            "chain.example.com",
            "loop1.example.com",
            "dangling.example.com",
            "to-org.example.com",
            "host.lab.example.com",
            "lab.example.com",
            "dept.example.com",
            "big.example.com",
            "huge.example.com",
            "_sip._tcp.example.com",
            "nope.example.org",
            "www.example.net",
        ];
        let mut seeds = Vec::new();
        for name in names {
            for qtype in [A, AAAA, ANY, TXT, SOA, NS, CNAME, SRV, MX] {
                let q = query(name, qtype);
                seeds.push(wire(&q));
                seeds.push(wire(&edns(q.clone(), 512, 0)));
                seeds.push(wire(&edns(q, 4096, 0)));
            }
        }
        seeds
    }

    /// Plain random bytes, or a valid query with one to three mutations: bytes flipped anywhere,
    /// a header field or the question's type and class rewritten, letters' case swapped,
    /// truncated, or random bytes appended.
    fn mutant(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
        if rng.below(4) == 0 {
            let len = rng.below(600);
            return rng.bytes(len);
        }
        let mut m = rng.pick(seeds).clone();
        let question_end = question_bytes(&m).map_or(m.len(), |q| 12 + q.len());
        let ops = if rng.below(3) == 0 {
            2 + rng.below(2)
        } else {
            1
        };
        for _ in 0..ops {
            if m.is_empty() {
                break;
            }
            match rng.below(6) {
                0 => {
                    for _ in 0..1 + rng.below(3) {
                        let at = rng.below(m.len());
                        m[at] = rng.byte();
                    }
                }
                1 if m.len() >= 12 => m[2 + rng.below(10)] = rng.byte(),
                2 if m.len() >= question_end => m[question_end - 1 - rng.below(4)] = rng.byte(),
                3 => {
                    for _ in 0..4 {
                        let at = rng.below(m.len());
                        if m[at].is_ascii_alphabetic() {
                            m[at] ^= 0x20;
                        }
                    }
                }
                4 => {
                    let len = rng.below(m.len() + 1);
                    m.truncate(len);
                }
                _ => {
                    let len = 1 + rng.below(64);
                    m.extend(rng.bytes(len));
                }
            }
        }
        m
    }

    /// The request-path fuzz test: 200 000 random and mutated requests over UDP and TCP from
    /// random clients. `respond` must not panic; every reply must parse, carry the request's ID,
    /// be a response and fit the transport; every query with a whole header gets one. (A
    /// libFuzzer target can run the same property without a bound.) GSLB_FUZZ_ITERATIONS and
    /// GSLB_FUZZ_SEED run it longer or elsewhere.
    #[test]
    fn request_path_fuzz_never_panics_and_replies_parse() {
        let env = |name, default| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        let iterations = env("GSLB_FUZZ_ITERATIONS", 200_000) as usize;
        let seed = env("GSLB_FUZZ_SEED", 0x6a09_e667_f3bc_c908);
        let responder = responder();
        let seeds = seeds();
        let clients = [HOST, HOST_MAPPED, WIDE, OUTSIDE, OUTSIDE_V6];
        let mut rng = Rng(seed);
        let mut rcodes: HashMap<u16, usize> = HashMap::new();
        for i in 0..iterations {
            let request = mutant(&mut rng, &seeds);
            let transport = if rng.below(2) == 0 {
                Transport::Udp
            } else {
                Transport::Tcp
            };
            let client = *rng.pick(&clients);
            let context =
                || format!("iteration {i} (seed {seed:#x}), {transport:?} {request:02x?}");
            let Some(reply) = responder.respond(&request, client, transport) else {
                assert!(
                    request.len() < 12 || request[2] & 0x80 != 0,
                    "no reply to a query: {}",
                    context()
                );
                continue;
            };
            let m = Message::from_vec(&reply)
                .unwrap_or_else(|e| panic!("reply does not parse ({e}): {}", context()));
            *rcodes.entry(m.response_code().into()).or_default() += 1;
            assert_eq!(
                m.id(),
                u16::from_be_bytes([request[0], request[1]]),
                "ID: {}",
                context()
            );
            assert_eq!(m.message_type(), MessageType::Response, "QR: {}", context());
            let limit = match transport {
                Transport::Udp => OUR_SIZE as usize,
                Transport::Tcp => u16::MAX as usize,
            };
            assert!(reply.len() <= limit, "{} bytes: {}", reply.len(), context());
        }
        // The mutants must get past the parser often enough to exercise the lookups.
        let mut rcodes: Vec<_> = rcodes.into_iter().collect();
        rcodes.sort();
        eprintln!("replies by rcode: {rcodes:?}");
        for (rcode, share) in [(ResponseCode::NoError, 10), (ResponseCode::NXDomain, 100)] {
            let n = rcodes
                .iter()
                .find(|(r, _)| *r == u16::from(rcode))
                .map_or(0, |(_, n)| *n);
            assert!(
                n * share >= iterations,
                "only {n} {rcode} replies: {rcodes:?}"
            );
        }
    }

    #[test]
    fn client_subnet_is_the_client_and_is_echoed_with_its_scope() {
        use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption};
        let r = responder();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let ask = |name: &str, qtype: RecordType, subnet: &str, source: u8, scope: u8| {
            let mut m = query(name, qtype);
            let mut edns = Edns::new();
            edns.set_max_payload(1232);
            edns.options_mut()
                .insert(EdnsOption::Subnet(ClientSubnet::new(
                    ip(subnet),
                    source,
                    scope,
                )));
            m.set_edns(edns);
            let bytes = r
                .respond(&wire(&m), OUTSIDE, Transport::Udp)
                .expect("a reply");
            Message::from_vec(&bytes).expect("reply parses")
        };
        // (what, name, qtype, subnet, source, expected answer, expected scope): views are
        // "wide" 192.0.2.0/24 and "host" 192.0.2.10/32, both IPv4 only; the resolver itself is
        // in no view. `None`: a rotating default-view answer, not checked here.
        let table: [(&str, &str, RecordType, &str, u8, Option<&str>, u8); 4] = [
            (
                "host view by subnet",
                "www.example.com",
                RecordType::A,
                "192.0.2.10",
                32,
                Some(WWW_HOST_A),
                32,
            ),
            // 192.0.2.0/29 is all "wide" and leaves out 192.0.2.10.
            (
                "wide view, scope excludes host",
                "www.example.com",
                RecordType::A,
                "192.0.2.0",
                24,
                Some("www.example.com. 30 A 192.0.2.81"),
                29,
            ),
            // Static data is the same for every client.
            (
                "static record",
                "txt.example.com",
                RecordType::TXT,
                "192.0.2.10",
                32,
                Some("txt.example.com. 3600 TXT hello"),
                0,
            ),
            // No IPv6 view: the default view holds for every IPv6 client.
            (
                "default view, v6",
                "www.example.com",
                RecordType::AAAA,
                "2001:db8::",
                48,
                None,
                0,
            ),
        ];
        for (what, name, qtype, subnet, source, answer, scope) in table {
            let reply = ask(name, qtype, subnet, source, 0);
            assert_eq!(reply.response_code(), ResponseCode::NoError, "{what}");
            if let Some(answer) = answer {
                assert_eq!(
                    reply.answers().iter().map(show).collect::<Vec<_>>(),
                    strings(&[answer]),
                    "{what}"
                );
            }
            let echoed = reply
                .extensions()
                .as_ref()
                .and_then(|e| e.option(EdnsCode::Subnet).cloned());
            let Some(EdnsOption::Subnet(echoed)) = echoed else {
                panic!("{what}: ECS not echoed")
            };
            assert_eq!(
                (echoed.addr(), echoed.source_prefix(), echoed.scope_prefix()),
                (ip(subnet), source, scope),
                "{what}"
            );
        }
        // Invalid in a query (RFC 7871 §7.1): a scope, or address bits beyond the prefix.
        // (Only whole bytes of the address are sent, so the stray bits sit in a partial byte.)
        for (subnet, source, scope) in [
            ("192.0.2.0", 24, 8),
            ("192.0.2.10", 28, 0),
            ("2001:db8::1", 127, 0),
        ] {
            let reply = ask("www.example.com", RecordType::A, subnet, source, scope);
            assert_eq!(
                reply.response_code(),
                ResponseCode::FormErr,
                "{subnet}/{source} scope {scope}"
            );
        }
    }
}
