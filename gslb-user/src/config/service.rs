//! `[[service]]`: GSLB services, the answer candidates.

use std::collections::HashMap;
use std::net::IpAddr;
use std::ops::RangeInclusive;

use serde::Deserialize;

use super::error::ConfigError;
use super::names::{Names, Seen, host_name};
use super::site::Site;
use super::validate::{Int, LIMIT_RANGE, List, PORT_RANGE, Str, Validator};
use crate::location::Location;

const DEFAULT_SERVICE_PORT: u16 = 80;
const DEFAULT_WEIGHT: u32 = 1;
const WEIGHT_RANGE: RangeInclusive<i64> = 1..=100;

/// `[[service]]`: a GSLB service, one answer candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// Unique; letters, digits, '-', '_' and '.', starting with a letter, digit or '_'.
    pub name: String,
    /// The address monitors and metrics use; (`ip`, `port`) is unique among services. For a
    /// service with `cname`, the address that name stands for, which its monitors probe.
    pub ip: IpAddr,
    /// 1..=65535.
    pub port: u16,
    /// The [`Site`] it belongs to (exists).
    pub site: String,
    /// Parsed once at load from dotted qualifiers (`Europe.UK.London`, quoted qualifiers
    /// allowed; see [`crate::location::parse_location`]).
    pub location: Option<Location>,
    /// 1..=100.
    pub weight: u32,
    /// The address DNS answers carry when the service sits behind NAT; same family as `ip`.
    /// Never with `cname`.
    pub public_ip: Option<IpAddr>,
    /// NetScaler `-cnameEntry`: the service answers with this name (lower-case, without the
    /// trailing dot; at least two labels) instead of an address, and only a `record_type =
    /// "CNAME"` domain binds it.
    pub cname: Option<String>,
    /// Spillover: at this many connections the service takes no new clients (≥ 1).
    pub max_connections: Option<u64>,
    /// Spillover: at this bandwidth (kbit/s) the service takes no new clients (≥ 1).
    pub max_bandwidth_kbps: Option<u64>,
    /// Health monitors bound to it (`[[monitor]]` names); none: always up.
    pub monitors: Vec<String>,
    /// Load monitors bound to it (`[[monitor]]`s of type "load"), at most one per measure;
    /// they run at the service's site (config/load.rs).
    pub load_monitors: Vec<String>,
    /// NetScaler monThreshold: UP when the weights of its UP monitors add up to this; 0 means
    /// every monitor must be UP.
    pub monitor_threshold: u32,
}

