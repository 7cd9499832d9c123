//! Atomic republish: [`AnswerTable::publish`] writes a snapshot's answers beside the ones in
//! force under a new generation and switches to them with one write of `CONFIG`, editing the
//! view trie in place when the new views refine the old ones.

use std::sync::Arc;

use aya::maps::{Array, HashMap, LpmTrie, Map, MapData, lpm_trie::Key};
use gslb_common::{
    ANSWER_ANY_VIEW, ANSWER_BY_RTT, ANY_VIEW_MAP, AnswerKey, AnswerSet, CHOICE_FLIP,
    CONFIG_COOKIES, CONFIG_WILDCARDS, CookieKey, DomainKey, DomainValue, ListenKey, ListenSet,
    NAME_OWN, NAME_WILDCARD, NsidOption, ProgramConfig, QNAME_MAX, RRL_CONFIG_MAP, RTT_OUTCOME_BIT,
    RrlConfig, ViewKey, ViewValue, maps, name_hash, wildcard_hash,
};
use tracing::warn;

use super::{
    Result,
    batch::batch,
    choices::ChoiceMap,
    ecs_allow::{self, EcsAllowMap},
    encode::{
        answer_key, answer_set, listen_key, listen_set, mapped, view_key, wire_domain_key,
        wire_name,
    },
    grace::{GraceTracker, Ticket},
    map_err,
    program_config::ConfigMap,
    refine::{RTT_VIEW_BIT, edit_views, refinement, same_answer_sets},
    rotors::RotorSlots,
    shortcuts::{TrieViews, any_view_words, copy_defaults},
};
use crate::compile::{Answer, DomainEntry, Snapshot};

/// The fast path's answer tables.
pub struct AnswerTable {
    pub(super) config: ConfigMap,
    /// `RRL_CONFIG`: rewritten by every publish (not pinned: each program has its own).
    pub(super) rrl: Array<MapData, RrlConfig>,
    pub(super) listen: LpmTrie<MapData, ListenKey, u8>,
    pub(super) listen_set: Array<MapData, ListenSet>,
    pub(super) views: LpmTrie<MapData, ViewKey, ViewValue>,
    pub(super) domains: HashMap<MapData, DomainKey, DomainValue>,
    pub(super) answers: HashMap<MapData, AnswerKey, AnswerSet>,
    /// `RTT_CHOICE`, by parity.
    pub(super) choices: ChoiceMap,
    /// `ECS_ALLOW`, by parity.
    ecs_allow: EcsAllowMap,
    /// `NSID`, by parity.
    nsid: Array<MapData, NsidOption>,
    /// `COOKIE_KEY`, by parity.
    cookie_key: Array<MapData, CookieKey>,
    /// What the maps hold now, as this process published it (`None` after adopting pins: the
    /// next publish rewrites everything).
    published: Option<Published>,
    /// Wire form and hash of every name published so far.
    names: std::collections::HashMap<String, (Vec<u8>, u64)>,
    /// The `ROTOR` slot of each rotating answer set published.
    rotors: RotorSlots,
    /// `ANY_VIEW` (not pinned, so zeros until this process writes it), and the words it wrote.
    pub(super) any_view: Array<MapData, u64>,
    any_view_words: Option<Vec<u64>>,
    /// The views of the trie, for the default-view copies (`shortcuts`).
    trie_views: TrieViews,
    /// Default-view copies and any-view hints are written (see `shortcuts`); off only to
    /// measure or test the path without them ([`AnswerTable::without_shortcuts`]).
    shortcuts: bool,
    /// A snapshot that differs only in its RTT choices is published by flipping
    /// [`CHOICE_FLIP`] ([`AnswerTable::publish_choices`]); off only to measure or test the full
    /// publish in its place ([`AnswerTable::choice_only_publishes`]).
    choice_only: bool,
    /// Waits for RCU grace periods on a thread of its own, off the publish's path.
    pub(super) grace: GraceTracker,
    /// The grace period after this process last switched `CONFIG` (or loaded the maps): the
    /// parity packets read before it is written again only once it has ended (see
    /// [`AnswerTable::await_grace`]).
    pub(super) switched: Ticket,
    /// The generation the last full publish replaced, deleted by the next one (see
    /// [`AnswerTable::publish`]).
    stale: Option<Stale>,
}

