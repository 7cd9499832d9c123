//! Stage 4: each class's answer vectors (one value per column: a round-robin answer or a
//! signature's outcome), the vectors numbered as views and LDNS views (numbers stay put
//! between compilations while the partition does), and neighbouring segments of one view
//! merged into the trie's prefixes.

use ahash::AHashMap as HashMap;
use std::collections::BTreeMap;
use std::sync::Arc;

use gslb_common::{DEFAULT_VIEW, ViewValue};
use ipnet::IpNet;

use super::choices::ChoiceCache;
use super::classes::ClientClasses;
use super::interner::Interner;
use super::kinds::Kind;
use super::partition::{Segments, V4_FIRST, V4_LAST, prefixes_of};
use super::signatures::{CacheParts, ClientAt, RttRule, Signature};
use super::{Answer, Job, OverBudget, ViewPrefixes};

/// What fills one column of an answer vector.
#[derive(Clone, Copy, Debug)]
pub(super) enum Column {
    /// A round-robin entry (index into the entries), by static view.
    Static(usize),
    /// A signature.
    Decided(u32),
}

/// The columns of the answer vectors: round-robin entries, then signatures.
pub(super) struct Columns {
    pub(super) columns: Vec<Column>,
    /// The columns of signatures answered by RTT, in RTT slot order: the LDNS views' choices
    /// hold these.
    pub(super) rtt_columns: Vec<usize>,
    /// By entry ([`Job`]'s `entries`): its column.
    pub(super) entry_column: Vec<usize>,
    /// Distinct signatures among the columns.
    pub(super) signatures: usize,
    /// A representative entry per signature: the engine decides for it.
    pub(super) representative: HashMap<u32, (usize, u16)>,
}

/// Each class's vectors: the view's (every column, no RTT) and the LDNS view's (the choices of
/// the RTT slots with the class's RTT row, numbered in [`ChoiceCache::vectors`]).
pub(super) struct ClassVectors {
    pub(super) view_vectors: Interner<Vec<u32>>,
    /// By class: (view vector, choice vector; 0: no RTT row).
    pub(super) by_class: Vec<(u32, u32)>,
}

/// The view and LDNS view numbers of the classes.
pub(super) struct ViewNumbers {
    /// By class: (view, LDNS view).
    pub(super) class_views: Vec<(u32, u32)>,
    /// Views, the default included.
    pub(super) views: usize,
    pub(super) rtt_views: usize,
    /// Every class kept the numbers of the previous compilation.
    pub(super) unchanged: bool,
}

