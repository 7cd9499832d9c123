//! What the responder answers from, built from one snapshot and the model it was compiled from
//! (its spec's): the zones, the compiled answers, the per-query decisions and the ECS allow
//! list; a republish carries the rotation turns over to the next one.

use std::{net::IpAddr, sync::Arc};

use gslb_common::{QTYPE_A, QTYPE_AAAA};
use hickory_proto::rr::RecordType;

use super::compiled::GslbIndex;
use super::decisions::{Decisions, EngineData};
use super::ecs;
use super::wire;
use super::zone::{ZoneData, zones_of};
use crate::{
    compile::{Snapshot, Spec},
    location::db::LocationDb,
    persist::Store as PersistStore,
};

/// What the responder answers from that depends on the configuration alone: the zones, the
/// ECS allow list and what per-query decisions read of the engine. Built once per
/// configuration: every [`Authority`] of snapshots that carry the same
/// [`Spec`](crate::compile::Spec) shares it, so a health change builds none of it again.
pub(super) struct ConfigData {
    /// The spec it was built with: the next snapshot's, the same `Arc`, reuses it.
    spec: Option<Arc<Spec>>,
    pub(super) zones: Vec<ZoneData>,
    /// `server.ecs_allow`.
    pub(super) ecs_allow: ecs::Allow,
    /// `None`: no domain needs the engine.
    engine: Option<Arc<EngineData>>,
    /// What this node tells about itself (CH TXT, NSID).
    pub(super) identity: crate::model::Identity,
    /// DNS cookies' secrets; `None`: the option is ignored.
    pub(super) cookies: Option<crate::model::CookieSecrets>,
}

impl ConfigData {
    /// The data of `snapshot`'s configuration: its spec's model.
    fn new(snapshot: &Snapshot) -> Self {
        let model = snapshot.model();
        let spec = snapshot.spec.clone();
        ConfigData {
            zones: zones_of(model),
            ecs_allow: ecs::Allow::new(model.dns.ecs_allow.as_deref()),
            identity: model.dns.identity.clone(),
            cookies: model.dns.cookies.clone(),
            engine: spec.as_ref().and_then(|s| {
                let engine = s.engine.clone()?;
                Some(Arc::new(EngineData::new(s.model(), engine)))
            }),
            spec,
        }
    }

    /// Whether this is the data of `spec`'s configuration.
    fn is_of(&self, spec: Option<&Arc<Spec>>) -> bool {
        matches!((&self.spec, spec), (Some(a), Some(b)) if Arc::ptr_eq(a, b))
    }
}

/// Everything the responder answers from: one configuration's data and one snapshot's answers.
pub(super) struct Authority {
    pub(super) config: Arc<ConfigData>,
    pub(super) gslb: GslbIndex,
    pub(super) edns_udp_size: u16,
    /// Only parent sites answer GSLB queries (spec §6): a MEP child's snapshot says so
    /// ([`Snapshot::refuse_gslb`]), and GSLB names are REFUSED, so that the resolver asks
    /// another name server (a parent), while the zones' static data is answered as before.
    pub(super) gslb_refused: bool,
    pub(super) decisions: Option<Decisions>,
    /// The compiled entries a query can be answered from on the wire (`wire`).
    pub(super) wire: wire::Names,
}

impl Authority {
    /// The authority of `snapshot`. The configuration's data is `previous`'s when `snapshot`
    /// carries the same spec (a health change), else built from the spec's model.
    pub(super) fn new(
        snapshot: &Snapshot,
        locations: Option<Arc<LocationDb>>,
        persistence: &PersistStore,
        previous: Option<&Authority>,
    ) -> Self {
        let config = match previous {
            Some(old) if old.config.is_of(snapshot.spec.as_ref()) => old.config.clone(),
            _ => Arc::new(ConfigData::new(snapshot)),
        };
        let gslb = GslbIndex::new(snapshot);
        let decisions = Decisions::new(config.engine.as_ref(), snapshot, locations, persistence);
        Authority {
            wire: wire::Names::new(&config.zones, &gslb, decisions.as_ref()),
            gslb,
            edns_udp_size: snapshot.edns_udp_size,
            gslb_refused: snapshot.refuse_gslb,
            decisions,
            config,
        }
    }

    /// Every answer set continues its rotation from `old` (the data before a republish).
    pub(super) fn carry_turns(&self, old: &Authority) {
        self.gslb.carry_turns(&old.gslb);
        if let (Some(new), Some(old)) = (&self.decisions, &old.decisions) {
            for (name, &i) in &new.domains {
                if let Some(&j) = old.domains.get(name) {
                    // View numbers follow the configuration's order: carried while it has as
                    // many views (a reload that changes the views restarts these turns).
                    let views = if new.data.views == old.data.views {
                        new.data.views + 1
                    } else {
                        0
                    };
                    for (aaaa, view) in [false, true]
                        .into_iter()
                        .flat_map(|a| (0..views as u32).map(move |v| (a, v)))
                    {
                        new.turns.carry(
                            new.turn_index(i, aaaa, view),
                            &old.turns,
                            old.turn_index(j, aaaa, view),
                        );
                    }
                }
            }
        }
    }

    /// The ECS scope of the answer to `client` (a subnet of `source` bits) for (`name`,
    /// `qtype`), `None` when `name` is not a GSLB name (static data is the same for every
    /// client). It may be longer than `source` (RFC 7871 §7.2.1: the subnet was not specific
    /// enough, and the resolver asks again with more bits).
    pub(super) fn scope(&self, name: &str, qtype: u16, client: IpAddr, source: u8) -> Option<u8> {
        // A name a wildcard GSLB domain answers has that domain's scope.
        let zone = self.config.zones.iter().find(|z| z.contains(name))?;
        let owner = zone.source_of(name)?;
        // The zone's other types at a GSLB name are static; a CNAME domain answers them all
        // (its compiled answer, the same for every type, kept under A). A minimal ANY carries
        // the A or the AAAA answer (`lookup`): the longer scope of the two holds for either.
        let any = u16::from(RecordType::ANY);
        let qtypes: &[u16] = if zone.gslb_cname.contains(owner.as_ref()) {
            &[QTYPE_A]
        } else if qtype == any {
            &[QTYPE_A, QTYPE_AAAA]
        } else if qtype == QTYPE_A || qtype == QTYPE_AAAA {
            std::slice::from_ref(&qtype)
        } else {
            return None;
        };
        qtypes
            .iter()
            .filter_map(|&t| self.gslb_scope(&owner, t, client, source))
            .max()
    }

    /// [`Authority::scope`] of a GSLB domain's own name, `None` for any other name.
    fn gslb_scope(&self, name: &str, qtype: u16, client: IpAddr, source: u8) -> Option<u8> {
        if let Some(d) = &self.decisions
            && let Some(&domain) = d.domains.get(name)
        {
            return Some(d.scope(domain, client, source));
        }
        self.gslb
            .is_gslb(name)
            .then(|| self.gslb.scope(name, qtype, client))
    }
}
