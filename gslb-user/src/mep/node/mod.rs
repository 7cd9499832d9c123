//! [`MepNode`]: one site's MEP endpoint. A controller task owns the topology view
//! ([`SiteView`]), the sessions and the state received; every session runs in its own task; dialers
//! (one per session this site opens) reconnect with bounded exponential backoff.
//!
//! The controller never waits on a peer: it hands sessions commands through bounded queues with
//! `try_send` (a full queue closes that session, `queue_full`), and publishes what sessions send
//! through a `watch` (a slow session skips intermediate states and sends only the latest).
//!
//! - `settings`: [`MepConfig`] and [`MepTls`], what a site runs with, checked before it starts.
//! - `transport`: the byte streams (TCP, TLS), the dial loop and an established session's task.
//! - `accept`: the accept loop and its handshake admission.
//! - `controller`: the state machine that owns the sessions, the topology view and the merge.
//! - `merge`: what each session brought about each site, merged into the [`MepView`]'s sites.

use std::{
    collections::BTreeMap,
    future::Future,
    sync::{
        Arc, LazyLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use tokio::{
    net::TcpListener,
    sync::{mpsc, watch},
};
use tracing::info;

use crate::persist::PersistEntry;

use super::{
    frame::{self, FrameError, Message, Role, RttRow, ServiceReport, ServiceStates, SiteStatus},
    session::{Audience, CloseReason, Counters, LocalHello, Outbound},
    topology::{SiteTree, SiteView, TopologyError, remote_service_up},
};

mod accept;
mod controller;
mod merge;
mod running;
mod settings;
mod transport;

use controller::Controller;
pub use running::RunningNode;
pub use settings::{MepConfig, MepTls};
pub use transport::Event;
use transport::{AbortOnDrop, Ctx};

/// Protocol versions this build speaks.
pub const SUPPORTED_VERSIONS: &[u8] = &[2];

/// Most rows of one RTT table accepted from one peer.
const MAX_TABLE_ROWS: usize = 1 << 20;
/// Most rows of one persistence table accepted from one peer: a gslbd sends at most
/// `persist::MAX_EXPORT_ROWS` at a time, each peer table is a batch of new or refreshed
/// entries, not the peer's whole table.
const MAX_PERSIST_ROWS: usize = crate::persist::MAX_MERGE_ROWS;

/// A MEP node cannot start, or a state cannot be published.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MepError {
    #[error("MEP configuration: {0}")]
    Config(#[from] MepConfigError),
    #[error("MEP topology: {0}")]
    Topology(#[from] TopologyError),
    #[error("local state: {0}")]
    State(#[from] MepStateError),
    /// A TLS input is unusable; `input` says which (the configuration points at its file).
    #[error("MEP TLS: {}: {reason}", input.name())]
    Tls { input: TlsInput, reason: String },
}

/// A [`MepConfig`] a node cannot run with ([`MepConfig::validate`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MepConfigError {
    /// No private key: this site cannot prove its name.
    #[error("mep.private_key_file is missing (this site's key)")]
    MissingPrivateKey,
    #[error("site {site:?} is not in the topology")]
    SiteNotInTopology { site: String },
    #[error("site {site:?}: its configured public key is not this private key's")]
    KeyMismatch { site: String },
    #[error(
        "site {site:?} has no public key: a site is believed only once it proves its name with its key"
    )]
    PeerWithoutKey { site: String },
    #[error("versions: 1 to 16 versions, none 0")]
    Versions,
    #[error("dead_after must be longer than the (non-zero) heartbeat")]
    DeadAfter,
    #[error("reconnect_min must be non-zero and at most reconnect_max")]
    Reconnect,
    #[error(
        "max_payload ≥ 1024, link_queue, max_pending_handshakes and max_pending_per_source ≥ 1"
    )]
    Limits,
}

/// A local state [`MepNode`] cannot publish: it would not fit the MEP wire.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MepStateError {
    /// The service list does not encode in one frame (the cause is in the message too: it ends
    /// up as text in the daemon's error).
    #[error("services: {source}")]
    Services { source: FrameError },
    #[error("an RTT row's site name is empty or too long")]
    RttSiteName,
    #[error("a persistence entry's name is too long")]
    PersistName,
}

