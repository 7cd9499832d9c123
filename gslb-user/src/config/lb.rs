//! The load-balancing settings of a `[[gslb_domain]]`: method chain, RTT tolerance,
//! source-IP mask and persistence.

use std::collections::{HashMap, HashSet};
use std::ops::RangeInclusive;

use serde::Deserialize;
use toml::Spanned;

use super::error::ConfigError;
use super::service::Service;
use super::topology::TopologyRecordConfig;
use super::validate::{Int, Str, Validator};
use crate::policy::{Method, Persistence, SourceMask};

/// RTT tolerance, in milliseconds (NetScaler allows up to 100; a little slack here).
pub(super) const TOLERANCE_RANGE: RangeInclusive<i64> = 0..=10_000;
pub(super) const MASK_V4_RANGE: RangeInclusive<i64> = 1..=32;
pub(super) const MASK_V6_RANGE: RangeInclusive<i64> = 1..=128;
/// Persistence timeout, in seconds (NetScaler: 2 to 1440 minutes).
const PERSISTENCE_TIMEOUT_RANGE: RangeInclusive<i64> = 1..=86_400;
/// NetScaler's default persistence timeout, 2 minutes.
const DEFAULT_PERSISTENCE_TIMEOUT: u32 = 120;
/// Entries of one domain's persistence table: up to 16M (every /24 of IPv4 at mask 24).
const PERSISTENCE_ENTRIES_RANGE: RangeInclusive<i64> = 1..=(1 << 24);
/// 65,536 clients per domain by default: about 10 MiB of table (an entry costs ~150 bytes
/// with its hash slot and queue place), a mega-proxy's worth of clients without letting one
/// domain's table take the host's memory.
const DEFAULT_PERSISTENCE_ENTRIES: u32 = 65_536;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMask {
    pub(super) mask_v4: Option<Int>,
    pub(super) mask_v6: Option<Int>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPersistence {
    pub(super) mask_v4: Option<Int>,
    pub(super) mask_v6: Option<Int>,
    pub(super) timeout_s: Option<Int>,
    pub(super) max_entries: Option<Int>,
}

/// A domain's load-balancing settings as written (borrowed: the domain is partly moved by then).
#[derive(Clone, Copy)]
pub(super) struct RawLb<'a> {
    pub(super) name: &'a Str,
    pub(super) method: &'a Option<Spanned<Method>>,
    pub(super) alternate: &'a Option<Spanned<Method>>,
    pub(super) fallback: &'a Option<Spanned<Method>>,
    pub(super) tolerance_ms: &'a Option<Int>,
    pub(super) sourceip_mask: &'a Option<Spanned<RawMask>>,
    pub(super) persistence: &'a Option<Spanned<RawPersistence>>,
}

/// A domain's load-balancing settings, validated.
pub(super) struct LbSettings {
    pub(super) method: Method,
    pub(super) alternate: Option<Method>,
    pub(super) fallback: Option<Method>,
    pub(super) tolerance_ms: u32,
    pub(super) sourceip_mask: SourceMask,
    pub(super) persistence: Option<Persistence>,
}

