//! Stage 5: the entries (each (domain, qtype)'s answer per view and LDNS view, from the
//! outcomes translated to the domain's own addresses), and the [`Snapshot`] with its
//! [`CompileStats`].

use ahash::AHashMap as HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use gslb_common::{DEFAULT_VIEW, QTYPE_AAAA, ViewValue};

use super::choices::{ChoiceCache, RttChoices};
use super::classes::ClientClasses;
use super::interner::Interner;
use super::partition::Segments;
use super::signatures::{Outcome, OutcomePick};
use super::views::{ClassVectors, Column, Columns, ViewNumbers};
use super::{Answer, CompileStats, DomainEntry, Job, Snapshot, ViewPrefixes};

impl DomainEntry {
    /// Whether every client gets the same answer: the entry has no other view's answer and no
    /// LDNS view's (the lists hold only the views that differ from the default). Its ECS scope
    /// is then 0; the fast path reads it as `ANSWER_ANY_VIEW` on the set.
    pub fn same_in_every_view(&self) -> bool {
        self.rtt_answers.is_empty() && self.answers.iter().all(|(v, _)| *v == DEFAULT_VIEW)
    }
}
use super::CnameTarget;
use crate::model::{AnswerMode, Domain, Fallback, Model, RecordType, ServiceId};
use gslb_common::{RttChoice, RttChoiceKey};

/// Map entries cost more than their key and value: the kernel's element header, the trie's
/// node, allocator rounding. 64 bytes is a fair allowance for both map types.
const MAP_OVERHEAD: usize = 64;

/// Per entry: what its answers were made from (its value in each view, and its outcomes by RTT)
/// and the entry made; reused while the values stay, so a health change rebuilds only the entries it
/// touched.
pub(super) type EntryMemo = Vec<Option<(Vec<u32>, Option<DomainEntry>)>>;