/// Which input of [`MepTls::from_pem`] a [`MepError::Tls`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsInput {
    Certificate,
    PrivateKey,
    Ca,
    /// The certificate does not go with the private key.
    CertificateAndKey,
    /// The crypto provider refused the protocol versions (no file is at fault).
    Provider,
}

impl TlsInput {
    /// How the error message names it.
    fn name(self) -> &'static str {
        match self {
            TlsInput::Certificate => "certificate",
            TlsInput::PrivateKey => "private key",
            TlsInput::Ca => "CA",
            TlsInput::CertificateAndKey => "certificate and key",
            TlsInput::Provider => "TLS",
        }
    }
}

/// What this site publishes about itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalState {
    pub services: Vec<ServiceReport>,
    /// LDNS RTT rows measured here (sent to parents only).
    pub rtt: Vec<RttRow>,
    /// Persistence entries made here (sent to parents only).
    pub persistence: Vec<PersistEntry>,
}

/// One session as the node sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    pub up: bool,
    /// When it last came up or went down.
    pub since: Instant,
    /// The negotiated version while up.
    pub version: Option<u8>,
    /// We opened it.
    pub initiated: bool,
    pub peer_software: Option<String>,
    /// Why it last went down or failed to come up.
    pub last_error: Option<String>,
    /// `last_error`'s kind, one of a fixed set (for a metric's label).
    pub last_reason: Option<CloseReason>,
    pub audience: Audience,
}

/// What is known of a remote site, merged over the sessions it came through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteSite {
    /// We have a live MEP path to it: our session to it, or a parent we are connected to that has it
    /// attached; or it is a child moving between parents, within the handover grace
    /// (`handover`).
    pub reachable: bool,
    /// The session its state came through (itself when direct).
    pub via: Option<String>,
    pub status: Option<SiteStatus>,
    /// As reported; see [`RemoteSite::service_up`] for the effective state.
    pub services: Arc<Vec<ServiceReport>>,
    pub rtt: Arc<Vec<RttRow>>,
    pub persistence: Arc<Vec<PersistEntry>>,
    /// Its backup-parent list, as it sent it.
    pub backups: Option<Vec<String>>,
    /// Reachable only by the handover grace: the child left the parent its state came through
    /// (`via`) for this one, which has not delivered it yet; the state shown is the last one
    /// delivered (docs/mep.md, "Handover").
    pub handover: Option<String>,
}

impl RemoteSite {
    fn unknown() -> Self {
        // Shared empty tables: a large tree's view has a thousand sites, rebuilt often.
        static SERVICES: LazyLock<Arc<Vec<ServiceReport>>> = LazyLock::new(Arc::default);
        static RTT: LazyLock<Arc<Vec<RttRow>>> = LazyLock::new(Arc::default);
        static PERSISTENCE: LazyLock<Arc<Vec<PersistEntry>>> = LazyLock::new(Arc::default);
        RemoteSite {
            reachable: false,
            via: None,
            status: None,
            services: SERVICES.clone(),
            rtt: RTT.clone(),
            persistence: PERSISTENCE.clone(),
            backups: None,
            handover: None,
        }
    }

    /// The service's state as reported, and DOWN while the site is unreachable.
    pub fn service_up(&self, service: &str) -> bool {
        let reported = self
            .services
            .iter()
            .find(|s| s.name == service)
            .map(|s| s.state.up);
        remote_service_up(None, self.reachable, reported)
    }
}

/// The node's merged view: its sessions, the remote sites, its place in the topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MepView {
    pub site: String,
    pub role: Role,
    pub answers_dns: bool,
    pub sessions: BTreeMap<String, SessionInfo>,
    pub sites: BTreeMap<String, RemoteSite>,
    /// A child's current parent (own or adopter).
    pub current_parent: Option<String>,
    /// A parent's adopted children → their original parents.
    pub adopted: BTreeMap<String, String>,
    /// Which parent holds each child, as far as this node knows.
    pub holders: BTreeMap<String, String>,
}

impl MepView {
    fn empty() -> Self {
        MepView {
            site: String::new(),
            role: Role::Parent,
            answers_dns: false,
            sessions: BTreeMap::new(),
            sites: BTreeMap::new(),
            current_parent: None,
            adopted: BTreeMap::new(),
            holders: BTreeMap::new(),
        }
    }

