//! ECS scope end to end, with a real resolver: two clients in different /24s behind one
//! unbound (`send-client-subnet`, subnet cache) each get their own answer from gslbd, also
//! when unbound answers from its cache.
//!
//! Three namespaces, joined by veths:
//!
//! ```text
//!   client ns                      resolver ns                   auth ns
//!   198.51.100.10/32 (view a)
//!   203.0.113.10/32  (view b)
//!   192.0.2.130 (no view) res0 --- client0 192.0.2.129 (unbound)
//!                                  auth0   192.0.2.2 ----------- res0 192.0.2.53 (gslbd, XDP)
//! ```
//!
//! unbound asks gslbd with the client's /24 as ECS and caches each answer for the scope gslbd
//! echoes. gslbd's scope must be the truth: 24 for the per-view domain (decided by the engine,
//! as the configuration has a policy) and for the `sourceiphash` domain (mask /24), 0 for
//! static data. A scope of 0 on a per-client answer would make unbound serve the first
//! client's answer to the second from its cache; the test shows that on a static name, whose
//! scope-0 answer unbound does share across /24s.
//!
//! Needs root (namespaces, XDP) and the `unbound` binary (Debian package `unbound`, installed by
//! `cargo xtask setup`).

use std::{
    net::Ipv4Addr,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use gslb_tests::{DigReply, Netns, Processes, TempDir, TempPaths, privileged};
use gslb_user::dataplane::pinned_counters;

const GSLBD: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 53);
/// unbound's address towards gslbd (its queries' source).
const RESOLVER_UP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
/// unbound's address towards the clients (where it listens).
const RESOLVER: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 129);
/// The client namespace's link address: a third client, in no view.
const CLIENT_C: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 130);
/// In view "a" (198.51.100.0/24) and view "b" (203.0.113.0/24).
const CLIENT_A: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 10);
const CLIENT_B: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 10);

/// The per-view domain: view a's first service, view b's, and the default view's.
const VIEWS_NAME: &str = "www.example.com";
const WWW_A: &str = "192.0.2.201";
const WWW_B: &str = "192.0.2.203";
const WWW_DEFAULT: &str = "192.0.2.200";
/// The `sourceiphash` domain (mask /24) and a static name.
const HASH_NAME: &str = "hash.example.com";
const STATIC_NAME: &str = "ns1.example.com";

fn gslbd_config() -> String {
    let hash_services: String = (1..=4)
        .map(|i| {
            format!("[[service]]\nname = \"hash-{i}\"\nip = \"192.0.2.21{i}\"\nsite = \"dc\"\n\n")
        })
        .collect();
    format!(
        r#"
[server]
listen = ["{GSLBD}"]

[[view]]
name = "a"
prefixes = ["198.51.100.0/24"]

[[view]]
name = "b"
prefixes = ["203.0.113.0/24"]

[[zone]]
name = "example.com"
ttl = 3600
ns = ["ns1.example.com"]
soa.rname = "hostmaster.example.com"

  [[zone.record]]
  name = "ns1"
  type = "A"
  value = "{GSLBD}"

[[site]]
name = "dc"
ip = "{GSLBD}"

[[service]]
name = "www-default"
ip = "{WWW_DEFAULT}"
site = "dc"

[[service]]
name = "www-a"
ip = "{WWW_A}"
site = "dc"

[[service]]
name = "www-a-2"
ip = "192.0.2.202"
site = "dc"

[[service]]
name = "www-b"
ip = "{WWW_B}"
site = "dc"

[[service]]
name = "www-b-2"
ip = "192.0.2.204"
site = "dc"

{hash_services}
# A policy that matches no query here: with it the engine decides every domain, so the views
# are honoured under the engine (the path issue 11 fixed).
[[action]]
name = "prefer-default"
preferred_locations = ["Europe"]

[[policy]]
name = "unrelated"
expression = 'DNS.REQ.QUESTION.DOMAIN.EQ("elsewhere.example.com")'
action = "prefer-default"
priority = 10

[[gslb_domain]]
name = "{VIEWS_NAME}"
ttl = 300
method = "globalavailability"
services = ["www-default"]

  [[gslb_domain.view]]
  view = "a"
  services = ["www-a", "www-a-2"]

  [[gslb_domain.view]]
  view = "b"
  services = ["www-b", "www-b-2"]

[[gslb_domain]]
name = "{HASH_NAME}"
ttl = 300
method = "sourceiphash"
sourceip_mask = {{ mask_v4 = 24, mask_v6 = 56 }}
services = ["hash-1", "hash-2", "hash-3", "hash-4"]
"#
    )
}

