//! gslbd's side of MEP (docs/mep.md): the [`MepNode`] of this site, run as `[mep]` and the
//! `[[site]]`s say, fed with the local state and read back into the controller's [`World`].
//!
//! - Start: the listener is bound with the DNS sockets ([`bind`]), so a MEP port in use fails
//!   the start before anything is loaded; the node's settings are checked before gslbd reports
//!   ready ([`Mep::start`]).
//! - Out: after every recompute, this site's services (as its own monitors see them) and its
//!   RTT column go to the node ([`Mep::publish_local`]); the node sends the latest to its peers.
//! - In: every view the node publishes becomes `world.mep` (taken as `mep::intake` says);
//!   other parents' RTT rows are merged into `world.rtt` (`probe::RemoteColumns`). The answers
//!   are recomputed only when what they read changed ([`Mep::apply`]).
//! - Persistence: the responder's entries are exchanged with the other parents by a task beside
//!   the node (`daemon::persist`), restarted with it.
//! - Role: only parents answer GSLB queries. The view's role is an input of the world's
//!   snapshot (`World::answers_gslb`): a child's answers carry no GSLB entries (the fast path
//!   passes those names) and its responder REFUSES them.
//! - Reload: enabling or disabling MEP, or changing `server.site` or the listen address, needs a
//!   restart ([`check_reload`]); any other MEP change (keys, TLS, timers, the topology) restarts
//!   the node in place on the same listening socket ([`Mep::reconfigure`], `mep::RunningNode`),
//!   keeping the last view until the links are back (bounded: `mep::intake::Intake::hold`).

