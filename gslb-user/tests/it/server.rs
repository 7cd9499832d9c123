//! The responder's sockets on loopback (port 0, no privileges): UDP, TCP with several queries
//! per connection, truncation then retry over TCP, and the TCP limits (idle timeout, message
//! deadline, per-address limit, eviction at the cap, slow and trickling clients). The answers themselves are the responder's unit tests' business.

use std::{
    net::{Ipv4Addr, SocketAddr},
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use crate::common::dig_loopback;
use gslb_tests::responder_config;
use gslb_user::{
    compile::Snapshot,
    config::Config,
    responder::Responder,
    server::{TcpLimits, run_tcp, run_udp},
};
use hickory_proto::{
    op::{Edns, Message, MessageType, OpCode, Query, ResponseCode},
    rr::{Name, RecordType},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpSocket, TcpStream, UdpSocket},
    sync::oneshot,
    task::JoinHandle,
    time::timeout,
};

/// Long enough for any answer on loopback, even in a loaded debug build.
const ANSWER_WAIT: Duration = Duration::from_secs(5);
/// How long "not answered" is waited for.
const SILENCE: Duration = Duration::from_millis(300);

/// A UDP and a TCP server on 127.0.0.1, stopped by [`Server::stop`].
struct Server {
    udp: SocketAddr,
    tcp: SocketAddr,
    stop: oneshot::Sender<()>,
    tasks: Vec<JoinHandle<()>>,
}

async fn start(limits: TcpLimits) -> Server {
    start_with(&responder_config(), limits).await
}

