//! Stable hashing, and the choice of one candidate under a weighted or hashed pick.
//!
//! Hashes here must give the same value in every process and every build (std's hasher is
//! seeded per process), because the controller precomputes answers that the responder must
//! agree with, and because a client prefix should keep its service across restarts.

use std::borrow::Cow;
use std::net::IpAddr;

use super::ServiceKey;
use crate::model::AnswerMode;

/// FNV-1a, finished with a mixer so that nearby inputs spread over all 64 bits.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix(h)
}

/// splitmix64's finaliser.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// What one answer carries of `items` (a decision's candidates, or a compiled answer's
/// addresses in rotation order, where an address repeats as often as its weight), at most
/// `max` of them:
/// - [`AnswerMode::All`] with at most `max` items: every one, in order;
/// - otherwise the item `start()` names (an index, taken modulo the items' count: the
///   method's pick, or the answer's turn for `All`), then the items after it in order,
///   wrapping, each once, until `max`: one window that moves with the rotation.
///
/// `start` is only called when the items do not all go, so that a caller that must count a
/// turn for it counts none for the rest.
pub fn carried<T: Clone + PartialEq>(
    items: &[T],
    mode: AnswerMode,
    max: u16,
    start: impl FnOnce() -> usize,
) -> Cow<'_, [T]> {
    let max = usize::from(max.max(1));
    if items.is_empty() || (mode == AnswerMode::All && items.len() <= max) {
        return Cow::Borrowed(items);
    }
    let first = start() % items.len();
    if max == 1 || items.len() == 1 {
        return Cow::Borrowed(&items[first..=first]);
    }
    let mut out: Vec<T> = Vec::with_capacity(max.min(items.len()));
    for item in items[first..].iter().chain(&items[..first]) {
        if out.len() == max {
            break;
        }
        // Only a weighted rotation repeats items; `out` holds at most `max` of them.
        if !out.contains(item) {
            out.push(item.clone());
        }
    }
    Cow::Owned(out)
}

/// The candidate for answer number `turn` when answers follow `weights`: each candidate gets
/// a run of turns as long as its weight, in order.
pub(super) fn weighted(weights: &[u32], turn: u64) -> usize {
    let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    if total == 0 {
        return (turn % weights.len() as u64) as usize;
    }
    let mut t = turn % total;
    for (i, &w) in weights.iter().enumerate() {
        if t < u64::from(w) {
            return i;
        }
        t -= u64::from(w);
    }
    unreachable!("t < total")
}

