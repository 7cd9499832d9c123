//! The topology: which sites talk to which, and the backup-parent logic, as plain data and a
//! pure state machine (no I/O, time passed in), driven by the node (and by the tests directly).
//!
//! - [`SiteTree`]: the configured sites (validated: ≤ 32 parents, ≤ 1024 children, a child's
//!   parent exists and is a parent, backup lists of ≤ 5 existing other parents) and the static
//!   rules: who initiates a session ([`SiteTree::initiator`]), who answers DNS, who exchanges
//!   network metrics, who may call whom.
//! - [`SiteView`]: one site's changing view: its sessions up or down and since when, the backup
//!   lists it knows, the children it adopted (a parent) or the parent it is attached to (a
//!   child). Events in ([`SiteView::session_up`], [`SiteView::session_down`],
//!   [`SiteView::adopt_request`], …), [`Action`]s out, and the sessions it wants to open
//!   ([`SiteView::desired_outbound`]).
//!
//! A site is DOWN in a view when the view's own MEP session to it is down; a parent is taken as
//! DOWN for adoption only after `adopt_after` (a session never up counts from `startup_grace` after
//! the view's start, so a cold start adopts nothing while the real parents are still connecting).

mod tree;
mod view;

pub use self::tree::{SiteSpec, SiteTree, TopologyError};
pub use self::view::{Action, Purpose, SiteView, TopologyTiming};

/// NetScaler's MEP port.
pub const DEFAULT_PORT: u16 = 3011;
/// Most parents in one deployment.
pub const MAX_PARENTS: usize = 32;
/// Most children in one deployment.
pub const MAX_CHILDREN: usize = 1024;

/// Whether a remote service is UP: a local monitor watching it decides; otherwise the state
/// its site reported over MEP, and DOWN when the MEP path to its site is down.
pub fn remote_service_up(
    local_monitor: Option<bool>,
    site_reachable: bool,
    reported_up: Option<bool>,
) -> bool {
    local_monitor.unwrap_or(site_reachable && reported_up == Some(true))
}

#[cfg(test)]
mod tests;
