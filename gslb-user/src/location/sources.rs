//! Where client locations come from: the files, databases and custom entries a
//! configuration's `[locations]` and `[[location]]` sections name, as the
//! [`LocationDb`](super::db::LocationDb) builder reads them.

use std::net::IpAddr;
use std::path::PathBuf;

use super::Location;

/// `[locations]` and `[[location]]`: where client locations come from (static proximity).
/// Files are as written (relative to gslbd's working directory); they are read when the
/// location database is built, so a missing file is reported then, with its name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LocationSources {
    /// NetScaler location files, in order: `[[locations.file]]` entries, after the files of
    /// the `netscaler = [...]` list (format `netscaler`).
    pub files: Vec<LocationFile>,
    /// A MaxMind GeoIP2/GeoLite2 City database.
    pub mmdb_city: Option<PathBuf>,
    /// A MaxMind ASN database, for the ISP qualifier.
    pub mmdb_asn: Option<PathBuf>,
    /// The continents gslbd supplies (the mmdb's, and those derived from a file's country)
    /// as codes (`EU`) instead of names (`Europe`).
    pub continent_codes: bool,
    /// Custom entries, which win over the files: (line in the config, from, to, location).
    pub custom: Vec<(usize, IpAddr, IpAddr, Location)>,
}

/// `[[locations.file]]`: one NetScaler location file and the format NetScaler would load it
/// with (`add locationfile <path> -format <format>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocationFile {
    pub path: PathBuf,
    pub format: super::netscaler::FileFormat,
}
