//! `[[zone]]`: authoritative zones, their SOA and name servers.

use std::collections::{HashMap, HashSet};
use std::ops::{Range, RangeInclusive};

use serde::Deserialize;

use super::error::ConfigError;
use super::gslb_domain::GslbDomain;
use super::names::{Seen, domain_name, host_name, in_zone};
use super::record::{RawRecord, RecordData};
use super::validate::{Int, List, Str, TTL_RANGE, Validator};

const DEFAULT_ZONE_TTL: u32 = 3600;
const DEFAULT_SOA_SERIAL: u32 = 1;
const DEFAULT_SOA_REFRESH: u32 = 3600;
const DEFAULT_SOA_RETRY: u32 = 600;
const DEFAULT_SOA_EXPIRE: u32 = 604_800;
const DEFAULT_SOA_MINIMUM: u32 = 60;
const SERIAL_RANGE: RangeInclusive<i64> = 0..=u32::MAX as i64;

pub use crate::model::{Soa, Zone};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawZone {
    pub(super) name: Str,
    pub(super) ttl: Option<Int>,
    pub(super) ns: List,
    pub(super) soa: RawSoa,
    #[serde(default, rename = "record")]
    pub(super) records: Vec<RawRecord>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSoa {
    pub(super) mname: Option<Str>,
    pub(super) rname: Str,
    pub(super) serial: Option<Int>,
    pub(super) refresh: Option<Int>,
    pub(super) retry: Option<Int>,
    pub(super) expire: Option<Int>,
    pub(super) minimum: Option<Int>,
}

/// What later checks need to know about one zone's records.
#[derive(Default)]
pub(super) struct ZoneFacts {
    /// Owner name → line and type of its first A, AAAA or CNAME record: the types a GSLB
    /// domain of that name would answer itself (A and AAAA), or that must be alone at its
    /// name (CNAME, RFC 1034 §3.6.2). Other types may sit beside a GSLB name.
    pub(super) addresses: HashMap<String, (usize, &'static str)>,
    /// Delegation point (owner of an NS record below the apex) → line of its first NS record.
    pub(super) delegations: HashMap<String, usize>,
    /// Every name server (apex `ns` and NS records) and where it was written.
    pub(super) ns_targets: Vec<(String, Range<usize>)>,
}

impl ZoneFacts {
    /// The topmost delegation `name` is at or below, with its line.
    pub(super) fn delegation_of(&self, name: &str) -> Option<(&str, usize)> {
        self.delegations
            .iter()
            .filter(|(d, _)| in_zone(name, d))
            .min_by_key(|(d, _)| d.len())
            .map(|(d, line)| (d.as_str(), *line))
    }
}

impl Validator<'_> {
    pub(super) fn zones(
        &self,
        raw: Vec<RawZone>,
    ) -> Result<(Vec<Zone>, Vec<ZoneFacts>), ConfigError> {
        let mut apexes: Vec<(String, usize)> = Vec::new();
        let mut zones = Vec::new();
        let mut all_facts = Vec::new();
        for rz in raw {
            let name = self.dns_name(&rz.name, "zone name", domain_name)?;
            for (other, line) in &apexes {
                let reason = if *other == name {
                    format!("zone {name:?} defined twice (first on line {line})")
                } else if in_zone(&name, other) {
                    format!(
                        "zone {name:?} is inside zone {other:?} (line {line}); nested zones are not \
                         supported: put its records in {other:?}, or delegate it there with NS records"
                    )
                } else if in_zone(other, &name) {
                    format!(
                        "zone {name:?} contains zone {other:?} (line {line}); nested zones are not \
                         supported: merge them into one"
                    )
                } else {
                    continue;
                };
                return Err(self.error(rz.name.span(), reason));
            }
            apexes.push((name.clone(), self.line(rz.name.span())));
            let owner = format!("zone {name:?}");
            let ttl = self.ttl(&owner, rz.ttl, DEFAULT_ZONE_TTL)?;

            if rz.ns.get_ref().is_empty() {
                return Err(self.error(
                    rz.ns.span(),
                    format!("{owner}: ns is empty; list the zone's name servers"),
                ));
            }
            let mut facts = ZoneFacts::default();
            let mut seen = Seen::new();
            let mut ns = Vec::new();
            for s in rz.ns.get_ref() {
                let target = self.dns_name(s, &format!("{owner}: ns"), host_name)?;
                if let Some(first) = seen.first(target.clone(), self.line(s.span())) {
                    return Err(self.error(
                        s.span(),
                        format!("{owner}: ns {target} listed twice (first on line {first})"),
                    ));
                }
                facts.ns_targets.push((target.clone(), s.span()));
                ns.push(target);
            }
            let soa = self.soa(&owner, rz.soa, &ns[0])?;
            let records = self.records(&owner, &name, ttl, rz.records, &mut facts)?;
            zones.push(Zone {
                name,
                ttl,
                ns,
                soa,
                records,
            });
            all_facts.push(facts);
        }
        Ok((zones, all_facts))
    }

    fn soa(&self, owner: &str, raw: RawSoa, first_ns: &str) -> Result<Soa, ConfigError> {
        let mname = match raw.mname {
            None => first_ns.to_owned(),
            Some(m) => self.dns_name(&m, &format!("{owner}: soa.mname"), host_name)?,
        };
        let rname = self.dns_name(&raw.rname, &format!("{owner}: soa.rname"), |r| {
            if r.contains('@') {
                return Err(format!(
                    "write the mailbox as a name, with '.' for '@' ({:?})",
                    r.replace('@', ".")
                ));
            }
            host_name(r)
        })?;
        let key = |k: &str| format!("soa.{k}");
        Ok(Soa {
            mname,
            rname,
            serial: self.int(
                owner,
                &key("serial"),
                raw.serial,
                SERIAL_RANGE,
                DEFAULT_SOA_SERIAL,
            )?,
            refresh: self.int(
                owner,
                &key("refresh"),
                raw.refresh,
                TTL_RANGE,
                DEFAULT_SOA_REFRESH,
            )?,
            retry: self.int(
                owner,
                &key("retry"),
                raw.retry,
                TTL_RANGE,
                DEFAULT_SOA_RETRY,
            )?,
            expire: self.int(
                owner,
                &key("expire"),
                raw.expire,
                TTL_RANGE,
                DEFAULT_SOA_EXPIRE,
            )?,
            minimum: self.int(
                owner,
                &key("minimum"),
                raw.minimum,
                TTL_RANGE,
                DEFAULT_SOA_MINIMUM,
            )?,
        })
    }

    /// A name server inside a zone served here needs an address there, or nobody can reach it.
    pub(super) fn name_servers_have_addresses(
        &self,
        zones: &[Zone],
        facts: &[ZoneFacts],
        gslb_domains: &[GslbDomain],
    ) -> Result<(), ConfigError> {
        let addressed: HashSet<&str> = zones
            .iter()
            .flat_map(|z| &z.records)
            .filter(|r| matches!(r.data, RecordData::A(_) | RecordData::Aaaa(_)))
            .map(|r| r.name.as_str())
            .chain(gslb_domains.iter().map(|d| d.name.as_str()))
            .collect();
        for (zone, facts) in zones.iter().zip(facts) {
            for (target, span) in &facts.ns_targets {
                if zones.iter().any(|z| z.contains(target)) && !addressed.contains(target.as_str())
                {
                    return Err(self.error(
                        span.clone(),
                        format!(
                            "zone {:?}: name server {target} is inside a zone served here but has \
                             no address; add an A or AAAA [[zone.record]] for it",
                            zone.name
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}
