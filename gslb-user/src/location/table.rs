//! The range table behind [`LocationDb`](super::db::LocationDb): address ranges of one family
//! flattened into sorted, non-overlapping segments, laid out as a static search tree.
//!
//! Values are opaque `u32`s ([`NONE`]: no value); the database gives them meaning.

use std::{
    fmt,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
};

/// No value (a gap in a table).
pub(super) const NONE: u32 = u32::MAX;

// ---- addresses ----

/// An address as a table key: IPv4 (IPv4-mapped IPv6 included) or IPv6.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Addr {
    V4(u32),
    V6(u128),
}

impl Addr {
    pub(super) fn of(ip: IpAddr) -> Addr {
        match ip {
            IpAddr::V4(v4) => Addr::V4(v4.into()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Addr::V4(v4.into()),
                None => Addr::V6(v6.into()),
            },
        }
    }
}

/// An inclusive range of one family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Range {
    V4(u32, u32),
    V6(u128, u128),
}

impl Range {
    /// `from..=to`; an error (the reason) when the ends are of two families or backwards.
    pub(super) fn new(from: IpAddr, to: IpAddr) -> Result<Range, String> {
        let range = match (Addr::of(from), Addr::of(to)) {
            (Addr::V4(f), Addr::V4(t)) => Range::V4(f, t),
            (Addr::V6(f), Addr::V6(t)) => Range::V6(f, t),
            (Addr::V4(_), Addr::V6(_)) | (Addr::V6(_), Addr::V4(_)) => {
                return Err(format!(
                    "ip_from {from} and ip_to {to} are of different families (IPv4-mapped \
                     addresses count as IPv4)"
                ));
            }
        };
        let backwards = match range {
            Range::V4(f, t) => f > t,
            Range::V6(f, t) => f > t,
        };
        if backwards {
            return Err(format!("ip_from {from} is after ip_to {to}"));
        }
        Ok(range)
    }
}

/// A table key type: IPv4 as `u32`, IPv6 as `u128`.
pub(super) trait Key: Copy + Ord + fmt::Debug {
    const MIN: Self;
    const MAX: Self;
    fn succ(self) -> Self;
    fn addr(self) -> IpAddr;
}

impl Key for u32 {
    const MIN: u32 = 0;
    const MAX: u32 = u32::MAX;
    fn succ(self) -> u32 {
        self + 1
    }
    fn addr(self) -> IpAddr {
        Ipv4Addr::from(self).into()
    }
}

impl Key for u128 {
    const MIN: u128 = 0;
    const MAX: u128 = u128::MAX;
    fn succ(self) -> u128 {
        self + 1
    }
    fn addr(self) -> IpAddr {
        Ipv6Addr::from(self).into()
    }
}

// ---- step functions ----

/// A step function over the address space, while it is built: `vals[i]` holds on
/// `[starts[i], starts[i + 1])`, and [`NONE`] before `starts[0]`. Starts strictly increase;
/// neighbours differ in value. [`finish`](Self::finish) makes it a [`Table`] for lookups.
#[derive(Clone, Debug)]
pub(super) struct Steps<K> {
    starts: Vec<K>,
    vals: Vec<u32>,
}

impl<K> Default for Steps<K> {
    fn default() -> Self {
        Steps {
            starts: Vec::new(),
            vals: Vec::new(),
        }
    }
}

impl<K: Key> Steps<K> {
    pub(super) fn with_capacity(n: usize) -> Self {
        Steps {
            starts: Vec::with_capacity(n),
            vals: Vec::with_capacity(n),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.starts.len()
    }

    /// Sets the value from `start` on; `start` is at least the last start (equal: replaces it).
    pub(super) fn push(&mut self, start: K, val: u32) {
        if self.starts.last() == Some(&start) {
            self.starts.pop();
            self.vals.pop();
        }
        debug_assert!(self.starts.last().is_none_or(|&last| last < start));
        if self.vals.last().copied().unwrap_or(NONE) != val {
            self.starts.push(start);
            self.vals.push(val);
        }
    }

    pub(super) fn finish(self) -> Table<K> {
        Table::new(&self)
    }
}

/// `top` where it has a value, `base` elsewhere (either one as it is when the other is empty,
/// without a copy: a City database's table is the largest a build makes).
pub(super) fn overlay<K: Key>(top: Steps<K>, base: Steps<K>) -> Steps<K> {
    if top.len() == 0 {
        return base;
    }
    if base.len() == 0 {
        return top;
    }
    let mut out = Steps::with_capacity(top.len() + base.len());
    let (mut i, mut j) = (0, 0);
    let (mut a, mut b) = (NONE, NONE);
    loop {
        let p = match (top.starts.get(i), base.starts.get(j)) {
            (Some(&x), Some(&y)) => x.min(y),
            (Some(&x), None) => x,
            (None, Some(&y)) => y,
            (None, None) => break,
        };
        if top.starts.get(i) == Some(&p) {
            a = top.vals[i];
            i += 1;
        }
        if base.starts.get(j) == Some(&p) {
            b = base.vals[j];
            j += 1;
        }
        out.push(p, if a == NONE { b } else { a });
    }
    out
}

// ---- nesting ----

/// One input range of a layer: `src`/`line` say where it was written, for errors.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry<K> {
    pub from: K,
    pub to: K,
    pub val: u32,
    pub src: u32,
    pub line: u32,
}

