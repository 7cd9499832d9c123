//! [`HealthSupervisor`]: one supervised task per monitor, the services' states from their
//! monitors' results, and the events of their changes.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use tokio::sync::broadcast;
use tracing::{debug, info, warn};

use super::checker::Checker;
use super::spec::{MonitorSpec, ServiceMonitors};
use super::state::{MonitorTracker, service_up};
use super::{CheckResult, HealthError, HealthEvent, MonitorState, ServiceHealth};
use crate::supervise::{self, Run, Supervised};

/// Events kept for a subscriber that does not keep up; older ones are dropped for it.
const EVENT_BACKLOG: usize = 1024;

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
    /// Bumped, under the `services` lock, whenever a verdict or the monitored set changes:
    /// readers that keep the verdicts by id ([`crate::world::World`]) read them again only then.
    version: AtomicU64,
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
            self.version.fetch_add(1, Ordering::AcqRel);
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
                version: AtomicU64::new(0),
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
            self.shared.version.fetch_add(1, Ordering::AcqRel);
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

    /// A number that changes whenever a verdict or the monitored set does. Read it before the
    /// verdicts it stands for ([`HealthSupervisor::verdicts`]).
    pub fn version(&self) -> u64 {
        self.shared.version.load(Ordering::Acquire)
    }

    /// The verdicts of `services`, in their order ([`HealthSupervisor::is_up`] for each), read
    /// under one lock.
    pub fn verdicts<'a>(&self, services: impl Iterator<Item = &'a str>) -> Vec<Option<bool>> {
        let board = self
            .shared
            .services
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        services.map(|s| board.get(s).map(|e| e.up)).collect()
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
