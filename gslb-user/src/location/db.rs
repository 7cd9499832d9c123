//! The static proximity database: client address → [`Location`] (spec section 2).
//!
//! # Sources and precedence
//!
//! A [`LocationDb`] is built once from up to four kinds of source (see [`LocationDbBuilder`]):
//!
//! 1. **Custom entries** (the configuration's `location` entries): `(from, to, Location)`.
//! 2. **NetScaler location files** ("netscaler" format, one or more: NetScaler keeps IPv4 and
//!    IPv6 in separate files).
//! 3. **A MaxMind GeoIP2/GeoLite2 City (or Country) `.mmdb`** file.
//! 4. **A MaxMind ASN `.mmdb`** file, which only supplies the ISP qualifier.
//!
//! Precedence: **custom > CSV > mmdb City**. An address covered by a custom entry gets that
//! entry's location, whatever the files say; otherwise the CSV files' location; otherwise the
//! City database's. The ASN database fills the ISP qualifier (5th) of answers that come from the
//! City database, and answers alone (`*.*.*.*.isp`) for addresses nothing else covers; it never
//! changes a custom or CSV answer (those are the operator's own data).
//!
//! # Overlapping ranges: the narrowest wins
//!
//! Within one layer (all custom entries; all CSV files together) ranges may **nest**: inside a
//! range, a narrower range nested in it wins (at any depth), and outside the narrower one the
//! wider one still applies. Ranges that **partially overlap** (neither contains the other) are
//! rejected, naming both lines, and so is the same range given twice. Between layers there is no
//! such check: the higher layer simply wins where it has an answer.
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
//! `u128` for IPv6) of sorted, non-overlapping segments (ranges are split where narrower ones
//! nest in them, and the layers merged by precedence), so a lookup is one search of one sorted
//! table, laid out as a static search tree (see `Table`), plus one more in the ASN table when an
//! ASN database is loaded and the answer came from the City database or from nothing. Nothing
//! is read from disk after [`LocationDbBuilder::build`], and a lookup allocates only when the
//! ASN database supplies the ISP. Building a million-line file takes about half a second
//! (`benches/location.rs`).
//!
//! # The "netscaler" CSV format
//!
//! `ip_from,ip_to,continent,country,region,city,isp,org[,longitude,latitude]`, one range per
//! line, both ends inclusive:
//! - addresses are dotted-quad IPv4, IPv6, or a decimal 32-bit number (IPv4);
//! - fields may be double-quoted (`"St. Albans"`, with `""` for a quote inside) and are trimmed;
//! - an empty or `*` qualifier is a wildcard, trailing qualifier columns may be omitted, but at
//!   least one qualifier must be set; qualifiers are compared case-insensitively;
//! - longitude and latitude, when present, must both be given (or both be empty) and be in
//!   range; they are checked but not kept (locations are compared by qualifiers only);
//! - blank lines, `#` comments and the format tag lines (`NSGEO1.0` and any line starting with
//!   `NSGEO`) are skipped; a UTF-8 byte order mark is ignored.
//!
//! Any malformed line fails the whole build ([`LocationDbError`], with file, line and reason),
//! so a caller that reloads keeps its old database.
//!
//! # mmdb mapping
//!
//! City/Country records map to `continent.country.region.city`: continent = the English
//! continent name (`Europe`; or the code `EU` with [`ContinentStyle::Code`]), country = the
//! ISO 3166-1 code, region = the first subdivision's ISO 3166-2 code (its English name if it has
//! no code), city = the English city name. ASN records supply the ISP qualifier:
//! `autonomous_system_organization`, or `AS<number>` when a record has no organization. Records
//! that give no qualifier at all are ignored.

use std::{
    borrow::Cow,
    collections::HashMap,
    fmt,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    path::{Path, PathBuf},
};

use maxminddb::{Reader, WithinOptions, geoip2};

use super::{Location, Qualifier};
use crate::config::MAX_LOCATION_QUALIFIERS;

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

/// How a City database's continent becomes the continent qualifier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContinentStyle {
    /// The English name (`Europe`, `North America`); the code when there is no name.
    #[default]
    Name,
    /// The two-letter code (`EU`, `NA`); the English name when there is no code.
    Code,
}

/// Counts of what a [`LocationDb`] was built from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocationDbStats {
    /// Custom entries.
    pub custom: usize,
    /// Ranges read from NetScaler location files.
    pub csv: usize,
    /// Networks with a location read from the City database.
    pub mmdb_city: usize,
    /// Networks with an ISP read from the ASN database.
    pub mmdb_asn: usize,
    /// Distinct locations kept.
    pub locations: usize,
    /// Segments of the flat lookup tables (IPv4 + IPv6, ASN included).
    pub segments: usize,
}