    /// The view before a node's first one: no site reachable yet, so remote services are DOWN
    /// (unless monitored here) until their MEP links come up; the role is `site`'s in
    /// `topology`. `None` when `topology` lacks `site`.
    pub fn initial(site: &str, topology: &SiteTree) -> Option<MepView> {
        let role = topology.site(site)?.role;
        Some(MepView {
            answers_dns: topology.answers_dns(site),
            site: site.to_owned(),
            role,
            ..MepView::empty()
        })
    }

    pub fn session_up(&self, peer: &str) -> bool {
        self.sessions.get(peer).is_some_and(|l| l.up)
    }

    /// A remote service's effective state: `local_monitor` when a local monitor watches it,
    /// else what its site reported over MEP, DOWN when the site is unreachable or unknown.
    pub fn service_up(&self, site: &str, service: &str, local_monitor: Option<bool>) -> bool {
        let remote = self.sites.get(site);
        let reported = remote
            .and_then(|r| r.services.iter().find(|s| s.name == service))
            .map(|s| s.state.up);
        remote_service_up(local_monitor, remote.is_some_and(|r| r.reachable), reported)
    }
}

/// Counters of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MepStats {
    /// Sessions closed (or refused) by reason.
    pub closes: BTreeMap<&'static str, u64>,
    pub frames_in: u64,
    pub frames_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Handshakes completed.
    pub handshakes: u64,
    /// Connections accepted and dialed.
    pub accepted: u64,
    pub dialed: u64,
    /// Peers whose RTT tolerance differs from ours.
    pub tolerance_mismatches: u64,
    /// Statements a peer may not make (about another site than itself, or a parent about a
    /// site that is not its child), dropped.
    pub refused_statements: u64,
}

impl MepStats {
    pub fn closed(&self, reason: CloseReason) -> u64 {
        self.closes.get(reason.as_str()).copied().unwrap_or(0)
    }
}

/// A site's MEP endpoint; cheap to clone (a handle).
#[derive(Clone)]
pub struct MepNode {
    shared: Arc<NodeState>,
}

/// What a node handle and its controller share: the local state in, the merged view out.
struct NodeState {
    local: watch::Sender<Arc<LocalState>>,
    view: watch::Sender<Arc<MepView>>,
    counters: Arc<Counters>,
}

impl Default for MepNode {
    fn default() -> Self {
        Self::new()
    }
}

impl MepNode {
    pub fn new() -> Self {
        MepNode {
            shared: Arc::new(NodeState {
                local: watch::channel(Arc::new(LocalState::default())).0,
                view: watch::channel(Arc::new(MepView::empty())).0,
                counters: Arc::new(Counters::default()),
            }),
        }
    }

    /// Publishes this site's state; sessions send it (the latest only) to the peers whose
    /// audience gets it. Refused when the service list does not fit one frame or a name is
    /// too long.
    pub fn publish_local(&self, state: LocalState) -> Result<(), MepError> {
        check_metrics(&state.services, &state.rtt)?;
        check_persistence(&state.persistence)?;
        self.shared.local.send_replace(Arc::new(state));
        Ok(())
    }

    /// Publishes this site's services and RTT rows, keeping the persistence entries as they are
    /// (gslbd publishes those on their own clock, [`MepNode::publish_persistence`]).
    pub fn publish_metrics(
        &self,
        services: Vec<ServiceReport>,
        rtt: Vec<RttRow>,
    ) -> Result<(), MepError> {
        check_metrics(&services, &rtt)?;
        self.shared.local.send_modify(|s| {
            let s = Arc::make_mut(s);
            s.services = services;
            s.rtt = rtt;
        });
        Ok(())
    }

    /// Publishes the persistence entries to send to the other parents (a batch of new or
    /// refreshed entries: each peer merges every batch it receives into its own table), keeping
    /// the rest of the local state.
    pub fn publish_persistence(&self, entries: Vec<PersistEntry>) -> Result<(), MepError> {
        check_persistence(&entries)?;
        self.shared
            .local
            .send_modify(|s| Arc::make_mut(s).persistence = entries);
        Ok(())
    }

    /// The merged view, updated after every change.
    pub fn subscribe(&self) -> watch::Receiver<Arc<MepView>> {
        self.shared.view.subscribe()
    }

    /// The merged view now.
    pub fn view(&self) -> Arc<MepView> {
        self.shared.view.borrow().clone()
    }

