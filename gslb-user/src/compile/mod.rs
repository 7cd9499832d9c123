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
//! An LDNS view is not a set of answers but a *choice* ([`choices`]): for each signature
//! answered by RTT (an *RTT slot*), the index of its outcome among the few that signature has.
//! Each domain then has one answer per outcome index, so the entries grow with domains ×
//! outcomes, and the choices with LDNS views × signatures (a byte each), instead of domains ×
//! LDNS views (tens of millions at 100,000 RTT rows).
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
//!
//! # Stages
//!
//! One compilation ([`Job::run`]) is a sequence of stages, one file each, named after what
//! they make: [`spec`] (once per configuration: the decision engine), [`kinds`] (how each domain is decided), [`classes`] (the address space cut into
//! segments and classes), [`signatures`] (decisions shared by domains of one structure),
//! [`views`] (answer vectors numbered as views, merged into prefixes) and [`snapshot`] (the
//! entries and the [`Snapshot`]). [`partition`] holds the address-space arithmetic they share;
//! [`compiler`] runs them one compilation after another, keeping what stays valid.

mod choices;
mod classes;
mod cname;
mod compiler;
mod interner;
mod kinds;
pub mod partition;
#[cfg(test)]
mod rtt_tests;
mod signatures;
mod snapshot;
mod spec;
#[cfg(test)]
mod tests;
mod views;
mod wildcard;

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::Arc;

use gslb_common::{QTYPE_A, QTYPE_AAAA, ViewValue};
use ipnet::IpNet;

pub use self::choices::RttChoices;
pub use self::cname::CnameTarget;
use self::compiler::Cache;
pub use self::compiler::Compiler;
use self::kinds::Kind;
use self::partition::{AddressSteps, Segments};
use self::signatures::CacheParts;
pub use self::spec::Spec;
use self::views::{merged_views, number_views};
use crate::location::db::LocationDb;
use crate::model::Model;
use crate::policy::AnswerMode;
use crate::policy::{Engine, ServiceState};

/// One complete state of the answers: what the fast path's tables hold and what the responder
/// answers GSLB names from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub dns_port: u16,
    pub edns_udp_size: u16,
    /// The current DNS cookie secret, when cookies are configured: the fast path answers a
    /// query that brings back a fresh server cookie made with it, and passes every other
    /// query with a cookie (`gslb_common::CONFIG_COOKIES`, `COOKIE_KEY`).
    pub cookie_secret: Option<[u8; 16]>,
    /// `[rrl]`, for the fast path's `RRL_CONFIG` (publish writes it).
    pub rrl: crate::model::RrlSettings,
    /// The NSID payload (`server.identity` with `server.nsid`) the fast path gives a query
    /// that asks for it (`NSID`, by parity); `None`: requests are ignored, as the responder
    /// ignores them.
    pub nsid: Option<Vec<u8>>,
    /// `server.ecs_allow`: the resolvers whose ECS the fast path uses (`ECS_ALLOW`, written by
    /// `dataplane::ecs_allow`); `None`: every client's.
    pub ecs_allow: Option<Vec<IpNet>>,
    /// Destination addresses the fast path answers for.
    pub listen: Vec<IpAddr>,
    /// Disjoint client prefixes, ascending, with their view and LDNS view; other clients get
    /// [`DEFAULT_VIEW`] and no LDNS view.
    /// Shared (`Arc`): a million prefixes are not copied per snapshot.
    pub views: Arc<ViewPrefixes>,
    /// The same as merged segments: the responder's lookups and the ECS scope.
    pub segments: Arc<Segments>,
    pub domains: Vec<DomainEntry>,
    /// By LDNS view and RTT slot: the index of the slot's outcome ([`DomainEntry::rtt_answers`]).
    pub rtt_choices: Arc<RttChoices>,
    /// GSLB domains whose answer depends on the single client address (source IP hash,
    /// persistence): the fast path has no entry for them and the responder asks the decision
    /// engine per query, with [`Snapshot::services`] and [`Snapshot::rtt`].
    pub engine_domains: Vec<String>,
    /// Services held DOWN (by monitors or by their site's MEP state).
    pub down_services: Vec<String>,
    /// By configuration service index: the state the answers were decided with.
    pub services: Vec<ServiceState>,
    /// By configuration domain index: disabled by the operator ([`Inputs::disabled_domains`]).
    pub disabled_domains: Vec<bool>,
    /// This site answers no GSLB name ([`Inputs::refuse_gslb`]): `domains` and
    /// `engine_domains` are empty, and the responder REFUSES those names.
    pub refuse_gslb: bool,
    /// The RTT rows the answers were decided with, and the step function client → row + 1.
    pub rtt: Arc<Vec<LdnsRtt>>,
    pub rtt_rows: Arc<AddressSteps>,
    /// Client → static view number (0: the default view), for per-query decisions.
    pub static_views: Arc<AddressSteps>,
    /// Every input of a decision but the address is the same inside one of these runs (their
    /// `views` number the classes): the ECS scope of a per-query answer is at least the run's.
    pub classes: Arc<Segments>,
    /// What the configuration gives every snapshot (the decision engine), built once per
    /// configuration: the responder answers the per-query domains with this engine. `None`
    /// only in [`Snapshot::default`].
    pub spec: Option<Arc<Spec>>,
    pub stats: CompileStats,
}

