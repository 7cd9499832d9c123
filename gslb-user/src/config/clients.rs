//! The settings that protect the server from its clients: `[server]`'s TCP limits (`tcp_*`),
//! `ecs_allow` (which resolvers may speak for their clients with EDNS Client Subnet), and
//! `[rrl]`, response rate limiting.

use std::ops::RangeInclusive;
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;
use toml::Spanned;

use super::error::ConfigError;
use super::validate::{Int, List, Validator};
use crate::model::RrlSettings;
use crate::server::TcpLimits;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRrl {
    enabled: Option<Spanned<bool>>,
    rate: Option<Int>,
    burst: Option<Int>,
    slip: Option<Int>,
    ipv4_prefix: Option<Int>,
    ipv6_prefix: Option<Int>,
    table_size: Option<Int>,
}

const RRL_RATE_RANGE: RangeInclusive<i64> = 1..=1_000_000;
const RRL_SLIP_RANGE: RangeInclusive<i64> = 0..=100;
/// Shorter prefixes would put whole providers in one bucket.
const RRL_V4_RANGE: RangeInclusive<i64> = 8..=32;
const RRL_V6_RANGE: RangeInclusive<i64> = 32..=128;
const RRL_TABLE_RANGE: RangeInclusive<i64> = 1024..=(1 << 24);

/// `tcp_max_connections`: one at least; a million sockets is past any host's file limit.
const TCP_CONNECTIONS_RANGE: RangeInclusive<i64> = 1..=1_000_000;
/// `tcp_idle_timeout_ms`, `tcp_message_timeout_ms`: 10 ms to 10 minutes.
const TCP_TIMEOUT_MS_RANGE: RangeInclusive<i64> = 10..=600_000;
/// Most `ecs_allow` prefixes (each responder query walks them; the fast path's `ECS_ALLOW`
/// trie holds two lists of this size).
const MAX_ECS_ALLOW: usize = gslb_common::ECS_ALLOW_PREFIXES_MAX;

impl Validator<'_> {
    /// `tcp_max_connections`, `tcp_max_per_address`, `tcp_idle_timeout_ms`,
    /// `tcp_message_timeout_ms`; a per-address limit above the cap could never act.
    pub(super) fn tcp_limits(
        &self,
        max_connections: Option<Int>,
        max_per_address: Option<Int>,
        idle_ms: Option<Int>,
        message_ms: Option<Int>,
    ) -> Result<TcpLimits, ConfigError> {
        let default = TcpLimits::default();
        let owner = "server";
        let ms = |raw, key, default: Duration| {
            self.int::<u64>(
                owner,
                key,
                raw,
                TCP_TIMEOUT_MS_RANGE,
                default.as_millis() as u64,
            )
            .map(Duration::from_millis)
        };
        let max = self.int(
            owner,
            "tcp_max_connections",
            max_connections,
            TCP_CONNECTIONS_RANGE,
            default.max_connections,
        )?;
        let per_address_span = max_per_address.as_ref().map(Spanned::span);
        let per_address = self.int(
            owner,
            "tcp_max_per_address",
            max_per_address,
            TCP_CONNECTIONS_RANGE,
            default.max_per_address.min(max),
        )?;
        if per_address > max {
            return Err(self.error(
                per_address_span.expect("the default is within the cap"),
                format!(
                    "server: tcp_max_per_address {per_address} is above tcp_max_connections {max}, \
                     so it could never act"
                ),
            ));
        }
        Ok(TcpLimits {
            max_connections: max,
            max_per_address: per_address,
            idle_timeout: ms(idle_ms, "tcp_idle_timeout_ms", default.idle_timeout)?,
            message_timeout: ms(
                message_ms,
                "tcp_message_timeout_ms",
                default.message_timeout,
            )?,
        })
    }

    /// `ecs_allow`: prefixes without host bits, none twice, at least one (an empty list would
    /// turn ECS off for everyone: say so with a prefix nobody uses instead, or remove the key
    /// to take it from everyone).
    pub(super) fn ecs_allow(&self, raw: &List) -> Result<Vec<IpNet>, ConfigError> {
        if raw.get_ref().is_empty() {
            return Err(self.error(
                raw.span(),
                "server.ecs_allow: empty; remove the key to use ECS from every client",
            ));
        }
        if raw.get_ref().len() > MAX_ECS_ALLOW {
            return Err(self.error(
                raw.span(),
                format!("server.ecs_allow: more than {MAX_ECS_ALLOW} prefixes"),
            ));
        }
        let mut nets: Vec<IpNet> = Vec::new();
        for p in raw.get_ref() {
            let net = self.prefix(p, "server.ecs_allow")?;
            if nets.contains(&net) {
                return Err(self.error(
                    p.span(),
                    format!("server.ecs_allow: prefix {net} listed twice"),
                ));
            }
            nets.push(net);
        }
        Ok(nets)
    }
}

