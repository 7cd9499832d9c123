//! The UDP loop on a thread of its own: it waits for datagrams in `poll(2)` and answers them
//! there, instead of being a tokio task woken by the reactor. Under load a task's turn cost a
//! wake-up through the runtime (the reactor's `epoll_wait`, the task queued, often another
//! worker woken to steal it) for every few datagrams, which the responder's profile showed
//! beside the answering itself; a thread that owns its socket pays one `poll` when the socket
//! is empty and nothing when it is not. The async side only waits for `shutdown` and tells the
//! thread, which looks every [`STOP_CHECK`] at the latest.

use std::{
    io,
    net::UdpSocket,
    os::fd::{AsRawFd, RawFd},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use tokio::time::Instant;
use tracing::debug;

use super::{Sources, batch::Batch};
use crate::responder::{
    Responder, Transport, Written,
    rrl::{self, Verdict},
};

/// How long the thread waits in `poll` before it looks at the stop flag again.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// Sets the flag when dropped: the thread stops also when the task awaiting it is dropped
/// (a runtime shutting down) rather than told.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Serves `socket` on a thread until `shutdown` (or until this future is dropped), then waits
/// for the thread to end. A panic of the thread is this future's.
pub(super) async fn serve(
    socket: tokio::net::UdpSocket,
    responder: Arc<Responder>,
    sources: Sources,
    shutdown: impl Future<Output = ()>,
) {
    // Out of the reactor: the thread alone reads and writes it, and owns it, so that it is
    // closed after the thread's last use however this future ends.
    let socket = match socket.into_std() {
        Ok(socket) => socket,
        Err(error) => {
            debug!(%error, "udp socket out of the runtime");
            return;
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_drop = StopOnDrop(stop.clone());
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    let thread = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("dns-udp".to_owned())
            .spawn(move || {
                run(&socket, &responder, sources, &stop);
                let _ = done.send(());
            })
    };
    let thread = match thread {
        Ok(thread) => thread,
        Err(error) => {
            debug!(%error, "udp thread");
            return;
        }
    };
    tokio::pin!(finished);
    tokio::select! {
        () = shutdown => {}
        _ = &mut finished => {}
    }
    stop.store(true, Ordering::Relaxed);
    // Ends within STOP_CHECK (or has ended: `done` sent, or dropped by a panic's unwinding);
    // the join then waits for no more than the thread's exit.
    let _ = finished.await;
    if let Err(panic) = thread.join() {
        std::panic::resume_unwind(panic);
    }
}

/// The loop: every datagram waiting, up to a batch at a time, answered, until `stop`.
fn run(socket: &UdpSocket, responder: &Responder, mut sources: Sources, stop: &AtomicBool) {
    let fd = socket.as_raw_fd();
    pin_to_incoming_cpu(socket);
    let mut batch = Batch::new();
    while !stop.load(Ordering::Relaxed) {
        let n = match batch.receive(fd) {
            Ok(n) => n,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                wait(fd, libc::POLLIN);
                continue;
            }
            Err(error) => {
                // ICMP errors of earlier sends surface here on some kernels; keep serving.
                debug!(%error, "udp receive");
                continue;
            }
        };
        // One clock reading for the batch (its datagrams arrived together): the RRL's and the
        // recorder's.
        let (now, now_ns) = (Instant::now(), rrl::now_ns());
        for i in 0..n {
            let (request, peer, reply) = batch.slot(i);
            let Some(peer) = peer else { continue };
            let written = responder.respond_into(request, peer, Transport::Udp, reply);
            if written == Written::Nothing {
                continue;
            }
            // Response rate limiting (`[rrl]`): over the limit, nothing, or every slip-th one
            // truncated so that a real client retries over TCP. TCP is never limited, nor a
            // client that brought back our server cookie (it proved its address).
            let verdict = if written == Written::Verified {
                Verdict::Send
            } else {
                responder.rrl().verdict(peer, now_ns)
            };
            match verdict {
                Verdict::Send => sources.answered(peer, reply, now),
                Verdict::Drop => continue,
                Verdict::Slip => match rrl::truncated(reply) {
                    Some(tc) => *reply = tc,
                    None => continue,
                },
            }
            batch.queue(i);
        }
        while batch.pending() && !stop.load(Ordering::Relaxed) {
            match batch.send(fd) {
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    wait(fd, libc::POLLOUT);
                }
                // That answer is dropped (`Batch::send`); the others still go.
                Err(error) => debug!(%error, "udp send"),
            }
        }
    }
}

/// Runs this thread on the CPU the socket takes its datagrams on (SO_INCOMING_CPU, set by
/// `daemon::listen` with `server.socket_affinity`), where the kernel hands it the queries and
/// wakes it; a socket without one leaves the thread where the scheduler puts it, as does a CPU
/// this process may not use.
fn pin_to_incoming_cpu(socket: &UdpSocket) {
    let Ok(cpu) = socket2::SockRef::from(socket).cpu_affinity() else {
        return;
    };
    // Unset: -1 (read as a huge number).
    if cpu >= libc::CPU_SETSIZE as usize {
        return;
    }
    if let Err(error) = pin_thread_to_cpu(cpu) {
        debug!(cpu, %error, "udp thread not pinned");
    }
}

/// Runs the calling thread on `cpu` only (`cpu` < CPU_SETSIZE, else an error).
pub(crate) fn pin_thread_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes within it (`cpu` <
    // CPU_SETSIZE); sched_setaffinity reads the set of the size given.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Waits until `fd` has `events` or [`STOP_CHECK`] has passed (or a signal came).
fn wait(fd: RawFd, events: libc::c_short) {
    let mut pollfd = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let r = unsafe { libc::poll(&raw mut pollfd, 1, STOP_CHECK.as_millis() as libc::c_int) };
    if r < 0 {
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            debug!(%error, "udp poll");
            // Not a busy loop on a persistent error.
            std::thread::sleep(STOP_CHECK);
        }
    }
}
