//! MEP over real TCP on loopback: several nodes in one process, each site on its own
//! 127.0.0.x address (port 0), every session that may exist going through a small proxy the test
//! can cut (connections closed, new ones refused), stall (nothing forwarded: a silent peer) and
//! restore ([`gslb_tests::TcpProxy`], which the multi-gslbd test uses too). Also raw peers speaking the protocol by hand: a wrong secret, an impostor, garbage,
//! oversized frames, a peer that never reads.
//!
//! `handshake`, `tls`, `liveness`, `tree` (parent and child), `scenarios` (the spec's, also
//! under a flood); this module holds the lab, the raw peers and the flood.
//!
//! Timers are tens to hundreds of milliseconds; every wait is bounded by [`WAIT`], which only a
//! broken node reaches.

use super::{WAIT, wait_until, wait_view};

mod handshake;
mod liveness;
mod scenarios;
mod tls;
mod tree;

use std::{
    collections::{BTreeMap, HashMap},
    net::{IpAddr, Ipv4Addr, SocketAddr},
    time::Duration,
};

use gslb_tests::TcpProxy;
use gslb_user::health::state::{Bandwidth, ServiceState};
use gslb_user::mep::{
    MepConfig, MepNode, MepView, Role, RttProtocol, RttRow, ServiceReport, SiteKey, SiteSpec,
    SiteTree,
    auth::SessionKeys,
    frame::{self},
    session::{self, Identity, LocalHello},
};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::oneshot,
    task::JoinHandle,
    time::timeout,
};

/// Each site's own key, derived from its name (every configuration of a test agrees).
fn key(site: &str) -> SiteKey {
    let seed = ring::digest::digest(&ring::digest::SHA256, format!("mep test {site}").as_bytes());
    SiteKey::from_seed(seed.as_ref().try_into().unwrap())
}

fn ip(i: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, i))
}

/// [`super::fast_timers`], and connections and writes that give up within a second.
fn fast(c: MepConfig) -> MepConfig {
    let mut c = super::fast_timers(c);
    c.connect_timeout = Duration::from_secs(1);
    c.write_timeout = Duration::from_millis(500);
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

/// A view whose current parent is `p`.
fn parent_is(p: &'static str) -> impl Fn(&MepView) -> bool {
    move |v| v.current_parent.as_deref() == Some(p)
}

// ---- Raw peers speaking the protocol by hand ----

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
