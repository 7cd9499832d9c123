//! gslbd once it runs: the one loop where every trigger (a reload, a health flip, RTT, MEP, an
//! uplink, a load reading, the location files) ends in one recompute and republish of the
//! whole answer set, and the orderly stop.

use std::{
    path::PathBuf,
    sync::{Arc, atomic::Ordering::Relaxed},
};

use tokio::{
    sync::{broadcast, mpsc, watch},
    task::JoinSet,
};
use tracing::{error, info, warn};

use super::{
    DaemonError, Overrides, anyhow_like,
    listen::SERVER_STOP_GRACE,
    load, mep,
    reload::{
        FileStamps, LOCATION_POLL, Previous, Switch, location_db, location_files, next_reload,
        reload, service_monitors,
    },
    rtt, steer, uplink,
};
use crate::{
    admin::{metrics::RepublishStats, status::WorldFeed},
    compile::{Snapshot, Source},
    config::Config,
    control::{Reload, ReloadRefused},
    dataplane::Dataplane,
    health::HealthEvent,
    location::db::{LocationDb, LocationDbError},
    probe::RttHandle,
    responder::Responder,
    supervise,
    world::World,
};

/// Everything a started gslbd runs, handed from start-up ([`super::run`]) to [`serve`].
pub(super) struct Running {
    pub(super) config_path: PathBuf,
    pub(super) overrides: Overrides,
    pub(super) pin_path: PathBuf,
    /// The configuration gslbd runs (its monitors, MEP, links, files); `world` compiles from
    /// its model, and a reload replaces both together.
    pub(super) config: Arc<Config>,
    pub(super) world: World,
    /// The location files' stamps when they were last read.
    pub(super) location_stamps: FileStamps,
    pub(super) health_events: broadcast::Receiver<HealthEvent>,
    pub(super) links: uplink::Uplinks,
    pub(super) loads: load::Loads,
    pub(super) responder: Arc<Responder>,
    pub(super) dataplane: Option<Dataplane>,
    /// Kept for the life of gslbd: dropping the handle does not stop the task.
    pub(super) heartbeat: Option<tokio::task::JoinHandle<()>>,
    pub(super) rtt: rtt::RttProbing,
    pub(super) rtt_handles: watch::Sender<Option<RttHandle>>,
    pub(super) mep_rt: Option<mep::Mep>,
    /// The control socket's reloads (SIGHUP's come in `serve`'s `reloads`).
    pub(super) control_reloads: mpsc::Receiver<Reload>,
    /// The control socket's steering commands.
    pub(super) steer_requests: mpsc::Receiver<crate::control::Steer>,
    pub(super) republish_stats: Arc<RepublishStats>,
    /// The admin endpoint's view of the world, refreshed after every republish.
    pub(super) world_feed: WorldFeed,
    /// Tells the DNS loops and the control socket to stop.
    pub(super) stop: watch::Sender<bool>,
    pub(super) loops: Vec<supervise::Supervised>,
    pub(super) servers: JoinSet<()>,
}

