//! NetScaler location files: the formats `add locationfile -format` (and `add locationfile6`)
//! accepts, and the `NSGEO1.0` header of the files Citrix ships.
//!
//! # Formats
//!
//! One range per line, both ends inclusive, fields separated by commas (see [`super::csv`]:
//! fields may be double-quoted, and are trimmed). The columns, by `format` (CTX235799):
//!
//! | format | columns |
//! |---|---|
//! | `netscaler`, `netscaler6` | `ip_from,ip_to,continent,country,region,city,isp,org[,longitude,latitude]` |
//! | `ip-country` | `ip_from,ip_to,country,country_name` |
//! | `ip-country-isp` | `ip_from,ip_to,country,country_name,isp` |
//! | `ip-country-region-city` | `ip_from,ip_to,country,country_name,region,city` |
//! | `ip-country-region-city-isp` | `ip_from,ip_to,country,country_name,region,city,isp` |
//! | `geoip-country`, `geoip-country6` | `ip_from,ip_to,num_from,num_to,country,country_name` |
//! | `geoip-region` | `ip_from,ip_to,num_from,num_to,country,region` |
//! | `geoip-country-isp` | `ip_from,ip_to,num_from,num_to,country,country_name,isp` |
//! | `geoip-country-org` | `ip_from,ip_to,num_from,num_to,country,country_name,org` |
//! | `geoip-city` | `ip_from,ip_to,country,region,city,postal_code,latitude,longitude,metro_code,area_code` |
//! | `geoip-city-isp-org` | `geoip-city`'s columns, then `isp,org` |
//!
//! - The `ip-*` formats are IP2Location's CSV files, the `geoip-*` ones MaxMind's legacy GeoIP
//!   CSV files (`geoip-city` joins GeoLite City's blocks and locations files on the location
//!   id, as NetScaler's article says; the `-isp`/`-org` ones add the ISP or organization
//!   column). Columns named `country_name`, `num_*`, `postal_code`, `metro_code` and
//!   `area_code` are read past. CTX235799's text gives the columns of `netscaler` to
//!   `geoip-region`; those of `geoip-city` and after are MaxMind's files as described.
//! - Addresses are dotted-quad IPv4, IPv6, or a decimal 32-bit number (IPv4), in every
//!   format (`netscaler6` and `geoip-country6` are the `add locationfile6` names; the families
//!   may also share one file).
//! - Every line of a format has all its columns, except `netscaler`: trailing qualifier
//!   columns may be omitted (at least one is needed), and longitude and latitude come both or
//!   not at all, as the 9th and 10th fields.
//! - An empty or `*` qualifier is a wildcard; in the `ip-*` formats `-` is too (IP2Location's
//!   "no data"), and a line left without any qualifier there is skipped (counted), while in
//!   the other formats it is an error. Coordinates are kept on the range (and in range).
//!
//! # The NSGEO1.0 header
//!
//! ```text
//! NSGEO1.0
//! Context=geographic
//! Qualifier1=Continent
//! Qualifier2=Country
//! Start
//! 1.0.0.0,1.0.0.255,OC,AU,,,,,145.0,-37.8
//! End
//! ```
//!
//! A file may start (after blank and `#` lines) with `NSGEO1.0`, then header lines, then
//! `Start`; the ranges follow and an optional `End` closes them (only blank and `#` lines may
//! follow it). Header lines:
//! - `Context=geographic` (the default) or `Context=custom`: in the geographic context,
//!   qualifiers are continent, country, region, city, ISP and organization, and a line with a
//!   country but no continent gets the continent of its country ([`super::continent`]), as
//!   NetScaler derives it; in the custom context the six qualifiers mean what the operator
//!   says, and nothing is derived.
//! - `QualifierN=Label` (N from 1 to 6; `netscaler` format only): the N-th qualifier column
//!   holds `Label`. In the geographic context the label says which qualifier (`Continent`,
//!   `Country`/`Country_Code`, `Region`/`State`/`Subdivision_1_Name`, `City`, `ISP`,
//!   `Organization`, case and `_` ignored), so columns may come in another order;
//!   `Subdivision_2_Name`, which Citrix's converted GeoLite2 files carry and NetScaler has no
//!   qualifier for, is read past. In the custom context column N is qualifier N, whatever
//!   its label. With `QualifierN=` lines, a column the header does not name must be empty.
//!
//! Without the header every line is a range (a `Start` line before the first one and an `End`
//! line are still markers), and the columns are as the table says.
//!
//! Any malformed line fails the file ([`LocationDbError::Line`]: file, line and reason).

