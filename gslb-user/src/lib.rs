//! gslb: the controller and responder side of the GSLB DNS server. See ARCHITECTURE.md.

pub mod admin;
pub mod compile;
pub mod config;
pub mod control;
pub mod daemon;
pub mod dataplane;
mod error_text;
pub mod health;
pub mod location;
pub mod log_limit;
pub mod mep;
pub mod model;
pub mod persist;
pub mod policy;
pub mod privilege;
pub mod probe;
pub mod responder;
pub mod server;
pub mod steering;
pub mod supervise;
pub mod tls;
pub mod world;
