//! Turns the configuration and the state of the world (service health and load, the location
//! database, measured RTTs) into the flat tables the fast path reads: client prefixes → views,
//! (name, qtype) → domain ids, (domain, view) → answer sets. Pure data, no maps: the
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
//! inputs form one class.
//!
//! # Two dimensions
//!
//! A class has a *view* (what every domain answers there without an RTT) and, when its LDNS has
//! an RTT row, an *LDNS view* (what the domains answered by RTT answer there). Kept apart, the
//! two do not multiply: a thousand location views and a thousand RTT patterns are two thousand
//! answer vectors, not a million. The fast path looks the view's answer up, and only for a
//! domain answered by RTT (flag on the answer set) the LDNS view's.
//!
//! # Deciding once
//!
//! Domains with the same structure (method chain, tolerance, and per position the same site,
//! family, weight, location, limits and state) are decided by one [`Signature`]: the engine runs
//! once per signature and distinct input, and the outcome (positions, pick) is translated to each
//! domain's own addresses. A [`Compiler`] keeps the partition and the outcomes between
//! compilations: after a service changes state only the signatures containing it are decided
//! again, and view numbers stay put (a view only splits, never merges, until the partition is
//! rebuilt), so the fast path's trie is edited in place instead of rewritten.
//!
//! A domain whose answer depends on the single client address (source IP hash, persistence)
//! cannot be cut this way: it gets no fast-path entry and the responder asks the engine per
//! query ([`Snapshot::engine_domains`]).

pub mod partition;

use ahash::AHashMap as HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use gslb_common::{DEFAULT_VIEW, QTYPE_A, QTYPE_AAAA, ViewValue};
use ipnet::IpNet;

use self::partition::{Segments, Steps, V4_FIRST, V4_LAST, addr_of, prefixes_of};
use crate::config::{AnswerMode, Config, DownResponse, GslbDomain, Service};
use crate::location::Location;
use crate::location::db::LocationDb;
use crate::policy::{
    Client, Decision, Engine, Fallback, Method, Pick, Query, ServiceState, State, Tier,
    topology::Ldns,
};

/// One complete state of the answers: what the fast path's tables hold and what the responder
/// answers GSLB names from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub dns_port: u16,
    pub edns_udp_size: u16,
    /// `[rrl]`, for the fast path's `RRL_CONFIG` (publish writes it).
    pub rrl: crate::config::RrlSettings,
    /// Destination addresses the fast path answers for.
    pub listen: Vec<IpAddr>,
    /// Disjoint client prefixes, ascending, with their view and LDNS view; other clients get
    /// [`DEFAULT_VIEW`] and no LDNS view.
    /// Shared (`Arc`): a million prefixes are not copied per snapshot.
    pub views: Arc<ViewPrefixes>,
    /// The same as merged segments: the responder's lookups and the ECS scope.
    pub segments: Arc<Segments>,
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
    pub rtt_rows: Arc<Steps>,
    /// Client → static view number (0: the default view), for per-query decisions.
    pub static_views: Arc<Steps>,
    /// Every input of a decision but the address is the same inside one of these runs (their
    /// `views` number the classes): the ECS scope of a per-query answer is at least the run's.
    pub classes: Arc<Segments>,
    pub stats: CompileStats,
}

/// One (name, qtype) the fast path answers, with its answer for each view that has one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DomainEntry {
    /// Lower-case, without the trailing dot.
    pub name: String,
    pub qtype: u16,
    pub id: u32,
    /// The default view's answer (when it has one) and every other view's that differs.
    pub answers: Vec<(u32, Answer)>,
    /// Answered by RTT: a client with an LDNS view takes `rtt_answers`' answer for it.
    pub by_rtt: bool,
    /// By LDNS view (without [`gslb_common::RTT_VIEW_BIT`]).
    pub rtt_answers: Vec<(u32, Answer)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Answer {
    pub ttl: u32,
    pub mode: AnswerMode,
    /// All of one family, matching the entry's qtype, in rotation order (an address repeats
    /// in proportion to its weight under the ratio method). Empty: NODATA for this view, though
    /// the default view has addresses. More than [`gslb_common::MAX_ADDRS`]: the fast path
    /// leaves the query to the responder.
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
    /// Views, the default included, and LDNS views.
    pub views: usize,
    pub rtt_views: usize,
    /// Prefixes of the view trie.
    pub prefixes: usize,
    /// (domain, view) answer entries, LDNS views' included.
    pub entries: usize,
    /// Distinct decision signatures, and engine decisions taken by this compilation.
    pub signatures: usize,
    pub decisions: usize,
    /// The partition was reused from the previous compilation.
    pub incremental: bool,
    /// Domains answered by RTT were left to the responder: their LDNS views would take more
    /// than [`RTT_ENTRY_BUDGET`] entries.
    pub rtt_to_responder: bool,
    /// Kernel memory the tables take, approximately (keys, values, per-entry overhead).
    pub map_bytes: usize,
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
            .map(|s| {
                if up(&s.name) {
                    ServiceState::UP
                } else {
                    ServiceState::DOWN
                }
            })
            .collect();
        Snapshot::compile(
            config,
            &Inputs {
                services,
                ..Inputs::default()
            },
        )
    }

    /// The answers of `config` under `inputs`, from scratch. Down services are left out; a
    /// static view left without services of a family falls back to the default view; a domain
    /// with none up answers its backup addresses of that family (down_response = "backup") or
    /// nothing (NODATA).
    pub fn compile(config: &Config, inputs: &Inputs<'_>) -> Snapshot {
        Compiler::default().compile(config, inputs)
    }
}

/// Compiles snapshots, keeping between compilations what stays valid (see the module docs).
pub struct Compiler {
    cache: Option<Cache>,
    rtt_budget: usize,
}

impl Default for Compiler {
    fn default() -> Self {
        Compiler {
            cache: None,
            rtt_budget: RTT_ENTRY_BUDGET,
        }
    }
}

/// What a compilation leaves for the next one, valid while the configuration, the location
/// database and the RTT rows stay the same.
struct Cache {
    config: Config,
    locations: usize,
    rtt: Arc<Vec<LdnsRtt>>,
    /// Domains answered by RTT were left to the responder (over the budget).
    rtt_to_responder: bool,
    engine: Option<Arc<Engine>>,
    partition: Partition,
    signatures: Interner<Signature>,
    outcomes: Interner<Outcome>,
    /// (signature, projected class key) → outcome, for LDNS views.
    decided: HashMap<(u32, ClassKey), u32>,
    /// Signature → outcome by place (or by family, for signatures that do not read the
    /// place; `u32::MAX`: not decided yet), for views: dense, as every class reads it.
    dense: HashMap<u32, Vec<u32>>,
    /// Each class's view and LDNS view in the last snapshot.
    class_views: Vec<(u32, u32)>,
    /// Round-robin answers (0: none), interned so that their numbers stay put between
    /// compilations.
    static_answers: Interner<Option<Answer>>,
    /// Per entry: what its answers were made from (its value in each view and LDNS view) and
    /// the entry made; reused while the values stay, so a health change rebuilds only the
    /// entries it touched.
    entry_memo: Vec<Option<(Vec<u32>, Option<DomainEntry>)>>,
    /// The last snapshot's merged segments and trie prefixes: the same while `class_views` is.
    merged: Option<(Arc<Segments>, Arc<ViewPrefixes>)>,
    next_view: u32,
    next_rtt_view: u32,
}

/// The client address space cut into segments, and their classes.
struct Partition {
    /// Segment starts, ascending; the first is 0.
    points: Vec<u128>,
    seg_class: Vec<u32>,
    /// Each class's key and one address in it.
    classes: Vec<(ClassKey, IpAddr)>,
    /// Segments per class.
    class_segments: Vec<u32>,
    /// Each class's place: a dense number for its (family, subnets, location), which is all a
    /// decision without an RTT row reads of the client.
    place_ids: Vec<u32>,
    places: usize,
    rtt_rows: Arc<Steps>,
    /// Client → static view number (0: none).
    static_views: Arc<Steps>,
    /// Neighbouring segments of one class merged (their `views` are class numbers), for the
    /// ECS scope of per-query answers; empty when no domain is decided per query.
    class_runs: Arc<Segments>,
}

