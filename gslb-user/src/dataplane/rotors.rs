//! `ROTOR` slots for the rotating answer sets a publish writes.
//!
//! The XDP program keeps a rotating set's turn in the per-CPU `ROTOR` array at the set's
//! `AnswerSet::rotor` slot. With one turn for everything, a set's turn advanced with every other
//! set's answers too: two round-robin names asked alternately each got the same address every
//! time. So every rotating set (name, qtype, view or LDNS view) gets a slot of its own:
//!
//! - A set keeps its slot from publish to publish for as long as it is published, so a
//!   republish (a health change, an RTT change) does not restart its rotation.
//! - A set no longer published frees its slot for the next new set. The slot may still be read
//!   by the previous generation until its entries are removed: at worst a packet of that
//!   generation and one of the new set take turns from one counter for a moment.
//! - Beyond [`ROTOR_SLOTS`] rotating sets, the further ones share slots, chosen by their key's
//!   hash (stable between publishes). Sets that share a slot rotate as all sets did before:
//!   interleaved queries for them can make them stick (e.g. two sets of two addresses asked
//!   alternately on one CPU each get one address). Their number is
//!   [`super::PublishStats::shared_rotors`], and a warning is logged when it changes; a shared
//!   set takes a slot of its own at the first publish that has one free.
//!
//! Sets of one record do not rotate (the publisher clears `ANSWER_ROTATE` on them) and take no
//! slot.

use std::collections::HashMap;

use gslb_common::{ANSWER_ROTATE, AnswerKey, AnswerSet, ROTOR_SLOTS};
use tracing::warn;

/// Which answer set: its `ANSWERS` key without the generation (name hash, qtype, view with
/// `RTT_OUTCOME_BIT` for an RTT outcome).
type SetId = (u64, u16, u32);

fn set_id(key: &AnswerKey) -> SetId {
    (key.name_hash, key.qtype, key.view)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    index: u16,
    /// This set's alone (else shared, by hash, with whatever other sets land there).
    owned: bool,
    /// The last [`RotorSlots::assign`] that saw the set.
    epoch: u64,
}

/// The slot of every rotating set published, and the slots free for new ones.
#[derive(Debug, Default)]
pub(super) struct RotorSlots {
    slots: HashMap<SetId, Slot>,
    /// Owned slots given back by sets no longer published.
    free: Vec<u16>,
    /// Slots never handed out: `fresh..ROTOR_SLOTS`.
    fresh: u32,
    epoch: u64,
    /// Sets sharing a slot after the last [`Self::assign`] (warned about when it changes).
    shared: usize,
}

impl RotorSlots {
    /// Gives each rotating set among `sets` (one publish, all of it) its slot: the one it had,
    /// else a free one, else a shared one. First frees the slots of the sets this publish no
    /// longer has. Returns how many sets share a slot.
    pub(super) fn assign(&mut self, keys: &[AnswerKey], sets: &mut [AnswerSet]) -> usize {
        debug_assert_eq!(keys.len(), sets.len());
        self.epoch += 1;
        let epoch = self.epoch;
        let rotating = |set: &AnswerSet| set.flags & ANSWER_ROTATE != 0;
        for (key, _) in keys.iter().zip(sets.iter()).filter(|(_, s)| rotating(s)) {
            if let Some(slot) = self.slots.get_mut(&set_id(key)) {
                slot.epoch = epoch;
            }
        }
        let free = &mut self.free;
        self.slots.retain(|_, slot| {
            let kept = slot.epoch == epoch;
            if !kept && slot.owned {
                free.push(slot.index);
            }
            kept
        });
        let mut shared = 0;
        for (key, set) in keys
            .iter()
            .zip(sets.iter_mut())
            .filter(|(_, s)| rotating(s))
        {
            let id = set_id(key);
            let slot = match self.slots.get(&id).copied() {
                Some(slot) if slot.owned => slot,
                // New, or shared until now: a slot of its own if one is free.
                known => match self.take() {
                    Some(index) => Slot {
                        index,
                        owned: true,
                        epoch,
                    },
                    None => {
                        shared += 1;
                        known.unwrap_or(Slot {
                            index: shared_index(id),
                            owned: false,
                            epoch,
                        })
                    }
                },
            };
            self.slots.insert(id, Slot { epoch, ..slot });
            set.rotor = slot.index;
        }
        if shared != self.shared && shared > 0 {
            warn!(
                shared,
                slots = ROTOR_SLOTS,
                "more rotating answer sets than rotation slots: some share one, and may stick when asked interleaved"
            );
        }
        self.shared = shared;
        shared
    }

    /// The slot the set under `key` (any generation) was given by the last [`Self::assign`].
    pub(super) fn published(&self, key: &AnswerKey) -> Option<u16> {
        self.slots.get(&set_id(key)).map(|s| s.index)
    }