/// unbound as a non-validating caching resolver with the subnet cache, sending ECS (the
/// client's /24) to gslbd only, for example.com only (a stub zone: nothing else is reachable).
fn unbound_config(dir: &Path) -> String {
    let dir = dir.display();
    format!(
        r#"server:
    verbosity: 3
    log-queries: yes
    log-replies: yes
    use-syslog: no
    logfile: "{dir}/unbound.log"
    directory: "{dir}"
    pidfile: "{dir}/unbound.pid"
    chroot: ""
    username: ""
    do-daemonize: no
    num-threads: 1
    interface: {RESOLVER}
    port: 53
    do-ip6: no
    access-control: 198.51.100.0/24 allow
    access-control: 203.0.113.0/24 allow
    access-control: 192.0.2.128/26 allow
    # No validator: there is no trust anchor in this lab (example.com is unsigned anyway).
    module-config: "subnetcache iterator"
    send-client-subnet: {GSLBD}
    max-client-subnet-ipv4: 24
    # One query to gslbd per client question (no minimised queries in between).
    qname-minimisation: no
    # The defaults, stated: once gslbd is stopped, unbound answers from live cache entries only
    # (none served expired) and sends nothing on its own (no prefetch).
    prefetch: no
    serve-expired: no

stub-zone:
    name: "example.com"
    stub-addr: {GSLBD}

remote-control:
    control-enable: no
"#
    )
}

/// unbound's path, or `None` (with the reason printed) when the test must skip; a failure when
/// GSLB_REQUIRE_PRIVILEGED=1, as in CI, which installs it.
fn unbound_binary() -> Option<PathBuf> {
    let found = ["/usr/sbin/unbound", "/usr/local/sbin/unbound"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        gslb_tests::skip("ecs_unbound_netns: needs unbound (apt-get install unbound)");
    }
    found
}

/// A veth pair between `a` and `b`, addressed and up.
fn link(a: (&Netns, &str, &str), b: (&Netns, &str, &str)) {
    a.0.ip(&[
        "link", "add", a.1, "type", "veth", "peer", "name", b.1, "netns", &b.0.name,
    ]);
    for (ns, dev, addr) in [a, b] {
        ns.ip(&["addr", "add", addr, "dev", dev]);
        ns.ip(&["link", "set", dev, "up"]);
    }
}

/// One answer as dig shows it: the A records' addresses, the RCODE, the echoed ECS scope.
#[derive(Debug)]
struct Answer {
    status: String,
    addrs: Vec<String>,
    scope: Option<u8>,
    out: String,
}

fn answer(out: String) -> Answer {
    let reply = DigReply::parse(&out);
    let addrs = reply
        .answer
        .iter()
        .filter_map(|r| match r.split_whitespace().collect::<Vec<_>>()[..] {
            [_, _, "A", addr] => Some(addr.to_owned()),
            _ => None,
        })
        .collect();
    // "; CLIENT-SUBNET: 198.51.100.0/24/24": address/source/scope.
    let scope = out
        .lines()
        .find_map(|l| l.strip_prefix("; CLIENT-SUBNET: "))
        .and_then(|s| s.trim().rsplit('/').next()?.parse().ok());
    Answer {
        status: reply.status,
        addrs,
        scope,
        out,
    }
}

/// dig straight at gslbd from the resolver's namespace, with `subnet` as ECS.
fn ask_gslbd(resolver: &Netns, name: &str, subnet: &str) -> Answer {
    answer(resolver.dig(
        GSLBD.into(),
        &[
            "-b",
            &RESOLVER_UP.to_string(),
            &format!("+subnet={subnet}"),
            name,
            "A",
        ],
    ))
}

/// A recursive query from `client` (one of the client namespace's addresses) to unbound.
fn ask_unbound(clients: &Netns, client: Ipv4Addr, name: &str) -> Answer {
    answer(clients.dig(
        RESOLVER.into(),
        &["-b", &client.to_string(), "+rec", name, "A"],
    ))
}

/// Prints unbound's log when the test fails (dropped before the directory holding it).
struct LogOnFailure(PathBuf);

impl Drop for LogOnFailure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.0).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(200).collect();
            eprintln!("---- unbound's log (last 200 lines) ----");
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

