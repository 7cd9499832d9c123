//! The compiled answers ([`Snapshot::domains`] and the merged segments), looked up exactly as
//! the XDP program does, with the rotation turn of each answer set and the ECS scope of an
//! answer.

use std::{collections::HashMap, net::IpAddr, sync::Arc, sync::atomic::AtomicU32};

use gslb_common::{DEFAULT_VIEW, QTYPE_A, QTYPE_AAAA};

use super::canonical;
use super::turns::{self, Turns};
use crate::compile::{Answer, DomainEntry, RttChoices, Snapshot, partition::Segments};

/// The fast path's tables, looked up the way the XDP program does.
pub(super) struct GslbIndex {
    segments: Arc<Segments>,
    /// LDNS view × RTT slot → outcome index, as `RTT_CHOICE` holds it.
    choices: Arc<RttChoices>,
    /// Each entry with the rotation turns of its answer sets (see `turns::entry_set`); shared
    /// with the wire index (`wire::Names`), which finds them by the question's bytes.
    domains: HashMap<(String, u16), Arc<CompiledEntry>>,
}

/// A compiled entry with the rotation turns of its answer sets.
pub(super) type CompiledEntry = (DomainEntry, Turns);

impl GslbIndex {
    pub(super) fn new(snapshot: &Snapshot) -> Self {
        let domains = snapshot
            .domains
            .iter()
            .map(|d| {
                let turns = Turns::new(turns::entry_sets(d));
                ((d.name.clone(), d.qtype), Arc::new((d.clone(), turns)))
            })
            .collect();
        GslbIndex {
            segments: snapshot.segments.clone(),
            choices: snapshot.rtt_choices.clone(),
            domains,
        }
    }

    /// The answer XDP gives `client` for (`name`, `qtype`): the client's view, falling back to
    /// the default view. An answer without addresses is NODATA. With the answer set's turn.
    pub(super) fn answer(
        &self,
        name: &str,
        qtype: u16,
        client: IpAddr,
    ) -> Option<(&Answer, &AtomicU32)> {
        self.answer_of(self.domains.get(&(name.to_owned(), qtype))?, client)
    }

    /// [`GslbIndex::answer`] of an entry already found.
    pub(super) fn answer_of<'a>(
        &self,
        (entry, turns): &'a CompiledEntry,
        client: IpAddr,
    ) -> Option<(&'a Answer, &'a AtomicU32)> {
        let (view, rtt_view) = self.segments.views_of(canonical(client));
        let set = entry_set_of(entry, &self.choices, view, rtt_view)?;
        let answer = set_answer(entry, set);
        (!answer.is_empty()).then(|| (answer, turns.at(set)))
    }

    /// Each answer set continues the rotation of the same set in `old` (the table before a
    /// republish).
    pub(super) fn carry_turns(&self, old: &GslbIndex) {
        for (key, new) in &self.domains {
            let (entry, turns) = &**new;
            if let Some((old_entry, old_turns)) = old.domains.get(key).map(|o| &**o) {
                turns::carry_entry(entry, turns, old_entry, old_turns);
            }
        }
    }

    /// Every compiled entry, by (name, qtype).
    pub(super) fn entries(&self) -> impl Iterator<Item = &Arc<CompiledEntry>> {
        self.domains.values()
    }

    pub(super) fn is_gslb(&self, name: &str) -> bool {
        [QTYPE_A, QTYPE_AAAA]
            .iter()
            .any(|t| self.domains.contains_key(&(name.to_owned(), *t)))
    }

    /// The ECS scope of the answer to `client` for (`name`, `qtype`) (RFC 7871 §7.2.1): a
    /// prefix length within which that answer cannot change. 0 when every client gets the
    /// same answer; for a client in a published view prefix, that prefix's length, the scope
    /// the fast path echoes (`Segments::block_scope`, read there from `ViewValue::scope`);
    /// elsewhere (the default view, which the trie leaves out and the fast path passes), the
    /// shortest block of neighbouring segments with the same answer.
    pub(super) fn scope(&self, name: &str, qtype: u16, client: IpAddr) -> u8 {
        let Some((entry, _)) = self.domains.get(&(name.to_owned(), qtype)).map(|e| &**e) else {
            // No answer of this type for any client.
            return 0;
        };
        if entry.same_in_every_view() {
            return 0;
        }
        let client = canonical(client);
        let (view, rtt_view) = self.segments.views_of(client);
        if (view, rtt_view) != (DEFAULT_VIEW, 0) {
            return self.segments.block_scope(client);
        }
        let choices = &*self.choices;
        let mine = entry_answer(entry, choices, view, rtt_view);
        self.segments
            .scope_where(client, |v, r| entry_answer(entry, choices, v, r) == mine)
    }
}

/// The answer set (numbered as in `turns`) of `entry` in (view, LDNS view), as the fast path
/// takes it: the view's, else the default view's; for a domain answered by RTT, the answer of
/// the outcome the LDNS view's choice gives for the entry's slot, when there is one.
fn entry_set_of(
    entry: &DomainEntry,
    choices: &RttChoices,
    view: u32,
    rtt_view: u32,
) -> Option<usize> {
    let find = |v| turns::entry_set(entry, v, false);
    let by_view = find(view).or_else(|| find(DEFAULT_VIEW));
    let by_rtt = (entry.by_rtt && by_view.is_some() && rtt_view != 0)
        .then(|| choices.choice(rtt_view, entry.rtt_slot))
        .flatten()
        .and_then(|outcome| turns::entry_set(entry, u32::from(outcome), true));
    by_rtt.or(by_view)
}

/// Set `set` of `entry` (see [`entry_set_of`]).
fn set_answer(entry: &DomainEntry, set: usize) -> &Answer {
    match set.checked_sub(entry.answers.len()) {
        Some(i) => &entry.rtt_answers[i].1,
        None => &entry.answers[set].1,
    }
}

/// `entry`'s answer in (view, LDNS view); `None`: NODATA.
fn entry_answer<'e>(
    entry: &'e DomainEntry,
    choices: &RttChoices,
    view: u32,
    rtt_view: u32,
) -> Option<&'e Answer> {
    let answer = set_answer(entry, entry_set_of(entry, choices, view, rtt_view)?);
    (!answer.is_empty()).then_some(answer)
}
