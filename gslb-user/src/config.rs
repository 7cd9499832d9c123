//! Configuration file: TOML → validated, typed [`Config`].
//!
//! Loading is two-staged. serde deserializes the text into private `Raw*` mirrors
//! that keep byte spans ([`toml::Spanned`]) on every value a semantic check may
//! reject; [`Validator`] then checks and converts them. That way every error,
//! syntactic or semantic, names `file:line:column` of the offending value.
//!
//! To add a section (zones, sites, services, monitors, policies, …): add a `Raw*`
//! struct and a field to [`RawConfig`], a typed struct and a field to [`Config`],
//! and a `Validator` method called from [`Validator::config`].

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use ipnet::IpNet;
use serde::Deserialize;
use toml::Spanned;

/// Most addresses per family in one answer set; keeps "all" responses small
/// enough for the XDP fast path to build in place.
pub const MAX_ADDRS: usize = 8;

const DEFAULT_DNS_PORT: u16 = 53;
const DEFAULT_EDNS_UDP_SIZE: u16 = 1232;
const EDNS_UDP_SIZE_RANGE: std::ops::RangeInclusive<i64> = 512..=4096;
const DEFAULT_PIN_PATH: &str = "/sys/fs/bpf/gslb";
const DEFAULT_TTL: u32 = 30;
const MAX_TTL: i64 = i32::MAX as i64; // RFC 2181 §8
/// Implicit view of clients matching no `[[view]]`; answered from a domain's own `a`/`aaaa`.
const DEFAULT_VIEW: &str = "default";

/// The whole validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub server: Server,
    /// Static client-prefix views, in file order.
    pub views: Vec<View>,
    /// GSLB domains, in file order.
    pub domains: Vec<Domain>,
}

/// `[server]`: where and how DNS is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// UDP/TCP port DNS is answered on (never 0).
    pub dns_port: u16,
    /// Addresses DNS is answered on; non-empty, no duplicates.
    pub listen: Vec<IpAddr>,
    /// EDNS(0) UDP payload size we advertise, 512..=4096.
    pub edns_udp_size: u16,
    /// Interface to attach the XDP program to, if any.
    pub interface: Option<String>,
    pub xdp_mode: XdpMode,
    /// bpffs directory where maps are pinned (absolute).
    pub pin_path: PathBuf,
}

/// How the XDP program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    /// Native (driver) mode, falling back to skb (generic) mode if the driver refuses.
    #[default]
    Auto,
    /// Native (driver) mode only.
    Native,
    /// Generic (skb) mode only.
    Skb,
}

impl XdpMode {
    const NAMES: [(&str, XdpMode); 3] = [
        ("auto", XdpMode::Auto),
        ("native", XdpMode::Native),
        ("skb", XdpMode::Skb),
    ];
}

impl fmt::Display for XdpMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, _) = Self::NAMES
            .iter()
            .find(|(_, m)| m == self)
            .expect("all modes named");
        f.write_str(name)
    }
}

/// Error from parsing an [`XdpMode`] that is not "auto", "native" or "skb".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid XDP mode {0:?} (expected auto, native or skb)")]
pub struct ParseXdpModeError(pub String);

impl FromStr for XdpMode {
    type Err = ParseXdpModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::NAMES
            .iter()
            .find(|(name, _)| *name == s)
            .map(|&(_, mode)| mode)
            .ok_or_else(|| ParseXdpModeError(s.to_owned()))
    }
}

/// `[[view]]`: clients whose source address falls in `prefixes` get the view's answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// Unique, `[A-Za-z0-9_-]+`, never "default".
    pub name: String,
    /// Non-empty; host bits are zero; each prefix belongs to exactly one view.
    pub prefixes: Vec<IpNet>,
}

/// How a domain's addresses are handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnswerMode {
    /// One address per query, rotating through the set.
    #[default]
    Rotate,
    /// Every address in each response (NetScaler "multiple IP response").
    All,
}

/// The A and AAAA answers for one domain in one view; each at most [`MAX_ADDRS`], no duplicates.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AddrSet {
    pub a: Vec<Ipv4Addr>,
    pub aaaa: Vec<Ipv6Addr>,
}

