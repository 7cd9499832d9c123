//! Supervised long-running tasks: nothing dies silently.
//!
//! [`spawn`] runs a named task made by a factory. When a run panics or returns a fatal error
//! ([`Outcome::failure`]), the failure is logged (`error!`, at most once per [`LOG_EVERY`] per
//! task, with the count of those not logged), counted per task name ([`stats_lines`], shown by
//! `gslbctl stats`), and the factory is called again after a backoff: [`Backoff`] doubles from
//! [`BACKOFF_START`] to [`BACKOFF_CAP`] and starts over after a run that lasted [`HEALTHY_RUN`].
//! A run that returns without a failure ends the task (its own shutdown signal, a run that is
//! over); [`Supervised::stop`] ends it from outside, and dropping the handle aborts it.
//!
//! The factory is told whether this run is a restart and why the last one died ([`Run`]), so
//! that a task whose death means something (a health monitor: a check that could not run) can
//! say so before it starts again.
//!
//! The counters live in one registry per process (gslbd runs one daemon; in-process tests that
//! run several see each other's tasks there, by name). With the `fault-injection` feature
//! (tests), [`inject_panic`] makes named tasks panic where they stand, so a test can kill any
//! supervised task by its name and watch it come back.

use std::{
    any::Any,
    collections::BTreeMap,
    fmt::Display,
    future::Future,
    pin::Pin,
    sync::{
        Arc, LazyLock, Mutex,
        atomic::{AtomicU64, Ordering::Relaxed},
    },
    task::{Context, Poll},
    time::Duration,
};

use tokio::{
    sync::watch,
    task::{AbortHandle, JoinHandle},
    time::Instant,
};
use tracing::{debug, error, info};

/// The first restart waits this long.
pub const BACKOFF_START: Duration = Duration::from_millis(100);
/// Restarts of a task that keeps failing wait at most this long.
pub const BACKOFF_CAP: Duration = Duration::from_secs(30);
/// A run that lasted this long was healthy: the next failure restarts after [`BACKOFF_START`].
pub const HEALTHY_RUN: Duration = Duration::from_secs(60);
/// A task's failures are logged at most this often (the others are counted in the next line).
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// How a run ended, as the supervisor reads it.
pub trait Outcome {
    /// `Some(reason)` for a fatal error (the task is restarted), `None` for a run that ended
    /// as it should (the task ends).
    fn failure(&self) -> Option<String>;
}

impl Outcome for () {
    fn failure(&self) -> Option<String> {
        None
    }
}

impl<T, E: Display> Outcome for Result<T, E> {
    fn failure(&self) -> Option<String> {
        self.as_ref().err().map(ToString::to_string)
    }
}

/// What the factory is told about the run it makes.
#[derive(Clone, Debug, Default)]
pub struct Run {
    /// 0 for the first run, then one more for each restart.
    pub restart: u64,
    /// Why the previous run died (`None` for the first run).
    pub last_failure: Option<String>,
}

/// Restart delays: doubling from [`BACKOFF_START`] up to [`BACKOFF_CAP`].
#[derive(Clone, Debug)]
pub struct Backoff {
    next: Duration,
    cap: Duration,
    start: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(BACKOFF_START, BACKOFF_CAP)
    }
}

impl Backoff {
    pub fn new(start: Duration, cap: Duration) -> Backoff {
        Backoff {
            next: start,
            cap,
            start,
        }
    }

    /// The delay before the next restart.
    pub fn delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.cap);
        d
    }

    /// After a healthy run: the next delay is the first one again.
    pub fn reset(&mut self) {
        self.next = self.start;
    }
}

/// One task name's counters (kept while any task of the name runs or has failed).
#[derive(Default)]
struct Entry {
    running: AtomicU64,
    panics: AtomicU64,
    errors: AtomicU64,
    restarts: AtomicU64,
    #[cfg(any(test, feature = "fault-injection"))]
    fault: fault::Slot,
}

impl Entry {
    fn failures(&self) -> u64 {
        self.panics.load(Relaxed) + self.errors.load(Relaxed)
    }
}

static REGISTRY: LazyLock<Mutex<BTreeMap<String, Arc<Entry>>>> =
    LazyLock::new(|| Mutex::new(BTreeMap::new()));

fn registry() -> std::sync::MutexGuard<'static, BTreeMap<String, Arc<Entry>>> {
    REGISTRY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn entry(name: &str) -> Arc<Entry> {
    let mut reg = registry();
    let e = reg.entry(name.to_owned()).or_default().clone();
    e.running.fetch_add(1, Relaxed);
    e
}

