//! Runtime steering through the control socket (`gslbctl service|site|domain disable|enable`),
//! against an in-process gslbd answering on loopback: a disabled service leaves the answers at
//! once (checked by DNS queries over UDP) and is DOWN in what this site reports over MEP;
//! enabled, it is back; an unknown name is refused.

use crate::common;
use crate::mep_peer::{self, Peer};

use common::{Gslbd, WAIT, answer_set_becomes};
use gslb_tests::TempDir;
use gslb_user::control::{self, ClientError};

/// Two unmonitored (so always UP) services of one site behind www.example.com, and a backup.
fn config(port: u16) -> String {
    let head = common::loopback_zone(port);
    format!(
        r#"{head}
[[site]]
name = "dc1"
ip = "192.0.2.1"

[[site]]
name = "dc2"
ip = "192.0.2.2"

[[service]]
name = "web1"
ip = "198.51.100.1"
site = "dc1"

[[service]]
name = "web2"
ip = "198.51.100.2"
site = "dc1"

[[service]]
name = "web3"
ip = "198.51.100.3"
site = "dc2"

[[gslb_domain]]
name = "www.example.com"
answer = "all"
services = ["web1", "web2", "web3"]
backup_ip = ["203.0.113.99"]
"#
    )
}

async fn steer(ctl: &std::path::Path, request: &str) -> Result<String, ClientError> {
    control::request(ctl, request, WAIT).await
}

/// `gslbctl --control CTL ARGS...` (the binary): its stdout, or its stderr on failure.
pub(crate) async fn gslbctl(ctl: &std::path::Path, args: &[&str]) -> Result<String, String> {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_gslbctl"));
    command.arg("--control").arg(ctl).args(args);
    let out = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("gslbctl runs");
    let text = |b: Vec<u8>| String::from_utf8(b).expect("UTF-8");
    if out.status.success() {
        Ok(text(out.stdout))
    } else {
        Err(text(out.stderr))
    }
}

/// Disable takes web1 out of the answers, and the reply comes once it is out (the query right
/// after it has no web1); enable puts it back; a second disable says so; unknown names and
/// malformed commands are refused and change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_service_leaves_the_answers_and_comes_back_enabled() {
    let dir = TempDir::new("steer-service");
    let (path, ctl) = (dir.0.join("gslb.toml"), dir.0.join("control.sock"));
    let (port, dns) = common::bound_dns();
    std::fs::write(&path, config(port)).unwrap();
    let gslbd = Gslbd::start_bound(&path, dns, Some(ctl.clone()), WAIT).await;
    let all = ["198.51.100.1", "198.51.100.2", "198.51.100.3"];
    answer_set_becomes(port, &all, "every service").await;

    assert_eq!(
        gslbctl(&ctl, &["service", "disable", "web1"])
            .await
            .unwrap(),
        "service web1 disabled\n"
    );
    let mut now = common::www(port).await;
    now.sort();
    assert_eq!(
        now,
        common::ips(&all[1..]),
        "web1 is out as soon as the reply came"
    );
    assert_eq!(
        steer(&ctl, "service disable web1").await.unwrap(),
        "service web1 disabled already\n"
    );

    let unknown = steer(&ctl, "service disable web9").await.unwrap_err();
    assert_eq!(
        unknown.to_string(),
        "no service \"web9\" in the running configuration"
    );
    let refused = gslbctl(&ctl, &["service", "disable", "web9"])
        .await
        .unwrap_err();
    assert!(refused.contains("no service \"web9\""), "{refused}");
    let malformed = steer(&ctl, "service shutdown web2").await.unwrap_err();
    assert!(
        malformed.to_string().starts_with("unknown request"),
        "{malformed}"
    );
    answer_set_becomes(port, &all[1..], "web1 still out, web2 still in").await;

    assert_eq!(
        gslbctl(&ctl, &["service", "enable", "web1"]).await.unwrap(),
        "service web1 enabled\n"
    );
    let mut now = common::www(port).await;
    now.sort();
    assert_eq!(
        now,
        common::ips(&all),
        "web1 is back as soon as the reply came"
    );
    gslbd.stop().await;
}

/// What this site reports over MEP: the other parent sees web1 (of gslbd's site) DOWN while it
/// is disabled, and UP again once it is enabled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_other_sites_see_a_disabled_service_down_over_mep() {
    use gslb_user::mep::SiteSpec;
    let (me, me_ip) = ("st-p1", "127.0.0.1");
    let dir = TempDir::new("steer-mep");
    let (path, ctl) = (dir.0.join("gslb.toml"), dir.0.join("control.sock"));
    let (dns, mut dns_sockets) = common::bound_dns();
    let (p1_mep, mep_listener) = common::bound_mep(me_ip);
    let peer_listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let p2_mep = peer_listener.local_addr().unwrap().port();
    std::fs::write(
        &path,
        crate::supervise::mep_config(dns, me, me_ip, p1_mep, p2_mep),
    )
    .unwrap();
    dns_sockets.mep = Some(mep_listener);
    let gslbd = Gslbd::start_bound(&path, dns_sockets, Some(ctl.clone()), WAIT).await;
    let sites = vec![
        SiteSpec::parent(me, me_ip.parse().unwrap()).with_port(p1_mep),
        SiteSpec::parent("p2", "127.0.0.2".parse().unwrap()).with_port(p2_mep),
    ];
    let peer = Peer::start(peer_listener, mep_peer::config("p2", sites)).await;
    let web1_up = |up: bool| {
        move |v: &gslb_user::mep::MepView| {
            v.sites.get(me).is_some_and(|s| {
                s.reachable && !s.services.is_empty() && s.service_up("web1") == up
            })
        }
    };
    peer.wait("web1 reported UP", web1_up(true)).await;
    steer(&ctl, "service disable web1").await.unwrap();
    peer.wait("web1 reported DOWN once disabled", web1_up(false))
        .await;
    steer(&ctl, "service enable web1").await.unwrap();
    peer.wait("web1 reported UP once enabled", web1_up(true))
        .await;
    peer.stop().await;
    gslbd.stop().await;
}