async fn start_with(config: &str, limits: TcpLimits) -> Server {
    let config = Config::parse(config, Path::new("responder.toml")).unwrap();
    let responder = Arc::new(Responder::new(&Snapshot::from_config(&config)));
    let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let (udp_addr, tcp_addr) = (udp.local_addr().unwrap(), tcp.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    // Both servers stop on the one signal.
    let (tx, rx) = tokio::sync::watch::channel(false);
    let wait = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let tasks = vec![
        tokio::spawn(run_udp(udp, responder.clone(), wait(rx.clone()))),
        tokio::spawn(run_tcp(tcp, responder, limits, wait(rx))),
        tokio::spawn(async move {
            let _ = stopped.await;
            let _ = tx.send(true);
        }),
    ];
    Server {
        udp: udp_addr,
        tcp: tcp_addr,
        stop,
        tasks,
    }
}

impl Server {
    async fn stop(self) {
        let _ = self.stop.send(());
        for task in self.tasks {
            timeout(ANSWER_WAIT, task)
                .await
                .expect("servers stop on shutdown")
                .unwrap();
        }
    }
}

fn limits(max_connections: usize, idle_timeout: Duration) -> TcpLimits {
    TcpLimits {
        max_connections,
        idle_timeout,
        ..TcpLimits::default()
    }
}

fn query(id: u16, name: &str, qtype: RecordType) -> Vec<u8> {
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    m.to_vec().unwrap()
}

fn parse(bytes: &[u8]) -> Message {
    Message::from_vec(bytes).expect("the reply parses")
}

// ---- UDP ----

async fn udp_client() -> UdpSocket {
    UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap()
}

/// Sends `request` and waits up to `wait` for a reply.
async fn ask_udp(
    client: &UdpSocket,
    server: SocketAddr,
    request: &[u8],
    wait: Duration,
) -> Option<Message> {
    client.send_to(request, server).await.unwrap();
    let mut buf = vec![0; 65535];
    let (len, _) = timeout(wait, client.recv_from(&mut buf))
        .await
        .ok()?
        .unwrap();
    Some(parse(&buf[..len]))
}

/// Node identity over the wire (issue 29): dig's `+nsid` gets the configured identity beside
/// the answer, and CH TXT id.server and version.bind their TXT; without them, no NSID and
/// REFUSED.
#[tokio::test]
async fn dig_reads_the_node_identity_over_the_wire() {
    let text = responder_config().replacen(
        "[server]\n",
        "[server]\nidentity = \"fra-1\"\nversion = \"gslbd 1\"\n",
        1,
    );
    let server = start_with(&text, TcpLimits::default()).await;
    let port = server.udp.port();
    let nsid = dig_loopback(port, &["+nsid", "www.example.com", "A"]).await;
    assert!(
        nsid.contains("; NSID: 66 72 61 2d 31 (\"fra-1\")"),
        "{nsid}"
    );
    assert!(nsid.contains("status: NOERROR"), "{nsid}");
    for (name, text) in [("id.server", "\"fra-1\""), ("version.bind", "\"gslbd 1\"")] {
        let out = dig_loopback(port, &["CH", "TXT", name]).await;
        assert_eq!(
            gslb_tests::dig_answers(&out),
            [(format!("{name}."), "TXT".to_owned(), text.to_owned())],
            "{out}"
        );
        assert!(
            gslb_tests::dig_flags(&out).contains(&"aa".to_owned()),
            "{out}"
        );
    }
    server.stop().await;

    let quiet = start(TcpLimits::default()).await;
    let port = quiet.udp.port();
    let nsid = dig_loopback(port, &["+nsid", "www.example.com", "A"]).await;
    assert!(!nsid.contains("NSID"), "{nsid}");
    let id = dig_loopback(port, &["CH", "TXT", "id.server"]).await;
    assert!(id.contains("status: REFUSED"), "{id}");
    quiet.stop().await;
}

#[tokio::test]
async fn udp_query_is_answered() {
    let server = start(TcpLimits::default()).await;
    let client = udp_client().await;
    let reply = ask_udp(
        &client,
        server.udp,
        &query(7, "txt.example.com", RecordType::TXT),
        ANSWER_WAIT,
    )
    .await
    .expect("a reply");
    assert_eq!(
        (reply.id, reply.response_code, reply.answers.len()),
        (7, ResponseCode::NoError, 1)
    );
    server.stop().await;
}

#[tokio::test]
async fn udp_response_and_runt_get_no_reply_and_the_server_keeps_serving() {
    let server = start(TcpLimits::default()).await;
    let client = udp_client().await;
    let mut response = query(1, "txt.example.com", RecordType::TXT);
    response[2] |= 0x80; // QR
    for (what, request) in [("a response", response), ("11 bytes", vec![0; 11])] {
        assert!(
            ask_udp(&client, server.udp, &request, SILENCE)
                .await
                .is_none(),
            "{what} answered"
        );
    }
    let reply = ask_udp(
        &client,
        server.udp,
        &query(2, "txt.example.com", RecordType::TXT),
        ANSWER_WAIT,
    )
    .await;
    assert_eq!(reply.map(|r| r.id), Some(2));
    server.stop().await;
}

#[tokio::test]
async fn udp_truncated_answer_comes_whole_over_tcp() {
    let server = start(TcpLimits::default()).await;
    let request = query(3, "big.example.com", RecordType::TXT);
    let reply = ask_udp(&udp_client().await, server.udp, &request, ANSWER_WAIT)
        .await
        .expect("a reply");
    assert!(
        reply.truncation && reply.answers.is_empty(),
        "TC without EDNS: {reply:?}"
    );

    let mut tcp = TcpStream::connect(server.tcp).await.unwrap();
    write_framed(&mut tcp, &[request]).await;
    let reply = read_framed(&mut tcp).await.expect("a reply over TCP");
    assert!(!reply.truncation, "{reply:?}");
    assert_eq!(reply.answers.len(), 1);
    assert!(reply.to_vec().unwrap().len() > 512);
    server.stop().await;
}

#[tokio::test]
async fn udp_honours_edns_size_up_to_ours() {
    let server = start(TcpLimits::default()).await;
    let client = udp_client().await;
    for (payload, name, truncated) in [
        (512, "big.example.com", true),
        (1232, "big.example.com", false),
        (4096, "huge.example.com", true), // over our 1232
    ] {
        let mut m = parse(&query(4, name, RecordType::TXT));
        let mut edns = Edns::new();
        edns.set_max_payload(payload);
        m.set_edns(edns);
        let reply = ask_udp(&client, server.udp, &m.to_vec().unwrap(), ANSWER_WAIT)
            .await
            .expect("a reply");
        assert_eq!(reply.truncation, truncated, "{name} with EDNS {payload}");
        assert_eq!(
            reply.edns.as_ref().map(Edns::max_payload),
            Some(1232),
            "our size"
        );
    }
    server.stop().await;
}

// ---- TCP ----

async fn write_framed(stream: &mut TcpStream, messages: &[Vec<u8>]) {
    let mut out = Vec::new();
    for m in messages {
        out.extend_from_slice(&(m.len() as u16).to_be_bytes());
        out.extend_from_slice(m);
    }
    stream.write_all(&out).await.unwrap();
}

/// The next reply, or `None` at EOF.
async fn read_framed(stream: &mut TcpStream) -> Option<Message> {
    let len = stream.read_u16().await.ok()? as usize;
    let mut buf = vec![0; len];
    stream.read_exact(&mut buf).await.unwrap();
    Some(parse(&buf))
}

async fn read_framed_within(stream: &mut TcpStream, wait: Duration) -> Option<Message> {
    timeout(wait, read_framed(stream)).await.ok().flatten()
}

#[tokio::test]
async fn tcp_pipelined_queries_are_answered_in_order_on_one_connection() {
    let server = start(TcpLimits::default()).await;
    let mut tcp = TcpStream::connect(server.tcp).await.unwrap();
    let names = [
        "txt.example.com",
        "www.example.com",
        "nope.example.com",
        "www.example.net",
    ];
    // All in one write, before reading anything.
    let queries: Vec<Vec<u8>> = names
        .iter()
        .enumerate()
        .map(|(i, n)| query(100 + i as u16, n, RecordType::A))
        .collect();
    write_framed(&mut tcp, &queries).await;
    let mut got = Vec::new();
    for _ in names {
        let reply = read_framed_within(&mut tcp, ANSWER_WAIT)
            .await
            .expect("a reply");
        got.push((reply.id, reply.response_code));
    }
    use ResponseCode::*;
    assert_eq!(
        got,
        vec![
            (100, NoError),
            (101, NoError),
            (102, NXDomain),
            (103, Refused)
        ]
    );
    // The connection stays open for more.
    write_framed(&mut tcp, &[query(200, "txt.example.com", RecordType::TXT)]).await;
    assert_eq!(
        read_framed_within(&mut tcp, ANSWER_WAIT)
            .await
            .map(|r| r.id),
        Some(200)
    );
    server.stop().await;
}

#[tokio::test]
async fn tcp_idle_connection_is_closed_after_the_idle_timeout() {
    let idle = Duration::from_millis(300);
    let server = start(limits(16, idle)).await;
    // Silent from the start, and silent after a query.
    let mut silent = TcpStream::connect(server.tcp).await.unwrap();
    let mut after_query = TcpStream::connect(server.tcp).await.unwrap();
    write_framed(
        &mut after_query,
        &[query(1, "txt.example.com", RecordType::TXT)],
    )
    .await;
    assert!(
        read_framed_within(&mut after_query, ANSWER_WAIT)
            .await
            .is_some()
    );
    let start = Instant::now();
    for stream in [&mut silent, &mut after_query] {
        let mut byte = [0u8; 1];
        let read = timeout(ANSWER_WAIT, stream.read(&mut byte))
            .await
            .expect("closed by the server");
        assert!(matches!(read, Ok(0) | Err(_)), "EOF or reset, got {read:?}");
    }
    let waited = start.elapsed();
    assert!(
        waited >= idle / 2,
        "closed after {waited:?}, before the idle timeout {idle:?}"
    );
    server.stop().await;
}

/// A TCP connection to `server` from `source` (any 127.0.0.0/8 address is this host's).
async fn connect_from(source: Ipv4Addr, server: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((source, 0)))?;
    socket.connect(server).await
}

