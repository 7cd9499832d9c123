//! The responder's sockets: UDP and TCP servers over already bound sockets (tests bind port 0),
//! each running until `shutdown` resolves. With an [`LdnsRecorder`], the source of every query
//! answered authoritatively is recorded for the RTT prober (the resolvers to probe; the
//! recorder refuses sources that can only be claimed); the responder itself stays a pure
//! function of the bytes.

use std::{
    future::Future,
    net::{IpAddr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use ahash::AHashMap;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream, UdpSocket},
    time::Instant,
};
use tracing::{debug, warn};

mod batch;
mod conns;
pub mod tcp_frame;
mod udp;
#[cfg(test)]
pub(crate) use udp::pin_thread_to_cpu;

use self::conns::{Conns, Phase, Ticket};
use crate::probe::LdnsRecorder;
use crate::responder::{Responder, Transport};

/// How long a loop waits before it records a source again: the prober needs to know that a
/// resolver still queries (its entries live for minutes), not every query, and the recorder's
/// lock is shared by every loop.
const RECORD_EVERY: Duration = Duration::from_secs(1);
/// Sources a loop remembers having recorded; past this it forgets them all (a flood of new
/// sources then costs the recorder's lock per query, as it would without this).
const RECORDED_MAX: usize = 4096;

/// One loop's (or connection's) access to the recorder, skipping sources recorded lately.
/// Asked once per answer, so it is kept cheap: the caller reads the clock (once per batch of
/// datagrams), the source recorded last is checked before the map (one resolver sending
/// many queries in a row is the common case under load), and the map hashes with ahash
/// (keyed at random like std's SipHash, so that chosen sources cannot collide, but faster).
struct Sources {
    recorder: Option<LdnsRecorder>,
    recent: AHashMap<IpAddr, Instant>,
    /// The source recorded last and when: also in `recent`.
    last: Option<(IpAddr, Instant)>,
}

impl Sources {
    fn new(recorder: Option<LdnsRecorder>) -> Self {
        Sources {
            recorder,
            recent: AHashMap::new(),
            last: None,
        }
    }

    /// `response` answered a query from `source` at `now`: recorded only when it is an
    /// authoritative answer (AA set: a name in one of our zones), so that queries for names we
    /// do not serve, and REFUSED, FORMERR, NOTIMP or BADVERS (AA clear), make nobody a probe
    /// target.
    fn answered(&mut self, source: IpAddr, response: &[u8], now: Instant) {
        const AA: u8 = 0x04;
        if response.get(2).is_some_and(|flags| flags & AA != 0) {
            self.record(source, now);
        }
    }

    fn record(&mut self, source: IpAddr, now: Instant) {
        if self
            .last
            .is_some_and(|(last, at)| last == source && now.duration_since(at) < RECORD_EVERY)
        {
            return;
        }
        // Off (nothing probes): not even the lookup below.
        let Some(recorder) = self.recorder.as_ref().filter(|r| r.is_enabled()) else {
            return;
        };
        if let Some(&at) = self.recent.get(&source)
            && now.duration_since(at) < RECORD_EVERY
        {
            self.last = Some((source, at));
            return;
        }
        if self.recent.len() >= RECORDED_MAX {
            self.recent.clear();
        }
        self.recent.insert(source, now);
        self.last = Some((source, now));
        recorder.record(source);
    }
}

/// Limits of the TCP server (RFC 7766 §6.2.3 asks servers to protect themselves this way):
/// `[server] tcp_*` in the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpLimits {
    /// Connections served at once. At the cap a newcomer is still taken: the connection that
    /// has waited longest for its next query is closed to make room (`server::conns`).
    pub max_connections: usize,
    /// Connections one client address (an IPv4 address, an IPv6 /64) may hold; more are
    /// closed at once.
    pub max_per_address: usize,
    /// A connection with no byte of a next query for this long is closed.
    pub idle_timeout: Duration,
    /// Once the first byte of a query arrives, the whole query (length and message) must be
    /// there within this long, and its answer written within this long again; else the
    /// connection is closed. This is what makes a client trickling bytes go away.
    pub message_timeout: Duration,
}

