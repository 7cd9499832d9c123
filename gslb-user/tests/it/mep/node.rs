//! MEP over real TCP on loopback: several nodes in one process, each site on its own
//! 127.0.0.x address (port 0), every session that may exist going through a small proxy the test
//! can cut (connections closed, new ones refused), stall (nothing forwarded: a silent peer) and
//! restore ([`gslb_tests::TcpProxy`], which the multi-gslbd test uses too). Also raw peers speaking the protocol by hand: a wrong secret, an impostor, garbage,
//! oversized frames, a peer that never reads.
//!
//! Timers are tens to hundreds of milliseconds; every wait is bounded by [`WAIT`], which only a
//! broken node reaches.

use std::{
    collections::{BTreeMap, HashMap},
    net::{IpAddr, Ipv4Addr, SocketAddr},
    sync::Arc,
    time::{Duration, Instant},
};

use gslb_tests::{ProxyMode, TcpProxy};
use gslb_user::health::state::{Bandwidth, ServiceState};
use gslb_user::mep::{
    CloseReason, LocalState, MepConfig, MepNode, MepTls, MepView, Role, RttProtocol, RttRow,
    ServiceReport, SiteKey, SiteSpec, SiteStatus, SiteTree, TopologyTiming,
    auth::{Opener, SessionKeys},
    frame::{self, Message, ServiceStates},
    session::{self, Identity, LocalHello},
};
use gslb_user::persist::PersistEntry;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::oneshot,
    task::JoinHandle,
    time::{sleep, timeout},
};
use tokio_rustls::rustls::{
    self,
    pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer},
};

const WAIT: Duration = Duration::from_secs(10);

/// Each site's own key, derived from its name (every configuration of a test agrees).
fn key(site: &str) -> SiteKey {
    let seed = ring::digest::digest(&ring::digest::SHA256, format!("mep test {site}").as_bytes());
    SiteKey::from_seed(seed.as_ref().try_into().unwrap())
}

fn ip(i: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, i))
}

fn fast(mut c: MepConfig) -> MepConfig {
    c.heartbeat = Duration::from_millis(50);
    c.dead_after = Duration::from_millis(400);
    c.handshake_timeout = Duration::from_secs(1);
    c.connect_timeout = Duration::from_secs(1);
    c.write_timeout = Duration::from_millis(500);
    c.reconnect_min = Duration::from_millis(20);
    c.reconnect_max = Duration::from_millis(200);
    c.view_interval = Duration::from_millis(20);
    c.timing = TopologyTiming {
        adopt_after: Duration::from_millis(400),
        accept_after: Duration::from_millis(200),
        startup_grace: Duration::from_secs(1),
    };
    c
}

// ---- The proxy: gslb_tests::TcpProxy (cut, stall, restore) ----

fn proxy_to(target: SocketAddr) -> TcpProxy {
    TcpProxy::start(SocketAddr::from(([127, 0, 0, 1], 0)), target)
}

// ---- The lab ----

struct Running {
    node: MepNode,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

type Tweak = Box<dyn Fn(&mut MepConfig)>;

struct Lab {
    specs: Vec<SiteSpec>,
    full: SiteTree,
    listen: HashMap<String, SocketAddr>,
    bound: HashMap<String, std::net::TcpListener>,
    proxies: BTreeMap<(String, String), TcpProxy>,
    running: HashMap<String, Running>,
    /// Per-site changes to the configuration (keys, versions, …).
    tweaks: HashMap<String, Tweak>,
    flood: Option<Flood>,
}

fn pair(a: &str, b: &str) -> (String, String) {
    if a < b {
        (a.into(), b.into())
    } else {
        (b.into(), a.into())
    }
}

impl Lab {
    /// Sites given with their 127.0.0.x address (ports are picked here); a proxy on every
    /// pair that may ever talk (parents among themselves, every parent with every child).
    async fn new(specs: Vec<SiteSpec>) -> Lab {
        let mut listen = HashMap::new();
        let mut bound = HashMap::new();
        let mut with_ports = Vec::new();
        for s in specs {
            // Bound now (its port goes into every configuration), handed to the node on its
            // first start; a restart binds the same address again.
            let l = std::net::TcpListener::bind(SocketAddr::new(s.ip, 0)).unwrap();
            l.set_nonblocking(true).unwrap();
            let addr = l.local_addr().unwrap();
            listen.insert(s.name.clone(), addr);
            bound.insert(s.name.clone(), l);
            let k = s.key.unwrap_or(key(&s.name).public());
            with_ports.push(s.with_port(addr.port()).with_key(k));
        }
        let full = SiteTree::new(with_ports.clone()).unwrap();
        let mut proxies = BTreeMap::new();
        for a in full.sites() {
            for b in full.sites() {
                if a.name >= b.name || (a.role == Role::Child && b.role == Role::Child) {
                    continue;
                }
                // The acceptor: whoever the topology does not make the opener; the child for
                // a parent and a child (adoptions included).
                let acceptor = match full.initiator(&a.name, &b.name) {
                    Some(i) if i == a.name => &b.name,
                    Some(_) => &a.name,
                    None if a.role == Role::Child => &a.name,
                    None => &b.name,
                };
                proxies.insert(pair(&a.name, &b.name), proxy_to(listen[acceptor]));
            }
        }
        Lab {
            specs: with_ports,
            full,
            listen,
            bound,
            proxies,
            running: HashMap::new(),
            tweaks: HashMap::new(),
            flood: None,
        }
    }

