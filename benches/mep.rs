//! `cargo bench -p gslb-user --bench mep`: MEP at scale, simulated in one process on loopback
//! (every site a real `MepNode` with its own 127.0.x.y address, real TCP sessions, default timers:
//! heartbeat 500 ms, dead after 2 s, adopt after 1 s).
//!
//! - **Parent/child**: 32 parents (a full mesh) and 1,024 children (32 per parent); each parent
//!   has two backup parents. Measured: time from a cold start until every parent sees every
//!   site's services; frames and bytes per second over a steady window where every site
//!   republishes its service load every second and every parent a new table of 1,000 LDNS RTT
//!   rows every 5 s; TCP
//!   connections; time from killing a parent until all its children are adopted by its first
//!   backup and every other parent sees them again; time until they are back with the
//!   restarted parent.
//! - **Flat mesh**: N sites, all parents, same load, for N = 8, 16, 32 (32 is the most parents
//!   a deployment may have), to show the N² growth; a flat mesh of 1,056 sites is extrapolated
//!   from the measured cost per session.
//!
//! Targets (issue 7): converge ≤ 5 s, adoption ≤ 3 s. `MEP_BENCH_CHILDREN` lowers the number
//! of children (default 1,024) on small machines; `MEP_BENCH_LOG=info` (an env-filter) prints the
//! nodes' logs.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    time::{Duration, Instant},
};

use gslb_user::health::state::{Bandwidth, ServiceState};
use gslb_user::mep::{
    LocalState, MepConfig, MepNode, MepView, RttProtocol, RttRow, ServiceReport, SiteKey, SiteSpec,
    SiteTree,
};
use tokio::{sync::oneshot, task::JoinHandle};

/// Each site's own key, derived from its name.
fn key(site: &str) -> SiteKey {
    let seed = ring::digest::digest(
        &ring::digest::SHA256,
        format!("mep bench {site}").as_bytes(),
    );
    SiteKey::from_seed(seed.as_ref().try_into().unwrap())
}
const SERVICES: usize = 4;
const RTT_ROWS: u32 = 1000;
const STEADY: Duration = Duration::from_secs(10);
const DEADLINE: Duration = Duration::from_secs(60);

struct Site {
    spec: SiteSpec,
    config: MepConfig,
    node: Option<Running>,
}

struct Running {
    node: MepNode,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

fn addr_of(block: u8, i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(
        127,
        block + (i / 250) as u8,
        0,
        (i % 250) as u8 + 1,
    ))
}

fn services(site: &str, round: u64) -> Vec<ServiceReport> {
    (0..SERVICES)
        .map(|i| ServiceReport {
            name: format!("{site}-svc{i}"),
            state: ServiceState {
                up: true,
                connections: round * 10 + i as u64,
                bandwidth: Bandwidth::from_bps(round * 1_000_000),
            },
        })
        .collect()
}

fn rtt(site: &str, round: u32) -> Vec<RttRow> {
    (0..RTT_ROWS)
        .map(|i| RttRow {
            ldns: ipnet::IpNet::new(IpAddr::from((0x0a00_0000u32 + (i << 8)).to_be_bytes()), 24)
                .unwrap(),
            site: site.into(),
            rtt_us: 1000 + i + if i == 0 { round } else { 0 },
            protocol: RttProtocol::Icmp,
            age_s: 1,
        })
        .collect()
}

fn state(site: &Site, round: u64) -> LocalState {
    let parent = site.spec.role == gslb_user::mep::Role::Parent;
    LocalState {
        services: services(&site.spec.name, round),
        // RTT tables are recomputed every 5 s, the load every second.
        rtt: if parent {
            rtt(&site.spec.name, (round / 5) as u32)
        } else {
            Vec::new()
        },
        persistence: Vec::new(),
    }
}

/// Binds every site's port, builds each one's configuration (a child's lists itself, its
/// parent and the parents that may adopt it, with their keys).
async fn lay_out(specs: Vec<SiteSpec>) -> (Vec<Site>, Vec<std::net::TcpListener>) {
    let mut listeners = Vec::new();
    let mut with_ports = Vec::new();
    for s in specs {
        let l = std::net::TcpListener::bind(SocketAddr::new(s.ip, 0)).expect("bind");
        l.set_nonblocking(true).unwrap();
        let k = key(&s.name).public();
        with_ports.push(s.with_port(l.local_addr().unwrap().port()).with_key(k));
        listeners.push(l);
    }
    let full = SiteTree::new(with_ports.clone()).expect("topology");
    let sites = with_ports
        .iter()
        .map(|s| {
            let topo = match &s.parent {
                None => full.clone(),
                Some(p) => {
                    let mut p = full.site(p).unwrap().clone();
                    let mut sites: Vec<SiteSpec> = p
                        .backups
                        .iter()
                        .map(|b| {
                            let mut b = full.site(b).unwrap().clone();
                            b.backups.clear();
                            b
                        })
                        .collect();
                    p.backups.clear();
                    sites.extend([p, s.clone()]);
                    SiteTree::new(sites).unwrap()
                }
            };
            Site {
                spec: s.clone(),
                config: MepConfig::new(&s.name, key(&s.name), topo),
                node: None,
            }
        })
        .collect();
    (sites, listeners)
}

