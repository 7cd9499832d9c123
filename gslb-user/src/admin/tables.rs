//! `gslbctl show services|sites|domains|mep`: what the controller holds now (as of its last
//! republish, [`WorldStatus`]), as aligned text tables for the control socket. (`show rtt` is
//! the RTT table `ldns` prints, answered by the control socket from the RTT task.)

use super::status::{MepStatus, WorldStatus};

/// What `show` can show.
pub const TABLES: [&str; 5] = ["services", "sites", "domains", "mep", "rtt"];

/// The table `what` of `status`; `None` for anything but [`TABLES`] and for `rtt` (not in
/// `status`).
pub fn table(what: &str, status: &WorldStatus) -> Option<String> {
    let rows: Vec<Vec<String>> = match what {
        "services" => {
            let load = |v: Option<u64>| match v {
                None => "unknown".to_owned(),
                Some(u64::MAX) => "full".to_owned(),
                Some(v) => v.to_string(),
            };
            let mut rows = vec![cells(&[
                "SERVICE",
                "SITE",
                "ADDRESS",
                "CNAME",
                "STATE",
                "ADMIN",
                "WEIGHT",
                "CONNECTIONS",
                "BANDWIDTH_KBPS",
                "SINCE",
                "WHY",
            ])];
            rows.extend(status.services.iter().map(|s| {
                vec![
                    s.name.clone(),
                    s.site.clone(),
                    s.address.to_string(),
                    s.cname.clone().unwrap_or_else(|| "-".to_owned()),
                    if s.up { "up" } else { "down" }.to_owned(),
                    s.admin_state.to_owned(),
                    s.weight.to_string(),
                    load(s.connections),
                    load(s.bandwidth_kbps),
                    s.last_change_unix_s.map_or("-".to_owned(), utc),
                    s.why.split_whitespace().collect::<Vec<_>>().join(" "),
                ]
            }));
            rows
        }
        "sites" => {
            let mut rows = vec![cells(&["SITE", "ADMIN", "SERVICES_UP", "MEP"])];
            rows.extend(status.sites.iter().map(|s| {
                vec![
                    s.name.clone(),
                    s.admin_state.to_owned(),
                    format!("{}/{}", s.services_up, s.services),
                    match s.reachable {
                        None => "-",
                        Some(true) => "reachable",
                        Some(false) => "unreachable",
                    }
                    .to_owned(),
                ]
            }));
            rows
        }
        "domains" => {
            let mut rows = vec![cells(&["DOMAIN", "ADMIN", "VIEW", "ANSWERS"])];
            for d in &status.domains {
                for v in &d.views {
                    let answers = match v.fallback {
                        Some(fallback) => format!("({fallback})"),
                        None => v.services.join(","),
                    };
                    rows.push(vec![
                        d.name.clone(),
                        d.admin_state.to_owned(),
                        v.view.clone(),
                        answers,
                    ]);
                }
            }
            rows
        }
        "mep" => return Some(mep(status.mep.as_ref())),
        _ => return None,
    };
    Some(align(&rows))
}

/// The MEP sessions (state, negotiated version, last error), then each site's reachability, the
/// session its state comes through (`direct`, or the parent holding it) and, for the children
/// this parent adopted, the parent they came from.
fn mep(mep: Option<&MepStatus>) -> String {
    let Some(mep) = mep else {
        return "MEP is off (it needs [mep] and server.site)\n".to_owned();
    };
    let mut sessions = vec![cells(&["PEER", "LINK", "VERSION", "LAST_ERROR"])];
    sessions.extend(mep.sessions.iter().map(|l| {
        vec![
            l.peer.clone(),
            if l.up { "up" } else { "down" }.to_owned(),
            l.version.map_or("-".to_owned(), |v| v.to_string()),
            // One line per row: an error's own line breaks would split it.
            l.last_error.as_deref().map_or("-".to_owned(), |e| {
                e.split_whitespace().collect::<Vec<_>>().join(" ")
            }),
        ]
    }));
    let mut sites = vec![cells(&["SITE", "MEP", "VIA", "ADOPTED_FROM"])];
    sites.extend(mep.sites.iter().map(|s| {
        vec![
            s.name.clone(),
            if s.reachable {
                "reachable"
            } else {
                "unreachable"
            }
            .to_owned(),
            match &s.via {
                Some(via) if *via == s.name => "direct".to_owned(),
                Some(via) => via.clone(),
                None => "-".to_owned(),
            },
            mep.adopted
                .get(&s.name)
                .cloned()
                .unwrap_or_else(|| "-".to_owned()),
        ]
    }));
    format!("{}\n{}", align(&sessions), align(&sites))
}