impl Default for TcpLimits {
    fn default() -> Self {
        TcpLimits {
            max_connections: 1024,
            max_per_address: 64,
            idle_timeout: Duration::from_secs(10),
            message_timeout: Duration::from_secs(2),
        }
    }
}

/// Serves DNS over UDP on `socket` until `shutdown`, on a thread of its own (`server::udp`).
pub async fn run_udp(
    socket: UdpSocket,
    responder: Arc<Responder>,
    shutdown: impl Future<Output = ()>,
) {
    run_udp_recording(socket, responder, None, shutdown).await;
}

/// [`run_udp`], recording the source of each query answered in `recorder`.
pub async fn run_udp_recording(
    socket: UdpSocket,
    responder: Arc<Responder>,
    recorder: Option<LdnsRecorder>,
    shutdown: impl Future<Output = ()>,
) {
    udp::serve(socket, responder, Sources::new(recorder), shutdown).await;
}

/// Serves DNS over TCP on `listener` until `shutdown`: several queries per connection, each
/// connection in its own task so that a slow or silent client delays nobody else.
pub async fn run_tcp(
    listener: TcpListener,
    responder: Arc<Responder>,
    limits: TcpLimits,
    shutdown: impl Future<Output = ()>,
) {
    run_tcp_recording(listener, responder, limits, None, shutdown).await;
}

/// The room a TCP connection reads into at a time, at least.
const READ_CHUNK: usize = 4096;

/// At most one line per this long about failing accepts (retried every 50 ms).
const ACCEPT_WARN_EVERY: Duration = Duration::from_secs(10);

