//! [`MepNode`]: one site's MEP endpoint. A controller task owns the topology view
//! ([`SiteView`]), the links and the state received; every link runs in its own task; dialers
//! (one per link this site opens) reconnect with bounded exponential backoff.
//!
//! The controller never waits on a peer: it hands links commands through bounded queues with
//! `try_send` (a full queue closes that link, `queue_full`), and publishes what links send
//! through a `watch` (a slow link skips intermediate states and sends only the latest).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    future::Future,
    net::{IpAddr, SocketAddr},
    sync::{
        Arc, LazyLock,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::{TcpListener, TcpSocket, TcpStream},
    sync::{mpsc, oneshot, watch},
    task::JoinSet,
};
use tokio_rustls::rustls::{self, pki_types::ServerName};
use tracing::{debug, info, warn};

use super::{
    auth::SiteKey,
    frame::{
        self, Hello, Message, PersistEntry, Role, RttRow, ServiceState, ServiceStates, SiteStatus,
    },
    session::{
        self, Audience, CloseReason, Counters, LinkChannels, LinkCmd, LinkError, LinkParams,
        LocalHello, Outbound, Part, Relay,
    },
    topology::{
        Action, Purpose, SiteSpec, SiteView, Topology, TopologyError, TopologyTiming,
        remote_service_up,
    },
};

mod accept;
mod merge;
use merge::{Handover, HandoverEnd, SiteTable};

/// Protocol versions this build speaks.
pub const SUPPORTED_VERSIONS: &[u8] = &[2];

/// Most rows of one RTT table accepted from one peer.
const MAX_TABLE_ROWS: usize = 1 << 20;
/// Most rows of one persistence table accepted from one peer: a gslbd sends at most
/// `persist::MAX_EXPORT_ROWS` at a time, each peer table is a batch of new or refreshed
/// entries, not the peer's whole table.
const MAX_PERSIST_ROWS: usize = crate::persist::MAX_MERGE_ROWS;

/// A site's MEP settings.
#[derive(Clone, Debug)]
pub struct MepConfig {
    /// This site (in `topology`).
    pub site: String,
    /// This site's private key (never sent; see `auth`). Every other site of `topology` has
    /// its public key there ([`SiteSpec::key`]); this site's, when written, must match.
    pub key: SiteKey,
    pub topology: Topology,
    /// Protocol versions offered; both ends use the highest in common.
    pub versions: Vec<u8>,
    /// Sent in the Hello, for the peer's logs.
    pub software: String,
    /// Must be the same on every site; a peer with another value is logged and counted.
    pub rtt_tolerance_ms: Option<u32>,
    pub max_payload: usize,
    /// A heartbeat every this long on every link.
    pub heartbeat: Duration,
    /// A link with no frame for this long is dead.
    pub dead_after: Duration,
    pub handshake_timeout: Duration,
    pub connect_timeout: Duration,
    /// A frame not written within this long closes the link (a peer that stopped reading).
    pub write_timeout: Duration,
    /// Reconnect backoff: starts at `reconnect_min`, doubles up to `reconnect_max`.
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
    pub timing: TopologyTiming,
    /// Commands queued per link before it counts as stuck.
    pub link_queue: usize,
    /// Inbound connections in their handshake at once; when full, a new connection closes the
    /// oldest one still in its handshake (a flood cannot lock a real site out).
    pub max_pending_handshakes: usize,
    /// Inbound connections in their handshake at once from one source address; more are
    /// closed at once.
    pub max_pending_per_source: usize,
    /// The merged view is republished at most this often (it is rebuilt whole, O(sites)).
    pub view_interval: Duration,
    /// TLS on every link (NetScaler's secured MEP); `None`: plain TCP. The MEP handshake with
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
        let provider = Arc::new(rustls::crypto::ring::default_provider());
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
    pub fn new(site: impl Into<String>, key: SiteKey, topology: Topology) -> Self {
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
            link_queue: 64,
            max_pending_handshakes: 64,
            max_pending_per_source: 4,
            view_interval: Duration::from_millis(100),
            tls: None,
        }
    }

    /// What [`MepNode::run`] checks first; gslbd calls it before it reports ready, so that a
    /// node that cannot run fails the start rather than a background task.
    pub fn validate(&self) -> Result<(), MepError> {
        let bad = |m: String| Err(MepError::Config(m));
        let Some(me) = self.topology.site(&self.site) else {
            return bad(format!("site {:?} is not in the topology", self.site));
        };
        if me.key.is_some_and(|k| k != self.key.public()) {
            return bad(format!(
                "site {:?}: its configured public key is not this private key's",
                self.site
            ));
        }
        if let Some(s) = self
            .topology
            .sites()
            .iter()
            .find(|s| s.name != self.site && s.key.is_none())
        {
            return bad(format!(
                "site {:?} has no public key: a site is believed only once it proves its name with its key",
                s.name
            ));
        }
        if self.versions.is_empty()
            || self.versions.len() > frame::MAX_VERSIONS
            || self.versions.contains(&0)
        {
            return bad("versions: 1 to 16 versions, none 0".into());
        }
        if self.heartbeat.is_zero() || self.dead_after <= self.heartbeat {
            return bad("dead_after must be longer than the (non-zero) heartbeat".into());
        }
        if self.reconnect_min.is_zero() || self.reconnect_max < self.reconnect_min {
            return bad("reconnect_min must be non-zero and at most reconnect_max".into());
        }
        if self.max_payload < 1024
            || self.link_queue == 0
            || self.max_pending_handshakes == 0
            || self.max_pending_per_source == 0
        {
            return bad(
                "max_payload ≥ 1024, link_queue, max_pending_handshakes and max_pending_per_source ≥ 1"
                    .into(),
            );
        }
        Ok(())
    }
}