use std::{collections::HashMap, path::Path};

mod header;

use header::{HeaderColumns, Keyword, keyword};

use super::{
    Coordinates, Location, Qualifier,
    continent::{Continent, ContinentStyle},
    csv::{self, Field, MAX_FIELDS},
    db::LocationDbError,
    table::Range,
};

/// A location file format (`format` in `[[locations.file]]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FileFormat {
    #[default]
    Netscaler,
    IpCountry,
    IpCountryIsp,
    IpCountryRegionCity,
    IpCountryRegionCityIsp,
    GeoipCountry,
    GeoipRegion,
    GeoipCity,
    GeoipCountryOrg,
    GeoipCountryIsp,
    GeoipCityIspOrg,
}

/// Every name NetScaler gives a format, with the format it reads as.
const NAMES: [(&str, FileFormat); 13] = [
    ("netscaler", FileFormat::Netscaler),
    ("netscaler6", FileFormat::Netscaler),
    ("ip-country", FileFormat::IpCountry),
    ("ip-country-isp", FileFormat::IpCountryIsp),
    ("ip-country-region-city", FileFormat::IpCountryRegionCity),
    (
        "ip-country-region-city-isp",
        FileFormat::IpCountryRegionCityIsp,
    ),
    ("geoip-country", FileFormat::GeoipCountry),
    ("geoip-country6", FileFormat::GeoipCountry),
    ("geoip-region", FileFormat::GeoipRegion),
    ("geoip-city", FileFormat::GeoipCity),
    ("geoip-country-org", FileFormat::GeoipCountryOrg),
    ("geoip-country-isp", FileFormat::GeoipCountryIsp),
    ("geoip-city-isp-org", FileFormat::GeoipCityIspOrg),
];

impl FileFormat {
    /// The format NetScaler names `name` (exactly as NetScaler writes it, lower case).
    pub fn from_name(name: &str) -> Option<FileFormat> {
        NAMES.iter().find(|(n, _)| *n == name).map(|&(_, f)| f)
    }

