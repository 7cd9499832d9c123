//! The DNS sockets gslbd answers on: bound before anything else starts (a port in use is the
//! most common start-up failure, and nothing is loaded into the kernel yet when it happens),
//! either from the configuration (`main`) or by the caller (tests bind port 0), and the
//! supervised UDP and TCP loops that serve them.

use std::{net::SocketAddr, sync::Arc};

use tokio::{
    net::{TcpListener, UdpSocket},
    sync::watch,
};

use super::DaemonError;
use crate::{
    config::Config,
    probe::LdnsRecorder,
    responder::Responder,
    server::{self, TcpLimits},
    supervise,
};

/// The sockets of one listening address: one UDP socket per core sharing the port
/// (SO_REUSEPORT: the kernel spreads clients over them, so one busy receive loop does not drop
/// what others could answer) and the TCP listener. Kept as std sockets: each run of a
/// supervised loop gets a duplicate of its own.
#[derive(Debug)]
pub struct DnsSockets {
    pub addr: SocketAddr,
    pub udp: Vec<std::net::UdpSocket>,
    pub tcp: std::net::TcpListener,
}

/// Every DNS socket gslbd answers on, already bound; [`super::run`] serves on them. And the
/// admin endpoint's listener (`[admin] listen`), bound with them (before anything is loaded,
/// and while gslbd may still bind a privileged port); [`super::run`] binds it itself when the
/// caller left it `None`.
#[derive(Debug, Default)]
pub struct Listeners {
    pub dns: Vec<DnsSockets>,
    /// The MEP listener, when the caller bound it (tests bind port 0); `None`: gslbd binds the
    /// configured `[mep]` address itself, after the DNS sockets.
    pub mep: Option<std::net::TcpListener>,
    /// The admin endpoint's listener, when the caller bound it (tests bind port 0); `None`:
    /// gslbd binds `[admin] listen` itself.
    pub admin: Option<std::net::TcpListener>,
}

impl Listeners {
    /// Binds `server.listen` on `server.dns_port` (with the command line's overrides already in
    /// `config`).
    pub fn bind(config: &Config) -> Result<Listeners, DaemonError> {
        let server = &config.server;
        let addrs: Vec<SocketAddr> = server
            .listen
            .iter()
            .map(|ip| SocketAddr::new(*ip, server.dns_port))
            .collect();
        let mut listeners = Listeners::bind_sockets(&addrs, server.socket_affinity)?;
        listeners.admin = config
            .admin
            .as_ref()
            .map(|admin| bind_admin(admin.listen))
            .transpose()?;
        Ok(listeners)
    }

    /// Binds every address of `addrs`; port 0 takes one free port for all of them, the same
    /// for UDP and TCP (the first address's TCP listener picks it).
    pub fn bind_addrs(addrs: &[SocketAddr]) -> Result<Listeners, DaemonError> {
        Listeners::bind_sockets(addrs, false)
    }

    /// [`Listeners::bind_addrs`], each UDP socket tied to its CPU with `socket_affinity`
    /// (`server.socket_affinity`; [`reuseport_udp`]).
    fn bind_sockets(addrs: &[SocketAddr], socket_affinity: bool) -> Result<Listeners, DaemonError> {
        let mut dns = Vec::new();
        let mut picked = None;
        for &addr in addrs {
            let mut addr = addr;
            if addr.port() == 0
                && let Some(port) = picked
            {
                addr.set_port(port);
            }
            // A free port is picked by the TCP listener, then taken for UDP; a configured one
            // is bound UDP first, as gslbd always did.
            let mut tcp = None;
            if addr.port() == 0 {
                let listener = bind_tcp(addr)?;
                let port = listener
                    .local_addr()
                    .map_err(|source| bind_error(addr, "tcp", source))?
                    .port();
                addr.set_port(port);
                picked = Some(port);
                tcp = Some(listener);
            }
            let mut udp = Vec::new();
            for cpu in udp_cpus() {
                let cpu = socket_affinity.then_some(cpu);
                udp.push(
                    reuseport_udp(addr, cpu).map_err(|source| bind_error(addr, "udp", source))?,
                );
            }
            log_capped_receive_buffer(addr, &udp);
            let tcp = match tcp {
                Some(tcp) => tcp,
                None => bind_tcp(addr)?,
            };
            dns.push(DnsSockets { addr, udp, tcp });
        }
        Ok(Listeners {
            dns,
            mep: None,
            admin: None,
        })
    }

