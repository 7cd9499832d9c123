//! `server.identity`, `server.nsid` and `server.version`: what this node tells about itself.
//! Anycast operators need to know which node answered (NSID, RFC 5001; CH TXT `id.server`,
//! RFC 4892); nothing is told unless configured, as NSD and Knot do. And the secrets of the
//! server cookies it gives (RFC 7873, RFC 9018): `server.cookie_secret`,
//! `server.cookie_previous_secret`.

use toml::Spanned;

use super::error::ConfigError;
use super::validate::{Str, Validator};
use crate::model::{CookieSecrets, Identity};

/// `server.identity`'s value that stands for the host's name, read at load. `$` is in no host
/// name, so no node is named this by accident.
const HOSTNAME: &str = "$HOSTNAME";

/// Where Linux keeps the host's name.
const HOSTNAME_FILE: &str = "/proc/sys/kernel/hostname";

/// The longest identity or version: one TXT character-string.
const MAX_TEXT: usize = 255;

impl Validator<'_> {
    /// `identity` (optional; `"$HOSTNAME"`: the host's name): answered to CH TXT `id.server`
    /// and `hostname.bind`, and as the NSID option; `nsid` (default true; `false`: only the CH
    /// names); `version` (optional): answered to CH TXT `version.bind` and `version.server`.
    pub(super) fn identity(
        &self,
        identity: Option<Str>,
        nsid: Option<Spanned<bool>>,
        version: Option<Str>,
    ) -> Result<Identity, ConfigError> {
        let name = identity
            .map(|raw| {
                let text = if raw.get_ref() == HOSTNAME {
                    std::fs::read_to_string(HOSTNAME_FILE)
                        .map(|h| h.trim().to_owned())
                        .map_err(|e| {
                            self.error(
                                raw.span(),
                                format!("server.identity: the host name ({HOSTNAME_FILE}): {e}"),
                            )
                        })?
                } else {
                    raw.get_ref().clone()
                };
                self.text("server.identity", &raw, text)
            })
            .transpose()?;
        let nsid = match (nsid, &name) {
            (Some(n), None) if *n.get_ref() => {
                return Err(self.error(
                    n.span(),
                    "server.nsid: the option carries server.identity, which is not set",
                ));
            }
            (Some(n), _) if !n.get_ref() => None,
            (_, name) => name.as_ref().map(|n| n.as_bytes().to_vec()),
        };
        let version = version
            .map(|raw| {
                let text = raw.get_ref().clone();
                self.text("server.version", &raw, text)
            })
            .transpose()?;
        Ok(Identity {
            name,
            nsid,
            version,
        })
    }

    /// `cookie_secret` (optional; 16 bytes as 32 hex digits, RFC 9018's SipHash-2-4 key) and
    /// `cookie_previous_secret` (optional, only with a current one; still accepted while
    /// clients move to the new one).
    pub(super) fn cookies(
        &self,
        secret: Option<Str>,
        previous: Option<Str>,
    ) -> Result<Option<CookieSecrets>, ConfigError> {
        let key = |raw: &Str, name: &str| -> Result<[u8; 16], ConfigError> {
            let bytes = data_encoding::HEXLOWER_PERMISSIVE
                .decode(raw.get_ref().as_bytes())
                .ok()
                .and_then(|b| <[u8; 16]>::try_from(b).ok())
                .ok_or_else(|| {
                    self.error(
                        raw.span(),
                        format!(
                            "server.{name}: 32 hex digits (16 bytes) expected, as from \
                             `openssl rand -hex 16`"
                        ),
                    )
                })?;
            if bytes == [0; 16] {
                return Err(
                    self.error(raw.span(), format!("server.{name}: all zeros is no secret"))
                );
            }
            Ok(bytes)
        };
        let (secret, previous) = match (secret, previous) {
            (None, None) => return Ok(None),
            (None, Some(p)) => {
                return Err(self.error(
                    p.span(),
                    "server.cookie_previous_secret: without server.cookie_secret there is no \
                     rollover; set the new secret there",
                ));
            }
            (Some(s), p) => (s, p),
        };
        let current = key(&secret, "cookie_secret")?;
        let previous = previous
            .map(|p| {
                let old = key(&p, "cookie_previous_secret")?;
                if old == current {
                    return Err(self.error(
                        p.span(),
                        "server.cookie_previous_secret: the same as server.cookie_secret",
                    ));
                }
                Ok(old)
            })
            .transpose()?;
        Ok(Some(CookieSecrets { current, previous }))
    }

    /// `text`, written at `raw`, if it is printable ASCII of 1..=255 bytes.
    fn text(&self, key: &str, raw: &Str, text: String) -> Result<String, ConfigError> {
        if text.is_empty() || text.len() > MAX_TEXT {
            return Err(self.error(
                raw.span(),
                format!(
                    "{key}: {} bytes; 1..={MAX_TEXT} (one TXT string)",
                    text.len()
                ),
            ));
        }
        if let Some(c) = text.chars().find(|c| !(c.is_ascii_graphic() || *c == ' ')) {
            return Err(self.error(raw.span(), format!("{key}: {c:?} is not printable ASCII")));
        }
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;
    use crate::model::Identity;

    fn identity(keys: &str) -> Result<Identity, String> {
        let text = format!("[server]\nlisten = [\"192.0.2.1\"]\n{keys}\n");
        Config::parse(&text, Path::new("identity.toml"))
            .map(|c| c.server.identity)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn nothing_is_told_by_default() {
        assert_eq!(identity(""), Ok(Identity::default()));
    }

    #[test]
    fn the_identity_is_the_nsid_unless_turned_off() {
        let named = identity("identity = \"fra-1\"\nversion = \"gslbd 1\"").unwrap();
        assert_eq!(named.name.as_deref(), Some("fra-1"));
        assert_eq!(named.nsid.as_deref(), Some(&b"fra-1"[..]));
        assert_eq!(named.version.as_deref(), Some("gslbd 1"));
        let quiet = identity("identity = \"fra-1\"\nnsid = false").unwrap();
        assert_eq!((quiet.name.as_deref(), quiet.nsid), (Some("fra-1"), None));
    }

    #[test]
    fn hostname_is_read_from_the_host() {
        let host = std::fs::read_to_string(super::HOSTNAME_FILE).unwrap();
        let got = identity("identity = \"$HOSTNAME\"").unwrap();
        assert_eq!(got.name.as_deref(), Some(host.trim()));
        assert_eq!(got.nsid.as_deref(), Some(host.trim().as_bytes()));
    }

    #[test]
    fn bad_values_are_refused_with_their_line() {
        for (keys, why) in [
            (
                "nsid = true",
                "identity.toml:3:8: server.nsid: the option carries server.identity",
            ),
            (
                "identity = \"\"",
                "identity.toml:3:12: server.identity: 0 bytes",
            ),
            (
                "identity = \"a\\nb\"",
                "server.identity: '\\n' is not printable ASCII",
            ),
            ("identity = \"n\u{e9}\"", "is not printable ASCII"),
            ("version = \"\"", "server.version: 0 bytes"),
        ] {
            let got = identity(keys);
            assert!(
                got.as_ref().is_err_and(|e| e.contains(why)),
                "{keys}: {got:?}, not {why:?}"
            );
        }
        let long = format!("identity = \"{}\"", "a".repeat(256));
        assert!(identity(&long).is_err_and(|e| e.contains("256 bytes")));
    }

    fn cookies(keys: &str) -> Result<Option<crate::model::CookieSecrets>, String> {
        let text = format!("[server]\nlisten = [\"192.0.2.1\"]\n{keys}\n");
        Config::parse(&text, Path::new("identity.toml"))
            .map(|c| c.server.cookies)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn cookie_secrets_are_16_bytes_of_hex() {
        assert_eq!(cookies(""), Ok(None));
        let both = cookies(
            "cookie_secret = \"E5E973E5A6B2A43F48E7DC849E37BFCF\"\n\
             cookie_previous_secret = \"dd3bdf9344b678b185a6f5cb60fca715\"",
        )
        .unwrap()
        .unwrap();
        assert_eq!(both.current[..2], [0xe5, 0xe9]);
        assert_eq!(both.previous.map(|p| p[15]), Some(0x15));
        for (keys, why) in [
            (
                "cookie_secret = \"e5e973\"",
                "identity.toml:3:17: server.cookie_secret: 32 hex digits (16 bytes) expected",
            ),
            (
                "cookie_secret = \"zz e973e5a6b2a43f48e7dc849e37bfcf\"",
                "server.cookie_secret: 32 hex digits",
            ),
            (
                "cookie_secret = \"00000000000000000000000000000000\"",
                "all zeros is no secret",
            ),
            (
                "cookie_previous_secret = \"e5e973e5a6b2a43f48e7dc849e37bfcf\"",
                "identity.toml:3:26: server.cookie_previous_secret: without server.cookie_secret",
            ),
            (
                "cookie_secret = \"e5e973e5a6b2a43f48e7dc849e37bfcf\"\n\
                 cookie_previous_secret = \"e5e973e5a6b2a43f48e7dc849e37bfcf\"",
                "identity.toml:4:26: server.cookie_previous_secret: the same as",
            ),
        ] {
            let got = cookies(keys);
            assert!(
                got.as_ref().is_err_and(|e| e.contains(why)),
                "{keys}: {got:?}, not {why:?}"
            );
        }
    }
}
