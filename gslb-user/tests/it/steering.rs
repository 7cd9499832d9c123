//! Runtime steering through the control socket (`gslbctl service|site|domain disable|enable`),
//! against an in-process gslbd answering on loopback: a disabled service leaves the answers at
//! once (checked by DNS queries over UDP) and is DOWN in what this site reports over MEP;
//! enabled, it is back; an unknown name is refused.

use crate::common;
use crate::mep::peer::{self as mep_peer, Peer};

use std::path::{Path, PathBuf};

use common::{Gslbd, WAIT, answer_set_becomes};
use gslb_tests::TempDir;
use gslb_user::control::{self, ClientError};
use gslb_user::daemon::Listeners;

/// `[server]`'s `state_file` set to `state` in the file `text` (gslbd on `port`).
fn with_state_file(text: &str, port: u16, state: &Path) -> String {
    let line = format!("dns_port = {port}\n");
    assert!(text.contains(&line));
    text.replacen(
        &line,
        &format!("{line}state_file = \"{}\"\n", state.display()),
        1,
    )
}

/// Three unmonitored (so always UP) services (web1 and web2 at dc1, web3 at dc2) behind
/// www.example.com, with a backup address; the admin state in `state`.
fn config(port: u16, state: &Path) -> String {
    with_state_file(&three_services(port), port, state)
}

fn three_services(port: u16) -> String {
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

[[gslb_domain]]
name = "api.example.com"
answer = "all"
services = ["web1", "web2", "web3"]

[[gslb_domain]]
name = "ga.example.com"
method = "globalavailability"
services = ["web1", "web2", "web3"]
backup_ip = ["203.0.113.98"]

[[gslb_domain]]
name = "hash.example.com"
method = "sourceiphash"
services = ["web1", "web2", "web3"]
backup_ip = ["203.0.113.97"]
"#
    )
}

/// A directory with gslbd's file ([`config`] and `extra` after it), control socket and state
/// file, and the DNS port gslbd answers on.
struct Lab {
    path: PathBuf,
    ctl: PathBuf,
    state: PathBuf,
    port: u16,
    /// Bound for the first start.
    dns: Option<Listeners>,
    _dir: TempDir,
}

impl Lab {
    fn new(tag: &str, extra: &str) -> Lab {
        let dir = TempDir::new(tag);
        let (port, dns) = common::bound_dns();
        let lab = Lab {
            path: dir.0.join("gslb.toml"),
            ctl: dir.0.join("control.sock"),
            // In a directory gslbd makes.
            state: dir.0.join("state/admin-state"),
            port,
            dns: Some(dns),
            _dir: dir,
        };
        std::fs::write(&lab.path, config(port, &lab.state) + extra).unwrap();
        lab
    }

    /// gslbd, the responder alone, with the control socket; again after a stop, on the same
    /// port and files.
    async fn start(&mut self) -> Gslbd {
        self.start_with(Gslbd::responder_only(Some(self.ctl.clone())))
            .await
    }

    async fn start_with(&mut self, overrides: gslb_user::daemon::Overrides) -> Gslbd {
        let dns = self.dns.take().unwrap_or_else(|| {
            Listeners::bind_addrs(&[([127, 0, 0, 1], self.port).into()]).expect("the same port")
        });
        Gslbd::start_bound_with(&self.path, overrides, dns, WAIT).await
    }
}

async fn steer(ctl: &Path, request: &str) -> Result<String, ClientError> {
    control::request(ctl, request, WAIT).await
}

