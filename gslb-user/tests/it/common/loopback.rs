//! Ports on the loopback for the tests, without racing other tests for them: gslbd's own
//! sockets (DNS, MEP) bound at port 0 before it starts and handed to it; a port that refuses
//! connections, held for the test's life; a backend that accepts; and the one place where a
//! port is picked for a program that binds it itself (nginx, a gslbd child process), with the
//! race that has and its retry.

use std::net::{IpAddr, SocketAddr, TcpListener};

use gslb_user::daemon::Listeners;
use tokio::task::JoinHandle;

/// gslbd's DNS sockets on 127.0.0.1, bound on a free port (UDP and TCP), and that port.
pub(crate) fn bound_dns() -> (u16, Listeners) {
    bound_dns_on([127, 0, 0, 1].into())
}

/// [`bound_dns`] on `ip`.
pub(crate) fn bound_dns_on(ip: IpAddr) -> (u16, Listeners) {
    let dns = Listeners::bind_addrs(&[(ip, 0).into()]).expect("DNS sockets bind");
    (dns.port().expect("one address"), dns)
}

/// gslbd's MEP listener on `ip`, bound on a free port, and that port: the file names it as the
/// site's `mep_port`, and the test gives the listener to gslbd in [`Listeners::mep`].
pub(crate) fn bound_mep(ip: &str) -> (u16, TcpListener) {
    let listener = TcpListener::bind((ip, 0)).expect("MEP listener binds");
    (listener.local_addr().unwrap().port(), listener)
}

/// A TCP port on `ip` where nothing listens, so that a connection to it is refused: bound and
/// never listening, by the socket returned, which keeps anyone else from taking the port while
/// the test holds it. (A port bound and let go again is free for anyone to take.)
pub(crate) fn refusing_tcp_port(ip: &str) -> (u16, socket2::Socket) {
    use socket2::{Domain, Socket, Type};
    let ip: IpAddr = ip.parse().expect("test address");
    let socket = Socket::new(Domain::for_address((ip, 0).into()), Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::new(ip, 0).into()).unwrap();
    let port = socket
        .local_addr()
        .unwrap()
        .as_socket()
        .expect("an IP socket")
        .port();
    (port, socket)
}

/// A TCP server that accepts and closes every connection (what a TCP monitor checks), until
/// dropped.
pub(crate) struct Backend {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Backend {
    /// On a free port of `ip`.
    pub(crate) async fn bind(ip: &str) -> Backend {
        let ip: IpAddr = ip.parse().expect("test address");
        Backend::start((ip, 0).into()).await
    }

    /// On `addr`: the address of an earlier backend, to bring it back (the port was the
    /// test's until that one was dropped).
    pub(crate) async fn start(addr: SocketAddr) -> Backend {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .unwrap_or_else(|e| panic!("backend on {addr}: {e}"));
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            loop {
                if let Ok((conn, _)) = listener.accept().await {
                    drop(conn);
                }
            }
        });
        Backend { addr, task }
    }

    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a program said when the port it was given to bind was taken.
#[derive(Debug)]
pub(crate) struct PortTaken(pub String);

/// How many ports [`start_on_picked_port`] tries.
const PICKS: usize = 5;

/// Starts a program that binds its port itself (nginx; a gslbd child process, which can only
/// be told a port in its file or on its command line): `start` is given a port of `ip` that
/// was free a moment ago and starts the program on it. That is a race with anything binding
/// a port meanwhile (the kernel may hand the same port to another test's port 0), so when
/// `start` reports the port taken it is tried again on a new port, up to [`PICKS`] times.
/// `what` names the program in the panic when every pick was taken.
pub(crate) fn start_on_picked_port<T>(
    ip: &str,
    what: &str,
    mut start: impl FnMut(u16) -> Result<T, PortTaken>,
) -> T {
    let mut taken = Vec::new();
    for _ in 0..PICKS {
        let port = TcpListener::bind((ip, 0))
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        match start(port) {
            Ok(started) => return started,
            Err(PortTaken(said)) => taken.push(format!("{ip}:{port}: {said}")),
        }
    }
    panic!(
        "{what}: every port picked was taken before it bound it:\n{}",
        taken.join("\n")
    );
}
