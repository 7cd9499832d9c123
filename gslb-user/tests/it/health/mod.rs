//! Health monitors against real servers on loopback (port 0, started inside each test): TCP,
//! HTTP (stopped, restarted, answering 500, a wrong body, hanging), HTTPS with a self-signed
//! certificate, DNS, ICMP (root or ping sockets; skipped otherwise unless
//! GSLB_REQUIRE_PRIVILEGED=1), weights and threshold, removal, flap counting; and the link
//! load monitor over counters written by the test, and the real loopback's counter.
//!
//! `kinds`: each kind of monitor; `supervisor`: many services; `link`: the link load monitor.
//!
//! Intervals are tens of milliseconds; every wait is bounded by [`WAIT`], which only a broken
//! monitor reaches.

mod kinds;
mod link;
mod supervisor;

use std::{
    collections::HashMap,
    net::{IpAddr, Ipv4Addr, SocketAddr},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use gslb_user::health::{
    HealthEvent, HealthSupervisor, HttpCheck, MonitorKind, MonitorSpec, ServiceMonitors,
};
use hickory_proto::{
    op::{Message, MessageType, ResponseCode},
    rr::{Name, RData, Record, RecordType, rdata::A},
};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::{TcpListener, UdpSocket},
    sync::broadcast,
    task::{JoinHandle, JoinSet},
    time::{sleep, timeout},
};
use tokio_rustls::TlsAcceptor;

/// Upper bound of every wait for something that should happen (a broken monitor only).
const WAIT: Duration = Duration::from_secs(5);
const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

// ---------------------------------------------------------------------------------------------
// Test servers

/// What the test HTTP server does with a request.
#[derive(Clone, Debug)]
enum Reply {
    /// Answers with this status and body.
    Status(u16, &'static str),
    /// Reads the request and never answers.
    Hang,
}

#[derive(Default)]
struct HttpStats {
    accepted: AtomicUsize,
    /// Responses sent, by status.
    served: Mutex<HashMap<u16, usize>>,
    /// Requests left unanswered, and how many of those the client closed.
    hanging: AtomicUsize,
    closed_by_client: AtomicUsize,
}

/// An HTTP/1.1 server (plain or TLS) on 127.0.0.1 that can be stopped, restarted on the same
/// port and told how to answer.
struct HttpServer {
    addr: SocketAddr,
    reply: Arc<Mutex<Reply>>,
    stats: Arc<HttpStats>,
    tls: Option<TlsAcceptor>,
    task: Option<JoinHandle<()>>,
}

impl HttpServer {
    async fn start(reply: Reply) -> Self {
        Self::start_with(reply, None).await
    }

    async fn start_with(reply: Reply, tls: Option<TlsAcceptor>) -> Self {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let mut server = HttpServer {
            addr: listener.local_addr().unwrap(),
            reply: Arc::new(Mutex::new(reply)),
            stats: Arc::default(),
            tls,
            task: None,
        };
        server.spawn(listener);
        server
    }

    fn spawn(&mut self, listener: TcpListener) {
        let (reply, stats, tls) = (self.reply.clone(), self.stats.clone(), self.tls.clone());
        self.task = Some(tokio::spawn(async move {
            // Dropped with the accept loop: stopping the server closes its connections too.
            let mut connections = JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                stats.accepted.fetch_add(1, Ordering::SeqCst);
                let (reply, stats, tls) = (reply.clone(), stats.clone(), tls.clone());
                connections.spawn(async move {
                    match tls {
                        None => handle(stream, reply, stats).await,
                        Some(acceptor) => {
                            if let Ok(Ok(stream)) = timeout(WAIT, acceptor.accept(stream)).await {
                                handle(stream, reply, stats).await;
                            }
                        }
                    }
                });
                while connections.try_join_next().is_some() {}
            }
        }));
    }

    fn set(&self, reply: Reply) {
        *self.reply.lock().unwrap() = reply;
    }

