//! What the admin endpoint reports, collected once per request into one [`Status`]:
//! `/status` serialises it as JSON and `/metrics` renders the same values in Prometheus's
//! text format ([`super::metrics`]).
//!
//! Counters are read where they are kept (atomics of the responder and the republish loop, the
//! fast path's per-CPU maps); what only the republish loop holds (the services' states as the
//! answers read them, the MEP view) comes through a [`WorldFeed`] it refreshes after every
//! republish.

use std::{collections::BTreeMap, sync::Arc};

use serde::Serialize;
use tokio::sync::watch;

use crate::{
    health::{ServiceHealth, load::UNKNOWN_LOAD},
    world::World,
};

/// Everything `/status` shows and `/metrics` exposes.
#[derive(Debug, Serialize)]
pub struct Status {
    /// The first answers are published and the DNS sockets are served.
    pub ready: bool,
    pub config: ConfigStatus,
    pub republish: RepublishStatus,
    pub responder: ResponderStatus,
    /// `None` without a fast path (`--no-xdp`).
    pub xdp: Option<XdpStatus>,
    /// As of the last republish.
    pub services: Vec<ServiceStatus>,
    /// As of the last republish.
    pub domains: Vec<DomainStatus>,
    /// As of the last republish.
    pub sites: Vec<SiteStatus>,
    /// `None` without MEP.
    pub mep: Option<MepStatus>,
    /// `None` when this site does not probe RTT.
    pub rtt: Option<RttStatus>,
    /// Supervised tasks that ever failed, by name.
    pub tasks: BTreeMap<String, TaskStatus>,
}

#[derive(Debug, Serialize)]
pub struct ConfigStatus {
    /// 1 for the configuration gslbd started with, one more for each reload put in force.
    pub generation: u64,
    /// Reloads refused: the file does not load, or changes what needs a restart.
    pub reloads_refused: u64,
    /// Reloads whose answers could not be published (the running configuration stayed).
    pub reloads_failed: u64,
}

#[derive(Debug, Serialize)]
pub struct RepublishStatus {
    /// Events that asked for a republish (several can share one).
    pub trigger_events: u64,
    /// Republishes by trigger.
    pub by_trigger: BTreeMap<&'static str, u64>,
    /// Time from the trigger's recompute to the answers in force, seconds.
    pub duration: Histogram,
}

/// A cumulative histogram, as Prometheus keeps one.
#[derive(Debug, Serialize)]
pub struct Histogram {
    /// (upper bound, observations at or below it), bounds ascending; +Inf is `count`.
    pub buckets: Vec<(f64, u64)>,
    pub count: u64,
    pub sum: f64,
}

#[derive(Debug, Serialize)]
pub struct ResponderStatus {
    /// (transport, RCODE, responses).
    pub answers: Vec<Answers>,
    /// The UDP loops' rate limiting (`[rrl]`); all 0 while it is off.
    pub rrl_sent: u64,
    pub rrl_dropped: u64,
    pub rrl_slipped: u64,
}

#[derive(Debug, Serialize)]
pub struct Answers {
    pub transport: &'static str,
    pub rcode: &'static str,
    pub count: u64,
}

