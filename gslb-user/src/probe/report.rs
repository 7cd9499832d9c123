//! The LDNS entries and the RTT table as read by people (`gslbctl ldns`): the fields of F5's
//! `ldns` record.

use std::{collections::BTreeMap, fmt::Write as _, net::IpAddr, time::Duration};

use tokio::time::Instant;

use super::{ldns::LdnsMask, prober::ProbeKind, rtt::RttTable, table::LdnsEntry};

/// One LDNS entry as the dump shows it: the fields of F5's `ldns` record (address, probe
/// protocol, ttl, and a path per data centre with its RTT and completion rate).
#[derive(Clone, Debug, PartialEq)]
pub struct LdnsReport {
    /// The entry: the address, or the first address of a masked prefix.
    pub ldns: IpAddr,
    /// `ldns` as shown: "198.51.100.0/24" when the LDNS mask groups addresses.
    pub display: String,
    /// The address this site probes; `None` for an entry known only from peers.
    pub address: Option<IpAddr>,
    /// Time since its last query here.
    pub idle: Option<Duration>,
    /// Time left before the entry expires here, without another query (F5 `ttl`).
    pub ttl: Option<Duration>,
    /// Probe rounds of this site so far.
    pub rounds: u64,
    /// Of the last (up to) 32 rounds of this site, the share with a reply, in hundredths of a
    /// percent (F5 `cur_completion_rate`).
    pub completion_rate: Option<u32>,
    /// Per site, lowest RTT first.
    pub paths: Vec<PathReport>,
}

/// One (LDNS entry, site) cell as the dump shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathReport {
    pub site: String,
    pub local: bool,
    /// F5 `cur_rtt` (F5 shows microseconds).
    pub rtt: Duration,
    /// The probe type that measured it (F5 `probe_protocol`).
    pub kind: Option<ProbeKind>,
    /// Time since the value was stored (or received, for a peer's).
    pub age: Duration,
    /// Time since a sample last confirmed it (within the tolerance); for a peer's, as `age`.
    pub confirmed: Duration,
}

/// The dump of the LDNS entries known here (from queries) and the RTT table, ordered by LDNS.
pub fn report<'a>(
    ldns: impl Iterator<Item = &'a LdnsEntry>,
    mask: LdnsMask,
    timeout: Duration,
    rtt: &RttTable,
    now: Instant,
) -> Vec<LdnsReport> {
    let mut reports: BTreeMap<IpAddr, LdnsReport> = BTreeMap::new();
    let blank = |group: IpAddr| LdnsReport {
        ldns: group,
        display: mask.display(group),
        address: None,
        idle: None,
        ttl: None,
        rounds: 0,
        completion_rate: None,
        paths: Vec::new(),
    };
    for entry in ldns {
        let idle = now.saturating_duration_since(entry.last_seen);
        let report = reports
            .entry(entry.group)
            .or_insert_with(|| blank(entry.group));
        report.address = Some(entry.addr);
        report.idle = Some(idle);
        report.ttl = Some(timeout.saturating_sub(idle));
        report.rounds = entry.rounds();
        report.completion_rate = entry.completion_rate();
    }
    for (group, cells) in rtt.rows() {
        let report = reports.entry(*group).or_insert_with(|| blank(*group));
        report.paths = cells
            .iter()
            .map(|(site, cell)| PathReport {
                site: site.clone(),
                local: site == rtt.local_site(),
                rtt: cell.rtt,
                kind: cell.kind,
                age: now.saturating_duration_since(cell.stored),
                confirmed: now.saturating_duration_since(cell.confirmed),
            })
            .collect();
        report
            .paths
            .sort_by(|a, b| a.rtt.cmp(&b.rtt).then_with(|| a.site.cmp(&b.site)));
    }
    reports.into_values().collect()
}

