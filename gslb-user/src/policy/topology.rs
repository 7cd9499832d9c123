//! BIG-IP DNS topology records (`dc."CNC" 202.106.0.0/16 100`), indexed for longest match.
//!
//! Each site takes the score of its most specific matching record: any IP prefix beats any
//! location (F5's longest-match order puts subnets first), a longer prefix beats a shorter one,
//! a location with more named qualifiers beats one with fewer, and among equally specific records
//! the highest score counts.

use std::net::IpAddr;

use ipnet::IpNet;

use super::expr::canonical;
use crate::location::{Location, Qualifier, WildcardMode};

pub use crate::model::{Ldns, TopologyRecord};

/// Whether `client` matches `pattern` perfectly in static proximity, as
/// `client.matches(pattern, mode, Context::Proximity) == Match::Perfect`, but stopping at the
/// first qualifier that differs: this runs for every location record of every decision.
fn perfect(client: &Location, pattern: &Location, mode: WildcardMode) -> bool {
    pattern.0.iter().zip(&client.0).all(|(p, c)| match (p, c) {
        (Qualifier::Any, _) => true,
        (Qualifier::Is(p), Qualifier::Is(c)) => p == c,
        // In static proximity only YES lets the client's wildcard match a value.
        (Qualifier::Is(_), Qualifier::Any) => mode == WildcardMode::Yes,
    })
}

/// How specific a matching record is; more is better. Prefixes rank above every location.
type Rank = u16;
const PREFIX_RANK: Rank = 256;

/// One family's prefix records, flattened into disjoint address intervals: each interval lists,
/// per site, the best record covering all of it, so a lookup is one binary search.
#[derive(Clone, Debug, Default)]
struct Intervals {
    /// Interval starts, ascending; interval i is [starts[i], starts[i + 1]).
    starts: Vec<u128>,
    /// Interval i's entries are entries[offsets[i]..offsets[i + 1]].
    offsets: Vec<u32>,
    /// (site, rank, score).
    entries: Vec<(usize, Rank, u32)>,
}

impl Intervals {
    /// `records`: (first address, last address, site, rank, score).
    fn new(mut records: Vec<(u128, u128, usize, Rank, u32)>) -> Intervals {
        let mut t = Intervals::default();
        if records.is_empty() {
            return t;
        }
        let mut starts: Vec<u128> = records
            .iter()
            .flat_map(|r| [Some(r.0), r.1.checked_add(1)])
            .flatten()
            .collect();
        starts.sort_unstable();
        starts.dedup();
        // Sweep: records sorted by first address join the active set at their start and leave
        // after their last address; per site, the best active (rank, score) counts.
        records.sort_unstable_by_key(|r| r.0);
        let mut next = 0;
        let mut active: Vec<(u128, usize, Rank, u32)> = Vec::new();
        t.offsets.push(0);
        for &start in &starts {
            active.retain(|a| a.0 >= start);
            while next < records.len() && records[next].0 == start {
                let (_, last, site, rank, score) = records[next];
                active.push((last, site, rank, score));
                next += 1;
            }
            let first_entry = t.entries.len();
            for &(_, site, rank, score) in &active {
                let mine = &mut t.entries[first_entry..];
                match mine.iter_mut().find(|e| e.0 == site) {
                    Some(e) if (rank, score) > (e.1, e.2) => *e = (site, rank, score),
                    Some(_) => {}
                    None => t.entries.push((site, rank, score)),
                }
            }
            t.starts.push(start);
            t.offsets.push(t.entries.len() as u32);
        }
        t
    }

    fn lookup(&self, addr: u128) -> &[(usize, Rank, u32)] {
        let i = self.starts.partition_point(|&s| s <= addr);
        if i == 0 {
            return &[];
        }
        &self.entries[self.offsets[i - 1] as usize..self.offsets[i] as usize]
    }
}

/// The topology table, built once per configuration.
#[derive(Clone, Debug, Default)]
pub struct Topology {
    v4: Intervals,
    v6: Intervals,
    /// (pattern, site, score, rank), most specific first.
    locations: Vec<(Location, usize, u32, Rank)>,
    records: usize,
}

