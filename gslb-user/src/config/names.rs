//! DNS and object names as the sections accept them, and the bookkeeping of names already
//! seen (duplicates) or known (references).

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::net::IpAddr;

/// How many names an "unknown X" error lists.
const LIST_NAMES: usize = 10;

/// Remembers where each key was first seen, to report duplicates with both places.
pub(super) struct Seen<K>(HashMap<K, usize>);

impl<K: Eq + Hash> Seen<K> {
    pub(super) fn new() -> Self {
        Seen(HashMap::new())
    }

    /// Records `key` at `line`; if it was already recorded, returns the first line.
    pub(super) fn first(&mut self, key: K, line: usize) -> Option<usize> {
        match self.0.entry(key) {
            Entry::Occupied(e) => Some(*e.get()),
            Entry::Vacant(e) => {
                e.insert(line);
                None
            }
        }
    }
}

/// The defined objects of one kind, for "unknown X" messages.
pub(super) struct Names<'a> {
    pub(super) kind: &'a str,
    pub(super) set: HashSet<&'a str>,
    pub(super) order: Vec<&'a str>,
}

impl<'a> Names<'a> {
    pub(super) fn new(kind: &'a str, names: impl IntoIterator<Item = &'a str>) -> Self {
        let order: Vec<&str> = names.into_iter().collect();
        Names {
            kind,
            set: order.iter().copied().collect(),
            order,
        }
    }

    pub(super) fn contains(&self, name: &str) -> bool {
        self.set.contains(name)
    }

    /// "unknown site "x" (defined sites: a, b)".
    pub(super) fn unknown(&self, name: &str) -> String {
        let kind = self.kind;
        if self.order.is_empty() {
            return format!("unknown {kind} {name:?} (no {kind}s are defined)");
        }
        let mut list = self.order[..self.order.len().min(LIST_NAMES)].join(", ");
        if self.order.len() > LIST_NAMES {
            list += &format!(", … ({} more)", self.order.len() - LIST_NAMES);
        }
        format!("unknown {kind} {name:?} (defined {kind}s: {list})")
    }
}

pub(super) fn family(ip: IpAddr) -> &'static str {
    if ip.is_ipv4() { "IPv4" } else { "IPv6" }
}

pub(super) use crate::model::in_zone;

/// Checks a domain name and returns it lower-cased without trailing dot.
pub(super) fn domain_name(raw: &str) -> Result<String, String> {
    let name = raw.strip_suffix('.').unwrap_or(raw);
    if name.is_empty() {
        return Err("the root is not allowed here".into());
    }
    let mut wire_len = 1; // root label
    for label in name.split('.') {
        if label.is_empty() {
            return Err("empty label".into());
        }
        if label == "*" {
            return Err(
                "'*' is a wildcard (RFC 4592) only as the leftmost label of a record's owner or \
                 a gslb_domain's name"
                    .into(),
            );
        }
        // RFC 952/1123 host names; the responder's names (hickory's) refuse it too.
        if label.starts_with('-') {
            return Err(format!("label {label:?} starts with '-'"));
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

/// A name `check` accepts, or a wildcard (RFC 4592): `*` as the leftmost label of one.
pub(super) fn wildcard_or(
    raw: &str,
    check: impl Fn(&str) -> Result<String, String>,
) -> Result<String, String> {
    match raw.strip_prefix("*.") {
        // Checked with a one-byte label in the wildcard's place: the same length in wire form.
        Some(rest) => Ok(format!("*{}", &check(&format!("x.{rest}"))?[1..])),
        None => check(raw),
    }
}

/// An absolute host or mailbox name (NS, SOA mname and rname): trailing dot optional, but never
/// one label, which would almost always be a relative name by mistake.
pub(super) fn host_name(raw: &str) -> Result<String, String> {
    let name = domain_name(raw)?;
    if !name.contains('.') {
        return Err(
            "a single label; write the full name (e.g. ns1.example.com), relative names are not \
             allowed here"
                .into(),
        );
    }
    Ok(name)
}

/// A name in a zone's records: "@" is the apex, a name with a trailing dot is absolute, any
/// other is relative to the apex.
fn zone_name(raw: &str, apex: &str) -> Result<String, String> {
    if raw == "@" {
        return Ok(apex.to_owned());
    }
    if raw.ends_with('.') {
        return domain_name(raw);
    }
    let relative = domain_name(raw)?;
    // "www.example.com" in zone example.com means www.example.com.example.com: surely a
    // forgotten trailing dot.
    if in_zone(&relative, apex) {
        let instead = match relative.len().checked_sub(apex.len() + 1) {
            Some(len) => format!("\"{}\" or \"{raw}.\"", &relative[..len]),
            None => "\"@\"".to_owned(),
        };
        return Err(format!(
            "relative names are relative to the zone, so this is {relative}.{apex}; write {instead}"
        ));
    }
    domain_name(&format!("{relative}.{apex}"))
}

/// A record's owner: a [`zone_name`] inside the zone, or a wildcard (`*` alone: the apex's).
pub(super) fn owner_name(raw: &str, apex: &str) -> Result<String, String> {
    let raw = if raw == "*" { "*.@" } else { raw };
    let name = wildcard_or(raw, |n| {
        // "*.@": the wildcard at the apex.
        zone_name(if n == "x.@" { "x" } else { n }, apex)
    })?;
    if !in_zone(&name, apex) {
        return Err(format!("{name} is outside the zone {apex}"));
    }
    Ok(name)
}

/// A name in record data: a [`zone_name`], or `""` for "." (the root) where `allow_root`.
pub(super) fn target_name(raw: &str, apex: &str, allow_root: bool) -> Result<String, String> {
    if raw == "." {
        return if allow_root {
            Ok(String::new())
        } else {
            Err("the root is not allowed here".into())
        };
    }
    zone_name(raw, apex)
}
