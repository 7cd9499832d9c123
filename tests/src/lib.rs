//! A two-host lab for end-to-end tests: a server and a client network namespace joined by a
//! veth pair, with TEST-NET addresses. Everything it creates is removed on drop, also when a
//! test panics.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket},
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    sync::atomic::{AtomicU32, Ordering},
    time::{Duration, Instant},
};

mod dig;
pub mod hostile;
mod netns;
pub mod peers;
mod proxy;
mod responder_config;
pub mod spoof;
pub mod xdp;

pub use dig::*;
pub use netns::*;
pub use proxy::*;
pub use responder_config::*;

pub const SERVER_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 53);
pub const CLIENT_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
pub const SERVER_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x53);
pub const CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x10);
/// Interface names inside the namespaces (each namespace has its own, so they never clash).
pub const SERVER_IF: &str = "gslb0";
pub const CLIENT_IF: &str = "client0";

/// Why this process cannot load BPF programs or make network namespaces, or `None` if it can.
/// Root is what is checked: it has every capability that needs (CAP_BPF, CAP_NET_ADMIN for XDP
/// and namespaces, CAP_PERFMON for some of the verifier's pointer handling); a
/// capabilities-only setup is not told apart here.
pub fn missing_privilege() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    (euid != 0).then(|| format!("needs root for BPF and network namespaces (euid is {euid})"))
}

/// True when the test `test` may run. Without root it skips (see [`skip`]).
pub fn privileged(test: &str) -> bool {
    let Some(why) = missing_privilege() else {
        return true;
    };
    skip(&format!("{test}: {why}"));
    false
}

/// A test that cannot run here (no root, a program not installed) says why on stderr and
/// returns; unless GSLB_REQUIRE_PRIVILEGED=1 (set by `cargo xtask test`, as in CI), where it
/// fails instead, since a skip would hide that nothing was tested.
pub fn skip(reason: &str) {
    assert!(
        std::env::var("GSLB_REQUIRE_PRIVILEGED").as_deref() != Ok("1"),
        "{reason} (GSLB_REQUIRE_PRIVILEGED=1)"
    );
    eprintln!("skipped: {reason}");
}

/// Runs a command to completion; panics with its output when it fails.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub struct Lab {
    pub server_ns: String,
    pub client_ns: String,
    children: Processes,
    /// Held for the lab's life (see [`Lab::new`]); released after its cleanup.
    _alone: std::sync::MutexGuard<'static, ()>,
}

