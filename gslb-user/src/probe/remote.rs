//! Other parents' RTT columns, as MEP brings them, merged into this site's RTT table: only what
//! changed since the last merge, and removals for the rows that went (or for a whole column
//! when its site's link went down). A parent speaks for itself: only its own rows are read.

use std::{
    collections::{BTreeMap, HashMap},
    net::IpAddr,
    sync::Arc,
    time::Duration,
};

use super::{ProbeKind, RttHandle, RttRow};
use crate::mep::{MepView, RttProtocol, RttRow as MepRttRow};

/// One site's RTT column: LDNS entry → (µs, how it was measured).
type Cells = BTreeMap<IpAddr, (u32, Option<ProbeKind>)>;

/// A remote parent's RTT column as last merged into the RTT table.
#[derive(Default)]
struct MergedColumn {
    table: Arc<Vec<MepRttRow>>,
    cells: Cells,
}

/// The other parents' columns as last merged, by site.
#[derive(Default)]
pub struct RemoteColumns {
    merged: HashMap<String, MergedColumn>,
}

impl RemoteColumns {
    /// Merges each of `parents`' RTT columns, as `view` brought it, into `rtt`: only what
    /// changed since the last merge, and removals for rows that went (or for the whole column
    /// when its link went down).
    pub fn merge(&mut self, parents: &[String], rtt: &RttHandle, view: &MepView) {
        for parent in parents {
            let table = view
                .sites
                .get(parent)
                .map(|r| r.rtt.clone())
                .unwrap_or_default();
            let merged = self.merged.entry(parent.clone()).or_default();
            if Arc::ptr_eq(&merged.table, &table) || (table.is_empty() && merged.cells.is_empty()) {
                continue;
            }
            let (cells, rows) = rtt_changes(parent, &merged.cells, &table);
            if !rows.is_empty() {
                rtt.merge_remote(parent, &rows);
            }
            *merged = MergedColumn { table, cells };
        }
    }

    /// Forgets what was merged (the RTT table was replaced): the next merge takes every
    /// parent's column afresh (cells the table already holds cause no change).
    pub fn forget(&mut self) {
        self.merged.clear();
    }
}

/// `site`'s column in `table` (its rows only: a parent speaks for itself), and the rows that
/// turn `merged` into it: changed cells, and removals for cells that went.
fn rtt_changes(site: &str, merged: &Cells, table: &[MepRttRow]) -> (Cells, Vec<RttRow>) {
    let cells: Cells = table
        .iter()
        .filter(|r| r.site == site)
        .map(|r| (r.ldns.network(), (r.rtt_us, probe_kind(r.protocol))))
        .collect();
    let mut rows: Vec<RttRow> = cells
        .iter()
        .filter(|(ldns, cell)| merged.get(*ldns) != Some(*cell))
        .map(|(ldns, (us, kind))| RttRow {
            ldns: *ldns,
            rtt: Some(Duration::from_micros(u64::from(*us))),
            kind: *kind,
        })
        .collect();
    rows.extend(
        merged
            .keys()
            .filter(|ldns| !cells.contains_key(*ldns))
            .map(|ldns| RttRow {
                ldns: *ldns,
                rtt: None,
                kind: None,
            }),
    );
    (cells, rows)
}

fn probe_kind(protocol: RttProtocol) -> Option<ProbeKind> {
    match protocol {
        RttProtocol::Icmp => Some(ProbeKind::Icmp),
        RttProtocol::Tcp => Some(ProbeKind::Tcp),
        RttProtocol::Dns => Some(ProbeKind::DnsDot),
        RttProtocol::Udp => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtt_rows_merge_as_changes() {
        let row = |ldns: &str, site: &str, us: u32| MepRttRow {
            ldns: ldns.parse().unwrap(),
            site: site.into(),
            rtt_us: us,
            protocol: RttProtocol::Icmp,
            age_s: 0,
        };
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let (cells, rows) = rtt_changes(
            "p2",
            &BTreeMap::new(),
            &[
                row("198.51.100.0/24", "p2", 1500),
                row("203.0.113.7/32", "p2", 900),
                row("192.0.2.0/24", "p3", 1),
            ],
        );
        assert_eq!(cells.len(), 2, "p3's row is not p2's to send: {cells:?}");
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().any(|r| r.ldns == ip("198.51.100.0")
            && r.rtt == Some(Duration::from_micros(1500))
            && r.kind == Some(ProbeKind::Icmp)));
        // One changed, one unchanged, one gone.
        let (after, rows) = rtt_changes("p2", &cells, &[row("198.51.100.0/24", "p2", 2500)]);
        assert_eq!(after.len(), 1);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert!(rows.iter().any(|r| r.ldns == ip("198.51.100.0") && r.rtt == Some(Duration::from_micros(2500))));
        assert!(
            rows.iter()
                .any(|r| r.ldns == ip("203.0.113.7") && r.rtt.is_none())
        );
        // The link went: everything goes.
        let (none, rows) = rtt_changes("p2", &after, &[]);
        assert!(none.is_empty() && rows.len() == 1 && rows[0].rtt.is_none());
    }
}
