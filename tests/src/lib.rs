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

pub mod hostile;
pub mod peers;
pub mod spoof;
pub mod xdp;

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

/// The answer section of a `dig` output: (name, type, data) triples.
pub fn dig_answers(out: &str) -> Vec<(String, String, String)> {
    let mut answers = Vec::new();
    let mut in_answer = false;
    for line in out.lines() {
        if line.starts_with(";; ANSWER SECTION") {
            in_answer = true;
            continue;
        }
        if in_answer {
            if line.trim().is_empty() {
                break;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() >= 5 {
                answers.push((f[0].to_owned(), f[3].to_owned(), f[4..].join(" ")));
            }
        }
    }
    answers
}

/// The header flags of a `dig` output, e.g. `["qr", "aa"]`.
pub fn dig_flags(out: &str) -> Vec<String> {
    out.lines()
        .find_map(|l| l.strip_prefix(";; flags: "))
        .and_then(|l| l.split(';').next())
        .map(|f| f.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// A `dig` output, section by section; records as "owner TTL TYPE data" (the class left out).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DigReply {
    pub opcode: String,
    /// The RCODE's mnemonic: NOERROR, NXDOMAIN, BADVERS, …
    pub status: String,
    /// The header flags, e.g. `["qr", "aa"]`.
    pub flags: Vec<String>,
    pub answer: Vec<String>,
    pub authority: Vec<String>,
    pub additional: Vec<String>,
    /// The UDP size of the reply's OPT record; `None` without one.
    pub edns_udp: Option<u16>,
}

impl DigReply {
    pub fn parse(out: &str) -> DigReply {
        let header = out
            .lines()
            .find_map(|l| l.strip_prefix(";; ->>HEADER<<- "))
            .unwrap_or("");
        let field = |name: &str| {
            header
                .split(", ")
                .find_map(|f| f.strip_prefix(name))
                .unwrap_or("")
                .to_owned()
        };
        let section = |name: &str| {
            let title = format!(";; {name} SECTION:");
            out.lines()
                .skip_while(|l| *l != title)
                .skip(1)
                .take_while(|l| !l.trim().is_empty())
                .map(
                    |l| match l.split_whitespace().collect::<Vec<_>>().as_slice() {
                        [owner, ttl, _class, rtype, data @ ..] => {
                            format!("{owner} {ttl} {rtype} {}", data.join(" "))
                        }
                        _ => l.to_owned(),
                    },
                )
                .collect()
        };
        DigReply {
            opcode: field("opcode: "),
            status: field("status: "),
            flags: dig_flags(out),
            answer: section("ANSWER"),
            authority: section("AUTHORITY"),
            additional: section("ADDITIONAL"),
            edns_udp: out
                .lines()
                .find_map(|l| l.strip_prefix("; EDNS: "))
                .and_then(|l| l.rsplit_once("udp: "))
                .and_then(|(_, size)| size.trim().parse().ok()),
        }
    }

    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
}

// ---- The responder tests' shared configuration ----

/// Length of the text of `big.example.com` TXT: its response is over 512 bytes, the most a
/// client without EDNS accepts, and under the 1232 the server advertises.
pub const BIG_TXT_LEN: usize = 700;
/// Length of the text of `huge.example.com` TXT: its response is over 1232 bytes, so it is
/// truncated over UDP even for a client offering 4096.
pub const HUGE_TXT_LEN: usize = 1500;

/// The configuration shared by the responder's tests (the handler table, the loopback socket
/// tests and the netns end-to-end test): one name for every case the responder treats
/// differently, served on the lab's server addresses. The lab's IPv4 client (192.0.2.10) is
/// in view "host" (longest prefix over "wide"), its IPv6 client in no view (the default view).
pub fn responder_config() -> String {
    let big = "b".repeat(BIG_TXT_LEN);
    let huge = "h".repeat(HUGE_TXT_LEN);
    format!(
        r#"
[server]
listen = ["{SERVER_V4}", "{SERVER_V6}"]
edns_udp_size = 1232

[[view]]
name = "wide"
prefixes = ["192.0.2.0/24"]

[[view]]
name = "host"
prefixes = ["192.0.2.10/32"]

[[zone]]
name = "example.com"
ttl = 3600
ns = ["ns1.example.com", "ns2.example.net"]
  [zone.soa]
  rname = "hostmaster.example.com"
  serial = 7
  minimum = 60

  [[zone.record]]
  name = "ns1"
  type = "A"
  value = "192.0.2.53"
  [[zone.record]]
  name = "ns1"
  type = "AAAA"
  value = "2001:db8::53"
  [[zone.record]]
  name = "@"
  type = "MX"
  value = "10 mail"
  [[zone.record]]
  name = "mail"
  type = "A"
  value = "192.0.2.25"
  ttl = 300
  [[zone.record]]
  name = "txt"
  type = "TXT"
  value = "hello"
  [[zone.record]]
  name = "big"
  type = "TXT"
  value = "{big}"
  [[zone.record]]
  name = "huge"
  type = "TXT"
  value = "{huge}"
  [[zone.record]]
  name = "_sip._tcp"
  type = "SRV"
  value = "10 60 5060 sip"
  [[zone.record]]
  name = "sip"
  type = "A"
  value = "192.0.2.60"
  [[zone.record]]
  name = "host.dept"
  type = "A"
  value = "192.0.2.61"
  [[zone.record]]
  name = "host.dept"
  type = "AAAA"
  value = "2001:db8::61"
  [[zone.record]]
  name = "alias"
  type = "CNAME"
  value = "www"
  [[zone.record]]
  name = "chain"
  type = "CNAME"
  value = "alias"
  [[zone.record]]
  name = "to-org"
  type = "CNAME"
  value = "www.example.org."
  [[zone.record]]
  name = "cdn"
  type = "CNAME"
  value = "edge.cdn.example.net."
  [[zone.record]]
  name = "dangling"
  type = "CNAME"
  value = "nowhere"
  [[zone.record]]
  name = "loop1"
  type = "CNAME"
  value = "loop2"
  [[zone.record]]
  name = "loop2"
  type = "CNAME"
  value = "loop1"
  [[zone.record]]
  name = "into-lab"
  type = "CNAME"
  value = "host.lab"
  [[zone.record]]
  name = "lab"
  type = "NS"
  value = "ns.lab"
  [[zone.record]]
  name = "ns.lab"
  type = "A"
  value = "192.0.2.70"

[[zone]]
name = "example.org"
ttl = 30
ns = ["ns1.example.com"]
  [zone.soa]
  rname = "hostmaster.example.org"
  minimum = 300

  [[zone.record]]
  name = "www"
  type = "A"
  value = "192.0.2.90"

[[site]]
name = "dc"
ip = "198.51.100.1"

[[service]]
name = "web-1"
ip = "198.51.100.10"
site = "dc"
[[service]]
name = "web-2"
ip = "198.51.100.11"
site = "dc"
[[service]]
name = "web-1-v6"
ip = "2001:db8:100::10"
site = "dc"
[[service]]
name = "web-2-v6"
ip = "2001:db8:100::11"
site = "dc"
[[service]]
name = "wide-web"
ip = "192.0.2.81"
site = "dc"
[[service]]
name = "host-web"
ip = "192.0.2.80"
site = "dc"
[[service]]
name = "host-web-v6"
ip = "2001:db8::80"
site = "dc"
{apps}
# One address per answer, rotating; per-view services ("wide" has no IPv6 service, so its
# AAAA answer is the default view's).
[[gslb_domain]]
name = "www.example.com"
ttl = 30
answer = "rotate"
services = ["web-1", "web-2", "web-1-v6", "web-2-v6"]
  [[gslb_domain.view]]
  view = "wide"
  services = ["wide-web"]
  [[gslb_domain.view]]
  view = "host"
  services = ["host-web", "host-web-v6"]

# Every address at once; no IPv6 service, so AAAA is NODATA.
[[gslb_domain]]
name = "all.example.com"
ttl = 20
answer = "all"
services = ["app-1", "app-2", "app-3", "app-4", "app-5", "app-6", "app-7", "app-8"]
"#,
        apps = (1..=8)
            .map(|i| format!(
                "[[service]]\nname = \"app-{i}\"\nip = \"203.0.113.{}\"\nsite = \"dc\"\n",
                20 + i
            ))
            .collect::<String>(),
    )
}

/// A small file of the lib's unit tests (the compiler's, the responder's): gslbd on
/// 192.0.2.53; zone example.com with `zone_extra` (its records) after its SOA; site "eu" with
/// services "a" (192.0.2.10) and "b" (192.0.2.20); www.example.com over both, with
/// `domain_extra` (its method, TTL, ...) after its services.
pub fn two_services_config(zone_extra: &str, domain_extra: &str) -> String {
    format!(
        r#"
[server]
listen = ["192.0.2.53"]
[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"
{zone_extra}
[[site]]
name = "eu"
ip = "192.0.2.1"
[[service]]
name = "a"
ip = "192.0.2.10"
site = "eu"
[[service]]
name = "b"
ip = "192.0.2.20"
site = "eu"
[[gslb_domain]]
name = "www.example.com"
services = ["a", "b"]
{domain_extra}
"#
    )
}

// ---- Labs of several namespaces ----

/// A network namespace with its loopback up, deleted on drop (and everything in it). For labs
/// with more than the two hosts of [`Lab`].
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

// ---- A TCP proxy that can cut a link ----

/// What a [`TcpProxy`] does with the bytes of its connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyMode {
    /// Forwards both ways.
    Open,
    /// Connections closed, new ones closed at once: the link is down, both ends see it.
    Cut,
    /// Nothing forwarded either way (bytes stay in the sockets): both ends only notice by
    /// their dead-peer timeouts.
    Stall,
}

struct ProxyShared {
    mode: std::sync::Mutex<ProxyMode>,
    /// Both sockets of every connection, to close them on a cut.
    conns: std::sync::Mutex<Vec<TcpStream>>,
    /// Connections forwarded so far.
    forwarded: std::sync::atomic::AtomicU64,
    stop: std::sync::atomic::AtomicBool,
}

impl ProxyShared {
    fn mode(&self) -> ProxyMode {
        *self
            .mode
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn close_all(&self) {
        for c in self
            .conns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .drain(..)
        {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// A TCP proxy between two ends of a link (a MEP link between two sites), which a test can
/// cut, stall and restore. Its threads run in the network namespace of the thread that starts
/// it (listening and connecting there); everything stops when it is dropped.
pub struct TcpProxy {
    pub addr: SocketAddr,
    shared: std::sync::Arc<ProxyShared>,
    accept: Option<std::thread::JoinHandle<()>>,
}

/// How long a blocked proxy thread waits before it looks at its mode again.
const PROXY_POLL: Duration = Duration::from_millis(10);

impl TcpProxy {
    /// Listens on `listen` (port 0: any) and forwards each connection to `target`.
    pub fn start(listen: SocketAddr, target: SocketAddr) -> TcpProxy {
        let listener = std::net::TcpListener::bind(listen)
            .unwrap_or_else(|e| panic!("proxy on {listen}: {e}"));
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let addr = listener.local_addr().expect("proxy address");
        let shared = std::sync::Arc::new(ProxyShared {
            mode: std::sync::Mutex::new(ProxyMode::Open),
            conns: std::sync::Mutex::new(Vec::new()),
            forwarded: std::sync::atomic::AtomicU64::new(0),
            stop: std::sync::atomic::AtomicBool::new(false),
        });
        let accept = std::thread::spawn({
            let shared = shared.clone();
            move || {
                while !shared.stop.load(Ordering::Relaxed) {
                    let Ok((client, _)) = listener.accept() else {
                        std::thread::sleep(PROXY_POLL);
                        continue;
                    };
                    if shared.mode() == ProxyMode::Cut {
                        continue; // dropped: closed at once
                    }
                    let Ok(server) = TcpStream::connect_timeout(&target, Duration::from_secs(1))
                    else {
                        continue;
                    };
                    let ends = [&client, &server];
                    if ends.iter().any(|s| {
                        s.set_nonblocking(false).is_err()
                            || s.set_read_timeout(Some(PROXY_POLL)).is_err()
                    }) {
                        continue;
                    }
                    let clones = (
                        client.try_clone(),
                        server.try_clone(),
                        client.try_clone(),
                        server.try_clone(),
                    );
                    let (Ok(c2), Ok(s2), Ok(c3), Ok(s3)) = clones else {
                        continue;
                    };
                    shared
                        .conns
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .extend([c3, s3]);
                    shared.forwarded.fetch_add(1, Ordering::Relaxed);
                    for (from, to) in [(client, s2), (server, c2)] {
                        let shared = shared.clone();
                        std::thread::spawn(move || pump(from, to, &shared));
                    }
                }
            }
        });
        TcpProxy {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// How many connections it has forwarded (opened to the target) so far: a test learns
    /// from it that a link was opened again after a cut.
    pub fn forwarded(&self) -> u64 {
        self.shared.forwarded.load(Ordering::Relaxed)
    }

    pub fn set(&self, mode: ProxyMode) {
        *self
            .shared
            .mode
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = mode;
        if mode == ProxyMode::Cut {
            self.shared.close_all();
        }
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.close_all();
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Copies `from` to `to` while the proxy is open; waits while it is stalled (what was read
/// before is delivered after, nothing is lost); ends on a cut, a close or an error.
fn pump(mut from: TcpStream, mut to: TcpStream, shared: &ProxyShared) {
    let mut buf = vec![0u8; 64 * 1024];
    let wait_open = || loop {
        if shared.stop.load(Ordering::Relaxed) {
            return false;
        }
        match shared.mode() {
            ProxyMode::Open => return true,
            ProxyMode::Cut => return false,
            ProxyMode::Stall => std::thread::sleep(PROXY_POLL),
        }
    };
    loop {
        if !wait_open() {
            break;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(_) => break,
        };
        if !wait_open() || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(std::net::Shutdown::Both);
    let _ = to.shutdown(std::net::Shutdown::Both);
}
