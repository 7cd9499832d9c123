//! MEP frames: the wire format (docs/mep.md), encoded and decoded by hand.
//!
//! A frame is an 8-byte header and a payload:
//!
//! ```text
//! 0      2         3      4              8
//! +------+---------+------+--------------+----------------+
//! | "MP" | version | type | payload len  | payload ...    |
//! +------+---------+------+--------------+----------------+
//!          u8        u8     u32 big-endian
//! ```
//!
//! `version` is [`HELLO_VERSION`] on a [`Message::Hello`] (its layout is frozen from MEP 2 on;
//! MEP 1 sites sent 0 and another layout, which is refused with a clear reason) and 0 on a
//! [`Message::Reject`] answering a Hello (readable by any build); every later frame carries the
//! negotiated version and is sealed: a MAC tag follows it (`auth::Sealer`). Integers are big-endian; a string is a u16 byte
//! length and UTF-8 bytes (each field has its own cap); a list is a count (u8 or u32) and its
//! items; an IP prefix is a family byte (4 or 6), a prefix length and 4 or 16 address bytes;
//! a bool is one byte, 0 or 1.
//!
//! The decoder never panics and never allocates more than the bytes it was given justify: a
//! list's count is checked against the bytes left before anything is reserved, and the header's
//! length against the cap before the payload is read. Every way a frame can be wrong has its
//! own [`FrameError`]; the payload must be consumed exactly (no trailing bytes).

use ipnet::IpNet;

use crate::health::state::ServiceState;
use crate::persist::PersistEntry;

mod decode;
mod encode;
#[cfg(test)]
mod tests;

pub use decode::{decode_frame, decode_header, decode_payload};
pub use encode::{chunks, encode, persist_entry_len, rtt_row_len};

/// The first two bytes of every frame.
pub const MAGIC: [u8; 2] = *b"MP";
/// Header length.
pub const HEADER_LEN: usize = 8;
/// Default cap on a frame's payload (the whole frame is `HEADER_LEN` more).
pub const DEFAULT_MAX_PAYLOAD: usize = 1 << 20;
/// Cap on a frame's payload until the peer is authenticated (the handshake's Hello, Auth and
/// Reject frames). The largest of them, a Reject with its reason at [`MAX_DETAIL`], has 1,027
/// bytes of payload and the largest Hello 540: 4 KiB leaves room, and an unauthenticated
/// peer cannot make a node reserve and wait for a megabyte per connection.
pub const MAX_HANDSHAKE_PAYLOAD: usize = 4096;
/// Length of a handshake nonce.
pub const NONCE_LEN: usize = 32;
/// Length of an X25519 public key (the Hello's ephemeral key share).
pub const KX_LEN: usize = 32;
/// Length of an Ed25519 signature (the Auth frame's proof of identity).
pub const SIG_LEN: usize = 64;
/// The header version of a Hello (its layout since MEP 2). A MEP 1 Hello has version 0.
pub const HELLO_VERSION: u8 = 2;
/// Longest site name (bytes).
pub const MAX_SITE_NAME: usize = 63;
/// Longest service, domain or software name (bytes).
pub const MAX_NAME: usize = 255;
/// Longest free-text reason (bytes).
pub const MAX_DETAIL: usize = 1024;
/// Most protocol versions a Hello may list.
pub const MAX_VERSIONS: usize = 16;
/// Most sites in a backup-parent list.
pub const MAX_BACKUPS: usize = 5;

/// The role of a site in the topology.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Peers with the other parents, answers DNS.
    Parent,
    /// Talks only to its parent; only local services.
    Child,
}

impl Role {
    fn code(self) -> u8 {
        match self {
            Role::Parent => 1,
            Role::Child => 2,
        }
    }
    fn from_code(code: u8) -> Option<Role> {
        match code {
            1 => Some(Role::Parent),
            2 => Some(Role::Child),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Parent => "parent",
            Role::Child => "child",
        }
    }
}

