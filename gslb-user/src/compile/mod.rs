//! Turns the configuration and the state of the world (service health and load, the location
//! database, measured RTTs) into the flat tables the fast path reads: client prefixes → view
//! ids, (name, qtype) → domain ids, (domain id, view id) → answer sets. Pure data, no maps: the
//! `dataplane` module writes a [`Snapshot`] into the kernel, and the responder answers from the
//! same [`Snapshot`].
//!
//! # How the client address space is cut
//!
//! Everything that can make two clients' answers differ has a boundary in the address space:
//! static view prefixes, location database ranges, `IN_SUBNET` prefixes of DNS policies,
//! topology record prefixes and LDNS entries with an RTT row. Cut at every boundary, the space
//! falls into segments inside which every address has the same static view, location, subnet
//! memberships and RTT row, hence the same decision for every domain. Segments with equal
//! inputs form one class, decided once; each domain is decided once per distinct value of the
//! inputs it reads (a round-robin domain only by static view, an RTT domain also by RTT row).
//! Classes whose answers agree for every (domain, qtype) form one view; the most common view is
//! the default view, and a view keeps only the answers that differ from the default view's.
//! Neighbouring segments of one view are merged and written as the fewest prefixes.
//!
//! A domain whose answer depends on the single client address (source IP hash, persistence)
//! cannot be cut this way: it gets no fast-path entry and the responder asks the engine per
//! query ([`Snapshot::engine_domains`]).

pub mod partition;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use gslb_common::{DEFAULT_VIEW, QTYPE_A, QTYPE_AAAA};
use ipnet::IpNet;

use self::partition::{Segments, Steps, V4_FIRST, V4_LAST, addr_of, prefixes_of};
use crate::config::{AnswerMode, Config, DownResponse, GslbDomain, Service};
use crate::location::db::LocationDb;
use crate::policy::{
    Client, Engine, Fallback, Method, Pick, Query, ServiceState, State, topology::Ldns,
};

/// One complete state of the answers: what the fast path's tables hold and what the responder
/// answers GSLB names from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub dns_port: u16,
    pub edns_udp_size: u16,
    /// Destination addresses the fast path answers for.
    pub listen: Vec<IpAddr>,
    /// Disjoint client prefixes and the view each selects; other clients get [`DEFAULT_VIEW`].
    pub views: Vec<(IpNet, u32)>,
    /// The same, as merged segments: the responder's lookups and the ECS scope.
    pub segments: Segments,
    pub domains: Vec<DomainEntry>,
    /// GSLB domains whose answer depends on the single client address (source IP hash,
    /// persistence): the fast path has no entry for them and the responder asks the decision
    /// engine per query, with [`Snapshot::services`] and [`Snapshot::rtt`].
    pub engine_domains: Vec<String>,
    /// Services held DOWN (by monitors or by their site's MEP state).
    pub down_services: Vec<String>,
    /// By configuration service index: the state the answers were decided with.
    pub services: Vec<ServiceState>,
    /// The RTT rows the answers were decided with, and the step function client → row + 1.
    pub rtt: Arc<Vec<LdnsRtt>>,
    pub rtt_rows: Steps,
    pub stats: CompileStats,
}

/// One (name, qtype) the fast path answers, with its answer for each view that has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DomainEntry {
    /// Lower-case, without the trailing dot.
    pub name: String,
    pub qtype: u16,
    pub id: u32,
    /// The default view's answer (when it has one) and every other view's that differs.
    pub answers: Vec<(u32, Answer)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Answer {
    pub ttl: u32,
    pub mode: AnswerMode,
    /// All of one family, matching the entry's qtype, in rotation order (an address repeats
    /// in proportion to its weight under the ratio method). Empty: NODATA for this view, though
    /// the default view has addresses. More than [`gslb_common::MAX_ADDRS`]: the fast path leaves the query
    /// to the responder.
    pub addrs: Vec<IpAddr>,
}

/// Everything besides the configuration that the answers depend on.
#[derive(Clone, Debug, Default)]
pub struct Inputs<'a> {
    pub locations: Option<&'a LocationDb>,
    /// By configuration service index; a service beyond the slice is UP with no load.
    pub services: Vec<ServiceState>,
    /// Measured RTTs, one row per LDNS entry (the rows do not overlap).
    pub rtt: Arc<Vec<LdnsRtt>>,
}

