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

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use crate::health::state::{Bandwidth, ServiceState};
use crate::persist::PersistEntry;

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

/// Decodes a header, checking the magic, the type and the length cap.
pub fn decode_header(bytes: &[u8], max_payload: usize) -> Result<Header, FrameError> {
    if bytes.len() < HEADER_LEN {
        return Err(FrameError::Truncated {
            needed: HEADER_LEN,
            have: bytes.len(),
        });
    }
    if bytes[..2] != MAGIC {
        return Err(FrameError::BadMagic([bytes[0], bytes[1]]));
    }
    let version = bytes[2];
    let kind = MessageType::from_code(bytes[3]).ok_or(FrameError::UnknownType(bytes[3]))?;
    let len = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    if len > max_payload {
        return Err(FrameError::Oversized {
            len,
            max: max_payload,
        });
    }
    Ok(Header { version, kind, len })
}

/// Decodes one whole frame at the start of `bytes`: the frame's version, its message and the
/// bytes it took.
pub fn decode_frame(bytes: &[u8], max_payload: usize) -> Result<(u8, Message, usize), FrameError> {
    let header = decode_header(bytes, max_payload)?;
    let end = HEADER_LEN + header.len;
    if bytes.len() < end {
        return Err(FrameError::Truncated {
            needed: end,
            have: bytes.len(),
        });
    }
    let message = decode_payload(header.kind, &bytes[HEADER_LEN..end])?;
    Ok((header.version, message, end))
}

/// Decodes the payload of a frame of type `kind`.
pub fn decode_payload(kind: MessageType, payload: &[u8]) -> Result<Message, FrameError> {
    let mut r = Reader {
        buf: payload,
        pos: 0,
        kind,
    };
    let message = match kind {
        MessageType::Hello => {
            let n = r.u8()? as usize;
            if n == 0 || n > MAX_VERSIONS {
                return Err(r.bad("version count not in 1..=16"));
            }
            let versions = r.take(n)?.to_vec();
            Message::Hello(Hello {
                versions,
                site: r.site()?,
                peer: r.site()?,
                role: r.role()?,
                parent: r.opt(Reader::site)?,
                software: r.string(MAX_NAME)?,
                rtt_tolerance_ms: r.opt(Reader::u32)?,
                nonce: r.array()?,
                kx: r.array()?,
            })
        }
        MessageType::Auth => Message::Auth(r.array()?),
        MessageType::Reject => Message::Reject {
            code: RejectCode::from_code(r.u8()?),
            detail: r.string(MAX_DETAIL)?,
        },
        MessageType::Heartbeat => Message::Heartbeat { seq: r.u64()? },
        MessageType::SiteStatus => Message::SiteStatus(SiteStatus {
            site: r.site()?,
            role: r.role()?,
            parent: r.opt(Reader::site)?,
            up: r.bool()?,
        }),
        MessageType::ServiceStates => {
            let site = r.site()?;
            // name length (2) + up (1) + connections (8) + bandwidth (8)
            let services = r.list(19, |r| {
                Ok(ServiceReport {
                    name: r.string(MAX_NAME)?,
                    state: ServiceState {
                        up: r.bool()?,
                        connections: r.u64()?,
                        bandwidth: Bandwidth::from_bps(r.u64()?),
                    },
                })
            })?;
            Message::ServiceStates(ServiceStates { site, services })
        }
        MessageType::RttRows => {
            let (first, last) = (r.bool()?, r.bool()?);
            // prefix (6) + site length (2) + rtt (4) + protocol (1) + age (4)
            let items = r.list(17, |r| {
                Ok(RttRow {
                    ldns: r.prefix()?,
                    site: r.site()?,
                    rtt_us: r.u32()?,
                    protocol: RttProtocol::from_code(r.u8()?)
                        .ok_or(r.bad("unknown RTT protocol"))?,
                    age_s: r.u32()?,
                })
            })?;
            Message::RttRows(Chunk { first, last, items })
        }
        MessageType::Persistence => {
            let (first, last) = (r.bool()?, r.bool()?);
            // prefix (6) + two name lengths (4) + ttl (4)
            let items = r.list(14, |r| {
                Ok(PersistEntry {
                    client: r.prefix()?,
                    domain: r.string(MAX_NAME)?,
                    service: r.string(MAX_NAME)?,
                    ttl_s: r.u32()?,
                })
            })?;
            Message::Persistence(Chunk { first, last, items })
        }
        MessageType::BackupParents => Message::BackupParents {
            parent: r.site()?,
            backups: r.backups()?,
        },
        MessageType::AdoptRequest => Message::AdoptRequest {
            original_parent: r.site()?,
            backups: r.backups()?,
        },
        MessageType::AdoptAccept => Message::AdoptAccept {
            original_parent: r.site()?,
        },
        MessageType::AdoptReject => Message::AdoptReject {
            original_parent: r.site()?,
            reason: r.string(MAX_DETAIL)?,
        },
    };
    let extra = r.buf.len() - r.pos;
    if extra != 0 {
        return Err(FrameError::TrailingBytes { kind, extra });
    }
    Ok(message)
}