impl Job<'_> {
    /// Takes the columns, the classes' vectors and their view numbers, the outcomes, the
    /// round-robin answers and the RTT slots' outcomes; gives the fast path's entries: the
    /// default view's answer and every other view's that differs, and for domains answered by
    /// RTT one per outcome of their slot. Entries whose values did not change since the last
    /// compilation come from `entry_memo`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn entries(
        &self,
        columns: &Columns,
        vectors: &ClassVectors,
        numbers: &ViewNumbers,
        outcomes: &Interner<Outcome>,
        static_answers: &Interner<Option<Answer>>,
        choices: &ChoiceCache,
        entry_memo: &mut EntryMemo,
    ) -> Vec<DomainEntry> {
        let model = self.model;
        let Columns {
            columns,
            rtt_columns,
            entry_column,
            ..
        } = columns;
        let ClassVectors {
            view_vectors,
            by_class: class_vectors,
        } = vectors;
        let views = numbers.views;
        // Each view's vector.
        let mut view_vector = vec![u32::MAX; views];
        for (c, &(v, _)) in numbers.class_views.iter().enumerate() {
            view_vector[v as usize] = class_vectors[c].0;
        }
        // Entries: the default view's answer and every other view's that differs; for domains
        // answered by RTT, every outcome's of their slot.
        let mut answer_memo: HashMap<(usize, u32), Option<Answer>> = HashMap::new();
        let mut answer = |job: &Self, e: usize, value: u32| -> Option<Answer> {
            answer_memo
                .entry((e, value))
                .or_insert_with(|| match columns[entry_column[e]] {
                    Column::Static(_) => static_answers[value].clone(),
                    Column::Decided(_) => job.translate(&outcomes[value], job.entries[e]),
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
            // The outcomes of the entry's RTT slot, by index.
            let rtt_outcomes: &[u32] = match (by_rtt, columns[column]) {
                (Some(_), Column::Decided(sig)) => choices.outcomes_of(sig),
                _ => &[],
            };
            // What this entry is made from; unchanged since the last compilation, the entry is.
            let mut key = Vec::with_capacity(views + 2 + rtt_outcomes.len());
            key.push(u32::from(matches!(columns[column], Column::Decided(_))));
            key.extend((0..views).map(|v| if live(v) { value(v) } else { u32::MAX }));
            if let Some(&pos) = by_rtt {
                key.push(pos as u32);
                key.extend_from_slice(rtt_outcomes);
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
                    a.unwrap_or_else(|| empty(base.as_ref(), model, d)),
                ));
            }
            let mut rtt_answers = Vec::with_capacity(rtt_outcomes.len());
            for (i, &outcome) in rtt_outcomes.iter().enumerate() {
                let a = answer(self, e, outcome);
                rtt_answers.push((
                    i as u32,
                    a.unwrap_or_else(|| empty(base.as_ref(), model, d)),
                ));
            }
            let any = |list: &[(u32, Answer)]| list.iter().any(|(_, a)| !a.is_empty());
            let entry = (any(&answers) || any(&rtt_answers)).then(|| DomainEntry {
                name: model.domains[d].name.clone(),
                qtype,
                id: domains.len() as u32,
                answers,
                by_rtt: by_rtt.is_some(),
                rtt_slot: by_rtt.map_or(0, |&pos| pos as u32),
                rtt_answers,
                wildcard: self.spec.fast_wildcards[d],
            });
            if let Some(entry) = &entry {
                domains.push(entry.clone());
            }
            entry_memo[e] = Some((key, entry));
        }
        domains
    }

    /// Takes everything the stages made; gives the snapshot, with what it cost.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn snapshot(
        &self,
        partition: &ClientClasses,
        columns: &Columns,
        numbers: &ViewNumbers,
        domains: Vec<DomainEntry>,
        rtt_choices: Arc<RttChoices>,
        segments: Arc<Segments>,
        views_out: Arc<ViewPrefixes>,
        incremental: bool,
    ) -> Snapshot {
        let model = self.model;
        let refuse_gslb = self.inputs.refuse_gslb;
        // A MEP child publishes no GSLB answers: decided as a parent's (the cache stays valid
        // for either role), none of them kept.
        let domains = if refuse_gslb { Vec::new() } else { domains };
        let (views, rtt_views) = (numbers.views, numbers.rtt_views);
        let entries: usize = domains
            .iter()
            .map(|d| d.answers.len() + d.rtt_answers.len())
            .sum();
        // Both parities hold every page.
        let choice_pages = 2 * rtt_views * rtt_choices.pages();
        let stats = CompileStats {
            rtt_to_responder: self.rtt_to_responder,
            segments: partition.points.len(),
            classes: partition.classes.len(),
            views,
            rtt_views,
            prefixes: views_out.len(),
            entries,
            rtt_choices: choice_pages,
            signatures: columns.signatures,
            decisions: self.decisions,
            rtt_rule_decisions: self.rtt_rule_decisions,
            incremental,
            map_bytes: views_out.len()
                * (size_of::<gslb_common::ViewKey>() + size_of::<ViewValue>() + MAP_OVERHEAD)
                + domains.len() * (size_of::<gslb_common::DomainKey>() + 8 + MAP_OVERHEAD)
                + entries
                    * (size_of::<gslb_common::AnswerKey>()
                        + size_of::<gslb_common::AnswerSet>()
                        + MAP_OVERHEAD)
                + choice_pages
                    * (size_of::<RttChoiceKey>() + size_of::<RttChoice>() + MAP_OVERHEAD),
        };
        Snapshot {
            dns_port: model.dns.port,
            edns_udp_size: model.dns.edns_udp_size,
            cookie_secret: model.dns.cookies.as_ref().map(|c| c.current),
            nsid: model.dns.identity.nsid.clone(),
            rrl: model.dns.rrl,
            ecs_allow: model.dns.ecs_allow.clone(),
            listen: model.dns.listen.clone(),
            views: views_out,
            segments,
            domains,
            rtt_choices,
            engine_domains: model
                .domains
                .iter()
                .zip(&self.kinds)
                .filter(|(_, k)| !refuse_gslb && k.per_query())
                .map(|(d, _)| d.name.clone())
                .collect(),
            down_services: model
                .services
                .iter()
                .enumerate()
                .filter(|(i, _)| !self.up(*i))
                .map(|(_, s)| s.name.clone())
                .collect(),
            services: (0..model.services.len()).map(|i| self.state(i)).collect(),
            disabled_domains: self.inputs.disabled_domains.clone(),
            refuse_gslb,
            rtt: self.inputs.rtt.clone(),
            rtt_rows: partition.rtt_rows.clone(),
            static_views: partition.static_views.clone(),
            classes: partition.class_runs.clone(),
            spec: Some(self.spec.clone()),
            stats,
        }
    }

    /// `outcome` (decided for a domain of the same signature) as entry (`d`, `qtype`)'s answer.
    fn translate(&self, outcome: &Outcome, (d, qtype): (usize, u16)) -> Option<Answer> {
        let engine = self.engine.as_ref()?;
        let family = |ip: &IpAddr| ip.is_ipv6() == (qtype == QTYPE_AAAA);
        // A signature shared by several domains has no backup domain: the asked domain
        // answered. Otherwise the outcome is the domain's own.
        let answering = if outcome.domain == d || engine.domain(d).backup.is_none() {
            d
        } else {
            outcome.domain
        };
        let asked = &self.model.domains[answering];
        let services = engine.members(answering);
        if asked.record_type == RecordType::Cname {
            return self.cname_answer(outcome, asked, services, qtype);
        }
        let ip = |pos: u32| engine.service(services[pos as usize]).ip;
        // The answer mode and its cap come from the domain whose addresses go: the answering
        // domain's services, or the asked domain's backup addresses.
        let (mode, max_answers, addrs): (AnswerMode, u16, Vec<IpAddr>) = match outcome.fallback {
            Some(Fallback::Empty) => return None,
            Some(Fallback::BackupIp) => {
                let asked = &self.model.domains[d];
                (
                    asked.answer,
                    asked.max_answers,
                    asked.backup_ip.iter().copied().filter(family).collect(),
                )
            }
            None => (
                match outcome.pick {
                    OutcomePick::All => AnswerMode::All,
                    OutcomePick::Rotate(_) => AnswerMode::Rotate,
                },
                asked.max_answers,
                carried_items(outcome, |p| Some(ip(p)).filter(family)),
            ),
        };
        (!addrs.is_empty()).then_some(Answer {
            ttl: asked.ttl,
            mode,
            max_answers,
            addrs,
            names: Vec::new(),
        })
    }

    /// `outcome` as CNAME domain `domain`'s answer (`services` are its members by position):
    /// the names of the services it carries, in rotation order (repeated by weight under the
    /// ratio method, as addresses are), whatever the qtype (a CNAME domain has no backup
    /// addresses).
    fn cname_answer(
        &self,
        outcome: &Outcome,
        domain: &Domain,
        services: &[usize],
        qtype: u16,
    ) -> Option<Answer> {
        if outcome.fallback.is_some() {
            return None;
        }
        let name = |pos: u32| self.cname_target(services[pos as usize], qtype);
        names_answer(domain, carried_items(outcome, name))
    }

    /// Service `service`'s name as a CNAME domain's answer to a `qtype` query.
    fn cname_target(&self, service: usize, qtype: u16) -> Option<Arc<CnameTarget>> {
        let targets = self.spec.cname_targets.get(service)?.as_ref()?;
        Some(targets[usize::from(qtype == QTYPE_AAAA)].clone())
    }

    /// A round-robin domain's answer for a static view (0: the default view): the view's up
    /// services of the family, else the domain's, else its backup addresses.
    pub(super) fn static_answer(&self, d: usize, qtype: u16, view: u32) -> Option<Answer> {
        let domain = &self.model.domains[d];
        let family = |ip: &IpAddr| ip.is_ipv6() == (qtype == QTYPE_AAAA);
        // The answer addresses of `services` of this family, in order, each once (two services
        // may share an address on different ports).
        let disabled = self.domain_disabled(d);
        let answer = |services: &[ServiceId]| {
            if disabled {
                return None;
            }
            if domain.record_type == RecordType::Cname {
                let up = services.iter().filter(|s| self.up(s.index()));
                let names = up.filter_map(|s| self.cname_target(s.index(), qtype));
                return names_answer(domain, distinct(names));
            }
            let addrs = distinct(
                services
                    .iter()
                    .filter(|s| self.up(s.index()))
                    .map(|&s| self.model.service(s).ip)
                    .filter(family),
            );
            (!addrs.is_empty()).then_some(Answer {
                ttl: domain.ttl,
                mode: domain.answer,
                max_answers: domain.max_answers,
                addrs,
                names: Vec::new(),
            })
        };
        // View 0 (the default) is no domain view's number.
        if let Some(a) = domain
            .views
            .iter()
            .find(|(v, _)| v.number() == view)
            .and_then(|(_, n)| answer(n))
        {
            return Some(a);
        }
        if let Some(a) = answer(&domain.services) {
            return Some(a);
        }
        // Every service of the family is down: the backup addresses, if any.
        let configured = domain.members().any(|s| family(&self.model.service(s).ip));
        let backup: Vec<IpAddr> = domain.backup_ip.iter().copied().filter(family).collect();
        (configured && domain.down == Fallback::BackupIp && !backup.is_empty()).then_some(Answer {
            ttl: domain.ttl,
            mode: domain.answer,
            max_answers: domain.max_answers,
            addrs: backup,
            names: Vec::new(),
        })
    }
}

