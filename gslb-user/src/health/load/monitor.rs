//! The load monitors' tasks: one supervised task per monitor, its readings published to the
//! daemon's watch.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, SystemTime},
};

use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::health::HealthError;
use crate::supervise::{self, Supervised};

use super::reader::LoadReader;
use super::{LoadMonitorSpec, LoadReading, LoadReadings, Moved, ServiceLoadMonitors};

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
