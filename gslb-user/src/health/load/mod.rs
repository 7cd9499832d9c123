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
mod prometheus;

use std::{
    collections::{BTreeMap, HashMap},
    net::{IpAddr, SocketAddr},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, SystemTime},
};

use tokio::sync::watch;
use tracing::{debug, info, warn};

pub use self::error::{BadLoadValue, LoadReadError};
use super::{CheckError, HealthError, HttpCheck, MonitorSpecError, TlsCheck, http::HttpChecker};
use crate::supervise::{self, Supervised};

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

/// A load monitor's reading, ready to run.
struct LoadReader {
    http: HttpChecker,
    source: LoadSource,
}

impl LoadReader {
    fn new(
        target: IpAddr,
        service_port: u16,
        spec: &LoadMonitorSpec,
    ) -> Result<Self, MonitorSpecError> {
        if spec.interval.is_zero() {
            return Err(MonitorSpecError::ZeroInterval);
        }
        if spec.timeout.is_zero() {
            return Err(MonitorSpecError::ZeroTimeout);
        }
        if spec.source == LoadSource::StubStatus && spec.measure != Measure::Connections {
            return Err(MonitorSpecError::StubStatusMeasure);
        }
        let addr = SocketAddr::new(target, spec.port.unwrap_or(service_port));
        let check = HttpCheck {
            path: spec.path.clone(),
            host: spec.host.clone(),
            expect_status: Vec::new(),
            body_contains: None,
        };
        Ok(LoadReader {
            http: HttpChecker::new(addr, &check, spec.tls.as_ref())?,
            source: spec.source.clone(),
        })
    }

    async fn read(&self) -> Result<u64, CheckError> {
        let body = self.http.fetch(PAGE_LIMIT).await?;
        page_value(body, self.source.clone())
            .await
            .map_err(CheckError::Load)
    }

    async fn read_within(&self, timeout: Duration) -> Result<u64, CheckError> {
        tokio::time::timeout(timeout, self.read())
            .await
            .unwrap_or(Err(CheckError::Timeout(timeout)))
    }
}

/// The value `source` picks from a fetched page. The parse is linear in the page (at most
/// [`PAGE_LIMIT`] bytes, [`prometheus::MAX_LABELS`] labels a line) but takes milliseconds for
/// a large page, so it runs on a blocking thread: on a runtime worker it would hold up the
/// other tasks there, and the check's own timeout could not fire until it ended.
async fn page_value(body: Vec<u8>, source: LoadSource) -> Result<u64, LoadReadError> {
    match tokio::task::spawn_blocking(move || read_page(&source, &body)).await {
        Ok(value) => value,
        // A panic in the parse is the monitor task's (supervised: a failed check).
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        // Cancelled: the runtime is shutting down, and this check with it.
        Err(_) => std::future::pending().await,
    }
}

/// The value `source` reads from a fetched page (`body`, as the server sent it): what a load
/// monitor does with each page it fetches, also for the `prometheus` fuzz target.
pub fn read_page(source: &LoadSource, body: &[u8]) -> Result<u64, LoadReadError> {
    let page = std::str::from_utf8(body).map_err(|source| LoadReadError::NotUtf8 { source })?;
    match source {
        LoadSource::Prometheus(selector) => prometheus::select(page, selector),
        LoadSource::StubStatus => stub_status_active(page),
    }
}

/// nginx `stub_status`'s first line, `Active connections: N` (the connection asking included).
fn stub_status_active(page: &str) -> Result<u64, LoadReadError> {
    let first = page
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .ok_or(LoadReadError::EmptyStubStatus)?;
    let Some(count) = first.strip_prefix("Active connections:") else {
        return Err(LoadReadError::NotStubStatus {
            start: first.chars().take(40).collect(),
        });
    };
    let count = count.trim();
    count
        .parse::<u64>()
        .map(|n| n.min(MAX_LOAD))
        .map_err(|_| LoadReadError::StubStatusCount {
            count: count.to_owned(),
        })
}

/// Reads one value of `spec` against `target` (`port` unless the spec has its own) within the
/// spec's timeout, outside any monitor: for tools and tests.
pub async fn read_once(
    target: IpAddr,
    port: u16,
    spec: &LoadMonitorSpec,
) -> Result<u64, CheckError> {
    let reader = LoadReader::new(target, port, spec).map_err(CheckError::Invalid)?;
    reader.read_within(spec.timeout).await
}

type Key = (String, String);

/// One monitor's task.
struct Task {
    /// What it runs: a change restarts it.
    runs: (IpAddr, u16, LoadMonitorSpec),
    handle: Supervised,
    /// Set before the abort: a task sending on another worker meanwhile must not put its
    /// reading back.
    stopped: Arc<AtomicBool>,
}

