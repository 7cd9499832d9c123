//! gslbd's life cycle: load the configuration, load and pin the fast path, publish the answers,
//! attach, serve until told to stop, then detach and unpin.

pub mod heartbeat;
pub mod link;
pub mod load;
pub mod mep;
pub mod persist;
pub mod rtt;

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{Arc, atomic::Ordering::Relaxed},
};

use tokio::{
    net::{TcpListener, UdpSocket},
    sync::{broadcast, mpsc, watch},
    task::JoinSet,
};
use tracing::{error, info, warn};

use crate::{
    compile::Snapshot,
    config::{Config, ConfigError, XdpMode},
    control::{ControlPath, ControlSocket, ControlState, Reload},
    controller::World,
    dataplane::{Dataplane, DataplaneError},
    health::{HealthSupervisor, ServiceMonitors},
    location::db::LocationDb,
    responder::Responder,
    server, supervise,
};

#[derive(Debug, thiserror::Error)]
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
}

/// Why a reload was refused (the running configuration stays in force).
#[derive(Debug, thiserror::Error)]
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
    Mep(String),
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

/// Runs gslbd until `shutdown` resolves. `ready` is called once the fast path answers.
pub async fn run(
    config_path: PathBuf,
    overrides: Overrides,
    ready: impl FnOnce(),
    shutdown: impl Future<Output = ()>,
    mut reloads: mpsc::Receiver<impl Into<Reload>>,
) -> Result<(), DaemonError> {
    let config = load_config(&config_path, &overrides)?;
    let server = config.server.clone();
    let server = &server;
    // SAFETY: geteuid has no preconditions.
    if !overrides.no_xdp && unsafe { libc::geteuid() } != 0 {
        return Err(DaemonError::NotRoot);
    }
    let pin_path = overrides
        .pin_path
        .clone()
        .unwrap_or_else(|| server.pin_path.clone());

    // Sockets first: a port in use is the most common start-up failure, and nothing has been
    // loaded into the kernel yet when it happens.
    let mut sockets = Vec::new();
    for ip in &server.listen {
        let addr = SocketAddr::new(*ip, server.dns_port);
        // One UDP socket per core, sharing the port (SO_REUSEPORT): the kernel spreads clients
        // over them, so one busy receive loop does not drop what others could answer.
        let mut udp = Vec::new();
        for _ in 0..udp_workers() {
            udp.push(reuseport_udp(addr).map_err(|source| DaemonError::Bind {
                addr,
                transport: "udp",
                source,
            })?);
        }
        let bind_error = |source| DaemonError::Bind {
            addr,
            transport: "tcp",
            source,
        };
        // Kept as std sockets: each run of a supervised loop gets a duplicate of its own.
        let tcp = TcpListener::bind(addr)
            .await
            .and_then(TcpListener::into_std)
            .map_err(bind_error)?;
        sockets.push((addr, udp, tcp));
    }
    let mep_listener = mep::bind(&config)?;
    let control = match &overrides.control {
        Some(control) => match ControlSocket::bind(&control.path).await {
            Ok(socket) => Some(socket),
            Err(error) if !control.required => {
                error!(
                    error = anyhow_like(&error),
                    "running without a control socket (gslbctl reload and ldns will not reach this gslbd)"
                );
                None
            }
            Err(error) => return Err(error.into()),
        },
        None => None,
    };

    let health = HealthSupervisor::new();
    health.set_services(service_monitors(&config)).await?;
    let mut health_events = health.subscribe();
    let mut world = World::new(config, health);
    // Stamped before reading: a change while the files are read is seen by the next poll.
    let mut location_stamps = FileStamps::of(&location_files(&world.config));
    world.locations = location_db(&world.config, &config_path)?;
    world.local_site = world.config.server.site.clone();
    world.mep = mep::initial_view(&world.config);
    let mut links = link::Links::start(&world.config);
    let mut loads = load::Loads::start(&mut world)
        .await
        .map_err(DaemonError::Load)?;
    let snapshot = mep::for_role(&world, world.snapshot());
    loads.published(&world, tokio::time::Instant::now());
    log_compiled(&snapshot);
    let responder = Arc::new(Responder::new(&world.config, &snapshot));
    responder.set_gslb_refused(!mep::answers_gslb(&world));
    responder.replace_with_locations(&world.config, &snapshot, world.locations.clone());
    let mut dataplane = if overrides.no_xdp {
        info!("--no-xdp: the responder answers everything");
        None
    } else {
        Some(start_fast_path(
            &world.config,
            &snapshot,
            &overrides,
            &pin_path,
        )?)
    };
    // Kept for the life of gslbd: dropping the handle does not stop the task.
    let _heartbeat = dataplane
        .as_mut()
        .and_then(Dataplane::take_heartbeat)
        .and_then(|map| heartbeat::start(map, world.config.server.stale_after));
    let mut rtt = rtt::RttProbing::new(
        &world.config,
        dataplane.as_mut().and_then(Dataplane::take_ldns),
    );
    world.rtt = rtt.handle();
    let (rtt_handles, rtt_handle) = watch::channel(world.rtt.clone());
    let mut mep_rt = match mep_listener {
        Some(listener) => mep::Mep::start(listener, &world, responder.persistence().clone())?,
        None => None,
    };
    // The control socket's reloads; SIGHUP's come in `reloads`.
    let (control_reloads_tx, mut control_reloads) = mpsc::channel::<Reload>(8);

    let (stop, stopped) = watch::channel(false);
    let mut servers = JoinSet::new();
    let mut loops = Vec::new();
    for (addr, udp, tcp) in sockets {
        for (i, udp) in udp.into_iter().enumerate() {
            let (responder, recorder, stopped) =
                (responder.clone(), rtt.recorder(), stopped.clone());
            loops.push(supervise::spawn(format!("dns-udp/{addr}/{i}"), move |_| {
                let socket = udp.try_clone().and_then(UdpSocket::from_std);
                let loop_ = socket.map(|socket| {
                    server::run_udp_recording(
                        socket,
                        responder.clone(),
                        Some(recorder.clone()),
                        stop_signal(stopped.clone()),
                    )
                });
                async move {
                    loop_?.await;
                    Ok::<_, std::io::Error>(())
                }
            }));
        }
        let (responder, recorder, stopped) = (responder.clone(), rtt.recorder(), stopped.clone());
        let tcp_limits = server.tcp;
        loops.push(supervise::spawn(format!("dns-tcp/{addr}"), move |_| {
            let listener = tcp.try_clone().and_then(TcpListener::from_std);
            let loop_ = listener.map(|listener| {
                server::run_tcp_recording(
                    listener,
                    responder.clone(),
                    tcp_limits,
                    Some(recorder.clone()),
                    stop_signal(stopped.clone()),
                )
            });
            async move {
                loop_?.await;
                Ok::<_, std::io::Error>(())
            }
        }));
    }
    let republish_stats = Arc::new(crate::controller::RepublishStats::default());
    if let Some(control) = control {
        let state = ControlState {
            reloads: control_reloads_tx.clone(),
            rtt: rtt_handle,
            republish: republish_stats.clone(),
            persistence: responder.persistence().clone(),
            load: loads.readings(),
        };
        let mut stopped = stopped.clone();
        servers.spawn(control.serve(state, async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        }));
    }
    info!(config = %config_path.display(), listen = ?server.listen, port = server.dns_port, "gslbd ready");
    ready();

    // The location database's files are watched for changes by their modification times.
    let mut location_poll = tokio::time::interval(LOCATION_POLL);
    location_poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    let mut rtt_pacer = rtt::RepublishPacer::new(tokio::time::Instant::now());
    let mut health_pacer = rtt::RepublishPacer::with(
        tokio::time::Instant::now(),
        std::time::Duration::ZERO,
        rtt::HEALTH_REPUBLISH_GAP,
    );
    // A reloaded configuration waiting for the republish of its answers, and whether one was
    // just switched to (its subsystems' states are then republished once more).
    let mut switch: Option<Switch> = None;
    let mut switched = false;

    tokio::pin!(shutdown);
    loop {
        // Every trigger ends in one recompute of the whole answer set from the current state:
        // events that arrive meanwhile are drained first, so a burst costs one republish and
        // the latest state always wins.
        let load_due = loads.due();
        let trigger: &str = tokio::select! {
            _ = &mut shutdown => break,
            Some(first) = next_reload(&mut reloads, &mut control_reloads) => {
                // A burst of reload requests is one reload: the file is read once, latest wins,
                // and every requester gets that outcome.
                let mut waiting = vec![first];
                while let Ok(r) = reloads.try_recv() {
                    waiting.push(r.into());
                }
                while let Ok(r) = control_reloads.try_recv() {
                    waiting.push(r);
                }
                match reload(&config_path, &overrides, &world.config).await {
                    Ok((config, locations, stamps)) => {
                        // All or nothing: the new configuration's answers are published first
                        // (below); its monitors, MEP, links, load monitors and RTT settings
                        // switch only once they are in force, and a failed publish puts the
                        // old configuration back with everything it runs.
                        republish_stats.events.fetch_add(waiting.len() as u64 - 1, Relaxed);
                        let previous = Previous {
                            local_site: std::mem::replace(&mut world.local_site, config.server.site.clone()),
                            config: std::mem::replace(&mut world.config, config),
                            locations: std::mem::replace(&mut world.locations, locations),
                        };
                        switch = Some(Switch { previous, stamps, waiting });
                        "reload"
                    }
                    Err(error) => {
                        republish_stats.reloads_refused.fetch_add(1, Relaxed);
                        let reason = anyhow_like(&error);
                        for r in waiting {
                            r.answer(Err(reason.clone()));
                        }
                        continue;
                    }
                }
            }
            () = std::future::ready(()), if switched => {
                // What the switched monitors, MEP, links and RTT settings change.
                switched = false;
                "reload (switched)"
            }
            () = rtt.changed() => {
                // Bursts are folded into one republish, later (see RepublishPacer).
                rtt_pacer.changed(tokio::time::Instant::now());
                continue;
            }
            () = tokio::time::sleep_until(rtt_pacer.due().unwrap_or_else(tokio::time::Instant::now)), if rtt_pacer.due().is_some() => "rtt",
            () = mep::Mep::changed(&mut mep_rt) => {
                // Views the answers do not read (heartbeats, link details) cost no recompute;
                // other sites' loads are paced like ours.
                if !mep_rt.as_mut().is_some_and(|m| m.apply(&mut world)) {
                    loads.note(&world, tokio::time::Instant::now());
                    continue;
                }
                "mep"
            }
            () = links.changed() => {
                // Every sample lands here; a link going over or back moves answers at once, a
                // rate that crosses a max_bandwidth_kbps through the load pacer.
                if !links.apply(&mut world) {
                    loads.note(&world, tokio::time::Instant::now());
                    continue;
                }
                "link"
            }
            () = loads.changed() => {
                loads.apply(&mut world);
                // The other sites decide on this site's loads too.
                if let Some(m) = &mep_rt {
                    m.publish_local(&world);
                }
                loads.note(&world, tokio::time::Instant::now());
                continue;
            }
            () = tokio::time::sleep_until(load_due.unwrap_or_else(tokio::time::Instant::now)), if load_due.is_some() => "load",
            event = health_events.recv() => {
                match event {
                    Ok(e) => info!(service = e.service, up = e.up, reason = e.reason, transitions = e.transitions, "service health changed"),
                    Err(broadcast::error::RecvError::Lagged(n)) => warn!(missed = n, "health events coalesced"),
                    Err(broadcast::error::RecvError::Closed) => continue,
                }
                // Later events of a burst are in the state read when the pacer is due: one
                // republish for all of them (at once after a quiet spell).
                republish_stats.events.fetch_add(1, Relaxed);
                while health_events.try_recv().is_ok() {
                    republish_stats.events.fetch_add(1, Relaxed);
                }
                health_pacer.changed(tokio::time::Instant::now());
                continue;
            }
            () = tokio::time::sleep_until(health_pacer.due().unwrap_or_else(tokio::time::Instant::now)), if health_pacer.due().is_some() => "health",
            _ = location_poll.tick() => {
                let now = FileStamps::of(&location_files(&world.config));
                if now == location_stamps {
                    continue;
                }
                location_stamps = now;
                match location_db(&world.config, &config_path) {
                    Ok(db) => world.locations = db,
                    Err(error) => {
                        error!(error = anyhow_like(&error), "location database changed but does not load; the loaded one stays in force");
                        continue;
                    }
                }
                "location database"
            }
        };
        if trigger != "health" {
            republish_stats.events.fetch_add(1, Relaxed);
        }
        let started = std::time::Instant::now();
        let snapshot = mep::for_role(&world, world.snapshot());
        let compiled = started.elapsed();
        if switch.is_none() {
            responder.set_gslb_refused(!mep::answers_gslb(&world));
            if let Some(m) = &mep_rt {
                m.publish_local(&world);
            }
        }
        // This snapshot has the latest RTT table, whatever the trigger.
        rtt_pacer.republished(tokio::time::Instant::now());
        health_pacer.republished(tokio::time::Instant::now());
        let published = republish(&world, &snapshot, dataplane.as_mut(), &responder);
        if let Some(Switch {
            previous,
            stamps,
            waiting,
        }) = switch.take()
        {
            let outcome = if published {
                location_stamps = stamps;
                responder.set_gslb_refused(!mep::answers_gslb(&world));
                if let Err(error) = world
                    .health
                    .set_services(service_monitors(&world.config))
                    .await
                {
                    // Not reached: `reload` checked the monitors.
                    error!(
                        error = anyhow_like(&error),
                        "health monitors not reconfigured"
                    );
                }
                if rtt.apply(&world.config) {
                    world.rtt = rtt.handle();
                    rtt_handles.send_replace(world.rtt.clone());
                }
                if let Some(m) = &mut mep_rt {
                    m.reconfigure(&world).await;
                }
                links.reconfigure(&mut world);
                if let Err(error) = loads.reconfigure(&mut world) {
                    // Not reached: `reload` checked the probes.
                    error!(
                        error = anyhow_like(&error),
                        "load monitors not reconfigured"
                    );
                }
                switched = true;
                info!(config = %config_path.display(), "configuration reloaded");
                Ok(())
            } else {
                world.config = previous.config;
                world.locations = previous.locations;
                world.local_site = previous.local_site;
                republish_stats.reloads_failed.fetch_add(1, Relaxed);
                error!(
                    "reload failed: its answers could not be published; the running configuration, its monitors, MEP, links and answers stay in force"
                );
                Err("the configuration loaded, but publishing its answers failed; the running configuration and its answers stay in force".into())
            };
            for r in waiting {
                r.answer(outcome.clone());
            }
        }
        loads.published(&world, tokio::time::Instant::now());
        if published {
            republish_stats.republishes.fetch_add(1, Relaxed);
            republish_stats
                .last_compile_us
                .store(compiled.as_micros() as u64, Relaxed);
            republish_stats
                .last_total_us
                .store(started.elapsed().as_micros() as u64, Relaxed);
            info!(
                trigger,
                compile_us = compiled.as_micros() as u64,
                total_us = started.elapsed().as_micros() as u64,
                views = snapshot.stats.views,
                prefixes = snapshot.stats.prefixes,
                entries = snapshot.stats.entries,
                "answers republished"
            );
        }
    }
    info!("shutting down");
    let _ = stop.send(true);
    for task in loops {
        task.end_within(SERVER_STOP_GRACE).await;
    }
    while servers.join_next().await.is_some() {}
    if let Some(m) = mep_rt {
        m.shutdown().await;
    }
    match dataplane {
        Some(dataplane) if overrides.keep_attached => {
            info!(pin_path = %pin_path.display(), "leaving XDP attached and pinned");
            dataplane.keep_attached();
        }
        Some(mut dataplane) => {
            dataplane.detach()?;
            dataplane.unpin();
            // The directory too, if nothing else is pinned there.
            let _ = std::fs::remove_dir(&pin_path);
        }
        None => {}
    }
    // After the detach, which reloads the program and so needs the LDNS map open.
    rtt.shutdown().await;
    Ok(())
}

