//! Service health monitors: TCP connect, HTTP and HTTPS GET, DNS query, ICMP echo.
//!
//! The configuration is plain data: a [`ServiceMonitors`] per service (its checked address and
//! its [`MonitorSpec`]s, NetScaler monitor bindings with weights and a `monThreshold`). A
//! [`HealthSupervisor`] is handed the whole desired set with
//! [`set_services`](HealthSupervisor::set_services); it starts the monitors of new services,
//! stops those of removed services at once and restarts those of changed ones.
//!
//! - **One task per monitor.** Every check runs under `tokio::time::timeout(spec.timeout)` in
//!   its monitor's own task, so a target that accepts and never answers delays only its own
//!   monitor. Checks of one monitor never overlap: the next starts `interval` after the
//!   previous one started, or at once when the previous one took longer.
//! - **Fall and rise.** A monitor goes DOWN after `fall` failed checks in a row and UP after
//!   `rise` successes in a row ([`state::MonitorTracker`]). A service is UP when the weights of
//!   its UP monitors reach its threshold, or, with threshold 0, when every monitor is UP
//!   ([`state::service_up`]). A service without monitors is always UP.
//! - **Initial state.** A monitor starts in [`ServiceMonitors::initial_up`] (default `true`):
//!   when gslbd starts or a service is added, its addresses keep being answered until `fall`
//!   checks in a row fail, which is the same withdrawal delay as for a target that dies later.
//!   Starting DOWN would answer nothing (or only fallbacks) for `rise` intervals after every
//!   restart. A service whose monitors change keeps its current state: the new monitors start
//!   in the state the service had, so a reload that only tunes an interval does not flap it.
//! - **Events and counters.** Every service state change is logged (`warn` going DOWN, `info`
//!   going UP), counted in [`ServiceHealth::transitions`] (flap visibility) and broadcast as a
//!   [`HealthEvent`] to [`subscribe`](HealthSupervisor::subscribe)rs. The broadcast channel
//!   never blocks a monitor: a receiver that lags loses the oldest events (`Lagged`) and can
//!   resynchronise from [`snapshot`](HealthSupervisor::snapshot). A removed service has no event: it
//!   leaves the snapshot, and its monitors have stopped when `set_services` returns.
//! - **One connection per check.** HTTP(S) checks open a fresh connection, send `Connection:
//!   close`, follow no redirect and use no proxy; TLS uses rustls with the system's roots (plus
//!   an optional CA file), or accepts any certificate in `insecure` mode.
//! - **Supervised.** Each monitor's task is supervised (`crate::supervise`, named
//!   `monitor/<service>/<monitor>`): when it dies (a panic), the restart first records a failed
//!   check ("could not check"), so a monitor that cannot run takes its service DOWN after `fall`
//!   such checks, as a target that does not answer does; it never keeps the service UP.
//! - **ICMP** uses an unprivileged ping socket (`SOCK_DGRAM`, allowed by
//!   `net.ipv4.ping_group_range`) and falls back to a raw socket (root / `CAP_NET_RAW`). Where
//!   neither can be opened, the check fails with the reason, and the monitor goes DOWN.
//!
//! [`load`] reads services' load (connections, bandwidth) from their backends: Prometheus
//! gauges and nginx `stub_status`, over the same HTTP(S) client.
//!
//! [`link`] watches links' inbound load (bytes per second from the kernel's interface counters
//! against a threshold), for the bandwidth rule of F5's inbound link methods.

pub(crate) mod dns;
mod http;
pub(crate) mod icmp;
pub(crate) mod icmp_error;
pub mod link;
pub mod load;
mod needle;
pub mod state;
mod tcp;

