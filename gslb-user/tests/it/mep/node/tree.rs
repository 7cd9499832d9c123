//! Parent and child: metrics and relay through a parent, adoption by a backup parent and the
//! hand-back, a relay only of what the child sent.

use std::time::{Duration, Instant};

use gslb_tests::ProxyMode;
use gslb_user::mep::{
    LocalState, MepConfig, MepNode, Role, SiteSpec, SiteStatus,
    auth::{Opener, SessionKeys},
    frame::{self, Message, ServiceStates},
    session::{self, Identity, LocalHello},
};
use tokio::{
    io::AsyncWriteExt,
    net::{TcpListener, TcpStream},
    sync::oneshot,
    task::JoinHandle,
    time::{sleep, timeout},
};

use super::{Lab, WAIT, ip, key, parent_is, rtt, service};

// ---- Parent / child ----

/// P1 and P2 parents (P1: backups P2), child c1 of P1.
fn small_tree() -> Vec<SiteSpec> {
    vec![
        SiteSpec::parent("P1", ip(1)).with_backups(["P2"]),
        SiteSpec::parent("P2", ip(2)),
        SiteSpec::child("c1", ip(11), "P1"),
    ]
}

#[tokio::test]
async fn three_nodes_parent_child_metrics_and_relay() {
    let mut lab = Lab::new(small_tree()).await;
    lab.start_all().await;
    lab.wait("c1", "attached to P1", |v| {
        v.current_parent.as_deref() == Some("P1")
    })
    .await;
    let c1 = lab.node("c1").view();
    assert_eq!(c1.role, Role::Child);
    assert!(!c1.answers_dns, "only parents answer DNS");
    assert!(
        c1.sessions["P1"].version == Some(2) && !c1.sessions["P1"].initiated,
        "the parent calls its child"
    );
    lab.node("c1")
        .publish_local(LocalState {
            services: vec![service("c1-web", true, 7)],
            rtt: rtt("c1", 5), // a child's network metrics go nowhere
            ..Default::default()
        })
        .unwrap();
    lab.node("P1")
        .publish_local(LocalState {
            services: vec![service("p1-web", true, 1)],
            rtt: rtt("P1", 10),
            ..Default::default()
        })
        .unwrap();
    // P2 learns c1's services through P1.
    lab.wait("P2", "c1 via P1", |v| {
        let c = &v.sites["c1"];
        c.reachable && c.via.as_deref() == Some("P1") && c.services.len() == 1
    })
    .await;
    assert!(lab.node("P2").view().service_up("c1", "c1-web", None));
    assert_eq!(
        lab.node("P2").view().holders.get("c1").map(String::as_str),
        Some("P1")
    );
    lab.wait("P2", "P1's RTT", |v| v.sites["P1"].rtt.len() == 10)
        .await;
    lab.wait("c1", "P1's backups", |v| {
        v.sites["P1"].backups.as_deref() == Some(&["P2".to_string()][..])
    })
    .await;
    sleep(Duration::from_millis(200)).await;
    let c1 = lab.node("c1").view();
    assert!(
        c1.sites["P1"].rtt.is_empty(),
        "network metrics only between parents"
    );
    assert!(
        c1.sites["P1"].services.is_empty(),
        "a child gets no services"
    );
    assert!(lab.node("P1").view().sites["c1"].rtt.is_empty());
    assert!(
        c1.sites
            .get("P2")
            .is_none_or(|p2| !p2.reachable && p2.status.is_none()),
        "a child talks only to its parent (it knows the adopters' keys, no state of theirs)"
    );

    // c1's session to P1 drops: its services are DOWN for P2 (unless P2 monitors them itself).
    lab.proxy("P1", "c1").set(ProxyMode::Cut);
    lab.wait("P2", "c1 unreachable", |v| !v.sites["c1"].reachable)
        .await;
    let v = lab.node("P2").view();
    assert!(!v.service_up("c1", "c1-web", None));
    assert!(v.service_up("c1", "c1-web", Some(true)));
    // P1 is still up for P2 and P1's backup list names P2, but P1 is up: no adoption.
    sleep(Duration::from_millis(800)).await;
    assert!(lab.node("P2").view().adopted.is_empty());
    lab.proxy("P1", "c1").set(ProxyMode::Open);
    lab.wait("P2", "c1 back", |v| v.service_up("c1", "c1-web", None))
        .await;
}

/// Records the first view of `node` in which `site`'s `service` is DOWN, until stopped.
struct DownWatch {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Option<String>>,
}