/// A task name without whitespace, so that `gslbctl stats` lines stay `name value`.
fn clean(name: String) -> String {
    if name.contains(char::is_whitespace) {
        name.replace(char::is_whitespace, "_")
    } else {
        name
    }
}

/// A task's counters so far (tests, `gslbctl stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskStats {
    /// Tasks of this name running now.
    pub running: u64,
    pub panics: u64,
    /// Runs that returned a fatal error.
    pub errors: u64,
    pub restarts: u64,
}

/// The counters of every task name known (running, or failed before).
pub fn stats() -> BTreeMap<String, TaskStats> {
    registry()
        .iter()
        .map(|(name, e)| {
            let s = TaskStats {
                running: e.running.load(Relaxed),
                panics: e.panics.load(Relaxed),
                errors: e.errors.load(Relaxed),
                restarts: e.restarts.load(Relaxed),
            };
            (name.clone(), s)
        })
        .collect()
}

/// The counters of the task named `name`, if known.
pub fn task_stats(name: &str) -> Option<TaskStats> {
    stats().remove(name)
}

/// `gslbctl stats` lines: totals, then per task that ever failed its failures and restarts.
pub fn stats_lines() -> String {
    let all = stats();
    let sum = |f: fn(&TaskStats) -> u64| all.values().map(f).sum::<u64>();
    let mut out = format!(
        "tasks_running {}\ntask_panics {}\ntask_errors {}\ntask_restarts {}\n",
        sum(|s| s.running),
        sum(|s| s.panics),
        sum(|s| s.errors),
        sum(|s| s.restarts),
    );
    for (name, s) in all.iter().filter(|(_, s)| s.panics + s.errors > 0) {
        out.push_str(&format!("task_panics{{task=\"{name}\"}} {}\n", s.panics));
        out.push_str(&format!("task_errors{{task=\"{name}\"}} {}\n", s.errors));
        out.push_str(&format!(
            "task_restarts{{task=\"{name}\"}} {}\n",
            s.restarts
        ));
    }
    out
}

/// A supervised task. Dropping it aborts the task (and the run in progress); [`stop`] ends it
/// and waits. Awaiting it waits until it ends by itself.
///
/// [`stop`]: Supervised::stop
pub struct Supervised {
    name: Arc<str>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    /// The run in progress, aborted with the task.
    current: Arc<Mutex<Option<AbortHandle>>>,
}

impl Supervised {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Aborts the task and the run in progress at their next await.
    pub fn abort(&self) {
        self.task.abort();
        if let Some(run) = &*self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            run.abort();
        }
    }

    /// Ends the task: the run in progress is aborted and has ended when this returns, and no
    /// restart follows.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        let _ = (&mut self.task).await;
    }

    /// Waits up to `grace` for the task to end by itself (its own shutdown signal), then
    /// [`stop`](Supervised::stop)s it.
    pub async fn end_within(mut self, grace: Duration) {
        if tokio::time::timeout(grace, &mut self).await.is_err() {
            self.stop().await;
        }
    }

    /// Lets the task run for as long as the runtime does, without a handle.
    pub fn detach(self) {
        std::mem::forget(self);
    }

    /// Whether the task has ended (a run returned without failure, or it was stopped).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl Future for Supervised {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.task).poll(cx).map(|_| ())
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.abort();
    }
}

/// Runs `factory`'s futures as the task `name` (see the module documentation). Needs a tokio
/// runtime.
pub fn spawn<F, Fut>(name: impl Into<String>, factory: F) -> Supervised
where
    F: FnMut(Run) -> Fut + Send + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: Outcome + Send + 'static,
{
    spawn_with(name, Backoff::default(), factory)
}

/// [`spawn`] with its own restart delays.
pub fn spawn_with<F, Fut>(name: impl Into<String>, backoff: Backoff, factory: F) -> Supervised
where
    F: FnMut(Run) -> Fut + Send + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: Outcome + Send + 'static,
{
    let name: Arc<str> = clean(name.into()).into();
    let (stop, stopped) = watch::channel(false);
    let current = Arc::new(Mutex::new(None));
    let task = tokio::spawn(supervise(
        name.clone(),
        backoff,
        factory,
        stopped,
        current.clone(),
    ));
    Supervised {
        name,
        stop,
        task,
        current,
    }
}