/// The RTTs from every site to one LDNS entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LdnsRtt {
    /// One resolver, or the prefix the LDNS mask groups.
    pub ldns: IpNet,
    /// Microseconds, by configuration site index; `None`: not measured from that site.
    pub rtt_us: Vec<Option<u32>>,
}

/// What one compilation produced and what it cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileStats {
    /// Segments the boundaries cut the address space into.
    pub segments: usize,
    /// Distinct (static view, location, subnets, RTT row) inputs among them.
    pub classes: usize,
    /// Views (distinct answer vectors), the default included.
    pub views: usize,
    /// Prefixes of the view trie.
    pub prefixes: usize,
    /// (domain, view) answer entries.
    pub entries: usize,
    /// Engine decisions taken.
    pub decisions: usize,
    /// Kernel memory the tables take, approximately (keys, values, per-entry overhead).
    pub map_bytes: usize,
}

/// How a domain is decided, and from what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Round robin over the services of the client's static view.
    Static,
    /// By the engine, per segment class: `place` (location and subnets), `rtt` (RTT row).
    Decided { place: bool, rtt: bool },
    /// By the engine, per query.
    PerQuery,
}

/// A class of segments: everything a decision reads about the client but its address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ClassKey {
    v4: bool,
    view: u32,
    subnet: u32,
    rtt: u32,
    location: u64,
}

impl Snapshot {
    /// Every service up, no location database, no RTT.
    pub fn from_config(config: &Config) -> Snapshot {
        Snapshot::with_health(config, |_| true)
    }

    /// The answers while only the services for which `up` says so are up.
    pub fn with_health(config: &Config, up: impl Fn(&str) -> bool) -> Snapshot {
        let services = config
            .services
            .iter()
            .map(|s| if up(&s.name) { ServiceState::UP } else { ServiceState::DOWN })
            .collect();
        Snapshot::compile(config, &Inputs { services, ..Inputs::default() })
    }

    /// The answers of `config` under `inputs`. Down services are left out; a static view left
    /// without services of a family falls back to the default view; a domain with none up
    /// answers its backup addresses of that family (down_response = "backup") or nothing
    /// (NODATA).
    pub fn compile(config: &Config, inputs: &Inputs<'_>) -> Snapshot {
        Compiler::new(config, inputs).run()
    }
}

struct Compiler<'a> {
    config: &'a Config,
    inputs: &'a Inputs<'a>,
    engine: Option<Engine>,
    services: HashMap<&'a str, (usize, &'a Service)>,
    kinds: Vec<Kind>,
    /// (domain index, qtype), every domain but the per-query ones.
    entries: Vec<(usize, u16)>,
    answers: Vec<Answer>,
    answer_ids: HashMap<Answer, u32>,
    decisions: usize,
}

impl<'a> Compiler<'a> {
    fn new(config: &'a Config, inputs: &'a Inputs<'a>) -> Self {
        let services =
            config.services.iter().enumerate().map(|(i, s)| (s.name.as_str(), (i, s))).collect();
        let engine = config
            .gslb_domains
            .iter()
            .any(|d| needs_engine(config, d, &services))
            .then(|| match Engine::from_config(config) {
                Ok(engine) => Some(engine),
                Err(error) => {
                    // Validation makes this unreachable; no answers for those names is the safe
                    // side if it ever is not.
                    tracing::error!(%error, "decision engine rejected the configuration");
                    None
                }
            })
            .flatten();
        let kinds: Vec<Kind> =
            config.gslb_domains.iter().map(|d| kind(config, d, &services, engine.as_ref())).collect();
        let entries = kinds
            .iter()
            .enumerate()
            .filter(|(_, k)| **k != Kind::PerQuery)
            .flat_map(|(d, _)| [(d, QTYPE_A), (d, QTYPE_AAAA)])
            .collect();
        Compiler {
            config,
            inputs,
            engine,
            services,
            kinds,
            entries,
            answers: Vec::new(),
            answer_ids: HashMap::new(),
            decisions: 0,
        }
    }

    fn up(&self, service: usize) -> bool {
        !self.inputs.services.get(service).is_some_and(|s| s.down)
    }

    /// 0 for no answer, else 1 + the answer's index.
    fn intern(&mut self, answer: Option<Answer>) -> u32 {
        let Some(answer) = answer else { return 0 };
        if let Some(&id) = self.answer_ids.get(&answer) {
            return id;
        }
        self.answers.push(answer.clone());
        let id = self.answers.len() as u32;
        self.answer_ids.insert(answer, id);
        id
    }

