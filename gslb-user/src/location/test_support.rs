//! Helpers shared by the location tests.

use std::{net::IpAddr, path::Path};

use super::{
    Coordinates,
    db::{LocationDb, LocationDbError, Source},
    netscaler::FileFormat,
};

pub(super) fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// The location of `addr` as operators write it, or "-" when there is none.
pub(super) fn at(db: &LocationDb, addr: &str) -> String {
    db.lookup(ip(addr))
        .map_or_else(|| "-".to_owned(), |l| l.to_string())
}

pub(super) fn csv_db(text: &str) -> LocationDb {
    LocationDb::builder()
        .netscaler_csv_text("test.csv", text)
        .build()
        .unwrap()
}

pub(super) fn csv_err(text: &str) -> LocationDbError {
    LocationDb::builder()
        .netscaler_csv_text("bad.csv", text)
        .build()
        .unwrap_err()
}

pub(super) fn db_of(format: FileFormat, text: &str) -> LocationDb {
    LocationDb::builder()
        .file_text("test.csv", text, format)
        .build()
        .unwrap_or_else(|e| panic!("{}: {e}", format.name()))
}

pub(super) fn source(db: &LocationDb, addr: &str) -> Option<Source> {
    db.lookup_with_source(ip(addr)).map(|(_, s)| s)
}

pub(super) fn coordinates(db: &LocationDb, addr: &str) -> Option<Coordinates> {
    db.find(ip(addr)).and_then(|found| found.coordinates)
}

/// `(line, reason)` of the error `text` in `format` gives, which must name `bad.csv`.
pub(super) fn line_error(format: FileFormat, text: &str) -> (usize, String) {
    match LocationDb::builder()
        .file_text("bad.csv", text, format)
        .build()
        .unwrap_err()
    {
        LocationDbError::Line { file, line, reason } => {
            assert_eq!(file, Path::new("bad.csv"), "{text}");
            (line, reason)
        }
        other => panic!("{text}: {other:?}"),
    }
}
