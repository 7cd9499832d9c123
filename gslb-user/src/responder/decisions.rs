//! Per-query decisions for the GSLB domains the fast path leaves to the responder
//! (`Snapshot::engine_domains`: source-IP hash, persistence, RTT over the budget): the engine
//! asked for each query, with the client's location, RTT row, static view and sticky entry.

use std::{collections::HashMap, net::IpAddr, sync::Arc};

use gslb_common::{QTYPE_A, QTYPE_AAAA};
use hickory_proto::rr::Record;

use super::lookup::address_records;
use super::{canonical, turns::Turns};
use crate::{
    compile::{
        LdnsRtt, Snapshot,
        partition::{AddressSteps, Segments, key_of},
    },
    location::db::LocationDb,
    model::Model,
    persist::{Store as PersistStore, Tables as PersistTables},
    policy::{
        Client as EngineClient, Engine, Fallback, Query as EngineQuery, ServiceState,
        State as EngineState,
    },
};

/// What per-query decisions read of one configuration alone: built once per configuration
/// (the responder keeps it while snapshots carry the same [`Spec`](crate::compile::Spec)).
pub(super) struct EngineData {
    /// The configuration's engine, from its spec: not built again here.
    pub(super) engine: Arc<Engine>,
    /// By engine domain index: how many leading bits of the client address its decisions
    /// read besides the class (source-IP hash and persistence masks along its backup chain),
    /// IPv4 and IPv6.
    address_bits: Vec<(u8, u8)>,
    /// The model the engine decides from: its services' addresses, its domains' TTLs and
    /// backup addresses (the compiler reads the same ones for the fast path's answers).
    model: Arc<Model>,
    /// Static views in the configuration.
    pub(super) views: usize,
}

impl EngineData {
    pub(super) fn new(model: &Arc<Model>, engine: Arc<Engine>) -> Self {
        EngineData {
            address_bits: address_bits(&engine),
            model: model.clone(),
            views: model.views.len(),
            engine,
        }
    }
}

/// Per-query decisions for the domains the fast path leaves to the responder
/// (`Snapshot::engine_domains`), under one snapshot's states.
pub(super) struct Decisions {
    pub(super) data: Arc<EngineData>,
    /// The per-query domains by name as the snapshot names them, with their engine domain
    /// index: resolved once per snapshot, so that a query looks up its name once.
    pub(super) domains: HashMap<String, usize>,
    /// By configuration service index.
    states: Vec<ServiceState>,
    /// By configuration domain index: disabled by the operator.
    disabled_domains: Vec<bool>,
    /// The RTT rows and the step function client → row + 1 (0: none).
    rtt: Arc<Vec<LdnsRtt>>,
    rtt_rows: Arc<AddressSteps>,
    /// Client → static view number.
    static_views: Arc<AddressSteps>,
    /// Runs of one class (everything a decision reads but the address): the ECS scope.
    classes: Arc<Segments>,
    pub(super) locations: Option<Arc<LocationDb>>,
    /// This configuration's persistence tables.
    persist: Arc<PersistTables>,
    /// Rotation turns by asked domain, qtype and the client's static view
    /// ([`Decisions::turn_index`]): clients of two views interleaved do not share a turn.
    pub(super) turns: Turns,
}

impl Decisions {
    /// The decisions for `snapshot`'s per-query domains with the configuration's `data`,
    /// `None` when it has none (then `persistence` keeps no entries).
    pub(super) fn new(
        data: Option<&Arc<EngineData>>,
        snapshot: &Snapshot,
        locations: Option<Arc<LocationDb>>,
        persistence: &PersistStore,
    ) -> Option<Self> {
        let decisions = data
            .filter(|_| !snapshot.engine_domains.is_empty())
            .map(|data| Decisions {
                persist: persistence.configure(Some(&data.engine), &snapshot.services),
                domains: snapshot
                    .engine_domains
                    .iter()
                    .filter_map(|n| Some((n.clone(), data.engine.domain_index(n)?)))
                    .collect(),
                states: snapshot.services.clone(),
                disabled_domains: snapshot.disabled_domains.clone(),
                rtt: snapshot.rtt.clone(),
                rtt_rows: snapshot.rtt_rows.clone(),
                static_views: snapshot.static_views.clone(),
                classes: snapshot.classes.clone(),
                turns: Turns::new(2 * data.model.domains.len() * (data.views + 1)),
                data: data.clone(),
                locations,
            });
        if decisions.is_none() {
            persistence.configure(None, &[]);
        }
        decisions
    }

