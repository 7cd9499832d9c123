//! One MEP session: the handshake (version negotiation and mutual authentication), then a reader
//! and a writer over the same stream, until either fails or the controller closes the session.
//!
//! Everything here is generic over the stream (plain TCP or TLS). After the two Hellos every
//! frame is sealed with the session keys (`auth`): a frame that fails its tag (replayed,
//! reordered, changed, injected) closes the session (`integrity`).
//! Every read and write is bounded in time: the handshake by `handshake_timeout`, each frame
//! written by `write_timeout`, and the reader declares the peer dead when no frame at all (the
//! peer sends a heartbeat every `heartbeat` even when idle) arrived for `dead_after`.

use std::{
    collections::BTreeMap,
    io,
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use tokio::io::{AsyncRead, AsyncReadExt};

use super::{
    auth::{Opener, Sealer, TAG_LEN},
    frame::{self, FrameError, HEADER_LEN, HELLO_VERSION, Message, MessageType, RejectCode},
};

mod handshake;
mod run;
pub use handshake::{
    Established, Identity, LocalHello, handshake_acceptor, handshake_initiator, negotiate,
};
pub use run::{
    Audience, Outbound, Part, Relay, SessionChannels, SessionCmd, SessionParams, run_session,
};

/// Why a session ended (or never came up); each has a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CloseReason {
    BadAuth,
    NoCommonVersion,
    UnknownSite,
    NotAllowed,
    Oversized,
    UnknownType,
    Malformed,
    Truncated,
    Unexpected,
    DeadPeer,
    WriteTimeout,
    HandshakeTimeout,
    QueueFull,
    PeerRejected,
    PeerClosed,
    Io,
    ConnectFailed,
    Replaced,
    AdoptRejected,
    Unwanted,
    Shutdown,
    Tls,
    Integrity,
    WrongSource,
    PreauthLimit,
}

impl CloseReason {
    pub const ALL: [CloseReason; 25] = [
        CloseReason::BadAuth,
        CloseReason::NoCommonVersion,
        CloseReason::UnknownSite,
        CloseReason::NotAllowed,
        CloseReason::Oversized,
        CloseReason::UnknownType,
        CloseReason::Malformed,
        CloseReason::Truncated,
        CloseReason::Unexpected,
        CloseReason::DeadPeer,
        CloseReason::WriteTimeout,
        CloseReason::HandshakeTimeout,
        CloseReason::QueueFull,
        CloseReason::PeerRejected,
        CloseReason::PeerClosed,
        CloseReason::Io,
        CloseReason::ConnectFailed,
        CloseReason::Replaced,
        CloseReason::AdoptRejected,
        CloseReason::Unwanted,
        CloseReason::Shutdown,
        CloseReason::Tls,
        CloseReason::Integrity,
        CloseReason::WrongSource,
        CloseReason::PreauthLimit,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::BadAuth => "bad_auth",
            CloseReason::NoCommonVersion => "no_common_version",
            CloseReason::UnknownSite => "unknown_site",
            CloseReason::NotAllowed => "not_allowed",
            CloseReason::Oversized => "oversized",
            CloseReason::UnknownType => "unknown_type",
            CloseReason::Malformed => "malformed",
            CloseReason::Truncated => "truncated",
            CloseReason::Unexpected => "unexpected",
            CloseReason::DeadPeer => "dead_peer",
            CloseReason::WriteTimeout => "write_timeout",
            CloseReason::HandshakeTimeout => "handshake_timeout",
            CloseReason::QueueFull => "queue_full",
            CloseReason::PeerRejected => "peer_rejected",
            CloseReason::PeerClosed => "peer_closed",
            CloseReason::Io => "io",
            CloseReason::ConnectFailed => "connect_failed",
            CloseReason::Replaced => "replaced",
            CloseReason::AdoptRejected => "adopt_rejected",
            CloseReason::Unwanted => "unwanted",
            CloseReason::Shutdown => "shutdown",
            CloseReason::Tls => "tls",
            CloseReason::Integrity => "integrity",
            CloseReason::WrongSource => "wrong_source",
            CloseReason::PreauthLimit => "preauth_limit",
        }
    }

    /// The code sent to the peer when we close for this reason.
    pub fn reject_code(self) -> RejectCode {
        match self {
            CloseReason::BadAuth => RejectCode::BadAuth,
            CloseReason::NoCommonVersion => RejectCode::NoCommonVersion,
            CloseReason::UnknownSite => RejectCode::UnknownSite,
            CloseReason::NotAllowed
            | CloseReason::AdoptRejected
            | CloseReason::Unwanted
            | CloseReason::WrongSource => RejectCode::NotAllowed,
            CloseReason::Oversized
            | CloseReason::UnknownType
            | CloseReason::Malformed
            | CloseReason::Truncated
            | CloseReason::Unexpected
            | CloseReason::Integrity => RejectCode::Malformed,
            _ => RejectCode::Closing,
        }
    }
}

