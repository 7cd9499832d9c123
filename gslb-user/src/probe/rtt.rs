//! The RTT table: per (LDNS entry, site) the round-trip time from the site to the resolver.
//! This site fills its own column from its probes ([`RttTable::record_local`]); the other
//! sites' columns arrive over MEP ([`RttTable::merge_remote`], rows in the form
//! [`RttTable::local_column`] gives them). Every change to the table comes back as
//! [`RttChange`]s, which the prober publishes to the controller (republish) and to MEP (send
//! to peers).
//!
//! Tolerance (NetScaler's RTT tolerance, default 5 ms, the same on every site): a local sample
//! within the tolerance of the stored value is neither stored nor published, so peers and the
//! maps see only changes that matter.
//!
//! Versions: every change of an entry's RTTs takes the next number of the table's sequence, and
//! the entry remembers it ([`RttTable::changed_since`]), so that the controller, holding the
//! [`RttVersion`] it last read, rebuilds only the rows of entries that changed since. Each
//! entry is listed once (under its last change), so the list is as bounded as the table.

use std::{
    collections::BTreeMap,
    net::IpAddr,
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use tokio::time::Instant;

use super::prober::{ProbeKind, Sample};

/// NetScaler's default RTT tolerance.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_millis(5);

/// One cell: the RTT from one site to one LDNS entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RttCell {
    pub rtt: Duration,
    /// The probe type that measured it (as the measuring site reported it).
    pub kind: Option<ProbeKind>,
    /// When this value was stored.
    pub stored: Instant,
    /// When a sample last confirmed it (stored, or within the tolerance of it); for a remote
    /// site, when it was received.
    pub confirmed: Instant,
}

/// A change of the table, for the controller and for MEP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RttChange {
    /// The LDNS entry (its group address).
    pub ldns: IpAddr,
    pub site: String,
    /// The new RTT; `None` when the cell was removed.
    pub rtt: Option<Duration>,
    pub kind: Option<ProbeKind>,
}

/// One row of a site's column as it travels over MEP: the RTT from that site to an LDNS entry,
/// or `None` to remove it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RttRow {
    pub ldns: IpAddr,
    pub rtt: Option<Duration>,
    pub kind: Option<ProbeKind>,
}

/// A state of one [`RttTable`], as a reader saw it ([`RttTable::version`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RttVersion {
    /// Which table: unique per table made in this process.
    table: u64,
    /// The table's sequence number then.
    seq: u64,
}

/// Numbers the tables, so that a version of one table never passes for another's.
static TABLES: AtomicU64 = AtomicU64::new(0);

/// An entry's cells, and the sequence number of their last change.
#[derive(Debug, Default)]
struct Row {
    cells: BTreeMap<String, RttCell>,
    changed: u64,
}

/// Per (LDNS entry, site), the RTT; see the module documentation.
#[derive(Debug)]
pub struct RttTable {
    local_site: String,
    tolerance: Duration,
    rows: BTreeMap<IpAddr, Row>,
    id: u64,
    /// The number of the last change (of any entry).
    seq: u64,
    /// Every entry under the number of its last change: what changed since a version is a
    /// range of it. One key per entry of `rows`, so bounded as `rows` is.
    by_change: BTreeMap<u64, IpAddr>,
    /// The number of the last change that added or removed an entry: a reader that saw the
    /// table before it reads all of it again.
    entries_changed: u64,
}

impl RttTable {
    pub fn new(local_site: impl Into<String>, tolerance: Duration) -> Self {
        RttTable {
            local_site: local_site.into(),
            tolerance,
            rows: BTreeMap::new(),
            id: TABLES.fetch_add(1, Ordering::Relaxed),
            seq: 0,
            by_change: BTreeMap::new(),
            entries_changed: 0,
        }
    }

    /// The table now, for [`RttTable::changed_since`].
    pub fn version(&self) -> RttVersion {
        RttVersion {
            table: self.id,
            seq: self.seq,
        }
    }

