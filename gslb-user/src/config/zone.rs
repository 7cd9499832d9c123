//! `[[zone]]`: authoritative zones, their SOA and name servers.

use std::collections::{HashMap, HashSet};
use std::ops::RangeInclusive;

use serde::Deserialize;

use super::error::ConfigError;
use super::gslb_domain::GslbDomain;
use super::names::{Seen, domain_name, host_name, in_zone};
use super::record::{RawRecord, RecordData};
use super::validate::{Int, List, Place, Str, TTL_RANGE, Validator};
use super::zone_file::InputFile;

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
    /// The apex NS targets; from the zone file instead when it is given.
    pub(super) ns: Option<List>,
    /// The SOA record; from the zone file instead when it is given.
    pub(super) soa: Option<RawSoa>,
    /// An RFC 1035 master file of the zone's records (`zone_file.rs`).
    pub(super) file: Option<Str>,
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

/// The zones, what later checks need to know of each, and the zone files read.
pub(super) struct Zones {
    pub(super) zones: Vec<Zone>,
    pub(super) facts: Vec<ZoneFacts>,
    pub(super) files: Vec<InputFile>,
}

/// The apex records of a zone file, with where its `file` key is written.
struct FileApex<'a> {
    written: &'a Str,
    soa: Option<(Soa, u32, Place)>,
    ns: Vec<(String, u32, Place)>,
}

