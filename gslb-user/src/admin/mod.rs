//! The admin endpoint (`[admin] listen`): HTTP/1.1 on its own TCP listener, for Prometheus,
//! operators and load balancers.
//!
//! - `GET /metrics`: Prometheus text exposition 0.0.4 ([`metrics`]);
//! - `GET /status`: the same values as JSON ([`status`]);
//! - `GET /healthz`: 200 while the process serves HTTP at all;
//! - `GET /readyz`: 200 once the first answers are published and the DNS sockets served,
//!   503 before.
//!
//! Any other path is 404, any other method 405. Every value is read when asked: the query path
//! only bumps relaxed atomics ([`crate::responder::AnswerCounts`]), and the republish loop
//! hands over its view ([`status::WorldFeed`]) after each republish, never waiting on a reader.
//! No client holds the endpoint: see [`MAX_CONNECTIONS`] and [`HEADER_TIMEOUT`].

pub mod metrics;
pub mod status;
pub mod tables;

use std::{
    collections::HashMap,
    convert::Infallible,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering::Relaxed},
    },
    time::Duration,
};

use http_body_util::Full;
use hyper::{
    Method, Request, Response, StatusCode, body::Bytes, header, server::conn::http1,
    service::service_fn,
};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::watch,
    task::{AbortHandle, JoinSet},
    time::Instant,
};
use tracing::{debug, info, warn};

use crate::{
    dataplane::CounterReader, log_limit::LogLimiter, probe::RttHandle, responder::Responder,
    supervise,
};
use metrics::RepublishStats;
use status::{
    Answers, ConfigStatus, RepublishStatus, ResponderStatus, RttStatus, Status, TaskStatus,
    WorldStatus, XdpStatus,
};

/// Connections served at once. When all are taken, a newcomer is still accepted and the
/// connection whose last request came longest ago (or that was accepted longest ago, if it
/// never sent one) is closed for it ([`Served::make_room`]).
///
/// Why eviction rather than a slot kept for `/healthz` and `/readyz`: what a load-balancer
/// operator expects is that a probe (a new connection, one request) is answered, whoever holds
/// the other connections, and that `/metrics` keeps working too. A reserved slot would be
/// taken by the same attacker as the others (a connection's path is only known once its
/// request arrives), and would turn a scraper away with the general slots full. Closing the
/// longest idle connection costs a keep-alive client one reconnect (HTTP/1.1 lets a server
/// close an idle connection at any time, RFC 9112 §9.6), and it is the TCP DNS server's rule
/// too (`server::conns`).
pub const MAX_CONNECTIONS: usize = 64;
/// A request's headers must arrive within this long of the connection's start or of the end of
/// the previous response: hyper's header timer starts again when a keep-alive connection goes
/// idle, so this is also how long an idle keep-alive connection is kept.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection is closed after this long, whatever it does (a scraper reconnects).
const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);
/// At most one log line this often about connections closed for newcomers.
const EVICTION_LOG_EVERY: Duration = Duration::from_secs(10);

/// What the endpoint reads: shared with the daemon, which sets readiness and feeds the rest.
pub struct EndpointState {
    ready: AtomicBool,
    republish: Arc<RepublishStats>,
    responder: Arc<Responder>,
    /// The fast path's counters; `None` without one (`--no-xdp`).
    xdp: Option<CounterReader>,
    world: watch::Receiver<Arc<WorldStatus>>,
    rtt: watch::Receiver<Option<RttHandle>>,
}

impl EndpointState {
    pub fn new(
        republish: Arc<RepublishStats>,
        responder: Arc<Responder>,
        xdp: Option<CounterReader>,
        world: watch::Receiver<Arc<WorldStatus>>,
        rtt: watch::Receiver<Option<RttHandle>>,
    ) -> EndpointState {
        EndpointState {
            ready: AtomicBool::new(false),
            republish,
            responder,
            xdp,
            world,
            rtt,
        }
    }

    /// The first answers are published and the DNS sockets served: `/readyz` says 200.
    pub fn set_ready(&self) {
        self.ready.store(true, Relaxed);
    }

