//! Stage 3, per service states: domains of one structure share a [`Signature`], the engine
//! decides once per signature and distinct class input, and the decision is kept as an
//! [`Outcome`] in positions of the domain's own service list (translated to each domain's
//! addresses by the snapshot stage).

use ahash::AHashMap as HashMap;
use std::borrow::Cow;
use std::cell::OnceCell;
use std::net::IpAddr;

use gslb_common::QTYPE_AAAA;

use super::Job;
use super::classes::ClassKey;
use super::interner::Interner;
use super::kinds::Kind;
use crate::location::Location;
use crate::location::db::LocationDb;
use crate::model::RecordType;
use crate::policy::AnswerMode;
use crate::policy::{
    Client, Decision, Fallback, Method, Pick, Query, RttFirst, ServiceState, State, Tier,
};

/// Marks a projected key whose outcome holds for every place (the RTT method decided first,
/// and no policy narrowed the pool).
const ANY_PLACE: u64 = u64::MAX;

/// Everything one decision of a domain depends on besides the client, so that domains with
/// equal signatures get equal outcomes (in positions of their own service lists).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Signature {
    /// The domain itself when its decisions cannot be shared (a backup domain, or policies
    /// that read the question name).
    pub(super) domain: Option<usize>,
    pub(super) qtype: u16,
    pub(super) chain: Vec<Method>,
    pub(super) tolerance_us: u32,
    pub(super) answer: AnswerMode,
    pub(super) down: Fallback,
    pub(super) place: bool,
    pub(super) rtt: bool,
    /// Per position of the domain's members (its services, then each view's: see
    /// [`Engine::members`]): site, IPv6, weight, location, limits, state.
    pub(super) services: Vec<SlotSignature>,
    /// Per static view with its own list: the view's number and its positions among the
    /// members.
    pub(super) views: Vec<(u32, usize, usize)>,
    /// The outcome depends on the client's static view: this domain or a backup domain has
    /// views of its own.
    pub(super) by_view: bool,
    /// The states of the backup domains' services, in chain order: a backup domain answers
    /// when this one cannot, so its services' states decide too.
    pub(super) backups: Vec<ServiceState>,
}

/// What a decision reads of one service: site, IPv6, weight, location, connection and
/// bandwidth limits, state.
pub(super) type SlotSignature = (
    usize,
    bool,
    u32,
    Option<Location>,
    Option<u64>,
    Option<u64>,
    ServiceState,
);

impl Signature {
    /// Whether its domains are answered by RTT in the fast path: it reads the RTT row and has
    /// something of its family to choose from (a signature without a service of the family
    /// answers NODATA everywhere, so it needs no choice).
    pub(super) fn answers_by_rtt(&self) -> bool {
        let v6 = self.qtype == QTYPE_AAAA;
        self.rtt && (self.domain.is_some() || self.services.iter().any(|s| s.1 == v6))
    }
}

/// A class's representative address and its location, looked up once, when a decision first
/// needs it (most outcomes are known already).
pub(super) struct ClientAt<'a> {
    pub(super) addr: IpAddr,
    db: Option<&'a LocationDb>,
    location: OnceCell<Option<Cow<'a, Location>>>,
}

impl<'a> ClientAt<'a> {
    pub(super) fn new(addr: IpAddr, db: Option<&'a LocationDb>) -> Self {
        ClientAt {
            addr,
            db,
            location: OnceCell::new(),
        }
    }

    fn location(&self) -> Option<&Location> {
        self.location
            .get_or_init(|| self.db.and_then(|db| db.lookup(self.addr)))
            .as_deref()
    }
}

/// One decision in positions of the deciding domain's service list.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Outcome {
    /// The domain that answered (the asked one or a backup); only read for signatures of one
    /// domain, whose outcomes are never translated.
    pub(super) domain: usize,
    pub(super) positions: Vec<u32>,
    pub(super) pick: OutcomePick,
    pub(super) fallback: Option<Fallback>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum OutcomePick {
    /// One address per answer, rotating; weights repeat an address (ratio).
    Rotate(Vec<u32>),
    All,
}

/// The parts of the cache [`Job::outcome`] writes, borrowed apart from the partition it reads.
pub(super) struct CacheParts<'c> {
    pub(super) outcomes: &'c mut Interner<Outcome>,
    pub(super) decided: &'c mut HashMap<(u32, ClassKey), u32>,
    pub(super) dense: &'c mut HashMap<u32, Vec<u32>>,
    pub(super) rtt_dense: &'c mut HashMap<u32, Vec<u32>>,
    pub(super) places: usize,
    /// RTT rows.
    pub(super) rows: usize,
}

