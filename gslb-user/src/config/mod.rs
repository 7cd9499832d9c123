//! Configuration file: TOML → validated, typed [`Config`].
//!
//! Loading is two-staged. serde deserializes the text into private `Raw*` mirrors
//! that keep byte spans ([`toml::Spanned`]) on every value a semantic check may
//! reject; [`Validator`] then checks and converts them. That way every error,
//! syntactic or semantic, names `file:line:column` of the offending value.
//!
//! Sections, in NetScaler / BIG-IP DNS vocabulary (`examples/` has a commented file per feature):
//! `[server]`, `[[view]]` (static client-prefix views), `[[zone]]` (authoritative zones with SOA,
//! NS and static records), `[[site]]` (GSLB sites), `[[service]]` (GSLB services, the answer
//! candidates), `[[gslb_domain]]` (names answered from services, with their load-balancing
//! method chain), `[[topology]]` (BIG-IP DNS topology records), `[[action]]` and `[[policy]]`
//! (NetScaler DNS actions with preferred locations, and the policies that apply them) and
//! `[engine]` (decision-engine settings), `[[link]]` (inbound links whose load moves answers
//! away, F5 link bandwidth). The semantics are those of [`crate::policy`].
//!
//! One file per section holds its raw form, its typed form and its checks (a `Validator`
//! method); [`validate`] has the checks every section shares (spans, ranges, addresses) and
//! [`names`] the DNS and object names. This file holds [`Config`] and orders the sections.
//! To add a section: a `Raw*` struct and a field in [`RawConfig`], a typed struct and a field in
//! [`Config`], and a `Validator` method in the section's file, called from `Validator::config`.

mod admin;
mod clients;
mod dns_policy;
mod engine;
mod error;
mod gslb_domain;
mod identity;
mod lb;
mod link;
mod load;
mod locations;
mod mep;
mod model;
mod monitor;
mod names;
mod record;
mod rtt;
mod server;
mod service;
mod site;
#[cfg(test)]
mod tests;
mod topology;
mod validate;
mod view;
mod zone;
mod zone_file;

use std::ops::Range;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use self::dns_policy::{RawAction, RawPolicy};
use self::engine::RawEngine;
use self::gslb_domain::RawGslbDomain;
use self::link::RawLink;
use self::locations::{RawCustomLocation, RawLocationFiles};
use self::mep::RawMep;
use self::monitor::RawMonitor;
use self::names::Names;
use self::rtt::RawRtt;
use self::server::RawServer;
use self::service::RawService;
use self::site::{RawSite, SiteSpans};
use self::topology::RawTopology;
use self::validate::Validator;
use self::view::RawView;
use self::zone::RawZone;
use crate::location::LocationSources;

pub use self::dns_policy::{DnsAction, DnsPolicy};
pub use self::engine::EngineSettings;
pub use self::error::ConfigError;
pub use self::gslb_domain::GslbDomain;
pub use self::link::Link;
pub use self::mep::{MepSettings, MepTlsFiles, Secret};
pub use self::record::{MAX_TXT_STRING, RecordData, StaticRecord};
pub use self::rtt::RttSettings;
pub use self::server::{DEFAULT_STALE_AFTER_S, DEFAULT_STATE_FILE, Server};
pub use self::service::Service;
pub use self::site::Site;
pub use self::topology::TopologyRecordConfig;
pub use self::view::View;
pub use self::zone::{Soa, Zone};
pub use self::zone_file::InputFile;
/// The responder's settings, named here too for `compile::Inputs` until it takes the model.
pub use admin::AdminSettings;

/// Most addresses per family in one answer set; keeps "all" responses small
/// enough for the XDP fast path to build in place.
pub const MAX_ADDRS: usize = gslb_common::MAX_ADDRS;

/// The whole validated configuration. Every name a section refers to (a service's site, a
/// domain's services and views) exists, so the lookups below only return `None` for names
/// that come from outside the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub server: Server,
    /// Static client-prefix views, in file order.
    pub views: Vec<View>,
    /// Authoritative zones, in file order; no zone is inside another.
    pub zones: Vec<Zone>,
    /// GSLB sites, in file order.
    pub sites: Vec<Site>,
    /// GSLB services, in file order.
    pub services: Vec<Service>,
    /// GSLB domains, in file order; each is inside one of `zones`.
    pub gslb_domains: Vec<GslbDomain>,
    /// Topology records, in file order.
    pub topology: Vec<TopologyRecordConfig>,
    /// DNS actions, in file order.
    pub actions: Vec<DnsAction>,
    /// DNS policies, in file order (evaluation follows `priority`).
    pub policies: Vec<DnsPolicy>,
    pub engine: EngineSettings,
    pub locations: LocationSources,
    /// `[[monitor]]`s, by name.
    pub monitors: Vec<crate::health::MonitorSpec>,
    /// `[[monitor]]`s of type "load", by name (names are unique across both lists).
    pub load_monitors: Vec<crate::health::load::LoadMonitorSpec>,
    pub rtt: RttSettings,
    /// `[mep]`, when the section is written.
    pub mep: Option<MepSettings>,
    /// `[[link]]`s, in file order.
    pub links: Vec<Link>,
    /// `[rrl]`: response rate limiting (off without the section).
    pub rrl: crate::model::RrlSettings,
    /// `[admin]`: the HTTP metrics and status endpoint (none without the section).
    pub admin: Option<AdminSettings>,
    /// The zone files read (and the files they include), as they were when read: a change
    /// to one reloads the configuration.
    pub zone_files: Vec<InputFile>,
}

