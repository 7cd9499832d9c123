//! gslbd's life cycle: load the configuration, load and pin the fast path, publish the answers,
//! attach, serve until told to stop, then detach and unpin.
//!
//! This file is gslbd's one entry point, [`run`], on what `start` opened ([`Started`]); `listen`
//! binds the DNS sockets and runs the DNS loops, `reload` reads and checks a configuration, `serve` is the republish loop
//! and the stop; the other files are the inputs the loop follows (`mep`, `link` for uplinks,
//! `load`, `rtt`, `persist`, `heartbeat`).

pub mod heartbeat;
mod listen;
pub mod load;
pub mod mep;
pub mod persist;
mod reload;
pub mod rtt;
mod serve;
mod start;
mod steer;
pub mod uplink;

pub use listen::{DnsSockets, Listeners};
pub use reload::{FileStamps, load_config, reload};
pub use start::{BoundControl, FreshPins, Started};

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use tokio::{
    sync::{mpsc, watch},
    task::JoinSet,
};
use tracing::{info, warn};

use crate::error_text::anyhow_like;
use crate::{
    admin,
    compile::Snapshot,
    config::{Config, ConfigError},
    control::{ControlPath, ControlState, Reload},
    dataplane::{Dataplane, DataplaneError, XdpMode},
    health::HealthSupervisor,
    responder::Responder,
    supervise,
    world::World,
};
use reload::{location_db, location_files, service_monitors};
use serve::log_compiled;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DaemonError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Dataplane(#[from] DataplaneError),
    #[error("gslbd needs root (CAP_BPF and CAP_NET_ADMIN) to load and attach XDP programs")]
    NotRoot,
    #[error("waiting for signals: {0}")]
    Signal(std::io::Error),
    #[error("location database")]
    Locations(#[from] crate::location::db::LocationDbError),
    #[error("health monitors")]
    Health(#[from] crate::health::HealthError),
    #[error("load monitors")]
    Load(#[source] crate::health::HealthError),
    #[error("listening on {addr} ({transport})")]
    Bind {
        addr: SocketAddr,
        transport: &'static str,
        source: std::io::Error,
    },
    #[error(transparent)]
    Control(#[from] crate::control::ControlError),
    #[error("MEP")]
    Mep(#[from] mep::MepStartError),
    #[error("the admin listener given ({got}) is not [admin] listen ({want:?})")]
    AdminListener {
        want: Option<SocketAddr>,
        got: SocketAddr,
    },
    #[error(transparent)]
    Privilege(#[from] crate::privilege::PrivilegeError),
    #[error("the admin state (gslbctl disable) cannot be read")]
    StateFile(#[from] crate::steering::StateFileError),
    #[error("the DNS sockets given ({got:?}) are not the configured ones ({want:?})")]
    Listeners {
        want: Vec<SocketAddr>,
        got: Vec<SocketAddr>,
    },
}

/// Why a reload was refused (the running configuration stays in force).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReloadError {
    #[error("the configuration does not load")]
    Config(#[source] ConfigError),
    #[error("[server] {} changed, which needs a restart", fields.join(", "))]
    RestartOnly { fields: Vec<&'static str> },
    #[error("the location database does not load")]
    Locations(#[source] crate::location::db::LocationDbError),
    #[error("the health monitors cannot start")]
    Health(#[source] crate::health::HealthError),
    #[error("the load monitors cannot start")]
    Load(#[source] crate::health::HealthError),
    #[error("MEP: {0}")]
    Mep(mep::MepReloadError),
    #[error("[admin] changed, which needs a restart")]
    AdminRestartOnly,
}

/// What the command line can override in the configuration's `[server]` section.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub interface: Option<String>,
    pub xdp_mode: Option<XdpMode>,
    pub pin_path: Option<PathBuf>,
    /// Leave XDP attached and the pins in place on exit.
    pub keep_attached: bool,
    /// Serve with the responder alone: load nothing into the kernel (no root needed then,
    /// given a port above 1023).
    pub no_xdp: bool,
    /// Addresses to answer on, instead of server.listen.
    pub listen: Vec<std::net::IpAddr>,
    /// DNS port, instead of server.dns_port.
    pub port: Option<u16>,
    /// The control socket (gslbctl); none when `None`.
    pub control: Option<ControlPath>,
}

/// Runs gslbd on what was opened for `config` (`config_path` loaded with `overrides`,
/// [`load_config`]) until `shutdown` resolves: `main` opens it as root ([`Started::open`]) and
/// drops its privileges first, then the fast path is published and attached with the
/// capabilities kept; tests give the sockets they bound ([`Started::with_listeners`]). `ready`
/// is called once the fast path answers.
pub async fn run(
    config_path: PathBuf,
    config: Config,
    overrides: Overrides,
    started: Started,
    ready: impl FnOnce(),
    shutdown: impl Future<Output = ()>,
    reloads: mpsc::Receiver<impl Into<Reload>>,
) -> Result<(), DaemonError> {
    let server = config.server.clone();
    let server = &server;
    let Started {
        pin_path,
        mut listeners,
        mep: mep_listener,
        control,
        dataplane: mut loaded,
        admin,
        state_file: _,
    } = started;
    // Served first: if the sockets are not the configured ones, dropping it removes its file.
    let control = control.map(start::serve_control).transpose()?;
    check_listeners(&config, &listeners)?;

    let admin_listener = admin_listener(&config, listeners.admin.take())?;
    let health = HealthSupervisor::new();
    health.set_services(service_monitors(&config)).await?;
    let health_events = health.subscribe();
    // The daemon keeps the configuration (its monitors, MEP, links, files); the world
    // compiles from its model.
    let config = Arc::new(config);
    let mut world = World::new(&*config, health);
    // What the operator disabled before this start (less what this configuration lacks).
    world.update_admin(|a| *a = admin);
    steer::retain_known(&mut world, &config.server.state_file);
    if !world.admin().is_empty() {
        let disabled: Vec<String> = world
            .admin()
            .disabled()
            .map(|(t, n)| format!("{t} {n}"))
            .collect();
        warn!(?disabled, state_file = %config.server.state_file.display(), "disabled by the operator before this start");
    }
    // Stamped before reading: a change while the files are read is seen by the next poll.
    let location_stamps = FileStamps::of(&location_files(&config));
    world.locations = location_db(&config, &config_path)?;
    world.set_mep(mep::initial_view(&config));
    let links = uplink::Uplinks::start(&config);
    let mut loads = load::Loads::start(&mut world, &config)
        .await
        .map_err(DaemonError::Load)?;
    let snapshot = world.snapshot();
    loads.published(&world, tokio::time::Instant::now());
    log_compiled(&snapshot);
    let responder = Arc::new(Responder::new(&snapshot));
    responder.replace_with_locations(&snapshot, world.locations.clone());
    let mut dataplane = if overrides.no_xdp {
        info!("--no-xdp: the responder answers everything");
        None
    } else {
        Some(start_fast_path(
            &config,
            &snapshot,
            &overrides,
            &pin_path,
            loaded.take(),
        )?)
    };
    // Kept for the life of gslbd: dropping the handle does not stop the task.
    let heartbeat = dataplane
        .as_mut()
        .and_then(Dataplane::take_heartbeat)
        .map(|map| heartbeat::start(map, config.server.stale_after));
    let rtt = rtt::RttProbing::new(&config, dataplane.as_mut().and_then(Dataplane::take_ldns));
    world.rtt = rtt.handle();
    let (rtt_handles, rtt_handle) = watch::channel(world.rtt.clone());
    let mep_rt = match mep_listener {
        Some(listener) => {
            mep::Mep::start(listener, &world, &config, responder.persistence().clone())?
        }
        None => None,
    };
    // The control socket's reloads; SIGHUP's come in `reloads`.
    let (control_reloads_tx, control_reloads) = mpsc::channel::<Reload>(8);
    let (steer_tx, steer_requests) = mpsc::channel(8);

    let (stop, stopped) = watch::channel(false);
    let mut servers = JoinSet::new();
    let mut loops = listen::spawn_dns_loops(
        listeners,
        &responder,
        || rtt.recorder(),
        server.tcp,
        &stopped,
    );
    let republish_stats = Arc::new(admin::metrics::RepublishStats::default());
    let world_feed = admin::status::WorldFeed::default();
    if let Some(control) = control {
        let state = ControlState {
            reloads: control_reloads_tx.clone(),
            steer: steer_tx,
            rtt: rtt_handle.clone(),
            republish: republish_stats.clone(),
            persistence: responder.persistence().clone(),
            load: loads.readings(),
            world: world_feed.subscribe(),
        };
        let mut stopped = stopped.clone();
        servers.spawn(control.serve(state, async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        }));
    }
    let admin = admin_listener.map(|listener| {
        let state = Arc::new(admin::EndpointState::new(
            republish_stats.clone(),
            responder.clone(),
            dataplane.as_mut().and_then(Dataplane::take_counter_reader),
            world_feed.subscribe(),
            rtt_handle,
        ));
        loops.push(admin::spawn(listener, state.clone(), &stopped));
        state
    });
    world_feed.publish(&world);
    info!(config = %config_path.display(), listen = ?server.listen, port = server.dns_port, "gslbd ready");
    if let Some(admin) = &admin {
        admin.set_ready();
    }
    ready();
    let running = serve::Running {
        config_path,
        overrides,
        pin_path,
        config,
        world,
        location_stamps,
        health_events,
        links,
        loads,
        responder,
        dataplane,
        heartbeat,
        rtt,
        rtt_handles,
        mep_rt,
        control_reloads,
        steer_requests,
        republish_stats,
        world_feed,
        stop,
        loops,
        servers,
    };
    serve::serve(running, shutdown, reloads).await
}

/// The sockets were bound first (a port in use is the most common start-up failure, and
/// nothing has been loaded into the kernel yet when it happens): they must be the configured
/// ones, which the fast path answers on too.
fn check_listeners(config: &Config, listeners: &Listeners) -> Result<(), DaemonError> {
    let server = &config.server;
    let mut want: Vec<SocketAddr> = server
        .listen
        .iter()
        .map(|ip| SocketAddr::new(*ip, server.dns_port))
        .collect();
    let mut got = listeners.addrs();
    want.sort();
    got.sort();
    if want != got {
        return Err(DaemonError::Listeners { want, got });
    }
    Ok(())
}

/// The admin endpoint's listener: `given` (bound by the caller, on `[admin] listen`'s address;
/// any port when that is 0), else bound here; `None` without `[admin]`.
fn admin_listener(
    config: &Config,
    given: Option<std::net::TcpListener>,
) -> Result<Option<std::net::TcpListener>, DaemonError> {
    let want = config.admin.as_ref().map(|a| a.listen);
    let listener = match (want, given) {
        (None, None) => return Ok(None),
        (Some(want), None) => listen::bind_admin(want)?,
        (want, Some(given)) => {
            let got = given.local_addr().map_err(|source| DaemonError::Bind {
                addr: want.unwrap_or(([0, 0, 0, 0], 0).into()),
                transport: "admin http",
                source,
            })?;
            let matches = want
                .is_some_and(|w| w.ip() == got.ip() && (w.port() == 0 || w.port() == got.port()));
            if !matches {
                return Err(DaemonError::AdminListener { want, got });
            }
            given
        }
    };
    if let Ok(addr) = listener.local_addr() {
        info!(%addr, "admin endpoint (/metrics, /status, /healthz, /readyz)");
    }
    Ok(Some(listener))
}

/// gslbd loads XDP programs unless `--no-xdp`: it needs root then. Checked by [`run`], and by
/// `main` before it binds the sockets (so that a missing privilege is reported as such).
pub fn check_privileges(overrides: &Overrides) -> Result<(), DaemonError> {
    // SAFETY: geteuid has no preconditions.
    if !overrides.no_xdp && unsafe { libc::geteuid() } != 0 {
        return Err(DaemonError::NotRoot);
    }
    Ok(())
}

/// Reload requests, one per SIGHUP.
pub fn reload_signals() -> Result<mpsc::Receiver<Reload>, DaemonError> {
    use tokio::signal::unix::{SignalKind, signal};
    // Registered here so that a failure is gslbd's start-up error; a restarted relay registers
    // again (the same signal, any number of times).
    let mut first = Some(signal(SignalKind::hangup()).map_err(DaemonError::Signal)?);
    let (tx, rx) = mpsc::channel(1);
    supervise::spawn("sighup", move |_| {
        let (tx, hup) = (tx.clone(), first.take());
        async move {
            let mut hup = match hup {
                Some(hup) => hup,
                None => signal(SignalKind::hangup())?,
            };
            while hup.recv().await.is_some() {
                // Full means a reload is already pending, which will read the latest file.
                let _ = tx.try_send(Reload::default());
            }
            Ok::<(), std::io::Error>(())
        }
    })
    .detach();
    Ok(rx)
}

/// Loads and pins the fast path (unless `loaded` already), publishes the answers and attaches
/// it to the interface.
fn start_fast_path(
    config: &Config,
    snapshot: &Snapshot,
    overrides: &Overrides,
    pin_path: &std::path::Path,
    loaded: Option<Dataplane>,
) -> Result<Dataplane, DaemonError> {
    let interface = overrides
        .interface
        .clone()
        .or_else(|| config.server.interface.clone());
    let mode = overrides.xdp_mode.unwrap_or(config.server.xdp_mode);
    let mut dataplane = match loaded {
        Some(dataplane) => dataplane,
        None => Dataplane::load(Some(pin_path))?,
    };
    let stats = dataplane.table.publish(snapshot)?;
    info!(
        generation = stats.generation,
        prefixes = stats.prefixes,
        domains = stats.domains,
        answers = stats.answers,
        responder_only = stats.too_long,
        hash_collisions = stats.collisions,
        pin_path = %pin_path.display(),
        "answers published"
    );
    match &interface {
        Some(interface) => {
            dataplane.attach(interface, mode)?;
        }
        None => warn!("no interface configured: the fast path is loaded but not attached"),
    }
    Ok(dataplane)
}

/// Resolves on the first SIGINT or SIGTERM.
pub async fn signals() -> Result<impl Future<Output = ()>, DaemonError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt()).map_err(DaemonError::Signal)?;
    let mut term = signal(SignalKind::terminate()).map_err(DaemonError::Signal)?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    })
}

#[cfg(feature = "fault-injection")]
pub use fault::fail_next_publish;

/// A publish made to fail (feature `fault-injection`, tests).
#[cfg(feature = "fault-injection")]
mod fault {
    use std::{collections::HashMap, sync::Mutex};

    /// Publishes to fail, per DNS port (the daemons of one test process tell themselves apart
    /// by it).
    static FAILS: Mutex<Option<HashMap<u16, u32>>> = Mutex::new(None);

    /// Makes the next `times` publishes of the gslbd serving on `dns_port` fail as a refused
    /// map write would: before anything is written, nothing in the maps or the responder
    /// changes.
    pub fn fail_next_publish(dns_port: u16, times: u32) {
        let mut fails = FAILS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *fails.get_or_insert_default().entry(dns_port).or_default() += times;
    }

    pub(super) fn publish_fails(dns_port: u16) -> bool {
        let mut fails = FAILS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(left) = fails.as_mut().and_then(|f| f.get_mut(&dns_port)) else {
            return false;
        };
        if *left == 0 {
            return false;
        }
        *left -= 1;
        true
    }
}
