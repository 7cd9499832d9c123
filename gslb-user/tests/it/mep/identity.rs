//! MEP identity and integrity over real loopback sessions (issue 12): each site proves its
//! name with its own key, from its own address; a site speaks only for itself; a live session is
//! never replaced by a newcomer that cannot prove the same name; every frame after the
//! handshake is sealed (a replayed or changed frame closes the session); a flood of silent
//! connections delays no real handshake; and an unauthenticated peer cannot make a node wait
//! for a large frame. Attackers are played by hand with real sockets, each
//! from the source address it would have.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use gslb_user::health::state::ServiceState;
use gslb_user::mep::{
    CloseReason, LocalState, MepConfig, MepNode, Role, ServiceReport, SiteKey, SiteSpec,
    SiteStatus, SiteTree,
    frame::{self, Message, ServiceStates},
    session::{self, Identity, LocalHello, SessionError},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpSocket, TcpStream},
    sync::oneshot,
    task::JoinHandle,
    time::{sleep, timeout},
};

use super::{WAIT, wait_until, wait_view};

fn ip(a: u8, b: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, a, b))
}

fn key(site: &str) -> SiteKey {
    let seed = ring::digest::digest(&ring::digest::SHA256, format!("mep id {site}").as_bytes());
    SiteKey::from_seed(seed.as_ref().try_into().unwrap())
}

fn hello(site: &str, role: Role, parent: Option<&str>) -> LocalHello {
    LocalHello {
        site: site.into(),
        role,
        parent: parent.map(str::to_owned),
        versions: vec![2],
        software: "attacker".into(),
        rtt_tolerance_ms: None,
    }
}

fn service(name: &str, up: bool) -> ServiceReport {
    let state = if up {
        ServiceState::UP
    } else {
        ServiceState::DOWN
    };
    ServiceReport {
        name: name.into(),
        state,
    }
}

/// An UP service with `connections`.
fn loaded(name: &str, connections: u64) -> ServiceReport {
    let mut s = service(name, true);
    s.state.connections = connections;
    s
}

/// A connection to `to` from `from` (the address an attacker on that host would have).
async fn connect_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpSocket::new_v4()?;
    s.bind(SocketAddr::new(from, 0))?;
    s.connect(to).await
}

/// Sites on their own 127.x addresses, each with its key and a bound port; nodes started on
/// demand with fast timers.
struct Deploy {
    specs: Vec<SiteSpec>,
    listeners: Vec<Option<std::net::TcpListener>>,
    /// The nodes started: each runs until its sender is dropped with the deployment.
    nodes: Vec<(oneshot::Sender<()>, JoinHandle<()>)>,
}

impl Deploy {
    fn new(specs: Vec<SiteSpec>) -> Deploy {
        let mut listeners = Vec::new();
        let specs = specs
            .into_iter()
            .map(|s| {
                let l = std::net::TcpListener::bind(SocketAddr::new(s.ip, 0)).unwrap();
                l.set_nonblocking(true).unwrap();
                let port = l.local_addr().unwrap().port();
                listeners.push(Some(l));
                let k = key(&s.name).public();
                s.with_port(port).with_key(k)
            })
            .collect();
        Deploy {
            specs,
            listeners,
            nodes: Vec::new(),
        }
    }

    fn index(&self, site: &str) -> usize {
        self.specs.iter().position(|s| s.name == site).unwrap()
    }

    fn addr(&self, site: &str) -> SocketAddr {
        self.specs[self.index(site)].mep_addr()
    }

    /// The listener bound for `site`, for an attacker that sits at its address.
    fn take_listener(&mut self, site: &str) -> TcpListener {
        let i = self.index(site);
        TcpListener::from_std(self.listeners[i].take().unwrap()).unwrap()
    }

    fn start(&mut self, site: &str, tweak: impl FnOnce(&mut MepConfig)) -> MepNode {
        let listener = self.take_listener(site);
        let mut c = super::fast_timers(MepConfig::new(
            site,
            key(site),
            SiteTree::new(self.specs.clone()).unwrap(),
        ));
        tweak(&mut c);
        let node = MepNode::new();
        let (stop, stop_rx) = oneshot::channel::<()>();
        let task = tokio::spawn({
            let node = node.clone();
            async move {
                node.run(listener, c, async {
                    let _ = stop_rx.await;
                })
                .await
                .expect("node runs");
            }
        });
        self.nodes.push((stop, task));
        node
    }
}