/// The configuration file with the command line's overrides applied (they apply to the fast
/// path too, so they change the configuration itself).
fn load_config(path: &std::path::Path, overrides: &Overrides) -> Result<Config, ConfigError> {
    let mut config = Config::load(path)?;
    if !overrides.listen.is_empty() {
        config.server.listen = overrides.listen.clone();
    }
    if let Some(port) = overrides.port {
        config.server.dns_port = port;
    }
    Ok(config)
}

/// Reads a configuration to reload: the new one is validated in full, with its location
/// database and monitors, and nothing switches; the caller publishes its answers, then
/// switches the monitors, MEP, links and RTT settings (or, when the publish fails, keeps the
/// running configuration). A configuration that does not load, or that
/// changes what only a restart can (sockets, interface, pins), is refused and the running one
/// stays in force.
pub async fn reload(
    path: &std::path::Path,
    overrides: &Overrides,
    running: &Config,
) -> Result<(Config, Option<Arc<LocationDb>>, FileStamps), ReloadError> {
    let config = match load_config(path, overrides) {
        Ok(config) => config,
        Err(error) => {
            error!(
                error = anyhow_like(&error),
                "reload refused; the running configuration stays in force"
            );
            return Err(ReloadError::Config(error));
        }
    };
    let (old, new) = (&running.server, &config.server);
    let restart_only = [
        ("listen", old.listen != new.listen),
        ("dns_port", old.dns_port != new.dns_port),
        ("interface", old.interface != new.interface),
        ("xdp_mode", old.xdp_mode != new.xdp_mode),
        ("pin_path", old.pin_path != new.pin_path),
        ("tcp_* limits", old.tcp != new.tcp),
        ("stale_after_s", old.stale_after != new.stale_after),
    ];
    let changed: Vec<&str> = restart_only
        .iter()
        .filter(|(_, c)| *c)
        .map(|(n, _)| *n)
        .collect();
    if !changed.is_empty() {
        error!(fields = ?changed, "reload refused: [server] changes need a restart; the running configuration stays in force");
        return Err(ReloadError::RestartOnly { fields: changed });
    }
    if let Err(reason) = mep::check_reload(running, &config) {
        error!(%reason, "reload refused: MEP; the running configuration stays in force");
        return Err(ReloadError::Mep(reason));
    }
    let stamps = FileStamps::of(&location_files(&config));
    let locations = match location_db(&config, path) {
        Ok(db) => db,
        Err(error) => {
            error!(
                error = anyhow_like(&error),
                "reload refused: location database"
            );
            return Err(ReloadError::Locations(error));
        }
    };
    if let Err(error) = load::Loads::check(&config) {
        error!(error = anyhow_like(&error), "reload refused: load monitors");
        return Err(ReloadError::Load(error));
    }
    if let Err(error) = HealthSupervisor::check(&service_monitors(&config)) {
        error!(
            error = anyhow_like(&error),
            "reload refused: health monitors"
        );
        return Err(ReloadError::Health(error));
    }
    Ok((config, locations, stamps))
}

