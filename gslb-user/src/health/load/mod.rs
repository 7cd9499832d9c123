//! Load monitors: each service's current load read from its backend, for the load-based
//! methods (`leastconnection`) and spillover (`max_connections`, `max_bandwidth_kbps`).
//!
//! - **Sources.** A gauge from a Prometheus text exposition page ([`prometheus`]: metric name
//!   and label matchers), or the active connections of an nginx `stub_status` page; both over
//!   HTTP or HTTPS with the HTTP monitor's client (`http.rs`: a fresh connection per check, no
//!   redirect, no proxy). The value is connections or kbit/s ([`Measure`]), as configured.
//! - **One task per monitor**, a check every `interval`, each within `timeout`, as the health
//!   monitors do; checks of one monitor never overlap.
//! - **Unknown.** A reading is unknown until its first good check, and again after
//!   `unknown_after` failed checks in a row (the last value ages out; a failed check before
//!   that keeps it). Every check and failure is counted ([`LoadReadings::stats_lines`]); a
//!   reading going unknown is logged as a warning, its return as info, single failures at debug
//!   level only. What unknown means for the answers is [`UNKNOWN_LOAD`].
//! - **Changes.** [`LoadMonitor::readings`] is notified when a value changes, goes unknown or
//!   comes back, and after a monitor's first check, not on every check: a steady load wakes
//!   nobody.
//! - **Reload.** [`LoadMonitor::set_services`] keeps the monitors (and readings) whose service
//!   address and spec did not change, restarts changed ones from unknown, and stops removed
//!   ones (their readings leave at once).

mod error;
mod monitor;
mod prometheus;
mod reader;

use std::{
    collections::BTreeMap,
    net::IpAddr,
    time::{Duration, SystemTime},
};

pub use self::error::{BadLoadValue, LoadReadError};
pub use self::monitor::LoadMonitor;
pub use self::reader::{read_once, read_page};
use super::TlsCheck;

/// The largest real load value; larger readings are clamped to it, so that they stay apart
/// from [`UNKNOWN_LOAD`] and the engine's "no limit".
pub const MAX_LOAD: u64 = i64::MAX as u64;

/// A load that is not known (no good reading, or it aged out), as the engine is given it.
/// It is above every real value and every configurable limit (≤ `i64::MAX`), and below the
/// engine's "no limit" (`u64::MAX`):
/// - spillover: a service with a limit whose load is unknown is full: new clients go to
///   services known to have room, and when none has, the engine's overload rule answers (the
///   backup domain if it has room, else the UP services anyway). A service without a limit is
///   never full by an unknown load;
/// - leastconnection: an unknown count ranks after every known one; services all unknown
///   tie, so they share the answers in turn (round robin).
///
/// MEP carries it as it is in the connections field, and as `u64::MAX - 1` bit/s in the
/// bandwidth field ([`Bandwidth::UNKNOWN`](super::state::Bandwidth::UNKNOWN)).
pub const UNKNOWN_LOAD: u64 = u64::MAX - 1;

/// Largest page read; a longer one is an error (node_exporter's pages are ~100 KiB).
const PAGE_LIMIT: usize = 4 * 1024 * 1024;

/// What a load monitor's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// Current connections (`leastconnection`, `max_connections`).
    Connections,
    /// Current bandwidth in kbit/s (`max_bandwidth_kbps`).
    BandwidthKbps,
}

impl Measure {
    /// The configuration's name.
    pub fn name(self) -> &'static str {
        match self {
            Measure::Connections => "connections",
            Measure::BandwidthKbps => "bandwidth_kbps",
        }
    }
}

/// What to do when several samples match a [`PromSelector`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregate {
    /// It is an error (the matchers do not name one series).
    #[default]
    One,
    /// Their sum is the value.
    Sum,
}

/// Which gauge of a Prometheus page is the load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromSelector {
    pub metric: String,
    /// Label name = value, each required exactly; other labels may be present.
    pub labels: Vec<(String, String)>,
    pub aggregate: Aggregate,
}

/// Where the value comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadSource {
    /// A gauge of a Prometheus text exposition page.
    Prometheus(PromSelector),
    /// nginx `stub_status`: "Active connections".
    StubStatus,
}

