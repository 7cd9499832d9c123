//! The location database's readers on arbitrary bytes: the first byte picks the format (each
//! NetScaler location file format, or a MaxMind City or ASN database), the rest is the file.
//! A build must never panic: it gives a database or an error; an error of a line names a line
//! of the file; a database holds at most one range per line, and looks up every address where
//! its answer changes without a panic.
//!
//! Text that is UTF-8 is handed over in memory (`file_text`); other bytes, and the MaxMind
//! databases (memory-mapped from a path), go through a file of this process in the temporary
//! directory, rewritten for each input.
#![no_main]

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    path::PathBuf,
    sync::LazyLock,
};

use gslb_user::location::{
    db::{LocationDb, LocationDbError},
    netscaler::FileFormat,
};
use libfuzzer_sys::{Corpus, fuzz_target};

static FILE: LazyLock<PathBuf> = LazyLock::new(|| {
    std::env::temp_dir().join(format!("gslb-fuzz-location-{}", std::process::id()))
});

/// The path of [`FILE`] holding `bytes`.
fn file(bytes: &[u8]) -> PathBuf {
    std::fs::write(&*FILE, bytes).expect("writing the temporary file");
    FILE.clone()
}

fuzz_target!(|data: &[u8]| -> Corpus {
    let Some((&pick, bytes)) = data.split_first() else {
        return Corpus::Reject;
    };
    let formats: Vec<FileFormat> = FileFormat::names()
        .filter_map(FileFormat::from_name)
        .collect();
    let pick = usize::from(pick) % (formats.len() + 2);
    let name = PathBuf::from("fuzz.csv");
    let builder = LocationDb::builder();
    let (built, text) = match (formats.get(pick), std::str::from_utf8(bytes)) {
        (Some(&format), Ok(text)) => (builder.file_text(&name, text, format).build(), true),
        (Some(&format), Err(_)) => (builder.file(file(bytes), format).build(), true),
        (None, _) if pick == formats.len() => (builder.mmdb_city(file(bytes)).build(), false),
        (None, _) => (builder.mmdb_asn(file(bytes)).build(), false),
    };
    let lines = bytes.split(|&b| b == b'\n').count();
    match built {
        Ok(db) => {
            let stats = db.stats();
            if text {
                assert!(
                    stats.csv + stats.skipped <= lines,
                    "{} ranges and {} skipped lines from {lines} lines",
                    stats.csv,
                    stats.skipped
                );
            }
            for at in db.boundaries() {
                let ip = match Ipv6Addr::from(at).to_ipv4_mapped() {
                    Some(v4) => IpAddr::V4(v4),
                    None => IpAddr::V6(Ipv6Addr::from(at)),
                };
                let _ = db.find(ip);
            }
            let _ = db.find(IpAddr::V4(Ipv4Addr::BROADCAST));
            let _ = db.find(IpAddr::V6(Ipv6Addr::from(u128::MAX)));
        }
        Err(LocationDbError::Line { line, reason, .. }) => {
            assert!(text, "a line error from a MaxMind database: {reason}");
            assert!(
                (1..=lines).contains(&line),
                "line {line} of {lines}: {reason}"
            );
        }
        Err(LocationDbError::Overlap {
            line,
            other_line,
            reason,
            ..
        }) => {
            assert!(
                (1..=lines).contains(&line) && (1..=lines).contains(&other_line),
                "lines {line} and {other_line} of {lines}: {reason}"
            );
        }
        Err(LocationDbError::Mmdb { reason, .. }) => {
            assert!(!text, "a MaxMind error from a location file: {reason}");
        }
        Err(e @ LocationDbError::Io { .. }) => panic!("{e}"),
    }
    Corpus::Keep
});