/// What a reload replaced in the [`World`], put back when its answers cannot be published.
struct Previous {
    config: Config,
    locations: Option<Arc<LocationDb>>,
    local_site: Option<String>,
}

/// A reloaded configuration in the [`World`], waiting for its answers to be published.
struct Switch {
    previous: Previous,
    /// The new location files' stamps.
    stamps: FileStamps,
    /// The requesters, told the outcome.
    waiting: Vec<Reload>,
}

/// The next reload request, from SIGHUP's queue or the control socket's.
async fn next_reload(
    signals: &mut mpsc::Receiver<impl Into<Reload>>,
    control: &mut mpsc::Receiver<Reload>,
) -> Option<Reload> {
    tokio::select! {
        Some(r) = signals.recv() => Some(r.into()),
        Some(r) = control.recv() => Some(r),
        else => None,
    }
}

/// The client location database the configuration describes, if it names any source.
fn location_db(
    config: &Config,
    path: &std::path::Path,
) -> Result<Option<Arc<LocationDb>>, crate::location::db::LocationDbError> {
    let sources = &config.locations;
    if sources.files.is_empty()
        && sources.mmdb_city.is_none()
        && sources.mmdb_asn.is_none()
        && sources.custom.is_empty()
    {
        return Ok(None);
    }
    let db = LocationDb::from_sources(sources, path)?;
    info!(ranges = db.len(), "location database loaded");
    Ok(Some(Arc::new(db)))
}

