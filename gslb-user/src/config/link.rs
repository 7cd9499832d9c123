//! `[[link]]`: inbound links whose load moves answers away (F5 link bandwidth).

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::time::Duration;

use serde::Deserialize;

use super::Config;
use super::error::ConfigError;
use super::names::{Names, Seen};
use super::service::Service;
use super::validate::{Int, List, Str, Validator};

/// `[[link]]` threshold_kbps: up to 10 Tbit/s (the byte rate, ×125, stays far from overflow).
const LINK_THRESHOLD_RANGE: RangeInclusive<i64> = 1..=10_000_000_000;
/// `[[link]]` interval_ms: at least 10 ms (each sample reads a sysfs file), at most an hour.
const LINK_INTERVAL_RANGE: RangeInclusive<i64> = 10..=3_600_000;
const DEFAULT_LINK_INTERVAL_MS: u64 = 1000;
/// `[[link]]` over_after and under_after: one burst or one quiet second moves nothing.
const DEFAULT_LINK_SAMPLES: u32 = 3;

/// `[[link]]`: an inbound link of this server's site (spec §5, F5 link bandwidth). Its
/// interface's inbound rate is sampled from the kernel's counters; while it is over the
/// threshold, its services take no new clients (spillover), so answers shift to services on
/// other links, and when every candidate is over they answer anyway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Unique; letters, digits, '-', '_' and '.', starting with a letter, digit or '_'.
    pub name: String,
    /// The interface of this host whose inbound bytes are counted (a valid name; one link per
    /// interface).
    pub interface: String,
    /// Inbound kilobits per second above which the link is over (≥ 1).
    pub threshold_kbps: u64,
    /// Time between samples (default 1 s).
    pub interval: Duration,
    /// Samples over the threshold in a row that make the link over (default 3).
    pub over_after: u32,
    /// Samples at or under it in a row that make it normal again (default 3).
    pub under_after: u32,
    /// The services whose answers travel over it: existing, none twice, none on another link,
    /// at `server.site` when that is set (this host measures only its own links); non-empty.
    pub services: Vec<String>,
}

impl Config {
    /// The link `service` is on, if any.
    pub fn link_of(&self, service: &str) -> Option<&Link> {
        self.links
            .iter()
            .find(|l| l.services.iter().any(|s| s == service))
    }
}

/// `[[link]]`. Times in milliseconds.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLink {
    pub(super) name: Str,
    pub(super) interface: Str,
    pub(super) threshold_kbps: Int,
    pub(super) interval_ms: Option<Int>,
    pub(super) over_after: Option<Int>,
    pub(super) under_after: Option<Int>,
    pub(super) services: List,
}

impl Validator<'_> {
    /// `[[link]]`s: see [`Link`] for the rules.
    pub(super) fn links(
        &self,
        raw: Vec<RawLink>,
        services: &[Service],
        local_site: Option<&str>,
    ) -> Result<Vec<Link>, ConfigError> {
        let service_names = Names::new("service", services.iter().map(|s| s.name.as_str()));
        let mut names = Seen::new();
        let mut interfaces: HashMap<String, (String, usize)> = HashMap::new();
        // Service → (its link, line).
        let mut carried: HashMap<String, (String, usize)> = HashMap::new();
        let mut out = Vec::new();
        for rl in raw {
            let name = self.object_name("link", &rl.name, &mut names)?;
            let owner = format!("link {name:?}");
            let interface = rl.interface.get_ref();
            if !crate::health::link::valid_interface_name(interface) {
                return Err(self.error(
                    rl.interface.span(),
                    format!("{owner}: interface {interface:?} is not a valid interface name"),
                ));
            }
            if let Some((other, line)) = interfaces.get(interface) {
                return Err(self.error(
                    rl.interface.span(),
                    format!(
                        "{owner}: interface {interface:?} is already link {other:?} (line {line})"
                    ),
                ));
            }
            interfaces.insert(interface.clone(), (name.clone(), self.line(rl.name.span())));
            let threshold_kbps = self.int(
                &owner,
                "threshold_kbps",
                Some(rl.threshold_kbps),
                LINK_THRESHOLD_RANGE,
                0,
            )?;
            let interval = Duration::from_millis(self.int(
                &owner,
                "interval_ms",
                rl.interval_ms,
                LINK_INTERVAL_RANGE,
                DEFAULT_LINK_INTERVAL_MS,
            )?);
            let over_after = self.int(
                &owner,
                "over_after",
                rl.over_after,
                1..=100,
                DEFAULT_LINK_SAMPLES,
            )?;
            let under_after = self.int(
                &owner,
                "under_after",
                rl.under_after,
                1..=100,
                DEFAULT_LINK_SAMPLES,
            )?;
            if rl.services.get_ref().is_empty() {
                return Err(self.error(
                    rl.services.span(),
                    format!("{owner}: services is empty; list the services whose answers travel over this link"),
                ));
            }
            let mut bound = Vec::new();
            for s in rl.services.get_ref() {
                let service = s.get_ref();
                let err = |reason: String| Err(self.error(s.span(), format!("{owner}: {reason}")));
                let Some(spec) = services.iter().find(|x| &x.name == service) else {
                    return err(service_names.unknown(service));
                };
                if bound.contains(service) {
                    return err(format!("service {service:?} listed twice"));
                }
                if let Some((other, line)) = carried.get(service) {
                    return err(format!(
                        "service {service:?} is already on link {other:?} (line {line}); a service is on one link at most"
                    ));
                }
                // This server samples its own interfaces only: another site's service does not
                // travel over them.
                if let Some(here) = local_site
                    && spec.site != here
                {
                    return err(format!(
                        "service {service:?} is at site {:?}, but this server (server.site) is {here:?}: a link is measured here, so only this site's services can be on it",
                        spec.site
                    ));
                }
                carried.insert(service.clone(), (name.clone(), self.line(s.span())));
                bound.push(service.clone());
            }
            out.push(Link {
                name,
                interface: rl.interface.into_inner(),
                threshold_kbps,
                interval,
                over_after,
                under_after,
                services: bound,
            });
        }
        Ok(out)
    }
}
