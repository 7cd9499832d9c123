//! The engine's own view of a service ([`ServiceKey`]), and why a model is refused
//! ([`PolicyError`]).

use super::pick::stable_hash;
use super::{MAX_CHAIN, MAX_PREFERRED_LOCATIONS};

/// A stable identity of a service: the same name gives the same id in every configuration
/// and every process, so hashed picks survive reloads and reordering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceKey(pub u64);

impl ServiceKey {
    pub fn from_name(name: &str) -> ServiceKey {
        ServiceKey(stable_hash(name.as_bytes()))
    }
}

/// An inconsistent [`Model`](crate::model::Model). A validated configuration never produces one; the configuration
/// reports the same problems with file positions.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("service {service:?}: site {site} does not exist ({sites} sites)")]
    UnknownSite {
        service: String,
        site: usize,
        sites: usize,
    },
    #[error("topology record {record}: site {site} does not exist ({sites} sites)")]
    UnknownTopologySite {
        record: usize,
        site: usize,
        sites: usize,
    },
    #[error("domain {domain:?}: service {service} does not exist ({services} services)")]
    UnknownService {
        domain: String,
        service: usize,
        services: usize,
    },
    #[error("domain {domain:?}: service {service:?} is bound twice")]
    DuplicateService { domain: String, service: String },
    #[error("domain {domain:?}: {len} methods in the chain, 1..={MAX_CHAIN} allowed")]
    ChainLength { domain: String, len: usize },
    #[error("domain {domain:?}: backup domain {backup} does not exist")]
    UnknownBackup { domain: String, backup: usize },
    #[error("domain {domain:?}: its backup domains lead back to it")]
    BackupCycle { domain: String },
    #[error("domain {domain:?}: source mask /{v4} /{v6} is longer than an address")]
    Mask { domain: String, v4: u8, v6: u8 },
    #[error("action {action:?}: {len} preferred locations, 1..={MAX_PREFERRED_LOCATIONS} allowed")]
    PreferredLocations { action: String, len: usize },
    #[error("policies {first:?} and {second:?} have the same priority {priority}")]
    DuplicatePriority {
        first: String,
        second: String,
        priority: u32,
    },
    #[error("unknown {kind} {name:?}")]
    UnknownName { kind: &'static str, name: String },
}
