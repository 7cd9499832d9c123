//! Liveness: a dead peer detected within the timeout and reconnected; a peer that stops
//! reading blocks nobody else.

use std::time::{Duration, Instant};

use gslb_tests::ProxyMode;
use gslb_user::mep::{
    CloseReason, LocalState, SiteSpec,
    frame::Message,
    session::{self},
};
use tokio::{io::AsyncWriteExt, time::sleep};

use super::{Lab, ip, raw_link, rtt, service, two_parents};

// ---- Liveness ----

#[tokio::test]
async fn dead_peer_detected_within_the_timeout_and_reconnected() {
    let mut lab = Lab::new(two_parents()).await;
    lab.start_all().await;
    lab.wait("A", "link", |v| v.session_up("B")).await;
    lab.wait("B", "link", |v| v.session_up("A")).await;
    lab.node("A")
        .publish_local(LocalState {
            services: vec![service("a", true, 1)],
            ..Default::default()
        })
        .unwrap();
    lab.wait("B", "A's services", |v| v.sites["A"].services.len() == 1)
        .await;

    // Silent: nothing crosses any more, no connection closes.
    let stalled = Instant::now();
    lab.proxy("A", "B").set(ProxyMode::Stall);
    lab.wait("B", "A dead", |v| !v.session_up("A")).await;
    lab.wait("A", "B dead", |v| !v.session_up("B")).await;
    let took = stalled.elapsed();
    let dead_after = Duration::from_millis(400);
    assert!(
        took >= dead_after.checked_sub(Duration::from_millis(60)).unwrap() && took < dead_after * 3,
        "{took:?}"
    );
    assert!(lab.node("B").stats().closed(CloseReason::DeadPeer) >= 1);
    // A's services are DOWN for B while the session is down.
    let v = lab.node("B").view();
    assert!(!v.sites["A"].reachable && !v.service_up("A", "a", None));

    // Back: A reconnects (backoff ≤ 200 ms here) and the state flows again.
    lab.proxy("A", "B").set(ProxyMode::Open);
    lab.wait("B", "A back", |v| {
        v.session_up("A") && v.service_up("A", "a", None)
    })
    .await;

    // Cut (connections reset): seen at once, not after the timeout.
    let cut = Instant::now();
    lab.proxy("A", "B").set(ProxyMode::Cut);
    lab.wait("A", "B down", |v| !v.session_up("B")).await;
    assert!(cut.elapsed() < dead_after, "{:?}", cut.elapsed());
    sleep(Duration::from_millis(500)).await;
    assert!(
        !lab.node("A").view().session_up("B"),
        "stays down while cut"
    );
    lab.proxy("A", "B").set(ProxyMode::Open);
    lab.wait("A", "B back", |v| v.session_up("B")).await;
    // The peer itself restarting.
    lab.kill("B").await;
    lab.wait("A", "B gone", |v| !v.session_up("B")).await;
    lab.start("B").await;
    lab.wait("A", "B back after restart", |v| v.session_up("B"))
        .await;
    lab.wait("B", "A's services after restart", |v| {
        v.service_up("A", "a", None)
    })
    .await;
}

#[tokio::test]
async fn a_peer_that_stops_reading_blocks_nobody_else() {
    // F (lowest IP) calls A, then only sends heartbeats and never reads; A publishes large,
    // changing tables. B must keep getting every update promptly, and A must drop F.
    let mut lab = Lab::new(vec![
        SiteSpec::parent("F", ip(1)),
        SiteSpec::parent("A", ip(2)),
        SiteSpec::parent("B", ip(3)),
    ])
    .await;
    lab.start("A").await;
    lab.start("B").await;
    lab.wait("B", "link to A", |v| v.session_up("A")).await;
    let (mut f, mut k) = raw_link(lab.listen["A"], "F", "A").await;
    let hb = tokio::spawn(async move {
        for seq in 0.. {
            let m = session::seal(2, &Message::Heartbeat { seq }, 64, &mut k.send).unwrap();
            if f.write_all(&m).await.is_err() {
                return;
            }
            sleep(Duration::from_millis(50)).await;
        }
    });
    lab.wait("A", "F up", |v| v.session_up("F")).await;
    let a = lab.node("A").clone();
    let mut worst = Duration::ZERO;
    for round in 0..12u32 {
        let mut rows = rtt("A", 40_000);
        rows[0].rtt_us = round;
        let sent = Instant::now();
        a.publish_local(LocalState {
            services: vec![service("round", true, u64::from(round))],
            rtt: rows,
            ..Default::default()
        })
        .unwrap();
        lab.wait("B", "the round", |v| {
            v.sites["A"]
                .services
                .first()
                .is_some_and(|s| s.state.connections == u64::from(round))
                && v.sites["A"].rtt.first().is_some_and(|r| r.rtt_us == round)
        })
        .await;
        worst = worst.max(sent.elapsed());
    }
    lab.wait("A", "F dropped", |v| !v.session_up("F")).await;
    assert!(
        a.stats().closed(CloseReason::WriteTimeout) >= 1,
        "{:?}",
        a.stats()
    );
    assert!(
        worst < Duration::from_secs(2),
        "B waited {worst:?} for an update"
    );
    hb.abort();
}
