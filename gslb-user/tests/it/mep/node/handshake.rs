//! Two sites' handshake and state exchange, large tables, wrong keys, versions, and raw
//! peers sending bad frames.

use gslb_user::mep::{
    CloseReason, LocalState, MepConfig, SiteKey, SiteSpec, SiteTree,
    frame::{self, Message},
    session::{self, Identity},
};
use gslb_user::persist::PersistEntry;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    time::timeout,
};

use super::{
    Lab, WAIT, ip, key, pair, parent_hello, proxy_to, raw_link, rtt, sealed, service, two_parents,
    wait_until,
};

// ---- Handshake, versions, state ----

#[tokio::test]
async fn two_sites_handshake_and_exchange_state() {
    let mut lab = Lab::new(two_parents()).await;
    lab.start_all().await;
    lab.wait("A", "link to B", |v| v.session_up("B")).await;
    lab.wait("B", "link to A", |v| v.session_up("A")).await;
    let a = lab.node("A").view();
    assert_eq!(a.sessions["B"].version, Some(2));
    assert!(a.sessions["B"].initiated, "A has the lower IP");
    assert!(!lab.node("B").view().sessions["A"].initiated);
    assert!(a.answers_dns);

    let persistence = vec![PersistEntry {
        client: "198.51.100.0/24".parse().unwrap(),
        domain: "www.example.com".into(),
        service: "a-web".into(),
        ttl_s: 300,
    }];
    lab.node("A")
        .publish_local(LocalState {
            services: vec![service("a-web", true, 10), service("a-db", false, 0)],
            rtt: rtt("A", 3000), // several frames' worth at a small cap? no: one frame; see below
            persistence: persistence.clone(),
        })
        .unwrap();
    lab.node("B")
        .publish_local(LocalState {
            services: vec![service("b-web", true, 3)],
            ..Default::default()
        })
        .unwrap();
    lab.wait("B", "A's state", |v| {
        let a = &v.sites["A"];
        a.reachable && a.services.len() == 2 && a.rtt.len() == 3000 && a.persistence.len() == 1
    })
    .await;
    let b = lab.node("B").view();
    let a_site = &b.sites["A"];
    assert_eq!(a_site.services[0], service("a-web", true, 10));
    assert_eq!(*a_site.persistence, persistence);
    assert_eq!(*a_site.rtt, rtt("A", 3000));
    assert!(b.service_up("A", "a-web", None));
    assert!(!b.service_up("A", "a-db", None));
    assert!(
        b.service_up("A", "a-db", Some(true)),
        "a local monitor decides"
    );
    assert_eq!(a_site.backups.as_deref(), Some(&[][..]));
    lab.wait("A", "B's services", |v| v.sites["B"].services.len() == 1)
        .await;

    // An update replaces the previous state.
    lab.node("A")
        .publish_local(LocalState {
            services: vec![service("a-web", false, 0)],
            ..Default::default()
        })
        .unwrap();
    lab.wait("B", "A's update", |v| {
        v.sites["A"].services.len() == 1 && v.sites["A"].rtt.is_empty()
    })
    .await;
    assert!(!lab.node("B").view().service_up("A", "a-web", None));
    let stats = lab.node("A").stats();
    assert!(stats.handshakes >= 1 && stats.frames_out > 0 && stats.bytes_in > 0);
    assert_eq!(stats.closed(CloseReason::BadAuth), 0);
}

#[tokio::test]
async fn large_tables_travel_in_chunks_under_the_cap() {
    let mut lab = Lab::new(two_parents()).await;
    for site in ["A", "B"] {
        lab.tweaks.insert(
            site.into(),
            Box::new(|c: &mut MepConfig| c.max_payload = 4096),
        );
    }
    lab.start_all().await;
    lab.node("A")
        .publish_local(LocalState {
            rtt: rtt("A", 5000),
            ..Default::default()
        })
        .unwrap();
    lab.wait("B", "5000 RTT rows", |v| {
        v.sites.get("A").is_some_and(|a| a.rtt.len() == 5000)
    })
    .await;
    assert_eq!(*lab.node("B").view().sites["A"].rtt, rtt("A", 5000));
    assert_eq!(lab.node("B").stats().closed(CloseReason::Oversized), 0);
}

/// `site` signs with a key that is not the one the other sites have for it (its own entry
/// says nothing, so that the node starts).
fn wrong_key(c: &mut MepConfig, site: &str) {
    c.key = SiteKey::from_seed(&[9; 32]);
    let sites = c
        .topology
        .sites()
        .iter()
        .cloned()
        .map(|mut s| {
            if s.name == site {
                s.key = None;
            }
            s
        })
        .collect();
    c.topology = SiteTree::new(sites).unwrap();
}