/// The static proximity database. Immutable once built; cheap to share (`Arc`) between threads.
#[derive(Clone, Default)]
pub struct LocationDb {
    locations: Vec<Location>,
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
        sources: &crate::config::LocationSources,
        config_file: &Path,
    ) -> Result<LocationDb, LocationDbError> {
        let mut builder = LocationDb::builder();
        for file in &sources.netscaler {
            builder = builder.netscaler_csv(file.clone());
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

    /// The location of `ip`, by the precedence custom > CSV > mmdb (see the module docs).
    ///
    /// Borrowed except when the ASN database supplies the ISP qualifier (then the location is
    /// assembled: one clone).
    pub fn lookup(&self, ip: IpAddr) -> Option<Cow<'_, Location>> {
        self.lookup_with_source(ip).map(|(location, _)| location)
    }

    /// [`lookup`](Self::lookup), also telling which layer answered.
    pub fn lookup_with_source(&self, ip: IpAddr) -> Option<(Cow<'_, Location>, Source)> {
        match Addr::of(ip) {
            Addr::V4(k) => self.finish(self.v4.get(k), || self.asn_v4.get(k)),
            Addr::V6(k) => self.finish(self.v6.get(k), || self.asn_v6.get(k)),
        }
    }

    fn finish(&self, val: u32, isp: impl FnOnce() -> u32) -> Option<(Cow<'_, Location>, Source)> {
        let source = if val == NONE {
            None
        } else {
            Some(source_of(val))
        };
        if matches!(source, None | Some(Source::MmdbCity)) && !self.isps.is_empty() {
            let isp = isp();
            if isp != NONE {
                let mut location = match source {
                    Some(_) => self.locations[index_of(val)].clone(),
                    None => Location::default(),
                };
                location.0[ISP] = self.isps[isp as usize].clone();
                let source = source.unwrap_or(Source::MmdbAsn);
                return Some((Cow::Owned(location), source));
            }
        }
        source.map(|s| (Cow::Borrowed(&self.locations[index_of(val)]), s))
    }

    /// Every address at which some lookup's answer may change, as IPv6 or IPv4-mapped keys
    /// (`::ffff:a.b.c.d`), unsorted: between two neighbouring boundaries every lookup gives the
    /// same location. The compiler cuts the client address space at these.
    pub fn boundaries(&self) -> Vec<u128> {
        const MAPPED: u128 = 0xffff << 32;
        let mut out = Vec::with_capacity(self.v4.len() + self.v6.len());
        for table in [&self.v4, &self.asn_v4] {
            out.extend(table.starts().map(|k| MAPPED | u128::from(k)));
        }
        for table in [&self.v6, &self.asn_v6] {
            out.extend(table.starts());
        }
        out
    }

    /// An identity of `ip`'s location: two addresses with the same class have the same
    /// location (the converse need not hold). Cheaper than [`lookup`](Self::lookup): no
    /// location is assembled.
    pub fn class(&self, ip: IpAddr) -> u64 {
        let (val, isp) = match Addr::of(ip) {
            Addr::V4(k) => (
                self.v4.get(k),
                if self.isps.is_empty() {
                    NONE
                } else {
                    self.asn_v4.get(k)
                },
            ),
            Addr::V6(k) => (
                self.v6.get(k),
                if self.isps.is_empty() {
                    NONE
                } else {
                    self.asn_v6.get(k)
                },
            ),
        };
        u64::from(val) << 32 | u64::from(isp)
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

/// Collects the sources of a [`LocationDb`]; [`build`](Self::build) reads them (blocking I/O:
/// call it off the async runtime, e.g. in `spawn_blocking`).
#[derive(Clone, Debug, Default)]
pub struct LocationDbBuilder {
    csv: Vec<CsvSource>,
    custom: Vec<(PathBuf, Vec<CustomEntry>)>,
    city: Option<PathBuf>,
    asn: Option<PathBuf>,
    continent: ContinentStyle,
}

/// A custom entry: `(line, from, to, location)`.
type CustomEntry = (usize, IpAddr, IpAddr, Location);

#[derive(Clone, Debug)]
enum CsvSource {
    File(PathBuf),
    Text(PathBuf, String),
}

impl LocationDbBuilder {
    /// Adds a NetScaler ("netscaler" format) location file. Several files form one layer:
    /// their ranges may nest across files, but not partially overlap.
    pub fn netscaler_csv(mut self, path: impl Into<PathBuf>) -> Self {
        self.csv.push(CsvSource::File(path.into()));
        self
    }

    /// Adds NetScaler location data already in memory; `name` stands for the file in errors.
    pub fn netscaler_csv_text(mut self, name: impl Into<PathBuf>, text: impl Into<String>) -> Self {
        self.csv.push(CsvSource::Text(name.into(), text.into()));
        self
    }

    /// Adds custom entries `(from, to, location)` (both ends inclusive); errors name them
    /// `<custom>:N`, N their 1-based position. Custom entries win over every file.
    pub fn custom(self, entries: impl IntoIterator<Item = (IpAddr, IpAddr, Location)>) -> Self {
        let entries = entries
            .into_iter()
            .enumerate()
            .map(|(i, (f, t, l))| (i + 1, f, t, l));
        self.custom_at(CUSTOM, entries)
    }

    /// Adds custom entries `(line, from, to, location)` written in `file` (the configuration),
    /// so that errors name `file:line`.
    pub fn custom_at(
        mut self,
        file: impl Into<PathBuf>,
        entries: impl IntoIterator<Item = (usize, IpAddr, IpAddr, Location)>,
    ) -> Self {
        self.custom
            .push((file.into(), entries.into_iter().collect()));
        self
    }

    /// Sets the MaxMind City (or Country) database, consulted below custom entries and CSV files.
    pub fn mmdb_city(mut self, path: impl Into<PathBuf>) -> Self {
        self.city = Some(path.into());
        self
    }

    /// Sets the MaxMind ASN database, which supplies the ISP qualifier (see the module docs).
    pub fn mmdb_asn(mut self, path: impl Into<PathBuf>) -> Self {
        self.asn = Some(path.into());
        self
    }

    /// How the City database's continent is written (default: its English name).
    pub fn continent_style(mut self, style: ContinentStyle) -> Self {
        self.continent = style;
        self
    }

    /// Reads every source and builds the database; the first error fails the whole build.
    pub fn build(self) -> Result<LocationDb, LocationDbError> {
        let mut b = Build::default();

        let mut csv = Layer::default();
        for source in &self.csv {
            match source {
                CsvSource::File(path) => {
                    let bytes = std::fs::read(path).map_err(|source| LocationDbError::Io {
                        file: path.clone(),
                        source,
                    })?;
                    b.parse_csv(path, &bytes, &mut csv)?;
                }
                CsvSource::Text(name, text) => b.parse_csv(name, text.as_bytes(), &mut csv)?,
            }
        }
        let mut custom = Layer::default();
        for (file, entries) in &self.custom {
            let src = b.source(file);
            for (line, from, to, location) in entries {
                let err = |reason: String| LocationDbError::Line {
                    file: file.clone(),
                    line: *line,
                    reason,
                };
                let range = Range::new(*from, *to).map_err(err)?;
                if location.0.iter().all(Qualifier::is_any) {
                    return Err(err(NO_QUALIFIER.into()));
                }
                let val = b.intern(location.clone(), Source::Custom);
                custom.push(range, val, src, *line);
            }
        }
        b.stats.csv = csv.len();
        b.stats.custom = custom.len();

        let csv = b.flatten(csv)?;
        let custom = b.flatten(custom)?;
        let (mut v4, mut v6) = (overlay(&custom.0, &csv.0), overlay(&custom.1, &csv.1));
        drop((csv, custom));

        if let Some(path) = &self.city {
            let (city4, city6) = b.load_city(path, self.continent)?;
            v4 = overlay(&v4, &city4);
            v6 = overlay(&v6, &city6);
        }
        let (asn_v4, asn_v6) = match &self.asn {
            Some(path) => b.load_asn(path)?,
            None => Default::default(),
        };

        let (v4, v6) = (v4.finish(), v6.finish());
        let (asn_v4, asn_v6) = (asn_v4.finish(), asn_v6.finish());
        let mut stats = b.stats;
        stats.locations = b.locations.len();
        stats.segments = v4.len() + v6.len() + asn_v4.len() + asn_v6.len();
        let locations = b.locations;
        let mut ordered = vec![Location::default(); locations.len()];
        for (location, i) in locations {
            ordered[i as usize] = location;
        }
        Ok(LocationDb {
            locations: ordered,
            v4,
            v6,
            isps: b.isps,
            asn_v4,
            asn_v6,
            stats,
        })
    }
}

/// The file name custom entries without a file are reported under.
const CUSTOM: &str = "<custom>";
const NO_QUALIFIER: &str = "no qualifier (every one is empty or *): a location needs at least one";
/// Index of the ISP qualifier.
const ISP: usize = 4;
/// Fields of a "netscaler" line: 2 addresses, 6 qualifiers, longitude, latitude.
const MAX_FIELDS: usize = 2 + MAX_LOCATION_QUALIFIERS + 2;
const FORMAT: &str = "ip_from,ip_to,continent,country,region,city,isp,org[,longitude,latitude]";

// ---- values: a location index tagged with its layer ----

/// No location (a gap in a table).
const NONE: u32 = u32::MAX;
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

// ---- addresses ----

/// An address as a table key: IPv4 (IPv4-mapped IPv6 included) or IPv6.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Addr {
    V4(u32),
    V6(u128),
}

impl Addr {
    fn of(ip: IpAddr) -> Addr {
        match ip {
            IpAddr::V4(v4) => Addr::V4(v4.into()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Addr::V4(v4.into()),
                None => Addr::V6(v6.into()),
            },
        }
    }
}

/// An inclusive range of one family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Range {
    V4(u32, u32),
    V6(u128, u128),
}

impl Range {
    fn new(from: IpAddr, to: IpAddr) -> Result<Range, String> {
        let range = match (Addr::of(from), Addr::of(to)) {
            (Addr::V4(f), Addr::V4(t)) => Range::V4(f, t),
            (Addr::V6(f), Addr::V6(t)) => Range::V6(f, t),
            (Addr::V4(_), Addr::V6(_)) | (Addr::V6(_), Addr::V4(_)) => {
                return Err(format!(
                    "ip_from {from} and ip_to {to} are of different families (IPv4-mapped \
                     addresses count as IPv4)"
                ));
            }
        };
        let backwards = match range {
            Range::V4(f, t) => f > t,
            Range::V6(f, t) => f > t,
        };
        if backwards {
            return Err(format!("ip_from {from} is after ip_to {to}"));
        }
        Ok(range)
    }
}

/// A table key type: IPv4 as `u32`, IPv6 as `u128`.
trait Key: Copy + Ord + fmt::Debug {
    const MAX: Self;
    fn succ(self) -> Self;
    fn addr(self) -> IpAddr;
}

impl Key for u32 {
    const MAX: u32 = u32::MAX;
    fn succ(self) -> u32 {
        self + 1
    }
    fn addr(self) -> IpAddr {
        Ipv4Addr::from(self).into()
    }
}

impl Key for u128 {
    const MAX: u128 = u128::MAX;
    fn succ(self) -> u128 {
        self + 1
    }
    fn addr(self) -> IpAddr {
        Ipv6Addr::from(self).into()
    }
}

// ---- flat tables ----

/// A step function over the address space, while it is built: `vals[i]` holds on
/// `[starts[i], starts[i + 1])`, and [`NONE`] before `starts[0]`. Starts strictly increase;
/// neighbours differ in value. [`finish`](Self::finish) makes it a [`Table`] for lookups.
#[derive(Clone, Debug)]
struct Steps<K> {
    starts: Vec<K>,
    vals: Vec<u32>,
}

impl<K> Default for Steps<K> {
    fn default() -> Self {
        Steps {
            starts: Vec::new(),
            vals: Vec::new(),
        }
    }
}

impl<K: Key> Steps<K> {
    fn with_capacity(n: usize) -> Self {
        Steps {
            starts: Vec::with_capacity(n),
            vals: Vec::with_capacity(n),
        }
    }

    fn len(&self) -> usize {
        self.starts.len()
    }

    /// Sets the value from `start` on; `start` is at least the last start (equal: replaces it).
    fn push(&mut self, start: K, val: u32) {
        if self.starts.last() == Some(&start) {
            self.starts.pop();
            self.vals.pop();
        }
        debug_assert!(self.starts.last().is_none_or(|&last| last < start));
        if self.vals.last().copied().unwrap_or(NONE) != val {
            self.starts.push(start);
            self.vals.push(val);
        }
    }

    fn finish(self) -> Table<K> {
        Table::new(&self)
    }
}

/// `top` where it has a value, `base` elsewhere.
fn overlay<K: Key>(top: &Steps<K>, base: &Steps<K>) -> Steps<K> {
    if top.len() == 0 {
        return base.clone();
    }
    if base.len() == 0 {
        return top.clone();
    }
    let mut out = Steps::with_capacity(top.len() + base.len());
    let (mut i, mut j) = (0, 0);
    let (mut a, mut b) = (NONE, NONE);
    loop {
        let p = match (top.starts.get(i), base.starts.get(j)) {
            (Some(&x), Some(&y)) => x.min(y),
            (Some(&x), None) => x,
            (None, Some(&y)) => y,
            (None, None) => break,
        };
        if top.starts.get(i) == Some(&p) {
            a = top.vals[i];
            i += 1;
        }
        if base.starts.get(j) == Some(&p) {
            b = base.vals[j];
            j += 1;
        }
        out.push(p, if a != NONE { a } else { b });
    }
    out
}