use std::{
    collections::{HashMap, HashSet, hash_map::RandomState},
    hash::{BuildHasher, Hasher},
    net::{IpAddr, SocketAddr},
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use hickory_proto::{op::ResponseCode, rr::RecordType};
use tokio::sync::broadcast;
use tracing::{debug, info, warn};

pub use dns::DnsCheckError;
pub use http::http_check_over;
pub(crate) use icmp::{Echo, echo};
pub use icmp::{IcmpMode, icmp_mode};
use state::{MonitorTracker, service_up};

use crate::supervise::{self, Run, Supervised};

/// Events kept for a subscriber that does not keep up; older ones are dropped for it.
const EVENT_BACKLOG: usize = 1024;

/// One monitor bound to a service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonitorSpec {
    /// Name for logs and the snapshot (a NetScaler monitor name); need not be unique.
    pub name: String,
    pub kind: MonitorKind,
    /// Destination port; `None` checkers the service's port. Ignored by ICMP.
    pub port: Option<u16>,
    /// Time from the start of one check to the start of the next.
    pub interval: Duration,
    /// A check that has not succeeded within this time has failed.
    pub timeout: Duration,
    /// Failed checks in a row that take an UP monitor DOWN (NetScaler `retries`); 0 acts as 1.
    pub fall: u32,
    /// Successful checks in a row that take a DOWN monitor UP (NetScaler `successRetries`);
    /// 0 acts as 1.
    pub rise: u32,
    /// Weight in the service's threshold sum.
    pub weight: u32,
}

impl MonitorSpec {
    /// A monitor with NetScaler's defaults: every 5 s, 2 s timeout, 3 failures to go DOWN,
    /// 1 success to go UP, weight 1.
    pub fn new(name: impl Into<String>, kind: MonitorKind) -> Self {
        MonitorSpec {
            name: name.into(),
            kind,
            port: None,
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            fall: 3,
            rise: 1,
            weight: 1,
        }
    }
}

/// What a monitor checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MonitorKind {
    /// A TCP connection is accepted (then closed).
    Tcp,
    /// `GET path` over HTTP/1.1.
    Http(HttpCheck),
    /// `GET path` over HTTP/1.1 in TLS.
    Https(HttpCheck, TlsCheck),
    /// A DNS query over UDP.
    Dns(DnsCheck),
    /// ICMP (or ICMPv6) echo.
    Icmp,
}

impl MonitorKind {
    /// Short name of the kind for logs.
    pub fn label(&self) -> &'static str {
        match self {
            MonitorKind::Tcp => "tcp",
            MonitorKind::Http(_) => "http",
            MonitorKind::Https(..) => "https",
            MonitorKind::Dns(_) => "dns",
            MonitorKind::Icmp => "icmp",
        }
    }
}

/// The request and the expected response of an HTTP(S) monitor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpCheck {
    /// Request target, starting with `/` (may carry a query).
    pub path: String,
    /// `Host` header; `None` sends the checked address (`ip:port`).
    pub host: Option<String>,
    /// Accepted status codes; empty accepts any 2xx.
    pub expect_status: Vec<u16>,
    /// A string the first 64 KiB of the body must contain.
    pub body_contains: Option<String>,
}

impl HttpCheck {
    /// `GET path`, any 2xx, any body.
    pub fn get(path: impl Into<String>) -> Self {
        HttpCheck {
            path: path.into(),
            host: None,
            expect_status: Vec::new(),
            body_contains: None,
        }
    }
}

/// TLS settings of an HTTPS monitor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsCheck {
    /// Accept any certificate (self-signed, expired, other name): checks that TLS and HTTP
    /// work, not who answers. The handshake signature is still verified.
    pub insecure: bool,
    /// Server name sent as SNI and verified; `None` uses the `Host` (without port) when set,
    /// else the checked IP address (verified against the certificate's IP names, no SNI sent).
    pub sni: Option<String>,
    /// PEM file of further trusted certificates, beside the system's roots.
    pub ca_file: Option<PathBuf>,
}

/// The query and the expected response of a DNS monitor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsCheck {
    pub qname: String,
    pub qtype: RecordType,
    /// The response code the answer must have (usually NOERROR).
    pub expect_rcode: ResponseCode,
    /// An address that must be among the answer's A/AAAA records.
    pub expect_answer: Option<IpAddr>,
}