/// The ranges of one layer (custom entries, or all location files), before flattening.
#[derive(Default)]
pub(super) struct Layer {
    pub v4: Vec<Entry<u32>>,
    pub v6: Vec<Entry<u128>>,
}

impl Layer {
    pub(super) fn push(&mut self, range: Range, val: u32, src: u32, line: usize) {
        let line = u32::try_from(line).unwrap_or(u32::MAX);
        match range {
            Range::V4(from, to) => self.v4.push(Entry {
                from,
                to,
                val,
                src,
                line,
            }),
            Range::V6(from, to) => self.v6.push(Entry {
                from,
                to,
                val,
                src,
                line,
            }),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }
}

/// Where a range of a [`Clash`] was written, and what it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Written {
    pub src: u32,
    pub line: u32,
    pub from: IpAddr,
    pub to: IpAddr,
}

/// Two ranges of one layer that overlap without nesting, or are the same range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Clash {
    /// The later of the two in load order.
    pub later: Written,
    pub earlier: Written,
}

impl Clash {
    fn of<K: Key>(a: &Entry<K>, b: &Entry<K>) -> Clash {
        let written = |e: &Entry<K>| Written {
            src: e.src,
            line: e.line,
            from: e.from.addr(),
            to: e.to.addr(),
        };
        let (later, earlier) = if (a.src, a.line) > (b.src, b.line) {
            (a, b)
        } else {
            (b, a)
        };
        Clash {
            later: written(later),
            earlier: written(earlier),
        }
    }

    pub(super) fn is_duplicate(&self) -> bool {
        (self.later.from, self.later.to) == (self.earlier.from, self.earlier.to)
    }
}

/// Flattens one family of a layer: inside a range, a narrower range nested in it wins (at any
/// depth). Ranges that partially overlap, or the same range twice, are a [`Clash`].
pub(super) fn nest<K: Key>(mut entries: Vec<Entry<K>>) -> Result<Steps<K>, Clash> {
    // Outer ranges before the ranges nested in them: by start, then widest first.
    entries.sort_unstable_by(|a, b| a.from.cmp(&b.from).then(b.to.cmp(&a.to)));
    let mut table = Steps::with_capacity(entries.len() * 2);
    // The ranges containing the current position, innermost last.
    let mut open: Vec<Entry<K>> = Vec::new();
    let close = |open: &mut Vec<Entry<K>>, table: &mut Steps<K>| {
        let done = open.pop().expect("an open range");
        if done.to != K::MAX {
            table.push(done.to.succ(), open.last().map_or(NONE, |outer| outer.val));
        }
    };
    for e in entries {
        while open.last().is_some_and(|outer| outer.to < e.from) {
            close(&mut open, &mut table);
        }
        if let Some(outer) = open.last()
            && (e.to > outer.to || (e.from == outer.from && e.to == outer.to))
        {
            return Err(Clash::of(outer, &e));
        }
        table.push(e.from, e.val);
        open.push(e);
    }
    while !open.is_empty() {
        close(&mut open, &mut table);
    }
    Ok(table)
}

// ---- lookups ----

/// Segments per leaf block, and keys per block of the upper levels.
const FANOUT: usize = 16;

/// [`Steps`] laid out for lookups: a static search tree (an implicit B+-tree, no pointers).
///
/// The leaves are blocks of [`FANOUT`] segments, each block holding its starts and then their
/// values side by side (two cache lines for IPv4), so the last step of a lookup finds the
/// segment and its value in one place. `upper[0]` holds the first start of every block,
/// `upper[1]` every [`FANOUT`]-th key of `upper[0]`, and so on up to a level of at most
/// [`FANOUT`] keys. Each level costs one scan of [`FANOUT`] contiguous keys: a lookup among a
/// million segments reads five small blocks, the upper ones hot in cache, instead of the twenty
/// scattered reads of a binary search.
#[derive(Clone, Debug)]
pub(super) struct Table<K> {
    blocks: Vec<Block<K>>,
    upper: Vec<Vec<K>>,
    len: usize,
}

/// `FANOUT` segments; past the last segment of the table, starts are `K::MAX` with the last
/// segment's value (which holds up to `K::MAX` anyway), so scans need no length.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Block<K> {
    starts: [K; FANOUT],
    vals: [u32; FANOUT],
}

impl<K> Default for Table<K> {
    fn default() -> Self {
        Table {
            blocks: Vec::new(),
            upper: Vec::new(),
            len: 0,
        }
    }
}