/// What a compilation takes of a configuration: its model.
/// `config` makes it (`From<&Config>`); a caller that keeps one (the world) compiles from the
/// same `Arc` every time, so the compiler knows it by identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub model: Arc<Model>,
}

impl From<&Source> for Source {
    fn from(source: &Source) -> Source {
        source.clone()
    }
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
    /// Answered by RTT: a client with an LDNS view takes the `rtt_answers` answer of the
    /// outcome [`Snapshot::rtt_choices`] gives for that view and `rtt_slot`.
    pub by_rtt: bool,
    /// With `by_rtt`: the RTT slot of the entry's signature.
    pub rtt_slot: u32,
    /// By outcome index (without [`gslb_common::RTT_OUTCOME_BIT`]), every index the slot's
    /// signature has.
    pub rtt_answers: Vec<(u32, Answer)>,
    /// The name is a wildcard `*.P` whose answers the fast path gives for every name one label
    /// below P (`gslb_common::NAME_WILDCARD`): nothing else exists below P.
    pub wildcard: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Answer {
    pub ttl: u32,
    pub mode: AnswerMode,
    /// The domain's `max_answers`: the most addresses one answer carries ([`Answer::carried`]).
    pub max_answers: u16,
    /// All of one family, matching the entry's qtype, in rotation order (an address repeats
    /// in proportion to its weight under the ratio method). Empty: NODATA for this view, though
    /// the default view has addresses. More than [`gslb_common::MAX_ADDRS`], or a window the
    /// fast path does not rotate ([`Answer::fast`]): it leaves the query to the responder.
    pub addrs: Vec<IpAddr>,
    /// A CNAME domain's answer instead of `addrs`: its services' names, in rotation order as
    /// `addrs` would be; one answer carries one of them ([`Answer::carried_name`]).
    pub names: Vec<Arc<CnameTarget>>,
}

impl Answer {
    /// The addresses answer number `turn()` carries ([`crate::policy::carried`]); `turn` is
    /// only taken when not every address goes.
    pub fn carried(&self, turn: impl FnOnce() -> usize) -> Cow<'_, [IpAddr]> {
        crate::policy::carried(&self.addrs, self.mode, self.max_answers, turn)
    }

    /// The name answer number `turn()` carries (a CNAME domain's); `turn` is only taken when
    /// there is more than one.
    pub fn carried_name(&self, turn: impl FnOnce() -> usize) -> Option<&CnameTarget> {
        let at = match self.names.len() {
            0 => return None,
            1 => 0,
            n => turn() % n,
        };
        Some(&self.names[at])
    }

    /// No address and no name: NODATA.
    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty() && self.names.is_empty()
    }

    /// Whether the fast path gives what [`Answer::carried`] (or [`Answer::carried_name`])
    /// gives: every address of a set it holds, or one of them in turn; for names, one name
    /// (it does not rotate names) whose answer is the CNAME and records it knows.
    pub fn fast(&self) -> bool {
        if let Some(first) = self.names.first() {
            return first.follow.is_some() && self.names.iter().all(|n| n.name == first.name);
        }
        let n = self.addrs.len();
        n <= gslb_common::MAX_ADDRS
            && match self.mode {
                AnswerMode::All => n <= usize::from(self.max_answers),
                AnswerMode::Rotate => self.max_answers == 1 || n == 1,
            }
    }
}

