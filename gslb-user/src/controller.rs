//! The controller's truth: the configuration, the location database, the local monitors'
//! verdicts, the RTT table and what MEP says of the other sites. [`World::snapshot`] turns it
//! into the answers; gslbd republishes them whenever any part changes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use crate::compile::{Compiler, Inputs, LdnsRtt, Snapshot};
use crate::config::Config;
use crate::health::HealthSupervisor;
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
    pub fn service_states(&self) -> Vec<ServiceState> {
        self.config
            .services
            .iter()
            .map(|s| {
                let local = self.health.is_up(&s.name);
                let remote = self.local_site.as_deref().is_some_and(|here| here != s.site);
                match (&self.mep, remote) {
                    (Some(view), true) => {
                        let up = view.service_up(&s.site, &s.name, local);
                        let load = view
                            .sites
                            .get(&s.site)
                            .and_then(|r| r.services.iter().find(|x| x.name == s.name));
                        ServiceState {
                            down: !up,
                            connections: load.map_or(0, |l| l.connections),
                            bandwidth_kbps: load.map_or(0, |l| l.bandwidth_bps / 1000),
                        }
                    }
                    _ if local == Some(false) => ServiceState::DOWN,
                    _ => ServiceState::UP,
                }
            })
            .collect()
    }

    /// The RTT table as rows by LDNS entry, columns by configuration site index.
    pub fn rtt_rows(&self) -> Vec<LdnsRtt> {
        let Some(rtt) = &self.rtt else { return Vec::new() };
        let sites: HashMap<&str, usize> =
            self.config.sites.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect();
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
                rtt_us.iter().any(Option::is_some).then_some(LdnsRtt { ldns, rtt_us })
            })
            .collect()
    }
}
