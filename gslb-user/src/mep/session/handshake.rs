//! The handshake of a session: the two Hellos (version negotiation, ephemeral key exchange) and
//! the signed proofs of both site keys, bounded by `handshake_timeout`. Every frame read here
//! comes from a peer not authenticated yet, so it is capped at
//! [`frame::MAX_HANDSHAKE_PAYLOAD`] (4 KiB), not at the session's `max_payload`: a peer must prove
//! its name before it may make us reserve and wait for a large frame.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::{SessionError, read_frame, read_sealed, seal};
use crate::mep::{
    auth::{self, Ephemeral, PublicKey, Sealer, SessionKeys, Side, SiteKey},
    frame::{self, HELLO_VERSION, Hello, KX_LEN, MAX_HANDSHAKE_PAYLOAD, Message, RejectCode},
};

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

/// A session whose handshake succeeded: the peer proved the name its Hello claims.
#[derive(Debug)]
pub struct Established {
    /// The peer's Hello.
    pub peer: Hello,
    /// The negotiated protocol version (the highest both speak).
    pub version: u8,
    /// The session's frame keys (every later frame is sealed with them).
    pub keys: SessionKeys,
}

/// The highest version in both lists.
pub fn negotiate(ours: &[u8], theirs: &[u8]) -> Option<u8> {
    ours.iter().filter(|v| theirs.contains(v)).max().copied()
}

pub(super) async fn send<W: AsyncWrite + Unpin>(
    w: &mut W,
    version: u8,
    m: &Message,
    max: usize,
) -> Result<Vec<u8>, SessionError> {
    let bytes = frame::encode(version, m, max)?;
    w.write_all(&bytes).await?;
    w.flush().await?;
    Ok(bytes)
}

pub(super) async fn send_sealed<W: AsyncWrite + Unpin>(
    w: &mut W,
    version: u8,
    m: &Message,
    max: usize,
    sealer: &mut Sealer,
) -> Result<(), SessionError> {
    let bytes = seal(version, m, max, sealer)?;
    w.write_all(&bytes).await?;
    w.flush().await?;
    Ok(())
}