/// Whether the server closed `stream` within `wait` (EOF or reset; a reply is not a close).
async fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        timeout(wait, stream.read(&mut byte)).await,
        Ok(Ok(0) | Err(_))
    )
}

/// One query on `stream`, answered with its id.
async fn answered(stream: &mut TcpStream, id: u16) -> bool {
    write_framed(stream, &[query(id, "txt.example.com", RecordType::TXT)]).await;
    read_framed_within(stream, ANSWER_WAIT).await.map(|r| r.id) == Some(id)
}

#[tokio::test]
async fn at_the_cap_the_longest_idle_connection_is_dropped_for_a_newcomer() {
    let server = start(limits(2, Duration::from_secs(30))).await;
    let mut first = TcpStream::connect(server.tcp).await.unwrap();
    assert!(answered(&mut first, 1).await);
    let mut second = TcpStream::connect(server.tcp).await.unwrap();
    assert!(answered(&mut second, 2).await);
    // The second has been idle for less time since its query: the first makes room.
    assert!(answered(&mut second, 3).await);
    let mut third = TcpStream::connect(server.tcp).await.unwrap();
    assert!(
        answered(&mut third, 4).await,
        "the newcomer is served at once"
    );
    assert!(
        closed_within(&mut first, ANSWER_WAIT).await,
        "the longest idle was closed"
    );
    assert!(
        answered(&mut second, 5).await,
        "the other one was not disturbed"
    );
    server.stop().await;
}