/// How an LDNS round-trip time was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RttProtocol {
    Icmp,
    Dns,
    Tcp,
    Udp,
}

impl RttProtocol {
    fn code(self) -> u8 {
        match self {
            RttProtocol::Icmp => 1,
            RttProtocol::Dns => 2,
            RttProtocol::Tcp => 3,
            RttProtocol::Udp => 4,
        }
    }
    fn from_code(code: u8) -> Option<RttProtocol> {
        Some(match code {
            1 => RttProtocol::Icmp,
            2 => RttProtocol::Dns,
            3 => RttProtocol::Tcp,
            4 => RttProtocol::Udp,
            _ => return None,
        })
    }
}

/// Why a session is refused or closed, as sent in [`Message::Reject`] (and counted locally under
/// the same name, see `CloseReason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectCode {
    /// The proof did not match the key configured for the site it claims to be.
    BadAuth,
    /// No protocol version in common.
    NoCommonVersion,
    /// The Hello named a site we do not know, or not us, or a role that disagrees with ours.
    UnknownSite,
    /// The topology does not let this site open this session (e.g. it should be accepting).
    NotAllowed,
    /// A frame could not be decoded.
    Malformed,
    /// The other end is shutting down or replacing the session.
    Closing,
    /// A code this build does not know (kept so that a newer peer's reason is still logged).
    Other(u8),
}

impl RejectCode {
    fn code(self) -> u8 {
        match self {
            RejectCode::BadAuth => 1,
            RejectCode::NoCommonVersion => 2,
            RejectCode::UnknownSite => 3,
            RejectCode::NotAllowed => 4,
            RejectCode::Malformed => 5,
            RejectCode::Closing => 6,
            RejectCode::Other(c) => c,
        }
    }
    fn from_code(code: u8) -> RejectCode {
        match code {
            1 => RejectCode::BadAuth,
            2 => RejectCode::NoCommonVersion,
            3 => RejectCode::UnknownSite,
            4 => RejectCode::NotAllowed,
            5 => RejectCode::Malformed,
            6 => RejectCode::Closing,
            c => RejectCode::Other(c),
        }
    }
}

/// The first frame each end sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Protocol versions this end speaks; both ends use the highest in common.
    pub versions: Vec<u8>,
    /// The sender's site.
    pub site: String,
    /// The site the sender believes it talks to.
    pub peer: String,
    pub role: Role,
    /// The sender's configured parent, for a child.
    pub parent: Option<String>,
    /// Software name and version, for logs (sites may run different versions).
    pub software: String,
    /// The RTT tolerance the sender is configured with (must agree on every site).
    pub rtt_tolerance_ms: Option<u32>,
    pub nonce: [u8; NONCE_LEN],
    /// The sender's ephemeral X25519 public key for this session (session keys, `auth`).
    pub kx: [u8; KX_LEN],
}

/// A site's state, sent by the site itself or relayed by the parent it is attached to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteStatus {
    pub site: String,
    pub role: Role,
    /// For a child: the parent it is attached to now (its own or an adopter).
    pub parent: Option<String>,
    /// The site is up as seen by the sender (always true for the sender itself; for a relayed
    /// child, whether its session to the sender is up).
    pub up: bool,
}

/// One service's state and load as its site reports it. On the wire: name, up, connections
/// (u64), bandwidth (u64, bit/s: [`Bandwidth::bps`], markers as they are).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceReport {
    pub name: String,
    pub state: ServiceState,
}

/// The services of one site (a full replacement of the previous list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceStates {
    pub site: String,
    pub services: Vec<ServiceReport>,
}

/// One LDNS round-trip time measured by a site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RttRow {
    /// The LDNS address or prefix.
    pub ldns: IpNet,
    /// The site that measured it.
    pub site: String,
    pub rtt_us: u32,
    pub protocol: RttProtocol,
    /// Seconds since it was measured, when sent.
    pub age_s: u32,
}