/// Values numbered in order of first appearance: equal values get one number, which stays put
/// while the interner lives (outcomes, signatures and answers keep theirs between compilations).
#[derive(Debug)]
struct Interner<T> {
    values: Vec<T>,
    ids: HashMap<T, u32>,
}

impl<T: Clone + Eq + std::hash::Hash> Interner<T> {
    fn new() -> Self {
        Interner {
            values: Vec::new(),
            ids: HashMap::new(),
        }
    }

    /// An interner whose number 0 is `first`.
    fn with(first: T) -> Self {
        let mut interner = Interner::new();
        interner.id(first);
        interner
    }

    fn id(&mut self, value: T) -> u32 {
        if let Some(&id) = self.ids.get(&value) {
            return id;
        }
        let id = self.values.len() as u32;
        self.values.push(value.clone());
        self.ids.insert(value, id);
        id
    }

    fn len(&self) -> usize {
        self.values.len()
    }
}

impl<T> std::ops::Index<u32> for Interner<T> {
    type Output = T;
    fn index(&self, id: u32) -> &T {
        &self.values[id as usize]
    }
}

/// How a domain is decided, and from what. Besides the client's static view, a decision
/// reads `place` (location and subnets) and `rtt` (the RTT row).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Round robin over the services of the client's static view.
    Static,
    /// By the engine, per segment class.
    Decided { place: bool, rtt: bool },
    /// By the engine, per query (it also reads the client's address).
    PerQuery { place: bool, rtt: bool },
}

impl Kind {
    fn per_query(self) -> bool {
        matches!(self, Kind::PerQuery { .. })
    }

    /// What the decisions read of a client's class.
    fn reads(self) -> (bool, bool) {
        match self {
            Kind::Static => (false, false),
            Kind::Decided { place, rtt } | Kind::PerQuery { place, rtt } => (place, rtt),
        }
    }
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

impl ClassKey {
    fn family(v4: bool) -> ClassKey {
        ClassKey {
            v4,
            view: 0,
            subnet: 0,
            rtt: 0,
            location: 0,
        }
    }
}

/// Marks a projected key whose outcome holds for every place (the RTT method decided first,
/// and no policy narrowed the pool).
const ANY_PLACE: u64 = u64::MAX;

/// Everything one decision of a domain depends on besides the client, so that domains with
/// equal signatures get equal outcomes (in positions of their own service lists).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Signature {
    /// The domain itself when its decisions cannot be shared (a backup domain, or policies
    /// that read the question name).
    domain: Option<usize>,
    qtype: u16,
    chain: Vec<Method>,
    tolerance_us: u32,
    answer: AnswerMode,
    down: Fallback,
    place: bool,
    rtt: bool,
    /// Per position of the domain's members (its services, then each view's: see
    /// [`Engine::members`]): site, IPv6, weight, location, limits, state.
    services: Vec<SlotSignature>,
    /// Per static view with its own list: the view's number and its positions among the
    /// members.
    views: Vec<(u32, usize, usize)>,
    /// The outcome depends on the client's static view: this domain or a backup domain has
    /// views of its own.
    by_view: bool,
    /// The states of the backup domains' services, in chain order: a backup domain answers
    /// when this one cannot, so its services' states decide too.
    backups: Vec<ServiceState>,
}

/// What a decision reads of one service: site, IPv6, weight, location, connection and
/// bandwidth limits, state.
type SlotSignature = (
    usize,
    bool,
    u32,
    Option<Location>,
    Option<u64>,
    Option<u64>,
    ServiceState,
);

/// Disjoint client prefixes in address order, with their view and LDNS view.
pub type ViewPrefixes = Vec<(IpNet, ViewValue)>;

/// One decision in positions of the deciding domain's service list.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Outcome {
    /// The domain that answered (the asked one or a backup); only read for signatures of one
    /// domain, whose outcomes are never translated.
    domain: usize,
    positions: Vec<u32>,
    pick: OutcomePick,
    fallback: Option<Fallback>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum OutcomePick {
    /// One address per answer, rotating; weights repeat an address (ratio).
    Rotate(Vec<u32>),
    All,
}

/// What fills one column of an answer vector.
#[derive(Clone, Copy, Debug)]
enum Column {
    /// A round-robin entry (index into the entries), by static view.
    Static(usize),
    /// A signature.
    Decided(u32),
}

impl Compiler {
    /// A compiler that gives LDNS views at most `entries` answer entries.
    pub fn with_rtt_budget(entries: usize) -> Compiler {
        Compiler {
            cache: None,
            rtt_budget: entries,
        }
    }

    /// The answers of `config` under `inputs`, reusing what the previous compilation left when
    /// only service states changed.
    pub fn compile(&mut self, config: &Config, inputs: &Inputs<'_>) -> Snapshot {
        let locations = inputs
            .locations
            .map_or(0, |db| db as *const LocationDb as usize);
        let reusable = self.cache.as_ref().is_some_and(|c| {
            c.locations == locations
                && (Arc::ptr_eq(&c.rtt, &inputs.rtt) || c.rtt == inputs.rtt)
                && c.config == *config
        });
        let mut rtt_to_responder =
            reusable && self.cache.as_ref().is_some_and(|c| c.rtt_to_responder);
        let mut cache = self.cache.take().filter(|_| reusable);
        loop {
            // The engine depends on the configuration only: kept with the cache.
            let engine = cache.as_ref().map(|c| c.engine.clone());
            let mut job = Job::new(config, inputs, rtt_to_responder, engine);
            job.rtt_budget = self.rtt_budget;
            let mut fresh = cache.take().unwrap_or_else(|| Cache {
                config: config.clone(),
                locations,
                rtt: inputs.rtt.clone(),
                rtt_to_responder,
                engine: job.engine.clone(),
                partition: job.partition(),
                signatures: Interner::new(),
                outcomes: Interner::new(),
                decided: HashMap::new(),
                dense: HashMap::new(),
                static_answers: Interner::with(None),
                entry_memo: Vec::new(),
                class_views: Vec::new(),
                merged: None,
                next_view: 0,
                next_rtt_view: 1,
            });
            let incremental = reusable && !fresh.class_views.is_empty();
            match job.run(&mut fresh, incremental) {
                Ok(snapshot) => {
                    self.cache = Some(fresh);
                    return snapshot;
                }
                Err(OverBudget {
                    ldns_views,
                    entries,
                }) => {
                    tracing::warn!(
                        ldns_views,
                        entries,
                        budget = self.rtt_budget,
                        "answers by RTT would not fit the fast path's maps: the responder decides domains answered by RTT per query"
                    );
                    rtt_to_responder = true;
                }
            }
        }
    }
}

/// The most (domain, LDNS view) answer entries the maps are given: a quarter of `ANSWERS`.
/// Beyond it, domains answered by RTT are left to the responder.
pub const RTT_ENTRY_BUDGET: usize = gslb_common::ANSWERS_MAX as usize / 4;

/// The LDNS views would take more entries than [`RTT_ENTRY_BUDGET`].
#[derive(Debug)]
struct OverBudget {
    ldns_views: usize,
    entries: usize,
}

/// One compilation.
struct Job<'a> {
    config: &'a Config,
    inputs: &'a Inputs<'a>,
    engine: Option<Arc<Engine>>,
    services: HashMap<&'a str, (usize, &'a Service)>,
    kinds: Vec<Kind>,
    /// (domain index, qtype), every domain but the per-query ones.
    entries: Vec<(usize, u16)>,
    decisions: usize,
    rtt_to_responder: bool,
    rtt_budget: usize,
}