impl DnsCheck {
    /// `qname qtype`, NOERROR, any answer.
    pub fn new(qname: impl Into<String>, qtype: RecordType) -> Self {
        DnsCheck {
            qname: qname.into(),
            qtype,
            expect_rcode: ResponseCode::NoError,
            expect_answer: None,
        }
    }
}

/// The monitors of one service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceMonitors {
    /// The service id (key of the snapshot and of the events).
    pub service: String,
    /// The address checked: the private address of a service behind NAT.
    pub target: IpAddr,
    pub port: u16,
    pub monitors: Vec<MonitorSpec>,
    /// NetScaler `monThreshold`: UP when the weights of the UP monitors add up to at least
    /// this; 0 requires every monitor UP.
    pub threshold: u32,
    /// The state monitors start in (see the module documentation); default `true`.
    pub initial_up: bool,
}

impl ServiceMonitors {
    /// A service with no monitors yet, threshold 0, starting UP.
    pub fn new(service: impl Into<String>, target: IpAddr, port: u16) -> Self {
        ServiceMonitors {
            service: service.into(),
            target,
            port,
            monitors: Vec::new(),
            threshold: 0,
            initial_up: true,
        }
    }

    /// Adds a monitor.
    pub fn monitor(mut self, spec: MonitorSpec) -> Self {
        self.monitors.push(spec);
        self
    }
}

/// A service changed state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthEvent {
    pub service: String,
    pub up: bool,
    pub at: SystemTime,
    /// The monitor whose result made the change, and that result.
    pub reason: String,
    /// The service's state changes so far, this one included.
    pub transitions: u64,
}

/// A service's health as last seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceHealth {
    pub up: bool,
    /// State changes since the service was first configured (kept across restarts of changed
    /// monitors): the flap counter.
    pub transitions: u64,
    /// Time of the last state change; `None` while still in the initial state.
    pub last_change: Option<SystemTime>,
    pub monitors: Vec<MonitorState>,
}

/// One monitor's state as last seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonitorState {
    pub name: String,
    pub kind: &'static str,
    pub up: bool,
    pub weight: u32,
    /// The current runs of results.
    pub consecutive_successes: u32,
    pub consecutive_failures: u32,
    /// Checks done and failed so far.
    pub checks: u64,
    pub failures: u64,
    /// This monitor's state changes so far.
    pub transitions: u64,
    pub last: Option<CheckResult>,
}

/// The result of one check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckResult {
    pub at: SystemTime,
    /// Time the check took (the timeout for a check that timed out).
    pub elapsed: Duration,
    /// `None` for a success, else why it failed.
    pub error: Option<String>,
}

