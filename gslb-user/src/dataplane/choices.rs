//! The `RTT_CHOICE` map as a publish writes it: keyed by a parity, not the generation (see
//! `gslb_common::RttChoiceKey`), so a publish writes only the pages of the parity it switches
//! to that differ from what that parity holds, and removes the ones no view has any more. A
//! hundred thousand LDNS views cost one full write, then a few pages per RTT change. And the
//! publish of a snapshot whose answer sets are all in force already, which writes those pages
//! and flips the parity alone ([`AnswerTable::publish_choices`]).

use std::sync::Arc;

use aya::maps::{HashMap, MapData};
use gslb_common::{CHOICE_FLIP, ProgramConfig, RttChoice, RttChoiceKey, maps};

use super::{
    Result,
    batch::batch,
    map_err,
    publish::{AnswerTable, PublishStats, Published},
};
use crate::compile::{RttChoices, Snapshot};

/// What one parity of the map holds.
enum Held {
    /// As this process wrote it: a snapshot's table, and pages copied in since (new LDNS
    /// views of an in-place trie edit: (view, page, choice)).
    Known {
        table: Arc<RttChoices>,
        copied: Vec<(u32, usize, RttChoice)>,
    },
    /// Keys found in the map (pins adopted): their values are not known.
    Keys(Vec<RttChoiceKey>),
}

/// The choice map and what each parity holds.
pub(super) struct ChoiceMap {
    map: HashMap<MapData, RttChoiceKey, RttChoice>,
    /// By parity; `None`: unknown (a publish failed while writing it): found by a scan.
    held: [Option<Held>; 2],
}

impl AnswerTable {
    /// The publish of a snapshot whose answer sets are those in force (`old`'s, checked by
    /// [`same_answer_sets`]) and whose trie is `old`'s (the same segments: `publish` asks it
    /// for the program's view cache, which keeps a source's trie value for the generation):
    /// the generation and every `ANSWERS`, `DOMAINS` and `VIEWS` entry stay.
    ///
    /// The new choices go into the parity packets do not read (only the pages that differ
    /// from what it held: an RTT change writes one or two), and one write of `CONFIG` flips
    /// [`CHOICE_FLIP`]. Why that is atomic: a packet reads `CONFIG`'s generation word once,
    /// and takes from it both the generation of the answer sets it looks up and the choice
    /// parity, so it reads the old parity (the old choices) or the new one (the new choices),
    /// each whole, with this generation's answer sets, which hold every outcome either parity
    /// names (the entries, with their outcome answers, are equal). No page a packet may be
    /// reading is written: not in place (an update of a hash element packets are reading can
    /// recycle the old element at once for another key), and not the other parity until an
    /// RCU grace period after the switch away from it has ended ([`AnswerTable::await_grace`]).
    pub(super) fn publish_choices(
        &mut self,
        current: ProgramConfig,
        old: &mut Published,
        snapshot: &Snapshot,
    ) -> Result<PublishStats> {
        let mut stats = PublishStats {
            generation: current.answers_generation(),
            choices_only: true,
            in_place: true,
            ..Default::default()
        };
        let config = ProgramConfig {
            generation: current.generation ^ CHOICE_FLIP,
            ..current
        };
        (stats.choices, stats.choices_removed) = self
            .choices
            .write(config.choice_parity(), &snapshot.rtt_choices)?;
        self.config.set(&config);
        self.switched = self.grace.start();
        // What the maps now hold: the new snapshot, whose entries are the old ones (checked
        // before): they are kept rather than copied; the answer sets' keys stay the generation's.
        old.generation = config.generation;
        old.snapshot = without_domains(snapshot, std::mem::take(&mut old.snapshot.domains));
        Ok(stats)
    }

    /// Waits until an RCU grace period that began after this process last switched `CONFIG`
    /// (or loaded the maps) has ended, before a publish writes or deletes anything: a packet
    /// that read the value before may still be reading that value's choice parity (the one
    /// a publish writes next) and its generation's entries (the ones a full publish deletes),
    /// or, reading the trie a refinement is about to edit, need its LDNS views' pages there.
    /// The grace period runs on the tracker's thread from the switch on, so a publish waits
    /// only when it comes sooner than 5–30 ms after the last one (a burst of RTT changes).
    pub(super) fn await_grace(&self) -> Result<()> {
        self.grace.wait(self.switched)
    }
}

/// `snapshot` with `domains` for its entries: a copy without copying thousands of entries
/// (every field named, so that a new one is not forgotten).
fn without_domains(snapshot: &Snapshot, domains: Vec<crate::compile::DomainEntry>) -> Snapshot {
    let Snapshot {
        dns_port,
        edns_udp_size,
        cookie_secret,
        nsid,
        rrl,
        ecs_allow,
        listen,
        views,
        segments,
        domains: _,
        rtt_choices,
        engine_domains,
        down_services,
        services,
        disabled_domains,
        refuse_gslb,
        rtt,
        rtt_rows,
        static_views,
        classes,
        spec,
        stats,
    } = snapshot;
    Snapshot {
        dns_port: *dns_port,
        edns_udp_size: *edns_udp_size,
        cookie_secret: *cookie_secret,
        nsid: nsid.clone(),
        rrl: *rrl,
        ecs_allow: ecs_allow.clone(),
        listen: listen.clone(),
        views: views.clone(),
        segments: segments.clone(),
        domains,
        rtt_choices: rtt_choices.clone(),
        engine_domains: engine_domains.clone(),
        down_services: down_services.clone(),
        services: services.clone(),
        disabled_domains: disabled_domains.clone(),
        refuse_gslb: *refuse_gslb,
        rtt: rtt.clone(),
        rtt_rows: rtt_rows.clone(),
        static_views: static_views.clone(),
        classes: classes.clone(),
        spec: spec.clone(),
        stats: *stats,
    }
}