use std::{
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use tracing::{error, info};

use crate::{
    config::{Config, MepSettings},
    mep::{
        MepConfig, MepError, MepNode, MepView, Role, RunningNode, SiteTree,
        intake::{Intake, reachable_sites},
    },
    persist::Store as PersistStore,
    probe::RemoteColumns,
    world::World,
};

use super::persist::PersistSync;

mod inbound;
mod outbound;
/// The least time the last view is kept after a restart of the node (reload) while the links
/// come back; the dead-peer timeout when that is longer.
const HOLD_MIN: Duration = Duration::from_secs(1);

/// MEP cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MepStartError {
    #[error("listening on {addr} (mep)")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// A listener given to [`adopt`] that is not on `mep.listen` (`want`; `None`: `[mep]` is
    /// off).
    #[error("the MEP listener given ({got:?}) is not the configured one ({want:?})")]
    NotConfigured {
        want: Option<SocketAddr>,
        got: Option<SocketAddr>,
    },
    #[error(transparent)]
    Settings(#[from] MepError),
}

/// Binds the MEP listener when `[mep]` is enabled: at start-up, with the DNS sockets.
pub fn bind(config: &Config) -> Result<Option<std::net::TcpListener>, MepStartError> {
    let Some(mep) = config.mep_enabled() else {
        return Ok(None);
    };
    let addr = mep.listen;
    let bind = || {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(listener)
    };
    bind()
        .map(Some)
        .map_err(|source| MepStartError::Bind { addr, source })
}

/// Takes the MEP listener the caller bound already (tests bind port 0 and name the port in the
/// file): it must be on the configured address, with `[mep]` enabled.
pub fn adopt(
    config: &Config,
    listener: std::net::TcpListener,
) -> Result<std::net::TcpListener, MepStartError> {
    let Some(want) = config.mep_enabled().map(|mep| mep.listen) else {
        return Err(MepStartError::NotConfigured {
            want: None,
            got: listener.local_addr().ok(),
        });
    };
    let got = listener
        .local_addr()
        .and_then(|got| listener.set_nonblocking(true).map(|()| got))
        .map_err(|source| MepStartError::Bind { addr: want, source })?;
    if got != want {
        return Err(MepStartError::NotConfigured {
            want: Some(want),
            got: Some(got),
        });
    }
    Ok(listener)
}

/// What a node runs with, as far as the configuration says: a change restarts the node.
#[derive(Clone, Debug, PartialEq, Eq)]
struct NodeKey {
    mep: Option<MepSettings>,
    site: Option<String>,
    topology: Option<SiteTree>,
    tolerance: Duration,
}

impl NodeKey {
    fn of(config: &Config) -> NodeKey {
        NodeKey {
            mep: config.mep_enabled().cloned(),
            site: config.server.site.clone(),
            topology: config.mep_topology().ok(),
            tolerance: config.rtt.probe.tolerance,
        }
    }
}

/// Why a reloaded configuration cannot be applied to the running MEP: the changes that need a
/// restart (the listening socket and the site's identity are fixed at start), or settings the
/// node refuses.
pub fn check_reload(running: &Config, new: &Config) -> Result<(), MepReloadError> {
    let (old_on, new_on) = (running.mep_enabled(), new.mep_enabled());
    let mut restart = Vec::new();
    match (old_on, new_on) {
        (None, None) => return Ok(()),
        (Some(_), None) | (None, Some(_)) => restart.push("mep.enabled"),
        (Some(a), Some(b)) => {
            if running.server.site != new.server.site {
                restart.push("server.site");
            }
            if a.listen != b.listen {
                restart.push("mep.listen");
            }
        }
    }
    if !restart.is_empty() {
        return Err(MepReloadError::RestartOnly { fields: restart });
    }
    new.mep_node().map(|_| ()).map_err(MepReloadError::Node)
}

/// Why a reloaded configuration cannot be applied to the running MEP.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MepReloadError {
    #[error("{} changed: MEP needs a restart for that", fields.join(", "))]
    RestartOnly { fields: Vec<&'static str> },
    /// The node refuses the new settings.
    #[error(transparent)]
    Node(MepError),
}

/// The view before the node's first one: no site reachable yet, so remote services are DOWN
/// (unless monitored here) until their MEP links come up; the role is the configured one.
pub fn initial_view(config: &Config) -> Option<Arc<MepView>> {
    let _ = config.mep_enabled()?;
    let site = config.server.site.as_ref()?;
    let topology = config.mep_topology().ok()?;
    MepView::initial(site, &topology).map(Arc::new)
}

/// The parent sites of `config` other than this one (`server.site`).
fn other_parents(config: &Config) -> Vec<String> {
    config
        .sites
        .iter()
        .filter(|s| s.role == Role::Parent && config.server.site.as_ref() != Some(&s.name))
        .map(|s| s.name.clone())
        .collect()
}

/// This site's MEP, as gslbd runs it.
pub struct Mep {
    site: String,
    /// The socket bound at start; every node accepts on a duplicate of it, so a restarted node
    /// keeps the port (and the connections waiting in its backlog).
    listener: std::net::TcpListener,
    key: NodeKey,
    running: RunningNode,
    hold_min: Duration,
    intake: Intake,
    rtt: RemoteColumns,
    /// The other parent sites, whose RTT columns are merged into this site's table.
    parents: Vec<String>,
    /// The responder's persistence entries, and their exchange with the running node.
    persistence: Arc<PersistStore>,
    persist_sync: Option<PersistSync>,
}

impl Mep {
    /// Starts the node on `listener` (from [`bind`]) with the settings of `config` (the
    /// world's), and publishes the local state; `persistence`'s entries are exchanged with the
    /// other parents. `None` when the configuration has MEP off.
    pub fn start(
        listener: std::net::TcpListener,
        world: &World,
        config: &Config,
        persistence: Arc<PersistStore>,
    ) -> Result<Option<Mep>, MepStartError> {
        let key = NodeKey::of(config);
        let parents = other_parents(config);
        let Some(config) = config.mep_node()? else {
            return Ok(None);
        };
        let site = config.site.clone();
        let hold_min = config.dead_after.max(HOLD_MIN);
        let running = spawn(&listener, config)?;
        let persist_sync = Some(PersistSync::start(
            running.node().clone(),
            persistence.clone(),
        ));
        let mep = Mep {
            site,
            listener,
            key,
            running,
            hold_min,
            intake: Intake::new(world.mep().map(|v| &**v)),
            rtt: RemoteColumns::default(),
            parents,
            persistence,
            persist_sync,
        };
        mep.publish_local(world);
        Ok(Some(mep))
    }

    /// Applies a reloaded configuration (already accepted by [`check_reload`]): when the node's
    /// settings changed, the node is restarted on the same socket, and the current view is kept
    /// until the sites reachable now are reachable again, for at most the dead-peer timeout
    /// (≥ 1 s). Then publishes the local state (services may have been added or removed).
    pub async fn reconfigure(&mut self, world: &World, config: &Config) {
        self.parents = other_parents(config);
        let key = NodeKey::of(config);
        if key != self.key {
            match config.mep_node() {
                Ok(Some(config)) => {
                    let want = reachable_sites(world.mep().map(|v| &**v));
                    info!(keep_view_of = ?want, "MEP settings changed: restarting the MEP node");
                    let hold_min = config.dead_after.max(HOLD_MIN);
                    self.persist_sync = None;
                    self.running.stop().await;
                    match spawn(&self.listener, config) {
                        Ok(running) => {
                            self.persist_sync = Some(PersistSync::start(
                                running.node().clone(),
                                self.persistence.clone(),
                            ));
                            self.running = running;
                            self.key = key;
                            self.hold_min = hold_min;
                            self.intake.hold(want, Instant::now() + self.hold_min);
                        }
                        Err(error) => {
                            error!(
                                error = super::anyhow_like(&error),
                                "MEP: the node cannot be restarted; MEP is down until the next reload or restart"
                            );
                        }
                    }
                }
                // check_reload refused these; nothing to do if they ever get here.
                Ok(None) => {}
                Err(error) => error!(%error, "MEP settings refused; the running node stays"),
            }
        }
        // The reload may have replaced the RTT table: every parent's column is merged afresh
        // (cells it already holds cause no change).
        self.rtt.forget();
        if let (Some(rtt), Some(view)) = (&world.rtt, world.mep()) {
            self.rtt.merge(&self.parents, rtt, view);
        }
        self.publish_local(world);
    }

    /// Stops the node, closing its links (peers see this site go at once).
    pub async fn shutdown(mut self) {
        self.persist_sync = None;
        self.running.stop().await;
    }

    /// The node (for its counters and view).
    pub fn node(&self) -> &MepNode {
        self.running.node()
    }
}

/// Runs a node on a duplicate of `listener`.
fn spawn(
    listener: &std::net::TcpListener,
    config: MepConfig,
) -> Result<RunningNode, MepStartError> {
    RunningNode::spawn(listener, config).map_err(|source| MepStartError::Bind {
        addr: listener
            .local_addr()
            .unwrap_or_else(|_| ([0, 0, 0, 0], 0).into()),
        source,
    })
}

#[cfg(test)]
#[path = "../../../tests/mep_keys/mod.rs"]
mod mep_keys;

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::mep_keys;

    use super::*;
    use crate::health::state::{Bandwidth, ServiceState};
    use crate::mep::intake::Facts;
    use crate::mep::{Role, ServiceReport};
    use crate::{
        health::HealthSupervisor,
        mep::{RemoteSite, SessionInfo, session::Audience},
    };

    /// Parent p1 (this server unless `site` says otherwise), parent p2, p1's child c1; a GSLB
    /// domain over a service at each.
    fn config(site: &str, mep: &str) -> Config {
        Config::parse(&config_text(site, mep), Path::new("test.toml"))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The text of [`config`]; c1 is a child only with a `[mep]` section (without one a role is
    /// refused).
    fn config_text(site: &str, mep: &str) -> String {
        let on = mep.contains("[mep]");
        let child = if on {
            "role = \"child\"\nparent = \"p1\""
        } else {
            ""
        };
        // With MEP: this site's private key, and every site's public key.
        let (mep, key) = if on {
            // A directory per call: tests run in parallel, and a file being rewritten reads short.
            static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = std::env::temp_dir()
                .join(format!("gslb-mep-unit-{}", std::process::id()))
                .join(n.to_string());
            std::fs::create_dir_all(&dir).unwrap();
            let file = mep_keys::write_private(&dir, site);
            let mep = mep.replacen(
                "[mep]\n",
                &format!(
                    "[mep]\nprivate_key_file = {:?}\n",
                    file.display().to_string()
                ),
                1,
            );
            (mep, mep_keys::site_line as fn(&str) -> String)
        } else {
            (
                mep.to_owned(),
                (|_: &str| String::new()) as fn(&str) -> String,
            )
        };
        let (k1, k2, kc) = (key("p1"), key("p2"), key("c1"));
        format!(
            r#"[server]
listen = ["127.0.0.1"]
site = "{site}"
{mep}
[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"
[[site]]
name = "p1"
ip = "10.0.0.1"
{k1}[[site]]
name = "p2"
ip = "10.0.0.2"
{k2}[[site]]
name = "c1"
ip = "10.0.1.1"
{kc}{child}
[[service]]
name = "a"
ip = "192.0.2.1"
site = "p1"
[[service]]
name = "b"
ip = "192.0.2.2"
site = "p2"
[[service]]
name = "c"
ip = "192.0.2.3"
site = "c1"
[[gslb_domain]]
name = "www.example.com"
answer = "all"
services = ["a", "b", "c"]
"#
        )
    }

    const MEP: &str = "[mep]\n";

    fn state(name: &str, up: bool) -> ServiceReport {
        ServiceReport {
            name: name.into(),
            state: if up {
                ServiceState::UP
            } else {
                ServiceState::DOWN
            },
        }
    }

    fn remote(reachable: bool, services: Vec<ServiceReport>) -> RemoteSite {
        RemoteSite {
            reachable,
            via: None,
            status: None,
            services: Arc::new(services),
            rtt: Arc::default(),
            persistence: Arc::default(),
            backups: None,
            handover: None,
        }
    }

    fn link(since: Instant) -> SessionInfo {
        SessionInfo {
            up: true,
            since,
            version: Some(1),
            initiated: true,
            peer_software: None,
            last_error: None,
            last_reason: None,
            audience: Audience::None,
        }
    }

    #[test]
    fn only_what_the_answers_read_counts_as_a_change() {
        let mut view = (*initial_view(&config("p1", MEP)).unwrap()).clone();
        view.sites
            .insert("p2".into(), remote(true, vec![state("b", true)]));
        view.sessions.insert("p2".into(), link(Instant::now()));
        let facts = Facts::of(&view);
        // A view rebuilt on a heartbeat, or with other link details: the same facts.
        let mut same = view.clone();
        same.sessions
            .insert("p2".into(), link(Instant::now() + Duration::from_secs(1)));
        same.holders.insert("c1".into(), "p1".into());
        assert_eq!(Facts::of(&same), facts);
        // What an unreachable site reported does not matter: it is DOWN either way.
        let mut gone = view.clone();
        gone.sites
            .insert("c1".into(), remote(false, vec![state("c", true)]));
        assert_eq!(Facts::of(&gone), facts);
        // A reported load is weighed by the load pacer (daemon/load.rs), not here.
        let mut loaded = view.clone();
        loaded.sites.insert(
            "p2".into(),
            remote(
                true,
                vec![ServiceReport {
                    state: ServiceState {
                        connections: 5,
                        bandwidth: Bandwidth::FULL,
                        ..ServiceState::UP
                    },
                    ..state("b", true)
                }],
            ),
        );
        assert_eq!(Facts::of(&loaded), facts);
        // Reachability, a reported state and the role do.
        let mut down = view.clone();
        down.sites
            .insert("p2".into(), remote(false, vec![state("b", true)]));
        let mut failed = view.clone();
        failed
            .sites
            .insert("p2".into(), remote(true, vec![state("b", false)]));
        let mut child = view.clone();
        child.answers_dns = false;
        for changed in [down, failed, child] {
            assert_ne!(Facts::of(&changed), facts, "{changed:?}");
        }
    }

    #[test]
    fn initial_view_reaches_nobody_and_has_the_configured_role() {
        let parent = initial_view(&config("p1", MEP)).unwrap();
        assert!(parent.answers_dns && parent.role == Role::Parent && parent.sites.is_empty());
        assert!(!parent.service_up("p2", "b", None) && parent.service_up("p2", "b", Some(true)));
        let child = initial_view(&config("c1", MEP)).unwrap();
        assert!(!child.answers_dns && child.role == Role::Child);
        assert!(initial_view(&config("p1", "")).is_none());
        assert!(initial_view(&config("p1", &format!("{MEP}enabled = false\n"))).is_none());
    }

    /// A link over its threshold at one site reaches the others as "full": the sender reports
    /// `u64::MAX` for the services on it, and the receiver's services are then full in the
    /// engine's eyes (spillover), while a normal link reports its rate.
    #[tokio::test]
    async fn an_over_link_travels_as_full() {
        use crate::health::link::LinkLoad;
        let links = "[[link]]\nname = \"uplink\"\ninterface = \"lo\"\nthreshold_kbps = 1000\nservices = [\"b\"]\n";
        // At p2, b's link: normal at 50 kB/s, then over.
        let mut at_p2 = World::new(
            &config("p2", &format!("{MEP}{links}")),
            HealthSupervisor::new(),
        );
        let load = |over| LinkLoad {
            interface: "lo".into(),
            rx_bytes_per_sec: Some(50_000),
            over,
            transitions: 0,
            at: std::time::SystemTime::now(),
            error: None,
        };
        for (over, sent) in [(false, 400_000), (true, u64::MAX)] {
            at_p2.set_links([("uplink".into(), load(over))].into());
            let model = at_p2.model().clone();
            let sent_of = |name| {
                let id = model.services.iter().position(|s| s.name == name).unwrap();
                let state = at_p2.own_state(id.into());
                (state.connections, state.bandwidth)
            };
            assert_eq!(sent_of("b"), (0, Bandwidth::from_bps(sent)), "over {over}");
            assert_eq!(sent_of("a"), (0, Bandwidth::ZERO), "a has no link");
            // At p1, which knows nothing of p2's links.
            let p1 = config("p1", MEP);
            let mut at_p1 = World::new(&p1, HealthSupervisor::new());
            let mut view = (*initial_view(&p1).unwrap()).clone();
            let mut b = state("b", true);
            b.state.bandwidth = Bandwidth::from_bps(sent);
            view.sites.insert("p2".into(), remote(true, vec![b]));
            at_p1.set_mep(Some(Arc::new(view)));
            let b_state = at_p1.service_states()[1];
            let full = b_state.bandwidth.kbps() == u64::MAX;
            assert_eq!(full, over, "over {over}: {b_state:?}");
        }
    }

    #[tokio::test]
    async fn a_child_publishes_no_gslb_answers() {
        for (site, answers) in [("p1", true), ("c1", false)] {
            let config = config(site, MEP);
            let mut world = World::new(&config, HealthSupervisor::new());
            world.set_mep(initial_view(&config));
            assert_eq!(world.answers_gslb(), answers, "{site}");
            let snapshot = world.snapshot();
            assert_eq!(snapshot.refuse_gslb, !answers, "{site}");
            assert_eq!(
                !snapshot.domains.is_empty(),
                answers,
                "{site}: {:?}",
                snapshot.domains
            );
        }
        // Without MEP every site answers: a child role there would be a lie, so it is refused.
        let world = World::new(&config("c1", ""), HealthSupervisor::new());
        assert!(world.answers_gslb() && !world.snapshot().domains.is_empty());
        let text: String = config_text("c1", MEP)
            .lines()
            .filter(|l| {
                *l != "[mep]" && !l.starts_with("key = ") && !l.starts_with("private_key_file")
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let refused = Config::parse(&text, Path::new("test.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            refused
                .contains("site \"c1\": role is a metric exchange setting, and there is no [mep]"),
            "{refused}"
        );
    }

    #[test]
    fn reload_refuses_what_needs_a_restart() {
        let running = config("p1", MEP);
        let cases = [
            (config("p1", ""), Some("mep.enabled")),
            (
                config("p1", &format!("{MEP}enabled = false\n")),
                Some("mep.enabled"),
            ),
            (config("p2", MEP), Some("server.site")),
            (
                config("p1", &format!("{MEP}listen = \"0.0.0.0\"\n")),
                Some("mep.listen"),
            ),
            // Applied in place (the node restarts on the same socket).
            (config("p1", &format!("{MEP}dead_after_ms = 3000\n")), None),
            (config("p1", &format!("{MEP}heartbeat_ms = 100\n")), None),
            (running.clone(), None),
        ];
        for (new, refused) in cases {
            let got = check_reload(&running, &new);
            match refused {
                Some(field) => assert!(
                    matches!(&got, Err(MepReloadError::RestartOnly { fields }) if fields.contains(&field)),
                    "{field}: {got:?}"
                ),
                None => assert!(got.is_ok(), "{got:?}"),
            }
        }
        // Without MEP before and after, nothing here to refuse.
        assert!(check_reload(&config("p1", ""), &config("p2", "")).is_ok());
    }

    #[test]
    fn node_settings_follow_the_configuration() {
        let c = Config::mep_node(&config(
            "p1",
            &format!("{MEP}heartbeat_ms = 100\ndead_after_ms = 300\n"),
        ))
        .unwrap()
        .unwrap();
        assert_eq!(c.site, "p1");
        assert_eq!(
            Some(c.key.public()),
            c.topology.site("p1").and_then(|s| s.key),
            "this site's private key, matching its [[site]] key"
        );
        assert!(c.topology.site("p2").is_some_and(|s| s.key.is_some()));
        assert_eq!(
            (c.heartbeat, c.dead_after),
            (Duration::from_millis(100), Duration::from_millis(300))
        );
        assert_eq!(c.rtt_tolerance_ms, Some(5));
        assert_eq!(c.topology.children_of("p1").count(), 1);
        assert!(config("p1", "").mep_node().unwrap().is_none());
        // A topology change is a node change; a change elsewhere is not.
        let base = NodeKey::of(&config("p1", MEP));
        let mut moved = config("p1", MEP);
        moved.sites[1].backup_parents = vec!["p1".into()];
        assert_ne!(NodeKey::of(&moved), base);
        let mut other = config("p1", MEP);
        other.services[0].weight = 7;
        assert_eq!(NodeKey::of(&other), base);
    }
}