impl<'a> Job<'a> {
    /// `rtt_to_responder`: domains answered by RTT are left to the responder (their LDNS
    /// views would not fit the maps).
    /// `engine`: the engine of `config` when already built (`None`: build it if needed).
    fn new(
        config: &'a Config,
        inputs: &'a Inputs<'a>,
        rtt_to_responder: bool,
        engine: Option<Option<Arc<Engine>>>,
    ) -> Self {
        let services = config
            .services
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.as_str(), (i, s)))
            .collect();
        let engine = match engine {
            Some(engine) => engine,
            None => config
                .gslb_domains
                .iter()
                .any(|d| needs_engine(config, d, &services))
                .then(|| match config.engine() {
                    Ok(engine) => Some(Arc::new(engine)),
                    Err(error) => {
                        // Validation makes this unreachable; no answers for those names is the safe
                        // side if it ever is not.
                        tracing::error!(%error, "decision engine rejected the configuration");
                        None
                    }
                })
                .flatten(),
        };
        let kinds: Vec<Kind> = config
            .gslb_domains
            .iter()
            .map(|d| match kind(config, d, &services, engine.as_deref()) {
                Kind::Decided { place, rtt: true } if rtt_to_responder => {
                    Kind::PerQuery { place, rtt: true }
                }
                k => k,
            })
            .collect();
        let entries = kinds
            .iter()
            .enumerate()
            .filter(|(_, k)| !k.per_query())
            .flat_map(|(d, _)| [(d, QTYPE_A), (d, QTYPE_AAAA)])
            .collect();
        Job {
            config,
            inputs,
            engine,
            services,
            kinds,
            entries,
            decisions: 0,
            rtt_to_responder,
            rtt_budget: RTT_ENTRY_BUDGET,
        }
    }

    fn up(&self, service: usize) -> bool {
        !self.inputs.services.get(service).is_some_and(|s| s.down)
    }

    fn state(&self, service: usize) -> ServiceState {
        self.inputs
            .services
            .get(service)
            .copied()
            .unwrap_or_default()
    }

    /// Cuts the address space at every boundary and finds each segment's class.
    fn partition(&self) -> Partition {
        let config = self.config;
        // Per-query domains' inputs cut the space too, though no view differs by them: the ECS
        // scope of their answers is the class's (`Snapshot::classes`).
        let place = self.kinds.iter().any(|k| k.reads().0);
        let rtt = self.kinds.iter().any(|k| k.reads().1);
        let views = Arc::new(Steps::longest_match(
            config
                .views
                .iter()
                .enumerate()
                .flat_map(|(i, v)| v.prefixes.iter().map(move |p| (*p, i as u32 + 1))),
            0,
        ));
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
        let subnets = Steps::longest_match(
            subnets.iter().enumerate().map(|(i, n)| (*n, i as u32 + 1)),
            0,
        );
        // Kept even when no compiled domain reads them: the responder's per-query decisions do.
        let rtt_rows = Arc::new(Steps::longest_match(
            self.inputs
                .rtt
                .iter()
                .enumerate()
                .map(|(i, r)| (r.ldns, i as u32 + 1)),
            0,
        ));
        let locations = self.inputs.locations.filter(|_| place);
        // Decisions read a client's location only through patterns (service locations, policy
        // and action locations, topology records) and stop at the first wildcard of a
        // pattern: qualifiers deeper than every pattern's last value never matter. Clients
        // whose locations agree down to that depth share a class.
        let depth = location_depth(config);
        let mut truncated: HashMap<Location, u64> = HashMap::new();
        let mut by_class: HashMap<u64, u64> = HashMap::new();
        let mut location_key = |db: &LocationDb, addr: IpAddr| {
            *by_class
                .entry(db.class(addr))
                .or_insert_with(|| match db.lookup(addr) {
                    None => 0,
                    Some(l) => {
                        let mut l = l.into_owned();
                        for q in &mut l.0[depth..] {
                            *q = crate::location::Qualifier::Any;
                        }
                        let next = truncated.len() as u64 + 1;
                        *truncated.entry(l).or_insert(next)
                    }
                })
        };
        let mut points: Vec<u128> = vec![0, V4_FIRST, V4_LAST + 1];
        for steps in [&*views, &subnets] {
            points.extend_from_slice(&steps.starts);
        }
        if rtt {
            points.extend_from_slice(&rtt_rows.starts);
        }
        if let Some(db) = locations {
            points.extend(db.boundaries());
        }
        points.sort_unstable();
        points.dedup();

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
                rtt: if rtt { at(&rtt_rows, &mut ir, p) } else { 0 },
                location: locations.map_or(0, |db| location_key(db, addr)),
            };
            let id = *class_ids.entry(key).or_insert_with(|| {
                classes.push((key, addr));
                classes.len() as u32 - 1
            });
            seg_class.push(id);
        }
        let mut class_segments = vec![0u32; classes.len()];
        for &c in &seg_class {
            class_segments[c as usize] += 1;
        }
        let mut place_numbers: HashMap<(bool, u32, u64), u32> = HashMap::new();
        let place_ids = classes
            .iter()
            .map(|(k, _)| {
                let next = place_numbers.len() as u32;
                *place_numbers
                    .entry((k.v4, k.subnet, k.location))
                    .or_insert(next)
            })
            .collect();
        let class_runs = if self.kinds.iter().any(|k| k.per_query()) {
            let by_class: Vec<(u32, u32)> = (0..classes.len() as u32).map(|c| (c, 0)).collect();
            Arc::new(merge(&points, &seg_class, &by_class).0)
        } else {
            Arc::default()
        };
        Partition {
            points,
            seg_class,
            classes,
            class_segments,
            place_ids,
            places: place_numbers.len(),
            rtt_rows,
            static_views: views,
            class_runs,
        }
    }

    /// The signature of a decided entry.
    fn signature(&self, d: usize, qtype: u16) -> Signature {
        let engine = self
            .engine
            .as_ref()
            .expect("decided domains have an engine");
        let spec = engine.domain(d);
        let Kind::Decided { place, rtt } = self.kinds[d] else {
            unreachable!("decided entries only")
        };
        let members = engine.members(d);
        let own = spec.backup_domain.is_some()
            || self
                .config
                .policies
                .iter()
                .any(|p| p.expression.reads_name());
        Signature {
            domain: own.then_some(d),
            qtype,
            chain: spec.chain.clone(),
            tolerance_us: spec.tolerance_us,
            answer: spec.answer,
            down: spec.down,
            place,
            rtt,
            services: members
                .iter()
                .map(|&i| {
                    let s = engine.service(i);
                    (
                        s.site,
                        s.ip.is_ipv6(),
                        s.weight,
                        s.location.clone(),
                        s.max_connections,
                        s.max_bandwidth_kbps,
                        self.state(i),
                    )
                })
                .collect(),
            views: {
                let mut at = spec.services.len();
                spec.views
                    .iter()
                    .map(|(view, list)| {
                        at += list.len();
                        (*view, at - list.len(), at)
                    })
                    .collect()
            },
            by_view: engine.chain(d).any(|b| !engine.domain(b).views.is_empty()),
            backups: self.backup_states(d),
        }
    }

    /// The states of the services of `d`'s backup domains, in chain order.
    fn backup_states(&self, d: usize) -> Vec<ServiceState> {
        let Some(engine) = self.engine.as_ref() else {
            return Vec::new();
        };
        engine
            .chain(d)
            .skip(1)
            .flat_map(|b| engine.members(b).iter().map(|&i| self.state(i)))
            .collect()
    }

    fn run(&mut self, cache: &mut Cache, incremental: bool) -> Result<Snapshot, OverBudget> {
        let config = self.config;
        let Cache {
            partition,
            signatures,
            outcomes,
            decided,
            dense,
            static_answers,
            entry_memo,
            class_views: cached_views,
            merged,
            next_view,
            next_rtt_view,
            ..
        } = cache;
        let mut parts = CacheParts {
            outcomes,
            decided,
            dense,
            places: partition.places,
        };
        let partition = &*partition;
        let classes = &partition.classes;

        // Columns: round-robin entries, then signatures.
        let mut columns: Vec<Column> = Vec::new();
        let mut rtt_columns: Vec<usize> = Vec::new();
        let mut entry_column = Vec::with_capacity(self.entries.len());
        let mut sig_column: HashMap<u32, usize> = HashMap::new();
        for (e, &(d, qtype)) in self.entries.iter().enumerate() {
            let column = match self.kinds[d] {
                Kind::Static => {
                    columns.push(Column::Static(e));
                    columns.len() - 1
                }
                _ => {
                    let id = signatures.id(self.signature(d, qtype));
                    *sig_column.entry(id).or_insert_with(|| {
                        if signatures[id].rtt {
                            rtt_columns.push(columns.len());
                        }
                        columns.push(Column::Decided(id));
                        columns.len() - 1
                    })
                }
            };
            entry_column.push(column);
        }
        let signatures = &*signatures;
        // A representative entry per signature: the engine decides for it.
        let mut representative: HashMap<u32, (usize, u16)> = HashMap::new();
        for (e, &(d, qtype)) in self.entries.iter().enumerate() {
            if let Column::Decided(id) = columns[entry_column[e]] {
                representative.entry(id).or_insert((d, qtype));
            }
        }

        let rtt_entries = entry_column
            .iter()
            .filter(|&&c| rtt_columns.contains(&c))
            .count();
        // Each class's vectors: the view's (every column, no RTT) and the LDNS view's (the RTT
        // columns, with the class's RTT row).
        let mut static_memo: HashMap<(usize, u32), u32> = HashMap::new();
        let mut view_vectors: Interner<Vec<u32>> = Interner::new();
        // LDNS view vector 0: no RTT row.
        let mut rtt_vectors: Interner<Vec<u32>> = Interner::with(Vec::new());
        let mut by_view_key: HashMap<ClassKey, u32> = HashMap::new();
        let mut class_vectors: Vec<(u32, u32)> = Vec::with_capacity(classes.len());
        for (class, &(key, addr)) in classes.iter().enumerate() {
            let place = partition.place_ids[class];
            let view_key = ClassKey { rtt: 0, ..key };
            let view_vector = match by_view_key.get(&view_key) {
                Some(&v) => v,
                None => {
                    let mut vector = Vec::with_capacity(columns.len());
                    for &column in &columns {
                        vector.push(match column {
                            Column::Static(e) => {
                                let (d, qtype) = self.entries[e];
                                *static_memo.entry((e, key.view)).or_insert_with(|| {
                                    static_answers.id(self.static_answer(d, qtype, key.view))
                                })
                            }
                            Column::Decided(sig) => self.outcome(
                                &mut parts,
                                sig,
                                &signatures[sig],
                                representative[&sig],
                                key,
                                place,
                                addr,
                                false,
                            ),
                        });
                    }
                    let id = view_vectors.id(vector);
                    by_view_key.insert(view_key, id);
                    id
                }
            };
            let rtt_vector = if key.rtt != 0 && !rtt_columns.is_empty() {
                let mut vector = Vec::with_capacity(rtt_columns.len());
                for &c in &rtt_columns {
                    let Column::Decided(sig) = columns[c] else {
                        unreachable!("RTT columns are signatures")
                    };
                    vector.push(self.outcome(
                        &mut parts,
                        sig,
                        &signatures[sig],
                        representative[&sig],
                        key,
                        place,
                        addr,
                        true,
                    ));
                }
                let id = rtt_vectors.id(vector);
                let entries = (rtt_vectors.len() - 1) * rtt_entries;
                if entries > self.rtt_budget {
                    return Err(OverBudget {
                        ldns_views: rtt_vectors.len() - 1,
                        entries,
                    });
                }
                id
            } else {
                0
            };
            class_vectors.push((view_vector, rtt_vector));
        }

        // View numbers: a class keeps its view while its vectors stay those of the other
        // classes of that view; a view whose classes now differ splits, the part with the most
        // segments keeping the number.
        let seg_class = &partition.seg_class;
        let class_segments = &partition.class_segments;
        let previous: Vec<(u32, u32)> = if incremental && cached_views.len() == classes.len() {
            std::mem::take(cached_views)
        } else {
            Vec::new()
        };
        let (class_views, views, rtt_views) = if previous.is_empty() {
            let (views, rtt_views, class_views) =
                number_fresh(seg_class, class_segments, &class_vectors);
            *next_view = views as u32;
            *next_rtt_view = rtt_views as u32 + 1;
            (class_views, views, rtt_views)
        } else {
            number_stable(
                class_segments,
                &class_vectors,
                &previous,
                next_view,
                next_rtt_view,
            )
        };
        // `cached_views` was taken into `previous` above.
        let unchanged = !previous.is_empty() && previous == class_views;
        *cached_views = class_views.clone();

        // Merged segments, and their prefixes.
        let points = &partition.points;
        let (segments, views_out) = match merged.take().filter(|_| unchanged) {
            Some(m) => m,
            None => {
                let (segments, views) = merge(points, seg_class, &class_views);
                (Arc::new(segments), Arc::new(views))
            }
        };
        *merged = Some((segments.clone(), views_out.clone()));

        // Each view's vector, and each LDNS view's.
        // Each view's vector, and each LDNS view's.
        let mut view_vector = vec![u32::MAX; views];
        let mut rtt_view_vector = vec![0u32; rtt_views + 1];
        for (c, &(v, r)) in class_views.iter().enumerate() {
            view_vector[v as usize] = class_vectors[c].0;
            rtt_view_vector[r as usize] = class_vectors[c].1;
        }

        // Entries: the default view's answer and every other view's that differs; for domains
        // answered by RTT, every LDNS view's.
        let mut answer_memo: HashMap<(usize, u32), Option<Answer>> = HashMap::new();
        let mut answer = |job: &Self, e: usize, value: u32| -> Option<Answer> {
            answer_memo
                .entry((e, value))
                .or_insert_with(|| match columns[entry_column[e]] {
                    Column::Static(_) => static_answers[value].clone(),
                    Column::Decided(_) => job.translate(&parts.outcomes[value], job.entries[e]),
                })
                .clone()
        };
        let rtt_position: HashMap<usize, usize> = rtt_columns
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, i))
            .collect();
        let mut domains = Vec::new();
        entry_memo.resize(self.entries.len(), None);
        for e in 0..self.entries.len() {
            let (d, qtype) = self.entries[e];
            let column = entry_column[e];
            let value = |v: usize| view_vectors[view_vector[v]][column];
            let live = |v: usize| view_vector[v] != u32::MAX;
            let by_rtt = rtt_position.get(&column);
            // What this entry is made from; unchanged since the last compilation, the entry is.
            let mut key = Vec::with_capacity(views + 1 + by_rtt.map_or(0, |_| rtt_views));
            key.push(u32::from(matches!(columns[column], Column::Decided(_))));
            key.extend((0..views).map(|v| if live(v) { value(v) } else { u32::MAX }));
            if let Some(&pos) = by_rtt {
                key.extend((1..=rtt_views).map(|r| {
                    rtt_vectors[rtt_view_vector[r]]
                        .get(pos)
                        .copied()
                        .unwrap_or(u32::MAX)
                }));
            }
            if let Some((known, entry)) = &entry_memo[e]
                && *known == key
            {
                if let Some(entry) = entry {
                    let id = domains.len() as u32;
                    domains.push(DomainEntry {
                        id,
                        ..entry.clone()
                    });
                }
                continue;
            }
            let base = if live(0) {
                answer(self, e, value(0))
            } else {
                None
            };
            let mut answers = Vec::new();
            if let Some(a) = &base {
                answers.push((DEFAULT_VIEW, a.clone()));
            }
            for v in 1..views {
                if !live(v) || (live(0) && value(v) == value(0)) {
                    continue;
                }
                let a = answer(self, e, value(v));
                if a == base {
                    continue;
                }
                answers.push((
                    v as u32,
                    a.unwrap_or_else(|| empty(base.as_ref(), config, d)),
                ));
            }
            let mut rtt_answers = Vec::new();
            if let Some(&pos) = by_rtt {
                for r in 1..=rtt_views {
                    let vector = &rtt_vectors[rtt_view_vector[r]];
                    if let Some(&outcome) = vector.get(pos) {
                        let a = answer(self, e, outcome);
                        rtt_answers.push((
                            r as u32,
                            a.unwrap_or_else(|| empty(base.as_ref(), config, d)),
                        ));
                    }
                }
            }
            let any = |list: &[(u32, Answer)]| list.iter().any(|(_, a)| !a.addrs.is_empty());
            let entry = (any(&answers) || any(&rtt_answers)).then(|| DomainEntry {
                name: config.gslb_domains[d].name.clone(),
                qtype,
                id: domains.len() as u32,
                answers,
                by_rtt: by_rtt.is_some(),
                rtt_answers,
            });
            if let Some(entry) = &entry {
                domains.push(entry.clone());
            }
            entry_memo[e] = Some((key, entry));
        }

        let entries: usize = domains
            .iter()
            .map(|d| d.answers.len() + d.rtt_answers.len())
            .sum();
        let stats = CompileStats {
            rtt_to_responder: self.rtt_to_responder,
            segments: points.len(),
            classes: classes.len(),
            views,
            rtt_views,
            prefixes: views_out.len(),
            entries,
            signatures: sig_column.len(),
            decisions: self.decisions,
            incremental,
            map_bytes: views_out.len()
                * (size_of::<gslb_common::ViewKey>() + size_of::<ViewValue>() + MAP_OVERHEAD)
                + domains.len() * (size_of::<gslb_common::DomainKey>() + 8 + MAP_OVERHEAD)
                + entries
                    * (size_of::<gslb_common::AnswerKey>()
                        + size_of::<gslb_common::AnswerSet>()
                        + MAP_OVERHEAD),
        };
        Ok(Snapshot {
            dns_port: config.server.dns_port,
            edns_udp_size: config.server.edns_udp_size,
            rrl: config.rrl,
            listen: config.server.listen.clone(),
            views: views_out,
            segments,
            domains,
            engine_domains: config
                .gslb_domains
                .iter()
                .zip(&self.kinds)
                .filter(|(_, k)| k.per_query())
                .map(|(d, _)| d.name.clone())
                .collect(),
            down_services: config
                .services
                .iter()
                .enumerate()
                .filter(|(i, _)| !self.up(*i))
                .map(|(_, s)| s.name.clone())
                .collect(),
            services: (0..config.services.len()).map(|i| self.state(i)).collect(),
            rtt: self.inputs.rtt.clone(),
            rtt_rows: partition.rtt_rows.clone(),
            static_views: partition.static_views.clone(),
            classes: partition.class_runs.clone(),
            stats,
        })
    }

    /// The outcome of signature `sig` for a class, decided for `representative` unless known.
    /// `with_rtt`: with the class's RTT row (the LDNS view), else without one (the view).
    #[allow(clippy::too_many_arguments)]
    fn outcome(
        &mut self,
        cache: &mut CacheParts<'_>,
        sig: u32,
        signature: &Signature,
        representative: (usize, u16),
        key: ClassKey,
        place: u32,
        addr: IpAddr,
        with_rtt: bool,
    ) -> u32 {
        let CacheParts {
            outcomes,
            decided,
            dense,
            places,
        } = cache;
        let decided = &mut **decided;
        let row = if with_rtt { key.rtt } else { 0 };
        let slot = if signature.place {
            place as usize
        } else {
            usize::from(key.v4)
        };
        // The dense table is by place only; outcomes that depend on the static view too are
        // kept by their whole projected key.
        let by_place = row == 0 && !signature.by_view;
        if by_place {
            let known = dense.get(&sig).map_or(u32::MAX, |t| t[slot]);
            if known != u32::MAX {
                return known;
            }
        }
        let mut remember = |decided: &mut HashMap<(u32, ClassKey), u32>, key: ClassKey, id: u32| {
            if by_place {
                let size = if signature.place { *places } else { 2 };
                dense.entry(sig).or_insert_with(|| vec![u32::MAX; size])[slot] = id;
            } else {
                decided.insert((sig, key), id);
            }
        };
        let projected = ClassKey {
            subnet: if signature.place { key.subnet } else { 0 },
            location: if signature.place { key.location } else { 0 },
            rtt: row,
            view: if signature.by_view { key.view } else { 0 },
            ..ClassKey::family(key.v4)
        };
        if !by_place && let Some(&o) = decided.get(&(sig, projected)) {
            return o;
        }
        let any_place = ClassKey {
            subnet: 0,
            location: ANY_PLACE,
            ..projected
        };
        if row != 0
            && signature.place
            && let Some(&o) = decided.get(&(sig, any_place))
        {
            return o;
        }
        let (d, qtype) = representative;
        // No service of the family: nothing to decide, NODATA (backup addresses stand in for
        // services that are down, not for a family the domain does not serve).
        let v6 = qtype == QTYPE_AAAA;
        if signature.domain.is_none() && !signature.services.iter().any(|s| s.1 == v6) {
            let outcome = Outcome {
                domain: d,
                positions: Vec::new(),
                pick: OutcomePick::All,
                fallback: Some(Fallback::Empty),
            };
            let id = outcomes.id(outcome);
            remember(decided, projected, id);
            return id;
        }
        let decision = self.decide(d, qtype, addr, key.view, row);
        // The RTT method decided first and no policy narrowed the pool: the place did not
        // matter, and the outcome holds for every class with this row.
        let placeless = row != 0
            && signature.place
            && self.config.policies.is_empty()
            && decision.tier
                == (Tier::Method {
                    step: 0,
                    method: Method::Rtt,
                });
        let id = outcomes.id(Outcome::of(&decision));
        remember(decided, if placeless { any_place } else { projected }, id);
        id
    }

    fn decide(&mut self, d: usize, qtype: u16, addr: IpAddr, view: u32, rtt_row: u32) -> Decision {
        let engine = self
            .engine
            .as_ref()
            .expect("decided domains have an engine");
        self.decisions += 1;
        let location = self.inputs.locations.and_then(|db| db.lookup(addr));
        let rtt = match rtt_row {
            0 => &[][..],
            row => &self.inputs.rtt[row as usize - 1].rtt_us[..],
        };
        let domain = &self.config.gslb_domains[d];
        engine.decide(
            d,
            &Query {
                name: &domain.name,
                qtype,
            },
            &Client {
                addr,
                location: location.as_deref(),
                view,
                sticky: None,
            },
            &State {
                services: &self.inputs.services,
                rtt,
            },
        )
    }

    /// `outcome` (decided for a domain of the same signature) as entry (`d`, `qtype`)'s answer.
    fn translate(&self, outcome: &Outcome, (d, qtype): (usize, u16)) -> Option<Answer> {
        let engine = self.engine.as_ref()?;
        let family = |ip: &IpAddr| ip.is_ipv6() == (qtype == QTYPE_AAAA);
        // A signature shared by several domains has no backup domain: the asked domain
        // answered. Otherwise the outcome is the domain's own.
        let answering = if outcome.domain == d || engine.domain(d).backup_domain.is_none() {
            d
        } else {
            outcome.domain
        };
        let asked = &self.config.gslb_domains[answering];
        let services = engine.members(answering);
        let ip = |pos: u32| engine.service(services[pos as usize]).ip;
        let (mode, addrs): (AnswerMode, Vec<IpAddr>) = match outcome.fallback {
            Some(Fallback::Empty) => return None,
            Some(Fallback::BackupIp) => {
                let asked = &self.config.gslb_domains[d];
                (
                    asked.answer,
                    asked.backup_ip.iter().copied().filter(family).collect(),
                )
            }
            None => match &outcome.pick {
                OutcomePick::All => (
                    AnswerMode::All,
                    distinct(outcome.positions.iter().map(|&p| ip(p)).filter(family)),
                ),
                OutcomePick::Rotate(weights) if weights.is_empty() => (
                    AnswerMode::Rotate,
                    distinct(outcome.positions.iter().map(|&p| ip(p)).filter(family)),
                ),
                OutcomePick::Rotate(weights) => (
                    AnswerMode::Rotate,
                    outcome
                        .positions
                        .iter()
                        .zip(weights)
                        .flat_map(|(&p, &w)| std::iter::repeat_n(ip(p), w as usize))
                        .filter(family)
                        .collect(),
                ),
            },
        };
        (!addrs.is_empty()).then_some(Answer {
            ttl: asked.ttl,
            mode,
            addrs,
        })
    }

    /// A round-robin domain's answer for a static view (0: the default view): the view's up
    /// services of the family, else the domain's, else its backup addresses.
    fn static_answer(&self, d: usize, qtype: u16, view: u32) -> Option<Answer> {
        let domain = &self.config.gslb_domains[d];
        let family = |ip: &IpAddr| ip.is_ipv6() == (qtype == QTYPE_AAAA);
        // The answer addresses of `names` of this family, in order, each once (two services
        // may share an address on different ports).
        let answer = |names: &[String]| {
            let addrs = distinct(
                names
                    .iter()
                    .filter_map(|n| self.services.get(n.as_str()))
                    .filter(|(i, _)| self.up(*i))
                    .map(|(_, s)| s.answer_ip())
                    .filter(family),
            );
            (!addrs.is_empty()).then_some(Answer {
                ttl: domain.ttl,
                mode: domain.answer,
                addrs,
            })
        };
        if view != 0 {
            let name = &self.config.views[view as usize - 1].name;
            if let Some(a) = domain
                .views
                .iter()
                .find(|(v, _)| v == name)
                .and_then(|(_, n)| answer(n))
            {
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
            .chain(domain.views.iter().flat_map(|(_, names)| names))
            .filter_map(|n| self.services.get(n.as_str()))
            .any(|(_, s)| family(&s.answer_ip()));
        let backup: Vec<IpAddr> = domain.backup_ip.iter().copied().filter(family).collect();
        (configured && domain.down_response == DownResponse::Backup && !backup.is_empty())
            .then_some(Answer {
                ttl: domain.ttl,
                mode: domain.answer,
                addrs: backup,
            })
    }
}

/// The parts of the cache [`Job::outcome`] writes, borrowed apart from the partition it reads.
struct CacheParts<'c> {
    outcomes: &'c mut Interner<Outcome>,
    decided: &'c mut HashMap<(u32, ClassKey), u32>,
    dense: &'c mut HashMap<u32, Vec<u32>>,
    places: usize,
}