fn key(parity: u32, rtt_view: u32, page: usize) -> RttChoiceKey {
    RttChoiceKey {
        parity,
        rtt_view,
        page: page as u32,
        reserved: 0,
    }
}

impl ChoiceMap {
    pub(super) fn new(map: HashMap<MapData, RttChoiceKey, RttChoice>) -> Self {
        ChoiceMap {
            map,
            held: [None, None],
        }
    }

    /// Lists the map's keys by parity: what a process that did not write them must remove.
    /// (One system call per key, once, after adopting pins or a failed publish.)
    pub(super) fn scan(&mut self) {
        let mut keys = [Vec::new(), Vec::new()];
        for k in self.map.keys().filter_map(std::result::Result::ok) {
            keys[(k.parity & 1) as usize].push(k);
        }
        let [k0, k1] = keys;
        self.held = [Some(Held::Keys(k0)), Some(Held::Keys(k1))];
    }

    /// Gives each new LDNS view (`copies`: new → origin) the pages its origin has in `parity`,
    /// the one packets read now: the trie may then send clients to the new view before the
    /// switch, and they get what they got. Returns the pages written.
    pub(super) fn copy(
        &mut self,
        parity: u32,
        copies: &[(u32, u32)],
        pages: usize,
    ) -> Result<usize> {
        let mut written = 0;
        for &(new, origin) in copies {
            for page in 0..pages {
                let Ok(choice) = self.map.get(&key(parity, origin, page), 0) else {
                    continue;
                };
                self.map
                    .insert(&key(parity, new, page), &choice, 0)
                    .map_err(map_err(maps::RTT_CHOICE))?;
                written += 1;
                match &mut self.held[parity as usize] {
                    Some(Held::Known { copied, .. }) => copied.push((new, page, choice)),
                    Some(Held::Keys(keys)) => keys.push(key(parity, new, page)),
                    None => {}
                }
            }
        }
        Ok(written)
    }

    /// Makes `parity` hold `choices`: writes the pages that differ from what it holds and
    /// removes those of views or pages that are gone. Packets must not read `parity` (its
    /// generation was switched away from a publish ago). Returns (written, removed).
    pub(super) fn write(
        &mut self,
        parity: u32,
        choices: &Arc<RttChoices>,
    ) -> Result<(usize, usize)> {
        if self.held[parity as usize].is_none() {
            self.scan();
        }
        let held = self.held[parity as usize].take();
        let (pages, views, slots) = (choices.pages(), choices.views(), choices.slots);
        let kept = |k: &RttChoiceKey| {
            k.rtt_view != 0 && (k.rtt_view as usize) < views && (k.page as usize) < pages
        };
        // Views to write whole, and keys to remove.
        let mut rewrite = vec![false; views];
        let mut stale: Vec<RttChoiceKey> = Vec::new();
        match held {
            Some(Held::Known { table, copied })
                if table.slots == slots && copied.is_empty() && Arc::ptr_eq(&table, choices) =>
            {
                // The same table: nothing to write.
                self.held[parity as usize] = Some(Held::Known { table, copied });
                return Ok((0, 0));
            }
            Some(Held::Known { table, copied }) if table.slots == slots => {
                let old_views = table.views();
                for (view, row) in rewrite.iter_mut().enumerate().skip(1) {
                    let at = view * slots..(view + 1) * slots;
                    *row = view >= old_views || table.table[at.clone()] != choices.table[at];
                }
                for view in views..old_views {
                    stale.extend((0..table.pages()).map(|p| key(parity, view as u32, p)));
                }
                for (view, page, _) in copied {
                    let k = key(parity, view, page);
                    if kept(&k) {
                        rewrite[view as usize] = true;
                    } else {
                        stale.push(k);
                    }
                }
            }
            Some(Held::Known { table, copied }) => {
                rewrite.fill(true);
                for view in 1..table.views() {
                    stale.extend((0..table.pages()).map(|p| key(parity, view as u32, p)));
                }
                stale.extend(copied.iter().map(|&(v, p, _)| key(parity, v, p)));
                stale.retain(|k| !kept(k));
            }
            Some(Held::Keys(found)) => {
                rewrite.fill(true);
                stale = found.into_iter().filter(|k| !kept(k)).collect();
            }
            None => unreachable!("scanned above"),
        }
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        for view in (1..views).filter(|&v| rewrite[v]) {
            for page in 0..pages {
                keys.push(key(parity, view as u32, page));
                values.push(choices.page(view as u32, page));
            }
        }
        batch(&mut self.map, &keys, Some(&values)).map_err(map_err(maps::RTT_CHOICE))?;
        batch::<_, RttChoice>(&mut self.map, &stale, None).map_err(map_err(maps::RTT_CHOICE))?;
        self.held[parity as usize] = Some(Held::Known {
            table: choices.clone(),
            copied: Vec::new(),
        });
        Ok((keys.len(), stale.len()))
    }
}