/// Makes `snapshot` what the fast path and the responder answer. False when the fast path
/// refused it; the old generation then stays in force there and in the responder.
fn republish(
    world: &World,
    snapshot: &Snapshot,
    dataplane: Option<&mut Dataplane>,
    responder: &Responder,
) -> bool {
    #[cfg(feature = "fault-injection")]
    if fault::publish_fails(world.config.server.dns_port) {
        error!("publishing failed: fault injected");
        return false;
    }
    if let Some(dataplane) = dataplane {
        match dataplane.table.publish(snapshot) {
            Ok(stats) => info!(
                generation = stats.generation,
                domains = stats.domains,
                answers = stats.answers,
                "fast path republished"
            ),
            Err(error) => {
                // The switch is the last write, so the old generation is still in force.
                error!(
                    error = anyhow_like(&error),
                    "publishing to the fast path failed"
                );
                return false;
            }
        }
    }
    responder.replace_with_locations(&world.config, snapshot, world.locations.clone());
    true
}

fn log_compiled(snapshot: &Snapshot) {
    let s = snapshot.stats;
    info!(
        segments = s.segments,
        classes = s.classes,
        views = s.views,
        prefixes = s.prefixes,
        entries = s.entries,
        decisions = s.decisions,
        map_bytes = s.map_bytes,
        responder_only = snapshot.engine_domains.len(),
        "answers compiled"
    );
}