impl Service {
    /// The address a DNS answer carries: the public IP if set, else the IP.
    pub fn answer_ip(&self) -> IpAddr {
        self.public_ip.unwrap_or(self.ip)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawService {
    pub(super) name: Str,
    pub(super) ip: Str,
    pub(super) port: Option<Int>,
    pub(super) site: Str,
    pub(super) location: Option<Str>,
    pub(super) weight: Option<Int>,
    pub(super) public_ip: Option<Str>,
    pub(super) cname: Option<Str>,
    pub(super) max_connections: Option<Int>,
    pub(super) max_bandwidth_kbps: Option<Int>,
    pub(super) monitors: Option<List>,
    pub(super) monitor_threshold: Option<Int>,
    pub(super) load_monitors: Option<List>,
}

impl Validator<'_> {
    pub(super) fn services(
        &self,
        raw: Vec<RawService>,
        sites: &[Site],
        monitors: &[crate::health::MonitorSpec],
    ) -> Result<Vec<Service>, ConfigError> {
        let monitor_names = Names::new("monitor", monitors.iter().map(|m| m.name.as_str()));
        let site_names = Names::new("site", sites.iter().map(|s| s.name.as_str()));
        let mut names = Seen::new();
        let mut endpoints: HashMap<(IpAddr, u16), (String, usize)> = HashMap::new();
        let mut services = Vec::new();
        for rs in raw {
            let name = self.object_name("service", &rs.name, &mut names)?;
            let owner = format!("service {name:?}");
            let ip = self.ip(&owner, "ip", &rs.ip)?;
            let port_span = rs.port.as_ref().map_or(rs.ip.span(), toml::Spanned::span);
            let port = self.int(&owner, "port", rs.port, PORT_RANGE, DEFAULT_SERVICE_PORT)?;
            if let Some((other, line)) = endpoints.get(&(ip, port)) {
                return Err(self.error(
                    port_span,
                    format!("{owner}: {ip} port {port} is already service {other:?} (line {line})"),
                ));
            }
            endpoints.insert((ip, port), (name.clone(), self.line(rs.name.span())));
            if !site_names.contains(rs.site.get_ref()) {
                return Err(self.error(
                    rs.site.span(),
                    format!("{owner}: {}", site_names.unknown(rs.site.get_ref())),
                ));
            }
            let location = rs
                .location
                .as_ref()
                .map(|l| {
                    Location::parse(l.get_ref()).map_err(|reason| {
                        self.error(
                            l.span(),
                            format!("{owner}: location {:?}: {reason}", l.get_ref()),
                        )
                    })
                })
                .transpose()?;
            let weight = self.int(&owner, "weight", rs.weight, WEIGHT_RANGE, DEFAULT_WEIGHT)?;
            let public_span = rs.public_ip.as_ref().map(toml::Spanned::span);
            let public_ip = self.public_ip(&owner, ip, rs.public_ip)?;
            let cname = rs
                .cname
                .as_ref()
                .map(|c| self.dns_name(c, &format!("{owner}: cname"), host_name))
                .transpose()?;
            if let (Some(c), Some(p)) = (&rs.cname, public_ip) {
                return Err(self.error(
                    c.span(),
                    format!(
                        "{owner}: a service with cname answers that name, never an address: \
                         public_ip {p} (line {}) would never be answered; remove one of them",
                        self.line(public_span.unwrap_or(c.span()))
                    ),
                ));
            }
            let max_connections = rs
                .max_connections
                .map(|m| self.int(&owner, "max_connections", Some(m), LIMIT_RANGE, 0))
                .transpose()?;
            let max_bandwidth_kbps = rs
                .max_bandwidth_kbps
                .map(|m| self.int(&owner, "max_bandwidth_kbps", Some(m), LIMIT_RANGE, 0))
                .transpose()?;
            let mut bound = Vec::new();
            if let Some(list) = &rs.monitors {
                for m in list.get_ref() {
                    if !monitor_names.contains(m.get_ref()) {
                        return Err(self.error(
                            m.span(),
                            format!("{owner}: {}", monitor_names.unknown(m.get_ref())),
                        ));
                    }
                    if bound.contains(m.get_ref()) {
                        return Err(self.error(
                            m.span(),
                            format!("{owner}: monitor {:?} bound twice", m.get_ref()),
                        ));
                    }
                    bound.push(m.get_ref().clone());
                }
            }
            let weights: u32 = monitors
                .iter()
                .filter(|m| bound.contains(&m.name))
                .map(|m| m.weight)
                .sum();
            let threshold_span = rs.monitor_threshold.as_ref().map(toml::Spanned::span);
            let monitor_threshold = self.int(
                &owner,
                "monitor_threshold",
                rs.monitor_threshold,
                0..=1_000_000,
                0,
            )?;
            if monitor_threshold > weights {
                return Err(self.error(
                    threshold_span.expect("a threshold above 0 was written"),
                    format!("{owner}: monitor_threshold {monitor_threshold} is more than the {weights} its monitors' weights add up to: it could never be UP"),
                ));
            }
            services.push(Service {
                monitors: bound,
                monitor_threshold,
                // Bound by `load_bindings`, checked before.
                load_monitors: Vec::new(),
                name,
                ip,
                port,
                site: rs.site.into_inner(),
                location,
                weight,
                public_ip,
                cname,
                max_connections,
                max_bandwidth_kbps,
            });
        }
        Ok(services)
    }
}