/// The handshake `me` (signing with `with`) runs as the initiator towards `peer` at `to`, from
/// `from`.
async fn call(
    from: IpAddr,
    to: SocketAddr,
    me: &LocalHello,
    with: &SiteKey,
    peer: &str,
) -> Result<(TcpStream, session::Established), SessionError> {
    let mut s = connect_from(from, to).await.map_err(SessionError::Io)?;
    let est = session::handshake_initiator(
        &mut s,
        Identity {
            hello: me,
            key: with,
        },
        peer,
        &key(peer).public(),
        frame::DEFAULT_MAX_PAYLOAD,
        WAIT,
    )
    .await?;
    Ok((s, est))
}

#[tokio::test]
async fn a_child_with_its_own_key_cannot_pose_as_a_parent_or_another_child() {
    let mut d = Deploy::new(vec![
        SiteSpec::parent("P1", ip(0, 21)),
        SiteSpec::parent("P2", ip(0, 22)),
        SiteSpec::child("c1", ip(0, 23), "P1"),
        SiteSpec::child("c2", ip(0, 24), "P1"),
    ]);
    let p1 = d.start("P1", |_| {});
    let p2 = d.start("P2", |_| {});
    wait_view(&p2, "P1–P2", |v| v.session_up("P1")).await;
    let since = p2.view().sessions["P1"].since;
    let c1_key = key("c1");

    // c1 calls P2 as parent P1 (from P1's own address, even), signing with its own key.
    let e = call(
        ip(0, 21),
        d.addr("P2"),
        &hello("P1", Role::Parent, None),
        &c1_key,
        "P2",
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            &e,
            SessionError::PeerRejected {
                code: frame::RejectCode::BadAuth,
                ..
            }
        ),
        "{e}"
    );
    wait_until("P2 counts bad_auth", || {
        p2.stats().closed(CloseReason::BadAuth) >= 1
    })
    .await;

    // c1 sits at c2's address and answers P1's call as c2, signing with its own key.
    let c2_at = d.take_listener("c2");
    let (mut s, _) = timeout(WAIT, c2_at.accept()).await.unwrap().unwrap();
    let as_c2 = hello("c2", Role::Child, Some("P1"));
    let _ = session::handshake_acceptor(
        &mut s,
        Identity {
            hello: &as_c2,
            key: &c1_key,
        },
        frame::DEFAULT_MAX_PAYLOAD,
        WAIT,
        |_| Ok(key("P1").public()),
    )
    .await;
    wait_until("P1 counts bad_auth", || {
        p1.stats().closed(CloseReason::BadAuth) >= 1
    })
    .await;
    assert!(!p1.view().session_up("c2"), "P1 believes no c2");

    // c1 as itself (its own key, its own address) speaks for c2: dropped and counted; what it
    // says of itself is taken.
    let c1_at = d.take_listener("c1");
    let (mut s, _) = timeout(WAIT, c1_at.accept()).await.unwrap().unwrap();
    let est = session::handshake_acceptor(
        &mut s,
        Identity {
            hello: &hello("c1", Role::Child, Some("P1")),
            key: &c1_key,
        },
        frame::DEFAULT_MAX_PAYLOAD,
        WAIT,
        |_| Ok(key("P1").public()),
    )
    .await
    .expect("c1 is c1");
    let mut keys = est.keys;
    let lies = [
        Message::SiteStatus(SiteStatus {
            site: "c2".into(),
            role: Role::Child,
            parent: Some("P1".into()),
            up: true,
        }),
        Message::ServiceStates(ServiceStates {
            site: "c2".into(),
            services: vec![service("c2-web", true)],
        }),
        Message::ServiceStates(ServiceStates {
            site: "P2".into(),
            services: vec![service("p2-web", false)],
        }),
        Message::ServiceStates(ServiceStates {
            site: "c1".into(),
            services: vec![service("c1-web", true)],
        }),
    ];
    for m in &lies {
        let bytes = session::seal(2, m, frame::DEFAULT_MAX_PAYLOAD, &mut keys.send).unwrap();
        s.write_all(&bytes).await.unwrap();
    }
    wait_view(&p1, "c1's own services", |v| {
        v.service_up("c1", "c1-web", None)
    })
    .await;
    let v = p1.view();
    assert!(p1.stats().refused_statements >= 3, "{:?}", p1.stats());
    assert!(
        !v.service_up("c2", "c2-web", None),
        "c1 cannot speak for c2"
    );
    assert!(v.sites["c2"].status.is_none() && !v.sites["c2"].reachable);
    assert!(v.sites["P2"].services.iter().all(|s| s.name != "p2-web"));

    // And to another child, c1 cannot pose as the parent either: c2 proper, at its address.
    drop(c2_at);
    let i = d.index("c2");
    let l = std::net::TcpListener::bind(d.addr("c2")).unwrap();
    l.set_nonblocking(true).unwrap();
    d.listeners[i] = Some(l);
    let c2 = d.start("c2", |_| {});
    wait_view(&c2, "c2 attached to P1", |v| v.session_up("P1")).await;
    let e = call(
        ip(0, 21),
        d.addr("c2"),
        &hello("P1", Role::Parent, None),
        &c1_key,
        "c2",
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("BadAuth"), "{e}");
    assert!(c2.stats().closed(CloseReason::BadAuth) >= 1);
    assert!(c2.view().session_up("P1"), "c2's real parent link stays");
    assert!(p2.view().session_up("P1") && p2.view().sessions["P1"].since == since);
}

