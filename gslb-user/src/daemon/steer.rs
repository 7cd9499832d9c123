//! The control socket's steering commands in gslbd's loop (`crate::steering`): a command that
//! names something the running configuration has changes the world's admin state, and the
//! reply waits for the republish it triggers. Every change is written to `server.state_file`
//! at once; a reload drops what the new configuration no longer has.

use std::path::Path;

use tokio::sync::oneshot;
use tracing::{error, info, warn};

use crate::{
    control::{ControlRequestError, Steer},
    world::World,
};

/// A command that changed the admin state, waiting for its republish to be answered.
pub(super) struct Pending {
    reply: oneshot::Sender<Result<String, ControlRequestError>>,
    command: crate::steering::Command,
    /// Why the state file was not written, if it was not.
    not_saved: Option<String>,
}

impl Pending {
    /// Tells the requester how it went: `published` or not.
    pub(super) fn answer(self, published: bool) {
        let c = &self.command;
        let state = if c.enable { "enabled" } else { "disabled" };
        let outcome = if !published {
            Err(ControlRequestError::SteerPublishFailed {
                target: c.target,
                name: c.name.clone(),
                state,
            })
        } else if let Some(reason) = self.not_saved {
            Err(ControlRequestError::StateNotSaved {
                target: c.target,
                name: c.name.clone(),
                state,
                reason,
            })
        } else {
            Ok(format!("{} {} {state}\n", c.target, c.name))
        };
        let _ = self.reply.send(outcome);
    }
}

/// Applies `request` to `world`, and writes the admin state to `state_file`: `Some` when the
/// admin state changed (the caller republishes, then answers), `None` when it was answered
/// already (an unknown name, or nothing to change).
pub(super) fn apply(world: &mut World, state_file: &Path, request: Steer) -> Option<Pending> {
    let Steer { command, reply } = request;
    let c = &command;
    if !c.target.exists(world.model(), &c.name) {
        let _ = reply.send(Err(ControlRequestError::UnknownName {
            target: c.target,
            name: c.name.clone(),
        }));
        return None;
    }
    if !world.update_admin(|a| a.apply(c)) {
        let state = if c.enable { "enabled" } else { "disabled" };
        let _ = reply.send(Ok(format!("{} {} {state} already\n", c.target, c.name)));
        return None;
    }
    if c.enable {
        info!(kind = %c.target, name = c.name, "enabled by the operator");
    } else {
        warn!(kind = %c.target, name = c.name, "disabled by the operator: out of the answers");
    }
    let not_saved = save(world, state_file).err();
    Some(Pending {
        reply,
        command,
        not_saved,
    })
}

/// Writes the admin state to `path`; the error's text (logged) if it cannot.
fn save(world: &World, path: &Path) -> Result<(), String> {
    world.admin().save(path).map_err(|e| {
        let reason = super::anyhow_like(&e);
        error!(error = reason, "the admin state will not survive a restart");
        reason
    })
}

/// After a reload (or at start): drops the disabled names `world`'s configuration no longer
/// has, with a warning, and writes it to `state_file` if any went.
pub(super) fn retain_known(world: &mut World, state_file: &Path) {
    let model = world.model().clone();
    let dropped = world.update_admin(|a| a.retain_known(&model));
    for (target, name) in &dropped {
        warn!(kind = %target, name, "was disabled, but the configuration has it no longer: dropped from the admin state");
    }
    if !dropped.is_empty() {
        let _ = save(world, state_file);
    }
}
