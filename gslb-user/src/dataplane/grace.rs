//! Waiting for an RCU grace period, off the publish's path: [`GraceTracker::start`] right after
//! a switch of `CONFIG` hands out a [`Ticket`], and [`GraceTracker::wait`] returns once a grace
//! period that began after that call has ended.
//!
//! Why a grace period: every BPF program runs inside an RCU read-side section, so once one has
//! ended after the switch, no packet that read the old `CONFIG` still runs, and its generation's
//! entries (`ANSWERS`, `DOMAINS`: `BPF_F_NO_PREALLOC`, a freed element may be reused at once) and
//! its choice parity can be deleted or rewritten. A fixed pause is not enough: a program run
//! can be preempted inside its section (`BPF_PROG_TEST_RUN` under preemptible RCU, softirqs
//! on PREEMPT_RT), and `synchronize_rcu` waits for such readers too.
//!
//! How: `membarrier(MEMBARRIER_CMD_GLOBAL)`, which calls `synchronize_rcu()`, but only while
//! more than one CPU is online (on one CPU it returns at once, and under preemptible RCU a
//! reader may still be preempted inside its section); otherwise, or when the kernel does not
//! offer it (`nohz_full`, or no `CONFIG_MEMBARRIER`), the update of a one-slot
//! `ARRAY_OF_MAPS`, after which the kernel waits with `synchronize_rcu()` for the programs
//! running to end (`maybe_wait_bpf_programs`). Both take 5–30 ms, so one thread waits
//! while the publish returns; the next publish waits for the ticket only if it comes sooner.
//!
//! Why tickets rather than instants: a ticket is handed out under the lock the thread reads it
//! under before it starts waiting, so a grace period that completes it began after the ticket
//! (and so after the `CONFIG` store before it); two instants read from the clock could be equal.
//! One wait serves every ticket handed out before it began.

use std::{
    io,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    sync::{Arc, Condvar, Mutex, MutexGuard},
    thread::JoinHandle,
};

use tracing::error;

use super::syscall::{BPF_MAP_CREATE, BPF_MAP_UPDATE_ELEM, bpf};
use super::{DataplaneError, Result};

/// A grace period to wait for: one that begins after [`GraceTracker::start`] returned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ticket(u64);

/// The thread that waits for grace periods, and what it has waited for.
pub(super) struct GraceTracker {
    shared: Arc<Shared>,
    thread: Mutex<Waiter>,
}

/// The waiting thread, started by the first ticket that needs a wait, not when the maps are
/// loaded: gslbd loads them as root before it drops its privileges, and the drop needs the
/// process to have one thread (capabilities are per thread: `privilege::drop_to`).
enum Waiter {
    Idle(Box<dyn FnMut() -> io::Result<()> + Send>),
    Running(JoinHandle<()>),
    /// Could not be started (the waits fail), or stopped.
    Gone,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// The last ticket handed out.
    started: u64,
    /// Every ticket up to this one has had a grace period begin after it and end.
    completed: u64,
    /// Why the thread stopped waiting (it then waits no more: every later wait fails).
    failed: Option<io::Error>,
    /// The tracker is dropped: the thread ends.
    stop: bool,
}

impl GraceTracker {
    /// The tracker (its thread starts at the first wait); refused when the kernel offers no
    /// way to wait.
    pub(super) fn new() -> Result<Self> {
        let membarrier = membarrier_global_supported();
        // Made even when membarrier works: needed whenever only one CPU is online, and an
        // error here shows at load rather than at the first publish.
        let fallback = MapInMap::new()
            .map_err(|source| DataplaneError::GraceUnsupported { membarrier, source })?;
        Ok(Self::with(move || {
            if membarrier && online_cpus() > 1 {
                membarrier_global()
            } else {
                fallback.synchronize()
            }
        }))
    }

