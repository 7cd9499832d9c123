//! Per-query decisions for the GSLB domains the fast path leaves to the responder
//! (`Snapshot::engine_domains`: source-IP hash, persistence, RTT over the budget): the engine
//! asked for each query, with the client's location, RTT row, static view and sticky entry.

use std::{collections::HashSet, net::IpAddr, sync::Arc};

use gslb_common::QTYPE_AAAA;
use hickory_proto::rr::Record;

use super::lookup::address_records;
use super::{canonical, turns::Turns};
use crate::{
    compile::{
        LdnsRtt, Snapshot,
        partition::{Segments, Steps, key_of},
    },
    config::Config,
    location::db::LocationDb,
    persist::{Store as PersistStore, Tables as PersistTables},
    policy::{
        Client as EngineClient, Engine, Fallback, Query as EngineQuery, ServiceState,
        State as EngineState,
    },
};

/// Per-query decisions for the domains the fast path leaves to the responder
/// (`Snapshot::engine_domains`).
pub(super) struct Decisions {
    pub(super) engine: Engine,
    pub(super) domains: HashSet<String>,
    /// By configuration service index.
    pub(super) states: Vec<ServiceState>,
    /// The RTT rows and the step function client → row + 1 (0: none).
    pub(super) rtt: Arc<Vec<LdnsRtt>>,
    pub(super) rtt_rows: Arc<Steps>,
    /// Client → static view number.
    pub(super) static_views: Arc<Steps>,
    /// Runs of one class (everything a decision reads but the address): the ECS scope.
    pub(super) classes: Arc<Segments>,
    /// By engine domain index: how many leading bits of the client address its decisions
    /// read besides the class (source-IP hash and persistence masks along its backup chain),
    /// IPv4 and IPv6.
    pub(super) address_bits: Vec<(u8, u8)>,
    /// By configuration service index.
    pub(super) answer_ips: Vec<IpAddr>,
    /// By engine domain index: (TTL, backup addresses).
    pub(super) domain_info: Vec<(u32, Vec<IpAddr>)>,
    pub(super) locations: Option<Arc<LocationDb>>,
    /// This configuration's persistence tables.
    pub(super) persist: Arc<PersistTables>,
    /// Rotation turns by asked domain, qtype and the client's static view
    /// ([`Decisions::turn_index`]): clients of two views interleaved do not share a turn.
    pub(super) turns: Turns,
    /// Static views in the configuration.
    pub(super) views: usize,
}

impl Decisions {
    /// The decisions for `snapshot`'s per-query domains of `config`, `None` when it has none
    /// (then `persistence` keeps no entries).
    pub(super) fn new(
        config: &Config,
        snapshot: &Snapshot,
        locations: Option<Arc<LocationDb>>,
        persistence: &PersistStore,
    ) -> Option<Self> {
        let decisions = if snapshot.engine_domains.is_empty() {
            None
        } else {
            match Engine::from_config(config) {
                Ok(engine) => Some(Decisions {
                    persist: persistence.configure(Some(&engine), &snapshot.services),
                    domains: snapshot.engine_domains.iter().cloned().collect(),
                    states: snapshot.services.clone(),
                    rtt: snapshot.rtt.clone(),
                    rtt_rows: snapshot.rtt_rows.clone(),
                    static_views: snapshot.static_views.clone(),
                    classes: snapshot.classes.clone(),
                    address_bits: address_bits(&engine),
                    answer_ips: config.services.iter().map(|s| s.answer_ip()).collect(),
                    domain_info: config
                        .gslb_domains
                        .iter()
                        .map(|d| (d.ttl, d.backup_ip.clone()))
                        .collect(),
                    turns: Turns::new(2 * config.gslb_domains.len() * (config.views.len() + 1)),
                    views: config.views.len(),
                    engine,
                    locations,
                }),
                Err(error) => {
                    // Validation makes this unreachable; answering nothing for those names is
                    // the safe side if it ever is not.
                    tracing::error!(%error, "decision engine rejected the configuration");
                    None
                }
            }
        };
        if decisions.is_none() {
            persistence.configure(None, &[]);
        }
        decisions
    }

    /// The turn of (engine domain, qtype, static view number).
    pub(super) fn turn_index(&self, domain: usize, aaaa: bool, view: u32) -> usize {
        (2 * domain + usize::from(aaaa)) * (self.views + 1) + view as usize
    }

    /// The ECS scope of a per-query answer to a client subnet of `source` bits: its class's
    /// run, and at least the address bits the decision read, as far as the subnet has them
    /// (the rest of its address is zeros, read alike for every client in it).
    pub(super) fn scope(&self, name: &str, client: IpAddr, source: u8) -> u8 {
        let client = canonical(client);
        let class = self.classes.lookup(client).1;
        let bits = self
            .engine
            .domain_index(name)
            .and_then(|d| self.address_bits.get(d))
            .map_or(0, |&(v4, v6)| if client.is_ipv4() { v4 } else { v6 });
        class.max(bits.min(source))
    }

    /// The decision engine's answer for this client (its location from the database).
    pub(super) fn records(&self, name: &str, qtype: u16, client: IpAddr) -> Vec<Record> {
        let Some(domain) = self.engine.domain_index(name) else {
            return Vec::new();
        };
        let client = canonical(client);
        let location = self.locations.as_ref().and_then(|db| db.lookup(client));
        let rtt = match self.rtt_rows.get(key_of(client)) {
            0 => &[][..],
            row => &self.rtt[row as usize - 1].rtt_us[..],
        };
        let sticky = self.persist.lookup(domain, qtype == QTYPE_AAAA, client);
        let view = self.static_views.get(key_of(client));
        let decision = self.engine.decide(
            domain,
            &EngineQuery { name, qtype },
            &EngineClient {
                addr: client,
                location: location.as_deref(),
                view,
                sticky: sticky.and_then(|s| s.service),
            },
            &EngineState {
                services: &self.states,
                rtt,
            },
        );
        let (ttl, backup) = &self.domain_info[decision.domain.min(self.domain_info.len() - 1)];
        let family = |ip: &IpAddr| ip.is_ipv6() == (qtype == QTYPE_AAAA);
        let turn = self
            .turns
            .next(self.turn_index(domain, qtype == QTYPE_AAAA, view)) as u64;
        let addrs: Vec<IpAddr> = match decision.fallback {
            Some(Fallback::BackupIp) => backup.iter().copied().filter(family).collect(),
            Some(Fallback::Empty) => Vec::new(),
            None => {
                let picked = self.engine.select(&decision, client, turn);
                self.persist.note(sticky.as_ref(), &picked);
                picked
                    .into_iter()
                    .map(|i| self.answer_ips[i])
                    .filter(family)
                    .collect()
            }
        };
        address_records(name, *ttl, addrs)
    }
}

/// Per engine domain: the longest source-IP hash or persistence mask (IPv4, IPv6) along its
/// backup chain, the address bits its per-query decisions read.
fn address_bits(engine: &Engine) -> Vec<(u8, u8)> {
    (0..engine.domain_count())
        .map(|d| {
            let mut bits = (0, 0);
            for b in engine.chain(d) {
                let spec = engine.domain(b);
                let hash = spec.chain.contains(&crate::policy::Method::SourceIpHash);
                let masks = hash
                    .then_some(spec.sourceip_mask)
                    .into_iter()
                    .chain(spec.persistence.map(|p| p.mask));
                for m in masks {
                    bits = (bits.0.max(m.v4), bits.1.max(m.v6));
                }
            }
            bits
        })
        .collect()
}