    /// Closes the listener and every connection: connections are refused from now on.
    async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }

    /// Listens again on the same port.
    async fn restart(&mut self) {
        let listener = TcpListener::bind(self.addr).await.unwrap();
        self.spawn(listener);
    }

    fn accepted(&self) -> usize {
        self.stats.accepted.load(Ordering::SeqCst)
    }

    fn served(&self, status: u16) -> usize {
        self.stats
            .served
            .lock()
            .unwrap()
            .get(&status)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

async fn handle<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    reply: Arc<Mutex<Reply>>,
    stats: Arc<HttpStats>,
) {
    let mut request = Vec::new();
    let mut chunk = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match timeout(WAIT, stream.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 && request.len() < 16 * 1024 => {
                request.extend_from_slice(&chunk[..n]);
            }
            _ => return,
        }
    }
    let reply = reply.lock().unwrap().clone();
    match reply {
        Reply::Hang => {
            stats.hanging.fetch_add(1, Ordering::SeqCst);
            // Until the client gives up (end of file), within a bound.
            if let Ok(Ok(0) | Err(_)) =
                timeout(Duration::from_secs(20), stream.read(&mut chunk)).await
            {
                stats.closed_by_client.fetch_add(1, Ordering::SeqCst);
            }
        }
        Reply::Status(status, body) => {
            let response = format!(
                "HTTP/1.1 {status} Whatever\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
            if stream.write_all(response.as_bytes()).await.is_ok() {
                *stats.served.lock().unwrap().entry(status).or_default() += 1;
            }
            let _ = stream.shutdown().await;
        }
    }
}

/// A DNS server on 127.0.0.1 for one name: `www.example.com. A 192.0.2.1`, NXDOMAIN for other
/// names; silent while `silent` is set.
struct DnsServer {
    addr: SocketAddr,
    silent: Arc<AtomicBool>,
    queries: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl DnsServer {
    async fn start() -> Self {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = socket.local_addr().unwrap();
        let silent = Arc::new(AtomicBool::new(false));
        let queries = Arc::new(AtomicUsize::new(0));
        let (s, q) = (silent.clone(), queries.clone());
        let task = tokio::spawn(async move {
            let mut buf = [0u8; 1500];
            let www = Name::from_ascii("www.example.com.").unwrap();
            loop {
                let Ok((len, peer)) = socket.recv_from(&mut buf).await else {
                    continue;
                };
                q.fetch_add(1, Ordering::SeqCst);
                if s.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(query) = Message::from_vec(&buf[..len]) else {
                    continue;
                };
                let Some(question) = query.queries.first().cloned() else {
                    continue;
                };
                let mut response = Message::new(query.id, MessageType::Response, query.op_code);
                response.metadata.authoritative = true;
                response.add_query(question.clone());
                if question.name().eq_case(&www) || question.name() == &www {
                    if question.query_type() == RecordType::A {
                        response.add_answer(Record::from_rdata(
                            www.clone(),
                            60,
                            RData::A(A::new(192, 0, 2, 1)),
                        ));
                    }
                } else {
                    response.metadata.response_code = ResponseCode::NXDomain;
                }
                let _ = socket.send_to(&response.to_vec().unwrap(), peer).await;
            }
        });
        DnsServer {
            addr,
            silent,
            queries,
            task,
        }
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// A monitor checking every `interval_ms` with a 200 ms timeout.
fn monitor(name: &str, kind: MonitorKind, interval_ms: u64, fall: u32, rise: u32) -> MonitorSpec {
    MonitorSpec {
        interval: Duration::from_millis(interval_ms),
        timeout: Duration::from_millis(200),
        fall,
        rise,
        ..MonitorSpec::new(name, kind)
    }
}

fn http(path: &str) -> MonitorKind {
    MonitorKind::Http(HttpCheck::get(path))
}

fn service(id: &str, addr: SocketAddr, monitors: Vec<MonitorSpec>) -> ServiceMonitors {
    ServiceMonitors {
        monitors,
        ..ServiceMonitors::new(id, addr.ip(), addr.port())
    }
}

/// The next event of `service` (others are skipped).
async fn next_event(events: &mut broadcast::Receiver<HealthEvent>, service: &str) -> HealthEvent {
    let wait = async {
        loop {
            match events.recv().await {
                Ok(event) if event.service == service => return event,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => panic!("event channel closed"),
            }
        }
    };
    timeout(WAIT, wait)
        .await
        .unwrap_or_else(|_| panic!("no event of {service} within {WAIT:?}"))
}

/// Asserts that `service` has no event for `during`.
async fn no_event(events: &mut broadcast::Receiver<HealthEvent>, service: &str, during: Duration) {
    let deadline = Instant::now() + during;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match timeout(left, events.recv()).await {
            Err(_) => return,
            Ok(Ok(event)) if event.service == service => panic!("unexpected event {event:?}"),
            Ok(_) => {}
        }
    }
}

/// Waits until `condition` holds, polling every 5 ms, at most [`WAIT`].
async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !condition() {
        assert!(Instant::now() < deadline, "not within {WAIT:?}: {what}");
        sleep(Duration::from_millis(5)).await;
    }
}

/// Checks done by monitor `index` of `service`.
fn checks(supervisor: &HealthSupervisor, service: &str, index: usize) -> u64 {
    supervisor.snapshot()[service].monitors[index].checks
}
