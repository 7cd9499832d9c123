//! The controller's truth: the configuration, the location database, the local monitors'
//! verdicts, the links' loads, the RTT table and what MEP says of the other sites.
//! [`World::snapshot`] turns it into the answers; gslbd republishes them whenever any part
//! changes.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use crate::compile::{Compiler, Inputs, LdnsRtt, Snapshot};
use crate::config::Config;
use crate::health::HealthSupervisor;
use crate::health::link::LinkLoad;
use crate::location::db::LocationDb;
use crate::mep::MepView;
use crate::policy::ServiceState;
use crate::probe::RttHandle;

/// Everything the answers are computed from.
pub struct World {
    pub config: Config,
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
    /// Keeps the partition and the decisions between snapshots: after a service state change
    /// only what it touches is decided again.
    compiler: std::sync::Mutex<Compiler>,
}

impl World {
    pub fn new(config: Config, health: HealthSupervisor) -> World {
        World {
            config,
            locations: None,
            health,
            rtt: None,
            mep: None,
            local_site: None,
            links: HashMap::new(),
            compiler: std::sync::Mutex::default(),
        }
    }

    /// The answers of the current state.
    pub fn snapshot(&self) -> Snapshot {
        let inputs = Inputs {
            locations: self.locations.as_deref(),
            services: self.service_states(),
            rtt: Arc::new(self.rtt_rows()),
        };
        let mut compiler = self.compiler.lock().unwrap_or_else(|e| e.into_inner());
        compiler.compile(&self.config, &inputs)
    }

    /// Each configured service's state. A local monitor's verdict wins; a service of another
    /// site, unmonitored here, is what its site reports over MEP (DOWN while MEP cannot reach
    /// the site); anything else is UP.
    ///
    /// A service on a link that is over its threshold is full: its bandwidth is the most there
    /// is, at or above any `max_bandwidth_kbps` and the engine's "no limit" (u64::MAX). The
    /// engine's spillover then answers other services while any has room, and the full ones
    /// anyway when none has (spec §5: new answers shift to the other links).
    pub fn service_states(&self) -> Vec<ServiceState> {
        let over: HashSet<&str> = self
            .config
            .links
            .iter()
            .filter(|l| self.links.get(&l.name).is_some_and(|load| load.over))
            .flat_map(|l| l.services.iter().map(String::as_str))
            .collect();
        self.config
            .services
            .iter()
            .map(|s| {
                let local = self.health.is_up(&s.name);
                let remote = self
                    .local_site
                    .as_deref()
                    .is_some_and(|here| here != s.site);
                let mut state = match (&self.mep, remote) {
                    (Some(view), true) => {
                        let up = view.service_up(&s.site, &s.name, local);
                        let load = view
                            .sites
                            .get(&s.site)
                            .and_then(|r| r.services.iter().find(|x| x.name == s.name));
                        // u64::MAX: the service's link is over at its site, so it is full
                        // here too (daemon/mep.rs `link_load_bps`).
                        let bps = load.map_or(0, |l| l.bandwidth_bps);
                        ServiceState {
                            down: !up,
                            connections: load.map_or(0, |l| l.connections),
                            bandwidth_kbps: if bps == u64::MAX {
                                u64::MAX
                            } else {
                                bps / 1000
                            },
                        }
                    }
                    _ if local == Some(false) => ServiceState::DOWN,
                    _ => ServiceState::UP,
                };
                // A down service is out anyway; leaving it as it is spares a re-decision.
                if !state.down && over.contains(s.name.as_str()) {
                    state.bandwidth_kbps = u64::MAX;
                }
                state
            })
            .collect()
    }

    /// The RTT table as rows by LDNS entry, columns by configuration site index.
    pub fn rtt_rows(&self) -> Vec<LdnsRtt> {
        let Some(rtt) = &self.rtt else {
            return Vec::new();
        };
        let sites: HashMap<&str, usize> = self
            .config
            .sites
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.as_str(), i))
            .collect();
        let mask = rtt.settings().mask;
        rtt.to_map()
            .into_iter()
            .filter_map(|(group, columns)| {
                let len = match group {
                    IpAddr::V4(_) => mask.v4.min(32),
                    IpAddr::V6(_) => mask.v6.min(128),
                };
                let ldns = IpNet::new(group, len).ok()?;
                let mut rtt_us = vec![None; self.config.sites.len()];
                for (site, d) in columns {
                    if let Some(&i) = sites.get(site.as_str()) {
                        rtt_us[i] = Some(u32::try_from(d.as_micros()).unwrap_or(u32::MAX));
                    }
                }
                rtt_us
                    .iter()
                    .any(Option::is_some)
                    .then_some(LdnsRtt { ldns, rtt_us })
            })
            .collect()
    }
}

/// What the controller's republishing did, for `gslbctl stats`: how many trigger events came in
/// (a burst counts each event it drained) against how many republishes they cost, and how long
/// the last one took from its trigger to the maps.
#[derive(Debug, Default)]
pub struct RepublishStats {
    pub events: std::sync::atomic::AtomicU64,
    pub republishes: std::sync::atomic::AtomicU64,
    pub last_compile_us: std::sync::atomic::AtomicU64,
    pub last_total_us: std::sync::atomic::AtomicU64,
}

impl RepublishStats {
    /// `name value` lines.
    pub fn lines(&self) -> String {
        use std::sync::atomic::Ordering::Relaxed;
        format!(
            "trigger_events {}\nrepublishes {}\nlast_compile_us {}\nlast_republish_us {}\n",
            self.events.load(Relaxed),
            self.republishes.load(Relaxed),
            self.last_compile_us.load(Relaxed),
            self.last_total_us.load(Relaxed),
        )
    }
}
