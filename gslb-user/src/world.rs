//! gslbd's world, what every answer is computed from: the configuration's model, the location
//! database, the local monitors' verdicts, the services' loads (this site's load monitors, the
//! uplinks), the RTT table and what MEP says of the other sites.
//! [`World::snapshot`] turns it into the answers; gslbd republishes them whenever any part
//! changes.

mod by_id;
mod rtt_rows;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use by_id::{ById, Reported, slot};

use crate::compile::{Compiler, Inputs, Snapshot, Source};
use crate::health::HealthSupervisor;
use crate::health::link::LinkLoad;
use crate::health::load::{LoadReadings, MAX_LOAD, Measure, UNKNOWN_LOAD};
use crate::health::state::Bandwidth;
use crate::location::db::LocationDb;
use crate::mep::MepView;
use crate::mep::topology::remote_service_up;
use crate::model::{Model, Service, ServiceId};
use crate::policy::ServiceState;
use crate::probe::RttHandle;
use crate::steering::AdminState;

/// Everything the answers are computed from.
///
/// The inputs that arrive by name (MEP's view, the links' and the load monitors' readings,
/// the admin state) are set through methods, which resolve them to the model's ids once
/// ([`by_id`]); the health monitors' verdicts are resolved when their version moves.
pub struct World {
    /// What the answers are compiled from: the configuration's model (shared, so that the
    /// compiler knows it by identity: an unchanged one costs no comparison) and RRL settings.
    /// The configuration itself (its monitors, MEP, links, files) is the daemon's; a reload
    /// replaces this with [`World::set_source`].
    source: Source,
    pub locations: Option<Arc<LocationDb>>,
    pub health: HealthSupervisor,
    /// The RTT table, when this site probes (issue 6).
    pub rtt: Option<RttHandle>,
    /// The latest MEP view, when this site exchanges metrics with others.
    mep: Option<Arc<MepView>>,
    /// The `[[link]]`s' latest loads, by link name (gslbd's link monitor).
    links: HashMap<String, LinkLoad>,
    /// The latest readings of the load monitors run here: those of this site's services
    /// (gslbd's load monitor, daemon/load.rs).
    loads: LoadReadings,
    /// What the operator disabled (`gslbctl service|site|domain disable`): such services are
    /// DOWN here and in what this site reports over MEP.
    admin: AdminState,
    /// The inputs above by id.
    by_id: ById,
    /// The health verdicts by service id, as last read.
    verdicts: Mutex<Option<Verdicts>>,
    /// Keeps the partition and the decisions between snapshots: after a service state change
    /// only what it touches is decided again.
    compiling: Mutex<Compiling>,
}

/// The health monitors' verdicts by service id (`None`: no monitor), and the supervisor's
/// version they were read at.
struct Verdicts {
    version: u64,
    by_id: Arc<[Option<bool>]>,
}

/// What [`World::snapshot`] keeps between snapshots.
#[derive(Default)]
struct Compiling {
    compiler: Compiler,
    /// The RTT rows the compiler was last given: after an RTT change only the changed rows
    /// are made again, and named to the compiler.
    rtt: Option<rtt_rows::RttRows>,
}

impl World {
    /// The world of `source` (a configuration's: `Source::from(&config)` makes its model).
    pub fn new(source: impl Into<Source>, health: HealthSupervisor) -> World {
        let source = source.into();
        let by_id = ById::resolve(
            &source.model,
            &AdminState::default(),
            &LoadReadings::default(),
            &HashMap::new(),
            None,
        );
        World {
            source,
            locations: None,
            health,
            rtt: None,
            mep: None,
            links: HashMap::new(),
            loads: LoadReadings::default(),
            admin: AdminState::default(),
            by_id,
            verdicts: Mutex::default(),
            compiling: Mutex::default(),
        }
    }