impl Task {
    fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.handle.abort();
    }
}

/// Runs the load monitors of the services it is given, until dropped.
pub struct LoadMonitor {
    sender: Arc<watch::Sender<LoadReadings>>,
    tasks: HashMap<Key, Task>,
}

impl Default for LoadMonitor {
    fn default() -> Self {
        Self::new()
    }
}

impl LoadMonitor {
    pub fn new() -> Self {
        LoadMonitor {
            sender: Arc::new(watch::channel(LoadReadings::default()).0),
            tasks: HashMap::new(),
        }
    }

    /// The readings, notified as the module documentation says.
    pub fn readings(&self) -> watch::Receiver<LoadReadings> {
        self.sender.subscribe()
    }

    /// Whether `services` can run: every reader builds (a path, a host header, a CA file).
    pub fn check(services: &[ServiceLoadMonitors]) -> Result<(), HealthError> {
        for s in services {
            for m in &s.monitors {
                LoadReader::new(s.target, s.port, m).map_err(|reason| {
                    HealthError::InvalidMonitor {
                        service: s.service.clone(),
                        monitor: m.name.clone(),
                        reason,
                    }
                })?;
            }
        }
        Ok(())
    }

    /// Runs exactly the monitors of `services` from now on (see the module documentation). On
    /// an error nothing changes. Needs a tokio runtime.
    pub fn set_services(&mut self, services: &[ServiceLoadMonitors]) -> Result<(), HealthError> {
        Self::check(services)?;
        let mut wanted: HashMap<Key, (IpAddr, u16, LoadMonitorSpec)> = HashMap::new();
        for s in services {
            for m in &s.monitors {
                let key = (s.service.clone(), m.name.clone());
                if wanted.insert(key, (s.target, s.port, m.clone())).is_some() {
                    return Err(HealthError::DuplicateService(s.service.clone()));
                }
            }
        }
        let stale: Vec<Key> = self
            .tasks
            .iter()
            .filter(|(key, task)| wanted.get(*key) != Some(&task.runs))
            .map(|(key, _)| key.clone())
            .collect();
        for key in &stale {
            if let Some(task) = self.tasks.remove(key) {
                task.stop();
                info!(service = %key.0, monitor = %key.1, "load monitor stopped");
            }
        }
        // Under the channel's lock, after every `stopped` flag is set (see Task::stopped).
        self.sender.send_if_modified(|r| {
            let before = r.0.len();
            r.0.retain(|key, _| self.tasks.contains_key(key));
            r.0.len() != before
        });
        for (key, runs) in wanted {
            if self.tasks.contains_key(&key) {
                continue;
            }
            let (target, port, spec) = &runs;
            let reader = LoadReader::new(*target, *port, spec).expect("checked above");
            info!(service = %key.0, monitor = %key.1, source = spec.source.label(),
                measure = spec.measure.name(), interval_ms = spec.interval.as_millis() as u64,
                "load monitor started");
            self.sender.send_modify(|r| {
                r.0.insert(key.clone(), LoadReading::new(spec.measure));
            });
            let stopped = Arc::new(AtomicBool::new(false));
            let (reader, interval, timeout) = (Arc::new(reader), spec.interval, spec.timeout);
            let (unknown_after, sender, flag) =
                (spec.unknown_after, self.sender.clone(), stopped.clone());
            let task_key = key.clone();
            let handle = supervise::spawn(format!("load/{}/{}", key.0, key.1), move |run| {
                // A run that died is a failed check (recorded before the next run starts), so
                // a load monitor that cannot run ages its value out as one that cannot read.
                if let Some(why) = run.last_failure {
                    let error = format!("the load monitor could not check: its task {why}");
                    record(&sender, &task_key, &Err(error), unknown_after, &flag);
                }
                run_monitor(
                    task_key.clone(),
                    reader.clone(),
                    interval,
                    timeout,
                    unknown_after,
                    sender.clone(),
                    flag.clone(),
                )
            });
            self.tasks.insert(
                key,
                Task {
                    runs,
                    handle,
                    stopped,
                },
            );
        }
        Ok(())
    }

    /// Waits until every monitor has made its first check, for at most `within`.
    pub async fn first_readings(&self, within: Duration) {
        let mut rx = self.readings();
        let _ = tokio::time::timeout(
            within,
            rx.wait_for(|r| r.0.values().all(|reading| reading.checks > 0)),
        )
        .await;
    }
}