/// `gslbctl --control CTL ARGS...` (the binary): its stdout, or its stderr on failure.
pub(crate) async fn gslbctl(ctl: &Path, args: &[&str]) -> Result<String, String> {
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
    let mut lab = Lab::new("steer-service", "");
    let (ctl, port) = (lab.ctl.clone(), lab.port);
    let gslbd = lab.start().await;
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
    let text = crate::supervise::mep_config(dns, me, me_ip, p1_mep, p2_mep);
    std::fs::write(
        &path,
        with_state_file(&text, dns, &dir.0.join("admin-state")),
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

/// The admin state survives a reload of the same file and a restart on the same state file;
/// a reload whose configuration no longer has a disabled service drops it (the file too), so
/// that a later service of that name is not born disabled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_state_survives_reload_and_restart() {
    let mut lab = Lab::new("steer-state", "");
    let (path, ctl, state, port) = (
        lab.path.clone(),
        lab.ctl.clone(),
        lab.state.clone(),
        lab.port,
    );
    let gslbd = lab.start().await;
    let all = ["198.51.100.1", "198.51.100.2", "198.51.100.3"];
    answer_set_becomes(port, &all, "every service").await;
    steer(&ctl, "service disable web2").await.unwrap();
    answer_set_becomes(port, &["198.51.100.1", "198.51.100.3"], "web2 out").await;
    let written = std::fs::read_to_string(&state).unwrap();
    assert!(written.lines().any(|l| l == "service web2"), "{written}");

    gslbd.reload().await.unwrap();
    let mut now = common::www(port).await;
    now.sort();
    assert_eq!(
        now,
        common::ips(&["198.51.100.1", "198.51.100.3"]),
        "web2 still out after the reload"
    );
    gslbd.stop().await;

    // A new gslbd on the same state file: web2 is out from its first answer on.
    let gslbd = lab.start().await;
    let mut first = common::www(port).await;
    first.sort();
    assert_eq!(
        first,
        common::ips(&["198.51.100.1", "198.51.100.3"]),
        "web2 still out after the restart"
    );

    // web2 leaves the configuration: dropped from the admin state and its file.
    let without = config(port, &state)
        .replace("name = \"web2\"", "name = \"web4\"")
        .replace("\"web2\", ", "\"web4\", ");
    std::fs::write(&path, &without).unwrap();
    gslbd.reload().await.unwrap();
    answer_set_becomes(port, &all, "web4 (web2's address) is not disabled").await;
    let written = std::fs::read_to_string(&state).unwrap();
    assert!(!written.contains("web2"), "{written}");
    // Back under its old name: not disabled any more.
    std::fs::write(&path, config(port, &state)).unwrap();
    gslbd.reload().await.unwrap();
    answer_set_becomes(port, &all, "web2 is back, enabled").await;
    gslbd.stop().await;
}

/// A state file that is not gslbd's refuses the start, naming its line, rather than answering
/// with services the operator took out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_state_file_refuses_the_start_with_its_line() {
    let dir = TempDir::new("steer-bad-state");
    let (path, state) = (dir.0.join("gslb.toml"), dir.0.join("admin-state"));
    let (port, dns) = common::bound_dns();
    std::fs::write(&path, config(port, &state)).unwrap();
    std::fs::write(&state, "service web1\nservce web2\n").unwrap();
    let error = Gslbd::try_start_bound_with(&path, Gslbd::responder_only(None), dns, WAIT)
        .await
        .err()
        .expect("refused");
    let text = format!("{:#}", anyhow::Error::from(error));
    assert!(
        text.contains("admin-state:2: \"servce web2\" is not"),
        "{text}"
    );
}

/// api.example.com's A answer and rcode, over UDP.
async fn api(port: u16) -> (hickory_proto::op::ResponseCode, Vec<std::net::IpAddr>) {
    ask(port, "api.example.com.").await
}

/// `name`'s A answer (sorted) and rcode, over UDP.
async fn ask(
    port: u16,
    name: &'static str,
) -> (hickory_proto::op::ResponseCode, Vec<std::net::IpAddr>) {
    tokio::task::spawn_blocking(move || {
        let reply = common::ask_loopback(port, name, hickory_proto::rr::RecordType::A);
        let mut addrs = common::answer_addrs(&reply);
        addrs.sort();
        (reply.response_code, addrs)
    })
    .await
    .unwrap()
}

/// `site disable dc1` takes every service of dc1 out (web1 and web2) and only those; enabled,
/// they are back. The site's state survives a restart like a service's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_site_takes_all_its_services_out() {
    let mut lab = Lab::new("steer-site", "");
    let (ctl, port) = (lab.ctl.clone(), lab.port);
    let gslbd = lab.start().await;
    let all = ["198.51.100.1", "198.51.100.2", "198.51.100.3"];
    answer_set_becomes(port, &all, "every service").await;
    assert_eq!(
        gslbctl(&ctl, &["site", "disable", "dc1"]).await.unwrap(),
        "site dc1 disabled\n"
    );
    assert_eq!(
        common::www(port).await,
        common::ips(&all[2..]),
        "dc1's two services out"
    );
    assert_eq!(api(port).await.1, common::ips(&all[2..]), "in every domain");
    let unknown = steer(&ctl, "site disable dc9").await.unwrap_err();
    assert_eq!(
        unknown.to_string(),
        "no site \"dc9\" in the running configuration"
    );
    gslbd.stop().await;

    let gslbd = lab.start().await;
    assert_eq!(
        common::www(port).await,
        common::ips(&all[2..]),
        "still out after a restart"
    );
    steer(&ctl, "site enable dc1").await.unwrap();
    let mut now = common::www(port).await;
    now.sort();
    assert_eq!(now, common::ips(&all));
    gslbd.stop().await;
}