/// Everything besides the configuration that the answers depend on.
#[derive(Clone, Debug, Default)]
pub struct Inputs<'a> {
    pub locations: Option<&'a LocationDb>,
    /// By configuration service index; a service beyond the slice is UP with no load.
    pub services: Vec<ServiceState>,
    /// By configuration domain index: disabled by the operator (answers as if all its
    /// services were down); beyond the slice: enabled.
    pub disabled_domains: Vec<bool>,
    /// This site is a MEP child: only parents answer GSLB names (spec §6). The snapshot then
    /// carries no entry for them (the fast path passes those names) and the responder REFUSES
    /// them, so that the resolver asks a parent; the zones' static data is answered as before.
    pub refuse_gslb: bool,
    /// Measured RTTs, one row per LDNS entry (the rows do not overlap).
    pub rtt: Arc<Vec<LdnsRtt>>,
    /// What the caller knows of how `rtt` differs from earlier rows; `None`: the compiler
    /// compares them.
    pub rtt_changes: Option<RttChanges>,
}

/// The rows of [`Inputs::rtt`] whose RTTs differ from `since`'s, row for row (the same
/// prefixes in the same order): a [`Compiler`] whose last rows were `since` (the same `Arc`)
/// takes every other row as unchanged instead of comparing 100,000 rows of 64 sites, most of an
/// RTT change's compile. It must list every row that differs (debug builds check it); rows
/// listed that did not change only cost their decisions again.
#[derive(Clone, Debug)]
pub struct RttChanges {
    pub since: Arc<Vec<LdnsRtt>>,
    /// Row numbers (indexes into [`Inputs::rtt`]).
    pub rows: Vec<usize>,
}

/// The RTTs from every site to one LDNS entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LdnsRtt {
    /// One resolver, or the prefix the LDNS mask groups.
    pub ldns: IpNet,
    /// Microseconds, by configuration site index; `None`: not measured from that site.
    /// Shared (`Arc`): the next rows after an RTT change share every unchanged row's RTTs with
    /// these (gslbd's world builds them so), so that they cost no allocation per row.
    pub rtt_us: Arc<[Option<u32>]>,
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
    /// (domain, view) answer entries, the (domain, RTT outcome) ones included.
    pub entries: usize,
    /// `RTT_CHOICE` pages, both parities (2 × LDNS views × pages per view).
    pub rtt_choices: usize,
    /// Distinct decision signatures, and engine decisions taken by this compilation.
    pub signatures: usize,
    pub decisions: usize,
    /// Of those, taken by the RTT rule alone ([`crate::policy::RttFirst`]).
    pub rtt_rule_decisions: usize,
    /// The partition was reused from the previous compilation.
    pub incremental: bool,
    /// Domains answered by RTT were left to the responder: their choices and outcome answers
    /// would take more than [`RTT_ENTRY_BUDGET`] entries (or a signature has more than 256
    /// outcomes).
    pub rtt_to_responder: bool,
    /// Kernel memory the tables take, approximately (keys, values, per-entry overhead).
    pub map_bytes: usize,
}

impl Snapshot {
    /// The model the answers were compiled from (its spec's); an empty one for
    /// [`Snapshot::default`].
    pub fn model(&self) -> &Model {
        static EMPTY: std::sync::LazyLock<Model> = std::sync::LazyLock::new(Model::default);
        self.spec.as_ref().map_or(&EMPTY, |s| s.model())
    }

    /// Every service up, no location database, no RTT.
    pub fn from_config(source: impl Into<Source>) -> Snapshot {
        Snapshot::with_health(source, |_| true)
    }

