//! The configuration loader (`Config::parse`) on arbitrary text. It must never panic: a text
//! is either a configuration or refused with the line and column of the fault (1-based,
//! inside the text); one it accepts must compile into the tables gslbd serves from
//! (`Snapshot`, `Responder`) without a panic either. Inputs are at most `-max_len` (65,535)
//! bytes, which keeps each run in the milliseconds.
//!
//! The file is named in a directory that does not exist, so relative key and certificate
//! paths read nothing; absolute ones are read as gslbd would (regular files only, bounded).
#![no_main]

use std::path::Path;

use gslb_user::{
    compile::Snapshot,
    config::{Config, ConfigError},
    responder::Responder,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Config::parse(text, Path::new("/nonexistent/gslb-fuzz/gslbd.toml")) {
        Ok(config) => {
            let snapshot = Snapshot::from_config(&config);
            let _ = Responder::new(&snapshot);
        }
        Err(ConfigError::Invalid {
            line,
            column,
            reason,
            ..
        }) => {
            let lines = text.split('\n').count();
            assert!(
                (1..=lines).contains(&line),
                "line {line} outside the text ({lines} lines): {reason}"
            );
            let width = text
                .split('\n')
                .nth(line - 1)
                .map_or(0, |l| l.chars().count());
            assert!(
                (1..=width + 1).contains(&column),
                "{line}:{column} outside its line ({width} characters): {reason}"
            );
            assert!(!reason.is_empty(), "an error without a reason");
        }
        Err(e) => panic!("parse gave an error without a place: {e}"),
    }
});
