//! The static proximity database: client address → [`Location`] (spec section 2).
//!
//! # Sources and precedence
//!
//! A [`LocationDb`] is built once from up to four kinds of source (see [`LocationDbBuilder`]):
//!
//! 1. **Custom entries** (the configuration's `location` entries): `(from, to, Location)`.
//! 2. **NetScaler location files**, one or more, each in one of NetScaler's formats
//!    ([`super::netscaler`]: the `netscaler` CSV with or without the `NSGEO1.0` header,
//!    IP2Location and MaxMind legacy CSVs).
//! 3. **A MaxMind GeoIP2/GeoLite2 City (or Country) `.mmdb`** file ([`super::mmdb`]).
//! 4. **A MaxMind ASN `.mmdb`** file, which only supplies the ISP qualifier.
//!
//! Precedence: **custom > files > mmdb City**. An address covered by a custom entry gets that
//! entry's location, whatever the files say; otherwise the location files'; otherwise the City
//! database's. The ASN database fills the ISP qualifier (5th) of answers that come from the
//! City database, and answers alone (`*.*.*.*.isp`) for addresses nothing else covers; it never
//! changes a custom or file answer (those are the operator's own data).
//!
//! A range's latitude and longitude (location files, City records) come with its answer
//! ([`LocationDb::find`]); they are not part of the [`Location`], which is compared by
//! qualifiers only.
//!
//! # Overlapping ranges: the narrowest wins
//!
//! Within one layer (all custom entries; all location files together) ranges may **nest**:
//! inside a range, a narrower range nested in it wins (at any depth), and outside the narrower
//! one the wider one still applies. Ranges that **partially overlap** (neither contains the
//! other) are rejected, naming both lines, and so is the same range given twice. Between layers
//! there is no such check: the higher layer simply wins where it has an answer.
//!
//! # IPv4-mapped IPv6
//!
//! `::ffff:a.b.c.d` is an IPv4 client (it is how a dual-stack socket reports one): lookups
//! and ranges written with mapped addresses use the IPv4 table. A range with one mapped and one
//! non-mapped end is rejected; other IPv6 ranges never apply to mapped addresses. (The mmdb
//! aliases of IPv4 — 6to4, Teredo — are not followed.)
//!
//! # Lookup
//!
//! Every source is flattened at build time into one table per family (`u32` keys for IPv4,
//! `u128` for IPv6) of sorted, non-overlapping segments ([`super::table`]), so a lookup is one
//! search of one sorted table, plus one more in the ASN table when an ASN database is loaded
//! and the answer came from the City database or from nothing. Nothing is read from disk after
//! [`LocationDbBuilder::build`], and a lookup allocates only when the ASN database supplies the
//! ISP. Load times: `benches/location.rs`, figures in benches/RESULTS.md.
//!
//! Any malformed line or file fails the whole build ([`LocationDbError`], with file, line and
//! reason), so a caller that reloads keeps its old database.

use std::{
    borrow::Cow,
    fmt,
    net::IpAddr,
    path::{Path, PathBuf},
};

pub use super::continent::ContinentStyle;
use super::{
    Coordinates, Location, Qualifier, mmdb,
    table::{Addr, Key, NONE, Table},
};

/// Why a location database could not be built. Any error fails the whole build.
#[derive(Debug, thiserror::Error)]
pub enum LocationDbError {
    #[error("cannot read {}", file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A malformed line (for custom entries: the entry's line, or its 1-based position).
    #[error("{}:{line}: {reason}", file.display())]
    Line {
        file: PathBuf,
        line: usize,
        reason: String,
    },
    /// Two ranges of one layer overlap without nesting, or are the same range; `line` is the
    /// later of the two in load order, `reason` describes both.
    #[error("{}:{line}: {reason}", file.display())]
    Overlap {
        file: PathBuf,
        line: usize,
        other_file: PathBuf,
        other_line: usize,
        reason: String,
    },
    /// The file is not a usable MaxMind database.
    #[error("{}: {reason}", file.display())]
    Mmdb { file: PathBuf, reason: String },
}