/// Encodes `message` as one frame of `version`; `Oversized` when its payload exceeds
/// `max_payload`, `Malformed` when a field breaks its cap (a name too long, too many backups).
pub fn encode(version: u8, message: &Message, max_payload: usize) -> Result<Vec<u8>, FrameError> {
    let kind = message.kind();
    let mut w = Writer {
        buf: Vec::with_capacity(64),
        kind,
    };
    w.buf.extend_from_slice(&MAGIC);
    w.buf.push(version);
    w.buf.push(kind as u8);
    w.buf.extend_from_slice(&[0; 4]);
    match message {
        Message::Hello(h) => {
            if h.versions.is_empty() || h.versions.len() > MAX_VERSIONS {
                return Err(w.bad("version count not in 1..=16"));
            }
            w.buf.push(h.versions.len() as u8);
            w.buf.extend_from_slice(&h.versions);
            w.site(&h.site)?;
            w.site(&h.peer)?;
            w.buf.push(h.role.code());
            w.opt_site(h.parent.as_deref())?;
            w.string(&h.software, MAX_NAME)?;
            match h.rtt_tolerance_ms {
                None => w.buf.push(0),
                Some(t) => {
                    w.buf.push(1);
                    w.buf.extend_from_slice(&t.to_be_bytes());
                }
            }
            w.buf.extend_from_slice(&h.nonce);
            w.buf.extend_from_slice(&h.kx);
        }
        Message::Auth(mac) => w.buf.extend_from_slice(mac),
        Message::Reject { code, detail } => {
            w.buf.push(code.code());
            w.string(truncate(detail, MAX_DETAIL), MAX_DETAIL)?;
        }
        Message::Heartbeat { seq } => w.buf.extend_from_slice(&seq.to_be_bytes()),
        Message::SiteStatus(s) => {
            w.site(&s.site)?;
            w.buf.push(s.role.code());
            w.opt_site(s.parent.as_deref())?;
            w.buf.push(u8::from(s.up));
        }
        Message::ServiceStates(s) => {
            w.site(&s.site)?;
            w.count(s.services.len())?;
            for svc in &s.services {
                w.string(&svc.name, MAX_NAME)?;
                w.buf.push(u8::from(svc.state.up));
                w.buf
                    .extend_from_slice(&svc.state.connections.to_be_bytes());
                w.buf
                    .extend_from_slice(&svc.state.bandwidth.bps().to_be_bytes());
            }
        }
        Message::RttRows(c) => {
            w.buf.push(u8::from(c.first));
            w.buf.push(u8::from(c.last));
            w.count(c.items.len())?;
            for row in &c.items {
                w.prefix(&row.ldns);
                w.site(&row.site)?;
                w.buf.extend_from_slice(&row.rtt_us.to_be_bytes());
                w.buf.push(row.protocol.code());
                w.buf.extend_from_slice(&row.age_s.to_be_bytes());
            }
        }
        Message::Persistence(c) => {
            w.buf.push(u8::from(c.first));
            w.buf.push(u8::from(c.last));
            w.count(c.items.len())?;
            for e in &c.items {
                w.prefix(&e.client);
                w.string(&e.domain, MAX_NAME)?;
                w.string(&e.service, MAX_NAME)?;
                w.buf.extend_from_slice(&e.ttl_s.to_be_bytes());
            }
        }
        Message::BackupParents { parent, backups } => {
            w.site(parent)?;
            w.backups(backups)?;
        }
        Message::AdoptRequest {
            original_parent,
            backups,
        } => {
            w.site(original_parent)?;
            w.backups(backups)?;
        }
        Message::AdoptAccept { original_parent } => w.site(original_parent)?,
        Message::AdoptReject {
            original_parent,
            reason,
        } => {
            w.site(original_parent)?;
            w.string(truncate(reason, MAX_DETAIL), MAX_DETAIL)?;
        }
    }
    let len = w.buf.len() - HEADER_LEN;
    if len > max_payload {
        return Err(FrameError::Oversized {
            len,
            max: max_payload,
        });
    }
    w.buf[4..8].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(w.buf)
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    kind: MessageType,
}

