//! gslbd run in the test's process ([`Gslbd`]) and what tests ask of it: its answers until they
//! become what they wait for, the control socket's counters, the configurations of two parents.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gslb_user::{
    control::{self, ControlPath, Reload},
    daemon::{self, DaemonError, Listeners, Overrides, Started},
};
use hickory_proto::rr::RecordType;
use tokio::{
    sync::{mpsc, oneshot},
    task::JoinHandle,
};

use super::{answer_addrs, ask_loopback, init_tracing, ips};

/// Held by the tests whose in-process gslbd runs a task that every gslbd of this process names
/// alike (`mep-persist-sync` with MEP on), shared among them; exclusively by the tests that kill
/// such a task by its name (`supervise::inject_panic` kills every task of that name), so that
/// no other test's daemon is killed with it. All the tests are one binary, so they share the
/// supervision registry.
static SAME_NAMED_TASKS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// For a test whose gslbd runs MEP (see [`SAME_NAMED_TASKS`]); hold it until gslbd stopped.
pub(crate) async fn running_same_named_tasks() -> tokio::sync::RwLockReadGuard<'static, ()> {
    SAME_NAMED_TASKS.read().await
}

/// For a test that kills `mep-persist-sync` (see [`SAME_NAMED_TASKS`]).
pub(crate) async fn killing_same_named_tasks() -> tokio::sync::RwLockWriteGuard<'static, ()> {
    SAME_NAMED_TASKS.write().await
}

/// gslbd running in this process on `path`, on the sockets the test bound ([`bound_dns`],
/// and [`bound_mep`] for MEP) whose ports the file names; responder only (`no_xdp`, so no
/// privileges are needed) unless the test's [`Overrides`] say otherwise.
pub(crate) struct Gslbd {
    /// What SIGHUP and the control socket's `reload` feed: a [`Reload`] without a reply is
    /// SIGHUP's.
    pub reloads: mpsc::Sender<Reload>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), DaemonError>>,
    /// How long it may take to start, to answer a reload and to stop.
    wait: Duration,
}

impl Gslbd {
    /// Starts gslbd on the file `path` and the sockets `dns`, responder only, with its control
    /// socket at `control` (required) if given, and waits until it is ready.
    pub(crate) async fn start_bound(
        path: &Path,
        dns: Listeners,
        control: Option<PathBuf>,
        wait: Duration,
    ) -> Gslbd {
        Gslbd::start_bound_with(path, Gslbd::responder_only(control), dns, wait).await
    }

    /// What [`Gslbd::start_bound`] runs with: the responder alone, the control socket at
    /// `control` (required) if given.
    pub(crate) fn responder_only(control: Option<PathBuf>) -> Overrides {
        Overrides {
            no_xdp: true,
            control: control.map(|path| ControlPath {
                path,
                required: true,
            }),
            ..Overrides::default()
        }
    }

    /// [`Gslbd::start_bound`] with the command line's `overrides` (the fast path loaded, say).
    pub(crate) async fn start_bound_with(
        path: &Path,
        overrides: Overrides,
        dns: Listeners,
        wait: Duration,
    ) -> Gslbd {
        Gslbd::try_start_bound_with(path, overrides, dns, wait)
            .await
            .expect("gslbd starts")
    }

    /// [`Gslbd::start_bound_with`], for a test of a start that fails: the error of a gslbd
    /// that ended before it was ready.
    pub(crate) async fn try_start_bound_with(
        path: &Path,
        overrides: Overrides,
        dns: Listeners,
        wait: Duration,
    ) -> Result<Gslbd, DaemonError> {
        init_tracing();
        let (ready_tx, ready_rx) = oneshot::channel();
        let (stop, stop_rx) = oneshot::channel::<()>();
        let (reloads, reload_rx) = mpsc::channel::<Reload>(4);
        let path = path.to_owned();
        let task = tokio::spawn(async move {
            let config = daemon::load_config(&path, &overrides)?;
            let started = Started::with_listeners(&config, &overrides, dns)?;
            let ready = move || {
                let _ = ready_tx.send(());
            };
            let shutdown = async move {
                let _ = stop_rx.await;
            };
            Box::pin(daemon::run(
                path, config, overrides, started, ready, shutdown, reload_rx,
            ))
            .await
        });
        let ready = tokio::time::timeout(wait, ready_rx)
            .await
            .expect("gslbd ready (or failed) in time");
        if ready.is_err() {
            // `ready` was dropped unsent: `run` ended before it was ready.
            let ended = tokio::time::timeout(wait, task)
                .await
                .expect("gslbd ends")
                .expect("gslbd's task");
            return Err(ended.expect_err("gslbd ended before it was ready, without an error"));
        }
        Ok(Gslbd {
            reloads,
            stop,
            task,
            wait,
        })
    }

    /// Reloads the file; the outcome once the new answers are published (or refused).
    pub(crate) async fn reload(&self) -> Result<(), String> {
        let (reply, outcome) = oneshot::channel();
        self.reloads
            .send(Reload { reply: Some(reply) })
            .await
            .unwrap();
        tokio::time::timeout(self.wait, outcome)
            .await
            .expect("reload answered in time")
            .expect("reload answered")
            .map_err(|refused| refused.to_string())
    }

    /// Stops it as SIGTERM does; it must shut down cleanly.
    pub(crate) async fn stop(self) {
        self.stop.send(()).unwrap();
        tokio::time::timeout(self.wait, self.task)
            .await
            .expect("gslbd stops")
            .unwrap()
            .expect("clean shutdown");
    }
}

