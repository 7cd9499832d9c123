//! The sessions' byte streams and tasks: TCP (or TLS over it) to a peer, the dial loop that keeps
//! an outbound session open with backoff, and the task of an established session (inbound or
//! outbound) that runs the session and reports to the controller by [`Event`].

use std::{
    net::{IpAddr, SocketAddr},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::{TcpSocket, TcpStream},
    sync::{mpsc, oneshot, watch},
};
use tokio_rustls::rustls::pki_types::ServerName;
use tracing::{debug, info, warn};

use super::{MepConfig, accept};
use crate::mep::{
    frame::{Hello, Message},
    session::{
        self, Audience, CloseReason, Counters, LocalHello, Outbound, SessionChannels, SessionCmd,
        SessionError, SessionParams,
    },
    topology::SiteSpec,
};

/// A task aborted when this is dropped.
pub(super) struct AbortOnDrop(pub(super) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Everything session tasks share.
pub(super) struct Ctx {
    pub(super) cfg: Arc<MepConfig>,
    pub(super) hello: LocalHello,
    pub(super) counters: Arc<Counters>,
    pub(super) events: mpsc::Sender<Event>,
    pub(super) outbound: watch::Sender<Arc<Outbound>>,
    pub(super) next_id: AtomicU64,
    /// Rate-limits the warnings of refused sessions and statements.
    pub(super) log_gate: accept::LogGate,
}

/// What session tasks tell the controller.
#[derive(Debug)]
pub enum Event {
    Up {
        session: u64,
        hello: Box<Hello>,
        version: u8,
        initiated: bool,
        cmds: mpsc::Sender<SessionCmd>,
        kill: oneshot::Sender<(CloseReason, String)>,
        audience: watch::Sender<Audience>,
    },
    Frame {
        session: u64,
        message: Message,
    },
    Down {
        session: u64,
        peer: String,
        reason: CloseReason,
        error: String,
    },
    /// A dial or handshake towards `peer` failed.
    Failed {
        peer: String,
        reason: CloseReason,
        error: String,
    },
}

/// A session's byte stream: plain TCP or TLS over it.
pub(super) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}
pub(super) type BoxStream = Box<dyn Stream>;

/// The connection to `site`, in TLS (verifying the site's certificate for its name) when the
/// site is configured so.
async fn tls_connect(
    stream: TcpStream,
    site: &str,
    cfg: &MepConfig,
) -> Result<BoxStream, SessionError> {
    let Some(tls) = &cfg.tls else {
        return Ok(Box::new(stream));
    };
    let name = ServerName::try_from(site.to_owned()).map_err(|e| {
        SessionError::Tls(format!("site name {site:?} is not a TLS server name: {e}"))
    })?;
    let connect = tokio_rustls::TlsConnector::from(tls.client.clone()).connect(name, stream);
    match tokio::time::timeout(cfg.handshake_timeout, connect).await {
        Err(_) => Err(SessionError::HandshakeTimeout(cfg.handshake_timeout)),
        Ok(Err(e)) => Err(SessionError::Tls(e.to_string())),
        Ok(Ok(s)) => Ok(Box::new(s)),
    }
}

pub(super) async fn established(
    stream: BoxStream,
    est: session::Established,
    initiated: bool,
    ctx: &Ctx,
) -> Option<Duration> {
    let cfg = &ctx.cfg;
    ctx.counters.handshakes.fetch_add(1, Ordering::Relaxed);
    let session = ctx.next_id.fetch_add(1, Ordering::Relaxed);
    let peer = est.peer.site.clone();
    if let (Some(ours), Some(theirs)) = (cfg.rtt_tolerance_ms, est.peer.rtt_tolerance_ms)
        && ours != theirs
    {
        ctx.counters
            .tolerance_mismatches
            .fetch_add(1, Ordering::Relaxed);
        warn!(site = %cfg.site, %peer, ours, theirs,
            "RTT TOLERANCE DIFFERS between sites: RTT answers will disagree; configure the same value everywhere");
    }
    let (cmds_tx, cmds) = mpsc::channel(cfg.session_queue);
    let (kill_tx, kill) = oneshot::channel();
    let (audience_tx, audience) = watch::channel(Audience::None);
    let up = Event::Up {
        session,
        hello: Box::new(est.peer.clone()),
        version: est.version,
        initiated,
        cmds: cmds_tx,
        kill: kill_tx,
        audience: audience_tx,
    };
    if ctx.events.send(up).await.is_err() {
        return None;
    }
    info!(site = %cfg.site, %peer, version = est.version, initiated, software = %est.peer.software, "MEP link up");
    let started = Instant::now();
    let params = SessionParams {
        id: session,
        peer: peer.clone(),
        version: est.version,
        max_payload: cfg.max_payload,
        heartbeat: cfg.heartbeat,
        dead_after: cfg.dead_after,
        write_timeout: cfg.write_timeout,
    };
    let error = session::run_session(
        stream,
        est.keys,
        params,
        ctx.counters.clone(),
        SessionChannels {
            cmds,
            kill,
            outbound: ctx.outbound.subscribe(),
            audience,
            events: ctx.events.clone(),
        },
    )
    .await;
    let reason = error.reason();
    ctx.counters.closed(reason);
    match reason {
        CloseReason::Shutdown | CloseReason::Unwanted | CloseReason::Replaced => {
            info!(site = %cfg.site, %peer, reason = reason.as_str(), %error, "MEP link closed");
        }
        _ => warn!(site = %cfg.site, %peer, reason = reason.as_str(), %error, "MEP link down"),
    }
    let _ = ctx
        .events
        .send(Event::Down {
            session,
            peer,
            reason,
            error: format!("{}: {error}", reason.as_str()),
        })
        .await;
    Some(started.elapsed())
}