impl Validator<'_> {
    /// A domain's method chain and the settings that go with it.
    pub(super) fn lb_settings(
        &self,
        owner: &str,
        rd: RawLb<'_>,
        bound: &[String],
        by_name: &HashMap<&str, &Service>,
        topology: &[TopologyRecordConfig],
    ) -> Result<LbSettings, ConfigError> {
        let method = rd
            .method
            .as_ref()
            .map_or(Method::RoundRobin, |m| *m.get_ref());
        let (alternate, fallback) = (rd.alternate, rd.fallback);
        // Each later method must be reachable: not a repeat, and not after one that always
        // decides (only staticproximity, rtt and topology can decline).
        let mut chain: Vec<(&str, Method)> = vec![("method", method)];
        for (key, raw) in [("alternate", alternate), ("fallback", fallback)] {
            let Some(m) = raw else { continue };
            let m_name = m.get_ref().name();
            if let Some((earlier, _)) = chain.iter().find(|(_, e)| e == m.get_ref()) {
                return Err(self.error(
                    m.span(),
                    format!("{owner}: {key} \"{m_name}\" repeats the {earlier}"),
                ));
            }
            if let Some((earlier, e)) = chain.iter().find(|(_, e)| e.always_decides()) {
                return Err(self.error(
                    m.span(),
                    format!(
                        "{owner}: {key} \"{m_name}\" is never used: {earlier} \"{}\" always \
                         decides (only staticproximity, rtt and topology fall through)",
                        e.name()
                    ),
                ));
            }
            chain.push((key, *m.get_ref()));
        }
        let has = |m: Method| chain.iter().any(|(_, c)| *c == m);
        // Where to point for a problem with a method in the chain.
        let method_span = |m: Method| {
            [rd.method, alternate, fallback]
                .into_iter()
                .find_map(|r| r.as_ref().filter(|r| *r.get_ref() == m).map(Spanned::span))
                .unwrap_or(rd.name.span())
        };
        if has(Method::StaticProximity)
            && !bound.iter().any(|s| by_name[s.as_str()].location.is_some())
        {
            return Err(self.error(
                method_span(Method::StaticProximity),
                format!(
                    "{owner}: staticproximity needs services with a location, and none of this \
                     domain's has one"
                ),
            ));
        }
        if has(Method::Topology) {
            let sites: HashSet<&str> = bound
                .iter()
                .map(|s| by_name[s.as_str()].site.as_str())
                .collect();
            if !topology
                .iter()
                .any(|r| sites.contains(r.destination.as_str()))
            {
                return Err(self.error(
                    method_span(Method::Topology),
                    format!(
                        "{owner}: topology needs [[topology]] records whose destination is a site \
                         of this domain's services, and there are none"
                    ),
                ));
            }
        }

        let tolerance_ms = self.int(
            owner,
            "tolerance_ms",
            rd.tolerance_ms.clone(),
            TOLERANCE_RANGE,
            0,
        )?;
        if let Some(t) = rd.tolerance_ms
            && !has(Method::Rtt)
        {
            return Err(self.error(t.span(), format!("{owner}: tolerance_ms is only used by the rtt method, which this domain does not use")));
        }

        let sourceip_mask = match rd.sourceip_mask {
            None => SourceMask::default(),
            Some(m) => {
                if !has(Method::SourceIpHash) {
                    return Err(self.error(
                        m.span(),
                        format!("{owner}: sourceip_mask is only used by the sourceiphash method, which this domain does not use"),
                    ));
                }
                let key = |k: &str| format!("sourceip_mask.{k}");
                SourceMask {
                    v4: self.int(
                        owner,
                        &key("mask_v4"),
                        m.get_ref().mask_v4.clone(),
                        MASK_V4_RANGE,
                        32,
                    )?,
                    v6: self.int(
                        owner,
                        &key("mask_v6"),
                        m.get_ref().mask_v6.clone(),
                        MASK_V6_RANGE,
                        128,
                    )?,
                }
            }
        };

        let persistence = match rd.persistence {
            None => None,
            Some(p) => {
                let p = p.get_ref();
                let key = |k: &str| format!("persistence.{k}");
                Some(Persistence {
                    mask: SourceMask {
                        v4: self.int(
                            owner,
                            &key("mask_v4"),
                            p.mask_v4.clone(),
                            MASK_V4_RANGE,
                            32,
                        )?,
                        v6: self.int(
                            owner,
                            &key("mask_v6"),
                            p.mask_v6.clone(),
                            MASK_V6_RANGE,
                            128,
                        )?,
                    },
                    timeout_s: self.int(
                        owner,
                        &key("timeout_s"),
                        p.timeout_s.clone(),
                        PERSISTENCE_TIMEOUT_RANGE,
                        DEFAULT_PERSISTENCE_TIMEOUT,
                    )?,
                    max_entries: self.int(
                        owner,
                        &key("max_entries"),
                        p.max_entries.clone(),
                        PERSISTENCE_ENTRIES_RANGE,
                        DEFAULT_PERSISTENCE_ENTRIES,
                    )?,
                })
            }
        };
        Ok(LbSettings {
            method,
            alternate: alternate.as_ref().map(|m| *m.get_ref()),
            fallback: fallback.as_ref().map(|m| *m.get_ref()),
            tolerance_ms,
            sourceip_mask,
            persistence,
        })
    }
}
