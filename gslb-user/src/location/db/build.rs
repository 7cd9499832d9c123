//! Building a [`LocationDb`]: reading the sources, flattening each layer, merging the layers
//! by precedence.

use std::{
    borrow::Cow,
    collections::HashMap,
    net::IpAddr,
    path::{Path, PathBuf},
};

use super::{
    ContinentStyle, INDEX_MASK, LocationDb, LocationDbError, LocationDbStats, Source, Value, tag,
};
use crate::location::{
    Coordinates, Location, Qualifier, mmdb,
    netscaler::{self, FileFormat, NO_QUALIFIER, Sink},
    table::{self, Clash, Layer, NONE, Range, Steps, overlay},
};

/// Collects the sources of a [`LocationDb`]; [`build`](Self::build) reads them (blocking I/O:
/// call it off the async runtime, e.g. in `spawn_blocking`).
#[derive(Clone, Debug, Default)]
pub struct LocationDbBuilder {
    files: Vec<(FileSource, FileFormat)>,
    custom: Vec<(PathBuf, Vec<CustomEntry>)>,
    city: Option<PathBuf>,
    asn: Option<PathBuf>,
    continent: ContinentStyle,
}

/// A custom entry: `(line, from, to, location)`.
type CustomEntry = (usize, IpAddr, IpAddr, Location);

#[derive(Clone, Debug)]
enum FileSource {
    File(PathBuf),
    Text(PathBuf, String),
}

impl LocationDbBuilder {
    /// Adds a location file in `format`. Several files form one layer: their ranges may nest
    /// across files, but not partially overlap.
    pub fn file(mut self, path: impl Into<PathBuf>, format: FileFormat) -> Self {
        self.files.push((FileSource::File(path.into()), format));
        self
    }

    /// Adds location data in `format` already in memory; `name` stands for the file in errors.
    pub fn file_text(
        mut self,
        name: impl Into<PathBuf>,
        text: impl Into<String>,
        format: FileFormat,
    ) -> Self {
        self.files
            .push((FileSource::Text(name.into(), text.into()), format));
        self
    }

    /// Adds a location file in the `netscaler` format.
    pub fn netscaler_csv(self, path: impl Into<PathBuf>) -> Self {
        self.file(path, FileFormat::Netscaler)
    }

    /// Adds `netscaler`-format data already in memory; `name` stands for the file in errors.
    pub fn netscaler_csv_text(self, name: impl Into<PathBuf>, text: impl Into<String>) -> Self {
        self.file_text(name, text, FileFormat::Netscaler)
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

    /// Sets the MaxMind City (or Country) database, consulted below custom entries and files.
    pub fn mmdb_city(mut self, path: impl Into<PathBuf>) -> Self {
        self.city = Some(path.into());
        self
    }

    /// Sets the MaxMind ASN database, which supplies the ISP qualifier (see the module docs).
    pub fn mmdb_asn(mut self, path: impl Into<PathBuf>) -> Self {
        self.asn = Some(path.into());
        self
    }

    /// How the continents gslbd supplies are written: the City database's, and those derived
    /// from a location file's country (default: English names).
    pub fn continent_style(mut self, style: ContinentStyle) -> Self {
        self.continent = style;
        self
    }

    /// Reads every source and builds the database; the first error fails the whole build.
    pub fn build(self) -> Result<LocationDb, LocationDbError> {
        let mut b = Build::default();

        let mut files = Layer::default();
        for (source, format) in &self.files {
            let (name, bytes) = match source {
                FileSource::File(path) => {
                    let bytes = std::fs::read(path).map_err(|source| LocationDbError::Io {
                        file: path.clone(),
                        source,
                    })?;
                    (path, Cow::Owned(bytes))
                }
                FileSource::Text(name, text) => (name, Cow::Borrowed(text.as_bytes())),
            };
            let src = b.source(name);
            let mut sink = FileSink {
                build: &mut b,
                layer: &mut files,
                src,
            };
            let stats = netscaler::read(name, &bytes, *format, self.continent, &mut sink)?;
            b.stats.csv += stats.ranges;
            b.stats.skipped += stats.skipped;
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
                let location = b.location(location.clone());
                let val = b.value(location, None, Source::Custom);
                custom.push(range, val, src, *line);
            }
        }
        b.stats.custom = custom.len();

        let files = b.flatten(files)?;
        let custom = b.flatten(custom)?;
        let (mut v4, mut v6) = (overlay(custom.0, files.0), overlay(custom.1, files.1));

        if let Some(path) = &self.city {
            let (city4, city6, count) = mmdb::city(path, self.continent, |location, coords| {
                let location = b.location(location);
                b.value(location, coords, Source::MmdbCity)
            })?;
            b.stats.mmdb_city = count;
            v4 = overlay(v4, city4);
            v6 = overlay(v6, city6);
        }
        let (asn_v4, asn_v6) = match &self.asn {
            Some(path) => {
                let mut by_name: HashMap<Qualifier, u32> = HashMap::new();
                let isps = &mut b.isps;
                let (a4, a6, count) = mmdb::asn(path, |isp| {
                    let next = isps.len() as u32;
                    *by_name.entry(isp).or_insert_with_key(|q| {
                        isps.push(q.clone());
                        next
                    })
                })?;
                b.stats.mmdb_asn = count;
                (a4, a6)
            }
            None => Default::default(),
        };
        Ok(b.finish(v4, v6, asn_v4, asn_v6))
    }
}