/// A MEP node cannot start, or a state cannot be published.
#[derive(Debug, thiserror::Error)]
pub enum MepError {
    #[error("MEP configuration: {0}")]
    Config(String),
    #[error("MEP topology: {0}")]
    Topology(#[from] TopologyError),
    #[error("local state: {0}")]
    State(String),
    /// A TLS input is unusable; `input` says which (the configuration points at its file).
    #[error("MEP TLS: {}: {reason}", input.name())]
    Tls { input: TlsInput, reason: String },
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
    pub services: Vec<ServiceState>,
    /// LDNS RTT rows measured here (sent to parents only).
    pub rtt: Vec<RttRow>,
    /// Persistence entries made here (sent to parents only).
    pub persistence: Vec<PersistEntry>,
}

/// One link as the node sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkInfo {
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
    pub audience: Audience,
}

/// What is known of a remote site, merged over the links it came through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteSite {
    /// We have a live MEP path to it: our link to it, or a parent we are linked to that has it
    /// attached; or it is a child moving between parents, within the handover grace
    /// (`handover`).
    pub reachable: bool,
    /// The link its state came through (itself when direct).
    pub via: Option<String>,
    pub status: Option<SiteStatus>,
    /// As reported; see [`RemoteSite::service_up`] for the effective state.
    pub services: Arc<Vec<ServiceState>>,
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
        static SERVICES: LazyLock<Arc<Vec<ServiceState>>> = LazyLock::new(Arc::default);
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
            .map(|s| s.up);
        remote_service_up(None, self.reachable, reported)
    }
}

/// The node's merged view: its links, the remote sites, its place in the topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MepView {
    pub site: String,
    pub role: Role,
    pub answers_dns: bool,
    pub links: BTreeMap<String, LinkInfo>,
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
            links: BTreeMap::new(),
            sites: BTreeMap::new(),
            current_parent: None,
            adopted: BTreeMap::new(),
            holders: BTreeMap::new(),
        }
    }

    pub fn link_up(&self, peer: &str) -> bool {
        self.links.get(peer).is_some_and(|l| l.up)
    }

    /// A remote service's effective state: `local_monitor` when a local monitor watches it,
    /// else what its site reported over MEP, DOWN when the site is unreachable or unknown.
    pub fn service_up(&self, site: &str, service: &str, local_monitor: Option<bool>) -> bool {
        let remote = self.sites.get(site);
        let reported = remote
            .and_then(|r| r.services.iter().find(|s| s.name == service))
            .map(|s| s.up);
        remote_service_up(local_monitor, remote.is_some_and(|r| r.reachable), reported)
    }
}

/// Counters of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MepStats {
    /// Links closed (or refused) by reason.
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
    shared: Arc<Shared>,
}

struct Shared {
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
            shared: Arc::new(Shared {
                local: watch::channel(Arc::new(LocalState::default())).0,
                view: watch::channel(Arc::new(MepView::empty())).0,
                counters: Arc::new(Counters::default()),
            }),
        }
    }

    /// Publishes this site's state; links send it (the latest only) to the peers whose
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
        services: Vec<ServiceState>,
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

    /// Runs the site's MEP on `listener` with `config` until `shutdown`: accepts links, opens
    /// the links the topology asks for, exchanges state. Every link is closed on return.
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
        let tasks = JoinSet::new();
        let mut controller = Controller {
            ctx: ctx.clone(),
            view,
            shared: self.shared.clone(),
            local: self.shared.local.subscribe(),
            links: HashMap::new(),
            by_id: HashMap::new(),
            info: BTreeMap::new(),
            dialers: HashMap::new(),
            table: SiteTable::new(cfg.dead_after),
            pending_rtt: HashMap::new(),
            pending_persist: HashMap::new(),
            out: Outbound::default(),
            version: 0,
            tasks,
            topo_dirty: true,
            view_dirty: true,
        };
        controller.run(events, shutdown, acceptor).await;
        info!(site = %cfg.site, "MEP stopped");
        Ok(())
    }
}

/// A task aborted when this is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Everything link tasks share.
struct Ctx {
    cfg: Arc<MepConfig>,
    hello: LocalHello,
    counters: Arc<Counters>,
    events: mpsc::Sender<Event>,
    outbound: watch::Sender<Arc<Outbound>>,
    next_id: AtomicU64,
    /// Rate-limits the warnings of refused links and statements.
    log_gate: accept::LogGate,
}