/// The keys of a replaced generation.
struct Stale {
    views: Vec<Key<ViewKey>>,
    domains: Vec<DomainKey>,
    answers: Vec<AnswerKey>,
}

/// The last snapshot published, and the generations it went under.
pub(super) struct Published {
    pub(super) snapshot: Snapshot,
    /// `CONFIG`'s generation word as this process wrote it ([`CHOICE_FLIP`] included).
    pub(super) generation: u32,
    view_generation: u32,
    /// Whether the shortcuts were written.
    shortcuts: bool,
    /// The `DOMAINS` and `ANSWERS` keys written for `generation` (copies included).
    domain_keys: Vec<DomainKey>,
    answer_keys: Vec<AnswerKey>,
}

/// What a publish wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PublishStats {
    pub generation: u32,
    pub prefixes: usize,
    pub domains: usize,
    pub answers: usize,
    /// Names longer than the fast path's key: answered by the responder only.
    pub too_long: usize,
    /// Names whose `ANSWERS` key hash equals an earlier name's (for 64-bit hashes of a real
    /// configuration, practically never): answered by the responder only.
    pub collisions: usize,
    /// Entries removed: those of the generation the previous full publish replaced (deleted
    /// only now, a grace period after that switch), and listen addresses no longer served.
    pub removed: usize,
    /// The trie was edited in place (`prefixes` counts the prefixes written or removed) rather
    /// than rewritten under a new view generation.
    pub in_place: bool,
    /// Answer sets copied to new views before the trie edit (and `RTT_CHOICE` pages copied to
    /// new LDNS views).
    pub copied: usize,
    /// `RTT_CHOICE` pages written for the new generation's parity (only those that differ
    /// from what it held), and removed from it.
    pub choices: usize,
    pub choices_removed: usize,
    /// Only the RTT choices changed (and maybe the trie, LDNS views splitting): the publish
    /// wrote `choices` pages and flipped [`CHOICE_FLIP`], keeping the generation and every
    /// answer set (`answers`, `domains` and `removed` are 0).
    pub choices_only: bool,
    /// Rotating answer sets beyond `ROTOR_SLOTS` that share a rotation slot with others (see
    /// `dataplane::rotors`); 0 unless more than 65,536 sets rotate.
    pub shared_rotors: usize,
    /// Default-view answer sets copied under views without their own (included in `answers`),
    /// and copies left out for the budget (`shortcuts::COPIES_MAX`): those clients' hits take
    /// a second lookup.
    pub default_copies: usize,
    pub uncopied: usize,
}