/// `domain disable` makes the domain answer as if all its services were down: www its backup
/// address, api (no backup) NODATA; the other domain, on the same services, answers on.
/// Enabled, each answers with its services again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_domain_answers_as_if_its_services_were_down() {
    use hickory_proto::op::ResponseCode;
    let mut lab = Lab::new("steer-domain", "");
    let (ctl, port) = (lab.ctl.clone(), lab.port);
    let gslbd = lab.start().await;
    let all = ["198.51.100.1", "198.51.100.2", "198.51.100.3"];
    answer_set_becomes(port, &all, "every service").await;

    assert_eq!(
        gslbctl(&ctl, &["domain", "disable", "WWW.example.com."])
            .await
            .unwrap(),
        "domain WWW.example.com. disabled\n"
    );
    assert_eq!(
        common::www(port).await,
        common::ips(&["203.0.113.99"]),
        "the backup"
    );
    assert_eq!(
        api(port).await,
        (ResponseCode::NoError, common::ips(&all)),
        "api answers on"
    );

    steer(&ctl, "domain disable api.example.com").await.unwrap();
    assert_eq!(
        api(port).await,
        (ResponseCode::NoError, vec![]),
        "NODATA without a backup"
    );
    let unknown = steer(&ctl, "domain disable ftp.example.com")
        .await
        .unwrap_err();
    assert_eq!(
        unknown.to_string(),
        "no domain \"ftp.example.com\" in the running configuration"
    );

    steer(&ctl, "domain enable www.example.com").await.unwrap();
    let mut now = common::www(port).await;
    now.sort();
    assert_eq!(now, common::ips(&all));
    assert!(api(port).await.1.is_empty(), "api still disabled");
    steer(&ctl, "domain enable api.example.com").await.unwrap();
    assert_eq!(api(port).await.1, common::ips(&all));
    gslbd.stop().await;
}

/// The same for the domains the engine decides: one compiled into the answers
/// (globalavailability) and one the responder decides per query (sourceiphash).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_domain_decided_by_the_engine_answers_its_backup() {
    let mut lab = Lab::new("steer-engine-domain", "");
    let (ctl, port) = (lab.ctl.clone(), lab.port);
    let gslbd = lab.start().await;
    let services = common::ips(&["198.51.100.1", "198.51.100.2", "198.51.100.3"]);
    for (name, backup) in [
        ("ga.example.com.", "203.0.113.98"),
        ("hash.example.com.", "203.0.113.97"),
    ] {
        let (_, before) = ask(port, name).await;
        assert!(
            !before.is_empty() && before.iter().all(|a| services.contains(a)),
            "{name}: {before:?}"
        );
        steer(&ctl, &format!("domain disable {name}"))
            .await
            .unwrap();
        assert_eq!(
            ask(port, name).await.1,
            common::ips(&[backup]),
            "{name} disabled"
        );
        steer(&ctl, &format!("domain enable {name}")).await.unwrap();
        assert_eq!(ask(port, name).await.1, before, "{name} enabled");
    }
    gslbd.stop().await;
}