impl LoadSource {
    pub fn label(&self) -> &'static str {
        match self {
            LoadSource::Prometheus(_) => "prometheus",
            LoadSource::StubStatus => "stub_status",
        }
    }
}

/// One load monitor (`[[monitor]] type = "load"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadMonitorSpec {
    pub name: String,
    pub source: LoadSource,
    pub measure: Measure,
    /// Destination port; `None`: the service's port.
    pub port: Option<u16>,
    /// Request target, starting with `/`.
    pub path: String,
    /// `Host` header; `None`: the monitored `ip:port`.
    pub host: Option<String>,
    /// HTTPS with these settings; `None`: plain HTTP.
    pub tls: Option<TlsCheck>,
    pub interval: Duration,
    pub timeout: Duration,
    /// Failed checks in a row after which the last value is dropped (≥ 1).
    pub unknown_after: u32,
}

impl LoadMonitorSpec {
    /// A monitor of `source` at `path` with the health monitors' timing defaults (every 5 s,
    /// 2 s timeout), unknown after 3 failed checks, measuring connections.
    pub fn new(name: impl Into<String>, source: LoadSource, path: impl Into<String>) -> Self {
        LoadMonitorSpec {
            name: name.into(),
            source,
            measure: Measure::Connections,
            port: None,
            path: path.into(),
            host: None,
            tls: None,
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            unknown_after: 3,
        }
    }
}

/// The load monitors of one service, read at its own address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceLoadMonitors {
    pub service: String,
    pub target: IpAddr,
    pub port: u16,
    pub monitors: Vec<LoadMonitorSpec>,
}

/// One monitor's reading as last seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadReading {
    pub measure: Measure,
    /// `None`: unknown.
    pub value: Option<u64>,
    pub checks: u64,
    pub failures: u64,
    /// Failed checks in a row now.
    pub fail_run: u32,
    /// Times a known value aged out.
    pub aged_out: u64,
    pub last_error: Option<String>,
    pub at: Option<SystemTime>,
}

/// How a check moved a reading.
#[derive(Debug, PartialEq, Eq)]
enum Moved {
    /// Nothing a reader of values sees.
    No,
    /// The value changed, or this was the first check.
    Value,
    /// It became unknown after being known.
    AgedOut,
    /// It became known after being unknown (not at the first check).
    Back,
}

impl LoadReading {
    fn new(measure: Measure) -> Self {
        LoadReading {
            measure,
            value: None,
            checks: 0,
            failures: 0,
            fail_run: 0,
            aged_out: 0,
            last_error: None,
            at: None,
        }
    }

    /// Takes one check's outcome.
    fn record(
        &mut self,
        outcome: Result<u64, String>,
        unknown_after: u32,
        at: SystemTime,
    ) -> Moved {
        self.checks += 1;
        self.at = Some(at);
        let first = self.checks == 1;
        let before = self.value;
        match outcome {
            Ok(value) => {
                self.fail_run = 0;
                self.last_error = None;
                self.value = Some(value);
            }
            Err(error) => {
                self.failures += 1;
                self.fail_run = self.fail_run.saturating_add(1);
                self.last_error = Some(error);
                if self.fail_run >= unknown_after.max(1) {
                    self.value = None;
                }
            }
        }
        match (before, self.value) {
            (Some(_), None) => {
                self.aged_out += 1;
                Moved::AgedOut
            }
            (None, Some(_)) if !first => Moved::Back,
            (b, a) if b != a || first => Moved::Value,
            _ => Moved::No,
        }
    }
}

/// Every running monitor's reading, by (service, monitor).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReadings(pub BTreeMap<(String, String), LoadReading>);

impl LoadReadings {
    /// `service`'s readings of `measure`: `None` when no monitor of that measure runs for it,
    /// `Some(None)` when it is unknown.
    pub fn value(&self, service: &str, measure: Measure) -> Option<Option<u64>> {
        self.0
            .range((service.to_owned(), String::new())..)
            .take_while(|((s, _), _)| s == service)
            .find(|(_, r)| r.measure == measure)
            .map(|(_, r)| r.value)
    }