#[tokio::test]
async fn wrong_key_is_rejected_both_ways() {
    // The opener (A, lower IP) signs with another key than B has for it: B refuses it.
    let mut lab = Lab::new(two_parents()).await;
    lab.tweaks
        .insert("A".into(), Box::new(|c| wrong_key(c, "A")));
    lab.start_all().await;
    wait_until("B counts bad_auth", || {
        lab.node("B").stats().closed(CloseReason::BadAuth) >= 2
    })
    .await;
    assert!(lab.node("A").stats().closed(CloseReason::PeerRejected) >= 1);
    assert!(!lab.node("A").view().session_up("B") && !lab.node("B").view().session_up("A"));
    assert!(
        lab.node("A").view().sessions["B"]
            .last_error
            .as_deref()
            .unwrap()
            .contains("BadAuth")
    );
    // Its kind, typed (the metric's label), is the one the text starts with.
    let session = &lab.node("A").view().sessions["B"];
    let reason = session.last_reason.expect("a typed reason").as_str();
    assert!(
        session.last_error.as_deref().unwrap().starts_with(reason),
        "{reason} vs {:?}",
        session.last_error
    );

    // The acceptor (B) signs with another key: A refuses it, from the other side.
    let mut lab = Lab::new(two_parents()).await;
    lab.tweaks
        .insert("B".into(), Box::new(|c| wrong_key(c, "B")));
    lab.start_all().await;
    wait_until("A counts bad_auth", || {
        lab.node("A").stats().closed(CloseReason::BadAuth) >= 2
    })
    .await;
    assert!(!lab.node("A").view().session_up("B"));

    // An impostor acceptor that does not have B's key runs the handshake with its own: the
    // opener refuses it (mutual authentication), never sending state.
    let mut lab = Lab::new(two_parents()).await;
    let impostor = TcpListener::bind((ip(2), 0)).await.unwrap();
    lab.proxies
        .insert(pair("A", "B"), proxy_to(impostor.local_addr().unwrap()));
    let a = lab.start("A").await;
    let (mut s, _) = timeout(WAIT, impostor.accept()).await.unwrap().unwrap();
    let fake = SiteKey::from_seed(&[9; 32]);
    let mut est = session::handshake_acceptor(
        &mut s,
        Identity {
            hello: &parent_hello("B"),
            key: &fake,
        },
        frame::DEFAULT_MAX_PAYLOAD,
        WAIT,
        |_| Ok(key("A").public()),
    )
    .await
    .expect("A proves itself first");
    let (_, last, _) = session::read_sealed(&mut s, frame::DEFAULT_MAX_PAYLOAD, &mut est.keys.recv)
        .await
        .unwrap();
    assert!(
        matches!(
            last,
            Message::Reject {
                code: frame::RejectCode::BadAuth,
                ..
            }
        ),
        "{last:?}"
    );
    wait_until("A counts bad_auth", || {
        a.stats().closed(CloseReason::BadAuth) >= 1
    })
    .await;
    assert!(!a.view().session_up("B"));
}

#[tokio::test]
async fn versions_are_negotiated() {
    // (A's versions, B's versions, the version used or None for no session)
    let cases: [(&[u8], &[u8], Option<u8>); 4] = [
        (&[1, 2], &[1], Some(1)),
        (&[1, 2], &[1, 2, 3], Some(2)),
        (&[3, 1], &[1, 3], Some(3)),
        (&[2], &[1], None),
    ];
    for (va, vb, want) in cases {
        let mut lab = Lab::new(two_parents()).await;
        let (va, vb) = (va.to_vec(), vb.to_vec());
        lab.tweaks.insert(
            "A".into(),
            Box::new(move |c: &mut MepConfig| c.versions = va.clone()),
        );
        lab.tweaks.insert(
            "B".into(),
            Box::new(move |c: &mut MepConfig| c.versions = vb.clone()),
        );
        lab.start_all().await;
        match want {
            Some(v) => {
                lab.wait("A", "link at the common version", |view| {
                    view.sessions.get("B").and_then(|l| l.version) == Some(v)
                })
                .await;
                lab.wait("B", "link at the common version", |view| {
                    view.sessions.get("A").and_then(|l| l.version) == Some(v)
                })
                .await;
                // And it carries state at that version.
                lab.node("A")
                    .publish_local(LocalState {
                        services: vec![service("x", true, 1)],
                        ..Default::default()
                    })
                    .unwrap();
                lab.wait("B", "state", |view| view.sites["A"].services.len() == 1)
                    .await;
            }
            None => {
                wait_until("B counts no_common_version", || {
                    lab.node("B").stats().closed(CloseReason::NoCommonVersion) >= 2
                })
                .await;
                assert!(lab.node("A").stats().closed(CloseReason::PeerRejected) >= 1);
                assert!(!lab.node("A").view().session_up("B"));
            }
        }
    }
}