impl DownWatch {
    fn start(node: &MepNode, site: &'static str, service: &'static str) -> DownWatch {
        let mut rx = node.subscribe();
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            loop {
                {
                    let v = rx.borrow_and_update();
                    if !v.service_up(site, service, None) {
                        return Some(format!("{}: {site} {:?}", v.site, v.sites.get(site)));
                    }
                }
                tokio::select! {
                    r = rx.changed() => if r.is_err() { return None },
                    _ = &mut stopped => return None,
                }
            }
        });
        DownWatch {
            stop: Some(stop),
            task,
        }
    }

    /// The first view that had the service DOWN, if any.
    async fn finish(mut self) -> Option<String> {
        let _ = self.stop.take().map(|s| s.send(()));
        timeout(WAIT, self.task)
            .await
            .expect("watch stops")
            .expect("watch task")
    }
}

/// small_tree with `dead_after` everywhere, brought to: c1 adopted by P2 (P1 was cut off from
/// both), then P1 connected to P2 again and seeing c1 through P2, the P1–c1 session still cut.
async fn c1_adopted_by_p2(dead_after: Duration) -> Lab {
    let mut lab = Lab::new(small_tree()).await;
    for site in ["P1", "P2", "c1"] {
        lab.tweaks.insert(
            site.into(),
            Box::new(move |c: &mut MepConfig| c.dead_after = dead_after),
        );
    }
    lab.start_all().await;
    lab.wait("c1", "attached to P1", parent_is("P1")).await;
    lab.node("c1")
        .publish_local(LocalState {
            services: vec![service("c1-web", true, 1)],
            ..Default::default()
        })
        .unwrap();
    lab.wait("P2", "c1 via P1", |v| v.service_up("c1", "c1-web", None))
        .await;
    lab.proxy("P1", "P2").set(ProxyMode::Cut);
    lab.proxy("P1", "c1").set(ProxyMode::Cut);
    lab.wait("c1", "adopted by P2", parent_is("P2")).await;
    lab.wait("P2", "c1 adopted", |v| v.service_up("c1", "c1-web", None))
        .await;
    lab.proxy("P1", "P2").set(ProxyMode::Open);
    lab.wait("P1", "c1 via P2", |v| v.service_up("c1", "c1-web", None))
        .await;
    lab
}

/// c1 goes back from P2 to P1 while nothing crosses between P1 and P2 (their session stalled):
/// P2 has no path to c1 until the stall ends. Returns when P2 has seen c1's session close.
async fn hand_c1_back_with_p1_p2_stalled(lab: &Lab) {
    lab.proxy("P1", "P2").set(ProxyMode::Stall);
    lab.proxy("P1", "c1").set(ProxyMode::Open);
    lab.wait("c1", "back with P1", parent_is("P1")).await;
    lab.wait("P2", "c1 gone from P2", |v| {
        !v.session_up("c1") && v.adopted.is_empty()
    })
    .await;
}

/// A child going back from its adopter to its own parent is a planned handover: neither parent
/// may count its services DOWN meanwhile, even for a moment. Here the new parent's relay to
/// the adopter is held up (the P1–P2 session stalled) while the child moves, so the adopter has
/// no path to the child for that long and must keep the child's last state itself (the
/// handover grace); the e2e test mep_sites saw the flap under load without the stall.
#[tokio::test]
async fn a_child_handed_back_to_its_parent_stays_up_at_both_parents() {
    // The P1–P2 session must outlive the stall (the grace is this long too).
    let lab = c1_adopted_by_p2(Duration::from_secs(3)).await;
    let watches = [
        DownWatch::start(lab.node("P1"), "c1", "c1-web"),
        DownWatch::start(lab.node("P2"), "c1", "c1-web"),
    ];
    hand_c1_back_with_p1_p2_stalled(&lab).await;
    sleep(Duration::from_millis(200)).await;
    let v = lab.node("P2").view();
    let c1 = &v.sites["c1"];
    assert!(
        c1.reachable && c1.handover.as_deref() == Some("P1") && v.service_up("c1", "c1-web", None),
        "P2 keeps c1 while P1's relay is on its way: {c1:?}"
    );
    // P1's relay gets through: the handover is over, c1 comes through P1.
    lab.proxy("P1", "P2").set(ProxyMode::Open);
    lab.wait("P2", "c1 via P1", |v| {
        let c = &v.sites["c1"];
        c.via.as_deref() == Some("P1") && c.handover.is_none() && v.service_up("c1", "c1-web", None)
    })
    .await;
    lab.wait("P1", "c1 directly", |v| {
        v.sites["c1"].via.as_deref() == Some("c1")
    })
    .await;
    for w in watches {
        assert_eq!(
            w.finish().await,
            None,
            "c1-web counted DOWN during the handover"
        );
    }
}