    /// The addresses bound.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.dns.iter().map(|d| d.addr).collect()
    }

    /// The port of the first address (the one every address shares when bound from a
    /// configuration or with port 0).
    pub fn port(&self) -> Option<u16> {
        self.dns.first().map(|d| d.addr.port())
    }
}

/// Starts the supervised UDP and TCP loops of every socket of `listeners`; they end once
/// `stopped` is true.
pub(super) fn spawn_dns_loops(
    listeners: Listeners,
    responder: &Arc<Responder>,
    recorder: impl Fn() -> LdnsRecorder,
    tcp_limits: TcpLimits,
    stopped: &watch::Receiver<bool>,
) -> Vec<supervise::Supervised> {
    let mut loops = Vec::new();
    for DnsSockets { addr, udp, tcp } in listeners.dns {
        for (i, udp) in udp.into_iter().enumerate() {
            let (responder, recorder, stopped) = (responder.clone(), recorder(), stopped.clone());
            loops.push(supervise::spawn(format!("dns-udp/{addr}/{i}"), move |_| {
                let socket = udp.try_clone().and_then(UdpSocket::from_std);
                let loop_ = socket.map(|socket| {
                    server::run_udp_recording(
                        socket,
                        responder.clone(),
                        Some(recorder.clone()),
                        stop_signal(stopped.clone()),
                    )
                });
                async move {
                    loop_?.await;
                    Ok::<_, std::io::Error>(())
                }
            }));
        }
        let (responder, recorder, stopped) = (responder.clone(), recorder(), stopped.clone());
        loops.push(supervise::spawn(format!("dns-tcp/{addr}"), move |_| {
            let listener = tcp.try_clone().and_then(TcpListener::from_std);
            let loop_ = listener.map(|listener| {
                server::run_tcp_recording(
                    listener,
                    responder.clone(),
                    tcp_limits,
                    Some(recorder.clone()),
                    stop_signal(stopped.clone()),
                )
            });
            async move {
                loop_?.await;
                Ok::<_, std::io::Error>(())
            }
        }));
    }
    loops
}

/// How long a server loop may take to end once told to (a loop waiting to be restarted is
/// stopped then).
pub(super) const SERVER_STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Resolves once `stop` is true (or gone): the server loops' shutdown.
async fn stop_signal(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// The CPU of each UDP socket of an address: one per CPU this process may run on (its affinity
/// mask, at most `available_parallelism`, which also counts a CPU quota), in order.
fn udp_cpus() -> Vec<usize> {
    let workers = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    // SAFETY: an all-zero cpu_set_t is the empty set; sched_getaffinity writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size given.
    let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &raw mut set) };
    let allowed: Vec<usize> = if rc == 0 {
        // SAFETY: CPU_ISSET reads the set within its size (`i` < CPU_SETSIZE).
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
            .collect()
    } else {
        (0..workers).collect()
    };
    allowed.into_iter().take(workers.max(1)).collect()
}

/// A UDP socket of the port's group. With `cpu`, for the loop that runs on that CPU
/// (`server.socket_affinity`): SO_INCOMING_CPU tells the kernel to hand it the datagrams it
/// receives on that CPU (SO_REUSEPORT's selection takes
/// the group's socket of the receiving CPU when there is one, since Linux 6.2; before, the
/// option is kept but selection hashes as without it). The loop's thread runs on that CPU
/// (`server::udp`), so a query is read, answered and its reply sent where the kernel received
/// it: no wake-up of a thread on another CPU (an inter-processor interrupt, a VM exit on a
/// virtual machine) and no socket data moving between caches.
fn reuseport_udp(addr: SocketAddr, cpu: Option<usize>) -> std::io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_port(true)?;
    if let Some(cpu) = cpu {
        socket.set_cpu_affinity(cpu)?;
    }
    receive_buffer(&socket, UDP_RECEIVE_BUFFER)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// The receive buffer each UDP socket asks for. The kernel's default (`rmem_default`, 208 KiB
