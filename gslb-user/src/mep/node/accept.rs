//! Inbound sessions before authentication: who may even start a handshake, how many may be in
//! progress, and what the acceptor checks before it believes a Hello.
//!
//! - **Source address.** A connection from an address that is no configured site's (its `ip`,
//!   or the address others connect to it at) is closed at once (`wrong_source`), unless some
//!   site is marked `nat` (its sessions may come from anywhere); after the Hello, the address must
//!   be the claimed site's own, unless that site is `nat`.
//! - **Limits.** At most `max_pending_per_source` handshakes in progress per source address
//!   (more are closed at once, `preauth_limit`) and `max_pending_handshakes` in all; when the
//!   pool is full the oldest handshake in progress is closed for the newcomer. The accept loop
//!   never waits for a slot, so a flood of silent connections costs a real site's handshake
//!   at most the time it takes to accept and close the flood, not `handshake_timeout` per slot.
//! - **Logs** of refusals are rate-limited ([`LogGate`]): the first of each reason, then at most
//!   one a second with the count of those not logged.

use std::{
    collections::{HashMap, VecDeque},
    net::{IpAddr, SocketAddr},
    sync::{Arc, Mutex, atomic::Ordering},
    time::Duration,
};

use tokio::{
    net::{TcpListener, TcpStream},
    sync::oneshot,
    task::JoinSet,
};
use tracing::warn;

use crate::log_limit::KeyedLimiter;

use super::transport::{BoxStream, Ctx, established};
use crate::mep::{
    auth::PublicKey,
    frame::{Hello, RejectCode},
    session::{self, CloseReason, Identity, SessionError},
    topology::{SiteSpec, SiteTree},
};

/// Whether `addr` may be the source of `site`'s sessions: its `ip`, or the address others connect
/// to it at (a NAT's public address), or anything for a `nat` site.
pub(super) fn source_allowed(site: &SiteSpec, addr: IpAddr) -> bool {
    let addr = addr.to_canonical();
    site.nat || site.ip == addr || site.connect.is_some_and(|c| c.ip().to_canonical() == addr)
}

/// Whether any configured site may connect from `addr`.
fn any_site_from(topology: &SiteTree, addr: IpAddr) -> bool {
    topology.sites().iter().any(|s| source_allowed(s, addr))
}

/// The acceptor's vetting of a Hello: the site is known, may call us, from this address, and
/// has a key to prove its name with.
pub(super) fn vet(
    topology: &SiteTree,
    me: &str,
    from: SocketAddr,
    h: &Hello,
) -> Result<PublicKey, SessionError> {
    topology
        .inbound_allowed(me, &h.site, h.role)
        .map_err(|(code, why)| match code {
            RejectCode::UnknownSite => SessionError::UnknownSite(why),
            _ => SessionError::NotAllowed(why),
        })?;
    let Some(spec) = topology.site(&h.site) else {
        return Err(SessionError::UnknownSite(format!(
            "site {:?} is not configured here",
            h.site
        )));
    };
    if !source_allowed(spec, from.ip()) {
        return Err(SessionError::WrongSource(format!(
            "{:?} connected from {}, not its address {} (set nat = true on its [[site]] if it is behind NAT)",
            h.site,
            from.ip(),
            spec.ip
        )));
    }
    spec.key.ok_or_else(|| {
        SessionError::UnknownSite(format!("site {:?} has no public key here", h.site))
    })
}

/// At most one warning a second per reason; the others are counted and reported with the next.
pub(super) struct LogGate {
    limiter: Mutex<KeyedLimiter<CloseReason>>,
}

impl Default for LogGate {
    fn default() -> Self {
        LogGate {
            // More than there are reasons: every reason keeps its own limiter.
            limiter: Mutex::new(KeyedLimiter::new(Duration::from_secs(1), 64)),
        }
    }
}

impl LogGate {
    /// Whether to log now, and how many were not logged since the last one.
    pub(super) fn admit(&self, reason: CloseReason) -> Option<u64> {
        self.admit_at(reason, tokio::time::Instant::now())
    }

    fn admit_at(&self, reason: CloseReason, now: tokio::time::Instant) -> Option<u64> {
        self.limiter
            .lock()
            .expect("not poisoned")
            .allow(reason, now)
    }
}

/// The handshakes in progress.
#[derive(Default)]
struct Pool {
    per_source: HashMap<IpAddr, usize>,
    /// Oldest first: (id, source, closes it).
    order: VecDeque<(u64, IpAddr, oneshot::Sender<()>)>,
    next: u64,
}

impl Pool {
    fn remove(&mut self, id: u64) {
        if let Some(i) = self.order.iter().position(|(x, _, _)| *x == id) {
            let (_, ip, _) = self.order.remove(i).expect("present");
            self.release(ip);
        }
    }

    fn release(&mut self, ip: IpAddr) {
        if let Some(n) = self.per_source.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&ip);
            }
        }
    }
}

/// Leaves the pool when the handshake ends, however it ends.
struct Slot {
    pool: Arc<Mutex<Pool>>,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.pool.lock().expect("not poisoned").remove(self.id);
    }
}

