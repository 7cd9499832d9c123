//! gslbd's dynamic RTT (spec §4): runs the prober for this site's column while the
//! configuration asks for it ([`Config::rtt_probing`]), feeds it the resolvers that query us
//! (the fast path's `LDNS` map and the responder's loops, both through one [`LdnsRecorder`]
//! that lives as long as gslbd), and follows reloads. The fast-path feed ([`run_xdp_feed_with`])
//! lives here, where the prober and the dataplane meet, so that neither knows the other.

use std::{net::IpAddr, time::Duration};

use tokio::{sync::watch, time::Instant};
use tracing::{debug, error, info, warn};

use crate::{
    config::Config,
    dataplane::{DataplaneError, LdnsMap, LdnsScan},
    probe::{
        LdnsMask, LdnsRecorder, NetProber, ProbeSettings, ProbeSupervisor, RttHandle, RttRow,
        Sightings,
    },
};

/// How often the fast path's `LDNS` map is read (each read costs two syscalls per entry, and
/// a resolver's first query reaches the prober at most this late).
const XDP_SCAN_EVERY: Duration = Duration::from_secs(1);

/// What a configuration wants of the prober: what runs, or a change (to the prober of this site
/// and settings, or to none).
enum Want {
    Same,
    Change(Option<(String, ProbeSettings)>),
}

/// The prober while it runs, and what it was started with.
struct Running {
    site: String,
    settings: ProbeSettings,
    supervisor: ProbeSupervisor,
}

/// The RTT side of gslbd; see the module documentation.
pub struct RttProbing {
    recorder: LdnsRecorder,
    /// The fast-path feed's settings and task, when XDP is loaded. The task ends with the map,
    /// which must stay open until the fast path is detached.
    feed: Option<(watch::Sender<XdpFeedSettings>, crate::supervise::Supervised)>,
    running: Option<Running>,
    /// The running prober's version, for [`RttProbing::changed`].
    version: Option<watch::Receiver<u64>>,
    /// Said once per configuration: rtt is used but nothing can measure it here.
    warned_no_site: bool,
}

impl RttProbing {
    /// Applies `config`; `ldns` is the fast path's map, when XDP is loaded. Needs a tokio
    /// runtime.
    pub fn new(config: &Config, ldns: Option<LdnsMap>) -> RttProbing {
        let recorder = LdnsRecorder::new();
        let feed = ldns.map(|map| {
            let (tx, rx) = watch::channel(feed_settings(config));
            // Supervised: each run reads a duplicate of `map`, which the task keeps open; a
            // run that dies or fails (a map read) is restarted with backoff.
            let task = crate::supervise::spawn("ldns-feed", {
                let recorder = recorder.clone();
                move |_| {
                    let run = map.try_clone().map(|map| {
                        run_xdp_feed_with(map, recorder.clone(), rx.clone(), XDP_SCAN_EVERY)
                    });
                    async move { run?.await.1 }
                }
            });
            (tx, task)
        });
        let mut rtt = RttProbing {
            recorder,
            feed,
            running: None,
            version: None,
            warned_no_site: false,
        };
        if let Want::Change(wanted) = rtt.wanted(config) {
            rtt.start(wanted, None);
        }
        rtt
    }

    /// Where the responder's loops record query sources.
    pub fn recorder(&self) -> LdnsRecorder {
        self.recorder.clone()
    }

    /// The RTT table while probing runs (for `World::rtt`, MEP and the control socket).
    pub fn handle(&self) -> Option<RttHandle> {
        self.running.as_ref().map(|r| r.supervisor.handle())
    }

    /// Follows a (re)loaded configuration: starts, stops or restarts the prober. Returns true
    /// when [`RttProbing::handle`] changed (the caller replaces the one it holds).
    ///
    /// A restart (another site, or other settings) carries over the resolvers known, and,
    /// when the LDNS mask is the same (rows are keyed by it), the table: other sites' columns,
    /// and this site's when the site is the same, so that the answers hold until the new
    /// probes come in. The old prober is stopped before the new one starts: both take from the
    /// one recorder, and a resolver the dying prober took after the carry-over (or a query's
    /// source it took while both ran) would never reach the new one.
    pub async fn apply(&mut self, config: &Config) -> bool {
        let Want::Change(wanted) = self.wanted(config) else {
            return false;
        };
        let old = match self.running.take() {
            Some(old) => {
                let handle = old.supervisor.handle();
                old.supervisor.shutdown().await;
                Some((old.settings, handle))
            }
            None => None,
        };
        self.version = None;
        self.start(wanted, old.as_ref());
        true
    }

