//! `[[gslb_domain]]`: names answered from services, their views, backup addresses and
//! backup domains.

use std::collections::HashMap;
use std::net::IpAddr;

use serde::Deserialize;
use toml::Spanned;

use super::MAX_ADDRS;
use super::error::ConfigError;
use super::lb::{LbSettings, RawLb, RawMask, RawPersistence};
use super::names::{Names, Seen, domain_name, family, wildcard_or};
use super::service::Service;
use super::topology::TopologyRecordConfig;
use super::validate::{Int, List, Str, Validator};
use super::view::{DEFAULT_VIEW, View};
use super::zone::{Zone, ZoneFacts};
use crate::model::MAX_ANSWERS;
use crate::model::RecordType;
use crate::policy::{AnswerMode, DownResponse, Method, Persistence, SourceMask};

const DEFAULT_GSLB_TTL: u32 = 30;
/// `max_answers` with `answer = "all"` when not set: the fast path's answer set, so that every
/// service goes in every answer as long as the fast path can give them.
const DEFAULT_MAX_ANSWERS_ALL: u16 = MAX_ADDRS as u16;

/// `[[gslb_domain]]`: a name answered from GSLB services.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GslbDomain {
    /// Lower-case, without trailing dot; unique; inside a zone, not at or below one of its
    /// delegations, not the name of a static record. The apex may be one (its SOA and NS still
    /// come from the zone).
    pub name: String,
    /// "A" (default): A and AAAA records of its services' addresses. "CNAME": one CNAME, the
    /// `cname` of the service it picks; then every bound service has a `cname` (and an address
    /// service none), `max_answers` is 1, `answer` is "rotate", there is no `backup_ip`, its
    /// backup domain is a CNAME domain too, it is not the apex and no static record shares
    /// its name (RFC 1034 §3.6.2).
    pub record_type: RecordType,
    pub ttl: u32,
    pub answer: AnswerMode,
    /// The most addresses one answer carries, 1..=[`MAX_ANSWERS`]; default 1, or
    /// [`MAX_ADDRS`] with `answer = "all"`. Over 1 only where it can act: not with persistence
    /// or a chain that is global availability alone.
    pub max_answers: u16,
    /// Services answered to clients in no view (the default view), in order; non-empty, no
    /// duplicates, each exists; any number of them.
    pub services: Vec<String>,
    /// Answered when every service is down; no duplicates, at most [`MAX_ADDRS`] per family.
    pub backup_ip: Vec<IpAddr>,
    /// `Backup` exactly when `backup_ip` is non-empty.
    pub down_response: DownResponse,
    /// Per-view services, in file order; each view exists (never "default") and appears once,
    /// its services follow the same rules as `services`.
    pub views: Vec<(String, Vec<String>)>,
    /// The load-balancing method (BIG-IP DNS "preferred"); default round robin.
    pub method: Method,
    /// Used when `method` cannot decide (BIG-IP DNS "alternate", NetScaler backup method).
    /// Never after a method that always decides, never a repeat.
    pub alternate: Option<Method>,
    /// Used when `method` and `alternate` cannot decide (BIG-IP DNS "fallback"); same rules.
    pub fallback: Option<Method>,
    /// RTT: sites within the lowest RTT plus this many milliseconds share the answers; only
    /// set (non-zero) when the chain has `rtt`.
    pub tolerance_ms: u32,
    /// Source-IP hash grouping; only set (not /32, /128) when the chain has `sourceiphash`.
    pub sourceip_mask: SourceMask,
    pub persistence: Option<Persistence>,
    /// Another GSLB domain (exists, not this one, no cycle) that answers when this one has no
    /// available service (NetScaler backup virtual server).
    pub backup_domain: Option<String>,
}