/// The dump as text for `gslbctl`: a block per LDNS entry, a line per site.
///
/// ```text
/// ldns 198.51.100.7  address 198.51.100.7  last query 2s ago  ttl 178s  rounds 12  completion 100.00%
///   site     rtt         protocol  age   confirmed
///   east     10.214 ms   icmp      21s   1s         (local)
///   west     40.377 ms   tcp       20s   20s
/// ```
pub fn format_report(reports: &[LdnsReport]) -> String {
    let mut out = String::new();
    if reports.is_empty() {
        out.push_str("no LDNS entries\n");
        return out;
    }
    let secs = |d: Duration| format!("{}s", d.as_secs());
    for r in reports {
        let _ = write!(out, "ldns {}", r.display);
        match r.address {
            Some(a) => {
                let _ = write!(out, "  address {a}");
            }
            None => out.push_str("  (known from peers only)"),
        }
        if let Some(idle) = r.idle {
            let _ = write!(out, "  last query {} ago", secs(idle));
        }
        if let Some(ttl) = r.ttl {
            let _ = write!(out, "  ttl {}", secs(ttl));
        }
        if r.address.is_some() {
            let _ = write!(out, "  rounds {}", r.rounds);
            match r.completion_rate {
                Some(rate) => {
                    let _ = write!(out, "  completion {}.{:02}%", rate / 100, rate % 100);
                }
                None => out.push_str("  completion -"),
            }
        }
        out.push('\n');
        if r.paths.is_empty() {
            out.push_str("  no RTT yet\n");
            continue;
        }
        let width = r
            .paths
            .iter()
            .map(|p| p.site.len())
            .max()
            .unwrap_or(0)
            .max(4);
        let _ = writeln!(
            out,
            "  {:<width$}  {:>10}  {:<8}  {:>6}  {:>9}",
            "site", "rtt", "protocol", "age", "confirmed"
        );
        for p in &r.paths {
            let rtt = format!(
                "{}.{:03} ms",
                p.rtt.as_micros() / 1000,
                p.rtt.as_micros() % 1000
            );
            let kind = p.kind.map_or("-", ProbeKind::name);
            let _ = write!(
                out,
                "  {:<width$}  {:>10}  {:<8}  {:>6}  {:>9}",
                p.site,
                rtt,
                kind,
                secs(p.age),
                secs(p.confirmed)
            );
            out.push_str(if p.local { "  (local)\n" } else { "\n" });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{DEFAULT_LDNS_TIMEOUT, DEFAULT_TOLERANCE, LdnsTable, RttRow, Sample};

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_dump_has_the_f5_ldns_fields() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mask = LdnsMask { v4: 24, v6: 128 };
        let mut ldns = LdnsTable::new(mask, DEFAULT_LDNS_TIMEOUT);
        let group = ldns.see(ip("198.51.100.7"), t0).unwrap();
        let silent = ldns.see(ip("192.0.2.99"), t0).unwrap();
        {
            let entry = ldns.get_mut(&group).unwrap();
            entry.rounds = 4;
            entry.replies = 0b1011;
        }
        let mut rtt = RttTable::new("east", DEFAULT_TOLERANCE);
        rtt.record_local(
            group,
            Some(Sample {
                kind: ProbeKind::Icmp,
                rtt: Duration::from_micros(10_214),
            }),
            t0 + s(1),
        );
        rtt.merge_remote(
            "west",
            &[RttRow {
                ldns: group,
                rtt: Some(ms(40)),
                kind: Some(ProbeKind::Tcp),
            }],
            t0 + s(2),
        );
        rtt.merge_remote(
            "west",
            &[RttRow {
                ldns: ip("203.0.113.0"),
                rtt: Some(ms(5)),
                kind: None,
            }],
            t0 + s(2),
        );
        let now = t0 + s(21);
        let reports = report(ldns.iter(), mask, DEFAULT_LDNS_TIMEOUT, &rtt, now);
        assert_eq!(reports.len(), 3);
        let r = reports.iter().find(|r| r.ldns == group).unwrap();
        assert_eq!(r.display, "198.51.100.0/24");
        assert_eq!(r.address, Some(ip("198.51.100.7")));
        assert_eq!((r.idle, r.ttl), (Some(s(21)), Some(s(159))));
        assert_eq!(r.completion_rate, Some(7_500));
        assert_eq!(r.paths.len(), 2);
        assert_eq!(
            (r.paths[0].site.as_str(), r.paths[0].local, r.paths[0].kind),
            ("east", true, Some(ProbeKind::Icmp))
        );
        assert_eq!((r.paths[0].age, r.paths[1].age), (s(20), s(19)));
        let silent = reports.iter().find(|r| r.ldns == silent).unwrap();
        assert!(silent.paths.is_empty());
        assert_eq!(silent.completion_rate, None);
        let text = format_report(&reports);
        let expected = "\
ldns 192.0.2.0/24  address 192.0.2.99  last query 21s ago  ttl 159s  rounds 0  completion -
  no RTT yet
ldns 198.51.100.0/24  address 198.51.100.7  last query 21s ago  ttl 159s  rounds 4  completion 75.00%
  site         rtt  protocol     age  confirmed
  east   10.214 ms  icmp         20s        20s  (local)
  west   40.000 ms  tcp          19s        19s
ldns 203.0.113.0/24  (known from peers only)
  site         rtt  protocol     age  confirmed
  west    5.000 ms  -            19s        19s
";
        assert_eq!(text, expected, "\n{text}");
        assert_eq!(format_report(&[]), "no LDNS entries\n");
    }
}
