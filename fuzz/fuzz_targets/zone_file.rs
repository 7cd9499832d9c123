//! The zone-file reader (`[[zone]] file`) on arbitrary bytes as example.com's master file.
//! It must never panic: the file is either read, or refused at a line inside it (the
//! configuration's `file` key for the file as a whole: no SOA, unreadable includes); one it
//! reads must compile into the tables gslbd serves from without a panic either. The bytes are
//! written to a file of this process's own directory, the only way gslbd reads a zone.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use gslb_user::{
    compile::Snapshot,
    config::{Config, ConfigError},
    responder::Responder,
};
use libfuzzer_sys::fuzz_target;

const CONFIG: &str = "[server]\nlisten = [\"192.0.2.1\"]\n\
    [[zone]]\nname = \"example.com\"\nfile = \"example.com.zone\"\n";

/// This process's directory for the zone file (left behind: one per fuzzing process).
fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("gslb-fuzz-zone-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("the fuzz directory");
        dir
    })
}

/// libFuzzer's panic hook aborts at once, before gslbd's `catch_unwind` around the zone-file
/// parser can turn a panic of the parser (a bug of `domain`'s: the seed
/// `domain-charstr-panic`) into the refusal gslbd gives. Replaced by a silent one, so the
/// target checks what gslbd does; a panic that escapes gslbd still fails the run (libFuzzer's
/// wrapper aborts on any panic that reaches it).
fn silent_panics() {
    static SET: OnceLock<()> = OnceLock::new();
    SET.get_or_init(|| std::panic::set_hook(Box::new(|_| {})));
}

fuzz_target!(|data: &[u8]| {
    silent_panics();
    let (config_path, zone_path) = (dir().join("gslbd.toml"), dir().join("example.com.zone"));
    std::fs::write(&zone_path, data).expect("the zone file");
    match Config::parse(CONFIG, &config_path) {
        Ok(config) => {
            let snapshot = Snapshot::from_config(&config);
            let _ = Responder::new(&snapshot);
        }
        Err(ConfigError::Invalid {
            file,
            line,
            column,
            reason,
        }) => {
            assert!(!reason.is_empty(), "an error without a reason");
            assert!(column >= 1, "column 0: {reason}");
            let lines = if file == zone_path {
                data.split(|&b| b == b'\n').count()
            } else {
                assert_eq!(file, config_path, "an error in a third file: {reason}");
                CONFIG.lines().count()
            };
            assert!(
                (1..=lines).contains(&line),
                "{}:{line} outside the file ({lines} lines): {reason}",
                file.display()
            );
        }
        Err(e) => panic!("an error without a place: {e}"),
    }
});