    fn take(&mut self) -> Option<u16> {
        if let Some(index) = self.free.pop() {
            return Some(index);
        }
        (self.fresh < ROTOR_SLOTS).then(|| {
            self.fresh += 1;
            (self.fresh - 1) as u16
        })
    }
}

/// The slot a set shares when none is free: spread by a hash of its identity, the same at
/// every publish.
fn shared_index((hash, qtype, view): SetId) -> u16 {
    let h = (hash ^ (u64::from(view) << 16 | u64::from(qtype))).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> 48) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: u64, qtype: u16, view: u32) -> AnswerKey {
        AnswerKey {
            name_hash: name,
            qtype,
            view,
            generation: 7,
            ..AnswerKey::default()
        }
    }

    fn rotating() -> AnswerSet {
        AnswerSet {
            count: 2,
            flags: ANSWER_ROTATE,
            ..AnswerSet::default()
        }
    }

    /// One publish of `keys` (all rotating but those in `fixed`): the slots given, by key.
    fn publish(slots: &mut RotorSlots, keys: &[AnswerKey], fixed: &[usize]) -> (Vec<u16>, usize) {
        let mut sets: Vec<AnswerSet> = (0..keys.len())
            .map(|i| {
                if fixed.contains(&i) {
                    AnswerSet::default()
                } else {
                    rotating()
                }
            })
            .collect();
        let shared = slots.assign(keys, &mut sets);
        (sets.iter().map(|s| s.rotor).collect(), shared)
    }

    #[test]
    fn every_rotating_set_gets_its_own_slot_kept_across_publishes() {
        let mut slots = RotorSlots::default();
        // Two names, A and AAAA, two views and an LDNS view: all different sets.
        let keys = [
            key(1, 1, 0),
            key(1, 28, 0),
            key(1, 1, 3),
            key(2, 1, 0),
            key(2, 1, 3 | gslb_common::RTT_OUTCOME_BIT),
        ];
        let (first, shared) = publish(&mut slots, &keys, &[]);
        assert_eq!(shared, 0);
        let mut distinct = first.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), keys.len(), "distinct slots: {first:?}");
        // The next publish (another generation, another order) keeps each set's slot.
        let next: Vec<AnswerKey> = keys
            .iter()
            .rev()
            .map(|k| AnswerKey {
                generation: 8,
                ..*k
            })
            .collect();
        let (again, _) = publish(&mut slots, &next, &[]);
        let again: Vec<u16> = again.into_iter().rev().collect();
        assert_eq!(again, first);
        assert_eq!(slots.published(&keys[2]), Some(first[2]));
    }

    #[test]
    fn sets_that_do_not_rotate_take_no_slot_and_gone_sets_free_theirs() {
        let mut slots = RotorSlots::default();
        let keys = [key(1, 1, 0), key(2, 1, 0), key(3, 1, 0)];
        let (first, _) = publish(&mut slots, &keys, &[1]);
        assert_eq!(slots.published(&keys[1]), None, "not rotating");
        assert_eq!(first[1], 0, "left as it was");
        assert_ne!(first[0], first[2]);
        // Set 0 goes, set 4 comes: it takes the slot set 0 gave back.
        let (second, _) = publish(&mut slots, &[key(3, 1, 0), key(4, 1, 0)], &[]);
        assert_eq!(second, [first[2], first[0]]);
        assert_eq!(slots.published(&keys[0]), None);
    }

    #[test]
    fn beyond_the_slots_sets_share_until_one_is_free() {
        let mut slots = RotorSlots::default();
        let n = u64::from(ROTOR_SLOTS) + 3;
        let keys: Vec<AnswerKey> = (0..n).map(|i| key(i, 1, 0)).collect();
        let (first, shared) = publish(&mut slots, &keys, &[]);
        assert_eq!(shared, 3);
        let mut owned = first[..ROTOR_SLOTS as usize].to_vec();
        owned.sort_unstable();
        owned.dedup();
        assert_eq!(
            owned.len(),
            ROTOR_SLOTS as usize,
            "the first sets own every slot"
        );
        // Stable while nothing is free.
        let (again, shared) = publish(&mut slots, &keys, &[]);
        assert_eq!((again.clone(), shared), (first.clone(), 3));
        // Three sets gone: the three sharing sets get their slots.
        let (last, shared) = publish(&mut slots, &keys[3..], &[]);
        assert_eq!(shared, 0);
        assert_eq!(&last[..last.len() - 3], &first[3..ROTOR_SLOTS as usize]);
        let mut mine = last[last.len() - 3..].to_vec();
        mine.sort_unstable();
        let mut freed = first[..3].to_vec();
        freed.sort_unstable();
        assert_eq!(mine, freed);
    }
}