#[tokio::test]
async fn an_address_over_its_connection_limit_is_closed_while_others_are_served() {
    let server = start(TcpLimits {
        max_per_address: 3,
        ..limits(16, Duration::from_secs(30))
    })
    .await;
    let greedy = Ipv4Addr::new(127, 0, 0, 5);
    let mut held = Vec::new();
    for id in 0..3 {
        let mut stream = connect_from(greedy, server.tcp).await.unwrap();
        assert!(
            answered(&mut stream, id).await,
            "connection {id} within the limit"
        );
        held.push(stream);
    }
    let mut fourth = connect_from(greedy, server.tcp).await.unwrap();
    assert!(
        closed_within(&mut fourth, ANSWER_WAIT).await,
        "over the limit: closed"
    );
    let mut other = connect_from(Ipv4Addr::new(127, 0, 0, 6), server.tcp)
        .await
        .unwrap();
    assert!(answered(&mut other, 10).await, "another address is served");
    for (id, stream) in held.iter_mut().enumerate() {
        assert!(
            answered(stream, 20 + id as u16).await,
            "the held ones still work"
        );
    }
    drop(held.pop());
    // The server sees the close when it reads; give it a moment, then the address has room.
    tokio::time::sleep(SILENCE).await;
    let mut again = connect_from(greedy, server.tcp).await.unwrap();
    assert!(answered(&mut again, 30).await, "room again once one closed");
    server.stop().await;
}

