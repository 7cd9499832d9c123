//! CNAME domains (issue 29) through gslbd's own sockets as dig sees them: the CNAME of the
//! service the method picks, with the target's records when the target is ours, for A, AAAA
//! and TXT over UDP and TCP; a monitor on the address a service's name stands for takes it out
//! of the answers, and it comes back.

use std::net::TcpListener;

use crate::common::{self, FAST_TCP_MONITOR, Gslbd, WAIT, dig_loopback, loopback_zone, until};
use gslb_tests::{TempDir, dig_answers};

/// www.example.com (CNAME, global availability) over "primary" (→ edge.example.com, ours,
/// monitored on the backend `port`) and "cdn" (→ www.cdn.example.net, not ours).
fn config(port: u16, backend: u16) -> String {
    format!(
        r#"{zone}
  [[zone.record]]
  name = "edge"
  type = "A"
  value = "192.0.2.80"
  [[zone.record]]
  name = "edge"
  type = "AAAA"
  value = "2001:db8::80"
  [[zone.record]]
  name = "edge"
  type = "TXT"
  value = "edge node"

{FAST_TCP_MONITOR}

[[site]]
name = "dc"
ip = "192.0.2.1"

[[service]]
name = "primary"
ip = "127.0.0.1"
port = {backend}
site = "dc"
cname = "edge.example.com"
monitors = ["tcp"]

[[service]]
name = "cdn"
ip = "192.0.2.50"
site = "dc"
cname = "www.cdn.example.net"

[[gslb_domain]]
name = "www.example.com"
record_type = "CNAME"
method = "globalavailability"
ttl = 45
services = ["primary", "cdn"]
"#,
        zone = loopback_zone(port)
    )
}

/// dig's answer section for `www.example.com` of `qtype` (over TCP with `tcp`), as
/// "owner TYPE value" lines.
async fn answer(port: u16, qtype: &str, tcp: bool) -> Vec<String> {
    let mut args = vec!["www.example.com", qtype];
    if tcp {
        args.push("+tcp");
    }
    dig_answers(&dig_loopback(port, &args).await)
        .into_iter()
        .map(|(owner, rtype, value)| format!("{owner} {rtype} {value}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dig_follows_the_cname_of_the_service_that_is_up() {
    let dir = TempDir::new("cname-domain");
    let path = dir.0.join("gslb.toml");
    let (port, dns) = common::bound_dns();
    let backend = TcpListener::bind("127.0.0.1:0").unwrap();
    let backend_port = backend.local_addr().unwrap().port();
    std::fs::write(&path, config(port, backend_port)).unwrap();
    let gslbd = Gslbd::start_bound(&path, dns, None, WAIT).await;

    let primary = "www.example.com. CNAME edge.example.com.";
    until("the primary's CNAME", async || {
        answer(port, "A", false).await.first().map(String::as_str) == Some(primary)
    })
    .await;
    for tcp in [false, true] {
        assert_eq!(
            answer(port, "A", tcp).await,
            [primary, "edge.example.com. A 192.0.2.80"],
            "tcp {tcp}"
        );
        assert_eq!(
            answer(port, "AAAA", tcp).await,
            [primary, "edge.example.com. AAAA 2001:db8::80"]
        );
        assert_eq!(
            answer(port, "TXT", tcp).await,
            [primary, "edge.example.com. TXT \"edge node\""]
        );
        assert_eq!(answer(port, "CNAME", tcp).await, [primary]);
    }
    // The TTL is the domain's.
    let out = dig_loopback(port, &["www.example.com", "CNAME"]).await;
    assert!(
        out.lines()
            .any(|l| l.starts_with("www.example.com.\t45\tIN\tCNAME")),
        "{out}"
    );

    // The backend goes: the primary's monitor takes it down, and the CDN's name answers, with
    // nothing of ours after it.
    drop(backend);
    let cdn = "www.example.com. CNAME www.cdn.example.net.";
    until("the CDN's CNAME", async || {
        answer(port, "A", false).await == [cdn]
    })
    .await;
    assert_eq!(answer(port, "AAAA", true).await, [cdn]);

    // It comes back: so does the primary.
    let _backend = TcpListener::bind(("127.0.0.1", backend_port)).unwrap();
    until("the primary's CNAME again", async || {
        answer(port, "A", false).await.first().map(String::as_str) == Some(primary)
    })
    .await;
    gslbd.stop().await;
}