fn start(site: &mut Site, listener: tokio::net::TcpListener) {
    let node = MepNode::new();
    node.publish_local(state(site, 0)).unwrap();
    let (stop, stop_rx) = oneshot::channel::<()>();
    let config = site.config.clone();
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
    site.node = Some(Running { node, stop, task });
}

async fn stop(site: &mut Site) {
    if let Some(r) = site.node.take() {
        let _ = r.stop.send(());
        let _ = r.task.await;
    }
}

fn view(site: &Site) -> std::sync::Arc<MepView> {
    site.node.as_ref().unwrap().node.view()
}

/// Polls until `done` holds; the time it took, or `None` past the deadline.
async fn until(mut done: impl FnMut() -> bool) -> Option<Duration> {
    let t = Instant::now();
    while !done() {
        if t.elapsed() > DEADLINE {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Some(t.elapsed())
}

/// Every parent sees every other site with its services.
fn converged(sites: &[Site]) -> bool {
    sites
        .iter()
        .filter(|s| s.spec.role == gslb_user::mep::Role::Parent && s.node.is_some())
        .all(|p| {
            let v = view(p);
            sites
                .iter()
                .filter(|s| s.spec.name != p.spec.name)
                .all(|s| {
                    v.sites
                        .get(&s.spec.name)
                        .is_some_and(|r| r.reachable && r.services.len() == SERVICES)
                })
        })
}

#[derive(Default, Clone, Copy)]
struct Totals {
    frames: u64,
    bytes: u64,
    sessions: usize,
}

fn totals(sites: &[Site]) -> Totals {
    let mut t = Totals::default();
    for s in sites {
        if let Some(r) = &s.node {
            let st = r.node.stats();
            t.frames += st.frames_out;
            t.bytes += st.bytes_out;
            t.sessions += r.node.view().sessions.values().filter(|l| l.up).count();
        }
    }
    t.sessions /= 2;
    t
}

/// Every site republishes its load (and a parent its RTT table) every second for `STEADY`;
/// frames and bytes per second over that window, and the CPU cores this process used.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &raw mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

async fn steady(sites: &[Site]) -> (f64, f64, f64) {
    let before = totals(sites);
    let cpu = cpu_seconds();
    let t = Instant::now();
    let mut round = 1;
    while t.elapsed() < STEADY {
        for s in sites {
            if let Some(r) = &s.node {
                r.node.publish_local(state(s, round)).unwrap();
            }
        }
        round += 1;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let after = totals(sites);
    let secs = t.elapsed().as_secs_f64();
    let cores = (cpu_seconds() - cpu) / secs;
    (
        (after.frames - before.frames) as f64 / secs,
        (after.bytes - before.bytes) as f64 / secs,
        cores,
    )
}

fn secs(d: Option<Duration>) -> String {
    d.map_or("did not happen in 60 s".into(), |d| {
        format!("{:.2} s", d.as_secs_f64())
    })
}

async fn parent_child(parents: usize, children: usize) {
    let mut specs = Vec::new();
    let name = |i: usize| format!("P{}", i + 1);
    for i in 0..parents {
        let backups = [name((i + 1) % parents), name((i + 2) % parents)];
        specs.push(SiteSpec::parent(name(i), addr_of(1, i)).with_backups(backups));
    }
    for i in 0..children {
        specs.push(SiteSpec::child(
            format!("c{i}"),
            addr_of(10, i),
            name(i % parents),
        ));
    }
    let (mut sites, listeners) = lay_out(specs).await;
    let t0 = Instant::now();
    for (site, l) in sites.iter_mut().zip(listeners) {
        start(site, tokio::net::TcpListener::from_std(l).unwrap());
    }
    let converge = until(|| converged(&sites)).await.map(|_| t0.elapsed());
    let idle = totals(&sites);
    let (fps, bps, cores) = steady(&sites).await;
    println!("parent/child: {parents} parents, {children} children");
    println!(
        "  cold start → every parent sees every site's services: {}",
        secs(converge)
    );
    println!(
        "  connections: {} (parent mesh {} + one per child {})",
        idle.sessions,
        parents * (parents - 1) / 2,
        children
    );
    println!(
        "  steady (load every 1 s, {RTT_ROWS} RTT rows per parent every 5 s): {fps:.0} frames/s, {:.2} MB/s",
        bps / 1e6
    );
    println!(
        "  per link: {:.1} frames/s, {:.1} kB/s",
        fps / idle.sessions as f64,
        bps / idle.sessions as f64 / 1e3
    );
    println!("  simulation host: {cores:.2} CPU cores busy (all sites of the simulation together)");

    // Kill P1: its children go to P2 (first in its list), and P1's peers see them there.
    let orphans: Vec<String> = sites
        .iter()
        .filter(|s| s.spec.parent.as_deref() == Some("P1"))
        .map(|s| s.spec.name.clone())
        .collect();
    // Let the last round of the steady load drain, then kill P1.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let killed = Instant::now();
    tracing::info!("killing P1");
    stop(&mut sites[0]).await;
    println!("  (P1 stopped in {:?})", killed.elapsed());
    // When each other parent saw P1 go: the spread shows how busy the controllers are.
    let mut seen: Vec<Option<Duration>> = vec![None; parents];
    let detected = until(|| {
        for (i, p) in sites[1..parents].iter().enumerate() {
            if seen[i].is_none() && !view(p).session_up("P1") {
                seen[i] = Some(killed.elapsed());
            }
        }
        seen[..parents - 1].iter().all(Option::is_some)
    })
    .await
    .map(|_| killed.elapsed());
    let mut spread: Vec<Duration> = seen.iter().flatten().copied().collect();
    spread.sort();
    if !spread.is_empty() {
        println!(
            "  P1 seen down by the other parents after: min {:?}, median {:?}, max {:?}",
            spread[0],
            spread[spread.len() / 2],
            spread[spread.len() - 1]
        );
    }
    let children_moved = until(|| {
        sites
            .iter()
            .filter(|s| orphans.contains(&s.spec.name))
            .all(|c| view(c).current_parent.as_deref() == Some("P2"))
    })
    .await
    .map(|_| killed.elapsed());
    let adopted = until(|| {
        sites
            .iter()
            .filter(|s| orphans.contains(&s.spec.name))
            .all(|c| view(c).current_parent.as_deref() == Some("P2"))
            && sites[1..parents].iter().all(|p| {
                let v = view(p);
                orphans
                    .iter()
                    .all(|c| v.sites.get(c).is_some_and(|r| r.reachable))
            })
    })
    .await
    .map(|_| killed.elapsed());
    println!(
        "  P1 killed → seen down by every parent {}, its {} children adopted by P2 {}, and seen there by every \
         parent {} (adopt_after {:?})",
        secs(detected),
        orphans.len(),
        secs(children_moved),
        secs(adopted),
        sites[1].config.timing.adopt_after
    );
    // P1 back: they return.
    let back = Instant::now();
    let l = tokio::net::TcpListener::bind(SocketAddr::new(sites[0].spec.ip, sites[0].spec.port))
        .await
        .unwrap();
    start(&mut sites[0], l);
    let returned = until(|| {
        sites
            .iter()
            .filter(|s| orphans.contains(&s.spec.name))
            .all(|c| view(c).current_parent.as_deref() == Some("P1"))
            && converged(&sites)
    })
    .await
    .map(|_| back.elapsed());
    println!(
        "  P1 restarted → its children back with it, everything converged: {}",
        secs(returned)
    );
    stop_all(&mut sites).await;
}

/// Stops every site at once (one by one, each would wait for its sessions' goodbyes).
async fn stop_all(sites: &mut [Site]) {
    let running: Vec<Running> = sites.iter_mut().filter_map(|s| s.node.take()).collect();
    let tasks: Vec<JoinHandle<()>> = running
        .into_iter()
        .map(|r| {
            let _ = r.stop.send(());
            r.task
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
}

async fn flat(n: usize) -> (usize, f64, f64) {
    let specs = (0..n)
        .map(|i| SiteSpec::parent(format!("s{i}"), addr_of(1, i)))
        .collect();
    let (mut sites, listeners) = lay_out(specs).await;
    let t0 = Instant::now();
    for (site, l) in sites.iter_mut().zip(listeners) {
        start(site, tokio::net::TcpListener::from_std(l).unwrap());
    }
    let converge = until(|| converged(&sites)).await.map(|_| t0.elapsed());
    let idle = totals(&sites);
    let (fps, bps, cores) = steady(&sites).await;
    println!(
        "flat mesh of {n}: converged in {}, {} connections, {fps:.0} frames/s, {:.2} MB/s, {cores:.2} cores",
        secs(converge),
        idle.sessions,
        bps / 1e6
    );
    stop_all(&mut sites).await;
    (idle.sessions, fps, bps)
}

fn main() {
    // Every session is two sockets in this one process.
    // SAFETY: plain getrlimit/setrlimit on this process with a valid struct.
    unsafe {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut l) == 0 {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &raw const l);
        }
    }
    if std::env::var_os("MEP_BENCH_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_env("MEP_BENCH_LOG"))
            .init();
    }
    let children = std::env::var("MEP_BENCH_CHILDREN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        parent_child(32, children).await;
        let mut last = (0, 0.0, 0.0);
        for n in [8, 16, 32] {
            last = flat(n).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        // Extrapolated: the same cost per session over a full mesh of the same number of sites.
        let total = 32 + children;
        let sessions = total * (total - 1) / 2;
        // Per session, a flat mesh carries the same: heartbeats, one site's services and RTT table
        // each way; so the total grows with the number of sessions.
        let (l32, f32_, b32) = last;
        println!(
            "flat mesh of {total} (extrapolated at the cost per link measured with 32): {sessions} connections, \
             {:.0} frames/s, {:.0} MB/s",
            f32_ / l32 as f64 * sessions as f64,
            b32 / l32 as f64 * sessions as f64 / 1e6
        );
    });
}
