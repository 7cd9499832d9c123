//! Site identity and session integrity (MEP 2, docs/mep.md "Handshake").
//!
//! - **Identity.** Every site has its own Ed25519 key pair ([`SiteKey`]); a site's configuration
//!   holds its own private key and the other sites' public keys ([`PublicKey`]), nothing that
//!   lets it sign as another site. A site proves its name by signing the handshake transcript;
//!   the other end verifies the signature with the public key configured for the name the
//!   Hello claims, so a claimed name is believed only once it is proven.
//! - **Freshness.** Each Hello carries a fresh 32-byte nonce and an ephemeral X25519 key share;
//!   the transcript hash covers both whole Hellos (nonces, key shares, names, roles, version
//!   lists), and each signature carries a label saying which end made it, so a proof can be
//!   neither replayed on another session nor reflected to the other side.
//! - **Session keys.** HKDF-SHA256 over the X25519 shared secret, salted with both nonces, with
//!   the transcript hash in the info, gives one HMAC-SHA256 key per direction ([`SessionKeys`]).
//! - **Frames.** Every frame after the Hellos is sealed: a 32-byte HMAC-SHA256 tag over an
//!   implicit per-direction sequence number (0, 1, 2, …, never sent) and the frame's bytes
//!   follows it. A frame replayed, reordered, dropped or changed fails its tag.
//!
//! All primitives are ring's; nothing here is hand-rolled beyond the transcript layout.

use std::{fmt, sync::Arc};

use ring::{
    agreement, digest, hkdf, hmac,
    rand::{SecureRandom, SystemRandom},
    signature::{self, Ed25519KeyPair, KeyPair},
};
use tokio_rustls::rustls::pki_types::{
    PrivateKeyDer, SubjectPublicKeyInfoDer,
    pem::{self, PemObject},
};

use super::frame::{KX_LEN, NONCE_LEN, SIG_LEN};

/// Length of a frame's MAC tag.
pub const TAG_LEN: usize = 32;

/// The DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410): the 32 key bytes follow.
const ED25519_SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// A key that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    #[error("not a PEM private key: {0}")]
    PrivatePem(String),
    #[error("the private key is not an Ed25519 PKCS#8 key: {0}")]
    NotEd25519(String),
    #[error("not a PEM public key: {0}")]
    PublicPem(String),
    #[error(
        "not an Ed25519 public key (a SubjectPublicKeyInfo of 44 bytes, as `openssl pkey -pubout` writes)"
    )]
    PublicNotEd25519,
}

/// Which end of the handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Initiator,
    Acceptor,
}

impl Side {
    fn label(self) -> &'static [u8] {
        match self {
            Side::Initiator => b"gslb-mep 2 initiator signs\0",
            Side::Acceptor => b"gslb-mep 2 acceptor signs\0",
        }
    }
}

/// A site's public key (Ed25519).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey(pub [u8; 32]);

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({})", self.fingerprint())
    }
}

impl PublicKey {
    /// From PEM text (`-----BEGIN PUBLIC KEY-----`, as `openssl pkey -pubout` writes), or from
    /// the one base64 line between its armour lines (what `[[site]] key` holds).
    pub fn parse(text: &str) -> Result<PublicKey, KeyError> {
        let text = text.trim();
        if text.starts_with("-----BEGIN") {
            return Self::from_pem(text.as_bytes());
        }
        let armoured = format!("-----BEGIN PUBLIC KEY-----\n{text}\n-----END PUBLIC KEY-----\n");
        Self::from_pem(armoured.as_bytes())
    }

    pub fn from_pem(pem: &[u8]) -> Result<PublicKey, KeyError> {
        let spki = SubjectPublicKeyInfoDer::from_pem_slice(pem)
            .map_err(|e: pem::Error| KeyError::PublicPem(e.to_string()))?;
        let der = spki.as_ref();
        match der.strip_prefix(&ED25519_SPKI_PREFIX[..]) {
            Some(key) if key.len() == 32 => Ok(PublicKey(key.try_into().expect("32 bytes"))),
            _ => Err(KeyError::PublicNotEd25519),
        }
    }

    /// A short name for logs: the first 8 bytes of the key's SHA-256, in hex.
    pub fn fingerprint(&self) -> String {
        digest::digest(&digest::SHA256, &self.0).as_ref()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Whether `sig` is `side`'s signature of the transcript hash `th` under this key.
    pub fn verify(&self, side: Side, th: &[u8; 32], sig: &[u8]) -> bool {
        signature::UnparsedPublicKey::new(&signature::ED25519, &self.0)
            .verify(&signed(side, th), sig)
            .is_ok()
    }
}

/// This site's private key (Ed25519); Debug shows only its public key's fingerprint.
#[derive(Clone)]
pub struct SiteKey {
    pair: Arc<Ed25519KeyPair>,
    public: PublicKey,
}

impl fmt::Debug for SiteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SiteKey(public {})", self.public.fingerprint())
    }
}

