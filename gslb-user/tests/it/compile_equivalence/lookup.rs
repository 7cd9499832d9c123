//! The fast path's lookup, written again over the snapshot's tables.

use super::*;

/// The snapshot's tables as the XDP program reads them: a longest-prefix match over the view
/// prefixes in the maps' key space (IPv4 as IPv4-mapped IPv6) gives the client's view and LDNS
/// view (none: the default view, no LDNS view); the answer is the view's, else the default
/// view's; when there is one and the domain is answered by RTT, the answer of the outcome the
/// LDNS view's choice gives for the domain's RTT slot replaces it if it has one.
pub(super) struct Tables<'a> {
    /// Prefix lengths in key bits, longest first.
    pub(super) lengths: Vec<u32>,
    pub(super) prefixes: QuickMap<(u32, u128), ViewValue>,
    pub(super) entries: QuickMap<(&'a str, u16), Entry<'a>>,
    pub(super) choices: &'a gslb_user::compile::RttChoices,
}

#[derive(Default)]
pub(super) struct Entry<'a> {
    pub(super) by_rtt: bool,
    pub(super) rtt_slot: u32,
    pub(super) views: QuickMap<u32, &'a Answer>,
    /// By RTT outcome index.
    pub(super) outcomes: QuickMap<u32, &'a Answer>,
}

/// std's HashMap with FNV-1a instead of SipHash: millions of lookups in a debug build.
pub(super) type QuickMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

#[derive(Default)]
pub(super) struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = h;
    }
}

pub(super) fn key_of(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => 0xffff << 32 | u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

pub(super) fn key_bits(net: &IpNet) -> u32 {
    match net {
        IpNet::V4(n) => 96 + u32::from(n.prefix_len()),
        IpNet::V6(n) => u32::from(n.prefix_len()),
    }
}

pub(super) fn mask(bits: u32) -> u128 {
    if bits == 0 {
        0
    } else {
        u128::MAX << (128 - bits)
    }
}

pub(super) const NO_VIEW: ViewValue = ViewValue {
    view: DEFAULT_VIEW,
    rtt_view: 0,
    scope: 0,
    reserved: [0; 3],
};

impl<'a> Tables<'a> {
    /// Checks what the maps rely on: every prefix has its host bits clear, none repeats and
    /// none lies inside another (the views are disjoint).
    pub(super) fn new(snapshot: &'a Snapshot) -> Tables<'a> {
        let mut prefixes = QuickMap::default();
        for (net, view) in snapshot.views.iter() {
            let (bits, key) = (key_bits(net), key_of(net.addr()));
            assert_eq!(key & !mask(bits), 0, "{net}: host bits set");
            assert_ne!(
                (view.view, view.rtt_view),
                (DEFAULT_VIEW, 0),
                "{net}: the default view without an LDNS view needs no prefix"
            );
            // The ECS scope the fast path echoes is the prefix's own length.
            assert_eq!(view.scope, net.prefix_len(), "{net}: scope");
            assert!(prefixes.insert((bits, key), *view).is_none(), "{net} twice");
        }
        let lengths: BTreeSet<u32> = prefixes.keys().map(|k| k.0).collect();
        let lengths: Vec<u32> = lengths.into_iter().rev().collect();
        for &(bits, key) in prefixes.keys() {
            for &shorter in lengths.iter().filter(|&&b| b < bits) {
                let outer = (shorter, key & mask(shorter));
                assert!(
                    !prefixes.contains_key(&outer),
                    "view prefixes overlap: {:x}/{bits} inside {:x}/{shorter}",
                    key,
                    outer.1
                );
            }
        }
        let mut entries: QuickMap<(&str, u16), Entry> = QuickMap::default();
        for d in &snapshot.domains {
            let entry = entries.entry((d.name.as_str(), d.qtype)).or_default();
            assert!(
                entry.views.is_empty() && entry.outcomes.is_empty(),
                "{} type {} twice",
                d.name,
                d.qtype
            );
            entry.by_rtt = d.by_rtt;
            entry.rtt_slot = d.rtt_slot;
            assert!(
                !d.by_rtt || (d.rtt_slot as usize) < snapshot.rtt_choices.slots,
                "{} type {}: RTT slot {} of {}",
                d.name,
                d.qtype,
                d.rtt_slot,
                snapshot.rtt_choices.slots
            );
            for (view, answer) in &d.answers {
                assert!(
                    entry.views.insert(*view, answer).is_none(),
                    "{} type {}: view {view} twice",
                    d.name,
                    d.qtype
                );
            }
            for (outcome, answer) in &d.rtt_answers {
                assert!(
                    *outcome < 256 && outcome & RTT_OUTCOME_BIT == 0,
                    "{} type {}: RTT outcome {outcome}",
                    d.name,
                    d.qtype
                );
                assert!(
                    entry.outcomes.insert(*outcome, answer).is_none(),
                    "{} type {}: RTT outcome {outcome} twice",
                    d.name,
                    d.qtype
                );
            }
        }
        Tables {
            lengths,
            prefixes,
            entries,
            choices: &snapshot.rtt_choices,
        }
    }

    pub(super) fn view(&self, client: IpAddr) -> ViewValue {
        let key = key_of(client);
        self.lengths
            .iter()
            .find_map(|&bits| self.prefixes.get(&(bits, key & mask(bits))))
            .copied()
            .unwrap_or(NO_VIEW)
    }

    /// Whether the name has a `DOMAINS` entry for `qtype` (a miss is then "no answer", not
    /// "unknown name").
    pub(super) fn known(&self, name: &str, qtype: u16) -> bool {
        self.entries.contains_key(&(name, qtype))
    }

    pub(super) fn answer(&self, name: &str, qtype: u16, view: ViewValue) -> Option<&'a Answer> {
        let entry = self.entries.get(&(name, qtype))?;
        let base = entry
            .views
            .get(&view.view)
            .or_else(|| entry.views.get(&DEFAULT_VIEW))
            .copied()?;
        if entry.by_rtt
            && view.rtt_view != 0
            && let Some(outcome) = self.choices.choice(view.rtt_view, entry.rtt_slot)
            && let Some(by_rtt) = entry.outcomes.get(&u32::from(outcome))
        {
            return Some(by_rtt);
        }
        Some(base)
    }
}