/// Which layer answered a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A custom entry.
    Custom,
    /// A NetScaler location file.
    Csv,
    /// The City database (the ISP qualifier from the ASN database, if it has the address).
    MmdbCity,
    /// Only the ASN database has the address: the answer is `*.*.*.*.isp`.
    MmdbAsn,
}

/// Counts of what a [`LocationDb`] was built from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocationDbStats {
    /// Custom entries.
    pub custom: usize,
    /// Ranges read from location files.
    pub csv: usize,
    /// Lines of location files that give no location and were skipped (IP2Location's `-`).
    pub skipped: usize,
    /// Networks with a location read from the City database.
    pub mmdb_city: usize,
    /// Networks with an ISP read from the ASN database.
    pub mmdb_asn: usize,
    /// Distinct locations kept.
    pub locations: usize,
    /// Segments of the flat lookup tables (IPv4 + IPv6, ASN included).
    pub segments: usize,
}

/// What a lookup finds: the location, the layer it came from, and the coordinates of the
/// range (when its source gives them).
#[derive(Clone, Debug, PartialEq)]
pub struct Found<'a> {
    pub location: Cow<'a, Location>,
    pub source: Source,
    pub coordinates: Option<Coordinates>,
}

/// A range's value: a location and the range's coordinates.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Value {
    location: u32,
    coordinates: Option<Coordinates>,
}

/// The static proximity database. Immutable once built; cheap to share (`Arc`) between threads.
#[derive(Clone, Default)]
pub struct LocationDb {
    locations: Vec<Location>,
    /// Table values index this (with the source in the top bits, see [`tag`]).
    values: Vec<Value>,
    v4: Table<u32>,
    v6: Table<u128>,
    /// ASN layer: values index `isps`.
    isps: Vec<Qualifier>,
    asn_v4: Table<u32>,
    asn_v6: Table<u128>,
    stats: LocationDbStats,
}