/// Ends the run in progress with the supervising task, however that ends (stopped, aborted).
struct RunGuard {
    run: Option<JoinHandle<()>>,
    entry: Arc<Entry>,
    name: Arc<str>,
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        if let Some(run) = &self.run {
            run.abort();
        }
        if self.entry.running.fetch_sub(1, Relaxed) == 1 && self.entry.failures() == 0 {
            // A name that never failed leaves no line behind.
            let mut reg = registry();
            if let Some(e) = reg.get(&*self.name)
                && Arc::ptr_eq(e, &self.entry)
                && e.running.load(Relaxed) == 0
            {
                reg.remove(&*self.name);
            }
        }
    }
}

async fn supervise<F, Fut>(
    name: Arc<str>,
    mut backoff: Backoff,
    mut factory: F,
    mut stopped: watch::Receiver<bool>,
    current: Arc<Mutex<Option<AbortHandle>>>,
) where
    F: FnMut(Run) -> Fut + Send + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: Outcome + Send + 'static,
{
    let entry = entry(&name);
    let mut guard = RunGuard {
        run: None,
        entry: entry.clone(),
        name: name.clone(),
    };
    let mut run = Run::default();
    let mut logged: Option<Instant> = None;
    let mut unlogged = 0u64;
    loop {
        let started = Instant::now();
        let future = factory(run.clone());
        #[cfg(any(test, feature = "fault-injection"))]
        let future = fault::wrap(entry.clone(), name.clone(), future);
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let handle = tokio::spawn(async move {
            let _ = tx.send(future.await.failure());
        });
        *current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(handle.abort_handle());
        guard.run = Some(handle);
        let joined = tokio::select! {
            outcome = &mut rx => outcome.ok(),
            () = stop_requested(&mut stopped) => {
                if let Some(run) = guard.run.take() {
                    run.abort();
                    let _ = run.await;
                }
                debug!(task = %name, "task stopped");
                return;
            }
        };
        let handle = guard.run.take().expect("set above");
        let failure = match (joined, handle.await) {
            (Some(None), _) => {
                debug!(task = %name, "task ended");
                return;
            }
            (Some(Some(error)), _) => {
                entry.errors.fetch_add(1, Relaxed);
                format!("fatal error: {error}")
            }
            (None, Err(e)) if e.is_panic() => {
                entry.panics.fetch_add(1, Relaxed);
                format!("panicked: {}", panic_message(&*e.into_panic()))
            }
            // Cancelled from outside (the runtime shutting down).
            (None, _) => return,
        };
        if started.elapsed() >= HEALTHY_RUN {
            backoff.reset();
        }
        let delay = backoff.delay();
        if logged.is_none_or(|t| t.elapsed() >= LOG_EVERY) {
            error!(task = %name, failure = %failure, restart_in_ms = delay.as_millis() as u64,
                restarts = entry.restarts.load(Relaxed), not_logged = unlogged,
                "supervised task died; restarting");
            logged = Some(Instant::now());
            unlogged = 0;
        } else {
            unlogged += 1;
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = stop_requested(&mut stopped) => return,
        }
        entry.restarts.fetch_add(1, Relaxed);
        run = Run {
            restart: run.restart + 1,
            last_failure: Some(failure),
        };
        info!(task = %name, restart = run.restart, "supervised task restarted");
    }
}

/// Resolves once [`Supervised::stop`] was called or the handle was dropped.
async fn stop_requested(stopped: &mut watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_owned()
    }
}

#[cfg(any(test, feature = "fault-injection"))]
pub use fault::inject_panic;

/// Faults injected by tests (feature `fault-injection`).
#[cfg(any(test, feature = "fault-injection"))]
mod fault {
    use std::{
        future::Future,
        sync::{
            Arc,
            atomic::{AtomicU32, Ordering::Relaxed},
        },
    };

    use tokio::sync::Notify;

    use super::{Entry, registry};

    #[derive(Default)]
    pub(super) struct Slot {
        pending: AtomicU32,
        notify: Notify,
    }

    impl Slot {
        fn take(&self) -> bool {
            self.pending
                .try_update(Relaxed, Relaxed, |p| p.checked_sub(1))
                .is_ok()
        }
    }

    /// Makes the next `times` runs of the tasks named `name` panic: the runs in progress at
    /// once (where they are waiting), then each restart as it starts, until `times` panics
    /// have happened. Returns how many tasks of that name are running.
    pub fn inject_panic(name: &str, times: u32) -> u64 {
        let Some(entry) = registry().get(name).cloned() else {
            return 0;
        };
        entry.fault.pending.fetch_add(times, Relaxed);
        entry.fault.notify.notify_waiters();
        entry.running.load(Relaxed)
    }

