//! The `RTT_CHOICE` map as a publish writes it: keyed by the generation's parity, not the
//! generation (see `gslb_common::RttChoiceKey`), so a publish writes only the pages of the
//! parity it switches to that differ from what that parity holds, and removes the ones no
//! view has any more. A hundred thousand LDNS views cost one full write, then a few pages per
//! RTT change.

use aya::maps::{HashMap, MapData};
use gslb_common::{RttChoice, RttChoiceKey, maps};

use super::{Result, batch::batch, map_err};
use crate::compile::RttChoices;

/// What one parity of the map holds.
enum Held {
    /// As this process wrote it: by LDNS view × page (`pages` per view).
    Known {
        pages: usize,
        by_view: Vec<Option<RttChoice>>,
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
                    Some(Held::Known { pages: p, by_view }) if *p == pages => {
                        let at = new as usize * pages + page;
                        if by_view.len() <= at {
                            by_view.resize(at + 1, None);
                        }
                        by_view[at] = Some(choice);
                    }
                    Some(Held::Known { .. }) | None => {
                        self.held[parity as usize] = None;
                    }
                    Some(Held::Keys(keys)) => keys.push(key(parity, new, page)),
                }
            }
        }
        Ok(written)
    }

    /// Makes `parity` hold `choices`: writes the pages that differ from what it holds and
    /// removes those of views or pages that are gone. Packets must not read `parity` (its
    /// generation was switched away from a publish ago). Returns (written, removed).
    pub(super) fn write(&mut self, parity: u32, choices: &RttChoices) -> Result<(usize, usize)> {
        let pages = choices.pages();
        let views = choices.views();
        if self.held[parity as usize].is_none() {
            self.scan();
        }
        let held = self.held[parity as usize].take();
        let mut by_view: Vec<Option<RttChoice>> = vec![None; views * pages];
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        let same_layout = matches!(&held, Some(Held::Known { pages: p, .. }) if *p == pages);
        for view in 1..views {
            for page in 0..pages {
                let choice = choices.page(view as u32, page);
                let at = view * pages + page;
                let known = match &held {
                    Some(Held::Known { by_view: old, .. }) if same_layout => {
                        old.get(at).copied().flatten()
                    }
                    _ => None,
                };
                if known != Some(choice) {
                    keys.push(key(parity, view as u32, page));
                    values.push(choice);
                }
                by_view[at] = Some(choice);
            }
        }
        let kept = |k: &RttChoiceKey| {
            (k.rtt_view as usize) < views && k.rtt_view != 0 && (k.page as usize) < pages
        };
        let stale: Vec<RttChoiceKey> = match held {
            Some(Held::Known {
                pages: old_pages,
                by_view: old,
            }) => old
                .iter()
                .enumerate()
                .filter(|(_, c)| c.is_some())
                .map(|(at, _)| key(parity, (at / old_pages) as u32, at % old_pages))
                .filter(|k| !kept(k))
                .collect(),
            Some(Held::Keys(found)) => found.into_iter().filter(|k| !kept(k)).collect(),
            None => unreachable!("scanned above"),
        };
        batch(&mut self.map, &keys, Some(&values)).map_err(map_err(maps::RTT_CHOICE))?;
        batch::<_, RttChoice>(&mut self.map, &stale, None).map_err(map_err(maps::RTT_CHOICE))?;
        self.held[parity as usize] = Some(Held::Known { pages, by_view });
        Ok((keys.len(), stale.len()))
    }
}