    /// Compiles from `source` (another configuration's) from now on; returns the one it
    /// replaces. Every input is resolved against its model.
    pub fn set_source(&mut self, source: Source) -> Source {
        let previous = std::mem::replace(&mut self.source, source);
        self.by_id = ById::resolve(
            &self.source.model,
            &self.admin,
            &self.loads,
            &self.links,
            self.mep.as_deref(),
        );
        *self
            .verdicts
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner) = None;
        previous
    }

    /// The configuration resolved into ids.
    pub fn model(&self) -> &Arc<Model> {
        &self.source.model
    }

    /// The latest MEP view, when this site exchanges metrics with others.
    pub fn mep(&self) -> Option<&Arc<MepView>> {
        self.mep.as_ref()
    }

    pub fn set_mep(&mut self, view: Option<Arc<MepView>>) {
        self.mep = view;
        self.by_id.reported(&self.source.model, self.mep.as_deref());
    }

    /// The `[[link]]`s' latest loads, by link name.
    pub fn links(&self) -> &HashMap<String, LinkLoad> {
        &self.links
    }

    pub fn set_links(&mut self, links: HashMap<String, LinkLoad>) {
        self.links = links;
        self.by_id.links(&self.source.model, &self.links);
    }

    /// The load monitors' latest readings.
    pub fn loads(&self) -> &LoadReadings {
        &self.loads
    }

    pub fn set_loads(&mut self, loads: LoadReadings) {
        self.loads = loads;
        self.by_id.loads(&self.source.model, &self.loads);
    }

    /// What the operator disabled.
    pub fn admin(&self) -> &AdminState {
        &self.admin
    }

    /// Changes the admin state with `change`; returns what `change` does.
    pub fn update_admin<R>(&mut self, change: impl FnOnce(&mut AdminState) -> R) -> R {
        let out = change(&mut self.admin);
        self.by_id.admin(&self.source.model, &self.admin);
        out
    }

    /// The answers of the current state.
    pub fn snapshot(&self) -> Snapshot {
        let mut compiling = self
            .compiling
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Compiling { compiler, rtt } = &mut *compiling;
        let model = self.model();
        let (rtt, rtt_changes) = rtt_rows::RttRows::next(rtt, model, self.rtt.as_ref());
        let inputs = Inputs {
            locations: self.locations.as_deref(),
            services: self.service_states(),
            disabled_domains: (0..model.domains.len())
                .map(|d| !self.by_id.domain_enabled(d.into()))
                .collect(),
            refuse_gslb: !self.answers_gslb(),
            rtt,
            rtt_changes,
        };
        compiler.compile(&self.source, &inputs)
    }

    /// Whether this site answers GSLB queries: only parents do (spec §6); without MEP, always.
    /// A child's snapshot has no GSLB answers, and its responder REFUSES those names
    /// ([`Inputs::refuse_gslb`]).
    pub fn answers_gslb(&self) -> bool {
        self.mep.as_ref().is_none_or(|v| v.answers_dns)
    }

    /// The next snapshot reads the whole RTT table into new rows, which the compiler compares
    /// row by row, as it does after a new prober's table: what an RTT change cost before the
    /// rows were patched (the scale bench compares the two).
    pub fn reread_rtt(&self) {
        self.compiling
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .rtt = None;
    }

    /// The health monitors' verdicts by service id (`None`: no monitor), read again only when
    /// the supervisor's version moved since the last read.
    fn verdicts(&self) -> Arc<[Option<bool>]> {
        let mut cached = self.verdicts.lock().unwrap_or_else(PoisonError::into_inner);
        let version = self.health.version();
        match &*cached {
            Some(v) if v.version == version => v.by_id.clone(),
            _ => {
                let model = self.model();
                let by_id: Arc<[Option<bool>]> = self
                    .health
                    .verdicts(model.services.iter().map(|s| s.name.as_str()))
                    .into();
                *cached = Some(Verdicts {
                    version,
                    by_id: by_id.clone(),
                });
                by_id
            }
        }
    }

    /// Each configured service's state. A service the operator disabled (or of a disabled
    /// site) is DOWN whatever else says; otherwise a local monitor's verdict wins; a service of another
    /// site, unmonitored here, is what its site reports over MEP (DOWN while MEP cannot reach
    /// the site); anything else is UP.
    ///
    /// Load: this site's services (every service without `server.site`) read theirs from the
    /// load monitors run here ([`World::local_connections`], [`World::local_bandwidth`]);
    /// another site's services carry what that site reports over MEP while it is reachable,
    /// and [`UNKNOWN_LOAD`] otherwise when they have a load monitor of that measure (0 for a
    /// measure nothing reads: no monitor, so validation allows no setting that reads it). A
    /// DOWN service carries no load: it is out of the answers anyway, and its load changes then
    /// cost no re-decision.
    ///
    /// A service on a link that is over its threshold is full: its bandwidth is the most there
    /// is ([`Bandwidth::FULL`]), at or above any `max_bandwidth_kbps` and the engine's "no
    /// limit". The engine's spillover then answers other services while any has room, and the
    /// full ones anyway when none has (spec §5: new answers shift to the other links).
    pub fn service_states(&self) -> Vec<ServiceState> {
        let verdicts = self.verdicts();
        (0..self.model().services.len())
            .map(|i| {
                let id = ServiceId::of(i);
                let local = verdicts[i];
                let state = match self.by_id.reported[i] {
                    Reported::Here => ServiceState {
                        up: local != Some(false),
                        connections: self.local_connections(id),
                        bandwidth: self.local_bandwidth(id),
                    },
                    Reported::Unreachable => ServiceState {
                        up: remote_service_up(local, false, None),
                        ..self.unreported(id)
                    },
                    Reported::Reachable(None) => ServiceState {
                        up: remote_service_up(local, true, None),
                        ..self.unreported(id)
                    },
                    // FULL bandwidth: the service's link is over at its site, so it is full
                    // here too (daemon/mep/outbound.rs `local_load`).
                    Reported::Reachable(Some(r)) => ServiceState {
                        up: remote_service_up(local, true, Some(r.up)),
                        ..r
                    },
                };
                if state.up && self.by_id.enabled(id) {
                    state
                } else {
                    ServiceState::DOWN
                }
            })
            .collect()
    }

    /// What this site reports over MEP of its own service `id`: UP unless a monitor here says
    /// DOWN or the operator disabled it (or this site), with its load measured here, the
    /// values this site's answers read ([`World::local_connections`],
    /// [`World::local_bandwidth`]). Markers travel as they are: the bandwidth
    /// [`Bandwidth::FULL`] while the service's link is over its threshold (hysteresis
    /// included), which tells the other sites the service is full (docs/mep.md): they do not
    /// know this site's links; and [`UNKNOWN_LOAD`] in either field while the load monitor's
    /// value is unknown.
    pub fn own_state(&self, id: ServiceId) -> ServiceState {
        ServiceState {
            up: self.verdicts()[id.index()] != Some(false) && self.by_id.enabled(id),
            connections: self.local_connections(id),
            bandwidth: self.local_bandwidth(id),
        }
    }

    /// The load of another site's service that its site does not report (unreachable, or not
    /// listed): [`UNKNOWN_LOAD`] of the measures it has a load monitor of, 0 of the others
    /// (nothing reads them: validation allows no setting that would).
    fn unreported(&self, id: ServiceId) -> ServiceState {
        let s = self.model().service(id);
        let unknown = |measure| {
            if has_monitor(s, measure) {
                UNKNOWN_LOAD
            } else {
                0
            }
        };
        ServiceState {
            up: false,
            connections: unknown(Measure::Connections),
            bandwidth: Bandwidth::from_kbps(unknown(Measure::BandwidthKbps)),
        }
    }

    /// The connections of a service measured here: its load monitor's value, [`UNKNOWN_LOAD`]
    /// while that is unknown (or has no reading yet), 0 without a connections monitor.
    pub fn local_connections(&self, id: ServiceId) -> u64 {
        self.monitored(id, Measure::Connections).unwrap_or(0)
    }

    /// The bandwidth of a service measured here: [`Bandwidth::FULL`] while its link is over;
    /// else its bandwidth monitor's value (kbit/s; [`Bandwidth::UNKNOWN`] while unknown); else
    /// its link's inbound rate (0 before the link's first rate); 0 without either.
    pub fn local_bandwidth(&self, id: ServiceId) -> Bandwidth {
        let link = self
            .model()
            .service(id)
            .link
            .and_then(|l| self.by_id.link(l));
        if link.is_some_and(|l| l.over) {
            return Bandwidth::FULL;
        }
        Bandwidth::from_kbps(
            self.monitored(id, Measure::BandwidthKbps)
                .unwrap_or_else(|| {
                    link.and_then(|l| l.rx_bytes_per_sec)
                        .map_or(0, |bytes| (bytes.saturating_mul(8) / 1000).min(MAX_LOAD))
                }),
        )
    }

    /// The value of `id`'s load monitor of `measure`, if it has one: [`UNKNOWN_LOAD`] while
    /// unknown or before its first reading.
    fn monitored(&self, id: ServiceId, measure: Measure) -> Option<u64> {
        if !has_monitor(self.model().service(id), measure) {
            return None;
        }
        Some(self.by_id.loads[id.index()][slot(measure)].unwrap_or(UNKNOWN_LOAD))
    }
}

/// Whether `s` has a load monitor of `measure`.
fn has_monitor(s: &Service, measure: Measure) -> bool {
    match measure {
        Measure::Connections => s.load.connections,
        Measure::BandwidthKbps => s.load.bandwidth_kbps,
    }
}