impl Job<'_> {
    /// Takes the entries and the signature interner (signatures keep their numbers between
    /// compilations); gives one column per round-robin entry and per distinct signature.
    pub(super) fn columns(&self, signatures: &mut Interner<Signature>) -> Columns {
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
                        if signatures[id].answers_by_rtt() {
                            rtt_columns.push(columns.len());
                        }
                        columns.push(Column::Decided(id));
                        columns.len() - 1
                    })
                }
            };
            entry_column.push(column);
        }
        let mut representative: HashMap<u32, (usize, u16)> = HashMap::new();
        for (e, &(d, qtype)) in self.entries.iter().enumerate() {
            if let Column::Decided(id) = columns[entry_column[e]] {
                representative.entry(id).or_insert((d, qtype));
            }
        }
        Columns {
            columns,
            rtt_columns,
            entry_column,
            signatures: sig_column.len(),
            representative,
        }
    }

    /// Takes the partition and the columns; gives each class's view vector and choice
    /// vector, deciding (through `parts`) what is not known yet, numbering round-robin answers
    /// in `static_answers` and choices in `choices` (whose vectors of classes whose row and
    /// slots did not change are kept when `incremental`). Fails when the answers by RTT would
    /// take more entries than the budget.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn class_vectors(
        &mut self,
        partition: &ClientClasses,
        columns: &Columns,
        signatures: &Interner<Signature>,
        parts: &mut CacheParts<'_>,
        static_answers: &mut Interner<Option<Answer>>,
        choices: &mut ChoiceCache,
        incremental: bool,
    ) -> Result<ClassVectors, OverBudget> {
        let classes = &partition.classes;
        let mut static_memo: HashMap<(usize, u32), u32> = HashMap::new();
        let mut view_vectors: Interner<Vec<u32>> = Interner::new();
        // By the class's key without its row: its view vector, once made.
        let mut by_view_key: Vec<u32> = vec![u32::MAX; partition.view_keys];
        let mut class_vectors: Vec<(u32, u32)> = Vec::with_capacity(classes.len());
        let slot_sigs: Vec<u32> = columns
            .rtt_columns
            .iter()
            .map(|&c| match columns.columns[c] {
                Column::Decided(sig) => sig,
                Column::Static(_) => unreachable!("RTT columns are signatures"),
            })
            .collect();
        let keep = choices.begin(&slot_sigs, classes.len(), incremental);
        // Slots whose rows the RTT method decides whatever the place: by its rule alone.
        let mut rules: Vec<Option<RttRule>> = slot_sigs
            .iter()
            .map(|sig| self.rtt_rule(columns.representative[sig]))
            .collect();
        let pages = slot_sigs.len().div_ceil(gslb_common::RTT_CHOICE_WIDTH);
        for (class, &(key, addr)) in classes.iter().enumerate() {
            let place = partition.place_ids[class];
            let view_key = partition.view_ids[class] as usize;
            let client = ClientAt::new(addr, self.inputs.locations);
            // Signature `sig`'s outcome for this class, with its RTT row or without.
            let outcome = |job: &mut Self, parts: &mut CacheParts<'_>, sig: u32, with_rtt: bool| {
                let representative = columns.representative[&sig];
                job.outcome(
                    parts,
                    sig,
                    &signatures[sig],
                    representative,
                    key,
                    place,
                    &client,
                    with_rtt,
                )
            };
            let view_vector = match by_view_key[view_key] {
                u32::MAX => {
                    let mut vector = Vec::with_capacity(columns.columns.len());
                    for &column in &columns.columns {
                        vector.push(match column {
                            Column::Static(e) => {
                                let (d, qtype) = self.entries[e];
                                *static_memo.entry((e, key.view)).or_insert_with(|| {
                                    static_answers.id(self.static_answer(d, qtype, key.view))
                                })
                            }
                            Column::Decided(sig) => outcome(self, parts, sig, false),
                        });
                    }
                    let id = view_vectors.id(vector);
                    by_view_key[view_key] = id;
                    id
                }
                v => v,
            };
            let row_changed = self.changed_rows.get(key.rtt as usize) == Some(&true);
            let rtt_vector = if key.rtt == 0 || slot_sigs.is_empty() {
                0
            } else if keep && !row_changed {
                choices.by_class[class]
            } else {
                let rtt = &self.inputs.rtt[key.rtt as usize - 1].rtt_us;
                let mut vector = Vec::with_capacity(slot_sigs.len());
                for (&sig, rule) in slot_sigs.iter().zip(&mut rules) {
                    let by_rule = rule
                        .as_mut()
                        .and_then(|r| r.choice(parts.outcomes, rtt, |o| choices.index(sig, o)));
                    let index = match by_rule {
                        Some(index) => {
                            self.decisions += 1;
                            self.rtt_rule_decisions += 1;
                            index
                        }
                        None => {
                            let o = outcome(self, parts, sig, true);
                            choices.index(sig, o)
                        }
                    };
                    let Some(index) = index else {
                        return Err(OverBudget {
                            ldns_views: choices.vectors.len() - 1,
                            entries: usize::MAX,
                        });
                    };
                    vector.push(index);
                }
                let id = choices.vectors.id(vector);
                choices.made.push(class as u32);
                // Bail out early: every new vector is an LDNS view's pages in both parities.
                let entries = 2 * (choices.vectors.len() - 1) * pages;
                if entries > self.rtt_budget {
                    return Err(OverBudget {
                        ldns_views: choices.vectors.len() - 1,
                        entries,
                    });
                }
                id
            };
            class_vectors.push((view_vector, rtt_vector));
        }
        let ldns_views = choices.end(&mut class_vectors);
        let outcome_entries = columns
            .entry_column
            .iter()
            .filter_map(|c| columns.rtt_columns.iter().position(|r| r == c))
            .map(|slot| choices.outcomes(slot_sigs[slot]))
            .sum::<usize>();
        let entries = 2 * ldns_views * pages + outcome_entries;
        if entries > self.rtt_budget {
            return Err(OverBudget {
                ldns_views,
                entries,
            });
        }
        Ok(ClassVectors {
            view_vectors,
            by_class: class_vectors,
        })
    }
}

/// Takes the classes' vectors and, when `incremental`, the previous compilation's numbers
/// (`cached_views`, replaced by the new ones); gives each class its view and LDNS view. A class
/// keeps its view while its vectors stay those of the other classes of that view; a view whose
/// classes now differ splits, the part with the most segments keeping the number.
pub(super) fn number_views(
    partition: &ClientClasses,
    vectors: &ClassVectors,
    incremental: bool,
    cached_views: &mut Vec<(u32, u32)>,
    next_view: &mut u32,
    next_rtt_view: &mut u32,
) -> ViewNumbers {
    let class_vectors = &vectors.by_class;
    let seg_class = &partition.seg_class;
    let class_segments = &partition.class_segments;
    let previous: Vec<(u32, u32)> = if incremental && cached_views.len() == partition.classes.len()
    {
        std::mem::take(cached_views)
    } else {
        Vec::new()
    };
    let (class_views, views, rtt_views) = if previous.is_empty() {
        let (views, rtt_views, class_views) =
            number_fresh(seg_class, class_segments, class_vectors);
        *next_view = views as u32;
        *next_rtt_view = rtt_views as u32 + 1;
        (class_views, views, rtt_views)
    } else {
        number_stable(
            class_segments,
            class_vectors,
            &previous,
            next_view,
            next_rtt_view,
        )
    };
    // `cached_views` was taken into `previous` above.
    let unchanged = !previous.is_empty() && previous == class_views;
    cached_views.clone_from(&class_views);
    ViewNumbers {
        class_views,
        views,
        rtt_views,
        unchanged,
    }
}

