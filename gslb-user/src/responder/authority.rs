//! What the responder answers from, built from one configuration and one snapshot: the zones,
//! the compiled answers, the per-query decisions and the ECS allow list; a republish carries
//! the rotation turns over to the next one.

use std::{net::IpAddr, sync::Arc};

use super::compiled::GslbIndex;
use super::decisions::Decisions;
use super::ecs;
use super::zone::{ZoneData, zones_of};
use crate::{
    compile::Snapshot, config::Config, location::db::LocationDb, persist::Store as PersistStore,
};

/// Everything the responder answers from, built from one configuration.
pub(super) struct Authority {
    pub(super) zones: Vec<ZoneData>,
    pub(super) gslb: GslbIndex,
    pub(super) edns_udp_size: u16,
    pub(super) decisions: Option<Decisions>,
    /// `server.ecs_allow`.
    pub(super) ecs_allow: ecs::Allow,
}

impl Authority {
    pub(super) fn new(
        config: &Config,
        snapshot: &Snapshot,
        locations: Option<Arc<LocationDb>>,
        persistence: &PersistStore,
    ) -> Self {
        Authority {
            zones: zones_of(config),
            gslb: GslbIndex::new(snapshot),
            edns_udp_size: snapshot.edns_udp_size,
            decisions: Decisions::new(config, snapshot, locations, persistence),
            ecs_allow: ecs::Allow::new(config.server.ecs_allow.as_deref()),
        }
    }

    pub(super) fn carry_turns(&self, old: &Authority) {
        self.gslb.carry_turns(&old.gslb);
        if let (Some(new), Some(old)) = (&self.decisions, &old.decisions) {
            for name in &new.domains {
                if let (Some(i), Some(j)) =
                    (new.engine.domain_index(name), old.engine.domain_index(name))
                {
                    // View numbers follow the configuration's order: carried while it has as
                    // many views (a reload that changes the views restarts these turns).
                    let views = if new.views == old.views {
                        new.views + 1
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
        if let Some(d) = self.decisions.as_ref().filter(|d| d.domains.contains(name)) {
            return Some(d.scope(name, client, source));
        }
        self.gslb
            .is_gslb(name)
            .then(|| self.gslb.scope(name, qtype, client))
    }
}
