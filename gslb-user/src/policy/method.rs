//! One method of a domain's chain over a pool: the positions it chooses and how to pick among
//! them, or `None` when it cannot decide (no RTT, no location, no load known, …).

use super::{Bits, Client, Domain, Engine, Method, Pick, RTT_PICK, State, rtt};
use crate::location::{Location, Qualifier, WildcardMode};

impl Engine {
    /// One method over `pool`: the chosen positions and the pick, or `None` if it declines.
    pub(super) fn method(
        &self,
        method: Method,
        domain: &Domain,
        pool: &Bits,
        client: &Client<'_>,
        state: &State<'_>,
    ) -> Option<(Bits, Pick)> {
        let spec = &self.model.domains[domain.index];
        let service = |pos: usize| &self.model.services[domain.members[pos]];
        let site = |pos: usize| domain.slots[pos].site;
        // The positions of `pool` with the best key (max), if any position has a key.
        let best_by = |key: &dyn Fn(usize) -> Option<i128>| {
            let mut best: Option<i128> = None;
            let mut chosen = Bits::new(domain.members.len());
            for pos in pool.iter() {
                let Some(k) = key(pos) else { continue };
                match best {
                    Some(b) if k < b => {}
                    Some(b) if k == b => chosen.set(pos),
                    _ => {
                        best = Some(k);
                        chosen.clear();
                        chosen.set(pos);
                    }
                }
            }
            best.map(|b| (chosen, b))
        };
        match method {
            Method::RoundRobin => Some((pool.clone(), Pick::Rotate)),
            // The weights are filled in by finish_pick, once the candidates are known.
            Method::Ratio => Some((pool.clone(), Pick::Weighted(Vec::new()))),
            Method::SourceIpHash => Some((
                pool.clone(),
                Pick::Hash {
                    mask: spec.sourceip_mask,
                    weights: None,
                },
            )),
            Method::LeastConnection => {
                let connections = |pos: usize| {
                    let s = domain.members[pos];
                    -i128::from(
                        state
                            .services
                            .get(s)
                            .copied()
                            .unwrap_or_default()
                            .connections,
                    )
                };
                best_by(&|pos| Some(connections(pos))).map(|(chosen, _)| (chosen, Pick::Rotate))
            }
            Method::StaticProximity => {
                let client = client.location?;
                let score = |pos: usize| {
                    let l = service(pos).location.as_ref()?;
                    Some(proximity(l, client, self.model.mode) as i128)
                };
                match best_by(&score) {
                    Some((chosen, best)) if best > 0 => Some((chosen, Pick::Rotate)),
                    _ => None,
                }
            }
            Method::Rtt => {
                let rtt = |pos: usize| state.rtt.get(site(pos)).copied().flatten();
                let limit = rtt::limit(pool.iter().map(rtt), spec.tolerance_us)?;
                let mut chosen = Bits::new(domain.members.len());
                for pos in pool.iter().filter(|&pos| rtt::within(rtt(pos), limit)) {
                    chosen.set(pos);
                }
                Some((chosen, RTT_PICK))
            }
            Method::Topology => {
                let sites = pool.iter().map(site).max()? + 1;
                // Sites of a domain are few; keep their scores off the heap when they fit.
                let mut inline = [None; 64];
                let mut heap = Vec::new();
                let best = if sites <= inline.len() {
                    &mut inline[..sites]
                } else {
                    heap.resize(sites, None);
                    &mut heap[..]
                };
                self.topology
                    .scores(client.addr, client.location, self.model.mode, best);
                let score = |pos: usize| best[site(pos)].map(|(_, s)| i128::from(s));
                best_by(&score).map(|(chosen, _)| (chosen, Pick::Rotate))
            }
            Method::GlobalAvailability => {
                let first = pool.iter().next()?;
                let mut chosen = Bits::new(domain.members.len());
                chosen.set(first);
                Some((chosen, Pick::First))
            }
        }
    }
}

/// How many leading qualifiers of the client's location the service's location confirms
/// (static proximity: most leading qualifiers equal wins). A wildcard in the service's location
/// lets the walk go on under matchWildcardtoany YES but confirms nothing; the walk stops where
/// the client's location has nothing more to say.
fn proximity(service: &Location, client: &Location, mode: WildcardMode) -> usize {
    let mut equal = 0;
    for (c, s) in client.0.iter().zip(&service.0) {
        match (c, s) {
            (Qualifier::Any, _) => break,
            (Qualifier::Is(a), Qualifier::Is(b)) if a == b => equal += 1,
            (Qualifier::Is(_), Qualifier::Any) if mode == WildcardMode::Yes => {}
            _ => break,
        }
    }
    equal
}
