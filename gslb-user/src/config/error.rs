//! Why a configuration could not be loaded.

use std::path::PathBuf;

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("cannot read {}", file.display())]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    /// Syntax, schema or semantic error at a 1-based `line`/`column` (in characters).
    #[error("{}:{line}:{column}: {reason}", file.display())]
    Invalid {
        file: PathBuf,
        line: usize,
        column: usize,
        reason: String,
    },
}