/// Opens the session to `spec` and keeps it open (reconnecting with backoff) until `stop`.
pub(super) async fn dial_loop(spec: SiteSpec, ctx: Arc<Ctx>, mut stop: watch::Receiver<bool>) {
    let cfg = &ctx.cfg;
    let addr = spec.mep_addr();
    // Sessions leave from this site's own address where it has it, so that the peer's source
    // check sees the configured `ip` (loopback tests, hosts with several addresses).
    let source = cfg.topology.site(&cfg.site).map(|s| s.ip);
    let mut backoff = cfg.reconnect_min;
    let mut failures = 0u64;
    loop {
        if *stop.borrow() {
            return;
        }
        let attempt = async {
            ctx.counters.dialed.fetch_add(1, Ordering::Relaxed);
            let stream =
                match tokio::time::timeout(cfg.connect_timeout, connect(addr, source)).await {
                    Err(_) => {
                        return Err(SessionError::Connect {
                            addr,
                            source: std::io::ErrorKind::TimedOut.into(),
                        });
                    }
                    Ok(Err(source)) => return Err(SessionError::Connect { addr, source }),
                    Ok(Ok(s)) => s,
                };
            let _ = stream.set_nodelay(true);
            let mut stream = tls_connect(stream, &spec.name, cfg).await?;
            let me = session::Identity {
                hello: &ctx.hello,
                key: &cfg.key,
            };
            let peer_key = spec.key.ok_or_else(|| {
                SessionError::UnknownSite(format!("site {:?} has no public key here", spec.name))
            })?;
            let est = session::handshake_initiator(
                &mut stream,
                me,
                &spec.name,
                &peer_key,
                cfg.max_payload,
                cfg.handshake_timeout,
            )
            .await?;
            Ok((stream, est))
        };
        let outcome = tokio::select! {
            r = attempt => r,
            _ = stop.changed() => return,
        };
        match outcome {
            Ok((stream, est)) => {
                // Established sessions end only by failing or by the controller's kill.
                failures = 0;
                if let Some(lasted) = established(stream, est, true, &ctx).await
                    && lasted >= cfg.dead_after
                {
                    backoff = cfg.reconnect_min;
                }
            }
            Err(error) => {
                let reason = error.reason();
                ctx.counters.closed(reason);
                // An unreachable peer is never silent: the first failure of a streak and every
                // tenth after it are warnings, with the address and the reason.
                failures += 1;
                let level_warn =
                    !matches!(reason, CloseReason::ConnectFailed) || failures % 10 == 1;
                if level_warn {
                    warn!(site = %cfg.site, peer = %spec.name, %addr, reason = reason.as_str(), %error, "MEP link failed");
                } else {
                    debug!(site = %cfg.site, peer = %spec.name, %addr, reason = reason.as_str(), %error, "MEP link failed");
                }
                let _ = ctx
                    .events
                    .send(Event::Failed {
                        peer: spec.name.clone(),
                        reason,
                        error: format!("{}: {error}", reason.as_str()),
                    })
                    .await;
            }
        }
        let wait = jitter(backoff);
        backoff = (backoff * 2).min(cfg.reconnect_max);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
    }
}

/// A connection to `addr`, from `source` when this host has that address (else from whatever
/// address the route gives).
async fn connect(addr: SocketAddr, source: Option<IpAddr>) -> std::io::Result<TcpStream> {
    if let Some(ip) = source.filter(|ip| !ip.is_unspecified() && ip.is_ipv4() == addr.is_ipv4()) {
        let socket = if ip.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        if socket.bind(SocketAddr::new(ip, 0)).is_ok() {
            return socket.connect(addr).await;
        }
    }
    TcpStream::connect(addr).await
}

/// `d` plus up to 25 % at random, so that sites cut off together do not all retry together.
fn jitter(d: Duration) -> Duration {
    let r = u32::from(crate::mep::auth::nonce()[0]);
    d + d * r / 1024
}