#[tokio::test]
async fn a_query_must_arrive_whole_within_the_message_timeout_of_its_first_byte() {
    let message_timeout = Duration::from_millis(600);
    let server = start(TcpLimits {
        message_timeout,
        ..limits(16, Duration::from_secs(30))
    })
    .await;
    // Silent for longer than the message timeout: only the idle timeout applies.
    let mut quiet = TcpStream::connect(server.tcp).await.unwrap();
    // Trickling: a byte every 200 ms would take seconds for the query.
    let mut trickle = TcpStream::connect(server.tcp).await.unwrap();
    let framed = {
        let q = query(7, "txt.example.com", RecordType::TXT);
        let mut f = (q.len() as u16).to_be_bytes().to_vec();
        f.extend_from_slice(&q);
        f
    };
    let started = Instant::now();
    let mut closed = false;
    for byte in &framed {
        if trickle.write_all(&[*byte]).await.is_err()
            || closed_within(&mut trickle, Duration::from_millis(200)).await
        {
            closed = true;
            break;
        }
    }
    let waited = started.elapsed();
    assert!(closed, "a trickling query was not cut off");
    assert!(
        waited >= message_timeout / 2,
        "cut off after {waited:?}, before the message timeout"
    );
    // A slow query within the deadline (a byte every 10 ms) is answered.
    let mut slow = TcpStream::connect(server.tcp).await.unwrap();
    for byte in &framed {
        slow.write_all(&[*byte]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        read_framed_within(&mut slow, ANSWER_WAIT)
            .await
            .map(|r| r.id),
        Some(7)
    );
    assert!(started.elapsed() > message_timeout);
    assert!(
        answered(&mut quiet, 8).await,
        "an idle connection outlives the message timeout"
    );
    server.stop().await;
}

/// The attack of issue 12: 1,100 connections (more than the cap, 1,024) from 20 addresses (55
/// each, within the per-address limit, 64), each trickling a byte every 3 s and reconnecting
/// whenever the server closes it; all with the default limits. A fresh client's query over TCP
/// is answered within 1 s, ten times in a row. Before the limits, the first 1,024 held every
/// place for the whole idle timeout (10 s) and newcomers waited in the backlog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickling_connections_beyond_the_cap_do_not_delay_a_fresh_query() {
    const ATTACKERS: usize = 1100;
    const ADDRESSES: usize = 20;
    const TRICKLE_EVERY: Duration = Duration::from_secs(3);
    let limits = TcpLimits::default();
    assert!(ATTACKERS > limits.max_connections);
    assert!(ATTACKERS.div_ceil(ADDRESSES) <= limits.max_per_address);
    let server = start(limits).await;
    let addr = server.tcp;
    let stop = Arc::new(AtomicBool::new(false));
    let (connected, reconnects) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut attackers = Vec::new();
    for i in 0..ATTACKERS {
        let source = Ipv4Addr::new(127, 0, 1, 10 + (i % ADDRESSES) as u8);
        let (stop, connected, reconnects) = (stop.clone(), connected.clone(), reconnects.clone());
        attackers.push(tokio::spawn(async move {
            let mut first = true;
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut stream) = connect_from(source, addr).await else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                if first {
                    connected.fetch_add(1, Ordering::Relaxed);
                    first = false;
                } else {
                    reconnects.fetch_add(1, Ordering::Relaxed);
                }
                // Spread the trickles over the interval.
                tokio::time::sleep(TRICKLE_EVERY * (i as u32 % 30) / 30).await;
                // A length prefix of 0x40 bytes and then a byte of body at a time, forever.
                let mut byte = 0u8;
                while !stop.load(Ordering::Relaxed) {
                    if stream.write_all(&[byte]).await.is_err()
                        || closed_within(&mut stream, TRICKLE_EVERY).await
                    {
                        break;
                    }
                    byte = 0x40;
                }
            }
        }));
    }
    let attack = async {
        // Every attacker connected once.
        while connected.load(Ordering::Relaxed) < ATTACKERS {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Then, spread over two trickle intervals, ten fresh queries.
        let mut waits = Vec::new();
        for id in 0..10u16 {
            tokio::time::sleep(TRICKLE_EVERY / 5).await;
            let started = Instant::now();
            let fresh = async {
                let mut stream = connect_from(Ipv4Addr::new(127, 0, 0, 2), addr).await.ok()?;
                write_framed(
                    &mut stream,
                    &[query(id, "txt.example.com", RecordType::TXT)],
                )
                .await;
                read_framed(&mut stream).await.map(|r| r.id)
            };
            let got = timeout(Duration::from_secs(1), fresh).await;
            assert_eq!(
                got,
                Ok(Some(id)),
                "fresh query {id} not answered within 1 s"
            );
            waits.push(started.elapsed());
        }
        waits
    };
    let waits = timeout(Duration::from_secs(60), attack)
        .await
        .expect("the attack runs within its bound");
    stop.store(true, Ordering::Relaxed);
    println!(
        "fresh queries answered in {waits:?}; attackers reconnected {} times",
        reconnects.load(Ordering::Relaxed)
    );
    for a in attackers {
        a.abort();
    }
    server.stop().await;
}

#[tokio::test]
async fn slow_and_silent_tcp_clients_block_nobody() {
    let server = start(limits(16, Duration::from_secs(30))).await;
    // One client connected and silent, one that sent half a length prefix.
    let _silent = TcpStream::connect(server.tcp).await.unwrap();
    let mut half = TcpStream::connect(server.tcp).await.unwrap();
    half.write_all(&[0]).await.unwrap();
    // One that sends its query a byte at a time.
    let slow_query = query(9, "txt.example.com", RecordType::TXT);
    let mut slow = TcpStream::connect(server.tcp).await.unwrap();
    let slow_task = tokio::spawn(async move {
        let mut framed = (slow_query.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&slow_query);
        for byte in framed {
            slow.write_all(&[byte]).await.unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        read_framed_within(&mut slow, ANSWER_WAIT)
            .await
            .map(|r| r.id)
    });

    // Meanwhile everybody else is answered at once, over TCP and UDP.
    let started = Instant::now();
    let mut other = TcpStream::connect(server.tcp).await.unwrap();
    for id in 10..15 {
        write_framed(&mut other, &[query(id, "www.example.com", RecordType::A)]).await;
        assert_eq!(
            read_framed_within(&mut other, ANSWER_WAIT)
                .await
                .map(|r| r.id),
            Some(id)
        );
    }
    let client = udp_client().await;
    let reply = ask_udp(
        &client,
        server.udp,
        &query(20, "www.example.com", RecordType::A),
        ANSWER_WAIT,
    )
    .await;
    assert_eq!(reply.map(|r| r.id), Some(20));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "others waited {:?}",
        started.elapsed()
    );

    assert_eq!(
        slow_task.await.unwrap(),
        Some(9),
        "the slow client is answered too"
    );
    server.stop().await;
}

