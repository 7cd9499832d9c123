//! Stage 4 (RTT dimension): the choices of the LDNS views. A signature answered by RTT (an
//! *RTT slot*) has few outcomes; each gets a small index, stable while the compiler's cache
//! lives, and a class with an RTT row gets a *choice vector*: per slot, the index of the
//! outcome for its row. Distinct choice vectors are the LDNS views, and [`RttChoices`] is what
//! the fast path's `RTT_CHOICE` map and the responder read: LDNS view × slot → outcome index.
//! Each domain answered by RTT then has one answer per outcome index of its slot
//! ([`super::DomainEntry::rtt_answers`]).

use ahash::AHashMap as HashMap;
use std::sync::Arc;

use gslb_common::{RTT_CHOICE_WIDTH, RttChoice};

use super::classes::ClientClasses;
use super::interner::Interner;
use super::views::ViewNumbers;

/// Most outcomes one RTT slot can have: its indexes are bytes.
const MAX_OUTCOMES: usize = 256;

/// Garbage (vectors no class holds any more) tolerated beyond the live ones before the
/// vectors are numbered afresh.
const GARBAGE_SLACK: usize = 4096;

/// By LDNS view and RTT slot: the index of the slot's outcome (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RttChoices {
    /// RTT slots (the signatures answered by RTT).
    pub slots: usize,
    /// `table[rtt_view * slots + slot]`; LDNS view 0 (no RTT row) is all zero.
    pub table: Vec<u8>,
}

impl RttChoices {
    /// The outcome index of `slot` for clients of LDNS view `rtt_view` (`None`: no such view
    /// or slot, so the view's answer stands).
    pub fn choice(&self, rtt_view: u32, slot: u32) -> Option<u8> {
        if rtt_view == 0 || slot as usize >= self.slots {
            return None;
        }
        self.table
            .get(rtt_view as usize * self.slots + slot as usize)
            .copied()
    }

    /// `RTT_CHOICE` pages per LDNS view.
    pub fn pages(&self) -> usize {
        self.slots.div_ceil(RTT_CHOICE_WIDTH)
    }

    /// LDNS views, 0 (none) included.
    pub fn views(&self) -> usize {
        self.table.len().checked_div(self.slots).unwrap_or(0)
    }

    /// Page `page` of LDNS view `rtt_view`, as `RTT_CHOICE` holds it (slots past the last are
    /// 0).
    pub fn page(&self, rtt_view: u32, page: usize) -> RttChoice {
        let mut choice = RttChoice::default();
        let start = rtt_view as usize * self.slots + page * RTT_CHOICE_WIDTH;
        let end = (rtt_view as usize + 1) * self.slots;
        let bytes = &self.table[start.min(end)..(start + RTT_CHOICE_WIDTH).min(end)];
        choice.outcomes[..bytes.len()].copy_from_slice(bytes);
        choice
    }
}

/// What the choices are made of, kept between compilations.
pub(super) struct ChoiceCache {
    /// Choice vectors; 0: the empty one (no RTT row).
    pub(super) vectors: Interner<Vec<u8>>,
    /// By class: its choice vector in the last compilation.
    pub(super) by_class: Vec<u32>,
    /// The signature of each RTT slot in the last compilation.
    slot_sigs: Vec<u32>,
    /// By signature: its outcomes (ids of the compiler's outcome interner), by index.
    local: HashMap<u32, Interner<u32>>,
    /// Classes whose vector this compilation made afresh (with `kept`: the classes whose
    /// row changed).
    pub(super) made: Vec<u32>,
    /// Whether the classes' vectors were kept, but those of `made`.
    kept: bool,
    /// The last table, reused while no class's vector nor number changed.
    last: Option<Arc<RttChoices>>,
}

impl Default for ChoiceCache {
    fn default() -> Self {
        ChoiceCache {
            vectors: Interner::with(Vec::new()),
            by_class: Vec::new(),
            slot_sigs: Vec::new(),
            local: HashMap::new(),
            made: Vec::new(),
            kept: false,
            last: None,
        }
    }
}

