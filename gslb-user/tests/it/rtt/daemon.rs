//! gslbd's RTT wiring and control socket, in-process with the responder alone on the loopback
//! (no namespaces, no XDP): the responder records the resolver that queries, the prober
//! measures it, the RTT change republishes the answers (first the fallback's, then the RTT
//! method's); the control socket shows the LDNS table, refuses a bad reload with the reason
//! while answers go on, and a reload that changes the probe settings restarts the prober.

use crate::common;

use std::{
    net::IpAddr,
    path::Path,
    time::{Duration, Instant},
};

use common::{Gslbd, answer_set_becomes, www};
use gslb_tests::TempDir;
use gslb_user::control::{self, ClientError};

const HERE: &str = "198.51.100.1";
const THERE: &str = "198.51.100.2";
const TIMEOUT: Duration = Duration::from_secs(10);

/// This site ("here") probes; "there" is first in the domain's list, so the fallback (global
/// availability) answers it, and the RTT method, with only this site's column, answers here.
fn config(port: u16, interval_ms: u64) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1"]
dns_port = {port}
site = "here"

[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

[[site]]
name = "here"
ip = "192.0.2.1"

[[site]]
name = "there"
ip = "192.0.2.2"

[[service]]
name = "web-there"
ip = "{THERE}"
site = "there"

[[service]]
name = "web-here"
ip = "{HERE}"
site = "here"

[[gslb_domain]]
name = "www.example.com"
services = ["web-there", "web-here"]
method = "rtt"
fallback = "globalavailability"

[rtt]
interval_ms = {interval_ms}
timeout_ms = 300
# The resolver is this host's loopback, which is refused unless allowed.
allow = ["127.0.0.0/8"]
"#
    )
}

async fn ctl(socket: &Path, request: &str) -> Result<String, ClientError> {
    control::request(socket, request, TIMEOUT).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_the_resolvers_that_query_and_answers_by_rtt_with_a_control_socket() {
    let dir = TempDir::new("rtt-daemon");
    let path = dir.0.join("gslb.toml");
    let socket = dir.0.join("gslbd.sock");
    let (port, dns) = common::bound_dns();
    std::fs::write(&path, config(port, 300)).unwrap();

    // Its SIGHUP queue is unused here: the reloads go through the control socket.
    let gslbd = Gslbd::start_bound(&path, dns, Some(socket.clone()), TIMEOUT).await;

    // Nothing measured before the first query: the fallback answers it. The query makes
    // 127.0.0.1 an LDNS entry; once probed, the RTT method answers.
    assert_eq!(ctl(&socket, "ldns").await.unwrap(), "no LDNS entries\n");
    assert_eq!(www(port).await, [THERE.parse::<IpAddr>().unwrap()]);
    answer_set_becomes(port, &[HERE], "after the probe").await;

    let report = ctl(&socket, "ldns").await.unwrap();
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with("here "))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        report.starts_with("ldns 127.0.0.1  address 127.0.0.1"),
        "{report}"
    );
    assert!(line.ends_with("(local)"), "{report}");
    assert!(
        ["icmp", "dns_dot", "tcp"].iter().any(|k| line.contains(k)),
        "a probe protocol: {report}"
    );
    let stats = ctl(&socket, "stats").await.unwrap();
    for want in ["rtt_probing 1\n", "ldns_entries 1\n", "rtt_rows 1\n"] {
        assert!(stats.contains(want), "{want:?} in\n{stats}");
    }
    match ctl(&socket, "bogus").await {
        Err(ClientError::Refused(reason)) => {
            assert!(reason.contains("unknown request \"bogus\""), "{reason}");
        }
        other => panic!("{other:?}"),
    }

    // A bad configuration is refused with its position; the running one keeps answering.
    let bad = config(port, 300).replace("interval_ms = 300", "interval_ms = 0");
    std::fs::write(&path, &bad).unwrap();
    let line = bad.lines().position(|l| l == "interval_ms = 0").unwrap() + 1;
    match ctl(&socket, "reload").await {
        Err(ClientError::Refused(reason)) => {
            let want = format!(
                "{}:{line}:15: rtt: interval_ms 0 out of range",
                path.display()
            );
            assert!(
                reason.contains("reload refused") && reason.contains(&want),
                "{reason}\nwant {want}"
            );
        }
        other => panic!("a bad reload: {other:?}"),
    }
    assert_eq!(www(port).await, [HERE.parse::<IpAddr>().unwrap()]);

    // New probe settings restart the prober, which counts its rounds from zero: let the old
    // one count well past what a new one does in the moment after the reload.
    let deadline = Instant::now() + Duration::from_secs(20);
    let rounds_before = loop {
        let rounds = stats_value(&ctl(&socket, "stats").await.unwrap(), "probe_rounds");
        if rounds >= 8 {
            break rounds;
        }
        assert!(
            Instant::now() < deadline,
            "the prober stopped at {rounds} rounds"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    std::fs::write(&path, config(port, 400)).unwrap();
    assert_eq!(
        ctl(&socket, "reload").await.unwrap(),
        "configuration reloaded\n"
    );
    let rounds_after = stats_value(&ctl(&socket, "stats").await.unwrap(), "probe_rounds");
    assert!(
        rounds_after < rounds_before,
        "not restarted: {rounds_after} rounds, {rounds_before} before"
    );
    // The table came over (the answer holds, no fallback in between) ...
    let report = ctl(&socket, "ldns").await.unwrap();
    assert!(report.contains("(local)"), "{report}");
    // ... and so did the resolver: the new prober probes it without a new query.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stats = ctl(&socket, "stats").await.unwrap();
        if stats_value(&stats, "probe_samples") >= 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new prober measured nothing:\n{stats}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        www(port).await,
        [HERE.parse::<IpAddr>().unwrap()],
        "after the restart"
    );

    gslbd.stop().await;
    assert!(!socket.exists(), "the control socket is removed on exit");
}

fn stats_value(stats: &str, name: &str) -> u64 {
    stats
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} in\n{stats}"))
}
