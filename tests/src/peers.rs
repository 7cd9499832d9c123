//! The reference servers run beside gslbd, NSD and Knot DNS, for the benches that measure
//! them (`bench peers`, `bench dnsperf`, `bench kxdpgun`) and the differential test
//! (gslb-user's `e2e::differential`): each from a directory of its own (configuration, zone
//! files, pid file, database, control socket: nothing of the system's service is read or
//! written), in the foreground, stopped with the test's other processes.

use std::{fmt::Write as _, net::SocketAddr, path::Path, process::Command, time::Duration};

/// An authoritative server run beside gslbd, on zone files of the same zones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    Nsd,
    Knot,
}

impl Peer {
    pub const ALL: [Peer; 2] = [Peer::Nsd, Peer::Knot];

    pub fn name(self) -> &'static str {
        match self {
            Peer::Nsd => "nsd",
            Peer::Knot => "knot",
        }
    }

    /// The daemon's path, or why it cannot run here.
    pub fn binary(self) -> Result<&'static str, String> {
        let (candidates, package): (&[&'static str], _) = match self {
            Peer::Nsd => (&["/usr/sbin/nsd", "/usr/bin/nsd"], "nsd"),
            Peer::Knot => (&["/usr/sbin/knotd", "/usr/bin/knotd"], "knot"),
        };
        candidates
            .iter()
            .copied()
            .find(|p| Path::new(p).exists())
            .ok_or_else(|| {
                format!(
                    "{} is not installed (none of {}; `cargo xtask setup` or `apt-get install \
                     {package}` installs it)",
                    self.name(),
                    candidates.join(", ")
                )
            })
    }

    /// Writes the peer's configuration into `dir`, its own directory (made here; also its pid
    /// file, database and control socket), to serve `zones` (each `{zone}.zone` in `dir`,
    /// already written) on `listen` with one worker per CPU, as gslbd has one socket per core.
    /// NSD gets `minimal-responses` (no NS and glue beside an answer, the answers gslbd and
    /// Knot give) and no response rate limiting (Debian builds it in, at 200 answers a second
    /// per /24: dnsperf's one source would be slipped and dropped). With `xdp` (an
    /// interface), Knot also answers over AF_XDP on it, on the first `listen` port (`xdp:
    /// listen`; NSD has no such mode). With `socket_affinity`, Knot ties each UDP worker's
    /// socket to a CPU (`socket-affinity: on`, what gslbd's `server.socket_affinity` does; NSD
    /// has no such option: its `cpu-affinity` pins the servers only, the sockets still take
    /// datagrams by hash). Returns `sh` (a shell placed where the peer is to run, e.g. in a
    /// namespace) set to run it in the foreground as root, saying `ready` first: neither
    /// daemon signals readiness, see [`wait_for_answers`].
    pub fn command(
        self,
        zones: &[String],
        dir: &Path,
        listen: &[SocketAddr],
        xdp: Option<&str>,
        socket_affinity: bool,
        mut sh: Command,
    ) -> Result<Command, String> {
        let binary = self.binary()?;
        if let (Peer::Nsd, Some(_)) = (self, xdp) {
            return Err("NSD has no XDP mode".to_owned());
        }
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let workers = std::thread::available_parallelism().map_or(1, usize::from);
        let d = dir.display();
        let (path, conf, start) = match self {
            Peer::Nsd => {
                let mut conf = String::from("server:\n");
                // NSD has one port for every address: `ip-address: ADDR@PORT` per address.
                for addr in listen {
                    writeln!(conf, "  ip-address: {}@{}", addr.ip(), addr.port()).unwrap();
                }
                write!(
                    conf,
                    "  server-count: {workers}\n  reuseport: yes\n  username: \"\"\n  \
                     chroot: \"\"\n  zonesdir: \"{d}\"\n  database: \"\"\n  \
                     zonelistfile: \"{d}/zone.list\"\n  pidfile: \"{d}/nsd.pid\"\n  \
                     xfrdfile: \"{d}/xfrd.state\"\n  xfrdir: \"{d}\"\n  verbosity: 1\n  \
                     minimal-responses: yes\n  rrl-ratelimit: 0\n\
                     remote-control:\n  control-enable: no\n"
                )
                .unwrap();
                for zone in zones {
                    write!(conf, "zone:\n  name: {zone}\n  zonefile: \"{zone}.zone\"\n").unwrap();
                }
                let path = dir.join("nsd.conf");
                // -d: in the foreground, logging to stderr.
                let start = format!("exec {binary} -d -c {}", path.display());
                (path, conf, start)
            }
            Peer::Knot => {
                let port = listen.first().map_or(53, SocketAddr::port);
                let listen = listen
                    .iter()
                    .map(|a| format!("{}@{}", a.ip(), a.port()))
                    .collect::<Vec<_>>()
                    .join(", ");
                let xdp = xdp.map_or(String::new(), |i| {
                    format!("xdp:\n  listen: [ {i}@{port} ]\n")
                });
                let affinity = if socket_affinity {
                    "  socket-affinity: on\n"
                } else {
                    ""
                };
                let mut conf = format!(
                    "server:\n  rundir: \"{d}\"\n  user: root:root\n  listen: [ {listen} ]\n  \
                     udp-workers: {workers}\n{affinity}{xdp}\
                     log:\n  - target: stderr\n    any: warning\n\
                     database:\n  storage: \"{d}\"\ntemplate:\n  - id: default\n    \
                     storage: \"{d}\"\nzone:\n"
                );
                for zone in zones {
                    writeln!(conf, "  - domain: {zone}\n    file: \"{zone}.zone\"").unwrap();
                }
                let path = dir.join("knot.conf");
                // In the foreground; its warnings and errors on stderr (the `log` section).
                let start = format!("exec {binary} -c {}", path.display());
                (path, conf, start)
            }
        };
        std::fs::write(&path, conf).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        sh.arg("-c").arg(format!("echo ready; {start}"));
        Ok(sh)
    }
}

/// Waits (at most 10 s) until `dig` (one query to the server `what`) gets NOERROR: NSD and
/// knotd have no readiness signal of their own.
pub fn wait_for_answers(what: &str, dig: impl Fn() -> String) {
    let mut last = String::new();
    for _ in 0..100 {
        last = dig();
        if last.contains("status: NOERROR") {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what} never answered (its log is on stderr above); the last reply:\n{last}");
}
