//! One republish: the world compiled into a snapshot, published to the fast path and the
//! responder, a reload's switch completed (or undone when the publish failed), and the
//! counters, the status feed and the steering replies after it.

use std::sync::atomic::Ordering::Relaxed;

use tokio::time::Instant;
use tracing::{error, info};

use super::{Serving, Switch};
use crate::{
    compile::Snapshot,
    control::ReloadRefused,
    daemon::{anyhow_like, reload::service_monitors, steer},
    dataplane::Dataplane,
    responder::Responder,
    world::World,
};

impl Serving {
    /// Recomputes the whole answer set for `trigger` and publishes it.
    pub(super) async fn republish(&mut self, trigger: &'static str) {
        let run = &mut self.run;
        if trigger != "health" {
            run.republish_stats.events.fetch_add(1, Relaxed);
        }
        let started = std::time::Instant::now();
        let snapshot = run.world.snapshot();
        let compiled = started.elapsed();
        if self.switch.is_none()
            && let Some(m) = &run.mep_rt
        {
            m.publish_local(&run.world);
        }
        // This snapshot has the latest RTT table, whatever the trigger.
        self.rtt_pacer.republished(Instant::now());
        self.health_pacer.republished(Instant::now());
        let published = publish(
            &run.world,
            &snapshot,
            run.dataplane.as_mut(),
            &run.responder,
        );
        if let Some(switch) = self.switch.take() {
            self.finish_switch(switch, published).await;
        }
        let run = &mut self.run;
        run.loads.published(&run.world, Instant::now());
        if published {
            let stats = &run.republish_stats;
            stats.recorded.record(trigger, started.elapsed());
            run.world_feed.publish(&run.world);
            stats.republishes.fetch_add(1, Relaxed);
            stats
                .last_compile_us
                .store(compiled.as_micros() as u64, Relaxed);
            stats
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
        for pending in self.steered.drain(..) {
            pending.answer(published);
        }
    }

    /// After a reload's answers were published: its monitors, RTT settings, MEP, links,
    /// steering names and load monitors switch; when they were not, the running configuration
    /// is put back. Every requester gets the outcome.
    async fn finish_switch(&mut self, switch: Switch, published: bool) {
        let Switch {
            previous,
            stamps,
            waiting,
        } = switch;
        let run = &mut self.run;
        let outcome = if published {
            run.location_stamps = stamps;
            let (world, config) = (&mut run.world, &run.config);
            if let Err(error) = world.health.set_services(service_monitors(config)).await {
                // Not reached: `reload` checked the monitors.
                error!(
                    error = anyhow_like(&error),
                    "health monitors not reconfigured"
                );
            }
            if run.rtt.apply(config).await {
                world.rtt = run.rtt.handle();
                run.rtt_handles.send_replace(world.rtt.clone());
            }
            if let Some(m) = &mut run.mep_rt {
                m.reconfigure(world, config).await;
            }
            run.links.reconfigure(world, config);
            steer::retain_known(world, &config.server.state_file);
            if let Err(error) = run.loads.reconfigure(world, config) {
                // Not reached: `reload` checked the probes.
                error!(
                    error = anyhow_like(&error),
                    "load monitors not reconfigured"
                );
            }
            self.switched = true;
            run.republish_stats.recorded.reload_applied();
            info!(config = %run.config_path.display(), "configuration reloaded");
            Ok(())
        } else {
            run.config = previous.config;
            run.world.set_source(previous.source);
            run.world.locations = previous.locations;
            run.republish_stats.reloads_failed.fetch_add(1, Relaxed);
            error!(
                "reload failed: its answers could not be published; the running configuration, its monitors, MEP, links and answers stay in force"
            );
            Err(ReloadRefused::PublishFailed)
        };
        for r in waiting {
            r.answer(outcome.clone());
        }
    }
}

/// Makes `snapshot` what the fast path and the responder answer. False when the fast path
/// refused it; the old generation then stays in force there and in the responder.
fn publish(
    world: &World,
    snapshot: &Snapshot,
    dataplane: Option<&mut Dataplane>,
    responder: &Responder,
) -> bool {
    #[cfg(feature = "fault-injection")]
    if crate::daemon::fault::publish_fails(world.model().dns.port) {
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

pub(in crate::daemon) fn log_compiled(snapshot: &Snapshot) {
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
