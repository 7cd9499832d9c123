//! When a republish may edit the view trie in place instead of rewriting it under a new view
//! generation: the new views must refine the published ones (see [`refinement`]).

use std::sync::Arc;

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