/// How many keys of `keys` are at most `k` (they are sorted; this form vectorizes).
#[inline]
fn count_le<K: Key>(keys: &[K], k: K) -> usize {
    keys.iter().map(|&s| usize::from(s <= k)).sum()
}

impl<K: Key> Table<K> {
    fn new(steps: &Steps<K>) -> Table<K> {
        let blocks: Vec<Block<K>> = steps
            .starts
            .chunks(FANOUT)
            .zip(steps.vals.chunks(FANOUT))
            .map(|(starts, vals)| {
                let last = *vals.last().expect("chunks are not empty");
                let mut block = Block {
                    starts: [K::MAX; FANOUT],
                    vals: [last; FANOUT],
                };
                block.starts[..starts.len()].copy_from_slice(starts);
                block.vals[..vals.len()].copy_from_slice(vals);
                block
            })
            .collect();
        let mut upper: Vec<Vec<K>> = Vec::new();
        if blocks.len() > 1 {
            upper.push(blocks.iter().map(|b| b.starts[0]).collect());
            while let Some(level) = upper.last().filter(|level| level.len() > FANOUT) {
                let next = level.iter().step_by(FANOUT).copied().collect();
                upper.push(next);
            }
        }
        Table {
            blocks,
            upper,
            len: steps.len(),
        }
    }

    /// Segments.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The segments as (start, value), ascending.
    pub(super) fn segments(&self) -> impl Iterator<Item = (K, u32)> + '_ {
        self.blocks
            .iter()
            .flat_map(|b| b.starts.into_iter().zip(b.vals))
            .take(self.len)
    }

    /// The value at `k`.
    #[inline]
    pub(super) fn get(&self, k: K) -> u32 {
        let block = match self.upper.split_last() {
            None => 0,
            Some((top, below)) => {
                // `p`: how many keys of the current level are at most `k`.
                let mut p = count_le(top, k);
                if p == 0 {
                    return NONE;
                }
                for level in below.iter().rev() {
                    // The keys under key p - 1 of the level above start with it (<= k).
                    let lo = (p - 1) * FANOUT;
                    let hi = (lo + FANOUT).min(level.len());
                    p = lo + count_le(&level[lo..hi], k);
                }
                p - 1
            }
        };
        let Some(block) = self.blocks.get(block) else {
            return NONE;
        };
        match count_le(&block.starts, k) {
            0 => NONE,
            n => block.vals[n - 1],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_tree_agrees_with_a_binary_search() {
        // Sizes around the block size and its powers, keys spaced 3 apart from 10.
        for n in [0, 1, 2, 15, 16, 17, 255, 256, 257, 4095, 4096, 4097, 70_000] {
            let mut steps = Steps::<u32>::with_capacity(n);
            for i in 0..n as u32 {
                steps.push(10 + 3 * i, i % 2);
            }
            let t = steps.clone().finish();
            assert_eq!(t.len(), n, "{n}");
            let segments: Vec<(u32, u32)> = t.segments().collect();
            let want: Vec<(u32, u32)> = steps
                .starts
                .iter()
                .copied()
                .zip(steps.vals.clone())
                .collect();
            assert_eq!(segments, want, "n {n}");
            for k in (0..12 + 3 * n as u32).chain([u32::MAX - 1, u32::MAX]) {
                let want = match steps.starts.partition_point(|&s| s <= k) {
                    0 => NONE,
                    i => steps.vals[i - 1],
                };
                assert_eq!(t.get(k), want, "n {n}, key {k}");
            }
            let mut t6 = Steps::<u128>::with_capacity(n);
            for i in 0..n as u128 {
                t6.push(i << 100, (i % 2) as u32);
            }
            let t6 = t6.finish();
            for i in 0..n as u128 {
                assert_eq!(t6.get((i << 100) + 1), (i % 2) as u32, "n {n}, i {i}");
            }
            assert_eq!(
                t6.get(u128::MAX),
                if n == 0 { NONE } else { ((n - 1) % 2) as u32 }
            );
        }
    }

    #[test]
    fn nesting_splits_outer_ranges_and_clashes_name_the_later_range() {
        let e = |from: u32, to: u32, val: u32, line: u32| Entry {
            from,
            to,
            val,
            src: 0,
            line,
        };
        let t = nest(vec![e(10, 100, 1, 1), e(20, 30, 2, 2), e(25, 25, 3, 3)])
            .unwrap()
            .finish();
        let got: Vec<(u32, u32)> = t.segments().collect();
        assert_eq!(
            got,
            [(10, 1), (20, 2), (25, 3), (26, 2), (31, 1), (101, NONE)]
        );
        let clash = nest(vec![e(20, 40, 2, 1), e(10, 30, 1, 2)]).unwrap_err();
        assert_eq!((clash.later.line, clash.earlier.line), (2, 1));
        assert!(!clash.is_duplicate());
        let dup = nest(vec![e(10, 20, 1, 4), e(10, 20, 2, 9)]).unwrap_err();
        assert!(dup.is_duplicate());
        assert_eq!(dup.later.line, 9);
    }
}