/// Segments per leaf block, and keys per block of the upper levels.
const FANOUT: usize = 16;

/// [`Steps`] laid out for lookups: a static search tree (an implicit B+-tree, no pointers).
///
/// The leaves are blocks of [`FANOUT`] segments, each block holding its starts and then their
/// values side by side (two cache lines for IPv4), so the last step of a lookup finds the
/// segment and its value in one place. `upper[0]` holds the first start of every block,
/// `upper[1]` every [`FANOUT`]-th key of `upper[0]`, and so on up to a level of at most
/// [`FANOUT`] keys. Each level costs one scan of [`FANOUT`] contiguous keys: a lookup among a
/// million segments reads five small blocks, the upper ones hot in cache, instead of the twenty
/// scattered reads of a binary search.
#[derive(Clone, Debug)]
struct Table<K> {
    blocks: Vec<Block<K>>,
    upper: Vec<Vec<K>>,
    len: usize,
}

/// `FANOUT` segments; past the last segment of the table, starts are `K::MAX` with the last
/// segment's value (which holds up to `K::MAX` anyway), so scans need no length.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Block<K> {
    starts: [K; FANOUT],
    vals: [u32; FANOUT],
}

impl<K> Default for Table<K> {
    fn default() -> Self {
        Table {
            blocks: Vec::new(),
            upper: Vec::new(),
            len: 0,
        }
    }
}

/// How many keys of `keys` are at most `k` (they are sorted; this form vectorizes).
#[inline]
fn count_le<K: Key>(keys: &[K], k: K) -> usize {
    keys.iter().map(|&s| usize::from(s <= k)).sum()
}

impl<K: Key> Table<K> {
    fn new(steps: &Steps<K>) -> Table<K> {
        let blocks: Vec<Block<K>> = steps
            .starts
            .chunks(FANOUT)
            .zip(steps.vals.chunks(FANOUT))
            .map(|(starts, vals)| {
                let last = *vals.last().expect("chunks are not empty");
                let mut block = Block {
                    starts: [K::MAX; FANOUT],
                    vals: [last; FANOUT],
                };
                block.starts[..starts.len()].copy_from_slice(starts);
                block.vals[..vals.len()].copy_from_slice(vals);
                block
            })
            .collect();
        let mut upper: Vec<Vec<K>> = Vec::new();
        if blocks.len() > 1 {
            upper.push(blocks.iter().map(|b| b.starts[0]).collect());
            while let Some(level) = upper.last().filter(|level| level.len() > FANOUT) {
                let next = level.iter().step_by(FANOUT).copied().collect();
                upper.push(next);
            }
        }
        Table {
            blocks,
            upper,
            len: steps.len(),
        }
    }

    /// Segments.
    fn len(&self) -> usize {
        self.len
    }

    /// The segments' starts, ascending.
    fn starts(&self) -> impl Iterator<Item = K> + '_ {
        self.blocks.iter().flat_map(|b| b.starts).take(self.len)
    }

    /// The value at `k`.
    #[inline]
    fn get(&self, k: K) -> u32 {
        let block = match self.upper.split_last() {
            None => 0,
            Some((top, below)) => {
                // `p`: how many keys of the current level are at most `k`.
                let mut p = count_le(top, k);
                if p == 0 {
                    return NONE;
                }
                for level in below.iter().rev() {
                    // The keys under key p - 1 of the level above start with it (<= k).
                    let lo = (p - 1) * FANOUT;
                    let hi = (lo + FANOUT).min(level.len());
                    p = lo + count_le(&level[lo..hi], k);
                }
                p - 1
            }
        };
        let Some(block) = self.blocks.get(block) else {
            return NONE;
        };
        match count_le(&block.starts, k) {
            0 => NONE,
            n => block.vals[n - 1],
        }
    }
}

// ---- building ----

/// One input range: `val` is a tagged location; `src`/`line` say where it was written.
#[derive(Clone, Copy, Debug)]
struct Entry<K> {
    from: K,
    to: K,
    val: u32,
    src: u32,
    line: u32,
}

/// The ranges of one layer (custom, or all CSV files), before flattening.
#[derive(Default)]
struct Layer {
    v4: Vec<Entry<u32>>,
    v6: Vec<Entry<u128>>,
}

impl Layer {
    fn push(&mut self, range: Range, val: u32, src: u32, line: usize) {
        let line = u32::try_from(line).unwrap_or(u32::MAX);
        match range {
            Range::V4(from, to) => self.v4.push(Entry {
                from,
                to,
                val,
                src,
                line,
            }),
            Range::V6(from, to) => self.v6.push(Entry {
                from,
                to,
                val,
                src,
                line,
            }),
        }
    }

    fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }
}

#[derive(Default)]
struct Build {
    /// Distinct locations → their index (the final `Vec` is ordered by it).
    locations: HashMap<Location, u32>,
    /// Files (and the custom pseudo-files) entries come from, for overlap errors.
    sources: Vec<PathBuf>,
    isps: Vec<Qualifier>,
    stats: LocationDbStats,
}

impl Build {
    fn source(&mut self, file: &Path) -> u32 {
        self.sources.push(file.to_path_buf());
        (self.sources.len() - 1) as u32
    }

    fn intern(&mut self, location: Location, source: Source) -> u32 {
        let next = self.locations.len() as u32;
        let index = *self.locations.entry(location).or_insert(next);
        assert!(index < INDEX_MASK, "more than 2^30 distinct locations");
        tag(index, source)
    }

    /// Parses one "netscaler" file into `layer`.
    fn parse_csv(
        &mut self,
        file: &Path,
        bytes: &[u8],
        layer: &mut Layer,
    ) -> Result<(), LocationDbError> {
        let src = self.source(file);
        let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
        let lines = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
        layer.v4.reserve(lines);
        // Raw qualifier text → value: one hash per line and no allocation for repeated
        // locations (most lines of a real file repeat one).
        let mut seen: HashMap<&[u8], u32> = HashMap::new();
        let mut fields: [Field<'_>; MAX_FIELDS] = Default::default();
        for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
            let line = i + 1;
            let err = |reason: String| LocationDbError::Line {
                file: file.to_path_buf(),
                line,
                reason,
            };
            let trimmed = raw.trim_ascii();
            if trimmed.is_empty()
                || trimmed[0] == b'#'
                || trimmed
                    .get(..5)
                    .is_some_and(|p| p.eq_ignore_ascii_case(b"NSGEO"))
            {
                continue;
            }
            let text = std::str::from_utf8(trimmed).map_err(|e| {
                err(format!(
                    "not UTF-8 (byte {} of the line)",
                    e.valid_up_to() + 1
                ))
            })?;
            let n = split_fields(text, &mut fields).map_err(err)?;
            if !(3..=8).contains(&n) && n != MAX_FIELDS {
                return Err(err(format!("{n} fields; expected {FORMAT}")));
            }
            let from = parse_addr(&fields[0].text).map_err(|r| err(format!("ip_from {r}")))?;
            let to = parse_addr(&fields[1].text).map_err(|r| err(format!("ip_to {r}")))?;
            let range = Range::new(from, to).map_err(err)?;
            if n == MAX_FIELDS {
                check_coordinates(&fields[8].text, &fields[9].text).map_err(err)?;
            }
            let quals = &fields[2..n.min(2 + MAX_LOCATION_QUALIFIERS)];
            let key = &trimmed[quals[0].span.0..quals[quals.len() - 1].span.1];
            let val = match seen.get(key) {
                Some(&val) => val,
                None => {
                    let location = Location::from_qualifiers(quals.iter().map(|f| &*f.text));
                    if location.0.iter().all(Qualifier::is_any) {
                        return Err(err(NO_QUALIFIER.into()));
                    }
                    let val = self.intern(location, Source::Csv);
                    seen.insert(key, val);
                    val
                }
            };
            layer.push(range, val, src, line);
        }
        Ok(())
    }

    /// Flattens a layer into one table per family, checking nesting.
    fn flatten(&self, layer: Layer) -> Result<(Steps<u32>, Steps<u128>), LocationDbError> {
        Ok((
            self.flatten_family(layer.v4)?,
            self.flatten_family(layer.v6)?,
        ))
    }