    fn config(&self, site: &str) -> MepConfig {
        let me = self.full.site(site).unwrap();
        let mut sites: Vec<SiteSpec> = match me.role {
            Role::Parent => self.specs.clone(),
            // A child's configuration: itself, its parent (whose backup list it learns over
            // MEP) and the parents that may adopt it (their keys prove who they are).
            Role::Child => {
                let mut p = self
                    .full
                    .site(me.parent.as_deref().unwrap())
                    .unwrap()
                    .clone();
                let adopters = p
                    .backups
                    .iter()
                    .map(|b| {
                        let mut b = self.full.site(b).unwrap().clone();
                        b.backups.clear();
                        b
                    })
                    .collect::<Vec<_>>();
                p.backups.clear();
                let mut v = vec![p, me.clone()];
                v.extend(adopters);
                v
            }
        };
        for s in &mut sites {
            if s.name != site {
                s.connect = Some(self.proxies[&pair(site, &s.name)].addr);
            }
        }
        let mut c = fast(MepConfig::new(
            site,
            key(site),
            SiteTree::new(sites).unwrap(),
        ));
        if let Some(t) = self.tweaks.get(site) {
            t(&mut c);
        }
        c
    }

    async fn start(&mut self, site: &str) -> MepNode {
        let listener = match self.bound.remove(site) {
            Some(l) => TcpListener::from_std(l).unwrap(),
            None => TcpListener::bind(self.listen[site]).await.unwrap(),
        };
        let node = MepNode::new();
        let (stop, stop_rx) = oneshot::channel::<()>();
        let config = self.config(site);
        let task = tokio::spawn({
            let node = node.clone();
            async move {
                node.run(listener, config, async {
                    let _ = stop_rx.await;
                })
                .await
                .expect("node runs");
            }
        });
        self.running.insert(
            site.into(),
            Running {
                node: node.clone(),
                stop: Some(stop),
                task,
            },
        );
        node
    }

    async fn start_all(&mut self) {
        for s in self.specs.clone() {
            self.start(&s.name).await;
        }
    }

    /// Stops a site the way a crash would look to its peers (its sockets close).
    async fn kill(&mut self, site: &str) {
        let mut r = self.running.remove(site).unwrap();
        let _ = r.stop.take().unwrap().send(());
        timeout(WAIT, r.task).await.expect("node stops").unwrap();
    }

    fn node(&self, site: &str) -> &MepNode {
        &self.running[site].node
    }

    fn proxy(&self, a: &str, b: &str) -> &TcpProxy {
        &self.proxies[&pair(a, b)]
    }

    async fn wait(&self, site: &str, what: &str, f: impl Fn(&MepView) -> bool) {
        wait_view(self.node(site), &format!("{site}: {what}"), f).await;
    }
}

async fn wait_view(node: &MepNode, what: &str, f: impl Fn(&MepView) -> bool) {
    let mut rx = node.subscribe();
    let r = timeout(WAIT, async {
        loop {
            {
                // Before its first publication a node's view is empty.
                let v = rx.borrow_and_update();
                if !v.site.is_empty() && f(&v) {
                    return;
                }
            }
            assert!(rx.changed().await.is_ok(), "node stopped");
        }
    })
    .await;
    assert!(
        r.is_ok(),
        "timed out waiting for {what}; view: {:#?}",
        node.view()
    );
}

async fn wait_until(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        sleep(Duration::from_millis(10)).await;
    }
}

fn service(name: &str, up: bool, connections: u64) -> ServiceReport {
    ServiceReport {
        name: name.into(),
        state: ServiceState {
            up,
            connections,
            bandwidth: Bandwidth::from_kbps(connections),
        },
    }
}