/// Takes the partition and the view numbers; gives the merged segments and their prefixes,
/// reusing the previous compilation's (`merged`, replaced by the new ones) when no class
/// changed its numbers.
pub(super) fn merged_views(
    partition: &ClientClasses,
    numbers: &ViewNumbers,
    merged: &mut Option<(Arc<Segments>, Arc<ViewPrefixes>)>,
) -> (Arc<Segments>, Arc<ViewPrefixes>) {
    let (segments, prefixes) = match merged.take().filter(|_| numbers.unchanged) {
        Some(m) => m,
        None => {
            let (segments, views) = merge(
                &partition.points,
                &partition.seg_class,
                &numbers.class_views,
            );
            (Arc::new(segments), Arc::new(views))
        }
    };
    *merged = Some((segments.clone(), prefixes.clone()));
    (segments, prefixes)
}

/// Neighbouring segments of one (view, LDNS view) merged, and the trie's prefixes for them.
pub(super) fn merge(
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
        // The scope is the prefix's own length: `Segments::block_scope` of every address in it.
        views_out.extend(nets.iter().map(|n| {
            (
                *n,
                ViewValue {
                    view,
                    rtt_view,
                    scope: n.prefix_len(),
                    reserved: [0; 3],
                },
            )
        }));
    }
    (segments, views_out)
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
    let views = renumber(
        class_segments,
        class_vectors.iter().map(|v| v.0),
        previous.iter().map(|p| p.0),
        next_view,
        false,
    );
    let rtt_views = renumber(
        class_segments,
        class_vectors.iter().map(|v| v.1),
        previous.iter().map(|p| p.1),
        next_rtt_view,
        true,
    );
    (
        views.into_iter().zip(rtt_views).collect(),
        *next_view as usize,
        (*next_rtt_view - 1) as usize,
    )
}

/// One dimension of [`number_stable`]: each class's new number from its vector and previous
/// number. Most previous numbers keep one vector (a health change splits a few views, an RTT
/// change a few LDNS views), so only those whose classes now differ are split into parts.
fn renumber(
    class_segments: &[u32],
    vectors: impl Iterator<Item = u32> + Clone,
    previous: impl Iterator<Item = u32> + Clone,
    next: &mut u32,
    keep_zero_only_for_zero: bool,
) -> Vec<u32> {
    // By previous number: the vector of its first class, and whether another class of it has
    // another vector (or, for LDNS views, number 0 is given a vector other than 0).
    let mut first = vec![u32::MAX; *next as usize];
    let mut split = vec![false; *next as usize];
    for (v, p) in vectors.clone().zip(previous.clone()) {
        let p = p as usize;
        if p >= first.len() {
            first.resize(p + 1, u32::MAX);
            split.resize(p + 1, false);
        }
        if first[p] == u32::MAX {
            first[p] = v;
        }
        split[p] |= first[p] != v || (keep_zero_only_for_zero && p == 0 && v != 0);
    }
    // Per split previous number (few: not a list per number), in order: its parts (vector,
    // segments, new number).
    let mut parts: BTreeMap<u32, Vec<Part>> = BTreeMap::new();
    for (c, (v, p)) in vectors.clone().zip(previous.clone()).enumerate() {
        if split[p as usize] {
            add(&mut parts, p, v, class_segments[c] as usize);
        }
    }
    assign(&mut parts, next, keep_zero_only_for_zero);
    vectors
        .zip(previous)
        .map(|(v, p)| {
            if split[p as usize] {
                parts[&p]
                    .iter()
                    .find(|part| part.vector == v)
                    .expect("every class's part was counted")
                    .number
            } else {
                p
            }
        })
        .collect()
}

/// The classes of one previous number that now have one vector.
#[derive(Clone, Copy)]
struct Part {
    vector: u32,
    segments: usize,
    number: u32,
}

fn add(parts: &mut BTreeMap<u32, Vec<Part>>, prev: u32, vector: u32, segments: usize) {
    let list = parts.entry(prev).or_default();
    match list.iter_mut().find(|p| p.vector == vector) {
        Some(p) => p.segments += segments,
        None => list.push(Part {
            vector,
            segments,
            number: u32::MAX,
        }),
    }
}

/// The biggest part of each previous number keeps it (ties: the smaller vector); the others
/// get new numbers, in order of (previous number, vector). With `keep_zero_only_for_zero`
/// (LDNS views, whose 0 means "no RTT row") only vector 0 keeps number 0.
fn assign(parts: &mut BTreeMap<u32, Vec<Part>>, next: &mut u32, keep_zero_only_for_zero: bool) {
    for (&prev, list) in parts.iter_mut() {
        list.sort_unstable_by_key(|p| p.vector);
        let mut best = 0;
        for (i, p) in list.iter().enumerate() {
            if p.segments > list[best].segments {
                best = i;
            }
        }
        for (i, p) in list.iter_mut().enumerate() {
            let keeps = i == best && (!keep_zero_only_for_zero || prev != 0 || p.vector == 0);
            p.number = if keeps {
                prev
            } else {
                let n = *next;
                *next += 1;
                n
            };
        }
    }
}