    /// Every accepted name, for error messages.
    pub fn names() -> impl Iterator<Item = &'static str> {
        NAMES.iter().map(|(n, _)| *n)
    }

    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("?", |(n, _)| n)
    }

    fn layout(self) -> Layout {
        use Col::{From, Latitude, Longitude, Q, Skip, To};
        let (cols, expected): (&[Col], &str) = match self {
            FileFormat::Netscaler => (
                &[
                    From,
                    To,
                    Q(0),
                    Q(1),
                    Q(2),
                    Q(3),
                    Q(4),
                    Q(5),
                    Longitude,
                    Latitude,
                ],
                "ip_from,ip_to,continent,country,region,city,isp,org[,longitude,latitude]",
            ),
            FileFormat::IpCountry => (
                &[From, To, Q(1), Skip],
                "ip_from,ip_to,country,country_name",
            ),
            FileFormat::IpCountryIsp => (
                &[From, To, Q(1), Skip, Q(4)],
                "ip_from,ip_to,country,country_name,isp",
            ),
            FileFormat::IpCountryRegionCity => (
                &[From, To, Q(1), Skip, Q(2), Q(3)],
                "ip_from,ip_to,country,country_name,region,city",
            ),
            FileFormat::IpCountryRegionCityIsp => (
                &[From, To, Q(1), Skip, Q(2), Q(3), Q(4)],
                "ip_from,ip_to,country,country_name,region,city,isp",
            ),
            FileFormat::GeoipCountry => (
                &[From, To, Skip, Skip, Q(1), Skip],
                "ip_from,ip_to,num_from,num_to,country,country_name",
            ),
            FileFormat::GeoipRegion => (
                &[From, To, Skip, Skip, Q(1), Q(2)],
                "ip_from,ip_to,num_from,num_to,country,region",
            ),
            FileFormat::GeoipCountryIsp => (
                &[From, To, Skip, Skip, Q(1), Skip, Q(4)],
                "ip_from,ip_to,num_from,num_to,country,country_name,isp",
            ),
            FileFormat::GeoipCountryOrg => (
                &[From, To, Skip, Skip, Q(1), Skip, Q(5)],
                "ip_from,ip_to,num_from,num_to,country,country_name,org",
            ),
            FileFormat::GeoipCity => (
                &[
                    From,
                    To,
                    Q(1),
                    Q(2),
                    Q(3),
                    Skip,
                    Latitude,
                    Longitude,
                    Skip,
                    Skip,
                ],
                "ip_from,ip_to,country,region,city,postal_code,latitude,longitude,metro_code,\
                 area_code",
            ),
            FileFormat::GeoipCityIspOrg => (
                &[
                    From,
                    To,
                    Q(1),
                    Q(2),
                    Q(3),
                    Skip,
                    Latitude,
                    Longitude,
                    Skip,
                    Skip,
                    Q(4),
                    Q(5),
                ],
                "ip_from,ip_to,country,region,city,postal_code,latitude,longitude,metro_code,\
                 area_code,isp,org",
            ),
        };
        let mut layout = Layout {
            cols: [Skip; MAX_FIELDS],
            len: cols.len(),
            min: cols.len(),
            dash_is_empty: matches!(
                self,
                FileFormat::IpCountry
                    | FileFormat::IpCountryIsp
                    | FileFormat::IpCountryRegionCity
                    | FileFormat::IpCountryRegionCityIsp
            ),
            expected,
        };
        layout.cols[..cols.len()].copy_from_slice(cols);
        if self == FileFormat::Netscaler {
            layout.min = 3;
        }
        layout
    }
}

/// What a column of a line holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Col {
    From,
    To,
    /// Read past.
    Skip,
    /// A qualifier: its index (0 continent … 5 organization).
    Q(usize),
    /// A qualifier column the header does not name: must be empty.
    Unnamed,
    Longitude,
    Latitude,
}

struct Layout {
    cols: [Col; MAX_FIELDS],
    len: usize,
    /// Fewest fields a line may have (`netscaler`: 3, then any up to 8, or 10).
    min: usize,
    dash_is_empty: bool,
    expected: &'static str,
}

/// The first qualifier column of the `netscaler` format (the third field).
const FIRST_QUALIFIER: usize = 2;

/// Counts of one file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileStats {
    pub ranges: usize,
    /// Lines that give no location (`ip-*` formats only; see the module docs).
    pub skipped: usize,
}

/// Where the ranges of a file go: the database being built.
pub(super) trait Sink {
    /// The id of `location` (called once per distinct qualifier text of a file).
    fn location(&mut self, location: Location) -> u32;
    fn range(&mut self, range: Range, location: u32, coordinates: Option<Coordinates>, line: usize);
}

pub(super) const NO_QUALIFIER: &str =
    "no qualifier (every one is empty or *): a location needs at least one";

/// Where the reader is in a file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the first range or header.
    Top,
    /// After `NSGEO1.0`, before `Start`.
    Header,
    Ranges,
    /// After `End`.
    Done,
}

/// Where a file's reading is: the markers and header lines seen so far.
struct Reading {
    format: FileFormat,
    continent: ContinentStyle,
    layout: Layout,
    /// How a continent derived from a country is written (`None`: the custom context, no
    /// derivation).
    derive: Option<ContinentStyle>,
    header: HeaderColumns,
    state: State,
    /// The line of `NSGEO1.0`.
    tag_line: usize,
}

