//! `[admin]`: the HTTP endpoint for Prometheus, status pages and load balancers
//! (`crate::admin`). Without the section gslbd serves no such endpoint.
//!
//! - `listen = "ADDR:PORT"` (required in the section): where it listens.
//! - `allow_remote = true|false` (default false): the endpoint has no authentication and shows
//!   service names, sites and MEP peers with their errors, so a `listen` address that is not a
//!   loopback one (127.0.0.0/8, ::1; 0.0.0.0 and :: are not) is refused at load unless this
//!   says the operator means it (a management address, a firewalled port).

use std::net::SocketAddr;

use serde::Deserialize;
use toml::Spanned;

use super::error::ConfigError;
use super::validate::{Str, Validator};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdmin {
    listen: Option<Str>,
    allow_remote: Option<bool>,
}

/// `[admin]`, when the section is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminSettings {
    /// Where the HTTP endpoint listens (TCP); port 0 takes a free port, logged at start.
    pub listen: SocketAddr,
    /// `listen` may be an address other than a loopback one.
    pub allow_remote: bool,
}

impl Validator<'_> {
    pub(super) fn admin(
        &self,
        raw: Option<Spanned<RawAdmin>>,
    ) -> Result<Option<AdminSettings>, ConfigError> {
        let Some(raw) = raw else {
            return Ok(None);
        };
        let span = raw.span();
        let RawAdmin {
            listen,
            allow_remote,
        } = raw.into_inner();
        let allow_remote = allow_remote.unwrap_or(false);
        let Some(listen) = listen else {
            return Err(self.error(
                span,
                "admin: listen (\"ADDR:PORT\") is required; without the section no admin \
                 endpoint is served",
            ));
        };
        let addr = listen.get_ref().parse::<SocketAddr>().map_err(|_| {
            self.error(
                listen.span(),
                format!(
                    "admin.listen: {:?} is not ADDR:PORT (for example \"127.0.0.1:9153\" or \
                     \"[::1]:9153\")",
                    listen.get_ref()
                ),
            )
        })?;
        if !allow_remote && !addr.ip().to_canonical().is_loopback() {
            return Err(self.error(
                listen.span(),
                format!(
                    "admin.listen: {addr} is not a loopback address, and the endpoint has no \
                     authentication (it shows services, sites and MEP peers); set \
                     allow_remote = true in [admin] to serve it there, on a management address \
                     or a firewalled port"
                ),
            ));
        }
        Ok(Some(AdminSettings {
            listen: addr,
            allow_remote,
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;

    const BASE: &str = "[server]\nlisten = [\"192.0.2.53\"]\n";

    fn parse(extra: &str) -> Result<Config, String> {
        Config::parse(&format!("{BASE}{extra}"), Path::new("admin.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn absent_means_no_endpoint_and_listen_is_read() {
        assert_eq!(parse("").unwrap().admin, None);
        let admin = parse("[admin]\nlisten = \"[::1]:9153\"\n")
            .unwrap()
            .admin
            .unwrap();
        assert_eq!(admin.listen, "[::1]:9153".parse().unwrap());
        assert!(!admin.allow_remote);
    }

    #[test]
    fn a_non_loopback_listen_is_refused_where_it_is_written_unless_allow_remote() {
        for addr in [
            "192.0.2.53:9153",
            "0.0.0.0:9153",
            "[::]:9153",
            "[2001:db8::1]:9153",
        ] {
            let error = parse(&format!("[admin]\nlisten = \"{addr}\"\n")).unwrap_err();
            assert!(
                error.contains("admin.toml:4:10")
                    && error.contains("not a loopback address")
                    && error.contains("allow_remote = true"),
                "{addr}: {error}"
            );
            let error = parse(&format!(
                "[admin]\nallow_remote = false\nlisten = \"{addr}\"\n"
            ))
            .unwrap_err();
            assert!(error.contains("admin.toml:5:10"), "{addr}: {error}");
            let admin = parse(&format!(
                "[admin]\nlisten = \"{addr}\"\nallow_remote = true\n"
            ))
            .unwrap()
            .admin
            .unwrap();
            assert_eq!(admin.listen, addr.parse().unwrap());
            assert!(admin.allow_remote);
        }
        // Loopback, also written as an IPv4-mapped IPv6 address, needs nothing.
        for addr in [
            "127.0.0.1:9153",
            "127.1.2.3:0",
            "[::1]:9153",
            "[::ffff:127.0.0.1]:9153",
        ] {
            let admin = parse(&format!("[admin]\nlisten = \"{addr}\"\n"))
                .unwrap()
                .admin
                .unwrap();
            assert_eq!(admin.listen, addr.parse().unwrap());
        }
    }

    #[test]
    fn a_bad_listen_or_key_is_refused_where_it_is_written() {
        let error = parse("[admin]\nlisten = \"127.0.0.1\"\n").unwrap_err();
        assert!(
            error.contains("admin.toml:4:10") && error.contains("not ADDR:PORT"),
            "{error}"
        );
        let error = parse("[admin]\n").unwrap_err();
        assert!(
            error.contains("admin.toml:3:") && error.contains("listen"),
            "{error}"
        );
        let error = parse("[admin]\nlisten = \"127.0.0.1:9153\"\nport = 1\n").unwrap_err();
        assert!(
            error.contains("admin.toml:5:") && error.contains("unknown field"),
            "{error}"
        );
    }
}