/// on a stock kernel) holds only three datagrams of 64 KiB: a few hostile ones sent while the
/// socket's thread waits for a CPU fill it, and every ordinary query hashed to that socket is
/// dropped until the thread runs again (issue 27's flood, measured in `bench hostile`). 4 MiB
/// holds over 60 of them, or some 25,000 ordinary queries; memory is only taken while
/// datagrams wait (NSD suggests the same `so-rcvbuf: 4m` for busy servers).
const UDP_RECEIVE_BUFFER: usize = 4 << 20;

/// Gives `socket` a receive buffer of `bytes`: SO_RCVBUFFORCE while gslbd may (root, or
/// CAP_NET_ADMIN: sockets are opened before the privilege drop), else SO_RCVBUF, which the
/// kernel caps at `net.core.rmem_max`; that cap is logged, once per address
/// ([`log_capped_receive_buffer`]), not an error, since the socket works.
fn receive_buffer(socket: &socket2::Socket, bytes: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: a valid socket, an int option of the size given.
    let forced = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            std::ptr::from_ref(&value).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    } == 0;
    if !forced {
        socket.set_recv_buffer_size(bytes)?;
    }
    Ok(())
}

/// Logs that the UDP sockets of `addr` (one group, all asked for the same buffer) got less
/// receive buffer than [`UDP_RECEIVE_BUFFER`]: one line per address, not one per socket.
fn log_capped_receive_buffer(addr: SocketAddr, group: &[std::net::UdpSocket]) {
    let Some(first) = group.first() else {
        return;
    };
    // The kernel reports twice what it keeps for data (the rest is its bookkeeping).
    let got = socket2::SockRef::from(first)
        .recv_buffer_size()
        .map_or(0, |b| b / 2);
    if got < UDP_RECEIVE_BUFFER {
        tracing::info!(
            %addr,
            sockets = group.len(),
            wanted = UDP_RECEIVE_BUFFER,
            got,
            "UDP receive buffer capped by net.core.rmem_max (gslbd was not allowed \
             SO_RCVBUFFORCE); raise rmem_max to keep floods of large datagrams from \
             dropping queries"
        );
    }
}

fn bind_error(addr: SocketAddr, transport: &'static str, source: std::io::Error) -> DaemonError {
    DaemonError::Bind {
        addr,
        transport,
        source,
    }
}

/// The admin endpoint's listener on `addr` (port 0: a free one).
pub(super) fn bind_admin(addr: SocketAddr) -> Result<std::net::TcpListener, DaemonError> {
    std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|source| bind_error(addr, "admin http", source))
}

