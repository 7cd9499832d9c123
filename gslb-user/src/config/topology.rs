//! `[[topology]]`: BIG-IP DNS topology records.

use std::net::IpAddr;
use std::ops::RangeInclusive;

use ipnet::IpNet;
use serde::Deserialize;

use super::error::ConfigError;
use super::names::{Names, Seen};
use super::site::Site;
use super::validate::{Int, Str, Validator};
use crate::location::Location;
use crate::policy::Ldns;

const SCORE_RANGE: RangeInclusive<i64> = 1..=u32::MAX as i64;

/// `[[topology]]`: a BIG-IP DNS topology record, `dc."NAME" <ldns> <score>`, as configured: its
/// site by name (the engine's [`crate::policy::TopologyRecord`] has the site's index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyRecordConfig {
    /// A [`Site`] (exists).
    pub destination: String,
    /// A prefix (host bits zero) or a location pattern (`*` for any client); (destination,
    /// ldns) is unique.
    pub ldns: Ldns,
    /// 1..=4294967295.
    pub score: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTopology {
    pub(super) destination: Str,
    pub(super) ldns: Str,
    pub(super) score: Int,
}

impl Validator<'_> {
    pub(super) fn topology(
        &self,
        raw: Vec<RawTopology>,
        sites: &[Site],
    ) -> Result<Vec<TopologyRecordConfig>, ConfigError> {
        let site_names = Names::new("site", sites.iter().map(|s| s.name.as_str()));
        let mut seen: Seen<(String, String)> = Seen::new();
        let mut records = Vec::new();
        for rt in raw {
            let destination = rt.destination.get_ref();
            let owner = format!("topology record {destination:?} {:?}", rt.ldns.get_ref());
            if !site_names.contains(destination) {
                return Err(self.error(
                    rt.destination.span(),
                    format!(
                        "topology record: destination: {}",
                        site_names.unknown(destination)
                    ),
                ));
            }
            let written = rt.ldns.get_ref();
            let err =
                |reason: String| self.error(rt.ldns.span(), format!("{owner}: ldns {reason}"));
            let ldns = if let Ok(net) = written.parse::<IpNet>() {
                if net.trunc() != net {
                    return Err(err(format!(
                        "{net} has host bits set (did you mean {}?)",
                        net.trunc()
                    )));
                }
                Ldns::Prefix(net)
            } else if let Ok(ip) = written.parse::<IpAddr>() {
                let len = if ip.is_ipv4() { 32 } else { 128 };
                return Err(err(format!(
                    "{ip} is an address; write a prefix ({ip}/{len})"
                )));
            } else if written.contains('/') {
                return Err(err(format!(
                    "{written:?} is not a prefix (e.g. 202.106.0.0/16)"
                )));
            } else {
                let location = Location::parse(written).map_err(|reason| {
                    err(format!(
                        "{written:?}: not a prefix, nor a location: {reason}"
                    ))
                })?;
                Ldns::Location(location)
            };
            let key = match &ldns {
                Ldns::Prefix(net) => net.to_string(),
                Ldns::Location(l) => l.to_string(),
            };
            if let Some(first) = seen.first((destination.clone(), key), self.line(rt.ldns.span())) {
                return Err(err(format!(
                    "for this destination is already on line {first}"
                )));
            }
            let score = self.int(&owner, "score", Some(rt.score), SCORE_RANGE, 0)?;
            records.push(TopologyRecordConfig {
                destination: destination.clone(),
                ldns,
                score,
            });
        }
        Ok(records)
    }
}
