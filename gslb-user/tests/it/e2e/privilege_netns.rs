//! Least privilege: gslbd with `server.user = "nobody"` loads and attaches as root, then every
//! one of its threads runs as nobody with only the capabilities it uses (`/proc/PID/task/*/
//! status`), and it still answers (through XDP), follows a TCP monitor's flip and an ICMP monitor, reloads through
//! the control socket, and detaches and unpins on exit. Also with `--no-xdp`, which keeps no BPF
//! or network administration capability.

use std::{
    collections::BTreeSet,
    net::{IpAddr, SocketAddr},
    path::Path,
    time::{Duration, Instant},
};

use gslb_common::Counter;
use gslb_tests::{DigReply, GslbdLab, SERVER_IF, SERVER_V4, TempDir, gslbctl, privileged, run};
use gslb_user::privilege::{self, CAP_BPF, CAP_NET_RAW, User};

const BACKEND: &str = "192.0.2.53:8080";

/// gslbd as nobody, with the admin state in `state_file` (whose directory gslbd may have to
/// make): never the default `/var/lib/gslb`, which is the host's.
fn config_saving(ttl: u32, state_file: &Path) -> String {
    config_as(
        ttl,
        &format!(
            "user = \"nobody\"\nstate_file = \"{}\"",
            state_file.display()
        ),
    )
}

/// The configuration with `user` (a `user = ...` line, or nothing).
fn config_as(ttl: u32, user: &str) -> String {
    format!(
        r#"
[server]
listen = ["192.0.2.53"]
{user}

[[zone]]
name = "example.com"
ns = ["ns1.example.com"]
soa.rname = "hostmaster.example.com"
  [[zone.record]]
  name = "ns1"
  type = "A"
  value = "192.0.2.53"

[[site]]
name = "lab"
ip = "192.0.2.1"

[[monitor]]
name = "tcp"
type = "tcp"
interval_ms = 200
timeout_ms = 500
fall = 2
rise = 1

[[service]]
name = "web"
ip = "192.0.2.53"
port = 8080
public_ip = "198.51.100.10"
site = "lab"
monitors = ["tcp"]

[[monitor]]
name = "ping"
type = "icmp"
interval_ms = 200
timeout_ms = 500
fall = 2
rise = 1

# Up only if gslbd can still open ICMP sockets (CAP_NET_RAW, or a ping group).
[[service]]
name = "pinged"
ip = "192.0.2.10"
public_ip = "198.51.100.30"
site = "lab"
monitors = ["ping"]

[[service]]
name = "spare"
ip = "198.51.100.20"
site = "lab"

[[gslb_domain]]
name = "www.example.com"
ttl = {ttl}
answer = "all"
services = ["web", "pinged", "spare"]
"#
    )
}

/// One `Name:\tvalue` line of a status file.
fn field<'a>(status: &'a str, name: &str) -> &'a str {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(':')))
        .unwrap_or_else(|| panic!("no {name} in\n{status}"))
        .trim()
}

fn hex(status: &str, name: &str) -> u64 {
    u64::from_str_radix(field(status, name), 16).unwrap()
}

/// Every thread of `pid` runs as `user` with exactly `caps` permitted, effective and in the
/// bounding set, none inheritable or ambient, and no_new_privs. Returns the number of threads.
fn assert_dropped(pid: u32, user: &User, caps: &[u32]) -> usize {
    let mask = caps.iter().fold(0u64, |m, c| m | 1 << c);
    let tasks: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for task in &tasks {
        let status = std::fs::read_to_string(task.join("status")).unwrap();
        let ids = |id: u32| vec![id.to_string(); 4].join("\t");
        assert_eq!(field(&status, "Uid"), ids(user.uid), "{}", task.display());
        assert_eq!(field(&status, "Gid"), ids(user.gid), "{}", task.display());
        assert_eq!(
            field(&status, "Groups"),
            user.gid.to_string(),
            "{}",
            task.display()
        );
        for set in ["CapPrm", "CapEff", "CapBnd"] {
            assert_eq!(
                hex(&status, set),
                mask,
                "{} {set}: {:#x}, want {mask:#x}",
                task.display(),
                hex(&status, set)
            );
        }
        assert_eq!(hex(&status, "CapInh"), 0, "{}", task.display());
        assert_eq!(hex(&status, "CapAmb"), 0, "{}", task.display());
        assert_eq!(field(&status, "NoNewPrivs"), "1", "{}", task.display());
    }
    tasks.len()
}

