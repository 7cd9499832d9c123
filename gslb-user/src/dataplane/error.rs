//! What the dataplane's operations fail with: each variant names the object (program, map,
//! pin, interface) and keeps the cause as its `source`.

use std::path::PathBuf;

use aya::{EbpfError, maps::MapError, pin::PinError, programs::ProgramError};

use super::XdpMode;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataplaneError {
    /// Display shows only the context: the cause follows in the error chain (`{:#}`).
    #[error("loading the XDP object")]
    Load(#[source] Box<EbpfError>),
    #[error("XDP program {name}")]
    Program {
        name: &'static str,
        source: Box<ProgramError>,
    },
    #[error("the XDP object has no {kind} named {name}")]
    Missing {
        kind: &'static str,
        name: &'static str,
    },
    #[error(
        "adopting the pinned maps in {dir} (left by a gslbd of another version? stop it, then remove the directory)"
    )]
    Adopt {
        dir: PathBuf,
        source: Box<EbpfError>,
    },
    /// A pinned XDP attachment (an aya `FdLink`, pinned as `link-<interface>`).
    #[error("link pinned at {path}")]
    PinnedAttachment {
        path: PathBuf,
        source: Box<aya::programs::links::LinkError>,
    },
    #[error("map {name}")]
    Map {
        name: &'static str,
        source: Box<MapError>,
    },
    #[error("mapping the memory of map {name}")]
    MapMemory {
        name: &'static str,
        source: std::io::Error,
    },
    #[error("attaching XDP to {interface} ({mode:?} mode)")]
    Attach {
        interface: String,
        mode: XdpMode,
        source: Box<ProgramError>,
    },
    #[error("pinning {what} at {path}")]
    Pin {
        what: &'static str,
        path: PathBuf,
        source: Box<PinError>,
    },
    /// Something gslbd did not make where it looks for a pin (a symbolic link to another
    /// program's pin, a directory): never opened, the start stops.
    #[error(
        "{} is {found}, not a pin: gslbd opens only the pins it makes in its pin directory; remove it",
        path.display()
    )]
    NotAPin { path: PathBuf, found: &'static str },
    #[error("pin directory {path}")]
    PinDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("name {name:?} cannot be encoded")]
    Name {
        name: String,
        source: Box<hickory_proto::ProtoError>,
    },
    #[error("reading the MAC of {interface}")]
    InterfaceMac {
        interface: String,
        source: std::io::Error,
    },
    /// Neither `membarrier(MEMBARRIER_CMD_GLOBAL)` nor a map-in-map update can wait for an RCU
    /// grace period: a replaced generation could not be deleted safely (`dataplane/grace.rs`).
    #[error(
        "no way to wait for an RCU grace period (membarrier MEMBARRIER_CMD_GLOBAL offered: {membarrier}; creating an ARRAY_OF_MAPS failed)"
    )]
    GraceUnsupported {
        membarrier: bool,
        source: std::io::Error,
    },
    /// The thread that waits for RCU grace periods failed or died: nothing can be republished.
    #[error("waiting for an RCU grace period")]
    Grace(#[source] std::io::Error),
    /// `bpf(2)` refused a read of a loaded program's JIT line table (profiling only).
    #[error("reading a program's JIT line table")]
    JitLines { source: aya::sys::SyscallError },
    #[error("the fast path answers at most {max} interfaces' MACs")]
    TooManyMacs { max: usize },
}

pub(super) type Result<T, E = DataplaneError> = std::result::Result<T, E>;

pub(super) fn map_err(name: &'static str) -> impl FnOnce(MapError) -> DataplaneError {
    move |source| DataplaneError::Map {
        name,
        source: Box::new(source),
    }
}
