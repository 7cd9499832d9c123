//! The [`Compiler`]: compilations one after another, keeping in a [`Cache`] what stays valid
//! between them (the partition, the signatures and their outcomes, view numbers, entries).

use ahash::AHashMap as HashMap;
use std::sync::Arc;

use super::choices::ChoiceCache;
use super::classes::{ClassKey, ClientClasses};
use super::interner::Interner;
use super::signatures::{Outcome, Signature};
use super::snapshot::EntryMemo;
use super::views::Columns;
use super::{
    Answer, Inputs, Job, LdnsRtt, OverBudget, RTT_ENTRY_BUDGET, Segments, Snapshot, Source, Spec,
    ViewPrefixes,
};
use crate::location::db::LocationDb;
use crate::policy::ServiceState;

/// Compiles snapshots, keeping between compilations what stays valid (see the module docs).
pub struct Compiler {
    /// The last configuration's spec: kept while the configuration stays.
    spec: Option<Arc<Spec>>,
    cache: Option<Cache>,
    rtt_budget: usize,
    /// Rows of a slot the RTT method decides whatever the place are decided by its rule alone
    /// ([`crate::policy::RttFirst`]), not by the whole engine; off only to compare the two.
    rtt_rule: bool,
}

impl Default for Compiler {
    fn default() -> Self {
        Compiler::with_rtt_budget(RTT_ENTRY_BUDGET)
    }
}

/// Columns, and the service states and disabled domains they were made for.
pub(super) type ColumnsMemo = ((Vec<ServiceState>, Vec<bool>), Columns);

/// What a compilation leaves for the next one, valid while the configuration (the
/// compiler's spec), the location database and the RTT rows stay the same.
pub(super) struct Cache {
    pub(super) locations: usize,
    pub(super) rtt: Arc<Vec<LdnsRtt>>,
    /// Domains answered by RTT were left to the responder (over the budget).
    pub(super) rtt_to_responder: bool,
    pub(super) partition: ClientClasses,
    /// The last compilation's columns, with the service states and disabled domains they were
    /// made for.
    pub(super) columns: Option<ColumnsMemo>,
    pub(super) signatures: Interner<Signature>,
    pub(super) outcomes: Interner<Outcome>,
    /// (signature, projected class key) → outcome, for LDNS views.
    pub(super) decided: HashMap<(u32, ClassKey), u32>,
    /// Signature → outcome by place (or by family, for signatures that do not read the
    /// place; `u32::MAX`: not decided yet), for views: dense, as every class reads it.
    pub(super) dense: HashMap<u32, Vec<u32>>,
    /// Signature → outcome by RTT row (`u32::MAX`: not decided yet), for outcomes that depend
    /// on the row alone: dense, as there are as many rows as classes with one.
    pub(super) rtt_dense: HashMap<u32, Vec<u32>>,
    /// The RTT choices of the classes, and what they are made of.
    pub(super) choices: ChoiceCache,
    /// Each class's view and LDNS view in the last snapshot.
    pub(super) class_views: Vec<(u32, u32)>,
    /// Round-robin answers (0: none), interned so that their numbers stay put between
    /// compilations.
    pub(super) static_answers: Interner<Option<Answer>>,
    /// Per entry: what its answers were made from (its value in each view and LDNS view) and
    /// the entry made; reused while the values stay, so a health change rebuilds only the
    /// entries it touched.
    pub(super) entry_memo: EntryMemo,
    /// The last snapshot's merged segments and trie prefixes: the same while `class_views` is.
    pub(super) merged: Option<(Arc<Segments>, Arc<ViewPrefixes>)>,
    pub(super) next_view: u32,
    pub(super) next_rtt_view: u32,
}

impl Cache {
    /// The rows the caller says changed since the cached rows ([`super::RttChanges`]), when it says
    /// so of these rows, with their prefixes unchanged; `None`: they must be compared.
    fn hinted<'i>(&self, inputs: &'i Inputs<'_>) -> Option<&'i [usize]> {
        let changes = inputs.rtt_changes.as_ref()?;
        let (old, new) = (&self.rtt, &inputs.rtt);
        (Arc::ptr_eq(old, &changes.since)
            && old.len() == new.len()
            && changes
                .rows
                .iter()
                .all(|&r| r < new.len() && old[r].ldns == new[r].ldns))
        .then_some(&changes.rows[..])
    }