fn rtt(site: &str, n: u32) -> Vec<RttRow> {
    (0..n)
        .map(|i| RttRow {
            ldns: ipnet::IpNet::new(IpAddr::from((0x0a00_0000u32 + (i << 8)).to_be_bytes()), 24)
                .unwrap(),
            site: site.into(),
            rtt_us: 1000 + i,
            protocol: RttProtocol::Dns,
            age_s: 1,
        })
        .collect()
}

fn two_parents() -> Vec<SiteSpec> {
    vec![SiteSpec::parent("A", ip(1)), SiteSpec::parent("B", ip(2))]
}

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

/// What a parent `site` says about itself in a hand-made handshake.
fn parent_hello(site: &str) -> LocalHello {
    LocalHello {
        site: site.into(),
        role: Role::Parent,
        parent: None,
        versions: vec![2],
        software: "test".into(),
        rtt_tolerance_ms: None,
    }
}

/// Opens a session to `to` as parent `me` (with its key) by hand and returns the stream and the
/// session's frame keys.
async fn raw_link(to: SocketAddr, me: &str, peer: &str) -> (TcpStream, SessionKeys) {
    let mut s = TcpStream::connect(to).await.unwrap();
    let est = session::handshake_initiator(
        &mut s,
        Identity {
            hello: &parent_hello(me),
            key: &key(me),
        },
        peer,
        &key(peer).public(),
        frame::DEFAULT_MAX_PAYLOAD,
        WAIT,
    )
    .await
    .unwrap();
    (s, est.keys)
}

/// `frame` with its MAC tag, as the session's next frame.
fn sealed(keys: &mut SessionKeys, frame: &[u8]) -> Vec<u8> {
    [frame, &keys.send.seal(frame)[..]].concat()
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

// ---- TLS ----

/// TLS settings every site shares: a self-signed certificate for the names A and B, trusted
/// as the only root.
fn tls() -> MepTls {
    let certified = rcgen::generate_simple_self_signed(vec!["A".into(), "B".into()]).unwrap();
    let cert = CertificateDer::from(certified.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let provider = gslb_user::tls::provider();
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    MepTls {
        server: Arc::new(server),
        client: Arc::new(client),
    }
}

#[tokio::test]
async fn tls_links_carry_state_and_refuse_plain_peers() {
    let t = tls();
    let mut lab = Lab::new(two_parents()).await;
    for site in ["A", "B"] {
        let t = t.clone();
        lab.tweaks.insert(
            site.into(),
            Box::new(move |c: &mut MepConfig| c.tls = Some(t.clone())),
        );
    }
    lab.start_all().await;
    lab.wait("A", "TLS link to B", |v| v.session_up("B")).await;
    lab.node("A")
        .publish_local(LocalState {
            services: vec![service("a", true, 1)],
            rtt: rtt("A", 100),
            ..Default::default()
        })
        .unwrap();
    lab.wait("B", "A's state over TLS", |v| {
        v.service_up("A", "a", None) && v.sites["A"].rtt.len() == 100
    })
    .await;

    // A plain MEP caller is refused by a TLS site.
    let mut s = TcpStream::connect(lab.listen["B"]).await.unwrap();
    let me = Identity {
        hello: &parent_hello("A"),
        key: &key("A"),
    };
    assert!(
        session::handshake_initiator(&mut s, me, "B", &key("B").public(), 1 << 20, WAIT)
            .await
            .is_err()
    );
    wait_until("B counts tls", || {
        lab.node("B").stats().closed(CloseReason::Tls) >= 1
    })
    .await;
    assert!(
        lab.node("B").view().session_up("A"),
        "the real link is untouched"
    );

    // A TLS site calling a plain one: no session, a reason on both sides.
    let mut lab = Lab::new(two_parents()).await;
    let t2 = t.clone();
    lab.tweaks.insert(
        "A".into(),
        Box::new(move |c: &mut MepConfig| c.tls = Some(t2.clone())),
    );
    lab.start_all().await;
    wait_until("A counts tls", || {
        lab.node("A").stats().closed(CloseReason::Tls) >= 1
    })
    .await;
    wait_until("B counts malformed", || {
        lab.node("B").stats().closed(CloseReason::Malformed) >= 1
    })
    .await;
    assert!(!lab.node("A").view().session_up("B"));
}

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

/// 1,000 connections that never send a byte, against every site's listener, each reopened a
/// second after the site closes it: from the sites' own addresses (so they pass the first
/// source check and reach the handshake pool) and from addresses that are no site's. The
/// lab's real sessions come through the proxies, from 127.0.0.1. Stops when dropped.
struct Flood(Vec<JoinHandle<()>>);

impl Drop for Flood {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
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

fn parent_is(p: &'static str) -> impl Fn(&MepView) -> bool {
    move |v| v.current_parent.as_deref() == Some(p)
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
