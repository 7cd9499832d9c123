//! The client address space as one line of keys, IPv6 and IPv4-mapped IPv6 (`::ffff:a.b.c.d`)
//! alike, cut into segments: step functions over it, and the prefixes a range of it is made of.
//! The fast path's view trie is keyed the same way, so what is computed here is what it sees.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// `::ffff:0.0.0.0`, the first IPv4 key.
pub const V4_FIRST: u128 = gslb_common::V4_MAPPED;
/// `::ffff:255.255.255.255`, the last IPv4 key.
pub const V4_LAST: u128 = V4_FIRST | 0xffff_ffff;

/// The key of an address; an IPv4-mapped IPv6 address is the IPv4 address.
pub fn key_of(ip: IpAddr) -> u128 {
    gslb_common::mapped_key(ip)
}

/// The address of a key: IPv4 in the mapped range.
pub fn addr_of(key: u128) -> IpAddr {
    if (V4_FIRST..=V4_LAST).contains(&key) {
        IpAddr::V4(Ipv4Addr::from(key as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(key))
    }
}

/// The first and last key of a prefix.
pub fn range_of(net: &IpNet) -> (u128, u128) {
    let net = net.trunc();
    (key_of(net.network()), key_of(net.broadcast()))
}

/// A step function over the keys: `vals[i]` holds on `[starts[i], starts[i + 1])`. The first
/// start is 0; neighbours differ in value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressSteps {
    pub starts: Vec<u128>,
    pub vals: Vec<u32>,
}

impl Default for AddressSteps {
    fn default() -> Self {
        AddressSteps::constant(0)
    }
}

impl AddressSteps {
    pub fn constant(val: u32) -> AddressSteps {
        AddressSteps {
            starts: vec![0],
            vals: vec![val],
        }
    }

    /// Sets the value from `start` on; `start` is at least the last start (equal: replaces it).
    pub fn push(&mut self, start: u128, val: u32) {
        if self.starts.last() == Some(&start) {
            self.starts.pop();
            self.vals.pop();
        }
        debug_assert!(self.starts.last().is_none_or(|&last| last < start));
        if self.vals.last() != Some(&val) {
            self.starts.push(start);
            self.vals.push(val);
        }
    }

    /// The value at `key`.
    pub fn get(&self, key: u128) -> u32 {
        self.vals[self.starts.partition_point(|&s| s <= key) - 1]
    }

    /// Longest-prefix match over `prefixes` (which, being prefixes, nest or are disjoint), `none`
    /// where no prefix matches. Of two equal prefixes the later wins, as the later insert into
    /// an LPM trie does. An IPv6 prefix never matches IPv4 keys, even one covering
    /// `::ffff:0:0/96`: an IPv4 client is in IPv4 prefixes only, as `IpNet::contains` says.
    pub fn longest_match(
        prefixes: impl IntoIterator<Item = (IpNet, u32)>,
        none: u32,
    ) -> AddressSteps {
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        for (net, val) in prefixes {
            let (first, last) = range_of(&net);
            match net {
                IpNet::V4(_) => v4.push((first, last, val)),
                IpNet::V6(_) => v6.push((first, last, val)),
            }
        }
        let v4 = nested(v4, none);
        let v6 = nested(v6, none);
        // The IPv6 function outside the IPv4 range, the IPv4 one inside.
        let mut out = AddressSteps {
            starts: Vec::new(),
            vals: Vec::new(),
        };
        for (&s, &v) in v6
            .starts
            .iter()
            .zip(&v6.vals)
            .take_while(|(s, _)| **s < V4_FIRST)
        {
            out.push(s, v);
        }
        out.push(V4_FIRST, none);
        for (&s, &v) in v4
            .starts
            .iter()
            .zip(&v4.vals)
            .filter(|(s, _)| **s >= V4_FIRST)
        {
            out.push(s, v);
        }
        out.push(V4_LAST + 1, v6.get(V4_LAST + 1));
        for (&s, &v) in v6
            .starts
            .iter()
            .zip(&v6.vals)
            .filter(|(s, _)| **s > V4_LAST + 1)
        {
            out.push(s, v);
        }
        out
    }
}

