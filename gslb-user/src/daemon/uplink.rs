//! gslbd's link monitor (spec §5, F5 link bandwidth): samples the inbound rate of every
//! `[[link]]`'s interface ([`LinkMonitor`]), keeps the latest loads in [`World::links`], and
//! asks for a recompute only when a link goes over its threshold or back under it
//! ([`Uplinks::apply`]): samples come every interval, and one that moves no link over or back
//! changes no answer, so it costs no recompute. Over a threshold, a link's services are full
//! for the engine ([`World::service_states`]) and new answers shift to services on other links.
//!
//! A reload hands the new `[[link]]`s to the monitor ([`Uplinks::reconfigure`]): unchanged links
//! keep sampling with their state, changed ones start again (not over), removed ones stop.

use std::{
    collections::{BTreeSet, HashMap},
    path::PathBuf,
};

use tokio::sync::watch;
use tracing::{info, warn};

use crate::{
    config::Config,
    health::link::{LinkLoad, LinkMonitor, LinkSpec, SYS_CLASS_NET},
    world::World,
};

/// The monitor's specs for the configuration's links: the threshold in bytes per second.
pub fn specs(config: &Config) -> Vec<LinkSpec> {
    config
        .links
        .iter()
        .map(|l| LinkSpec {
            link: l.name.clone(),
            interface: l.interface.clone(),
            interval: l.interval,
            threshold_bytes_per_sec: l.threshold_kbps.saturating_mul(1000) / 8,
            over_after: l.over_after,
            under_after: l.under_after,
        })
        .collect()
}

/// The link side of gslbd; see the module documentation.
pub struct Uplinks {
    monitor: LinkMonitor,
    loads: watch::Receiver<HashMap<String, LinkLoad>>,
    /// The links over their threshold as the answers last read them.
    applied: BTreeSet<String>,
    /// Uplinks whose counter could not be read at their last sample (said once per outage).
    unreadable: BTreeSet<String>,
}

impl Uplinks {
    /// Starts sampling the configuration's links from the kernel's counters. Needs a tokio
    /// runtime.
    pub fn start(config: &Config) -> Uplinks {
        Self::start_with_root(config, SYS_CLASS_NET.into())
    }

    /// Starts sampling the configuration's links from counters under `root`, laid out like
    /// `/sys/class/net` (tests).
    pub fn start_with_root(config: &Config, root: PathBuf) -> Uplinks {
        let monitor = LinkMonitor::spawn_with_root(specs(config), root);
        let loads = monitor.loads();
        Uplinks {
            monitor,
            loads,
            applied: BTreeSet::new(),
            unreadable: BTreeSet::new(),
        }
    }

    /// Follows a reloaded `config` (the world's) and takes the loads as they are now into
    /// `world` (a removed link's load leaves it). The reload recomputes the answers anyway.
    pub fn reconfigure(&mut self, world: &mut World, config: &Config) {
        self.monitor.set_links(specs(config));
        self.apply(world);
    }

    /// Resolves when a link was sampled since the last [`Uplinks::apply`]; then call it. Pending
    /// forever without links. Cancel-safe.
    pub async fn changed(&mut self) {
        if self.loads.changed().await.is_err() {
            // The monitor holds the sender as long as `self` lives: not reached.
            std::future::pending::<()>().await;
        }
    }

    /// Takes the latest loads into the world's links. True when a link went over its threshold or
    /// back since the last call (or appeared or left while over): what the answers read.
    pub fn apply(&mut self, world: &mut World) -> bool {
        let loads = self.loads.borrow_and_update().clone();
        for (link, load) in &loads {
            match &load.error {
                Some(error) if self.unreadable.insert(link.clone()) => {
                    // Without samples the link cannot move: a typo in the interface name would
                    // otherwise never be noticed.
                    warn!(link, interface = %load.interface, %error, over = load.over, "link counter cannot be read; the link keeps its state until it can");
                }
                None if self.unreadable.remove(link) => {
                    info!(link, interface = %load.interface, "link counter readable again");
                }
                _ => {}
            }
        }
        self.unreadable.retain(|link| loads.contains_key(link));
        // Uplinks with no sample yet are not over, like those that are absent.
        let over: BTreeSet<String> = loads
            .iter()
            .filter(|(_, l)| l.over)
            .map(|(k, _)| k.clone())
            .collect();
        world.set_links(loads);
        if over == self.applied {
            return false;
        }
        self.applied = over;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_carry_the_threshold_in_bytes_per_second_and_the_defaults() {
        let text = r#"
[server]
listen = ["192.0.2.1"]
[[site]]
name = "dc"
ip = "192.0.2.2"
[[service]]
name = "web"
ip = "198.51.100.1"
site = "dc"
[[service]]
name = "api"
ip = "198.51.100.2"
site = "dc"
[[link]]
name = "isp-a"
interface = "eth1"
threshold_kbps = 8000
services = ["web"]
[[link]]
name = "isp-b"
interface = "eth2"
threshold_kbps = 10000000000
interval_ms = 250
over_after = 1
under_after = 5
services = ["api"]
"#;
        let config = Config::parse(text, std::path::Path::new("links.toml"))
            .unwrap_or_else(|e| panic!("{e}"));
        let spec = |link: &str,
                    interface: &str,
                    ms: u64,
                    bytes: u64,
                    over_after: u32,
                    under_after: u32| LinkSpec {
            link: link.into(),
            interface: interface.into(),
            interval: std::time::Duration::from_millis(ms),
            threshold_bytes_per_sec: bytes,
            over_after,
            under_after,
        };
        assert_eq!(
            specs(&config),
            [
                spec("isp-a", "eth1", 1000, 1_000_000, 3, 3),
                spec("isp-b", "eth2", 250, 1_250_000_000_000, 1, 5)
            ]
        );
    }
}