    /// A tracker whose thread waits with `synchronize` (tests give their own).
    fn with(synchronize: impl FnMut() -> io::Result<()> + Send + 'static) -> Self {
        GraceTracker {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                changed: Condvar::new(),
            }),
            thread: Mutex::new(Waiter::Idle(Box::new(synchronize))),
        }
    }

    /// Starts the waiting thread if it has not started; if it cannot be, every wait fails.
    fn ensure_running(&self) {
        let mut thread = self
            .thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut synchronize = match std::mem::replace(&mut *thread, Waiter::Gone) {
            Waiter::Idle(synchronize) => synchronize,
            running_or_gone => {
                *thread = running_or_gone;
                return;
            }
        };
        let shared = self.shared.clone();
        match std::thread::Builder::new()
            .name("gslb-rcu-grace".into())
            .spawn(move || shared.run(&mut synchronize))
        {
            Ok(handle) => *thread = Waiter::Running(handle),
            Err(error) => {
                error!(error = %error, "starting the RCU grace-period thread failed: the fast path cannot be republished");
                let mut state = self.shared.lock();
                state.failed = Some(error);
                self.shared.changed.notify_all();
            }
        }
    }

    /// A ticket whose grace period the thread begins only at the first [`GraceTracker::wait`]
    /// (or ticket from [`GraceTracker::start`]): for the maps just loaded, before gslbd drops
    /// its privileges, when it may not start a thread.
    pub(super) fn deferred(&self) -> Ticket {
        let mut state = self.shared.lock();
        state.started += 1;
        Ticket(state.started)
    }

    /// Call right after the switch: the ticket of a grace period that begins after it. The
    /// thread starts waiting at once (or after the wait in course, which began too early).
    pub(super) fn start(&self) -> Ticket {
        let ticket = self.deferred();
        self.ensure_running();
        self.shared.changed.notify_all();
        ticket
    }

    /// Whether `ticket`'s grace period has ended (or the thread failed: the error).
    #[cfg(test)]
    fn is_complete(&self, ticket: Ticket) -> Result<bool> {
        let state = self.shared.lock();
        state.check()?;
        Ok(state.completed >= ticket.0)
    }

    /// Waits until `ticket`'s grace period has ended; fails when the thread stopped waiting.
    pub(super) fn wait(&self, ticket: Ticket) -> Result<()> {
        self.ensure_running();
        let mut state = self.shared.lock();
        loop {
            state.check()?;
            if state.completed >= ticket.0 {
                return Ok(());
            }
            state = self
                .shared
                .changed
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

impl Drop for GraceTracker {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.changed.notify_all();
        let thread = std::mem::replace(
            &mut *self
                .thread
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            Waiter::Gone,
        );
        if let Waiter::Running(thread) = thread {
            // Ends after the wait in course, if any (milliseconds); a panic was reported.
            let _ = thread.join();
        }
    }
}

impl Shared {
    /// The state; the lock is never held across a panic point but the thread's own, whose
    /// guard marks the failure, so a poisoned lock's state is whole.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The thread: waits for a grace period whenever a ticket is newer than the last one
    /// completed, and completes every ticket handed out before that wait began.
    fn run(&self, synchronize: &mut dyn FnMut() -> io::Result<()>) {
        // On a panic the waiters must not wait for ever: they get the error instead.
        let guard = FailOnUnwind(self);
        let mut state = self.lock();
        loop {
            if state.stop {
                break;
            }
            if state.completed == state.started {
                state = self
                    .changed
                    .wait(state)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            }
            let covered = state.started;
            drop(state);
            let result = synchronize();
            state = self.lock();
            match result {
                Ok(()) => state.completed = covered,
                Err(error) => {
                    error!(error = %error, "waiting for an RCU grace period failed: the fast path cannot be republished");
                    state.failed = Some(error);
                    self.changed.notify_all();
                    break;
                }
            }
            self.changed.notify_all();
        }
        drop(state);
        std::mem::forget(guard);
    }
}

impl State {
    /// The thread's failure, as an error of its own for each caller.
    fn check(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(DataplaneError::Grace(io::Error::new(
                e.kind(),
                e.to_string(),
            ))),
            None => Ok(()),
        }
    }
}

/// Marks the tracker failed when the thread unwinds (forgotten when it ends normally).
struct FailOnUnwind<'a>(&'a Shared);

impl Drop for FailOnUnwind<'_> {
    fn drop(&mut self) {
        error!("the RCU grace-period thread panicked: the fast path cannot be republished");
        self.0.lock().failed = Some(io::Error::other("the RCU grace-period thread panicked"));
        self.0.changed.notify_all();
    }
}

// membarrier(2) commands (linux/membarrier.h).
const MEMBARRIER_CMD_QUERY: libc::c_int = 0;
const MEMBARRIER_CMD_GLOBAL: libc::c_int = 1;

