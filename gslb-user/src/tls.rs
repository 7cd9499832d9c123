//! The one TLS crypto provider of every TLS use (HTTPS monitors, MEP sessions, their tests).
//!
//! It is rustls' *ring* provider, which rustls 0.23.48 deprecates because it has no
//! post-quantum key exchange. The project builds its cryptography on *ring* (no C toolchain
//! for aws-lc); moving to aws-lc-rs (X25519MLKEM768) is this function's change alone.

use std::sync::{Arc, OnceLock};

use tokio_rustls::rustls::crypto::CryptoProvider;

/// The provider, built once.
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER
        .get_or_init(|| {
            // `allow`, not `expect`: a lock file on rustls before 0.23.48 (the fuzz crate's
            // own) has no deprecation to meet.
            #[allow(
                deprecated,
                reason = "the ring provider, on purpose: see the module docs"
            )]
            let ring = tokio_rustls::rustls::crypto::ring::default_provider();
            Arc::new(ring)
        })
        .clone()
}
