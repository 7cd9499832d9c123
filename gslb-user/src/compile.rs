//! Turns the configuration into the flat tables the fast path reads: client prefixes → view ids,
//! (name, qtype) → domain ids, (domain id, view id) → answer sets. Pure data, no maps: the
//! `dataplane` module writes a [`Snapshot`] into the kernel.

use std::net::IpAddr;

use gslb_common::{DEFAULT_VIEW, QTYPE_A, QTYPE_AAAA};
use ipnet::IpNet;

use crate::config::{AddrSet, AnswerMode, Config};

/// One complete state of the fast-path tables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub dns_port: u16,
    pub edns_udp_size: u16,
    /// Destination addresses the fast path answers for.
    pub listen: Vec<IpAddr>,
    /// Client prefixes and the view each selects; unmatched clients get [`DEFAULT_VIEW`].
    pub views: Vec<(IpNet, u32)>,
    pub domains: Vec<DomainEntry>,
}

/// One (name, qtype) the fast path answers, with its answer for each view that has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DomainEntry {
    /// Lower-case, without the trailing dot.
    pub name: String,
    pub qtype: u16,
    pub id: u32,
    pub answers: Vec<(u32, Answer)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub ttl: u32,
    pub mode: AnswerMode,
    /// All of one family, matching the entry's qtype; 1..=MAX_ADDRS of them.
    pub addrs: Vec<IpAddr>,
}

impl Snapshot {
    pub fn from_config(config: &Config) -> Snapshot {
        // View ids follow configuration order after the reserved default view.
        let view_id = |name: &str| {
            config.views.iter().position(|v| v.name == name).map(|i| i as u32 + 1)
        };
        let views = config
            .views
            .iter()
            .enumerate()
            .flat_map(|(i, v)| v.prefixes.iter().map(move |p| (*p, i as u32 + 1)))
            .collect();

        let mut domains = Vec::new();
        for domain in &config.domains {
            for qtype in [QTYPE_A, QTYPE_AAAA] {
                let answer = |set: &AddrSet| {
                    let addrs: Vec<IpAddr> = if qtype == QTYPE_A {
                        set.a.iter().map(|a| IpAddr::V4(*a)).collect()
                    } else {
                        set.aaaa.iter().map(|a| IpAddr::V6(*a)).collect()
                    };
                    (!addrs.is_empty())
                        .then(|| Answer { ttl: domain.ttl, mode: domain.answer, addrs })
                };
                let mut answers: Vec<(u32, Answer)> = Vec::new();
                if let Some(a) = answer(&domain.addrs) {
                    answers.push((DEFAULT_VIEW, a));
                }
                for (view, set) in &domain.views {
                    if let (Some(id), Some(a)) = (view_id(view), answer(set)) {
                        answers.push((id, a));
                    }
                }
                if !answers.is_empty() {
                    let id = domains.len() as u32;
                    domains.push(DomainEntry { name: domain.name.clone(), qtype, id, answers });
                }
            }
        }

        Snapshot {
            dns_port: config.server.dns_port,
            edns_udp_size: config.server.edns_udp_size,
            listen: config.server.listen.clone(),
            views,
            domains,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn snapshot(toml: &str) -> Snapshot {
        Snapshot::from_config(&Config::parse(toml, Path::new("test.toml")).unwrap())
    }

    #[test]
    fn views_and_answers_are_numbered_and_split_by_family() {
        let s = snapshot(
            r#"
            [server]
            listen = ["192.0.2.1"]
            [[view]]
            name = "eu"
            prefixes = ["198.51.100.0/24", "2001:db8:100::/48"]
            [[view]]
            name = "us"
            prefixes = ["203.0.113.0/24"]
            [[domain]]
            name = "WWW.Example.com."
            ttl = 60
            answer = "all"
            a = ["192.0.2.10", "192.0.2.11"]
            [[domain.view]]
            view = "us"
            a = ["192.0.2.30"]
            aaaa = ["2001:db8::30"]
            "#,
        );
        assert_eq!(
            s.views,
            vec![
                ("198.51.100.0/24".parse().unwrap(), 1),
                ("2001:db8:100::/48".parse().unwrap(), 1),
                ("203.0.113.0/24".parse().unwrap(), 2),
            ]
        );
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let all = |addrs: &[&str]| Answer {
            ttl: 60,
            mode: AnswerMode::All,
            addrs: addrs.iter().map(|a| ip(a)).collect(),
        };
        assert_eq!(
            s.domains,
            vec![
                DomainEntry {
                    name: "www.example.com".into(),
                    qtype: QTYPE_A,
                    id: 0,
                    answers: vec![
                        (DEFAULT_VIEW, all(&["192.0.2.10", "192.0.2.11"])),
                        (2, all(&["192.0.2.30"]))
                    ],
                },
                // No default-view AAAA: only the "us" view has one.
                DomainEntry {
                    name: "www.example.com".into(),
                    qtype: QTYPE_AAAA,
                    id: 1,
                    answers: vec![(2, all(&["2001:db8::30"]))],
                },
            ]
        );
    }
}