/// The step function of nested-or-disjoint inclusive ranges, innermost wins.
fn nested(mut ranges: Vec<(u128, u128, u32)>, none: u32) -> AddressSteps {
    // Outer before inner; a stable sort keeps equal ranges in their order, the later inside.
    ranges.sort_by_key(|&(first, last, _)| (first, std::cmp::Reverse(last)));
    let mut out = AddressSteps::constant(none);
    let mut open: Vec<(u128, u32)> = Vec::new();
    let close = |open: &mut Vec<(u128, u32)>, out: &mut AddressSteps, before: Option<u128>| {
        while let Some(&(last, _)) = open.last() {
            if before.is_some_and(|b| last >= b) {
                break;
            }
            open.pop();
            if last != u128::MAX {
                out.push(last + 1, open.last().map_or(none, |&(_, v)| v));
            }
        }
    };
    for (first, last, val) in ranges {
        close(&mut open, &mut out, Some(first));
        out.push(first, val);
        open.push((last, val));
    }
    close(&mut open, &mut out, None);
    out
}

/// The fewest prefixes covering exactly `[first, last]`, which lies on one side of the IPv4
/// range's edges or inside it: IPv4 prefixes inside, IPv6 outside.
pub fn prefixes_of(first: u128, last: u128, out: &mut Vec<IpNet>) {
    let v4 = (V4_FIRST..=V4_LAST).contains(&first);
    debug_assert_eq!(
        v4,
        (V4_FIRST..=V4_LAST).contains(&last),
        "{first:x}..{last:x} straddles"
    );
    let mut at = first;
    loop {
        // The largest aligned block starting at `at` that ends by `last`.
        let align = if at == 0 { 128 } else { at.trailing_zeros() };
        let span = if last - at == u128::MAX {
            128
        } else {
            (last - at + 1).ilog2()
        };
        let bits = align.min(span);
        let len = 128 - bits as u8;
        out.push(if v4 {
            IpNet::V4(
                Ipv4Net::new(Ipv4Addr::from(at as u32), len - 96).expect("length within IPv4"),
            )
        } else {
            IpNet::V6(Ipv6Net::new(Ipv6Addr::from(at), len).expect("length within IPv6"))
        });
        let end = if bits == 128 {
            u128::MAX
        } else {
            at + ((1u128 << bits) - 1)
        };
        if end >= last {
            break;
        }
        at = end + 1;
    }
}

/// The step function of coalesced segments, for lookups by the responder and the ECS scope.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Segments {
    /// Ascending; the first is 0.
    pub starts: Vec<u128>,
    pub views: Vec<u32>,
    /// LDNS views (0: none).
    pub rtt_views: Vec<u32>,
}

impl Segments {
    /// The view of `ip` and the shortest prefix length around it over which every address
    /// has that view (the RFC 7871 scope, counted in the address's own family).
    pub fn lookup(&self, ip: IpAddr) -> (u32, u8) {
        let (view, _, scope) = self.lookup_both(ip);
        (view, scope)
    }

    /// [`lookup`](Self::lookup), with the LDNS view too (the scope holds for both).
    pub fn lookup_both(&self, ip: IpAddr) -> (u32, u32, u8) {
        if self.starts.is_empty() {
            return (gslb_common::DEFAULT_VIEW, 0, 0);
        }
        let i = self.index(ip);
        let (view, rtt_view) = (self.views[i], self.rtt_view(i));
        let scope = self.scope_where(ip, |v, r| v == view && r == rtt_view);
        (view, rtt_view, scope)
    }

    fn index(&self, ip: IpAddr) -> usize {
        let key = key_of(ip);
        self.starts.partition_point(|&s| s <= key) - 1
    }

    fn rtt_view(&self, i: usize) -> u32 {
        self.rtt_views.get(i).copied().unwrap_or(0)
    }

    /// The (view, LDNS view) of `ip`.
    pub fn views_of(&self, ip: IpAddr) -> (u32, u32) {
        if self.starts.is_empty() {
            return (gslb_common::DEFAULT_VIEW, 0);
        }
        let i = self.index(ip);
        (self.views[i], self.rtt_view(i))
    }

    /// The ECS scope of an answer that depends on the view (RFC 7871 §7.2.1), as the fast
    /// path reads it from `ViewValue::scope`: the length (counted in `ip`'s family) of the
    /// largest aligned block around `ip` inside its segment, which is the trie prefix
    /// `prefixes_of` gives for that segment and the address (the pieces it cuts a range into
    /// are the range's maximal aligned blocks). One (view, LDNS view) holds in the block, so
    /// no answer changes there; it may be longer than the shortest such prefix (which
    /// [`scope_where`](Self::scope_where) approaches), never shorter.
    pub fn block_scope(&self, ip: IpAddr) -> u8 {
        if self.starts.is_empty() {
            return 0;
        }
        let key = key_of(ip);
        let base = if (V4_FIRST..=V4_LAST).contains(&key) {
            96
        } else {
            0
        };
        let i = self.index(ip);
        let first = self.starts[i];
        let last = self.starts.get(i + 1).map_or(u128::MAX, |&next| next - 1);
        (0..=128 - base)
            .find(|&len| {
                let host = u128::MAX.checked_shr(base + len).unwrap_or(0);
                (key & !host) >= first && (key | host) <= last
            })
            .unwrap_or(128 - base) as u8
    }