impl AnswerTable {
    /// The answer tables of a freshly loaded object; `take` hands over a map by name.
    pub(super) fn from_maps(take: &mut impl FnMut(&'static str) -> Result<Map>) -> Result<Self> {
        let grace = GraceTracker::new()?;
        // Packets of a gslbd that ran before (pins adopted) may still read what the first
        // publish writes or deletes: it waits for a grace period that began after now. Begun
        // by that publish, which comes after gslbd dropped its privileges: the drop needs one
        // thread, and the tracker's thread is started only then.
        let switched = grace.deferred();
        Ok(AnswerTable {
            config: ConfigMap::new(
                Array::try_from(take(maps::CONFIG)?).map_err(map_err(maps::CONFIG))?,
            )?,
            rrl: Array::try_from(take(RRL_CONFIG_MAP)?).map_err(map_err(RRL_CONFIG_MAP))?,
            listen: LpmTrie::try_from(take(maps::LISTEN)?).map_err(map_err(maps::LISTEN))?,
            listen_set: Array::try_from(take(maps::LISTEN_SET)?)
                .map_err(map_err(maps::LISTEN_SET))?,
            views: LpmTrie::try_from(take(maps::VIEWS)?).map_err(map_err(maps::VIEWS))?,
            domains: HashMap::try_from(take(maps::DOMAINS)?).map_err(map_err(maps::DOMAINS))?,
            answers: HashMap::try_from(take(maps::ANSWERS)?).map_err(map_err(maps::ANSWERS))?,
            choices: ChoiceMap::new(
                HashMap::try_from(take(maps::RTT_CHOICE)?).map_err(map_err(maps::RTT_CHOICE))?,
            ),
            ecs_allow: EcsAllowMap::new(
                LpmTrie::try_from(take(maps::ECS_ALLOW)?).map_err(map_err(maps::ECS_ALLOW))?,
            ),
            nsid: Array::try_from(take(maps::NSID)?).map_err(map_err(maps::NSID))?,
            cookie_key: Array::try_from(take(maps::COOKIE_KEY)?)
                .map_err(map_err(maps::COOKIE_KEY))?,
            published: None,
            names: std::collections::HashMap::new(),
            rotors: RotorSlots::default(),
            any_view: Array::try_from(take(ANY_VIEW_MAP)?).map_err(map_err(ANY_VIEW_MAP))?,
            any_view_words: None,
            trie_views: TrieViews::default(),
            shortcuts: true,
            choice_only: true,
            grace,
            switched,
            stale: None,
        })
    }

    /// From the next publish on, writes no default-view copies and no any-view hints, and
    /// clears the hints: every hit reads the trie and takes a second lookup when its view has
    /// no set of its own, as before they existed. For benches and tests that compare the two.
    pub fn without_shortcuts(&mut self) {
        self.shortcuts = false;
    }

    /// From the next publish on, whether a snapshot that differs only in its RTT choices is
    /// published by flipping the choice parity alone (the default), or as any other, under a
    /// new generation (`false`: for benches and tests that compare the two).
    pub fn choice_only_publishes(&mut self, on: bool) {
        self.choice_only = on;
    }

    /// Makes `snapshot` what the fast path answers. The new generation is written beside the
    /// current one and switched to with one write of `CONFIG`, so a packet sees either the old
    /// tables or the new ones, never a mix. The old generation is removed only by the next
    /// full publish, before it writes anything: a packet that read the old generation just
    /// before the switch may still be looking its entries up, and an element deleted from a
    /// `BPF_F_NO_PREALLOC` hash may be reused at once (Linux >= 6.1), so the entries may go
    /// only once an RCU grace period that began after the switch has ended (every program
    /// run is inside an RCU read-side section). That takes 5–30 ms: waited for here, it would
    /// hold up the caller after every publish; a thread waits instead ([`GraceTracker`]), and
    /// the next publish finds it over unless it comes sooner. At most two generations are in
    /// the maps, as when the old one went right after the switch.
    ///
    /// The view trie has its own generation. When the new views refine the published ones
    /// (every new view and LDNS view covers addresses of one published view, as the compiler
    /// keeps them between compilations), the trie is edited in place instead: first each new
    /// view gets a copy of the current generation's answers of the view it comes from, then the
    /// changed prefixes are inserted and the stale ones removed. Each of those writes leaves
    /// every lookup's answer as it was; the answers change only with the switch.
    ///
    /// When the answer sets and the trie are all the same and only the RTT choices differ (an
    /// RTT change that splits no LDNS view), the generation stays: the choices go into the
    /// `RTT_CHOICE` parity packets do not read, and the switch flips [`CHOICE_FLIP`] alone
    /// (see [`AnswerTable::publish_choices`]).
    pub fn publish(&mut self, snapshot: &Snapshot) -> Result<PublishStats> {
        self.await_grace()?;
        let current = self.config.get();
        // What the maps hold, when this process wrote it: the old entries are then removed by
        // their keys instead of by walking the maps (a syscall per entry).
        let mut previous = self.published.take().filter(|p| {
            p.generation == current.generation && p.view_generation == current.view_generation
        });
        let plan = previous
            .as_ref()
            .and_then(|p| refinement(&p.snapshot, snapshot));
        // A choice-only publish keeps the generation, so it must leave the trie as it is: the
        // program caches each source's trie value per CPU for as long as the generation lasts
        // (`source_view` in gslb-ebpf), and the flip bit alone, which comes back to a value it
        // had, cannot tell a cached LDNS view from before a split. LDNS views that split take
        // a full publish.
        if let (Some(old), Some(_)) = (&mut previous, &plan)
            && self.choice_only
            && old.shortcuts == self.shortcuts
            && (Arc::ptr_eq(&old.snapshot.segments, &snapshot.segments)
                || old.snapshot.segments == snapshot.segments)
            && same_answer_sets(&old.snapshot, snapshot)
        {
            // On an error the maps' state is not known: the next publish rewrites everything.
            let stats = self.publish_choices(current, old, snapshot)?;
            self.published = previous;
            return Ok(stats);
        }
        // The generation the previous full publish replaced: no packet reads it any more (the
        // grace period after that switch, and every one since, is over). A choice-only publish
        // (above) leaves it: it writes none of these maps, and the next full publish frees the
        // room before it needs it. After `published` was taken: if this fails, the next publish
        // scans the maps for what is left.
        let removed = self.remove_stale()?;
        let generation = current.answers_generation().wrapping_add(1) & !CHOICE_FLIP;
        // Keeps the flip bit: the new generation's low bit flips the choice parity.
        let generation_word = generation | (current.generation & CHOICE_FLIP);
        let mut stats = PublishStats {
            generation,
            removed,
            ..Default::default()
        };

        for addr in &snapshot.listen {
            self.listen
                .insert(&listen_key(*addr), &1, 0)
                .map_err(map_err(maps::LISTEN))?;
        }
        // The slot of the new generation; packets of the current one read the other.
        // With it, whether that generation has an `ECS_ALLOW` list: a packet reads the flag
        // of the generation it reads everything else of.
        let listening = ListenSet {
            flags: ecs_allow::flags(snapshot.ecs_allow.as_deref()),
            ..listen_set(&snapshot.listen)
        };
        self.listen_set
            .set(generation & 1, &listening, 0)
            .map_err(map_err(maps::LISTEN_SET))?;

        // Not written by this process (pins adopted): everything in the maps now is stale
        // once the new generations are in, so it is listed before they are written.
        let scanned = match &previous {
            Some(_) => None,
            None => Some((
                self.views
                    .keys()
                    .filter_map(std::result::Result::ok)
                    .collect::<Vec<Key<ViewKey>>>(),
                self.domains
                    .keys()
                    .filter_map(std::result::Result::ok)
                    .collect::<Vec<DomainKey>>(),
                self.answers
                    .keys()
                    .filter_map(std::result::Result::ok)
                    .collect::<Vec<AnswerKey>>(),
            )),
        };
        if scanned.is_some() {
            self.choices.scan();
        }
        let mut stale_views: Vec<Key<ViewKey>> = Vec::new();
        let view_generation = match plan {
            Some(origins) => {
                let old = previous.as_mut().expect("planned from it");
                let copied =
                    self.copy_answers(&old.snapshot, current.answers_generation(), &origins)?;
                stats.copied = copied.len();
                old.answer_keys.extend(copied);
                // New LDNS views get their origin's choices in the parity packets read now.
                let copies: Vec<(u32, u32)> = origins
                    .iter()
                    .filter(|(n, o)| n != o && **n & RTT_VIEW_BIT != 0)
                    .map(|(n, o)| (n & !RTT_VIEW_BIT, o & !RTT_VIEW_BIT))
                    .collect();
                stats.copied += self.choices.copy(
                    current.choice_parity(),
                    &copies,
                    old.snapshot.rtt_choices.pages(),
                )?;
                if !Arc::ptr_eq(&old.snapshot.views, &snapshot.views) {
                    stats.prefixes = edit_views(
                        &mut self.views,
                        &old.snapshot.views,
                        &snapshot.views,
                        current.view_generation,
                    )?;
                }
                stats.in_place = true;
                current.view_generation
            }
            None => {
                let view_generation = current.view_generation.wrapping_add(1);
                if let Some(old) = &previous {
                    let g = old.view_generation;
                    stale_views = old
                        .snapshot
                        .views
                        .iter()
                        .map(|(n, _)| view_key(g, n.network(), n.prefix_len()))
                        .collect();
                }
                for (net, view) in snapshot.views.iter() {
                    self.views
                        .insert(
                            &view_key(view_generation, net.network(), net.prefix_len()),
                            view,
                            0,
                        )
                        .map_err(map_err(maps::VIEWS))?;
                    stats.prefixes += 1;
                }
                view_generation
            }
        };

        // Name hash of each name published, to leave a colliding name to the responder: its
        // queries then find the other name's sets, fail the name compare and are passed.
        // (A wildcard's parent is keyed apart from the parent's own entries.)
        let mut hashed: std::collections::HashMap<(u64, u16), Vec<u8>> =
            std::collections::HashMap::new();
        let (mut domain_keys, mut answer_keys) = (Vec::new(), Vec::new());
        let (mut domain_values, mut answer_values) = (Vec::new(), Vec::new());
        // Where each domain's sets are in `answer_keys`, for the default-view copies.
        let mut ranges = Vec::with_capacity(snapshot.domains.len());
        for domain in &snapshot.domains {
            let (wire, hash) = self.keyed_name(domain)?;
            let Some(key) = wire_domain_key(&wire, domain.qtype, generation) else {
                stats.too_long += 1;
                continue;
            };
            let kind = name_kind(domain);
            if hashed
                .get(&(hash, kind))
                .is_some_and(|other| *other != wire)
            {
                warn!(name = %domain.name, "name hash collides with another name's; left to the responder");
                stats.collisions += 1;
                continue;
            }
            hashed.insert((hash, kind), wire.clone());
            // A wildcard's names are not ours to list (see `NAME_WILDCARD`).
            if !domain.wildcard {
                domain_keys.push(key);
                domain_values.push(DomainValue {
                    domain_id: domain.id,
                    reserved: 0,
                });
            }
            let start = answer_keys.len();
            for (key, set) in answer_sets(domain, &wire, hash, generation) {
                answer_keys.push(key);
                answer_values.push(set);
            }
            ranges.push(start..answer_keys.len());
        }
        stats.shared_rotors = self.rotors.assign(&answer_keys, &mut answer_values);
        // After the slots: a copy rotates in its default set's slot, and takes none of its own.
        let words = if self.shortcuts {
            let views = self.trie_views.of(&snapshot.views);
            (stats.default_copies, stats.uncopied) =
                copy_defaults(views, &mut answer_keys, &mut answer_values, &ranges);
            any_view_words(&answer_keys, &answer_values)
        } else {
            vec![0; gslb_common::ANY_VIEW_WORDS as usize]
        };
        batch(&mut self.domains, &domain_keys, Some(&domain_values))
            .map_err(map_err(maps::DOMAINS))?;
        batch(&mut self.answers, &answer_keys, Some(&answer_values))
            .map_err(map_err(maps::ANSWERS))?;
        stats.domains = domain_keys.len();
        stats.answers = answer_keys.len();
        let config = ProgramConfig {
            generation: generation_word,
            dns_port: snapshot.dns_port,
            edns_udp_size: snapshot.edns_udp_size,
            view_generation,
            flags: if snapshot.cookie_secret.is_some() {
                CONFIG_COOKIES
            } else {
                0
            } | if snapshot.domains.iter().any(|d| d.wildcard) {
                CONFIG_WILDCARDS
            } else {
                0
            },
        };
        // The choices of the new generation, in its parity (which no packet reads now).
        (stats.choices, stats.choices_removed) = self
            .choices
            .write(config.choice_parity(), &snapshot.rtt_choices)?;
        // `server.ecs_allow` in the new generation's parity, like the choices.
        self.ecs_allow
            .write(generation & 1, snapshot.ecs_allow.as_deref())?;
        // The identity, likewise (a reload may change it).
        let nsid = snapshot
            .nsid
            .as_deref()
            .and_then(NsidOption::new)
            .unwrap_or(NsidOption::NONE);
        self.nsid
            .set(generation & 1, &nsid, 0)
            .map_err(map_err(maps::NSID))?;
        // And the cookie secret.
        let key = snapshot
            .cookie_secret
            .map(CookieKey::new)
            .unwrap_or_default();
        self.cookie_key
            .set(generation & 1, &key, 0)
            .map_err(map_err(maps::COOKIE_KEY))?;

        // Hints only (a bit is followed only to a set that says it holds for every client):
        // written before the switch, so the new generation's any-view names skip the trie at
        // once; only the words that changed.
        for (i, word) in words.iter().enumerate() {
            if self.any_view_words.as_ref().map_or(0, |w| w[i]) != *word {
                self.any_view
                    .set(i as u32, word, 0)
                    .map_err(map_err(ANY_VIEW_MAP))?;
            }
        }
        self.any_view_words = Some(words);

        // Rate limiting first: it applies to the old generation's answers as well as the new.
        let r = &snapshot.rrl;
        let rrl = if r.enabled {
            RrlConfig::new(r.rate, r.burst, r.slip, r.ipv4_prefix, r.ipv6_prefix)
        } else {
            RrlConfig::default()
        };
        self.rrl.set(0, &rrl, 0).map_err(map_err(RRL_CONFIG_MAP))?;
        self.config.set(&config);
        self.switched = self.grace.start();
        // Deleted by the next full publish, once the grace period just started has ended.
        self.stale = Some(match (previous, scanned) {
            (Some(p), _) => Stale {
                views: stale_views,
                domains: p.domain_keys,
                answers: p.answer_keys,
            },
            (None, Some((views, domains, answers))) => Stale {
                views,
                domains,
                answers,
            },
            (None, None) => unreachable!("scanned when there is no previous publish"),
        });
        stats.removed += self.remove_unlistened(snapshot)?;
        self.published = Some(Published {
            snapshot: snapshot.clone(),
            generation: generation_word,
            view_generation,
            shortcuts: self.shortcuts,
            domain_keys,
            answer_keys,
        });
        Ok(stats)
    }

    /// The wire form and hash of the name `domain`'s entries are keyed by: its own, or a
    /// wildcard's parent ([`name_kind`], hashed by `wildcard_hash`).
    fn keyed_name(&mut self, domain: &DomainEntry) -> Result<(Vec<u8>, u64)> {
        match domain.name.strip_prefix("*.") {
            Some(parent) if domain.wildcard => {
                let (wire, _) = self.wire_and_hash(parent)?;
                let hash = wildcard_hash(&wire);
                Ok((wire, hash))
            }
            _ => self.wire_and_hash(&domain.name),
        }
    }

    /// The wire form and hash of a published name; names repeat from publish to publish, so
    /// they are kept.
    fn wire_and_hash(&mut self, name: &str) -> Result<(Vec<u8>, u64)> {
        if let Some(known) = self.names.get(name) {
            return Ok(known.clone());
        }
        let wire = wire_name(name)?;
        let hash = name_hash(&wire);
        self.names.insert(name.to_owned(), (wire.clone(), hash));
        Ok((wire, hash))
    }

    /// Gives each new view a copy of the answers its origin has in `generation` (`origins`:
    /// new view → origin, both dimensions, the LDNS views with [`RTT_VIEW_BIT`], whose
    /// choices [`ChoiceMap::copy`] copies: the answers do not depend on them).
    fn copy_answers(
        &mut self,
        old: &Snapshot,
        generation: u32,
        origins: &std::collections::HashMap<u32, u32>,
    ) -> Result<Vec<AnswerKey>> {
        let mut copied = Vec::new();
        if origins.iter().all(|(new, origin)| new == origin) {
            return Ok(copied);
        }
        for domain in &old.domains {
            // Published before, so it encodes; a name too long for the key was not published.
            let (wire, hash) = self.keyed_name(domain)?;
            if wire.len() > QNAME_MAX {
                continue;
            }
            let sets = answer_sets(domain, &wire, hash, generation);
            let views = origins
                .iter()
                .filter(|(n, o)| n != o && **n & RTT_VIEW_BIT == 0);
            for (new, origin) in views {
                for (key, set) in sets.iter().filter(|(k, _)| k.view == *origin) {
                    // Until the switch the copy is its origin's answer, and rotates with it.
                    let set = AnswerSet {
                        rotor: self.rotors.published(key).unwrap_or(0),
                        ..*set
                    };
                    let key = AnswerKey { view: *new, ..*key };
                    self.answers
                        .insert(&key, &set, 0)
                        .map_err(map_err(maps::ANSWERS))?;
                    copied.push(key);
                }
            }
        }
        Ok(copied)
    }

    /// Removes the entries of the generation the last full publish replaced, by their keys.
    /// Only once the grace period after that switch has ended ([`AnswerTable::await_grace`]).
    fn remove_stale(&mut self) -> Result<usize> {
        let Some(stale) = self.stale.take() else {
            return Ok(0);
        };
        for k in &stale.views {
            self.views.remove(k).map_err(map_err(maps::VIEWS))?;
        }
        batch::<_, DomainValue>(&mut self.domains, &stale.domains, None)
            .map_err(map_err(maps::DOMAINS))?;
        batch::<_, AnswerSet>(&mut self.answers, &stale.answers, None)
            .map_err(map_err(maps::ANSWERS))?;
        Ok(stale.views.len() + stale.domains.len() + stale.answers.len())
    }

    /// Removes the listen addresses `snapshot` does not serve, right after the switch: unlike
    /// a hash element, a trie node goes back to the allocator only after an RCU grace period
    /// (as the in-place view edits rely on too), and a packet of the old generation still
    /// running that then misses its address is passed to the responder, as one a moment later.
    fn remove_unlistened(&mut self, snapshot: &Snapshot) -> Result<usize> {
        let mut removed = 0;
        let keep: Vec<ListenKey> = snapshot
            .listen
            .iter()
            .map(|a| ListenKey { addr: mapped(*a) })
            .collect();
        let stale: Vec<Key<ListenKey>> = self
            .listen
            .keys()
            .filter_map(std::result::Result::ok)
            .filter(|k| !keep.contains(&k.data()))
            .collect();
        for k in stale {
            self.listen.remove(&k).map_err(map_err(maps::LISTEN))?;
            removed += 1;
        }
        Ok(removed)
    }
}

/// How `domain`'s entries are keyed: by its own name, or, for a wildcard the fast path answers
/// below its parent (`DomainEntry::wildcard`), by the parent's as a wildcard's.
fn name_kind(domain: &DomainEntry) -> u16 {
    if domain.wildcard {
        NAME_WILDCARD
    } else {
        NAME_OWN
    }
}

/// Every answer set of `domain` in `generation`, keyed by `wire` (hashed `hash`, the name
/// [`AnswerTable::keyed_name`] gives): its views' (flagged, with the RTT slot, when the domain
/// is answered by RTT) and its RTT outcomes'.
fn answer_sets(
    domain: &DomainEntry,
    wire: &[u8],
    hash: u64,
    generation: u32,
) -> Vec<(AnswerKey, AnswerSet)> {
    let key = |view: u32| AnswerKey {
        wildcard: name_kind(domain),
        ..answer_key(hash, domain.qtype, generation, view)
    };
    let answer_set = |answer: &Answer| answer_set(answer, wire, domain.wildcard);
    let mut sets = Vec::with_capacity(domain.answers.len() + domain.rtt_answers.len());
    let any_view = domain.same_in_every_view();
    for (view, answer) in &domain.answers {
        let mut set = answer_set(answer);
        if domain.by_rtt {
            set.flags |= ANSWER_BY_RTT;
            set.rtt_slot = domain.rtt_slot;
        }
        if any_view {
            set.flags |= ANSWER_ANY_VIEW;
        }
        sets.push((key(*view), set));
    }
    for (outcome, answer) in &domain.rtt_answers {
        sets.push((key(*outcome | RTT_OUTCOME_BIT), answer_set(answer)));
    }
    sets
}

#[cfg(test)]
mod tests {
    use std::{net::Ipv4Addr, path::Path};