/// Whether `MEMBARRIER_CMD_GLOBAL` is offered (not under `nohz_full`, nor without
/// `CONFIG_MEMBARRIER`).
fn membarrier_global_supported() -> bool {
    // SAFETY: membarrier takes no pointers.
    let mask = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0) };
    mask > 0 && mask & libc::c_long::from(MEMBARRIER_CMD_GLOBAL) != 0
}

/// `membarrier(MEMBARRIER_CMD_GLOBAL)`: `synchronize_rcu()` when more than one CPU is online.
fn membarrier_global() -> io::Result<()> {
    // SAFETY: membarrier takes no pointers.
    match unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

fn online_cpus() -> libc::c_long {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }
}

/// A one-slot `ARRAY_OF_MAPS` and the array it holds: each update of the slot returns only
/// after `synchronize_rcu()` (the kernel's `maybe_wait_bpf_programs`, Linux >= 4.20), so that
/// no program still runs with the old inner map. No program uses these maps.
struct MapInMap {
    outer: OwnedFd,
    inner: OwnedFd,
}

// Map types (linux/bpf.h).
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_MAP_TYPE_ARRAY_OF_MAPS: u32 = 12;

/// The head of `bpf_attr` for `BPF_MAP_CREATE` (the kernel zeroes the fields after it).
#[repr(C)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
}

/// `bpf_attr` for `BPF_MAP_UPDATE_ELEM`.
#[repr(C)]
struct MapElem {
    map_fd: u32,
    /// The alignment of `key`, zeroed rather than left to the compiler.
    pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

impl MapInMap {
    fn new() -> io::Result<Self> {
        let create = |map_type, inner_map_fd| -> io::Result<OwnedFd> {
            let mut attr = MapCreate {
                map_type,
                key_size: 4,
                value_size: 4,
                max_entries: 1,
                map_flags: 0,
                inner_map_fd,
            };
            // SAFETY: `MapCreate` is the head of `BPF_MAP_CREATE`'s attributes; no pointers.
            let fd = unsafe { bpf(BPF_MAP_CREATE, &mut attr) }?;
            // SAFETY: a new descriptor the kernel handed over, owned by nothing else.
            Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
        };
        let inner = create(BPF_MAP_TYPE_ARRAY, 0)?;
        let outer = create(BPF_MAP_TYPE_ARRAY_OF_MAPS, inner.as_raw_fd() as u32)?;
        Ok(MapInMap { outer, inner })
    }

    /// Puts the inner map in the slot again: returns after a grace period.
    fn synchronize(&self) -> io::Result<()> {
        let (key, value) = (0u32, self.inner.as_raw_fd() as u32);
        let mut attr = MapElem {
            map_fd: self.outer.as_raw_fd() as u32,
            pad: 0,
            key: std::ptr::from_ref(&key) as u64,
            value: std::ptr::from_ref(&value) as u64,
            flags: 0,
        };
        // SAFETY: `key` and `value` are the 4 bytes each the map was created with, live
        // through the call.
        unsafe { bpf(BPF_MAP_UPDATE_ELEM, &mut attr) }.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::mpsc,
        time::{Duration, Instant},
    };

    use super::*;
    use crate::dataplane::can_load_xdp;

    /// A grace period the test ends: the thread reports each wait it begins, and returns from
    /// it when the test says.
    fn controlled() -> (
        GraceTracker,
        mpsc::Receiver<()>,
        mpsc::Sender<io::Result<()>>,
    ) {
        let (began_tx, began) = mpsc::channel();
        let (end, end_rx) = mpsc::channel::<io::Result<()>>();
        let tracker = GraceTracker::with(move || {
            began_tx.send(()).unwrap();
            end_rx.recv().unwrap()
        });
        (tracker, began, end)
    }

    const LONG: Duration = Duration::from_secs(10);

