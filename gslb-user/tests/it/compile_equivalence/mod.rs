//! The compiled tables give every client the decision engine's answer (issue 5, "Compile").
//!
//! Two configurations are compiled with a location database (NetScaler CSV text and custom
//! `[[location]]` entries, nested, one range not aligned to prefixes, IPv4 and IPv6), RTT rows
//! for IPv4 and IPv6 LDNS prefixes, and service states (some down, some over their spillover
//! limits):
//!
//! - `rich`: DNS policies (MATCHES_LOCATION, IN_SUBNET over IPv4 and IPv6, question name and
//!   type), topology records by prefix and by location, static views, and a domain per method
//!   with alternate/fallback chains, backup domains, backup addresses and spillover. With a
//!   policy in the configuration the engine decides every domain.
//! - `split`: no policies, so round-robin domains are answered by static view while the others
//!   are decided by the engine, side by side in one snapshot.
//!
//! For random clients (seeded), most inside or at the edges of a configured range, the answer
//! the snapshot gives, looked up as the fast path does (longest prefix over `Snapshot::views`
//! giving the view and the LDNS view, none: the default view; the view's answer, else the
//! default view's; for a domain answered by RTT the answer of the outcome the LDNS view's
//! choice gives (`Snapshot::rtt_choices`) instead when it has
//! one), must mean the same as the engine's decision for that client, converted here
//! independently of `compile::decision_answer` (round-robin domains by static view: the
//! static-view rule, written here too). The privileged tests publish the snapshot into the real
//! maps and ask the XDP program (BPF_PROG_TEST_RUN) for a sample of the clients; the same again
//! after a sequence of health changes compiled incrementally and published in place.

mod configs;
mod health;
mod random;
mod xdp;

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use common::{Answers, Expect, Frame, assert_passed, assert_reply, query, run, wire};
use configs::{COMMON, CSV, RICH, RTT_MS, SPLIT, SPLIT_STATIC, STATES, TWINS};
use gslb_common::{
    Counter, DEFAULT_VIEW, MAX_ADDRS, QTYPE_A, QTYPE_AAAA, RTT_OUTCOME_BIT, ViewValue,
};
use gslb_user::compile::{Answer, Compiler, Inputs, LdnsRtt, Snapshot};
use gslb_user::config::Config;
use gslb_user::dataplane::{Dataplane, PublishStats};
use gslb_user::location::db::LocationDb;
use gslb_user::policy::{AnswerMode, DownResponse};
use gslb_user::policy::{
    Bandwidth, Client, Decision, Engine, Fallback, Ldns, Pick, Query as EngineQuery, ServiceState,
    State,
};
use hickory_proto::rr::RecordType;
use ipnet::IpNet;
use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};

/// Clients of the property over the rich configuration, and over the split one.
const CLIENTS: usize = 100_000;
const SPLIT_CLIENTS: usize = 30_000;
const SHARED_CLIENTS: usize = 20_000;
/// Of those, clients asked through the XDP program.
const XDP_CLIENTS: usize = 2_000;
const SPLIT_XDP_CLIENTS: usize = 200;
/// Clients checked after each health change, and of those asked through XDP.
const INCREMENTAL_CLIENTS: usize = 10_000;
const INCREMENTAL_XDP_CLIENTS: usize = 100;

// ---- The world ----

/// A configuration with everything its answers depend on, and its compiled snapshot.
#[derive(Clone)]
struct World {
    name: &'static str,
    config: Config,
    db: LocationDb,
    services: Vec<ServiceState>,
    rtt: Arc<Vec<LdnsRtt>>,
    engine: Engine,
    snapshot: Snapshot,
    /// Domains answered by static view, not by the engine.
    static_domains: Vec<String>,
}

