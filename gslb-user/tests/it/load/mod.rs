//! Load and bandwidth: `config` (load monitors in the configuration), `monitor` (against a
//! small HTTP server), `nginx` (against real nginx), `mep` (loads over MEP), `links` (inbound
//! `[[link]]` bandwidth).

mod config;
mod links;
mod mep;
mod monitor;
mod nginx;
