//! Deterministic MEP site keys for tests: a site name gives the same Ed25519 key in every
//! configuration and process of a test (included with `#[path]` by the tests that write MEP
//! configurations, and by `daemon::mep`'s unit tests).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// PKCS#8 v1 (RFC 8410) of an Ed25519 key: this prefix and the 32-byte seed.
const PKCS8_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// A site's key pair as a configuration holds it.
pub(crate) struct TestKey {
    /// PEM PKCS#8 (`[mep] private_key_file`'s contents).
    pub private_pem: String,
    /// The base64 line of its public key (`[[site]] key`).
    pub public: String,
}

pub(crate) fn key(site: &str) -> TestKey {
    let seed = ring::digest::digest(
        &ring::digest::SHA256,
        format!("gslb test key {site}").as_bytes(),
    );
    let der = [&PKCS8_PREFIX[..], seed.as_ref()].concat();
    let pair = rcgen::KeyPair::try_from(der.as_slice()).expect("an Ed25519 PKCS#8 key");
    let public = pair
        .public_key_pem()
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    TestKey {
        private_pem: pair.serialize_pem(),
        public,
    }
}

/// `key = "…"` for `site`'s `[[site]]`.
pub(crate) fn site_line(site: &str) -> String {
    format!("key = \"{}\"\n", key(site).public)
}

/// Writes `site`'s private key to `dir/<site>-mep.pem` and returns the path.
pub(crate) fn write_private(dir: &Path, site: &str) -> PathBuf {
    let path = dir.join(format!("{site}-mep.pem"));
    std::fs::write(&path, key(site).private_pem).expect("write the key");
    path
}

/// `private_key_file = "…"` for `site`'s `[mep]`: its key written to a file of its own in the
/// temporary directory (tests run in parallel; a file being rewritten would read short).
pub(crate) fn private_key_line(site: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir()
        .join(format!("gslb-mep-keys-{}", std::process::id()))
        .join(CALLS.fetch_add(1, Ordering::Relaxed).to_string());
    std::fs::create_dir_all(&dir).expect("a key directory");
    let path = write_private(&dir, site);
    format!("private_key_file = {:?}\n", path.display().to_string())
}

/// `config` (a gslbd configuration for `site`) with MEP keys: `site`'s private key under
/// `[mep]`, and every `[[site]]`'s public key after its name.
pub(crate) fn keyed(config: &str, site: &str) -> String {
    let mut out = String::new();
    let mut after_site = false;
    for line in config.lines() {
        out.push_str(line);
        out.push('\n');
        let t = line.trim();
        if t == "[mep]" {
            out.push_str(&private_key_line(site));
        }
        if after_site
            && let Some(name) = t
                .strip_prefix("name = \"")
                .and_then(|n| n.strip_suffix('"'))
        {
            out.push_str(&site_line(name));
        }
        after_site = t == "[[site]]";
    }
    out
}