/// [`run_tcp`], recording the source of each query answered in `recorder`.
pub async fn run_tcp_recording(
    listener: TcpListener,
    responder: Arc<Responder>,
    limits: TcpLimits,
    recorder: Option<LdnsRecorder>,
    shutdown: impl Future<Output = ()>,
) {
    let conns = Conns::new(limits.max_connections, limits.max_per_address);
    let mut accept_warnings = crate::log_limit::LogLimiter::new(ACCEPT_WARN_EVERY);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => return,
            r = listener.accept() => match r {
                Ok(r) => r,
                Err(error) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    if let Some(suppressed) = accept_warnings.allow(Instant::now()) {
                        warn!(%error, suppressed, "tcp accept");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Refused: closed at once (the table logs why, rate-limited).
        let Ok(ticket) = conns.admit(peer.ip()) else {
            continue;
        };
        let responder = responder.clone();
        let sources = Sources::new(recorder.clone());
        tokio::spawn(async move {
            let evicted = ticket.evicted.clone();
            tokio::select! {
                () = evicted.notified() => debug!(%peer, "tcp connection dropped for a newcomer"),
                r = serve_connection(stream, peer, &responder, sources, limits, &ticket) => {
                    if let Err(error) = r {
                        debug!(%error, %peer, "tcp connection closed");
                    }
                }
            }
        });
    }
}

async fn serve_connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    responder: &Responder,
    mut sources: Sources,
    limits: TcpLimits,
    ticket: &Ticket,
) -> std::io::Result<()> {
    let timed_out = |what| std::io::Error::new(std::io::ErrorKind::TimedOut, what);
    // Bytes read and not answered yet: pipelined queries are answered from here, in order.
    // Read only while it holds no whole query, so it stays under a query and a read's room.
    let mut pending: Vec<u8> = Vec::new();
    // When the query begun in `pending` must be whole: `message_timeout` after its first byte.
    let mut deadline = Instant::now();
    loop {
        while let Some((message, used)) = tcp_frame::split(&pending) {
            ticket.set(Phase::Answering);
            if let Some(response) = responder.respond(message, peer.ip(), Transport::Tcp) {
                sources.answered(peer.ip(), &response, Instant::now());
                let framed = tcp_frame::frame(&response).ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "an answer longer than a TCP length prefix can say",
                    )
                })?;
                tokio::time::timeout(limits.message_timeout, stream.write_all(&framed))
                    .await
                    .map_err(|_| timed_out("answer not taken within the message timeout"))??;
            }
            pending.drain(..used);
            // The next query's first byte is already here: its time runs from now.
            deadline = Instant::now() + limits.message_timeout;
        }
        if pending.is_empty() {
            // A large query's room is not kept while the connection waits.
            pending.shrink_to(READ_CHUNK);
        }
        pending.reserve(READ_CHUNK);
        let read = if pending.is_empty() {
            ticket.set(Phase::Idle);
            match tokio::time::timeout(limits.idle_timeout, stream.read_buf(&mut pending)).await {
                Err(_) => return Ok(()), // idle
                Ok(read) => {
                    // From the first byte on, the whole query has `message_timeout`, however
                    // it trickles.
                    deadline = Instant::now() + limits.message_timeout;
                    read?
                }
            }
        } else {
            ticket.set(Phase::Reading);
            tokio::time::timeout_at(deadline, stream.read_buf(&mut pending))
                .await
                .map_err(|_| timed_out("query not complete within the message timeout"))??
        };
        if read == 0 {
            // Closed by the client: the end between queries, an error within one.
            return if pending.is_empty() {
                Ok(())
            } else {
                Err(std::io::ErrorKind::UnexpectedEof.into())
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::{compile::Snapshot, config::Config};

    const CONFIG: &str = r#"
[server]
listen = ["127.0.0.1"]
[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"
"#;

    fn responder() -> Arc<Responder> {
        let config = Config::parse(CONFIG, Path::new("server-test.toml")).unwrap();
        Arc::new(Responder::new(&Snapshot::from_config(&config)))
    }

    /// A query for the zone's SOA (answered), or the same bytes as a response (not answered).
    fn message(response: bool) -> Vec<u8> {
        query(response, b"\x07example\x03com\x00")
    }

    /// A query (or response) for the SOA of `qname` (wire form).
    fn query(response: bool, qname: &[u8]) -> Vec<u8> {
        let mut m = vec![
            0x12,
            0x34,
            if response { 0x80 } else { 0 },
            0,
            0,
            1,
            0,
            0,
            0,
            0,
            0,
            0,
        ];
        m.extend_from_slice(qname);
        m.extend_from_slice(b"\x00\x06\x00\x01");
        m
    }

    /// A recorder that admits the loopback (these tests' clients), as `[rtt] allow` would.
    fn loopback_recorder() -> LdnsRecorder {
        let recorder = LdnsRecorder::new();
        recorder.filter().set_policy(crate::probe::SourcePolicy {
            deny: vec![],
            allow: vec!["127.0.0.0/8".parse().unwrap()],
        });
        recorder
    }

    #[tokio::test(start_paused = true)]
    async fn a_loop_records_each_source_at_most_once_a_second() {
        // No host addresses: the test host's might be these.
        let recorder = LdnsRecorder::with_filter(crate::probe::SourceFilter::with_host_addresses(
            std::collections::HashSet::default(),
        ));
        let mut sources = Sources::new(Some(recorder.clone()));
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let now = Instant::now;
        sources.record(a, now());
        sources.record(a, now());
        sources.record(b, now());
        let drained = |r: &LdnsRecorder| {
            let mut got: Vec<IpAddr> = r.drain().into_iter().map(|(addr, _)| addr).collect();
            got.sort();
            got
        };
        assert_eq!(drained(&recorder), [a, b]);
        tokio::time::advance(RECORD_EVERY / 2).await;
        sources.record(a, now());
        assert!(drained(&recorder).is_empty(), "again within the second");
        tokio::time::advance(RECORD_EVERY / 2).await;
        sources.record(a, now());
        assert_eq!(drained(&recorder), [a]);
        // The last one recorded is remembered apart (checked before the map): b, recorded a
        // second ago, is recorded again, and then skipped within the second as a is.
        sources.record(b, now());
        sources.record(b, now());
        assert_eq!(drained(&recorder), [b]);
        sources.record(a, now());
        sources.record(b, now());
        assert!(drained(&recorder).is_empty(), "a and b within the second");
        // Without a recorder, or with one turned off, nothing is remembered either.
        let mut none = Sources::new(None);
        none.record(a, now());
        assert!(none.recent.is_empty());
        recorder.set_enabled(false);
        let c: IpAddr = "192.0.2.3".parse().unwrap();
        sources.record(c, now());
        assert!(!sources.recent.contains_key(&c));
        assert!(drained(&recorder).is_empty());
    }

    #[tokio::test]
    async fn a_burst_of_queries_is_answered_each_once_by_batches() {
        // More queries at once than one batch takes, from two clients, with responses (never
        // answered) among them: every query gets exactly its own answer, to its own client.
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = udp.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let server = tokio::spawn(run_udp(udp, responder(), async move {
            let mut stopped = stopped;
            let _ = stopped.wait_for(|s| *s).await;
        }));
        let clients = [
            UdpSocket::bind("127.0.0.1:0").await.unwrap(),
            UdpSocket::bind("127.0.0.1:0").await.unwrap(),
        ];
        let queries = 3 * batch::BATCH as u16;
        for id in 0..queries {
            let mut m = message(id % 5 == 0);
            m[..2].copy_from_slice(&id.to_be_bytes());
            let client = &clients[usize::from(id % 2)];
            client.send_to(&m, addr).await.unwrap();
        }
        let mut buf = [0u8; 512];
        for (parity, client) in clients.iter().enumerate() {
            let mut want: Vec<u16> = (0..queries)
                .filter(|id| usize::from(id % 2) == parity && id % 5 != 0)
                .collect();
            let mut got = Vec::new();
            while got.len() < want.len() {
                let len = tokio::time::timeout(Duration::from_secs(5), client.recv(&mut buf))
                    .await
                    .expect("an answer to every query")
                    .unwrap();
                assert!(len > 12 && buf[2] & 0x80 != 0, "a response");
                got.push(u16::from_be_bytes([buf[0], buf[1]]));
            }
            // Nothing more: a response got no answer, no query got two.
            let more = tokio::time::timeout(Duration::from_millis(200), client.recv(&mut buf));
            assert!(more.await.is_err(), "an answer too many");
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(got, want);
        }
        stop.send(true).unwrap();
        server.await.unwrap();
    }

    /// The CPUs a thread may run on, as /proc lists them ("0-1", "3"): `task` is
    /// "self/task/TID" or "thread-self".
    fn allowed_cpus(task: &str) -> String {
        let status = std::fs::read_to_string(format!("/proc/{task}/status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("a Cpus_allowed_list line")
            .trim()
            .to_owned()
    }

    /// The ids of this process's UDP loop threads.
    fn udp_threads() -> Vec<String> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .map(|t| t.file_name().to_string_lossy().into_owned())
            .filter(|tid| {
                std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
                    .is_ok_and(|c| c.trim() == "dns-udp")
            })
            .collect()
    }

    #[tokio::test]
    async fn a_loop_runs_on_the_cpu_its_socket_is_tied_to() {
        // The last CPU this process may use: with more than one, not where a thread starts
        // by chance (with one, the assertion holds without the pin).
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let allowed = allowed_cpus("thread-self");
        let cpu: usize = allowed
            .rsplit([',', '-'])
            .next()
            .and_then(|c| c.parse().ok())
            .unwrap();
        socket2::SockRef::from(&socket)
            .set_cpu_affinity(cpu)
            .unwrap();
        socket.set_nonblocking(true).unwrap();
        let addr = socket.local_addr().unwrap();
        let before = udp_threads();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let server = tokio::spawn(run_udp(
            UdpSocket::from_std(socket).unwrap(),
            responder(),
            async move {
                let mut stopped = stopped;
                let _ = stopped.wait_for(|s| *s).await;
            },
        ));
        // Answered, so the loop runs (and pinned itself first).
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.send_to(&message(false), addr).await.unwrap();
        let mut buf = [0u8; 512];
        tokio::time::timeout(Duration::from_secs(5), client.recv(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        // Other tests' loops may start meanwhile; theirs are not pinned.
        let pinned: Vec<String> = udp_threads()
            .into_iter()
            .filter(|t| !before.contains(t))
            .map(|t| allowed_cpus(&format!("self/task/{t}")))
            .collect();
        assert!(
            pinned.contains(&cpu.to_string()),
            "the new loop threads may run on {pinned:?}, not CPU {cpu} alone (process: {allowed})"
        );
        stop.send(true).unwrap();
        server.await.unwrap();
    }

    #[tokio::test]
    async fn udp_and_tcp_loops_record_the_sources_of_the_queries_they_answer() {
        let recorder = loopback_recorder();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let wait = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (udp_addr, tcp_addr) = (udp.local_addr().unwrap(), tcp.local_addr().unwrap());
        let loops = [
            tokio::spawn(run_udp_recording(
                udp,
                responder(),
                Some(recorder.clone()),
                wait(stopped.clone()),
            )),
            tokio::spawn(run_tcp_recording(
                tcp,
                responder(),
                TcpLimits::default(),
                Some(recorder.clone()),
                wait(stopped.clone()),
            )),
        ];
        let timeout = Duration::from_secs(5);

        // A response is not a query: no answer, nothing recorded. (The query sent after it on
        // the same socket is answered, so the response was read and ignored by then.)
        let client = UdpSocket::bind("127.0.0.2:0").await.unwrap();
        client.send_to(&message(true), udp_addr).await.unwrap();
        client.send_to(&message(false), udp_addr).await.unwrap();
        let mut buf = [0u8; 512];
        tokio::time::timeout(timeout, client.recv(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        let got: Vec<IpAddr> = recorder.drain().into_iter().map(|(a, _)| a).collect();
        assert_eq!(got, ["127.0.0.2".parse::<IpAddr>().unwrap()]);

        // Answered but not authoritatively: a name outside our zones (REFUSED), a bad message
        // (FORMERR) and another opcode (NOTIMP) record nobody.
        let other = UdpSocket::bind("127.0.0.4:0").await.unwrap();
        let mut notimp = message(false);
        notimp[2] = 2 << 3; // OPCODE STATUS
        let mut formerr = message(false);
        formerr.push(0); // a byte after the last record
        for (bytes, rcode) in [
            (query(false, b"\x07example\x03org\x00"), 5),
            (formerr, 1),
            (notimp, 4),
        ] {
            other.send_to(&bytes, udp_addr).await.unwrap();
            let len = tokio::time::timeout(timeout, other.recv(&mut buf))
                .await
                .expect("an answer")
                .unwrap();
            assert!(len >= 12);
            assert_eq!((buf[3] & 0x0f, buf[2] & 0x04), (rcode, 0), "{bytes:?}");
        }
        assert!(
            recorder.drain().is_empty(),
            "non-authoritative answers record nobody"
        );
        // The default rule (no allow): loopback sources are claims, never recorded.
        recorder
            .filter()
            .set_policy(crate::probe::SourcePolicy::default());
        client.send_to(&message(false), udp_addr).await.unwrap();
        tokio::time::timeout(timeout, client.recv(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        let other_query = UdpSocket::bind("127.0.0.5:0").await.unwrap();
        other_query
            .send_to(&message(false), udp_addr)
            .await
            .unwrap();
        tokio::time::timeout(timeout, other_query.recv(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        assert!(recorder.drain().is_empty(), "loopback refused by default");
        assert!(recorder.stats().martian >= 1);
        recorder.filter().set_policy(crate::probe::SourcePolicy {
            deny: vec![],
            allow: vec!["127.0.0.0/8".parse().unwrap()],
        });

        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.3:0".parse().unwrap()).unwrap();
        let mut stream = tokio::time::timeout(timeout, socket.connect(tcp_addr))
            .await
            .unwrap()
            .unwrap();
        let query = message(false);
        stream
            .write_all(&(query.len() as u16).to_be_bytes())
            .await
            .unwrap();
        stream.write_all(&query).await.unwrap();
        let len = tokio::time::timeout(timeout, stream.read_u16())
            .await
            .expect("an answer")
            .unwrap();
        assert!(len > 12);
        let got: Vec<IpAddr> = recorder.drain().into_iter().map(|(a, _)| a).collect();
        assert_eq!(got, ["127.0.0.3".parse::<IpAddr>().unwrap()]);

        stop.send(true).unwrap();
        for l in loops {
            tokio::time::timeout(timeout, l)
                .await
                .expect("the loops stop")
                .unwrap();
        }
    }
}
