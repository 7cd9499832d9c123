//! gslbd's load side: runs the load monitors of this site's services ([`LoadMonitor`]), keeps
//! their readings in [`World::loads`], and decides when a load change is worth a republish.
//!
//! Loads move all the time, and most moves change no answer: a count going from 40 to 41
//! while another service has 12 leaves `leastconnection` where it was, and a service far under
//! its limit stays under it. So a new reading (local, or another site's over MEP, or a link's
//! rate) republishes only when it changes what a decision reads ([`LoadFacts`]): which
//! services are full (the engine's spillover test, exactly), and for each domain with
//! `leastconnection` in its chain the order of its services' connection counts. Those changes
//! are then paced ([`LOAD_SETTLE`], [`LOAD_REPUBLISH_GAP`]): monitors that sample at about the
//! same time share one republish, and a load that flips two services' order back and forth
//! costs at most one republish a second. A republish for any other trigger compiles the latest
//! values anyway.
//!
//! This site's values also go to MEP at every reading that changed ([`Loads::apply`] is
//! followed by `Mep::publish_local`), so the other sites decide on them too; MEP sends only
//! what changed.

use tokio::{sync::watch, time::Instant};

use crate::{
    config::Config,
    health::{
        HealthError,
        load::{LoadMonitor, LoadReadings, ServiceLoadMonitors},
    },
    model::{Method, Model},
    policy::ServiceState,
    world::World,
};

use super::serve::RepublishPacer;

/// A load change republishes this long after it at the earliest, so that monitors sampling at
/// about the same time share the republish.
pub const LOAD_SETTLE: std::time::Duration = std::time::Duration::from_millis(100);
/// At most one load republish in this time.
pub const LOAD_REPUBLISH_GAP: std::time::Duration = std::time::Duration::from_secs(1);

/// What the monitor runs for `config`: the load monitors of the services measured here (this
/// site's; every service's without `server.site`), at the services' own addresses.
pub fn specs(config: &Config) -> Vec<ServiceLoadMonitors> {
    let here = config.server.site.as_deref();
    config
        .services
        .iter()
        .filter(|s| !s.load_monitors.is_empty() && here.is_none_or(|h| h == s.site))
        .map(|s| ServiceLoadMonitors {
            service: s.name.clone(),
            target: s.ip,
            port: s.port,
            monitors: s
                .load_monitors
                .iter()
                .map(|n| {
                    config
                        .load_monitors
                        .iter()
                        .find(|m| &m.name == n)
                        .expect("validated")
                        .clone()
                })
                .collect(),
        })
        .collect()
}

/// What the answers read of the services' loads (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadFacts {
    /// By service: UP and full (the engine's spillover test).
    full: Vec<bool>,
    /// By domain with `leastconnection`: its services' dense ranks by connections (UP ones;
    /// a DOWN one is `u32::MAX`).
    ranks: Vec<Vec<u32>>,
}

impl LoadFacts {
    pub fn of(model: &Model, states: &[ServiceState]) -> LoadFacts {
        let state = |i: usize| states.get(i).copied().unwrap_or_default();
        let full = model
            .services
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let st = state(i);
                st.up
                    && (st.connections >= s.max_connections.unwrap_or(u64::MAX)
                        || st.bandwidth.kbps() >= s.max_bandwidth_kbps.unwrap_or(u64::MAX))
            })
            .collect();
        let ranks = model
            .domains
            .iter()
            .filter(|d| d.chain.contains(&Method::LeastConnection))
            .map(|d| {
                let counts: Vec<Option<u64>> = d
                    .members()
                    .map(|id| {
                        let st = state(id.index());
                        st.up.then_some(st.connections)
                    })
                    .collect();
                let mut distinct: Vec<u64> = counts.iter().flatten().copied().collect();
                distinct.sort_unstable();
                distinct.dedup();
                counts
                    .iter()
                    .map(|c| {
                        c.map_or(u32::MAX, |c| {
                            distinct.binary_search(&c).unwrap_or_default() as u32
                        })
                    })
                    .collect()
            })
            .collect();
        LoadFacts { full, ranks }
    }
}

/// The load side of gslbd; see the module documentation.
pub struct Loads {
    monitor: LoadMonitor,
    readings: watch::Receiver<LoadReadings>,
    /// What the published answers read.
    applied: LoadFacts,
    pacer: RepublishPacer,
}

impl Loads {
    /// Whether `config`'s load monitors can run (the probes build); for a reload, before
    /// anything changes.
    pub fn check(config: &Config) -> Result<(), HealthError> {
        LoadMonitor::check(&specs(config))
    }

    /// Starts the monitors of `config` (the world's) and takes their first readings into `world`,
    /// waiting for them at most the longest monitor timeout: the first answers then read
    /// values rather than "unknown", which would make services with a limit full for the
    /// moment of the first check. Needs a tokio runtime.
    pub async fn start(world: &mut World, config: &Config) -> Result<Loads, HealthError> {
        let specs = specs(config);
        let mut monitor = LoadMonitor::new();
        monitor.set_services(&specs)?;
        if let Some(within) = specs
            .iter()
            .flat_map(|s| &s.monitors)
            .map(|m| m.timeout)
            .max()
        {
            monitor.first_readings(within).await;
        }
        let mut loads = Loads {
            readings: monitor.readings(),
            monitor,
            applied: LoadFacts::default(),
            pacer: RepublishPacer::with(Instant::now(), LOAD_SETTLE, LOAD_REPUBLISH_GAP),
        };
        loads.apply(world);
        Ok(loads)
    }

    /// The readings, for the control socket's `stats`.
    pub fn readings(&self) -> watch::Receiver<LoadReadings> {
        self.monitor.readings()
    }

    /// Follows a reloaded `config` (the world's, already [`Loads::check`]ed): unchanged
    /// monitors keep running with their readings. The reload republishes anyway.
    pub fn reconfigure(&mut self, world: &mut World, config: &Config) -> Result<(), HealthError> {
        self.monitor.set_services(&specs(config))?;
        self.apply(world);
        Ok(())
    }

    /// Resolves when a reading changed since the last [`Loads::apply`]. Cancel-safe.
    pub async fn changed(&mut self) {
        if self.readings.changed().await.is_err() {
            // The monitor holds the sender as long as `self` lives: not reached.
            std::future::pending::<()>().await;
        }
    }

    /// Takes the latest readings into the world's loads.
    pub fn apply(&mut self, world: &mut World) {
        world.set_loads(self.readings.borrow_and_update().clone());
    }

    /// After `world`'s loads changed (a reading, a MEP view, a link sample): schedules a
    /// republish when the answers would read something else.
    pub fn note(&mut self, world: &World, now: Instant) {
        if LoadFacts::of(world.model(), &world.service_states()) != self.applied {
            self.pacer.changed(now);
        }
    }

    /// When a load republish is due; `None`: none pending.
    pub fn due(&self) -> Option<Instant> {
        self.pacer.due()
    }

    /// The answers were republished at `now` from `world` as it is.
    pub fn published(&mut self, world: &World, now: Instant) {
        self.applied = LoadFacts::of(world.model(), &world.service_states());
        self.pacer.republished(now);
    }
}

#[cfg(test)]
mod tests;