impl World {
    fn new(name: &'static str, text: &str, static_domains: &[&str]) -> World {
        let text = format!("{COMMON}\n{text}");
        let file = format!("{name}.toml");
        let config = Config::parse(&text, Path::new(&file)).unwrap_or_else(|e| panic!("{e}"));
        let db = LocationDb::builder()
            .netscaler_csv_text("compile_equivalence.csv", CSV)
            .custom_at(file, config.locations.custom.iter().cloned())
            .build()
            .expect("location database");
        let services: Vec<ServiceState> = config
            .services
            .iter()
            .map(|s| match STATES.iter().find(|(n, ..)| *n == s.name) {
                Some(&(_, down, connections, bandwidth_kbps)) => ServiceState {
                    up: !down,
                    connections,
                    bandwidth: Bandwidth::from_kbps(bandwidth_kbps),
                },
                None => ServiceState::UP,
            })
            .collect();
        let rtt: Arc<Vec<LdnsRtt>> = Arc::new(
            RTT_MS
                .iter()
                .map(|(net, ms)| LdnsRtt {
                    ldns: net.parse().unwrap(),
                    rtt_us: ms.iter().map(|m| m.map(|m| (m * 1000.0) as u32)).collect(),
                })
                .collect(),
        );
        let engine = config.engine().expect("engine");
        let started = Instant::now();
        let snapshot = Snapshot::compile(
            &config,
            &Inputs {
                locations: Some(&db),
                services: services.clone(),
                rtt: rtt.clone(),
                ..Inputs::default()
            },
        );
        eprintln!(
            "{name}: compiled in {:?}: {:?}",
            started.elapsed(),
            snapshot.stats
        );
        World {
            name,
            config,
            db,
            services,
            rtt,
            engine,
            snapshot,
            static_domains: static_domains.iter().map(ToString::to_string).collect(),
        }
    }

    fn rich() -> World {
        World::new("rich", &format!("{RICH}\n{TWINS}"), &[])
    }

    fn split() -> World {
        World::new("split", &format!("{SPLIT}\n{TWINS}"), &SPLIT_STATIC)
    }

    /// The rich configuration without its policy on the question name: then domains of one
    /// structure share their decisions, policies or not.
    fn shared() -> World {
        let text = RICH.replace(
            r#"&& DNS.REQ.QUESTION.DOMAIN.EQ("ratio.example.com")"#,
            "&& DNS.REQ.QUESTION.TYPE.EQ(A)",
        );
        assert_ne!(text, RICH);
        World::new("shared", &format!("{text}\n{TWINS}"), &[])
    }

    /// What `domain` (configuration index) must answer `client` for `qtype`.
    fn expected(
        &self,
        domain: usize,
        qtype: u16,
        client: IpAddr,
        location: Option<&gslb_user::location::Location>,
    ) -> Result<Meaning, String> {
        let d = &self.config.gslb_domains[domain];
        if self.static_domains.contains(&d.name) {
            return Ok(self.static_meaning(domain, qtype, client));
        }
        let rtt = self
            .rtt
            .iter()
            .find(|r| r.ldns.contains(&client))
            .map_or(&[][..], |r| &r.rtt_us[..]);
        let decision = self.engine.decide(
            domain,
            &EngineQuery {
                name: &d.name,
                qtype,
            },
            &Client {
                addr: client,
                location,
                // The engine decides among the view's services for a client in a view.
                view: self.static_view(client).map_or(0, |v| v as u32 + 1),
                sticky: None,
            },
            &State {
                services: &self.services,
                rtt,
                disabled_domains: &[],
            },
        );
        decision_meaning(&self.config, &decision, qtype)
    }

    /// The client's static view (configuration index): the view with the longest prefix
    /// containing it.
    fn static_view(&self, client: IpAddr) -> Option<usize> {
        self.config
            .views
            .iter()
            .enumerate()
            .flat_map(|(i, v)| v.prefixes.iter().map(move |p| (p, i)))
            .filter(|(p, _)| p.contains(&client))
            .max_by_key(|(p, _)| p.prefix_len())
            .map(|(_, i)| i)
    }

