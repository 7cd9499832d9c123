//! `[rtt]`: probing the resolvers (LDNS) that query us, for the rtt method.

use std::ops::{Range, RangeInclusive};
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;
use toml::Spanned;

use super::Config;
use super::error::ConfigError;
use super::lb::{MASK_V4_RANGE, MASK_V6_RANGE, TOLERANCE_RANGE};
use super::validate::{Int, List, Validator};
use crate::policy::Method;

/// `[rtt]`: probing the resolvers (LDNS) that query us, for the rtt method (spec §4).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RttSettings {
    /// `enabled` as written: `None` probes when a domain's method chain has rtt.
    pub enabled: Option<bool>,
    pub probe: crate::probe::ProbeSettings,
}

impl Config {
    /// Whether this server probes RTTs: `[rtt] enabled`, else whether any domain's method
    /// chain has rtt; never without `server.site`, the column the probes fill.
    pub fn rtt_probing(&self) -> bool {
        let wanted = self.rtt.enabled.unwrap_or_else(|| {
            self.gslb_domains
                .iter()
                .any(|d| d.chain().contains(&Method::Rtt))
        });
        // A MEP child answers no GSLB query and parents take no RTT rows from children.
        let child = self.mep_enabled().is_some()
            && self
                .server
                .site
                .as_deref()
                .and_then(|s| self.site(s))
                .is_some_and(|s| s.role == crate::mep::Role::Child);
        wanted && self.server.site.is_some() && !child
    }
}

/// `[rtt]`. Times in milliseconds, except the LDNS entry timeout (seconds).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRtt {
    pub(super) enabled: Option<Spanned<bool>>,
    pub(super) order: Option<List>,
    pub(super) interval_ms: Option<Int>,
    pub(super) timeout_ms: Option<Int>,
    pub(super) tolerance_ms: Option<Int>,
    pub(super) ldns_timeout_s: Option<Int>,
    pub(super) ldns_mask_v4: Option<Int>,
    pub(super) ldns_mask_v6: Option<Int>,
    pub(super) max_rate: Option<Int>,
    pub(super) max_concurrent: Option<Int>,
    /// LDNS entries kept at most (default 100,000); more evict the least recently seen.
    pub(super) max_ldns: Option<Int>,
    /// Prefixes whose sources are never recorded nor probed (wins over `allow`).
    pub(super) deny: Option<List>,
    /// Prefixes admitted although martian or this host's (loopback labs), unless denied.
    pub(super) allow: Option<List>,
}