    fn run(mut self) -> Snapshot {
        let config = self.config;
        let place = self.kinds.iter().any(|k| matches!(k, Kind::Decided { place: true, .. }));
        let rtt = self.kinds.iter().any(|k| matches!(k, Kind::Decided { rtt: true, .. }));

        // The step functions of every input, and every boundary.
        let views = Steps::longest_match(
            config
                .views
                .iter()
                .enumerate()
                .flat_map(|(i, v)| v.prefixes.iter().map(move |p| (*p, i as u32 + 1))),
            0,
        );
        let mut subnets = Vec::new();
        if place {
            for p in &config.policies {
                p.expression.subnets(&mut subnets);
            }
            for r in &config.topology {
                if let Ldns::Prefix(net) = &r.ldns {
                    subnets.push(*net);
                }
            }
        }
        let subnets =
            Steps::longest_match(subnets.iter().enumerate().map(|(i, n)| (*n, i as u32 + 1)), 0);
        let rtt_rows = if rtt {
            Steps::longest_match(
                self.inputs.rtt.iter().enumerate().map(|(i, r)| (r.ldns, i as u32 + 1)),
                0,
            )
        } else {
            Steps::constant(0)
        };
        let locations = self.inputs.locations.filter(|_| place);
        let mut points: Vec<u128> = vec![0, V4_FIRST, V4_LAST + 1];
        for steps in [&views, &subnets, &rtt_rows] {
            points.extend_from_slice(&steps.starts);
        }
        if let Some(db) = locations {
            points.extend(db.boundaries());
        }
        points.sort_unstable();
        points.dedup();

        // Each segment's class.
        let mut class_ids: HashMap<ClassKey, u32> = HashMap::new();
        let mut classes: Vec<(ClassKey, IpAddr)> = Vec::new();
        let mut seg_class = Vec::with_capacity(points.len());
        let (mut iv, mut is, mut ir) = (0, 0, 0);
        let at = |steps: &Steps, i: &mut usize, p: u128| {
            while *i + 1 < steps.starts.len() && steps.starts[*i + 1] <= p {
                *i += 1;
            }
            steps.vals[*i]
        };
        for &p in &points {
            let addr = addr_of(p);
            let key = ClassKey {
                v4: addr.is_ipv4(),
                view: at(&views, &mut iv, p),
                subnet: at(&subnets, &mut is, p),
                rtt: at(&rtt_rows, &mut ir, p),
                location: locations.map_or(0, |db| db.class(addr)),
            };
            let id = *class_ids.entry(key).or_insert_with(|| {
                classes.push((key, addr));
                classes.len() as u32 - 1
            });
            seg_class.push(id);
        }

        // Each class's answer vector, each domain decided once per distinct input it reads.
        let mut memo: HashMap<(usize, ClassKey), u32> = HashMap::new();
        let mut vector_ids: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut vectors: Vec<Vec<u32>> = Vec::new();
        let mut class_vector = Vec::with_capacity(classes.len());
        for &(key, addr) in &classes {
            let mut vector = Vec::with_capacity(self.entries.len());
            for e in 0..self.entries.len() {
                let (d, qtype) = self.entries[e];
                let projected = match self.kinds[d] {
                    Kind::Static => ClassKey { view: key.view, ..ClassKey::none(key.v4) },
                    Kind::Decided { place, rtt } => ClassKey {
                        subnet: if place { key.subnet } else { 0 },
                        location: if place { key.location } else { 0 },
                        rtt: if rtt { key.rtt } else { 0 },
                        ..ClassKey::none(key.v4)
                    },
                    Kind::PerQuery => unreachable!("per-query domains have no entries"),
                };
                let id = match memo.get(&(e, projected)) {
                    Some(&id) => id,
                    None => {
                        let answer = match self.kinds[d] {
                            Kind::Static => self.static_answer(d, qtype, key.view),
                            _ => self.decided_answer(d, qtype, addr, key.rtt),
                        };
                        let id = self.intern(answer);
                        memo.insert((e, projected), id);
                        id
                    }
                };
                vector.push(id);
            }
            let id = *vector_ids.entry(vector.clone()).or_insert_with(|| {
                vectors.push(vector);
                vectors.len() as u32 - 1
            });
            class_vector.push(id);
        }

        // The most common view (by segments) is the default; the others are numbered in
        // address order.
        let mut count = vec![0usize; vectors.len()];
        for &c in &seg_class {
            count[class_vector[c as usize] as usize] += 1;
        }
        let default = (0..vectors.len()).max_by_key(|&v| (count[v], std::cmp::Reverse(v))).unwrap_or(0);
        let mut number = vec![u32::MAX; vectors.len()];
        if !vectors.is_empty() {
            number[default] = DEFAULT_VIEW;
        }
        let mut order = vec![default];
        for &c in &seg_class {
            let v = class_vector[c as usize] as usize;
            if number[v] == u32::MAX {
                number[v] = order.len() as u32;
                order.push(v);
            }
        }

        // Merged segments, and their prefixes.
        let mut segments = Segments::default();
        for (i, &p) in points.iter().enumerate() {
            let view = number[class_vector[seg_class[i] as usize] as usize];
            let edge = p == V4_FIRST || p == V4_LAST + 1;
            if edge || segments.views.last() != Some(&view) {
                segments.starts.push(p);
                segments.views.push(view);
            }
        }
        let mut views_out = Vec::new();
        let mut nets = Vec::new();
        for (i, (&first, &view)) in segments.starts.iter().zip(&segments.views).enumerate() {
            if view == DEFAULT_VIEW {
                continue;
            }
            let last = segments.starts.get(i + 1).map_or(u128::MAX, |&n| n - 1);
            nets.clear();
            prefixes_of(first, last, &mut nets);
            views_out.extend(nets.iter().map(|n| (*n, view)));
        }

        // Entries: the default view's answer and every other view's that differs.
        let mut domains = Vec::new();
        let empty = |a: &Answer| Answer { addrs: Vec::new(), ..a.clone() };
        for (e, &(d, qtype)) in self.entries.iter().enumerate() {
            let base = vectors.get(default).map_or(0, |v| v[e]);
            let mut answers = Vec::new();
            if base != 0 {
                answers.push((DEFAULT_VIEW, self.answers[base as usize - 1].clone()));
            }
            for (n, &v) in order.iter().enumerate().skip(1) {
                let id = vectors[v][e];
                if id == base {
                    continue;
                }
                let answer = match id {
                    0 => empty(&self.answers[base as usize - 1]),
                    id => self.answers[id as usize - 1].clone(),
                };
                answers.push((n as u32, answer));
            }
            if answers.iter().any(|(_, a)| !a.addrs.is_empty()) {
                let id = domains.len() as u32;
                let name = config.gslb_domains[d].name.clone();
                domains.push(DomainEntry { name, qtype, id, answers });
            }
        }

        let entries: usize = domains.iter().map(|d| d.answers.len()).sum();
        let stats = CompileStats {
            segments: points.len(),
            classes: classes.len(),
            views: vectors.len(),
            prefixes: views_out.len(),
            entries,
            decisions: self.decisions,
            map_bytes: views_out.len() * (size_of::<gslb_common::ViewKey>() + 4 + MAP_OVERHEAD)
                + domains.len() * (size_of::<gslb_common::DomainKey>() + 8 + MAP_OVERHEAD)
                + entries
                    * (size_of::<gslb_common::AnswerKey>()
                        + size_of::<gslb_common::AnswerSet>()
                        + MAP_OVERHEAD),
        };
        Snapshot {
            dns_port: config.server.dns_port,
            edns_udp_size: config.server.edns_udp_size,
            listen: config.server.listen.clone(),
            views: views_out,
            segments,
            domains,
            engine_domains: config
                .gslb_domains
                .iter()
                .zip(&self.kinds)
                .filter(|(_, k)| **k == Kind::PerQuery)
                .map(|(d, _)| d.name.clone())
                .collect(),
            down_services: config
                .services
                .iter()
                .enumerate()
                .filter(|(i, _)| !self.up(*i))
                .map(|(_, s)| s.name.clone())
                .collect(),
            services: (0..config.services.len())
                .map(|i| self.inputs.services.get(i).copied().unwrap_or_default())
                .collect(),
            rtt: self.inputs.rtt.clone(),
            rtt_rows,
            stats,
        }
    }