    /// What `config` wants run. Also gives the fast-path feed its settings, and warns once
    /// when domains use RTT that nothing here can measure.
    fn wanted(&mut self, config: &Config) -> Want {
        let wanted = config.rtt_probing().then(|| {
            (
                config
                    .server
                    .site
                    .clone()
                    .expect("rtt_probing needs a site"),
                config.rtt.probe.clone(),
            )
        });
        let uses_rtt = config
            .gslb_domains
            .iter()
            .any(|d| d.chain().contains(&crate::policy::Method::Rtt));
        if uses_rtt && config.server.site.is_none() {
            if !self.warned_no_site {
                warn!(
                    "domains use the rtt method but server.site is not set: nothing is probed here, and they answer by the next method of their chains"
                );
                self.warned_no_site = true;
            }
        } else {
            self.warned_no_site = false;
        }
        if let Some((tx, _)) = &self.feed {
            tx.send_if_modified(|current| {
                let new = feed_settings(config);
                let changed = *current != new;
                *current = new;
                changed
            });
        }
        let unchanged = match (&self.running, &wanted) {
            (Some(r), Some((site, settings))) => &r.site == site && &r.settings == settings,
            (None, None) => true,
            _ => false,
        };
        if unchanged {
            Want::Same
        } else {
            Want::Change(wanted)
        }
    }

    /// Starts the prober `wanted` (or stops recording, for `None`), with what `old` (the
    /// stopped prober's settings and table) knew.
    fn start(
        &mut self,
        wanted: Option<(String, ProbeSettings)>,
        old: Option<&(ProbeSettings, RttHandle)>,
    ) {
        self.recorder.set_enabled(wanted.is_some());
        let Some((site, settings)) = wanted else {
            info!("RTT probing stopped");
            return;
        };
        match ProbeSupervisor::start_with_recorder(
            &site,
            settings.clone(),
            NetProber::default(),
            self.recorder.clone(),
        ) {
            Ok(supervisor) => {
                let handle = supervisor.handle();
                if let Some((old_settings, old_handle)) = old {
                    let same_rows = old_settings.mask == settings.mask;
                    carry_over(old_handle, &handle, &self.recorder, same_rows);
                }
                info!(
                    site,
                    order = ?settings.order.iter().map(|k| k.name()).collect::<Vec<_>>(),
                    interval_ms = settings.interval.as_millis() as u64,
                    timeout_ms = settings.timeout.as_millis() as u64,
                    tolerance_ms = settings.tolerance.as_millis() as u64,
                    ldns_timeout_s = settings.ldns_timeout.as_secs(),
                    mask_v4 = settings.mask.v4,
                    mask_v6 = settings.mask.v6,
                    restarted = old.is_some(),
                    "RTT probing started"
                );
                self.version = Some(handle.watch());
                self.running = Some(Running {
                    site,
                    settings,
                    supervisor,
                });
            }
            // The configuration was validated with the same check: not expected.
            Err(reason) => error!(%reason, "RTT probing not started"),
        }
    }

