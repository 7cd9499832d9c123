//! What an answer means to clients over many queries, from the engine's decision and from the
//! snapshot's answer, so that the two can be compared.

use super::*;

/// An answer as clients see it over many queries.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Meaning {
    /// No address of the family: NODATA.
    Nodata,
    /// One address per answer, each as often as its share; shares in lowest terms, by address.
    Rotation {
        ttl: u32,
        shares: Vec<(IpAddr, u32)>,
    },
    /// Every one of these addresses in each answer, in this order. A single address is this
    /// too, whether it rotates or not.
    All { ttl: u32, addrs: Vec<IpAddr> },
    /// Up to `max` (2 or more) distinct addresses per answer, a window that moves along the
    /// rotation `cycle` (runs of one address, lengths in lowest terms) one turn per answer
    /// (`gslb_user::policy::carried`).
    Window {
        ttl: u32,
        max: u16,
        cycle: Vec<(IpAddr, u32)>,
    },
}

impl Meaning {
    /// `addrs` each once, in order.
    pub(super) fn all(ttl: u32, addrs: impl IntoIterator<Item = IpAddr>) -> Meaning {
        let mut distinct: Vec<IpAddr> = Vec::new();
        for a in addrs {
            if !distinct.contains(&a) {
                distinct.push(a);
            }
        }
        match distinct.len() {
            0 => Meaning::Nodata,
            _ => Meaning::All {
                ttl,
                addrs: distinct,
            },
        }
    }

    /// One address per answer, each in proportion to the sum of its weights.
    pub(super) fn rotation(ttl: u32, weighted: impl IntoIterator<Item = (IpAddr, u32)>) -> Meaning {
        let mut shares: BTreeMap<IpAddr, u32> = BTreeMap::new();
        for (a, w) in weighted {
            *shares.entry(a).or_default() += w;
        }
        shares.retain(|_, w| *w > 0);
        let g = shares.values().fold(0, |g, &w| gcd(g, w));
        match shares.len() {
            0 => Meaning::Nodata,
            1 => Meaning::All {
                ttl,
                addrs: shares.into_keys().collect(),
            },
            _ => Meaning::Rotation {
                ttl,
                shares: shares.into_iter().map(|(a, w)| (a, w / g)).collect(),
            },
        }
    }

    /// At most `max` addresses per answer of `weighted` (in order; weights repeat an address)
    /// under `mode`, as `gslb_user::policy::carried` gives them: all of them when they fit
    /// under "all", one in turn under a cap of 1, else a moving window.
    pub(super) fn carried(
        ttl: u32,
        mode: AnswerMode,
        max: u16,
        weighted: impl IntoIterator<Item = (IpAddr, u32)>,
    ) -> Meaning {
        let mut cycle: Vec<(IpAddr, u32)> = Vec::new();
        for (a, w) in weighted.into_iter().filter(|(_, w)| *w > 0) {
            match cycle.last_mut() {
                Some((last, n)) if *last == a => *n += w,
                _ => cycle.push((a, w)),
            }
        }
        let mut distinct: Vec<IpAddr> = Vec::new();
        for &(a, _) in &cycle {
            if !distinct.contains(&a) {
                distinct.push(a);
            }
        }
        if mode == AnswerMode::All && distinct.len() <= usize::from(max) {
            return Meaning::all(ttl, distinct);
        }
        if max <= 1 || distinct.len() <= 1 {
            return Meaning::rotation(ttl, cycle);
        }
        let g = cycle.iter().fold(0, |g, &(_, w)| gcd(g, w));
        Meaning::Window {
            ttl,
            max,
            cycle: cycle.into_iter().map(|(a, w)| (a, w / g)).collect(),
        }
    }