impl AddrSet {
    pub fn is_empty(&self) -> bool {
        self.a.is_empty() && self.aaaa.is_empty()
    }
}

/// `[[domain]]`: a GSLB domain and its static answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    /// Lower-case, without trailing dot; unique.
    pub name: String,
    pub ttl: u32,
    pub answer: AnswerMode,
    /// Answers for clients in no `[[view]]` (the default view).
    pub addrs: AddrSet,
    /// Per-view answers, in file order; each view name refers to a [`Config::views`] entry.
    pub views: Vec<(String, AddrSet)>,
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {}", file.display())]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    /// Syntax, schema or semantic error at a 1-based `line`/`column` (in characters).
    #[error("{}:{line}:{column}: {reason}", file.display())]
    Invalid {
        file: PathBuf,
        line: usize,
        column: usize,
        reason: String,
    },
}

impl Config {
    /// Reads and validates the configuration file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            file: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Validates configuration `text`; `file` is only used to name it in errors.
    pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
        let v = Validator { text, file };
        let raw: RawConfig = toml::from_str(text).map_err(|e| v.toml_error(&e))?;
        v.config(raw)
    }
}

// ---- Raw (as-written) structure: Spanned wherever validation may point. ----

type Str = Spanned<String>;
type List = Spanned<Vec<Str>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    server: RawServer,
    #[serde(default, rename = "view")]
    views: Vec<RawView>,
    #[serde(default, rename = "domain")]
    domains: Vec<RawDomain>,
}