    /// The static-view rule for a round-robin domain: the up services of the family of the
    /// client's view (longest configured prefix), else the domain's own, else its backup
    /// addresses when it has services of that family at all, else nothing.
    fn static_meaning(&self, domain: usize, qtype: u16, client: IpAddr) -> Meaning {
        let d = &self.config.gslb_domains[domain];
        let family = |ip: &IpAddr| ip.is_ipv6() == (qtype == QTYPE_AAAA);
        let view = self
            .static_view(client)
            .map(|v| self.config.views[v].name.as_str());
        // Each address once, in the services' order (two services may share one).
        let up_addrs = |names: &[String]| -> Vec<IpAddr> {
            let mut addrs = Vec::new();
            for n in names {
                let i = self
                    .config
                    .services
                    .iter()
                    .position(|s| &s.name == n)
                    .unwrap();
                let s = &self.config.services[i];
                let ip = s.public_ip.unwrap_or(s.ip);
                if self.services[i].up && family(&ip) && !addrs.contains(&ip) {
                    addrs.push(ip);
                }
            }
            addrs
        };
        let in_view = view
            .and_then(|v| d.views.iter().find(|(name, _)| name == v))
            .map(|(_, names)| up_addrs(names))
            .unwrap_or_default();
        let addrs = if in_view.is_empty() {
            up_addrs(&d.services)
        } else {
            in_view
        };
        let addrs = if addrs.is_empty() {
            // Backup addresses stand in for a family the domain (or one of its views) serves.
            let has_family = d
                .services
                .iter()
                .chain(d.views.iter().flat_map(|(_, v)| v))
                .any(|n| {
                    let s = self.config.service(n).unwrap();
                    family(&s.public_ip.unwrap_or(s.ip))
                });
            if has_family && d.down_response == DownResponse::Backup {
                d.backup_ip.iter().copied().filter(family).collect()
            } else {
                Vec::new()
            }
        } else {
            addrs
        };
        match d.answer {
            AnswerMode::All => Meaning::all(d.ttl, addrs),
            AnswerMode::Rotate => Meaning::rotation(d.ttl, addrs.into_iter().map(|a| (a, 1))),
        }
    }
}

// ---- What an answer means ----

/// An answer as clients see it over many queries.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Meaning {
    /// No address of the family: NODATA.
    Nodata,
    /// One address per answer, each as often as its share; shares in lowest terms, by address.
    Rotation {
        ttl: u32,
        shares: Vec<(IpAddr, u32)>,
    },
    /// Every one of these addresses in each answer, in this order. A single address is this
    /// too, whether it rotates or not.
    All { ttl: u32, addrs: Vec<IpAddr> },
}

impl Meaning {
    /// `addrs` each once, in order.
    fn all(ttl: u32, addrs: impl IntoIterator<Item = IpAddr>) -> Meaning {
        let mut distinct: Vec<IpAddr> = Vec::new();
        for a in addrs {
            if !distinct.contains(&a) {
                distinct.push(a);
            }
        }
        match distinct.len() {
            0 => Meaning::Nodata,
            _ => Meaning::All {
                ttl,
                addrs: distinct,
            },
        }
    }

    /// One address per answer, each in proportion to the sum of its weights.
    fn rotation(ttl: u32, weighted: impl IntoIterator<Item = (IpAddr, u32)>) -> Meaning {
        let mut shares: BTreeMap<IpAddr, u32> = BTreeMap::new();
        for (a, w) in weighted {
            *shares.entry(a).or_default() += w;
        }
        shares.retain(|_, w| *w > 0);
        let g = shares.values().fold(0, |g, &w| gcd(g, w));
        match shares.len() {
            0 => Meaning::Nodata,
            1 => Meaning::All {
                ttl,
                addrs: shares.into_keys().collect(),
            },
            _ => Meaning::Rotation {
                ttl,
                shares: shares.into_iter().map(|(a, w)| (a, w / g)).collect(),
            },
        }
    }

    /// What a stored answer means: `None` (no answer for the client's view nor the default
    /// view) and an empty one are NODATA.
    fn of_answer(answer: Option<&Answer>) -> Meaning {
        match answer {
            None => Meaning::Nodata,
            Some(a) if a.addrs.is_empty() => Meaning::Nodata,
            Some(a) => match a.mode {
                // Kept as stored: a repeated address in an "all" answer is a wrong answer.
                AnswerMode::All if a.addrs.len() > 1 => Meaning::All {
                    ttl: a.ttl,
                    addrs: a.addrs.clone(),
                },
                _ => Meaning::rotation(a.ttl, a.addrs.iter().map(|&x| (x, 1))),
            },
        }
    }

    /// Addresses a reply may carry.
    fn support(&self) -> Vec<IpAddr> {
        match self {
            Meaning::Nodata => Vec::new(),
            Meaning::Rotation { shares, .. } => shares.iter().map(|s| s.0).collect(),
            Meaning::All { addrs, .. } => addrs.clone(),
        }
    }