    /// What a stored answer means: `None` (no answer for the client's view nor the default
    /// view) and an empty one are NODATA.
    pub(super) fn of_answer(answer: Option<&Answer>) -> Meaning {
        match answer {
            None => Meaning::Nodata,
            Some(a) if a.addrs.is_empty() => Meaning::Nodata,
            Some(a) => match a.mode {
                // Kept as stored: a repeated address in an "all" answer is a wrong answer.
                AnswerMode::All if (2..=usize::from(a.max_answers)).contains(&a.addrs.len()) => {
                    Meaning::All {
                        ttl: a.ttl,
                        addrs: a.addrs.clone(),
                    }
                }
                mode => {
                    Meaning::carried(a.ttl, mode, a.max_answers, a.addrs.iter().map(|&x| (x, 1)))
                }
            },
        }
    }

    /// Addresses a reply may carry.
    pub(super) fn support(&self) -> Vec<IpAddr> {
        match self {
            Meaning::Nodata => Vec::new(),
            Meaning::Rotation { shares, .. } => shares.iter().map(|s| s.0).collect(),
            Meaning::All { addrs, .. } => addrs.clone(),
            Meaning::Window { cycle, .. } => {
                let mut distinct: Vec<IpAddr> = Vec::new();
                for &(a, _) in cycle {
                    if !distinct.contains(&a) {
                        distinct.push(a);
                    }
                }
                distinct
            }
        }
    }

    pub(super) fn ttl(&self) -> u32 {
        match self {
            Meaning::Nodata => 0,
            Meaning::Rotation { ttl, .. }
            | Meaning::All { ttl, .. }
            | Meaning::Window { ttl, .. } => *ttl,
        }
    }
}

pub(super) fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The engine's decision as an answer, written from the engine's contract: the candidates'
/// answer addresses under the pick (rotate: each distinct address in turn; all: every one;
/// first: the first; weighted: in proportion to the weights), the domain that decided giving
/// the TTL; no candidates: the backup addresses of the family (in the domain's answer mode)
/// or NODATA.
pub(super) fn decision_meaning(
    config: &Config,
    decision: &Decision,
    qtype: u16,
) -> Result<Meaning, String> {
    let family = |ip: &IpAddr| ip.is_ipv6() == (qtype == QTYPE_AAAA);
    let domain = &config.gslb_domains[decision.domain];
    let ttl = domain.ttl;
    let ip = |s: usize| {
        let s = &config.services[s];
        s.public_ip.unwrap_or(s.ip)
    };
    let c = &decision.candidates;
    let max = domain.max_answers;
    Ok(match decision.fallback {
        Some(Fallback::Empty) => Meaning::Nodata,
        Some(Fallback::BackupIp) => {
            let backup = domain.backup_ip.iter().copied().filter(family);
            Meaning::carried(ttl, domain.answer, max, backup.map(|a| (a, 1)))
        }
        None => match &decision.pick {
            Pick::First => Meaning::all(ttl, c.first().map(|&s| ip(s)).filter(family)),
            Pick::All => Meaning::carried(
                ttl,
                AnswerMode::All,
                max,
                c.iter().map(|&s| (ip(s), 1)).filter(|(a, _)| family(a)),
            ),
            // Each distinct address in turn: two services sharing an address (on two ports)
            // are one address to a client.
            Pick::Rotate => {
                let mut distinct: Vec<IpAddr> = Vec::new();
                for a in c.iter().map(|&s| ip(s)).filter(family) {
                    if !distinct.contains(&a) {
                        distinct.push(a);
                    }
                }
                Meaning::carried(
                    ttl,
                    AnswerMode::Rotate,
                    max,
                    distinct.into_iter().map(|a| (a, 1)),
                )
            }
            Pick::Weighted(w) => {
                if w.len() != c.len() {
                    return Err(format!("{} weights for {} candidates", w.len(), c.len()));
                }
                Meaning::carried(
                    ttl,
                    AnswerMode::Rotate,
                    max,
                    c.iter()
                        .zip(w)
                        .map(|(&s, &w)| (ip(s), w))
                        .filter(|(a, _)| family(a)),
                )
            }
            Pick::Hash { .. } => return Err("a hashed pick in a compiled domain".into()),
        },
    })
}