    fn flatten_family<K: Key>(
        &self,
        mut entries: Vec<Entry<K>>,
    ) -> Result<Steps<K>, LocationDbError> {
        // Outer ranges before the ranges nested in them: by start, then widest first.
        entries.sort_unstable_by(|a, b| a.from.cmp(&b.from).then(b.to.cmp(&a.to)));
        let mut table = Steps::with_capacity(entries.len() * 2);
        // The ranges containing the current position, innermost last.
        let mut open: Vec<Entry<K>> = Vec::new();
        let close = |open: &mut Vec<Entry<K>>, table: &mut Steps<K>| {
            let done = open.pop().expect("an open range");
            if done.to != K::MAX {
                table.push(done.to.succ(), open.last().map_or(NONE, |outer| outer.val));
            }
        };
        for e in entries {
            while open.last().is_some_and(|outer| outer.to < e.from) {
                close(&mut open, &mut table);
            }
            if let Some(outer) = open.last()
                && (e.to > outer.to || (e.from == outer.from && e.to == outer.to))
            {
                return Err(self.overlap(outer, &e));
            }
            table.push(e.from, e.val);
            open.push(e);
        }
        while !open.is_empty() {
            close(&mut open, &mut table);
        }
        Ok(table)
    }

    fn overlap<K: Key>(&self, a: &Entry<K>, b: &Entry<K>) -> LocationDbError {
        // Report at the later of the two in load order.
        let (later, earlier) = if (a.src, a.line) > (b.src, b.line) {
            (a, b)
        } else {
            (b, a)
        };
        let file = self.sources[later.src as usize].clone();
        let other_file = self.sources[earlier.src as usize].clone();
        let range = |e: &Entry<K>| format!("{}-{}", e.from.addr(), e.to.addr());
        let other = if other_file == file {
            format!("line {}", earlier.line)
        } else {
            format!("{}:{}", other_file.display(), earlier.line)
        };
        let reason = if a.from == b.from && a.to == b.to {
            format!("range {} is also given on {other}", range(later))
        } else {
            format!(
                "range {} partially overlaps range {} on {other}; ranges may nest (the narrower \
                 one wins) but not partially overlap",
                range(later),
                range(earlier)
            )
        };
        LocationDbError::Overlap {
            file,
            line: later.line as usize,
            other_file,
            other_line: earlier.line as usize,
            reason,
        }
    }

    /// Reads a City (or Country) database into flat tables of tagged locations.
    fn load_city(
        &mut self,
        path: &Path,
        style: ContinentStyle,
    ) -> Result<(Steps<u32>, Steps<u128>), LocationDbError> {
        let reader = open_mmdb(path)?;
        let db_type = &reader.metadata().database_type;
        if db_type.contains("ASN") || db_type.contains("ISP") {
            return Err(mmdb_err(
                path,
                format!("is a {db_type} database, not a City or Country one"),
            ));
        }
        // Data offset → tagged location (NONE: the record gives no qualifier).
        let mut records: HashMap<usize, u32> = HashMap::new();
        let mut count = 0;
        let tables = walk(&reader, path, |lookup| {
            let offset = lookup.offset().expect("networks with data only");
            if let Some(&val) = records.get(&offset) {
                count += usize::from(val != NONE);
                return Ok(val);
            }
            let record: geoip2::City<'_> = lookup.decode()?.unwrap_or_default();
            let continent = match style {
                ContinentStyle::Name => record.continent.names.english.or(record.continent.code),
                ContinentStyle::Code => record.continent.code.or(record.continent.names.english),
            };
            let region = record
                .subdivisions
                .first()
                .and_then(|s| s.iso_code.or(s.names.english));
            let location = Location::from_qualifiers([
                continent.unwrap_or(""),
                record.country.iso_code.unwrap_or(""),
                region.unwrap_or(""),
                record.city.names.english.unwrap_or(""),
            ]);
            let val = if location.0.iter().all(Qualifier::is_any) {
                NONE
            } else {
                count += 1;
                self.intern(location, Source::MmdbCity)
            };
            records.insert(offset, val);
            Ok(val)
        })?;
        self.stats.mmdb_city = count;
        Ok(tables)
    }

    /// Reads an ASN database into flat tables of indexes into `self.isps`.
    fn load_asn(&mut self, path: &Path) -> Result<(Steps<u32>, Steps<u128>), LocationDbError> {
        let reader = open_mmdb(path)?;
        let db_type = &reader.metadata().database_type;
        if db_type.contains("City") || db_type.contains("Country") {
            return Err(mmdb_err(
                path,
                format!("is a {db_type} database, not an ASN one"),
            ));
        }
        let mut records: HashMap<usize, u32> = HashMap::new();
        let mut by_name: HashMap<Qualifier, u32> = HashMap::new();
        let mut count = 0;
        let isps = &mut self.isps;
        let tables = walk(&reader, path, |lookup| {
            let offset = lookup.offset().expect("networks with data only");
            if let Some(&val) = records.get(&offset) {
                count += usize::from(val != NONE);
                return Ok(val);
            }
            let record: Option<geoip2::Asn<'_>> = lookup.decode()?;
            let name = record.and_then(|r| {
                match (r.autonomous_system_organization, r.autonomous_system_number) {
                    (Some(org), _) if !org.trim().is_empty() => Some(Cow::Borrowed(org)),
                    (_, Some(n)) => Some(Cow::Owned(format!("AS{n}"))),
                    _ => None,
                }
            });
            let isp = name
                .map(|n| Location::from_qualifiers(["", "", "", "", n.as_ref()]).0[ISP].clone());
            let val = match isp {
                Some(q @ Qualifier::Is(_)) => {
                    count += 1;
                    let next = isps.len() as u32;
                    *by_name.entry(q).or_insert_with_key(|q| {
                        isps.push(q.clone());
                        next
                    })
                }
                _ => NONE,
            };
            records.insert(offset, val);
            Ok(val)
        })?;
        self.stats.mmdb_asn = count;
        Ok(tables)
    }
}

fn open_mmdb(path: &Path) -> Result<Reader<Vec<u8>>, LocationDbError> {
    let bytes = std::fs::read(path).map_err(|source| LocationDbError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    Reader::from_source(bytes).map_err(|e| mmdb_err(path, format!("not a MaxMind database: {e}")))
}

fn mmdb_err(path: &Path, reason: String) -> LocationDbError {
    LocationDbError::Mmdb {
        file: path.to_path_buf(),
        reason,
    }
}

/// Walks every network with data (IPv4 aliases inside IPv6 skipped) and flattens the values
/// `value` gives them.
fn walk<'de>(
    reader: &'de Reader<Vec<u8>>,
    path: &Path,
    mut value: impl FnMut(
        &maxminddb::LookupResult<'de, Vec<u8>>,
    ) -> Result<u32, maxminddb::MaxMindDbError>,
) -> Result<(Steps<u32>, Steps<u128>), LocationDbError> {
    let bad = |e: maxminddb::MaxMindDbError| mmdb_err(path, e.to_string());
    let mut v4: Vec<(u32, u32, u32)> = Vec::new();
    let mut v6: Vec<(u128, u128, u32)> = Vec::new();
    for lookup in reader.networks(WithinOptions::default()).map_err(bad)? {
        let lookup = lookup.map_err(bad)?;
        let val = value(&lookup).map_err(bad)?;
        if val == NONE {
            continue;
        }
        let net = lookup.network().map_err(bad)?;
        let prefix = u32::from(net.prefix());
        match net.network() {
            IpAddr::V4(first) => {
                let first = u32::from(first);
                let last = first | u32::MAX.checked_shr(prefix).unwrap_or(0);
                v4.push((first, last, val));
            }
            IpAddr::V6(first) => {
                let first = u128::from(first);
                let last = first | u128::MAX.checked_shr(prefix).unwrap_or(0);
                // Mapped IPv4 is looked up in the IPv4 table (and is an alias anyway).
                if Ipv6Addr::from(first).to_ipv4_mapped().is_some()
                    && Ipv6Addr::from(last).to_ipv4_mapped().is_some()
                {
                    continue;
                }
                v6.push((first, last, val));
            }
        }
    }
    Ok((disjoint_table(v4), disjoint_table(v6)))
}

/// Flattens disjoint ranges (the leaves of a search tree).
fn disjoint_table<K: Key>(mut ranges: Vec<(K, K, u32)>) -> Steps<K> {
    ranges.sort_unstable_by_key(|r| r.0);
    let mut table = Steps::with_capacity(ranges.len() * 2);
    for (from, to, val) in ranges {
        table.push(from, val);
        if to != K::MAX {
            table.push(to.succ(), NONE);
        }
    }
    table
}

// ---- CSV fields ----

/// One field: its text (unquoted) and its byte span in the line (quotes included).
#[derive(Default)]
struct Field<'a> {
    text: Cow<'a, str>,
    span: (usize, usize),
}

