//! Labs of more than two hosts: network namespaces ([`Netns`]), a TAP wire between them
//! ([`TapWire`]) and the frames read from it.

use std::{
    net::{IpAddr, Ipv4Addr},
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicU32, Ordering},
    time::{Duration, Instant},
};

use crate::{dig, run};

/// A network namespace with its loopback up, deleted on drop (and everything in it). For labs
/// with more than the two hosts of [`Lab`](crate::Lab).
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// `tag` keeps names of tests that run in parallel apart; `role` names the host.
    pub fn new(tag: &str, role: &str) -> Netns {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let name = format!("gslb-{tag}-{}-{seq}-{role}", std::process::id());
        run(Command::new("ip").args(["netns", "add", &name]));
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// Runs `ip -n <ns> args…`; panics when it fails.
    pub fn ip(&self, args: &[&str]) {
        run(Command::new("ip").arg("-n").arg(&self.name).args(args));
    }

    /// A command run inside the namespace with `ip netns exec`.
    pub fn exec(&self, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name, program]);
        cmd
    }

    /// A command run inside the namespace's network namespace only, keeping this mount
    /// namespace (so that /sys/fs/bpf is the host's bpffs): for daemons that pin BPF objects.
    pub fn nsenter(&self, program: &Path) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", self.name))
            .arg(program);
        cmd
    }

    /// `dig` from the namespace (as [`Lab::dig`]); `-b ADDR` in `args` picks the source.
    pub fn dig(&self, server: IpAddr, args: &[&str]) -> String {
        dig(self.exec("dig"), server, args)
    }

    /// Runs `f` on a thread that has entered the namespace (sockets it makes stay there).
    pub fn enter<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let name = self.name.clone();
        std::thread::scope(|s| {
            s.spawn(move || {
                enter_netns(&name);
                f()
            })
            .join()
            .expect("thread in netns panicked")
        })
    }

    /// Starts a thread that lives in the namespace, e.g. one running a tokio runtime whose
    /// sockets must be made there.
    pub fn spawn<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let name = self.name.clone();
        std::thread::spawn(move || {
            enter_netns(&name);
            f()
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Moves the calling thread into the network namespace `name` (of `ip netns`).
pub fn enter_netns(name: &str) {
    let path = PathBuf::from(format!("/run/netns/{name}"));
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    use std::os::fd::AsRawFd;
    // SAFETY: a valid namespace fd; only this thread changes namespace.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(
        rc,
        0,
        "setns {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}

/// Gives the calling thread a real-time priority (SCHED_FIFO, low), so that on a busy machine
/// it wakes up when its timer or packet is due rather than some milliseconds later: for the
/// threads that time things in a test (a [`TapWire`]'s, a prober's). Best effort: without the
/// privilege it stays as it was.
pub fn realtime_thread() {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: sets this thread's policy with a valid parameter.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &raw const param) };
}

/// The direction of a frame on a [`TapWire`]: from its first end to its second, or back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    AToB,
    BToA,
}

/// Decides whether the wire drops a frame.
pub type DropRule = Box<dyn Fn(Direction, &[u8]) -> bool + Send + Sync>;

/// An Ethernet link between two namespaces with a delay, for kernels without `sch_netem`
/// (tc netem): a TAP device in each namespace, and a thread per direction that reads frames
/// from one and writes them to the other once they are `delay` old, in order (the threads run
/// with a real-time priority, see [`realtime_thread`]). A [`DropRule`] can drop frames (a
/// firewall on the wire). The devices go when the wire is dropped.
pub struct TapWire {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Microseconds, per direction.
    delays: [std::sync::Arc<std::sync::atomic::AtomicU64>; 2],
    rule: std::sync::Arc<std::sync::RwLock<Option<DropRule>>>,
    /// IPv4 packets carried (not dropped), by destination address.
    carried: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<Ipv4Addr, u64>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl TapWire {
    /// A TAP device named `a_if` in `a` and one named `b_if` in `b`, up, without addresses.
    pub fn new(a: &Netns, a_if: &str, b: &Netns, b_if: &str) -> TapWire {
        use std::sync::{
            Arc, Mutex, RwLock,
            atomic::{AtomicBool, AtomicU64},
        };
        let fd_a = a.enter(|| open_tap(a_if));
        let fd_b = b.enter(|| open_tap(b_if));
        a.ip(&["link", "set", a_if, "up"]);
        b.ip(&["link", "set", b_if, "up"]);
        let fd_a = Arc::new(fd_a);
        let fd_b = Arc::new(fd_b);
        let mut wire = TapWire {
            stop: Arc::new(AtomicBool::new(false)),
            delays: [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))],
            rule: Arc::new(RwLock::new(None)),
            carried: Arc::new(Mutex::new(std::collections::HashMap::new())),
            threads: Vec::new(),
        };
        for (direction, from, to, delay) in [
            (
                Direction::AToB,
                fd_a.clone(),
                fd_b.clone(),
                wire.delays[0].clone(),
            ),
            (Direction::BToA, fd_b, fd_a, wire.delays[1].clone()),
        ] {
            let (tx, rx) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
            let (stop, rule, carried) =
                (wire.stop.clone(), wire.rule.clone(), wire.carried.clone());
            wire.threads.push(std::thread::spawn(move || {
                realtime_thread();
                let mut buf = vec![0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    let Some(len) = read_frame(&from, &mut buf) else {
                        continue;
                    };
                    let frame = &buf[..len];
                    let drop_it = rule
                        .read()
                        .unwrap()
                        .as_ref()
                        .is_some_and(|r| r(direction, frame));
                    if drop_it {
                        continue;
                    }
                    if let Some((_, _, dst)) = ipv4_packet(frame) {
                        *carried.lock().unwrap().entry(dst).or_default() += 1;
                    }
                    let due = Instant::now() + Duration::from_micros(delay.load(Ordering::Relaxed));
                    if tx.send((due, frame.to_vec())).is_err() {
                        break;
                    }
                }
            }));
            let stop = wire.stop.clone();
            wire.threads.push(std::thread::spawn(move || {
                realtime_thread();
                while !stop.load(Ordering::Relaxed) {
                    let Ok((due, frame)) = rx.recv_timeout(Duration::from_millis(100)) else {
                        continue;
                    };
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let fd = std::os::fd::AsRawFd::as_raw_fd(&*to);
                    // SAFETY: writing our buffer to a TAP fd we keep open.
                    unsafe { libc::write(fd, frame.as_ptr().cast(), frame.len()) };
                }
            }));
        }
        wire
    }

    /// Delays frames from the first end by `a_to_b` and frames from the second by `b_to_a`
    /// (frames already on the wire keep theirs). The round trip gains the sum.
    pub fn set_delay(&self, a_to_b: Duration, b_to_a: Duration) {
        self.delays[0].store(a_to_b.as_micros() as u64, Ordering::Relaxed);
        self.delays[1].store(b_to_a.as_micros() as u64, Ordering::Relaxed);
    }

    /// Frames for which `rule` returns true are dropped from now on (`None`: none are).
    pub fn set_drop(&self, rule: Option<DropRule>) {
        *self.rule.write().unwrap() = rule;
    }

    /// IPv4 packets to `dst` the wire carried (in either direction; dropped ones not counted).
    pub fn carried_to(&self, dst: Ipv4Addr) -> u64 {
        self.carried.lock().unwrap().get(&dst).copied().unwrap_or(0)
    }
}

impl Drop for TapWire {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// (protocol, source, destination) of an untagged Ethernet frame carrying IPv4.
pub fn ipv4_packet(frame: &[u8]) -> Option<(u8, Ipv4Addr, Ipv4Addr)> {
    if frame.len() < 14 + 20 || frame[12..14] != [0x08, 0x00] || frame[14] >> 4 != 4 {
        return None;
    }
    let ip = &frame[14..];
    let addr = |at: usize| Ipv4Addr::new(ip[at], ip[at + 1], ip[at + 2], ip[at + 3]);
    Some((ip[9], addr(12), addr(16)))
}

/// (source port, destination port) of an IPv4 frame carrying UDP or TCP (as [`ipv4_packet`]
/// reads it); `None` for other frames.
pub fn ipv4_ports(frame: &[u8]) -> Option<(u16, u16)> {
    let (proto, _, _) = ipv4_packet(frame)?;
    if proto != 6 && proto != 17 {
        return None;
    }
    let l4 = 14 + usize::from(frame[14] & 0x0f) * 4;
    let port = |at: usize| {
        frame
            .get(at..at + 2)
            .map(|p| u16::from_be_bytes([p[0], p[1]]))
    };
    Some((port(l4)?, port(l4 + 2)?))
}

/// A TAP device named `name` in the calling thread's namespace; frames without extra headers.
fn open_tap(name: &str) -> std::os::fd::OwnedFd {
    open_tun_tap(name, libc::IFF_TAP)
}

/// A TUN device named `name` in the calling thread's namespace (down, without addresses):
/// what the host routes to it is read from the fd as bare IP packets ([`read_frame`]), as
/// a test's own "network" sees it.
pub fn open_tun(name: &str) -> std::os::fd::OwnedFd {
    open_tun_tap(name, libc::IFF_TUN)
}

/// [`open_tap`] or [`open_tun`] by `kind`.
fn open_tun_tap(name: &str, kind: libc::c_int) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        flags: libc::c_short,
        pad: [u8; 22],
    }
    assert!(name.len() < 16, "interface name {name:?} too long");
    // SAFETY: open(2) of a path literal.
    let fd = unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    assert!(fd >= 0, "/dev/net/tun: {}", std::io::Error::last_os_error());
    // SAFETY: a fresh fd we own.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let flags = (kind | libc::IFF_NO_PI) as libc::c_short;
    let mut req = IfReq {
        name: [0; 16],
        flags,
        pad: [0; 22],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: TUNSETIFF with a struct ifreq-sized buffer.
    let rc = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            libc::TUNSETIFF,
            &mut req,
        )
    };
    assert_eq!(
        rc,
        0,
        "TUNSETIFF {name}: {}",
        std::io::Error::last_os_error()
    );
    fd
}

/// One frame from a TAP fd (a packet from a TUN fd), or `None` after 100 ms without one.
pub fn read_frame(fd: &std::os::fd::OwnedFd, buf: &mut [u8]) -> Option<usize> {
    use std::os::fd::AsRawFd;
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    if unsafe { libc::poll(&raw mut pfd, 1, 100) } <= 0 {
        return None;
    }
    // SAFETY: reading into our buffer.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    (n > 0).then_some(n as usize)
}