/// A proxy between A and B that forwards A's frames to B and, on command, sends a captured
/// ServiceStates frame again after the next frame (a replay), or flips a byte in the next
/// ServiceStates frame (a change).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tamper {
    None,
    Replay,
    Modify,
}

async fn tampering_proxy(
    listener: TcpListener,
    to: SocketAddr,
    from: IpAddr,
    mode: Arc<Mutex<Tamper>>,
) {
    loop {
        let Ok((mut a, _)) = listener.accept().await else {
            return;
        };
        let Ok(b) = connect_from(from, to).await else {
            continue;
        };
        let (mut br, mut bw) = b.into_split();
        let (mut ar, mut aw) = a.split();
        let mode = mode.clone();
        let up = async {
            let mut captured: Option<Vec<u8>> = None;
            loop {
                let mut header = [0u8; frame::HEADER_LEN];
                if ar.read_exact(&mut header).await.is_err() {
                    return;
                }
                let len = u32::from_be_bytes(header[4..8].try_into().unwrap()) as usize;
                let sealed = header[3] != 1 && header[2] != 0;
                let mut rest = vec![0u8; len + if sealed { 32 } else { 0 }];
                if ar.read_exact(&mut rest).await.is_err() {
                    return;
                }
                let mut bytes = [&header[..], &rest].concat();
                let services = header[3] == 6;
                let now = *mode.lock().unwrap();
                let mut replay = None;
                if services && now == Tamper::Modify {
                    // The last payload byte (the last service's bandwidth): the frame would
                    // decode, only its tag fails.
                    bytes[frame::HEADER_LEN + len - 1] ^= 1;
                    *mode.lock().unwrap() = Tamper::None;
                } else if services && now == Tamper::Replay && captured.is_some() {
                    replay = captured.take();
                    *mode.lock().unwrap() = Tamper::None;
                }
                if services {
                    captured = Some(bytes.clone());
                }
                if bw.write_all(&bytes).await.is_err() {
                    return;
                }
                if let Some(old) = replay
                    && bw.write_all(&old).await.is_err()
                {
                    return;
                }
            }
        };
        let down = tokio::io::copy(&mut br, &mut aw);
        tokio::select! {
            () = up => {}
            _ = down => {}
        }
    }
}

