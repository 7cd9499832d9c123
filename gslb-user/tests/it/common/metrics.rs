//! For the load monitor tests: a small HTTP server that serves one text (a Prometheus exposition
//! page, a stub_status page) at every path, which the test can change, stopped when dropped; and
//! waiting for a GSLB name's answers on the loopback to become a set.

use std::{
    net::{IpAddr, SocketAddr},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
    task::JoinHandle,
};

pub(crate) struct MetricsServer {
    pub addr: SocketAddr,
    body: Arc<Mutex<String>>,
    requests: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl MetricsServer {
    /// Serves `body` on `addr` (port 0: any free port).
    pub(crate) async fn start(addr: SocketAddr, body: &str) -> MetricsServer {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let body = Arc::new(Mutex::new(body.to_owned()));
        let requests = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn({
            let (body, requests) = (body.clone(), requests.clone());
            async move {
                loop {
                    let Ok((mut conn, _)) = listener.accept().await else {
                        continue;
                    };
                    let (body, requests) = (body.clone(), requests.clone());
                    tokio::spawn(async move {
                        // The request head, up to its blank line (bounded).
                        let mut head = Vec::new();
                        let mut buf = [0u8; 1024];
                        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16384 {
                            match conn.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => head.extend_from_slice(&buf[..n]),
                            }
                        }
                        requests.fetch_add(1, Ordering::Relaxed);
                        let text = body.lock().unwrap().clone();
                        let reply = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                            text.len()
                        );
                        let _ = conn.write_all(reply.as_bytes()).await;
                        let _ = conn.shutdown().await;
                    });
                }
            }
        });
        MetricsServer {
            addr,
            body,
            requests,
            task,
        }
    }

    /// Serves `body` from now on.
    pub(crate) fn set(&self, body: &str) {
        body.clone_into(&mut self.body.lock().unwrap());
    }

    /// Requests answered so far.
    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The A addresses `name` gets from the DNS server on 127.0.0.1:`port`, sorted.
pub(crate) async fn answers(port: u16, name: &'static str) -> Vec<IpAddr> {
    let reply = tokio::task::spawn_blocking(move || {
        super::ask_loopback(port, name, hickory_proto::rr::RecordType::A)
    })
    .await
    .unwrap();
    let mut addrs = super::answer_addrs(&reply);
    addrs.sort();
    addrs
}

/// Waits (at most `wait`) until `name` is answered with exactly `want`.
pub(crate) async fn answers_become(
    port: u16,
    name: &'static str,
    want: &[&str],
    what: &str,
    wait: Duration,
) {
    let mut want = super::ips(want);
    want.sort();
    let deadline = Instant::now() + wait;
    loop {
        let got = answers(port, name).await;
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {name} stayed {got:?}, not {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