    /// The shortest prefix length around `ip` (counted in its own family) over which every
    /// segment's (view, LDNS view) satisfies `same`, which must hold for `ip`'s own: the RFC
    /// 7871 scope of an answer that is the same exactly where `same` holds. The walk over
    /// neighbouring segments stops after [`SCOPE_WALK`] of them on each side; a stopped walk
    /// gives a longer scope than the shortest, never a shorter one.
    pub fn scope_where(&self, ip: IpAddr, same: impl Fn(u32, u32) -> bool) -> u8 {
        let key = key_of(ip);
        let v4 = (V4_FIRST..=V4_LAST).contains(&key);
        let (bits, base) = if v4 { (32, 96) } else { (128, 0) };
        if self.starts.is_empty() {
            return 0;
        }
        let same_at = |j: usize| same(self.views[j], self.rtt_view(j));
        let end = |j: usize| self.starts.get(j + 1).map_or(u128::MAX, |&next| next - 1);
        let len = self.starts.len();
        // Segments are cut at both edges of the IPv4-mapped range (`merge`). IPv4-mapped
        // addresses are not IPv6 clients: an IPv6 walk steps over them, an IPv4 walk stays
        // inside them.
        let v4_first = self.starts.partition_point(|&s| s < V4_FIRST);
        let v4_end = self.starts.partition_point(|&s| s <= V4_LAST);
        let prev = |j: usize| -> Option<usize> {
            match (v4, j == v4_end) {
                (true, _) => (j > v4_first).then(|| j - 1),
                (false, true) => v4_first.checked_sub(1),
                (false, false) => j.checked_sub(1),
            }
        };
        let next = |j: usize| -> Option<usize> {
            match (v4, j + 1 == v4_first) {
                (true, _) => (j + 1 < v4_end).then_some(j + 1),
                (false, true) => (v4_end < len).then_some(v4_end),
                (false, false) => (j + 1 < len).then_some(j + 1),
            }
        };
        let i = self.index(ip);
        let walk = |step: &dyn Fn(usize) -> Option<usize>| {
            let mut at = i;
            for _ in 0..SCOPE_WALK {
                match step(at) {
                    Some(j) if same_at(j) => at = j,
                    _ => break,
                }
            }
            at
        };
        let (first, last) = (self.starts[walk(&prev)], end(walk(&next)));
        (0..=bits)
            .find(|&len| {
                let host = u128::MAX.checked_shr(base + len).unwrap_or(0);
                (key & !host) >= first && (key | host) <= last
            })
            .unwrap_or(bits) as u8
    }
}

