//! Load-based answers against real nginx: two nginx processes on the loopback (each its own
//! stub_status counter), gslbd in this process (responder alone) reading their active
//! connections with `stub_status` load monitors, and the test holding connections open to
//! them. Shown: `leastconnection` answers the less loaded service; a service at its
//! `max_connections` spills over to the other; when an nginx stops, its value ages out, the
//! service ranks last and counts as full; `gslbctl stats` counts the failures; a restarted
//! nginx is read again.
//!
//! Needs the `nginx` binary (Debian package `nginx`; `cargo xtask setup` installs it). Without
//! it the test says why and skips, unless GSLB_REQUIRE_PRIVILEGED=1 (`cargo xtask test`), where
//! it fails. Every nginx is killed when the test ends, also when it fails. Every wait is
//! bounded by [`WAIT`].

use crate::common;

use std::{
    net::{SocketAddr, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use common::{Gslbd, PortTaken, metrics::answers_become};
use gslb_tests::TempDir;
use gslb_user::control;

const WAIT: Duration = Duration::from_secs(20);
const A: &str = "127.0.0.21";
const B: &str = "127.0.0.22";

/// The nginx binary, if installed.
fn nginx_binary() -> Option<PathBuf> {
    ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// One nginx process serving stub_status at `/status` on `addr`, in the foreground (no
/// daemon, no workers), with its own configuration, pid file, logs and temporary paths under
/// `dir`; no default site. Killed when dropped.
struct Nginx {
    child: Child,
}

impl Nginx {
    /// A new nginx on `ip`: nginx binds its port itself, so the port is picked for it, which
    /// is a race ([`common::start_on_picked_port`]: an nginx that exits saying the port is in
    /// use is started again on another).
    fn start_on(binary: &Path, dir: &Path, ip: &str) -> (SocketAddr, Nginx) {
        common::start_on_picked_port(ip, "nginx", |port| {
            let addr = SocketAddr::new(ip.parse().unwrap(), port);
            Nginx::try_start(binary, dir, addr).map(|nginx| (addr, nginx))
        })
    }

    /// An nginx again on the `addr` of one stopped: gslbd's file names the port, so no other
    /// can be picked; if something took it meanwhile, the test fails saying so.
    fn restart(binary: &Path, dir: &Path, addr: SocketAddr) -> Nginx {
        Nginx::try_start(binary, dir, addr)
            .unwrap_or_else(|PortTaken(log)| panic!("nginx's port {addr} was taken: {log}"))
    }

    fn try_start(binary: &Path, dir: &Path, addr: SocketAddr) -> Result<Nginx, PortTaken> {
        std::fs::create_dir_all(dir).unwrap();
        let d = dir.display();
        let conf = format!(
            r"daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    # Connections the test holds open without a request stay open.
    client_header_timeout 300s;
    server {{
        listen {addr};
        location = /status {{ stub_status; }}
        location / {{ return 404; }}
    }}
}}
"
        );
        let path = dir.join("nginx.conf");
        std::fs::write(&path, conf).unwrap();
        let child = Command::new(binary)
            .arg("-p")
            .arg(dir)
            .arg("-e")
            .arg(dir.join("error.log"))
            .arg("-c")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
        let mut nginx = Nginx { child };
        let deadline = Instant::now() + WAIT;
        while TcpStream::connect(addr).is_err() {
            if let Ok(Some(status)) = nginx.child.try_wait() {
                let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
                if log.contains("Address already in use") {
                    return Err(PortTaken(log));
                }
                panic!("nginx on {addr} exited with {status}: {log}");
            }
            assert!(Instant::now() < deadline, "nginx on {addr} not listening");
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(nginx)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` connections to `addr`, held open until dropped.
fn hold(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    (0..n).map(|_| TcpStream::connect(addr).unwrap()).collect()
}

fn config(dns: u16, a: SocketAddr, b: SocketAddr) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1"]
dns_port = {dns}

[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

[[site]]
name = "dc"
ip = "127.0.0.1"

[[monitor]]
name = "nginx"
type = "load"
format = "stub_status"
path = "/status"
interval_ms = 100
timeout_ms = 500
unknown_after = 2

[[service]]
name = "a"
ip = "{}"
port = {}
site = "dc"
load_monitors = ["nginx"]
max_connections = 6

[[service]]
name = "b"
ip = "{}"
port = {}
site = "dc"
load_monitors = ["nginx"]
max_connections = 6

[[gslb_domain]]
name = "least.example.com"
answer = "all"
services = ["a", "b"]
method = "leastconnection"

[[gslb_domain]]
name = "spill.example.com"
answer = "all"
services = ["a", "b"]
"#,
        a.ip(),
        a.port(),
        b.ip(),
        b.port()
    )
}

/// The `stats` line `name` of the gslbd at `socket`.
async fn stat(socket: &Path, name: &str) -> Option<String> {
    let stats = control::request(socket, "stats", WAIT).await.unwrap();
    stats
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ').map(str::to_owned))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_follow_nginx_connection_counts() {
    let Some(binary) = nginx_binary() else {
        let reason = "load_nginx: nginx is not installed (Debian package nginx; cargo xtask setup installs it)";
        gslb_tests::skip(reason);
        return;
    };
    let dir = TempDir::new("load-nginx");
    let (a, nginx_a) = Nginx::start_on(&binary, &dir.0.join("a"), A);
    let mut nginx_a = Some(nginx_a);
    let (b, _nginx_b) = Nginx::start_on(&binary, &dir.0.join("b"), B);
    let (dns, dns_sockets) = common::bound_dns();
    let path = dir.0.join("gslb.toml");
    let socket = dir.0.join("gslbd.sock");
    std::fs::write(&path, config(dns, a, b)).unwrap();
    let gslbd = Gslbd::start_bound(&path, dns_sockets, Some(socket.clone()), WAIT).await;
    let least = "least.example.com.";
    let spill = "spill.example.com.";

    // stub_status counts the monitor's own connection: a reports 5, b 2.
    let mut held_a = hold(a, 4);
    let held_b = hold(b, 1);
    answers_become(dns, least, &[B], "a 5, b 2", WAIT).await;
    answers_become(dns, spill, &[A, B], "both under 6", WAIT).await;

    // b at 8, over its limit of 6: least moves to a, and b takes no new clients.
    let more_b = hold(b, 6);
    answers_become(dns, least, &[A], "a 5, b 8", WAIT).await;
    answers_become(dns, spill, &[A], "b at its max_connections", WAIT).await;

    // Both at 1 and 2 again.
    drop(more_b);
    held_a.clear();
    answers_become(dns, least, &[A], "a 1, b 2", WAIT).await;
    answers_become(dns, spill, &[A, B], "b under its limit again", WAIT).await;

    // a's nginx stops: after two failed checks its count is unknown, which ranks after b's 2
    // and makes a full.
    nginx_a.take();
    answers_become(dns, least, &[B], "a unknown", WAIT).await;
    answers_become(dns, spill, &[B], "a unknown counts as full", WAIT).await;
    let labels = "{service=\"a\",monitor=\"nginx\",measure=\"connections\"}";
    assert_eq!(
        stat(&socket, &format!("load_known{labels}"))
            .await
            .as_deref(),
        Some("0")
    );
    let failures: u64 = stat(&socket, &format!("load_failures{labels}"))
        .await
        .unwrap()
        .parse()
        .unwrap();
    assert!(failures >= 2, "{failures}");
    assert_ne!(stat(&socket, "load_aged_out").await.as_deref(), Some("0"));

    // Back: read again, and the least loaded once more.
    let _nginx_a = Nginx::restart(&binary, &dir.0.join("a"), a);
    answers_become(dns, least, &[A], "a back at 1", WAIT).await;
    answers_become(dns, spill, &[A, B], "a back under its limit", WAIT).await;
    drop(held_b);
    gslbd.stop().await;
}