impl GslbDomain {
    /// The method chain: `method`, then `alternate` and `fallback` if set.
    pub fn chain(&self) -> Vec<Method> {
        [Some(self.method), self.alternate, self.fallback]
            .into_iter()
            .flatten()
            .collect()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGslbDomain {
    pub(super) name: Str,
    pub(super) record_type: Option<Spanned<RecordType>>,
    pub(super) ttl: Option<Int>,
    pub(super) answer: Option<Spanned<AnswerMode>>,
    pub(super) max_answers: Option<Int>,
    pub(super) services: List,
    pub(super) backup_ip: Option<List>,
    pub(super) down_response: Option<Spanned<DownResponse>>,
    #[serde(default, rename = "view")]
    pub(super) views: Vec<RawGslbView>,
    pub(super) method: Option<Spanned<Method>>,
    pub(super) alternate: Option<Spanned<Method>>,
    pub(super) fallback: Option<Spanned<Method>>,
    pub(super) tolerance_ms: Option<Int>,
    pub(super) sourceip_mask: Option<Spanned<RawMask>>,
    pub(super) persistence: Option<Spanned<RawPersistence>>,
    pub(super) backup_domain: Option<Str>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGslbView {
    pub(super) view: Str,
    pub(super) services: List,
}

impl Validator<'_> {
    pub(super) fn gslb_domains(
        &self,
        raw: Vec<RawGslbDomain>,
        zones: &[Zone],
        facts: &[ZoneFacts],
        views: &[View],
        services: &[Service],
        topology: &[TopologyRecordConfig],
    ) -> Result<Vec<GslbDomain>, ConfigError> {
        let view_names = Names::new("view", views.iter().map(|v| v.name.as_str()));
        let by_name: HashMap<&str, &Service> =
            services.iter().map(|s| (s.name.as_str(), s)).collect();
        let service_names = Names::new("service", services.iter().map(|s| s.name.as_str()));
        let mut names = Seen::new();
        let mut domains = Vec::new();
        // (domain index, written backup_domain) for the checks once every domain is known.
        let mut backups: Vec<(usize, Str)> = Vec::new();
        for rd in raw {
            let name = self.dns_name(&rd.name, "gslb_domain name", |n| {
                wildcard_or(n, domain_name)
            })?;
            let owner = format!("gslb_domain {name:?}");
            let err = |reason: String| self.error(rd.name.span(), format!("{owner}: {reason}"));
            if let Some(first) = names.first(name.clone(), self.line(rd.name.span())) {
                return Err(err(format!("defined twice (first on line {first})")));
            }
            let Some(z) = zones
                .iter()
                .enumerate()
                .filter(|(_, z)| z.contains(&name))
                .max_by_key(|(_, z)| z.name.len())
                .map(|(i, _)| i)
            else {
                let apexes: Vec<&str> = zones.iter().map(|z| z.name.as_str()).collect();
                return Err(err(if apexes.is_empty() {
                    "not inside any zone (no [[zone]] is defined)".into()
                } else {
                    format!("not inside any zone (zones: {})", apexes.join(", "))
                }));
            };
            let zone = &zones[z].name;
            // The domain answers A and AAAA at its name; the zone's other types there (MX,
            // TXT, CAA; SOA and NS at the apex) are answered beside them.
            if let Some((at, rtype)) = facts[z].addresses.get(&name) {
                return Err(err(if *rtype == "CNAME" {
                    format!(
                        "zone {zone:?} has a CNAME of this name ({at}); a CNAME must be \
                         the only record at its name"
                    )
                } else {
                    format!(
                        "zone {zone:?} has a static {rtype} record of this name ({at}); \
                         the GSLB domain answers A and AAAA at its name (other types may be static)"
                    )
                }));
            }
            let record_type = rd
                .record_type
                .as_ref()
                .map_or(RecordType::A, |t| *t.get_ref());
            if record_type == RecordType::Cname {
                let cname_err = |reason: String| {
                    let span = rd
                        .record_type
                        .as_ref()
                        .map_or(rd.name.span(), Spanned::span);
                    self.error(span, format!("{owner}: {reason}"))
                };
                if name == *zone {
                    return Err(cname_err(format!(
                        "a CNAME domain cannot be the apex of zone {zone:?}, which has SOA and \
                         NS records there (RFC 1034 §3.6.2)"
                    )));
                }
                if let Some((at, rtype)) = facts[z].owners.get(&name) {
                    return Err(cname_err(format!(
                        "zone {zone:?} has a static {rtype} record of this name ({at}); a CNAME \
                         must be the only record at its name (RFC 1034 §3.6.2)"
                    )));
                }
                if let Some(b) = &rd.backup_ip {
                    return Err(self.error(
                        b.span(),
                        format!("{owner}: a CNAME domain answers names; backup_ip addresses would never be answered (give it a backup_domain of record_type \"CNAME\" instead)"),
                    ));
                }
                if let Some(a) = rd
                    .answer
                    .as_ref()
                    .filter(|a| *a.get_ref() == AnswerMode::All)
                {
                    return Err(self.error(
                        a.span(),
                        format!("{owner}: a CNAME answer carries one name (RFC 1034 §3.6.2), so answer = \"all\" cannot act"),
                    ));
                }
                if let Some(m) = rd.max_answers.as_ref().filter(|m| *m.get_ref() != 1) {
                    return Err(self.error(
                        m.span(),
                        format!("{owner}: a CNAME answer carries one name (RFC 1034 §3.6.2); max_answers {} cannot act, leave it at 1", m.get_ref()),
                    ));
                }
            }
            if let Some((cut, at)) = facts[z].delegation_of(&name) {
                return Err(err(format!(
                    "at or below the delegation of {cut} (NS on {at}); it is not ours to answer"
                )));
            }

            let ttl = self.ttl(&owner, rd.ttl, DEFAULT_GSLB_TTL)?;
            let bound =
                self.bound_services(&owner, record_type, rd.services, &service_names, &by_name)?;

            let (backup_ip, down_response) =
                self.down_response(&owner, rd.backup_ip, rd.down_response)?;

            let mut seen = Seen::new();
            let mut domain_views = Vec::new();
            for dv in rd.views {
                let view = dv.view.get_ref();
                let err = |reason: String| self.error(dv.view.span(), format!("{owner}: {reason}"));
                if view.eq_ignore_ascii_case(DEFAULT_VIEW) {
                    return Err(err(format!(
                        "view {view:?} is implicit; its services are the domain's own services"
                    )));
                }
                if !view_names.contains(view) {
                    return Err(err(view_names.unknown(view)));
                }
                if let Some(first) = seen.first(view.clone(), self.line(dv.view.span())) {
                    return Err(err(format!(
                        "view {view:?} listed twice (first on line {first})"
                    )));
                }
                let bound = self.bound_services(
                    &format!("{owner}, view {view:?}"),
                    record_type,
                    dv.services,
                    &service_names,
                    &by_name,
                )?;
                domain_views.push((dv.view.into_inner(), bound));
            }

            let lb_raw = RawLb {
                name: &rd.name,
                method: &rd.method,
                alternate: &rd.alternate,
                fallback: &rd.fallback,
                tolerance_ms: &rd.tolerance_ms,
                sourceip_mask: &rd.sourceip_mask,
                persistence: &rd.persistence,
            };
            let lb = self.lb_settings(&owner, lb_raw, &bound, &by_name, topology)?;
            let answer = rd
                .answer
                .as_ref()
                .map_or(AnswerMode::default(), |a| *a.get_ref());
            if let (Some(p), AnswerMode::All) = (&rd.persistence, answer) {
                return Err(self.error(
                    p.span(),
                    format!(
                        "{owner}: persistence keeps a client on one service, and answer = \"all\" \
                         gives every service in every answer: use one or the other"
                    ),
                ));
            }
            // A method that picks one service per answer, first in the chain (where it always
            // decides), would never let answer = "all" act. Later in a chain they are fine: the
            // earlier methods' candidate sets are answered whole.
            if answer == AnswerMode::All
                && let Some(m) = rd.method.as_ref().filter(|m| {
                    matches!(
                        m.get_ref(),
                        Method::Ratio | Method::SourceIpHash | Method::GlobalAvailability
                    )
                })
            {
                let why = match m.get_ref() {
                    Method::Ratio => "hands out services in proportion to their weights",
                    Method::SourceIpHash => "gives each client prefix one service",
                    _ => "answers the first available service only",
                };
                return Err(self.error(
                    m.span(),
                    format!(
                        "{owner}: {} {why}, and answer = \"all\" gives every service in every \
                         answer: use one or the other",
                        m.get_ref().name()
                    ),
                ));
            }
            let max_answers = self.max_answers(&owner, answer, rd.max_answers, &lb)?;
            if let Some(b) = rd.backup_domain {
                backups.push((domains.len(), b));
            }
            domains.push(GslbDomain {
                name,
                record_type,
                ttl,
                answer,
                max_answers,
                services: bound,
                backup_ip,
                down_response,
                views: domain_views,
                method: lb.method,
                alternate: lb.alternate,
                fallback: lb.fallback,
                tolerance_ms: lb.tolerance_ms,
                sourceip_mask: lb.sourceip_mask,
                persistence: lb.persistence,
                backup_domain: None,
            });
        }
        self.backup_domains(&mut domains, &backups)?;
        Ok(domains)
    }

    /// Resolves each domain's backup domain: it exists, is another domain, and following
    /// backups never comes back (a down domain would loop).
    fn backup_domains(
        &self,
        domains: &mut [GslbDomain],
        backups: &[(usize, Str)],
    ) -> Result<(), ConfigError> {
        let names = Names::new("gslb_domain", domains.iter().map(|d| d.name.as_str()));
        let mut next: HashMap<usize, usize> = HashMap::new();
        for (i, raw) in backups {
            let owner = format!("gslb_domain {:?}", domains[*i].name);
            let written = raw.get_ref();
            let target = written.strip_suffix('.').unwrap_or(written);
            let Some(b) = domains
                .iter()
                .position(|d| d.name.eq_ignore_ascii_case(target))
            else {
                return Err(self.error(
                    raw.span(),
                    format!("{owner}: backup_domain: {}", names.unknown(written)),
                ));
            };
            if b == *i {
                return Err(self.error(
                    raw.span(),
                    format!("{owner}: backup_domain is the domain itself"),
                ));
            }
            let (mine, theirs) = (domains[*i].record_type, domains[b].record_type);
            if mine != theirs {
                let kind = |t| match t {
                    RecordType::A => "addresses (record_type \"A\")",
                    RecordType::Cname => "a name (record_type \"CNAME\")",
                };
                return Err(self.error(
                    raw.span(),
                    format!(
                        "{owner}: backup_domain {:?} answers {}, this domain {}; a backup \
                         answers in its stead, so both answer alike",
                        domains[b].name,
                        kind(theirs),
                        kind(mine)
                    ),
                ));
            }
            next.insert(*i, b);
        }
        for (i, raw) in backups {
            let mut path = vec![domains[*i].name.as_str()];
            let mut at = next[i];
            while let Some(&n) = next.get(&at) {
                path.push(domains[at].name.as_str());
                if n == *i {
                    path.push(domains[*i].name.as_str());
                    return Err(self.error(
                        raw.span(),
                        format!(
                            "gslb_domain {:?}: backup domains form a cycle ({})",
                            domains[*i].name,
                            path.join(" → ")
                        ),
                    ));
                }
                if path.len() > domains.len() {
                    break; // a cycle further on, reported from one of its own members
                }
                at = n;
            }
        }
        for (i, b) in next {
            domains[i].backup_domain = Some(domains[b].name.clone());
        }
        Ok(())
    }

    /// A GSLB domain's backup addresses, and what it answers when every service is down.
    fn down_response(
        &self,
        owner: &str,
        backup: Option<List>,
        response: Option<Spanned<DownResponse>>,
    ) -> Result<(Vec<IpAddr>, DownResponse), ConfigError> {
        let mut backup_ip = Vec::new();
        let mut backup_span = None;
        if let Some(list) = backup {
            backup_span = Some(list.span());
            let mut seen = Seen::new();
            let mut per_family = [0; 2];
            for s in list.get_ref() {
                let ip = self.ip(owner, "backup_ip", s)?;
                if let Some(first) = seen.first(ip, self.line(s.span())) {
                    return Err(self.error(
                        s.span(),
                        format!("{owner}: backup_ip {ip} listed twice (first on line {first})"),
                    ));
                }
                let count = &mut per_family[usize::from(ip.is_ipv6())];
                *count += 1;
                if *count > MAX_ADDRS {
                    return Err(self.error(
                        s.span(),
                        format!(
                            "{owner}: more than {MAX_ADDRS} {} backup_ip addresses",
                            family(ip)
                        ),
                    ));
                }
                backup_ip.push(ip);
            }
        }
        let response = match response {
            None if backup_ip.is_empty() => DownResponse::Nodata,
            None => DownResponse::Backup,
            Some(r) => match (*r.get_ref(), backup_span) {
                (DownResponse::Backup, _) if backup_ip.is_empty() => {
                    return Err(self.error(
                        r.span(),
                        format!("{owner}: down_response \"backup\" needs backup_ip addresses"),
                    ));
                }
                (DownResponse::Nodata, Some(span)) if !backup_ip.is_empty() => {
                    return Err(self.error(
                        span,
                        format!(
                            "{owner}: backup_ip is never answered with down_response \"nodata\" \
                             (line {}); remove one of them",
                            self.line(r.span())
                        ),
                    ));
                }
                (response, _) => response,
            },
        };
        Ok((backup_ip, response))
    }

    /// `max_answers`, refused where it could never carry more than one address: persistence
    /// keeps a client on one service, and global availability alone picks one.
    fn max_answers(
        &self,
        owner: &str,
        answer: AnswerMode,
        raw: Option<Int>,
        lb: &LbSettings,
    ) -> Result<u16, ConfigError> {
        let default = match answer {
            AnswerMode::Rotate => 1,
            AnswerMode::All => DEFAULT_MAX_ANSWERS_ALL,
        };
        let range = 1..=i64::from(MAX_ANSWERS);
        let span = raw.as_ref().map(Int::span);
        let max = self.int(owner, "max_answers", raw, range, default)?;
        let Some(span) = span.filter(|_| max > 1) else {
            return Ok(max);
        };
        let why = if lb.persistence.is_some() {
            Some("persistence keeps a client on one service".to_string())
        } else if lb.method == Method::GlobalAvailability
            && lb.alternate.is_none()
            && lb.fallback.is_none()
        {
            Some("globalavailability alone answers the first available service only".to_string())
        } else {
            None
        };
        match why {
            Some(why) => Err(self.error(
                span,
                format!("{owner}: max_answers {max} never acts: {why}; leave it at 1"),
            )),
            None => Ok(max),
        }
    }

    /// The services bound to a GSLB domain (or one of its views).
    fn bound_services(
        &self,
        owner: &str,
        record_type: RecordType,
        raw: List,
        names: &Names,
        by_name: &HashMap<&str, &Service>,
    ) -> Result<Vec<String>, ConfigError> {
        if raw.get_ref().is_empty() {
            return Err(self.error(
                raw.span(),
                format!("{owner}: services is empty; bind at least one [[service]]"),
            ));
        }
        let mut seen = Seen::new();
        let mut out = Vec::new();
        for s in raw.into_inner() {
            let name = s.get_ref();
            let err = |reason: String| self.error(s.span(), format!("{owner}: {reason}"));
            let Some(service) = by_name.get(name.as_str()) else {
                return Err(err(names.unknown(name)));
            };
            match (record_type, &service.cname) {
                (RecordType::A, Some(cname)) => {
                    return Err(err(format!(
                        "service {name:?} answers the name {cname} (cname): bind it to a \
                         gslb_domain with record_type = \"CNAME\""
                    )));
                }
                (RecordType::Cname, None) => {
                    return Err(err(format!(
                        "service {name:?} answers an address ({}); a record_type = \"CNAME\" \
                         domain answers names: give the service a cname",
                        service.answer_ip()
                    )));
                }
                _ => {}
            }
            if let Some(first) = seen.first(name.clone(), self.line(s.span())) {
                return Err(err(format!(
                    "service {name:?} listed twice (first on line {first})"
                )));
            }
            out.push(s.into_inner());
        }
        Ok(out)
    }
}