#[tokio::test]
async fn a_replayed_or_modified_frame_closes_the_link_and_is_not_taken() {
    let mut d = Deploy::new(vec![
        SiteSpec::parent("A", ip(0, 61)),
        SiteSpec::parent("B", ip(0, 62)),
    ]);
    let mitm = TcpListener::bind((ip(0, 61), 0)).await.unwrap();
    let mitm_addr = mitm.local_addr().unwrap();
    let mode = Arc::new(Mutex::new(Tamper::None));
    tokio::spawn(tampering_proxy(mitm, d.addr("B"), ip(0, 61), mode.clone()));
    let b = d.start("B", |_| {});
    let a = d.start("A", |c| {
        // A reaches B through the proxy.
        let sites = c
            .topology
            .sites()
            .iter()
            .cloned()
            .map(|mut s| {
                if s.name == "B" {
                    s.connect = Some(mitm_addr);
                }
                s
            })
            .collect();
        c.topology = SiteTree::new(sites).unwrap();
    });
    wait_view(&b, "A up", |v| v.session_up("A")).await;
    let publish = |web: ServiceReport| {
        a.publish_local(LocalState {
            services: vec![web],
            ..Default::default()
        })
        .unwrap();
    };
    publish(loaded("web", 1));
    wait_view(&b, "web up", |v| v.service_up("A", "web", None)).await;

    // Replay: A says web is DOWN; right after, the captured frame saying UP arrives again.
    *mode.lock().unwrap() = Tamper::Replay;
    publish(service("web", false));
    wait_until("B counts integrity", || {
        b.stats().closed(CloseReason::Integrity) >= 1
    })
    .await;
    assert_eq!(*mode.lock().unwrap(), Tamper::None, "the replay was sent");
    wait_view(&b, "A back, web DOWN as A says", |v| {
        v.session_up("A") && v.sites["A"].services == Arc::new(vec![service("web", false)])
    })
    .await;

    // Modify: the next services frame has one bit flipped on the way.
    *mode.lock().unwrap() = Tamper::Modify;
    publish(loaded("web", 6));
    wait_until("B counts integrity again", || {
        b.stats().closed(CloseReason::Integrity) >= 2
    })
    .await;
    assert_eq!(*mode.lock().unwrap(), Tamper::None, "the change was made");
    wait_view(&b, "A back with what A sent", |v| {
        v.session_up("A") && v.sites["A"].services.first().map(|s| s.state.connections) == Some(6)
    })
    .await;
    assert!(
        b.view().sites["A"]
            .services
            .iter()
            .all(|s| s.state.connections != 7),
        "the changed frame was never taken"
    );
}

#[tokio::test]
async fn a_newcomer_without_the_key_does_not_evict_the_live_link() {
    let mut d = Deploy::new(vec![
        SiteSpec::parent("A", ip(0, 31)),
        SiteSpec::parent("B", ip(0, 32)),
    ]);
    let b = d.start("B", |_| {});
    let a = d.start("A", |_| {});
    a.publish_local(LocalState {
        services: vec![service("web", true)],
        ..Default::default()
    })
    .unwrap();
    wait_view(&b, "A's web", |v| v.service_up("A", "web", None)).await;
    let since = b.view().sessions["A"].since;

    // Someone at A's address claims A without A's key.
    let e = call(
        ip(0, 31),
        d.addr("B"),
        &hello("A", Role::Parent, None),
        &key("not A"),
        "B",
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("BadAuth"), "{e}");
    sleep(Duration::from_millis(300)).await;
    let v = b.view();
    assert!(
        v.session_up("A") && v.sessions["A"].since == since,
        "the live link stays"
    );
    assert!(v.service_up("A", "web", None));
    assert_eq!(b.stats().closed(CloseReason::Replaced), 0);

    // A itself reconnecting (it restarted before B saw the old session die) proves the name: the
    // newer session replaces the older one.
    let (_s, _est) = call(
        ip(0, 31),
        d.addr("B"),
        &hello("A", Role::Parent, None),
        &key("A"),
        "B",
    )
    .await
    .expect("A's own key");
    wait_until("B closed the old link as replaced", || {
        b.stats().closed(CloseReason::Replaced) >= 1
    })
    .await;
}