impl Outcome {
    fn of(decision: &Decision) -> Outcome {
        let positions = decision.positions.iter().map(|&p| p as u32);
        let pick = match &decision.pick {
            Pick::All => OutcomePick::All,
            Pick::First => OutcomePick::Rotate(Vec::new()),
            Pick::Rotate => OutcomePick::Rotate(Vec::new()),
            // Weighted round robin as a rotation: each address as often as its weight over
            // the weights' common divisor.
            Pick::Weighted(w) => {
                let g = w.iter().copied().fold(0, gcd).max(1);
                OutcomePick::Rotate(w.iter().map(|x| x / g).collect())
            }
            Pick::Hash { .. } => {
                debug_assert!(false, "hashed picks are decided per query");
                OutcomePick::Rotate(Vec::new())
            }
        };
        let positions = match decision.pick {
            Pick::First => positions.take(1).collect(),
            _ => positions.collect(),
        };
        Outcome {
            domain: decision.domain,
            positions,
            pick,
            fallback: decision.fallback,
        }
    }
}

/// Neighbouring segments of one (view, LDNS view) merged, and the trie's prefixes for them.
fn merge(
    points: &[u128],
    seg_class: &[u32],
    class_views: &[(u32, u32)],
) -> (Segments, Vec<(IpNet, ViewValue)>) {
    let mut segments = Segments::default();
    for (i, &p) in points.iter().enumerate() {
        let (view, rtt_view) = class_views[seg_class[i] as usize];
        let edge = p == V4_FIRST || p == V4_LAST + 1;
        if edge
            || segments.views.last() != Some(&view)
            || segments.rtt_views.last() != Some(&rtt_view)
        {
            segments.starts.push(p);
            segments.views.push(view);
            segments.rtt_views.push(rtt_view);
        }
    }
    let mut views_out = Vec::new();
    let mut nets = Vec::new();
    for i in 0..segments.starts.len() {
        let (view, rtt_view) = (segments.views[i], segments.rtt_views[i]);
        if view == DEFAULT_VIEW && rtt_view == 0 {
            continue;
        }
        let first = segments.starts[i];
        let last = segments.starts.get(i + 1).map_or(u128::MAX, |&n| n - 1);
        nets.clear();
        prefixes_of(first, last, &mut nets);
        views_out.extend(nets.iter().map(|n| (*n, ViewValue { view, rtt_view })));
    }
    (segments, views_out)
}