    /// The turn of (engine domain, qtype, static view number).
    pub(super) fn turn_index(&self, domain: usize, aaaa: bool, view: u32) -> usize {
        (2 * domain + usize::from(aaaa)) * (self.data.views + 1) + view as usize
    }

    /// The ECS scope of a per-query answer to a client subnet of `source` bits: its class's
    /// run, and at least the address bits the decision read, as far as the subnet has them
    /// (the rest of its address is zeros, read alike for every client in it).
    pub(super) fn scope(&self, domain: usize, client: IpAddr, source: u8) -> u8 {
        let client = canonical(client);
        let class = self.classes.lookup(client).1;
        let bits = self
            .data
            .address_bits
            .get(domain)
            .map_or(0, |&(v4, v6)| if client.is_ipv4() { v4 } else { v6 });
        class.max(bits.min(source))
    }

    /// The decision engine's answer for this client (its location from the database): the
    /// domain's A or AAAA records. `domain` is `name`'s engine domain index
    /// ([`Decisions::domains`]).
    pub(super) fn records(
        &self,
        name: &str,
        domain: usize,
        qtype: u16,
        client: IpAddr,
    ) -> Vec<Record> {
        let family = |ip: &IpAddr| ip.is_ipv6() == (qtype == QTYPE_AAAA);
        let (answering, carried) = self.carried(name, domain, qtype, client);
        let addrs: Vec<IpAddr> = match carried {
            Carried::Backup(backup) => backup,
            Carried::Services(picked) => picked
                .into_iter()
                .map(|i| self.data.model.services[i].ip)
                .filter(family)
                .collect(),
        };
        address_records(name, answering.ttl, addrs)
    }

    /// The decision engine's answer for this client to a CNAME domain: its TTL and the `cname`
    /// of the service it picks; `None` when no service can answer (NODATA). The same decision
    /// for every query type (the engine's pool of a CNAME domain has no family), one rotation
    /// turn and persistence table per domain and view, as an A query's.
    pub(super) fn cname(&self, name: &str, domain: usize, client: IpAddr) -> Option<(u32, &str)> {
        let (answering, carried) = self.carried(name, domain, QTYPE_A, client);
        let Carried::Services(picked) = carried else {
            return None; // a CNAME domain has no backup addresses
        };
        let target = self.data.model.services[*picked.first()?]
            .cname
            .as_deref()?;
        Some((answering.ttl, target))
    }

    /// The engine's decision for this client, as the compiled answers give it (the domain's
    /// answer mode and cap): the answering domain (the asked one or a backup domain) and what
    /// it carries. The picked services are noted for persistence.
    fn carried(
        &self,
        name: &str,
        domain: usize,
        qtype: u16,
        client: IpAddr,
    ) -> (&crate::model::Domain, Carried) {
        let client = canonical(client);
        let location = self.locations.as_ref().and_then(|db| db.lookup(client));
        let rtt = match self.rtt_rows.get(key_of(client)) {
            0 => &[][..],
            row => &self.rtt[row as usize - 1].rtt_us[..],
        };
        let sticky = self.persist.lookup(domain, qtype == QTYPE_AAAA, client);
        let view = self.static_views.get(key_of(client));
        let decision = self.data.engine.decide(
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
                disabled_domains: &self.disabled_domains,
            },
        );
        let domains = &self.data.model.domains;
        let answering = &domains[decision.domain.min(domains.len() - 1)];
        let turn = u64::from(
            self.turns
                .next(self.turn_index(domain, qtype == QTYPE_AAAA, view)),
        );
        let carried = match decision.fallback {
            Some(Fallback::BackupIp) => {
                let family = |ip: &IpAddr| ip.is_ipv6() == (qtype == QTYPE_AAAA);
                let backup: Vec<IpAddr> =
                    answering.backup_ip.iter().copied().filter(family).collect();
                Carried::Backup(
                    crate::policy::carried(
                        &backup,
                        answering.answer,
                        answering.max_answers,
                        || turn as usize,
                    )
                    .into_owned(),
                )
            }
            Some(Fallback::Empty) => Carried::Services(Vec::new()),
            None => {
                let picked = self.data.engine.select(&decision, client, turn);
                self.persist.note(sticky.as_ref(), &picked);
                Carried::Services(picked)
            }
        };
        (answering, carried)
    }
}

/// What a per-query decision carries.
enum Carried {
    /// The domain's backup addresses of the query's family, as many as one answer carries.
    Backup(Vec<IpAddr>),
    /// The picked services (configuration indexes); none: NODATA.
    Services(Vec<usize>),
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
