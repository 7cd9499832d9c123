//! gslbd's MEP wiring, in-process with the responder alone on loopback (no namespaces, no
//! XDP, no privileges): gslbd runs one site, and the test runs the other as a bare
//! MEP node ([`Peer`]), so that it can publish states and read what gslbd sends.
//!
//! - A parent: remote services are DOWN until their site's session is up, then follow what the
//!   site reports; its own services (by its monitors) and RTT column reach the peer; the peer's
//!   RTT rows reach its RTT table; a reload that changes the MEP settings restarts the node in
//!   place without dropping remote services from the answers; one that changes the listen
//!   address is refused; a peer that goes takes its services out of the answers.
//! - A child: REFUSES GSLB names, answers static data, reports its services to its parent.
//! - A MEP port in use fails the start, naming the address.
//! - The responder's rule itself, without sockets.
//!
//! Every wait is bounded by [`WAIT`].

use crate::common;
use crate::common::FAST_TCP_MONITOR;
use crate::mep::peer::{self as mep_peer, Peer};
use crate::mep_keys;

use std::{
    net::IpAddr,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use common::{Backend, Gslbd, WEB1, WEB2, answer_addrs, answer_set_becomes, ask_loopback, until};
use gslb_tests::TempDir;
use gslb_user::{
    compile::{Inputs, Snapshot},
    config::Config,
    control::{self, Reload},
    daemon::Listeners,
    health::state::{Bandwidth, ServiceState},
    mep::{LocalState, MepConfig, RttProtocol, RttRow, ServiceReport, SiteSpec, TopologyTiming},
    responder::{Responder, Transport},
};
use hickory_proto::{
    op::{Message, Query, ResponseCode},
    rr::{Name, RecordType},
};
use tokio::{net::TcpListener, sync::oneshot};

const WAIT: Duration = Duration::from_secs(15);

/// `config` with topology timers fast enough for the tests' sessions to settle in time.
pub(crate) fn fast_topology(mut config: MepConfig) -> MepConfig {
    config.timing = TopologyTiming {
        adopt_after: Duration::from_millis(400),
        accept_after: Duration::from_millis(200),
        startup_grace: Duration::from_secs(1),
    };
    config
}

// ---- DNS ----

async fn ask(port: u16, name: &'static str, rtype: RecordType) -> Message {
    tokio::task::spawn_blocking(move || ask_loopback(port, name, rtype))
        .await
        .unwrap()
}

fn addrs(m: &Message) -> Vec<IpAddr> {
    let mut v = answer_addrs(m);
    v.sort();
    v
}

/// www's addresses, sorted: the order of an `all` answer is not what these tests check.
async fn www(port: u16) -> Vec<IpAddr> {
    let mut v = common::www(port).await;
    v.sort();
    v
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    let mut v: Vec<IpAddr> = list.iter().map(|a| a.parse().unwrap()).collect();
    v.sort();
    v
}

// ---- The parent ----

/// gslbd is parent p1 at 127.0.0.1; the peer is parent p2 at 127.0.0.2 (p1 has the lower IP,
/// so it opens the session). web1 is p1's, monitored here; web2 is p2's.
pub(crate) fn parent_config(
    dns: u16,
    p1_mep: u16,
    p2_mep: u16,
    backend: u16,
    mep_extra: &str,
    p1_extra: &str,
) -> String {
    let parents = common::two_parents(p1_mep, p2_mep, backend, p1_extra);
    mep_keys::keyed(
        &format!(
            r#"
[server]
listen = ["127.0.0.1"]
dns_port = {dns}
site = "p1"

[mep]
heartbeat_ms = 100
dead_after_ms = 500
{mep_extra}

[rtt]
enabled = true
interval_ms = 300
timeout_ms = 300
# The resolver is this host's loopback, which is refused unless allowed.
allow = ["127.0.0.0/8"]

[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

{parents}
[[gslb_domain]]
name = "www.example.com"
answer = "all"
services = ["web1", "web2"]
"#
        ),
        "p1",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_exchanges_state_with_its_peer_and_reloads_mep_in_place() {
    // Its gslbd runs `mep-persist-sync`, which supervise's MEP tests kill by name.
    let _shared = common::running_same_named_tasks().await;
    let dir = TempDir::new("mep-parent");
    let path = dir.0.join("gslb.toml");
    let socket = dir.0.join("gslbd.sock");
    let (dns, mut sockets) = common::bound_dns();
    let (p1_mep, mep_listener) = common::bound_mep("127.0.0.1");
    sockets.mep = Some(mep_listener);
    let first_backend = Backend::bind("127.0.0.1").await;
    let (backend_port, backend_addr) = (first_backend.port(), first_backend.addr);
    let peer_listener = TcpListener::bind("127.0.0.2:0").await.unwrap();
    let p2_mep = peer_listener.local_addr().unwrap().port();
    let config = |mep_extra: &str, p1_extra: &str| {
        parent_config(dns, p1_mep, p2_mep, backend_port, mep_extra, p1_extra)
    };
    std::fs::write(&path, config("", "")).unwrap();
    let mut backend = Some(first_backend);
    let gslbd = Gslbd::start_bound(&path, sockets, Some(socket.clone()), WAIT).await;

    // p2 is not running: its service is DOWN (no MEP path to it), p1's own is UP.
    answer_set_becomes(dns, &[WEB1], "p2 unreachable").await;

    let sites = vec![
        SiteSpec::parent("p1", "127.0.0.1".parse().unwrap()).with_port(p1_mep),
        SiteSpec::parent("p2", "127.0.0.2".parse().unwrap()).with_port(p2_mep),
    ];
    let peer = Peer::start(peer_listener, fast_topology(mep_peer::config("p2", sites))).await;
    let web2 = |up| ServiceReport {
        name: "web2".into(),
        state: ServiceState {
            up,
            connections: 3,
            bandwidth: Bandwidth::from_bps(8000),
        },
    };
    let peer_rtt = vec![RttRow {
        ldns: "203.0.113.9/32".parse().unwrap(),
        site: "p2".into(),
        rtt_us: 1500,
        protocol: RttProtocol::Icmp,
        age_s: 0,
    }];
    let publish = |up| LocalState {
        services: vec![web2(up)],
        rtt: peer_rtt.clone(),
        persistence: vec![],
    };
    peer.node.publish_local(publish(true)).unwrap();
    answer_set_becomes(dns, &[WEB1, WEB2], "p2's web2 UP over MEP").await;

    // Out: p1's services as its monitor sees them.
    peer.wait("p1's web1 UP", |v| v.service_up("p1", "web1", None))
        .await;
    // In: p2's RTT column in p1's RTT table.
    until("p2's RTT row in p1's table", async || {
        let report = control::request(&socket, "ldns", WAIT).await.unwrap();
        report.contains("ldns 203.0.113.9  (known from peers only)") && report.contains("  p2 ")
    })
    .await;
    // Out: p1's own RTT column (it probes 127.0.0.1, the resolver of the queries above).
    peer.wait("p1's RTT row for 127.0.0.1", |v| {
        v.sites["p1"]
            .rtt
            .iter()
            .any(|r| r.site == "p1" && r.ldns == "127.0.0.1/32".parse().unwrap())
    })
    .await;

    // p1's monitor takes web1 DOWN: out of the answers, and reported to p2.
    backend.take();
    answer_set_becomes(dns, &[WEB2], "web1's backend gone").await;
    peer.wait("p1's web1 DOWN", |v| {
        v.sites["p1"].reachable && !v.service_up("p1", "web1", None)
    })
    .await;
    backend = Some(Backend::start(backend_addr).await);
    answer_set_becomes(dns, &[WEB1, WEB2], "web1's backend back").await;

    // p2 reports web2 DOWN, then UP.
    peer.node.publish_local(publish(false)).unwrap();
    answer_set_becomes(dns, &[WEB1], "p2 reports web2 DOWN").await;
    peer.node.publish_local(publish(true)).unwrap();
    answer_set_becomes(dns, &[WEB1, WEB2], "p2 reports web2 UP").await;

    // A new backup list restarts p1's node in place: p2 gets the list, and web2 never leaves
    // the answers while the session reconnects (the last view is kept until it is back).
    std::fs::write(&path, config("", "backup_parents = [\"p2\"]")).unwrap();
    let reloaded = tokio::spawn({
        let reloads = gslbd.reloads.clone();
        async move {
            let (reply, outcome) = oneshot::channel();
            reloads.send(Reload { reply: Some(reply) }).await.unwrap();
            outcome
                .await
                .unwrap()
                .map_err(|refused| refused.to_string())
        }
    });
    let watch_until = Instant::now() + Duration::from_secs(2);
    let mut asked = 0;
    while Instant::now() < watch_until {
        let got = www(dns).await;
        assert_eq!(
            got,
            ips(&[WEB1, WEB2]),
            "answers during the MEP restart (query {asked})"
        );
        asked += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(reloaded.await.unwrap(), Ok(()));
    peer.wait("p1's new backup list", |v| {
        v.sites["p1"].backups.as_deref() == Some(&["p2".to_owned()][..]) && v.session_up("p1")
    })
    .await;
    assert!(
        peer.node.stats().closes.values().sum::<u64>() >= 1,
        "the link was restarted: {:?}",
        peer.node.stats()
    );

    // A new listen address needs a restart: refused, the running MEP stays.
    std::fs::write(
        &path,
        config("listen = \"127.0.0.1:1\"", "backup_parents = [\"p2\"]"),
    )
    .unwrap();
    let refused = gslbd
        .reload()
        .await
        .expect_err("a new MEP listen address is refused");
    assert!(
        refused.contains("mep.listen") && refused.contains("needs a restart"),
        "{refused}"
    );
    assert!(peer.node.view().session_up("p1"));
    assert_eq!(www(dns).await, ips(&[WEB1, WEB2]));

    // p2 goes: its service is DOWN, and its RTT rows leave p1's table.
    peer.stop().await;
    answer_set_becomes(dns, &[WEB1], "p2 gone").await;
    until("p2's RTT row removed", async || {
        !control::request(&socket, "ldns", WAIT)
            .await
            .unwrap()
            .contains("203.0.113.9")
    })
    .await;

    gslbd.stop().await;
    drop(backend);
}

// ---- The child ----

/// gslbd is c1 at 127.0.0.3, child of p1 (the peer, at 127.0.0.1), with one service.
fn child_config(dns: u16, p1_mep: u16, c1_mep: u16, backend: u16) -> String {
    mep_keys::keyed(
        &format!(
            r#"
[server]
listen = ["127.0.0.1"]
dns_port = {dns}
site = "c1"

[mep]
heartbeat_ms = 100
dead_after_ms = 500

[[zone]]
name = "example.com"
ns = ["ns1.example.com"]
soa.rname = "hostmaster.example.com"
  [[zone.record]]
  name = "ns1"
  type = "A"
  value = "192.0.2.53"

[[site]]
name = "p1"
ip = "127.0.0.1"
mep_port = {p1_mep}

[[site]]
name = "c1"
ip = "127.0.0.3"
mep_port = {c1_mep}
role = "child"
parent = "p1"

{FAST_TCP_MONITOR}

[[service]]
name = "web-c1"
ip = "127.0.0.3"
port = {backend}
public_ip = "192.0.2.3"
site = "c1"
monitors = ["tcp"]

[[gslb_domain]]
name = "www.example.com"
services = ["web-c1"]
"#
        ),
        "c1",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_refuses_gslb_names_serves_static_data_and_reports_to_its_parent() {
    // Its gslbd runs `mep-persist-sync`, which supervise's MEP tests kill by name.
    let _shared = common::running_same_named_tasks().await;
    let dir = TempDir::new("mep-child");
    let path = dir.0.join("gslb.toml");
    let (dns, mut sockets) = common::bound_dns();
    let (c1_mep, mep_listener) = common::bound_mep("127.0.0.3");
    sockets.mep = Some(mep_listener);
    let backend = Backend::bind("127.0.0.3").await;
    let peer_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let p1_mep = peer_listener.local_addr().unwrap().port();
    std::fs::write(&path, child_config(dns, p1_mep, c1_mep, backend.port())).unwrap();
    let gslbd = Gslbd::start_bound(&path, sockets, None, WAIT).await;

    // GSLB names: REFUSED, not authoritative, for the GSLB types and ANY; static data as
    // ever, also the other types at a GSLB name (here none: NODATA).
    for rtype in [RecordType::A, RecordType::AAAA, RecordType::ANY] {
        let m = ask(dns, "www.example.com.", rtype).await;
        assert_eq!(m.response_code, ResponseCode::Refused, "{rtype}: {m:?}");
        assert!(!m.authoritative && m.answers.is_empty(), "{m:?}");
    }
    let txt = ask(dns, "www.example.com.", RecordType::TXT).await;
    assert_eq!(txt.response_code, ResponseCode::NoError, "{txt:?}");
    assert!(txt.authoritative && txt.answers.is_empty(), "{txt:?}");
    let ns1 = ask(dns, "ns1.example.com.", RecordType::A).await;
    assert_eq!(
        (ns1.response_code, addrs(&ns1)),
        (ResponseCode::NoError, ips(&["192.0.2.53"]))
    );
    assert!(ns1.authoritative);
    let soa = ask(dns, "example.com.", RecordType::SOA).await;
    assert_eq!(
        (soa.response_code, soa.answers.len()),
        (ResponseCode::NoError, 1)
    );
    assert_eq!(
        ask(dns, "nope.example.com.", RecordType::A)
            .await
            .response_code,
        ResponseCode::NXDomain
    );

    // Its parent opens the session and gets its services' states.
    let sites = vec![
        SiteSpec::parent("p1", "127.0.0.1".parse().unwrap()).with_port(p1_mep),
        SiteSpec::child("c1", "127.0.0.3".parse().unwrap(), "p1").with_port(c1_mep),
    ];
    let peer = Peer::start(peer_listener, fast_topology(mep_peer::config("p1", sites))).await;
    peer.wait("c1's web-c1 UP", |v| v.service_up("c1", "web-c1", None))
        .await;
    drop(backend);
    peer.wait("c1's web-c1 DOWN", |v| {
        v.sites["c1"].reachable && !v.service_up("c1", "web-c1", None)
    })
    .await;
    // Still refused with the parent connected (the role, not the session, decides).
    assert_eq!(
        ask(dns, "www.example.com.", RecordType::A)
            .await
            .response_code,
        ResponseCode::Refused
    );

    peer.stop().await;
    gslbd.stop().await;
}

// ---- Start-up ----

/// Why gslbd on `path` and the sockets `dns` (responder only) failed to start, with every
/// cause; the test fails if it started (`how` says how it must not).
async fn start_failure(path: &Path, dns: Listeners, how: &str) -> String {
    let Err(error) =
        Gslbd::try_start_bound_with(path, Gslbd::responder_only(None), dns, WAIT).await
    else {
        panic!("gslbd started {how}");
    };
    let mut text = error.to_string();
    let mut cause = std::error::Error::source(&error);
    while let Some(c) = cause {
        text += &format!(": {c}");
        cause = c.source();
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mep_port_in_use_fails_the_start() {
    // Its gslbd runs `mep-persist-sync`, which supervise's MEP tests kill by name.
    let _shared = common::running_same_named_tasks().await;
    let dir = TempDir::new("mep-in-use");
    let path = dir.0.join("gslb.toml");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (dns_port, dns) = common::bound_dns();
    std::fs::write(&path, parent_config(dns_port, port, 3011, 9, "", "")).unwrap();
    // gslbd binds the MEP port itself here (no `mep` in the sockets given): taken, it fails
    // before it is ready.
    let text = start_failure(&path, dns, "with its MEP port in use").await;
    assert!(
        text.contains(&format!("listening on 127.0.0.1:{port} (mep)")) && text.contains("in use"),
        "{text}"
    );
}

/// A MEP listener given to gslbd must be the configured one: one on another port fails the
/// start, naming both addresses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mep_listener_not_on_the_configured_address_fails_the_start() {
    // Its gslbd would run `mep-persist-sync`, which supervise's MEP tests kill by name.
    let _shared = common::running_same_named_tasks().await;
    let dir = TempDir::new("mep-not-configured");
    let path = dir.0.join("gslb.toml");
    let (configured, _held) = common::bound_mep("127.0.0.1");
    let (given, listener) = common::bound_mep("127.0.0.1");
    let (dns_port, mut dns) = common::bound_dns();
    dns.mep = Some(listener);
    std::fs::write(&path, parent_config(dns_port, configured, 3011, 9, "", "")).unwrap();
    let text = start_failure(&path, dns, "on a MEP listener it was not configured with").await;
    assert!(
        text.contains(&format!(
            "the MEP listener given (Some(127.0.0.1:{given})) is not the configured one \
             (Some(127.0.0.1:{configured}))"
        )),
        "{text}"
    );
}

// ---- The responder's rule ----

#[test]
fn the_responder_refuses_gslb_names_only_in_a_childs_snapshot() {
    let text = child_config(53, 3011, 3012, 80);
    let config = Config::parse(&text, Path::new("child.toml")).unwrap();
    let responder = Arc::new(Responder::new(&Snapshot::from_config(&config)));
    let rcode = |name: &str, rtype: RecordType| {
        let mut q = Message::query();
        q.metadata.id = 1;
        q.add_query(Query::query(Name::from_ascii(name).unwrap(), rtype));
        let reply = responder.respond(
            &q.to_vec().unwrap(),
            "198.51.100.7".parse().unwrap(),
            Transport::Udp,
        );
        let reply = Message::from_vec(&reply.expect("a reply")).unwrap();
        (reply.response_code, addrs(&reply))
    };
    let www = "www.example.com.";
    assert_eq!(
        rcode(www, RecordType::A),
        (ResponseCode::NoError, ips(&["192.0.2.3"]))
    );
    // A MEP child's snapshot: no GSLB answers, and the names REFUSED.
    let child = Inputs {
        refuse_gslb: true,
        ..Inputs::default()
    };
    responder.replace(&Snapshot::compile(&config, &child));
    for rtype in [RecordType::A, RecordType::AAAA, RecordType::ANY] {
        assert_eq!(
            rcode(www, rtype),
            (ResponseCode::Refused, vec![]),
            "{rtype}"
        );
    }
    // The other types at a GSLB name are the zone's static data (here none: NODATA).
    assert_eq!(rcode(www, RecordType::TXT), (ResponseCode::NoError, vec![]));
    assert_eq!(
        rcode("WWW.Example.COM.", RecordType::A).0,
        ResponseCode::Refused,
        "case-insensitive"
    );
    assert_eq!(
        rcode("ns1.example.com.", RecordType::A),
        (ResponseCode::NoError, ips(&["192.0.2.53"]))
    );
    assert_eq!(
        rcode("sub.www.example.com.", RecordType::A).0,
        ResponseCode::NXDomain,
        "only the GSLB name itself"
    );
    assert_eq!(
        rcode("example.com.", RecordType::SOA).0,
        ResponseCode::NoError
    );
    responder.replace(&Snapshot::from_config(&config));
    assert_eq!(
        rcode(www, RecordType::A),
        (ResponseCode::NoError, ips(&["192.0.2.3"]))
    );
}