// Integers are read as i64 (TOML's integer type) so out-of-range values get our
// message rather than a generic serde one.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    dns_port: Option<Spanned<i64>>,
    listen: List,
    edns_udp_size: Option<Spanned<i64>>,
    interface: Option<Str>,
    #[serde(default)]
    xdp_mode: XdpMode,
    pin_path: Option<Str>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawView {
    name: Str,
    prefixes: List,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDomain {
    name: Str,
    ttl: Option<Spanned<i64>>,
    #[serde(default)]
    answer: AnswerMode,
    a: Option<List>,
    aaaa: Option<List>,
    #[serde(default, rename = "view")]
    views: Vec<RawDomainView>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDomainView {
    view: Str,
    a: Option<List>,
    aaaa: Option<List>,
}

// ---- Validation ----

struct Validator<'a> {
    text: &'a str,
    file: &'a Path,
}

/// Remembers where each key was first seen, to report duplicates with both places.
struct Seen<K>(HashMap<K, usize>);

impl<K: Eq + Hash> Seen<K> {
    fn new() -> Self {
        Seen(HashMap::new())
    }

    /// Records `key` at `line`; if it was already recorded, returns the first line.
    fn first(&mut self, key: K, line: usize) -> Option<usize> {
        match self.0.entry(key) {
            Entry::Occupied(e) => Some(*e.get()),
            Entry::Vacant(e) => {
                e.insert(line);
                None
            }
        }
    }
}

impl Validator<'_> {
    fn error(&self, span: Range<usize>, reason: impl Into<String>) -> ConfigError {
        let (line, column) = line_col(self.text, span.start);
        ConfigError::Invalid {
            file: self.file.to_owned(),
            line,
            column,
            reason: reason.into(),
        }
    }

    fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
        let span = e.span().unwrap_or(0..0);
        let reason = e.message().trim_end();
        // toml does not name the key, but its span covers it.
        match self.text.get(span.clone()) {
            Some(key) if reason == "duplicate key" && !key.is_empty() => {
                self.error(span, format!("duplicate key `{key}`"))
            }
            _ => self.error(span, reason),
        }
    }

    fn line(&self, span: Range<usize>) -> usize {
        line_col(self.text, span.start).0
    }

    fn config(&self, raw: RawConfig) -> Result<Config, ConfigError> {
        let server = self.server(raw.server)?;
        let views = self.views(raw.views)?;
        let domains = self.domains(raw.domains, &views)?;
        Ok(Config {
            server,
            views,
            domains,
        })
    }

    fn server(&self, raw: RawServer) -> Result<Server, ConfigError> {
        let dns_port = match raw.dns_port {
            None => DEFAULT_DNS_PORT,
            Some(p) => match u16::try_from(*p.get_ref()) {
                Ok(port) if port != 0 => port,
                _ => {
                    return Err(self.error(
                        p.span(),
                        format!("server.dns_port: {} is not a port (1..=65535)", p.get_ref()),
                    ));
                }
            },
        };

        let edns_udp_size = match raw.edns_udp_size {
            None => DEFAULT_EDNS_UDP_SIZE,
            Some(s) if EDNS_UDP_SIZE_RANGE.contains(s.get_ref()) => *s.get_ref() as u16,
            Some(s) => {
                return Err(self.error(
                    s.span(),
                    format!(
                        "server.edns_udp_size: {} out of range {EDNS_UDP_SIZE_RANGE:?}",
                        s.get_ref()
                    ),
                ));
            }
        };

        if raw.listen.get_ref().is_empty() {
            return Err(self.error(
                raw.listen.span(),
                "server.listen: at least one address is required",
            ));
        }
        let mut seen = Seen::new();
        let mut listen = Vec::new();
        for s in raw.listen.into_inner() {
            let ip: IpAddr = s.get_ref().parse().map_err(|_| {
                self.error(
                    s.span(),
                    format!("server.listen: {:?} is not an IP address", s.get_ref()),
                )
            })?;
            if let Some(first) = seen.first(ip, self.line(s.span())) {
                return Err(self.error(
                    s.span(),
                    format!("server.listen: {ip} listed twice (first on line {first})"),
                ));
            }
            listen.push(ip);
        }

        let interface = match raw.interface {
            None => None,
            Some(i) => {
                // Mirrors the kernel's dev_valid_name(), so a typo fails here, not at attach time.
                let name = i.get_ref();
                let valid = !name.is_empty()
                    && name.len() < 16
                    && name != "."
                    && name != ".."
                    && !name
                        .chars()
                        .any(|c| c == '/' || c == ':' || c.is_whitespace());
                if !valid {
                    return Err(self.error(
                        i.span(),
                        format!("server.interface: {name:?} is not a valid interface name"),
                    ));
                }
                Some(i.into_inner())
            }
        };

        let pin_path = match raw.pin_path {
            None => PathBuf::from(DEFAULT_PIN_PATH),
            // A relative pin path would depend on the daemon's working directory.
            Some(p) if Path::new(p.get_ref()).is_absolute() => PathBuf::from(p.into_inner()),
            Some(p) => {
                return Err(self.error(
                    p.span(),
                    format!(
                        "server.pin_path: {:?} must be an absolute path",
                        p.get_ref()
                    ),
                ));
            }
        };

        Ok(Server {
            dns_port,
            listen,
            edns_udp_size,
            interface,
            xdp_mode: raw.xdp_mode,
            pin_path,
        })
    }

    fn views(&self, raw: Vec<RawView>) -> Result<Vec<View>, ConfigError> {
        let mut names = Seen::new();
        // Prefix → (owning view, line); also catches a prefix repeated within one view.
        let mut owners: HashMap<IpNet, (String, usize)> = HashMap::new();
        let mut views = Vec::new();
        for rv in raw {
            let name = rv.name.get_ref();
            let name_err =
                |reason: &str| self.error(rv.name.span(), format!("view name {name:?}: {reason}"));
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(name_err("only letters, digits, '-' and '_' are allowed"));
            }
            if name.eq_ignore_ascii_case(DEFAULT_VIEW) {
                return Err(name_err(
                    "reserved for clients in no view; choose another name",
                ));
            }
            if let Some(first) = names.first(name.clone(), self.line(rv.name.span())) {
                return Err(name_err(&format!("defined twice (first on line {first})")));
            }

            if rv.prefixes.get_ref().is_empty() {
                return Err(self.error(
                    rv.prefixes.span(),
                    format!("view {name:?}: prefixes is empty"),
                ));
            }
            let mut prefixes = Vec::new();
            for p in rv.prefixes.get_ref() {
                let err = |reason: String| self.error(p.span(), format!("view {name:?}: {reason}"));
                let net: IpNet = p.get_ref().parse().map_err(|_| {
                    err(format!(
                        "{:?} is not a prefix (expected address/length, e.g. 198.51.100.0/24)",
                        p.get_ref()
                    ))
                })?;
                if net.trunc() != net {
                    return Err(err(format!(
                        "prefix {net} has host bits set (did you mean {}?)",
                        net.trunc()
                    )));
                }
                match owners.entry(net) {
                    Entry::Occupied(e) => {
                        let (owner, line) = e.get();
                        return Err(err(if owner == name {
                            format!("prefix {net} listed twice (first on line {line})")
                        } else {
                            format!(
                                "prefix {net} is already in view {owner:?} (line {line}); a prefix may be in only one view"
                            )
                        }));
                    }
                    Entry::Vacant(e) => {
                        e.insert((name.clone(), self.line(p.span())));
                    }
                }
                prefixes.push(net);
            }
            views.push(View {
                name: rv.name.into_inner(),
                prefixes,
            });
        }
        Ok(views)
    }

    fn domains(&self, raw: Vec<RawDomain>, views: &[View]) -> Result<Vec<Domain>, ConfigError> {
        let mut names = Seen::new();
        let mut domains = Vec::new();
        for rd in raw {
            let name = domain_name(rd.name.get_ref()).map_err(|reason| {
                self.error(
                    rd.name.span(),
                    format!("domain name {:?}: {reason}", rd.name.get_ref()),
                )
            })?;
            if let Some(first) = names.first(name.clone(), self.line(rd.name.span())) {
                return Err(self.error(
                    rd.name.span(),
                    format!("domain {name:?} defined twice (first on line {first})"),
                ));
            }
            let owner = format!("domain {name:?}");

            let ttl = match rd.ttl {
                None => DEFAULT_TTL,
                Some(t) if (0..=MAX_TTL).contains(t.get_ref()) => *t.get_ref() as u32,
                Some(t) => {
                    return Err(self.error(
                        t.span(),
                        format!("{owner}: ttl {} out of range 0..={MAX_TTL}", t.get_ref()),
                    ));
                }
            };

            let addrs = self.addr_set(&owner, rd.a, rd.aaaa)?;

            let mut seen = Seen::new();
            let mut domain_views = Vec::new();
            for dv in rd.views {
                let view = dv.view.get_ref();
                let err = |reason: String| self.error(dv.view.span(), format!("{owner}: {reason}"));
                if view.eq_ignore_ascii_case(DEFAULT_VIEW) {
                    return Err(err(format!(
                        "view {view:?} is implicit; put its addresses in the domain's own a/aaaa"
                    )));
                }
                if !views.iter().any(|v| v.name == *view) {
                    let defined = if views.is_empty() {
                        "no views are defined".to_owned()
                    } else {
                        let names: Vec<&str> = views.iter().map(|v| v.name.as_str()).collect();
                        format!("defined views: {}", names.join(", "))
                    };
                    return Err(err(format!("unknown view {view:?} ({defined})")));
                }
                if let Some(first) = seen.first(view.clone(), self.line(dv.view.span())) {
                    return Err(err(format!(
                        "view {view:?} listed twice (first on line {first})"
                    )));
                }
                let set = self.addr_set(&format!("{owner}, view {view:?}"), dv.a, dv.aaaa)?;
                // An entry without addresses would silently turn the view into NODATA.
                if set.is_empty() {
                    return Err(err(format!(
                        "view {view:?} has no addresses (give a and/or aaaa)"
                    )));
                }
                domain_views.push((dv.view.into_inner(), set));
            }

            if addrs.is_empty() && domain_views.is_empty() {
                return Err(self.error(
                    rd.name.span(),
                    format!("{owner}: no addresses (give a, aaaa or [[domain.view]])"),
                ));
            }
            domains.push(Domain {
                name,
                ttl,
                answer: rd.answer,
                addrs,
                views: domain_views,
            });
        }
        Ok(domains)
    }

    fn addr_set(
        &self,
        owner: &str,
        a: Option<List>,
        aaaa: Option<List>,
    ) -> Result<AddrSet, ConfigError> {
        let v4 = |ip| match ip {
            IpAddr::V4(ip) => Some(ip),
            IpAddr::V6(_) => None,
        };
        let v6 = |ip| match ip {
            IpAddr::V6(ip) => Some(ip),
            IpAddr::V4(_) => None,
        };
        Ok(AddrSet {
            a: self.addr_list(owner, ("a", "IPv4", "aaaa"), a, v4)?,
            aaaa: self.addr_list(owner, ("aaaa", "IPv6", "a"), aaaa, v6)?,
        })
    }

    /// Parses one `a`/`aaaa` list; `(key, family, other_key)` phrase the errors.
    fn addr_list<T: Copy + Eq + Hash + fmt::Display>(
        &self,
        owner: &str,
        (key, family, other_key): (&str, &str, &str),
        raw: Option<List>,
        pick: impl Fn(IpAddr) -> Option<T>,
    ) -> Result<Vec<T>, ConfigError> {
        let Some(raw) = raw else {
            return Ok(Vec::new());
        };
        let raw = raw.into_inner();
        if let Some(extra) = raw.get(MAX_ADDRS) {
            return Err(self.error(
                extra.span(),
                format!(
                    "{owner}: {} addresses in {key}, at most {MAX_ADDRS}",
                    raw.len()
                ),
            ));
        }
        let mut seen = Seen::new();
        let mut out = Vec::new();
        for s in &raw {
            let err = |reason: String| self.error(s.span(), format!("{owner}: {reason}"));
            let ip: IpAddr = s
                .get_ref()
                .parse()
                .map_err(|_| err(format!("{:?} in {key} is not an IP address", s.get_ref())))?;
            let ip = pick(ip).ok_or_else(|| {
                err(format!(
                    "{ip} in {key} is not an {family} address (put it in {other_key})"
                ))
            })?;
            if let Some(first) = seen.first(ip, self.line(s.span())) {
                return Err(err(format!(
                    "{ip} listed twice in {key} (first on line {first})"
                )));
            }
            out.push(ip);
        }
        Ok(out)
    }
}