    /// Every value, as of now.
    pub fn status(&self) -> Status {
        let r = &self.republish;
        let rrl = &self.responder.rrl().stats;
        let xdp = self.xdp.as_ref().and_then(|reader| {
            // A map read that fails (never, for a map gslbd holds open) leaves the section out
            // rather than report zeros.
            let read = reader.counters().and_then(|c| Ok((c, reader.rrl()?)));
            match read {
                Ok((counters, (rrl_dropped, rrl_slipped))) => {
                    let (hits, passes) = gslb_common::Counter::ALL
                        .iter()
                        .partition::<Vec<_>, _>(|c| c.is_hit());
                    let by = |list: Vec<&gslb_common::Counter>| {
                        list.into_iter()
                            .map(|c| (c.name(), counters.get(*c)))
                            .collect()
                    };
                    Some(XdpStatus {
                        hits: by(hits),
                        passes: by(passes),
                        rrl_dropped,
                        rrl_slipped,
                    })
                }
                Err(error) => {
                    warn!(%error, "reading the fast path's counters");
                    None
                }
            }
        });
        let world = self.world.borrow().clone();
        let rtt = self.rtt.borrow().as_ref().map(|handle| {
            let stats = handle.stats();
            RttStatus {
                ldns_entries: stats.ldns_entries as u64,
                rtt_rows: handle.rtt_rows() as u64,
                probes_sent: stats.probes,
                probe_rounds: stats.rounds,
                probe_samples: stats.samples,
            }
        });
        let tasks = supervise::stats()
            .into_iter()
            .filter(|(_, s)| s.panics + s.errors + s.restarts > 0)
            .map(|(name, s)| {
                let t = TaskStatus {
                    running: s.running,
                    panics: s.panics,
                    errors: s.errors,
                    restarts: s.restarts,
                };
                (name, t)
            })
            .collect();
        Status {
            ready: self.ready.load(Relaxed),
            config: ConfigStatus {
                generation: 1 + r.recorded.reloads_applied(),
                reloads_refused: r.reloads_refused.load(Relaxed),
                reloads_failed: r.reloads_failed.load(Relaxed),
            },
            republish: RepublishStatus {
                trigger_events: r.events.load(Relaxed),
                by_trigger: r.recorded.by_trigger().collect(),
                duration: r.recorded.histogram(),
            },
            responder: ResponderStatus {
                answers: self
                    .responder
                    .answers()
                    .nonzero()
                    .into_iter()
                    .map(|(transport, rcode, count)| Answers {
                        transport: transport.name(),
                        rcode,
                        count,
                    })
                    .collect(),
                rrl_sent: rrl.sent.load(Relaxed),
                rrl_dropped: rrl.dropped.load(Relaxed),
                rrl_slipped: rrl.slipped.load(Relaxed),
            },
            xdp,
            services: world.services.clone(),
            domains: world.domains.clone(),
            sites: world.sites.clone(),
            mep: world.mep.clone(),
            rtt,
            tasks,
        }
    }
}

/// Serves `listener` until `shutdown` resolves. An accept error that is not about one
/// connection (the listener itself failing) ends the run with it, for the supervisor.
pub async fn run(
    listener: TcpListener,
    state: Arc<EndpointState>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    tokio::pin!(shutdown);
    let mut served = Served::new();
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(done) = served.tasks.join_next_with_id(), if !served.tasks.is_empty() => {
                served.ended(&done);
            }
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    // The connection went away before it was accepted, or file descriptors
                    // ran out for a moment: the listener still works.
                    Err(error) if per_connection(&error) => {
                        debug!(%error, "admin: accept");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                    Err(error) => return Err(error),
                };
                served.make_room();
                served.spawn(stream, state.clone());
            }
        }
    }
    served.tasks.shutdown().await;
    Ok(())
}

/// The connections being served: at most [`MAX_CONNECTIONS`], each with the time of its last
/// request, so that the longest idle one can make room for a newcomer.
struct Served {
    tasks: JoinSet<()>,
    held: HashMap<tokio::task::Id, Held>,
    /// What the request times count from.
    epoch: Instant,
    evictions: LogLimiter,
}

struct Held {
    /// Microseconds from `epoch` to its last request (or to its accept).
    last_request: Arc<AtomicU64>,
    task: AbortHandle,
}

impl Served {
    fn new() -> Served {
        Served {
            tasks: JoinSet::new(),
            held: HashMap::new(),
            epoch: Instant::now(),
            evictions: LogLimiter::new(EVICTION_LOG_EVERY),
        }
    }