/// What link tasks tell the controller.
#[derive(Debug)]
pub enum Event {
    Up {
        link: u64,
        hello: Box<Hello>,
        version: u8,
        initiated: bool,
        cmds: mpsc::Sender<LinkCmd>,
        kill: oneshot::Sender<(CloseReason, String)>,
        audience: watch::Sender<Audience>,
    },
    Frame {
        link: u64,
        message: Message,
    },
    Down {
        link: u64,
        peer: String,
        error: String,
    },
    /// A dial or handshake towards `peer` failed.
    Failed {
        peer: String,
        error: String,
    },
}

/// A link's byte stream: plain TCP or TLS over it.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}
type BoxStream = Box<dyn Stream>;

/// The connection to `site`, in TLS (verifying the site's certificate for its name) when the
/// site is configured so.
async fn tls_connect(
    stream: TcpStream,
    site: &str,
    cfg: &MepConfig,
) -> Result<BoxStream, LinkError> {
    let Some(tls) = &cfg.tls else {
        return Ok(Box::new(stream));
    };
    let name = ServerName::try_from(site.to_owned())
        .map_err(|e| LinkError::Tls(format!("site name {site:?} is not a TLS server name: {e}")))?;
    let connect = tokio_rustls::TlsConnector::from(tls.client.clone()).connect(name, stream);
    match tokio::time::timeout(cfg.handshake_timeout, connect).await {
        Err(_) => Err(LinkError::HandshakeTimeout(cfg.handshake_timeout)),
        Ok(Err(e)) => Err(LinkError::Tls(e.to_string())),
        Ok(Ok(s)) => Ok(Box::new(s)),
    }
}

async fn established(
    stream: BoxStream,
    est: session::Established,
    initiated: bool,
    ctx: &Ctx,
) -> Option<Duration> {
    let cfg = &ctx.cfg;
    ctx.counters.handshakes.fetch_add(1, Ordering::Relaxed);
    let link = ctx.next_id.fetch_add(1, Ordering::Relaxed);
    let peer = est.peer.site.clone();
    if let (Some(ours), Some(theirs)) = (cfg.rtt_tolerance_ms, est.peer.rtt_tolerance_ms)
        && ours != theirs
    {
        ctx.counters
            .tolerance_mismatches
            .fetch_add(1, Ordering::Relaxed);
        warn!(site = %cfg.site, %peer, ours, theirs,
            "RTT TOLERANCE DIFFERS between sites: RTT answers will disagree; configure the same value everywhere");
    }
    let (cmds_tx, cmds) = mpsc::channel(cfg.link_queue);
    let (kill_tx, kill) = oneshot::channel();
    let (audience_tx, audience) = watch::channel(Audience::None);
    let up = Event::Up {
        link,
        hello: Box::new(est.peer.clone()),
        version: est.version,
        initiated,
        cmds: cmds_tx,
        kill: kill_tx,
        audience: audience_tx,
    };
    if ctx.events.send(up).await.is_err() {
        return None;
    }
    info!(site = %cfg.site, %peer, version = est.version, initiated, software = %est.peer.software, "MEP link up");
    let started = Instant::now();
    let params = LinkParams {
        id: link,
        peer: peer.clone(),
        version: est.version,
        max_payload: cfg.max_payload,
        heartbeat: cfg.heartbeat,
        dead_after: cfg.dead_after,
        write_timeout: cfg.write_timeout,
    };
    let error = session::run_link(
        stream,
        est.keys,
        params,
        ctx.counters.clone(),
        LinkChannels {
            cmds,
            kill,
            outbound: ctx.outbound.subscribe(),
            audience,
            events: ctx.events.clone(),
        },
    )
    .await;
    let reason = error.reason();
    ctx.counters.closed(reason);
    match reason {
        CloseReason::Shutdown | CloseReason::Unwanted | CloseReason::Replaced => {
            info!(site = %cfg.site, %peer, reason = reason.as_str(), %error, "MEP link closed")
        }
        _ => warn!(site = %cfg.site, %peer, reason = reason.as_str(), %error, "MEP link down"),
    }
    let _ = ctx
        .events
        .send(Event::Down {
            link,
            peer,
            error: format!("{}: {error}", reason.as_str()),
        })
        .await;
    Some(started.elapsed())
}