impl ChoiceCache {
    /// Starts a compilation whose RTT slots are `slot_sigs`: whether the classes' cached
    /// vectors still hold (the same classes and slots, `incremental`), so that only classes
    /// whose row changed are decided again.
    pub(super) fn begin(&mut self, slot_sigs: &[u32], classes: usize, incremental: bool) -> bool {
        let keep = incremental && self.slot_sigs == slot_sigs && self.by_class.len() == classes;
        if !keep {
            self.slot_sigs = slot_sigs.to_vec();
        }
        self.made.clear();
        self.kept = keep;
        keep
    }

    /// The index of outcome `outcome` of signature `sig`; `None` past [`MAX_OUTCOMES`].
    pub(super) fn index(&mut self, sig: u32, outcome: u32) -> Option<u8> {
        let local = self.local.entry(sig).or_insert_with(Interner::new);
        let index = local.id(outcome) as usize;
        (index < MAX_OUTCOMES).then_some(index as u8)
    }

    /// Outcomes of signature `sig`, by index.
    pub(super) fn outcomes_of(&self, sig: u32) -> &[u32] {
        self.local.get(&sig).map_or(&[], |l| l.values())
    }

    /// How many outcomes signature `sig` has.
    pub(super) fn outcomes(&self, sig: u32) -> usize {
        self.outcomes_of(sig).len()
    }

    /// Ends the compilation's choices: keeps each class's vector (`class_vectors`' second
    /// field), numbering the vectors afresh when too many are no class's any more (each RTT
    /// change leaves some behind). Returns the distinct vectors in use but the empty one.
    pub(super) fn end(&mut self, class_vectors: &mut [(u32, u32)]) -> usize {
        let mut live = vec![false; self.vectors.len()];
        for &(_, r) in class_vectors.iter() {
            live[r as usize] = true;
        }
        let in_use = live.iter().skip(1).filter(|&&l| l).count();
        if self.vectors.len() > 2 * in_use + GARBAGE_SLACK {
            let mut fresh: Interner<Vec<u8>> = Interner::with(Vec::new());
            let mut renumber = vec![u32::MAX; self.vectors.len()];
            renumber[0] = 0;
            for (_, r) in class_vectors.iter_mut() {
                if renumber[*r as usize] == u32::MAX {
                    renumber[*r as usize] = fresh.id(self.vectors[*r].clone());
                }
                *r = renumber[*r as usize];
            }
            self.vectors = fresh;
        }
        self.by_class.clear();
        self.by_class.extend(class_vectors.iter().map(|v| v.1));
        in_use
    }

    /// The table of the LDNS views the classes were numbered into: the last one (the same
    /// `Arc`, which the publish then skips) when neither the vectors nor the numbers changed;
    /// the last one patched when only the vectors of classes whose row changed did (an RTT
    /// change: their LDNS views kept their numbers, and a number's classes share one vector,
    /// so each such view's row is its changed class's vector), instead of made again from
    /// every class.
    pub(super) fn table(
        &mut self,
        partition: &ClientClasses,
        numbers: &ViewNumbers,
        slots: usize,
    ) -> Arc<RttChoices> {
        let table = match &self.last {
            Some(last) if self.kept && numbers.unchanged && last.slots == slots => {
                if self.made.is_empty() {
                    return last.clone();
                }
                let mut table = RttChoices::clone(last);
                for &c in &self.made {
                    let r = numbers.class_views[c as usize].1 as usize;
                    if r != 0 {
                        let vector = &self.vectors[self.by_class[c as usize]];
                        table.table[r * slots..(r + 1) * slots].copy_from_slice(vector);
                    }
                }
                debug_assert_eq!(table, self.make_table(partition, numbers, slots));
                table
            }
            _ => self.make_table(partition, numbers, slots),
        };
        let table = Arc::new(table);
        self.last = Some(table.clone());
        table
    }

    fn make_table(
        &self,
        partition: &ClientClasses,
        numbers: &ViewNumbers,
        slots: usize,
    ) -> RttChoices {
        let mut table = vec![0u8; (numbers.rtt_views + 1) * slots];
        if slots > 0 {
            for (c, &(_, r)) in numbers.class_views.iter().enumerate() {
                if r != 0 {
                    let vector = &self.vectors[self.by_class[c]];
                    let at = r as usize * slots;
                    table[at..at + slots].copy_from_slice(vector);
                }
            }
        }
        debug_assert_eq!(numbers.class_views.len(), partition.classes.len());
        RttChoices { slots, table }
    }
}