/// How many leading location qualifiers any decision can read: one past the deepest value
/// in a service location, a policy's or an action's location, or a topology record.
fn location_depth(config: &Config) -> usize {
    let mut patterns: Vec<Location> = Vec::new();
    patterns.extend(config.services.iter().filter_map(|s| s.location.clone()));
    for p in &config.policies {
        let mut found = Vec::new();
        p.expression.locations(&mut found);
        patterns.extend(found.into_iter().cloned());
    }
    patterns.extend(
        config
            .actions
            .iter()
            .flat_map(|a| a.preferred_locations.iter().cloned()),
    );
    patterns.extend(config.topology.iter().filter_map(|r| match &r.ldns {
        Ldns::Location(l) => Some(l.clone()),
        Ldns::Prefix(_) => None,
    }));
    patterns
        .iter()
        .filter_map(|l| l.0.iter().rposition(|q| !q.is_any()))
        .map(|i| i + 1)
        .max()
        .unwrap_or(0)
}

/// Addresses in order, each once.
fn distinct(addrs: impl Iterator<Item = IpAddr>) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::new();
    for a in addrs {
        if !out.contains(&a) {
            out.push(a);
        }
    }
    out
}

/// NODATA in a view whose default view answers: an answer without addresses.
fn empty(base: Option<&Answer>, config: &Config, d: usize) -> Answer {
    let domain = &config.gslb_domains[d];
    Answer {
        ttl: base.map_or(domain.ttl, |b| b.ttl),
        mode: domain.answer,
        addrs: Vec::new(),
    }
}

