//! `gslbctl show mep` and `gslbctl show rtt` against an in-process gslbd (parent p1, as in
//! [`crate::mep::daemon`]) connected to a bare MEP peer p2 ([`Peer`]): the session's state, protocol
//! version and last error follow the peer's start and stop, and `show rtt` is the RTT table
//! `ldns` prints, with the peer's row.

use crate::common::{self, Backend, Gslbd, WEB1, WEB2, answer_set_becomes, until};
use crate::mep::daemon::{fast_topology, parent_config};
use crate::mep::peer::{self as mep_peer, Peer};
use crate::steering::gslbctl;

use std::time::Duration;

use gslb_tests::TempDir;
use gslb_user::{
    health::state::{Bandwidth, ServiceState},
    mep::{LocalState, RttProtocol, RttRow, ServiceReport, SiteSpec},
};
use tokio::net::TcpListener;

const WAIT: Duration = Duration::from_secs(15);

/// The cells of `peer`'s row in `show mep`'s session table: LINK, VERSION, LAST_ERROR.
fn link_row(table: &str, peer: &str) -> Option<(String, String, String)> {
    let sessions = table.split("\n\n").next()?;
    let line = sessions
        .lines()
        .find(|l| l.split_whitespace().next() == Some(peer))?;
    let mut cells = line.split_whitespace().skip(1);
    let (session, version) = (cells.next()?.to_owned(), cells.next()?.to_owned());
    Some((session, version, cells.collect::<Vec<_>>().join(" ")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_mep_and_rtt_follow_the_peer() {
    let _shared = common::running_same_named_tasks().await;
    let dir = TempDir::new("mep-show");
    let path = dir.0.join("gslb.toml");
    let socket = dir.0.join("gslbd.sock");
    let (dns, mut sockets) = common::bound_dns();
    let (p1_mep, mep_listener) = common::bound_mep("127.0.0.1");
    sockets.mep = Some(mep_listener);
    let backend = Backend::bind("127.0.0.1").await;
    let peer_listener = TcpListener::bind("127.0.0.2:0").await.unwrap();
    let p2_mep = peer_listener.local_addr().unwrap().port();
    std::fs::write(
        &path,
        parent_config(dns, p1_mep, p2_mep, backend.port(), "", ""),
    )
    .unwrap();
    let gslbd = Gslbd::start_bound(&path, sockets, Some(socket.clone()), WAIT).await;
    let show = |what: &'static str| {
        let socket = socket.clone();
        async move { gslbctl(&socket, &["show", what]).await.unwrap() }
    };

    // p2 not running yet: no session up (no row until a first attempt ends), none negotiated.
    answer_set_becomes(dns, &[WEB1], "p2 unreachable").await;
    let table = show("mep").await;
    assert!(
        link_row(&table, "p2").is_none_or(|(l, v, _)| l == "down" && v == "-"),
        "{table}"
    );

    let sites = vec![
        SiteSpec::parent("p1", "127.0.0.1".parse().unwrap()).with_port(p1_mep),
        SiteSpec::parent("p2", "127.0.0.2".parse().unwrap()).with_port(p2_mep),
    ];
    let peer = Peer::start(peer_listener, fast_topology(mep_peer::config("p2", sites))).await;
    peer.node
        .publish_local(LocalState {
            services: vec![ServiceReport {
                name: "web2".into(),
                state: ServiceState {
                    up: true,
                    connections: 0,
                    bandwidth: Bandwidth::from_bps(0),
                },
            }],
            rtt: vec![RttRow {
                ldns: "203.0.113.9/32".parse().unwrap(),
                site: "p2".into(),
                rtt_us: 1500,
                protocol: RttProtocol::Icmp,
                age_s: 0,
            }],
            persistence: vec![],
        })
        .unwrap();
    answer_set_becomes(dns, &[WEB1, WEB2], "p2's web2 UP over MEP").await;

    // Up, with the negotiated version; p2 reachable, connected directly, adopted by nobody.
    until("p2's link up in show mep", async || {
        link_row(&show("mep").await, "p2")
            .is_some_and(|(l, v, _)| l == "up" && v.parse::<u8>().is_ok())
    })
    .await;
    let table = show("mep").await;
    let sites = table.split("\n\n").nth(1).expect("the site table");
    assert!(
        sites
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["p2", "reachable", "direct", "-"]),
        "{table}"
    );

    // `show rtt` is `ldns`'s table: the peer's row in both.
    until("p2's RTT row in show rtt", async || {
        show("rtt")
            .await
            .contains("ldns 203.0.113.9  (known from peers only)")
    })
    .await;
    let (rtt, ldns) = (
        show("rtt").await,
        gslbctl(&socket, &["ldns"]).await.unwrap(),
    );
    let header = |t: &str| t.lines().next().map(str::to_owned);
    assert_eq!(header(&rtt), header(&ldns), "{rtt}\n---\n{ldns}");

    // p2 goes: the session is down, with why.
    peer.stop().await;
    until("p2's link down with its last error", async || {
        link_row(&show("mep").await, "p2")
            .is_some_and(|(l, v, e)| l == "down" && v == "-" && e != "-")
    })
    .await;

    gslbd.stop().await;
    drop(backend);
}
