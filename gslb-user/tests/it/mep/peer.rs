//! The other site of the in-process MEP tests, as a bare [`MepNode`] run by the test: it
//! publishes the states the test gives it and shows what gslbd sends.

use crate::mep_keys;

use std::time::Duration;

use gslb_user::mep::{MepConfig, MepNode, MepView, PublicKey, SiteKey, SiteSpec, SiteTree};
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};

/// How long the peer may take to see what a test waits for, and to stop.
const WAIT: Duration = Duration::from_secs(15);

/// What site `site` of `sites` runs with (the test keys of [`mep_keys`]), with fast timers:
/// heartbeats every 100 ms, dead after 500 ms, reconnecting within 20 to 200 ms.
pub(crate) fn config(site: &str, sites: Vec<SiteSpec>) -> MepConfig {
    let key = SiteKey::from_pem(mep_keys::key(site).private_pem.as_bytes()).unwrap();
    let sites = sites
        .into_iter()
        .map(|s| {
            let k = PublicKey::parse(&mep_keys::key(&s.name).public).unwrap();
            s.with_key(k)
        })
        .collect();
    let mut c = MepConfig::new(site, key, SiteTree::new(sites).unwrap());
    c.heartbeat = Duration::from_millis(100);
    c.dead_after = Duration::from_millis(500);
    c.reconnect_min = Duration::from_millis(20);
    c.reconnect_max = Duration::from_millis(200);
    c.view_interval = Duration::from_millis(20);
    c
}

/// The other site, running on `listener` until stopped.
pub(crate) struct Peer {
    pub node: MepNode,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Peer {
    pub(crate) async fn start(listener: TcpListener, config: MepConfig) -> Peer {
        let node = MepNode::new();
        let (stop, stop_rx) = oneshot::channel::<()>();
        let task = tokio::spawn({
            let node = node.clone();
            async move {
                node.run(listener, config, async {
                    let _ = stop_rx.await;
                })
                .await
                .expect("peer runs");
            }
        });
        Peer {
            node,
            stop: Some(stop),
            task,
        }
    }

    /// Waits until the peer's view satisfies `f`, or fails the test naming `what`.
    pub(crate) async fn wait(&self, what: &str, f: impl Fn(&MepView) -> bool) {
        let mut rx = self.node.subscribe();
        let done = tokio::time::timeout(WAIT, async {
            loop {
                {
                    let v = rx.borrow_and_update();
                    if !v.site.is_empty() && f(&v) {
                        return;
                    }
                }
                rx.changed().await.expect("peer runs");
            }
        })
        .await;
        assert!(
            done.is_ok(),
            "timed out waiting for {what}; peer's view: {:#?}",
            self.node.view()
        );
    }

    /// Stops it; it must end in time.
    pub(crate) async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("peer stops")
            .unwrap();
    }
}