fn bind_tcp(addr: SocketAddr) -> Result<std::net::TcpListener, DaemonError> {
    std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|source| bind_error(addr, "tcp", source))
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, UdpSocket};

    use socket2::SockRef;

    use super::*;

    /// The CPU a socket takes its datagrams on, `None` when unset (the kernel's -1).
    fn incoming_cpu(socket: &UdpSocket) -> Option<usize> {
        let cpu = SockRef::from(socket).cpu_affinity().unwrap();
        (cpu < libc::CPU_SETSIZE as usize).then_some(cpu)
    }

    #[test]
    fn with_socket_affinity_each_udp_socket_is_tied_to_its_own_cpu() {
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let tied = Listeners::bind_sockets(&[addr], true).unwrap();
        let cpus: Vec<Option<usize>> = tied.dns[0].udp.iter().map(incoming_cpu).collect();
        let want: Vec<Option<usize>> = udp_cpus().into_iter().map(Some).collect();
        assert_eq!(cpus, want);
        // Without it (the default), none is: the kernel spreads datagrams by hash.
        let spread = Listeners::bind_addrs(&[addr]).unwrap();
        assert!(spread.dns[0].udp.iter().all(|s| incoming_cpu(s).is_none()));
    }

    /// `server.socket_affinity` from the file to the sockets, on `main`'s path: the file loaded
    /// with the command line's overrides (`load_config`; `--port 0` here, as a configured port
    /// cannot be 0) and the sockets opened before the privilege drop (`Started::open`, which
    /// calls [`Listeners::bind`]; `--no-xdp`, so no root).
    #[test]
    fn socket_affinity_in_the_configuration_ties_the_daemons_udp_sockets_to_their_cpus() {
        use crate::daemon::{Overrides, Started, load_config};
        let dir = gslb_tests::TempDir::new("socket-affinity");
        let overrides = Overrides {
            no_xdp: true,
            port: Some(0),
            ..Overrides::default()
        };
        let sockets_cpus = |server: &str| {
            let path = dir.0.join("gslb.toml");
            let state = dir.0.join("admin-state");
            let text = format!(
                "[server]\nlisten = [\"127.0.0.1\"]\nstate_file = \"{}\"\n{server}",
                state.display()
            );
            std::fs::write(&path, text).unwrap();
            let config = load_config(&path, &overrides).unwrap();
            let started = Started::open(&config, &overrides).unwrap();
            let dns = &started.listeners.dns[0];
            assert_eq!(dns.addr.ip(), IpAddr::from([127, 0, 0, 1]));
            dns.udp.iter().map(incoming_cpu).collect::<Vec<_>>()
        };
        let tied: Vec<Option<usize>> = udp_cpus().into_iter().map(Some).collect();
        assert_eq!(sockets_cpus("socket_affinity = true\n"), tied);
        // Absent or false: SO_INCOMING_CPU is left at the kernel's -1 on every socket.
        let untied = vec![None; tied.len()];
        assert_eq!(sockets_cpus(""), untied);
        assert_eq!(sockets_cpus("socket_affinity = false\n"), untied);
    }

    /// Each UDP socket queues many datagrams of the largest size while its thread is busy: with
    /// the kernel's default buffer only three fit, and the queries behind them were dropped.
    #[test]
    fn a_udp_socket_holds_many_maximum_size_datagrams_unread() {
        if !gslb_tests::privileged("the UDP receive buffer (SO_RCVBUFFORCE)") {
            return;
        }
        let listeners = Listeners::bind_addrs(&["127.0.0.1:0".parse().unwrap()]).unwrap();
        let dns = &listeners.dns[0];
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        let big = vec![0u8; 65_507];
        // The kernel picks the group's socket by the sender's hash: one client's datagrams
        // all wait in the same socket, whichever it is.
        for _ in 0..32 {
            client.send_to(&big, dns.addr).unwrap();
        }
        let mut buf = vec![0u8; 65_535];
        let queued: usize = dns
            .udp
            .iter()
            .map(|socket| std::iter::from_fn(|| socket.recv_from(&mut buf).ok()).count())
            .sum();
        assert_eq!(queued, 32, "datagrams of 65,507 bytes queued unread");
    }

    /// Runs `f` on a thread that may run on `cpu` only.
    fn on_cpu<T: Send>(cpu: usize, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(|| {
                server::pin_thread_to_cpu(cpu).unwrap_or_else(|e| panic!("pin to CPU {cpu}: {e}"));
                f()
            })
            .join()
            .unwrap()
        })
    }

    /// What `socket_affinity` relies on: a datagram sent on loopback from a CPU is received on
    /// that CPU, and the kernel hands it to the socket of the port's group tied to that CPU
    /// (Linux 6.2 on), not to one chosen by hash.
    #[test]
    fn the_kernel_hands_a_datagram_to_the_socket_of_the_cpu_that_received_it() {
        let cpus = udp_cpus();
        if cpus.len() < 2 {
            eprintln!("skipped: one CPU, every socket is the same CPU's");
            return;
        }
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let listeners = Listeners::bind_sockets(&[addr], true).unwrap();
        let dns = &listeners.dns[0];
        // Many senders (source ports), so that a hash would spread them over the sockets.
        for (i, &cpu) in cpus.iter().enumerate() {
            on_cpu(cpu, || {
                for _ in 0..16 {
                    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
                    client.send_to(b"q", dns.addr).unwrap();
                }
            });
            let mut buf = [0u8; 8];
            for (j, socket) in dns.udp.iter().enumerate() {
                let mut got = 0;
                while socket.recv_from(&mut buf).is_ok() {
                    got += 1;
                }
                let want = if i == j { 16 } else { 0 };
                assert_eq!(got, want, "sent on CPU {cpu}: socket {j} of {cpus:?}");
            }
        }
    }
}
