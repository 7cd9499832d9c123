//! gslb-user's integration tests, one binary (as hickory-dns does): each module is what was a
//! test binary of its own, and `cargo test -p gslb-user --test it MODULE::` runs one of them.
//! `e2e` holds the network-namespace tests that run gslbd (`CARGO_BIN_EXE_gslbd`); `common` is
//! the kit they share, above the lab of the `gslb-tests` crate.

mod common;
mod fuzz_frames;
#[path = "../mep_keys/mod.rs"]
mod mep_keys;
mod mep_peer;
#[path = "../../../benches/rng.rs"]
mod rng;
#[path = "../../../benches/zone_files.rs"]
mod zone_files;

mod e2e;

mod admin;
mod compile_equivalence;
mod daemon;
mod decisions;
mod engine_views;
mod examples;
mod health;
mod hostile;
mod links;
mod load_config;
mod load_mep;
mod load_monitor;
mod load_nginx;
mod location_watch;
mod logs;
mod mep;
mod mep_config;
mod mep_daemon;
mod mep_identity;
mod mep_show;
mod persist_daemon;
mod persistence;
mod probe;
mod probe_icmp_errors;
mod republish;
mod rotation;
mod rtt_daemon;
mod rtt_feed;
mod rtt_flood;
mod rtt_world;
mod server;
mod show_services;
mod steering;
mod supervise;
mod xdp_ecs_allow;
mod xdp_floor;
mod xdp_fuzz;
mod xdp_hygiene;
mod xdp_rrl;
mod xdp_rtt;
mod xdp_shortcuts;
mod xdp_test_run;
