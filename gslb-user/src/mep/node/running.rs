//! A node run as a supervised task on a duplicate of a bound listener, so that a restarted node
//! (a supervised restart, or a reload that changed its settings) keeps the port and the
//! connections waiting in its backlog; stopped within a grace period.

use std::{sync::Arc, time::Duration};

use tokio::{net::TcpListener, sync::watch};
use tracing::warn;

use super::{MepConfig, MepNode, MepView};
use crate::supervise::Supervised;

/// How long a node being stopped gets to close its links before it is aborted.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A running node, its views, and its stop.
pub struct RunningNode {
    node: MepNode,
    views: watch::Receiver<Arc<MepView>>,
    stop: Option<watch::Sender<bool>>,
    task: Option<Supervised>,
}

impl RunningNode {
    /// Runs a node with `config` on a duplicate of `listener`; a node that dies or fails is
    /// restarted (with backoff) on another duplicate.
    pub fn spawn(listener: &std::net::TcpListener, config: MepConfig) -> std::io::Result<Self> {
        let listener = listener.try_clone()?;
        let node = MepNode::new();
        let views = node.subscribe();
        let (stop, stopped) = watch::channel(false);
        let task = crate::supervise::spawn(format!("mep-node/{}", config.site), {
            let node = node.clone();
            move |_| {
                let (node, config, mut stopped) = (node.clone(), config.clone(), stopped.clone());
                let listener = listener.try_clone().and_then(TcpListener::from_std);
                async move {
                    let stop = async move {
                        let _ = stopped.wait_for(|s| *s).await;
                    };
                    node.run(listener?, config, stop)
                        .await
                        .map_err(std::io::Error::other)
                }
            }
        });
        Ok(RunningNode {
            node,
            views,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The node (for its counters and view).
    pub fn node(&self) -> &MepNode {
        &self.node
    }

    /// The node's views, as it publishes them.
    pub fn views(&mut self) -> &mut watch::Receiver<Arc<MepView>> {
        &mut self.views
    }

    /// Stops the node, closing its links, and waits for it (bounded: a node that does not stop
    /// in time is aborted).
    pub async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        let Some(mut task) = self.task.take() else {
            return;
        };
        if tokio::time::timeout(STOP_GRACE, &mut task).await.is_err() {
            warn!("MEP node did not stop in time; aborted");
            task.abort();
        }
    }
}
