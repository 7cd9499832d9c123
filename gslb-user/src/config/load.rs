//! The load side of the configuration: `[[monitor]] type = "load"`, `[[service]]
//! load_monitors`, and the rule that every setting that reads a service's load has a source
//! whose values reach this server.
//!
//! Where a load monitor runs: at its service's own site only, that is where `server.site` is
//! the service's site, or everywhere when `server.site` is not set (one site). Health monitors
//! run at every site that loads the configuration, because reachability is worth checking from
//! each; a load is one number of the backend, the same from anywhere, so one reader per service
//! is enough, every parent then decides on the same number, and the backend's metrics page need
//! only be open to its own site (as `[[link]]`s are measured only at their site). The other
//! sites take the value from MEP. So a load-based setting works when:
//! - the service has a load monitor of that measure (for bandwidth, a `[[link]]` carrying it
//!   counts too; another site's links are not in this file, so for another site's service MEP
//!   is taken to bring it), and
//! - the service is this site's, or `[mep]` is enabled to bring its value here.
//!
//! Otherwise the setting could never act, and the configuration is refused where the setting
//! is written: `max_connections`, `max_bandwidth_kbps`, or a `leastconnection` method
//! (`method`, `alternate` or `fallback`) of a domain one of whose services (of any view) has no
//! connection count.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::error::ConfigError;
use super::gslb_domain::{GslbDomain, RawGslbDomain};
use super::link::Link;
use super::mep::MepSettings;
use super::monitor::RawMonitor;
use super::server::Server;
use super::service::{RawService, Service};
use super::validate::{Int, PORT_RANGE, Str, Validator};
use crate::health::TlsCheck;
use crate::health::load::{Aggregate, LoadMonitorSpec, LoadSource, Measure, PromSelector};
use crate::policy::Method;

