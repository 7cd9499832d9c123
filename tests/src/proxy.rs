//! A TCP proxy that can cut a link ([`TcpProxy`]): forward, hold or drop its connections' bytes.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    sync::atomic::Ordering,
    time::Duration,
};

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