/// Addresses (or names) in order, each once.
fn distinct<T: PartialEq>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for a in items {
        if !out.contains(&a) {
            out.push(a);
        }
    }
    out
}

/// What a decided outcome's positions answer with, in rotation order: `item` of each position
/// (`None`: left out, e.g. another family), repeated by weight under the ratio method, else
/// each once.
fn carried_items<T: Clone + PartialEq>(
    outcome: &Outcome,
    item: impl Fn(u32) -> Option<T>,
) -> Vec<T> {
    match &outcome.pick {
        OutcomePick::Rotate(weights) if !weights.is_empty() => outcome
            .positions
            .iter()
            .zip(weights)
            .flat_map(|(&p, &w)| std::iter::repeat_n(item(p), w as usize))
            .flatten()
            .collect(),
        _ => distinct(outcome.positions.iter().filter_map(|&p| item(p))),
    }
}

/// A CNAME domain's answer of `names` (`None` without one).
fn names_answer(domain: &Domain, names: Vec<Arc<CnameTarget>>) -> Option<Answer> {
    (!names.is_empty()).then_some(Answer {
        ttl: domain.ttl,
        mode: domain.answer,
        max_answers: domain.max_answers,
        addrs: Vec::new(),
        names,
    })
}

/// NODATA in a view whose default view answers: an answer without addresses.
fn empty(base: Option<&Answer>, model: &Model, d: usize) -> Answer {
    let domain = &model.domains[d];
    Answer {
        ttl: base.map_or(domain.ttl, |b| b.ttl),
        mode: domain.answer,
        max_answers: domain.max_answers,
        addrs: Vec::new(),
        names: Vec::new(),
    }
}