    /// `future`, panicking when a fault is pending for its task.
    pub(super) async fn wrap<F: Future + Send + 'static>(
        entry: Arc<Entry>,
        name: Arc<str>,
        future: F,
    ) -> F::Output {
        tokio::pin!(future);
        loop {
            let notified = entry.fault.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            assert!(!entry.fault.take(), "fault injected into task {name}");
            tokio::select! {
                out = &mut future => return out,
                () = &mut notified => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(700));
        let got: Vec<u128> = (0..5).map(|_| b.delay().as_millis()).collect();
        assert_eq!(got, [100, 200, 400, 700, 700]);
        b.reset();
        assert_eq!(b.delay(), Duration::from_millis(100));
    }

    async fn until(what: &str, mut f: impl FnMut() -> bool) {
        for _ in 0..400 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{what} never happened");
    }

    fn fast() -> Backoff {
        Backoff::new(Duration::from_millis(5), Duration::from_millis(20))
    }

    /// A run that panics, then one that returns an error, then one that ends: two restarts,
    /// each counted by kind, the factory told why, and the task ends with the third run.
    #[tokio::test]
    async fn failures_restart_and_a_clean_end_stops() {
        let told = Arc::new(Mutex::new(Vec::new()));
        let task = spawn_with("test-restart", fast(), {
            let told = told.clone();
            move |run: Run| {
                told.lock().unwrap().push(run.last_failure.clone());
                async move {
                    match run.restart {
                        0 => panic!("boom"),
                        1 => Err("socket gone"),
                        _ => Ok(()),
                    }
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("ended");
        let told = told.lock().unwrap().clone();
        assert_eq!(told.len(), 3);
        assert_eq!(told[0], None);
        assert!(told[1].as_deref().unwrap().contains("boom"), "{told:?}");
        assert!(told[2].as_deref().unwrap().contains("socket gone"));
        let s = task_stats("test-restart").expect("failed tasks stay listed");
        assert_eq!((s.panics, s.errors, s.restarts, s.running), (1, 1, 2, 0));
        let lines = stats_lines();
        assert!(
            lines.contains("task_restarts{task=\"test-restart\"} 2\n"),
            "{lines}"
        );
    }

    /// An injected panic kills a run that is waiting; the task comes back and works again.
    #[tokio::test]
    // The run's trailing `()` gives the endless loop the output type `()`; a `;` would not.
    #[allow(clippy::semicolon_if_nothing_returned)]
    async fn an_injected_panic_restarts_the_task() {
        let ticks = Arc::new(AtomicU32::new(0));
        let task = spawn_with("test-inject", fast(), {
            let ticks = ticks.clone();
            move |_| {
                let ticks = ticks.clone();
                async move {
                    loop {
                        ticks.fetch_add(1, Relaxed);
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    #[allow(unreachable_code)]
                    ()
                }
            }
        });
        until("a first tick", || ticks.load(Relaxed) > 0).await;
        assert_eq!(inject_panic("test-inject", 1), 1);
        until("a restart", || {
            task_stats("test-inject").is_some_and(|s| s.restarts == 1)
        })
        .await;
        let before = ticks.load(Relaxed);
        until("ticks after the restart", || {
            ticks.load(Relaxed) > before + 2
        })
        .await;
        assert_eq!(task_stats("test-inject").unwrap().panics, 1);
        task.stop().await;
        assert_eq!(task_stats("test-inject").unwrap().running, 0);
    }

    /// Stopping ends the run in progress and no restart follows; a name that never failed
    /// leaves the registry.
    #[tokio::test]
    async fn stop_ends_the_run() {
        struct Flag(Arc<AtomicU32>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.fetch_add(1, Relaxed);
            }
        }
        let dropped = Arc::new(AtomicU32::new(0));
        let task = spawn_with("test-stop", fast(), {
            let dropped = dropped.clone();
            move |_| {
                let flag = Flag(dropped.clone());
                async move {
                    let _flag = flag;
                    std::future::pending::<()>().await;
                }
            }
        });
        until("running", || task_stats("test-stop").is_some()).await;
        task.stop().await;
        assert_eq!(dropped.load(Relaxed), 1, "the run was dropped once");
        assert_eq!(task_stats("test-stop"), None);
    }
}
