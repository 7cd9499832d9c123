//! A two-host lab for end-to-end tests: a server and a client network namespace joined by a
//! veth pair, with TEST-NET addresses. Everything it creates is removed on drop, also when a
//! test panics.

use std::{
    io::{BufRead, BufReader},
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    sync::atomic::{AtomicU32, Ordering},
    time::{Duration, Instant},
};

pub const SERVER_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 53);
pub const CLIENT_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
pub const SERVER_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x53);
pub const CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x10);
/// Interface names inside the namespaces (each namespace has its own, so they never clash).
pub const SERVER_IF: &str = "gslb0";
pub const CLIENT_IF: &str = "client0";

/// True when the test may run. Without root it skips with a reason on stderr, unless
/// GSLB_REQUIRE_PRIVILEGED=1 (set by `cargo xtask test`), where it fails instead.
pub fn privileged(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    let reason = format!("{test}: needs root for BPF and network namespaces");
    if std::env::var("GSLB_REQUIRE_PRIVILEGED").as_deref() == Ok("1") {
        panic!("{reason} (GSLB_REQUIRE_PRIVILEGED=1)");
    }
    eprintln!("skipped: {reason}");
    false
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
    children: Vec<Child>,
}

impl Lab {
    /// Creates the namespaces, the veth pair and the addresses. `tag` keeps names of tests that
    /// run in parallel apart.
    pub fn new(tag: &str) -> Lab {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let id = format!("{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
        let lab = Lab {
            server_ns: format!("gslb-{tag}-{id}-s"),
            client_ns: format!("gslb-{tag}-{id}-c"),
            children: Vec::new(),
        };
        for ns in [&lab.server_ns, &lab.client_ns] {
            run(Command::new("ip").args(["netns", "add", ns]));
            run(lab.exec(ns, "ip").args(["link", "set", "lo", "up"]));
        }
        run(Command::new("ip").args([
            "-n", &lab.server_ns, "link", "add", SERVER_IF, "type", "veth", "peer", "name",
            CLIENT_IF, "netns", &lab.client_ns,
        ]));
        for (ns, dev, v4, v6) in [
            (&lab.server_ns, SERVER_IF, SERVER_V4, SERVER_V6),
            (&lab.client_ns, CLIENT_IF, CLIENT_V4, CLIENT_V6),
        ] {
            run(lab.exec(ns, "ip").args(["addr", "add", &format!("{v4}/24"), "dev", dev]));
            run(lab.exec(ns, "ip").args(["addr", "add", &format!("{v6}/64"), "dev", dev, "nodad"]));
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
                let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
                use std::os::fd::AsRawFd;
                // SAFETY: a valid namespace fd; only this thread changes namespace.
                let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns {path:?}: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .expect("thread in netns panicked")
        })
    }

    /// Starts a long-running process (killed on drop) and waits for `ready` on its stdout.
    pub fn spawn_until(&mut self, mut cmd: Command, ready: &str, timeout: Duration) -> &mut Child {
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
            assert!(start.elapsed() < timeout, "{cmd:?} not ready after {timeout:?}");
        }
        self.children.push(child);
        self.children.last_mut().expect("just pushed")
    }

    /// `dig` from the client namespace; returns its output, also when it got no answer (the
    /// caller's assertions then show what happened).
    pub fn dig(&self, server: IpAddr, args: &[&str]) -> String {
        let mut cmd = self.exec(&self.client_ns, "dig");
        cmd.arg(format!("@{server}")).args(["+norec", "+time=2", "+tries=2"]).args(args);
        let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for child in &mut self.children {
            // SIGTERM first so a daemon can detach and unpin; then make sure.
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        for ns in [&self.server_ns, &self.client_ns] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
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

/// The header flags of a `dig` output, e.g. ["qr", "aa"].
pub fn dig_flags(out: &str) -> Vec<String> {
    out.lines()
        .find_map(|l| l.strip_prefix(";; flags: "))
        .and_then(|l| l.split(';').next())
        .map(|f| f.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}
