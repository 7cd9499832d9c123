//! `[[site]]`: GSLB sites.

use std::collections::HashMap;
use std::net::IpAddr;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use super::error::ConfigError;
use super::names::Seen;
use super::validate::{Int, List, PORT_RANGE, Str, Validator};

/// `[[site]]`: a GSLB site (data centre or edge node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// Unique; letters, digits, '-', '_' and '.', starting with a letter, digit or '_'.
    pub name: String,
    /// Its metric-exchange (MEP) address; unique among sites.
    pub ip: IpAddr,
    /// Its address as seen from other sites when it sits behind NAT; same family as `ip`.
    /// Other sites open MEP links to it there.
    pub public_ip: Option<IpAddr>,
    /// Parent (the default: answers DNS, peers with the other parents) or child.
    pub role: crate::mep::Role,
    /// A child's parent (an existing parent).
    pub parent: Option<String>,
    /// A parent's ordered backup parents: ≤ 5 other existing parents; empty clears the list.
    pub backup_parents: Vec<String>,
    /// The port its MEP listener is reached on (default 3011).
    pub mep_port: u16,
    /// Its MEP public key (`key`, the base64 line of `openssl pkey -pubout`, or `key_file`, a
    /// PEM file): its links are believed only once they prove its name with the private key.
    /// Required on every site but this server's own when `[mep]` is enabled.
    pub key: Option<crate::mep::PublicKey>,
    /// Its MEP links may come from any source address (behind a NAT); default false: only
    /// from `ip` or `public_ip`.
    pub nat: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSite {
    pub(super) name: Str,
    pub(super) ip: Str,
    pub(super) public_ip: Option<Str>,
    pub(super) role: Option<Spanned<crate::mep::Role>>,
    pub(super) parent: Option<Str>,
    pub(super) backup_parents: Option<List>,
    pub(super) mep_port: Option<Int>,
    pub(super) key: Option<Str>,
    pub(super) key_file: Option<Str>,
    pub(super) nat: Option<Spanned<bool>>,
}

/// Where each `[[site]]`'s MEP settings were written, for topology errors.
pub(super) struct SiteSpans {
    pub(super) name: Range<usize>,
    pub(super) key: Option<Range<usize>>,
    pub(super) role: Option<Range<usize>>,
    pub(super) parent: Option<Range<usize>>,
    pub(super) backups: Option<(Range<usize>, Vec<Range<usize>>)>,
}

impl SiteSpans {
    pub(super) fn of(raw: &RawSite) -> SiteSpans {
        SiteSpans {
            name: raw.name.span(),
            key: raw
                .key
                .as_ref()
                .or(raw.key_file.as_ref())
                .map(Spanned::span),
            role: raw.role.as_ref().map(Spanned::span),
            parent: raw.parent.as_ref().map(Spanned::span),
            backups: raw
                .backup_parents
                .as_ref()
                .map(|l| (l.span(), l.get_ref().iter().map(Spanned::span).collect())),
        }
    }
}

impl Validator<'_> {
    pub(super) fn sites(&self, raw: Vec<RawSite>) -> Result<Vec<Site>, ConfigError> {
        let mut names = Seen::new();
        let mut ips: HashMap<IpAddr, (String, usize)> = HashMap::new();
        let mut sites = Vec::new();
        for rs in raw {
            let name = self.object_name("site", &rs.name, &mut names)?;
            let owner = format!("site {name:?}");
            let ip = self.ip(&owner, "ip", &rs.ip)?;
            if let Some((other, line)) = ips.get(&ip) {
                return Err(self.error(
                    rs.ip.span(),
                    format!("{owner}: ip {ip} is already site {other:?}'s (line {line})"),
                ));
            }
            ips.insert(ip, (name.clone(), self.line(rs.ip.span())));
            let public_ip = self.public_ip(&owner, ip, rs.public_ip)?;
            let mep_port = self.int(
                &owner,
                "mep_port",
                rs.mep_port,
                PORT_RANGE,
                crate::mep::DEFAULT_PORT,
            )?;
            let key = self.site_key(&owner, rs.key, rs.key_file)?;
            // References are checked with the whole topology (Validator::mep_topology).
            sites.push(Site {
                name,
                ip,
                public_ip,
                role: rs
                    .role
                    .map_or(crate::mep::Role::Parent, Spanned::into_inner),
                parent: rs.parent.map(Spanned::into_inner),
                backup_parents: rs
                    .backup_parents
                    .map(|l| {
                        l.into_inner()
                            .into_iter()
                            .map(Spanned::into_inner)
                            .collect()
                    })
                    .unwrap_or_default(),
                mep_port,
                key,
                nat: rs.nat.is_some_and(Spanned::into_inner),
            });
        }
        Ok(sites)
    }

    /// A `[[site]]`'s public key, inline (`key`) or in a PEM file (`key_file`).
    fn site_key(
        &self,
        owner: &str,
        key: Option<Str>,
        key_file: Option<Str>,
    ) -> Result<Option<crate::mep::PublicKey>, ConfigError> {
        let (text, raw, what) = match (key, key_file) {
            (None, None) => return Ok(None),
            (Some(_), Some(f)) => {
                return Err(self.error(
                    f.span(),
                    format!("{owner}: key and key_file are both set; keep one"),
                ));
            }
            (Some(k), None) => (k.get_ref().clone(), k, "key"),
            (None, Some(f)) => {
                let bytes = self.read_file(owner, "key_file", &f)?;
                (String::from_utf8_lossy(&bytes).into_owned(), f, "key_file")
            }
        };
        crate::mep::PublicKey::parse(&text).map(Some).map_err(|e| {
            self.error(
                raw.span(),
                format!("{owner}: {what}: {e} (`openssl pkey -in site.pem -pubout` prints it)"),
            )
        })
    }
}
