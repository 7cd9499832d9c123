//! The spec's scenarios 1-3 over MEP, also under a flood of half-open connections.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    time::{Duration, Instant},
};

use gslb_tests::ProxyMode;
use gslb_user::mep::{CloseReason, LocalState, SiteSpec};
use tokio::{
    io::AsyncReadExt,
    time::{sleep, timeout},
};

use super::{Flood, Lab, WAIT, ip, parent_is, service, wait_until};

/// The seed's deployment on loopback: P1..P3 with backups P1: P2, P3; P2: P3, P1; P3: P1, P2;
/// child1..3 of each.
fn seed() -> Vec<SiteSpec> {
    vec![
        SiteSpec::parent("P1", ip(1)).with_backups(["P2", "P3"]),
        SiteSpec::parent("P2", ip(2)).with_backups(["P3", "P1"]),
        SiteSpec::parent("P3", ip(3)).with_backups(["P1", "P2"]),
        SiteSpec::child("child1", ip(11), "P1"),
        SiteSpec::child("child2", ip(12), "P2"),
        SiteSpec::child("child3", ip(13), "P3"),
    ]
}

fn flood(lab: &Lab) -> Flood {
    let targets: Vec<SocketAddr> = lab.listen.values().copied().collect();
    let mut sources: Vec<IpAddr> = lab
        .specs
        .iter()
        .map(|s| s.ip)
        .filter(|ip| *ip != self::ip(1))
        .collect();
    sources.extend((1..=20).map(|i| IpAddr::V4(Ipv4Addr::new(127, 0, 2, i))));
    let tasks = (0..1000)
        .map(|i| {
            let (from, to) = (sources[i % sources.len()], targets[i % targets.len()]);
            tokio::spawn(async move {
                loop {
                    let socket = tokio::net::TcpSocket::new_v4().unwrap();
                    socket.bind(SocketAddr::new(from, 0)).unwrap();
                    if let Ok(Ok(mut s)) = timeout(WAIT, socket.connect(to)).await {
                        let mut buf = [0u8; 64];
                        while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
                    }
                    sleep(Duration::from_secs(1)).await;
                }
            })
        })
        .collect();
    Flood(tasks)
}

/// The seed's deployment, every child with its own parent and one service; under a flood of
/// half-open connections when `flooded`.
async fn seed_lab(flooded: bool) -> Lab {
    let mut lab = Lab::new(seed()).await;
    lab.start_all().await;
    if flooded {
        lab.flood = Some(flood(&lab));
    }
    for (c, p) in [("child1", "P1"), ("child2", "P2"), ("child3", "P3")] {
        lab.wait(c, "own parent", |v| v.current_parent.as_deref() == Some(p))
            .await;
        lab.node(c)
            .publish_local(LocalState {
                services: vec![service(&format!("{c}-web"), true, 1)],
                ..Default::default()
            })
            .unwrap();
    }
    for p in ["P1", "P2", "P3"] {
        lab.wait(p, "mesh and children", |v| {
            ["P1", "P2", "P3"]
                .iter()
                .all(|q| *q == p || v.session_up(q))
                && ["child1", "child2", "child3"]
                    .iter()
                    .all(|c| v.service_up(c, &format!("{c}-web"), None))
        })
        .await;
    }
    if flooded {
        // The flood is there: refused at once, and held to the per-source cap.
        wait_until("the flood refused and capped", || {
            let (mut wrong, mut capped) = (0, 0);
            for r in lab.running.values() {
                wrong += r.node.stats().closed(CloseReason::WrongSource);
                capped += r.node.stats().closed(CloseReason::PreauthLimit);
            }
            wrong >= 100 && capped >= 100
        })
        .await;
    }
    lab
}

#[tokio::test]
async fn scenario_1_over_mep() {
    scenario_1(false).await;
}

#[tokio::test]
async fn scenario_1_over_mep_under_a_flood_of_half_open_connections() {
    scenario_1(true).await;
}