    fn ttl(&self) -> u32 {
        match self {
            Meaning::Nodata => 0,
            Meaning::Rotation { ttl, .. } | Meaning::All { ttl, .. } => *ttl,
        }
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The engine's decision as an answer, written from the engine's contract: the candidates'
/// answer addresses under the pick (rotate: each distinct address in turn; all: every one;
/// first: the first; weighted: in proportion to the weights), the domain that decided giving
/// the TTL; no candidates: the backup addresses of the family (in the domain's answer mode)
/// or NODATA.
fn decision_meaning(config: &Config, decision: &Decision, qtype: u16) -> Result<Meaning, String> {
    let family = |ip: &IpAddr| ip.is_ipv6() == (qtype == QTYPE_AAAA);
    let domain = &config.gslb_domains[decision.domain];
    let ttl = domain.ttl;
    let ip = |s: usize| {
        let s = &config.services[s];
        s.public_ip.unwrap_or(s.ip)
    };
    let c = &decision.candidates;
    Ok(match decision.fallback {
        Some(Fallback::Empty) => Meaning::Nodata,
        Some(Fallback::BackupIp) => {
            let backup = domain.backup_ip.iter().copied().filter(family);
            match domain.answer {
                AnswerMode::All => Meaning::all(ttl, backup),
                AnswerMode::Rotate => Meaning::rotation(ttl, backup.map(|a| (a, 1))),
            }
        }
        None => match &decision.pick {
            Pick::First => Meaning::all(ttl, c.first().map(|&s| ip(s)).filter(family)),
            Pick::All => Meaning::all(ttl, c.iter().map(|&s| ip(s)).filter(family)),
            // Each distinct address in turn: two services sharing an address (on two ports)
            // are one address to a client.
            Pick::Rotate => {
                let mut distinct: Vec<IpAddr> = Vec::new();
                for a in c.iter().map(|&s| ip(s)).filter(family) {
                    if !distinct.contains(&a) {
                        distinct.push(a);
                    }
                }
                Meaning::rotation(ttl, distinct.into_iter().map(|a| (a, 1)))
            }
            Pick::Weighted(w) => {
                if w.len() != c.len() {
                    return Err(format!("{} weights for {} candidates", w.len(), c.len()));
                }
                Meaning::rotation(
                    ttl,
                    c.iter()
                        .zip(w)
                        .map(|(&s, &w)| (ip(s), w))
                        .filter(|(a, _)| family(a)),
                )
            }
            Pick::Hash { .. } => return Err("a hashed pick in a compiled domain".into()),
        },
    })
}

// ---- The fast path's lookup, written again ----

/// The snapshot's tables as the XDP program reads them: a longest-prefix match over the view
/// prefixes in the maps' key space (IPv4 as IPv4-mapped IPv6) gives the client's view and LDNS
/// view (none: the default view, no LDNS view); the answer is the view's, else the default
/// view's; when there is one and the domain is answered by RTT, the answer of the outcome the
/// LDNS view's choice gives for the domain's RTT slot replaces it if it has one.
struct Tables<'a> {
    /// Prefix lengths in key bits, longest first.
    lengths: Vec<u32>,
    prefixes: QuickMap<(u32, u128), ViewValue>,
    entries: QuickMap<(&'a str, u16), Entry<'a>>,
    choices: &'a gslb_user::compile::RttChoices,
}

#[derive(Default)]
struct Entry<'a> {
    by_rtt: bool,
    rtt_slot: u32,
    views: QuickMap<u32, &'a Answer>,
    /// By RTT outcome index.
    outcomes: QuickMap<u32, &'a Answer>,
}

/// std's HashMap with FNV-1a instead of SipHash: millions of lookups in a debug build.
type QuickMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = h;
    }
}