    /// The entries whose RTTs changed after `since`, in no particular order; `None` when
    /// entries were added or removed since (or `since` is another table's): then only reading
    /// the whole table tells what it holds.
    pub fn changed_since(&self, since: RttVersion) -> Option<impl Iterator<Item = IpAddr> + '_> {
        (since.table == self.id && self.entries_changed <= since.seq)
            .then(|| self.by_change.range(since.seq + 1..).map(|(_, ldns)| *ldns))
    }

    /// The RTT of each site that has one to the entry `ldns` (a group address), ascending by
    /// site name (as [`RttTable::rows`] gives the cells).
    pub fn row(&self, ldns: IpAddr) -> impl Iterator<Item = (&str, Duration)> {
        self.rows
            .get(&ldns)
            .into_iter()
            .flat_map(|row| row.cells.iter().map(|(s, c)| (s.as_str(), c.rtt)))
    }

    /// The cells of `ldns` to change; the change takes the next number (the entry is made, and
    /// counted as added, when it is new).
    fn changing(&mut self, ldns: IpAddr) -> &mut BTreeMap<String, RttCell> {
        self.seq += 1;
        let seq = self.seq;
        let row = self.rows.entry(ldns).or_default();
        // 0: new (changes are numbered from 1).
        if row.changed == 0 {
            self.entries_changed = seq;
        } else {
            self.by_change.remove(&row.changed);
        }
        row.changed = seq;
        self.by_change.insert(seq, ldns);
        &mut row.cells
    }

    pub fn local_site(&self) -> &str {
        &self.local_site
    }

    pub fn tolerance(&self) -> Duration {
        self.tolerance
    }

    /// A probe round of this site to `ldns` at `now`. A sample is stored when the cell is empty
    /// or the sample differs from the stored RTT by more than the tolerance; otherwise nothing
    /// changes but the time it was confirmed. A round without a reply keeps the stored value
    /// (the entry expires when the resolver stops querying). Returns the change, if any.
    pub fn record_local(
        &mut self,
        ldns: IpAddr,
        sample: Option<Sample>,
        now: Instant,
    ) -> Option<RttChange> {
        let sample = sample?;
        let site = self.local_site.clone();
        if let Some(cell) = self
            .rows
            .get_mut(&ldns)
            .and_then(|row| row.cells.get_mut(&site))
            && sample.rtt.abs_diff(cell.rtt) <= self.tolerance
        {
            cell.confirmed = now;
            return None;
        }
        self.changing(ldns).insert(
            site.clone(),
            RttCell {
                rtt: sample.rtt,
                kind: Some(sample.kind),
                stored: now,
                confirmed: now,
            },
        );
        Some(RttChange {
            ldns,
            site,
            rtt: Some(sample.rtt),
            kind: Some(sample.kind),
        })
    }

    /// Another site's rows, received over MEP: stored as they are (the sender applied the
    /// tolerance). Rows for this site are ignored. Returns the changes.
    pub fn merge_remote(&mut self, site: &str, rows: &[RttRow], now: Instant) -> Vec<RttChange> {
        if site == self.local_site {
            return Vec::new();
        }
        let mut changes = Vec::new();
        for row in rows {
            let change = match row.rtt {
                Some(rtt) => {
                    let cell = RttCell {
                        rtt,
                        kind: row.kind,
                        stored: now,
                        confirmed: now,
                    };
                    // The same value again is received (its time), not changed.
                    let same = self
                        .rows
                        .get_mut(&row.ldns)
                        .and_then(|r| r.cells.get_mut(site))
                        .filter(|old| old.rtt == rtt && old.kind == row.kind);
                    match same {
                        Some(old) => {
                            *old = cell;
                            None
                        }
                        None => {
                            self.changing(row.ldns).insert(site.to_owned(), cell);
                            Some(RttChange {
                                ldns: row.ldns,
                                site: site.to_owned(),
                                rtt: Some(rtt),
                                kind: row.kind,
                            })
                        }
                    }
                }
                None => self.remove_cell(row.ldns, site),
            };
            changes.extend(change);
        }
        changes
    }

    /// This site's column as a previous prober of this site left it (gslbd replaced the prober
    /// with new settings): stored as they are, so that the answers hold until the new probes
    /// come in. Returns the changes.
    pub fn restore_local(&mut self, rows: &[RttRow], now: Instant) -> Vec<RttChange> {
        let site = self.local_site.clone();
        rows.iter()
            .filter_map(|row| {
                let rtt = row.rtt?;
                let cell = RttCell {
                    rtt,
                    kind: row.kind,
                    stored: now,
                    confirmed: now,
                };
                self.changing(row.ldns).insert(site.clone(), cell);
                Some(RttChange {
                    ldns: row.ldns,
                    site: site.clone(),
                    rtt: Some(rtt),
                    kind: row.kind,
                })
            })
            .collect()
    }

    /// Drops every cell of `site` (a peer that left). Returns the changes.
    pub fn forget_site(&mut self, site: &str) -> Vec<RttChange> {
        let ldns: Vec<IpAddr> = self
            .rows
            .iter()
            .filter(|(_, row)| row.cells.contains_key(site))
            .map(|(l, _)| *l)
            .collect();
        ldns.into_iter()
            .filter_map(|l| self.remove_cell(l, site))
            .collect()
    }

    /// The LDNS entry expired here: this site's cell goes (peers learn it from the change);
    /// other sites' cells stay until they remove them.
    pub fn remove_local(&mut self, ldns: IpAddr) -> Option<RttChange> {
        let site = self.local_site.clone();
        self.remove_cell(ldns, &site)
    }

    fn remove_cell(&mut self, ldns: IpAddr, site: &str) -> Option<RttChange> {
        if !self.rows.get(&ldns)?.cells.contains_key(site) {
            return None;
        }
        let cells = self.changing(ldns);
        let removed = cells.remove(site)?;
        if cells.is_empty() {
            let row = self.rows.remove(&ldns)?;
            self.by_change.remove(&row.changed);
            self.entries_changed = self.seq;
        }
        Some(RttChange {
            ldns,
            site: site.to_owned(),
            rtt: None,
            kind: removed.kind,
        })
    }

    /// The RTT of every site that has one to the LDNS entry `ldns` (a group address), lowest
    /// first.
    pub fn rtts(&self, ldns: IpAddr) -> Vec<(String, Duration)> {
        let mut rtts: Vec<(String, Duration)> = self
            .rows
            .get(&ldns)
            .map(|row| {
                row.cells
                    .iter()
                    .map(|(site, cell)| (site.clone(), cell.rtt))
                    .collect()
            })
            .unwrap_or_default();
        rtts.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        rtts
    }

    pub fn cell(&self, ldns: IpAddr, site: &str) -> Option<&RttCell> {
        self.rows.get(&ldns)?.cells.get(site)
    }

    /// This site's whole column, as MEP sends it to a peer that (re)connects.
    pub fn local_column(&self) -> Vec<RttRow> {
        self.rows
            .iter()
            .filter_map(|(ldns, row)| {
                row.cells.get(&self.local_site).map(|c| RttRow {
                    ldns: *ldns,
                    rtt: Some(c.rtt),
                    kind: c.kind,
                })
            })
            .collect()
    }

    /// Every (LDNS entry, site) RTT: what the controller compiles answers from.
    pub fn to_map(&self) -> BTreeMap<IpAddr, BTreeMap<String, Duration>> {
        self.rows
            .iter()
            .map(|(ldns, row)| {
                (
                    *ldns,
                    row.cells.iter().map(|(s, c)| (s.clone(), c.rtt)).collect(),
                )
            })
            .collect()
    }

    /// Every entry with its cells, by address.
    pub fn rows(&self) -> impl Iterator<Item = (&IpAddr, &BTreeMap<String, RttCell>)> {
        self.rows.iter().map(|(ldns, row)| (ldns, &row.cells))
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    // The callers want what a round gives: `Some` sample, or `None` for no reply.
    #[allow(clippy::unnecessary_wraps)]
    fn sample(kind: ProbeKind, n: u64) -> Option<Sample> {
        Some(Sample { kind, rtt: ms(n) })
    }

    #[test]
    fn changes_within_the_tolerance_are_neither_stored_nor_published() {
        let t0 = Instant::now();
        let ldns = ip("198.51.100.7");
        // (tolerance, stored before, sample, stored after, published)
        type Case = (u64, Option<u64>, Option<u64>, Option<u64>, bool);
        let table: [Case; 10] = [
            (5, None, Some(10), Some(10), true),
            (5, Some(10), Some(13), Some(10), false),
            (5, Some(10), Some(7), Some(10), false),
            (5, Some(10), Some(15), Some(10), false), // exactly the tolerance: within it
            (5, Some(10), Some(16), Some(16), true),
            (5, Some(10), Some(18), Some(18), true),
            (5, Some(10), Some(2), Some(2), true),
            (5, Some(10), None, Some(10), false), // no reply: the value stays
            (0, Some(10), Some(11), Some(11), true),
            (0, Some(10), Some(10), Some(10), false),
        ];
        for (tolerance, before, got, after, published) in table {
            let case = format!("tolerance {tolerance}, stored {before:?}, sample {got:?}");
            let mut rtt = RttTable::new("east", ms(tolerance));
            if let Some(b) = before {
                rtt.record_local(ldns, sample(ProbeKind::Icmp, b), t0);
            }
            let later = t0 + Duration::from_secs(5);
            let change = rtt.record_local(ldns, got.and_then(|g| sample(ProbeKind::Tcp, g)), later);
            assert_eq!(change.is_some(), published, "{case}");
            if let Some(change) = change {
                assert_eq!(
                    change,
                    RttChange {
                        ldns,
                        site: "east".into(),
                        rtt: got.map(ms),
                        kind: Some(ProbeKind::Tcp)
                    }
                );
            }
            let cell = rtt.cell(ldns, "east").map(|c| c.rtt);
            assert_eq!(cell, after.map(ms), "{case}");
            if let (Some(cell), Some(_)) = (rtt.cell(ldns, "east"), got) {
                // Confirmed either way; stored (with the new protocol) only when published.
                assert_eq!(cell.confirmed, later, "{case}");
                assert_eq!(cell.stored == later, published, "{case}");
                assert_eq!(
                    cell.kind == Some(ProbeKind::Tcp),
                    published || before.is_none(),
                    "{case}"
                );
            }
        }
    }

    #[test]
    fn remote_columns_merge_and_go() {
        let t0 = Instant::now();
        let (a, b) = (ip("198.51.100.7"), ip("203.0.113.9"));
        let mut rtt = RttTable::new("east", DEFAULT_TOLERANCE);
        rtt.record_local(a, sample(ProbeKind::Icmp, 10), t0);
        let rows = [
            RttRow {
                ldns: a,
                rtt: Some(ms(40)),
                kind: Some(ProbeKind::Tcp),
            },
            RttRow {
                ldns: b,
                rtt: Some(ms(7)),
                kind: Some(ProbeKind::DnsDot),
            },
        ];
        let changes = rtt.merge_remote("west", &rows, t0);
        assert_eq!(changes.len(), 2);
        assert_eq!(
            rtt.rtts(a),
            [("east".to_owned(), ms(10)), ("west".to_owned(), ms(40))]
        );
        assert_eq!(rtt.rtts(b), [("west".to_owned(), ms(7))]);
        // The same rows again change nothing; our own site's rows from a peer are ignored.
        assert!(rtt.merge_remote("west", &rows, t0).is_empty());
        assert!(
            rtt.merge_remote(
                "east",
                &[RttRow {
                    ldns: a,
                    rtt: None,
                    kind: None
                }],
                t0
            )
            .is_empty()
        );
        assert_eq!(
            rtt.local_column(),
            [RttRow {
                ldns: a,
                rtt: Some(ms(10)),
                kind: Some(ProbeKind::Icmp)
            }]
        );
        // A removal row, then the peer leaves.
        let changes = rtt.merge_remote(
            "west",
            &[RttRow {
                ldns: b,
                rtt: None,
                kind: None,
            }],
            t0,
        );
        assert_eq!(
            changes,
            [RttChange {
                ldns: b,
                site: "west".into(),
                rtt: None,
                kind: Some(ProbeKind::DnsDot)
            }]
        );
        assert!(rtt.rtts(b).is_empty());
        assert_eq!(rtt.forget_site("west").len(), 1);
        assert_eq!(rtt.rtts(a), [("east".to_owned(), ms(10))]);
        // The local entry expires: its row goes.
        assert_eq!(rtt.remove_local(a).map(|c| c.rtt), Some(None));
        assert!(rtt.is_empty());
    }

    #[test]
    fn a_restored_local_column_is_stored_as_is_and_then_follows_the_tolerance() {
        let t0 = Instant::now();
        let (a, b) = (ip("198.51.100.7"), ip("203.0.113.9"));
        let mut rtt = RttTable::new("east", DEFAULT_TOLERANCE);
        let rows = [
            RttRow {
                ldns: a,
                rtt: Some(ms(10)),
                kind: Some(ProbeKind::Tcp),
            },
            // A removal has nothing to restore.
            RttRow {
                ldns: b,
                rtt: None,
                kind: None,
            },
        ];
        let changes = rtt.restore_local(&rows, t0);
        assert_eq!(
            changes,
            [RttChange {
                ldns: a,
                site: "east".into(),
                rtt: Some(ms(10)),
                kind: Some(ProbeKind::Tcp)
            }]
        );
        assert_eq!(rtt.local_column(), [rows[0]]);
        assert!(rtt.rtts(b).is_empty());
        // The new prober's samples then apply the tolerance to it.
        assert_eq!(rtt.record_local(a, sample(ProbeKind::Icmp, 13), t0), None);
        assert!(
            rtt.record_local(a, sample(ProbeKind::Icmp, 20), t0)
                .is_some()
        );
    }

    /// What a reader holding a version learns: the entries whose RTTs changed since, each
    /// once however often it changed; nothing when nothing did; and that it must read the
    /// whole table when entries came or went, or the version is another table's. The list
    /// stays one per entry through a flood of changes.
    #[test]
    fn a_reader_learns_which_entries_changed_since_its_version() {
        let t0 = Instant::now();
        let (a, b, c) = (ip("198.51.100.0"), ip("203.0.113.0"), ip("192.0.2.0"));
        let remote = |ldns, n| RttRow {
            ldns,
            rtt: Some(ms(n)),
            kind: None,
        };
        let mut rtt = RttTable::new("east", DEFAULT_TOLERANCE);
        let start = rtt.version();
        rtt.record_local(a, sample(ProbeKind::Icmp, 10), t0);
        rtt.merge_remote("west", &[remote(a, 40), remote(b, 7)], t0);
        assert!(rtt.changed_since(start).is_none(), "entries were added");
        let changed = |rtt: &RttTable, since| {
            let mut v: Vec<IpAddr> = rtt.changed_since(since).map(Iterator::collect)?;
            v.sort();
            Some(v)
        };
        let v1 = rtt.version();
        assert_eq!(changed(&rtt, v1), Some(vec![]));
        // Within the tolerance, or the same remote value again: no change.
        rtt.record_local(a, sample(ProbeKind::Icmp, 12), t0);
        rtt.merge_remote("west", &[remote(b, 7)], t0);
        assert_eq!(rtt.version(), v1);
        rtt.record_local(a, sample(ProbeKind::Icmp, 30), t0);
        rtt.merge_remote("west", &[remote(b, 9)], t0);
        rtt.merge_remote("west", &[remote(b, 11)], t0);
        assert_eq!(changed(&rtt, v1), Some(vec![a, b]));
        let v2 = rtt.version();
        // A cell goes but the entry stays (east still measures a): a change of a.
        rtt.merge_remote(
            "west",
            &[RttRow {
                ldns: a,
                rtt: None,
                kind: None,
            }],
            t0,
        );
        assert_eq!(changed(&rtt, v2), Some(vec![a]));
        assert_eq!(changed(&rtt, v1), Some(vec![a, b]));
        // An entry goes: from then on, read the whole table.
        let v3 = rtt.version();
        rtt.forget_site("west");
        assert!(rtt.changed_since(v3).is_none(), "b went");
        assert!(rtt.changed_since(v2).is_none());
        let v4 = rtt.version();
        assert_eq!(changed(&rtt, v4), Some(vec![]));
        rtt.restore_local(&[remote(c, 5)], t0);
        assert!(rtt.changed_since(v4).is_none(), "c came");
        // Another table's version tells nothing of this one.
        let other = RttTable::new("east", DEFAULT_TOLERANCE);
        assert!(rtt.changed_since(other.version()).is_none());
        // A flood of changes to two entries leaves two entries listed.
        for n in 0..1_000 {
            rtt.record_local(a, sample(ProbeKind::Icmp, 100 + 10 * (n % 2)), t0);
            rtt.merge_remote("west", &[remote(c, 50 + n)], t0);
        }
        assert_eq!(rtt.by_change.len(), rtt.len());
        assert_eq!(rtt.len(), 2);
        let v5 = rtt.version();
        rtt.merge_remote("west", &[remote(c, 1)], t0);
        assert_eq!(changed(&rtt, v5), Some(vec![c]));
        assert_eq!(
            rtt.row(c).collect::<Vec<_>>(),
            [("east", ms(5)), ("west", ms(1))]
        );
    }
}