/// `unknown_after`: failed checks in a row before the last value is dropped.
const UNKNOWN_AFTER_RANGE: std::ops::RangeInclusive<i64> = 1..=100;
const DEFAULT_METRICS_PATH: &str = "/metrics";

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(super) enum RawLoadFormat {
    Prometheus,
    StubStatus,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(super) enum RawScheme {
    Http,
    Https,
}

/// Where a setting was written, if it was.
type At = Option<Range<usize>>;

/// Where the load-reading settings were written, taken before the sections are consumed.
pub(super) struct LoadSpans {
    /// By service, in file order: `max_connections`, `max_bandwidth_kbps`.
    services: Vec<(At, At)>,
    /// By domain, in file order: each `leastconnection` of its chain.
    least_connection: Vec<Vec<Range<usize>>>,
}

impl LoadSpans {
    pub(super) fn of(services: &[RawService], domains: &[RawGslbDomain]) -> LoadSpans {
        LoadSpans {
            services: services
                .iter()
                .map(|s| (at(&s.max_connections), at(&s.max_bandwidth_kbps)))
                .collect(),
            least_connection: domains
                .iter()
                .map(|d| {
                    [&d.method, &d.alternate, &d.fallback]
                        .into_iter()
                        .flatten()
                        .filter(|m| *m.get_ref() == Method::LeastConnection)
                        .map(Spanned::span)
                        .collect()
                })
                .collect(),
        }
    }
}

/// Where `value` was written, if it was.
// Callers pass `&raw.field` at some 35 sites; `&Option` keeps each of them short.
#[allow(clippy::ref_option)]
pub(super) fn at<T>(value: &Option<Spanned<T>>) -> At {
    value.as_ref().map(Spanned::span)
}

impl Validator<'_> {
    /// Refuses the first of `keys` that was written, saying `why` of it.
    fn not_here<'k>(
        &self,
        keys: impl IntoIterator<Item = (&'k str, At)>,
        why: impl Fn(&str) -> String,
    ) -> Result<(), ConfigError> {
        match keys.into_iter().find_map(|(k, s)| Some((k, s?))) {
            Some((key, span)) => Err(self.error(span, why(key))),
            None => Ok(()),
        }
    }

    /// A `[[monitor]]` of another type must not carry the load monitor's keys.
    pub(super) fn no_load_keys(&self, rm: &RawMonitor, owner: &str) -> Result<(), ConfigError> {
        let keys = [
            ("format", at(&rm.format)),
            ("metric", at(&rm.metric)),
            ("labels", at(&rm.labels)),
            ("aggregate", at(&rm.aggregate)),
            ("measure", at(&rm.measure)),
            ("scheme", at(&rm.scheme)),
            ("unknown_after", at(&rm.unknown_after)),
        ];
        self.not_here(keys, |key| {
            format!("{owner}: {key} applies to load monitors only")
        })
    }

    /// `[[monitor]] type = "load"`.
    pub(super) fn load_monitor(
        &self,
        rm: &RawMonitor,
        name: String,
    ) -> Result<LoadMonitorSpec, ConfigError> {
        let owner = format!("load monitor {name:?}");
        // Health settings and the other monitors' checks mean nothing here.
        let health = [
            ("fall", at(&rm.fall)),
            ("rise", at(&rm.rise)),
            ("weight", at(&rm.weight)),
        ];
        self.not_here(health, |key| {
            format!("{owner}: {key} applies to health monitors only (a load monitor does not decide health; unknown_after sets when its value ages out)")
        })?;
        let checks = [
            ("expect_status", at(&rm.expect_status)),
            ("body_contains", at(&rm.body_contains)),
            ("qname", at(&rm.qname)),
            ("qtype", at(&rm.qtype)),
            ("expect_rcode", at(&rm.expect_rcode)),
            ("expect_answer", at(&rm.expect_answer)),
        ];
        self.not_here(checks, |key| {
            format!("{owner}: {key} applies to health monitors only")
        })?;
        let Some(format) = &rm.format else {
            return Err(self.error(
                rm.kind.span(),
                format!("{owner}: a load monitor needs format = \"prometheus\" or \"stub_status\""),
            ));
        };
        let source = match format.get_ref() {
            RawLoadFormat::StubStatus => {
                let prometheus_only = [
                    ("metric", at(&rm.metric)),
                    ("labels", at(&rm.labels)),
                    ("aggregate", at(&rm.aggregate)),
                ];
                self.not_here(prometheus_only, |key| {
                    format!("{owner}: {key} applies to format = \"prometheus\" only")
                })?;
                LoadSource::StubStatus
            }
            RawLoadFormat::Prometheus => LoadSource::Prometheus(self.prom_selector(rm, &owner)?),
        };
        let measure = match rm.measure.as_ref().map(|m| (*m.get_ref(), m.span())) {
            None | Some((Measure::Connections, _)) => Measure::Connections,
            Some((Measure::BandwidthKbps, span)) => {
                if source == LoadSource::StubStatus {
                    return Err(self.error(
                        span,
                        format!("{owner}: stub_status reports active connections: measure must be \"connections\""),
                    ));
                }
                Measure::BandwidthKbps
            }
        };
        let path = match (&rm.path, &source) {
            (Some(p), _) => {
                if !p.get_ref().starts_with('/') {
                    return Err(self.error(
                        p.span(),
                        format!("{owner}: path {:?} does not start with /", p.get_ref()),
                    ));
                }
                p.get_ref().clone()
            }
            (None, LoadSource::Prometheus(_)) => DEFAULT_METRICS_PATH.to_owned(),
            (None, LoadSource::StubStatus) => {
                return Err(self.error(
                    format.span(),
                    format!("{owner}: a stub_status monitor needs path, the location nginx serves stub_status at"),
                ));
            }
        };
        let https = rm
            .scheme
            .as_ref()
            .is_some_and(|s| *s.get_ref() == RawScheme::Https);
        if !https {
            let tls_keys = [
                ("insecure", at(&rm.insecure)),
                ("sni", at(&rm.sni)),
                ("ca_file", at(&rm.ca_file)),
            ];
            self.not_here(tls_keys, |key| {
                format!("{owner}: {key} applies to scheme = \"https\" only")
            })?;
        }
        let mut spec = LoadMonitorSpec::new(name, source, path);
        spec.measure = measure;
        spec.host = rm.host.as_ref().map(|h| h.get_ref().clone());
        spec.tls = https.then(|| TlsCheck {
            insecure: rm.insecure.as_ref().is_some_and(|i| *i.get_ref()),
            sni: rm.sni.as_ref().map(|s| s.get_ref().clone()),
            ca_file: rm.ca_file.as_ref().map(|f| PathBuf::from(f.get_ref())),
        });
        if rm.port.is_some() {
            spec.port = Some(self.int(&owner, "port", rm.port.clone(), PORT_RANGE, 0)?);
        }
        let ms = |v: &Option<Int>, key: &str, default: Duration| -> Result<Duration, ConfigError> {
            Ok(match v {
                None => default,
                v => Duration::from_millis(self.int(&owner, key, v.clone(), 1..=3_600_000, 0)?),
            })
        };
        spec.interval = ms(&rm.interval_ms, "interval_ms", spec.interval)?;
        spec.timeout = ms(&rm.timeout_ms, "timeout_ms", spec.timeout)?;
        spec.unknown_after = self.int(
            &owner,
            "unknown_after",
            rm.unknown_after.clone(),
            UNKNOWN_AFTER_RANGE,
            spec.unknown_after,
        )?;
        Ok(spec)
    }

    fn prom_selector(&self, rm: &RawMonitor, owner: &str) -> Result<PromSelector, ConfigError> {
        let Some(metric) = &rm.metric else {
            return Err(self.error(
                rm.format.as_ref().expect("checked").span(),
                format!("{owner}: a prometheus monitor needs metric, the gauge to read"),
            ));
        };
        let printable = |s: &str| !s.is_empty() && !s.chars().any(char::is_control);
        if !printable(metric.get_ref()) {
            return Err(self.error(
                metric.span(),
                format!(
                    "{owner}: metric {:?} is not a metric name",
                    metric.get_ref()
                ),
            ));
        }
        let mut labels = Vec::new();
        if let Some(table) = &rm.labels {
            for (name, value) in table.get_ref() {
                if !printable(name) || name == "__name__" {
                    return Err(self.error(
                        table.span(),
                        format!("{owner}: labels: {name:?} is not a label name to match (the metric is named by metric)"),
                    ));
                }
                labels.push((name.clone(), value.get_ref().clone()));
            }
        }
        Ok(PromSelector {
            metric: metric.get_ref().clone(),
            labels,
            aggregate: rm
                .aggregate
                .as_ref()
                .map_or(Aggregate::One, |a| *a.get_ref()),
        })
    }

    /// Each service's `load_monitors`, in file order; also refuses a load monitor bound as a
    /// health monitor (`monitors`), before the services are checked.
    pub(super) fn load_bindings(
        &self,
        raw: &[RawService],
        health: &[crate::health::MonitorSpec],
        load: &[LoadMonitorSpec],
    ) -> Result<Vec<Vec<String>>, ConfigError> {
        let names = super::Names::new("load monitor", load.iter().map(|m| m.name.as_str()));
        let mut out = Vec::with_capacity(raw.len());
        for rs in raw {
            let owner = format!("service {:?}", rs.name.get_ref());
            for m in rs.monitors.iter().flat_map(Spanned::get_ref) {
                if names.contains(m.get_ref()) {
                    return Err(self.error(
                        m.span(),
                        format!("{owner}: monitor {:?} is a load monitor: bind it in load_monitors (a load monitor does not decide health)", m.get_ref()),
                    ));
                }
            }
            let mut bound: Vec<&LoadMonitorSpec> = Vec::new();
            for m in rs.load_monitors.iter().flat_map(Spanned::get_ref) {
                let name = m.get_ref();
                let err = |reason: String| Err(self.error(m.span(), format!("{owner}: {reason}")));
                let Some(spec) = load.iter().find(|l| &l.name == name) else {
                    if health.iter().any(|h| &h.name == name) {
                        return err(format!(
                            "monitor {name:?} is a health monitor: bind it in monitors"
                        ));
                    }
                    return err(names.unknown(name));
                };
                if bound.iter().any(|b| &b.name == name) {
                    return err(format!("load monitor {name:?} bound twice"));
                }
                if let Some(other) = bound.iter().find(|b| b.measure == spec.measure) {
                    return err(format!(
                        "load monitors {:?} and {name:?} both measure {}: bind one",
                        other.name,
                        spec.measure.name()
                    ));
                }
                bound.push(spec);
            }
            out.push(bound.iter().map(|b| b.name.clone()).collect());
        }
        Ok(out)
    }

    /// Refuses a load-reading setting whose values could never reach the answers here (see the
    /// module documentation).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn load_sources(
        &self,
        spans: &LoadSpans,
        server: &Server,
        mep: Option<&MepSettings>,
        services: &[Service],
        domains: &[GslbDomain],
        links: &[Link],
        load: &[LoadMonitorSpec],
    ) -> Result<(), ConfigError> {
        let mep_on = mep.is_some_and(|m| m.enabled);
        let missing = |s: &Service, measure: Measure| -> Option<String> {
            let here = server.site.as_deref().is_none_or(|h| h == s.site);
            let monitored = s
                .load_monitors
                .iter()
                .filter_map(|n| load.iter().find(|l| &l.name == n))
                .any(|l| l.measure == measure);
            let linked = measure == Measure::BandwidthKbps
                && if here {
                    links.iter().any(|l| l.services.contains(&s.name))
                } else {
                    mep_on
                };
            if !monitored && !linked {
                let link = if measure == Measure::BandwidthKbps {
                    ", and no [[link]] carries it"
                } else {
                    ""
                };
                return Some(format!(
                    "service {:?} has no load monitor measuring {}{link} (bind a [[monitor]] of type \"load\" in its load_monitors)",
                    s.name,
                    measure.name()
                ));
            }
            if !here && !mep_on {
                return Some(format!(
                    "service {:?} is at site {:?}: its load is measured there (this server is site {:?}) and reaches here only over MEP, which is off",
                    s.name,
                    s.site,
                    server.site.as_deref().unwrap_or_default()
                ));
            }
            None
        };
        for (s, (connections, bandwidth)) in services.iter().zip(&spans.services) {
            let limits = [
                ("max_connections", connections, Measure::Connections),
                ("max_bandwidth_kbps", bandwidth, Measure::BandwidthKbps),
            ];
            for (key, span, measure) in limits {
                if let (Some(span), Some(why)) = (span, missing(s, measure)) {
                    return Err(self.error(
                        span.clone(),
                        format!("service {:?}: {key} could never act: {why}", s.name),
                    ));
                }
            }
        }
        let by_name: BTreeMap<&str, &Service> =
            services.iter().map(|s| (s.name.as_str(), s)).collect();
        for (d, methods) in domains.iter().zip(&spans.least_connection) {
            let Some(span) = methods.first() else {
                continue;
            };
            let members = d.services.iter().chain(d.views.iter().flat_map(|(_, v)| v));
            for name in members {
                let service = by_name[name.as_str()];
                if let Some(why) = missing(service, Measure::Connections) {
                    return Err(self.error(
                        span.clone(),
                        format!(
                            "gslb_domain {:?}: leastconnection cannot rank its services: {why}",
                            d.name
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// `[[monitor]]` `labels`: label name → value (a TOML inline table).
pub(super) type RawLabels = Spanned<BTreeMap<String, Str>>;

impl super::Config {
    /// The load monitor of `measure` bound to `service`, if any (at most one).
    pub fn load_monitor_of(&self, service: &Service, measure: Measure) -> Option<&LoadMonitorSpec> {
        service
            .load_monitors
            .iter()
            .filter_map(|n| self.load_monitors.iter().find(|m| &m.name == n))
            .find(|m| m.measure == measure)
    }
}