fn key_of(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => 0xffff << 32 | u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

fn key_bits(net: &IpNet) -> u32 {
    match net {
        IpNet::V4(n) => 96 + u32::from(n.prefix_len()),
        IpNet::V6(n) => u32::from(n.prefix_len()),
    }
}

fn mask(bits: u32) -> u128 {
    if bits == 0 {
        0
    } else {
        u128::MAX << (128 - bits)
    }
}

const NO_VIEW: ViewValue = ViewValue {
    view: DEFAULT_VIEW,
    rtt_view: 0,
    scope: 0,
    reserved: [0; 3],
};

impl<'a> Tables<'a> {
    /// Checks what the maps rely on: every prefix has its host bits clear, none repeats and
    /// none lies inside another (the views are disjoint).
    fn new(snapshot: &'a Snapshot) -> Tables<'a> {
        let mut prefixes = QuickMap::default();
        for (net, view) in snapshot.views.iter() {
            let (bits, key) = (key_bits(net), key_of(net.addr()));
            assert_eq!(key & !mask(bits), 0, "{net}: host bits set");
            assert_ne!(
                (view.view, view.rtt_view),
                (DEFAULT_VIEW, 0),
                "{net}: the default view without an LDNS view needs no prefix"
            );
            // The ECS scope the fast path echoes is the prefix's own length.
            assert_eq!(view.scope, net.prefix_len(), "{net}: scope");
            assert!(prefixes.insert((bits, key), *view).is_none(), "{net} twice");
        }
        let lengths: BTreeSet<u32> = prefixes.keys().map(|k| k.0).collect();
        let lengths: Vec<u32> = lengths.into_iter().rev().collect();
        for &(bits, key) in prefixes.keys() {
            for &shorter in lengths.iter().filter(|&&b| b < bits) {
                let outer = (shorter, key & mask(shorter));
                assert!(
                    !prefixes.contains_key(&outer),
                    "view prefixes overlap: {:x}/{bits} inside {:x}/{shorter}",
                    key,
                    outer.1
                );
            }
        }
        let mut entries: QuickMap<(&str, u16), Entry> = QuickMap::default();
        for d in &snapshot.domains {
            let entry = entries.entry((d.name.as_str(), d.qtype)).or_default();
            assert!(
                entry.views.is_empty() && entry.outcomes.is_empty(),
                "{} type {} twice",
                d.name,
                d.qtype
            );
            entry.by_rtt = d.by_rtt;
            entry.rtt_slot = d.rtt_slot;
            assert!(
                !d.by_rtt || (d.rtt_slot as usize) < snapshot.rtt_choices.slots,
                "{} type {}: RTT slot {} of {}",
                d.name,
                d.qtype,
                d.rtt_slot,
                snapshot.rtt_choices.slots
            );
            for (view, answer) in &d.answers {
                assert!(
                    entry.views.insert(*view, answer).is_none(),
                    "{} type {}: view {view} twice",
                    d.name,
                    d.qtype
                );
            }
            for (outcome, answer) in &d.rtt_answers {
                assert!(
                    *outcome < 256 && outcome & RTT_OUTCOME_BIT == 0,
                    "{} type {}: RTT outcome {outcome}",
                    d.name,
                    d.qtype
                );
                assert!(
                    entry.outcomes.insert(*outcome, answer).is_none(),
                    "{} type {}: RTT outcome {outcome} twice",
                    d.name,
                    d.qtype
                );
            }
        }
        Tables {
            lengths,
            prefixes,
            entries,
            choices: &snapshot.rtt_choices,
        }
    }

    fn view(&self, client: IpAddr) -> ViewValue {
        let key = key_of(client);
        self.lengths
            .iter()
            .find_map(|&bits| self.prefixes.get(&(bits, key & mask(bits))))
            .copied()
            .unwrap_or(NO_VIEW)
    }

    /// Whether the name has a `DOMAINS` entry for `qtype` (a miss is then "no answer", not
    /// "unknown name").
    fn known(&self, name: &str, qtype: u16) -> bool {
        self.entries.contains_key(&(name, qtype))
    }

    fn answer(&self, name: &str, qtype: u16, view: ViewValue) -> Option<&'a Answer> {
        let entry = self.entries.get(&(name, qtype))?;
        let base = entry
            .views
            .get(&view.view)
            .or_else(|| entry.views.get(&DEFAULT_VIEW))
            .copied()?;
        if entry.by_rtt
            && view.rtt_view != 0
            && let Some(outcome) = self.choices.choice(view.rtt_view, entry.rtt_slot)
            && let Some(by_rtt) = entry.outcomes.get(&u32::from(outcome))
        {
            return Some(by_rtt);
        }
        Some(base)
    }
}

// ---- Clients ----

const V4_FIRST: u128 = 0xffff << 32;
const V4_LAST: u128 = V4_FIRST | 0xffff_ffff;

fn addr_of(key: u128) -> IpAddr {
    if (V4_FIRST..=V4_LAST).contains(&key) {
        IpAddr::V4(Ipv4Addr::from(key as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(key))
    }
}

/// Every range of the world that has a boundary: static view prefixes, policy subnets, topology
/// prefixes, location ranges and RTT rows, as (first, last) keys.
fn ranges(world: &World) -> Vec<(u128, u128)> {
    let mut nets: Vec<IpNet> = Vec::new();
    for v in &world.config.views {
        nets.extend(&v.prefixes);
    }
    for p in &world.config.policies {
        p.expression.subnets(&mut nets);
    }
    for r in &world.config.topology {
        if let Ldns::Prefix(net) = &r.ldns {
            nets.push(*net);
        }
    }
    nets.extend(world.rtt.iter().map(|r| r.ldns));
    let mut out: Vec<(u128, u128)> = nets
        .iter()
        .map(|n| (key_of(n.network()), key_of(n.broadcast())))
        .collect();
    let mut add = |from: IpAddr, to: IpAddr| out.push((key_of(from), key_of(to)));
    for line in CSV.lines() {
        let mut fields = line.split(',');
        let from = fields.next().unwrap().parse().unwrap();
        let to = fields.next().unwrap().parse().unwrap();
        add(from, to);
    }
    for (_, from, to, _) in &world.config.locations.custom {
        add(*from, *to);
    }
    out
}

/// `n` client addresses from a seeded generator: 45% inside a range of the world, 30% at one
/// of its edges (just inside or just outside), the rest anywhere in IPv4 or IPv6 (2001:db8::/32
/// or anywhere). No IPv4-mapped IPv6 address: those are IPv4 clients.
fn clients(world: &World, seed: u8, n: usize) -> Vec<IpAddr> {
    let ranges = ranges(world);
    let mut rng = TestRng::from_seed(RngAlgorithm::XorShift, &[seed; 16]);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let r = rng.next_u32() % 100;
        let (first, last) = ranges[rng.next_u32() as usize % ranges.len()];
        let v4 = (V4_FIRST..=V4_LAST).contains(&first);
        let random128 =
            |rng: &mut TestRng| u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64());
        let key = match r {
            // Inside a range.
            0..45 => {
                let span = last - first;
                first
                    + if span == u128::MAX {
                        random128(&mut rng)
                    } else {
                        random128(&mut rng) % (span + 1)
                    }
            }
            // At an edge, just inside or just outside.
            45..75 => {
                let offset = u128::from(rng.next_u32() % 3);
                match rng.next_u32() % 4 {
                    0 => first.wrapping_add(offset),
                    1 => first.wrapping_sub(offset + 1),
                    2 => last.wrapping_sub(offset),
                    _ => last.wrapping_add(offset + 1),
                }
            }
            75..85 => V4_FIRST | u128::from(rng.next_u32()),
            85..93 => (0x2001_0db8u128 << 96) | (random128(&mut rng) >> 32),
            _ => random128(&mut rng),
        };
        // An edge step may leave the range's family; keep the address in it.
        if (45..75).contains(&r) && (V4_FIRST..=V4_LAST).contains(&key) != v4 {
            continue;
        }
        // A key in the IPv4-mapped range is an IPv4 client, never an IPv6 one.
        out.push(addr_of(key));
    }
    out
}