// ---- Response rate limiting ----

/// `[rrl]` over real sockets: a flood from one /24 (127.0.0.0/24) gets at most the burst plus
/// the rate for its duration in full answers, and every second answer over the limit as a
/// TC=1 slip; a client of another /24 (127.0.1.0/24), asking at half the rate meanwhile, gets
/// every answer in full. TCP is never limited.
#[tokio::test]
async fn a_udp_flood_from_one_prefix_gets_the_rate_plus_slips_while_others_get_everything() {
    const RATE: usize = 20;
    const FLOOD: usize = 300;
    let config = format!("{}\n[rrl]\nrate = {RATE}\nslip = 2\n", responder_config());
    let server = start_with(&config, TcpLimits::default()).await;
    let flooder = UdpSocket::bind((Ipv4Addr::new(127, 0, 0, 2), 0))
        .await
        .unwrap();
    let other = UdpSocket::bind((Ipv4Addr::new(127, 0, 1, 2), 0))
        .await
        .unwrap();
    let started = Instant::now();
    let flood = async {
        let (mut full, mut slips) = (0usize, 0usize);
        let mut buf = vec![0; 65535];
        for i in 0..FLOOD {
            flooder
                .send_to(
                    &query(i as u16, "www.example.com", RecordType::A),
                    server.udp,
                )
                .await
                .unwrap();
            // 300 in about 0.3 s: within the socket buffers.
            if i % 10 == 9 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        while let Ok(Ok((len, _))) = timeout(SILENCE, flooder.recv_from(&mut buf)).await {
            let reply = parse(&buf[..len]);
            if reply.truncation {
                assert!(reply.answers.is_empty(), "a slip carries no records");
                slips += 1;
            } else {
                assert_eq!(reply.answers.len(), 1);
                full += 1;
            }
        }
        (full, slips, started.elapsed())
    };
    let polite = async {
        let mut answered = 0;
        for i in 0..10u16 {
            let reply = ask_udp(
                &other,
                server.udp,
                &query(1000 + i, "www.example.com", RecordType::A),
                ANSWER_WAIT,
            )
            .await;
            if reply.is_some_and(|r| !r.truncation && r.answers.len() == 1) {
                answered += 1;
            }
            tokio::time::sleep(Duration::from_millis(1000 / RATE as u64 * 2)).await;
        }
        answered
    };
    let ((full, slips, elapsed), answered) = tokio::join!(flood, polite);
    // The burst (= rate) at once, then the rate for the time the flood lasted.
    let allowed = RATE + (RATE as f64 * elapsed.as_secs_f64()).ceil() as usize;
    println!("flood: {full} full, {slips} slips of {FLOOD} in {elapsed:?}; other: {answered}/10");
    assert!(
        full >= RATE && full <= allowed,
        "{full} full answers, at most {allowed} allowed"
    );
    let over = FLOOD - full;
    assert!(
        slips.abs_diff(over / 2) <= 1,
        "{slips} slips for {over} over the limit"
    );
    assert_eq!(answered, 10, "the other prefix lost answers");
    // TCP from the flooding prefix is still answered.
    let mut tcp = TcpStream::connect(server.tcp).await.unwrap();
    assert!(answered_tcp(&mut tcp).await);
    server.stop().await;
}

async fn answered_tcp(stream: &mut TcpStream) -> bool {
    answered(stream, 4242).await
}