/// Why a check failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("connect: {0}")]
    Connect(std::io::Error),
    #[error("TLS: {0}")]
    Tls(std::io::Error),
    #[error("HTTP: {0}")]
    Http(String),
    #[error("HTTP status {got}, expected {expected}")]
    Status { got: u16, expected: String },
    #[error("response body does not contain {0:?}")]
    Body(String),
    #[error("DNS: {0}")]
    Dns(String),
    #[error("DNS response code {got}, expected {expected}")]
    Rcode {
        got: ResponseCode,
        expected: ResponseCode,
    },
    #[error("DNS answer does not contain {0}")]
    Answer(IpAddr),
    #[error("ICMP: {0}")]
    Icmp(std::io::Error),
    #[error("load: {0}")]
    Load(#[from] load::LoadReadError),
    #[error("invalid monitor: {0}")]
    Invalid(#[from] MonitorSpecError),
}

/// Why a monitor cannot be built from its [`MonitorSpec`] or [`LoadMonitorSpec`](load::LoadMonitorSpec).
///
/// The cause is in the message too (as in [`DnsCheckError`]): these end up as text in
/// configuration errors and in the reply to a refused reload.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MonitorSpecError {
    #[error("interval must be more than 0")]
    ZeroInterval,
    #[error("timeout must be more than 0")]
    ZeroTimeout,
    /// A `stub_status` page has one number, the active connections.
    #[error("stub_status reports connections")]
    StubStatusMeasure,
    #[error("path {path:?} does not start with /")]
    PathNotAbsolute { path: String },
    #[error("path {path:?}: {source}")]
    Path {
        path: String,
        source: hyper::http::uri::InvalidUri,
    },
    #[error("host {host:?} is not a header value")]
    HostHeader { host: String },
    #[error("TLS server name {name:?}")]
    ServerName { name: String },
    #[error("TLS: {source}")]
    Tls {
        source: Box<tokio_rustls::rustls::Error>,
    },
    #[error("CA file {}: {source}", path.display())]
    CaFileRead {
        path: PathBuf,
        source: Box<tokio_rustls::rustls::pki_types::pem::Error>,
    },
    #[error("CA file {}: {source}", path.display())]
    CaFileCertificate {
        path: PathBuf,
        source: Box<tokio_rustls::rustls::Error>,
    },
    #[error("CA file {}: no certificate", path.display())]
    CaFileEmpty { path: PathBuf },
    #[error(transparent)]
    Dns(#[from] DnsCheckError),
}

/// A configuration the supervisor refuses; nothing was changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HealthError {
    #[error("service {0:?} is listed twice")]
    DuplicateService(String),
    #[error("service {service:?}, monitor {monitor:?}: {reason}")]
    InvalidMonitor {
        service: String,
        monitor: String,
        reason: MonitorSpecError,
    },
}

/// A monitor's check, ready to run: everything parsed and loaded once.
enum Checker {
    Tcp(SocketAddr),
    Http(http::HttpChecker),
    Dns(dns::DnsChecker),
    Icmp(IpAddr),
}

impl Checker {
    fn new(
        target: IpAddr,
        service_port: u16,
        spec: &MonitorSpec,
    ) -> Result<Checker, MonitorSpecError> {
        let addr = SocketAddr::new(target, spec.port.unwrap_or(service_port));
        if spec.interval.is_zero() {
            return Err(MonitorSpecError::ZeroInterval);
        }
        if spec.timeout.is_zero() {
            return Err(MonitorSpecError::ZeroTimeout);
        }
        Ok(match &spec.kind {
            MonitorKind::Tcp => Checker::Tcp(addr),
            MonitorKind::Http(check) => Checker::Http(http::HttpChecker::new(addr, check, None)?),
            MonitorKind::Https(check, tls) => {
                Checker::Http(http::HttpChecker::new(addr, check, Some(tls))?)
            }
            MonitorKind::Dns(check) => Checker::Dns(dns::DnsChecker::new(addr, check)?),
            MonitorKind::Icmp => Checker::Icmp(target),
        })
    }

    /// One check, without a timeout of its own.
    async fn check(&self) -> Result<(), CheckError> {
        match self {
            Checker::Tcp(addr) => tcp::connect(*addr).await,
            Checker::Http(checker) => checker.check().await,
            Checker::Dns(checker) => checker.check().await,
            Checker::Icmp(target) => icmp::ping(*target).await,
        }
    }

    /// One check within `timeout`.
    async fn check_within(&self, timeout: Duration) -> Result<(), CheckError> {
        tokio::time::timeout(timeout, self.check())
            .await
            .unwrap_or(Err(CheckError::Timeout(timeout)))
    }
}

/// Runs one check of `spec` against `target` (`port` unless the spec has its own) within the
/// spec's timeout, outside any supervisor: for tools and tests.
pub async fn check_once(target: IpAddr, port: u16, spec: &MonitorSpec) -> Result<(), CheckError> {
    let checker = Checker::new(target, port, spec).map_err(CheckError::Invalid)?;
    checker.check_within(spec.timeout).await
}

/// A random number, without a random number crate: std's hasher keys are random per process
/// and per `RandomState`, and the counter makes every call different.
fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}