    fn now(epoch: Instant) -> u64 {
        u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// A connection's task ended (or was closed for a newcomer and reaped).
    fn ended(&mut self, done: &Result<(tokio::task::Id, ()), tokio::task::JoinError>) {
        let id = match done {
            Ok((id, ())) => *id,
            Err(error) => error.id(),
        };
        self.held.remove(&id);
    }

    /// With every connection taken, closes the one whose last request came longest ago.
    fn make_room(&mut self) {
        if self.held.len() < MAX_CONNECTIONS {
            return;
        }
        let oldest = self
            .held
            .iter()
            .min_by_key(|(_, held)| held.last_request.load(Relaxed))
            .map(|(id, _)| *id);
        if let Some(held) = oldest.and_then(|id| self.held.remove(&id)) {
            held.task.abort();
            if let Some(suppressed) = self.evictions.allow(Instant::now()) {
                info!(
                    max = MAX_CONNECTIONS,
                    suppressed,
                    "admin: every connection was taken; the longest idle one was closed for a newcomer"
                );
            }
        }
    }

    fn spawn(&mut self, stream: TcpStream, state: Arc<EndpointState>) {
        let epoch = self.epoch;
        let last_request = Arc::new(AtomicU64::new(Served::now(epoch)));
        let seen = last_request.clone();
        let task = self.tasks.spawn(async move {
            let service = service_fn(move |request| {
                seen.store(Served::now(epoch), Relaxed);
                let response = respond(&state, &request);
                async move { Ok::<_, Infallible>(response) }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            if let Ok(Err(error)) = tokio::time::timeout(CONNECTION_LIFETIME, connection).await {
                debug!(%error, "admin: connection");
            }
        });
        self.held.insert(task.id(), Held { last_request, task });
    }
}

fn per_connection(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionReset, Interrupted, WouldBlock};
    matches!(
        error.kind(),
        ConnectionAborted | ConnectionReset | Interrupted | WouldBlock
    ) || matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// The response to one request.
fn respond<B>(state: &EndpointState, request: &Request<B>) -> Response<Full<Bytes>> {
    let path = request.uri().path();
    let known = matches!(path, "/metrics" | "/status" | "/healthz" | "/readyz");
    if !known {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: /metrics, /status, /healthz, /readyz\n",
        );
    }
    if request.method() != Method::GET {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET"));
        return response;
    }
    match path {
        "/metrics" => with_type(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics::render(&state.status()),
        ),
        "/status" => match serde_json::to_string_pretty(&state.status()) {
            Ok(json) => with_type(StatusCode::OK, "application/json", json + "\n"),
            Err(error) => plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("status: {error}\n"),
            ),
        },
        "/healthz" => plain(StatusCode::OK, "ok\n"),
        _ if state.ready.load(Relaxed) => plain(StatusCode::OK, "ready\n"),
        _ => plain(StatusCode::SERVICE_UNAVAILABLE, "starting\n"),
    }
}

fn plain(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    with_type(status, "text/plain; charset=utf-8", body.to_owned())
}

fn with_type(
    status: StatusCode,
    content_type: &'static str,
    body: String,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    response
}

/// Starts the supervised admin endpoint on `listener` (a run that fails is logged, counted and
/// restarted on a duplicate of it); it ends once `stopped` is true.
pub fn spawn(
    listener: std::net::TcpListener,
    state: Arc<EndpointState>,
    stopped: &watch::Receiver<bool>,
) -> supervise::Supervised {
    let name = match listener.local_addr() {
        Ok(addr) => format!("admin/{addr}"),
        Err(_) => "admin".to_owned(),
    };
    let stopped = stopped.clone();
    supervise::spawn(name, move |_| {
        let listener = listener.try_clone().and_then(TcpListener::from_std);
        let (state, mut stopped) = (state.clone(), stopped.clone());
        async move {
            run(listener?, state, async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            })
            .await
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compile::Snapshot, config::Config};

    fn state() -> EndpointState {
        let config = Config::parse(
            "[server]\nlisten = [\"192.0.2.53\"]\n",
            std::path::Path::new("t.toml"),
        )
        .unwrap();
        let responder = Arc::new(Responder::new(&Snapshot::from_config(&config)));
        EndpointState::new(
            Arc::default(),
            responder,
            None,
            status::WorldFeed::default().subscribe(),
            watch::channel(None).1,
        )
    }

    fn ask(state: &EndpointState, method: Method, path: &str) -> Response<Full<Bytes>> {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .unwrap();
        respond(state, &request)
    }

    #[test]
    fn readyz_is_503_until_ready_and_other_paths_and_methods_are_refused() {
        let state = state();
        assert_eq!(
            ask(&state, Method::GET, "/healthz").status(),
            StatusCode::OK
        );
        let starting = ask(&state, Method::GET, "/readyz").status();
        assert_eq!(starting, StatusCode::SERVICE_UNAVAILABLE);
        state.set_ready();
        assert_eq!(ask(&state, Method::GET, "/readyz").status(), StatusCode::OK);
        assert_eq!(
            ask(&state, Method::GET, "/").status(),
            StatusCode::NOT_FOUND
        );
        let post = ask(&state, Method::POST, "/readyz");
        assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(post.headers()[header::ALLOW], "GET");
        let metrics = ask(&state, Method::GET, "/metrics?x=1");
        assert_eq!(metrics.status(), StatusCode::OK);
        assert_eq!(
            metrics.headers()[header::CONTENT_TYPE],
            "text/plain; version=0.0.4; charset=utf-8"
        );
    }
}