impl Topology {
    pub fn new(records: impl IntoIterator<Item = TopologyRecord>) -> Topology {
        let mut t = Topology::default();
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        for r in records {
            t.records += 1;
            match r.ldns {
                Ldns::Prefix(net) => {
                    let rank = PREFIX_RANK + Rank::from(net.prefix_len());
                    let (first, last) = match net {
                        IpNet::V4(n) => (
                            u128::from(u32::from(n.network())),
                            u128::from(u32::from(n.broadcast())),
                        ),
                        IpNet::V6(n) => (u128::from(n.network()), u128::from(n.broadcast())),
                    };
                    let list = if net.addr().is_ipv4() {
                        &mut v4
                    } else {
                        &mut v6
                    };
                    list.push((first, last, r.site.index(), rank, r.score));
                }
                Ldns::Location(l) => {
                    let rank = l.0.iter().filter(|q| !q.is_any()).count() as Rank;
                    t.locations.push((l, r.site.index(), r.score, rank));
                }
            }
        }
        t.v4 = Intervals::new(v4);
        t.v6 = Intervals::new(v6);
        t.locations.sort_by_key(|l| std::cmp::Reverse(l.3));
        t
    }

    pub fn len(&self) -> usize {
        self.records
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Fills `best[site]` with (rank, score) of the site's best record matching the client, for
    /// every site below `best.len()`; sites without a match stay `None`.
    pub fn scores(
        &self,
        client: IpAddr,
        location: Option<&Location>,
        mode: WildcardMode,
        best: &mut [Option<(Rank, u32)>],
    ) {
        let entries = match canonical(client) {
            IpAddr::V4(a) => self.v4.lookup(u128::from(u32::from(a))),
            IpAddr::V6(a) => self.v6.lookup(u128::from(a)),
        };
        for &(site, rank, score) in entries {
            if let Some(slot) = best.get_mut(site) {
                *slot = Some((rank, score));
            }
        }
        for (pattern, site, score, rank) in &self.locations {
            // Matching locations is the costly part: skip records that could not improve.
            let Some(slot) = best.get_mut(*site) else {
                continue;
            };
            if slot.is_some_and(|(r, s)| r > *rank || (r == *rank && s >= *score)) {
                continue;
            }
            let matched = *rank == 0 || location.is_some_and(|l| perfect(l, pattern, mode));
            if matched {
                *slot = Some((*rank, *score));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(site: usize, ldns: &str, score: u32) -> TopologyRecord {
        let ldns = match ldns.parse() {
            Ok(net) => Ldns::Prefix(net),
            Err(_) => Ldns::Location(Location::parse(ldns).unwrap()),
        };
        TopologyRecord {
            site: crate::model::SiteId::of(site),
            ldns,
            score,
        }
    }

    fn scores(
        t: &Topology,
        client: &str,
        location: Option<&str>,
        sites: usize,
    ) -> Vec<Option<u32>> {
        let loc = location.map(|l| Location::parse(l).unwrap());
        let mut best = vec![None; sites];
        t.scores(
            client.parse().unwrap(),
            loc.as_ref(),
            WildcardMode::Yes,
            &mut best,
        );
        best.into_iter().map(|b| b.map(|(_, s)| s)).collect()
    }

    #[test]
    fn longest_match_per_site() {
        let t = Topology::new([
            // Seed 004's table: site 0 = CNC, site 1 = TEL.
            rec(0, "202.106.0.0/16", 100),
            rec(1, "219.172.0.0/16", 100),
            rec(0, "200.100.0.0/16", 100),
            // A more specific prefix overrides the /16 for site 0 only.
            rec(0, "202.106.7.0/24", 10),
            rec(1, "0.0.0.0/0", 5),
            rec(2, "Asia.CN", 50),
            rec(2, "Asia", 70),
            rec(3, "*", 1),
            rec(1, "2001:db8::/32", 40),
            rec(0, "2001:db8:1::/48", 30),
        ]);
        assert_eq!(t.len(), 10);
        type Case<'a> = (&'a str, Option<&'a str>, [Option<u32>; 4]);
        let table: [Case<'_>; 6] = [
            ("202.106.1.1", None, [Some(100), Some(5), None, Some(1)]),
            ("202.106.7.9", None, [Some(10), Some(5), None, Some(1)]),
            (
                "219.172.3.4",
                Some("Asia.CN.Beijing"),
                [None, Some(100), Some(50), Some(1)],
            ),
            (
                "192.0.2.1",
                Some("Asia.JP"),
                [None, Some(5), Some(70), Some(1)],
            ),
            (
                "::ffff:200.100.9.9",
                None,
                [Some(100), Some(5), None, Some(1)],
            ),
            ("2001:db8:1::5", None, [Some(30), Some(40), None, Some(1)]),
        ];
        for (client, location, want) in table {
            assert_eq!(
                scores(&t, client, location, 4),
                want,
                "{client} {location:?}"
            );
        }
        // Sites beyond the slice are ignored, not a panic.
        assert_eq!(scores(&t, "202.106.1.1", None, 1), [Some(100)]);
    }

    proptest::proptest! {
        /// The interval table gives what a scan of every record for the longest match gives.
        #[test]
        fn intervals_agree_with_a_scan(
            records in proptest::collection::vec((0..4usize, 0..=32u8, proptest::num::u32::ANY, 1..50u32), 0..40),
            clients in proptest::collection::vec(proptest::num::u32::ANY, 1..20),
        ) {
            // Few distinct high bits so that prefixes nest and overlap.
            let records: Vec<TopologyRecord> = records
                .into_iter()
                .map(|(site, len, addr, score)| {
                    let net = ipnet::Ipv4Net::new((addr & 0xc0c0_0000).into(), len).unwrap().trunc();
                    TopologyRecord { site: crate::model::SiteId::of(site), ldns: Ldns::Prefix(net.into()), score }
                })
                .collect();
            let t = Topology::new(records.clone());
            for c in clients {
                let client = IpAddr::V4((c & 0xc0c0_ffff).into());
                let mut want = [None; 4];
                for r in &records {
                    let Ldns::Prefix(net) = &r.ldns else { unreachable!() };
                    if net.contains(&client) {
                        let key = (PREFIX_RANK + Rank::from(net.prefix_len()), r.score);
                        if want[r.site.index()].is_none_or(|w| key > w) {
                            want[r.site.index()] = Some(key);
                        }
                    }
                }
                let mut got = [None; 4];
                t.scores(client, None, WildcardMode::Yes, &mut got);
                proptest::prop_assert_eq!(got, want, "{}", client);
            }
        }
    }

    #[test]
    fn perfect_agrees_with_location_matches() {
        use crate::location::{Context, Match};
        let locations = [
            "*",
            "Asia",
            "Asia.CN",
            "*.CN",
            "Asia.CN.Beijing",
            "Europe.CN",
            "asia.*.beijing",
            "Asia.JP",
        ];
        for mode in [
            WildcardMode::Yes,
            WildcardMode::No,
            WildcardMode::Expression,
        ] {
            for c in locations {
                for p in locations {
                    let (c, p) = (Location::parse(c).unwrap(), Location::parse(p).unwrap());
                    let want = c.matches(&p, mode, Context::Proximity) == Match::Perfect;
                    assert_eq!(perfect(&c, &p, mode), want, "{c} vs {p} {mode:?}");
                }
            }
        }
    }

    #[test]
    fn equally_specific_records_take_the_highest_score() {
        let t = Topology::new([
            rec(0, "Asia.CN", 10),
            rec(0, "*.CN.Beijing", 20),
            rec(0, "Asia.CN", 30),
        ]);
        // "*.CN.Beijing" names two qualifiers, like "Asia.CN".
        assert_eq!(
            scores(&t, "192.0.2.1", Some("Asia.CN.Beijing"), 1),
            [Some(30)]
        );
        assert_eq!(
            scores(&t, "192.0.2.1", Some("Asia.CN.Shanghai"), 1),
            [Some(30)]
        );
        assert_eq!(scores(&t, "192.0.2.1", None, 1), [None]);
    }
}
