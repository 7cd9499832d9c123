//! The republish loop's events, one handler each: what the event changes in the world, and
//! the trigger it republishes for (`None`: nothing to republish now, or later by a pacer).

use std::{
    path::PathBuf,
    sync::{Arc, atomic::Ordering::Relaxed},
};

use tokio::{sync::broadcast, time::Instant};
use tracing::{error, info, warn};

use super::{Serving, Switch};
use crate::{
    compile::Source,
    config::Config,
    control::{Reload, ReloadRefused, Steer},
    daemon::{
        anyhow_like,
        reload::{FileStamps, Previous, location_db, location_files, reload},
        steer,
    },
    health::HealthEvent,
    location::db::{LocationDb, LocationDbError},
};

type Built = Result<Result<Option<Arc<LocationDb>>, LocationDbError>, tokio::task::JoinError>;

impl Serving {
    /// A reload (SIGHUP or the control socket). A burst of requests is one reload: the file is
    /// read once, latest wins, and every requester gets that outcome.
    pub(super) async fn on_reload(
        &mut self,
        first: Reload,
        reloads: &mut tokio::sync::mpsc::Receiver<impl Into<Reload>>,
    ) -> Option<&'static str> {
        let run = &mut self.run;
        let mut waiting = vec![first];
        while let Ok(r) = reloads.try_recv() {
            waiting.push(r.into());
        }
        while let Ok(r) = run.control_reloads.try_recv() {
            waiting.push(r);
        }
        match reload(&run.config_path, &run.overrides, &run.config).await {
            Ok((next, locations, stamps)) => {
                // All or nothing: the new configuration's answers are published first (the
                // republish); its monitors, MEP, links, load monitors and RTT settings switch
                // only once they are in force, and a failed publish puts the old configuration
                // back with everything it runs.
                run.republish_stats
                    .events
                    .fetch_add(waiting.len() as u64 - 1, Relaxed);
                let world = &mut run.world;
                let previous = Previous {
                    source: world.set_source(Source::from(&next)),
                    config: std::mem::replace(&mut run.config, Arc::new(next)),
                    locations: std::mem::replace(&mut world.locations, locations),
                };
                self.switch = Some(Switch {
                    previous,
                    stamps,
                    waiting,
                });
                // As read: a write during the read is still a change.
                self.zone_stamps = FileStamps::recorded(&run.config.zone_files);
                Some("reload")
            }
            Err(error) => {
                run.republish_stats.reloads_refused.fetch_add(1, Relaxed);
                let refused = ReloadRefused::Invalid(Arc::new(error));
                for r in waiting {
                    r.answer(Err(refused.clone()));
                }
                None
            }
        }
    }

    /// A steering command over the control socket; a burst of them is one republish.
    pub(super) fn on_steer(&mut self, request: Steer) -> Option<&'static str> {
        let run = &mut self.run;
        let state_file = &run.config.server.state_file;
        self.steered
            .extend(steer::apply(&mut run.world, state_file, request));
        while let Ok(request) = run.steer_requests.try_recv() {
            self.steered
                .extend(steer::apply(&mut run.world, state_file, request));
        }
        (!self.steered.is_empty()).then_some("admin")
    }

    /// Right after a reload's switch: what the switched monitors, MEP, links and RTT settings
    /// change.
    pub(super) fn on_switched(&mut self) -> &'static str {
        self.switched = false;
        "reload (switched)"
    }

    /// The RTT table changed: bursts are folded into one republish, later (see
    /// `RepublishPacer`).
    pub(super) fn on_rtt_change(&mut self) -> Option<&'static str> {
        self.rtt_pacer.changed(Instant::now());
        None
    }

    /// A new MEP view. Views the answers do not read (heartbeats, link details) cost no
    /// recompute; other sites' loads are paced like ours.
    pub(super) fn on_mep_view(&mut self) -> Option<&'static str> {
        let run = &mut self.run;
        if !run.mep_rt.as_mut().is_some_and(|m| m.apply(&mut run.world)) {
            run.loads.note(&run.world, Instant::now());
            return None;
        }
        Some("mep")
    }

    /// A `[[link]]` sample. A link going over or back moves answers at once, a rate that
    /// crosses a max_bandwidth_kbps through the load pacer.
    pub(super) fn on_link_sample(&mut self) -> Option<&'static str> {
        let run = &mut self.run;
        if !run.links.apply(&mut run.world) {
            run.loads.note(&run.world, Instant::now());
            return None;
        }
        Some("link")
    }

    /// A load monitor's reading: weighed by the load pacer; the other sites decide on this
    /// site's loads too.
    pub(super) fn on_load_reading(&mut self) -> Option<&'static str> {
        let run = &mut self.run;
        run.loads.apply(&mut run.world);
        if let Some(m) = &run.mep_rt {
            m.publish_local(&run.world);
        }
        run.loads.note(&run.world, Instant::now());
        None
    }

    /// A service's health changed. Later events of a burst are in the state read when the
    /// pacer is due: one republish for all of them (at once after a quiet spell).
    pub(super) fn on_health_event(
        &mut self,
        event: Result<HealthEvent, broadcast::error::RecvError>,
    ) -> Option<&'static str> {
        let run = &mut self.run;
        match event {
            Ok(e) => info!(
                service = e.service,
                up = e.up,
                reason = e.reason,
                transitions = e.transitions,
                "service health changed"
            ),
            Err(broadcast::error::RecvError::Lagged(n)) => {
                warn!(missed = n, "health events coalesced");
            }
            Err(broadcast::error::RecvError::Closed) => return None,
        }
        run.republish_stats.events.fetch_add(1, Relaxed);
        while run.health_events.try_recv().is_ok() {
            run.republish_stats.events.fetch_add(1, Relaxed);
        }
        self.health_pacer.changed(Instant::now());
        None
    }

    /// The zone files' poll: whether one changed since it was read (or since a reload of
    /// the change was last tried: a refused one is not retried until the files change again).
    pub(super) fn zone_files_changed(&mut self) -> bool {
        let now = FileStamps::of_inputs(&self.run.config);
        if now == self.zone_stamps {
            return false;
        }
        self.zone_stamps = now;
        info!("a zone file changed; reloading the configuration");
        true
    }

    /// The location files' poll: a change starts a build off the loop.
    pub(super) fn on_location_poll(&mut self) -> Option<&'static str> {
        let run = &mut self.run;
        let now = FileStamps::of(&location_files(&run.config));
        if now != run.location_stamps {
            run.location_stamps = now;
            self.location_build = Some(LocationBuild::start(
                run.config.clone(),
                run.config_path.clone(),
            ));
        }
        None
    }

    /// A location database build finished: in force unless it failed, or a reload switched to
    /// another configuration meanwhile (its own database is in force).
    pub(super) fn on_location_built(&mut self, built: Built) -> Option<&'static str> {
        let build = self.location_build.take().expect("a build");
        if !Arc::ptr_eq(&build.config, &self.run.config) {
            return None;
        }
        match built {
            Ok(Ok(db)) => self.run.world.locations = db,
            Ok(Err(error)) => {
                error!(
                    error = anyhow_like(&error),
                    "location database changed but does not load; the loaded one stays in force"
                );
                return None;
            }
            Err(error) => {
                error!(%error, "location database changed but its build failed; the loaded one stays in force");
                return None;
            }
        }
        Some("location database")
    }
}

/// The location database being rebuilt for a change of its files, off the controller loop.
pub(super) struct LocationBuild {
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

    /// Resolves when the build in `build` is done (guarded by `is_some`).
    pub(super) async fn done(build: &mut Option<LocationBuild>) -> Built {
        (&mut build.as_mut().expect("a build").task).await
    }
}