impl PartialEq for SiteKey {
    fn eq(&self, other: &Self) -> bool {
        self.public == other.public
    }
}

impl Eq for SiteKey {}

impl SiteKey {
    /// From a PEM PKCS#8 private key (`openssl genpkey -algorithm ed25519`).
    pub fn from_pem(pem: &[u8]) -> Result<SiteKey, KeyError> {
        match PrivateKeyDer::from_pem_slice(pem) {
            Ok(PrivateKeyDer::Pkcs8(k)) => Self::from_pkcs8(k.secret_pkcs8_der()),
            Ok(_) => Err(KeyError::NotEd25519(
                "a PKCS#1 or SEC1 key; an Ed25519 key is PKCS#8 (BEGIN PRIVATE KEY)".into(),
            )),
            Err(e) => Err(KeyError::PrivatePem(e.to_string())),
        }
    }

    pub fn from_pkcs8(der: &[u8]) -> Result<SiteKey, KeyError> {
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der)
            .map_err(|e| KeyError::NotEd25519(e.to_string()))?;
        Ok(Self::of(pair))
    }

    /// A key from a 32-byte seed (tests and benchmarks derive their sites' keys so).
    pub fn from_seed(seed: &[u8; 32]) -> SiteKey {
        Self::of(Ed25519KeyPair::from_seed_unchecked(seed).expect("any 32 bytes are a seed"))
    }

    /// A fresh key and its PKCS#8 DER.
    pub fn generate() -> (SiteKey, Vec<u8>) {
        let der = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
            .expect("the system generator works");
        let key = Self::from_pkcs8(der.as_ref()).expect("a key ring just made");
        (key, der.as_ref().to_vec())
    }

    fn of(pair: Ed25519KeyPair) -> SiteKey {
        let public = PublicKey(pair.public_key().as_ref().try_into().expect("32 bytes"));
        SiteKey {
            pair: Arc::new(pair),
            public,
        }
    }

    pub fn public(&self) -> PublicKey {
        self.public
    }

    /// `side`'s signature of the transcript hash `th`.
    pub fn sign(&self, side: Side, th: &[u8; 32]) -> [u8; SIG_LEN] {
        let mut out = [0u8; SIG_LEN];
        out.copy_from_slice(self.pair.sign(&signed(side, th)).as_ref());
        out
    }
}

fn signed(side: Side, th: &[u8; 32]) -> Vec<u8> {
    [side.label(), th.as_slice()].concat()
}

/// The hash of both Hello frames as they were sent (the initiator's first, with its length).
pub fn transcript(initiator_hello: &[u8], acceptor_hello: &[u8]) -> [u8; 32] {
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(b"gslb-mep 2 transcript\0");
    ctx.update(&(initiator_hello.len() as u32).to_be_bytes());
    ctx.update(initiator_hello);
    ctx.update(acceptor_hello);
    ctx.finish().as_ref().try_into().expect("32 bytes")
}

/// A fresh random nonce from the operating system's generator.
pub fn nonce() -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    // getrandom(2) does not fail on Linux once the pool is initialised.
    SystemRandom::new()
        .fill(&mut n)
        .expect("the system generator works");
    n
}

/// This end's ephemeral X25519 key for one handshake.
pub struct Ephemeral {
    private: agreement::EphemeralPrivateKey,
    pub public: [u8; KX_LEN],
}

impl Ephemeral {
    pub fn new() -> Ephemeral {
        let private =
            agreement::EphemeralPrivateKey::generate(&agreement::X25519, &SystemRandom::new())
                .expect("the system generator works");
        let public = private
            .compute_public_key()
            .expect("X25519 public key")
            .as_ref()
            .try_into()
            .expect("32 bytes");
        Ephemeral { private, public }
    }
}

impl Default for Ephemeral {
    fn default() -> Self {
        Self::new()
    }
}

/// The two directions' frame keys of one session.
pub struct SessionKeys {
    pub send: Sealer,
    pub recv: Opener,
}

impl fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionKeys")
    }
}

/// Derives the session's keys: `None` when the peer's key share is not a usable X25519 key.
pub fn session_keys(
    mine: Ephemeral,
    peer_kx: &[u8; KX_LEN],
    side: Side,
    nonce_i: &[u8; NONCE_LEN],
    nonce_a: &[u8; NONCE_LEN],
    th: &[u8; 32],
) -> Option<SessionKeys> {
    let peer = agreement::UnparsedPublicKey::new(&agreement::X25519, peer_kx);
    let prk = agreement::agree_ephemeral(mine.private, &peer, |shared| {
        hkdf::Salt::new(hkdf::HKDF_SHA256, &[nonce_i.as_slice(), nonce_a].concat()).extract(shared)
    })
    .ok()?;
    let key = |label: &[u8]| -> Option<hmac::Key> {
        let info = [label, th.as_slice()];
        Some(prk.expand(&info, hmac::HMAC_SHA256).ok()?.into())
    };
    let i_to_a = key(b"gslb-mep 2 initiator to acceptor\0")?;
    let a_to_i = key(b"gslb-mep 2 acceptor to initiator\0")?;
    let (send, recv) = match side {
        Side::Initiator => (i_to_a, a_to_i),
        Side::Acceptor => (a_to_i, i_to_a),
    };
    Some(SessionKeys {
        send: Sealer { key: send, seq: 0 },
        recv: Opener { key: recv, seq: 0 },
    })
}