// ---- The property ----

/// Every (client, domain, qtype) the snapshot answers otherwise than the engine, described.
struct Check {
    /// ((domain, qtype), description).
    mismatches: Vec<((String, u16), String)>,
    count: usize,
    /// Per domain, the distinct meanings seen: the test must exercise something.
    seen: BTreeMap<String, usize>,
    views: BTreeSet<(u32, u32)>,
    fast: usize,
    passed: usize,
    nodata: usize,
}

fn check(world: &World, clients: &[IpAddr]) -> Check {
    let tables = Tables::new(&world.snapshot);
    let mut out = Check {
        mismatches: Vec::new(),
        count: 0,
        seen: BTreeMap::new(),
        views: BTreeSet::new(),
        fast: 0,
        passed: 0,
        nodata: 0,
    };
    let domains = &world.config.gslb_domains;
    let per_query: Vec<bool> = domains
        .iter()
        .map(|d| world.snapshot.engine_domains.contains(&d.name))
        .collect();
    // Per domain and type, the distinct answers the engine gave.
    let mut seen: Vec<[HashSet<Meaning>; 2]> = vec![Default::default(); domains.len()];
    for (i, &client) in clients.iter().enumerate() {
        let view = tables.view(client);
        out.views.insert((view.view, view.rtt_view));
        let location = world.db.lookup(client);
        for (d, domain) in domains.iter().enumerate() {
            for (t, qtype) in [QTYPE_A, QTYPE_AAAA].into_iter().enumerate() {
                if per_query[d] {
                    if tables.known(&domain.name, qtype) {
                        out.mismatches.push((
                            (domain.name.clone(), qtype),
                            "a per-query domain has an entry".into(),
                        ));
                    }
                    continue;
                }
                out.count += 1;
                let stored = tables.answer(&domain.name, qtype, view);
                let got = Meaning::of_answer(stored);
                let want = world.expected(d, qtype, client, location.as_deref());
                match stored.map(|a| a.addrs.len()) {
                    Some(1..=MAX_ADDRS) => out.fast += 1,
                    _ if got == Meaning::Nodata => out.nodata += 1,
                    _ => out.passed += 1,
                }
                // (Of every 16th client: hashing answers is not free.)
                if let Ok(want) = &want
                    && i % 16 == 0
                    && !seen[d][t].contains(want)
                {
                    seen[d][t].insert(want.clone());
                }
                if want.as_ref() != Ok(&got) {
                    out.mismatches.push(((domain.name.clone(), qtype), format!(
                        "{}: client {client} (location {:?}, view {view:?}), {} type {qtype}: snapshot {got:?} \
                         (stored {stored:?}), engine {want:?}",
                        world.name,
                        location.as_deref().map(ToString::to_string),
                        domain.name,
                    )));
                }
            }
        }
    }
    for (d, [a, aaaa]) in seen.iter().enumerate() {
        if !per_query[d] {
            out.seen
                .insert(domains[d].name.clone(), a.len() + aaaa.len());
        }
    }
    out
}