impl<'a> Reader<'a> {
    fn bad(&self, what: &'static str) -> FrameError {
        FrameError::Malformed {
            kind: self.kind,
            what,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], FrameError> {
        let left = self.buf.len() - self.pos;
        if n > left {
            return Err(FrameError::Truncated {
                needed: HEADER_LEN + self.pos + n,
                have: HEADER_LEN + self.buf.len(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], FrameError> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, FrameError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, FrameError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, FrameError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, FrameError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    fn bool(&mut self) -> Result<bool, FrameError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(self.bad("bool not 0 or 1")),
        }
    }

    fn role(&mut self) -> Result<Role, FrameError> {
        Role::from_code(self.u8()?).ok_or(self.bad("unknown role"))
    }

    fn string(&mut self, max: usize) -> Result<String, FrameError> {
        let len = self.u16()? as usize;
        if len > max {
            return Err(self.bad("string longer than its cap"));
        }
        let bytes = self.take(len)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| self.bad("string not UTF-8"))
    }

    fn site(&mut self) -> Result<String, FrameError> {
        let s = self.string(MAX_SITE_NAME)?;
        if s.is_empty() {
            return Err(self.bad("empty site name"));
        }
        Ok(s)
    }

    fn opt<T>(
        &mut self,
        f: fn(&mut Self) -> Result<T, FrameError>,
    ) -> Result<Option<T>, FrameError> {
        if self.bool()? {
            f(self).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A u32 count of items of at least `min_size` bytes each, checked against the bytes left
    /// before anything is allocated.
    fn list<T>(
        &mut self,
        min_size: usize,
        mut item: impl FnMut(&mut Self) -> Result<T, FrameError>,
    ) -> Result<Vec<T>, FrameError> {
        let n = self.u32()? as usize;
        let left = self.buf.len() - self.pos;
        if n.saturating_mul(min_size) > left {
            return Err(self.bad("item count larger than the payload can hold"));
        }
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(item(self)?);
        }
        Ok(items)
    }

    fn backups(&mut self) -> Result<Vec<String>, FrameError> {
        let n = self.u8()? as usize;
        if n > MAX_BACKUPS {
            return Err(self.bad("more than 5 backup parents"));
        }
        (0..n).map(|_| self.site()).collect()
    }

    fn prefix(&mut self) -> Result<IpNet, FrameError> {
        let family = self.u8()?;
        let len = self.u8()?;
        let addr: IpAddr = match family {
            4 => Ipv4Addr::from(self.array::<4>()?).into(),
            6 => Ipv6Addr::from(self.array::<16>()?).into(),
            _ => return Err(self.bad("unknown address family")),
        };
        IpNet::new(addr, len).map_err(|_| self.bad("prefix length too long"))
    }
}

struct Writer {
    buf: Vec<u8>,
    kind: MessageType,
}

impl Writer {
    fn bad(&self, what: &'static str) -> FrameError {
        FrameError::Malformed {
            kind: self.kind,
            what,
        }
    }

    fn string(&mut self, s: &str, max: usize) -> Result<(), FrameError> {
        if s.len() > max {
            return Err(self.bad("string longer than its cap"));
        }
        self.buf.extend_from_slice(&(s.len() as u16).to_be_bytes());
        self.buf.extend_from_slice(s.as_bytes());
        Ok(())
    }

    fn site(&mut self, s: &str) -> Result<(), FrameError> {
        if s.is_empty() {
            return Err(self.bad("empty site name"));
        }
        self.string(s, MAX_SITE_NAME)
    }

    fn opt_site(&mut self, s: Option<&str>) -> Result<(), FrameError> {
        match s {
            None => {
                self.buf.push(0);
                Ok(())
            }
            Some(s) => {
                self.buf.push(1);
                self.site(s)
            }
        }
    }

    fn count(&mut self, n: usize) -> Result<(), FrameError> {
        let n = u32::try_from(n).map_err(|_| self.bad("too many items"))?;
        self.buf.extend_from_slice(&n.to_be_bytes());
        Ok(())
    }

    fn backups(&mut self, list: &[String]) -> Result<(), FrameError> {
        if list.len() > MAX_BACKUPS {
            return Err(self.bad("more than 5 backup parents"));
        }
        self.buf.push(list.len() as u8);
        for s in list {
            self.site(s)?;
        }
        Ok(())
    }

    fn prefix(&mut self, net: &IpNet) {
        match net {
            IpNet::V4(n) => {
                self.buf.push(4);
                self.buf.push(n.prefix_len());
                self.buf.extend_from_slice(&n.addr().octets());
            }
            IpNet::V6(n) => {
                self.buf.push(6);
                self.buf.push(n.prefix_len());
                self.buf.extend_from_slice(&n.addr().octets());
            }
        }
    }
}

/// Encoded size of one RTT row (to split tables into frames under the cap).
pub fn rtt_row_len(row: &RttRow) -> usize {
    prefix_len(&row.ldns) + 2 + row.site.len() + 4 + 1 + 4
}

/// Encoded size of one persistence entry.
pub fn persist_entry_len(e: &PersistEntry) -> usize {
    prefix_len(&e.client) + 2 + e.domain.len() + 2 + e.service.len() + 4
}

fn prefix_len(net: &IpNet) -> usize {
    match net {
        IpNet::V4(_) => 6,
        IpNet::V6(_) => 18,
    }
}

/// Splits `items` into chunks whose frames stay under `max_payload` (room is left for the
/// chunk's own fields). An empty table is one empty chunk, so that the receiver clears its copy.
pub fn chunks<T: Clone>(
    items: &[T],
    max_payload: usize,
    len: impl Fn(&T) -> usize,
) -> Vec<Chunk<T>> {
    let budget = max_payload.saturating_sub(6).max(1);
    let mut out: Vec<Chunk<T>> = Vec::new();
    let mut current = Vec::new();
    let mut size = 0;
    for item in items {
        let l = len(item);
        if !current.is_empty() && size + l > budget {
            out.push(Chunk {
                first: out.is_empty(),
                last: false,
                items: std::mem::take(&mut current),
            });
            size = 0;
        }
        size += l;
        current.push(item.clone());
    }
    out.push(Chunk {
        first: out.is_empty(),
        last: true,
        items: current,
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::load::{MAX_LOAD, UNKNOWN_LOAD};

    fn hello() -> Hello {
        Hello {
            versions: vec![1, 2],
            site: "SiteP1".into(),
            peer: "SiteP2".into(),
            role: Role::Parent,
            parent: None,
            software: "gslb 0.1.0".into(),
            rtt_tolerance_ms: Some(5),
            nonce: [7; NONCE_LEN],
            kx: [8; KX_LEN],
        }
    }

    fn samples() -> Vec<Message> {
        vec![
            Message::Hello(hello()),
            Message::Hello(Hello {
                role: Role::Child,
                parent: Some("SiteP1".into()),
                rtt_tolerance_ms: None,
                ..hello()
            }),
            Message::Auth([9; SIG_LEN]),
            Message::Reject {
                code: RejectCode::BadAuth,
                detail: "proof mismatch".into(),
            },
            Message::Reject {
                code: RejectCode::Other(200),
                detail: String::new(),
            },
            Message::Heartbeat { seq: u64::MAX },
            Message::SiteStatus(SiteStatus {
                site: "child1".into(),
                role: Role::Child,
                parent: Some("SiteP2".into()),
                up: true,
            }),
            Message::ServiceStates(ServiceStates {
                site: "SiteP1".into(),
                services: vec![
                    ServiceReport {
                        name: "web-1".into(),
                        state: ServiceState {
                            up: true,
                            connections: 12,
                            bandwidth: Bandwidth::from_bps(1_000_000),
                        },
                    },
                    ServiceReport {
                        name: "wéb-2".into(),
                        state: ServiceState::DOWN,
                    },
                ],
            }),
            Message::RttRows(Chunk {
                first: true,
                last: false,
                items: vec![
                    RttRow {
                        ldns: "192.0.2.0/24".parse().unwrap(),
                        site: "SiteP1".into(),
                        rtt_us: 12_345,
                        protocol: RttProtocol::Dns,
                        age_s: 3,
                    },
                    RttRow {
                        ldns: "2001:db8::/48".parse().unwrap(),
                        site: "SiteP1".into(),
                        rtt_us: 1,
                        protocol: RttProtocol::Icmp,
                        age_s: 0,
                    },
                ],
            }),
            Message::Persistence(Chunk {
                first: true,
                last: true,
                items: vec![PersistEntry {
                    client: "198.51.100.7/32".parse().unwrap(),
                    domain: "www.example.com".into(),
                    service: "web-1".into(),
                    ttl_s: 120,
                }],
            }),
            Message::Persistence(Chunk {
                first: true,
                last: true,
                items: vec![],
            }),
            Message::BackupParents {
                parent: "SiteP1".into(),
                backups: vec!["SiteP2".into(), "SiteP3".into()],
            },
            Message::BackupParents {
                parent: "SiteP1".into(),
                backups: vec![],
            },
            Message::AdoptRequest {
                original_parent: "SiteP1".into(),
                backups: vec!["SiteP2".into()],
            },
            Message::AdoptAccept {
                original_parent: "SiteP1".into(),
            },
            Message::AdoptReject {
                original_parent: "SiteP1".into(),
                reason: "SiteP1 is up".into(),
            },
        ]
    }

    #[test]
    fn every_message_round_trips() {
        for m in samples() {
            let bytes = encode(3, &m, DEFAULT_MAX_PAYLOAD).unwrap();
            let (version, back, used) = decode_frame(&bytes, DEFAULT_MAX_PAYLOAD).unwrap();
            assert_eq!((version, &back, used), (3, &m, bytes.len()), "{m:?}");
        }
    }

    fn services(states: &[ServiceState]) -> Message {
        Message::ServiceStates(ServiceStates {
            site: "P".into(),
            services: states
                .iter()
                .map(|&state| ServiceReport {
                    name: "s".into(),
                    state,
                })
                .collect(),
        })
    }

    /// Each kind of service state comes back as it was sent: DOWN, zero, the markers, and the
    /// largest real values; kbit/s as the engine reads them, bit/s on the wire.
    #[test]
    fn service_states_round_trip_with_their_markers() {
        let state = |up, connections, bandwidth| ServiceState {
            up,
            connections,
            bandwidth,
        };
        let cases = [
            (ServiceState::DOWN, 0, 0),
            (ServiceState::UP, 0, 0),
            (state(true, 7, Bandwidth::from_kbps(5)), 5, 5_000),
            (
                state(true, UNKNOWN_LOAD, Bandwidth::UNKNOWN),
                UNKNOWN_LOAD,
                UNKNOWN_LOAD,
            ),
            (state(true, 1, Bandwidth::FULL), u64::MAX, u64::MAX),
            (
                state(false, MAX_LOAD, Bandwidth::from_kbps(MAX_LOAD)),
                MAX_LOAD / 1000,
                MAX_LOAD,
            ),
            // A value no build of ours sends (not whole kbit/s) is kept to the bit.
            (state(true, 0, Bandwidth::from_bps(1_500)), 1, 1_500),
        ];
        for (sent, kbps, bps) in cases {
            let m = services(&[sent]);
            let bytes = encode(3, &m, DEFAULT_MAX_PAYLOAD).unwrap();
            let (_, back, _) = decode_frame(&bytes, DEFAULT_MAX_PAYLOAD).unwrap();
            assert_eq!(back, m, "{sent:?}");
            assert_eq!(sent.bandwidth.kbps(), kbps, "{sent:?}");
            // The bandwidth is the frame's last 8 bytes.
            let wire = u64::from_be_bytes(bytes[bytes.len() - 8..].try_into().unwrap());
            assert_eq!(wire, bps, "{sent:?}");
            assert_eq!(encode(3, &back, DEFAULT_MAX_PAYLOAD).unwrap(), bytes);
        }
    }

    /// The ServiceStates payload, byte by byte (docs/mep.md: site, count, then name, up,
    /// connections u64, bandwidth bit/s u64 per service): a change of the wire fails here.
    #[test]
    fn service_states_wire_bytes() {
        let m = services(&[
            ServiceState {
                up: true,
                connections: 0x0102,
                bandwidth: Bandwidth::from_kbps(3),
            },
            ServiceState {
                up: false,
                connections: UNKNOWN_LOAD,
                bandwidth: Bandwidth::FULL,
            },
        ]);
        let bytes = encode(2, &m, DEFAULT_MAX_PAYLOAD).unwrap();
        let mut want = vec![b'M', b'P', 2, 6];
        let payload: Vec<u8> = [
            &[0, 1, b'P'][..],                                 // site
            &[0, 0, 0, 2],                                     // services: count u32
            &[0, 1, b's', 1],                                  // name, up
            &[0, 0, 0, 0, 0, 0, 1, 2],                         // connections
            &[0, 0, 0, 0, 0, 0, 0x0b, 0xb8],                   // 3 kbit/s = 3000 bit/s
            &[0, 1, b's', 0],                                  // name, down
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe], // unknown
            &[0xff; 8],                                        // full
        ]
        .concat();
        want.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        want.extend_from_slice(&payload);
        assert_eq!(bytes, want);
    }

    #[test]
    fn every_strict_prefix_is_truncated_never_a_panic() {
        for m in samples() {
            let bytes = encode(1, &m, DEFAULT_MAX_PAYLOAD).unwrap();
            for cut in 0..bytes.len() {
                match decode_frame(&bytes[..cut], DEFAULT_MAX_PAYLOAD) {
                    Err(FrameError::Truncated { .. }) => {}
                    other => panic!("{m:?} cut at {cut}: {other:?}"),
                }
            }
            // A payload cut short but with a consistent header: truncated inside the payload.
            if bytes.len() > HEADER_LEN {
                let mut short = bytes[..bytes.len() - 1].to_vec();
                let len = (short.len() - HEADER_LEN) as u32;
                short[4..8].copy_from_slice(&len.to_be_bytes());
                assert!(decode_frame(&short, DEFAULT_MAX_PAYLOAD).is_err(), "{m:?}");
            }
        }
    }

    #[test]
    fn bad_headers_are_typed_errors() {
        let mut bytes = encode(1, &Message::Heartbeat { seq: 1 }, 64).unwrap();
        assert_eq!(
            decode_frame(&bytes, 7),
            Err(FrameError::Oversized { len: 8, max: 7 })
        );
        bytes[3] = 99;
        assert_eq!(decode_frame(&bytes, 64), Err(FrameError::UnknownType(99)));
        bytes[0] = b'X';
        assert_eq!(decode_frame(&bytes, 64), Err(FrameError::BadMagic(*b"XP")));
        // The cap is checked on the header alone, before any payload arrives.
        let header = [b'M', b'P', 1, 6, 0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            decode_header(&header, DEFAULT_MAX_PAYLOAD),
            Err(FrameError::Oversized { .. })
        ));
    }

    #[test]
    fn malformed_payloads_are_typed_errors() {
        let frame = |kind: u8, payload: &[u8]| {
            let mut b = vec![b'M', b'P', 1, kind];
            b.extend_from_slice(&(payload.len() as u32).to_be_bytes());
            b.extend_from_slice(payload);
            b
        };
        let malformed = |b: Vec<u8>| match decode_frame(&b, DEFAULT_MAX_PAYLOAD) {
            Err(FrameError::Malformed { what, .. }) => what,
            other => panic!("{other:?}"),
        };
        // A bool of 2.
        assert_eq!(
            malformed(frame(5, b"\x00\x01a\x01\x00\x02")),
            "bool not 0 or 1"
        );
        // Unknown role.
        assert_eq!(
            malformed(frame(5, b"\x00\x01a\x09\x00\x01")),
            "unknown role"
        );
        // Invalid UTF-8 in a site name.
        assert_eq!(malformed(frame(11, b"\x00\x01\xff")), "string not UTF-8");
        // Empty site name.
        assert_eq!(malformed(frame(11, b"\x00\x00")), "empty site name");
        // A site name over the cap.
        let mut long = vec![0, 64];
        long.extend_from_slice(&[b'a'; 64]);
        assert_eq!(malformed(frame(11, &long)), "string longer than its cap");
        // A count of four billion services in a few bytes: refused before allocating.
        assert_eq!(
            malformed(frame(6, b"\x00\x01a\xff\xff\xff\xff")),
            "item count larger than the payload can hold"
        );
        // Six backups.
        let mut six = b"\x00\x01a\x06".to_vec();
        for _ in 0..6 {
            six.extend_from_slice(b"\x00\x01b");
        }
        assert_eq!(malformed(frame(9, &six)), "more than 5 backup parents");
        // A /33 IPv4 prefix and an unknown family.
        assert_eq!(
            malformed(frame(
                8,
                b"\x01\x01\x00\x00\x00\x01\x04\x21\x01\x02\x03\x04\x00\x00\x00\x00\x00\x00\x00\x00"
            )),
            "prefix length too long"
        );
        assert_eq!(
            malformed(frame(
                8,
                b"\x01\x01\x00\x00\x00\x01\x05\x20\x01\x02\x03\x04\x00\x00\x00\x00\x00\x00\x00\x00"
            )),
            "unknown address family"
        );
        // No versions in a Hello.
        assert_eq!(malformed(frame(1, b"\x00")), "version count not in 1..=16");
        // Trailing bytes.
        assert_eq!(
            decode_frame(&frame(4, &[0; 9]), DEFAULT_MAX_PAYLOAD),
            Err(FrameError::TrailingBytes {
                kind: MessageType::Heartbeat,
                extra: 1
            })
        );
    }

    #[test]
    fn encoder_refuses_what_the_decoder_would() {
        let long = "x".repeat(MAX_SITE_NAME + 1);
        let m = Message::AdoptAccept {
            original_parent: long,
        };
        assert!(matches!(
            encode(1, &m, DEFAULT_MAX_PAYLOAD),
            Err(FrameError::Malformed { .. })
        ));
        let m = Message::BackupParents {
            parent: "p".into(),
            backups: vec!["b".into(); 6],
        };
        assert!(matches!(
            encode(1, &m, DEFAULT_MAX_PAYLOAD),
            Err(FrameError::Malformed { .. })
        ));
        let m = Message::Heartbeat { seq: 0 };
        assert_eq!(
            encode(1, &m, 4),
            Err(FrameError::Oversized { len: 8, max: 4 })
        );
        // Over-long reasons are cut (on a character boundary), not refused.
        let m = Message::Reject {
            code: RejectCode::Closing,
            detail: "é".repeat(MAX_DETAIL),
        };
        let (_, back, _) = decode_frame(
            &encode(1, &m, DEFAULT_MAX_PAYLOAD).unwrap(),
            DEFAULT_MAX_PAYLOAD,
        )
        .unwrap();
        let Message::Reject { detail, .. } = back else {
            panic!()
        };
        assert_eq!(detail.len(), MAX_DETAIL);
    }

    #[test]
    fn chunks_stay_under_the_cap_and_cover_everything() {
        let rows: Vec<RttRow> = (0..1000u32)
            .map(|i| RttRow {
                ldns: IpNet::new(Ipv4Addr::from(i << 8).into(), 24).unwrap(),
                site: "SiteP1".into(),
                rtt_us: i,
                protocol: RttProtocol::Icmp,
                age_s: 0,
            })
            .collect();
        let max = 2000;
        let parts = chunks(&rows, max, rtt_row_len);
        assert!(parts.len() > 10);
        assert!(parts[0].first && parts.iter().skip(1).all(|c| !c.first));
        assert!(parts.last().unwrap().last && parts.iter().rev().skip(1).all(|c| !c.last));
        let mut all = Vec::new();
        for c in parts {
            let bytes = encode(1, &Message::RttRows(c.clone()), max).expect("under the cap");
            assert!(bytes.len() <= HEADER_LEN + max);
            all.extend(c.items);
        }
        assert_eq!(all, rows);
        let empty: Vec<Chunk<RttRow>> = chunks(&[], max, rtt_row_len);
        assert_eq!(
            empty,
            vec![Chunk {
                first: true,
                last: true,
                items: vec![]
            }]
        );
    }
}