/// Seals the frames one direction sends.
pub struct Sealer {
    key: hmac::Key,
    seq: u64,
}

impl Sealer {
    /// The tag of the next frame (and moves to the next sequence number).
    pub fn seal(&mut self, frame: &[u8]) -> [u8; TAG_LEN] {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(&self.seq.to_be_bytes());
        ctx.update(frame);
        self.seq += 1;
        ctx.sign().as_ref().try_into().expect("32 bytes")
    }
}

/// Checks the frames one direction receives.
pub struct Opener {
    key: hmac::Key,
    seq: u64,
}

impl Opener {
    /// Whether `tag` is the next frame's (compared in constant time); the sequence number
    /// moves on only for a frame that passes.
    pub fn open(&mut self, frame: &[u8], tag: &[u8]) -> bool {
        let data = [&self.seq.to_be_bytes()[..], frame].concat();
        let ok = hmac::verify(&self.key, &data, tag).is_ok();
        if ok {
            self.seq += 1;
        }
        ok
    }

    /// The sequence number the next frame must carry.
    pub fn next_seq(&self) -> u64 {
        self.seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(th: [u8; 32]) -> (SessionKeys, SessionKeys) {
        let (ei, ea) = (Ephemeral::new(), Ephemeral::new());
        let (pi, pa) = (ei.public, ea.public);
        let (ni, na) = (nonce(), nonce());
        (
            session_keys(ei, &pa, Side::Initiator, &ni, &na, &th).unwrap(),
            session_keys(ea, &pi, Side::Acceptor, &ni, &na, &th).unwrap(),
        )
    }

    #[test]
    fn signatures_bind_key_side_and_transcript() {
        let th = transcript(b"hello-i", b"hello-a");
        let key = SiteKey::from_seed(&[1; 32]);
        let other = SiteKey::from_seed(&[2; 32]);
        let sig = key.sign(Side::Initiator, &th);
        assert!(key.public().verify(Side::Initiator, &th, &sig));
        assert!(
            !other.public().verify(Side::Initiator, &th, &sig),
            "another site's key"
        );
        assert!(!key.public().verify(Side::Acceptor, &th, &sig), "reflected");
        assert!(
            !key.public()
                .verify(Side::Initiator, &transcript(b"hello-a", b"hello-i"), &sig),
            "another transcript"
        );
        assert_ne!(th, transcript(b"hello-", b"ihello-a"), "moved boundary");
        assert_ne!(nonce(), nonce());
    }

    #[test]
    fn frames_are_sealed_in_sequence_per_direction() {
        let (mut i, mut a) = keys([3; 32]);
        let t0 = i.send.seal(b"frame 0");
        let t1 = i.send.seal(b"frame 1");
        assert!(!a.recv.open(b"frame 1", &t1), "out of order");
        assert!(!a.recv.open(b"frame 0", &t1), "another frame's tag");
        assert!(!a.recv.open(b"frame X", &t0), "changed");
        assert!(a.recv.open(b"frame 0", &t0));
        assert!(!a.recv.open(b"frame 0", &t0), "replayed");
        assert!(a.recv.open(b"frame 1", &t1));
        // The other direction has its own key: a frame cannot be reflected.
        let back = a.send.seal(b"frame 0");
        assert_ne!(back, t0);
        assert!(i.recv.open(b"frame 0", &back));
        // Another handshake (other nonces, transcript) gives other keys.
        let (mut i2, _) = keys([3; 32]);
        assert_ne!(i2.send.seal(b"frame 0"), t0);
    }

    #[test]
    fn keys_parse_from_pem_and_the_base64_line() {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let key = SiteKey::from_pem(pair.serialize_pem().as_bytes()).unwrap();
        let pem = pair.public_key_pem();
        assert_eq!(PublicKey::parse(&pem).unwrap(), key.public());
        let line: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        assert_eq!(PublicKey::parse(&line).unwrap(), key.public());
        let (generated, der) = SiteKey::generate();
        assert_eq!(SiteKey::from_pkcs8(&der).unwrap(), generated);
        assert!(PublicKey::parse("AAAA").is_err());
        assert!(PublicKey::parse("not base64 !").is_err());
        let ec = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        assert!(SiteKey::from_pem(ec.serialize_pem().as_bytes()).is_err());
        assert!(matches!(
            PublicKey::parse(&ec.public_key_pem()),
            Err(KeyError::PublicNotEd25519)
        ));
    }
}
