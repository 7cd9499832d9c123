//! gslbd once it runs: the one loop where every trigger (a reload, a health flip, RTT, MEP, an
//! uplink, a load reading, the location files, the zone files) ends in one recompute and republish of the
//! whole answer set, and the orderly stop. The loop is a list of events, one handler each
//! (`events.rs`); the republish and a reload's switch are `publish.rs`; when paced triggers
//! are due, `pacer.rs`.

use std::{path::PathBuf, sync::Arc};

use tokio::{
    sync::{broadcast, mpsc, watch},
    task::JoinSet,
    time::{Instant, sleep_until},
};
use tracing::info;

use super::{
    DaemonError, Overrides,
    listen::SERVER_STOP_GRACE,
    load, mep,
    reload::{FileStamps, Switch, next_reload},
    rtt, steer, uplink,
};
use crate::{
    admin::{metrics::RepublishStats, status::WorldFeed},
    config::Config,
    control::Reload,
    dataplane::Dataplane,
    health::HealthEvent,
    probe::RttHandle,
    responder::Responder,
    supervise,
    world::World,
};

mod events;
mod pacer;
mod publish;

pub(super) use pacer::RepublishPacer;
pub(super) use publish::log_compiled;

use events::LocationBuild;

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

/// What the loop keeps besides what gslbd runs.
struct Serving {
    run: Running,
    /// The location database's files are watched for changes by their modification times; a
    /// change is read on a blocking thread (a large database takes seconds), one build at a
    /// time, and applied here when it is done.
    location_poll: tokio::time::Interval,
    location_build: Option<LocationBuild>,
    /// The zone files' stamps (`Config::zone_files`) when they were read, or when a reload
    /// of their change was last tried; polled with the location files, a change reloads.
    zone_stamps: FileStamps,
    rtt_pacer: RepublishPacer,
    health_pacer: RepublishPacer,
    /// A reloaded configuration waiting for the republish of its answers, and whether one was
    /// just switched to (its subsystems' states are then republished once more).
    switch: Option<Switch>,
    switched: bool,
    /// Steering commands waiting for the republish of their change.
    steered: Vec<steer::Pending>,
}

/// Serves until `shutdown` resolves, then stops everything `running` holds.
pub(super) async fn serve(
    running: Running,
    shutdown: impl Future<Output = ()>,
    mut reloads: mpsc::Receiver<impl Into<Reload>>,
) -> Result<(), DaemonError> {
    let mut location_poll = tokio::time::interval(super::reload::LOCATION_POLL);
    location_poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let zone_stamps = FileStamps::recorded(&running.config.zone_files);
    let mut s = Serving {
        run: running,
        location_poll,
        location_build: None,
        zone_stamps,
        rtt_pacer: RepublishPacer::rtt(Instant::now()),
        health_pacer: RepublishPacer::health(Instant::now()),
        switch: None,
        switched: false,
        steered: Vec::new(),
    };
    tokio::pin!(shutdown);
    loop {
        // Every trigger ends in one recompute of the whole answer set from the current state:
        // events that arrive meanwhile are drained first, so a burst costs one republish and
        // the latest state always wins. A handler that returns `None` republishes nothing.
        let load_due = s.run.loads.due();
        let (rtt_due, health_due) = (s.rtt_pacer.due(), s.health_pacer.due());
        let trigger: Option<&'static str> = tokio::select! {
            () = &mut shutdown => break,
            Some(first) = next_reload(&mut reloads, &mut s.run.control_reloads) => s.on_reload(first, &mut reloads).await,
            Some(request) = s.run.steer_requests.recv() => s.on_steer(request),
            () = std::future::ready(()), if s.switched => Some(s.on_switched()),
            () = s.run.rtt.changed() => s.on_rtt_change(),
            () = due(rtt_due), if rtt_due.is_some() => Some("rtt"),
            () = mep::Mep::changed(&mut s.run.mep_rt) => s.on_mep_view(),
            () = s.run.links.changed() => s.on_link_sample(),
            () = s.run.loads.changed() => s.on_load_reading(),
            () = due(load_due), if load_due.is_some() => Some("load"),
            event = s.run.health_events.recv() => s.on_health_event(event),
            () = due(health_due), if health_due.is_some() => Some("health"),
            _ = s.location_poll.tick(), if s.location_build.is_none() => {
                if s.zone_files_changed() {
                    s.on_reload(Reload { reply: None }, &mut reloads).await
                } else {
                    s.on_location_poll()
                }
            }
            built = LocationBuild::done(&mut s.location_build), if s.location_build.is_some() => s.on_location_built(built),
        };
        if let Some(trigger) = trigger {
            s.republish(trigger).await;
        }
    }
    // Boxed: the future holds everything gslbd runs.
    Box::pin(s.stop()).await;
    Ok(())
}

/// Resolves at `at` (a paced trigger's due time; guarded by `is_some`).
async fn due(at: Option<Instant>) {
    sleep_until(at.unwrap_or_else(Instant::now)).await;
}

impl Serving {
    /// Stops everything gslbd runs: the DNS loops and the control socket, MEP, the fast path
    /// (or leaves it attached and pinned), and then the RTT prober.
    async fn stop(self) {
        let Running {
            overrides,
            pin_path,
            dataplane,
            rtt,
            mep_rt,
            stop,
            loops,
            mut servers,
            heartbeat: _heartbeat,
            ..
        } = self.run;
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
    }
}
