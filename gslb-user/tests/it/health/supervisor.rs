//! The supervisor over many services: weights and threshold, removal, flap counting, a change
//! that restarts only the changed services, a refused change, the initial state.

use std::{
    collections::HashMap,
    net::Ipv4Addr,
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use gslb_user::health::{
    DnsCheck, HealthError, HealthSupervisor, MonitorKind, MonitorSpec, ServiceMonitors,
};
use hickory_proto::rr::RecordType;
use tokio::{
    net::TcpListener,
    time::{sleep, timeout},
};

use super::{
    HttpServer, LOCALHOST, Reply, WAIT, checks, http, monitor, next_event, no_event, service,
    wait_until,
};

#[tokio::test]
async fn weights_and_threshold() {
    // One service, three monitors on three ports: tcp (weight 2), http a and b (weight 1 each);
    // threshold 3: up while tcp and one of a/b are up.
    let tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let mut a = HttpServer::start(Reply::Status(200, "a")).await;
    let mut b = HttpServer::start(Reply::Status(200, "b")).await;
    let on = |mut m: MonitorSpec, port: u16, weight: u32| {
        m.port = Some(port);
        m.weight = weight;
        m
    };
    let mut spec = ServiceMonitors::new("svc", LOCALHOST, 1)
        .monitor(on(
            monitor("tcp", MonitorKind::Tcp, 15, 1, 1),
            tcp.local_addr().unwrap().port(),
            2,
        ))
        .monitor(on(monitor("a", http("/"), 15, 1, 1), a.addr.port(), 1))
        .monitor(on(monitor("b", http("/"), 15, 1, 1), b.addr.port(), 1));
    spec.threshold = 3;
    let supervisor = HealthSupervisor::new();
    let mut events = supervisor.subscribe();
    supervisor.set_services(vec![spec]).await.unwrap();
    wait_until("checks of every monitor", || {
        (0..3).all(|i| checks(&supervisor, "svc", i) >= 2)
    })
    .await;

    // a down: 2 + 1 >= 3, still up.
    a.stop().await;
    wait_until("monitor a down", || {
        !supervisor.snapshot()["svc"].monitors[1].up
    })
    .await;
    no_event(&mut events, "svc", Duration::from_millis(100)).await;
    assert_eq!(supervisor.is_up("svc"), Some(true));

    // b down too: 2 < 3.
    b.stop().await;
    let down = next_event(&mut events, "svc").await;
    assert!(
        !down.up && down.reason.contains("monitor b down"),
        "{down:?}"
    );

    // a back: 3 again.
    a.restart().await;
    let up = next_event(&mut events, "svc").await;
    assert!(up.up && up.reason.contains("monitor a up"), "{up:?}");
    let health = &supervisor.snapshot()["svc"];
    let states: Vec<(&str, bool, u32)> = health
        .monitors
        .iter()
        .map(|m| (m.name.as_str(), m.up, m.weight))
        .collect();
    assert_eq!(states, [("tcp", true, 2), ("a", true, 1), ("b", false, 1)]);
    drop(b);
}

#[tokio::test]
async fn removed_services_stop_at_once() {
    let hanging = HttpServer::start(Reply::Hang).await;
    let busy = HttpServer::start(Reply::Status(200, "ok")).await;
    let kept = HttpServer::start(Reply::Status(200, "ok")).await;
    let supervisor = HealthSupervisor::new();
    let mut slow = monitor("hang", http("/"), 10, 3, 1);
    slow.timeout = Duration::from_secs(10);
    let services = |with_removed: bool| {
        let mut v = vec![service(
            "kept",
            kept.addr,
            vec![monitor("http", http("/"), 10, 2, 1)],
        )];
        if with_removed {
            v.push(service("hang", hanging.addr, vec![slow.clone()]));
            v.push(service(
                "busy",
                busy.addr,
                vec![
                    monitor("http", http("/"), 10, 2, 1),
                    monitor("tcp", MonitorKind::Tcp, 10, 2, 1),
                ],
            ));
        }
        v
    };
    supervisor.set_services(services(true)).await.unwrap();
    wait_until("checks under way", || {
        busy.accepted() >= 6 && hanging.stats.hanging.load(Ordering::SeqCst) >= 1
    })
    .await;

    let started = Instant::now();
    supervisor.set_services(services(false)).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(100),
        "{:?}",
        started.elapsed()
    );
    let snapshot = supervisor.snapshot();
    assert_eq!(snapshot.keys().collect::<Vec<_>>(), ["kept"]);

    // The check stuck on the hanging server was aborted: its connection is closed.
    wait_until("hanging connection closed", || {
        hanging.stats.closed_by_client.load(Ordering::SeqCst) >= 1
    })
    .await;
    // Connections already in the backlog may still be accepted; none are made afterwards.
    sleep(Duration::from_millis(30)).await;
    let (busy_seen, hang_seen) = (busy.accepted(), hanging.accepted());
    let kept_seen = kept.accepted();
    sleep(Duration::from_millis(200)).await;
    assert_eq!(
        (busy.accepted(), hanging.accepted()),
        (busy_seen, hang_seen)
    );
    // The kept service went on.
    assert!(
        kept.accepted() >= kept_seen + 5,
        "{} → {}",
        kept_seen,
        kept.accepted()
    );
}