    pub fn stats(&self) -> MepStats {
        let c = &self.shared.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        MepStats {
            closes: c.closes(),
            frames_in: l(&c.frames_in),
            frames_out: l(&c.frames_out),
            bytes_in: l(&c.bytes_in),
            bytes_out: l(&c.bytes_out),
            handshakes: l(&c.handshakes),
            accepted: l(&c.accepted),
            dialed: l(&c.dialed),
            tolerance_mismatches: l(&c.tolerance_mismatches),
            refused_statements: l(&c.refused_statements),
        }
    }

    /// Runs the site's MEP on `listener` with `config` until `shutdown`: accepts sessions, opens
    /// the sessions the topology asks for, exchanges state. Every session is closed on return.
    pub async fn run(
        &self,
        listener: TcpListener,
        config: MepConfig,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), MepError> {
        config.validate()?;
        let now = Instant::now();
        let view = SiteView::new(config.topology.clone(), &config.site, config.timing, now)?;
        let cfg = Arc::new(config);
        let (events_tx, events) = mpsc::channel(1024);
        let local_hello = LocalHello {
            site: cfg.site.clone(),
            role: view.role(),
            parent: view.own_parent().map(str::to_owned),
            versions: cfg.versions.clone(),
            software: cfg.software.clone(),
            rtt_tolerance_ms: cfg.rtt_tolerance_ms,
        };
        let ctx = Arc::new(Ctx {
            cfg: cfg.clone(),
            hello: local_hello,
            counters: self.shared.counters.clone(),
            events: events_tx,
            outbound: watch::channel(Arc::new(Outbound::default())).0,
            next_id: AtomicU64::new(1),
            log_gate: accept::LogGate::default(),
        });
        info!(site = %cfg.site, role = view.role().as_str(), addr = ?listener.local_addr().ok(), "MEP started");
        // Aborted when the node stops or its future is dropped (a supervised restart after a
        // panic): a stale accept loop would take the next node's connections and drop them.
        let acceptor = AbortOnDrop(tokio::spawn(accept::accept_loop(listener, ctx.clone())));
        let mut controller = Controller::new(ctx.clone(), view, self.shared.clone());
        controller.run(events, shutdown, acceptor).await;
        info!(site = %cfg.site, "MEP stopped");
        Ok(())
    }
}

/// A service list must fit one frame; RTT rows need a site name of the allowed length.
fn check_metrics(services: &[ServiceReport], rtt: &[RttRow]) -> Result<(), MepError> {
    let probe = Message::ServiceStates(ServiceStates {
        site: "x".into(),
        services: services.to_vec(),
    });
    frame::encode(1, &probe, frame::DEFAULT_MAX_PAYLOAD - frame::MAX_SITE_NAME)
        .map_err(|source| MepStateError::Services { source })?;
    if rtt
        .iter()
        .any(|r| r.site.is_empty() || r.site.len() > frame::MAX_SITE_NAME)
    {
        return Err(MepStateError::RttSiteName.into());
    }
    Ok(())
}

fn check_persistence(entries: &[PersistEntry]) -> Result<(), MepError> {
    if entries
        .iter()
        .any(|e| e.domain.len() > frame::MAX_NAME || e.service.len() > frame::MAX_NAME)
    {
        return Err(MepStateError::PersistName.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_and_persistence_are_published_without_undoing_each_other() {
        let node = MepNode::new();
        let entry = PersistEntry {
            client: "192.0.2.0/24".parse().unwrap(),
            domain: "shop.example.com".into(),
            service: "web1".into(),
            ttl_s: 60,
        };
        let web1 = ServiceReport {
            name: "web1".into(),
            state: crate::health::state::ServiceState::UP,
        };
        node.publish_persistence(vec![entry.clone()]).unwrap();
        node.publish_metrics(vec![web1.clone()], Vec::new())
            .unwrap();
        let local = node.shared.local.borrow().clone();
        assert_eq!(
            (&local.services[..], &local.persistence[..]),
            (&[web1][..], &[entry.clone()][..])
        );
        node.publish_persistence(Vec::new()).unwrap();
        assert_eq!(node.shared.local.borrow().services.len(), 1);
        let long = PersistEntry {
            domain: "x".repeat(frame::MAX_NAME + 1),
            ..entry
        };
        assert!(node.publish_persistence(vec![long]).is_err());
        assert!(node.shared.local.borrow().persistence.is_empty());
    }
}