/// The state of one configured service, behind [`ServiceBoard::services`].
struct ServiceEntry {
    /// Which run of the service's monitors this is: results of an older run are dropped.
    epoch: u64,
    threshold: u32,
    up: bool,
    transitions: u64,
    last_change: Option<SystemTime>,
    monitors: Vec<MonitorEntry>,
}

struct MonitorEntry {
    name: String,
    kind: &'static str,
    weight: u32,
    tracker: MonitorTracker,
    checks: u64,
    failures: u64,
    transitions: u64,
    last: Option<CheckResult>,
}

/// Every monitored service's state, and the channel its changes go out on: shared by the
/// supervisor and its monitors' tasks.
struct ServiceBoard {
    services: Mutex<HashMap<String, ServiceEntry>>,
    events: broadcast::Sender<HealthEvent>,
}

impl ServiceBoard {
    /// Takes one check result of monitor `index` of run `epoch` of `service`. Returns false
    /// when that run is over (the service was removed or restarted): the monitor stops.
    fn record(&self, service: &str, epoch: u64, index: usize, result: CheckResult) -> bool {
        let mut services = self
            .services
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(entry) = services.get_mut(service).filter(|e| e.epoch == epoch) else {
            return false;
        };
        let ok = result.error.is_none();
        let monitor = &mut entry.monitors[index];
        monitor.checks += 1;
        if !ok {
            monitor.failures += 1;
        }
        let detail = match &result.error {
            Some(error) => error.clone(),
            None => format!(
                "check passed ({} in a row)",
                monitor.tracker.ok_run().saturating_add(1)
            ),
        };
        let changed = monitor.tracker.record(ok);
        if let Some(error) = &result.error {
            debug!(service, monitor = %monitor.name, %error, "check failed");
        }
        monitor.last = Some(result);
        let Some(monitor_up) = changed else {
            return true;
        };
        monitor.transitions += 1;
        info!(service, monitor = %monitor.name, kind = monitor.kind, up = monitor_up, reason = %detail,
            "monitor state changed");
        let reason = format!(
            "monitor {} {}: {detail}",
            monitor.name,
            if monitor_up { "up" } else { "down" }
        );

        let up = service_up(
            entry.monitors.iter().map(|m| (m.tracker.up(), m.weight)),
            entry.threshold,
        );
        if up != entry.up {
            let at = SystemTime::now();
            entry.up = up;
            entry.transitions += 1;
            entry.last_change = Some(at);
            if up {
                info!(service, up, transitions = entry.transitions, %reason, "service state changed");
            } else {
                warn!(service, up, transitions = entry.transitions, %reason, "service state changed");
            }
            // No receiver is fine; a lagging one loses the oldest events.
            let _ = self.events.send(HealthEvent {
                service: service.to_owned(),
                up,
                at,
                reason,
                transitions: entry.transitions,
            });
        }
        true
    }
}

/// The running monitors of one service.
struct Running {
    spec: ServiceMonitors,
    tasks: Vec<Supervised>,
}

/// Runs the monitors of the configured services; see the module documentation.
///
/// Dropping the supervisor stops every monitor.
pub struct HealthSupervisor {
    shared: Arc<ServiceBoard>,
    running: Mutex<HashMap<String, Running>>,
    next_epoch: AtomicU64,
}

impl Default for HealthSupervisor {
    fn default() -> Self {
        Self::new()
    }
}

impl HealthSupervisor {
    pub fn new() -> Self {
        let (events, _) = broadcast::channel(EVENT_BACKLOG);
        HealthSupervisor {
            shared: Arc::new(ServiceBoard {
                services: Mutex::new(HashMap::new()),
                events,
            }),
            running: Mutex::new(HashMap::new()),
            next_epoch: AtomicU64::new(1),
        }
    }