/// The grace is bounded: when the new parent does not deliver the child within `dead_after`
/// (here its session to the old one stays stalled), the child is unreachable then, as it would
/// be behind a silent session.
#[tokio::test]
async fn a_handover_not_completed_within_dead_after_makes_the_child_unreachable() {
    let dead_after = Duration::from_millis(800);
    let lab = c1_adopted_by_p2(dead_after).await;
    hand_c1_back_with_p1_p2_stalled(&lab).await;
    let moved = Instant::now();
    let v = lab.node("P2").view();
    assert!(
        v.sites["c1"].handover.is_some() && v.service_up("c1", "c1-web", None),
        "{:?}",
        v.sites["c1"]
    );
    lab.wait("P2", "c1 unreachable", |v| !v.sites["c1"].reachable)
        .await;
    let took = moved.elapsed();
    assert!(
        took >= dead_after.checked_sub(Duration::from_millis(100)).unwrap()
            && took < dead_after * 3,
        "{took:?}"
    );
    assert!(!lab.node("P2").view().service_up("c1", "c1-web", None));
    lab.proxy("P1", "P2").set(ProxyMode::Open);
    lab.wait("P2", "c1 via P1", |v| v.service_up("c1", "c1-web", None))
        .await;
}

/// Plays `me` by hand on the listener the lab bound for it: accepts one session (from the site
/// the topology has call it), and keeps it alive with heartbeats; frames to send go through the
/// returned queue. The task ends with the queue.
async fn raw_site(
    lab: &mut Lab,
    me: &str,
    role: Role,
    parent: Option<&str>,
) -> (
    (tokio::io::ReadHalf<TcpStream>, Opener),
    tokio::sync::mpsc::Sender<Message>,
    JoinHandle<()>,
) {
    let listener = TcpListener::from_std(lab.bound.remove(me).expect("not started")).unwrap();
    let (mut s, _) = timeout(WAIT, listener.accept())
        .await
        .expect("called")
        .unwrap();
    let hello = LocalHello {
        site: me.into(),
        role,
        parent: parent.map(str::to_owned),
        versions: vec![2],
        software: "test".into(),
        rtt_tolerance_ms: None,
    };
    let est = session::handshake_acceptor(
        &mut s,
        Identity {
            hello: &hello,
            key: &key(me),
        },
        frame::DEFAULT_MAX_PAYLOAD,
        WAIT,
        |h| Ok(key(&h.site).public()),
    )
    .await
    .unwrap();
    let SessionKeys {
        send: mut sealer,
        recv: opener,
    } = est.keys;
    let (rd, mut wr) = tokio::io::split(s);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Message>(8);
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        for seq in 0.. {
            let m = tokio::select! {
                _ = tick.tick() => Message::Heartbeat { seq },
                m = rx.recv() => match m { Some(m) => m, None => return },
            };
            let bytes = session::seal(2, &m, frame::DEFAULT_MAX_PAYLOAD, &mut sealer).unwrap();
            if wr.write_all(&bytes).await.is_err() {
                return;
            }
        }
    });
    ((rd, opener), tx, task)
}

/// A parent relays its child's services to the other parents only once the child has sent
/// them. Relayed before that as an empty list, they would count at the other parents as the
/// child's whole list, delivered: every service of the child DOWN, and the handover grace
/// ended early. Here P2 and c1 are played by hand, and c1 sends its status well before its
/// services, as a child's status and services may reach its parent a moment apart.
#[tokio::test]
async fn a_parent_relays_a_childs_services_only_once_the_child_sent_them() {
    let mut lab = Lab::new(small_tree()).await;
    lab.start("P1").await;
    let (mut p2, _p2_tx, p2_task) = raw_site(&mut lab, "P2", Role::Parent, None).await;
    let (_c1, c1_tx, c1_task) = raw_site(&mut lab, "c1", Role::Child, Some("P1")).await;
    let status = SiteStatus {
        site: "c1".into(),
        role: Role::Child,
        parent: Some("P1".into()),
        up: true,
    };
    c1_tx.send(Message::SiteStatus(status)).await.unwrap();
    lab.wait("P1", "c1's status", |v| v.sites["c1"].status.is_some())
        .await;
    // Time for P1's session to P2 to send whatever that changed (a session sends the latest state
    // only, so an intermediate relay is seen only if it stays a moment).
    sleep(Duration::from_millis(300)).await;
    c1_tx
        .send(Message::ServiceStates(ServiceStates {
            site: "c1".into(),
            services: vec![service("c1-web", true, 1)],
        }))
        .await
        .unwrap();
    let first = timeout(WAIT, async {
        loop {
            let (_, m, _) = session::read_sealed(&mut p2.0, frame::DEFAULT_MAX_PAYLOAD, &mut p2.1)
                .await
                .expect("P1's link");
            if let Message::ServiceStates(s) = m
                && s.site == "c1"
            {
                return s.services;
            }
        }
    })
    .await
    .expect("P1 relays c1's services");
    assert_eq!(
        first,
        [service("c1-web", true, 1)],
        "the first services of c1 P1 relayed"
    );
    drop(c1_tx);
    for t in [p2_task, c1_task] {
        t.abort();
    }
}
