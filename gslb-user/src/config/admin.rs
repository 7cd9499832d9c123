//! `[admin]`: the HTTP endpoint for Prometheus, status pages and load balancers
//! (`crate::admin`). Without the section gslbd serves no such endpoint.

use std::net::SocketAddr;

use serde::Deserialize;
use toml::Spanned;

use super::error::ConfigError;
use super::validate::{Str, Validator};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdmin {
    listen: Option<Str>,
}

/// `[admin]`, when the section is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminSettings {
    /// Where the HTTP endpoint listens (TCP); port 0 takes a free port, logged at start.
    pub listen: SocketAddr,
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
        let Some(listen) = raw.into_inner().listen else {
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
        Ok(Some(AdminSettings { listen: addr }))
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
