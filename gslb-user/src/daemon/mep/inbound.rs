//! MEP in: every view the node publishes becomes `world.mep` when `mep::intake` takes it, and
//! other parents' RTT columns are merged into `world.rtt` (`probe::RemoteColumns`).

use std::time::Instant;

use super::Mep;
use crate::world::World;

impl Mep {
    /// Resolves when the node has a new view (or a kept view's time is up); then call
    /// [`Mep::apply`]. Pending forever without MEP. Cancel-safe.
    pub async fn changed(mep: &mut Option<Mep>) {
        let Some(m) = mep else {
            return std::future::pending().await;
        };
        let until = m.intake.held_until();
        tokio::select! {
            r = m.running.views().changed() => {
                if r.is_err() {
                    // The node's handle keeps the sender: not reached.
                    std::future::pending::<()>().await;
                }
            }
            () = tokio::time::sleep_until(until.unwrap_or_else(Instant::now).into()), if until.is_some() => {}
        }
    }

    /// Takes the node's latest view into `world`: `world.mep`, and other parents' RTT rows into
    /// `world.rtt`. True when the answers may change at once (`Intake::take`); a change of load
    /// only is for the load pacer to weigh (`Loads::note`).
    pub fn apply(&mut self, world: &mut World) -> bool {
        let view = self.running.views().borrow_and_update().clone();
        if !self.intake.admit(&view) {
            return false;
        }
        if let Some(rtt) = &world.rtt {
            self.rtt.merge(&self.parents, rtt, &view);
        }
        let changed = self.intake.take(&view);
        world.set_mep(Some(view));
        changed
    }
}