/// Reads the peer's sealed Auth frame and checks its signature (made as `side`) with the key
/// of the site it claims to be; a wrong one is rejected with a reason before the session closes.
/// `max_payload` caps what is sent; what is read is capped by [`MAX_HANDSHAKE_PAYLOAD`].
pub(super) async fn expect_proof<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    version: u8,
    max_payload: usize,
    keys: &mut SessionKeys,
    peer_key: &PublicKey,
    side: Side,
    th: &[u8; 32],
) -> Result<(), SessionError> {
    let (v, m, _) = read_sealed(stream, MAX_HANDSHAKE_PAYLOAD, &mut keys.recv).await?;
    match m {
        Message::Auth(sig) if v == version => {
            if !peer_key.verify(side, th, &sig) {
                let e = SessionError::BadAuth(match side {
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
        Message::Reject { code, detail } => Err(SessionError::PeerRejected { code, detail }),
        Message::Auth(_) => Err(SessionError::WrongFrameVersion {
            got: v,
            expected: version,
        }),
        other => Err(SessionError::Unexpected(other.kind())),
    }
}

pub(super) fn reject_of(error: &SessionError) -> Message {
    Message::Reject {
        code: error.reason().reject_code(),
        detail: error.to_string(),
    }
}

/// Sends an unsealed Reject answering a Hello (version 0: any build reads it), ignoring
/// failures (the session is being closed anyway).
pub(super) async fn reject<W: AsyncWrite + Unpin>(w: &mut W, error: &SessionError) {
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
) -> Result<Established, SessionError> {
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
        let (version, m, their_hello) = match read_frame(stream, MAX_HANDSHAKE_PAYLOAD).await {
            // A MEP 1 acceptor closes on a Hello it cannot read, without a word.
            Err(SessionError::Closed) => {
                return Err(SessionError::PeerRejected {
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
                return Err(SessionError::PeerRejected { code, detail });
            }
            Message::Hello(_) => {
                return Err(SessionError::WrongFrameVersion {
                    got: version,
                    expected: HELLO_VERSION,
                });
            }
            other => return Err(SessionError::Unexpected(other.kind())),
        };
        let checked = (|| {
            if peer.site != expect_peer || peer.peer != local.site {
                return Err(SessionError::UnknownSite(format!(
                    "we called {expect_peer:?}, {:?} answered (and thinks it talks to {:?})",
                    peer.site, peer.peer
                )));
            }
            negotiate(&local.versions, &peer.versions).ok_or_else(|| {
                SessionError::NoCommonVersion {
                    ours: local.versions.clone(),
                    theirs: peer.versions.clone(),
                }
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
        .ok_or(SessionError::BadKeyShare)?;
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
        .unwrap_or(Err(SessionError::HandshakeTimeout(timeout)))
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
    check: impl FnOnce(&Hello) -> Result<PublicKey, SessionError>,
) -> Result<Established, SessionError> {
    let local = me.hello;
    let steps = async {
        let (version, m, their_hello) = match read_frame(stream, MAX_HANDSHAKE_PAYLOAD).await {
            Err(e @ SessionError::OldPeer) => {
                reject(stream, &e).await;
                return Err(e);
            }
            r => r?,
        };
        let peer = match m {
            Message::Hello(h) if version == HELLO_VERSION => h,
            Message::Hello(_) => {
                return Err(SessionError::WrongFrameVersion {
                    got: version,
                    expected: HELLO_VERSION,
                });
            }
            other => return Err(SessionError::Unexpected(other.kind())),
        };
        let checked = if peer.peer == local.site {
            check(&peer).and_then(|key| {
                negotiate(&local.versions, &peer.versions)
                    .map(|v| (v, key))
                    .ok_or_else(|| SessionError::NoCommonVersion {
                        ours: local.versions.clone(),
                        theirs: peer.versions.clone(),
                    })
            })
        } else {
            Err(SessionError::UnknownSite(format!(
                "{:?} called {:?}, we are {:?}",
                peer.site, peer.peer, local.site
            )))
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
                .ok_or(SessionError::BadKeyShare)?;
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
        .unwrap_or(Err(SessionError::HandshakeTimeout(timeout)))
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;
    use crate::mep::frame::{
        DEFAULT_MAX_PAYLOAD, FrameError, HEADER_LEN, MAX_DETAIL, MAX_HANDSHAKE_PAYLOAD, MAX_NAME,
        MAX_SITE_NAME, MAX_VERSIONS, MessageType, NONCE_LEN, Role, SIG_LEN,
    };

    /// The largest Hello there is: every field at its cap.
    fn largest_hello() -> Hello {
        let site = |c: &str| c.repeat(MAX_SITE_NAME);
        Hello {
            versions: (1..=u8::try_from(MAX_VERSIONS).unwrap()).collect(),
            site: site("a"),
            peer: site("b"),
            role: Role::Child,
            parent: Some(site("c")),
            software: "s".repeat(MAX_NAME),
            rtt_tolerance_ms: Some(u32::MAX),
            nonce: [1; NONCE_LEN],
            kx: [2; KX_LEN],
        }
    }

    /// Every frame a handshake reads (a Hello, an Auth, a Reject), at its largest, is read
    /// under the cap that holds until the peer is authenticated, with at least half of it to
    /// spare; and those frames are the largest (one byte more in a field is refused).
    #[test]
    fn the_largest_handshake_frames_fit_the_cap_before_authentication_with_room() {
        let frames = [
            Message::Hello(largest_hello()),
            Message::Auth([3; SIG_LEN]),
            Message::Reject {
                code: RejectCode::Other(255),
                detail: "d".repeat(MAX_DETAIL),
            },
        ];
        let mut largest = 0;
        for m in &frames {
            let bytes = frame::encode(HELLO_VERSION, m, DEFAULT_MAX_PAYLOAD).unwrap();
            let (_, back, _) = frame::decode_frame(&bytes, MAX_HANDSHAKE_PAYLOAD).unwrap();
            assert_eq!(&back, m);
            println!(
                "{:?}: {} bytes of payload",
                m.kind(),
                bytes.len() - HEADER_LEN
            );
            largest = largest.max(bytes.len() - HEADER_LEN);
        }
        assert!(
            2 * largest <= MAX_HANDSHAKE_PAYLOAD,
            "largest handshake payload {largest} bytes, cap {MAX_HANDSHAKE_PAYLOAD}"
        );
        let mut longer = largest_hello();
        longer.software.push('s');
        assert!(
            frame::encode(HELLO_VERSION, &Message::Hello(longer), DEFAULT_MAX_PAYLOAD).is_err()
        );
    }

    /// An acceptor that is not authenticated yet announces a 1 MiB Hello (under the session's
    /// `max_payload`) and sends a few KiB of it: the initiator refuses it on its header, at once,
    /// rather than reserve the megabyte and wait for it until the handshake deadline.
    #[tokio::test(start_paused = true)]
    async fn an_initiator_refuses_a_large_frame_from_an_unauthenticated_acceptor() {
        let (mut ours, mut theirs) = tokio::io::duplex(64 * 1024);
        let local = LocalHello {
            site: "A".into(),
            role: Role::Parent,
            parent: None,
            versions: vec![HELLO_VERSION],
            software: "test".into(),
            rtt_tolerance_ms: None,
        };
        let key = SiteKey::from_seed(&[5; 32]);
        let peer_key = SiteKey::from_seed(&[6; 32]).public();
        let me = Identity {
            hello: &local,
            key: &key,
        };
        let handshake = handshake_initiator(
            &mut ours,
            me,
            "B",
            &peer_key,
            DEFAULT_MAX_PAYLOAD,
            Duration::from_secs(60),
        );
        let rogue = async {
            read_frame(&mut theirs, MAX_HANDSHAKE_PAYLOAD)
                .await
                .unwrap();
            let mut header = vec![b'M', b'P', HELLO_VERSION, MessageType::Hello as u8];
            header.extend_from_slice(&(1u32 << 20).to_be_bytes());
            theirs.write_all(&header).await.unwrap();
            theirs.write_all(&[0; 4096]).await.unwrap();
        };
        let (result, ()) = tokio::time::timeout(Duration::from_secs(5), async {
            tokio::join!(handshake, rogue)
        })
        .await
        .expect("refused on its header, not at the handshake deadline");
        assert!(
            matches!(
                result,
                Err(SessionError::Frame(FrameError::Oversized { len, max }))
                    if len == 1 << 20 && max == MAX_HANDSHAKE_PAYLOAD
            ),
            "{result:?}"
        );
    }
}