/// The file name custom entries without a file are reported under.
const CUSTOM: &str = "<custom>";

// ---- building ----

#[derive(Default)]
struct Build {
    /// Distinct locations → their index (the final `Vec` is ordered by it).
    locations: HashMap<Location, u32>,
    values: Vec<Value>,
    /// Location index → its value without coordinates ([`NONE`]: none yet).
    plain: Vec<u32>,
    /// The last value made with coordinates, and its index.
    last: Option<(u32, Value)>,
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

    fn location(&mut self, location: Location) -> u32 {
        let next = self.locations.len() as u32;
        *self.locations.entry(location).or_insert(next)
    }

    /// The tagged table value of a location with coordinates. Values without coordinates are
    /// one per location; values with them are shared by consecutive calls for the same place
    /// (the neighbouring ranges of one city in a file), not looked up in a map: a file of a
    /// million ranges makes at most a million values, at no hashing cost.
    fn value(&mut self, location: u32, coordinates: Option<Coordinates>, source: Source) -> u32 {
        let value = Value {
            location,
            coordinates,
        };
        let index = match coordinates {
            None => {
                let slot = location as usize;
                if self.plain.len() <= slot {
                    self.plain.resize(slot + 1, NONE);
                }
                if self.plain[slot] == NONE {
                    self.plain[slot] = self.push(value);
                }
                self.plain[slot]
            }
            Some(_) => match self.last {
                Some((index, last)) if last == value => index,
                _ => {
                    let index = self.push(value);
                    self.last = Some((index, value));
                    index
                }
            },
        };
        tag(index, source)
    }

    fn push(&mut self, value: Value) -> u32 {
        let index = self.values.len() as u32;
        assert!(
            index < INDEX_MASK,
            "more than 2^30 distinct location values"
        );
        self.values.push(value);
        index
    }

    /// Flattens a layer into one table per family, checking nesting.
    fn flatten(&self, layer: Layer) -> Result<(Steps<u32>, Steps<u128>), LocationDbError> {
        let clash = |c: Clash| self.overlap(c);
        Ok((
            table::nest(layer.v4).map_err(clash)?,
            table::nest(layer.v6).map_err(clash)?,
        ))
    }

    fn overlap(&self, clash: Clash) -> LocationDbError {
        let (later, earlier) = (clash.later, clash.earlier);
        let file = self.sources[later.src as usize].clone();
        let other_file = self.sources[earlier.src as usize].clone();
        let range = |w: &table::Written| format!("{}-{}", w.from, w.to);
        let other = if other_file == file {
            format!("line {}", earlier.line)
        } else {
            format!("{}:{}", other_file.display(), earlier.line)
        };
        let reason = if clash.is_duplicate() {
            format!("range {} is also given on {other}", range(&later))
        } else {
            format!(
                "range {} partially overlaps range {} on {other}; ranges may nest (the narrower \
                 one wins) but not partially overlap",
                range(&later),
                range(&earlier)
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

    fn finish(
        self,
        v4: Steps<u32>,
        v6: Steps<u128>,
        asn_v4: Steps<u32>,
        asn_v6: Steps<u128>,
    ) -> LocationDb {
        let (v4, v6) = (v4.finish(), v6.finish());
        let (asn_v4, asn_v6) = (asn_v4.finish(), asn_v6.finish());
        let mut stats = self.stats;
        stats.locations = self.locations.len();
        stats.segments = v4.len() + v6.len() + asn_v4.len() + asn_v6.len();
        let mut locations = vec![Location::default(); self.locations.len()];
        for (location, i) in self.locations {
            locations[i as usize] = location;
        }
        LocationDb {
            locations,
            values: self.values,
            v4,
            v6,
            isps: self.isps,
            asn_v4,
            asn_v6,
            stats,
        }
    }
}

/// A location file's ranges going into the files' layer.
struct FileSink<'a> {
    build: &'a mut Build,
    layer: &'a mut Layer,
    src: u32,
}

impl Sink for FileSink<'_> {
    fn location(&mut self, location: Location) -> u32 {
        self.build.location(location)
    }

    fn range(
        &mut self,
        range: Range,
        location: u32,
        coordinates: Option<Coordinates>,
        line: usize,
    ) {
        let val = self.build.value(location, coordinates, Source::Csv);
        self.layer.push(range, val, self.src, line);
    }
}