impl Config {
    /// The service called `name` (names are case-sensitive).
    pub fn service(&self, name: &str) -> Option<&Service> {
        self.services.iter().find(|s| s.name == name)
    }

    /// The site called `name` (names are case-sensitive).
    pub fn site(&self, name: &str) -> Option<&Site> {
        self.sites.iter().find(|s| s.name == name)
    }

    /// The GSLB domain `name` (case-insensitive, trailing dot optional).
    pub fn gslb_domain(&self, name: &str) -> Option<&GslbDomain> {
        let name = name.strip_suffix('.').unwrap_or(name);
        self.gslb_domains
            .iter()
            .find(|d| d.name.eq_ignore_ascii_case(name))
    }

    /// The zone `name` belongs to: the one with the longest apex that is `name` or an ancestor
    /// of it (case-insensitive, trailing dot optional); `None` outside every zone.
    pub fn zone_of(&self, name: &str) -> Option<&Zone> {
        self.zones
            .iter()
            .filter(|z| z.contains(name))
            .max_by_key(|z| z.name.len())
    }
}

impl Config {
    /// Reads and validates the configuration file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            file: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Validates configuration `text`; `file` is only used to name it in errors.
    pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
        let v = Validator::new(text, file);
        let raw: RawConfig = toml::from_str(text).map_err(|e| v.toml_error(&e))?;
        v.config(raw)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    server: RawServer,
    #[serde(default, rename = "view")]
    views: Vec<RawView>,
    #[serde(default, rename = "zone")]
    zones: Vec<RawZone>,
    #[serde(default, rename = "site")]
    sites: Vec<RawSite>,
    #[serde(default, rename = "service")]
    services: Vec<RawService>,
    #[serde(default, rename = "gslb_domain")]
    gslb_domains: Vec<RawGslbDomain>,
    #[serde(default)]
    topology: Vec<RawTopology>,
    #[serde(default, rename = "action")]
    actions: Vec<RawAction>,
    #[serde(default, rename = "policy")]
    policies: Vec<RawPolicy>,
    #[serde(default)]
    engine: RawEngine,
    #[serde(default, rename = "locations")]
    location_files: RawLocationFiles,
    #[serde(default, rename = "location")]
    custom_locations: Vec<RawCustomLocation>,
    #[serde(default, rename = "monitor")]
    monitors: Vec<RawMonitor>,
    rtt: Option<Spanned<RawRtt>>,
    mep: Option<Spanned<RawMep>>,
    #[serde(default, rename = "link")]
    links: Vec<RawLink>,
    rrl: Option<Spanned<clients::RawRrl>>,
    admin: Option<Spanned<admin::RawAdmin>>,
    /// The schema before zones and services; only read to say what replaced it.
    #[serde(rename = "domain")]
    old_domain: Option<Spanned<toml::Value>>,
}