#[tokio::test]
async fn a_wrong_source_address_is_refused_and_nat_allows_it() {
    let specs = vec![
        SiteSpec::parent("A", ip(0, 41)),
        SiteSpec::parent("B", ip(0, 42)),
        SiteSpec::parent("C", ip(0, 43)),
    ];
    let mut d = Deploy::new(specs.clone());
    let b = d.start("B", |_| {});
    let as_a = hello("A", Role::Parent, None);
    // From an address that is no site's: closed at once.
    let e = call(ip(2, 41), d.addr("B"), &as_a, &key("A"), "B")
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            SessionError::PeerRejected { .. } | SessionError::Io(_) | SessionError::Closed
        ),
        "{e}"
    );
    wait_until("wrong_source", || {
        b.stats().closed(CloseReason::WrongSource) >= 1
    })
    .await;
    // From another site's address, with A's key: refused after the Hello, with the reason.
    let e = call(ip(0, 43), d.addr("B"), &as_a, &key("A"), "B")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("not its address"), "{e}");
    assert!(b.stats().closed(CloseReason::WrongSource) >= 2);
    assert_eq!(b.stats().handshakes, 0);

    // A marked nat: the same connections are its own (its key proves it).
    let mut nat = specs;
    nat[0].nat = true;
    let mut d = Deploy::new(nat);
    let b = d.start("B", |_| {});
    call(ip(2, 41), d.addr("B"), &as_a, &key("A"), "B")
        .await
        .expect("A behind NAT");
    wait_until("the link", || b.stats().handshakes >= 1).await;
}

#[tokio::test]
async fn a_flood_of_half_open_connections_does_not_delay_a_real_handshake() {
    // A is behind NAT: every source address passes the first check, so the flood reaches the
    // pool of handshakes in progress. B has the default deadlines.
    let mut specs = vec![
        SiteSpec::parent("A", ip(0, 51)),
        SiteSpec::parent("B", ip(0, 52)),
    ];
    specs[0].nat = true;
    let mut d = Deploy::new(specs);
    let b = d.start("B", |c| {
        c.handshake_timeout = MepConfig::new("x", key("x"), c.topology.clone()).handshake_timeout;
    });
    let to = d.addr("B");
    // 1,000 connections that never send a byte, from 250 addresses (4 each: the per-source cap).
    let mut flood = Vec::new();
    for i in 0..1000u32 {
        let from = ip(3 + (i / 4 / 250) as u8, (i / 4 % 250) as u8 + 1);
        flood.push(connect_from(from, to).await.expect("flood connection"));
    }
    wait_until("B took the flood in", || b.stats().accepted >= 1000).await;
    let mut worst = Duration::ZERO;
    for _ in 0..3 {
        let started = Instant::now();
        call(
            ip(0, 51),
            to,
            &hello("A", Role::Parent, None),
            &key("A"),
            "B",
        )
        .await
        .expect("a real handshake under the flood");
        worst = worst.max(started.elapsed());
    }
    println!("worst handshake under 1,000 half-open connections: {worst:?}");
    assert!(worst < Duration::from_secs(1), "{worst:?}");
    assert!(
        b.stats().closed(CloseReason::PreauthLimit) >= 900,
        "the flood was held to the pool: {:?}",
        b.stats().closes
    );
    drop(flood);
}

/// A connection from a site's address, not authenticated yet, announces a 1 MiB Hello (under
/// the node's `max_payload`) and sends 4 KiB of it: the node closes it on its header
/// (`oversized`), at once, instead of reserving the megabyte and waiting for it until the
/// handshake deadline (here 10 s); a real handshake then still works.
#[tokio::test]
async fn an_unauthenticated_peer_announcing_a_large_frame_is_closed_on_its_header() {
    let mut d = Deploy::new(vec![
        SiteSpec::parent("A", ip(0, 91)),
        SiteSpec::parent("B", ip(0, 92)),
    ]);
    let b = d.start("B", |c| c.handshake_timeout = WAIT);
    let mut s = connect_from(ip(0, 91), d.addr("B")).await.unwrap();
    let mut header = vec![
        b'M',
        b'P',
        frame::HELLO_VERSION,
        frame::MessageType::Hello as u8,
    ];
    header.extend_from_slice(&(1u32 << 20).to_be_bytes());
    s.write_all(&header).await.unwrap();
    // A few KiB of the payload: more than the cap before authentication, far less than 1 MiB.
    let _ = s.write_all(&[0; 4096]).await;
    let started = Instant::now();
    let mut rest = Vec::new();
    let closed = timeout(Duration::from_secs(1), s.read_to_end(&mut rest))
        .await
        .expect("closed on the header, not at the handshake deadline");
    assert!(
        matches!(&closed, Ok(0)) || closed.is_err(),
        "{closed:?}, {} bytes",
        rest.len()
    );
    println!("closed after {:?}", started.elapsed());
    wait_until("counted", || b.stats().closed(CloseReason::Oversized) >= 1).await;
    call(
        ip(0, 91),
        d.addr("B"),
        &hello("A", Role::Parent, None),
        &key("A"),
        "B",
    )
    .await
    .expect("a real handshake");
}

