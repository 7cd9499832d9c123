//! The RTT rows the world gives the compiler, kept from one snapshot to the next: when only
//! some entries' RTTs changed, the next rows are these with only those rows made again (the
//! others share their RTTs, [`LdnsRtt::rtt_us`] being an `Arc`), and the compiler is told which
//! ([`RttChanges`]) instead of comparing 100,000 rows. When entries come or go (the prefixes
//! change), the rows are read from the whole table again and the compiler compares them.

use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use crate::compile::{LdnsRtt, RttChanges};
use crate::model::Model;
use crate::probe::{LdnsMask, RttHandle, RttTable, RttVersion};

/// Rows as the last snapshot was given them.
pub(super) struct RttRows {
    /// The table's version they were read at.
    version: RttVersion,
    /// The configuration's sites, the columns.
    sites: Vec<String>,
    /// By LDNS entry, in address order: an entry's row is found by binary search.
    rows: Arc<Vec<LdnsRtt>>,
    /// The rows the last [`RttRows::next`] named as changed; `None`: it read the whole table.
    /// Read by the tests.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) named: Option<Vec<usize>>,
}

/// The configuration's sites by name, ascending, with their column: the order the table
/// gives an entry's cells in, so that a row is read by one merge of the two lists, not by a
/// lookup per cell (the whole table is 6,400,000 cells at 100,000 entries and 64 sites).
struct Columns<'a> {
    by_name: Vec<(&'a str, usize)>,
}

impl<'a> Columns<'a> {
    fn of(model: &'a Model) -> Self {
        let mut by_name: Vec<(&str, usize)> = model
            .sites
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.as_str(), i))
            .collect();
        by_name.sort_unstable();
        Columns { by_name }
    }

    /// One entry's row from its cells, ascending by site as the table gives them:
    /// microseconds by column; `None` when no configured site measures it.
    fn row<'c>(
        &self,
        cells: impl Iterator<Item = (&'c str, std::time::Duration)>,
    ) -> Option<Arc<[Option<u32>]>> {
        let mut rtt_us = vec![None; self.by_name.len()];
        let mut sites = self.by_name.iter().peekable();
        for (site, d) in cells {
            while sites.next_if(|(name, _)| *name < site).is_some() {}
            if let Some((_, i)) = sites.next_if(|(name, _)| *name == site) {
                rtt_us[*i] = Some(u32::try_from(d.as_micros()).unwrap_or(u32::MAX));
            }
        }
        rtt_us.iter().any(Option::is_some).then(|| rtt_us.into())
    }
}

/// Every row of `table`.
fn all_rows(table: &RttTable, mask: LdnsMask, columns: &Columns<'_>) -> Vec<LdnsRtt> {
    table
        .rows()
        .filter_map(|(&group, cells)| {
            let len = match group {
                IpAddr::V4(_) => mask.v4.min(32),
                IpAddr::V6(_) => mask.v6.min(128),
            };
            let ldns = IpNet::new(group, len).ok()?;
            let rtt_us = columns.row(cells.iter().map(|(s, c)| (s.as_str(), c.rtt)))?;
            Some(LdnsRtt { ldns, rtt_us })
        })
        .collect()
}

/// An entry whose RTTs changed, and its row now (`None`: no configured site measures it).
type Changed = (IpAddr, Option<Arc<[Option<u32>]>>);

impl RttRows {
    /// The rows of `rtt`'s table now under `config`, and, when `last` (the rows given before)
    /// only had RTTs of existing rows changed, which rows differ from `last`'s. Keeps the
    /// rows in `last` for the next call.
    pub(super) fn next(
        last: &mut Option<RttRows>,
        model: &Model,
        rtt: Option<&RttHandle>,
    ) -> (Arc<Vec<LdnsRtt>>, Option<RttChanges>) {
        let Some(handle) = rtt else {
            *last = None;
            return (Arc::default(), None);
        };
        let columns = Columns::of(model);
        let prev = last.take().filter(|p| {
            p.sites.len() == model.sites.len()
                && p.sites.iter().zip(&model.sites).all(|(a, b)| *a == b.name)
        });
        // Under the table's lock, only the changed entries are read; the rows are copied after.
        let changed = prev.as_ref().and_then(|p| {
            handle.read(|table| {
                let changed: Vec<Changed> = table
                    .changed_since(p.version)?
                    .map(|group| (group, columns.row(table.row(group))))
                    .collect();
                Some((table.version(), changed))
            })
        });
        let patched = prev
            .zip(changed)
            .and_then(|(p, (version, changed))| p.patched(version, changed));
        let (next, changes) = patched.unwrap_or_else(|| {
            let mask = handle.settings().mask;
            let (version, rows) =
                handle.read(|table| (table.version(), all_rows(table, mask, &columns)));
            let rows = RttRows {
                version,
                sites: model.sites.iter().map(|s| s.name.clone()).collect(),
                rows: Arc::new(rows),
                named: None,
            };
            (rows, None)
        });
        let rows = next.rows.clone();
        *last = Some(next);
        (rows, changes)
    }