impl Drop for LoadMonitor {
    fn drop(&mut self) {
        for task in self.tasks.values() {
            task.stop();
        }
    }
}

async fn run_monitor(
    key: Key,
    reader: Arc<LoadReader>,
    interval: Duration,
    timeout: Duration,
    unknown_after: u32,
    readings: Arc<watch::Sender<LoadReadings>>,
    stopped: Arc<AtomicBool>,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (service, monitor) = (&key.0, &key.1);
    loop {
        ticker.tick().await;
        let outcome = reader.read_within(timeout).await.map_err(|e| e.to_string());
        if let Err(error) = &outcome {
            debug!(service, monitor, %error, "load check failed");
        }
        record(&readings, &key, &outcome, unknown_after, &stopped);
    }
}

/// Takes one check's outcome into `key`'s reading (unless the monitor was stopped).
fn record(
    readings: &watch::Sender<LoadReadings>,
    key: &Key,
    outcome: &Result<u64, String>,
    unknown_after: u32,
    stopped: &AtomicBool,
) {
    let (service, monitor) = (&key.0, &key.1);
    readings.send_if_modified(|r| {
        if stopped.load(Ordering::Acquire) {
            return false;
        }
        let Some(reading) = r.0.get_mut(key) else {
            return false;
        };
        match reading.record(outcome.clone(), unknown_after, SystemTime::now()) {
            Moved::No => false,
            Moved::Value => true,
            Moved::AgedOut => {
                warn!(
                    service,
                    monitor,
                    failed = reading.fail_run,
                    error = reading.last_error.as_deref().unwrap_or(""),
                    "load unknown: the last value aged out"
                );
                true
            }
            Moved::Back => {
                info!(service, monitor, value = reading.value, "load known again");
                true
            }
        }
    });
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

    /// A page as large as a check may fetch is read on a blocking thread, not on the
    /// runtime's: on a one-thread runtime, another task runs while it is parsed (so a check's
    /// timeout can fire, and the other monitors keep their schedule).
    #[tokio::test]
    async fn a_page_is_parsed_off_the_runtime_thread() {
        let mut page = String::from("# TYPE conns gauge\n");
        let mut i = 0;
        while page.len() < PAGE_LIMIT - 64 {
            page.push_str(&format!("conns{{pool=\"p{i}\",site=\"eu\"}} {}\n", i % 7));
            i += 1;
        }
        let source = LoadSource::Prometheus(PromSelector {
            metric: "conns".into(),
            labels: vec![("pool".into(), "p3".into())],
            aggregate: Aggregate::One,
        });
        let ran = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = ran.clone();
        let other = tokio::spawn(async move {
            loop {
                counter.fetch_add(1, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        });
        let value = page_value(page.into_bytes(), source).await;
        let ran_meanwhile = ran.load(Ordering::Relaxed);
        other.abort();
        assert_eq!(value, Ok(3));
        assert!(
            ran_meanwhile > 0,
            "the other task never ran while {i} samples were parsed"
        );
    }

    #[test]
    fn a_page_is_read_as_its_source_says() {
        let prometheus = LoadSource::Prometheus(PromSelector {
            metric: "conns".into(),
            labels: vec![],
            aggregate: Aggregate::One,
        });
        assert_eq!(
            read_page(&prometheus, b"# TYPE conns gauge\nconns 7\n"),
            Ok(7)
        );
        let stub = b"Active connections: 3\n";
        assert_eq!(read_page(&LoadSource::StubStatus, stub), Ok(3));
        assert!(matches!(
            read_page(&prometheus, stub),
            Err(LoadReadError::Syntax { line: 1, .. })
        ));
        assert!(matches!(
            read_page(&LoadSource::StubStatus, b"Active connections: \xff"),
            Err(LoadReadError::NotUtf8 { .. })
        ));
    }

    #[test]
    fn stub_status_pages() {
        let page = "Active connections: 291 \nserver accepts handled requests\n 16630948 16630948 31070465 \nReading: 6 Writing: 179 Waiting: 106 \n";
        assert_eq!(stub_status_active(page), Ok(291));
        assert_eq!(stub_status_active("\n  Active connections:1\n"), Ok(1));
        for (bad, want) in [
            ("", "an empty page"),
            (
                "<html>Welcome to nginx!</html>",
                "not an nginx stub_status page",
            ),
            ("Active connections: many\n", "\"many\" is not a number"),
            ("Active connections: -1\n", "is not a number"),
        ] {
            let got = stub_status_active(bad);
            assert!(
                got.as_ref().is_err_and(|e| e.to_string().contains(want)),
                "{bad:?}: {got:?}"
            );
        }
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
