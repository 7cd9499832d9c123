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
//! Files: `spec.rs` what a monitor is configured to do, `checker.rs` one check ready to run,
//! `supervisor.rs` the monitors' tasks and the services' states, `state.rs` fall/rise and
//! thresholds (pure); `tcp.rs`, `http.rs`, `dns.rs`, `icmp.rs` the checks of each kind.
//!
//! [`load`] reads services' load (connections, bandwidth) from their backends: Prometheus
//! gauges and nginx `stub_status`, over the same HTTP(S) client.
//!
//! [`link`] watches links' inbound load (bytes per second from the kernel's interface counters
//! against a threshold), for the bandwidth rule of F5's inbound link methods.

mod checker;
pub(crate) mod dns;
mod http;
pub(crate) mod icmp;
pub(crate) mod icmp_error;
pub mod link;
pub mod load;
mod needle;
mod spec;
pub mod state;
mod supervisor;
mod tcp;

use std::time::{Duration, SystemTime};

use checker::random_u64;
pub use checker::{CheckError, check_once};
pub use dns::DnsCheckError;
pub use http::http_check_over;
pub(crate) use icmp::{Echo, echo};
pub use icmp::{IcmpMode, icmp_mode};
pub use spec::{
    DnsCheck, HttpCheck, MonitorKind, MonitorSpec, MonitorSpecError, ServiceMonitors, TlsCheck,
};
pub use supervisor::HealthSupervisor;

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