/// With the fast path loaded (its maps pinned, run by BPF_PROG_TEST_RUN through the pins): a
/// disabled service leaves XDP's answers as soon as the reply came, and is back once enabled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_service_leaves_the_fast_path_answers() {
    if !common::privileged() {
        return;
    }
    let mut lab = Lab::new("steer-xdp", "");
    let (ctl, port) = (lab.ctl.clone(), lab.port);
    // Pins live on bpffs; removed on the way out, also when the test fails.
    struct Pins(PathBuf);
    impl Drop for Pins {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let pins = Pins(format!("/sys/fs/bpf/gslb-test-steer-{}", std::process::id()).into());
    let pins = &pins.0;
    // XDP loaded (not attached: no interface), its maps pinned on bpffs.
    let overrides = gslb_user::daemon::Overrides {
        pin_path: Some(pins.to_owned()),
        control: Some(control::ControlPath {
            path: ctl.clone(),
            required: true,
        }),
        ..gslb_user::daemon::Overrides::default()
    };
    let gslbd = lab.start_with(overrides).await;
    let all = ["198.51.100.1", "198.51.100.2", "198.51.100.3"];
    answer_set_becomes(port, &all, "every service").await;
    let xdp = || {
        let mut a = crate::supervise::xdp_www(pins, port);
        a.sort();
        a
    };
    assert_eq!(xdp(), common::ips(&all));
    steer(&ctl, "service disable web1").await.unwrap();
    assert_eq!(xdp(), common::ips(&all[1..]), "web1 out of the fast path");
    steer(&ctl, "service enable web1").await.unwrap();
    assert_eq!(xdp(), common::ips(&all), "web1 back in the fast path");
    gslbd.stop().await;
}

/// The rows of a `show` table, split into cells (after the header).
fn rows(table: &str) -> Vec<Vec<String>> {
    let mut lines = table.lines();
    lines.next().expect("a header");
    lines
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

fn row(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|&c| c.to_owned()).collect()
}

/// `gslbctl show services|sites|domains` through the control socket: the tables follow what
/// the operator disabled and what is up, and a domain's per-view lists (hash.example.com's
/// view "lab" answers web3 only, and falls back to the domain's list once dc2 is disabled).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_tables_follow_the_controller() {
    let extra = r#"
  [[gslb_domain.view]]
  view = "lab"
  services = ["web3"]

[[view]]
name = "lab"
prefixes = ["10.0.0.0/8"]
"#;
    let mut lab = Lab::new("steer-show", extra);
    let ctl = lab.ctl.clone();
    let gslbd = lab.start().await;
    steer(&ctl, "service disable web1").await.unwrap();
    steer(&ctl, "domain disable api.example.com").await.unwrap();

    let services = gslbctl(&ctl, &["show", "services"]).await.unwrap();
    assert!(services.starts_with("SERVICE "), "{services}");
    assert_eq!(
        rows(&services),
        [
            row(&[
                "web1",
                "dc1",
                "198.51.100.1",
                "-",
                "down",
                "disabled",
                "1",
                "0",
                "0",
                "-",
                "disabled",
                "by",
                "the",
                "operator"
            ]),
            row(&[
                "web2",
                "dc1",
                "198.51.100.2",
                "-",
                "up",
                "enabled",
                "1",
                "0",
                "0",
                "-",
                "no",
                "monitor"
            ]),
            row(&[
                "web3",
                "dc2",
                "198.51.100.3",
                "-",
                "up",
                "enabled",
                "1",
                "0",
                "0",
                "-",
                "no",
                "monitor"
            ]),
        ]
    );
    let domains = rows(&steer(&ctl, "show domains").await.unwrap());
    assert_eq!(
        domains,
        [
            row(&["www.example.com", "enabled", "default", "web2,web3"]),
            row(&["api.example.com", "disabled", "default", "(nodata)"]),
            row(&["ga.example.com", "enabled", "default", "web2,web3"]),
            row(&["hash.example.com", "enabled", "default", "web2,web3"]),
            row(&["hash.example.com", "enabled", "lab", "web3"]),
        ]
    );

    steer(&ctl, "site disable dc2").await.unwrap();
    assert_eq!(
        rows(&steer(&ctl, "show sites").await.unwrap()),
        [
            row(&["dc1", "enabled", "1/2", "-"]),
            row(&["dc2", "disabled", "0/1", "-"]),
        ]
    );
    let domains = rows(&steer(&ctl, "show domains").await.unwrap());
    assert_eq!(
        domains[4],
        row(&["hash.example.com", "enabled", "lab", "web2"])
    );
    assert_eq!(
        steer(&ctl, "show mep").await.unwrap(),
        "MEP is off (it needs [mep] and server.site)\n"
    );
    let refused = steer(&ctl, "show routes").await.unwrap_err();
    assert!(
        refused
            .to_string()
            .starts_with("unknown request \"show routes\""),
        "{refused}"
    );
    gslbd.stop().await;
}