#[derive(Debug, Serialize)]
pub struct XdpStatus {
    /// Queries answered in XDP, by counter (`hit_a_v4`, ...), summed over CPUs.
    pub hits: BTreeMap<&'static str, u64>,
    /// Frames passed to the kernel stack, by reason, summed over CPUs.
    pub passes: BTreeMap<&'static str, u64>,
    pub rrl_dropped: u64,
    pub rrl_slipped: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct DomainStatus {
    pub name: String,
    /// "disabled" when the operator took it out (`gslbctl domain disable`: it answers as if
    /// its services were down), else "enabled".
    pub admin_state: &'static str,
    /// What each static view draws its answers from: "default", then each view with a list
    /// of its own.
    pub views: Vec<ViewAnswers>,
}

/// The services a domain's decisions choose from for one static view: the up (and enabled)
/// services of the view's list, else of the domain's; none up: `fallback` ("backup domain",
/// "backup_ip" or "nodata").
#[derive(Clone, Debug, Serialize)]
pub struct ViewAnswers {
    pub view: String,
    pub services: Vec<String>,
    pub fallback: Option<&'static str>,
}

/// A site: its admin state and how many of its services are up.
#[derive(Clone, Debug, Serialize)]
pub struct SiteStatus {
    pub name: String,
    /// "disabled" after `gslbctl site disable`, else "enabled".
    pub admin_state: &'static str,
    pub services: usize,
    pub services_up: usize,
    /// Over MEP, for another site; `None` for this one or without MEP.
    pub reachable: Option<bool>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ServiceStatus {
    pub name: String,
    pub site: String,
    /// The address its answers carry; with `cname`, the address that name stands for (which
    /// its monitors check).
    pub address: std::net::IpAddr,
    /// The name a CNAME domain answers with for it; `None` for an address service.
    pub cname: Option<String>,
    /// In the answers: its monitors (or its site, over MEP) say UP, and the operator did not
    /// disable it.
    pub up: bool,
    /// "disabled" when the operator took it out (`gslbctl service disable`, or `site disable`
    /// of its site), else "enabled".
    pub admin_state: &'static str,
    pub weight: u32,
    /// The connections load the decisions read; `None` while unknown. 0 for a DOWN service
    /// (it carries no load) and for one without a connections monitor.
    pub connections: Option<u64>,
    /// As `connections`, for bandwidth (kbit/s); `u64::MAX` for a service whose link is over
    /// its threshold.
    pub bandwidth_kbps: Option<u64>,
    /// What decides `up` ([`why`]).
    pub why: String,
    /// When this site's monitors last changed its state (Unix seconds); `None` while it is in
    /// its first state, and for a service no monitor here checks.
    pub last_change_unix_s: Option<u64>,
}

/// Why a service is up or down, in the order [`World::service_states`] decides: the operator,
/// then this site's monitors (the first one down, with its last error), then the service's
/// site over MEP, else nothing (no monitor: up).
fn why(world: &World, service: &str, site: &str, health: Option<&ServiceHealth>) -> String {
    if !world.admin().service_enabled(service, site) {
        return "disabled by the operator".to_owned();
    }
    if let Some(h) = health.filter(|h| !h.monitors.is_empty()) {
        if h.up {
            return "monitors up".to_owned();
        }
        return match h.monitors.iter().find(|m| !m.up) {
            Some(m) => match m.last.as_ref().and_then(|c| c.error.as_deref()) {
                Some(error) => format!("monitor {} down: {error}", m.name),
                None => format!("monitor {} down", m.name),
            },
            None => "monitors down".to_owned(),
        };
    }
    let model = world.model();
    let remote = model.here.is_some_and(|here| model.site(here).name != site);
    match (world.mep(), remote) {
        (Some(view), true) => match view.sites.get(site) {
            Some(s) if s.reachable => format!("reported by site {site}"),
            _ => format!("site {site} unreachable over MEP"),
        },
        _ => "no monitor".to_owned(),
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct MepStatus {
    #[serde(rename = "links")]
    pub sessions: Vec<MepSession>,
    pub sites: Vec<MepSite>,
    /// A parent's adopted children, with their original parents.
    pub adopted: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct MepSession {
    pub peer: String,
    pub up: bool,
    /// The negotiated protocol version while up.
    pub version: Option<u8>,
    /// Why it last went down or failed to come up.
    pub last_error: Option<String>,
    /// Its kind: one of `CloseReason::as_str`'s fixed set (`gslb_mep_link_last_error_info`).
    pub last_reason: Option<&'static str>,
}

#[derive(Clone, Debug, Serialize)]
pub struct MepSite {
    pub name: String,
    pub reachable: bool,
    /// The session its state came through: itself when connected directly, else the parent that
    /// holds it.
    pub via: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct RttStatus {
    pub ldns_entries: u64,
    /// Resolver groups with an RTT from at least one site.
    pub rtt_rows: u64,
    pub probes_sent: u64,
    pub probe_rounds: u64,
    pub probe_samples: u64,
}

#[derive(Debug, Serialize)]
pub struct TaskStatus {
    pub running: u64,
    pub panics: u64,
    pub errors: u64,
    pub restarts: u64,
}

/// What only the republish loop holds, as of its last republish.
#[derive(Debug, Default)]
pub struct WorldStatus {
    pub services: Vec<ServiceStatus>,
    pub domains: Vec<DomainStatus>,
    pub sites: Vec<SiteStatus>,
    pub mep: Option<MepStatus>,
}

impl WorldStatus {
    pub fn of(world: &World) -> WorldStatus {
        let load = |v: u64| (v != UNKNOWN_LOAD).then_some(v);
        let health = world.health.snapshot();
        let model = world.model();
        let services: Vec<ServiceStatus> = model
            .services
            .iter()
            .zip(world.service_states())
            .map(|(s, state)| {
                let site = &model.site(s.site).name;
                ServiceStatus {
                    name: s.name.clone(),
                    site: site.clone(),
                    address: s.ip,
                    cname: s.cname.clone(),
                    up: state.up,
                    admin_state: admin_state(world.admin().service_enabled(&s.name, site)),
                    weight: s.weight,
                    connections: load(state.connections),
                    bandwidth_kbps: load(state.bandwidth.kbps()),
                    why: why(world, &s.name, site, health.get(&s.name)),
                    last_change_unix_s: health
                        .get(&s.name)
                        .and_then(|h| h.last_change)
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .map(|d| d.as_secs()),
                }
            })
            .collect();
        let mep = world.mep().map(|view| MepStatus {
            sessions: view
                .sessions
                .iter()
                .map(|(peer, l)| MepSession {
                    peer: peer.clone(),
                    up: l.up,
                    version: l.version,
                    last_error: l.last_error.clone(),
                    last_reason: l.last_reason.map(crate::mep::session::CloseReason::as_str),
                })
                .collect(),
            sites: view
                .sites
                .iter()
                .map(|(name, s)| MepSite {
                    name: name.clone(),
                    reachable: s.reachable,
                    via: s.via.clone(),
                })
                .collect(),
            adopted: view.adopted.clone(),
        });
        let domains = model
            .domains
            .iter()
            .map(|d| {
                let enabled = world.admin().domain_enabled(&d.name);
                let up_of = |ids: &[crate::model::ServiceId]| -> Vec<String> {
                    ids.iter()
                        .map(|&id| &services[id.index()])
                        .filter(|s| enabled && s.up)
                        .map(|s| s.name.clone())
                        .collect()
                };
                let own = up_of(&d.services);
                let fallback = if d.backup.is_some() {
                    "backup domain"
                } else if d.down == crate::model::Fallback::BackupIp {
                    "backup_ip"
                } else {
                    "nodata"
                };
                let answers = |view: &str, services: Vec<String>| ViewAnswers {
                    view: view.to_owned(),
                    fallback: services.is_empty().then_some(fallback),
                    services,
                };
                let mut views = vec![answers("default", own.clone())];
                for (view, ids) in &d.views {
                    let mine = up_of(ids);
                    views.push(answers(
                        &model.views[view.index()].name,
                        if mine.is_empty() { own.clone() } else { mine },
                    ));
                }
                DomainStatus {
                    name: d.name.clone(),
                    admin_state: admin_state(enabled),
                    views,
                }
            })
            .collect();
        let sites = model
            .sites
            .iter()
            .map(|site| {
                let of_site = || services.iter().filter(|s| s.site == site.name);
                SiteStatus {
                    name: site.name.clone(),
                    admin_state: admin_state(
                        !world
                            .admin()
                            .is_disabled(crate::steering::Target::Site, &site.name),
                    ),
                    services: of_site().count(),
                    services_up: of_site().filter(|s| s.up).count(),
                    reachable: world
                        .mep()
                        .filter(|_| model.here.map(|h| &model.site(h).name) != Some(&site.name))
                        .and_then(|v| v.sites.get(&site.name))
                        .map(|s| s.reachable),
                }
            })
            .collect();
        WorldStatus {
            services,
            domains,
            sites,
            mep,
        }
    }
}

fn admin_state(enabled: bool) -> &'static str {
    if enabled { "enabled" } else { "disabled" }
}

/// The republish loop's side of the world's status: refreshed after every republish, and only
/// computed when an admin endpoint reads it.
#[derive(Debug)]
pub struct WorldFeed(watch::Sender<Arc<WorldStatus>>);

impl Default for WorldFeed {
    fn default() -> Self {
        WorldFeed(watch::Sender::new(Arc::default()))
    }
}

impl WorldFeed {
    /// The status of `world`, for the readers (none: nothing is computed).
    pub fn publish(&self, world: &World) {
        if self.0.receiver_count() > 0 {
            self.0.send_replace(Arc::new(WorldStatus::of(world)));
        }
    }

    pub fn subscribe(&self) -> watch::Receiver<Arc<WorldStatus>> {
        self.0.subscribe()
    }
}