#[tokio::test]
async fn flaps_are_counted() {
    let server = HttpServer::start(Reply::Status(200, "ok")).await;
    let supervisor = HealthSupervisor::new();
    let mut events = supervisor.subscribe();
    supervisor
        .set_services(vec![service(
            "flappy",
            server.addr,
            vec![monitor("http", http("/"), 10, 1, 1)],
        )])
        .await
        .unwrap();
    for round in 1..=3u64 {
        server.set(Reply::Status(503, "no"));
        let down = next_event(&mut events, "flappy").await;
        assert_eq!(
            (down.up, down.transitions),
            (false, 2 * round - 1),
            "{down:?}"
        );
        server.set(Reply::Status(200, "ok"));
        let up = next_event(&mut events, "flappy").await;
        assert_eq!((up.up, up.transitions), (true, 2 * round), "{up:?}");
        assert!(up.at >= down.at);
    }
    let health = &supervisor.snapshot()["flappy"];
    assert_eq!(health.transitions, 6);
    assert_eq!(health.monitors[0].transitions, 6);
    assert!(health.last_change.is_some());
}

#[tokio::test]
async fn changes_restart_only_changed_services_and_keep_their_state() {
    let mut server = HttpServer::start(Reply::Status(200, "ok")).await;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let tcp_addr = listener.local_addr().unwrap();
    let supervisor = HealthSupervisor::new();
    let mut events = supervisor.subscribe();
    let web_addr = server.addr;
    let web = |interval_ms| {
        service(
            "web",
            web_addr,
            vec![monitor("http", http("/"), interval_ms, 1, 1)],
        )
    };
    let tcp = service(
        "tcp",
        tcp_addr,
        vec![monitor("tcp", MonitorKind::Tcp, 10, 1, 1)],
    );
    supervisor
        .set_services(vec![web(10), tcp.clone()])
        .await
        .unwrap();
    server.stop().await;
    assert!(!next_event(&mut events, "web").await.up);
    wait_until("tcp checks", || checks(&supervisor, "tcp", 0) >= 5).await;

    // The same set again: nothing restarts (the counters go on).
    let before = checks(&supervisor, "tcp", 0);
    supervisor
        .set_services(vec![web(10), tcp.clone()])
        .await
        .unwrap();
    assert!(checks(&supervisor, "tcp", 0) >= before);

    // web changes: restarted, still down, no event, its flap count kept; tcp untouched.
    let web_checks = checks(&supervisor, "web", 0);
    supervisor.set_services(vec![web(12), tcp]).await.unwrap();
    let after = supervisor.snapshot();
    assert!(
        !after["web"].up && after["web"].transitions == 1,
        "{:?}",
        after["web"]
    );
    assert!(
        after["web"].monitors[0].checks <= 1 && web_checks >= 1,
        "{:?}",
        after["web"]
    );
    assert!(after["tcp"].monitors[0].checks >= before);
    no_event(&mut events, "web", Duration::from_millis(100)).await;
    assert!(checks(&supervisor, "web", 0) >= 3);

    server.restart().await;
    let up = next_event(&mut events, "web").await;
    assert_eq!((up.up, up.transitions), (true, 2));
}