    /// Service state changes from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<HealthEvent> {
        self.shared.events.subscribe()
    }

    /// Whether `services` can be monitored: no service twice, every checker builds. Changes
    /// nothing (a reload checks before anything switches).
    pub fn check(services: &[ServiceMonitors]) -> Result<(), HealthError> {
        let mut seen = HashSet::new();
        for spec in services {
            if !seen.insert(&spec.service) {
                return Err(HealthError::DuplicateService(spec.service.clone()));
            }
            for m in &spec.monitors {
                Checker::new(spec.target, spec.port, m).map_err(|reason| {
                    HealthError::InvalidMonitor {
                        service: spec.service.clone(),
                        monitor: m.name.clone(),
                        reason,
                    }
                })?;
            }
        }
        Ok(())
    }

    /// Makes `services` the monitored set: starts new services' monitors, stops removed
    /// services' monitors, restarts those whose [`ServiceMonitors`] changed, leaves the others
    /// running. Stopped monitors are aborted mid-check (their connections closed) and have
    /// ended when this returns. On an error nothing changes. Needs a tokio runtime.
    pub async fn set_services(&self, services: Vec<ServiceMonitors>) -> Result<(), HealthError> {
        // Validate and build every checker first, so that an error changes nothing.
        let mut seen = HashSet::new();
        let mut wanted = Vec::with_capacity(services.len());
        for spec in services {
            if !seen.insert(spec.service.clone()) {
                return Err(HealthError::DuplicateService(spec.service));
            }
            wanted.push(spec);
        }

        let mut stopped = Vec::new();
        {
            let mut running = self
                .running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut to_start = Vec::new();
            for spec in &wanted {
                if running.get(&spec.service).is_some_and(|r| r.spec == *spec) {
                    continue;
                }
                let checkers = spec
                    .monitors
                    .iter()
                    .map(|m| {
                        Checker::new(spec.target, spec.port, m).map_err(|reason| {
                            HealthError::InvalidMonitor {
                                service: spec.service.clone(),
                                monitor: m.name.clone(),
                                reason,
                            }
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                to_start.push((spec.clone(), checkers));
            }

            let keep: HashSet<&str> = wanted.iter().map(|s| s.service.as_str()).collect();
            let mut services = self
                .shared
                .services
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // Removed services: gone from the snapshot, their monitors stopped.
            let removed: Vec<String> = running
                .keys()
                .filter(|k| !keep.contains(k.as_str()))
                .cloned()
                .collect();
            for service in removed {
                if let Some(r) = running.remove(&service) {
                    info!(service, "monitors stopped: service removed");
                    stopped.extend(r.tasks);
                }
                services.remove(&service);
            }
            // New and changed services.
            for (spec, checkers) in to_start {
                let epoch = self.next_epoch.fetch_add(1, Ordering::Relaxed);
                let previous = services.remove(&spec.service);
                if let Some(r) = running.remove(&spec.service) {
                    info!(service = %spec.service, "monitors restarted: service changed");
                    stopped.extend(r.tasks);
                }
                // A changed service keeps its state and its flap count.
                let initial_up = previous.as_ref().map_or(spec.initial_up, |p| p.up);
                let monitors: Vec<MonitorEntry> = spec
                    .monitors
                    .iter()
                    .map(|m| MonitorEntry {
                        name: m.name.clone(),
                        kind: m.kind.label(),
                        weight: m.weight,
                        tracker: MonitorTracker::new(initial_up, m.fall, m.rise),
                        checks: 0,
                        failures: 0,
                        transitions: 0,
                        last: None,
                    })
                    .collect();
                let up = service_up(
                    monitors.iter().map(|m| (m.tracker.up(), m.weight)),
                    spec.threshold,
                );
                let (transitions, last_change) =
                    previous.map_or((0, None), |p| (p.transitions, p.last_change));
                services.insert(
                    spec.service.clone(),
                    ServiceEntry {
                        epoch,
                        threshold: spec.threshold,
                        up,
                        transitions,
                        last_change,
                        monitors,
                    },
                );
                let tasks = spec
                    .monitors
                    .iter()
                    .zip(checkers)
                    .enumerate()
                    .map(|(index, (m, checker))| {
                        supervise_monitor(
                            self.shared.clone(),
                            spec.service.clone(),
                            epoch,
                            index,
                            m,
                            checker,
                        )
                    })
                    .collect();
                debug!(service = %spec.service, monitors = spec.monitors.len(), up, "monitors started");
                running.insert(spec.service.clone(), Running { spec, tasks });
            }
        }
        for task in stopped {
            task.stop().await;
        }
        Ok(())
    }

    /// Every configured service's health.
    pub fn snapshot(&self) -> HashMap<String, ServiceHealth> {
        let services = self
            .shared
            .services
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        services
            .iter()
            .map(|(service, e)| {
                let monitors = e
                    .monitors
                    .iter()
                    .map(|m| MonitorState {
                        name: m.name.clone(),
                        kind: m.kind,
                        up: m.tracker.up(),
                        weight: m.weight,
                        consecutive_successes: m.tracker.ok_run(),
                        consecutive_failures: m.tracker.fail_run(),
                        checks: m.checks,
                        failures: m.failures,
                        transitions: m.transitions,
                        last: m.last.clone(),
                    })
                    .collect();
                let health = ServiceHealth {
                    up: e.up,
                    transitions: e.transitions,
                    last_change: e.last_change,
                    monitors,
                };
                (service.clone(), health)
            })
            .collect()
    }

    /// Whether `service` is UP; `None` for a service not configured.
    pub fn is_up(&self, service: &str) -> Option<bool> {
        let services = self
            .shared
            .services
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        services.get(service).map(|e| e.up)
    }

    /// Stops every monitor and waits for them to end.
    pub async fn shutdown(&self) {
        let _ = self.set_services(Vec::new()).await;
    }
}

impl Drop for HealthSupervisor {
    fn drop(&mut self) {
        let running = self.running.get_mut().unwrap_or_else(|e| e.into_inner());
        for r in running.values() {
            for task in &r.tasks {
                task.abort();
            }
        }
    }
}

/// The supervised task of monitor `index` of run `epoch` of `service`, named
/// `monitor/<service>/<monitor>`. A run that dies (a panic, say) is a check that could not be
/// made: the restart records it as a failed check before checking again, so a monitor that
/// cannot run takes its service DOWN by its fall rule, like a target that does not answer,
/// and never holds it UP.
fn supervise_monitor(
    shared: Arc<ServiceBoard>,
    service: String,
    epoch: u64,
    index: usize,
    spec: &MonitorSpec,
    checker: Checker,
) -> Supervised {
    let (interval, timeout) = (spec.interval, spec.timeout);
    let checker = Arc::new(checker);
    let name = format!("monitor/{service}/{}", spec.name);
    supervise::spawn(name, move |run: Run| {
        // Recorded here, before the new run is first polled: a run that dies again at once
        // (before checking) has still counted one failed check per death.
        let live = run.last_failure.is_none_or(|why| {
            let result = CheckResult {
                at: SystemTime::now(),
                elapsed: Duration::ZERO,
                error: Some(format!("the monitor could not check: its task {why}")),
            };
            shared.record(&service, epoch, index, result)
        });
        let (shared, service, checker) = (shared.clone(), service.clone(), checker.clone());
        async move {
            if live {
                run_monitor(shared, service, epoch, index, checker, interval, timeout).await;
            }
        }
    })
}

/// One monitor's loop: a check every `interval`, each within `timeout`, until the supervisor
/// aborts the task or the run is over.
async fn run_monitor(
    shared: Arc<ServiceBoard>,
    service: String,
    epoch: u64,
    index: usize,
    checker: Arc<Checker>,
    interval: Duration,
    timeout: Duration,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let (at, started) = (SystemTime::now(), Instant::now());
        let outcome = checker.check_within(timeout).await;
        let result = CheckResult {
            at,
            elapsed: started.elapsed(),
            error: outcome.err().map(|e| e.to_string()),
        };
        if !shared.record(&service, epoch, index, result) {
            return;
        }
    }
}