impl Validator<'_> {
    fn config(&self, raw: RawConfig) -> Result<Config, ConfigError> {
        if let Some(old) = raw.old_domain {
            return Err(self.error(
                old.span(),
                "[[domain]] is no longer supported: declare the addresses as [[service]]s at a \
                 [[site]] and bind them to a [[gslb_domain]] inside a [[zone]] (see examples/)",
            ));
        }
        let site_span = raw.server.site.as_ref().map(Spanned::span);
        let server = self.server(raw.server)?;
        let views = self.views(raw.views)?;
        let zone::Zones {
            zones,
            facts,
            files: zone_files,
        } = self.zones(raw.zones)?;
        let site_spans: Vec<SiteSpans> = raw.sites.iter().map(SiteSpans::of).collect();
        let mep_written = raw.mep.is_some()
            || raw
                .sites
                .iter()
                .any(|s| s.role.is_some() || s.parent.is_some() || s.backup_parents.is_some());
        // The first MEP-only setting of each site, if any: (site, key, where).
        let mep_only: Vec<(String, &'static str, Range<usize>)> = raw
            .sites
            .iter()
            .filter_map(|s| {
                let written = [
                    ("role", s.role.as_ref().map(Spanned::span)),
                    ("parent", s.parent.as_ref().map(Spanned::span)),
                    (
                        "backup_parents",
                        s.backup_parents.as_ref().map(Spanned::span),
                    ),
                    ("public_ip", s.public_ip.as_ref().map(Spanned::span)),
                    ("mep_port", s.mep_port.as_ref().map(Spanned::span)),
                    ("key", s.key.as_ref().map(Spanned::span)),
                    ("key_file", s.key_file.as_ref().map(Spanned::span)),
                    ("nat", s.nat.as_ref().map(Spanned::span)),
                ];
                written
                    .into_iter()
                    .find_map(|(key, span)| span.map(|span| (key, span)))
                    .map(|(key, span)| (s.name.get_ref().clone(), key, span))
            })
            .collect();
        let sites = self.sites(raw.sites)?;
        if let (Some(site), Some(span)) = (&server.site, site_span)
            && !sites.iter().any(|s| &s.name == site)
        {
            let names = Names::new("site", sites.iter().map(|s| s.name.as_str()));
            return Err(self.error(span, format!("server.site: {}", names.unknown(site))));
        }
        let monitor_weights: Vec<(String, Range<usize>)> = raw
            .monitors
            .iter()
            .filter_map(|m| {
                m.weight
                    .as_ref()
                    .map(|w| (m.name.get_ref().clone(), w.span()))
            })
            .collect();
        let (monitors, load_monitors) = self.monitors(raw.monitors)?;
        let load_spans = load::LoadSpans::of(&raw.services, &raw.gslb_domains);
        let load_bound = self.load_bindings(&raw.services, &monitors, &load_monitors)?;
        let mut services = self.services(raw.services, &sites, &monitors)?;
        for (service, bound) in services.iter_mut().zip(load_bound) {
            service.load_monitors = bound;
        }
        // A monitor's weight only counts toward a service's monitor_threshold.
        if let Some((name, span)) = monitor_weights.into_iter().find(|(name, _)| {
            !services
                .iter()
                .any(|s| s.monitor_threshold > 0 && s.monitors.contains(name))
        }) {
            return Err(self.error(
                span,
                format!(
                    "monitor {name:?}: weight only counts toward a service's monitor_threshold, \
                     and no service binding it sets one (without, every monitor must be UP)"
                ),
            ));
        }
        let topology = self.topology(raw.topology, &sites)?;
        let gslb_domains = self.gslb_domains(
            raw.gslb_domains,
            &zones,
            &facts,
            &views,
            &services,
            &topology,
        )?;
        self.name_servers_have_addresses(&zones, &facts, &gslb_domains)?;
        let actions = self.actions(raw.actions)?;
        let policies = self.policies(raw.policies, &actions)?;
        let engine = EngineSettings {
            wildcard_mode: raw.engine.wildcard_mode,
        };
        let locations = self.locations(raw.location_files, raw.custom_locations)?;
        let rtt = self.rtt(raw.rtt, server.site.is_some())?;
        // Without MEP settings the sites are only answer locations: no topology limits apply.
        if mep_written {
            self.mep_topology(&sites, &site_spans)?;
        }
        let mep = self.mep(raw.mep, &server, &sites, &site_spans)?;
        // Roles, parents, backup lists, MEP ports and public addresses only act through MEP:
        // without it a "child" would answer GSLB queries like a parent. (`enabled = false`
        // keeps them, switched off on purpose: the site then runs standalone.)
        if mep.is_none()
            && let Some((site, key, span)) = mep_only.into_iter().next()
        {
            return Err(self.error(
                span,
                format!(
                    "site {site:?}: {key} is a metric exchange setting, and there is no [mep] \
                     section: configure [mep] (enabled = false to keep it off) or remove it"
                ),
            ));
        }
        let links = self.links(raw.links, &services, server.site.as_deref())?;
        self.load_sources(
            &load_spans,
            &server,
            mep.as_ref(),
            &services,
            &gslb_domains,
            &links,
            &load_monitors,
        )?;
        let rrl = self.rrl(raw.rrl)?;
        let admin = self.admin(raw.admin)?;
        Ok(Config {
            server,
            views,
            zones,
            sites,
            services,
            gslb_domains,
            topology,
            actions,
            policies,
            engine,
            locations,
            monitors,
            load_monitors,
            rtt,
            mep,
            links,
            rrl,
            admin,
            zone_files,
        })
    }
}