fn refused(ctx: &Ctx, addr: SocketAddr, error: &SessionError) {
    let reason = error.reason();
    ctx.counters.closed(reason);
    if let Some(quiet) = ctx.log_gate.admit(reason) {
        warn!(site = %ctx.cfg.site, %addr, reason = reason.as_str(), %error,
            suppressed = quiet, "MEP link refused");
    }
}

pub(super) async fn accept_loop(listener: TcpListener, ctx: Arc<Ctx>) {
    let pool = Arc::new(Mutex::new(Pool::default()));
    let mut conns = JoinSet::new();
    // Failing accepts (out of descriptors) are retried every 50 ms.
    let mut accept_warnings = crate::log_limit::LogLimiter::new(Duration::from_secs(10));
    loop {
        while conns.try_join_next().is_some() {}
        let (stream, addr) = match listener.accept().await {
            Ok(r) => r,
            Err(error) => {
                if let Some(suppressed) = accept_warnings.allow(tokio::time::Instant::now()) {
                    warn!(%error, suppressed, "MEP accept");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        ctx.counters.accepted.fetch_add(1, Ordering::Relaxed);
        let cfg = &ctx.cfg;
        let source = addr.ip().to_canonical();
        if !any_site_from(&cfg.topology, source) {
            refused(
                &ctx,
                addr,
                &SessionError::WrongSource(format!("{source} is no configured site's address")),
            );
            continue;
        }
        let (slot, cancel) = {
            let mut p = pool.lock().expect("not poisoned");
            let n = p.per_source.get(&source).copied().unwrap_or(0);
            if n >= cfg.max_pending_per_source {
                drop(p);
                refused(
                    &ctx,
                    addr,
                    &SessionError::Local {
                        reason: CloseReason::PreauthLimit,
                        detail: format!(
                            "{n} handshakes in progress from {source} already (max_pending_per_source)"
                        ),
                    },
                );
                continue;
            }
            if p.order.len() >= cfg.max_pending_handshakes
                && let Some((_, ip, close)) = p.order.pop_front()
            {
                // The oldest handshake in progress makes room: a real site's takes
                // milliseconds, a silent flood's the whole deadline.
                p.release(ip);
                let _ = close.send(());
            }
            let id = p.next;
            p.next += 1;
            *p.per_source.entry(source).or_default() += 1;
            let (close, cancel) = oneshot::channel();
            p.order.push_back((id, source, close));
            (
                Slot {
                    pool: pool.clone(),
                    id,
                },
                cancel,
            )
        };
        let _ = stream.set_nodelay(true);
        let ctx = ctx.clone();
        conns.spawn(async move {
            let cfg = &ctx.cfg;
            let handshake = async {
                let mut stream = tls_accept(stream, cfg).await?;
                let me = Identity {
                    hello: &ctx.hello,
                    key: &cfg.key,
                };
                let est = session::handshake_acceptor(
                    &mut stream,
                    me,
                    cfg.max_payload,
                    cfg.handshake_timeout,
                    |h| vet(&cfg.topology, &cfg.site, addr, h),
                )
                .await?;
                Ok::<_, SessionError>((stream, est))
            };
            let result = tokio::select! {
                r = handshake => r,
                _ = cancel => Err(SessionError::Local {
                    reason: CloseReason::PreauthLimit,
                    detail: format!(
                        "closed in its handshake for a newer connection ({} in progress, max_pending_handshakes)",
                        cfg.max_pending_handshakes
                    ),
                }),
            };
            drop(slot);
            match result {
                Ok((stream, est)) => {
                    established(stream, est, false, &ctx).await;
                }
                Err(error) => refused(&ctx, addr, &error),
            }
        });
    }
}

/// The accepted connection, in TLS when the site is configured so.
async fn tls_accept(
    stream: TcpStream,
    cfg: &crate::mep::MepConfig,
) -> Result<BoxStream, SessionError> {
    let Some(tls) = &cfg.tls else {
        return Ok(Box::new(stream));
    };
    let accept = tokio_rustls::TlsAcceptor::from(tls.server.clone()).accept(stream);
    match tokio::time::timeout(cfg.handshake_timeout, accept).await {
        Err(_) => Err(SessionError::HandshakeTimeout(cfg.handshake_timeout)),
        Ok(Err(e)) => Err(SessionError::Tls(e.to_string())),
        Ok(Ok(s)) => Ok(Box::new(s)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_gate_lets_one_a_second_through_and_counts_the_rest() {
        let gate = LogGate::default();
        let t0 = tokio::time::Instant::now();
        assert_eq!(gate.admit_at(CloseReason::Integrity, t0), Some(0));
        assert_eq!(gate.admit_at(CloseReason::Integrity, t0), None);
        assert_eq!(gate.admit_at(CloseReason::Integrity, t0), None);
        assert_eq!(
            gate.admit_at(CloseReason::WrongSource, t0),
            Some(0),
            "per reason"
        );
        let later = t0 + Duration::from_secs(2);
        assert_eq!(gate.admit_at(CloseReason::Integrity, later), Some(2));
    }
}