/// How the files of the in-process gslbd tests begin: gslbd on 127.0.0.1:`port`, authoritative
/// for example.com, whose name server ns1.example.com is 127.0.0.1.
pub(crate) fn loopback_zone(port: u16) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1"]
dns_port = {port}

[[zone]]
name = "example.com"
ns = ["ns1.example.com"]
  [zone.soa]
  rname = "hostmaster.example.com"
  [[zone.record]]
  name = "ns1"
  type = "A"
  value = "127.0.0.1"
"#
    )
}

/// `gslbctl stats` of the gslbd whose control socket is `path`, as (name, value): the lines
/// whose value is a number.
pub(crate) async fn control_stats(path: &Path) -> std::collections::HashMap<String, u64> {
    let body = control::request(path, "stats", WAIT)
        .await
        .unwrap_or_else(|e| panic!("stats from {}: {e}", path.display()));
    body.lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter_map(|(k, v)| Some((k.to_owned(), v.parse().ok()?)))
        .collect()
}

/// The TCP monitor "tcp" of the tests that take a service down by closing its backend: every
/// 50 ms, DOWN after 2 failures (100 to 150 ms), UP after one success.
pub(crate) const FAST_TCP_MONITOR: &str = r#"[[monitor]]
name = "tcp"
type = "tcp"
interval_ms = 50
timeout_ms = 200
fall = 2
rise = 1
"#;

/// www.example.com over the services "a" (answering 198.51.100.1) and "b" (198.51.100.2) of
/// site "dc", each checked by [`FAST_TCP_MONITOR`] on its backend `(address, port)`, `a_extra`
/// in a's table (a weight), and `backup` the domain's backup address. Follows a file's
/// `[server]`, zones and other tables (it begins with the `[[monitor]]` array).
pub(crate) fn monitored_pair(
    a: (&str, u16),
    b: (&str, u16),
    a_extra: &str,
    backup: &str,
) -> String {
    let ((a_ip, a_port), (b_ip, b_port)) = (a, b);
    format!(
        r#"
{FAST_TCP_MONITOR}

[[site]]
name = "dc"
ip = "192.0.2.1"

[[service]]
name = "a"
ip = "{a_ip}"
port = {a_port}
public_ip = "198.51.100.1"
site = "dc"
{a_extra}
monitors = ["tcp"]

[[service]]
name = "b"
ip = "{b_ip}"
port = {b_port}
public_ip = "198.51.100.2"
site = "dc"
monitors = ["tcp"]

[[gslb_domain]]
name = "www.example.com"
answer = "all"
services = ["a", "b"]
backup_ip = ["{backup}"]
"#
    )
}

/// The address web1 answers with in [`two_parents`].
pub(crate) const WEB1: &str = "192.0.2.1";
/// The address web2 answers with in [`two_parents`].
pub(crate) const WEB2: &str = "192.0.2.2";

/// The sites and services of the MEP tests with two parents: p1 at 127.0.0.1 (with `p1_extra`
/// in its table) and p2 at 127.0.0.2, on their MEP ports; web1 is p1's, answering [`WEB1`],
/// checked by a TCP monitor ("tcp", fall 2 at 50 ms) on 127.0.0.1:`backend`; web2 is p2's.
pub(crate) fn two_parents(p1_mep: u16, p2_mep: u16, backend: u16, p1_extra: &str) -> String {
    format!(
        r#"
[[site]]
name = "p1"
ip = "127.0.0.1"
mep_port = {p1_mep}
{p1_extra}

[[site]]
name = "p2"
ip = "127.0.0.2"
mep_port = {p2_mep}

{FAST_TCP_MONITOR}

[[service]]
name = "web1"
ip = "127.0.0.1"
port = {backend}
public_ip = "{WEB1}"
site = "p1"
monitors = ["tcp"]

[[service]]
name = "web2"
ip = "{WEB2}"
site = "p2"
"#
    )
}

/// Longest wait of the in-process gslbd tests for anything (the CI machine runs other suites
/// at the same time).
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// Polls `f` every 10 ms until it holds, or panics after [`WAIT`].
pub(crate) async fn until(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + WAIT;
    while !f().await {
        assert!(
            std::time::Instant::now() < deadline,
            "not within {WAIT:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The A answer for www.example.com from the server on 127.0.0.1:`port`, in reply order (asked
/// off the runtime's threads, as [`ask_loopback`] blocks).
pub(crate) async fn www(port: u16) -> Vec<IpAddr> {
    tokio::task::spawn_blocking(move || {
        answer_addrs(&ask_loopback(port, "www.example.com.", RecordType::A))
    })
    .await
    .expect("the query's thread")
}

/// Asks [`www`] until it is `want` in this order (monitors take a few intervals, a reload is
/// applied asynchronously), or panics after [`WAIT`].
pub(crate) async fn answer_becomes(port: u16, want: &[&str]) {
    www_becomes(port, want, false, "www").await;
}

/// [`answer_becomes`] in any order; `what` says what the answer shows.
pub(crate) async fn answer_set_becomes(port: u16, want: &[&str], what: &str) {
    www_becomes(port, want, true, what).await;
}

async fn www_becomes(port: u16, want: &[&str], any_order: bool, what: &str) {
    let sorted = |mut v: Vec<IpAddr>| {
        if any_order {
            v.sort();
        }
        v
    };
    let want = sorted(ips(want));
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let got = sorted(www(port).await);
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: the answer stayed {got:?}, not {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
