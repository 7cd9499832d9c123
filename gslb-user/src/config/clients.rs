//! The settings that protect the server from its clients: `[server]`'s TCP limits (`tcp_*`)
//! and `ecs_allow` (which resolvers may speak for their clients with EDNS Client Subnet).

use std::ops::RangeInclusive;
use std::time::Duration;

use ipnet::IpNet;

use super::{ConfigError, Int, List, Validator};
use crate::server::TcpLimits;

/// `tcp_max_connections`: one at least; a million sockets is past any host's file limit.
const TCP_CONNECTIONS_RANGE: RangeInclusive<i64> = 1..=1_000_000;
/// `tcp_idle_timeout_ms`, `tcp_message_timeout_ms`: 10 ms to 10 minutes.
const TCP_TIMEOUT_MS_RANGE: RangeInclusive<i64> = 10..=600_000;
/// Most `ecs_allow` prefixes (each query walks them).
const MAX_ECS_ALLOW: usize = 1024;

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
        let per_address_span = max_per_address.as_ref().map(|p| p.span());
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
    pub(super) fn ecs_allow(&self, raw: List) -> Result<Vec<IpNet>, ConfigError> {
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
            let err = |reason: String| self.error(p.span(), format!("server.ecs_allow: {reason}"));
            let net: IpNet = p.get_ref().parse().map_err(|_| {
                err(format!(
                    "{:?} is not a prefix (expected address/length, e.g. 192.0.2.0/24)",
                    p.get_ref()
                ))
            })?;
            if net.trunc() != net {
                return Err(err(format!(
                    "prefix {net} has host bits set (did you mean {}?)",
                    net.trunc()
                )));
            }
            if nets.contains(&net) {
                return Err(err(format!("prefix {net} listed twice")));
            }
            nets.push(net);
        }
        Ok(nets)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;
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