/// Numbers views from scratch: the most common view vector (by segments) is the default view,
/// the others follow in address order; LDNS views likewise from 1. Returns (views, LDNS views,
/// each class's numbers).
fn number_fresh(
    seg_class: &[u32],
    class_segments: &[u32],
    class_vectors: &[(u32, u32)],
) -> (usize, usize, Vec<(u32, u32)>) {
    let vectors = class_vectors
        .iter()
        .map(|v| v.0)
        .max()
        .map_or(0, |m| m as usize + 1);
    let mut count = vec![0usize; vectors];
    for (c, &(v, _)) in class_vectors.iter().enumerate() {
        count[v as usize] += class_segments[c] as usize;
    }
    let default = (0..vectors)
        .max_by_key(|&v| (count[v], std::cmp::Reverse(v)))
        .unwrap_or(0);
    let mut number = vec![u32::MAX; vectors];
    let mut views = 0;
    if vectors > 0 {
        number[default] = DEFAULT_VIEW;
        views = 1;
    }
    let rtt_vectors = class_vectors
        .iter()
        .map(|v| v.1)
        .max()
        .map_or(1, |m| m as usize + 1);
    let mut rtt_number = vec![u32::MAX; rtt_vectors];
    rtt_number[0] = 0;
    let mut rtt_views = 0;
    for &c in seg_class {
        let (v, r) = class_vectors[c as usize];
        if number[v as usize] == u32::MAX {
            number[v as usize] = views as u32;
            views += 1;
        }
        if rtt_number[r as usize] == u32::MAX {
            rtt_views += 1;
            rtt_number[r as usize] = rtt_views as u32;
        }
    }
    let class_views = class_vectors
        .iter()
        .map(|&(v, r)| (number[v as usize], rtt_number[r as usize]))
        .collect();
    (views, rtt_views, class_views)
}