/// Opens the link to `spec` and keeps it open (reconnecting with backoff) until `stop`.
async fn dial_loop(spec: SiteSpec, ctx: Arc<Ctx>, mut stop: watch::Receiver<bool>) {
    let cfg = &ctx.cfg;
    let addr = spec.mep_addr();
    // Links leave from this site's own address where it has it, so that the peer's source
    // check sees the configured `ip` (loopback tests, hosts with several addresses).
    let source = cfg.topology.site(&cfg.site).map(|s| s.ip);
    let mut backoff = cfg.reconnect_min;
    let mut failures = 0u64;
    loop {
        if *stop.borrow() {
            return;
        }
        let attempt = async {
            ctx.counters.dialed.fetch_add(1, Ordering::Relaxed);
            let stream =
                match tokio::time::timeout(cfg.connect_timeout, connect(addr, source)).await {
                    Err(_) => {
                        return Err(LinkError::Connect {
                            addr,
                            source: std::io::ErrorKind::TimedOut.into(),
                        });
                    }
                    Ok(Err(source)) => return Err(LinkError::Connect { addr, source }),
                    Ok(Ok(s)) => s,
                };
            let _ = stream.set_nodelay(true);
            let mut stream = tls_connect(stream, &spec.name, cfg).await?;
            let me = session::Identity {
                hello: &ctx.hello,
                key: &cfg.key,
            };
            let peer_key = spec.key.ok_or_else(|| {
                LinkError::UnknownSite(format!("site {:?} has no public key here", spec.name))
            })?;
            let est = session::handshake_initiator(
                &mut stream,
                me,
                &spec.name,
                &peer_key,
                cfg.max_payload,
                cfg.handshake_timeout,
            )
            .await?;
            Ok((stream, est))
        };
        let outcome = tokio::select! {
            r = attempt => r,
            _ = stop.changed() => return,
        };
        match outcome {
            Ok((stream, est)) => {
                // Established links end only by failing or by the controller's kill.
                failures = 0;
                if let Some(lasted) = established(stream, est, true, &ctx).await
                    && lasted >= cfg.dead_after
                {
                    backoff = cfg.reconnect_min;
                }
            }
            Err(error) => {
                let reason = error.reason();
                ctx.counters.closed(reason);
                // An unreachable peer is never silent: the first failure of a streak and every
                // tenth after it are warnings, with the address and the reason.
                failures += 1;
                let level_warn =
                    !matches!(reason, CloseReason::ConnectFailed) || failures % 10 == 1;
                if level_warn {
                    warn!(site = %cfg.site, peer = %spec.name, %addr, reason = reason.as_str(), %error, "MEP link failed");
                } else {
                    debug!(site = %cfg.site, peer = %spec.name, %addr, reason = reason.as_str(), %error, "MEP link failed");
                }
                let _ = ctx
                    .events
                    .send(Event::Failed {
                        peer: spec.name.clone(),
                        error: format!("{}: {error}", reason.as_str()),
                    })
                    .await;
            }
        }
        let wait = jitter(backoff);
        backoff = (backoff * 2).min(cfg.reconnect_max);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
    }
}

/// A connection to `addr`, from `source` when this host has that address (else from whatever
/// address the route gives).
async fn connect(addr: SocketAddr, source: Option<IpAddr>) -> std::io::Result<TcpStream> {
    if let Some(ip) = source.filter(|ip| !ip.is_unspecified() && ip.is_ipv4() == addr.is_ipv4()) {
        let socket = if ip.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        if socket.bind(SocketAddr::new(ip, 0)).is_ok() {
            return socket.connect(addr).await;
        }
    }
    TcpStream::connect(addr).await
}

/// `d` plus up to 25 % at random, so that sites cut off together do not all retry together.
fn jitter(d: Duration) -> Duration {
    let r = super::auth::nonce()[0] as u32;
    d + d * r / 1024
}

struct LinkHandle {
    id: u64,
    initiated: bool,
    cmds: mpsc::Sender<LinkCmd>,
    kill: Option<oneshot::Sender<(CloseReason, String)>>,
    audience: watch::Sender<Audience>,
}

impl LinkHandle {
    fn kill(&mut self, reason: CloseReason, detail: String) {
        if let Some(k) = self.kill.take() {
            let _ = k.send((reason, detail));
        }
    }
}

struct Dialer {
    purpose: Purpose,
    stop: watch::Sender<bool>,
}

struct Controller {
    ctx: Arc<Ctx>,
    view: SiteView,
    shared: Arc<Shared>,
    local: watch::Receiver<Arc<LocalState>>,
    links: HashMap<String, LinkHandle>,
    by_id: HashMap<u64, String>,
    info: BTreeMap<String, LinkInfo>,
    dialers: HashMap<String, Dialer>,
    /// What each link brought about each site, and the handovers in progress.
    table: SiteTable,
    pending_rtt: HashMap<String, Vec<RttRow>>,
    pending_persist: HashMap<String, Vec<PersistEntry>>,
    out: Outbound,
    version: u64,
    tasks: JoinSet<()>,
    /// Something the topology or what links send depends on changed.
    topo_dirty: bool,
    /// Something the published view shows changed.
    view_dirty: bool,
}

