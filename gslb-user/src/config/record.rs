//! `[[zone.record]]`: the static records of a zone.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::net::IpAddr;

use serde::Deserialize;

use super::error::ConfigError;
use super::names::{owner_name, target_name};
use super::validate::{Int, Place, Str, Validator};
use super::zone::ZoneFacts;

pub(super) mod generic;

/// The DS type (RFC 4034): only at a delegation.
const TYPE_DS: u16 = 43;

pub use crate::model::{MAX_TXT_STRING, RecordData, StaticRecord};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRecord {
    pub(super) name: Str,
    #[serde(rename = "type")]
    pub(super) rtype: Str,
    pub(super) value: Str,
    pub(super) ttl: Option<Int>,
}

/// `text` as TXT character-strings of at most [`MAX_TXT_STRING`] bytes, split on character
/// boundaries; `""` gives one empty string.
pub(super) fn txt_strings(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let (chunk, tail) = rest.split_at(rest.floor_char_boundary(MAX_TXT_STRING));
        out.push(chunk.to_owned());
        rest = tail;
        if rest.is_empty() {
            return out;
        }
    }
}

/// A record and where its parts were written (a zone file's record has one place).
pub(super) struct Written {
    pub(super) record: StaticRecord,
    pub(super) name: Place,
    pub(super) value: Place,
    pub(super) ttl: Place,
}