#[test]
fn clients_in_two_subnets_behind_unbound_get_their_own_answers() {
    if !privileged("clients_in_two_subnets_behind_unbound_get_their_own_answers") {
        return;
    }
    let Some(unbound) = unbound_binary() else {
        return;
    };
    // Drop order (reverse of declaration): processes, then namespaces, then files.
    let dir = TempDir::new("ecs-unbound");
    let pin_path = PathBuf::from(format!(
        "/sys/fs/bpf/gslb-ecs-unbound-{}",
        std::process::id()
    ));
    let _pins = TempPaths(vec![pin_path.clone()]);
    let _log = LogOnFailure(dir.0.join("unbound.log"));
    let auth = Netns::new("ecs", "auth");
    let resolver = Netns::new("ecs", "res");
    let clients = Netns::new("ecs", "cli");
    let mut daemons = Processes::default();

    link(
        (&auth, "res0", &format!("{GSLBD}/26")),
        (&resolver, "auth0", &format!("{RESOLVER_UP}/26")),
    );
    link(
        (&resolver, "client0", &format!("{RESOLVER}/26")),
        (&clients, "res0", &format!("{CLIENT_C}/26")),
    );
    let via = CLIENT_C.to_string();
    for client in [CLIENT_A, CLIENT_B] {
        clients.ip(&["addr", "add", &format!("{client}/32"), "dev", "res0"]);
        let net = Ipv4Addr::from(u32::from(client) & !0xff);
        resolver.ip(&["route", "add", &format!("{net}/24"), "via", &via]);
    }

    // gslbd, with XDP on its link to the resolver.
    let config = dir.0.join("gslbd.toml");
    std::fs::write(&config, gslbd_config()).unwrap();
    let mut gslbd = auth.nsenter(env!("CARGO_BIN_EXE_gslbd").as_ref());
    gslbd
        .arg("--config")
        .arg(&config)
        .args(["--interface", "res0", "--xdp-mode", "skb"])
        .arg("--pin-path")
        .arg(&pin_path)
        .arg("--control")
        .arg(dir.0.join("gslbd.sock"));
    let gslbd = daemons.spawn_until(gslbd, "gslbd: ready", Duration::from_secs(30));
    let hits = || pinned_counters(&pin_path).expect("gslbd's counters").hits();

    // Straight at gslbd: the answers and scopes unbound will get, and who gave them. The
    // per-view domain's ECS queries are XDP's (a subnet in a view's prefix: its length is the
    // scope; /0: the resolver's view, scope 0); the per-query domain and static data are the
    // responder's.
    let asked = |name: &str, subnet: &str| {
        let before = hits();
        let got = ask_gslbd(&resolver, name, subnet);
        (got, hits() - before)
    };
    let (www_a, www_a_xdp) = asked(VIEWS_NAME, "198.51.100.0/24");
    let (www_b, www_b_xdp) = asked(VIEWS_NAME, "203.0.113.0/24");
    let (hash_a, hash_a_xdp) = asked(HASH_NAME, "198.51.100.0/24");
    let (hash_b, hash_b_xdp) = asked(HASH_NAME, "203.0.113.0/24");
    let (static_a, static_xdp) = asked(STATIC_NAME, "198.51.100.0/24");
    let (www_zero, www_zero_xdp) = asked(VIEWS_NAME, "0.0.0.0/0");
    let gslbd_addr = GSLBD.to_string();
    // (what, reply, its one address when known in advance, its scope, XDP hits)
    for (what, got, addr, scope, xdp) in [
        ("view a", &www_a, Some(WWW_A), 24, (www_a_xdp, 1)),
        ("view b", &www_b, Some(WWW_B), 24, (www_b_xdp, 1)),
        ("hash, a's /24", &hash_a, None, 24, (hash_a_xdp, 0)),
        ("hash, b's /24", &hash_b, None, 24, (hash_b_xdp, 0)),
        (
            "static",
            &static_a,
            Some(gslbd_addr.as_str()),
            0,
            (static_xdp, 0),
        ),
        // A /0 subnet says nothing of the client: the resolver (in no view) is the client.
        (
            "/0 source",
            &www_zero,
            Some(WWW_DEFAULT),
            0,
            (www_zero_xdp, 1),
        ),
    ] {
        assert_eq!(xdp.0, xdp.1, "{what}: XDP hits");
        assert_eq!(got.status, "NOERROR", "{what}:\n{}", got.out);
        assert_eq!(got.addrs.len(), 1, "{what}: one address:\n{}", got.out);
        if let Some(addr) = addr {
            assert_eq!(got.addrs, [addr], "{what}:\n{}", got.out);
        }
        assert_eq!(
            got.scope,
            Some(scope),
            "{what}: the echoed scope:\n{}",
            got.out
        );
    }
    assert_ne!(
        hash_a.addrs, hash_b.addrs,
        "the two /24s must hash to different services for this test (change the addresses)"
    );
    // Without ECS the fast path answers too.
    let before = hits();
    let plain = answer(resolver.dig(
        GSLBD.into(),
        &["-b", &RESOLVER_UP.to_string(), VIEWS_NAME, "A"],
    ));
    assert_eq!(plain.addrs, [WWW_DEFAULT], "{}", plain.out);
    assert_eq!(hits() - before, 1, "a query without ECS is XDP's");

    // unbound, in the foreground; its configuration checked first (unbound-checkconf says
    // "no errors" on stdout), then it must answer before the test goes on.
    let unbound_conf = dir.0.join("unbound.conf");
    std::fs::write(&unbound_conf, unbound_config(&dir.0)).unwrap();
    let mut cmd = resolver.exec("sh");
    cmd.arg("-c")
        .arg(r#"unbound-checkconf "$1" && exec "$0" -d -c "$1""#)
        .arg(&unbound)
        .arg(&unbound_conf);
    daemons.spawn_until(cmd, "no errors in", Duration::from_secs(10));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = clients.dig(
            RESOLVER.into(),
            &[
                "-b",
                &CLIENT_C.to_string(),
                "+time=1",
                "+tries=1",
                "version.server",
                "CH",
                "TXT",
            ],
        );
        if DigReply::parse(&out).status == "NOERROR" {
            break;
        }
        assert!(Instant::now() < deadline, "unbound never answered:\n{out}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Each client, in turn, its own /24's answer. The first round goes to gslbd (with a scope
    // of 0 b's first query would already be answered from a's cache entry); the later ones come
    // from unbound's subnet cache, since gslbd is stopped before them.
    let want = |client: Ipv4Addr, name: &str| -> Vec<String> {
        match (client == CLIENT_A, name) {
            (true, VIEWS_NAME) => vec![WWW_A.to_owned()],
            (false, VIEWS_NAME) => vec![WWW_B.to_owned()],
            (true, _) => hash_a.addrs.clone(),
            (false, _) => hash_b.addrs.clone(),
        }
    };
    for round in 0..3 {
        if round == 1 {
            daemons.stop(gslbd);
            let gone = ask_gslbd(&resolver, STATIC_NAME, "198.51.100.0/24");
            assert!(gone.addrs.is_empty(), "gslbd still answers:\n{}", gone.out);
        }
        for name in [VIEWS_NAME, HASH_NAME] {
            for client in [CLIENT_A, CLIENT_B] {
                let got = ask_unbound(&clients, client, name);
                assert_eq!(
                    (got.status.as_str(), &got.addrs),
                    ("NOERROR", &want(client, name)),
                    "round {round}, {client} asks unbound for {name}:\n{}",
                    got.out
                );
            }
        }
        if round == 0 {
            let got = ask_unbound(&clients, CLIENT_A, STATIC_NAME);
            assert_eq!(got.addrs, [GSLBD.to_string()], "{}", got.out);
        }
    }

    // What a scope of 0 does: unbound gives a's scope-0 answer (the static name) to c, in
    // another /24, from its cache; the per-view answers it keeps to their /24s, so c, whose
    // /24 it has not asked for, gets none (gslbd is gone).
    let shared = ask_unbound(&clients, CLIENT_C, STATIC_NAME);
    assert_eq!(
        (shared.status.as_str(), &shared.addrs),
        ("NOERROR", &vec![GSLBD.to_string()]),
        "c gets the scope-0 answer from the cache:\n{}",
        shared.out
    );
    // unbound tries the stopped gslbd for a while; dig need not wait for its SERVFAIL.
    let not_shared = answer(clients.dig(
        RESOLVER.into(),
        &[
            "-b",
            &CLIENT_C.to_string(),
            "+rec",
            "+time=1",
            "+tries=1",
            VIEWS_NAME,
            "A",
        ],
    ));
    assert!(
        not_shared.addrs.is_empty(),
        "c must not get a's or b's per-view answer:\n{}",
        not_shared.out
    );
    daemons.stop_all();
    assert!(
        !pin_path.join("COUNTERS").exists(),
        "gslbd removes its pins on SIGTERM"
    );
    let _ = std::fs::remove_dir(&pin_path);
}