impl Reading {
    /// A line without a comma (a marker or a header line) at `line`; errors are (line, reason).
    fn marker(&mut self, text: &str, line: usize) -> Result<(), (usize, String)> {
        let at = |reason: String| (line, reason);
        match (self.state, keyword(text)) {
            (State::Top, Keyword::Tag) => {
                self.state = State::Header;
                self.tag_line = line;
            }
            (State::Top, Keyword::OtherTag) => {
                return Err(at(format!(
                    "{text:?}: unknown format tag; this reader knows NSGEO1.0"
                )));
            }
            (State::Top | State::Header, Keyword::Start) => {
                if self.state == State::Header {
                    self.header.check()?;
                    if let Some(cols) = self.header.finish() {
                        self.layout.cols[FIRST_QUALIFIER..FIRST_QUALIFIER + 6]
                            .copy_from_slice(&cols);
                    }
                }
                self.state = State::Ranges;
            }
            (State::Header, Keyword::Set(key, value)) if key.eq_ignore_ascii_case("context") => {
                self.derive = match value.to_ascii_lowercase().as_str() {
                    "geographic" => Some(self.continent),
                    "custom" => None,
                    _ => {
                        return Err(at(format!(
                            "Context={value}: the context is geographic or custom"
                        )));
                    }
                };
                self.header.custom = self.derive.is_none();
            }
            (State::Header, Keyword::Set(key, value)) => {
                if self.format != FileFormat::Netscaler {
                    return Err(at(format!(
                        "{key}={value}: only Context= may be set for the {} format (Qualifier \
                         lines describe netscaler-format columns)",
                        self.format.name()
                    )));
                }
                self.header.set(key, value, line).map_err(at)?;
            }
            (State::Header, _) => {
                return Err(at(format!(
                    "{text:?}: expected Context=, QualifierN= or Start in the NSGEO1.0 header"
                )));
            }
            (State::Top | State::Ranges, Keyword::End) => self.state = State::Done,
            (State::Top, Keyword::Set(..)) => {
                return Err(at(format!(
                    "{text:?}: a header line without the NSGEO1.0 line that starts a header"
                )));
            }
            (State::Ranges, Keyword::Set(..)) => {
                return Err(at(format!(
                    "{text:?}: a header line among the ranges (the header ends at Start)"
                )));
            }
            (State::Ranges, Keyword::Tag | Keyword::OtherTag | Keyword::Start) => {
                return Err(at(format!(
                    "{text:?} among the ranges: the header and Start come first"
                )));
            }
            (State::Done, _) => return Err(at(format!("{text:?} after End"))),
            (State::Top | State::Ranges, Keyword::Other) => {
                return Err(at(format!("1 field; expected {}", self.layout.expected)));
            }
        }
        Ok(())
    }
}

