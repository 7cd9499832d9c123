//! The responder's sockets: UDP and TCP servers over already bound sockets (tests bind port 0),
//! each running until `shutdown` resolves.

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream, UdpSocket},
    sync::Semaphore,
};
use tracing::{debug, warn};

use crate::responder::{Responder, Transport};

/// Limits of the TCP server (RFC 7766 asks servers to protect themselves this way).
#[derive(Clone, Copy, Debug)]
pub struct TcpLimits {
    /// Connections served at once; further ones wait in the kernel's backlog.
    pub max_connections: usize,
    /// A connection with no complete query for this long is closed.
    pub idle_timeout: Duration,
}

impl Default for TcpLimits {
    fn default() -> Self {
        TcpLimits { max_connections: 1024, idle_timeout: Duration::from_secs(10) }
    }
}

/// Serves DNS over UDP on `socket` until `shutdown`.
pub async fn run_udp(socket: UdpSocket, responder: Arc<Responder>, shutdown: impl Future<Output = ()>) {
    let mut buf = vec![0u8; u16::MAX as usize];
    tokio::pin!(shutdown);
    loop {
        let (len, peer) = tokio::select! {
            _ = &mut shutdown => return,
            r = socket.recv_from(&mut buf) => match r {
                Ok(r) => r,
                Err(error) => {
                    // ICMP errors of earlier sends surface here on some kernels; keep serving.
                    debug!(%error, "udp receive");
                    continue;
                }
            },
        };
        if let Some(response) = responder.respond(&buf[..len], peer.ip(), Transport::Udp)
            && let Err(error) = socket.send_to(&response, peer).await
        {
            debug!(%error, %peer, "udp send");
        }
    }
}

/// Serves DNS over TCP on `listener` until `shutdown`: several queries per connection, each
/// connection in its own task so that a slow or silent client delays nobody else.
pub async fn run_tcp(
    listener: TcpListener,
    responder: Arc<Responder>,
    limits: TcpLimits,
    shutdown: impl Future<Output = ()>,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => return,
            p = permits.clone().acquire_owned() => p.expect("never closed"),
        };
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => return,
            r = listener.accept() => match r {
                Ok(r) => r,
                Err(error) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    warn!(%error, "tcp accept");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let responder = responder.clone();
        tokio::spawn(async move {
            if let Err(error) = serve_connection(stream, peer, &responder, limits.idle_timeout).await {
                debug!(%error, %peer, "tcp connection closed");
            }
            drop(permit);
        });
    }
}

async fn serve_connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    responder: &Responder,
    idle_timeout: Duration,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; u16::MAX as usize];
    loop {
        // The whole query, length and body, must arrive within the idle timeout.
        let read = async {
            let len = stream.read_u16().await? as usize;
            stream.read_exact(&mut buf[..len]).await?;
            Ok::<_, std::io::Error>(len)
        };
        let len = match tokio::time::timeout(idle_timeout, read).await {
            Err(_) => return Ok(()), // idle
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(r) => r?,
        };
        if let Some(response) = responder.respond(&buf[..len], peer.ip(), Transport::Tcp) {
            let mut framed = Vec::with_capacity(response.len() + 2);
            framed.extend_from_slice(&(response.len() as u16).to_be_bytes());
            framed.extend_from_slice(&response);
            tokio::time::timeout(idle_timeout, stream.write_all(&framed))
                .await
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "write"))??;
        }
    }
}
