//! Turns the configuration into the flat tables the fast path reads: client prefixes → view ids,
//! (name, qtype) → domain ids, (domain id, view id) → answer sets. Pure data, no maps: the
//! `dataplane` module writes a [`Snapshot`] into the kernel.
//!
//! A GSLB domain answers with its services' answer addresses ([`Service::answer_ip`], the public
//! IP behind NAT). Health is not tracked yet, so every service is up and a domain's backup
//! addresses and down response are not used here.

use std::collections::HashMap;
use std::net::IpAddr;

use gslb_common::{DEFAULT_VIEW, QTYPE_A, QTYPE_AAAA};
use ipnet::IpNet;

use crate::config::{AnswerMode, Config, DownResponse, GslbDomain, Service};
use crate::policy::Method;

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
    /// GSLB domains whose answer depends on more than the client's static view (a method other
    /// than round robin, a method chain, persistence, spillover limits, or DNS policies): the
    /// fast path has no entry for them and the responder asks the decision engine per query.
    pub engine_domains: Vec<String>,
    /// Services the health monitors hold DOWN.
    pub down_services: Vec<String>,
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
    /// Every service up.
    pub fn from_config(config: &Config) -> Snapshot {
        Snapshot::with_health(config, |_| true)
    }

    /// The answers while only the services for which `up` says so are up. Down services are
    /// left out; a view left without services of a family falls back to the default view; a
    /// domain with none up answers its backup addresses of that family (down_response =
    /// "backup") or nothing (NODATA).
    pub fn with_health(config: &Config, up: impl Fn(&str) -> bool) -> Snapshot {
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

        let services: HashMap<&str, &Service> =
            config.services.iter().map(|s| (s.name.as_str(), s)).collect();
        let mut domains = Vec::new();
        let mut engine_domains = Vec::new();
        for domain in &config.gslb_domains {
            if needs_engine(config, domain, &services) {
                engine_domains.push(domain.name.clone());
                continue;
            }
            for qtype in [QTYPE_A, QTYPE_AAAA] {
                // The answer addresses of `names` of this qtype's family, in order, each once
                // (two services may share an address on different ports).
                let answer = |names: &[String]| {
                    let mut addrs: Vec<IpAddr> = Vec::new();
                    let live = names.iter().filter(|n| up(n.as_str()));
                    for service in live.filter_map(|n| services.get(n.as_str())) {
                        let ip = service.answer_ip();
                        if ip.is_ipv6() == (qtype == QTYPE_AAAA) && !addrs.contains(&ip) {
                            addrs.push(ip);
                        }
                    }
                    (!addrs.is_empty())
                        .then_some(Answer { ttl: domain.ttl, mode: domain.answer, addrs })
                };
                let mut answers: Vec<(u32, Answer)> = Vec::new();
                let family = |ip: &&IpAddr| ip.is_ipv6() == (qtype == QTYPE_AAAA);
                let backup: Vec<IpAddr> = domain.backup_ip.iter().filter(family).copied().collect();
                let family_configured = domain
                    .services
                    .iter()
                    .filter_map(|n| services.get(n.as_str()))
                    .any(|s| family(&&s.answer_ip()));
                match answer(&domain.services) {
                    Some(a) => answers.push((DEFAULT_VIEW, a)),
                    // Every service of the family is down: the backup addresses, if any.
                    None if family_configured
                        && domain.down_response == DownResponse::Backup
                        && !backup.is_empty() =>
                    {
                        answers.push((DEFAULT_VIEW, Answer { ttl: domain.ttl, mode: domain.answer, addrs: backup }))
                    }
                    None => {}
                }
                // A view without services of this family gets no entry: its clients fall back
                // to the default view's answer.
                for (view, names) in &domain.views {
                    if let (Some(id), Some(a)) = (view_id(view), answer(names)) {
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
            engine_domains,
            down_services: config.services.iter().filter(|s| !up(&s.name)).map(|s| s.name.clone()).collect(),
        }
    }
}

/// Whether `domain`'s answer can differ between two clients of one static view (or from query
/// to query beyond a rotation): then only a per-query decision is right.
fn needs_engine(config: &Config, domain: &GslbDomain, services: &HashMap<&str, &Service>) -> bool {
    let limited = domain
        .services
        .iter()
        .filter_map(|n| services.get(n.as_str()))
        .any(|s| s.max_connections.is_some() || s.max_bandwidth_kbps.is_some());
    domain.method != Method::RoundRobin
        || domain.alternate.is_some()
        || domain.fallback.is_some()
        || domain.persistence.is_some()
        || domain.backup_domain.is_some()
        || !config.policies.is_empty()
        || limited
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
            [[zone]]
            name = "example.com"
            ns = ["ns.example.net"]
            soa.rname = "hostmaster.example.com"
            [[site]]
            name = "s"
            ip = "192.0.2.200"
            [[service]]
            name = "w10"
            ip = "192.0.2.10"
            site = "s"
            [[service]]
            name = "w10-8080"
            ip = "192.0.2.10"
            port = 8080
            site = "s"
            [[service]]
            name = "w11"
            ip = "192.0.2.11"
            site = "s"
            [[service]]
            name = "w30"
            ip = "192.0.2.30"
            site = "s"
            [[service]]
            name = "w30v6"
            ip = "2001:db8::30"
            site = "s"
            [[service]]
            name = "nat"
            ip = "10.0.0.5"
            public_ip = "192.0.2.50"
            site = "s"
            [[gslb_domain]]
            name = "WWW.Example.com."
            ttl = 60
            answer = "all"
            services = ["w10", "w11"]
            backup_ip = ["192.0.2.99"]
            [[gslb_domain.view]]
            view = "us"
            services = ["w30", "w30v6"]
            [[gslb_domain.view]]
            view = "eu"
            services = ["w30v6"]
            [[gslb_domain]]
            name = "nat.example.com"
            services = ["nat", "w10-8080", "w10"]
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
        let answer = |ttl, mode, addrs: &[&str]| Answer {
            ttl,
            mode,
            addrs: addrs.iter().map(|a| ip(a)).collect(),
        };
        let all = |addrs: &[&str]| answer(60, AnswerMode::All, addrs);
        assert_eq!(
            s.domains,
            vec![
                DomainEntry {
                    name: "www.example.com".into(),
                    qtype: QTYPE_A,
                    id: 0,
                    // "eu" has no IPv4 service: no entry, its clients get the default view's.
                    answers: vec![
                        (DEFAULT_VIEW, all(&["192.0.2.10", "192.0.2.11"])),
                        (2, all(&["192.0.2.30"]))
                    ],
                },
                // No default-view AAAA: the domain's own services are all IPv4.
                DomainEntry {
                    name: "www.example.com".into(),
                    qtype: QTYPE_AAAA,
                    id: 1,
                    answers: vec![(2, all(&["2001:db8::30"])), (1, all(&["2001:db8::30"]))],
                },
                // The public IP is answered; an address shared by two services appears once.
                DomainEntry {
                    name: "nat.example.com".into(),
                    qtype: QTYPE_A,
                    id: 2,
                    answers: vec![(
                        DEFAULT_VIEW,
                        answer(30, AnswerMode::Rotate, &["192.0.2.50", "192.0.2.10"])
                    )],
                },
            ]
        );
    }

    #[test]
    fn down_services_leave_the_answers() {
        let config = Config::parse(
            r#"
            [server]
            listen = ["192.0.2.53"]
            [[view]]
            name = "lab"
            prefixes = ["192.0.2.0/24"]
            [[zone]]
            name = "example.com"
            ns = ["ns.example.net"]
            soa.rname = "hostmaster.example.com"
            [[site]]
            name = "s"
            ip = "192.0.2.1"
            [[service]]
            name = "a"
            ip = "198.51.100.1"
            site = "s"
            [[service]]
            name = "b"
            ip = "198.51.100.2"
            site = "s"
            [[service]]
            name = "lab"
            ip = "192.0.2.80"
            site = "s"
            [[gslb_domain]]
            name = "www.example.com"
            answer = "all"
            services = ["a", "b"]
            backup_ip = ["203.0.113.99"]
              [[gslb_domain.view]]
              view = "lab"
              services = ["lab"]
            [[gslb_domain]]
            name = "empty.example.com"
            services = ["a"]
            "#,
            Path::new("test.toml"),
        )
        .unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // (services down, www default view, www lab view, empty.example.com default view)
        let table: [(&[&str], Option<Vec<IpAddr>>, Option<Vec<IpAddr>>, Option<Vec<IpAddr>>); 4] = [
            (&[], Some(vec![ip("198.51.100.1"), ip("198.51.100.2")]), Some(vec![ip("192.0.2.80")]), Some(vec![ip("198.51.100.1")])),
            (&["a"], Some(vec![ip("198.51.100.2")]), Some(vec![ip("192.0.2.80")]), None),
            // The lab view's only service down: its clients get the default view's answer.
            (&["lab"], Some(vec![ip("198.51.100.1"), ip("198.51.100.2")]), None, Some(vec![ip("198.51.100.1")])),
            // Everything down: the backup address; no backup: nothing (NODATA).
            (&["a", "b", "lab"], Some(vec![ip("203.0.113.99")]), None, None),
        ];
        for (down, www, lab, empty) in table {
            let s = Snapshot::with_health(&config, |name| !down.contains(&name));
            let get = |name: &str, view: u32| {
                s.domains
                    .iter()
                    .find(|d| d.name == name && d.qtype == QTYPE_A)
                    .and_then(|d| d.answers.iter().find(|(v, _)| *v == view))
                    .map(|(_, a)| a.addrs.clone())
            };
            assert_eq!(get("www.example.com", DEFAULT_VIEW), www, "down {down:?}: www");
            assert_eq!(get("www.example.com", 1), lab, "down {down:?}: www, lab view");
            assert_eq!(get("empty.example.com", DEFAULT_VIEW), empty, "down {down:?}: empty");
        }
    }
}