/// Checks a GSLB domain name and returns it lower-cased without trailing dot.
fn domain_name(raw: &str) -> Result<String, String> {
    let name = raw.strip_suffix('.').unwrap_or(raw);
    if name.is_empty() {
        return Err("the root cannot be a GSLB domain".into());
    }
    let mut wire_len = 1; // root label
    for label in name.split('.') {
        if label.is_empty() {
            return Err("empty label".into());
        }
        if label == "*" {
            return Err("wildcard names are not supported".into());
        }
        if label.len() > 63 {
            return Err(format!(
                "label {label:?} is {} bytes, at most 63",
                label.len()
            ));
        }
        if let Some(c) = label
            .chars()
            .find(|&c| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        {
            return Err(format!(
                "invalid character {c:?} (letters, digits, '-' and '_' only; write IDNs as xn-- punycode)"
            ));
        }
        wire_len += 1 + label.len();
    }
    if wire_len > 255 {
        return Err(format!("{wire_len} bytes in wire format, at most 255"));
    }
    Ok(name.to_ascii_lowercase())
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..text.floor_char_boundary(offset)];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVER: &str = "[server]\nlisten = [\"192.0.2.1\"]\n";

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("test.toml"))
    }

    fn server(listen: &[&str]) -> Server {
        Server {
            dns_port: 53,
            listen: listen.iter().map(|s| s.parse().unwrap()).collect(),
            edns_udp_size: 1232,
            interface: None,
            xdp_mode: XdpMode::Auto,
            pin_path: "/sys/fs/bpf/gslb".into(),
        }
    }

    fn addrs(a: &[&str], aaaa: &[&str]) -> AddrSet {
        AddrSet {
            a: a.iter().map(|s| s.parse().unwrap()).collect(),
            aaaa: aaaa.iter().map(|s| s.parse().unwrap()).collect(),
        }
    }

    fn domain(name: &str, a: &[&str]) -> Domain {
        Domain {
            name: name.into(),
            ttl: 30,
            answer: AnswerMode::Rotate,
            addrs: addrs(a, &[]),
            views: vec![],
        }
    }

    #[test]
    fn valid() {
        let full = r#"
            [server]
            dns_port = 5353
            listen = ["192.0.2.1", "2001:db8::1"]
            edns_udp_size = 4096
            interface = "eth0"
            xdp_mode = "skb"
            pin_path = "/sys/fs/bpf/other"

            [[view]]
            name = "europe"
            prefixes = ["198.51.100.0/24", "2001:db8:100::/48"]

            [[view]]
            name = "us-east_1"
            prefixes = ["203.0.113.0/25"]

            [[domain]]
            name = "WWW.Example.COM."
            ttl = 0
            answer = "all"
            a = ["192.0.2.10", "192.0.2.11"]
            aaaa = ["2001:db8::10"]

              [[domain.view]]
              view = "us-east_1"
              aaaa = ["2001:db8::30"]

              [[domain.view]]
              view = "europe"
              a = ["192.0.2.20"]

            [[domain]]
            name = "_srv.api-1.example.com"
            ttl = 2147483647

              [[domain.view]]
              view = "europe"
              a = ["192.0.2.40"]
        "#;
        let cases: Vec<(&str, Config)> = vec![
            (
                SERVER,
                Config {
                    server: server(&["192.0.2.1"]),
                    views: vec![],
                    domains: vec![],
                },
            ),
            (
                "[server]\nlisten = [\"192.0.2.1\"]\n[[domain]]\nname = \"a.example\"\na = [\"192.0.2.1\"]\n[[domain]]\nname = \"B\"\na = [\"192.0.2.1\"]",
                Config {
                    server: server(&["192.0.2.1"]),
                    views: vec![],
                    domains: vec![
                        domain("a.example", &["192.0.2.1"]),
                        domain("b", &["192.0.2.1"]),
                    ],
                },
            ),
            (
                full,
                Config {
                    server: Server {
                        dns_port: 5353,
                        edns_udp_size: 4096,
                        interface: Some("eth0".into()),
                        xdp_mode: XdpMode::Skb,
                        pin_path: "/sys/fs/bpf/other".into(),
                        ..server(&["192.0.2.1", "2001:db8::1"])
                    },
                    views: vec![
                        View {
                            name: "europe".into(),
                            prefixes: vec![
                                "198.51.100.0/24".parse().unwrap(),
                                "2001:db8:100::/48".parse().unwrap(),
                            ],
                        },
                        View {
                            name: "us-east_1".into(),
                            prefixes: vec!["203.0.113.0/25".parse().unwrap()],
                        },
                    ],
                    domains: vec![
                        Domain {
                            name: "www.example.com".into(),
                            ttl: 0,
                            answer: AnswerMode::All,
                            addrs: addrs(&["192.0.2.10", "192.0.2.11"], &["2001:db8::10"]),
                            views: vec![
                                ("us-east_1".into(), addrs(&[], &["2001:db8::30"])),
                                ("europe".into(), addrs(&["192.0.2.20"], &[])),
                            ],
                        },
                        Domain {
                            name: "_srv.api-1.example.com".into(),
                            ttl: 2147483647,
                            answer: AnswerMode::Rotate,
                            addrs: AddrSet::default(),
                            views: vec![("europe".into(), addrs(&["192.0.2.40"], &[]))],
                        },
                    ],
                },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(
                parse(text).unwrap_or_else(|e| panic!("{e}\n{text}")),
                want,
                "{text}"
            );
        }
    }

    /// Each case marks the offending line with `#<`; the error must point there.
    #[test]
    fn rejected() {
        const VIEW: &str = "[[view]]\nname = \"europe\"\nprefixes = [\"198.51.100.0/24\"]\n";
        let long_label = format!("{}.example", "a".repeat(64));
        let long_name = vec!["a".repeat(63); 4].join(".");
        let nine: Vec<String> = (1..=9).map(|i| format!("\"192.0.2.{i}\"")).collect();
        let dom =
            |body: &str| format!("{SERVER}{VIEW}[[domain]]\nname = \"www.example.com\"\n{body}\n");

        let cases: Vec<(String, &str)> = vec![
            (format!("{SERVER}bogus = 1 #<"), "unknown field `bogus`"),
            (
                format!("{SERVER}{VIEW}[[domain]]\nname = \"x.example\"\nip = 1 #<"),
                "unknown field `ip`",
            ),
            ("[server]\nlisten = [] #<\n".into(), "at least one address"),
            (
                "[server]\nlisten = [\n  \"192.0.2.1\",\n  \"192.0.2.300\", #<\n]\n".into(),
                "\"192.0.2.300\" is not an IP address",
            ),
            (
                "[server]\nlisten = [\"2001:db8::1\",\n \"2001:DB8::1\"] #<\n".into(),
                "2001:db8::1 listed twice (first on line 2)",
            ),
            (format!("{SERVER}dns_port = 0 #<"), "0 is not a port"),
            (
                format!("{SERVER}edns_udp_size = 511 #<"),
                "511 out of range 512..=4096",
            ),
            (
                format!("{SERVER}edns_udp_size = 4097 #<"),
                "4097 out of range",
            ),
            (
                format!("{SERVER}xdp_mode = \"generic\" #<"),
                "unknown variant `generic`",
            ),
            (
                format!("{SERVER}pin_path = \"bpf/gslb\" #<"),
                "must be an absolute path",
            ),
            (
                format!("{SERVER}interface = \"eth0:1\" #<"),
                "not a valid interface name",
            ),
            (
                format!(
                    "{SERVER}{VIEW}[[view]]\nname = \"europe\" #<\nprefixes = [\"10.0.0.0/8\"]"
                ),
                "defined twice (first on line 4)",
            ),
            (
                format!("{SERVER}[[view]]\nname = \"default\" #<\nprefixes = [\"10.0.0.0/8\"]"),
                "reserved",
            ),
            (
                format!("{SERVER}[[view]]\nname = \"eu west\" #<\nprefixes = [\"10.0.0.0/8\"]"),
                "only letters, digits",
            ),
            (
                format!("{SERVER}[[view]]\nname = \"eu\"\nprefixes = [] #<"),
                "prefixes is empty",
            ),
            (
                format!("{SERVER}[[view]]\nname = \"eu\"\nprefixes = [\"198.51.100.0\"] #<"),
                "is not a prefix",
            ),
            (
                format!("{SERVER}[[view]]\nname = \"eu\"\nprefixes = [\"198.51.100.1/24\"] #<"),
                "view \"eu\": prefix 198.51.100.1/24 has host bits set (did you mean 198.51.100.0/24?)",
            ),
            (
                format!(
                    "{SERVER}{VIEW}[[view]]\nname = \"eu2\"\nprefixes = [\n \"10.0.0.0/8\",\n \"198.51.100.0/24\"] #<"
                ),
                "already in view \"europe\" (line 5)",
            ),
            (
                format!(
                    "{SERVER}[[view]]\nname = \"eu\"\nprefixes = [\"10.0.0.0/8\",\n \"10.0.0.0/8\"] #<"
                ),
                "listed twice",
            ),
            (
                dom(
                    "a = [\"192.0.2.1\"]\n[[domain]]\nname = \"WWW.example.com.\" #<\na = [\"192.0.2.1\"]",
                ),
                "domain \"www.example.com\" defined twice (first on line 7)",
            ),
            (
                format!("{SERVER}[[domain]]\nname = \"{long_label}\" #<"),
                "is 64 bytes, at most 63",
            ),
            (
                format!("{SERVER}[[domain]]\nname = \"{long_name}\" #<"),
                "257 bytes in wire format",
            ),
            (
                format!("{SERVER}[[domain]]\nname = \"www.exa$mple.com\" #<"),
                "invalid character '$'",
            ),
            (
                format!("{SERVER}[[domain]]\nname = \"*.example.com\" #<"),
                "wildcard",
            ),
            (
                format!("{SERVER}[[domain]]\nname = \"a..example\" #<"),
                "empty label",
            ),
            (
                format!("{SERVER}[[domain]]\nname = \"x.example\" #<"),
                "no addresses",
            ),
            (
                dom(&format!("a = [{},\n{}] #<", nine[..8].join(", "), nine[8])),
                "domain \"www.example.com\": 9 addresses in a, at most 8",
            ),
            (
                dom("a = [\"192.0.2.1\",\n \"2001:db8::1\"] #<"),
                "2001:db8::1 in a is not an IPv4 address (put it in aaaa)",
            ),
            (
                dom("aaaa = [\"192.0.2.1\"] #<"),
                "192.0.2.1 in aaaa is not an IPv6 address (put it in a)",
            ),
            (
                dom("aaaa = [\"2001:db8::1\",\n \"2001:db8:0::1\"] #<"),
                "2001:db8::1 listed twice in aaaa",
            ),
            (
                dom("ttl = 2147483648 #<\na = [\"192.0.2.1\"]"),
                "ttl 2147483648 out of range 0..=2147483647",
            ),
            (
                dom("ttl = -1 #<\na = [\"192.0.2.1\"]"),
                "ttl -1 out of range",
            ),
            (dom("answer = \"first\" #<"), "unknown variant `first`"),
            (
                dom("[[domain.view]]\nview = \"asia\" #<\na = [\"192.0.2.1\"]"),
                "unknown view \"asia\" (defined views: europe)",
            ),
            (
                dom("[[domain.view]]\nview = \"default\" #<\na = [\"192.0.2.1\"]"),
                "implicit",
            ),
            (
                dom(
                    "[[domain.view]]\nview = \"europe\"\na = [\"192.0.2.1\"]\n[[domain.view]]\nview = \"europe\" #<\na = [\"192.0.2.2\"]",
                ),
                "view \"europe\" listed twice (first on line 9)",
            ),
            (
                dom("[[domain.view]]\nview = \"europe\" #<"),
                "view \"europe\" has no addresses",
            ),
            (
                dom("[[domain.view]]\nview = \"europe\"\na = [\"2001:db8::1\"] #<"),
                "domain \"www.example.com\", view \"europe\": 2001:db8::1 in a",
            ),
            (
                "[server]\nlisten = [\"192.0.2.1\"\n[view] #<\n".into(),
                "expected",
            ),
            (
                format!("{SERVER}dns_port = 1\ndns_port = 2 #<"),
                "duplicate key `dns_port`",
            ),
            (
                format!("{VIEW}{SERVER}[server] #<"),
                "duplicate key `server`",
            ),
            (
                "# comment\n\n[server] #<\ndns_port = 53".into(),
                "missing field `listen`",
            ),
            (
                format!("{SERVER}[[view]] #<\nname = \"eu\""),
                "missing field `prefixes`",
            ),
        ];
        for (text, reason) in &cases {
            let want_line = text
                .lines()
                .position(|l| l.contains("#<"))
                .expect("case has a #< marker")
                + 1;
            match parse(text) {
                Ok(_) => panic!("accepted:\n{text}"),
                Err(ConfigError::Invalid {
                    line,
                    reason: got,
                    file,
                    ..
                }) => {
                    assert!(
                        got.contains(reason),
                        "reason {got:?} lacks {reason:?}\n{text}"
                    );
                    assert_eq!(line, want_line, "wrong line for {got:?}\n{text}");
                    assert_eq!(file, Path::new("test.toml"));
                }
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
    }

    #[test]
    fn error_display_points_at_value() {
        let err = parse("[server]\nlisten = [\"192.0.2.1\",  \"nope\"]\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "test.toml:2:25: server.listen: \"nope\" is not an IP address"
        );
        let err = Config::load(Path::new("/nonexistent/gslb.toml")).unwrap_err();
        assert!(matches!(err, ConfigError::Io { .. }), "{err:?}");
        assert_eq!(err.to_string(), "cannot read /nonexistent/gslb.toml");
    }

    #[test]
    fn xdp_mode_round_trips() {
        for mode in [XdpMode::Auto, XdpMode::Native, XdpMode::Skb] {
            assert_eq!(mode.to_string().parse::<XdpMode>(), Ok(mode));
        }
        assert!("Native".parse::<XdpMode>().is_err());
    }

    #[test]
    fn line_col_counts_characters() {
        assert_eq!(line_col("ab\né\u{1F600}x", 9), (2, 3));
        assert_eq!(line_col("", 0), (1, 1));
    }
}