/// Reads one location file of `format` into `sink`. `continent`: how a continent derived from
/// a country is written.
pub(super) fn read(
    file: &Path,
    bytes: &[u8],
    format: FileFormat,
    continent: ContinentStyle,
    sink: &mut impl Sink,
) -> Result<FileStats, LocationDbError> {
    let error = |line: usize, reason: String| LocationDbError::Line {
        file: file.to_path_buf(),
        line,
        reason,
    };
    let mut reading = Reading {
        format,
        continent,
        layout: format.layout(),
        derive: Some(continent),
        header: HeaderColumns::default(),
        state: State::Top,
        tag_line: 0,
    };
    let mut stats = FileStats::default();
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    // Raw qualifier text → location: one hash per line and no allocation for repeated
    // locations (most lines of a real file repeat one). `None`: a line to skip.
    let mut seen: HashMap<&[u8], Option<u32>> = HashMap::new();
    let mut fields: [Field<'_>; MAX_FIELDS] = Default::default();
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        let err = |reason: String| error(line, reason);
        let trimmed = raw.trim_ascii();
        if trimmed.is_empty() || trimmed[0] == b'#' {
            continue;
        }
        let text = std::str::from_utf8(trimmed).map_err(|e| {
            err(format!(
                "not UTF-8 (byte {} of the line)",
                e.valid_up_to() + 1
            ))
        })?;
        // Marker and header lines have no comma; every range line has one.
        if !text.contains(',') {
            reading
                .marker(text, line)
                .map_err(|(line, reason)| error(line, reason))?;
            continue;
        }
        let layout = &reading.layout;
        match reading.state {
            State::Header => {
                return Err(err(
                    "a range in the NSGEO1.0 header: the ranges follow a line Start".into(),
                ));
            }
            State::Done => return Err(err("a range after End".into())),
            State::Top | State::Ranges => reading.state = State::Ranges,
        }
        let n = csv::split(text, &mut fields, layout.len, layout.expected).map_err(err)?;
        let netscaler_gap = format == FileFormat::Netscaler && n == 9;
        if n < layout.min || netscaler_gap {
            return Err(err(format!("{n} fields; expected {}", layout.expected)));
        }
        let row = &fields[..n];
        let cols = &layout.cols[..n];
        let field = |want: Col| cols.iter().position(|&c| c == want).map(|i| &*row[i].text);
        let from =
            csv::addr(field(Col::From).unwrap_or("")).map_err(|r| err(format!("ip_from {r}")))?;
        let to = csv::addr(field(Col::To).unwrap_or("")).map_err(|r| err(format!("ip_to {r}")))?;
        let range = Range::new(from, to).map_err(err)?;
        let coordinates = match (field(Col::Longitude), field(Col::Latitude)) {
            (Some(long), Some(lat)) => csv::coordinates(long, lat).map_err(err)?,
            _ => None,
        };
        // The qualifier columns, from the first to the last, as the cache key.
        let qualifier = |c: &Col| matches!(c, Col::Q(_) | Col::Unnamed);
        let (Some(first), Some(last)) = (
            cols.iter().position(qualifier),
            cols.iter().rposition(qualifier),
        ) else {
            return Err(err(format!("{n} fields: no qualifier column")));
        };
        let key = &trimmed[row[first].span.0..row[last].span.1];
        let id = match seen.get(key) {
            Some(&id) => id,
            None => {
                let id = qualifiers(row, cols, layout, reading.derive)
                    .map_err(err)?
                    .map(|location| sink.location(location));
                if id.is_none() && !layout.dash_is_empty {
                    return Err(err(NO_QUALIFIER.into()));
                }
                seen.insert(key, id);
                id
            }
        };
        match id {
            Some(id) => {
                sink.range(range, id, coordinates, line);
                stats.ranges += 1;
            }
            None => stats.skipped += 1,
        }
    }
    if reading.state == State::Header {
        return Err(LocationDbError::Line {
            file: file.to_path_buf(),
            line: reading.tag_line,
            reason: "the NSGEO1.0 header has no Start line (the ranges follow one)".into(),
        });
    }
    Ok(stats)
}

/// The location a line's qualifier columns give; `None` when they give no qualifier.
fn qualifiers(
    row: &[Field<'_>],
    cols: &[Col],
    layout: &Layout,
    derive: Option<ContinentStyle>,
) -> Result<Option<Location>, String> {
    let mut slots: [&str; 6] = [""; 6];
    for (i, (field, col)) in row.iter().zip(cols).enumerate() {
        let text = &*field.text;
        let text = if layout.dash_is_empty && text == "-" {
            ""
        } else {
            text
        };
        match *col {
            Col::Q(slot) => slots[slot] = text,
            Col::Unnamed if !text.is_empty() && text != "*" => {
                return Err(format!(
                    "field {}: {text:?} is in a qualifier column the header does not name",
                    i + 1
                ));
            }
            _ => {}
        }
    }
    let wildcard = |s: &str| s.is_empty() || s == "*";
    let derived = match derive {
        Some(style) if wildcard(slots[0]) && !wildcard(slots[1]) => {
            Continent::of_country(slots[1]).map(|c| style.write(c))
        }
        _ => None,
    };
    if let Some(continent) = derived {
        slots[0] = continent;
    }
    let location = Location::from_qualifiers(slots);
    Ok((!location.0.iter().all(Qualifier::is_any)).then_some(location))
}

#[cfg(test)]
mod tests;