/// Splits `line` at commas outside double quotes into `out`; returns how many fields.
fn split_fields<'a>(line: &'a str, out: &mut [Field<'a>; MAX_FIELDS]) -> Result<usize, String> {
    let bytes = line.as_bytes();
    let mut n = 0;
    let mut pos = 0;
    loop {
        if n == MAX_FIELDS {
            return Err(format!("more than {MAX_FIELDS} fields; expected {FORMAT}"));
        }
        while pos < bytes.len() && (bytes[pos] == b' ' || bytes[pos] == b'\t') {
            pos += 1;
        }
        let start = pos;
        let (text, end) = if bytes.get(pos) == Some(&b'"') {
            let mut owned: Option<String> = None;
            let mut seg = pos + 1;
            let mut i = pos + 1;
            loop {
                match bytes.get(i) {
                    None => return Err(format!("field {}: unterminated quote", n + 1)),
                    Some(b'"') if bytes.get(i + 1) == Some(&b'"') => {
                        owned
                            .get_or_insert_with(String::new)
                            .push_str(&line[seg..=i]);
                        i += 2;
                        seg = i;
                    }
                    Some(b'"') => break,
                    Some(_) => i += 1,
                }
            }
            let text = match owned {
                Some(mut s) => {
                    s.push_str(&line[seg..i]);
                    Cow::Owned(s)
                }
                None => Cow::Borrowed(&line[pos + 1..i]),
            };
            pos = i + 1;
            let end = pos;
            while pos < bytes.len() && (bytes[pos] == b' ' || bytes[pos] == b'\t') {
                pos += 1;
            }
            if pos < bytes.len() && bytes[pos] != b',' {
                return Err(format!("field {}: text after the closing quote", n + 1));
            }
            (text, end)
        } else {
            let end = bytes[pos..]
                .iter()
                .position(|&b| b == b',')
                .map_or(bytes.len(), |i| pos + i);
            pos = end;
            (Cow::Borrowed(line[start..end].trim_end()), end)
        };
        out[n] = Field {
            text,
            span: (start, end),
        };
        n += 1;
        if pos >= bytes.len() {
            return Ok(n);
        }
        pos += 1; // the comma
    }
}

/// A dotted-quad IPv4, an IPv6 address, or a decimal 32-bit number (IPv4).
fn parse_addr(s: &str) -> Result<IpAddr, String> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<u32>()
            .map(|n| IpAddr::V4(n.into()))
            .map_err(|_| format!("{s:?}: a numeric address is IPv4, at most 4294967295"));
    }
    s.parse::<IpAddr>()
        .map_err(|_| format!("{s:?}: not an IPv4 address, an IPv6 address or a 32-bit number"))
}