impl fmt::Debug for LocationDb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocationDb")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl LocationDb {
    /// The database a configuration's `[locations]` and `[[location]]` sections describe;
    /// custom entries are named `config_file:line` in errors.
    pub fn from_sources(
        sources: &super::LocationSources,
        config_file: &Path,
    ) -> Result<LocationDb, LocationDbError> {
        let mut builder = LocationDb::builder();
        for file in &sources.files {
            builder = builder.file(file.path.clone(), file.format);
        }
        if let Some(file) = &sources.mmdb_city {
            builder = builder.mmdb_city(file.clone());
        }
        if let Some(file) = &sources.mmdb_asn {
            builder = builder.mmdb_asn(file.clone());
        }
        if sources.continent_codes {
            builder = builder.continent_style(ContinentStyle::Code);
        }
        builder
            .custom_at(config_file, sources.custom.iter().cloned())
            .build()
    }

    /// An empty database: every lookup answers `None`.
    pub fn empty() -> LocationDb {
        LocationDb::default()
    }

    pub fn builder() -> LocationDbBuilder {
        LocationDbBuilder::default()
    }

    /// The location of `ip`, by the precedence custom > files > mmdb (see the module docs).
    ///
    /// Borrowed except when the ASN database supplies the ISP qualifier (then the location is
    /// assembled: one clone).
    pub fn lookup(&self, ip: IpAddr) -> Option<Cow<'_, Location>> {
        self.find(ip).map(|found| found.location)
    }

    /// [`lookup`](Self::lookup), also telling which layer answered.
    pub fn lookup_with_source(&self, ip: IpAddr) -> Option<(Cow<'_, Location>, Source)> {
        self.find(ip).map(|found| (found.location, found.source))
    }

    /// Everything known about `ip`: location, layer and the range's coordinates.
    pub fn find(&self, ip: IpAddr) -> Option<Found<'_>> {
        match Addr::of(ip) {
            Addr::V4(k) => self.finish(self.v4.get(k), || self.asn_v4.get(k)),
            Addr::V6(k) => self.finish(self.v6.get(k), || self.asn_v6.get(k)),
        }
    }

    fn finish(&self, val: u32, isp: impl FnOnce() -> u32) -> Option<Found<'_>> {
        let found = (val != NONE).then(|| (source_of(val), self.values[index_of(val)]));
        if matches!(found, None | Some((Source::MmdbCity, _))) && !self.isps.is_empty() {
            let isp = isp();
            if isp != NONE {
                let mut location = match found {
                    Some((_, value)) => self.locations[value.location as usize].clone(),
                    None => Location::default(),
                };
                location.0[mmdb::ISP] = self.isps[isp as usize].clone();
                return Some(Found {
                    location: Cow::Owned(location),
                    source: found.map_or(Source::MmdbAsn, |(s, _)| s),
                    coordinates: found.and_then(|(_, v)| v.coordinates),
                });
            }
        }
        found.map(|(source, value)| Found {
            location: Cow::Borrowed(&self.locations[value.location as usize]),
            source,
            coordinates: value.coordinates,
        })
    }

    /// The location index of a table value ([`NONE`] for none).
    fn location_of(&self, val: u32) -> u32 {
        if val == NONE {
            NONE
        } else {
            self.values[index_of(val)].location
        }
    }

    /// Every address at which some lookup's location may change, as IPv6 or IPv4-mapped keys
    /// (`::ffff:a.b.c.d`), unsorted: between two neighbouring boundaries every lookup gives the
    /// same location (coordinates may differ). The compiler cuts the client address space at
    /// these.
    pub fn boundaries(&self) -> Vec<u128> {
        const MAPPED: u128 = gslb_common::V4_MAPPED;
        fn changes<'a, K: Key>(
            table: &'a Table<K>,
            location: impl Fn(u32) -> u32 + 'a,
        ) -> impl Iterator<Item = K> + 'a {
            let mut last = NONE;
            table.segments().filter_map(move |(start, val)| {
                let now = location(val);
                (std::mem::replace(&mut last, now) != now).then_some(start)
            })
        }
        let mut out = Vec::with_capacity(self.v4.len() + self.v6.len());
        let loc = |val| self.location_of(val);
        let isp = |val| val;
        out.extend(changes(&self.v4, loc).map(|k| MAPPED | u128::from(k)));
        out.extend(changes(&self.asn_v4, isp).map(|k| MAPPED | u128::from(k)));
        out.extend(changes(&self.v6, loc));
        out.extend(changes(&self.asn_v6, isp));
        out
    }

    /// An identity of `ip`'s location: two addresses with the same class have the same
    /// location (the converse need not hold). Cheaper than [`lookup`](Self::lookup): no
    /// location is assembled.
    pub fn class(&self, ip: IpAddr) -> u64 {
        let asn = !self.isps.is_empty();
        let (val, isp) = match Addr::of(ip) {
            Addr::V4(k) => (self.v4.get(k), if asn { self.asn_v4.get(k) } else { NONE }),
            Addr::V6(k) => (self.v6.get(k), if asn { self.asn_v6.get(k) } else { NONE }),
        };
        // The ISP only shows through for City answers and for none.
        let isp = if val == NONE || source_of(val) == Source::MmdbCity {
            isp
        } else {
            NONE
        };
        u64::from(self.location_of(val)) << 32 | u64::from(isp)
    }

    /// How many ranges and networks the database was built from (all sources).
    pub fn len(&self) -> usize {
        let s = &self.stats;
        s.custom + s.csv + s.mmdb_city + s.mmdb_asn
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn stats(&self) -> LocationDbStats {
        self.stats
    }
}

// ---- values: a value index tagged with its layer ----

const SOURCE_SHIFT: u32 = 30;
const INDEX_MASK: u32 = (1 << SOURCE_SHIFT) - 1;

fn tag(index: u32, source: Source) -> u32 {
    let s = match source {
        Source::Custom => 0,
        Source::Csv => 1,
        Source::MmdbCity | Source::MmdbAsn => 2,
    };
    (s << SOURCE_SHIFT) | index
}

fn source_of(val: u32) -> Source {
    match val >> SOURCE_SHIFT {
        0 => Source::Custom,
        1 => Source::Csv,
        _ => Source::MmdbCity,
    }
}

fn index_of(val: u32) -> usize {
    (val & INDEX_MASK) as usize
}

mod build;
#[cfg(test)]
mod tests;

pub use build::LocationDbBuilder;
