//! The [`Validator`] and its checks shared by every section: spans to `file:line:column`,
//! integers in range, TTLs, addresses, object names, prefixes and files beside the config.

use std::fmt;
use std::net::IpAddr;
use std::ops::{Range, RangeInclusive};
use std::path::{Path, PathBuf};

use ipnet::IpNet;
use toml::Spanned;

use super::error::ConfigError;
use super::names::{Seen, family};

const MAX_TTL: i64 = i32::MAX as i64; // RFC 2181 §8
pub(super) const TTL_RANGE: RangeInclusive<i64> = 0..=MAX_TTL;
pub(super) const PORT_RANGE: RangeInclusive<i64> = 1..=u16::MAX as i64;
pub(super) const LIMIT_RANGE: RangeInclusive<i64> = 1..=i64::MAX;

pub(super) type Str = Spanned<String>;

pub(super) type List = Spanned<Vec<Str>>;

pub(super) type Int = Spanned<i64>;

/// Where something was written: bytes of the configuration file, or a line of another file
/// the configuration names (a zone file, which has no spans: its parser reports lines).
#[derive(Clone, Debug)]
pub(super) enum Place {
    Config(Range<usize>),
    File {
        path: std::sync::Arc<Path>,
        line: usize,
        column: usize,
    },
}

impl From<Range<usize>> for Place {
    fn from(span: Range<usize>) -> Self {
        Place::Config(span)
    }
}

pub(super) struct Validator<'a> {
    pub(super) text: &'a str,
    pub(super) file: &'a Path,
    /// Where each line starts: `line` is asked for every named object of a valid file (to
    /// name the first of two duplicates), so counting newlines from the start each time would
    /// make validation quadratic in the file's size.
    line_starts: Vec<usize>,
}

/// The byte offsets at which the lines of `text` start (the first is 0).
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// 1-based line and column (in characters) of byte `offset` in `text` (the tests' reference;
/// the [`Validator`] keeps its text's line starts).
#[cfg(test)]
pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    line_col_in(text, &line_starts(text), offset)
}

/// [`line_col`] with the line starts of `text` already found.
fn line_col_in(text: &str, line_starts: &[usize], offset: usize) -> (usize, usize) {
    let offset = text.floor_char_boundary(offset);
    // Lines starting at or before `offset`; the first always does.
    let line = line_starts.partition_point(|&start| start <= offset);
    let column = text[line_starts[line - 1]..offset].chars().count() + 1;
    (line, column)
}

impl<'a> Validator<'a> {
    pub(super) fn new(text: &'a str, file: &'a Path) -> Self {
        Validator {
            text,
            file,
            line_starts: line_starts(text),
        }
    }

    pub(super) fn error(&self, span: Range<usize>, reason: impl Into<String>) -> ConfigError {
        let (line, column) = line_col_in(self.text, &self.line_starts, span.start);
        ConfigError::Invalid {
            file: self.file.to_owned(),
            line,
            column,
            reason: reason.into(),
        }
    }

    pub(super) fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
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

    /// The error at `place`: [`Self::error`] in the configuration, its own file otherwise.
    pub(super) fn error_at(&self, place: &Place, reason: impl Into<String>) -> ConfigError {
        match place {
            Place::Config(span) => self.error(span.clone(), reason),
            Place::File { path, line, column } => ConfigError::Invalid {
                file: path.to_path_buf(),
                line: *line,
                column: *column,
                reason: reason.into(),
            },
        }
    }

    /// `place` in another object's error: "line N" in the configuration, "FILE:N" elsewhere.
    pub(super) fn cite(&self, place: &Place) -> String {
        match place {
            Place::Config(span) => format!("line {}", self.line(span.clone())),
            Place::File { path, line, .. } => format!("{}:{line}", path.display()),
        }
    }

    pub(super) fn line(&self, span: Range<usize>) -> usize {
        line_col_in(self.text, &self.line_starts, span.start).0
    }