impl Controller {
    async fn run(
        &mut self,
        mut events: mpsc::Receiver<Event>,
        shutdown: impl Future<Output = ()>,
        acceptor: AbortOnDrop,
    ) {
        tokio::pin!(shutdown);
        // Adoption timers are checked on this tick (nothing else is rebuilt unless it changed).
        let tick = (self.ctx.cfg.timing.adopt_after / 10)
            .clamp(Duration::from_millis(10), Duration::from_millis(100));
        let mut ticker = tokio::time::interval(tick);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        self.refresh_local(true);
        // The view is rebuilt at most every `view_interval` (it is O(sites); a parent of a large
        // tree gets a relayed frame for some child every millisecond).
        let publish_every = self.ctx.cfg.view_interval;
        let mut last_publish = Instant::now() - publish_every;
        loop {
            let flush_at = last_publish + publish_every;
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                _ = tokio::time::sleep_until(flush_at.into()), if self.view_dirty => {}
                Some(event) = events.recv() => {
                    self.handle(event);
                    // Take what else is waiting before publishing once.
                    for _ in 0..256 {
                        match events.try_recv() {
                            Ok(e) => self.handle(e),
                            Err(_) => break,
                        }
                    }
                }
                r = self.local.changed() => {
                    if r.is_ok() {
                        self.refresh_local(false);
                        self.topo_dirty = true;
                    }
                }
                _ = ticker.tick() => {
                    self.topo_dirty = true;
                    self.settle_handovers(Instant::now());
                    while self.tasks.try_join_next().is_some() {}
                }
            }
            if std::mem::take(&mut self.topo_dirty) {
                self.reconcile();
            }
            if self.view_dirty && Instant::now() >= last_publish + publish_every {
                self.view_dirty = false;
                last_publish = Instant::now();
                self.publish();
            }
        }
        info!(site = %self.view.me(), links = self.links.len(), "MEP stopping");
        for d in self.dialers.values() {
            let _ = d.stop.send(true);
        }
        for l in self.links.values_mut() {
            l.kill(CloseReason::Shutdown, "site shutting down".into());
        }
        // Give links a moment to send their Reject, then abort whatever is left.
        let links = &mut self.links;
        let _ = tokio::time::timeout(Duration::from_millis(100), async {
            while !links.is_empty() {
                match events.recv().await {
                    Some(Event::Down { link, peer, .. }) => {
                        if links.get(&peer).is_some_and(|l| l.id == link) {
                            links.remove(&peer);
                        }
                    }
                    Some(_) => {}
                    None => break,
                }
            }
        })
        .await;
        drop(acceptor);
        self.tasks.abort_all();
    }

    fn bump(&mut self) -> u64 {
        self.version += 1;
        self.version
    }

    /// Rebuilds the parts of `out` that come from the local state (or all of them).
    fn refresh_local(&mut self, all: bool) {
        let local = self.local.borrow_and_update().clone();
        let me = self.view.me().to_owned();
        let services = ServiceStates {
            site: me.clone(),
            services: local.services.clone(),
        };
        if all
            || self
                .out
                .services
                .as_ref()
                .is_none_or(|p| *p.value != services)
        {
            let v = self.bump();
            self.out.services = Some(Part {
                version: v,
                value: Arc::new(services),
            });
        }
        if all || *self.out.rtt.value != local.rtt {
            let v = self.bump();
            self.out.rtt = Part {
                version: v,
                value: Arc::new(local.rtt.clone()),
            };
        }
        if all || *self.out.persistence.value != local.persistence {
            let v = self.bump();
            self.out.persistence = Part {
                version: v,
                value: Arc::new(local.persistence.clone()),
            };
        }
        self.refresh_topology_parts();
    }

    /// Our status, backup list and relayed children, from the view.
    fn refresh_topology_parts(&mut self) {
        let me = self.view.me().to_owned();
        let status = SiteStatus {
            site: me.clone(),
            role: self.view.role(),
            parent: self.view.current_parent().map(str::to_owned),
            up: true,
        };
        if self.out.status.as_ref().is_none_or(|p| *p.value != status) {
            let v = self.bump();
            self.out.status = Some(Part {
                version: v,
                value: Arc::new(status),
            });
        }
        if self.view.role() == Role::Parent {
            let backups = self.view.own_backups().to_vec();
            if self
                .out
                .backups
                .as_ref()
                .is_none_or(|p| *p.value != backups)
            {
                let v = self.bump();
                self.out.backups = Some(Part {
                    version: v,
                    value: Arc::new(backups),
                });
            }
            // The children attached now, and those relayed before (to say they left).
            let mut children: BTreeSet<String> = self.out.children.keys().cloned().collect();
            children.extend(
                self.links
                    .keys()
                    .filter(|p| self.view.is_attached(p))
                    .cloned(),
            );
            for child in children {
                let status = self.view.child_status(&child);
                let known = self.out.children.get(&child);
                if known.is_none() && !status.up {
                    continue;
                }
                // Services only once the child sent them: relayed empty before that, they would
                // count as the child's whole list at the other parents.
                let reported = if status.up {
                    self.table
                        .get(&child, &child)
                        .and_then(|d| d.services.clone())
                } else {
                    None
                };
                if known.is_some_and(|r| {
                    r.status == status
                        && r.services.as_ref().map(|s| &s.services) == reported.as_deref()
                }) {
                    continue;
                }
                let services = reported.map(|s| {
                    Arc::new(ServiceStates {
                        site: child.clone(),
                        services: (*s).clone(),
                    })
                });
                let kept_status = known
                    .filter(|r| r.status == status)
                    .map(|r| r.status_version);
                let version = self.bump();
                let status_version = kept_status.unwrap_or(version);
                self.out.children.insert(
                    child,
                    Relay {
                        version,
                        status_version,
                        status,
                        services,
                    },
                );
            }
        }
    }

    fn handle(&mut self, event: Event) {
        let now = Instant::now();
        self.view_dirty = true;
        self.topo_dirty |= match &event {
            Event::Frame { link, message } => match message {
                // Services and tables matter to the topology only as a child's, relayed.
                Message::ServiceStates(_) => self
                    .by_id
                    .get(link)
                    .is_some_and(|peer| self.view.is_attached(peer)),
                Message::RttRows(_) | Message::Persistence(_) => false,
                _ => true,
            },
            _ => true,
        };
        match event {
            Event::Up {
                link,
                hello,
                version,
                initiated,
                cmds,
                kill,
                audience,
            } => {
                let peer = hello.site.clone();
                if let Some(mut old) = self.links.remove(&peer) {
                    // One link per pair. This one proved the peer's name with its key (a
                    // newcomer that cannot never gets here), so it is the peer itself,
                    // reconnected before we saw the old link die: the newer one wins.
                    old.kill(CloseReason::Replaced, "replaced by a newer link".into());
                    self.by_id.remove(&old.id);
                }
                self.by_id.insert(link, peer.clone());
                self.links.insert(
                    peer.clone(),
                    LinkHandle {
                        id: link,
                        initiated,
                        cmds,
                        kill: Some(kill),
                        audience,
                    },
                );
                self.info.insert(
                    peer.clone(),
                    LinkInfo {
                        up: true,
                        since: now,
                        version: Some(version),
                        initiated,
                        peer_software: Some(hello.software.clone()),
                        last_error: None,
                        audience: Audience::None,
                    },
                );
                // Drop what an older link of this peer left.
                self.table.link_up(&peer);
                let actions = self.view.link_up(&peer, now);
                self.apply(actions);
            }
            Event::Down { link, peer, error } => {
                if self.by_id.remove(&link).is_none() {
                    return;
                }
                if self.links.get(&peer).is_some_and(|l| l.id == link) {
                    self.links.remove(&peer);
                }
                if let Some(i) = self.info.get_mut(&peer) {
                    i.up = false;
                    i.since = now;
                    i.version = None;
                    i.last_error = Some(error);
                    i.audience = Audience::None;
                }
                // A child that said it is moving to another parent is kept (as it last was)
                // until that parent delivers it; anything else the link brought goes now.
                let moved_to = self.view.departed_to(&peer).map(str::to_owned);
                if let Some(h) = self.table.link_down(&peer, moved_to.as_deref(), now) {
                    self.handover_started(&peer, &h);
                }
                self.pending_rtt.remove(&peer);
                self.pending_persist.remove(&peer);
                let actions = self.view.link_down(&peer, now);
                self.apply(actions);
            }
            Event::Failed { peer, error } => {
                if !self.links.contains_key(&peer) {
                    let i = self.info.entry(peer).or_insert(LinkInfo {
                        up: false,
                        since: now,
                        version: None,
                        initiated: true,
                        peer_software: None,
                        last_error: None,
                        audience: Audience::None,
                    });
                    i.last_error = Some(error);
                }
            }
            Event::Frame { link, message } => {
                let Some(peer) = self.by_id.get(&link).cloned() else {
                    return;
                };
                self.frame(&peer, message, now);
            }
        }
        self.settle_handovers(now);
    }

    fn handover_started(&self, child: &str, h: &Handover) {
        info!(site = %self.view.me(), %child, from = %h.via, to = %h.to,
            grace_ms = u64::try_from(self.ctx.cfg.dead_after.as_millis()).unwrap_or(u64::MAX),
            "child moving to another parent: its last state kept until that parent relays it");
    }

    /// Ends the handovers whose child was delivered again or whose grace is over.
    fn settle_handovers(&mut self, now: Instant) {
        for (child, h, end) in self.table.settle(now) {
            self.view_dirty = true;
            match end {
                HandoverEnd::Delivered => {
                    debug!(site = %self.view.me(), %child, from = %h.via, to = %h.to, "handover done")
                }
                HandoverEnd::Expired => {
                    info!(site = %self.view.me(), %child, from = %h.via, to = %h.to,
                    "handover not done within the grace: the child is unreachable until a parent relays it")
                }
            }
        }
    }

    /// Whether `peer` may make statements about `site`: every site about itself; a peer parent
    /// (to a parent) about a child whose configured parent it is or whose parent's backup
    /// parent it is (an adopter), never about a parent or about us.
    fn may_speak_for(&self, peer: &str, site: &str) -> bool {
        let topo = self.view.topology();
        if site == self.view.me() {
            return false;
        }
        if site == peer {
            return true;
        }
        if self.view.role() != Role::Parent
            || topo.site(peer).is_none_or(|p| p.role != Role::Parent)
        {
            return false;
        }
        let Some(parent) = topo
            .site(site)
            .filter(|s| s.role == Role::Child)
            .and_then(|s| s.parent.as_deref())
        else {
            return false;
        };
        parent == peer
            || topo
                .site(parent)
                .is_some_and(|p| p.backups.iter().any(|b| b == peer))
            || self.view.backups(parent).iter().any(|b| b == peer)
    }

    /// A statement `peer` may not make: dropped, counted, logged (rate-limited).
    fn refuse_statement(&self, peer: &str, what: &str, site: &str) {
        self.ctx
            .counters
            .refused_statements
            .fetch_add(1, Ordering::Relaxed);
        if let Some(quiet) = self.ctx.log_gate.admit(CloseReason::NotAllowed) {
            warn!(site = %self.view.me(), %peer, about = %site, what, not_logged = quiet,
                "MEP statement about another site refused: a site speaks only for itself, a parent for its own children");
        }
    }

    fn frame(&mut self, peer: &str, message: Message, now: Instant) {
        let me = self.view.me().to_owned();
        match message {
            Message::SiteStatus(s) => {
                if !self.may_speak_for(peer, &s.site) {
                    return self.refuse_statement(peer, "status", &s.site);
                }
                self.view.site_status(peer, &s);
                let child = s.site.clone();
                if let Some(h) = self.table.status(peer, s, now) {
                    self.handover_started(&child, &h);
                }
            }
            Message::ServiceStates(s) => {
                if !self.may_speak_for(peer, &s.site) {
                    return self.refuse_statement(peer, "services", &s.site);
                }
                self.table.services(peer, &s.site, s.services);
            }
            Message::RttRows(mut chunk) => {
                if !self.view.topology().syncs_network_metrics(&me, peer) {
                    return;
                }
                // A parent's RTT table is its own column: rows it says another site measured
                // are not its to give.
                if let Some(other) = chunk.items.iter().find(|r| r.site != peer) {
                    self.refuse_statement(peer, "rtt rows", &other.site.clone());
                    chunk.items.retain(|r| r.site == peer);
                }
                if let Some(rows) = collect(
                    &mut self.pending_rtt,
                    peer,
                    chunk.first,
                    chunk.last,
                    chunk.items,
                    MAX_TABLE_ROWS,
                ) {
                    self.table.entry(peer, peer).rtt = Arc::new(rows);
                }
            }
            Message::Persistence(chunk) => {
                if !self.view.topology().syncs_network_metrics(&me, peer) {
                    return;
                }
                if let Some(rows) = collect(
                    &mut self.pending_persist,
                    peer,
                    chunk.first,
                    chunk.last,
                    chunk.items,
                    MAX_PERSIST_ROWS,
                ) {
                    self.table.entry(peer, peer).persistence = Arc::new(rows);
                }
            }
            Message::BackupParents { parent, backups } => {
                if parent != peer {
                    return;
                }
                self.view.backup_list(peer, &parent, backups.clone());
                self.table.entry(peer, peer).backups = Some(backups);
            }
            Message::AdoptRequest {
                original_parent,
                backups,
            } => {
                let actions = self
                    .view
                    .adopt_request(peer, &original_parent, &backups, now);
                if actions.iter().any(|a| {
                    matches!(
                        a,
                        Action::Send {
                            message: Message::AdoptAccept { .. },
                            ..
                        }
                    )
                }) {
                    info!(site = %me, adopter = %peer, %original_parent, "adopted by a backup parent");
                }
                self.apply(actions);
            }
            Message::AdoptAccept { original_parent } => {
                info!(site = %me, child = %peer, %original_parent, "child adopted");
                let actions = self.view.adopt_answer(peer, true, "");
                self.apply(actions);
            }
            Message::AdoptReject {
                original_parent,
                reason,
            } => {
                info!(site = %me, child = %peer, %original_parent, %reason, "adoption rejected");
                let actions = self.view.adopt_answer(peer, false, &reason);
                self.apply(actions);
            }
            Message::Hello(_)
            | Message::Auth(_)
            | Message::Reject { .. }
            | Message::Heartbeat { .. } => {}
        }
    }

    fn apply(&mut self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Send { to, message } => {
                    let Some(link) = self.links.get_mut(&to) else {
                        continue;
                    };
                    if link.cmds.try_send(LinkCmd::Send(message)).is_err() {
                        link.kill(
                            CloseReason::QueueFull,
                            "the link's queue is full (peer too slow)".into(),
                        );
                    }
                }
                Action::Close {
                    peer,
                    code: _,
                    reason,
                } => {
                    if let Some(link) = self.links.get_mut(&peer) {
                        let why = if reason.starts_with("adoption rejected") {
                            CloseReason::AdoptRejected
                        } else {
                            CloseReason::Unwanted
                        };
                        link.kill(why, reason);
                    }
                }
            }
        }
    }

    /// Starts and stops dialers to match the view; updates what each link carries.
    fn reconcile(&mut self) {
        let now = Instant::now();
        let desired = self.view.desired_outbound(now);
        let stale: Vec<String> = self
            .dialers
            .iter()
            .filter(|(peer, d)| desired.get(*peer) != Some(&d.purpose))
            .map(|(peer, _)| peer.clone())
            .collect();
        for peer in stale {
            if let Some(d) = self.dialers.remove(&peer) {
                let _ = d.stop.send(true);
                debug!(site = %self.view.me(), %peer, "MEP link no longer wanted");
            }
            if let Some(link) = self.links.get_mut(&peer)
                && link.initiated
            {
                link.kill(
                    CloseReason::Unwanted,
                    "the topology no longer wants this link".into(),
                );
            }
        }
        for (peer, purpose) in desired {
            if self.dialers.contains_key(&peer) {
                continue;
            }
            let Some(spec) = self.view.topology().site(&peer).cloned() else {
                continue;
            };
            let (stop, stop_rx) = watch::channel(false);
            if let Purpose::Adopt { original_parent } = &purpose {
                info!(site = %self.view.me(), child = %peer, %original_parent, "adopting a child of a parent that is down");
            }
            self.tasks.spawn(dial_loop(spec, self.ctx.clone(), stop_rx));
            self.dialers.insert(peer, Dialer { purpose, stop });
        }
        for (peer, link) in &self.links {
            let audience = self.view.audience(peer);
            link.audience
                .send_if_modified(|a| std::mem::replace(a, audience) != audience);
            if let Some(i) = self.info.get_mut(peer)
                && i.audience != audience
            {
                i.audience = audience;
                self.view_dirty = true;
            }
        }
        self.refresh_topology_parts();
        let out = &self.out;
        self.ctx.outbound.send_if_modified(|o| {
            let changed = !same_versions(o, out);
            if changed {
                *o = Arc::new(out.clone());
            }
            changed
        });
    }

    fn publish(&self) {
        let me = self.view.me();
        let names = self
            .view
            .topology()
            .sites()
            .iter()
            .map(|s| s.name.as_str())
            .filter(|s| *s != me);
        let sites = self.table.sites(
            names,
            |peer| self.info.get(peer).is_some_and(|i| i.up),
            Instant::now(),
        );
        let holders = self
            .view
            .topology()
            .sites()
            .iter()
            .filter(|s| s.role == Role::Child)
            .filter_map(|s| {
                self.view
                    .holder(&s.name)
                    .map(|h| (s.name.clone(), h.to_owned()))
            })
            .collect();
        let view = MepView {
            site: self.view.me().to_owned(),
            role: self.view.role(),
            answers_dns: self.view.topology().answers_dns(self.view.me()),
            links: self.info.clone(),
            sites,
            current_parent: self.view.current_parent().map(str::to_owned),
            adopted: self.view.adopted().clone(),
            holders,
        };
        self.shared.view.send_replace(Arc::new(view));
    }
}

