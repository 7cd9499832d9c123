//! A site's MEP settings ([`MepConfig`]) and its TLS identity ([`MepTls`]), and the checks
//! [`super::MepNode::run`] makes before it starts.

use std::{sync::Arc, time::Duration};

use tokio_rustls::rustls;

use super::{MepConfigError, MepError, SUPPORTED_VERSIONS, TlsInput};
use crate::mep::{
    auth::SiteKey,
    frame,
    topology::{SiteTree, TopologyTiming},
};

/// A site's MEP settings.
#[derive(Clone, Debug)]
pub struct MepConfig {
    /// This site (in `topology`).
    pub site: String,
    /// This site's private key (never sent; see `auth`). Every other site of `topology` has
    /// its public key there ([`SiteSpec::key`]); this site's, when written, must match.
    pub key: SiteKey,
    pub topology: SiteTree,
    /// Protocol versions offered; both ends use the highest in common.
    pub versions: Vec<u8>,
    /// Sent in the Hello, for the peer's logs.
    pub software: String,
    /// Must be the same on every site; a peer with another value is logged and counted.
    pub rtt_tolerance_ms: Option<u32>,
    pub max_payload: usize,
    /// A heartbeat every this long on every session.
    pub heartbeat: Duration,
    /// A session with no frame for this long is dead.
    pub dead_after: Duration,
    pub handshake_timeout: Duration,
    pub connect_timeout: Duration,
    /// A frame not written within this long closes the session (a peer that stopped reading).
    pub write_timeout: Duration,
    /// Reconnect backoff: starts at `reconnect_min`, doubles up to `reconnect_max`.
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
    pub timing: TopologyTiming,
    /// Commands queued per session before it counts as stuck.
    pub session_queue: usize,
    /// Inbound connections in their handshake at once; when full, a new connection closes the
    /// oldest one still in its handshake (a flood cannot lock a real site out).
    pub max_pending_handshakes: usize,
    /// Inbound connections in their handshake at once from one source address; more are
    /// closed at once.
    pub max_pending_per_source: usize,
    /// The merged view is republished at most this often (it is rebuilt whole, O(sites)).
    pub view_interval: Duration,
    /// TLS on every session (NetScaler's secured MEP); `None`: plain TCP. The MEP handshake with
    /// the site keys still runs inside TLS, and frames are sealed either way.
    pub tls: Option<MepTls>,
}

/// TLS settings of a site: every site of a deployment must agree (a TLS site and a plain one
/// cannot talk).
#[derive(Clone, Debug)]
pub struct MepTls {
    /// Presents this site's certificate to the sites that call it.
    pub server: Arc<rustls::ServerConfig>,
    /// Verifies the certificate of the sites this one calls, for the called site's name (a site
    /// named `P1` must present a certificate for the DNS name `P1`).
    pub client: Arc<rustls::ClientConfig>,
}

impl MepTls {
    /// From PEM text: this site's certificate chain and private key (presented to the sites
    /// that call it), and the deployment's CA certificates (the certificates of the sites it
    /// calls must chain to one of them; the system's roots are not used, since site names are
    /// not public DNS names).
    pub fn from_pem(cert: &[u8], key: &[u8], ca: &[u8]) -> Result<MepTls, MepError> {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
        let bad = |input: TlsInput, e: &dyn std::fmt::Display| MepError::Tls {
            input,
            reason: e.to_string(),
        };
        let none = |input: TlsInput| MepError::Tls {
            input,
            reason: "no PEM certificate found".into(),
        };
        let chain = CertificateDer::pem_slice_iter(cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(TlsInput::Certificate, &e))?;
        if chain.is_empty() {
            return Err(none(TlsInput::Certificate));
        }
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| bad(TlsInput::PrivateKey, &e))?;
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(ca) {
            roots
                .add(c.map_err(|e| bad(TlsInput::Ca, &e))?)
                .map_err(|e| bad(TlsInput::Ca, &e))?;
        }
        if roots.is_empty() {
            return Err(none(TlsInput::Ca));
        }
        let provider = crate::tls::provider();
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(TlsInput::Provider, &e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| bad(TlsInput::CertificateAndKey, &e))?;
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(TlsInput::Provider, &e))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(MepTls {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }
}

impl MepConfig {
    /// Defaults: heartbeat 500 ms, dead after 2 s, handshake 2 s, writes 2 s, reconnect
    /// 100 ms … 5 s, 1 MiB frames, view republished at most every 100 ms, 64 handshakes in
    /// progress (4 per source address).
    pub fn new(site: impl Into<String>, key: SiteKey, topology: SiteTree) -> Self {
        MepConfig {
            site: site.into(),
            key,
            topology,
            versions: SUPPORTED_VERSIONS.to_vec(),
            software: concat!("gslb ", env!("CARGO_PKG_VERSION")).into(),
            rtt_tolerance_ms: None,
            max_payload: frame::DEFAULT_MAX_PAYLOAD,
            heartbeat: Duration::from_millis(500),
            dead_after: Duration::from_secs(2),
            handshake_timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(2),
            write_timeout: Duration::from_secs(2),
            reconnect_min: Duration::from_millis(100),
            reconnect_max: Duration::from_secs(5),
            timing: TopologyTiming::default(),
            session_queue: 64,
            max_pending_handshakes: 64,
            max_pending_per_source: 4,
            view_interval: Duration::from_millis(100),
            tls: None,
        }
    }

    /// What [`MepNode::run`] checks first; gslbd calls it before it reports ready, so that a
    /// node that cannot run fails the start rather than a background task.
    pub fn validate(&self) -> Result<(), MepError> {
        let Some(me) = self.topology.site(&self.site) else {
            return Err(MepConfigError::SiteNotInTopology {
                site: self.site.clone(),
            }
            .into());
        };
        if me.key.is_some_and(|k| k != self.key.public()) {
            return Err(MepConfigError::KeyMismatch {
                site: self.site.clone(),
            }
            .into());
        }
        if let Some(s) = self
            .topology
            .sites()
            .iter()
            .find(|s| s.name != self.site && s.key.is_none())
        {
            return Err(MepConfigError::PeerWithoutKey {
                site: s.name.clone(),
            }
            .into());
        }
        if self.versions.is_empty()
            || self.versions.len() > frame::MAX_VERSIONS
            || self.versions.contains(&0)
        {
            return Err(MepConfigError::Versions.into());
        }
        if self.heartbeat.is_zero() || self.dead_after <= self.heartbeat {
            return Err(MepConfigError::DeadAfter.into());
        }
        if self.reconnect_min.is_zero() || self.reconnect_max < self.reconnect_min {
            return Err(MepConfigError::Reconnect.into());
        }
        if self.max_payload < 1024
            || self.session_queue == 0
            || self.max_pending_handshakes == 0
            || self.max_pending_per_source == 0
        {
            return Err(MepConfigError::Limits.into());
        }
        Ok(())
    }
}