/// Serves until `shutdown` resolves, then stops everything `running` holds.
pub(super) async fn serve(
    running: Running,
    shutdown: impl Future<Output = ()>,
    mut reloads: mpsc::Receiver<impl Into<Reload>>,
) -> Result<(), DaemonError> {
    let Running {
        config_path,
        overrides,
        pin_path,
        mut config,
        mut world,
        mut location_stamps,
        mut health_events,
        mut links,
        mut loads,
        responder,
        mut dataplane,
        heartbeat: _heartbeat,
        mut rtt,
        rtt_handles,
        mut mep_rt,
        mut control_reloads,
        mut steer_requests,
        republish_stats,
        world_feed,
        stop,
        loops,
        mut servers,
    } = running;
    // The location database's files are watched for changes by their modification times; a
    // change is read on a blocking thread (a large database takes seconds), one build at a
    // time, and applied here when it is done.
    let mut location_poll = tokio::time::interval(LOCATION_POLL);
    location_poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut location_build: Option<LocationBuild> = None;

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
    // Steering commands waiting for the republish of their change.
    let mut steered: Vec<steer::Pending> = Vec::new();

    tokio::pin!(shutdown);
    loop {
        // Every trigger ends in one recompute of the whole answer set from the current state:
        // events that arrive meanwhile are drained first, so a burst costs one republish and
        // the latest state always wins.
        let load_due = loads.due();
        let trigger: &str = tokio::select! {
            () = &mut shutdown => break,
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
                match reload(&config_path, &overrides, &config).await {
                    Ok((next, locations, stamps)) => {
                        // All or nothing: the new configuration's answers are published first
                        // (below); its monitors, MEP, links, load monitors and RTT settings
                        // switch only once they are in force, and a failed publish puts the
                        // old configuration back with everything it runs.
                        republish_stats.events.fetch_add(waiting.len() as u64 - 1, Relaxed);
                        let previous = Previous {
                            local_site: std::mem::replace(&mut world.local_site, next.server.site.clone()),
                            source: world.set_source(Source::from(&next)),
                            config: std::mem::replace(&mut config, Arc::new(next)),
                            locations: std::mem::replace(&mut world.locations, locations),
                        };
                        switch = Some(Switch { previous, stamps, waiting });
                        "reload"
                    }
                    Err(error) => {
                        republish_stats.reloads_refused.fetch_add(1, Relaxed);
                        let refused = ReloadRefused::Invalid(Arc::new(error));
                        for r in waiting {
                            r.answer(Err(refused.clone()));
                        }
                        continue;
                    }
                }
            }
            Some(request) = steer_requests.recv() => {
                // A burst of commands is one republish.
                let state_file = &config.server.state_file;
                steered.extend(steer::apply(&mut world, state_file, request));
                while let Ok(request) = steer_requests.try_recv() {
                    steered.extend(steer::apply(&mut world, state_file, request));
                }
                if steered.is_empty() {
                    continue;
                }
                "admin"
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
            _ = location_poll.tick(), if location_build.is_none() => {
                let now = FileStamps::of(&location_files(&config));
                if now == location_stamps {
                    continue;
                }
                location_stamps = now;
                location_build = Some(LocationBuild::start(config.clone(), config_path.clone()));
                continue;
            }
            built = async { (&mut location_build.as_mut().expect("a build").task).await }, if location_build.is_some() => {
                let build = location_build.take().expect("a build");
                // A reload switched to another configuration meanwhile: its own database is
                // in force.
                if !Arc::ptr_eq(&build.config, &config) {
                    continue;
                }
                match built {
                    Ok(Ok(db)) => world.locations = db,
                    Ok(Err(error)) => {
                        error!(error = anyhow_like(&error), "location database changed but does not load; the loaded one stays in force");
                        continue;
                    }
                    Err(error) => {
                        error!(%error, "location database changed but its build failed; the loaded one stays in force");
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
        let snapshot = world.snapshot();
        let compiled = started.elapsed();
        if switch.is_none()
            && let Some(m) = &mep_rt
        {
            m.publish_local(&world);
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
                if let Err(error) = world.health.set_services(service_monitors(&config)).await {
                    // Not reached: `reload` checked the monitors.
                    error!(
                        error = anyhow_like(&error),
                        "health monitors not reconfigured"
                    );
                }
                if rtt.apply(&config).await {
                    world.rtt = rtt.handle();
                    rtt_handles.send_replace(world.rtt.clone());
                }
                if let Some(m) = &mut mep_rt {
                    m.reconfigure(&world, &config).await;
                }
                links.reconfigure(&mut world, &config);
                steer::retain_known(&mut world, &config.server.state_file);
                if let Err(error) = loads.reconfigure(&mut world, &config) {
                    // Not reached: `reload` checked the probes.
                    error!(
                        error = anyhow_like(&error),
                        "load monitors not reconfigured"
                    );
                }
                switched = true;
                republish_stats.recorded.reload_applied();
                info!(config = %config_path.display(), "configuration reloaded");
                Ok(())
            } else {
                config = previous.config;
                world.set_source(previous.source);
                world.locations = previous.locations;
                world.local_site = previous.local_site;
                republish_stats.reloads_failed.fetch_add(1, Relaxed);
                error!(
                    "reload failed: its answers could not be published; the running configuration, its monitors, MEP, links and answers stay in force"
                );
                Err(ReloadRefused::PublishFailed)
            };
            for r in waiting {
                r.answer(outcome.clone());
            }
        }
        loads.published(&world, tokio::time::Instant::now());
        if published {
            republish_stats.recorded.record(trigger, started.elapsed());
            world_feed.publish(&world);
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
        // After the status feed: a `show` or `/status` right after the reply sees the change.
        for pending in steered.drain(..) {
            pending.answer(published);
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
        Some(dataplane) => {
            dataplane.close();
            // The directory too, if nothing else is pinned there.
            let _ = std::fs::remove_dir(&pin_path);
        }
        None => {}
    }
    // After the detach: the RTT prober holds the LDNS map that the program writes.
    rtt.shutdown().await;
    Ok(())
}

/// The location database being rebuilt for a change of its files, off the controller loop.
struct LocationBuild {
    /// The configuration it is built for.
    config: Arc<Config>,
    task: tokio::task::JoinHandle<Result<Option<Arc<LocationDb>>, LocationDbError>>,
}

impl LocationBuild {
    fn start(config: Arc<Config>, config_path: PathBuf) -> Self {
        let for_build = config.clone();
        LocationBuild {
            config,
            task: tokio::task::spawn_blocking(move || location_db(&for_build, &config_path)),
        }
    }
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
    if super::fault::publish_fails(world.model().dns.port) {
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
    responder.replace_with_locations(snapshot, world.locations.clone());
    true
}

pub(super) fn log_compiled(snapshot: &Snapshot) {
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