    /// A round-robin domain's answer for a static view (0: the default view): the view's up
    /// services of the family, else the domain's, else its backup addresses.
    fn static_answer(&self, d: usize, qtype: u16, view: u32) -> Option<Answer> {
        let domain = &self.config.gslb_domains[d];
        let family = |ip: &IpAddr| ip.is_ipv6() == (qtype == QTYPE_AAAA);
        // The answer addresses of `names` of this family, in order, each once (two services
        // may share an address on different ports).
        let answer = |names: &[String]| {
            let mut addrs: Vec<IpAddr> = Vec::new();
            for &(i, service) in names.iter().filter_map(|n| self.services.get(n.as_str())) {
                let ip = service.answer_ip();
                if self.up(i) && family(&ip) && !addrs.contains(&ip) {
                    addrs.push(ip);
                }
            }
            (!addrs.is_empty()).then_some(Answer { ttl: domain.ttl, mode: domain.answer, addrs })
        };
        if view != 0 {
            let name = &self.config.views[view as usize - 1].name;
            if let Some(a) = domain.views.iter().find(|(v, _)| v == name).and_then(|(_, n)| answer(n)) {
                return Some(a);
            }
        }
        if let Some(a) = answer(&domain.services) {
            return Some(a);
        }
        // Every service of the family is down: the backup addresses, if any.
        let configured = domain
            .services
            .iter()
            .filter_map(|n| self.services.get(n.as_str()))
            .any(|(_, s)| family(&s.answer_ip()));
        let backup: Vec<IpAddr> = domain.backup_ip.iter().copied().filter(family).collect();
        (configured && domain.down_response == DownResponse::Backup && !backup.is_empty())
            .then(|| Answer { ttl: domain.ttl, mode: domain.answer, addrs: backup })
    }