impl Check {
    /// The clients met every view and every LDNS view, and each named domain (`www` for
    /// www.example.com) answered them at least this many ways (the two types counted apart).
    fn assert_met(&self, world: &World, domains: &[(&str, usize)]) {
        let views: BTreeSet<u32> = self.views.iter().map(|v| v.0).collect();
        let rtt_views: BTreeSet<u32> = self.views.iter().map(|v| v.1).filter(|&r| r != 0).collect();
        let stats = world.snapshot.stats;
        assert_eq!(
            (views.len(), rtt_views.len()),
            (stats.views, stats.rtt_views),
            "views and LDNS views met"
        );
        for &(name, least) in domains {
            let name = format!("{name}.example.com");
            let seen = self.seen[&name];
            assert!(seen >= least, "{name}: only {seen} distinct answers");
        }
    }
}

fn report(world: &World, clients: &[IpAddr], check: &Check) {
    let v4 = clients.iter().filter(|c| c.is_ipv4()).count();
    eprintln!(
        "{}: {} clients ({v4} IPv4, {} IPv6), {} answers compared: {} by the fast path, {} passed to \
         the responder (more than {MAX_ADDRS} records), {} NODATA; {} (view, LDNS view) pairs met",
        world.name,
        clients.len(),
        clients.len() - v4,
        check.count,
        check.fast,
        check.passed,
        check.nodata,
        check.views.len(),
    );
    let kinds: Vec<String> = check
        .seen
        .iter()
        .map(|(name, seen)| format!("{name} {seen}"))
        .collect();
    eprintln!(
        "{}: distinct answers per domain: {}",
        world.name,
        kinds.join(", ")
    );
    // The first mismatch of each domain and type, and how many there are.
    let mut first: BTreeMap<(String, u16), (usize, &String)> = BTreeMap::new();
    for (key, m) in &check.mismatches {
        first.entry(key.clone()).or_insert((0, m)).0 += 1;
    }
    for ((name, qtype), (n, m)) in &first {
        eprintln!("MISMATCH {name} type {qtype}: {n} clients, e.g. {m}");
    }
}

#[test]
fn the_rich_configuration_compiles_to_the_engines_answers() {
    let world = World::rich();
    let started = Instant::now();
    let clients = clients(&world, 1, CLIENTS);
    let check = check(&world, &clients);
    eprintln!("rich: checked in {:?}", started.elapsed());
    report(&world, &clients, &check);
    assert!(
        check.mismatches.is_empty(),
        "{} mismatches, the first: {:#?}",
        check.mismatches.len(),
        check.mismatches.first()
    );
    // The property must have met what it is about: clients in several views, and the domains
    // whose answer depends on the client answering several ways.
    check.assert_met(
        &world,
        &[
            ("ratio", 4),
            ("least", 4),
            ("near", 4),
            ("rtt", 4),
            ("topo", 4),
            ("spill", 4),
            ("chain", 4),
            ("rr", 4),
            ("v4only", 4),
            ("ga", 3),
            ("shared", 2),
            ("down", 2),
            ("overload", 2),
        ],
    );
    assert!(
        check.fast > check.count / 2,
        "the fast path answers most queries"
    );
    assert!(
        check.passed > 0 && check.nodata > 0,
        "some answers are passed, some are NODATA"
    );
}

