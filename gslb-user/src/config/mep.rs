//! `[mep]`: the Metric Exchange Protocol between sites (its TLS files, secrets and the
//! parent/child topology of the sites).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::Config;
use super::error::ConfigError;
use super::server::Server;
use super::site::{Site, SiteSpans};
use super::validate::{Int, Str, Validator};
use crate::mep::{MepConfig, MepConfigError, MepError, TlsInput};

/// Stands in for the local site of a disabled `[mep]` without `server.site`.
static DISABLED_SITE: Site = Site {
    name: String::new(),
    ip: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    public_ip: None,
    role: crate::mep::Role::Parent,
    parent: None,
    backup_parents: Vec::new(),
    mep_port: crate::mep::DEFAULT_PORT,
    key: None,
    nat: false,
};

/// `[mep]`: this site's metric exchange with the other sites (docs/mep.md). The topology (roles,
/// parents, backup lists) is in the `[[site]]`s: [`Config::mep_topology`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MepSettings {
    /// Defaults to true when the section is written.
    pub enabled: bool,
    /// Where the listener binds: `listen` as written, else the local site's `ip` and `mep_port`.
    pub listen: SocketAddr,
    /// This site's private key (`private_key_file`, PEM PKCS#8 Ed25519); required when
    /// enabled. The other sites' public keys are their `[[site]] key`s.
    pub key: Option<crate::mep::SiteKey>,
    pub tls: Option<MepTlsFiles>,
    pub heartbeat: Duration,
    /// A link with no frame for this long is dead.
    pub dead_after: Duration,
}

/// Bytes never printed (Debug shows only their length).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

/// `[mep.tls]`: the files as written, and their contents as read when the configuration was
/// loaded (so a reload sees a renewed certificate, and a bad file fails the load).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MepTlsFiles {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub ca_file: PathBuf,
    pub cert_pem: Vec<u8>,
    pub key_pem: Secret,
    pub ca_pem: Vec<u8>,
}

impl MepTlsFiles {
    pub fn tls(&self) -> Result<crate::mep::MepTls, MepError> {
        crate::mep::MepTls::from_pem(&self.cert_pem, &self.key_pem.0, &self.ca_pem)
    }
}

impl Config {
    /// The MEP topology the `[[site]]`s describe (validated when the configuration was loaded,
    /// if it has a `[mep]` section or any site a role, parent or backup list). Other sites
    /// connect to a site at its `public_ip` when it has one.
    pub fn mep_topology(&self) -> Result<crate::mep::SiteTree, crate::mep::TopologyError> {
        crate::mep::SiteTree::new(site_specs(&self.sites))
    }

    /// `[mep]` when it is enabled.
    pub fn mep_enabled(&self) -> Option<&MepSettings> {
        self.mep.as_ref().filter(|m| m.enabled)
    }

    /// The MEP node's settings; `None` when MEP is off (or there is no local site, which
    /// validation rules out for an enabled `[mep]`).
    pub fn mep_node(&self) -> Result<Option<MepConfig>, MepError> {
        let (Some(mep), Some(site)) = (self.mep_enabled(), &self.server.site) else {
            return Ok(None);
        };
        let key = mep
            .key
            .clone()
            .ok_or(MepError::Config(MepConfigError::MissingPrivateKey))?;
        let mut c = MepConfig::new(site.clone(), key, self.mep_topology()?);
        c.heartbeat = mep.heartbeat;
        c.dead_after = mep.dead_after;
        // Every site must agree on it; the node warns about a peer that does not.
        c.rtt_tolerance_ms =
            Some(u32::try_from(self.rtt.probe.tolerance.as_millis()).unwrap_or(u32::MAX));
        c.tls = mep.tls.as_ref().map(MepTlsFiles::tls).transpose()?;
        c.validate()?;
        Ok(Some(c))
    }
}

fn site_specs(sites: &[Site]) -> Vec<crate::mep::SiteSpec> {
    sites
        .iter()
        .map(|s| crate::mep::SiteSpec {
            name: s.name.clone(),
            ip: s.ip,
            port: s.mep_port,
            connect: s.public_ip.map(|p| SocketAddr::new(p, s.mep_port)),
            role: s.role,
            parent: s.parent.clone(),
            backups: s.backup_parents.clone(),
            key: s.key,
            nat: s.nat,
        })
        .collect()
}