    /// An integer setting: `default` when absent, else checked against `range`.
    pub(super) fn int<T>(
        &self,
        owner: &str,
        key: &str,
        raw: Option<Int>,
        range: RangeInclusive<i64>,
        default: T,
    ) -> Result<T, ConfigError>
    where
        T: TryFrom<i64>,
        T::Error: fmt::Debug,
    {
        match raw {
            None => Ok(default),
            Some(v) if range.contains(v.get_ref()) => {
                Ok(T::try_from(*v.get_ref()).expect("range fits the type"))
            }
            Some(v) => Err(self.error(
                v.span(),
                format!("{owner}: {key} {} out of range {range:?}", v.get_ref()),
            )),
        }
    }

    pub(super) fn ttl(
        &self,
        owner: &str,
        raw: Option<Int>,
        default: u32,
    ) -> Result<u32, ConfigError> {
        self.int(owner, "ttl", raw, TTL_RANGE, default)
    }

    /// A DNS name checked by `check`; errors read "{what} "as written": reason".
    pub(super) fn dns_name(
        &self,
        raw: &Str,
        what: &str,
        check: impl FnOnce(&str) -> Result<String, String>,
    ) -> Result<String, ConfigError> {
        check(raw.get_ref()).map_err(|reason| {
            self.error(raw.span(), format!("{what} {:?}: {reason}", raw.get_ref()))
        })
    }

    pub(super) fn ip(&self, owner: &str, key: &str, raw: &Str) -> Result<IpAddr, ConfigError> {
        raw.get_ref().parse().map_err(|_| {
            self.error(
                raw.span(),
                format!("{owner}: {key} {:?} is not an IP address", raw.get_ref()),
            )
        })
    }

    /// The optional `public_ip` of something whose `ip` is `ip`: same family.
    pub(super) fn public_ip(
        &self,
        owner: &str,
        ip: IpAddr,
        raw: Option<Str>,
    ) -> Result<Option<IpAddr>, ConfigError> {
        let Some(raw) = raw else {
            return Ok(None);
        };
        let public = self.ip(owner, "public_ip", &raw)?;
        if public.is_ipv4() != ip.is_ipv4() {
            return Err(self.error(
                raw.span(),
                format!(
                    "{owner}: public_ip {public} is {} but ip {ip} is {}; they must be of one family",
                    family(public),
                    family(ip)
                ),
            ));
        }
        Ok(Some(public))
    }

    /// The name of a site or service, unique among `seen`.
    pub(super) fn object_name(
        &self,
        kind: &str,
        raw: &Str,
        seen: &mut Seen<String>,
    ) -> Result<String, ConfigError> {
        let name = raw.get_ref();
        let err = |reason: &str| self.error(raw.span(), format!("{kind} name {name:?}: {reason}"));
        let mut chars = name.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
            return Err(err(
                "only letters, digits, '-', '_' and '.' are allowed, starting with a letter, digit or '_'",
            ));
        }
        if let Some(first) = seen.first(name.clone(), self.line(raw.span())) {
            return Err(err(&format!("defined twice (first on line {first})")));
        }
        Ok(name.clone())
    }

    /// A path as written: relative ones are relative to the configuration file's directory.
    pub(super) fn path(&self, written: &str) -> PathBuf {
        let p = Path::new(written);
        if p.is_absolute() {
            return p.to_owned();
        }
        self.file
            .parent()
            .map_or_else(|| p.to_owned(), |dir| dir.join(p))
    }

    pub(super) fn read_file(
        &self,
        owner: &str,
        key: &str,
        raw: &Str,
    ) -> Result<Vec<u8>, ConfigError> {
        let path = self.path(raw.get_ref());
        std::fs::read(&path).map_err(|e| {
            self.error(
                raw.span(),
                format!("{owner}: {key}: cannot read {}: {e}", path.display()),
            )
        })
    }

    /// A prefix as written in a list (`owner: ` starts the error): address/length, no host
    /// bits set.
    pub(super) fn prefix(&self, p: &Str, owner: &str) -> Result<IpNet, ConfigError> {
        let err = |reason: String| self.error(p.span(), format!("{owner}: {reason}"));
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
        Ok(net)
    }
}
