//! Stage 0, with the spec: what a CNAME domain's answer names. Per service with a `cname`, for
//! an A and an AAAA query, its [`CnameTarget`]: the name, and the records the responder's
//! answer carries after the CNAME when they are all it carries (the target's addresses, when
//! the target is a static name of ours with records of the type; none when it is outside our
//! zones), so that the fast path can give the same answer. Anything else after the CNAME
//! (NODATA or NXDOMAIN with the zone's SOA, a GSLB target decided per client, a chain, a
//! referral, a wildcard's synthesis) leaves the query to the responder, which follows the
//! CNAME itself (`responder::lookup`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use crate::model::{Model, RecordData, in_zone};

/// The name a CNAME answer carries, and what follows it for one query type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CnameTarget {
    /// Lower-case, without the trailing dot.
    pub name: String,
    /// The records after the CNAME, each (TTL, address) in zone order, when they are all the
    /// answer holds: empty when the target is outside our zones. `None`: the responder's
    /// answer holds more, which only it gives.
    pub follow: Option<Vec<(u32, IpAddr)>>,
}

/// By service index: the targets of its `cname` for A (0) and AAAA (1) queries; `None` for a
/// service without one.
pub(super) type Targets = Vec<Option<[Arc<CnameTarget>; 2]>>;

pub(super) fn targets(model: &Model) -> Targets {
    if model.services.iter().all(|s| s.cname.is_none()) {
        return vec![None; model.services.len()];
    }
    // Each zone's records by owner, built once (a zone file may hold a million).
    let owners: Vec<HashMap<&str, Vec<(u32, &RecordData)>>> = model
        .zones
        .iter()
        .map(|z| {
            let mut by_owner: HashMap<&str, Vec<(u32, &RecordData)>> = HashMap::new();
            for r in &z.records {
                by_owner
                    .entry(r.name.as_str())
                    .or_default()
                    .push((r.ttl, &r.data));
            }
            by_owner
        })
        .collect();
    // For A (0) and AAAA (1), the target's zone, delegations and records looked up once.
    let follow = |target: &str| -> [Option<Vec<(u32, IpAddr)>>; 2] {
        // The zone that holds it: the longest apex (as the responder finds it).
        let Some((z, zone)) = model
            .zones
            .iter()
            .enumerate()
            .filter(|(_, z)| in_zone(target, &z.name))
            .max_by_key(|(_, z)| z.name.len())
        else {
            return [Some(Vec::new()), Some(Vec::new())];
        };
        if model.domains.iter().any(|d| d.name == target) {
            return [None, None];
        }
        // A delegation at or above it, below the apex: a referral.
        let mut at = target;
        while at != zone.name {
            let cut = owners[z]
                .get(at)
                .is_some_and(|rs| rs.iter().any(|(_, d)| matches!(d, RecordData::Ns(_))));
            if cut {
                return [None, None];
            }
            at = at
                .split_once('.')
                .map_or(zone.name.as_str(), |(_, parent)| parent);
        }
        // No records: NXDOMAIN, an empty non-terminal's NODATA or a wildcard's synthesis.
        let Some(records) = owners[z].get(target) else {
            return [None, None];
        };
        let mut out = [Vec::new(), Vec::new()];
        for &(ttl, data) in records {
            match data {
                RecordData::Cname(_) => return [None, None],
                RecordData::A(a) => out[0].push((ttl, IpAddr::V4(*a))),
                RecordData::Aaaa(a) => out[1].push((ttl, IpAddr::V6(*a))),
                _ => {}
            }
        }
        // None of the type: NODATA, with the SOA only the responder adds.
        out.map(|of_type| (!of_type.is_empty()).then_some(of_type))
    };
    model
        .services
        .iter()
        .map(|s| {
            let name = s.cname.as_ref()?;
            Some(follow(name).map(|follow| {
                Arc::new(CnameTarget {
                    name: name.clone(),
                    follow,
                })
            }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::Config;

    /// What follows each service's CNAME, for A and AAAA: a table over every kind of target.
    #[test]
    fn the_records_after_a_cname_are_known_only_when_they_are_all_the_answer() {
        let mut text = String::from(
            "[server]\nlisten = [\"192.0.2.1\"]\n\
             [[zone]]\nname = \"example.com\"\nns = [\"ns.example.net\"]\nsoa.rname = \"h.example.com\"\n\
             [[zone.record]]\nname = \"both\"\ntype = \"A\"\nvalue = \"192.0.2.80\"\n\
             [[zone.record]]\nname = \"both\"\nttl = 60\ntype = \"AAAA\"\nvalue = \"2001:db8::80\"\n\
             [[zone.record]]\nname = \"both\"\ntype = \"A\"\nvalue = \"192.0.2.81\"\n\
             [[zone.record]]\nname = \"txt\"\ntype = \"TXT\"\nvalue = \"no address\"\n\
             [[zone.record]]\nname = \"alias\"\ntype = \"CNAME\"\nvalue = \"both\"\n\
             [[zone.record]]\nname = \"sub\"\ntype = \"NS\"\nvalue = \"ns.example.net.\"\n\
             [[zone.record]]\nname = \"host.sub\"\ntype = \"A\"\nvalue = \"192.0.2.82\"\n\
             [[zone.record]]\nname = \"*.wild\"\ntype = \"A\"\nvalue = \"192.0.2.83\"\n\
             [[site]]\nname = \"s\"\nip = \"192.0.2.9\"\n\
             [[service]]\nname = \"addr\"\nip = \"192.0.2.10\"\nsite = \"s\"\n\
             [[gslb_domain]]\nname = \"pool.example.com\"\nservices = [\"addr\"]\n",
        );
        let a = |s: &str| s.parse::<IpAddr>().unwrap();
        type Follow = Option<Vec<(u32, IpAddr)>>;
        let table: Vec<(&str, Follow, Follow)> = vec![
            ("www.example.net", Some(vec![]), Some(vec![])),
            (
                "both.example.com",
                Some(vec![(3600, a("192.0.2.80")), (3600, a("192.0.2.81"))]),
                Some(vec![(60, a("2001:db8::80"))]),
            ),
            // NODATA, NXDOMAIN, an empty non-terminal, a wildcard's synthesis.
            ("txt.example.com", None, None),
            ("nothing.example.com", None, None),
            ("wild.example.com", None, None),
            ("x.wild.example.com", None, None),
            // A chain, a delegation, a GSLB domain.
            ("alias.example.com", None, None),
            ("host.sub.example.com", None, None),
            ("pool.example.com", None, None),
        ];
        for (i, (target, _, _)) in table.iter().enumerate() {
            text += &format!(
                "[[service]]\nname = \"c{i}\"\nip = \"192.0.2.{}\"\nsite = \"s\"\ncname = \"{target}\"\n",
                20 + i
            );
        }
        let config = Config::parse(&text, Path::new("cname.toml")).unwrap();
        let targets = targets(&config.model());
        assert_eq!(targets[0], None, "an address service has none");
        for (i, (target, want_a, want_aaaa)) in table.into_iter().enumerate() {
            let [got_a, got_aaaa] = targets[i + 1].clone().expect("a cname service");
            assert_eq!(got_a.name, target);
            assert_eq!(
                (got_a.follow.clone(), got_aaaa.follow.clone()),
                (want_a, want_aaaa),
                "{target}"
            );
        }
    }
}