#[tokio::test]
async fn bad_frames_close_the_link_with_a_reason_and_the_node_goes_on() {
    // "F" (lowest IP) is a parent that B expects to call it; the test plays F by hand.
    let mut lab = Lab::new(vec![
        SiteSpec::parent("F", ip(1)),
        SiteSpec::parent("B", ip(2)),
        SiteSpec::parent("C", ip(3)),
    ])
    .await;
    lab.start("B").await;
    lab.start("C").await;
    lab.wait("B", "link to C", |v| v.session_up("C")).await;
    let b_addr = lab.listen["B"];
    let b = lab.node("B").clone();
    let count = |r: CloseReason| b.stats().closed(r);

    // Garbage instead of a Hello.
    let mut s = TcpStream::connect(b_addr).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    wait_until("malformed", || count(CloseReason::Malformed) >= 1).await;

    // After the handshake: an oversized frame (only its header is ever read).
    let (mut s, _) = raw_link(b_addr, "F", "B").await;
    s.write_all(&[b'M', b'P', 2, 5, 0x7f, 0xff, 0xff, 0xff])
        .await
        .unwrap();
    wait_until("oversized", || count(CloseReason::Oversized) >= 1).await;
    let mut rest = Vec::new();
    let _ = timeout(WAIT, s.read_to_end(&mut rest))
        .await
        .expect("B closes the link");

    // An unknown frame type.
    let (mut s, mut k) = raw_link(b_addr, "F", "B").await;
    s.write_all(&sealed(&mut k, &[b'M', b'P', 2, 99, 0, 0, 0, 0]))
        .await
        .unwrap();
    wait_until("unknown type", || count(CloseReason::UnknownType) >= 1).await;

    // A malformed payload (a SiteStatus whose bool is 7), sealed: it is decoded.
    let (mut s, mut k) = raw_link(b_addr, "F", "B").await;
    let bad = [b'M', b'P', 2, 5, 0, 0, 0, 6, 0, 1, b'F', 1, 0, 7];
    s.write_all(&sealed(&mut k, &bad)).await.unwrap();
    wait_until("malformed payload", || count(CloseReason::Malformed) >= 2).await;

    // A frame cut short by the end of the stream.
    let (mut s, _) = raw_link(b_addr, "F", "B").await;
    s.write_all(&[b'M', b'P', 2, 4, 0, 0, 0, 8, 1, 2])
        .await
        .unwrap();
    s.shutdown().await.unwrap();
    wait_until("truncated", || count(CloseReason::Truncated) >= 1).await;

    // A frame of another version than negotiated.
    let (mut s, mut k) = raw_link(b_addr, "F", "B").await;
    let seven = session::seal(7, &Message::Heartbeat { seq: 1 }, 64, &mut k.send).unwrap();
    s.write_all(&seven).await.unwrap();
    wait_until("wrong version", || count(CloseReason::Malformed) >= 3).await;

    // A site B does not know, and a site that should be called by B rather than call it.
    let handshake = async |site: &str| {
        let mut s = TcpStream::connect(b_addr).await.unwrap();
        let me = Identity {
            hello: &parent_hello(site),
            key: &key(site),
        };
        session::handshake_initiator(&mut s, me, "B", &key("B").public(), 1 << 20, WAIT)
            .await
            .unwrap_err()
    };
    let e = handshake("X").await;
    assert_eq!(e.reason(), CloseReason::PeerRejected, "{e}");
    assert!(count(CloseReason::UnknownSite) >= 1);
    let e = handshake("C").await;
    assert!(e.to_string().contains("initiates"), "{e}");
    assert!(count(CloseReason::NotAllowed) >= 1);

    // Through all of it B's session to C stayed up, and B still serves a good F.
    assert!(b.view().session_up("C"));
    let (mut s, mut k) = raw_link(b_addr, "F", "B").await;
    let (_, m, _) = session::read_sealed(&mut s, 1 << 20, &mut k.recv)
        .await
        .unwrap();
    assert!(
        matches!(m, Message::SiteStatus(_) | Message::Heartbeat { .. }),
        "{m:?}"
    );
    lab.wait("B", "F up", |v| v.session_up("F")).await;
}