/// A chunk of a table that may need several frames: `first` starts a new table (the receiver
/// drops what it had once `last` arrives), `last` ends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk<T> {
    pub first: bool,
    pub last: bool,
    pub items: Vec<T>,
}

/// A message: the payload of one frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    Hello(Hello),
    /// The sender's Ed25519 signature, with its site key, over the handshake transcript.
    Auth([u8; SIG_LEN]),
    /// The session is refused or being closed, and why.
    Reject {
        code: RejectCode,
        detail: String,
    },
    Heartbeat {
        seq: u64,
    },
    SiteStatus(SiteStatus),
    ServiceStates(ServiceStates),
    RttRows(Chunk<RttRow>),
    Persistence(Chunk<PersistEntry>),
    /// A parent's ordered backup-parent list (empty: cleared).
    BackupParents {
        parent: String,
        backups: Vec<String>,
    },
    /// A backup parent offers to adopt the receiving child of `original_parent`.
    AdoptRequest {
        original_parent: String,
        backups: Vec<String>,
    },
    AdoptAccept {
        original_parent: String,
    },
    AdoptReject {
        original_parent: String,
        reason: String,
    },
}

/// The frame types (the header's type byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MessageType {
    Hello = 1,
    Auth = 2,
    Reject = 3,
    Heartbeat = 4,
    SiteStatus = 5,
    ServiceStates = 6,
    RttRows = 7,
    Persistence = 8,
    BackupParents = 9,
    AdoptRequest = 10,
    AdoptAccept = 11,
    AdoptReject = 12,
}

impl MessageType {
    pub fn from_code(code: u8) -> Option<MessageType> {
        use MessageType::{
            AdoptAccept, AdoptReject, AdoptRequest, Auth, BackupParents, Heartbeat, Hello,
            Persistence, Reject, RttRows, ServiceStates, SiteStatus,
        };
        Some(match code {
            1 => Hello,
            2 => Auth,
            3 => Reject,
            4 => Heartbeat,
            5 => SiteStatus,
            6 => ServiceStates,
            7 => RttRows,
            8 => Persistence,
            9 => BackupParents,
            10 => AdoptRequest,
            11 => AdoptAccept,
            12 => AdoptReject,
            _ => return None,
        })
    }
}

impl Message {
    pub fn kind(&self) -> MessageType {
        match self {
            Message::Hello(_) => MessageType::Hello,
            Message::Auth(_) => MessageType::Auth,
            Message::Reject { .. } => MessageType::Reject,
            Message::Heartbeat { .. } => MessageType::Heartbeat,
            Message::SiteStatus(_) => MessageType::SiteStatus,
            Message::ServiceStates(_) => MessageType::ServiceStates,
            Message::RttRows(_) => MessageType::RttRows,
            Message::Persistence(_) => MessageType::Persistence,
            Message::BackupParents { .. } => MessageType::BackupParents,
            Message::AdoptRequest { .. } => MessageType::AdoptRequest,
            Message::AdoptAccept { .. } => MessageType::AdoptAccept,
            Message::AdoptReject { .. } => MessageType::AdoptReject,
        }
    }
}

/// Why bytes are not a valid frame (or a message cannot be encoded).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    #[error("truncated frame: {needed} bytes needed, {have} available")]
    Truncated { needed: usize, have: usize },
    #[error("bad magic {0:02x?} (not a MEP peer?)")]
    BadMagic([u8; 2]),
    #[error("frame of {len} bytes exceeds the {max}-byte cap")]
    Oversized { len: usize, max: usize },
    #[error("unknown frame type {0}")]
    UnknownType(u8),
    #[error("malformed {kind:?} frame: {what}")]
    Malformed {
        kind: MessageType,
        what: &'static str,
    },
    #[error("{kind:?} frame has {extra} bytes after its payload")]
    TrailingBytes { kind: MessageType, extra: usize },
}

/// A decoded frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u8,
    pub kind: MessageType,
    pub len: usize,
}