/// `unix_s` as `YYYY-MM-DDTHH:MM:SSZ` (UTC; the civil-from-days algorithm of
/// H. Hinnant's "chrono-Compatible Low-Level Date Algorithms").
fn utc(unix_s: u64) -> String {
    let (days, secs) = (unix_s / 86_400, unix_s % 86_400);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

fn cells(names: &[&str]) -> Vec<String> {
    names.iter().map(|&n| n.to_owned()).collect()
}

/// Columns padded to their widest cell, two spaces apart; the last one unpadded.
fn align(rows: &[Vec<String>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == columns {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[c]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::status::{MepSession, MepSite, ServiceStatus, SiteStatus};

    #[test]
    fn columns_align_and_unknown_tables_are_none() {
        let status = WorldStatus {
            services: vec![
                ServiceStatus {
                    name: "web-long-name".into(),
                    site: "dc".into(),
                    address: "2001:db8::10".parse().unwrap(),
                    cname: None,
                    up: false,
                    admin_state: "disabled",
                    weight: 3,
                    connections: None,
                    bandwidth_kbps: Some(u64::MAX),
                    why: "disabled by the operator".into(),
                    last_change_unix_s: Some(1_764_619_535),
                },
                ServiceStatus {
                    name: "cdn".into(),
                    site: "dc".into(),
                    address: "192.0.2.1".parse().unwrap(),
                    cname: Some("edge.cdn.example.net".into()),
                    up: true,
                    admin_state: "enabled",
                    weight: 1,
                    connections: Some(0),
                    bandwidth_kbps: Some(0),
                    why: "no monitor".into(),
                    last_change_unix_s: None,
                },
            ],
            sites: vec![SiteStatus {
                name: "dc".into(),
                admin_state: "enabled",
                services: 2,
                services_up: 1,
                reachable: None,
            }],
            ..WorldStatus::default()
        };
        assert_eq!(
            table("services", &status).unwrap(),
            "SERVICE        SITE  ADDRESS       CNAME                 STATE  ADMIN     WEIGHT  CONNECTIONS  BANDWIDTH_KBPS  SINCE                 WHY\n\
             web-long-name  dc    2001:db8::10  -                     down   disabled  3       unknown      full            2025-12-01T20:05:35Z  disabled by the operator\n\
             cdn            dc    192.0.2.1     edge.cdn.example.net  up     enabled   1       0            0               -                     no monitor\n"
        );
        assert_eq!(
            table("sites", &status).unwrap(),
            "SITE  ADMIN    SERVICES_UP  MEP\ndc    enabled  1/2          -\n"
        );
        assert_eq!(table("rtt", &status), None);
        assert_eq!(table("routes", &status), None);
        assert_eq!(
            table("mep", &status).unwrap(),
            "MEP is off (it needs [mep] and server.site)\n"
        );
    }

    #[test]
    fn times_are_utc() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_764_619_535), "2025-12-01T20:05:35Z");
        assert_eq!(utc(4_107_542_399), "2100-02-28T23:59:59Z");
    }

    #[test]
    fn the_mep_table_shows_links_and_adopted_children() {
        let status = WorldStatus {
            mep: Some(MepStatus {
                sessions: vec![
                    MepSession {
                        peer: "p2".into(),
                        up: true,
                        version: Some(2),
                        last_error: None,
                        last_reason: None,
                    },
                    MepSession {
                        peer: "c1".into(),
                        up: false,
                        version: None,
                        last_error: Some("connect:\nrefused".into()),
                        last_reason: Some("connect_failed"),
                    },
                ],
                sites: vec![
                    MepSite {
                        name: "c1".into(),
                        reachable: false,
                        via: None,
                    },
                    MepSite {
                        name: "c2".into(),
                        reachable: true,
                        via: Some("c2".into()),
                    },
                    MepSite {
                        name: "c3".into(),
                        reachable: true,
                        via: Some("p2".into()),
                    },
                ],
                adopted: [("c2".to_owned(), "p2".to_owned())].into(),
            }),
            ..WorldStatus::default()
        };
        assert_eq!(
            table("mep", &status).unwrap(),
            "PEER  LINK  VERSION  LAST_ERROR\n\
             p2    up    2        -\n\
             c1    down  -        connect: refused\n\
             \n\
             SITE  MEP          VIA     ADOPTED_FROM\n\
             c1    unreachable  -       -\n\
             c2    reachable    direct  p2\n\
             c3    reachable    p2      -\n"
        );
    }
}