/// Numbers views keeping the previous numbers: classes of one previous view with the same
/// vector keep its number (the part with the most segments), other parts get new numbers.
fn number_stable(
    class_segments: &[u32],
    class_vectors: &[(u32, u32)],
    previous: &[(u32, u32)],
    next_view: &mut u32,
    next_rtt_view: &mut u32,
) -> (Vec<(u32, u32)>, usize, usize) {
    // (previous number, vector) → segments; per dimension.
    let mut parts: HashMap<(u32, u32), usize> = HashMap::new();
    let mut rtt_parts: HashMap<(u32, u32), usize> = HashMap::new();
    for (c, (&(v, r), &(pv, pr))) in class_vectors.iter().zip(previous).enumerate() {
        let n = class_segments[c] as usize;
        *parts.entry((pv, v)).or_default() += n;
        *rtt_parts.entry((pr, r)).or_default() += n;
    }
    fn assign(
        parts: HashMap<(u32, u32), usize>,
        next: &mut u32,
        keep_zero_only_for_zero: bool,
    ) -> HashMap<(u32, u32), u32> {
        // The biggest part of each previous number keeps it.
        let mut best: HashMap<u32, ((u32, u32), usize)> = HashMap::new();
        for (&part, &n) in &parts {
            let e = best.entry(part.0).or_insert((part, n));
            if n > e.1 || (n == e.1 && part.1 < e.0.1) {
                *e = (part, n);
            }
        }
        let mut sorted: Vec<(u32, u32)> = parts.keys().copied().collect();
        sorted.sort_unstable();
        let mut numbers = HashMap::new();
        for part in sorted {
            // LDNS view 0 means "no RTT row": only the no-row vector keeps it.
            let keeps =
                best[&part.0].0 == part && (!keep_zero_only_for_zero || part.0 != 0 || part.1 == 0);
            let n = if keeps {
                part.0
            } else {
                let n = *next;
                *next += 1;
                n
            };
            numbers.insert(part, n);
        }
        numbers
    }
    let numbers = assign(parts, next_view, false);
    let rtt_numbers = assign(rtt_parts, next_rtt_view, true);
    let class_views: Vec<(u32, u32)> = class_vectors
        .iter()
        .zip(previous)
        .map(|(&(v, r), &(pv, pr))| (numbers[&(pv, v)], rtt_numbers[&(pr, r)]))
        .collect();
    (
        class_views,
        *next_view as usize,
        (*next_rtt_view - 1) as usize,
    )
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Map entries cost more than their key and value: the kernel's element header, the trie's
/// node, allocator rounding. 64 bytes is a fair allowance for both map types.
const MAP_OVERHEAD: usize = 64;

/// Whether `domain`'s answer can differ between two clients of one static view: then the
/// engine decides it.
fn needs_engine(
    config: &Config,
    domain: &GslbDomain,
    services: &HashMap<&str, (usize, &Service)>,
) -> bool {
    // A service on a `[[link]]` is full while its link is over (`World::service_states`):
    // spillover, which only the engine honours. So is another site's service whose site
    // reports it full over MEP (its link is declared at that site only).
    let remote = |s: &Service| {
        config.mep_enabled().is_some() && config.server.site.as_deref() != Some(s.site.as_str())
    };
    let limited = domain
        .services
        .iter()
        .chain(domain.views.iter().flat_map(|(_, names)| names))
        .filter_map(|n| services.get(n.as_str()))
        .any(|(_, s)| {
            s.max_connections.is_some()
                || s.max_bandwidth_kbps.is_some()
                || config.link_of(&s.name).is_some()
                || remote(s)
        });
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
    let Some(engine) = engine else {
        return Kind::PerQuery {
            place: true,
            rtt: true,
        };
    };
    let (mut place, mut rtt, mut per_query) = (!config.policies.is_empty(), false, false);
    for d in engine
        .domain_index(&domain.name)
        .into_iter()
        .flat_map(|d| engine.chain(d))
    {
        let spec = engine.domain(d);
        per_query |= spec.persistence.is_some() || spec.chain.contains(&Method::SourceIpHash);
        place |= spec
            .chain
            .iter()
            .any(|m| matches!(m, Method::StaticProximity | Method::Topology));
        rtt |= spec.chain.contains(&Method::Rtt);
    }
    if per_query {
        Kind::PerQuery { place, rtt }
    } else {
        Kind::Decided { place, rtt }
    }
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
            *s.views,
            // In address order (IPv4 as IPv4-mapped IPv6), numbered in that order.
            vec![
                (
                    "198.51.100.0/24".parse().unwrap(),
                    ViewValue {
                        view: 1,
                        rtt_view: 0
                    }
                ),
                (
                    "203.0.113.0/24".parse().unwrap(),
                    ViewValue {
                        view: 2,
                        rtt_view: 0
                    }
                ),
                (
                    "2001:db8:100::/48".parse().unwrap(),
                    ViewValue {
                        view: 1,
                        rtt_view: 0
                    }
                ),
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
                    ..Default::default()
                },
                // No default-view AAAA: the domain's own services are all IPv4.
                DomainEntry {
                    name: "www.example.com".into(),
                    qtype: QTYPE_AAAA,
                    id: 1,
                    answers: vec![(1, all(&["2001:db8::30"])), (2, all(&["2001:db8::30"]))],
                    ..Default::default()
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
                    ..Default::default()
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
        let table: [(
            &[&str],
            Option<Vec<IpAddr>>,
            Option<Vec<IpAddr>>,
            Option<Vec<IpAddr>>,
        ); 4] = [
            (
                &[],
                Some(vec![ip("198.51.100.1"), ip("198.51.100.2")]),
                Some(vec![ip("192.0.2.80")]),
                Some(vec![ip("198.51.100.1")]),
            ),
            (
                &["a"],
                Some(vec![ip("198.51.100.2")]),
                Some(vec![ip("192.0.2.80")]),
                None,
            ),
            // The lab view's only service down: its clients get the default view's answer.
            (
                &["lab"],
                Some(vec![ip("198.51.100.1"), ip("198.51.100.2")]),
                None,
                Some(vec![ip("198.51.100.1")]),
            ),
            // Everything down: the backup address; no backup: nothing (NODATA).
            (
                &["a", "b", "lab"],
                Some(vec![ip("203.0.113.99")]),
                None,
                None,
            ),
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
            assert_eq!(
                get("www.example.com", DEFAULT_VIEW),
                www,
                "down {down:?}: www"
            );
            assert_eq!(
                get("www.example.com", 1),
                lab,
                "down {down:?}: www, lab view"
            );
            assert_eq!(
                get("empty.example.com", DEFAULT_VIEW),
                empty,
                "down {down:?}: empty"
            );
        }
    }

    /// The answer a snapshot gives `client` for (`name`, `qtype`), looked up as the fast path
    /// does: the view's answer, else the default view's, the LDNS view's for RTT domains.
    fn resolve(s: &Snapshot, name: &str, qtype: u16, client: IpAddr) -> Option<Vec<IpAddr>> {
        let entry = s
            .domains
            .iter()
            .find(|d| d.name == name && d.qtype == qtype)?;
        let (view, rtt_view, _) = s.segments.lookup_both(client);
        let find = |list: &[(u32, Answer)], v: u32| {
            list.iter().find(|(x, _)| *x == v).map(|(_, a)| a.clone())
        };
        let by_view = find(&entry.answers, view).or_else(|| find(&entry.answers, DEFAULT_VIEW))?;
        let answer = match (entry.by_rtt, rtt_view) {
            (true, r) if r != 0 => find(&entry.rtt_answers, r).unwrap_or(by_view),
            _ => by_view,
        };
        let mut addrs = answer.addrs;
        addrs.sort();
        Some(addrs)
    }

    /// A compiler that keeps its partition and decisions between compilations answers every
    /// client exactly as a compilation from scratch does, through a sequence of state changes
    /// that split and re-join views; and it reuses the partition (and the view numbers of the
    /// classes whose answers did not change).
    #[test]
    fn incremental_compilation_equals_compiling_from_scratch() {
        let text = r#"
            [server]
            listen = ["192.0.2.53"]
            [[location]]
            from = "198.51.100.0"
            to = "198.51.100.127"
            location = "Europe.GB.England.London"
            [[location]]
            from = "198.51.100.128"
            to = "198.51.100.255"
            location = "Europe.DE.Berlin"
            [[location]]
            from = "203.0.113.0"
            to = "203.0.113.255"
            location = "NorthAmerica.US.NY"
            [[location]]
            from = "2001:db8:1::"
            to = "2001:db8:1:ffff:ffff:ffff:ffff:ffff"
            location = "Europe.FR.Paris"
            [[zone]]
            name = "example.com"
            ns = ["ns.example.net"]
            soa.rname = "hostmaster.example.com"
            [[site]]
            name = "eu"
            ip = "192.0.2.1"
            [[site]]
            name = "us"
            ip = "192.0.2.2"
            [[service]]
            name = "gb"
            ip = "192.0.2.10"
            site = "eu"
            location = "Europe.GB"
            [[service]]
            name = "de"
            ip = "192.0.2.20"
            site = "eu"
            location = "Europe.DE"
            [[service]]
            name = "us"
            ip = "192.0.2.30"
            site = "us"
            location = "NorthAmerica.US"
            [[service]]
            name = "fr6"
            ip = "2001:db8::40"
            site = "eu"
            location = "Europe.FR"
            [[gslb_domain]]
            name = "near.example.com"
            method = "staticproximity"
            alternate = "roundrobin"
            services = ["gb", "de", "us", "fr6"]
            [[gslb_domain]]
            name = "near2.example.com"
            method = "staticproximity"
            services = ["gb", "de", "us", "fr6"]
            [[gslb_domain]]
            name = "dr.example.com"
            method = "globalavailability"
            services = ["us", "gb", "de"]
            [[gslb_domain]]
            name = "rr.example.com"
            services = ["gb", "us"]
            backup_ip = ["192.0.2.99"]
            down_response = "backup"
        "#;
        let config = Config::parse(text, Path::new("test.toml")).unwrap();
        let db = LocationDb::from_sources(&config.locations, Path::new("test.toml")).unwrap();
        let rows = Arc::new(Vec::new());
        // Down services per step (by name).
        let steps: [&[&str]; 7] = [
            &[],
            &["gb"],
            &["gb", "de"],
            &[],
            &["us"],
            &["gb", "us", "de"],
            &["de"],
        ];
        let clients: Vec<IpAddr> = [
            "198.51.100.1",
            "198.51.100.127",
            "198.51.100.128",
            "198.51.100.255",
            "203.0.113.9",
            "192.0.2.7",
            "0.0.0.0",
            "255.255.255.255",
            "2001:db8:1::1",
            "2001:db8:2::1",
            "::1",
        ]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
        let names = [
            "near.example.com",
            "near2.example.com",
            "dr.example.com",
            "rr.example.com",
        ];
        let mut compiler = Compiler::default();
        for (i, down) in steps.iter().enumerate() {
            let services = config
                .services
                .iter()
                .map(|s| {
                    if down.contains(&s.name.as_str()) {
                        ServiceState::DOWN
                    } else {
                        ServiceState::UP
                    }
                })
                .collect();
            let inputs = Inputs {
                locations: Some(&db),
                services,
                rtt: rows.clone(),
            };
            let incremental = compiler.compile(&config, &inputs);
            let fresh = Snapshot::compile(&config, &inputs);
            assert_eq!(incremental.stats.incremental, i > 0, "step {i}");
            for &client in &clients {
                for name in names {
                    for qtype in [QTYPE_A, QTYPE_AAAA] {
                        assert_eq!(
                            resolve(&incremental, name, qtype, client),
                            resolve(&fresh, name, qtype, client),
                            "step {i} (down {down:?}): {name} {qtype} for {client}"
                        );
                    }
                }
            }
            // The same decisions were not taken again.
            if i == 3 {
                assert_eq!(
                    incremental.stats.decisions, 0,
                    "step {i}: every state was seen before"
                );
            }
        }
    }

    /// LDNS views that would take more entries than the budget leave the domains answered by
    /// RTT to the responder (per query, with the same RTT rows), and everything else compiled.
    #[test]
    fn rtt_domains_over_the_budget_go_to_the_responder() {
        let text = r#"
            [server]
            listen = ["192.0.2.53"]
            [[zone]]
            name = "example.com"
            ns = ["ns.example.net"]
            soa.rname = "hostmaster.example.com"
            [[site]]
            name = "a"
            ip = "192.0.2.1"
            [[site]]
            name = "b"
            ip = "192.0.2.2"
            [[service]]
            name = "a"
            ip = "192.0.2.10"
            site = "a"
            [[service]]
            name = "b"
            ip = "192.0.2.20"
            site = "b"
            [[gslb_domain]]
            name = "rtt.example.com"
            method = "rtt"
            services = ["a", "b"]
            [[gslb_domain]]
            name = "rr.example.com"
            services = ["a", "b"]
        "#;
        let config = Config::parse(text, Path::new("test.toml")).unwrap();
        let row = |net: &str, a: u32, b: u32| LdnsRtt {
            ldns: net.parse().unwrap(),
            rtt_us: vec![Some(a), Some(b)],
        };
        // Two distinct LDNS views (a nearer, b nearer), two entries each (A and AAAA).
        let rows = Arc::new(vec![
            row("198.51.100.0/24", 10_000, 40_000),
            row("203.0.113.0/24", 40_000, 10_000),
        ]);
        let inputs = Inputs {
            rtt: rows,
            ..Inputs::default()
        };
        // (budget, left to the responder)
        for (budget, responder) in [(4, false), (3, true)] {
            let s = Compiler::with_rtt_budget(budget).compile(&config, &inputs);
            assert_eq!(s.stats.rtt_to_responder, responder, "budget {budget}");
            assert_eq!(
                s.engine_domains.contains(&"rtt.example.com".to_string()),
                responder,
                "budget {budget}"
            );
            assert_eq!(
                s.domains.iter().any(|d| d.name == "rtt.example.com"),
                !responder,
                "budget {budget}"
            );
            assert!(
                s.domains.iter().any(|d| d.name == "rr.example.com"),
                "budget {budget}"
            );
            assert_eq!(
                s.stats.rtt_views,
                if responder { 0 } else { 2 },
                "budget {budget}"
            );
            // Either way the answer is by RTT: from the maps, or decided per query.
            let responder = crate::responder::Responder::new(&config, &s);
            for (client, want) in [
                ("198.51.100.9", "192.0.2.10"),
                ("203.0.113.9", "192.0.2.20"),
            ] {
                let mut q = hickory_proto::op::Message::new();
                q.set_id(1).add_query(hickory_proto::op::Query::query(
                    hickory_proto::rr::Name::from_ascii("rtt.example.com.").unwrap(),
                    hickory_proto::rr::RecordType::A,
                ));
                let reply = responder
                    .respond(
                        &q.to_vec().unwrap(),
                        client.parse().unwrap(),
                        crate::responder::Transport::Udp,
                    )
                    .expect("a reply");
                let reply = hickory_proto::op::Message::from_vec(&reply).unwrap();
                let got: Vec<String> = reply
                    .answers()
                    .iter()
                    .map(|r| r.data().to_string())
                    .collect();
                assert_eq!(
                    got,
                    vec![want.to_string()],
                    "budget {budget}, client {client}"
                );
            }
        }
    }
}