    /// The engine's answer for a client at `addr` (every client of its class gets the same).
    fn decided_answer(&mut self, d: usize, qtype: u16, addr: IpAddr, rtt_row: u32) -> Option<Answer> {
        let engine = self.engine.as_ref()?;
        self.decisions += 1;
        let location = self.inputs.locations.and_then(|db| db.lookup(addr));
        let rtt = match rtt_row {
            0 => &[][..],
            row => &self.inputs.rtt[row as usize - 1].rtt_us[..],
        };
        let domain = &self.config.gslb_domains[d];
        let decision = engine.decide(
            d,
            &Query { name: &domain.name, qtype },
            &Client { addr, location: location.as_deref(), sticky: None },
            &State { services: &self.inputs.services, rtt },
        );
        decision_answer(engine, self.config, &decision, qtype)
    }
}

/// Map entries cost more than their key and value: the kernel's element header, the trie's
/// node, allocator rounding. 64 bytes is a fair allowance for both map types.
const MAP_OVERHEAD: usize = 64;

impl ClassKey {
    fn none(v4: bool) -> ClassKey {
        ClassKey { v4, view: 0, subnet: 0, rtt: 0, location: 0 }
    }
}

/// The answer a decision gives, as the fast path hands it out: `None` for NODATA.
pub fn decision_answer(
    engine: &Engine,
    config: &Config,
    decision: &crate::policy::Decision,
    qtype: u16,
) -> Option<Answer> {
    let family = |ip: &IpAddr| ip.is_ipv6() == (qtype == QTYPE_AAAA);
    let asked = &config.gslb_domains[decision.domain.min(config.gslb_domains.len() - 1)];
    let ttl = asked.ttl;
    // Picks other than "all" hand out one address per answer; backup addresses follow the
    // domain's answer mode, as a round-robin domain's do.
    let mut mode = AnswerMode::Rotate;
    let addrs: Vec<IpAddr> = match decision.fallback {
        Some(Fallback::Empty) => return None,
        Some(Fallback::BackupIp) => {
            mode = asked.answer;
            asked.backup_ip.iter().copied().filter(family).collect()
        }
        None => {
            let ip = |s: usize| engine.service(s).ip;
            let distinct = |services: &mut dyn Iterator<Item = usize>| {
                let mut addrs: Vec<IpAddr> = Vec::new();
                for a in services.map(ip).filter(family) {
                    if !addrs.contains(&a) {
                        addrs.push(a);
                    }
                }
                addrs
            };
            let c = &decision.candidates;
            match &decision.pick {
                Pick::First => c.first().map(|&s| ip(s)).filter(family).into_iter().collect(),
                Pick::All => {
                    let addrs = distinct(&mut c.iter().copied());
                    return (!addrs.is_empty()).then_some(Answer { ttl, mode: AnswerMode::All, addrs });
                }
                Pick::Rotate => distinct(&mut c.iter().copied()),
                Pick::Weighted(weights) => {
                    // Weighted round robin as a rotation: each address as often as its weight
                    // over the weights' common divisor.
                    let g = weights.iter().copied().fold(0, gcd).max(1);
                    c.iter()
                        .zip(weights)
                        .flat_map(|(&s, &w)| std::iter::repeat_n(ip(s), (w / g) as usize))
                        .filter(family)
                        .collect()
                }
                Pick::Hash { .. } => {
                    debug_assert!(false, "hashed picks are decided per query");
                    distinct(&mut c.iter().copied())
                }
            }
        }
    };
    (!addrs.is_empty()).then_some(Answer { ttl, mode, addrs })
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Whether `domain`'s answer can differ between two clients of one static view: then the
/// engine decides it.
fn needs_engine(
    config: &Config,
    domain: &GslbDomain,
    services: &HashMap<&str, (usize, &Service)>,
) -> bool {
    let limited = domain
        .services
        .iter()
        .filter_map(|n| services.get(n.as_str()))
        .any(|(_, s)| s.max_connections.is_some() || s.max_bandwidth_kbps.is_some());
    domain.method != Method::RoundRobin
        || domain.alternate.is_some()
        || domain.fallback.is_some()
        || domain.persistence.is_some()
        || domain.backup_domain.is_some()
        || !config.policies.is_empty()
        || limited
}

/// How `domain` is decided: what its chain and its backup domains' chains read.
fn kind(
    config: &Config,
    domain: &GslbDomain,
    services: &HashMap<&str, (usize, &Service)>,
    engine: Option<&Engine>,
) -> Kind {
    if !needs_engine(config, domain, services) {
        return Kind::Static;
    }
    let Some(engine) = engine else { return Kind::PerQuery };
    let (mut place, mut rtt) = (!config.policies.is_empty(), false);
    let mut next = engine.domain_index(&domain.name);
    let mut seen = 0;
    while let Some(d) = next {
        let spec = engine.domain(d);
        if spec.persistence.is_some() || spec.chain.contains(&Method::SourceIpHash) {
            return Kind::PerQuery;
        }
        place |= spec.chain.iter().any(|m| matches!(m, Method::StaticProximity | Method::Topology));
        rtt |= spec.chain.contains(&Method::Rtt);
        next = spec.backup_domain;
        seen += 1;
        if seen > config.gslb_domains.len() {
            break;
        }
    }
    Kind::Decided { place, rtt }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn snapshot(toml: &str) -> Snapshot {
        Snapshot::from_config(&Config::parse(toml, Path::new("test.toml")).unwrap())
    }

    #[test]
    fn views_and_answers_are_numbered_and_split_by_family() {
        let s = snapshot(
            r#"
            [server]
            listen = ["192.0.2.1"]
            [[view]]
            name = "eu"
            prefixes = ["198.51.100.0/24", "2001:db8:100::/48"]
            [[view]]
            name = "us"
            prefixes = ["203.0.113.0/24"]
            [[zone]]
            name = "example.com"
            ns = ["ns.example.net"]
            soa.rname = "hostmaster.example.com"
            [[site]]
            name = "s"
            ip = "192.0.2.200"
            [[service]]
            name = "w10"
            ip = "192.0.2.10"
            site = "s"
            [[service]]
            name = "w10-8080"
            ip = "192.0.2.10"
            port = 8080
            site = "s"
            [[service]]
            name = "w11"
            ip = "192.0.2.11"
            site = "s"
            [[service]]
            name = "w30"
            ip = "192.0.2.30"
            site = "s"
            [[service]]
            name = "w30v6"
            ip = "2001:db8::30"
            site = "s"
            [[service]]
            name = "nat"
            ip = "10.0.0.5"
            public_ip = "192.0.2.50"
            site = "s"
            [[gslb_domain]]
            name = "WWW.Example.com."
            ttl = 60
            answer = "all"
            services = ["w10", "w11"]
            backup_ip = ["192.0.2.99"]
            [[gslb_domain.view]]
            view = "us"
            services = ["w30", "w30v6"]
            [[gslb_domain.view]]
            view = "eu"
            services = ["w30v6"]
            [[gslb_domain]]
            name = "nat.example.com"
            services = ["nat", "w10-8080", "w10"]
            "#,
        );
        assert_eq!(
            s.views,
            // In address order (IPv4 as IPv4-mapped IPv6), numbered in that order.
            vec![
                ("198.51.100.0/24".parse().unwrap(), 1),
                ("203.0.113.0/24".parse().unwrap(), 2),
                ("2001:db8:100::/48".parse().unwrap(), 1),
            ]
        );
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let answer = |ttl, mode, addrs: &[&str]| Answer {
            ttl,
            mode,
            addrs: addrs.iter().map(|a| ip(a)).collect(),
        };
        let all = |addrs: &[&str]| answer(60, AnswerMode::All, addrs);
        assert_eq!(
            s.domains,
            vec![
                DomainEntry {
                    name: "www.example.com".into(),
                    qtype: QTYPE_A,
                    id: 0,
                    // "eu" has no IPv4 service: no entry, its clients get the default view's.
                    answers: vec![
                        (DEFAULT_VIEW, all(&["192.0.2.10", "192.0.2.11"])),
                        (2, all(&["192.0.2.30"]))
                    ],
                },
                // No default-view AAAA: the domain's own services are all IPv4.
                DomainEntry {
                    name: "www.example.com".into(),
                    qtype: QTYPE_AAAA,
                    id: 1,
                    answers: vec![(1, all(&["2001:db8::30"])), (2, all(&["2001:db8::30"]))],
                },
                // The public IP is answered; an address shared by two services appears once.
                DomainEntry {
                    name: "nat.example.com".into(),
                    qtype: QTYPE_A,
                    id: 2,
                    answers: vec![(
                        DEFAULT_VIEW,
                        answer(30, AnswerMode::Rotate, &["192.0.2.50", "192.0.2.10"])
                    )],
                },
            ]
        );
    }

    #[test]
    fn down_services_leave_the_answers() {
        let config = Config::parse(
            r#"
            [server]
            listen = ["192.0.2.53"]
            [[view]]
            name = "lab"
            prefixes = ["192.0.2.0/24"]
            [[zone]]
            name = "example.com"
            ns = ["ns.example.net"]
            soa.rname = "hostmaster.example.com"
            [[site]]
            name = "s"
            ip = "192.0.2.1"
            [[service]]
            name = "a"
            ip = "198.51.100.1"
            site = "s"
            [[service]]
            name = "b"
            ip = "198.51.100.2"
            site = "s"
            [[service]]
            name = "lab"
            ip = "192.0.2.80"
            site = "s"
            [[gslb_domain]]
            name = "www.example.com"
            answer = "all"
            services = ["a", "b"]
            backup_ip = ["203.0.113.99"]
              [[gslb_domain.view]]
              view = "lab"
              services = ["lab"]
            [[gslb_domain]]
            name = "empty.example.com"
            services = ["a"]
            "#,
            Path::new("test.toml"),
        )
        .unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // (services down, www default view, www lab view, empty.example.com default view)
        let table: [(&[&str], Option<Vec<IpAddr>>, Option<Vec<IpAddr>>, Option<Vec<IpAddr>>); 4] = [
            (&[], Some(vec![ip("198.51.100.1"), ip("198.51.100.2")]), Some(vec![ip("192.0.2.80")]), Some(vec![ip("198.51.100.1")])),
            (&["a"], Some(vec![ip("198.51.100.2")]), Some(vec![ip("192.0.2.80")]), None),
            // The lab view's only service down: its clients get the default view's answer.
            (&["lab"], Some(vec![ip("198.51.100.1"), ip("198.51.100.2")]), None, Some(vec![ip("198.51.100.1")])),
            // Everything down: the backup address; no backup: nothing (NODATA).
            (&["a", "b", "lab"], Some(vec![ip("203.0.113.99")]), None, None),
        ];
        for (down, www, lab, empty) in table {
            let s = Snapshot::with_health(&config, |name| !down.contains(&name));
            let get = |name: &str, view: u32| {
                s.domains
                    .iter()
                    .find(|d| d.name == name && d.qtype == QTYPE_A)
                    .and_then(|d| d.answers.iter().find(|(v, _)| *v == view))
                    .map(|(_, a)| a.addrs.clone())
            };
            assert_eq!(get("www.example.com", DEFAULT_VIEW), www, "down {down:?}: www");
            assert_eq!(get("www.example.com", 1), lab, "down {down:?}: www, lab view");
            assert_eq!(get("empty.example.com", DEFAULT_VIEW), empty, "down {down:?}: empty");
        }
    }
}