async fn scenario_1(flooded: bool) {
    let mut lab = seed_lab(flooded).await;
    lab.kill("P1").await;
    let killed = Instant::now();
    lab.wait("child1", "adopted by P2", parent_is("P2")).await;
    let adoption = killed.elapsed();
    lab.wait("P2", "child1 adopted", |v| {
        v.adopted.get("child1").map(String::as_str) == Some("P1")
    })
    .await;
    lab.wait("P3", "child1 is P2's", |v| {
        v.holders.get("child1").map(String::as_str) == Some("P2")
            && v.service_up("child1", "child1-web", None)
    })
    .await;
    assert!(lab.node("P3").view().adopted.is_empty());
    assert!(
        adoption < Duration::from_secs(3),
        "adoption took {adoption:?}"
    );
    // P1 returns: child1 goes back.
    lab.start("P1").await;
    lab.wait("child1", "back to P1", parent_is("P1")).await;
    lab.wait("P2", "child1 released", |v| {
        v.adopted.is_empty() && !v.session_up("child1")
    })
    .await;
    lab.wait("P3", "child1 is P1's", |v| {
        v.holders.get("child1").map(String::as_str) == Some("P1")
    })
    .await;
    sleep(Duration::from_millis(800)).await;
    assert_eq!(
        lab.node("child1").view().current_parent.as_deref(),
        Some("P1"),
        "and stays"
    );
}

#[tokio::test]
async fn scenario_2_over_mep() {
    scenario_2(false).await;
}

#[tokio::test]
async fn scenario_2_over_mep_under_a_flood_of_half_open_connections() {
    scenario_2(true).await;
}

async fn scenario_2(flooded: bool) {
    let lab = seed_lab(flooded).await;
    lab.proxy("P1", "P2").set(ProxyMode::Cut);
    lab.wait("P2", "P1 down", |v| !v.session_up("P1")).await;
    // P2 tries to adopt child1, which refuses: its parent P1 is up.
    wait_until("child1 refuses P2", || {
        lab.node("child1")
            .stats()
            .closed(CloseReason::AdoptRejected)
            >= 1
    })
    .await;
    wait_until("P2 told", || {
        lab.node("P2").stats().closed(CloseReason::PeerRejected) >= 1
    })
    .await;
    assert_eq!(
        lab.node("child1").view().current_parent.as_deref(),
        Some("P1")
    );
    assert!(lab.node("P2").view().adopted.is_empty());
    assert!(lab.node("P3").view().adopted.is_empty());
    lab.proxy("P1", "P2").set(ProxyMode::Open);
    lab.wait("P2", "P1 back", |v| v.session_up("P1")).await;
    sleep(Duration::from_millis(500)).await;
    assert_eq!(
        lab.node("child1").view().current_parent.as_deref(),
        Some("P1")
    );
}

#[tokio::test]
async fn scenario_3_over_mep() {
    scenario_3(false).await;
}

#[tokio::test]
async fn scenario_3_over_mep_under_a_flood_of_half_open_connections() {
    scenario_3(true).await;
}

async fn scenario_3(flooded: bool) {
    let lab = seed_lab(flooded).await;
    for (a, b) in [("P1", "P3"), ("P1", "child1"), ("P2", "P3")] {
        lab.proxy(a, b).set(ProxyMode::Cut);
    }
    lab.wait("child1", "adopted by P3", parent_is("P3")).await;
    assert!(lab.node("P2").view().session_up("P1"), "P2 still sees P1");
    assert!(lab.node("P2").view().adopted.is_empty(), "P2 does nothing");
    lab.proxy("P1", "P2").set(ProxyMode::Cut);
    lab.wait("child1", "moved to P2", parent_is("P2")).await;
    lab.wait("P3", "let go of child1", |v| v.adopted.is_empty())
        .await;
    // P3 keeps offering and is refused; child1 stays with P2.
    sleep(Duration::from_millis(800)).await;
    assert_eq!(
        lab.node("child1").view().current_parent.as_deref(),
        Some("P2")
    );
    for (a, b) in [("P1", "P3"), ("P1", "child1"), ("P2", "P3"), ("P1", "P2")] {
        lab.proxy(a, b).set(ProxyMode::Open);
    }
    lab.wait("child1", "home again", parent_is("P1")).await;
    lab.wait("P2", "released", |v| v.adopted.is_empty()).await;
}
