//! `gslbctl show services|sites|domains`: what the controller holds now (as of its last
//! republish, [`WorldStatus`]), as aligned text tables for the control socket.

use super::status::WorldStatus;

/// What `show` can show.
pub const TABLES: [&str; 3] = ["services", "sites", "domains"];

/// The table `what` of `status`; `None` for anything but [`TABLES`].
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
                "STATE",
                "ADMIN",
                "WEIGHT",
                "CONNECTIONS",
                "BANDWIDTH_KBPS",
            ])];
            rows.extend(status.services.iter().map(|s| {
                vec![
                    s.name.clone(),
                    s.site.clone(),
                    if s.up { "up" } else { "down" }.to_owned(),
                    s.admin_state.to_owned(),
                    s.weight.to_string(),
                    load(s.connections),
                    load(s.bandwidth_kbps),
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
        _ => return None,
    };
    Some(align(&rows))
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
    use crate::admin::status::{ServiceStatus, SiteStatus};

    #[test]
    fn columns_align_and_unknown_tables_are_none() {
        let status = WorldStatus {
            services: vec![ServiceStatus {
                name: "web-long-name".into(),
                site: "dc".into(),
                up: false,
                admin_state: "disabled",
                weight: 3,
                connections: None,
                bandwidth_kbps: Some(u64::MAX),
            }],
            sites: vec![SiteStatus {
                name: "dc".into(),
                admin_state: "enabled",
                services: 1,
                services_up: 0,
                reachable: None,
            }],
            ..WorldStatus::default()
        };
        assert_eq!(
            table("services", &status).unwrap(),
            "SERVICE        SITE  STATE  ADMIN     WEIGHT  CONNECTIONS  BANDWIDTH_KBPS\n\
             web-long-name  dc    down   disabled  3       unknown      full\n"
        );
        assert_eq!(
            table("sites", &status).unwrap(),
            "SITE  ADMIN    SERVICES_UP  MEP\ndc    enabled  0/1          -\n"
        );
        assert_eq!(table("mep", &status), None);
    }
}
