//! The RTT method's rule (the pool's sites nearest the client's LDNS, within the domain's
//! tolerance), shared by the engine's decisions and by [`RttFirst`], with which the compiler
//! decides a domain answered by RTT for each of a hundred thousand RTT rows without a whole
//! decision per row.

use super::{Bits, Decision, Engine, Method, Pick, State, Tier};

/// The RTT method's pick: one of the nearest per answer, in turn (the answer mode may make it
/// all of them).
pub(super) const RTT_PICK: Pick = Pick::Rotate;

/// The RTT method's limit: the lowest RTT measured among `rtts` plus `tolerance_us`; `None`
/// when none is measured (the method declines).
pub(super) fn limit(rtts: impl Iterator<Item = Option<u32>>, tolerance_us: u32) -> Option<u32> {
    rtts.flatten()
        .min()
        .map(|lowest| lowest.saturating_add(tolerance_us))
}

/// Whether a service whose site measured `rtt` is among the nearest under `limit`.
pub(super) fn within(rtt: Option<u32>, limit: u32) -> bool {
    rtt.is_some_and(|r| r <= limit)
}

/// A domain whose decision, under one state of the services, is the RTT method's for every
/// client whose RTTs measure a site of its pool, whatever else the client is
/// ([`Engine::rtt_first`]): the pool, fixed, and the rule.
#[derive(Clone, Debug)]
pub struct RttFirst {
    domain: usize,
    /// The pool in position order: (position, site).
    pool: Vec<(usize, usize)>,
    tolerance_us: u32,
}

/// Most pool entries an [`RttFirst`] takes: its choices are bits of a `u64`.
const MAX_POOL: usize = 64;

impl Engine {
    /// For `domain` and queries of `qtype` under `state`, what its decision for a client
    /// without a persistence entry reads when that decision is the RTT method's whatever the
    /// client is but its RTTs: no DNS policy (they read the client), no static view lists (the
    /// pool would depend on the client's view), the RTT method first in the chain, and a pool
    /// that is not empty (else backup domains and overload decide). `None` otherwise, or past
    /// 64 pool entries: the engine decides.
    pub fn rtt_first(&self, domain: usize, qtype: u16, state: &State<'_>) -> Option<RttFirst> {
        let d = &self.domains[domain];
        if !self.policies.is_empty()
            || !d.lists.is_empty()
            || self.model.domains[domain].chain.first() != Some(&Method::Rtt)
            || state.domain_disabled(domain)
        {
            return None;
        }
        let (pool, _) = self.pool(domain, qtype, 0, state, false);
        let pool: Vec<(usize, usize)> = pool.iter().map(|pos| (pos, d.slots[pos].site)).collect();
        (!pool.is_empty() && pool.len() <= MAX_POOL).then_some(RttFirst {
            domain,
            pool,
            tolerance_us: self.model.domains[domain].tolerance_us,
        })
    }
}

impl RttFirst {
    /// The pool entries the RTT method chooses for the RTTs `rtt` (by site): bit `i` for the
    /// pool's `i`-th entry in position order. `None` when no site of the pool is measured: the
    /// method declines and the rest of the chain decides (ask the engine).
    pub fn chosen(&self, rtt: &[Option<u32>]) -> Option<u64> {
        let at = |site: usize| rtt.get(site).copied().flatten();
        let limit = limit(
            self.pool.iter().map(|&(_, site)| at(site)),
            self.tolerance_us,
        )?;
        let mut chosen = 0;
        for (i, &(_, site)) in self.pool.iter().enumerate() {
            if within(at(site), limit) {
                chosen |= 1 << i;
            }
        }
        Some(chosen)
    }

    /// The decision [`Engine::decide`] takes for RTTs of which [`RttFirst::chosen`] gave
    /// `chosen`.
    pub fn decision(&self, engine: &Engine, chosen: u64) -> Decision {
        let mut bits = Bits::new(engine.domains[self.domain].members.len());
        for (i, &(pos, _)) in self.pool.iter().enumerate() {
            if chosen >> i & 1 == 1 {
                bits.set(pos);
            }
        }
        let tier = Tier::Method {
            step: 0,
            method: Method::Rtt,
        };
        engine.decision(self.domain, &bits, RTT_PICK, tier, None, false)
    }
}
