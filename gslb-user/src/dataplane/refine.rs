//! What a republish can keep: the view trie, edited in place instead of rewritten under a new
//! view generation, when the new views refine the published ones (see [`refinement`],
//! [`edit_views`]); and the generation itself, when only the RTT choices differ
//! ([`same_answer_sets`]).

use std::sync::Arc;

use aya::maps::{LpmTrie, MapData};
use gslb_common::{ViewKey, ViewValue, maps};

use super::{Result, encode::view_key, map_err};
use crate::compile::Snapshot;

/// Marks an LDNS view among the views of a refinement's map (views never reach this bit).
pub(super) const RTT_VIEW_BIT: u32 = 1 << 31;

/// Whether `new`'s views refine `old`'s, so that the trie can be edited in place: every new
/// view (and LDNS view) covers addresses of exactly one old one (its origin), and a new number
/// that is not its own origin was not in use. Returns new → origin (LDNS views with
/// [`RTT_VIEW_BIT`]), or `None` when the trie must be rewritten.
pub(super) fn refinement(
    old: &Snapshot,
    new: &Snapshot,
) -> Option<std::collections::HashMap<u32, u32>> {
    let (a, b) = (&old.segments, &new.segments);
    if a.starts.is_empty() || b.starts.is_empty() {
        return None;
    }
    if Arc::ptr_eq(a, b) || a == b {
        return Some(std::collections::HashMap::new());
    }
    // new key → origin key (None: "no LDNS view").
    let mut origin: std::collections::HashMap<u32, Option<u32>> = std::collections::HashMap::new();
    let mut in_use: std::collections::HashSet<u32> = std::collections::HashSet::new();
    let (mut i, mut j) = (0, 0);
    loop {
        let (ov, orv) = (a.views[i], a.rtt_views[i]);
        let (nv, nrv) = (b.views[j], b.rtt_views[j]);
        in_use.insert(ov);
        if orv != 0 {
            in_use.insert(orv | RTT_VIEW_BIT);
        }
        let pairs = [
            (nv, Some(ov)),
            (nrv | RTT_VIEW_BIT, (orv != 0).then_some(orv | RTT_VIEW_BIT)),
        ];
        for (n, o) in pairs {
            // No LDNS view now: there must have been none (its answers would vanish early).
            if n == RTT_VIEW_BIT {
                if o.is_some() {
                    return None;
                }
                continue;
            }
            if *origin.entry(n).or_insert(o) != o {
                return None;
            }
        }
        let next_a = a.starts.get(i + 1);
        let next_b = b.starts.get(j + 1);
        match (next_a, next_b) {
            (None, None) => break,
            (Some(x), Some(y)) if x == y => {
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x < y => i += 1,
            (Some(_), None) => i += 1,
            _ => j += 1,
        }
    }
    let mut copies = std::collections::HashMap::new();
    for (n, o) in origin {
        match o {
            Some(o) if o == n => {}
            // A new number must be fresh: copying into one in use would change its answers.
            Some(o) if !in_use.contains(&n) => {
                copies.insert(n, o);
            }
            // An LDNS view where there was none: until the switch its lookups find nothing
            // and fall back to the view's answer, as before.
            None if !in_use.contains(&n) => {}
            _ => return None,
        }
    }
    Some(copies)
}

/// Whether `new` gives the fast path the answer sets `old` gave it: everything a publish
/// writes but the view trie and the RTT choices is equal (entries with their outcome answers,
/// listen addresses, port, EDNS size, cookies, NSID, RRL, `server.ecs_allow`). The choices of `new` then name
/// only outcomes whose answer sets are in the maps already.
pub(super) fn same_answer_sets(old: &Snapshot, new: &Snapshot) -> bool {
    old.dns_port == new.dns_port
        && old.edns_udp_size == new.edns_udp_size
        && old.cookie_secret == new.cookie_secret
        && old.nsid == new.nsid
        && old.rrl == new.rrl
        && old.ecs_allow == new.ecs_allow
        && old.listen == new.listen
        && old.domains == new.domains
}

/// Rewrites the trie of `view_generation` from `old` to `new` in place: changed and new
/// prefixes first, stale ones after, so an address is never left without its prefix.
pub(super) fn edit_views(
    views: &mut LpmTrie<MapData, ViewKey, ViewValue>,
    old: &[(ipnet::IpNet, ViewValue)],
    new: &[(ipnet::IpNet, ViewValue)],
    view_generation: u32,
) -> Result<usize> {
    if old == new {
        return Ok(0);
    }
    // Both lists are disjoint prefixes in address order (as the compiler emits them): one
    // walk finds the changed, new and stale ones without hashing a million prefixes.
    let order = |n: &ipnet::IpNet| {
        (
            crate::compile::partition::key_of(n.network()),
            n.prefix_len(),
        )
    };
    let (mut inserts, mut removes) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(o), Some(n)) if o.0 == n.0 => {
                if o.1 != n.1 {
                    inserts.push(*n);
                }
                i += 1;
                j += 1;
            }
            (Some(o), Some(n)) if order(&o.0) < order(&n.0) => {
                removes.push(o.0);
                i += 1;
            }
            (Some(o), None) => {
                removes.push(o.0);
                i += 1;
            }
            (_, Some(n)) => {
                inserts.push(*n);
                j += 1;
            }
            (None, None) => unreachable!("the loop condition"),
        }
    }
    let mut written = 0;
    for (net, view) in &inserts {
        views
            .insert(
                &view_key(view_generation, net.network(), net.prefix_len()),
                view,
                0,
            )
            .map_err(map_err(maps::VIEWS))?;
        written += 1;
    }
    for net in &removes {
        views
            .remove(&view_key(view_generation, net.network(), net.prefix_len()))
            .map_err(map_err(maps::VIEWS))?;
        written += 1;
    }
    Ok(written)
}
