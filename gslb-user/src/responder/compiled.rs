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
    /// Each entry with the rotation turns of its answer sets (see `turns::entry_set`).
    domains: HashMap<(String, u16), (DomainEntry, Turns)>,
}

impl GslbIndex {
    pub(super) fn new(snapshot: &Snapshot) -> Self {
        let domains = snapshot
            .domains
            .iter()
            .map(|d| {
                let turns = Turns::new(turns::entry_sets(d));
                ((d.name.clone(), d.qtype), (d.clone(), turns))
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
        let (entry, turns) = self.domains.get(&(name.to_owned(), qtype))?;
        let (view, rtt_view) = self.segments.views_of(canonical(client));
        let set = entry_set_of(entry, &self.choices, view, rtt_view)?;
        let answer = set_answer(entry, set);
        (!answer.addrs.is_empty()).then(|| (answer, turns.at(set)))
    }

    /// Each answer set continues the rotation of the same set in `old` (the table before a
    /// republish).
    pub(super) fn carry_turns(&self, old: &GslbIndex) {
        for (key, (entry, turns)) in &self.domains {
            if let Some((old_entry, old_turns)) = old.domains.get(key) {
                turns::carry_entry(entry, turns, old_entry, old_turns);
            }
        }
    }

    pub(super) fn is_gslb(&self, name: &str) -> bool {
        [QTYPE_A, QTYPE_AAAA]
            .iter()
            .any(|t| self.domains.contains_key(&(name.to_owned(), *t)))
    }

    /// The ECS scope of the answer to `client` for (`name`, `qtype`) (RFC 7871 §7.2.1): the
    /// shortest prefix length within which that answer cannot change.
    pub(super) fn scope(&self, name: &str, qtype: u16, client: IpAddr) -> u8 {
        let Some((entry, _)) = self.domains.get(&(name.to_owned(), qtype)) else {
            // No answer of this type for any client.
            return 0;
        };
        // The same answer in every view (the list holds only the views that differ).
        if entry.rtt_answers.is_empty() && entry.answers.iter().all(|(v, _)| *v == DEFAULT_VIEW) {
            return 0;
        }
        let client = canonical(client);
        let (view, rtt_view) = self.segments.views_of(client);
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
    (!answer.addrs.is_empty()).then_some(answer)
}