/// Taken by every [`Lab`]: one lab at a time in this process. Each end-to-end test was a
/// binary of its own, run one after the other; now they share gslb-user's one test binary, and
/// a lab's daemons and floods (rate limits, timings measured from the client's side) would
/// otherwise compete with another lab's for the machine's CPUs.
static ONE_LAB: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Lab {
    /// Creates the namespaces, the veth pair and the addresses, once no other lab of this
    /// process is left ([`ONE_LAB`]). `tag` keeps names of tests apart (also across processes).
    pub fn new(tag: &str) -> Lab {
        // A test that failed holding it poisons it; the next one still runs.
        let alone = ONE_LAB
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let id = format!(
            "{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let lab = Lab {
            server_ns: format!("gslb-{tag}-{id}-s"),
            client_ns: format!("gslb-{tag}-{id}-c"),
            children: Processes::default(),
            _alone: alone,
        };
        for ns in [&lab.server_ns, &lab.client_ns] {
            run(Command::new("ip").args(["netns", "add", ns]));
            run(lab.exec(ns, "ip").args(["link", "set", "lo", "up"]));
        }
        run(Command::new("ip").args([
            "-n",
            &lab.server_ns,
            "link",
            "add",
            SERVER_IF,
            "type",
            "veth",
            "peer",
            "name",
            CLIENT_IF,
            "netns",
            &lab.client_ns,
        ]));
        for (ns, dev, v4, v6) in [
            (&lab.server_ns, SERVER_IF, SERVER_V4, SERVER_V6),
            (&lab.client_ns, CLIENT_IF, CLIENT_V4, CLIENT_V6),
        ] {
            run(lab
                .exec(ns, "ip")
                .args(["addr", "add", &format!("{v4}/24"), "dev", dev]));
            run(lab
                .exec(ns, "ip")
                .args(["addr", "add", &format!("{v6}/64"), "dev", dev, "nodad"]));
            run(lab.exec(ns, "ip").args(["link", "set", dev, "up"]));
        }
        lab
    }

    /// A command run inside `ns` with `ip netns exec` (also remounts /sys for the namespace:
    /// fine for clients, not for anything that pins BPF objects; see [`Lab::nsenter`]).
    pub fn exec(&self, ns: &str, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns, program]);
        cmd
    }

    /// A command run inside `ns`'s network namespace only, keeping this mount namespace, so
    /// that /sys/fs/bpf is the host's bpffs.
    pub fn nsenter(&self, ns: &str, program: &Path) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{ns}")).arg(program);
        cmd
    }

    /// Runs `f` on a thread that has entered `ns`'s network namespace.
    pub fn in_netns<T: Send>(&self, ns: &str, f: impl FnOnce() -> T + Send) -> T {
        let path = PathBuf::from(format!("/run/netns/{ns}"));
        std::thread::scope(|s| {
            s.spawn(move || {
                let file = std::fs::File::open(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
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
                f()
            })
            .join()
            .expect("thread in netns panicked")
        })
    }

    /// Starts a long-running process (stopped on drop, or by [`Lab::stop`] with the returned
    /// pid) and waits for `ready` on its stdout.
    pub fn spawn_until(&mut self, cmd: Command, ready: &str, timeout: Duration) -> u32 {
        self.children.spawn_until(cmd, ready, timeout)
    }

    /// A TCP server at `addr` inside `ns` that accepts and closes connections (what a TCP
    /// health monitor checks), until the returned handle is dropped. `addr` must be an address
    /// of that namespace.
    pub fn tcp_backend(&self, ns: &str, addr: SocketAddr) -> TcpBackend {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let listener = self.in_netns(ns, || std::net::TcpListener::bind(addr));
        let listener = listener.unwrap_or_else(|e| panic!("backend {addr} in {ns}: {e}"));
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => drop(conn),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        TcpBackend {
            stop,
            thread: Some(thread),
        }
    }

    /// Kills a process started by [`Lab::spawn_until`] with SIGKILL, as a crash would.
    pub fn kill(&mut self, pid: u32) {
        self.children.kill(pid);
    }

    /// Stops a process started by [`Lab::spawn_until`]: SIGTERM, then SIGKILL after 5 s.
    pub fn stop(&mut self, pid: u32) {
        self.children.stop(pid);
    }

    /// `dig` from the client namespace; returns its output, also when it got no answer (the
    /// caller's assertions then show what happened).
    pub fn dig(&self, server: IpAddr, args: &[&str]) -> String {
        self.dig_in(&self.client_ns, server, args)
    }

    /// [`Lab::dig`] from `ns`, one of the lab's namespaces.
    pub fn dig_in(&self, ns: &str, server: IpAddr, args: &[&str]) -> String {
        dig(self.exec(ns, "dig"), server, args)
    }
}

impl Lab {
    /// Sends one UDP datagram from the client namespace and waits up to `wait` for the reply.
    /// For what `dig` cannot send (malformed queries, responses).
    pub fn udp_exchange(
        &self,
        server: SocketAddr,
        request: &[u8],
        wait: Duration,
    ) -> Option<Vec<u8>> {
        self.in_netns(&self.client_ns, || {
            let any: SocketAddr = match server {
                SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
                SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
            };
            let socket = UdpSocket::bind(any).expect("bind in the client namespace");
            socket.set_read_timeout(Some(wait)).expect("read timeout");
            socket.send_to(request, server).expect("send");
            let mut buf = vec![0; 65535];
            let (len, _) = socket.recv_from(&mut buf).ok()?;
            buf.truncate(len);
            Some(buf)
        })
    }

