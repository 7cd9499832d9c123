//! MaxMind GeoIP2/GeoLite2 databases (`.mmdb`), read once into range tables.
//!
//! City/Country records map to `continent.country.region.city`: continent = the English
//! continent name (`Europe`; or the code `EU` with [`ContinentStyle::Code`]), country = the
//! ISO 3166-1 code, region = the first subdivision's ISO 3166-2 code (its English name if it has
//! no code), city = the English city name; the record's latitude and longitude are kept. ASN
//! records supply the ISP qualifier: `autonomous_system_organization`, or `AS<number>` when a
//! record has no organization. Records that give no qualifier at all are ignored.
//!
//! The file is memory-mapped while it is walked, not copied to the heap: a reload reads a
//! City-sized file (tens of MB) through the page cache, and the mapping is dropped when the
//! tables are built. Nothing reads it afterwards.

use std::{borrow::Cow, collections::HashMap, fs::File, net::IpAddr, net::Ipv6Addr, path::Path};

use maxminddb::{Mmap, Reader, WithinOptions, geoip2};

use super::{
    Coordinates, Location, Qualifier,
    continent::ContinentStyle,
    db::LocationDbError,
    table::{Key, NONE, Steps},
};

/// Index of the ISP qualifier.
pub(super) const ISP: usize = 4;

/// Both families' tables of one database, and how many networks gave a value.
pub(super) type Tables = (Steps<u32>, Steps<u128>, usize);

/// One network of a walk, with its record.
type Lookup<'de> = maxminddb::LookupResult<'de, Mmap>;

/// Reads a City (or Country) database: every network with a location becomes the value
/// `intern(location, coordinates)` gives it.
pub(super) fn city(
    path: &Path,
    style: ContinentStyle,
    mut intern: impl FnMut(Location, Option<Coordinates>) -> u32,
) -> Result<Tables, LocationDbError> {
    let reader = open(path)?;
    let db_type = &reader.metadata().database_type;
    if db_type.contains("ASN") || db_type.contains("ISP") {
        return Err(mmdb_err(
            path,
            format!("is a {db_type} database, not a City or Country one"),
        ));
    }
    walk(&reader, path, |lookup| {
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
        let coordinates = match (record.location.latitude, record.location.longitude) {
            (Some(latitude), Some(longitude)) => Some(Coordinates {
                latitude,
                longitude,
            }),
            _ => None,
        };
        Ok(if location.0.iter().all(Qualifier::is_any) {
            NONE
        } else {
            intern(location, coordinates)
        })
    })
}

/// Reads an ASN database: every network with an ISP becomes the value `intern(isp)` gives it.
pub(super) fn asn(
    path: &Path,
    mut intern: impl FnMut(Qualifier) -> u32,
) -> Result<Tables, LocationDbError> {
    let reader = open(path)?;
    let db_type = &reader.metadata().database_type;
    if db_type.contains("City") || db_type.contains("Country") {
        return Err(mmdb_err(
            path,
            format!("is a {db_type} database, not an ASN one"),
        ));
    }
    walk(&reader, path, |lookup| {
        let record: Option<geoip2::Asn<'_>> = lookup.decode()?;
        let name = record.and_then(|r| {
            match (r.autonomous_system_organization, r.autonomous_system_number) {
                (Some(org), _) if !org.trim().is_empty() => Some(Cow::Borrowed(org)),
                (_, Some(n)) => Some(Cow::Owned(format!("AS{n}"))),
                _ => None,
            }
        });
        let isp =
            name.map(|n| Location::from_qualifiers(["", "", "", "", n.as_ref()]).0[ISP].clone());
        Ok(match isp {
            Some(q @ Qualifier::Is(_)) => intern(q),
            _ => NONE,
        })
    })
}

fn open(path: &Path) -> Result<Reader<Mmap>, LocationDbError> {
    let file = File::open(path).map_err(|source| LocationDbError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    // SAFETY: the mapping lives only while this build walks the database (the tables keep no
    // reference into it). Updaters replace a database by renaming a new file over it (as
    // geoipupdate does), which leaves this mapping on the old file; a file truncated in place
    // during those seconds would fault the walk, which is why the docs say to replace, not
    // rewrite, a database file.
    let map = unsafe { Mmap::map(&file) }.map_err(|source| LocationDbError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    Reader::from_source(map).map_err(|e| mmdb_err(path, format!("not a MaxMind database: {e}")))
}

fn mmdb_err(path: &Path, reason: String) -> LocationDbError {
    LocationDbError::Mmdb {
        file: path.to_path_buf(),
        reason,
    }
}

/// Walks every network with data (IPv4 aliases inside IPv6 skipped) and flattens the values
/// `value` gives their records ([`NONE`]: none), asked once per record (networks share
/// records). The walk visits the tree in address order, so networks go straight into the
/// tables, without a list of them to sort first (a City database has millions).
fn walk<'de>(
    reader: &'de Reader<Mmap>,
    path: &Path,
    mut value: impl FnMut(&Lookup<'de>) -> Result<u32, maxminddb::MaxMindDbError>,
) -> Result<Tables, LocationDbError> {
    let bad = |e: maxminddb::MaxMindDbError| mmdb_err(path, e.to_string());
    let (mut v4, mut v6) = (Ordered::default(), Ordered::default());
    // Data offset → value.
    let mut records: HashMap<usize, u32> = HashMap::new();
    let mut count = 0;
    for lookup in reader.networks(WithinOptions::default()).map_err(bad)? {
        let lookup = lookup.map_err(bad)?;
        let offset = lookup.offset().expect("networks with data only");
        let val = match records.get(&offset) {
            Some(&val) => val,
            None => {
                let val = value(&lookup).map_err(bad)?;
                records.insert(offset, val);
                val
            }
        };
        if val == NONE {
            continue;
        }
        let net = lookup.network().map_err(bad)?;
        let prefix = u32::from(net.prefix());
        let ordered = match net.network() {
            IpAddr::V4(first) => {
                let first = u32::from(first);
                let last = first | u32::MAX.checked_shr(prefix).unwrap_or(0);
                v4.push(first, last, val)
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
                v6.push(first, last, val)
            }
        };
        if !ordered {
            return Err(mmdb_err(
                path,
                format!("network {net} is out of address order: the search tree is corrupt"),
            ));
        }
        count += 1;
    }
    Ok((v4.steps, v6.steps, count))
}

/// Disjoint ranges in ascending order, flattened as they come.
struct Ordered<K> {
    steps: Steps<K>,
    /// The lowest address the next range may start at; `None` once a range ended at the last
    /// address (nothing may follow it).
    next: Option<K>,
}

impl<K: Key> Default for Ordered<K> {
    fn default() -> Self {
        Ordered {
            steps: Steps::default(),
            next: Some(K::MIN),
        }
    }
}

impl<K: Key> Ordered<K> {
    /// False when the range starts before the end of the previous one.
    fn push(&mut self, first: K, last: K, val: u32) -> bool {
        match self.next {
            Some(next) if next <= first && first <= last => {}
            _ => return false,
        }
        self.steps.push(first, val);
        self.next = (last != K::MAX).then(|| last.succ());
        if let Some(next) = self.next {
            self.steps.push(next, NONE);
        }
        true
    }
}

#[cfg(test)]
mod tests;