/// `[mep]`: the metric exchange with the other sites (docs/mep.md). Times in milliseconds.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMep {
    pub(super) enabled: Option<Spanned<bool>>,
    pub(super) listen: Option<Str>,
    /// Refused with the way to per-site keys (MEP 1's one secret for every site).
    pub(super) secret: Option<Str>,
    pub(super) secret_file: Option<Str>,
    pub(super) private_key_file: Option<Str>,
    pub(super) tls: Option<Spanned<RawMepTls>>,
    pub(super) heartbeat_ms: Option<Int>,
    pub(super) dead_after_ms: Option<Int>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMepTls {
    pub(super) cert_file: Str,
    pub(super) key_file: Str,
    pub(super) ca_file: Str,
}

impl Validator<'_> {
    /// The `[[site]]`s as a MEP topology; a [`crate::mep::TopologyError`] is reported at the
    /// value that causes it.
    pub(super) fn mep_topology(
        &self,
        sites: &[Site],
        spans: &[SiteSpans],
    ) -> Result<(), ConfigError> {
        use crate::mep::TopologyError as E;
        let Err(error) = crate::mep::SiteTree::new(site_specs(sites)) else {
            return Ok(());
        };
        let at = |name: &str| sites.iter().position(|s| s.name == name).map(|i| &spans[i]);
        let first = spans.first().map_or(0..0, |s| s.name.clone());
        let (span, hint) = match &error {
            E::DuplicateSite(n) | E::BadName(n) | E::UnknownSite(n) => {
                (at(n).map(|s| s.name.clone()), "")
            }
            E::DuplicateIp(_, n, _) => (at(n).map(|s| s.name.clone()), ""),
            // The first site over the limit.
            E::TooManyParents(_) | E::TooManyChildren(_) => {
                let child = matches!(error, E::TooManyChildren(_));
                let limit = if child {
                    crate::mep::topology::MAX_CHILDREN
                } else {
                    crate::mep::topology::MAX_PARENTS
                };
                let over = sites
                    .iter()
                    .zip(spans)
                    .filter(|(s, _)| (s.role == crate::mep::Role::Child) == child)
                    .nth(limit)
                    .map(|(_, sp)| sp.role.clone().unwrap_or_else(|| sp.name.clone()));
                (over, "")
            }
            E::NoParent(n) => (
                at(n).map(|s| s.role.clone().unwrap_or_else(|| s.name.clone())),
                " (set parent = \"…\")",
            ),
            E::ParentWithParent(n) => (
                at(n).and_then(|s| s.parent.clone()),
                " (a child needs role = \"child\")",
            ),
            E::BadParent { child, .. } => (at(child).and_then(|s| s.parent.clone()), ""),
            E::ChildWithBackups { site } | E::TooManyBackups { site, .. } => (
                at(site).and_then(|s| s.backups.as_ref().map(|b| b.0.clone())),
                "",
            ),
            E::BadBackup { site, backup, why } => {
                // The entry the check stopped at: the second of a name listed twice.
                let nth = usize::from(why.contains("twice"));
                let entry = at(site).and_then(|s| {
                    let list = &sites.iter().find(|x| &x.name == site)?.backup_parents;
                    let i = list
                        .iter()
                        .enumerate()
                        .filter(|(_, b)| *b == backup)
                        .nth(nth)?
                        .0;
                    s.backups.as_ref().map(|b| b.1[i].clone())
                });
                (entry, "")
            }
        };
        Err(self.error(
            span.unwrap_or(first),
            format!("[[site]] MEP topology: {error}{hint}"),
        ))
    }

    /// `[mep]`: needs `server.site`; this site's private key (read now, relative to the
    /// configuration file) matching its `[[site]] key`, and every other site's key; TLS files
    /// read and checked now. MEP 1's shared `secret` is refused with the way to keys.
    pub(super) fn mep(
        &self,
        raw: Option<Spanned<RawMep>>,
        server: &Server,
        sites: &[Site],
        spans: &[SiteSpans],
    ) -> Result<Option<MepSettings>, ConfigError> {
        let Some(raw) = raw else { return Ok(None) };
        let section = raw.span();
        let raw = raw.into_inner();
        let owner = "mep";
        let enabled = raw.enabled.as_ref().is_none_or(|e| *e.get_ref());
        let local = server
            .site
            .as_deref()
            .and_then(|n| sites.iter().find(|s| s.name == n));
        let local = match local {
            Some(site) => site,
            None if !enabled => {
                // Off: nothing below is used, but what is written must still make sense.
                sites.first().map_or(&DISABLED_SITE, |s| s)
            }
            None => {
                let span = raw.enabled.as_ref().map_or(section.clone(), Spanned::span);
                return Err(self.error(
                    span,
                    "mep: needs server.site, the [[site]] this server is (its MEP identity and address)",
                ));
            }
        };
        let listen = match &raw.listen {
            None => SocketAddr::new(local.ip, local.mep_port),
            Some(l) => {
                let text = l.get_ref();
                match (text.parse::<SocketAddr>(), text.parse::<IpAddr>()) {
                    (Ok(addr), _) if addr.port() != 0 => addr,
                    (_, Ok(ip)) => SocketAddr::new(ip, local.mep_port),
                    _ => {
                        return Err(self.error(
                            l.span(),
                            format!("mep: listen {text:?} is not an address or address:port (port 1..=65535; IPv6 with a port as [addr]:port)"),
                        ));
                    }
                }
            }
        };
        if let Some(old) = raw.secret.as_ref().or(raw.secret_file.as_ref()) {
            return Err(self.error(
                old.span(),
                "mep: secret and secret_file (one secret shared by every site) are no longer \
                 accepted: each site now proves its name with its own key. Give this site \
                 private_key_file (`openssl genpkey -algorithm ed25519 -out site.pem`) and \
                 every [[site]] its public key (key = the base64 line of `openssl pkey -in \
                 site.pem -pubout`); see docs/mep.md",
            ));
        }
        let key = match &raw.private_key_file {
            None if enabled => {
                return Err(self.error(
                    section,
                    "mep: private_key_file is missing: this site's Ed25519 private key (PEM), \
                     which proves its name to the other sites",
                ));
            }
            None => None,
            Some(f) => {
                let pem = Secret(self.read_file(owner, "private_key_file", f)?);
                let key = crate::mep::SiteKey::from_pem(&pem.0)
                    .map_err(|e| self.error(f.span(), format!("mep: private_key_file: {e}")))?;
                Some(key)
            }
        };
        if enabled && let Some(key) = &key {
            for (site, spans) in sites.iter().zip(spans) {
                match site.key {
                    Some(k) if site.name == local.name && k != key.public() => {
                        return Err(self.error(
                            spans.key.clone().unwrap_or(spans.name.clone()),
                            format!(
                                "site {:?}: key is not the public key of mep.private_key_file \
                                 (this server's site; its public key is {})",
                                site.name,
                                key.public().fingerprint()
                            ),
                        ));
                    }
                    None if site.name != local.name => {
                        return Err(self.error(
                            spans.name.clone(),
                            format!(
                                "site {:?}: key (or key_file) is missing: a site's MEP links are \
                                 believed only once they prove its name with its key",
                                site.name
                            ),
                        ));
                    }
                    _ => {}
                }
            }
        }
        let tls = match raw.tls {
            None => None,
            Some(t) => {
                let span = t.span();
                let t = t.into_inner();
                let files = MepTlsFiles {
                    cert_file: self.path(t.cert_file.get_ref()),
                    key_file: self.path(t.key_file.get_ref()),
                    ca_file: self.path(t.ca_file.get_ref()),
                    cert_pem: self.read_file(owner, "tls.cert_file", &t.cert_file)?,
                    key_pem: Secret(self.read_file(owner, "tls.key_file", &t.key_file)?),
                    ca_pem: self.read_file(owner, "tls.ca_file", &t.ca_file)?,
                };
                if let Err(e) = files.tls() {
                    let at = match &e {
                        MepError::Tls { input, .. } => match input {
                            TlsInput::Ca => t.ca_file.span(),
                            TlsInput::PrivateKey => t.key_file.span(),
                            TlsInput::Certificate => t.cert_file.span(),
                            TlsInput::CertificateAndKey | TlsInput::Provider => span,
                        },
                        _ => span,
                    };
                    return Err(self.error(at, format!("mep: {e}")));
                }
                Some(files)
            }
        };
        let ms = |v: Option<Int>, key: &str, range: RangeInclusive<i64>, default: u64| {
            self.int(owner, key, v, range, default)
                .map(Duration::from_millis)
        };
        let dead_span = raw.dead_after_ms.as_ref().map(Spanned::span);
        let heartbeat = ms(raw.heartbeat_ms, "heartbeat_ms", 10..=60_000, 500)?;
        let dead_after = ms(raw.dead_after_ms, "dead_after_ms", 20..=600_000, 2_000)?;
        if dead_after <= heartbeat {
            return Err(self.error(
                dead_span.unwrap_or(section),
                format!(
                    "mep: dead_after_ms ({}) must be longer than heartbeat_ms ({})",
                    dead_after.as_millis(),
                    heartbeat.as_millis()
                ),
            ));
        }
        Ok(Some(MepSettings {
            enabled,
            listen,
            key,
            tls,
            heartbeat,
            dead_after,
        }))
    }
}