#[tokio::test]
async fn invalid_configurations_change_nothing() {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let supervisor = HealthSupervisor::new();
    let good = service("a", addr, vec![monitor("tcp", MonitorKind::Tcp, 10, 1, 1)]);
    supervisor.set_services(vec![good.clone()]).await.unwrap();

    let duplicate = supervisor
        .set_services(vec![good.clone(), good.clone()])
        .await;
    assert!(
        matches!(duplicate, Err(HealthError::DuplicateService(ref s)) if s == "a"),
        "{duplicate:?}"
    );
    let bad_path = service("b", addr, vec![monitor("web", http("health"), 10, 1, 1)]);
    match supervisor.set_services(vec![bad_path]).await {
        Err(HealthError::InvalidMonitor {
            service,
            monitor,
            reason,
        }) => {
            assert_eq!((service.as_str(), monitor.as_str()), ("b", "web"));
            assert!(reason.to_string().contains("path"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let mut zero = monitor("tcp", MonitorKind::Tcp, 10, 1, 1);
    zero.interval = Duration::ZERO;
    assert!(
        supervisor
            .set_services(vec![service("c", addr, vec![zero])])
            .await
            .is_err()
    );
    let bad_name = monitor(
        "dns",
        MonitorKind::Dns(DnsCheck::new("a..b", RecordType::A)),
        10,
        1,
        1,
    );
    assert!(
        supervisor
            .set_services(vec![service("d", addr, vec![bad_name])])
            .await
            .is_err()
    );

    // "a" kept running through all of it.
    let snapshot = supervisor.snapshot();
    assert_eq!(snapshot.keys().collect::<Vec<_>>(), ["a"]);
    let before = checks(&supervisor, "a", 0);
    wait_until("a still checked", || {
        checks(&supervisor, "a", 0) > before + 2
    })
    .await;
}

#[tokio::test]
async fn initial_state_and_services_without_monitors() {
    let server = HttpServer::start(Reply::Status(500, "down")).await;
    let supervisor = HealthSupervisor::new();
    let mut events = supervisor.subscribe();
    // Starting up: a dead target is withdrawn after `fall` checks.
    let assumed_up = service(
        "assumed",
        server.addr,
        vec![monitor("http", http("/"), 10, 3, 1)],
    );
    // Starting down: a live target is answered after `rise` checks.
    let mut starts_down = service(
        "cautious",
        "127.0.0.1:1".parse().unwrap(),
        vec![monitor("tcp", MonitorKind::Tcp, 10, 1, 2)],
    );
    let ok = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    starts_down.port = ok.local_addr().unwrap().port();
    starts_down.initial_up = false;
    // No monitors: always up, even with a threshold.
    let mut bare = ServiceMonitors::new("bare", LOCALHOST, 80);
    bare.threshold = 5;
    supervisor
        .set_services(vec![assumed_up, starts_down, bare])
        .await
        .unwrap();

    let initial = supervisor.snapshot();
    assert!(initial["assumed"].up && !initial["cautious"].up && initial["bare"].up);
    let mut got = HashMap::new();
    for _ in 0..2 {
        let event = timeout(WAIT, events.recv()).await.unwrap().unwrap();
        got.insert(event.service.clone(), event);
    }
    assert!(
        !got["assumed"].up && server.served(500) >= 3,
        "{:?}",
        got["assumed"]
    );
    assert!(
        got["cautious"].up && got["cautious"].reason.contains("2 in a row"),
        "{:?}",
        got["cautious"]
    );
    assert!(supervisor.snapshot()["bare"].up);
    assert!(supervisor.snapshot()["bare"].monitors.is_empty());
}