fn check_coordinates(longitude: &str, latitude: &str) -> Result<(), String> {
    match (longitude.is_empty(), latitude.is_empty()) {
        (true, true) => return Ok(()),
        (true, false) => return Err("latitude without longitude".into()),
        (false, true) => return Err("longitude without latitude".into()),
        (false, false) => {}
    }
    for (what, s, max) in [
        ("longitude", longitude, 180.0),
        ("latitude", latitude, 90.0),
    ] {
        match s.parse::<f64>() {
            Ok(v) if (-max..=max).contains(&v) => {}
            _ => return Err(format!("{what} {s:?}: not a number from -{max} to {max}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use mmdb_writer::{Value, Writer};

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn csv_db(text: &str) -> LocationDb {
        LocationDb::builder()
            .netscaler_csv_text("test.csv", text)
            .build()
            .unwrap()
    }

    fn csv_err(text: &str) -> LocationDbError {
        LocationDb::builder()
            .netscaler_csv_text("bad.csv", text)
            .build()
            .unwrap_err()
    }

    /// The location of `addr` as operators write it, or "-" when there is none.
    fn at(db: &LocationDb, addr: &str) -> String {
        db.lookup(ip(addr))
            .map_or_else(|| "-".to_owned(), |l| l.to_string())
    }

    fn source(db: &LocationDb, addr: &str) -> Option<Source> {
        db.lookup_with_source(ip(addr)).map(|(_, s)| s)
    }

    /// A directory removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            static N: AtomicUsize = AtomicUsize::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let dir =
                std::env::temp_dir().join(format!("gslb-locdb-test-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
            let path = self.0.join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn csv_lines_of_every_shape() {
        // (line, address probed, location expected there)
        let table = [
            (
                "1.0.0.0,1.0.0.255,Asia,IN,KA,Bangalore,ISP1,Org1",
                "1.0.0.7",
                "asia.in.ka.bangalore.isp1.org1",
            ),
            ("16777472,16777727,Asia,JP", "1.0.1.200", "asia.jp"),
            ("2.0.0.0,33554687,Europe,FR", "2.0.0.255", "europe.fr"),
            (
                "2001:db8::,2001:db8::ffff,Europe,DE,*,Berlin",
                "2001:db8::1234",
                "europe.de.*.berlin",
            ),
            (
                r#""3.0.0.0","3.0.0.255","Europe","UK","ENG","St. Albans","Big ISP, Ltd","""#,
                "3.0.0.1",
                r#"europe.uk.eng."st. albans"."big isp, ltd""#,
            ),
            (
                "  4.0.0.0 , 4.0.0.255 , Africa , ZMB  ",
                "4.0.0.9",
                "africa.zmb",
            ),
            (
                "5.0.0.0,5.0.0.255,NA,US,CA,San Jose,,,-121.89,37.33",
                "5.0.0.1",
                "na.us.ca.\"san jose\"",
            ),
            ("6.0.0.0,6.0.0.255,NA,US,,,,,,", "6.0.0.1", "na.us"),
            ("7.0.0.0,7.0.0.255,,,,,ISP7\r", "7.0.0.1", "*.*.*.*.isp7"),
            ("8.0.0.0,8.0.0.0,EUROPE,Gb", "8.0.0.0", "europe.gb"),
        ];
        for (line, addr, want) in table {
            let db = csv_db(line);
            assert_eq!(db.len(), 1, "{line}");
            assert_eq!(at(&db, addr), want, "{line}");
            assert_eq!(source(&db, addr), Some(Source::Csv), "{line}");
        }
        // A doubled quote inside a quoted field is one quote.
        let db = csv_db(r#"3.0.0.0,3.0.0.255,Europe,UK,,,"The ""Big"" ISP, Ltd","""#);
        assert_eq!(
            db.lookup(ip("3.0.0.1")).unwrap().0[4],
            Qualifier::Is(r#"the "big" isp, ltd"#.into())
        );
    }

    #[test]
    fn comments_headers_and_blank_lines_are_skipped() {
        let text = "\u{feff}NSGEO1.0\n\
                    # ip_from,ip_to,continent,country,region,city,isp,org,longitude,latitude\n\
                    \n\
                    nsgeo-meta something\n\
                    1.0.0.0,1.0.0.255,Asia,IN\n\
                    \t  \r\n\
                    \x20 # indented comment\n\
                    1.0.1.0,1.0.1.255,Asia,CN\n";
        let db = csv_db(text);
        assert_eq!(db.len(), 2);
        assert_eq!(db.stats().csv, 2);
        assert_eq!(db.stats().locations, 2);
        for (addr, want) in [
            ("1.0.0.0", "asia.in"),
            ("1.0.1.255", "asia.cn"),
            ("1.0.2.0", "-"),
        ] {
            assert_eq!(at(&db, addr), want, "{addr}");
        }
    }

    #[test]
    fn repeated_locations_are_stored_once() {
        let text = "1.0.0.0,1.0.0.255,Asia,IN\n\
                    1.0.2.0,1.0.2.255,Asia,IN\n\
                    1.0.4.0,1.0.4.255,asia,in,,\n\
                    1.0.6.0,1.0.6.255,\"Asia\",IN\n";
        let db = csv_db(text);
        assert_eq!(db.stats().locations, 1);
        assert_eq!(db.len(), 4);
        assert_eq!(at(&db, "1.0.6.1"), "asia.in");
        assert_eq!(at(&db, "1.0.5.1"), "-");
    }

    #[test]
    fn malformed_lines_name_file_line_and_reason() {
        let ok = "# header\n1.0.0.0,1.0.0.255,Asia,IN\n";
        // (bad third line, reason fragment)
        let table = [
            (
                "1.0.1.0,1.0.1.255",
                "2 fields; expected ip_from,ip_to,continent",
            ),
            ("1.0.1.0,1.0.1.255,A,B,C,D,E,F,1.0", "9 fields"),
            ("1.0.1.0,1.0.1.255,A,B,C,D,E,F,1,2,3", "more than 10 fields"),
            (
                "1.0.1,1.0.1.255,Asia,IN",
                "ip_from \"1.0.1\": not an IPv4 address",
            ),
            (
                "1.0.1.0,1.0.1.256,Asia,IN",
                "ip_to \"1.0.1.256\": not an IPv4 address",
            ),
            (",1.0.1.255,Asia,IN", "ip_from \"\": not an IPv4 address"),
            (
                "1.0.1.0,4294967296,Asia,IN",
                "ip_to \"4294967296\": a numeric address is IPv4",
            ),
            ("1.0.1.0,2001:db8::1,Asia,IN", "different families"),
            ("::ffff:1.0.1.0,2001:db8::1,Asia,IN", "different families"),
            (
                "1.0.1.255,1.0.1.0,Asia,IN",
                "ip_from 1.0.1.255 is after ip_to 1.0.1.0",
            ),
            ("2001:db8::2,2001:db8::1,Asia,IN", "is after ip_to"),
            ("1.0.1.0,1.0.1.255,\"Asia,IN", "field 3: unterminated quote"),
            (
                "1.0.1.0,1.0.1.255,\"Asia\"x,IN",
                "field 3: text after the closing quote",
            ),
            (
                "1.0.1.0,1.0.1.255,Asia,IN,,,,,east,10",
                "longitude \"east\": not a number from -180 to 180",
            ),
            (
                "1.0.1.0,1.0.1.255,Asia,IN,,,,,10,91",
                "latitude \"91\": not a number from -90 to 90",
            ),
            (
                "1.0.1.0,1.0.1.255,Asia,IN,,,,,10,",
                "longitude without latitude",
            ),
            (
                "1.0.1.0,1.0.1.255,Asia,IN,,,,,,10",
                "latitude without longitude",
            ),
            ("1.0.1.0,1.0.1.255,*,,\"\"", "no qualifier"),
        ];
        for (bad, reason) in table {
            let text = format!("{ok}{bad}\n1.0.2.0,1.0.2.255,Asia,IN\n");
            match csv_err(&text) {
                LocationDbError::Line {
                    file,
                    line,
                    reason: got,
                } => {
                    assert_eq!(file, Path::new("bad.csv"), "{bad}");
                    assert_eq!(line, 3, "{bad}");
                    assert!(got.contains(reason), "{bad}: {got:?} lacks {reason:?}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
        // The whole message, as an operator reads it.
        let e = csv_err("1.0.0.0,1.0.0.255,Asia,IN\n1.0.1.0,nope,Asia,IN\n");
        assert_eq!(
            e.to_string(),
            "bad.csv:2: ip_to \"nope\": not an IPv4 address, an IPv6 address or a 32-bit number"
        );
    }

    #[test]
    fn file_errors_not_utf8_and_missing() {
        let dir = TempDir::new();
        let path = dir.write(
            "latin1.csv",
            b"1.0.0.0,1.0.0.255,Europe,FR\n1.0.1.0,1.0.1.255,Europe,FR,Orl\xe9ans\n",
        );
        match LocationDb::builder()
            .netscaler_csv(&path)
            .build()
            .unwrap_err()
        {
            LocationDbError::Line { file, line, reason } => {
                assert_eq!((file, line), (path.clone(), 2));
                assert!(reason.contains("not UTF-8 (byte 32"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let missing = dir.0.join("missing.csv");
        match LocationDb::builder()
            .netscaler_csv(&missing)
            .build()
            .unwrap_err()
        {
            LocationDbError::Io { file, source } => {
                assert_eq!(file, missing);
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("{other:?}"),
        }
        // A readable file loads like text.
        let path = dir.write("ok.csv", b"1.0.0.0,1.0.0.255,Europe,FR\n");
        let db = LocationDb::builder().netscaler_csv(&path).build().unwrap();
        assert_eq!(at(&db, "1.0.0.1"), "europe.fr");
    }

    #[test]
    fn nested_ranges_the_narrowest_wins_at_every_edge() {
        let text = "\
10.0.0.0,10.255.255.255,Europe,GB
10.1.0.0,10.1.255.255,Europe,GB,ENG
10.1.2.0,10.1.2.255,Europe,GB,ENG,London
10.1.255.0,10.1.255.255,Europe,GB,ENG,Leeds
10.0.0.0,10.0.0.255,Europe,GB,SCT
10.1.2.128,10.1.2.128,Europe,GB,ENG,London,Host
";
        let db = csv_db(text);
        let table = [
            ("9.255.255.255", "-"),
            ("10.0.0.0", "europe.gb.sct"),
            ("10.0.0.255", "europe.gb.sct"),
            ("10.0.1.0", "europe.gb"),
            ("10.0.255.255", "europe.gb"),
            ("10.1.0.0", "europe.gb.eng"),
            ("10.1.1.255", "europe.gb.eng"),
            ("10.1.2.0", "europe.gb.eng.london"),
            ("10.1.2.127", "europe.gb.eng.london"),
            ("10.1.2.128", "europe.gb.eng.london.host"),
            ("10.1.2.129", "europe.gb.eng.london"),
            ("10.1.2.255", "europe.gb.eng.london"),
            ("10.1.3.0", "europe.gb.eng"),
            ("10.1.254.255", "europe.gb.eng"),
            ("10.1.255.0", "europe.gb.eng.leeds"),
            ("10.1.255.255", "europe.gb.eng.leeds"),
            ("10.2.0.0", "europe.gb"),
            ("10.255.255.255", "europe.gb"),
            ("11.0.0.0", "-"),
        ];
        for (addr, want) in table {
            assert_eq!(at(&db, addr), want, "{addr}");
        }
    }

    #[test]
    fn nesting_at_the_ends_of_the_address_space() {
        let text = "\
0.0.0.0,255.255.255.255,World
255.255.255.0,255.255.255.255,World,Top
0.0.0.0,0.0.0.0,World,Zero
::,ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff,World6
ffff::,ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff,World6,Top
";
        let db = csv_db(text);
        let table = [
            ("0.0.0.0", "world.zero"),
            ("0.0.0.1", "world"),
            ("255.255.254.255", "world"),
            ("255.255.255.0", "world.top"),
            ("255.255.255.255", "world.top"),
            ("::", "world6"),
            ("fffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "world6"),
            ("ffff::", "world6.top"),
            ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "world6.top"),
            // A mapped address is IPv4: the IPv6 catch-all does not apply.
            ("::ffff:1.2.3.4", "world"),
        ];
        for (addr, want) in table {
            assert_eq!(at(&db, addr), want, "{addr}");
        }
    }

    #[test]
    fn partial_overlaps_and_duplicates_are_rejected_naming_both_lines() {
        // (text, line, other line, reason fragment)
        let table = [
            (
                "10.0.0.0,10.0.0.255,A\n# c\n10.0.0.128,10.0.1.127,B\n",
                3,
                1,
                "range 10.0.0.128-10.0.1.127 partially overlaps range 10.0.0.0-10.0.0.255 on line 1",
            ),
            // The later line starts first: still reported at the later line.
            (
                "10.0.0.128,10.0.1.127,B\n10.0.0.0,10.0.0.255,A\n",
                2,
                1,
                "partially overlaps",
            ),
            // Overlapping a nested range inside a wider one.
            (
                "10.0.0.0,10.255.255.255,A\n10.1.0.0,10.1.0.255,B\n10.1.0.255,10.1.1.0,C\n",
                3,
                2,
                "partially overlaps range 10.1.0.0-10.1.0.255",
            ),
            (
                "10.0.0.0,10.0.0.255,A\n10.0.0.0,10.0.0.255,B\n",
                2,
                1,
                "range 10.0.0.0-10.0.0.255 is also given on line 1",
            ),
            (
                "2001:db8::,2001:db8::ff,A\n2001:db8::80,2001:db8::1ff,B\n",
                2,
                1,
                "2001:db8::80-2001:db8::1ff partially",
            ),
        ];
        for (text, line, other_line, reason) in table {
            match csv_err(text) {
                LocationDbError::Overlap {
                    file,
                    line: l,
                    other_file,
                    other_line: o,
                    reason: r,
                } => {
                    assert_eq!((file.as_path(), l), (Path::new("bad.csv"), line), "{text}");
                    assert_eq!(
                        (other_file.as_path(), o),
                        (Path::new("bad.csv"), other_line),
                        "{text}"
                    );
                    assert!(r.contains(reason), "{text}: {r:?} lacks {reason:?}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        // Across files: both named.
        let e = LocationDb::builder()
            .netscaler_csv_text("v4.csv", "10.0.0.0,10.0.0.255,A\n")
            .netscaler_csv_text("more.csv", "# x\n10.0.0.200,10.0.1.0,B\n")
            .build()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "more.csv:2: range 10.0.0.200-10.0.1.0 partially overlaps range 10.0.0.0-10.0.0.255 on \
             v4.csv:1; ranges may nest (the narrower one wins) but not partially overlap"
        );
        // Nesting across files is fine; adjacent ranges do not overlap.
        let db = LocationDb::builder()
            .netscaler_csv_text("v4.csv", "10.0.0.0,10.0.0.255,A\n10.0.1.0,10.0.1.255,C\n")
            .netscaler_csv_text("more.csv", "10.0.0.16,10.0.0.31,B\n")
            .build()
            .unwrap();
        let probes = [
            ("10.0.0.15", "a"),
            ("10.0.0.16", "b"),
            ("10.0.0.31", "b"),
            ("10.0.0.32", "a"),
            ("10.0.1.0", "c"),
        ];
        for (addr, want) in probes {
            assert_eq!(at(&db, addr), want, "{addr}");
        }
    }

    #[test]
    fn custom_entries_win_over_the_files() {
        let loc = |s: &str| Location::parse(s).unwrap();
        let csv = "10.0.0.0,10.0.255.255,Europe,GB\n10.0.1.0,10.0.1.255,Europe,GB,ENG,London\n";
        let db = LocationDb::builder()
            .netscaler_csv_text("geo.csv", csv)
            .custom([
                // Inside the CSV's wide range.
                (ip("10.0.0.16"), ip("10.0.0.31"), loc("Lab.Rack1")),
                // Wider than a CSV range: wins over all of it.
                (ip("10.0.1.0"), ip("10.0.2.255"), loc("Lab.Rack2")),
                // Nested custom entries: the narrowest wins among them too.
                (ip("10.0.1.100"), ip("10.0.1.100"), loc("Lab.Rack2.Host")),
                // Where no file has an answer.
                (ip("2001:db8::"), ip("2001:db8::ff"), loc("Lab.V6")),
            ])
            .build()
            .unwrap();
        let table = [
            ("10.0.0.15", "europe.gb", Some(Source::Csv)),
            ("10.0.0.16", "lab.rack1", Some(Source::Custom)),
            ("10.0.0.31", "lab.rack1", Some(Source::Custom)),
            ("10.0.0.32", "europe.gb", Some(Source::Csv)),
            ("10.0.0.255", "europe.gb", Some(Source::Csv)),
            ("10.0.1.0", "lab.rack2", Some(Source::Custom)),
            ("10.0.1.99", "lab.rack2", Some(Source::Custom)),
            ("10.0.1.100", "lab.rack2.host", Some(Source::Custom)),
            ("10.0.1.101", "lab.rack2", Some(Source::Custom)),
            ("10.0.2.255", "lab.rack2", Some(Source::Custom)),
            ("10.0.3.0", "europe.gb", Some(Source::Csv)),
            ("2001:db8::80", "lab.v6", Some(Source::Custom)),
            ("2001:db8::100", "-", None),
        ];
        for (addr, want, src) in table {
            assert_eq!(at(&db, addr), want, "{addr}");
            assert_eq!(source(&db, addr), src, "{addr}");
        }
        assert_eq!((db.stats().custom, db.stats().csv, db.len()), (4, 2, 6));
    }

    #[test]
    fn custom_entry_errors_name_their_line() {
        let loc = Location::parse("Lab").unwrap();
        let table = [
            (
                ip("10.0.0.9"),
                ip("10.0.0.1"),
                loc.clone(),
                "ip_from 10.0.0.9 is after ip_to 10.0.0.1",
            ),
            (
                ip("10.0.0.1"),
                ip("2001:db8::1"),
                loc.clone(),
                "different families",
            ),
            (
                ip("10.0.0.1"),
                ip("10.0.0.9"),
                Location::default(),
                "no qualifier",
            ),
        ];
        for (from, to, location, reason) in table {
            let ok = (ip("192.0.2.0"), ip("192.0.2.255"), loc.clone());
            // Positional: `<custom>:2`.
            let e = LocationDb::builder()
                .custom([ok.clone(), (from, to, location.clone())])
                .build();
            match e.unwrap_err() {
                LocationDbError::Line {
                    file,
                    line,
                    reason: r,
                } => {
                    assert_eq!((file.as_path(), line), (Path::new("<custom>"), 2));
                    assert!(r.contains(reason), "{r:?} lacks {reason:?}");
                }
                other => panic!("{other:?}"),
            }
            // With the configuration's own lines.
            let e = LocationDb::builder()
                .custom_at(
                    "gslb.toml",
                    [(40, ok.0, ok.1, ok.2), (41, from, to, location)],
                )
                .build()
                .unwrap_err();
            assert!(e.to_string().starts_with("gslb.toml:41: "), "{e}");
        }
        let e = LocationDb::builder()
            .custom_at(
                "gslb.toml",
                [
                    (7, ip("10.0.0.0"), ip("10.0.0.255"), loc.clone()),
                    (9, ip("10.0.0.128"), ip("10.0.1.0"), loc),
                ],
            )
            .build()
            .unwrap_err();
        assert!(
            matches!(
                &e,
                LocationDbError::Overlap {
                    line: 9,
                    other_line: 7,
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn ipv4_mapped_ipv6_is_ipv4() {
        let db = csv_db(
            "1.2.3.0,1.2.3.255,Asia,HK\n\
             ::ffff:5.6.7.0,::ffff:5.6.7.255,Asia,JP\n\
             ::,::ffff:ffff,Reserved\n",
        );
        let table = [
            ("1.2.3.4", "asia.hk"),
            ("::ffff:1.2.3.4", "asia.hk"),
            // A range written mapped is an IPv4 range.
            ("5.6.7.8", "asia.jp"),
            ("::ffff:5.6.7.8", "asia.jp"),
            ("::ffff:1.2.4.0", "-"),
            // IPv4-compatible (::a.b.c.d) is plain IPv6.
            ("::1.2.3.4", "reserved"),
        ];
        for (addr, want) in table {
            assert_eq!(at(&db, addr), want, "{addr}");
        }
    }

    #[test]
    fn flat_table_agrees_with_a_naive_narrowest_match() {
        // Random laminar families of ranges in a small space, against a brute-force oracle.
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut rand = move |n: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % u64::from(n)) as u32
        };
        let mut checked = 0;
        for round in 0..200 {
            let mut ranges: Vec<(u32, u32, u32)> = Vec::new();
            let mut todo = vec![(0u32, 999u32)];
            while let Some((lo, hi)) = todo.pop() {
                if ranges.len() > 40 || hi - lo < 2 {
                    continue;
                }
                let a = lo + rand(hi - lo + 1);
                let b = a + rand(hi - a + 1);
                if (a, b) == (lo, hi) && ranges.iter().any(|r| (r.0, r.1) == (a, b)) {
                    continue;
                }
                ranges.push((a, b, rand(5)));
                // Children nested in [a, b], and siblings beside it.
                todo.extend([(a, b), (lo, a.saturating_sub(1).max(lo)), (b + 1, hi)]);
                todo.retain(|&(l, h)| l < h && !(l == a && h == b && rand(2) == 0));
            }
            // Drop exact duplicates (rejected by design, tested elsewhere).
            ranges.sort();
            ranges.dedup_by_key(|r| (r.0, r.1));
            let text: String = ranges
                .iter()
                .map(|&(a, b, q)| format!("{a},{b},Q{q}\n"))
                .collect();
            let db = match LocationDb::builder()
                .netscaler_csv_text("r.csv", text.as_str())
                .build()
            {
                Ok(db) => db,
                Err(e) => panic!("round {round}: {e}\n{text}"),
            };
            checked += ranges.len();
            for addr in 0..1010u32 {
                let want = ranges
                    .iter()
                    .filter(|r| r.0 <= addr && addr <= r.1)
                    .min_by_key(|r| r.1 - r.0)
                    .map_or("-".to_owned(), |r| format!("q{}", r.2));
                let got = at(&db, &Ipv4Addr::from(addr).to_string());
                assert_eq!(got, want, "round {round}, address {addr}\n{text}");
            }
        }
        assert!(checked > 2000, "only {checked} ranges generated");
    }

    #[test]
    fn search_tree_agrees_with_a_binary_search() {
        // Sizes around the block size and its powers, keys spaced 3 apart from 10.
        for n in [0, 1, 2, 15, 16, 17, 255, 256, 257, 4095, 4096, 4097, 70_000] {
            let mut steps = Steps::<u32>::with_capacity(n);
            for i in 0..n as u32 {
                steps.push(10 + 3 * i, i % 2);
            }
            let t = steps.clone().finish();
            assert_eq!(t.len(), n, "{n}");
            for k in (0..12 + 3 * n as u32).chain([u32::MAX - 1, u32::MAX]) {
                let want = match steps.starts.partition_point(|&s| s <= k) {
                    0 => NONE,
                    i => steps.vals[i - 1],
                };
                assert_eq!(t.get(k), want, "n {n}, key {k}");
            }
            let mut t6 = Steps::<u128>::with_capacity(n);
            for i in 0..n as u128 {
                t6.push(i << 100, (i % 2) as u32);
            }
            let t6 = t6.finish();
            for i in 0..n as u128 {
                assert_eq!(t6.get((i << 100) + 1), (i % 2) as u32, "n {n}, i {i}");
            }
            assert_eq!(
                t6.get(u128::MAX),
                if n == 0 { NONE } else { ((n - 1) % 2) as u32 }
            );
        }
    }

    // ---- MaxMind databases, built by the test ----

    fn names(en: &str) -> Value {
        Value::map([(
            "names",
            Value::map([("en", Value::from(en)), ("de", Value::from("x"))]),
        )])
    }

    fn city_record(
        continent: (&str, &str),
        country: &str,
        region: Option<&str>,
        city: &str,
    ) -> Value {
        let mut m = vec![
            (
                "continent",
                Value::map([
                    ("code", Value::from(continent.0)),
                    ("names", Value::map([("en", Value::from(continent.1))])),
                ]),
            ),
            ("country", Value::map([("iso_code", Value::from(country))])),
            ("city", names(city)),
            (
                "location",
                Value::map([
                    ("latitude", Value::from(51.5)),
                    ("longitude", Value::from(-0.1)),
                ]),
            ),
        ];
        if let Some(region) = region {
            m.push((
                "subdivisions",
                Value::array([
                    Value::map([("iso_code", Value::from(region))]),
                    Value::map([("iso_code", Value::from("XX"))]),
                ]),
            ));
        }
        Value::map(m)
    }

    fn write_mmdb(dir: &TempDir, name: &str, db_type: &str, records: &[(&str, Value)]) -> PathBuf {
        let mut w = Writer::new(db_type);
        for (net, value) in records {
            w.insert_value(net.parse::<ipnet::IpNet>().unwrap(), value.clone())
                .unwrap();
        }
        dir.write(name, &w.to_bytes().unwrap())
    }

    fn mmdb_fixture(dir: &TempDir) -> (PathBuf, PathBuf) {
        let city = write_mmdb(
            dir,
            "city.mmdb",
            "GeoLite2-City",
            &[
                (
                    "81.2.69.0/24",
                    city_record(("EU", "Europe"), "GB", Some("ENG"), "London"),
                ),
                (
                    "81.2.70.0/24",
                    city_record(("EU", "Europe"), "GB", Some("ENG"), "London"),
                ),
                (
                    "10.0.0.0/8",
                    city_record(("EU", "Europe"), "DE", None, "Berlin"),
                ),
                (
                    "2001:db8::/32",
                    city_record(("AS", "Asia"), "JP", Some("13"), "Tokyo"),
                ),
                // No location at all (only where the block is registered): ignored.
                (
                    "192.0.2.0/24",
                    Value::map([(
                        "registered_country",
                        Value::map([("iso_code", Value::from("US"))]),
                    )]),
                ),
            ],
        );
        let asn = write_mmdb(
            dir,
            "asn.mmdb",
            "GeoLite2-ASN",
            &[
                (
                    "81.2.68.0/22",
                    Value::map([
                        ("autonomous_system_number", Value::from(20_712_u32)),
                        (
                            "autonomous_system_organization",
                            Value::from("Andrews & Arnold Ltd"),
                        ),
                    ]),
                ),
                (
                    "10.0.0.0/8",
                    Value::map([("autonomous_system_organization", Value::from("Private"))]),
                ),
                (
                    "198.51.100.0/24",
                    Value::map([("autonomous_system_organization", Value::from("Only ASN"))]),
                ),
                (
                    "2001:db8::/48",
                    Value::map([("autonomous_system_number", Value::from(64_512_u32))]),
                ),
            ],
        );
        (city, asn)
    }

    #[test]
    fn mmdb_city_and_asn_below_custom_and_csv() {
        let dir = TempDir::new();
        let (city, asn) = mmdb_fixture(&dir);
        let db = LocationDb::builder()
            .netscaler_csv_text(
                "geo.csv",
                "10.1.0.0,10.1.255.255,Europe,DE,BE,Berlin,CsvNet\n",
            )
            .custom([(
                ip("10.2.0.0"),
                ip("10.2.0.255"),
                Location::parse("Lab").unwrap(),
            )])
            .mmdb_city(&city)
            .mmdb_asn(&asn)
            .build()
            .unwrap();
        let table = [
            (
                "81.2.69.160",
                "europe.gb.eng.london.\"andrews & arnold ltd\"",
                Some(Source::MmdbCity),
            ),
            (
                "81.2.70.1",
                "europe.gb.eng.london.\"andrews & arnold ltd\"",
                Some(Source::MmdbCity),
            ),
            (
                "::ffff:81.2.69.160",
                "europe.gb.eng.london.\"andrews & arnold ltd\"",
                Some(Source::MmdbCity),
            ),
            // In the ASN database only.
            (
                "81.2.68.1",
                "*.*.*.*.\"andrews & arnold ltd\"",
                Some(Source::MmdbAsn),
            ),
            (
                "198.51.100.7",
                "*.*.*.*.\"only asn\"",
                Some(Source::MmdbAsn),
            ),
            // City database, with and without an ISP.
            (
                "10.0.0.1",
                "europe.de.*.berlin.private",
                Some(Source::MmdbCity),
            ),
            // CSV and custom answers are kept as written: the ASN never touches them.
            ("10.1.0.1", "europe.de.be.berlin.csvnet", Some(Source::Csv)),
            ("10.2.0.1", "lab", Some(Source::Custom)),
            (
                "10.3.0.1",
                "europe.de.*.berlin.private",
                Some(Source::MmdbCity),
            ),
            (
                "2001:db8::1",
                "asia.jp.13.tokyo.as64512",
                Some(Source::MmdbCity),
            ),
            ("2001:db8:1::1", "asia.jp.13.tokyo", Some(Source::MmdbCity)),
            ("192.0.2.1", "-", None),
            ("8.8.8.8", "-", None),
            ("2001:db9::1", "-", None),
        ];
        for (addr, want, src) in table {
            assert_eq!(at(&db, addr), want, "{addr}");
            assert_eq!(source(&db, addr), src, "{addr}");
        }
        let s = db.stats();
        assert_eq!(
            (s.custom, s.csv, s.mmdb_city, s.mmdb_asn),
            (1, 1, 4, 4),
            "{s:?}"
        );
        // A city answer without an ISP is borrowed, not assembled.
        let plain = LocationDb::builder().mmdb_city(&city).build().unwrap();
        assert!(matches!(
            plain.lookup(ip("81.2.69.1")),
            Some(Cow::Borrowed(_))
        ));
        assert_eq!(at(&plain, "81.2.69.1"), "europe.gb.eng.london");
        assert_eq!(at(&plain, "81.2.68.1"), "-");
        // Continent codes instead of names.
        let codes = LocationDb::builder()
            .mmdb_city(&city)
            .continent_style(ContinentStyle::Code)
            .build()
            .unwrap();
        assert_eq!(at(&codes, "81.2.69.1"), "eu.gb.eng.london");
        assert_eq!(at(&codes, "2001:db8::1"), "as.jp.13.tokyo");
    }

    #[test]
    fn mmdb_errors() {
        let dir = TempDir::new();
        let (city, asn) = mmdb_fixture(&dir);
        let junk = dir.write("junk.mmdb", b"not a database at all");
        let missing = dir.0.join("missing.mmdb");
        let table: [(LocationDbBuilder, &Path, &str); 4] = [
            (
                LocationDb::builder().mmdb_city(&junk),
                &junk,
                "not a MaxMind database",
            ),
            (
                LocationDb::builder().mmdb_asn(&junk),
                &junk,
                "not a MaxMind database",
            ),
            (
                LocationDb::builder().mmdb_city(&asn),
                &asn,
                "is a GeoLite2-ASN database, not a City",
            ),
            (
                LocationDb::builder().mmdb_asn(&city),
                &city,
                "is a GeoLite2-City database, not an ASN",
            ),
        ];
        for (builder, path, reason) in table {
            match builder.build().unwrap_err() {
                LocationDbError::Mmdb { file, reason: r } => {
                    assert_eq!(file, path);
                    assert!(r.contains(reason), "{r:?} lacks {reason:?}");
                }
                other => panic!("{other:?}"),
            }
        }
        let e = LocationDb::builder()
            .mmdb_city(&missing)
            .build()
            .unwrap_err();
        assert!(
            matches!(e, LocationDbError::Io { ref file, .. } if *file == missing),
            "{e:?}"
        );
    }

    #[test]
    fn empty_database_answers_nothing() {
        let db = LocationDb::empty();
        assert!(db.is_empty());
        assert_eq!(at(&db, "1.2.3.4"), "-");
        assert_eq!(at(&db, "2001:db8::1"), "-");
        let db = LocationDb::builder()
            .netscaler_csv_text("e.csv", "# nothing\n")
            .build()
            .unwrap();
        assert!(db.is_empty());
        assert_eq!(format!("{db:?}").lines().count(), 1);
    }

    #[test]
    fn a_configuration_describes_the_database() {
        let dir = std::env::temp_dir().join(format!("gslb-locdb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("proximity.csv");
        std::fs::write(&csv, "192.0.2.0,192.0.2.255,Europe,UK,London,*,*,*\n").unwrap();
        let text = format!(
            "[server]\nlisten = [\"192.0.2.53\"]\n[locations]\nnetscaler = [{csv:?}]\n\
             [[location]]\nfrom = \"192.0.2.128\"\nto = \"192.0.2.255\"\nlocation = \"Asia.HK\"\n"
        );
        let config = crate::config::Config::parse(&text, Path::new("gslb.toml")).unwrap();
        let db = LocationDb::from_sources(&config.locations, Path::new("gslb.toml")).unwrap();
        let at = |ip: &str| db.lookup(ip.parse().unwrap()).map(|l| l.to_string());
        // The custom entry wins over the file where they overlap.
        assert_eq!(at("192.0.2.1").as_deref(), Some("europe.uk.london"));
        assert_eq!(at("192.0.2.200").as_deref(), Some("asia.hk"));
        assert_eq!(at("198.51.100.1"), None);
        // A file that is not there is named in the error.
        let missing = text.replace("proximity.csv", "missing.csv");
        let config = crate::config::Config::parse(&missing, Path::new("gslb.toml")).unwrap();
        let error =
            LocationDb::from_sources(&config.locations, Path::new("gslb.toml")).unwrap_err();
        assert!(error.to_string().contains("missing.csv"), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