    /// These rows with the `changed` entries' rows (read at `version`) in place of theirs, and
    /// which rows differ; `None` when a row comes or goes.
    fn patched(
        self,
        version: RttVersion,
        changed: Vec<Changed>,
    ) -> Option<(RttRows, Option<RttChanges>)> {
        let mut new: Vec<(usize, Arc<[Option<u32>]>)> = Vec::new();
        for (group, rtt_us) in changed {
            let at = self.rows.binary_search_by(|r| r.ldns.addr().cmp(&group));
            match (at, rtt_us) {
                (Ok(i), Some(rtt_us)) => {
                    // Cells of sites not configured here may have changed, and nothing else.
                    if rtt_us != self.rows[i].rtt_us {
                        new.push((i, rtt_us));
                    }
                }
                // Measured by no configured site, before and after: no row either time.
                (Err(_), None) => {}
                _ => return None,
            }
        }
        if new.is_empty() {
            let same = RttRows {
                version,
                named: Some(Vec::new()),
                ..self
            };
            return Some((same, None));
        }
        // A copy of the row list, not of the rows: each unchanged row's RTTs are shared.
        let mut rows = (*self.rows).clone();
        let mut named = Vec::with_capacity(new.len());
        for (i, rtt_us) in new {
            rows[i].rtt_us = rtt_us;
            named.push(i);
        }
        named.sort_unstable();
        let changes = RttChanges {
            since: self.rows,
            rows: named.clone(),
        };
        let next = RttRows {
            version,
            sites: self.sites,
            rows: Arc::new(rows),
            named: Some(named),
        };
        Some((next, Some(changes)))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;
    use crate::compile::{Compiler, Inputs};
    use crate::config::Config;
    use crate::health::HealthSupervisor;
    use crate::probe::{NetProber, ProbeKind, ProbeSettings, ProbeSupervisor, RttRow, Sample};
    use crate::world::World;

    const CONFIG: &str = r#"
[server]
listen = ["192.0.2.53"]
site = "south"
[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"
[[site]]
name = "south"
ip = "192.0.2.1"
[[site]]
name = "east"
ip = "192.0.2.2"
[[site]]
name = "west"
ip = "192.0.2.3"
[[service]]
name = "web-south"
ip = "198.51.100.1"
site = "south"
[[service]]
name = "web-east"
ip = "198.51.100.2"
site = "east"
[[service]]
name = "web-west"
ip = "198.51.100.3"
site = "west"
[[gslb_domain]]
name = "www.example.com"
services = ["web-south", "web-east", "web-west"]
method = "rtt"
fallback = "globalavailability"
[rtt]
ldns_mask_v4 = 24
"#;

    /// The entry of row `i`: 10.0.i.0/24.
    fn group(i: u8) -> IpAddr {
        IpAddr::from([10, 0, i, 0])
    }

    fn rows(groups: impl Iterator<Item = u8>, ms: impl Fn(u8) -> u64) -> Vec<RttRow> {
        groups
            .map(|i| RttRow {
                ldns: group(i),
                rtt: Some(Duration::from_millis(ms(i))),
                kind: Some(ProbeKind::Icmp),
            })
            .collect()
    }

    /// What the world named to the compiler in its last snapshot.
    fn named(world: &World) -> Option<Vec<usize>> {
        let compiling = world.compiling.lock().unwrap();
        compiling.rtt.as_ref().unwrap().named.clone()
    }

    /// Each change of the RTT table, local or merged from a peer, reaches the world's next
    /// snapshot as the changed rows alone, named to the compiler; entries that come or go
    /// make it read the whole table. Every snapshot equals what a compiler given the same rows
    /// without names (so comparing every row, as every snapshot did before) compiles.
    #[tokio::test]
    async fn the_world_names_the_rows_that_changed_and_compiles_what_comparing_them_does() {
        let config = Config::parse(CONFIG, Path::new("rtt-rows.toml")).unwrap();
        let supervisor = ProbeSupervisor::start(
            "south",
            ProbeSettings {
                mask: LdnsMask { v4: 24, v6: 128 },
                ..ProbeSettings::default()
            },
            NetProber::default(),
        )
        .unwrap();
        let handle = supervisor.handle();
        let mut world = World::new(&config, HealthSupervisor::new());
        world.rtt = Some(handle.clone());
        // East nearer than west to every entry; south measures none yet.
        handle.merge_remote("east", &rows(0..8, |i| 20 + u64::from(i)));
        handle.merge_remote("west", &rows(0..8, |_| 60));
        // "north" is no configured site: its entries have no row.
        handle.merge_remote("north", &rows(100..102, |_| 1));

        let mut compared = Compiler::default();
        let mut step = |world: &World, case: &str, want: Option<Vec<usize>>| {
            let snapshot = world.snapshot();
            assert_eq!(named(world), want, "{case}: rows named");
            let by_comparing = compared.compile(
                &config,
                &Inputs {
                    services: world.service_states(),
                    disabled_domains: vec![false],
                    rtt: Arc::new((*snapshot.rtt).clone()),
                    ..Inputs::default()
                },
            );
            assert!(snapshot == by_comparing, "{case}: the same answers");
            snapshot
        };
        let first = step(&world, "first", None);
        // By configuration site (south, east, west); north's cells are no column.
        let want: Vec<LdnsRtt> = (0..8)
            .map(|i| LdnsRtt {
                ldns: IpNet::new(group(i), 24).unwrap(),
                rtt_us: vec![None, Some(20_000 + 1_000 * u32::from(i)), Some(60_000)].into(),
            })
            .collect();
        assert_eq!(*first.rtt, want);
        let same = step(&world, "nothing changed", Some(vec![]));
        assert!(Arc::ptr_eq(&same.rtt, &first.rtt), "the same rows");

        // A local reading: south is now nearest to entry 3.
        handle.record_local(
            group(3),
            Sample {
                kind: ProbeKind::Icmp,
                rtt: Duration::from_millis(2),
            },
        );
        let local = step(&world, "local reading", Some(vec![3]));
        assert_eq!(local.rtt[3].rtt_us[0], Some(2_000));
        assert_ne!(local.rtt_choices, first.rtt_choices, "the answers moved");
        assert!(
            (0..8)
                .filter(|&r| r != 3)
                .all(|r| Arc::ptr_eq(&local.rtt[r].rtt_us, &first.rtt[r].rtt_us)),
            "the other rows are shared, not copied"
        );

        // Merged from peers as MEP delivers them: west now nearest to entries 1 and 6.
        handle.merge_remote("west", &rows([1, 6].into_iter(), |_| 5));
        let remote = step(&world, "peer's readings", Some(vec![1, 6]));
        assert_ne!(remote.rtt_choices, local.rtt_choices, "the answers moved");
        // A change of an entry no configured site measures changes no row.
        handle.merge_remote("north", &rows(100..101, |_| 3));
        let unseen = step(&world, "north's reading", Some(vec![]));
        assert!(Arc::ptr_eq(&unseen.rtt, &remote.rtt));

        // A new entry, then one going: the rows are read again.
        handle.merge_remote("east", &rows(8..9, |_| 30));
        assert_eq!(step(&world, "new entry", None).rtt.len(), 9);
        handle.merge_remote(
            "east",
            &[RttRow {
                ldns: group(8),
                rtt: None,
                kind: None,
            }],
        );
        assert_eq!(step(&world, "entry gone", None).rtt.len(), 8);
        // North starts measuring entry 5 too: a row's cells change, not its existence.
        handle.merge_remote("north", &rows(5..6, |_| 1));
        step(&world, "north joins entry 5", Some(vec![]));
        // Entry 100 gains a configured site: a row comes, though no entry did.
        handle.merge_remote("east", &rows(100..101, |_| 9));
        assert_eq!(step(&world, "row comes", None).rtt.len(), 9);
        supervisor.shutdown().await;
    }
}
