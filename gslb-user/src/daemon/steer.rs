//! The control socket's steering commands in gslbd's loop (`crate::steering`): a command that
//! names something the running configuration has changes the world's admin state, and the
//! reply waits for the republish it triggers.

use tokio::sync::oneshot;
use tracing::{info, warn};

use crate::{
    control::{ControlRequestError, Steer},
    world::World,
};

/// A command that changed the admin state, waiting for its republish to be answered.
pub(super) struct Pending {
    reply: oneshot::Sender<Result<String, ControlRequestError>>,
    command: crate::steering::Command,
}

impl Pending {
    /// Tells the requester how it went: `published` or not.
    pub(super) fn answer(self, published: bool) {
        let c = &self.command;
        let state = if c.enable { "enabled" } else { "disabled" };
        let outcome = if published {
            Ok(format!("{} {} {state}\n", c.target, c.name))
        } else {
            Err(ControlRequestError::SteerPublishFailed {
                target: c.target,
                name: c.name.clone(),
                state,
            })
        };
        let _ = self.reply.send(outcome);
    }
}

/// Applies `request` to `world`: `Some` when the admin state changed (the caller republishes,
/// then answers), `None` when it was answered already (an unknown name, or nothing to change).
pub(super) fn apply(world: &mut World, request: Steer) -> Option<Pending> {
    let Steer { command, reply } = request;
    let c = &command;
    if !c.target.exists(&world.config, &c.name) {
        let _ = reply.send(Err(ControlRequestError::UnknownName {
            target: c.target,
            name: c.name.clone(),
        }));
        return None;
    }
    if !world.admin.apply(c) {
        let state = if c.enable { "enabled" } else { "disabled" };
        let _ = reply.send(Ok(format!("{} {} {state} already\n", c.target, c.name)));
        return None;
    }
    if c.enable {
        info!(kind = %c.target, name = c.name, "enabled by the operator");
    } else {
        warn!(kind = %c.target, name = c.name, "disabled by the operator: out of the answers");
    }
    Some(Pending { reply, command })
}