#[tokio::test]
async fn a_peer_parent_may_not_describe_a_site_that_is_not_its_child() {
    // P2 is neither c1's parent nor a backup of P1: it may not relay c1, nor describe P1.
    let mut d = Deploy::new(vec![
        SiteSpec::parent("P1", ip(0, 71)),
        SiteSpec::parent("P2", ip(0, 72)),
        SiteSpec::child("c1", ip(0, 73), "P1"),
        SiteSpec::child("c2", ip(0, 74), "P2"),
    ]);
    let p1 = d.start("P1", |_| {});
    // P2 proper (its own key), played by hand: it answers P1's call.
    let (mut s, _) = timeout(WAIT, d.take_listener("P2").accept())
        .await
        .unwrap()
        .unwrap();
    let est = session::handshake_acceptor(
        &mut s,
        Identity {
            hello: &hello("P2", Role::Parent, None),
            key: &key("P2"),
        },
        frame::DEFAULT_MAX_PAYLOAD,
        WAIT,
        |_| Ok(key("P1").public()),
    )
    .await
    .expect("P2 is P2");
    let mut keys = est.keys;
    let relayed = |site: &str, parent: &str| SiteStatus {
        site: site.into(),
        role: Role::Child,
        parent: Some(parent.into()),
        up: true,
    };
    let said = [
        // Not its child.
        Message::SiteStatus(relayed("c1", "P2")),
        Message::ServiceStates(ServiceStates {
            site: "c1".into(),
            services: vec![service("c1-web", true)],
        }),
        // Us.
        Message::ServiceStates(ServiceStates {
            site: "P1".into(),
            services: vec![service("p1-web", false)],
        }),
        // Its own child: taken.
        Message::SiteStatus(relayed("c2", "P2")),
        Message::ServiceStates(ServiceStates {
            site: "c2".into(),
            services: vec![service("c2-web", true)],
        }),
    ];
    for m in &said {
        let bytes = session::seal(2, m, frame::DEFAULT_MAX_PAYLOAD, &mut keys.send).unwrap();
        s.write_all(&bytes).await.unwrap();
    }
    wait_view(&p1, "c2 relayed by its parent", |v| {
        v.service_up("c2", "c2-web", None)
    })
    .await;
    let v = p1.view();
    assert_eq!(p1.stats().refused_statements, 3, "{:?}", p1.stats());
    assert!(!v.service_up("c1", "c1-web", None) && !v.holders.contains_key("c1"));
}

#[tokio::test]
async fn a_mep_1_hello_is_refused_with_a_reason_it_can_read() {
    let mut d = Deploy::new(vec![
        SiteSpec::parent("A", ip(0, 81)),
        SiteSpec::parent("B", ip(0, 82)),
    ]);
    let b = d.start("B", |_| {});
    let mut s = connect_from(ip(0, 81), d.addr("B")).await.unwrap();
    // A MEP 1 Hello: header version 0 (its payload is never read).
    s.write_all(&[b'M', b'P', 0, 1, 0, 0, 0, 2, 1, 1])
        .await
        .unwrap();
    let (version, m, _) = session::read_frame(&mut s, frame::DEFAULT_MAX_PAYLOAD)
        .await
        .unwrap();
    assert_eq!(version, 0, "a Reject any build reads");
    let Message::Reject { code, detail } = m else {
        panic!("{m:?}")
    };
    assert_eq!(code, frame::RejectCode::NoCommonVersion);
    assert!(
        detail.contains("MEP 1") && detail.contains("upgrade"),
        "{detail}"
    );
    wait_until("counted", || {
        b.stats().closed(CloseReason::NoCommonVersion) >= 1
    })
    .await;
}
