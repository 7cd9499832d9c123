//! One MEP link: the handshake (version negotiation and mutual authentication), then a reader
//! and a writer over the same stream, until either fails or the controller closes the link.
//!
//! Everything here is generic over the stream (plain TCP or TLS). After the two Hellos every
//! frame is sealed with the link's session keys (`auth`): a frame that fails its tag (replayed,
//! reordered, changed, injected) closes the link (`integrity`).
//! Every read and write is bounded in time: the handshake by `handshake_timeout`, each frame
//! written by `write_timeout`, and the reader declares the peer dead when no frame at all (the
//! peer sends a heartbeat every `heartbeat` even when idle) arrived for `dead_after`.

use std::{
    collections::{BTreeMap, HashMap},
    io,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    sync::{mpsc, oneshot, watch},
};

use super::{
    auth::{self, Ephemeral, Opener, PublicKey, Sealer, SessionKeys, Side, SiteKey, TAG_LEN},
    frame::{
        self, FrameError, HEADER_LEN, HELLO_VERSION, Hello, KX_LEN, Message, MessageType,
        PersistEntry, RejectCode, RttRow, ServiceStates, SiteStatus,
    },
    node::Event,
};

/// Why a link ended (or never came up); each has a counter.
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

    fn sent(&self, bytes: usize) {
        self.frames_out.fetch_add(1, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    fn received(&self, bytes: usize) {
        self.frames_in.fetch_add(1, Ordering::Relaxed);
        self.bytes_in.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

/// Why a link failed, with the details for the log; [`LinkError::reason`] names its counter.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
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

impl LinkError {
    pub fn reason(&self) -> CloseReason {
        match self {
            LinkError::Connect { .. } => CloseReason::ConnectFailed,
            LinkError::Io(_) => CloseReason::Io,
            LinkError::Closed => CloseReason::PeerClosed,
            LinkError::Frame(FrameError::Oversized { .. }) => CloseReason::Oversized,
            LinkError::Frame(FrameError::UnknownType(_)) => CloseReason::UnknownType,
            LinkError::Frame(FrameError::Truncated { .. }) => CloseReason::Truncated,
            LinkError::Frame(_) | LinkError::WrongFrameVersion { .. } => CloseReason::Malformed,
            LinkError::Unexpected(_) => CloseReason::Unexpected,
            LinkError::BadAuth(_) => CloseReason::BadAuth,
            LinkError::NoCommonVersion { .. } => CloseReason::NoCommonVersion,
            LinkError::UnknownSite(_) => CloseReason::UnknownSite,
            LinkError::NotAllowed(_) => CloseReason::NotAllowed,
            LinkError::HandshakeTimeout(_) => CloseReason::HandshakeTimeout,
            LinkError::DeadPeer(_) => CloseReason::DeadPeer,
            LinkError::WriteTimeout(_) => CloseReason::WriteTimeout,
            LinkError::PeerRejected { .. } => CloseReason::PeerRejected,
            LinkError::Local { reason, .. } => *reason,
            LinkError::Tls(_) => CloseReason::Tls,
            LinkError::Integrity { .. } => CloseReason::Integrity,
            LinkError::WrongSource(_) => CloseReason::WrongSource,
            LinkError::OldPeer => CloseReason::NoCommonVersion,
            LinkError::BadKeyShare => CloseReason::BadAuth,
        }
    }
}

/// Reads the bytes of one frame and `trailer` bytes after it (its MAC tag), the header's length
/// checked against `max_payload` before the payload is read. End of stream before a frame is
/// [`LinkError::Closed`]; inside a frame, a truncated frame.
async fn read_raw<R: AsyncRead + Unpin>(
    r: &mut R,
    max_payload: usize,
    trailer: usize,
) -> Result<(frame::Header, Vec<u8>), LinkError> {
    let mut header = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        let n = r.read(&mut header[got..]).await?;
        if n == 0 {
            return Err(if got == 0 {
                LinkError::Closed
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
/// message and its bytes (the transcript needs them). A MEP 1 Hello is [`LinkError::OldPeer`].
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max_payload: usize,
) -> Result<(u8, Message, Vec<u8>), LinkError> {
    let (h, bytes) = read_raw(r, max_payload, 0).await?;
    if h.kind == MessageType::Hello && h.version == 0 {
        return Err(LinkError::OldPeer);
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
) -> Result<(u8, Message, usize), LinkError> {
    let (h, bytes) = read_raw(r, max_payload, TAG_LEN).await?;
    let (frame_bytes, tag) = bytes.split_at(bytes.len() - TAG_LEN);
    let seq = opener.next_seq();
    if !opener.open(frame_bytes, tag) {
        return Err(LinkError::Integrity { seq });
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

/// What this end says about itself in the handshake.
#[derive(Clone, Debug)]
pub struct LocalHello {
    pub site: String,
    pub role: frame::Role,
    pub parent: Option<String>,
    pub versions: Vec<u8>,
    pub software: String,
    pub rtt_tolerance_ms: Option<u32>,
}

impl LocalHello {
    fn hello(&self, peer: &str, kx: [u8; KX_LEN]) -> Hello {
        Hello {
            versions: self.versions.clone(),
            site: self.site.clone(),
            peer: peer.to_owned(),
            role: self.role,
            parent: self.parent.clone(),
            software: self.software.clone(),
            rtt_tolerance_ms: self.rtt_tolerance_ms,
            nonce: auth::nonce(),
            kx,
        }
    }
}

/// A link whose handshake succeeded: the peer proved the name its Hello claims.
#[derive(Debug)]
pub struct Established {
    /// The peer's Hello.
    pub peer: Hello,
    /// The negotiated protocol version (the highest both speak).
    pub version: u8,
    /// The link's frame keys (every later frame is sealed with them).
    pub keys: SessionKeys,
}

/// The highest version in both lists.
pub fn negotiate(ours: &[u8], theirs: &[u8]) -> Option<u8> {
    ours.iter().filter(|v| theirs.contains(v)).max().copied()
}

async fn send<W: AsyncWrite + Unpin>(
    w: &mut W,
    version: u8,
    m: &Message,
    max: usize,
) -> Result<Vec<u8>, LinkError> {
    let bytes = frame::encode(version, m, max)?;
    w.write_all(&bytes).await?;
    w.flush().await?;
    Ok(bytes)
}

async fn send_sealed<W: AsyncWrite + Unpin>(
    w: &mut W,
    version: u8,
    m: &Message,
    max: usize,
    sealer: &mut Sealer,
) -> Result<(), LinkError> {
    let bytes = seal(version, m, max, sealer)?;
    w.write_all(&bytes).await?;
    w.flush().await?;
    Ok(())
}

/// Reads the peer's sealed Auth frame and checks its signature (made as `side`) with the key
/// of the site it claims to be; a wrong one is rejected with a reason before the link closes.
async fn expect_proof<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    version: u8,
    max_payload: usize,
    keys: &mut SessionKeys,
    peer_key: &PublicKey,
    side: Side,
    th: &[u8; 32],
) -> Result<(), LinkError> {
    let (v, m, _) = read_sealed(stream, max_payload, &mut keys.recv).await?;
    match m {
        Message::Auth(sig) if v == version => {
            if !peer_key.verify(side, th, &sig) {
                let e = LinkError::BadAuth(match side {
                    Side::Acceptor => "the acceptor's signature does not match its site's key",
                    Side::Initiator => "the initiator's signature does not match its site's key",
                });
                let _ = tokio::time::timeout(
                    Duration::from_secs(1),
                    send_sealed(stream, version, &reject_of(&e), max_payload, &mut keys.send),
                )
                .await;
                return Err(e);
            }
            Ok(())
        }
        Message::Reject { code, detail } => Err(LinkError::PeerRejected { code, detail }),
        Message::Auth(_) => Err(LinkError::WrongFrameVersion {
            got: v,
            expected: version,
        }),
        other => Err(LinkError::Unexpected(other.kind())),
    }
}

fn reject_of(error: &LinkError) -> Message {
    Message::Reject {
        code: error.reason().reject_code(),
        detail: error.to_string(),
    }
}

/// Sends an unsealed Reject answering a Hello (version 0: any build reads it), ignoring
/// failures (the link is being closed anyway).
async fn reject<W: AsyncWrite + Unpin>(w: &mut W, error: &LinkError) {
    let _ = tokio::time::timeout(
        Duration::from_secs(1),
        send(w, 0, &reject_of(error), frame::DEFAULT_MAX_PAYLOAD),
    )
    .await;
}

/// This end's identity in a handshake: what it says, and the key it signs with.
#[derive(Clone, Copy)]
pub struct Identity<'a> {
    pub hello: &'a LocalHello,
    pub key: &'a SiteKey,
}

/// Runs the initiator's side of the handshake on `stream` (called `expect_peer`, whose key is
/// `peer_key`), within `timeout`. On a failure detected here a Reject with the reason is sent
/// before returning.
pub async fn handshake_initiator<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    me: Identity<'_>,
    expect_peer: &str,
    peer_key: &PublicKey,
    max_payload: usize,
    timeout: Duration,
) -> Result<Established, LinkError> {
    let local = me.hello;
    let steps = async {
        let eph = Ephemeral::new();
        let mine = local.hello(expect_peer, eph.public);
        let my_hello = send(
            stream,
            HELLO_VERSION,
            &Message::Hello(mine.clone()),
            max_payload,
        )
        .await?;
        let (version, m, their_hello) = match read_frame(stream, max_payload).await {
            // A MEP 1 acceptor closes on a Hello it cannot read, without a word.
            Err(LinkError::Closed) => {
                return Err(LinkError::PeerRejected {
                    code: RejectCode::Closing,
                    detail: format!(
                        "closed without an answer to our MEP {HELLO_VERSION} Hello (a MEP 1 site does so: upgrade it)"
                    ),
                });
            }
            r => r?,
        };
        let peer = match m {
            Message::Hello(h) if version == HELLO_VERSION => h,
            Message::Reject { code, detail } => {
                return Err(LinkError::PeerRejected { code, detail });
            }
            Message::Hello(_) => {
                return Err(LinkError::WrongFrameVersion {
                    got: version,
                    expected: HELLO_VERSION,
                });
            }
            other => return Err(LinkError::Unexpected(other.kind())),
        };
        let checked = (|| {
            if peer.site != expect_peer || peer.peer != local.site {
                return Err(LinkError::UnknownSite(format!(
                    "we called {expect_peer:?}, {:?} answered (and thinks it talks to {:?})",
                    peer.site, peer.peer
                )));
            }
            negotiate(&local.versions, &peer.versions).ok_or_else(|| LinkError::NoCommonVersion {
                ours: local.versions.clone(),
                theirs: peer.versions.clone(),
            })
        })();
        let version = match checked {
            Ok(v) => v,
            Err(e) => {
                reject(stream, &e).await;
                return Err(e);
            }
        };
        let th = auth::transcript(&my_hello, &their_hello);
        let mut keys = auth::session_keys(
            eph,
            &peer.kx,
            Side::Initiator,
            &mine.nonce,
            &peer.nonce,
            &th,
        )
        .ok_or(LinkError::BadKeyShare)?;
        let sig = me.key.sign(Side::Initiator, &th);
        send_sealed(
            stream,
            version,
            &Message::Auth(sig),
            max_payload,
            &mut keys.send,
        )
        .await?;
        expect_proof(
            stream,
            version,
            max_payload,
            &mut keys,
            peer_key,
            Side::Acceptor,
            &th,
        )
        .await?;
        Ok(Established {
            peer,
            version,
            keys,
        })
    };
    tokio::time::timeout(timeout, steps)
        .await
        .unwrap_or(Err(LinkError::HandshakeTimeout(timeout)))
}

/// Runs the acceptor's side of the handshake on `stream` within `timeout`. `check` vets the
/// initiator's Hello (is the site known, may it call us, from this address) and gives the key
/// of the site it claims to be, before anything about us is sent; the claim is believed only
/// once its signature verifies under that key.
pub async fn handshake_acceptor<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    me: Identity<'_>,
    max_payload: usize,
    timeout: Duration,
    check: impl FnOnce(&Hello) -> Result<PublicKey, LinkError>,
) -> Result<Established, LinkError> {
    let local = me.hello;
    let steps = async {
        let (version, m, their_hello) = match read_frame(stream, max_payload).await {
            Err(e @ LinkError::OldPeer) => {
                reject(stream, &e).await;
                return Err(e);
            }
            r => r?,
        };
        let peer = match m {
            Message::Hello(h) if version == HELLO_VERSION => h,
            Message::Hello(_) => {
                return Err(LinkError::WrongFrameVersion {
                    got: version,
                    expected: HELLO_VERSION,
                });
            }
            other => return Err(LinkError::Unexpected(other.kind())),
        };
        let checked = if peer.peer != local.site {
            Err(LinkError::UnknownSite(format!(
                "{:?} called {:?}, we are {:?}",
                peer.site, peer.peer, local.site
            )))
        } else {
            check(&peer).and_then(|key| {
                negotiate(&local.versions, &peer.versions)
                    .map(|v| (v, key))
                    .ok_or_else(|| LinkError::NoCommonVersion {
                        ours: local.versions.clone(),
                        theirs: peer.versions.clone(),
                    })
            })
        };
        let (version, peer_key) = match checked {
            Ok(v) => v,
            Err(e) => {
                reject(stream, &e).await;
                return Err(e);
            }
        };
        let eph = Ephemeral::new();
        let mine = local.hello(&peer.site, eph.public);
        let my_hello = send(
            stream,
            HELLO_VERSION,
            &Message::Hello(mine.clone()),
            max_payload,
        )
        .await?;
        let th = auth::transcript(&their_hello, &my_hello);
        let mut keys =
            auth::session_keys(eph, &peer.kx, Side::Acceptor, &peer.nonce, &mine.nonce, &th)
                .ok_or(LinkError::BadKeyShare)?;
        expect_proof(
            stream,
            version,
            max_payload,
            &mut keys,
            &peer_key,
            Side::Initiator,
            &th,
        )
        .await?;
        let sig = me.key.sign(Side::Acceptor, &th);
        send_sealed(
            stream,
            version,
            &Message::Auth(sig),
            max_payload,
            &mut keys.send,
        )
        .await?;
        Ok(Established {
            peer,
            version,
            keys,
        })
    };
    tokio::time::timeout(timeout, steps)
        .await
        .unwrap_or(Err(LinkError::HandshakeTimeout(timeout)))
}

/// What a link sends to its peer, chosen by the controller from the topology.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Audience {
    /// Nothing but heartbeats (a link still being vetted, e.g. an adoption offer).
    None,
    /// Another parent (or any site of a flat mesh): everything, network metrics and the
    /// relayed state of our children included.
    PeerParent,
    /// Our child (own or adopted): our status and backup list.
    Child,
    /// Our parent (own or adopter): our status and services.
    Parent,
}

/// A part of the local state with the version it had when it last changed.
#[derive(Clone, Debug)]
pub struct Part<T> {
    pub version: u64,
    pub value: Arc<T>,
}

impl<T: Default> Default for Part<T> {
    fn default() -> Self {
        Part {
            version: 0,
            value: Arc::new(T::default()),
        }
    }
}

/// A child's state as its parent relays it to the other parents.
#[derive(Clone, Debug)]
pub struct Relay {
    /// When anything of it last changed.
    pub version: u64,
    /// When its status last changed (a change of load alone sends only the services).
    pub status_version: u64,
    pub status: SiteStatus,
    pub services: Option<Arc<ServiceStates>>,
}

/// Everything this site may send, as last published; links send the parts their audience
/// gets, and only the parts that changed since they last sent them.
#[derive(Clone, Debug, Default)]
pub struct Outbound {
    pub status: Option<Part<SiteStatus>>,
    pub services: Option<Part<ServiceStates>>,
    pub rtt: Part<Vec<RttRow>>,
    pub persistence: Part<Vec<PersistEntry>>,
    /// Our backup-parent list (parents only).
    pub backups: Option<Part<Vec<String>>>,
    pub children: BTreeMap<String, Relay>,
}

/// A command from the controller to a link (closing goes through the link's kill channel,
/// which never fills up).
#[derive(Debug)]
pub enum LinkCmd {
    Send(Message),
}

/// The link's fixed parameters.
#[derive(Clone, Debug)]
pub struct LinkParams {
    pub id: u64,
    pub peer: String,
    pub version: u8,
    pub max_payload: usize,
    pub heartbeat: Duration,
    pub dead_after: Duration,
    pub write_timeout: Duration,
}

/// The channels between a link and the controller.
pub struct LinkChannels {
    pub cmds: mpsc::Receiver<LinkCmd>,
    /// Closes the link, with the reason (sent to the peer in a Reject).
    pub kill: oneshot::Receiver<(CloseReason, String)>,
    pub outbound: watch::Receiver<Arc<Outbound>>,
    pub audience: watch::Receiver<Audience>,
    pub events: mpsc::Sender<Event>,
}

/// Runs an established link until it fails or is closed: frames received go to `events`
/// (tagged with the link id), `outbound` is sent as the `audience` allows, `cmds` are obeyed.
/// Returns why it ended.
pub async fn run_link<S: AsyncRead + AsyncWrite + Send + 'static>(
    stream: S,
    keys: SessionKeys,
    params: LinkParams,
    counters: Arc<Counters>,
    channels: LinkChannels,
) -> LinkError {
    let LinkChannels {
        mut cmds,
        mut kill,
        mut outbound,
        mut audience,
        events,
    } = channels;
    let (mut rd, mut wr) = tokio::io::split(stream);
    let SessionKeys {
        send: mut sealer,
        recv: mut opener,
    } = keys;
    let reader = {
        let counters = counters.clone();
        let p = params.clone();
        async move {
            loop {
                let read = read_sealed(&mut rd, p.max_payload, &mut opener);
                let (version, message, len) = match tokio::time::timeout(p.dead_after, read).await {
                    Err(_) => return LinkError::DeadPeer(p.dead_after),
                    Ok(Err(e)) => return e,
                    Ok(Ok(f)) => f,
                };
                counters.received(len);
                if version != p.version {
                    return LinkError::WrongFrameVersion {
                        got: version,
                        expected: p.version,
                    };
                }
                match message {
                    Message::Heartbeat { .. } => {}
                    Message::Reject { code, detail } => {
                        return LinkError::PeerRejected { code, detail };
                    }
                    Message::Hello(_) | Message::Auth(_) => {
                        return LinkError::Unexpected(message.kind());
                    }
                    message => {
                        if events
                            .send(Event::Frame {
                                link: p.id,
                                message,
                            })
                            .await
                            .is_err()
                        {
                            return LinkError::Local {
                                reason: CloseReason::Shutdown,
                                detail: "node stopped".into(),
                            };
                        }
                    }
                }
            }
        }
    };
    let writer = async move {
        let p = &params;
        let mut sent = Sent::default();
        let mut seq = 0u64;
        let mut ticker = tokio::time::interval(p.heartbeat);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut write =
            async |wr: &mut tokio::io::WriteHalf<S>, m: &Message| -> Result<(), LinkError> {
                let bytes = seal(p.version, m, p.max_payload, &mut sealer)?;
                match tokio::time::timeout(p.write_timeout, wr.write_all(&bytes)).await {
                    Err(_) => return Err(LinkError::WriteTimeout(p.write_timeout)),
                    Ok(r) => r?,
                }
                counters.sent(bytes.len());
                Ok(())
            };
        loop {
            tokio::select! {
                biased;
                k = &mut kill => {
                    let Ok((reason, detail)) = k else {
                        return LinkError::Local { reason: CloseReason::Shutdown, detail: "node stopped".into() };
                    };
                    // What was queued before the close goes first (an AdoptReject, say).
                    while let Ok(LinkCmd::Send(m)) = cmds.try_recv() {
                        if write(&mut wr, &m).await.is_err() {
                            break;
                        }
                    }
                    let m = Message::Reject { code: reason.reject_code(), detail: detail.clone() };
                    let _ = write(&mut wr, &m).await;
                    let _ = tokio::time::timeout(p.write_timeout, wr.shutdown()).await;
                    return LinkError::Local { reason, detail };
                }
                // Before the state: a link that always has state to send still heartbeats.
                _ = ticker.tick() => {
                    seq += 1;
                    if let Err(e) = write(&mut wr, &Message::Heartbeat { seq }).await {
                        return e;
                    }
                    continue;
                }
                cmd = cmds.recv() => match cmd {
                    Some(LinkCmd::Send(m)) => {
                        if let Err(e) = write(&mut wr, &m).await {
                            return e;
                        }
                    }
                    None => return LinkError::Local { reason: CloseReason::Shutdown, detail: "node stopped".into() },
                },
                r = audience.changed() => {
                    if r.is_err() {
                        return LinkError::Local { reason: CloseReason::Shutdown, detail: "node stopped".into() };
                    }
                    sent = Sent::default();
                }
                r = outbound.changed() => {
                    if r.is_err() {
                        return LinkError::Local { reason: CloseReason::Shutdown, detail: "node stopped".into() };
                    }
                }
            }
            // Send whatever changed for this audience (the latest version only: a slow link
            // skips intermediate states instead of queueing them).
            let out = outbound.borrow_and_update().clone();
            let who = *audience.borrow_and_update();
            for m in sent.due(&out, who, p.max_payload) {
                if let Err(e) = write(&mut wr, &m).await {
                    return e;
                }
            }
            if let Err(e) = tokio::time::timeout(p.write_timeout, wr.flush())
                .await
                .unwrap_or(Err(io::ErrorKind::TimedOut.into()))
            {
                return e.into();
            }
        }
    };
    tokio::select! {
        e = reader => e,
        e = writer => e,
    }
}

/// The versions of the parts a link has sent.
#[derive(Default)]
struct Sent {
    status: u64,
    services: u64,
    rtt: u64,
    persistence: u64,
    backups: u64,
    /// Per relayed child: (version, status version) sent.
    children: HashMap<String, (u64, u64)>,
}

impl Sent {
    /// The messages that bring the peer up to date with `out`, and marks them sent.
    fn due(&mut self, out: &Outbound, who: Audience, max_payload: usize) -> Vec<Message> {
        let mut v = Vec::new();
        if who == Audience::None {
            return v;
        }
        if let Some(s) = &out.status
            && s.version > self.status
        {
            self.status = s.version;
            v.push(Message::SiteStatus((*s.value).clone()));
        }
        if matches!(who, Audience::PeerParent | Audience::Parent)
            && let Some(s) = &out.services
            && s.version > self.services
        {
            self.services = s.version;
            v.push(Message::ServiceStates((*s.value).clone()));
        }
        if matches!(who, Audience::PeerParent | Audience::Child)
            && let Some(b) = &out.backups
            && b.version > self.backups
            && let Some(status) = &out.status
        {
            self.backups = b.version;
            v.push(Message::BackupParents {
                parent: status.value.site.clone(),
                backups: (*b.value).clone(),
            });
        }
        if who == Audience::PeerParent {
            if out.rtt.version > self.rtt {
                self.rtt = out.rtt.version;
                v.extend(
                    frame::chunks(&out.rtt.value, max_payload, frame::rtt_row_len)
                        .into_iter()
                        .map(Message::RttRows),
                );
            }
            if out.persistence.version > self.persistence {
                self.persistence = out.persistence.version;
                v.extend(
                    frame::chunks(
                        &out.persistence.value,
                        max_payload,
                        frame::persist_entry_len,
                    )
                    .into_iter()
                    .map(Message::Persistence),
                );
            }
            for (child, relay) in &out.children {
                let (seen, seen_status) = self.children.entry(child.clone()).or_insert((0, 0));
                if relay.version > *seen {
                    *seen = relay.version;
                    if relay.status_version > *seen_status {
                        *seen_status = relay.status_version;
                        v.push(Message::SiteStatus(relay.status.clone()));
                    }
                    if let Some(s) = &relay.services {
                        v.push(Message::ServiceStates((**s).clone()));
                    }
                }
            }
        }
        v
    }
}