    /// The contract: a ticket completes only when a grace period that began after it ended,
    /// however long ago it was handed out. A wait already in course when the ticket was handed
    /// out (it may have begun before the switch) does not complete it. (A fixed pause after
    /// the switch, the 1 ms this replaces, would call it complete here.)
    #[test]
    fn a_ticket_completes_only_after_a_grace_period_that_began_after_it() {
        let (tracker, began, end) = controlled();
        let first = tracker.start();
        began.recv_timeout(LONG).unwrap();
        // Handed out while the first wait is in course.
        let second = tracker.start();
        std::thread::sleep(Duration::from_millis(5));
        assert!(!tracker.is_complete(first).unwrap());
        assert!(!tracker.is_complete(second).unwrap());
        end.send(Ok(())).unwrap();
        tracker.wait(first).unwrap();
        // The thread begins the second ticket's wait at once; until it ends, not complete.
        began.recv_timeout(LONG).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(!tracker.is_complete(second).unwrap());
        end.send(Ok(())).unwrap();
        tracker.wait(second).unwrap();
        assert!(tracker.is_complete(second).unwrap());
        // Nothing to wait for: the thread waits no more.
        assert!(began.recv_timeout(Duration::from_millis(20)).is_err());
    }

    /// The thread starts only when a ticket needs a wait: gslbd loads the maps (and takes
    /// their ticket) before it drops its privileges, which refuses a process with two threads.
    #[test]
    fn the_thread_starts_only_when_a_ticket_needs_a_wait() {
        let (tracker, began, end) = controlled();
        let at_load = tracker.deferred();
        assert!(began.recv_timeout(Duration::from_millis(20)).is_err());
        assert!(matches!(*tracker.thread.lock().unwrap(), Waiter::Idle(_)));
        end.send(Ok(())).unwrap();
        tracker.wait(at_load).unwrap();
        began.recv_timeout(LONG).unwrap();
        assert!(matches!(
            *tracker.thread.lock().unwrap(),
            Waiter::Running(_)
        ));
    }

    /// Tickets handed out while a wait is in course share the next one.
    #[test]
    fn one_grace_period_completes_every_ticket_handed_out_before_it_began() {
        let (tracker, began, end) = controlled();
        let first = tracker.start();
        began.recv_timeout(LONG).unwrap();
        let tickets: Vec<Ticket> = (0..3).map(|_| tracker.start()).collect();
        end.send(Ok(())).unwrap();
        tracker.wait(first).unwrap();
        began.recv_timeout(LONG).unwrap();
        end.send(Ok(())).unwrap();
        for t in tickets {
            tracker.wait(t).unwrap();
        }
        assert!(began.recv_timeout(Duration::from_millis(20)).is_err());
    }

    /// A failed wait, or a panic of the thread, fails the waiters rather than leaving them
    /// waiting or letting them go on unprotected.
    #[test]
    fn a_failed_or_dead_thread_fails_the_waiters() {
        let (tracker, began, end) = controlled();
        let ticket = tracker.start();
        began.recv_timeout(LONG).unwrap();
        end.send(Err(io::Error::from_raw_os_error(libc::EINVAL)))
            .unwrap();
        assert!(matches!(
            tracker.wait(ticket),
            Err(DataplaneError::Grace(_))
        ));
        assert!(matches!(
            tracker.wait(tracker.start()),
            Err(DataplaneError::Grace(_))
        ));

        let tracker = GraceTracker::with(|| panic!("injected"));
        let ticket = tracker.start();
        assert!(matches!(
            tracker.wait(ticket),
            Err(DataplaneError::Grace(_))
        ));
    }

    /// With the kernel's waits: a ticket completes only once a real wait (membarrier, or the
    /// map-in-map update) that began after it has returned.
    #[test]
    fn a_ticket_completes_after_a_real_grace_period_that_began_after_it() {
        if !can_load_xdp() {
            return;
        }
        let real = GraceTracker::new().unwrap();
        let log = Arc::new(Mutex::new(Vec::<(Instant, Instant)>::new()));
        let membarrier = membarrier_global_supported();
        let fallback = MapInMap::new().unwrap();
        let tracker = GraceTracker::with({
            let log = log.clone();
            move || {
                let began = Instant::now();
                if membarrier {
                    membarrier_global()?;
                }
                fallback.synchronize()?;
                log.lock().unwrap().push((began, Instant::now()));
                Ok(())
            }
        });
        for _ in 0..3 {
            let switched = Instant::now();
            let ticket = tracker.start();
            tracker.wait(ticket).unwrap();
            let returned = Instant::now();
            assert!(
                log.lock()
                    .unwrap()
                    .iter()
                    .any(|&(began, ended)| began >= switched && ended <= returned),
                "no wait began after the ticket and ended before its completion: {log:?}"
            );
        }
        let ticket = real.start();
        real.wait(ticket).unwrap();
    }
}
