//! `[locations]` and `[[location]]`: where client locations come from.

use std::net::IpAddr;
use std::path::PathBuf;

use serde::Deserialize;

use super::error::ConfigError;
use super::validate::{Str, Validator};
use crate::location::continent::ContinentStyle;
use crate::location::{Location, LocationFile, LocationSources};

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLocationFiles {
    #[serde(default)]
    pub(super) netscaler: Vec<String>,
    #[serde(default)]
    pub(super) file: Vec<RawLocationFile>,
    pub(super) mmdb_city: Option<String>,
    pub(super) mmdb_asn: Option<String>,
    #[serde(default)]
    pub(super) continent: ContinentStyle,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLocationFile {
    pub(super) path: Str,
    pub(super) format: Option<Str>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCustomLocation {
    pub(super) from: Str,
    pub(super) to: Str,
    pub(super) location: Str,
}

impl Validator<'_> {
    pub(super) fn locations(
        &self,
        files: RawLocationFiles,
        custom: Vec<RawCustomLocation>,
    ) -> Result<LocationSources, ConfigError> {
        use crate::location::netscaler::FileFormat;
        let mut entries = Vec::new();
        for c in custom {
            let owner = format!("location {:?}", c.location.get_ref());
            let from = self.ip(&owner, "from", &c.from)?;
            let to = self.ip(&owner, "to", &c.to)?;
            if from.is_ipv4() != to.is_ipv4() {
                return Err(self.error(
                    c.to.span(),
                    format!("{owner}: from {from} and to {to} are of different families"),
                ));
            }
            let ordered = match (from, to) {
                (IpAddr::V4(a), IpAddr::V4(b)) => a <= b,
                (IpAddr::V6(a), IpAddr::V6(b)) => a <= b,
                _ => false,
            };
            if !ordered {
                return Err(self.error(
                    c.to.span(),
                    format!("{owner}: to {to} is below from {from}"),
                ));
            }
            let location = Location::parse(c.location.get_ref())
                .map_err(|reason| self.error(c.location.span(), format!("{owner}: {reason}")))?;
            entries.push((self.line(c.location.span()), from, to, location));
        }
        let mut located: Vec<LocationFile> = files
            .netscaler
            .into_iter()
            .map(|path| LocationFile {
                path: path.into(),
                format: FileFormat::Netscaler,
            })
            .collect();
        for f in files.file {
            let owner = format!("locations.file {:?}", f.path.get_ref());
            if f.path.get_ref().is_empty() {
                return Err(self.error(f.path.span(), format!("{owner}: path is empty")));
            }
            let format = match &f.format {
                None => FileFormat::Netscaler,
                Some(name) => FileFormat::from_name(name.get_ref()).ok_or_else(|| {
                    self.error(
                        name.span(),
                        format!(
                            "{owner}: unknown format {:?}; NetScaler's formats are {}",
                            name.get_ref(),
                            FileFormat::names().collect::<Vec<_>>().join(", ")
                        ),
                    )
                })?,
            };
            located.push(LocationFile {
                path: f.path.into_inner().into(),
                format,
            });
        }
        Ok(LocationSources {
            files: located,
            mmdb_city: files.mmdb_city.map(PathBuf::from),
            mmdb_asn: files.mmdb_asn.map(PathBuf::from),
            continent_codes: files.continent == ContinentStyle::Code,
            custom: entries,
        })
    }
}