impl Validator<'_> {
    /// `[rtt] deny` and `allow`: prefixes (no host bits, none twice); an allow prefix inside a
    /// deny prefix would do nothing (deny wins), so it is refused.
    fn rtt_sources(
        &self,
        deny: Option<&List>,
        allow: Option<&List>,
    ) -> Result<crate::probe::SourcePolicy, ConfigError> {
        let parse = |key: &str,
                     list: Option<&List>|
         -> Result<Vec<(IpNet, Range<usize>)>, ConfigError> {
            let mut out: Vec<(IpNet, Range<usize>)> = Vec::new();
            for p in list.map(|l| l.get_ref().as_slice()).unwrap_or_default() {
                let err = |reason: String| self.error(p.span(), format!("rtt: {key}: {reason}"));
                let net = self.prefix(p, &format!("rtt: {key}"))?;
                if let Some((_, first)) = out.iter().find(|(n, _)| *n == net) {
                    let line = self.line(first.clone());
                    return Err(err(format!(
                        "prefix {net} listed twice (first on line {line})"
                    )));
                }
                out.push((net, p.span()));
            }
            Ok(out)
        };
        let deny = parse("deny", deny)?;
        let allow = parse("allow", allow)?;
        for (net, span) in &allow {
            if let Some((d, _)) = deny.iter().find(|(d, _)| d.contains(net)) {
                return Err(self.error(
                    span.clone(),
                    format!(
                        "rtt: allow: prefix {net} is inside deny prefix {d}, which always wins: it would admit nothing"
                    ),
                ));
            }
        }
        Ok(crate::probe::SourcePolicy {
            deny: deny.into_iter().map(|(n, _)| n).collect(),
            allow: allow.into_iter().map(|(n, _)| n).collect(),
        })
    }

    /// `[rtt]`: ranges here; what [`crate::probe::ProbeSettings::validate`] checks (the order)
    /// is reported at the order, so there is one definition of runnable settings.
    pub(super) fn rtt(
        &self,
        raw: Option<Spanned<RawRtt>>,
        has_site: bool,
    ) -> Result<RttSettings, ConfigError> {
        use crate::probe::{LdnsMask, ProbeKind, ProbeSettings};
        let Some(raw) = raw else {
            return Ok(RttSettings::default());
        };
        let section = raw.span();
        let raw = raw.into_inner();
        let owner = "rtt";
        let d = ProbeSettings::default();
        if let Some(e) = &raw.enabled
            && *e.get_ref()
            && !has_site
        {
            return Err(self.error(
                e.span(),
                "rtt: probing needs server.site, the [[site]] whose RTT column this server measures",
            ));
        }
        // Without a site nothing is probed: settings other than `enabled = false` would be
        // read and ignored.
        if !has_site && raw.enabled.as_ref().is_none_or(|e| *e.get_ref()) {
            return Err(self.error(
                section,
                "rtt: probing needs server.site, the [[site]] whose RTT column this server \
                 measures (or enabled = false)",
            ));
        }
        let mut order = d.order.clone();
        if let Some(list) = &raw.order {
            order = list
                .get_ref()
                .iter()
                .map(|k| {
                    k.get_ref()
                        .parse::<ProbeKind>()
                        .map_err(|e| self.error(k.span(), format!("rtt: order: {e}")))
                })
                .collect::<Result<_, _>>()?;
        }
        let ms = |v: Option<Int>,
                  key: &str,
                  range: RangeInclusive<i64>,
                  default: Duration|
         -> Result<Duration, ConfigError> {
            let default = u64::try_from(default.as_millis()).unwrap_or(u64::MAX);
            Ok(Duration::from_millis(
                self.int(owner, key, v, range, default)?,
            ))
        };
        let settings = ProbeSettings {
            order,
            interval: ms(raw.interval_ms, "interval_ms", 1..=3_600_000, d.interval)?,
            timeout: ms(raw.timeout_ms, "timeout_ms", 1..=60_000, d.timeout)?,
            tolerance: ms(
                raw.tolerance_ms,
                "tolerance_ms",
                TOLERANCE_RANGE,
                d.tolerance,
            )?,
            ldns_timeout: Duration::from_secs(self.int(
                owner,
                "ldns_timeout_s",
                raw.ldns_timeout_s,
                1..=86_400,
                d.ldns_timeout.as_secs(),
            )?),
            mask: LdnsMask {
                v4: self.int(
                    owner,
                    "ldns_mask_v4",
                    raw.ldns_mask_v4,
                    MASK_V4_RANGE,
                    d.mask.v4,
                )?,
                v6: self.int(
                    owner,
                    "ldns_mask_v6",
                    raw.ldns_mask_v6,
                    MASK_V6_RANGE,
                    d.mask.v6,
                )?,
            },
            // No "unlimited": 0 would start every due round's probes at once.
            max_rate: self.int(owner, "max_rate", raw.max_rate, 1..=1_000_000, d.max_rate)?,
            max_concurrent: self.int(
                owner,
                "max_concurrent",
                raw.max_concurrent,
                1..=65_536,
                d.max_concurrent,
            )?,
            tick: d.tick,
            max_ldns: self.int(owner, "max_ldns", raw.max_ldns, 1..=10_000_000, d.max_ldns)?,
            sources: self.rtt_sources(raw.deny.as_ref(), raw.allow.as_ref())?,
        };
        if let Err(reason) = settings.validate() {
            let span = raw.order.as_ref().map_or(section, Spanned::span);
            return Err(self.error(span, format!("rtt: {reason}")));
        }
        Ok(RttSettings {
            enabled: raw.enabled.map(Spanned::into_inner),
            probe: settings,
        })
    }
}
