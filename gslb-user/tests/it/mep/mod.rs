//! MEP: `node` (nodes over real TCP on loopback), `identity` (keys and integrity), `config`
//! (the `[mep]` section), `daemon` (gslbd's MEP wiring), `show` (`gslbctl show mep`); `peer`
//! is the other site of the in-process tests.

mod config;
pub(crate) mod daemon;
mod identity;
mod node;
pub(crate) mod peer;
mod show;

use std::time::{Duration, Instant};

use gslb_user::mep::{MepConfig, MepNode, MepView, TopologyTiming};
use tokio::time::{sleep, timeout};

/// The timers of the in-process MEP tests: heartbeats, dead peers, handshakes, reconnects,
/// views and adoption in tens to hundreds of milliseconds.
fn fast_timers(mut c: MepConfig) -> MepConfig {
    c.heartbeat = Duration::from_millis(50);
    c.dead_after = Duration::from_millis(400);
    c.handshake_timeout = Duration::from_secs(1);
    c.reconnect_min = Duration::from_millis(20);
    c.reconnect_max = Duration::from_millis(200);
    c.view_interval = Duration::from_millis(20);
    c.timing = TopologyTiming {
        adopt_after: Duration::from_millis(400),
        accept_after: Duration::from_millis(200),
        startup_grace: Duration::from_secs(1),
    };
    c
}

/// Upper bound of every wait of the in-process MEP tests, which only a broken node reaches.
pub(super) const WAIT: Duration = Duration::from_secs(10);

/// Waits for a view of `node`'s that `f` accepts (a node's view before its first publication,
/// which is empty, does not count).
pub(super) async fn wait_view(node: &MepNode, what: &str, f: impl Fn(&MepView) -> bool) {
    let mut rx = node.subscribe();
    let r = timeout(WAIT, async {
        loop {
            {
                // Before its first publication a node's view is empty.
                let v = rx.borrow_and_update();
                if !v.site.is_empty() && f(&v) {
                    return;
                }
            }
            assert!(rx.changed().await.is_ok(), "node stopped");
        }
    })
    .await;
    assert!(
        r.is_ok(),
        "timed out waiting for {what}; view: {:#?}",
        node.view()
    );
}

/// Polls `f` every 10 ms until it holds.
pub(super) async fn wait_until(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        sleep(Duration::from_millis(10)).await;
    }
}
