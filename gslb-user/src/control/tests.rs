//! The control socket against real clients: binding, every request's reply, and clients
//! that hold a connection.

use super::*;
use gslb_tests::TempDir;

fn state() -> (
    ControlState,
    mpsc::Receiver<Reload>,
    watch::Sender<Option<RttHandle>>,
) {
    let (reloads, rx) = mpsc::channel(1);
    let (rtt_tx, rtt) = watch::channel(None);
    (
        ControlState {
            reloads,
            steer: mpsc::channel(1).0,
            rtt,
            republish: Arc::default(),
            persistence: crate::persist::Store::new(),
            load: watch::channel(crate::health::load::LoadReadings::default()).1,
            world: watch::channel(Arc::default()).1,
        },
        rx,
        rtt_tx,
    )
}

#[tokio::test]
async fn a_live_socket_is_kept_a_stale_one_replaced_and_the_file_goes_with_the_server() {
    let dir = TempDir::new("bind");
    let path = dir.0.join("gslbd.sock");
    let first = ControlSocket::bind(&path).await.expect("a fresh path");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    match ControlSocket::bind(&path).await {
        Err(ControlError::InUse { .. }) => {}
        other => panic!("a second gslbd on a live socket: {:?}", other.map(|_| ())),
    }
    assert!(
        path.exists(),
        "the refused bind leaves the live socket alone"
    );
    drop(first);
    assert!(!path.exists(), "removed with the server");

    // What a killed gslbd leaves: a socket file nobody listens on.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let _second = ControlSocket::bind(&path)
        .await
        .expect("a stale socket is replaced");

    // Anything else at the path is not ours to remove.
    let file = dir.0.join("not-a-socket");
    std::fs::write(&file, "data").unwrap();
    assert!(matches!(
        ControlSocket::bind(&file).await,
        Err(ControlError::Io { what: "bind", .. })
    ));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "data");
}

#[tokio::test]
async fn requests_get_ok_and_a_body_or_an_error_with_the_reason() {
    let dir = TempDir::new("requests");
    let path = dir.0.join("gslbd.sock");
    let socket = ControlSocket::bind(&path).await.unwrap();
    let (state, mut reloads, _rtt) = state();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(socket.serve(state, async move {
        let _ = stopped.await;
    }));
    // gslbd's side of a reload: refuse the first, take the second.
    let invalid = crate::daemon::ReloadError::Config(crate::config::ConfigError::Invalid {
        file: "test.toml".into(),
        line: 3,
        column: 7,
        reason: "bad".into(),
    });
    let daemon = tokio::spawn(async move {
        reloads
            .recv()
            .await
            .unwrap()
            .answer(Err(ReloadRefused::Invalid(Arc::new(invalid))));
        reloads.recv().await.unwrap().answer(Ok(()));
    });
    let t = Duration::from_secs(10);
    // (request, reply)
    let table: [(&str, Result<&str, &str>); 6] = [
        (
            "reload",
            Err(
                "reload refused, the running configuration stays: the configuration does not load: test.toml:3:7: bad",
            ),
        ),
        ("reload", Ok("configuration reloaded\n")),
        (
            "stats",
            Ok(
                "trigger_events 0\nrepublishes 0\nlast_compile_us 0\nlast_republish_us 0\n\
                 reloads_refused 0\nreloads_failed 0\n\
                 persistence_entries 0\npersistence_created 0\npersistence_replaced 0\n\
                 persistence_expired 0\npersistence_evicted 0\npersistence_sent 0\n\
                 persistence_peer_merged 0\npersistence_peer_rejected 0\n\
                 persistence_peer_ignored 0\n\
                 load_monitors 0\nload_checks 0\nload_failures 0\nload_aged_out 0\nload_unknown 0\n\
                 tasks_running\ntask_panics\ntask_errors\ntask_restarts\n\
                 rtt_probing 0\n",
            ),
        ),
        ("ldns", Err("RTT probing is off")),
        ("show rtt", Err("RTT probing is off")),
        (
            "shutdown",
            Err(
                "unknown request \"shutdown\" (reload, ldns, stats, show services|sites|domains|mep|rtt, or",
            ),
        ),
    ];
    for (req, want) in table {
        match (request(&path, req, t).await, want) {
            // The supervised tasks' counts are the process's (other tests run tasks
            // meanwhile): their lines are compared by name.
            (Ok(body), Ok(want)) => {
                let names = body
                    .lines()
                    .map(|l| match l.split_once(' ') {
                        Some((name, _)) if name.starts_with("task") => name.to_owned(),
                        _ => l.to_owned(),
                    })
                    .filter(|l| !l.contains('{'))
                    .fold(String::new(), |out, l| out + &l + "\n");
                assert_eq!(names, want, "{req}");
            }
            (Err(ClientError::Refused(reason)), Err(want)) => {
                assert!(reason.starts_with(want), "{req}: {reason:?}");
            }
            (got, _) => panic!("{req}: {got:?}, want {want:?}"),
        }
    }
    daemon.await.unwrap();
    stop.send(()).unwrap();
    server.await.unwrap();
    assert!(!path.exists());
    assert!(matches!(
        request(&path, "stats", t).await,
        Err(ClientError::Connect { .. })
    ));
}

/// Clients that ask for a reply larger than a Unix socket buffers (a `show services` of a few
/// MB) and never read it hold every connection permit only until the reply timeout: then they
/// are dropped, having read part of it, and another client is served. (Paused clock: the time
/// jumps to each timer once every task waits.)
#[tokio::test(start_paused = true)]
async fn clients_that_never_read_their_reply_are_dropped_after_the_reply_timeout() {
    use crate::admin::status::{ServiceStatus, WorldStatus};
    let dir = TempDir::new("unread");
    let path = dir.0.join("gslbd.sock");
    let socket = ControlSocket::bind(&path).await.unwrap();
    let (mut state, _reloads, _rtt) = state();
    let services = (0..5_000)
        .map(|i| ServiceStatus {
            name: format!("service-{i}"),
            site: "dc".into(),
            address: "192.0.2.1".parse().unwrap(),
            cname: None,
            up: false,
            admin_state: "enabled",
            weight: 1,
            connections: None,
            bandwidth_kbps: None,
            why: "monitor tcp: connect: refused ".repeat(8),
            last_change_unix_s: None,
        })
        .collect();
    let world = WorldStatus {
        services,
        ..WorldStatus::default()
    };
    let table = crate::admin::tables::table("services", &world).unwrap();
    assert!(table.len() > 1 << 20, "{} bytes", table.len());
    state.world = watch::channel(Arc::new(world)).1;
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(socket.serve(state, async move {
        let _ = stopped.await;
    }));

    let started = tokio::time::Instant::now();
    let mut silent = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        let mut stream = UnixStream::connect(&path).await.unwrap();
        stream.write_all(b"show services\n").await.unwrap();
        silent.push(stream);
    }
    let body = request(&path, "stats", Duration::from_secs(600))
        .await
        .expect("served once the clients that do not read are dropped");
    assert!(body.contains("rtt_probing 0\n"), "{body}");
    let waited = started.elapsed();
    assert!(
        waited >= REPLY_TIMEOUT && waited < REPLY_TIMEOUT + Duration::from_secs(1),
        "{waited:?}"
    );
    for mut stream in silent {
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.unwrap();
        assert!(got.starts_with(b"ok\n"));
        assert!(got.len() < table.len(), "cut short: {} bytes", got.len());
    }
    stop.send(()).unwrap();
    server.await.unwrap();
}
