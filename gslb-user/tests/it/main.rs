//! gslb-user's integration tests, one binary (as hickory-dns does): each module is what was a
//! test binary of its own, and `cargo test -p gslb-user --test it MODULE::` runs one of them.
//! A subject with several modules is a folder (`mep/`, `xdp/`, `rtt/`, `load/`, `persist/`,
//! `health/`, `compile_equivalence/`);
//! `e2e` holds the network-namespace tests that run gslbd (`CARGO_BIN_EXE_gslbd`); `common` is
//! the kit they share, above the lab of the `gslb-tests` crate.

mod common;
#[path = "../mep_keys/mod.rs"]
mod mep_keys;
#[path = "../../../benches/rng.rs"]
mod rng;
#[path = "../../../benches/zone_files.rs"]
mod zone_files;

mod e2e;

mod admin;
mod cname_domains;
mod compile_equivalence;
mod cookies;
mod daemon;
mod decisions;
mod engine_views;
mod examples;
mod health;
mod hostile;
mod imports;
mod load;
mod location_watch;
mod logs;
mod max_answers;
mod mep;
mod persist;
mod republish;
mod rotation;
mod rtt;
mod server;
mod show_services;
mod steering;
mod supervise;
mod xdp;
mod zone_file_combined;
mod zone_file_watch;
