//! Locations (NetScaler static proximity): up to six dotted qualifiers
//! `continent.country.region.city.isp.org`, compared position by position, case-insensitively,
//! with `*` or an omitted trailing qualifier as a wildcard. Spec section 2 and 3.
//!
//! - [`db`]: the database (client address → location), built from the sources below;
//! - [`netscaler`]: NetScaler location files (every `add locationfile -format`, the NSGEO1.0
//!   header), with [`csv`] for the fields of a line;
//! - [`mmdb`]: MaxMind databases;
//! - [`continent`]: the continent of a country;
//! - [`table`]: the range tables lookups search.

pub mod continent;
mod csv;
pub mod db;
mod mmdb;
pub mod netscaler;
mod sources;
mod table;
#[cfg(test)]
mod test_support;

use std::fmt;

pub use self::sources::{LocationFile, LocationSources};

/// Most qualifiers in a location: `continent.country.region.city.isp.org`.
pub const MAX_LOCATION_QUALIFIERS: usize = 6;

/// One qualifier: a wildcard or a value (stored lower-case: matching ignores case).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Qualifier {
    Any,
    Is(Box<str>),
}

impl Qualifier {
    fn new(s: &str) -> Qualifier {
        if s == "*" {
            Qualifier::Any
        } else {
            Qualifier::Is(s.to_lowercase().into())
        }
    }

    pub fn is_any(&self) -> bool {
        matches!(self, Qualifier::Any)
    }
}

/// Where a range is on the globe, in degrees, as a location file or a City database gives it.
/// Kept with the range's answer ([`db::Found`]); never compared (locations match by qualifiers).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coordinates {
    /// -90 (south) to 90 (north).
    pub latitude: f64,
    /// -180 (west) to 180 (east).
    pub longitude: f64,
}

/// A location, all six positions filled (omitted trailing qualifiers are wildcards).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Location(pub [Qualifier; MAX_LOCATION_QUALIFIERS]);

impl Default for Location {
    fn default() -> Self {
        Location(std::array::from_fn(|_| Qualifier::Any))
    }
}

impl Location {
    /// Parses dotted notation (`Europe.UK.*."St. Albans"`); errors are `parse_location`'s.
    pub fn parse(s: &str) -> Result<Location, LocationError> {
        Ok(Location::from_qualifiers(
            parse_location(s)?.iter().map(String::as_str),
        ))
    }

    /// From the qualifiers in order; missing trailing ones are wildcards, extra ones ignored,
    /// and an empty or `*` qualifier is a wildcard (databases leave fields empty).
    pub fn from_qualifiers<'a>(qualifiers: impl IntoIterator<Item = &'a str>) -> Location {
        let mut loc = Location::default();
        for (slot, q) in loc.0.iter_mut().zip(qualifiers) {
            let q = q.trim();
            *slot = if q.is_empty() {
                Qualifier::Any
            } else {
                Qualifier::new(q)
            };
        }
        loc
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Trailing wildcards are omitted, as operators write them.
        let last = self
            .0
            .iter()
            .rposition(|q| !q.is_any())
            .map_or(0, |i| i + 1);
        for (i, q) in self.0[..last.max(1)].iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            match q {
                Qualifier::Any => f.write_str("*")?,
                Qualifier::Is(v) if v.contains(['.', ' ']) => write!(f, "\"{v}\"")?,
                Qualifier::Is(v) => f.write_str(v)?,
            }
        }
        Ok(())
    }
}

/// NetScaler's `matchWildcardtoany`: whether a wildcard on the *other* side (a service's or a
/// client's location, not the pattern's) matches a value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WildcardMode {
    /// A wildcard matches any value (the default).
    #[default]
    Yes,
    /// A wildcard matches only a wildcard.
    No,
    /// A wildcard matches any value in policy expressions only, not in static proximity.
    Expression,
}

/// Where the comparison happens, which matters for [`WildcardMode::Expression`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    Expression,
    Proximity,
}

/// How a location compares with a pattern (a preferred location, a policy's location).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Match {
    /// Every non-wildcard qualifier of the pattern is matched.
    Perfect,
    /// Some but not all of them are (never for a pattern of wildcards only, which is perfect).
    Partial,
    None,
}

fn qualifier_matches(
    pattern: &Qualifier,
    value: &Qualifier,
    mode: WildcardMode,
    ctx: Context,
) -> bool {
    match (pattern, value) {
        (Qualifier::Any, _) => true,
        (Qualifier::Is(p), Qualifier::Is(v)) => p == v,
        (Qualifier::Is(_), Qualifier::Any) => match mode {
            WildcardMode::Yes => true,
            WildcardMode::No => false,
            WildcardMode::Expression => ctx == Context::Expression,
        },
    }
}

impl Location {
    /// Compares `self` (a service's or client's location) with `pattern` (spec section 3).
    pub fn matches(&self, pattern: &Location, mode: WildcardMode, ctx: Context) -> Match {
        let mut wanted = 0;
        let mut matched = 0;
        for (p, v) in pattern.0.iter().zip(&self.0) {
            if p.is_any() {
                continue;
            }
            wanted += 1;
            if qualifier_matches(p, v, mode, ctx) {
                matched += 1;
            }
        }
        if matched == wanted {
            Match::Perfect
        } else if matched > 0 {
            Match::Partial
        } else {
            Match::None
        }
    }

    /// How many leading qualifiers of `self` and `other` are equal values (static proximity:
    /// the most leading qualifiers equal is the best match). Wildcards do not count.
    pub fn common_prefix(&self, other: &Location) -> usize {
        self.0
            .iter()
            .zip(&other.0)
            .take_while(|(a, b)| matches!((a, b), (Qualifier::Is(x), Qualifier::Is(y)) if x == y))
            .count()
    }
}