impl Validator<'_> {
    /// `[rrl]`; absent: off.
    pub(super) fn rrl(&self, raw: Option<Spanned<RawRrl>>) -> Result<RrlSettings, ConfigError> {
        let Some(raw) = raw else {
            return Ok(RrlSettings::default());
        };
        let raw = raw.into_inner();
        let d = RrlSettings::default();
        let owner = "rrl";
        let rate = self.int(owner, "rate", raw.rate, RRL_RATE_RANGE, d.rate)?;
        Ok(RrlSettings {
            enabled: raw.enabled.is_none_or(Spanned::into_inner),
            rate,
            burst: self.int(owner, "burst", raw.burst, RRL_RATE_RANGE, rate)?,
            slip: self.int(owner, "slip", raw.slip, RRL_SLIP_RANGE, d.slip)?,
            ipv4_prefix: self.int(
                owner,
                "ipv4_prefix",
                raw.ipv4_prefix,
                RRL_V4_RANGE,
                d.ipv4_prefix,
            )?,
            ipv6_prefix: self.int(
                owner,
                "ipv6_prefix",
                raw.ipv6_prefix,
                RRL_V6_RANGE,
                d.ipv6_prefix,
            )?,
            table_size: self.int(
                owner,
                "table_size",
                raw.table_size,
                RRL_TABLE_RANGE,
                d.table_size,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;
    use crate::model::RrlSettings;
    use crate::server::TcpLimits;
    use std::time::Duration;

    const SERVER: &str = "[server]\nlisten = [\"192.0.2.1\"]\n";

    fn parse(extra: &str) -> Result<Config, String> {
        Config::parse(&format!("{SERVER}{extra}"), Path::new("c.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn tcp_limits_are_read_and_default() {
        assert_eq!(parse("").unwrap().server.tcp, TcpLimits::default());
        let tcp = parse(
            "tcp_max_connections = 100\ntcp_max_per_address = 5\ntcp_idle_timeout_ms = 3000\n\
             tcp_message_timeout_ms = 500\n",
        )
        .unwrap()
        .server
        .tcp;
        assert_eq!(
            tcp,
            TcpLimits {
                max_connections: 100,
                max_per_address: 5,
                idle_timeout: Duration::from_secs(3),
                message_timeout: Duration::from_millis(500),
            }
        );
        // A cap below the default per-address limit lowers it.
        let tcp = parse("tcp_max_connections = 10\n").unwrap().server.tcp;
        assert_eq!((tcp.max_connections, tcp.max_per_address), (10, 10));
    }

    #[test]
    fn nonsense_tcp_limits_and_ecs_prefixes_are_refused_where_written() {
        for (extra, want) in [
            (
                "tcp_max_connections = 0",
                "c.toml:3:23: server: tcp_max_connections 0 out of range",
            ),
            (
                "tcp_max_per_address = 0",
                "c.toml:3:23: server: tcp_max_per_address 0 out of range",
            ),
            (
                "tcp_max_connections = 10\ntcp_max_per_address = 11",
                "c.toml:4:23: server: tcp_max_per_address 11 is above tcp_max_connections 10",
            ),
            (
                "tcp_idle_timeout_ms = 0",
                "c.toml:3:23: server: tcp_idle_timeout_ms 0 out of range",
            ),
            (
                "tcp_message_timeout_ms = 600001",
                "c.toml:3:26: server: tcp_message_timeout_ms 600001 out of range",
            ),
            ("ecs_allow = []", "c.toml:3:13: server.ecs_allow: empty"),
            (
                "ecs_allow = [\"192.0.2.1\"]",
                "c.toml:3:14: server.ecs_allow: \"192.0.2.1\" is not a prefix",
            ),
            (
                "ecs_allow = [\"192.0.2.1/24\"]",
                "c.toml:3:14: server.ecs_allow: prefix 192.0.2.1/24 has host bits set",
            ),
            (
                "ecs_allow = [\"192.0.2.0/24\", \"192.0.2.0/24\"]",
                "c.toml:3:30: server.ecs_allow: prefix 192.0.2.0/24 listed twice",
            ),
        ] {
            let got = parse(extra).unwrap_err();
            assert!(got.contains(want), "{extra:?}: got {got}, want {want}");
        }
    }

    #[test]
    fn rrl_is_off_without_the_section_and_read_with_it() {
        assert!(!parse("").unwrap().rrl.enabled);
        assert_eq!(
            parse("[rrl]\nrate = 5\n").unwrap().rrl,
            RrlSettings {
                enabled: true,
                rate: 5,
                burst: 5,
                ..RrlSettings::default()
            }
        );
        let all = parse(
            "[rrl]\nenabled = false\nrate = 100\nburst = 300\nslip = 0\nipv4_prefix = 32\n\
             ipv6_prefix = 64\ntable_size = 2048\n",
        )
        .unwrap()
        .rrl;
        assert_eq!(
            all,
            RrlSettings {
                enabled: false,
                rate: 100,
                burst: 300,
                slip: 0,
                ipv4_prefix: 32,
                ipv6_prefix: 64,
                table_size: 2048
            }
        );
        for (extra, want) in [
            ("[rrl]\nrate = 0", "c.toml:4:8: rrl: rate 0 out of range"),
            ("[rrl]\nburst = 0", "c.toml:4:9: rrl: burst 0 out of range"),
            (
                "[rrl]\nslip = 101",
                "c.toml:4:8: rrl: slip 101 out of range",
            ),
            (
                "[rrl]\nipv4_prefix = 33",
                "c.toml:4:15: rrl: ipv4_prefix 33 out of range",
            ),
            (
                "[rrl]\nipv6_prefix = 16",
                "c.toml:4:15: rrl: ipv6_prefix 16 out of range",
            ),
            (
                "[rrl]\ntable_size = 10",
                "c.toml:4:14: rrl: table_size 10 out of range",
            ),
            ("[rrl]\nrates = 10", "unknown field `rates`"),
        ] {
            let got = parse(extra).unwrap_err();
            assert!(got.contains(want), "{extra:?}: got {got}, want {want}");
        }
    }

    #[test]
    fn ecs_allow_is_read() {
        assert_eq!(parse("").unwrap().server.ecs_allow, None);
        assert_eq!(
            parse("ecs_allow = [\"192.0.2.0/24\", \"2001:db8::/32\"]")
                .unwrap()
                .server
                .ecs_allow,
            Some(vec![
                "192.0.2.0/24".parse().unwrap(),
                "2001:db8::/32".parse().unwrap()
            ])
        );
    }
}
