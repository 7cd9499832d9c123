//! The admin endpoint's connections: a load balancer's `/healthz` is answered promptly even when
//! every slot is held by clients that keep asking, an idle keep-alive connection is closed, and
//! a silent client is closed without holding up others. The endpoint runs alone here
//! ([`Endpoint`]), on the real limits ([`admin::MAX_CONNECTIONS`], [`admin::HEADER_TIMEOUT`]).

use std::{
    net::SocketAddr,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use gslb_user::{
    admin::{self, EndpointState, status::WorldFeed},
    compile::Snapshot,
    config::Config,
    responder::Responder,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    sync::{mpsc, oneshot},
    task::{JoinHandle, JoinSet},
};

use super::http;
use crate::common::WAIT;

/// `admin::run` on a loopback port, with a bare daemon state behind it.
struct Endpoint {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    server: JoinHandle<std::io::Result<()>>,
}

impl Endpoint {
    async fn start() -> Endpoint {
        let config = Config::parse(
            "[server]\nlisten = [\"127.0.0.1\"]\n",
            Path::new("admin.toml"),
        )
        .unwrap();
        let responder = Arc::new(Responder::new(&Snapshot::from_config(&config)));
        let state = Arc::new(EndpointState::new(
            Arc::default(),
            responder,
            None,
            WorldFeed::default().subscribe(),
            tokio::sync::watch::channel(None).1,
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(admin::run(listener, state, async {
            let _ = stopped.await;
        }));
        Endpoint { addr, stop, server }
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        tokio::time::timeout(WAIT, self.server)
            .await
            .expect("the endpoint stops")
            .unwrap()
            .unwrap();
    }
}

/// One keep-alive `GET path` on `stream`, its response read whole (by its Content-Length):
/// the status.
async fn keep_alive_get(stream: &mut TcpStream, path: &str) -> std::io::Result<u16> {
    use std::io::ErrorKind::{InvalidData, UnexpectedEof};
    let request = format!("GET {path} HTTP/1.1\r\nHost: gslb\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match stream.read(&mut chunk).await? {
            0 => return Err(UnexpectedEof.into()),
            n => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok());
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let (Some(status), Some(length)) = (status, length) else {
        return Err(std::io::Error::new(InvalidData, head));
    };
    while buf.len() < head_end + length {
        match stream.read(&mut chunk).await? {
            0 => return Err(UnexpectedEof.into()),
            n => buf.extend_from_slice(&chunk[..n]),
        }
    }
    Ok(status)
}

/// Every slot is held by a keep-alive client that asks again every half second (so no idle
/// or header limit frees it, only the connection's lifetime, 60 s, did): a load balancer's
/// `/healthz` on a new connection is still answered within a second, several times over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_is_answered_promptly_while_keep_alive_clients_hold_every_slot() {
    let endpoint = Endpoint::start().await;
    let addr = endpoint.addr;
    let (served, mut first_answers) = mpsc::channel(admin::MAX_CONNECTIONS);
    let mut holders = JoinSet::new();
    for _ in 0..admin::MAX_CONNECTIONS {
        let served = served.clone();
        holders.spawn(async move {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            assert_eq!(keep_alive_get(&mut stream, "/metrics").await.unwrap(), 200);
            served.send(()).await.unwrap();
            // Until the server closes it for someone else.
            while keep_alive_get(&mut stream, "/metrics").await.is_ok() {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
    }
    for _ in 0..admin::MAX_CONNECTIONS {
        tokio::time::timeout(WAIT, first_answers.recv())
            .await
            .expect("every holder is served")
            .unwrap();
    }
    // Every slot is held now, by a client that is being served.
    for _ in 0..3 {
        let started = Instant::now();
        let asked = async {
            let mut stream = TcpStream::connect(addr).await?;
            keep_alive_get(&mut stream, "/healthz").await
        };
        let status = tokio::time::timeout(Duration::from_secs(1), asked)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "/healthz not answered within 1 s while {} keep-alive clients hold every slot",
                    admin::MAX_CONNECTIONS
                )
            })
            .unwrap();
        assert_eq!(status, 200);
        eprintln!("/healthz answered in {:?}", started.elapsed());
    }
    holders.abort_all();
    endpoint.stop().await;
}

/// A keep-alive connection served once and then idle is closed by the server once the idle
/// limit passes (the header timeout, which hyper starts again when a connection goes idle).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_limit() {
    let endpoint = Endpoint::start().await;
    let mut stream = TcpStream::connect(endpoint.addr).await.unwrap();
    assert_eq!(keep_alive_get(&mut stream, "/healthz").await.unwrap(), 200);
    let idle_since = Instant::now();
    let limit = admin::HEADER_TIMEOUT;
    let mut byte = [0u8; 1];
    let closed = tokio::time::timeout(limit + Duration::from_secs(3), stream.read(&mut byte))
        .await
        .expect("the idle connection is closed");
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
    let idle = idle_since.elapsed();
    assert!(
        idle + Duration::from_millis(200) >= limit,
        "closed after {idle:?}, before the idle limit {limit:?}"
    );
    endpoint.stop().await;
}

/// A client that connects and sends half a request is closed once the header timeout passes,
/// and does not hold up another client meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_client_is_closed_and_others_are_served() {
    let endpoint = Endpoint::start().await;
    let addr = endpoint.addr;
    let mut silent = TcpStream::connect(addr).await.unwrap();
    silent
        .write_all(b"GET /metrics HTTP/1.1\r\nHo")
        .await
        .unwrap();
    assert_eq!(http(addr, "GET", "/healthz").await.0, 200);
    let started = Instant::now();
    let mut rest = Vec::new();
    // Closed by the server (the read ends), within the header timeout and some slack.
    tokio::time::timeout(
        admin::HEADER_TIMEOUT + Duration::from_secs(5),
        silent.read_to_end(&mut rest),
    )
    .await
    .expect("the silent connection is closed")
    .ok();
    assert!(
        started.elapsed() + Duration::from_secs(2) >= admin::HEADER_TIMEOUT,
        "{:?}",
        started.elapsed()
    );
    endpoint.stop().await;
}