    /// Resolves when the RTT table changed since the last call; never while nothing probes.
    pub async fn changed(&mut self) {
        match &mut self.version {
            Some(version) => {
                if version.changed().await.is_err() {
                    // The prober is gone (only when replaced, which resets this): stay quiet.
                    self.version = None;
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending().await,
        }
    }

    /// Stops the prober and the feed. Call it after the fast path is detached: this closes
    /// the `LDNS` map, which the program's reload on detach needs open.
    pub async fn shutdown(mut self) {
        if let Some(running) = self.running.take() {
            running.supervisor.shutdown().await;
        }
        if let Some((settings, task)) = self.feed.take() {
            // Without a sender the feed ends, and its task closes the map.
            drop(settings);
            let () = task.await;
        }
    }
}

fn feed_settings(config: &Config) -> XdpFeedSettings {
    XdpFeedSettings {
        enabled: config.rtt_probing(),
        mask: config.rtt.probe.mask,
        ldns_timeout: config.rtt.probe.ldns_timeout,
    }
}

/// How the fast path records resolvers, for [`run_xdp_feed_with`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpFeedSettings {
    /// Off: the program records nothing and the map is not scanned.
    pub enabled: bool,
    /// The prober's mask, so that both group alike.
    pub mask: LdnsMask,
    pub ldns_timeout: Duration,
}

/// Feeds the fast path's `LDNS` map to `recorder`: sets the map's LDNS mask to `mask` (the
/// prober's, so that both group alike), then scans it every `every` (about a second: each
/// scan also starts a new epoch, see `gslb_common::LdnsConfig`, and deletes the entries idle
/// longer than `ldns_timeout`), on a blocking thread. Runs until a map error, which it returns.
pub async fn run_xdp_feed(
    map: LdnsMap,
    recorder: LdnsRecorder,
    mask: LdnsMask,
    ldns_timeout: Duration,
    every: Duration,
) -> Result<(), DataplaneError> {
    // Held here, so that the settings never read as closed.
    let (_settings, watched) = watch::channel(XdpFeedSettings {
        enabled: true,
        mask,
        ldns_timeout,
    });
    run_xdp_feed_with(map, recorder, watched, every).await.1
}

/// [`run_xdp_feed`] with settings that may change (gslbd's reloads): a new mask or timeout
/// applies from the next scan; `enabled: false` turns the program's recording off. Ends with
/// `Ok` when the settings' sender is dropped, or at the first map error; either way it gives
/// the map back, for its owner to close when it chooses (the `Dataplane` reloads its program
/// on detach, which needs the fd of every map the program uses still open).
pub async fn run_xdp_feed_with(
    mut map: LdnsMap,
    recorder: LdnsRecorder,
    mut settings: watch::Receiver<XdpFeedSettings>,
    every: Duration,
) -> (LdnsMap, Result<(), DataplaneError>) {
    let mut current = *settings.borrow_and_update();
    if let Err(error) = apply_feed_settings(&mut map, &current) {
        return (map, Err(error));
    }
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            changed = settings.changed() => {
                if changed.is_err() {
                    return (map, Ok(()));
                }
                let new = *settings.borrow_and_update();
                if new != current {
                    if let Err(error) = apply_feed_settings(&mut map, &new) {
                        return (map, Err(error));
                    }
                    current = new;
                }
                continue;
            }
            _ = ticker.tick(), if current.enabled => {}
        }
        let ldns_timeout = current.ldns_timeout;
        let (back, scan) = tokio::task::spawn_blocking(move || {
            let scan = map.scan(ldns_timeout);
            (map, scan)
        })
        .await
        .expect("the LDNS scan does not panic");
        map = back;
        match scan {
            Ok(scan) => {
                if scan.expired > 0 {
                    debug!(
                        expired = scan.expired,
                        active = scan.seen.len(),
                        "LDNS map scanned"
                    );
                }
                recorder.record_scan(&scan);
            }
            Err(error) => {
                warn!(error = %error, "reading the fast path's LDNS map failed");
                return (map, Err(error));
            }
        }
    }
}

fn apply_feed_settings(
    map: &mut LdnsMap,
    settings: &XdpFeedSettings,
) -> Result<(), DataplaneError> {
    map.set_masks(settings.mask.v4, settings.mask.v6)?;
    map.set_enabled(settings.enabled)
}

/// A scan of the fast path's map, as the recorder takes it.
impl Sightings for LdnsScan {
    fn sightings(&self) -> impl Iterator<Item = (IpAddr, Duration)> + '_ {
        self.seen.iter().map(|seen| (seen.addr, seen.idle))
    }
}

/// What a replaced prober knew that the new one can use: the resolvers (recorded again, at the
/// time of their last query, so that they expire as they would have) and, when rows are keyed
/// alike (`same_rows`), the table. The old local column becomes the new one only when the site
/// is the same: measured from here, it is not another site's.
fn carry_over(old: &RttHandle, new: &RttHandle, recorder: &LdnsRecorder, same_rows: bool) {
    let now = Instant::now();
    let (old_site, new_site) = (old.local_site(), new.local_site());
    let mut columns: std::collections::BTreeMap<String, Vec<RttRow>> =
        std::collections::BTreeMap::default();
    for report in old.report() {
        if let (Some(addr), Some(idle)) = (report.address, report.idle) {
            recorder.record_at(addr, now.checked_sub(idle).unwrap_or(now));
        }
        if !same_rows {
            continue;
        }
        // A resolver the new `[rtt] deny` refuses keeps no local row: it has no entry to
        // expire with. (Peers' rows are theirs.)
        let admitted = recorder
            .filter()
            .check(report.address.unwrap_or(report.ldns))
            .is_ok();
        for path in report
            .paths
            .iter()
            .filter(|p| admitted || p.site != old_site)
        {
            let row = RttRow {
                ldns: report.ldns,
                rtt: Some(path.rtt),
                kind: path.kind,
            };
            columns.entry(path.site.clone()).or_default().push(row);
        }
    }
    for (site, rows) in columns {
        if site == old_site {
            if site == new_site {
                new.restore_local(&rows);
            }
        } else {
            new.merge_remote(&site, &rows);
        }
    }
}