    /// `name value` lines for `gslbctl stats`: totals, then per monitor whether its value is
    /// known, the value, its checks and failures.
    pub fn stats_lines(&self) -> String {
        let sum = |f: fn(&LoadReading) -> u64| self.0.values().map(f).sum::<u64>();
        let mut out = format!(
            "load_monitors {}\nload_checks {}\nload_failures {}\nload_aged_out {}\nload_unknown {}\n",
            self.0.len(),
            sum(|r| r.checks),
            sum(|r| r.failures),
            sum(|r| r.aged_out),
            self.0.values().filter(|r| r.value.is_none()).count(),
        );
        for ((service, monitor), r) in &self.0 {
            let labels = format!(
                "{{service=\"{service}\",monitor=\"{monitor}\",measure=\"{}\"}}",
                r.measure.name()
            );
            out.push_str(&format!(
                "load_known{labels} {}\n",
                u8::from(r.value.is_some())
            ));
            if let Some(v) = r.value {
                out.push_str(&format!("load_value{labels} {v}\n"));
            }
            out.push_str(&format!("load_checks{labels} {}\n", r.checks));
            out.push_str(&format!("load_failures{labels} {}\n", r.failures));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_ages_out_after_unknown_after_failures_and_comes_back() {
        let at = SystemTime::UNIX_EPOCH;
        let mut r = LoadReading::new(Measure::Connections);
        let fail = || Err("refused".to_owned());
        // (outcome, moved, value after)
        let steps: [(Result<u64, String>, Moved, Option<u64>); 9] = [
            // The first check is news even when it fails.
            (fail(), Moved::Value, None),
            (Ok(7), Moved::Back, Some(7)),
            (Ok(7), Moved::No, Some(7)),
            (Ok(9), Moved::Value, Some(9)),
            // Two failures keep the last value; the third drops it.
            (fail(), Moved::No, Some(9)),
            (fail(), Moved::No, Some(9)),
            (fail(), Moved::AgedOut, None),
            (fail(), Moved::No, None),
            (Ok(1), Moved::Back, Some(1)),
        ];
        for (i, (outcome, moved, value)) in steps.into_iter().enumerate() {
            assert_eq!(r.record(outcome, 3, at), moved, "step {i}");
            assert_eq!(r.value, value, "step {i}");
        }
        assert_eq!((r.checks, r.failures, r.aged_out, r.fail_run), (9, 5, 1, 0));
        assert_eq!(r.last_error, None);
        let mut first = LoadReading::new(Measure::Connections);
        assert_eq!(first.record(Ok(0), 3, at), Moved::Value);
    }

    #[test]
    fn readings_by_service_and_measure() {
        let mut r = LoadReadings::default();
        let reading = |measure, value| LoadReading {
            value,
            ..LoadReading::new(measure)
        };
        r.0.insert(
            ("a".into(), "m1".into()),
            reading(Measure::Connections, Some(4)),
        );
        r.0.insert(
            ("a".into(), "m2".into()),
            reading(Measure::BandwidthKbps, None),
        );
        r.0.insert(
            ("ab".into(), "m1".into()),
            reading(Measure::Connections, Some(8)),
        );
        assert_eq!(r.value("a", Measure::Connections), Some(Some(4)));
        assert_eq!(r.value("a", Measure::BandwidthKbps), Some(None));
        assert_eq!(r.value("ab", Measure::Connections), Some(Some(8)));
        assert_eq!(r.value("ab", Measure::BandwidthKbps), None);
        assert_eq!(r.value("b", Measure::Connections), None);
        let lines = r.stats_lines();
        assert!(
            lines.starts_with(
                "load_monitors 3\nload_checks 0\nload_failures 0\nload_aged_out 0\nload_unknown 1\n"
            ),
            "{lines}"
        );
        assert!(
            lines.contains("load_value{service=\"a\",monitor=\"m1\",measure=\"connections\"} 4\n"),
            "{lines}"
        );
        assert!(
            lines.contains(
                "load_known{service=\"a\",monitor=\"m2\",measure=\"bandwidth_kbps\"} 0\n"
            ),
            "{lines}"
        );
    }
}