    /// The answers while only the services for which `up` says so are up.
    pub fn with_health(source: impl Into<Source>, up: impl Fn(&str) -> bool) -> Snapshot {
        let source = source.into();
        let services = source
            .model
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
            source,
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
    pub fn compile(source: impl Into<Source>, inputs: &Inputs<'_>) -> Snapshot {
        Compiler::default().compile(source, inputs)
    }
}

/// Disjoint client prefixes in address order, with their view and LDNS view.
pub type ViewPrefixes = Vec<(IpNet, ViewValue)>;

/// The most map entries the answers by RTT are given: `RTT_CHOICE` pages (both parities) and
/// (domain, outcome) answer sets together, `RTT_CHOICE`'s capacity. Beyond it (or with a
/// signature of more than 256 outcomes), domains answered by RTT are left to the responder: a
/// last resort, logged.
pub const RTT_ENTRY_BUDGET: usize = gslb_common::RTT_CHOICE_MAX as usize;

/// The answers by RTT would take more entries than the budget.
#[derive(Debug)]
struct OverBudget {
    ldns_views: usize,
    entries: usize,
}

/// One compilation.
struct Job<'a> {
    /// The configuration compiled (`spec`'s).
    model: &'a Model,
    inputs: &'a Inputs<'a>,
    spec: &'a Arc<Spec>,
    engine: Option<Arc<Engine>>,
    kinds: Vec<Kind>,
    /// (domain index, qtype), every domain but the per-query ones.
    entries: Vec<(usize, u16)>,
    decisions: usize,
    rtt_rule_decisions: usize,
    rtt_to_responder: bool,
    rtt_budget: usize,
    /// By RTT row (1-based; index 0 unused): its RTTs changed since the cached compilation.
    /// Empty: none did.
    changed_rows: Vec<bool>,
    /// Decide what it can by the RTT rule alone ([`crate::policy::RttFirst`]).
    rtt_rule: bool,
}

impl<'a> Job<'a> {
    /// `rtt_to_responder`: domains answered by RTT are left to the responder (their LDNS
    /// views would not fit the maps).
    fn new(inputs: &'a Inputs<'a>, rtt_to_responder: bool, spec: &'a Arc<Spec>) -> Self {
        let engine = spec.engine.clone();
        let kinds: Vec<Kind> = spec
            .kinds
            .iter()
            .map(|&k| match k {
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
            model: spec.model(),
            inputs,
            spec,
            engine,
            kinds,
            entries,
            decisions: 0,
            rtt_rule_decisions: 0,
            rtt_to_responder,
            rtt_budget: RTT_ENTRY_BUDGET,
            changed_rows: Vec::new(),
            rtt_rule: true,
        }
    }

    fn domain_disabled(&self, d: usize) -> bool {
        self.inputs
            .disabled_domains
            .get(d)
            .copied()
            .unwrap_or(false)
    }

    fn up(&self, service: usize) -> bool {
        self.inputs.services.get(service).is_none_or(|s| s.up)
    }

    fn state(&self, service: usize) -> ServiceState {
        self.inputs
            .services
            .get(service)
            .copied()
            .unwrap_or_default()
    }

    /// The stages in order: columns, each class's vectors, view numbers, merged prefixes,
    /// entries, the snapshot. Fails when the LDNS views are over the budget (the caller then
    /// leaves domains answered by RTT to the responder and runs again).
    fn run(&mut self, cache: &mut Cache, incremental: bool) -> Result<Snapshot, OverBudget> {
        let Cache {
            partition,
            columns: memo,
            signatures,
            outcomes,
            decided,
            dense,
            rtt_dense,
            choices,
            static_answers,
            entry_memo,
            class_views,
            merged,
            next_view,
            next_rtt_view,
            ..
        } = cache;
        // The columns read the service states and the disabled domains: kept while they stay
        // (an RTT change), not made again with a signature per entry.
        let key = (
            self.inputs.services.clone(),
            self.inputs.disabled_domains.clone(),
        );
        let columns = match memo.take() {
            Some((known, columns)) if known == key => columns,
            _ => self.columns(signatures),
        };
        let mut parts = CacheParts {
            outcomes,
            decided,
            dense,
            rtt_dense,
            places: partition.places,
            rows: self.inputs.rtt.len(),
        };
        let vectors = self.class_vectors(
            partition,
            &columns,
            signatures,
            &mut parts,
            static_answers,
            choices,
            incremental,
        )?;
        let numbers = number_views(
            partition,
            &vectors,
            incremental,
            class_views,
            next_view,
            next_rtt_view,
        );
        let (segments, prefixes) = merged_views(partition, &numbers, merged);
        let domains = self.entries(
            &columns,
            &vectors,
            &numbers,
            parts.outcomes,
            static_answers,
            choices,
            entry_memo,
        );
        let rtt_choices = choices.table(partition, &numbers, columns.rtt_columns.len());
        let snapshot = self.snapshot(
            partition,
            &columns,
            &numbers,
            domains,
            rtt_choices,
            segments,
            prefixes,
            incremental,
        );
        *memo = Some((key, columns));
        Ok(snapshot)
    }
}
