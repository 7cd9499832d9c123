//! MEP, the metric exchange protocol between the sites of one GSLB deployment (spec section 6,
//! docs/mep.md): site status, service states and load, LDNS RTT rows and persistence entries,
//! over authenticated TCP sessions, in a flat mesh or a parent/child topology with backup parents.
//!
//! - [`frame`]: the wire format, a hand-rolled binary encoding whose decoder returns a typed
//!   [`frame::FrameError`] for anything that is not a valid frame (fuzzed: fuzz/mep_frame).
//! - [`auth`]: site keys (Ed25519), the signed handshake with ephemeral X25519, session keys
//!   and the per-frame MACs (HMAC-SHA256 over a sequence number and the frame).
//! - [`session`]: one session: handshake, version negotiation, reader and writer, heartbeats,
//!   dead-peer and write timeouts, and the per-reason close counters.
//! - [`topology`]: the configured sites and the adoption logic as a pure state machine.
//! - [`node`]: [`MepNode`], a site's endpoint: accepts and opens sessions as the topology says,
//!   reconnects with backoff, merges what peers send into a [`MepView`].

pub mod auth;
pub mod frame;
pub mod intake;
pub mod node;
pub mod session;
pub mod topology;

pub use auth::{KeyError, PublicKey, SiteKey};
pub use frame::{Role, RttProtocol, RttRow, ServiceReport, SiteStatus};
pub use node::{
    LocalState, MepConfig, MepConfigError, MepError, MepNode, MepStateError, MepStats, MepTls,
    MepView, RemoteSite, RunningNode, SUPPORTED_VERSIONS, SessionInfo, TlsInput,
};
pub use session::{Audience, CloseReason};
pub use topology::{DEFAULT_PORT, SiteSpec, SiteTree, SiteView, TopologyError, TopologyTiming};
