//! gslbd's world, what every answer is computed from: the configuration's model, the location
//! database, the local monitors' verdicts, the services' loads (this site's load monitors, the
//! uplinks), the RTT table and what MEP says of the other sites.
//! [`World::snapshot`] turns it into the answers; gslbd republishes them whenever any part
//! changes.

mod rtt_rows;

use std::collections::HashMap;
use std::sync::Arc;

use crate::compile::{Compiler, Inputs, Snapshot, Source};
use crate::health::HealthSupervisor;
use crate::health::link::LinkLoad;
use crate::health::load::{LoadReadings, MAX_LOAD, Measure, UNKNOWN_LOAD};
use crate::health::state::Bandwidth;
use crate::location::db::LocationDb;
use crate::mep::topology::remote_service_up;
use crate::mep::{MepView, ServiceReport};
use crate::model::{Model, Service};
use crate::policy::ServiceState;
use crate::probe::RttHandle;
use crate::steering::AdminState;

/// Everything the answers are computed from.
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
    pub mep: Option<Arc<MepView>>,
    /// This site's name: services of other sites take their state from MEP.
    pub local_site: Option<String>,
    /// The `[[link]]`s' latest loads, by link name (gslbd's link monitor).
    pub links: HashMap<String, LinkLoad>,
    /// The latest readings of the load monitors run here: those of this site's services
    /// (gslbd's load monitor, daemon/load.rs).
    pub loads: LoadReadings,
    /// What the operator disabled (`gslbctl service|site|domain disable`): such services are
    /// DOWN here and in what this site reports over MEP.
    pub admin: AdminState,
    /// Keeps the partition and the decisions between snapshots: after a service state change
    /// only what it touches is decided again.
    compiling: std::sync::Mutex<Compiling>,
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
        World {
            source: source.into(),
            locations: None,
            health,
            rtt: None,
            mep: None,
            local_site: None,
            links: HashMap::new(),
            loads: LoadReadings::default(),
            admin: AdminState::default(),
            compiling: std::sync::Mutex::default(),
        }
    }

    /// Compiles from `source` (another configuration's) from now on; returns the one it
    /// replaces.
    pub fn set_source(&mut self, source: Source) -> Source {
        std::mem::replace(&mut self.source, source)
    }

    /// The configuration resolved into ids.
    pub fn model(&self) -> &Arc<Model> {
        &self.source.model
    }

    /// The answers of the current state.
    pub fn snapshot(&self) -> Snapshot {
        let mut compiling = self
            .compiling
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Compiling { compiler, rtt } = &mut *compiling;
        let model = self.model();
        let (rtt, rtt_changes) = rtt_rows::RttRows::next(rtt, model, self.rtt.as_ref());
        let inputs = Inputs {
            locations: self.locations.as_deref(),
            services: self.service_states(),
            disabled_domains: model
                .domains
                .iter()
                .map(|d| !self.admin.domain_enabled(&d.name))
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
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .rtt = None;
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
        let model = self.model();
        // Each other site's report while it is reachable, by site id, its services by name:
        // one look-up per site and per reported service, not a scan per service.
        let reports: Vec<Option<HashMap<&str, &ServiceReport>>> = match &self.mep {
            Some(view) => model
                .sites
                .iter()
                .map(|site| {
                    let here = self.local_site.as_ref().is_none_or(|h| *h == site.name);
                    let report = view
                        .sites
                        .get(&site.name)
                        .filter(|r| r.reachable && !here)?;
                    // The first report of a name wins, as a scan would find it.
                    Some(
                        report
                            .services
                            .iter()
                            .rev()
                            .map(|x| (x.name.as_str(), x))
                            .collect(),
                    )
                })
                .collect(),
            None => Vec::new(),
        };
        model
            .services
            .iter()
            .map(|s| {
                let site = &model.site(s.site).name;
                let local = self.health.is_up(&s.name);
                let remote = self.local_site.as_ref().is_some_and(|here| here != site);
                let state = match (&self.mep, remote) {
                    (Some(_), true) => {
                        let report = reports[s.site.index()].as_ref();
                        let reported = report.and_then(|r| r.get(s.name.as_str()));
                        let up = remote_service_up(
                            local,
                            report.is_some(),
                            reported.map(|r| r.state.up),
                        );
                        let unreported = |measure| {
                            if has_monitor(s, measure) {
                                UNKNOWN_LOAD
                            } else {
                                0
                            }
                        };
                        ServiceState {
                            up,
                            connections: reported.map_or_else(
                                || unreported(Measure::Connections),
                                |r| r.state.connections,
                            ),
                            // FULL: the service's link is over at its site, so it is full
                            // here too (daemon/mep/outbound.rs `local_load`).
                            bandwidth: reported.map_or_else(
                                || Bandwidth::from_kbps(unreported(Measure::BandwidthKbps)),
                                |r| r.state.bandwidth,
                            ),
                        }
                    }
                    _ => ServiceState {
                        up: local != Some(false),
                        connections: self.local_connections(s),
                        bandwidth: self.local_bandwidth(s),
                    },
                };
                if state.up && self.admin.service_enabled(&s.name, site) {
                    state
                } else {
                    ServiceState::DOWN
                }
            })
            .collect()
    }

    /// The connections of a service measured here: its load monitor's value, [`UNKNOWN_LOAD`]
    /// while that is unknown (or has no reading yet), 0 without a connections monitor.
    pub fn local_connections(&self, s: &Service) -> u64 {
        self.monitored(s, Measure::Connections).unwrap_or(0)
    }

    /// The bandwidth of a service measured here: [`Bandwidth::FULL`] while its link is over;
    /// else its bandwidth monitor's value (kbit/s; [`Bandwidth::UNKNOWN`] while unknown); else
    /// its link's inbound rate (0 before the link's first rate); 0 without either.
    pub fn local_bandwidth(&self, s: &Service) -> Bandwidth {
        let link = s
            .link
            .and_then(|l| self.links.get(&self.model().links[l.index()].name));
        if link.is_some_and(|l| l.over) {
            return Bandwidth::FULL;
        }
        Bandwidth::from_kbps(
            self.monitored(s, Measure::BandwidthKbps)
                .unwrap_or_else(|| {
                    link.and_then(|l| l.rx_bytes_per_sec)
                        .map_or(0, |bytes| (bytes.saturating_mul(8) / 1000).min(MAX_LOAD))
                }),
        )
    }

    /// The value of `s`'s load monitor of `measure`, if it has one.
    fn monitored(&self, s: &Service, measure: Measure) -> Option<u64> {
        if !has_monitor(s, measure) {
            return None;
        }
        Some(
            self.loads
                .value(&s.name, measure)
                .flatten()
                .unwrap_or(UNKNOWN_LOAD),
        )
    }
}

/// Whether `s` has a load monitor of `measure`.
fn has_monitor(s: &Service, measure: Measure) -> bool {
    match measure {
        Measure::Connections => s.load.connections,
        Measure::BandwidthKbps => s.load.bandwidth_kbps,
    }
}