    use gslb_common::{Counter, LISTEN_IN_TRIE, LISTEN_INLINE};

    use super::*;
    use crate::dataplane::{Dataplane, can_load_xdp};

    const WWW: &str = "www.example.com";

    /// An A query for www.example.com from 203.0.113.7 to `dst`.
    fn v4_query_frame(dst: Ipv4Addr) -> Vec<u8> {
        crate::dataplane::shortcuts::tests::v4_query_frame(Ipv4Addr::new(203, 0, 113, 7), dst, WWW)
    }

    #[test]
    fn more_listen_addresses_than_fit_inline_are_looked_up_in_the_trie() {
        use aya::programs::{TestRun, TestRunOptions};
        if !can_load_xdp() {
            return;
        }
        let listen: Vec<String> = (1..=LISTEN_INLINE as u8 + 1)
            .map(|i| format!("\"192.0.2.{i}\""))
            .collect();
        let text = format!(
            r#"
[server]
listen = [{}]

[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

[[site]]
name = "lab"
ip = "192.0.2.1"

[[service]]
name = "web"
ip = "198.51.100.10"
site = "lab"

[[gslb_domain]]
name = "www.example.com"
services = ["web"]
"#,
            listen.join(", ")
        );
        let config = crate::config::Config::parse(&text, Path::new("listen.toml")).unwrap();
        let snapshot = Snapshot::from_config(&config);
        assert_eq!(listen_set(&snapshot.listen).count, LISTEN_IN_TRIE);
        let mut dp = Dataplane::load(None).expect("loading the XDP object");
        dp.table.publish(&snapshot).expect("publishing");
        let last = Ipv4Addr::new(192, 0, 2, LISTEN_INLINE as u8 + 1);
        for (dst, action, counter) in [
            (last, 3, Counter::HitAV4),                                   // XDP_TX
            (Ipv4Addr::new(192, 0, 2, 99), 2, Counter::OtherDestination), // XDP_PASS
        ] {
            let before = dp.counters().unwrap();
            let frame = v4_query_frame(dst);
            let mut out = vec![0u8; 4096];
            let result = dp
                .program()
                .test_run(TestRunOptions {
                    data_in: Some(&frame),
                    data_out: Some(&mut out),
                    ..TestRunOptions::new()
                })
                .expect("BPF_PROG_TEST_RUN");
            assert_eq!(result.return_value, action, "to {dst}");
            assert_eq!(
                dp.counters().unwrap().delta(&before),
                [(counter, 1)],
                "to {dst}"
            );
        }
    }
}