    /// Opens a TCP connection from the client namespace, writes every request at once
    /// (pipelined, each with its length prefix), then reads replies until there are as many or
    /// `wait` passes without one.
    pub fn tcp_exchange(
        &self,
        server: SocketAddr,
        requests: &[Vec<u8>],
        wait: Duration,
    ) -> Vec<Vec<u8>> {
        let mut stream = self.tcp_connect(server);
        stream.set_read_timeout(Some(wait)).expect("read timeout");
        let framed: Vec<u8> = requests
            .iter()
            .flat_map(|r| {
                (r.len() as u16)
                    .to_be_bytes()
                    .into_iter()
                    .chain(r.iter().copied())
            })
            .collect();
        stream.write_all(&framed).expect("write");
        let mut replies = Vec::new();
        while replies.len() < requests.len() {
            let mut len = [0u8; 2];
            if stream.read_exact(&mut len).is_err() {
                break;
            }
            let mut reply = vec![0; u16::from_be_bytes(len) as usize];
            if stream.read_exact(&mut reply).is_err() {
                break;
            }
            replies.push(reply);
        }
        replies
    }

    /// A TCP connection from the client namespace (the socket keeps its namespace after the
    /// thread that made it is gone); open until dropped.
    pub fn tcp_connect(&self, server: SocketAddr) -> TcpStream {
        self.in_netns(&self.client_ns, || {
            TcpStream::connect_timeout(&server, Duration::from_secs(5)).expect("connect")
        })
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.children.stop_all();
        for ns in [&self.server_ns, &self.client_ns] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// A [`Lab`] whose server namespace runs gslbd with the fast path (skb mode) on its veth, and the
/// files that gslbd uses there: its configuration, control socket and BPF pins, named after the
/// server namespace. Dropping it drops the lab first (which stops gslbd, so that it unpins),
/// then removes the files.
pub struct GslbdLab {
    pub lab: Lab,
    pub config: PathBuf,
    pub control: PathBuf,
    pub pins: PathBuf,
    _files: TempPaths,
}

impl GslbdLab {
    /// A new [`Lab`] (`tag` as there) with `config` written as gslbd's configuration.
    pub fn new(tag: &str, config: &str) -> GslbdLab {
        let lab = Lab::new(tag);
        let dir = std::env::temp_dir();
        let config_path = dir.join(format!("{}.toml", lab.server_ns));
        let control = dir.join(format!("{}.sock", lab.server_ns));
        let pins = PathBuf::from(format!("/sys/fs/bpf/{}", lab.server_ns));
        let files = TempPaths(vec![config_path.clone(), control.clone(), pins.clone()]);
        std::fs::write(&config_path, config)
            .unwrap_or_else(|e| panic!("{}: {e}", config_path.display()));
        GslbdLab {
            lab,
            config: config_path,
            control,
            pins,
            _files: files,
        }
    }

    /// gslbd (`bin`: `env!("CARGO_BIN_EXE_gslbd")` in a gslb-user test or bench) in the server
    /// namespace on this lab's configuration, attached to [`SERVER_IF`] in skb mode and pinning
    /// under [`GslbdLab::pins`]; add `--control` with [`GslbdLab::with_control`].
    pub fn gslbd(&self, bin: impl AsRef<Path>) -> Command {
        let mut cmd = self.lab.nsenter(&self.lab.server_ns, bin.as_ref());
        cmd.arg("--config").arg(&self.config);
        cmd.args(["--interface", SERVER_IF, "--xdp-mode", "skb"]);
        cmd.arg("--pin-path").arg(&self.pins);
        cmd
    }

    /// [`GslbdLab::gslbd`] with its control socket at [`GslbdLab::control`].
    pub fn with_control(&self, bin: impl AsRef<Path>) -> Command {
        let mut cmd = self.gslbd(bin);
        cmd.arg("--control").arg(&self.control);
        cmd
    }

    /// Starts `gslbd` (of [`GslbdLab::gslbd`]) and waits up to 30 s until it is ready; its pid.
    pub fn start(&mut self, gslbd: Command) -> u32 {
        self.lab
            .spawn_until(gslbd, "gslbd: ready", Duration::from_secs(30))
    }
}

impl std::ops::Deref for GslbdLab {
    type Target = Lab;
    fn deref(&self) -> &Lab {
        &self.lab
    }
}

impl std::ops::DerefMut for GslbdLab {
    fn deref_mut(&mut self) -> &mut Lab {
        &mut self.lab
    }
}

/// A backend started by [`Lab::tcp_backend`]; dropping it closes the listening socket.
pub struct TcpBackend {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for TcpBackend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// SIGTERM first so that a daemon can detach and unpin; SIGKILL if it has not exited in 5 s.
fn stop(child: &mut Child) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// `dig` (the command, run wherever the caller placed it) asking `server`, without recursion,
/// 2 s per try, 2 tries; its output, also when it got no answer.
fn dig(mut cmd: Command, server: IpAddr, args: &[&str]) -> String {
    cmd.arg(format!("@{server}"))
        .args(["+norec", "+time=2", "+tries=2"])
        .args(args);
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Long-running processes of a test (daemons), stopped on drop: SIGTERM, then SIGKILL after
/// 5 s. Declare it after the namespaces it runs processes in, so that it is dropped first.
#[derive(Default)]
pub struct Processes {
    children: Vec<Child>,
}

impl Processes {
    /// Starts `cmd` and waits (at most `timeout`) for `ready` on its stdout; its stderr is the
    /// test's. Returns its pid.
    pub fn spawn_until(&mut self, mut cmd: Command, ready: &str, timeout: Duration) -> u32 {
        cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        let ready = ready.to_owned();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains(&ready) {
                    let _ = tx.send(());
                }
            }
        });
        let start = Instant::now();
        loop {
            if rx.recv_timeout(Duration::from_millis(100)).is_ok() {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("{cmd:?} exited with {status} before it was ready");
            }
            if start.elapsed() >= timeout {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{cmd:?} not ready after {timeout:?}");
            }
        }
        let pid = child.id();
        self.children.push(child);
        pid
    }

    /// Kills the process `pid` with SIGKILL, as a crash would.
    pub fn kill(&mut self, pid: u32) {
        if let Some(i) = self.children.iter().position(|c| c.id() == pid) {
            let mut child = self.children.remove(i);
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the process `pid`: SIGTERM, then SIGKILL after 5 s.
    pub fn stop(&mut self, pid: u32) {
        if let Some(i) = self.children.iter().position(|c| c.id() == pid) {
            stop(&mut self.children.remove(i));
        }
    }

    /// Stops every process, in the order they were started.
    pub fn stop_all(&mut self) {
        for mut child in self.children.drain(..) {
            stop(&mut child);
        }
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// Files and directories of a test (configurations, sockets, BPF pins), removed on drop, also
/// when the test fails. Declare it before whatever writes there, so that it is dropped last.
pub struct TempPaths(pub Vec<PathBuf>);

impl Drop for TempPaths {
    fn drop(&mut self) {
        for path in &self.0 {
            if path.is_dir() {
                let _ = std::fs::remove_dir_all(path);
            } else {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// A directory removed on drop, also when the test fails.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `gslb-{tag}-{pid}-{n}` under the system's temporary directory, made afresh (whatever an
    /// earlier run left there is removed first). `n` counts the directories of this process:
    /// every test of gslb-user is in one binary, and two of them may pick the same tag.
    pub fn new(tag: &str) -> TempDir {
        TempDir::under(&std::env::temp_dir(), tag)
    }

    /// The same on the host's bpffs at `/sys/fs/bpf`, for tests that pin (root only).
    pub fn bpffs(tag: &str) -> TempDir {
        TempDir::under(Path::new("/sys/fs/bpf"), tag)
    }

    fn under(parent: &Path, tag: &str) -> TempDir {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let dir = parent.join(format!(
            "gslb-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        TempDir(dir)
    }

    /// `name` in the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Writes `bytes` to `name` in the directory; its path.
    pub fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.join(name);
        std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Follows no symbolic link: a link planted by a test goes, its target stays.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `gslbctl` (its binary: `env!("CARGO_BIN_EXE_gslbctl")` in a gslb-user test) with one
/// request to the control socket `control`.
pub fn gslbctl(bin: impl AsRef<Path>, control: &Path, request: &str) -> Output {
    let mut cmd = Command::new(bin.as_ref());
    cmd.arg("--control").arg(control).arg(request);
    cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}