fn same_versions(a: &Outbound, b: &Outbound) -> bool {
    let v = |p: &Option<Part<_>>| p.as_ref().map(|p: &Part<SiteStatus>| p.version);
    v(&a.status) == v(&b.status)
        && a.services.as_ref().map(|p| p.version) == b.services.as_ref().map(|p| p.version)
        && a.rtt.version == b.rtt.version
        && a.persistence.version == b.persistence.version
        && a.backups.as_ref().map(|p| p.version) == b.backups.as_ref().map(|p| p.version)
        && a.children.len() == b.children.len()
        && a.children
            .iter()
            .zip(&b.children)
            .all(|((k1, r1), (k2, r2))| k1 == k2 && r1.version == r2.version)
}

/// A service list must fit one frame; RTT rows need a site name of the allowed length.
fn check_metrics(services: &[ServiceState], rtt: &[RttRow]) -> Result<(), MepError> {
    let probe = Message::ServiceStates(ServiceStates {
        site: "x".into(),
        services: services.to_vec(),
    });
    frame::encode(1, &probe, frame::DEFAULT_MAX_PAYLOAD - frame::MAX_SITE_NAME)
        .map_err(|e| MepError::State(format!("services: {e}")))?;
    if rtt
        .iter()
        .any(|r| r.site.is_empty() || r.site.len() > frame::MAX_SITE_NAME)
    {
        return Err(MepError::State(
            "an RTT row's site name is empty or too long".into(),
        ));
    }
    Ok(())
}

fn check_persistence(entries: &[PersistEntry]) -> Result<(), MepError> {
    if entries
        .iter()
        .any(|e| e.domain.len() > frame::MAX_NAME || e.service.len() > frame::MAX_NAME)
    {
        return Err(MepError::State(
            "a persistence entry's name is too long".into(),
        ));
    }
    Ok(())
}

/// Adds a chunk to `peer`'s table being received; the whole table once the last chunk came.
/// A table over `max` rows is dropped.
fn collect<T>(
    pending: &mut HashMap<String, Vec<T>>,
    peer: &str,
    first: bool,
    last: bool,
    items: Vec<T>,
    max: usize,
) -> Option<Vec<T>> {
    if first {
        pending.insert(peer.to_owned(), Vec::new());
    }
    let table = pending.get_mut(peer)?;
    if table.len() + items.len() > max {
        warn!(%peer, max, "table too large, dropped");
        pending.remove(peer);
        return None;
    }
    table.extend(items);
    if last { pending.remove(peer) } else { None }
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
        let web1 = ServiceState {
            name: "web1".into(),
            up: true,
            connections: 0,
            bandwidth_bps: 0,
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