/// Rendezvous (highest random weight) hashing: the candidate whose hash with the client prefix
/// is highest. Removing a candidate moves only the prefixes that were on it, and the result
/// does not depend on the candidates' order. With weights, each candidate wins in proportion
/// to its weight (score w / -ln(u)).
pub(super) fn rendezvous(prefix: IpAddr, ids: &[ServiceKey], weights: Option<&[u32]>) -> usize {
    let key = match prefix {
        IpAddr::V4(a) => stable_hash(&a.octets()),
        IpAddr::V6(a) => stable_hash(&a.octets()) ^ 0x6,
    };
    let mut best = 0;
    let mut best_score = f64::NEG_INFINITY;
    for (i, id) in ids.iter().enumerate() {
        let h = mix(key ^ mix(id.0));
        let score = match weights {
            None => h as f64,
            Some(w) => {
                // u in (0, 1): 53 random bits, never 0 or 1.
                let u = ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                f64::from(w[i]) / -u.ln()
            }
        };
        // Ties (astronomically rare) go to the lower id, not to the earlier position.
        if score > best_score || (score == best_score && *id < ids[best]) {
            best = i;
            best_score = score;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carried_is_a_window_from_the_pick() {
        use AnswerMode::{All, Rotate};
        let five = [1, 2, 3, 4, 5];
        let weighted = [1, 1, 1, 2, 3];
        #[rustfmt::skip]
        type Case<'a> = (&'a str, &'a [u32], AnswerMode, u16, usize, &'a [u32]);
        // (what, items, mode, max_answers, start, carried)
        let cases: &[Case<'_>] = &[
            ("rotate one", &five, Rotate, 1, 7, &[3]),
            (
                "rotate three from the pick",
                &five,
                Rotate,
                3,
                3,
                &[4, 5, 1],
            ),
            ("rotate wraps", &five, Rotate, 3, 4, &[5, 1, 2]),
            (
                "rotate more than there are",
                &five,
                Rotate,
                9,
                2,
                &[3, 4, 5, 1, 2],
            ),
            ("one item", &[9], Rotate, 4, 3, &[9]),
            ("all that fit, in order", &five, All, 5, 3, &[1, 2, 3, 4, 5]),
            ("all over the cap moves", &five, All, 2, 3, &[4, 5]),
            ("all over the cap wraps", &five, All, 2, 9, &[5, 1]),
            (
                "a weighted rotation gives each once",
                &weighted,
                Rotate,
                2,
                1,
                &[1, 2],
            ),
            (
                "a weighted rotation, the whole set",
                &weighted,
                Rotate,
                3,
                2,
                &[1, 2, 3],
            ),
            (
                "a weighted rotation from the tail",
                &weighted,
                Rotate,
                2,
                4,
                &[3, 1],
            ),
            ("nothing", &[], Rotate, 3, 0, &[]),
        ];
        for &(what, items, mode, max, start, want) in cases {
            assert_eq!(&carried(items, mode, max, || start)[..], want, "{what}");
        }
        // Everything fits: the turn is not taken.
        let _ = carried(&five, All, 8, || panic!("no turn when all go"));
        let _ = carried(&[] as &[u32], Rotate, 1, || panic!("no turn for nothing"));
    }

    fn ids(n: u64) -> Vec<ServiceKey> {
        (0..n)
            .map(|i| ServiceKey::from_name(&format!("s{i}")))
            .collect()
    }

    #[test]
    fn stable_values() {
        // Pinned: a change here changes which service every client prefix gets.
        assert_eq!(stable_hash(b""), mix(0xcbf2_9ce4_8422_2325));
        assert_eq!(ServiceKey::from_name("web1"), ServiceKey::from_name("web1"));
        assert_ne!(ServiceKey::from_name("web1"), ServiceKey::from_name("web2"));
        assert_eq!(
            stable_hash(b"web1"),
            0x289f_74a5_44c5_8cff,
            "{:#x}",
            stable_hash(b"web1")
        );
    }

    #[test]
    fn weighted_runs_follow_weights() {
        let w = [3, 1, 0, 2];
        let got: Vec<usize> = (0..12).map(|t| weighted(&w, t)).collect();
        assert_eq!(got, [0, 0, 0, 1, 3, 3, 0, 0, 0, 1, 3, 3]);
        assert_eq!(
            (0..4).map(|t| weighted(&[0, 0], t)).collect::<Vec<_>>(),
            [0, 1, 0, 1]
        );
    }

    #[test]
    fn rendezvous_spreads_and_only_moves_the_removed_candidates_clients() {
        let all = ids(4);
        let clients: Vec<IpAddr> = (0..4000u32)
            .map(|i| IpAddr::V4((0xc633_0000 + (i << 8)).into()))
            .collect();
        let before: Vec<ServiceKey> = clients
            .iter()
            .map(|&c| all[rendezvous(c, &all, None)])
            .collect();
        for id in &all {
            let n = before.iter().filter(|b| *b == id).count();
            assert!((800..1200).contains(&n), "{n} of 4000 on one of 4");
        }
        let without: Vec<ServiceKey> = all[1..].to_vec();
        for (c, b) in clients.iter().zip(&before) {
            let after = without[rendezvous(*c, &without, None)];
            if *b != all[0] {
                assert_eq!(after, *b, "{c} moved though its service stayed");
            }
        }
        // Order does not matter.
        let reversed: Vec<ServiceKey> = all.iter().rev().copied().collect();
        for (c, b) in clients.iter().zip(&before) {
            assert_eq!(reversed[rendezvous(*c, &reversed, None)], *b);
        }
    }

    #[test]
    fn weighted_rendezvous_follows_weights() {
        let all = ids(3);
        let weights = [1, 2, 5];
        let mut counts = [0u32; 3];
        for i in 0..8000u32 {
            counts[rendezvous(IpAddr::V4(i.into()), &all, Some(&weights))] += 1;
        }
        for (&count, w) in counts.iter().zip(weights) {
            let expected = 1000 * w;
            assert!(count.abs_diff(expected) < expected / 5 + 100, "{counts:?}");
        }
    }
}
