//! The responder's rotation turns: one per answer set, as the fast path keeps one per set in
//! its `ROTOR` slots, so that queries for other names, types or views never advance a set's
//! turn (with one turn for everything, two round-robin names asked alternately each got the
//! same address every time, and ratio lost its proportions).
//!
//! A compiled entry has a turn per view answer and per LDNS view answer; a domain the engine
//! decides per query has one per qtype. A republish builds new tables; [`Turns::carry`] hands
//! each set's turn over to the same set in them (same name, qtype and view), so a rotation
//! goes on instead of restarting at the first address, which a domain asked less often than
//! the republishes come would otherwise answer every time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::compile::DomainEntry;

/// Rotation turns, one per answer set of a table; advanced lock-free by the queries.
#[derive(Debug)]
pub(super) struct Turns(Box<[AtomicU32]>);

impl Turns {
    pub(super) fn new(sets: usize) -> Turns {
        Turns((0..sets).map(|_| AtomicU32::new(0)).collect())
    }

    /// Set `i`'s turn, which then moves on.
    pub(super) fn next(&self, i: usize) -> u32 {
        self.0[i].fetch_add(1, Ordering::Relaxed)
    }

    /// Set `i`'s turn, to take with `fetch_add(1, Relaxed)`.
    pub(super) fn at(&self, i: usize) -> &AtomicU32 {
        &self.0[i]
    }

    /// Set `i` continues from set `j` of `old`. (Queries still running on the old table may
    /// advance it once more meanwhile; one turn is lost at most.)
    pub(super) fn carry(&self, i: usize, old: &Turns, j: usize) {
        self.0[i].store(old.0[j].load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

/// The sets of a compiled entry in turn order: each view's answer, then each RTT outcome's.
pub(super) fn entry_sets(entry: &DomainEntry) -> usize {
    entry.answers.len() + entry.rtt_answers.len()
}

/// The turn index of `entry`'s answer for `view` (an RTT outcome index when `by_rtt`).
pub(super) fn entry_set(entry: &DomainEntry, view: u32, by_rtt: bool) -> Option<usize> {
    if by_rtt {
        let i = entry.rtt_answers.iter().position(|(v, _)| *v == view)?;
        Some(entry.answers.len() + i)
    } else {
        entry.answers.iter().position(|(v, _)| *v == view)
    }
}

/// `new`'s sets continue the turns of `old`'s sets of the same view (an entry of the same name
/// and qtype in the previous table).
pub(super) fn carry_entry(new: &DomainEntry, turns: &Turns, old: &DomainEntry, old_turns: &Turns) {
    fn views(e: &DomainEntry) -> impl Iterator<Item = (bool, u32)> + '_ {
        let plain = e.answers.iter().map(|(v, _)| (false, *v));
        plain.chain(e.rtt_answers.iter().map(|(v, _)| (true, *v)))
    }
    // After a health or RTT change the views are usually those of the last table.
    if views(new).eq(views(old)) {
        for i in 0..entry_sets(new) {
            turns.carry(i, old_turns, i);
        }
        return;
    }
    let was: HashMap<(bool, u32), usize> = views(old).enumerate().map(|(j, v)| (v, j)).collect();
    for (i, v) in views(new).enumerate() {
        if let Some(&j) = was.get(&v) {
            turns.carry(i, old_turns, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::Answer;
    use crate::policy::AnswerMode;

    fn entry(views: &[u32], rtt_views: &[u32]) -> DomainEntry {
        let answer = Answer {
            ttl: 60,
            mode: AnswerMode::Rotate,
            max_answers: 1,
            addrs: vec!["192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap()],
            names: Vec::new(),
        };
        DomainEntry {
            answers: views.iter().map(|v| (*v, answer.clone())).collect(),
            rtt_answers: rtt_views.iter().map(|v| (*v, answer.clone())).collect(),
            by_rtt: !rtt_views.is_empty(),
            ..DomainEntry::default()
        }
    }

    #[test]
    fn each_set_has_its_own_turn() {
        let e = entry(&[0, 3], &[1]);
        let turns = Turns::new(entry_sets(&e));
        let (default, view3, ldns1) = (
            entry_set(&e, 0, false).unwrap(),
            entry_set(&e, 3, false).unwrap(),
            entry_set(&e, 1, true).unwrap(),
        );
        assert_eq!((default, view3, ldns1), (0, 1, 2));
        assert_eq!(entry_set(&e, 1, false), None, "no answer of its own");
        let seq: Vec<u32> = [default, view3, default, ldns1, default]
            .iter()
            .map(|&i| turns.next(i))
            .collect();
        assert_eq!(seq, [0, 0, 1, 0, 2]);
    }

    #[test]
    fn a_republish_carries_each_turn_to_the_same_view() {
        let old = entry(&[0, 3, 5], &[1]);
        let old_turns = Turns::new(entry_sets(&old));
        for (i, n) in [(0, 4), (1, 7), (2, 1), (3, 9)] {
            for _ in 0..n {
                old_turns.next(i);
            }
        }
        // The same views: every turn goes on.
        let same = Turns::new(entry_sets(&old));
        carry_entry(&old, &same, &old, &old_turns);
        let got: Vec<u32> = (0..4).map(|i| same.next(i)).collect();
        assert_eq!(got, [4, 7, 1, 9]);
        // View 3 gone, view 8 new, LDNS view 2 new: the others go on, the new ones start.
        let new = entry(&[0, 5, 8], &[2, 1]);
        let turns = Turns::new(entry_sets(&new));
        carry_entry(&new, &turns, &old, &old_turns);
        let got: Vec<u32> = (0..5).map(|i| turns.next(i)).collect();
        assert_eq!(got, [4, 1, 0, 0, 9]);
    }
}