impl Outcome {
    pub(super) fn of(decision: &Decision) -> Outcome {
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

impl Job<'_> {
    /// The signature of a decided entry.
    pub(super) fn signature(&self, d: usize, qtype: u16) -> Signature {
        let engine = self
            .engine
            .as_ref()
            .expect("decided domains have an engine");
        let spec = engine.domain(d);
        let Kind::Decided { place, rtt } = self.kinds[d] else {
            unreachable!("decided entries only")
        };
        let members = engine.members(d);
        // A domain disabled by the operator decides as if its services were down (the engine
        // skips it), so it shares that signature.
        let disabled = self.domain_disabled(d);
        // A CNAME domain's pool has no family (its services answer names), which the slots'
        // IPv6 flags below cannot say: it decides for itself.
        let own = spec.backup.is_some()
            || spec.record_type == RecordType::Cname
            || self.model.policies.iter().any(|p| p.expr.reads_name());
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
                        s.site.index(),
                        s.ip.is_ipv6(),
                        s.weight,
                        s.location.clone(),
                        s.max_connections,
                        s.max_bandwidth_kbps,
                        if disabled {
                            ServiceState::DOWN
                        } else {
                            self.state(i)
                        },
                    )
                })
                .collect(),
            views: {
                let mut at = spec.services.len();
                spec.views
                    .iter()
                    .map(|(view, list)| {
                        at += list.len();
                        (view.number(), at - list.len(), at)
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
            .flat_map(|b| {
                let disabled = self.domain_disabled(b);
                engine.members(b).iter().map(move |&i| {
                    if disabled {
                        ServiceState::DOWN
                    } else {
                        self.state(i)
                    }
                })
            })
            .collect()
    }

    /// The outcome of signature `sig` for a class, decided for `representative` unless known.
    /// `with_rtt`: with the class's RTT row (the LDNS view), else without one (the view).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn outcome(
        &mut self,
        cache: &mut CacheParts<'_>,
        sig: u32,
        signature: &Signature,
        representative: (usize, u16),
        key: ClassKey,
        place: u32,
        client: &ClientAt<'_>,
        with_rtt: bool,
    ) -> u32 {
        let CacheParts {
            outcomes,
            decided,
            dense,
            rtt_dense,
            places,
            rows,
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
        // With a row, outcomes that hold for the row whatever the place (the signature reads
        // no place, or the RTT method decided first) are kept densely by row: a hundred
        // thousand rows are as many classes.
        let by_row = row != 0 && !signature.by_view;
        if by_row {
            let known = rtt_dense.get(&sig).map_or(u32::MAX, |t| t[row as usize]);
            if known != u32::MAX {
                return known;
            }
        }
        let mut remember = |decided: &mut HashMap<(u32, ClassKey), u32>,
                            key: ClassKey,
                            id: u32,
                            row_only: bool| {
            if by_place {
                let size = if signature.place { *places } else { 2 };
                dense.entry(sig).or_insert_with(|| vec![u32::MAX; size])[slot] = id;
            } else if by_row && row_only {
                rtt_dense
                    .entry(sig)
                    .or_insert_with(|| vec![u32::MAX; *rows + 1])[row as usize] = id;
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
            remember(decided, projected, id, !signature.place);
            return id;
        }
        let decision = self.decide(d, qtype, client, key.view, row);
        // The RTT method decided first and no policy narrowed the pool: the place did not
        // matter, and the outcome holds for every class with this row.
        let placeless = row != 0
            && signature.place
            && self.model.policies.is_empty()
            && decision.tier
                == (Tier::Method {
                    step: 0,
                    method: Method::Rtt,
                });
        let id = outcomes.id(Outcome::of(&decision));
        remember(
            decided,
            if placeless { any_place } else { projected },
            id,
            placeless || !signature.place,
        );
        id
    }

    /// The RTT rule of a signature decided for `representative`: when the RTT method decides
    /// its rows whatever the place ([`crate::policy::Engine::rtt_first`]), a row's outcome is
    /// which of its pool's sites are nearest, and [`RttRule`] takes it from the row's RTTs
    /// without a whole decision (the engine's rule, the same result: its property test).
    pub(super) fn rtt_rule(&self, representative: (usize, u16)) -> Option<RttRule> {
        if !self.rtt_rule {
            return None;
        }
        let engine = self.engine.clone()?;
        let (d, qtype) = representative;
        let state = State {
            services: &self.inputs.services,
            rtt: &[],
            disabled_domains: &self.inputs.disabled_domains,
        };
        let rule = engine.rtt_first(d, qtype, &state)?;
        Some(RttRule {
            rule,
            engine,
            known: HashMap::new(),
        })
    }

    fn decide(
        &mut self,
        d: usize,
        qtype: u16,
        client: &ClientAt<'_>,
        view: u32,
        rtt_row: u32,
    ) -> Decision {
        let engine = self
            .engine
            .as_ref()
            .expect("decided domains have an engine");
        self.decisions += 1;
        let addr = client.addr;
        let location = client.location();
        let rtt = match rtt_row {
            0 => &[][..],
            row => &self.inputs.rtt[row as usize - 1].rtt_us[..],
        };
        let domain = &self.model.domains[d];
        engine.decide(
            d,
            &Query {
                name: &domain.name,
                qtype,
            },
            &Client {
                addr,
                location,
                view,
                sticky: None,
            },
            &State {
                services: &self.inputs.services,
                rtt,
                disabled_domains: &self.inputs.disabled_domains,
            },
        )
    }
}

/// One RTT slot's rows decided by the RTT rule alone (see [`Job::rtt_rule`]).
pub(super) struct RttRule {
    rule: RttFirst,
    engine: std::sync::Arc<crate::policy::Engine>,
    /// The choice index of each set of chosen pool entries met so far (a slot has a few), so
    /// a row costs the rule and one lookup.
    known: HashMap<u64, Option<u8>>,
}

impl RttRule {
    /// The choice index for the RTTs `rtt`, `index` numbering an outcome met for the first
    /// time (`None` inside: past the slot's most outcomes). `None`: no site of the pool is
    /// measured, the rest of the chain decides (ask [`Job::outcome`]).
    // Two answers apart: no choice by the rule (ask the engine), or one past the limit.
    #[allow(clippy::option_option)]
    pub(super) fn choice(
        &mut self,
        outcomes: &mut Interner<Outcome>,
        rtt: &[Option<u32>],
        index: impl FnOnce(u32) -> Option<u8>,
    ) -> Option<Option<u8>> {
        let chosen = self.rule.chosen(rtt)?;
        Some(*self.known.entry(chosen).or_insert_with(|| {
            index(outcomes.id(Outcome::of(&self.rule.decision(&self.engine, chosen))))
        }))
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}