/// Why a written location is not one; positions count qualifiers from 1.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LocationError {
    #[error("unterminated quote in qualifier {qualifier}")]
    UnterminatedQuote { qualifier: usize },
    #[error("qualifier {qualifier} continues after its closing quote")]
    AfterQuote { qualifier: usize },
    #[error(
        "qualifier {qualifier} contains {found:?}; double-quote a qualifier with spaces or dots"
    )]
    Unquoted { qualifier: usize, found: char },
    #[error("qualifier {qualifier} is empty (use * for any)")]
    Empty { qualifier: usize },
    #[error(
        "{count} qualifiers, at most {MAX_LOCATION_QUALIFIERS} (continent.country.region.city.isp.org)"
    )]
    TooMany { count: usize },
}

/// Splits a location (`Europe.UK."St. Albans"`) into its qualifiers, unquoted.
///
/// Qualifiers are separated by '.'; a qualifier containing '.' or a space is double-quoted.
/// There are 1..=[`MAX_LOCATION_QUALIFIERS`], none empty; `*` is a wildcard, and so is an
/// omitted trailing qualifier (matching is a later concern; this only checks the syntax).
pub fn parse_location(location: &str) -> Result<Vec<String>, LocationError> {
    let mut qualifiers = Vec::new();
    let mut chars = location.chars().peekable();
    loop {
        let mut q = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some(c) => q.push(c),
                    None => {
                        return Err(LocationError::UnterminatedQuote {
                            qualifier: qualifiers.len() + 1,
                        });
                    }
                }
            }
            if !matches!(chars.peek(), None | Some('.')) {
                return Err(LocationError::AfterQuote {
                    qualifier: qualifiers.len() + 1,
                });
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == '.' {
                    break;
                }
                if c == '"' || c.is_whitespace() {
                    return Err(LocationError::Unquoted {
                        qualifier: qualifiers.len() + 1,
                        found: c,
                    });
                }
                q.push(c);
                chars.next();
            }
        }
        if q.trim().is_empty() {
            return Err(LocationError::Empty {
                qualifier: qualifiers.len() + 1,
            });
        }
        qualifiers.push(q);
        // The next character, if any, is the '.' that ended the qualifier.
        if chars.next().is_none() {
            break;
        }
    }
    if qualifiers.len() > MAX_LOCATION_QUALIFIERS {
        return Err(LocationError::TooMany {
            count: qualifiers.len(),
        });
    }
    Ok(qualifiers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(s: &str) -> Location {
        Location::parse(s).unwrap()
    }

    #[test]
    fn parse_and_display() {
        let table = [
            ("Europe.UK.*.*", "europe.uk"),
            ("Asia", "asia"),
            ("*", "*"),
            ("*.ZMB.*.*", "*.zmb"),
            ("Europe.UK.\"St. Albans\"", "europe.uk.\"st. albans\""),
            ("a.b.c.d.e.f", "a.b.c.d.e.f"),
        ];
        for (input, shown) in table {
            assert_eq!(loc(input).to_string(), shown, "{input}");
            assert_eq!(loc(shown), loc(input), "{input} round trip");
        }
        assert!(Location::parse("a.b.c.d.e.f.g").is_err());
        assert_eq!(
            Location::from_qualifiers(["Europe", "", "x"]).to_string(),
            "europe.*.x"
        );
    }

    #[test]
    fn perfect_partial_none_as_the_spec_defines_them() {
        use Match::*;
        let table = [
            // (service, pattern, expected) — spec section 3's own examples first.
            ("*.UK.*.*", "*.UK.*.*", Perfect),
            ("Europe.UK.*.*", "*.UK.*.*", Perfect),
            ("Europe.EG", "Europe.UK", Partial),
            ("Asia.HK", "Asia.HK", Perfect),
            ("Asia.IN", "Asia.HK", Partial),
            ("Africa.ZMB", "Asia.HK", None),
            ("europe.uk", "EUROPE.UK", Perfect),
            ("Europe.UK.London", "Europe.UK", Perfect),
            ("Anything", "*", Perfect),
            // A wildcard in the service matches under the default mode.
            ("Europe", "Europe.UK", Perfect),
        ];
        for (service, pattern, want) in table {
            assert_eq!(
                loc(service).matches(&loc(pattern), WildcardMode::Yes, Context::Proximity),
                want,
                "{service} vs {pattern}"
            );
        }
    }

    #[test]
    fn wildcard_modes() {
        let service = loc("Europe"); // country is a wildcard
        let pattern = loc("Europe.UK");
        let table = [
            (WildcardMode::Yes, Context::Proximity, Match::Perfect),
            (WildcardMode::Yes, Context::Expression, Match::Perfect),
            (WildcardMode::No, Context::Proximity, Match::Partial),
            (WildcardMode::No, Context::Expression, Match::Partial),
            (
                WildcardMode::Expression,
                Context::Expression,
                Match::Perfect,
            ),
            (WildcardMode::Expression, Context::Proximity, Match::Partial),
        ];
        for (mode, ctx, want) in table {
            assert_eq!(
                service.matches(&pattern, mode, ctx),
                want,
                "{mode:?} {ctx:?}"
            );
        }
    }

    #[test]
    fn common_prefix_counts_leading_equal_values() {
        let table = [
            ("Europe.UK.London", "Europe.UK.Leeds", 2),
            ("Europe.UK", "Europe.UK", 2),
            ("Europe.UK", "Asia.UK", 0),
            ("*.UK", "*.UK", 0),
            ("Europe.UK.London", "europe.uk.london", 3),
        ];
        for (a, b, n) in table {
            assert_eq!(loc(a).common_prefix(&loc(b)), n, "{a} / {b}");
        }
    }
}
