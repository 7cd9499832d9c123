//! MEP: `node` (nodes over real TCP on loopback), `identity` (keys and integrity), `config`
//! (the `[mep]` section), `daemon` (gslbd's MEP wiring), `show` (`gslbctl show mep`); `peer`
//! is the other site of the in-process tests.

mod config;
pub(crate) mod daemon;
mod identity;
mod node;
pub(crate) mod peer;
mod show;