/// What later checks need to know about one zone's records.
#[derive(Default)]
pub(super) struct ZoneFacts {
    /// Owner name → where (`Validator::cite`) and type of its first A, AAAA or CNAME record:
    /// the types a GSLB domain of that name would answer itself (A and AAAA), or that must be
    /// alone at its name (CNAME, RFC 1034 §3.6.2). Other types may sit beside a GSLB name.
    pub(super) addresses: HashMap<String, (String, &'static str)>,
    /// Owner name → where and type of its first record of any type: nothing may sit beside a
    /// CNAME domain.
    pub(super) owners: HashMap<String, (String, String)>,
    /// Delegation point (owner of an NS record below the apex) → where its first NS record is.
    pub(super) delegations: HashMap<String, String>,
    /// Every name server (apex `ns` and NS records) and where it was written.
    pub(super) ns_targets: Vec<(String, Place)>,
}

impl ZoneFacts {
    /// The topmost delegation `name` is at or below, with where its NS record is.
    pub(super) fn delegation_of(&self, name: &str) -> Option<(&str, &str)> {
        self.delegations
            .iter()
            .filter(|(d, _)| in_zone(name, d))
            .min_by_key(|(d, _)| d.len())
            .map(|(d, at)| (d.as_str(), at.as_str()))
    }
}

impl Validator<'_> {
    pub(super) fn zones(&self, raw: Vec<RawZone>) -> Result<Zones, ConfigError> {
        let mut apexes: Vec<(String, usize)> = Vec::new();
        let mut inputs = Vec::new();
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
            let mut facts = ZoneFacts::default();
            let (zone, file_records) = match &rz.file {
                None => (self.toml_apex(&owner, &name, &rz, &mut facts)?, Vec::new()),
                Some(written) => {
                    let file = self.zone_file(&owner, &name, written)?;
                    inputs.extend(file.read);
                    let file_apex = FileApex {
                        written,
                        soa: file.soa,
                        ns: file.ns,
                    };
                    let zone = self.file_apex(&owner, &name, &rz, file_apex, &mut facts)?;
                    (zone, file.records)
                }
            };
            // The TOML records' default TTL: the zone's `ttl`, else its SOA's.
            let default_ttl = match &rz.ttl {
                Some(_) => self.ttl(&owner, rz.ttl.clone(), DEFAULT_ZONE_TTL)?,
                None => zone.ttl,
            };
            let mut written = file_records;
            written.extend(self.toml_records(&owner, &name, default_ttl, rz.records)?);
            let records = self.check_records(&owner, &name, written, &mut facts)?;
            zones.push(Zone { records, ..zone });
            all_facts.push(facts);
        }
        Ok(Zones {
            zones,
            facts: all_facts,
            files: inputs,
        })
    }

    /// A zone's SOA and apex NS from the configuration (`soa`, `ns`, `ttl`); its records are
    /// added later.
    fn toml_apex(
        &self,
        owner: &str,
        name: &str,
        rz: &RawZone,
        facts: &mut ZoneFacts,
    ) -> Result<Zone, ConfigError> {
        let ttl = self.ttl(owner, rz.ttl.clone(), DEFAULT_ZONE_TTL)?;
        let Some(ns_list) = &rz.ns else {
            return Err(self.error(
                rz.name.span(),
                format!("{owner}: ns is missing; list the zone's name servers, or read the zone from a file"),
            ));
        };
        if ns_list.get_ref().is_empty() {
            return Err(self.error(
                ns_list.span(),
                format!("{owner}: ns is empty; list the zone's name servers"),
            ));
        }
        let mut seen = Seen::new();
        let mut ns = Vec::new();
        for s in ns_list.get_ref() {
            let target = self.dns_name(s, &format!("{owner}: ns"), host_name)?;
            if let Some(first) = seen.first(target.clone(), self.line(s.span())) {
                return Err(self.error(
                    s.span(),
                    format!("{owner}: ns {target} listed twice (first on line {first})"),
                ));
            }
            facts.ns_targets.push((target.clone(), s.span().into()));
            ns.push(target);
        }
        let Some(raw_soa) = &rz.soa else {
            return Err(self.error(
                rz.name.span(),
                format!("{owner}: [zone.soa] is missing; write it (rname at least), or read the zone from a file"),
            ));
        };
        let soa = self.soa(owner, raw_soa, &ns[0])?;
        Ok(Zone {
            name: name.to_owned(),
            ttl,
            ns_ttl: ttl,
            ns,
            soa,
            records: Vec::new(),
        })
    }

    /// A zone's SOA and apex NS from its file; `soa` and `ns` in the configuration would say
    /// otherwise, so they are refused. Its records are added later.
    fn file_apex(
        &self,
        owner: &str,
        name: &str,
        rz: &RawZone,
        file: FileApex<'_>,
        facts: &mut ZoneFacts,
    ) -> Result<Zone, ConfigError> {
        let path = self.path(file.written.get_ref());
        let shown = path.display();
        if let Some(ns) = &rz.ns {
            return Err(self.error(
                ns.span(),
                format!("{owner}: the apex NS records come from its file {shown}; remove ns here"),
            ));
        }
        if let Some(soa) = &rz.soa {
            return Err(self.error(
                soa.rname.span(),
                format!("{owner}: the SOA record comes from its file {shown}; remove [zone.soa]"),
            ));
        }
        let Some((soa, ttl, _)) = file.soa else {
            return Err(self.error(
                file.written.span(),
                format!("{owner}: zone file {shown} has no SOA record at the apex {name}"),
            ));
        };
        let Some((_, ns_ttl, first)) = file.ns.first() else {
            return Err(self.error(
                file.written.span(),
                format!("{owner}: zone file {shown} has no NS records at the apex {name}"),
            ));
        };
        let (ns_ttl, first) = (*ns_ttl, first.clone());
        let mut ns: Vec<String> = Vec::new();
        for (target, ttl, place) in file.ns {
            if ns.contains(&target) {
                return Err(self.error_at(
                    &place,
                    format!("{owner}: NS {target} at the apex listed twice"),
                ));
            }
            if ttl != ns_ttl {
                return Err(self.error_at(
                    &place,
                    format!(
                        "{owner}, record {name} NS: TTL {ttl} differs from TTL {ns_ttl} of the \
                         {name} NS record on {}; the records of one name and type share one TTL",
                        self.cite(&first)
                    ),
                ));
            }
            facts.ns_targets.push((target.clone(), place));
            ns.push(target);
        }
        Ok(Zone {
            name: name.to_owned(),
            ttl,
            ns_ttl,
            ns,
            soa,
            records: Vec::new(),
        })
    }

    fn soa(&self, owner: &str, raw: &RawSoa, first_ns: &str) -> Result<Soa, ConfigError> {
        let mname = match &raw.mname {
            None => first_ns.to_owned(),
            Some(m) => self.dns_name(m, &format!("{owner}: soa.mname"), host_name)?,
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
                raw.serial.clone(),
                SERIAL_RANGE,
                DEFAULT_SOA_SERIAL,
            )?,
            refresh: self.int(
                owner,
                &key("refresh"),
                raw.refresh.clone(),
                TTL_RANGE,
                DEFAULT_SOA_REFRESH,
            )?,
            retry: self.int(
                owner,
                &key("retry"),
                raw.retry.clone(),
                TTL_RANGE,
                DEFAULT_SOA_RETRY,
            )?,
            expire: self.int(
                owner,
                &key("expire"),
                raw.expire.clone(),
                TTL_RANGE,
                DEFAULT_SOA_EXPIRE,
            )?,
            minimum: self.int(
                owner,
                &key("minimum"),
                raw.minimum.clone(),
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
            for (target, place) in &facts.ns_targets {
                if zones.iter().any(|z| z.contains(target)) && !addressed.contains(target.as_str())
                {
                    return Err(self.error_at(
                        place,
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