    /// The RTT rows whose RTTs differ in `rtt` (same prefixes as the cached rows), by row
    /// number (1-based), with the decisions that read them forgotten; empty when none differ.
    /// `hinted`: the rows that may differ, when the caller said ([`Cache::hinted`]).
    fn rtt_changed(&mut self, rtt: &Arc<Vec<LdnsRtt>>, hinted: Option<&[usize]>) -> Vec<bool> {
        if Arc::ptr_eq(&self.rtt, rtt) {
            return Vec::new();
        }
        // Row numbers (0-based) whose RTTs differ.
        let rows: Vec<usize> = match hinted {
            Some(rows) => {
                debug_assert!(
                    self.rtt
                        .iter()
                        .zip(rtt.iter())
                        .enumerate()
                        .all(|(i, (a, b))| a.rtt_us == b.rtt_us || rows.contains(&i)),
                    "RttChanges lists every row that changed"
                );
                rows.iter()
                    .copied()
                    .filter(|&r| self.rtt[r].rtt_us != rtt[r].rtt_us)
                    .collect()
            }
            None => (self.rtt.iter().zip(rtt.iter()))
                .enumerate()
                .filter(|(_, (a, b))| a.rtt_us != b.rtt_us)
                .map(|(i, _)| i)
                .collect(),
        };
        self.rtt = rtt.clone();
        if rows.is_empty() {
            return Vec::new();
        }
        let mut changed = vec![false; rtt.len() + 1];
        for &r in &rows {
            changed[r + 1] = true;
        }
        for by_row in self.rtt_dense.values_mut() {
            for &r in &rows {
                if let Some(o) = by_row.get_mut(r + 1) {
                    *o = u32::MAX;
                }
            }
        }
        self.decided
            .retain(|(_, key), _| !changed[key.rtt as usize]);
        changed
    }
}

impl Compiler {
    /// A compiler that gives LDNS views at most `entries` answer entries.
    pub fn with_rtt_budget(entries: usize) -> Compiler {
        Compiler {
            spec: None,
            cache: None,
            rtt_budget: entries,
            rtt_rule: true,
        }
    }

    /// A compiler that asks the engine for every decision, the RTT rule's too: what the rule
    /// is compared with (its tests, and the scale bench in the same run).
    pub fn engine_only() -> Compiler {
        Compiler {
            rtt_rule: false,
            ..Compiler::default()
        }
    }

    /// The answers of `source` (a configuration's) under `inputs`, reusing what the previous
    /// compilation left when only service states changed. While `source` holds the same model
    /// `Arc` (the world's), the spec is known to hold without comparing the models.
    pub fn compile(&mut self, source: impl Into<Source>, inputs: &Inputs<'_>) -> Snapshot {
        let spec = self.spec(source.into());
        let locations = inputs
            .locations
            .map_or(0, |db| std::ptr::from_ref::<LocationDb>(db) as usize);
        // The partition holds while the RTT rows keep their prefixes: rows whose RTTs changed
        // only have their decisions taken again.
        let hinted = self.cache.as_ref().and_then(|c| c.hinted(inputs));
        let reusable = self.cache.as_ref().is_some_and(|c| {
            c.locations == locations
                && (Arc::ptr_eq(&c.rtt, &inputs.rtt)
                    || hinted.is_some()
                    || (c.rtt.len() == inputs.rtt.len()
                        && c.rtt
                            .iter()
                            .zip(inputs.rtt.iter())
                            .all(|(a, b)| a.ldns == b.ldns)))
        });
        let mut rtt_to_responder =
            reusable && self.cache.as_ref().is_some_and(|c| c.rtt_to_responder);
        let mut cache = self.cache.take().filter(|_| reusable);
        let mut changed_rows = Vec::new();
        if let Some(c) = cache.as_mut() {
            changed_rows = c.rtt_changed(&inputs.rtt, hinted);
        }
        loop {
            let mut job = Job::new(inputs, rtt_to_responder, &spec);
            job.rtt_budget = self.rtt_budget;
            job.rtt_rule = self.rtt_rule;
            job.changed_rows = std::mem::take(&mut changed_rows);
            let mut fresh = cache.take().unwrap_or_else(|| Cache {
                locations,
                rtt: inputs.rtt.clone(),
                rtt_to_responder,
                partition: job.client_classes(),
                columns: None,
                signatures: Interner::new(),
                outcomes: Interner::new(),
                decided: HashMap::new(),
                dense: HashMap::new(),
                rtt_dense: HashMap::new(),
                choices: ChoiceCache::default(),
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
                    // Decided again from scratch, without the RTT columns.
                    cache = None;
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

    /// The spec of `source`: the last one while the configuration stays, else a new one (and
    /// the cache, made for another configuration, is dropped).
    fn spec(&mut self, source: Source) -> Arc<Spec> {
        match &self.spec {
            Some(spec) if spec.is_of(&source) => spec.clone(),
            _ => {
                let spec = Arc::new(Spec::new(source));
                self.spec = Some(spec.clone());
                self.cache = None;
                spec
            }
        }
    }
}