impl Validator<'_> {
    /// One zone's `[[zone.record]]`s, each read on its own; [`Self::check_records`] checks
    /// them together with the zone file's.
    pub(super) fn toml_records(
        &self,
        owner: &str,
        apex: &str,
        default_ttl: u32,
        raw: Vec<RawRecord>,
    ) -> Result<Vec<Written>, ConfigError> {
        let mut out = Vec::with_capacity(raw.len());
        for rr in raw {
            let name = self.dns_name(&rr.name, &format!("{owner}: record name"), |n| {
                owner_name(n, apex)
            })?;
            let data = self.record_data(owner, apex, &name, &rr)?;
            let ttl = self.ttl(
                &format!("{owner}, record {name} {}", data.type_name()),
                rr.ttl.clone(),
                default_ttl,
            )?;
            out.push(Written {
                record: StaticRecord { name, ttl, data },
                name: rr.name.span().into(),
                value: rr.value.span().into(),
                ttl: rr
                    .ttl
                    .as_ref()
                    .map_or(rr.name.span(), toml::Spanned::span)
                    .into(),
            });
        }
        Ok(out)
    }

    /// One zone's static records, checked together; fills `facts` (owners, delegations, NS
    /// targets).
    pub(super) fn check_records(
        &self,
        owner: &str,
        apex: &str,
        written: Vec<Written>,
        facts: &mut ZoneFacts,
    ) -> Result<Vec<StaticRecord>, ConfigError> {
        // Delegations first: a record written before its delegation's NS is still below it.
        for w in &written {
            if let RecordData::Ns(target) = &w.record.data {
                facts.ns_targets.push((target.clone(), w.value.clone()));
                if w.record.name != apex {
                    facts
                        .delegations
                        .entry(w.record.name.clone())
                        .or_insert_with(|| self.cite(&w.name));
                }
            }
        }

        // Record → where it was first written.
        let mut seen: HashMap<&StaticRecord, &Place> = HashMap::new();
        // (owner, type) → (TTL, where): an RRset has one TTL (RFC 2181 §5.2).
        let mut rrsets: HashMap<(&str, u16), (u32, &Place)> = HashMap::new();
        // Owner → where and type of its first record, and where its CNAME is.
        let mut first_at: HashMap<&str, (&Place, std::borrow::Cow<'static, str>)> = HashMap::new();
        let mut cname_at: HashMap<&str, &Place> = HashMap::new();
        for w in &written {
            let r = &w.record;
            let (name, rtype) = (r.name.as_str(), r.data.type_name());
            let what = format!("{owner}, record {name} {rtype}");
            let at_name = |reason: String| self.error_at(&w.name, format!("{what}: {reason}"));

            if name == apex {
                match r.data {
                    RecordData::Ns(_) => {
                        return Err(at_name(
                            "the apex NS records are the zone's ns list; add the name server there"
                                .into(),
                        ));
                    }
                    RecordData::Cname(_) => {
                        return Err(at_name(
                            "a CNAME cannot be at the apex, which has SOA and NS records".into(),
                        ));
                    }
                    _ => {}
                }
            }
            if name.starts_with("*.") && matches!(r.data, RecordData::Ns(_)) {
                return Err(at_name(
                    "a wildcard cannot delegate: NS at a wildcard name would answer no one as \
                     a delegation (RFC 4592 §4.2); delegate the names themselves"
                        .into(),
                ));
            }
            if let Some(first) = seen.get(r) {
                return Err(self.error_at(
                    &w.value,
                    format!("{what}: listed twice (first on {})", self.cite(first)),
                ));
            }
            seen.insert(r, &w.name);
            let is_cname = matches!(r.data, RecordData::Cname(_));
            if let Some((first, first_type)) = first_at.get(name) {
                let clash = if is_cname {
                    Some((*first, first_type.as_ref()))
                } else {
                    cname_at.get(name).map(|&p| (p, "CNAME"))
                };
                if let Some((other, other_type)) = clash {
                    return Err(at_name(format!(
                        "a CNAME must be the only record at its name ({other_type} on {})",
                        self.cite(other)
                    )));
                }
            }
            let address_type = match r.data {
                RecordData::A(_) => Some("A"),
                RecordData::Aaaa(_) => Some("AAAA"),
                RecordData::Cname(_) => Some("CNAME"),
                _ => None,
            };
            if let Some(t) = address_type {
                facts
                    .addresses
                    .entry(name.to_owned())
                    .or_insert_with(|| (self.cite(&w.name), t));
            }
            facts
                .owners
                .entry(name.to_owned())
                .or_insert_with(|| (self.cite(&w.name), rtype.to_string()));
            first_at.entry(name).or_insert((&w.name, rtype.clone()));
            if is_cname {
                cname_at.insert(name, &w.name);
            }
            match rrsets.entry((name, r.data.rtype())) {
                Entry::Occupied(e) if e.get().0 != r.ttl => {
                    let (ttl, first) = *e.get();
                    return Err(self.error_at(
                        &w.ttl,
                        format!(
                            "{what}: TTL {} differs from TTL {ttl} of the {name} {rtype} record on \
                             {}; the records of one name and type share one TTL",
                            r.ttl,
                            self.cite(first)
                        ),
                    ));
                }
                Entry::Occupied(_) => {}
                Entry::Vacant(e) => {
                    e.insert((r.ttl, &w.name));
                }
            }
            let is_ds = r.data.rtype() == TYPE_DS;
            if let Some((cut, cut_at)) = facts.delegation_of(name) {
                let allowed = match r.data {
                    RecordData::A(_) | RecordData::Aaaa(_) => true,
                    RecordData::Ns(_) => name == cut,
                    // The parent's side of the delegation (RFC 4035 §2.4).
                    _ if is_ds => name == cut,
                    _ => false,
                };
                if !allowed {
                    return Err(at_name(format!(
                        "{name} is at or below the delegation of {cut} (NS on {cut_at}), \
                         where only NS records, DS records at the cut and glue A/AAAA records \
                         belong"
                    )));
                }
            } else if is_ds {
                return Err(at_name(
                    "a DS record belongs at a delegation (a name below the apex with NS records), \
                     where the parent answers for it"
                        .into(),
                ));
            }
        }
        Ok(written.into_iter().map(|w| w.record).collect())
    }

    /// The data of one record; errors point at its type or value.
    fn record_data(
        &self,
        owner: &str,
        apex: &str,
        name: &str,
        rr: &RawRecord,
    ) -> Result<RecordData, ConfigError> {
        let rtype = rr.rtype.get_ref().to_ascii_uppercase();
        let value = rr.value.get_ref();
        let what = format!("{owner}, record {name} {rtype}");
        let err = |reason: String| self.error(rr.value.span(), format!("{what}: {reason}"));
        let target = |raw: &str, allow_root: bool| {
            target_name(raw, apex, allow_root).map_err(|reason| err(format!("{raw:?}: {reason}")))
        };
        let number = |raw: &str, field: &str| {
            raw.parse::<u16>()
                .map_err(|_| err(format!("{field} {raw:?} is not a number in 0..=65535")))
        };
        let fields: Vec<&str> = value.split_whitespace().collect();
        Ok(match rtype.as_str() {
            "A" | "AAAA" => {
                let ip: IpAddr = value
                    .parse()
                    .map_err(|_| err(format!("{value:?} is not an IP address")))?;
                match (ip, rtype.as_str()) {
                    (IpAddr::V4(v4), "A") => RecordData::A(v4),
                    (IpAddr::V6(v6), "AAAA") => RecordData::Aaaa(v6),
                    (IpAddr::V4(_), _) => {
                        return Err(err(format!("{ip} is an IPv4 address (use type A)")));
                    }
                    (IpAddr::V6(_), _) => {
                        return Err(err(format!("{ip} is an IPv6 address (use type AAAA)")));
                    }
                }
            }
            "CNAME" => RecordData::Cname(target(value, false)?),
            "NS" => RecordData::Ns(target(value, false)?),
            "TXT" => {
                let strings = txt_strings(value);
                let rdata_len = value.len() + strings.len();
                if rdata_len > usize::from(u16::MAX) {
                    return Err(err(format!(
                        "{} bytes of text in {} strings make {rdata_len} bytes of record data, at \
                         most 65535",
                        value.len(),
                        strings.len(),
                    )));
                }
                RecordData::Txt(strings)
            }
            "MX" => match fields[..] {
                [preference, exchange] => RecordData::Mx {
                    preference: number(preference, "preference")?,
                    exchange: target(exchange, true)?,
                },
                _ => {
                    return Err(err(format!(
                        "{value:?} is not \"preference exchange\" (e.g. \"10 mail.example.com.\")"
                    )));
                }
            },
            "SRV" => match fields[..] {
                [priority, weight, port, srv_target] => RecordData::Srv {
                    priority: number(priority, "priority")?,
                    weight: number(weight, "weight")?,
                    port: number(port, "port")?,
                    target: target(srv_target, true)?,
                },
                _ => {
                    return Err(err(format!(
                        "{value:?} is not \"priority weight port target\" (e.g. \"10 5 443 sip.example.com.\")"
                    )));
                }
            },
            "SOA" => {
                return Err(self.error(
                    rr.rtype.span(),
                    format!("{what}: the SOA record is [zone.soa]"),
                ));
            }
            other => match generic::type_code(other) {
                Some(code) => RecordData::Generic {
                    rtype: code,
                    rdata: generic::rdata(code, value, apex).map_err(err)?,
                },
                None => {
                    return Err(self.error(
                        rr.rtype.span(),
                        format!(
                            "{owner}, record {name}: unknown type {:?} (supported: {}, and \
                             TYPEnnn with RFC 3597 data)",
                            rr.rtype.get_ref(),
                            generic::SUPPORTED
                        ),
                    ));
                }
            },
        })
    }
}