/// Most neighbouring segments [`Segments::scope_where`] looks at on each side of a client's.
pub const SCOPE_WALK: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn key(s: &str) -> u128 {
        key_of(s.parse().unwrap())
    }

    #[test]
    fn longest_match_table() {
        let steps = AddressSteps::longest_match(
            [
                (net("10.0.0.0/8"), 1),
                (net("10.1.0.0/16"), 2),
                (net("10.1.2.0/24"), 3),
                (net("10.1.2.0/24"), 4),
                (net("192.0.2.0/24"), 5),
                (net("::/0"), 6),
                (net("2001:db8::/32"), 7),
            ],
            0,
        );
        let table = [
            ("9.255.255.255", 0),
            ("10.0.0.0", 1),
            ("10.1.0.0", 2),
            ("10.1.1.255", 2),
            // The later of two equal prefixes wins.
            ("10.1.2.7", 4),
            ("10.1.3.0", 2),
            ("10.2.0.0", 1),
            ("11.0.0.0", 0),
            ("192.0.2.255", 5),
            ("192.0.3.0", 0),
            // ::/0 covers every IPv6 address but no IPv4 one.
            ("::", 6),
            ("::fffe:ffff:ffff", 6),
            ("::1:0:0:0", 6),
            ("2001:db8::1", 7),
            ("2001:db9::", 6),
            ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 6),
        ];
        for (addr, want) in table {
            assert_eq!(steps.get(key(addr)), want, "{addr}");
        }
        assert!(
            steps.vals.windows(2).all(|w| w[0] != w[1]),
            "neighbours differ: {steps:?}"
        );
    }

    #[test]
    fn ranges_split_into_the_fewest_prefixes() {
        let table: [(&str, &str, &[&str]); 6] = [
            ("10.0.0.0", "10.0.0.255", &["10.0.0.0/24"]),
            (
                "10.0.0.1",
                "10.0.0.6",
                &["10.0.0.1/32", "10.0.0.2/31", "10.0.0.4/31", "10.0.0.6/32"],
            ),
            ("0.0.0.0", "255.255.255.255", &["0.0.0.0/0"]),
            ("::", "::7fff:ffff:ffff", &["::/81"]),
            (
                "::",
                "::fffe:ffff:ffff",
                &[
                    "::/81",
                    "::8000:0:0/82",
                    "::c000:0:0/83",
                    "::e000:0:0/84",
                    "::f000:0:0/85",
                    "::f800:0:0/86",
                    "::fc00:0:0/87",
                    "::fe00:0:0/88",
                    "::ff00:0:0/89",
                    "::ff80:0:0/90",
                    "::ffc0:0:0/91",
                    "::ffe0:0:0/92",
                    "::fff0:0:0/93",
                    "::fff8:0:0/94",
                    "::fffc:0:0/95",
                    "::fffe:0:0/96",
                ],
            ),
            (
                "2001:db8::",
                "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
                &["2001:db8::/32"],
            ),
        ];
        for (first, last, want) in table {
            let mut out = Vec::new();
            prefixes_of(key(first), key(last), &mut out);
            let want: Vec<IpNet> = want.iter().map(|s| net(s)).collect();
            assert_eq!(out, want, "{first}..{last}");
        }
        let mut all = Vec::new();
        prefixes_of(0, u128::MAX, &mut all);
        assert_eq!(all, vec![net("::/0")]);
    }

    /// The scope the responder computes for a client is the length of the trie prefix (of
    /// `prefixes_of` over its segment) that holds it, which the fast path reads from the
    /// prefix's `ViewValue::scope`: at both ends of every prefix of every segment.
    #[test]
    fn block_scope_is_the_trie_prefix_holding_the_client() {
        let mut starts = vec![
            0,
            key("2001:db8::"),
            key("2001:db8::7"),
            key("2001:db9::1"),
            V4_FIRST,
            key("10.0.0.0"),
            key("10.1.2.3"),
            key("192.0.2.10"),
            key("192.0.2.11"),
            key("203.0.113.77"),
            V4_LAST + 1,
            key("fe80::"),
        ];
        starts.sort_unstable();
        let n = starts.len();
        let segments = Segments {
            starts,
            views: (0..n as u32).collect(),
            rtt_views: vec![0; n],
        };
        let mut checked = 0;
        for i in 0..n {
            let first = segments.starts[i];
            let last = segments.starts.get(i + 1).map_or(u128::MAX, |&s| s - 1);
            let mut nets = Vec::new();
            prefixes_of(first, last, &mut nets);
            for net in nets {
                for end in [net.network(), net.broadcast()] {
                    assert_eq!(
                        segments.block_scope(end),
                        net.prefix_len(),
                        "{end} in {net}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 100, "{checked}");
    }

    #[test]
    fn segment_scope_is_the_widest_block_inside_the_segment() {
        // View 1 on 192.0.2.0/24 and 2001:db8::/32; default elsewhere.
        let segments = Segments {
            starts: vec![
                0,
                key("2001:db8::"),
                key("2001:db9::"),
                key("192.0.2.0"),
                key("192.0.3.0"),
            ],
            views: vec![0, 1, 0, 1, 0],
            rtt_views: vec![0; 5],
        };
        // Not sorted above: sort as the compiler does.
        let mut pairs: Vec<(u128, u32)> = segments
            .starts
            .iter()
            .copied()
            .zip(segments.views.iter().copied())
            .collect();
        pairs.sort_unstable();
        let segments = Segments {
            starts: pairs.iter().map(|p| p.0).collect(),
            views: pairs.iter().map(|p| p.1).collect(),
            rtt_views: vec![0; pairs.len()],
        };
        let table = [
            ("192.0.2.77", (1, 24)),
            ("2001:db8::5", (1, 32)),
            // The default segment after 192.0.2.0/24: 192.0.3.0/24 lies inside it, the /23
            // around it does not.
            ("192.0.3.1", (0, 24)),
            // 0.0.0.0/1 lies inside the default segment before 192.0.2.0; 0.0.0.0/0 does not.
            ("10.0.0.1", (0, 1)),
            ("203.0.113.1", (0, 5)),
        ];
        for (addr, want) in table {
            assert_eq!(segments.lookup(addr.parse().unwrap()), want, "{addr}");
        }
    }
}