#[test]
fn domains_of_one_structure_share_decisions_and_keep_their_own_answers() {
    let world = World::shared();
    let clients = clients(&world, 4, SHARED_CLIENTS);
    let check = check(&world, &clients);
    report(&world, &clients, &check);
    assert!(
        check.mismatches.is_empty(),
        "{} mismatches, the first: {:#?}",
        check.mismatches.len(),
        check.mismatches.first()
    );
    check.assert_met(
        &world,
        &[("twin-a", 4), ("twin-b", 4), ("rtt-a", 3), ("rtt-b", 3)],
    );
    // Fewer signatures than decided (domain, type) entries: some were decided once for two.
    let decided = 2 * (world.config.gslb_domains.len() - world.snapshot.engine_domains.len());
    assert!(
        world.snapshot.stats.signatures < decided,
        "{:?}",
        world.snapshot.stats
    );
}

#[test]
fn static_views_and_decided_domains_share_one_snapshot() {
    let world = World::split();
    let clients = clients(&world, 2, SPLIT_CLIENTS);
    let check = check(&world, &clients);
    report(&world, &clients, &check);
    assert!(
        check.mismatches.is_empty(),
        "{} mismatches, the first: {:#?}",
        check.mismatches.len(),
        check.mismatches.first()
    );
    check.assert_met(
        &world,
        &[
            ("www", 4),
            ("all", 3),
            ("dead", 3),
            ("near", 4),
            ("rtt", 4),
            ("topo", 4),
            ("twin-a", 4),
            ("twin-b", 4),
        ],
    );
}

#[test]
fn the_compile_is_not_trivial() {
    for world in [World::rich(), World::split()] {
        let s = &world.snapshot;
        let stats = s.stats;
        eprintln!("{}: {stats:#?}", world.name);
        let per_view = s.domains.iter().filter(|d| d.answers.len() > 1).count();
        let v6 = s
            .views
            .iter()
            .filter(|(n, _)| matches!(n, IpNet::V6(_)))
            .count();
        eprintln!(
            "{}: {} prefixes ({v6} IPv6), {} (name, type) entries, {per_view} with per-view answers, \
             engine domains {:?}",
            world.name,
            s.views.len(),
            s.domains.len(),
            s.engine_domains
        );
        assert!(stats.views >= 8, "{}: {} views", world.name, stats.views);
        assert_eq!(stats.prefixes, s.views.len());
        assert!(
            s.views.len() >= 50 && v6 >= 10 && s.views.len() - v6 >= 10,
            "{}: {} prefixes, {v6} IPv6",
            world.name,
            s.views.len()
        );
        assert!(
            per_view >= 4,
            "{}: {per_view} entries with per-view answers",
            world.name
        );
        // RTT domains answer per LDNS view too.
        let by_rtt = s
            .domains
            .iter()
            .filter(|d| d.by_rtt && !d.rtt_answers.is_empty())
            .count();
        assert!(
            stats.rtt_views >= 3 && by_rtt >= 2,
            "{}: {by_rtt} entries by RTT, {stats:?}",
            world.name
        );
        assert!(
            stats.classes >= stats.views && stats.segments >= stats.classes,
            "{stats:?}"
        );
        assert!(
            stats.entries >= s.domains.len() && stats.map_bytes > 0,
            "{stats:?}"
        );
        // A view's NODATA beside the default view's addresses is stored as an empty answer.
        let empty = s
            .domains
            .iter()
            .flat_map(|d| &d.answers)
            .filter(|(_, a)| a.addrs.is_empty())
            .count();
        eprintln!("{}: {empty} per-view NODATA answers", world.name);
    }
    let rich = World::rich();
    let mut engine: Vec<&str> = rich
        .snapshot
        .engine_domains
        .iter()
        .map(String::as_str)
        .collect();
    engine.sort_unstable();
    assert_eq!(
        engine,
        [
            "hash.example.com",
            "sticky.example.com",
            "viahash.example.com"
        ]
    );
}