/// Per-reason close counters and traffic counters of one node.
#[derive(Debug, Default)]
pub struct Counters {
    closes: [AtomicU64; CloseReason::ALL.len()],
    pub frames_in: AtomicU64,
    pub frames_out: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub handshakes: AtomicU64,
    pub accepted: AtomicU64,
    pub dialed: AtomicU64,
    pub tolerance_mismatches: AtomicU64,
    pub refused_statements: AtomicU64,
}

impl Counters {
    pub fn closed(&self, reason: CloseReason) {
        self.closes[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn closes(&self) -> BTreeMap<&'static str, u64> {
        CloseReason::ALL
            .iter()
            .map(|r| (r.as_str(), self.closes[*r as usize].load(Ordering::Relaxed)))
            .collect()
    }

    pub(super) fn sent(&self, bytes: usize) {
        self.frames_out.fetch_add(1, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub(super) fn received(&self, bytes: usize) {
        self.frames_in.fetch_add(1, Ordering::Relaxed);
        self.bytes_in.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

/// Why a session failed, with the details for the log; [`SessionError::reason`] names its counter.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    #[error("connect to {addr}: {source}")]
    Connect {
        addr: std::net::SocketAddr,
        source: io::Error,
    },
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    #[error("peer closed the connection")]
    Closed,
    #[error("{0}")]
    Frame(#[from] FrameError),
    #[error("frame version {got}, the link speaks {expected}")]
    WrongFrameVersion { got: u8, expected: u8 },
    #[error("unexpected {0:?} frame")]
    Unexpected(MessageType),
    #[error("authentication failed: {0}")]
    BadAuth(&'static str),
    #[error("no common protocol version (ours {ours:?}, theirs {theirs:?})")]
    NoCommonVersion { ours: Vec<u8>, theirs: Vec<u8> },
    #[error("{0}")]
    UnknownSite(String),
    #[error("{0}")]
    NotAllowed(String),
    #[error("handshake not done within {0:?}")]
    HandshakeTimeout(Duration),
    #[error("no frame for {0:?}: peer dead")]
    DeadPeer(Duration),
    #[error("a write blocked for {0:?}")]
    WriteTimeout(Duration),
    #[error("peer refused or closed the link: {code:?}: {detail}")]
    PeerRejected { code: RejectCode, detail: String },
    #[error("closed here: {detail}")]
    Local { reason: CloseReason, detail: String },
    #[error("TLS: {0}")]
    Tls(String),
    #[error("frame {seq} failed its MAC (replayed, reordered, changed or injected)")]
    Integrity { seq: u64 },
    #[error("{0}")]
    WrongSource(String),
    #[error(
        "the peer sent a MEP 1 Hello (one shared secret); this site speaks MEP {HELLO_VERSION} (per-site keys) only: upgrade the peer"
    )]
    OldPeer,
    #[error("the peer's key share is not a usable X25519 key")]
    BadKeyShare,
}

impl SessionError {
    pub fn reason(&self) -> CloseReason {
        match self {
            SessionError::Connect { .. } => CloseReason::ConnectFailed,
            SessionError::Io(_) => CloseReason::Io,
            SessionError::Closed => CloseReason::PeerClosed,
            SessionError::Frame(FrameError::Oversized { .. }) => CloseReason::Oversized,
            SessionError::Frame(FrameError::UnknownType(_)) => CloseReason::UnknownType,
            SessionError::Frame(FrameError::Truncated { .. }) => CloseReason::Truncated,
            SessionError::Frame(_) | SessionError::WrongFrameVersion { .. } => {
                CloseReason::Malformed
            }
            SessionError::Unexpected(_) => CloseReason::Unexpected,
            SessionError::BadAuth(_) => CloseReason::BadAuth,
            SessionError::NoCommonVersion { .. } => CloseReason::NoCommonVersion,
            SessionError::UnknownSite(_) => CloseReason::UnknownSite,
            SessionError::NotAllowed(_) => CloseReason::NotAllowed,
            SessionError::HandshakeTimeout(_) => CloseReason::HandshakeTimeout,
            SessionError::DeadPeer(_) => CloseReason::DeadPeer,
            SessionError::WriteTimeout(_) => CloseReason::WriteTimeout,
            SessionError::PeerRejected { .. } => CloseReason::PeerRejected,
            SessionError::Local { reason, .. } => *reason,
            SessionError::Tls(_) => CloseReason::Tls,
            SessionError::Integrity { .. } => CloseReason::Integrity,
            SessionError::WrongSource(_) => CloseReason::WrongSource,
            SessionError::OldPeer => CloseReason::NoCommonVersion,
            SessionError::BadKeyShare => CloseReason::BadAuth,
        }
    }
}

/// Reads the bytes of one frame and `trailer` bytes after it (its MAC tag), the header's length
/// checked against `max_payload` before the payload is read. End of stream before a frame is
/// [`SessionError::Closed`]; inside a frame, a truncated frame.
pub(super) async fn read_raw<R: AsyncRead + Unpin>(
    r: &mut R,
    max_payload: usize,
    trailer: usize,
) -> Result<(frame::Header, Vec<u8>), SessionError> {
    let mut header = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        let n = r.read(&mut header[got..]).await?;
        if n == 0 {
            return Err(if got == 0 {
                SessionError::Closed
            } else {
                FrameError::Truncated {
                    needed: HEADER_LEN,
                    have: got,
                }
                .into()
            });
        }
        got += n;
    }
    let h = frame::decode_header(&header, max_payload)?;
    let mut bytes = vec![0u8; HEADER_LEN + h.len + trailer];
    bytes[..HEADER_LEN].copy_from_slice(&header);
    let mut got = HEADER_LEN;
    while got < bytes.len() {
        let n = r.read(&mut bytes[got..]).await?;
        if n == 0 {
            return Err(FrameError::Truncated {
                needed: bytes.len(),
                have: got,
            }
            .into());
        }
        got += n;
    }
    Ok((h, bytes))
}

/// Reads one unsealed handshake frame (a Hello, or a Reject answering one): its version, its
/// message and its bytes (the transcript needs them). A MEP 1 Hello is [`SessionError::OldPeer`].
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max_payload: usize,
) -> Result<(u8, Message, Vec<u8>), SessionError> {
    let (h, bytes) = read_raw(r, max_payload, 0).await?;
    if h.kind == MessageType::Hello && h.version == 0 {
        return Err(SessionError::OldPeer);
    }
    let message = frame::decode_payload(h.kind, &bytes[HEADER_LEN..])?;
    Ok((h.version, message, bytes))
}

/// Reads one sealed frame: its tag is checked (in sequence) before the payload is decoded.
/// Returns the frame's version, its message and its length on the wire.
pub async fn read_sealed<R: AsyncRead + Unpin>(
    r: &mut R,
    max_payload: usize,
    opener: &mut Opener,
) -> Result<(u8, Message, usize), SessionError> {
    let (h, bytes) = read_raw(r, max_payload, TAG_LEN).await?;
    let (frame_bytes, tag) = bytes.split_at(bytes.len() - TAG_LEN);
    let seq = opener.next_seq();
    if !opener.open(frame_bytes, tag) {
        return Err(SessionError::Integrity { seq });
    }
    let message = frame::decode_payload(h.kind, &frame_bytes[HEADER_LEN..])?;
    Ok((h.version, message, bytes.len()))
}

/// A frame of `version` with its tag, ready to write.
pub fn seal(
    version: u8,
    m: &Message,
    max_payload: usize,
    sealer: &mut Sealer,
) -> Result<Vec<u8>, FrameError> {
    let mut bytes = frame::encode(version, m, max_payload)?;
    let tag = sealer.seal(&bytes);
    bytes.extend_from_slice(&tag);
    Ok(bytes)
}