/// The addresses answered for www.example.com, and their TTLs.
fn ask(lab: &GslbdLab) -> (BTreeSet<String>, BTreeSet<String>) {
    let out = lab.dig(IpAddr::V4(SERVER_V4), &["www.example.com", "A"]);
    let reply = DigReply::parse(&out);
    let field = |n| {
        reply
            .answer
            .iter()
            .filter_map(|r| r.split_whitespace().nth(n).map(str::to_owned))
            .collect()
    };
    (field(3), field(1))
}

fn wait_for(
    lab: &GslbdLab,
    what: &str,
    want: impl Fn(&BTreeSet<String>, &BTreeSet<String>) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (addrs, ttls) = ask(lab);
        if want(&addrs, &ttls) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: got {addrs:?} ttl {ttls:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One query, answered by the fast path (one hit counted).
fn assert_answered_by_xdp(lab: &GslbdLab) {
    let before = gslb_user::dataplane::pinned_counters(&lab.pins).expect("read counters");
    ask(lab);
    let after = gslb_user::dataplane::pinned_counters(&lab.pins).expect("read counters");
    let hits: Vec<_> = after
        .delta(&before)
        .into_iter()
        .filter(|(c, _)| c.is_hit())
        .collect();
    assert_eq!(hits, vec![(Counter::HitAV4, 1)], "answered by XDP");
}

/// After gslbd's exit (as the user): no XDP on the interface, no pins left.
fn assert_detached_and_unpinned(lab: &GslbdLab) {
    let link = run(lab
        .exec(&lab.server_ns, "ip")
        .args(["link", "show", SERVER_IF]));
    let link = String::from_utf8_lossy(&link.stdout);
    assert!(!link.contains("xdp"), "XDP still attached:\n{link}");
    assert!(!lab.pins.exists(), "pins left in {}", lab.pins.display());
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// The capabilities gslbd must keep here: CAP_BPF before Linux 6.5 with
/// kernel.unprivileged_bpf_disabled set (with XDP), CAP_NET_RAW unless nobody's group may open
/// ping sockets (`net.ipv4.ping_group_range`), for the ICMP monitors and probes.
fn expected(xdp: bool, user: &User) -> Vec<u32> {
    let mut caps = vec![];
    if xdp && privilege::bpf_calls_need_cap() {
        caps.push(CAP_BPF);
    }
    if !privilege::ping_sockets_allowed(user.gid) {
        caps.push(CAP_NET_RAW);
    }
    caps
}

/// `gslbctl ARGS...` through `lab`'s control socket; its stdout, or a panic with its stderr.
fn gslbctl_args(lab: &GslbdLab, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gslbctl"))
        .arg("--control")
        .arg(&lab.control)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gslbctl {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn runs_as_nobody(xdp: bool) {
    let nobody = User::lookup("nobody")
        .unwrap()
        .expect("a user nobody on this system");
    // Root's, like the unit's StateDirectory: gslbd makes `state` in it and gives it to nobody.
    let state_root = TempDir::new("privstate");
    let state_file = state_root.0.join("state").join("admin-state");
    let config = |ttl| config_saving(ttl, &state_file);
    let mut lab = GslbdLab::new(if xdp { "priv" } else { "privnx" }, &config(45));
    let backend = lab.tcp_backend(
        &lab.server_ns.clone(),
        BACKEND.parse::<SocketAddr>().unwrap(),
    );
    let gslbd = env!("CARGO_BIN_EXE_gslbd");
    let start = |lab: &mut GslbdLab| {
        let cmd = if xdp {
            lab.with_control(gslbd)
        } else {
            let mut cmd = lab.nsenter(&lab.server_ns, Path::new(gslbd));
            cmd.arg("--config").arg(&lab.config).arg("--no-xdp");
            cmd.arg("--control").arg(&lab.control);
            cmd
        };
        lab.start(cmd)
    };
    let pid = start(&mut lab);

    let threads = assert_dropped(pid, &nobody, &expected(xdp, &nobody));
    assert!(
        threads > 1,
        "the runtime's threads are checked too ({threads})"
    );

    // Answers, with the web service up.
    wait_for(&lab, "all up", |a, _| {
        *a == set(&["198.51.100.10", "198.51.100.20", "198.51.100.30"])
    });
    if xdp {
        assert_answered_by_xdp(&lab);
    }

    // A monitor flip is republished (map writes, without root).
    drop(backend);
    wait_for(&lab, "web down", |a, _| {
        *a == set(&["198.51.100.20", "198.51.100.30"])
    });

    // A reload through the control socket (the file is read as nobody).
    std::fs::write(&lab.config, config(46)).unwrap();
    let out = gslbctl(env!("CARGO_BIN_EXE_gslbctl"), &lab.control, "reload");
    assert!(
        out.status.success(),
        "reload: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for(&lab, "the reloaded TTL", |_, t| *t == set(&["46"]));
    assert_dropped(pid, &nobody, &expected(xdp, &nobody));

    // Steering, saved as nobody (gslbctl fails when the save does).
    gslbctl_args(&lab, &["service", "disable", "spare"]);
    wait_for(&lab, "spare disabled", |a, _| *a == set(&["198.51.100.30"]));
    let saved = std::fs::read_to_string(&state_file).expect("the admin state saved");
    assert!(saved.contains("service spare"), "{saved}");

    // The exit detaches and unpins, as nobody.
    lab.stop(pid);
    if xdp {
        assert_detached_and_unpinned(&lab);
    }

    // The next start (nobody's directory now) keeps spare out, and saves again.
    let pid = start(&mut lab);
    wait_for(&lab, "spare still disabled after the restart", |a, _| {
        *a == set(&["198.51.100.30"])
    });
    gslbctl_args(&lab, &["service", "enable", "spare"]);
    wait_for(&lab, "spare enabled", |a, _| {
        *a == set(&["198.51.100.20", "198.51.100.30"])
    });
    let saved = std::fs::read_to_string(&state_file).unwrap();
    assert!(!saved.contains("service spare"), "{saved}");
    lab.stop(pid);
    if xdp {
        assert_detached_and_unpinned(&lab);
    }
}

/// A state file in a directory nobody may not write and gslbd does not own (root's, not the
/// default): the start is refused, naming the directory, rather than failing every later save.
#[test]
fn gslbd_refuses_a_state_directory_its_user_cannot_write() {
    if !privileged("gslbd_refuses_a_state_directory_its_user_cannot_write") {
        return;
    }
    let dir = TempDir::new("privroot");
    let state_file = dir.0.join("admin-state");
    let lab = GslbdLab::new("privrf", &config_saving(45, &state_file));
    let mut cmd = lab.nsenter(&lab.server_ns, Path::new(env!("CARGO_BIN_EXE_gslbd")));
    cmd.arg("--config").arg(&lab.config).arg("--no-xdp");
    cmd.arg("--control").arg(&lab.control);
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started:\n{stderr}");
    assert!(
        stderr.contains(&format!("\"nobody\" may not write in {}", dir.0.display())),
        "{stderr}"
    );
    assert!(!state_file.exists());
}

#[test]
fn gslbd_runs_as_nobody_with_the_capabilities_it_uses() {
    if privileged("gslbd_runs_as_nobody_with_the_capabilities_it_uses") {
        runs_as_nobody(true);
    }
}

#[test]
fn gslbd_without_xdp_keeps_no_bpf_capability() {
    if privileged("gslbd_without_xdp_keeps_no_bpf_capability") {
        runs_as_nobody(false);
    }
}

/// A gslbd run as root left XDP attached (`--keep-attached`): the next one, which becomes
/// nobody, adopts its pins and swaps its program into the pinned link (both root's, given to
/// nobody before the drop), answers, and detaches and unpins on exit.
#[test]
fn gslbd_as_nobody_takes_over_from_a_root_gslbd() {
    if !privileged("gslbd_as_nobody_takes_over_from_a_root_gslbd") {
        return;
    }
    // The admin state in the test's own directory (made by gslbd, so it may give it to nobody).
    let state_root = TempDir::new("privupstate");
    let state_file = state_root.0.join("state").join("admin-state");
    let as_root = format!("state_file = \"{}\"", state_file.display());
    let mut lab = GslbdLab::new("privup", &config_as(45, &as_root));
    let _backend = lab.tcp_backend(
        &lab.server_ns.clone(),
        BACKEND.parse::<SocketAddr>().unwrap(),
    );
    let gslbd = env!("CARGO_BIN_EXE_gslbd");
    let mut first = lab.gslbd(gslbd);
    first.arg("--keep-attached");
    let pid = lab.start(first);
    wait_for(&lab, "root gslbd answers", |a, _| a.len() == 3);
    lab.stop(pid);
    assert!(
        lab.pins.join(format!("link-{SERVER_IF}")).exists(),
        "XDP left attached"
    );

    std::fs::write(&lab.config, config_saving(46, &state_file)).unwrap();
    let pid = lab.start(lab.gslbd(gslbd));
    let nobody = User::lookup("nobody").unwrap().expect("a user nobody");
    assert_dropped(pid, &nobody, &expected(true, &nobody));
    wait_for(&lab, "the new gslbd's answers", |a, t| {
        a.len() == 3 && *t == set(&["46"])
    });
    assert_answered_by_xdp(&lab);
    lab.stop(pid);
    assert_detached_and_unpinned(&lab);
}