/// How often the location database's files are checked for changes.
const LOCATION_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// The files the location database is read from, as the loader opens them.
fn location_files(config: &Config) -> Vec<PathBuf> {
    let l = &config.locations;
    l.files
        .iter()
        .map(|f| &f.path)
        .chain(&l.mmdb_city)
        .chain(&l.mmdb_asn)
        .cloned()
        .collect()
}

/// Modification times and sizes of files (`None` for one that cannot be read).
/// (Public because [`reload`] returns it: the stamps taken before the files were read.)
#[derive(Debug, PartialEq, Eq)]
pub struct FileStamps(Vec<Option<(std::time::SystemTime, u64)>>);

impl FileStamps {
    fn of(files: &[PathBuf]) -> FileStamps {
        FileStamps(
            files
                .iter()
                .map(|f| {
                    std::fs::metadata(f)
                        .ok()
                        .and_then(|m| Some((m.modified().ok()?, m.len())))
                })
                .collect(),
        )
    }
}

/// What the health supervisor watches: every service with monitors bound, probed at its own
/// address (not the public one answers carry).
fn service_monitors(config: &Config) -> Vec<ServiceMonitors> {
    config
        .services
        .iter()
        .filter(|s| !s.monitors.is_empty())
        .map(|s| {
            let mut watched = ServiceMonitors::new(&s.name, s.ip, s.port);
            watched.threshold = s.monitor_threshold;
            for name in &s.monitors {
                let spec = config
                    .monitors
                    .iter()
                    .find(|m| &m.name == name)
                    .expect("validated");
                watched = watched.monitor(spec.clone());
            }
            watched
        })
        .collect()
}

/// `error` with its causes, as `{:#}` prints an anyhow error (thiserror enums print only their
/// own context).
fn anyhow_like(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
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

/// How long a server loop may take to end once told to (a loop waiting to be restarted is
/// stopped then).
const SERVER_STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Resolves once `stop` is true (or gone): the server loops' shutdown.
async fn stop_signal(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

fn udp_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn reuseport_udp(addr: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// Loads and pins the fast path, publishes the answers and attaches it to the interface.
fn start_fast_path(
    config: &Config,
    snapshot: &Snapshot,
    overrides: &Overrides,
    pin_path: &std::path::Path,
) -> Result<Dataplane, DaemonError> {
    let interface = overrides
        .interface
        .clone()
        .or_else(|| config.server.interface.clone());
    let mode = overrides.xdp_mode.unwrap_or(config.server.xdp_mode);
    let mut dataplane = Dataplane::load(Some(pin_path))?;
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
        let mut fails = FAILS.lock().unwrap_or_else(|e| e.into_inner());
        *fails.get_or_insert_default().entry(dns_port).or_default() += times;
    }

    pub(super) fn publish_fails(dns_port: u16) -> bool {
        let mut fails = FAILS.lock().unwrap_or_else(|e| e.into_inner());
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
