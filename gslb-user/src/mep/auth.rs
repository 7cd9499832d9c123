//! The challenge-response that authenticates both ends of a link with the shared secret.
//!
//! Each end sends a Hello with a fresh 32-byte random nonce. Each then proves it knows the
//! secret with `HMAC-SHA256(secret, label ‖ initiator's Hello frame ‖ acceptor's Hello frame)`,
//! where the label says which end computed it (`gslb-mep initiator` / `gslb-mep acceptor`), so
//! that one end's proof can never be reflected back as the other's. The whole Hellos are in the
//! transcript: both nonces (no replay), both site names and both version lists (no downgrade).
//! The initiator proves first; the acceptor answers with its own proof only once the initiator's
//! is right, so an unauthenticated caller learns nothing. The secret itself is never sent.

use ring::{hmac, rand::SecureRandom};

use super::frame::{MAC_LEN, NONCE_LEN};

/// Which end of the handshake computes a proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Initiator,
    Acceptor,
}

impl Side {
    fn label(self) -> &'static [u8] {
        match self {
            Side::Initiator => b"gslb-mep initiator\0",
            Side::Acceptor => b"gslb-mep acceptor\0",
        }
    }
}

/// A fresh random nonce from the operating system's generator.
pub fn nonce() -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    // getrandom(2) does not fail on Linux once the pool is initialised; a failure here would be
    // a broken system, where a zero nonce still only weakens replay protection of one link.
    let _ = ring::rand::SystemRandom::new().fill(&mut n);
    n
}

/// The proof `side` sends, over the two Hello frames as they were sent.
pub fn proof(
    secret: &[u8],
    side: Side,
    initiator_hello: &[u8],
    acceptor_hello: &[u8],
) -> [u8; MAC_LEN] {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let mut ctx = hmac::Context::with_key(&key);
    ctx.update(side.label());
    ctx.update(&(initiator_hello.len() as u32).to_be_bytes());
    ctx.update(initiator_hello);
    ctx.update(acceptor_hello);
    let mut out = [0u8; MAC_LEN];
    out.copy_from_slice(ctx.sign().as_ref());
    out
}

/// Whether `mac` is `side`'s proof (compared in constant time).
pub fn verify(
    secret: &[u8],
    side: Side,
    initiator_hello: &[u8],
    acceptor_hello: &[u8],
    mac: &[u8],
) -> bool {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let mut data =
        Vec::with_capacity(side.label().len() + 4 + initiator_hello.len() + acceptor_hello.len());
    data.extend_from_slice(side.label());
    data.extend_from_slice(&(initiator_hello.len() as u32).to_be_bytes());
    data.extend_from_slice(initiator_hello);
    data.extend_from_slice(acceptor_hello);
    hmac::verify(&key, &data, mac).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_bind_secret_side_and_transcript() {
        let (i, a) = (b"hello-i".as_slice(), b"hello-a".as_slice());
        let p = proof(b"s3cret", Side::Initiator, i, a);
        assert!(verify(b"s3cret", Side::Initiator, i, a, &p));
        assert!(
            !verify(b"other", Side::Initiator, i, a, &p),
            "another secret"
        );
        assert!(
            !verify(b"s3cret", Side::Acceptor, i, a, &p),
            "reflected to the other side"
        );
        assert!(
            !verify(b"s3cret", Side::Initiator, a, i, &p),
            "another transcript"
        );
        assert!(
            !verify(b"s3cret", Side::Initiator, b"hello-", b"ihello-a", &p),
            "moved boundary"
        );
        assert!(
            !verify(b"s3cret", Side::Initiator, i, a, &p[..31]),
            "short tag"
        );
        assert_ne!(nonce(), nonce());
    }
}
