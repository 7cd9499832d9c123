//! Dynamic RTT: this site probes the local DNS servers (LDNS) that query us and keeps the
//! round-trip times in a table per (LDNS, site), for the RTT load-balancing method.
//!
//! - **Which resolvers.** Only those that queried us: the fast path records sources in its
//!   `LDNS` map, which gslbd's daemon scans and feeds to [`LdnsRecorder::record_scan`] (any
//!   [`Sightings`]: this module knows no map), and the responder calls
//!   [`LdnsRecorder::record`]. An optional LDNS mask groups resolvers into one entry, probed
//!   at the first address seen. Entries without a query for the LDNS timeout (180 s) expire,
//!   and this site's RTT for them goes too.
//! - **Which sources** ([`admit`]): a source that can only be claimed (loopback, unspecified,
//!   link-local, multicast, broadcast, this host's own addresses) or is in `[rtt] deny` is
//!   never recorded, by the recorder itself (so neither the responder nor the fast-path feed
//!   can add it), and is checked again before a round starts. `[rtt] allow` admits listed
//!   prefixes the martian rule would refuse; deny always wins.
//! - **Table** ([`table`]): bounded (`[rtt] max_ldns`), least recently seen out first (one-time
//!   sources before resolvers seen again), scheduled by due time, so a tick costs what is due;
//!   a target gets one round per interval at most, and rounds without an answer back off.
//! - **Probes** ([`prober`]): ICMP echo, DNS over UDP (`dns_dot`, `dns_rev`), TCP connect to
//!   port 53, in a configurable order (default ping, DNS, TCP): the next type only when the
//!   previous got no reply within the response timeout (2 s). Any reply is a sample. One round
//!   per target every interval (5 s), longer after rounds without an answer; a global rate
//!   limit paces the probes sent and a cap bounds the rounds running at once.
//! - **Table** ([`rtt`]): the local column from the probes, under the RTT tolerance (5 ms: a
//!   change within it is neither stored nor published); other sites' columns through
//!   [`RttHandle::merge_remote`] (MEP). Every change is broadcast as an [`RttChange`]
//!   ([`RttHandle::subscribe`], for MEP) and bumps a version ([`RttHandle::watch`], for the
//!   controller's republish); the table numbers each entry's last change, so that the
//!   controller reads only the entries changed since its last read ([`RttTable::changed_since`]).
//! - **Observability** ([`report`]): [`RttHandle::report`] and [`format_report`] (F5's `ldns`
//!   record fields: address, probe protocol, ttl, per site RTT, age, completion rate);
//!   [`RttHandle::stats`]. Logs per sample or entry are debug; warnings a flood can repeat
//!   are rate-limited ([`crate::log_limit`]).
//! - **Locks**: the LDNS table, the RTT table and the counters have a lock each. The RTT
//!   table's (what compile, MEP and the control socket read) is taken by the prober only for
//!   one cell at a time; the LDNS table's only for bounded batches (at most [`RECORD_BATCH`]
//!   sightings, or the rounds one tick starts).

pub mod admit;
pub mod ldns;
pub mod prober;
pub mod remote;
pub mod report;
pub mod rtt;
mod run;
pub mod table;

use std::{
    collections::BTreeMap,
    net::IpAddr,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use tokio::{
    sync::{broadcast, watch},
    time::Instant,
};
use tracing::debug;

pub use admit::{Refusal, SourceFilter, SourcePolicy, host_addresses, is_martian};
pub use ldns::{DEFAULT_LDNS_TIMEOUT, LdnsMask, LdnsRecorder, RecordStats, Sightings};
pub use prober::{
    DEFAULT_ORDER, NetProber, ProbeKind, ProbeOutcome, ProbeRound, Prober, Sample,
    UnknownProbeKind, probe_in_order,
};
pub use remote::RemoteColumns;
pub use report::{LdnsReport, PathReport, format_report};
pub use rtt::{DEFAULT_TOLERANCE, RttCell, RttChange, RttRow, RttTable, RttVersion};
pub use table::{DEFAULT_MAX_LDNS, LdnsEntry, LdnsTable, TableStats, Tier};

/// Changes kept for a subscriber that does not keep up; older ones are dropped for it.
const CHANGE_BACKLOG: usize = 4096;

/// Recorded sightings taken into the LDNS table per hold of its lock.
pub const RECORD_BATCH: usize = 1024;

/// Probing settings; the defaults are NetScaler's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSettings {
    /// Probe types in the order tried (NetScaler `ldnsprobeOrder`); at least one, no repeats.
    pub order: Vec<ProbeKind>,
    /// Time from the start of one round to an LDNS entry to the start of the next.
    pub interval: Duration,
    /// How long each probe waits for a reply before the next type is tried.
    pub timeout: Duration,
    /// RTT tolerance: a change within it is neither stored nor published.
    pub tolerance: Duration,
    /// LDNS entry timeout: entries without a query this long expire.
    pub ldns_timeout: Duration,
    pub mask: LdnsMask,
    /// Probes sent per second, over all entries and types (≥ 1: there is no "no limit").
    pub max_rate: u32,
    /// Probe rounds running at once, at most (≥ 1).
    pub max_concurrent: usize,
    /// How often recorded resolvers are taken in, entries expired and due rounds started.
    pub tick: Duration,
    /// LDNS entries kept at most (`[rtt] max_ldns`); more evict the least recently seen.
    pub max_ldns: usize,
    /// Sources never recorded (`[rtt] deny`) and sources admitted despite the martian rule
    /// (`[rtt] allow`).
    pub sources: SourcePolicy,
}

impl Default for ProbeSettings {
    fn default() -> Self {
        ProbeSettings {
            order: DEFAULT_ORDER.to_vec(),
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            tolerance: DEFAULT_TOLERANCE,
            ldns_timeout: DEFAULT_LDNS_TIMEOUT,
            mask: LdnsMask::default(),
            max_rate: 200,
            max_concurrent: 256,
            tick: Duration::from_millis(100),
            max_ldns: DEFAULT_MAX_LDNS,
            sources: SourcePolicy::default(),
        }
    }
}

impl ProbeSettings {
    /// Why these settings cannot run, if they cannot.
    pub fn validate(&self) -> Result<(), ProbeSettingsError> {
        if self.order.is_empty() {
            return Err(ProbeSettingsError::EmptyOrder);
        }
        for (i, kind) in self.order.iter().enumerate() {
            if self.order[..i].contains(kind) {
                return Err(ProbeSettingsError::Repeated { kind: *kind });
            }
        }
        for (name, value) in [
            ("interval", self.interval),
            ("timeout", self.timeout),
            ("tick", self.tick),
        ] {
            if value.is_zero() {
                return Err(ProbeSettingsError::Zero { name });
            }
        }
        if self.max_concurrent == 0 {
            return Err(ProbeSettingsError::BelowOne {
                name: "max_concurrent",
            });
        }
        if self.max_rate == 0 {
            return Err(ProbeSettingsError::BelowOne { name: "max_rate" });
        }
        if self.max_ldns == 0 {
            return Err(ProbeSettingsError::BelowOne { name: "max_ldns" });
        }
        if self.mask.v4 == 0 || self.mask.v4 > 32 || self.mask.v6 == 0 || self.mask.v6 > 128 {
            return Err(ProbeSettingsError::MaskOutOfRange {
                v4: self.mask.v4,
                v6: self.mask.v6,
            });
        }
        Ok(())
    }
}

/// Why [`ProbeSettings`] cannot run ([`ProbeSettings::validate`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeSettingsError {
    #[error("the probe order is empty")]
    EmptyOrder,
    #[error("probe type {kind} is listed twice")]
    Repeated { kind: ProbeKind },
    #[error("{name} must be more than 0")]
    Zero { name: &'static str },
    #[error("{name} must be at least 1")]
    BelowOne { name: &'static str },
    #[error("LDNS mask /{v4} /{v6} out of range 1..=32, 1..=128")]
    MaskOutOfRange { v4: u8, v6: u8 },
}

/// Counters of the prober, for logs and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeStats {
    /// Probe rounds finished.
    pub rounds: u64,
    /// Rounds with a sample.
    pub samples: u64,
    /// Probes sent (each type tried counts).
    pub probes: u64,
    /// Probes that failed here, never a sample: not sent (no ICMP socket, a prohibited route,
    /// a send refused), or answered by this host itself (an ICMP error from one of its
    /// addresses: a local firewall's REJECT).
    pub local_errors: u64,
    /// Most rounds seen running at once.
    pub max_in_flight: usize,
    /// LDNS entries expired.
    pub expired: u64,
    /// LDNS entries evicted (the table was full: `max_ldns`).
    pub evicted: u64,
    /// Rounds without an answer (each backs the next one off).
    pub backoffs: u64,
    /// Entries that came back (after eviction or expiry) before their target's budget allowed
    /// another round: held back until it did.
    pub held: u64,
    /// Due rounds not started: the target had become refused (e.g. one of our addresses).
    pub refused_at_probe: u64,
    /// LDNS entries now.
    pub ldns_entries: usize,
    /// Entries visited by the ticks so far (the per-tick work).
    pub tick_work: u64,
    /// Sources the recorder refused or dropped.
    pub recorded: RecordStats,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The prober's tables and counters, shared by its task, the recorder and the handles.
struct ProberState {
    settings: ProbeSettings,
    /// Written by the prober's task alone, in bounded batches; read by the dump.
    ldns: Mutex<LdnsTable>,
    /// What the republish path reads; held for one cell at a time by the prober.
    rtt: Mutex<RttTable>,
    /// Its own `Arc`: a probe round counts its probes here and holds nothing else of the
    /// state, so a round still being torn down after its run was aborted (the abort of a
    /// task on another worker completes later) keeps no table alive.
    stats: Arc<Mutex<ProbeStats>>,
    recorder: LdnsRecorder,
    changes: broadcast::Sender<RttChange>,
    version: watch::Sender<u64>,
}

impl ProberState {
    fn rtt(&self) -> MutexGuard<'_, RttTable> {
        lock(&self.rtt)
    }

    fn ldns(&self) -> MutexGuard<'_, LdnsTable> {
        lock(&self.ldns)
    }

    /// Publishes changes made under the lock just released.
    fn publish(&self, changes: Vec<RttChange>) {
        if changes.is_empty() {
            return;
        }
        for change in changes {
            let (ldns, site, rtt, kind) = (change.ldns, &change.site, change.rtt, change.kind);
            debug!(%ldns, %site, ?rtt, ?kind, "RTT changed");
            // No receiver is fine; a lagging one loses the oldest changes.
            let _ = self.changes.send(change);
        }
        self.version.send_modify(|v| *v += 1);
    }
}

/// The RTT table and the LDNS entries, shared: for the controller (lookups, republish on
/// change), MEP (merge peers' columns, send ours) and the CLI (dump). Cheap to clone.
#[derive(Clone)]
pub struct RttHandle {
    shared: Arc<ProberState>,
}

impl RttHandle {
    /// The RTT of every site that has one to the resolver `client` (masked to its LDNS entry),
    /// lowest first. Empty: no RTT yet (the next method of the chain answers).
    pub fn rtts(&self, client: IpAddr) -> Vec<(String, Duration)> {
        let group = self.shared.settings.mask.group(client);
        self.shared.rtt().rtts(group)
    }

    /// The site whose column this prober fills.
    pub fn local_site(&self) -> String {
        self.shared.rtt().local_site().to_owned()
    }

    /// The LDNS entry (group address) a resolver belongs to.
    pub fn group(&self, client: IpAddr) -> IpAddr {
        self.shared.settings.mask.group(client)
    }

    /// Every (LDNS entry, site) RTT.
    pub fn to_map(&self) -> BTreeMap<IpAddr, BTreeMap<String, Duration>> {
        self.shared.rtt().to_map()
    }

    /// `f` of the table, under its lock (the prober waits meanwhile): the controller reads
    /// the entries that changed since its last read ([`RttTable::changed_since`]), or all of
    /// them, without copying the table first.
    pub fn read<R>(&self, f: impl FnOnce(&RttTable) -> R) -> R {
        f(&self.shared.rtt())
    }

    /// Another site's rows, received over MEP (`rtt: None` removes a cell).
    pub fn merge_remote(&self, site: &str, rows: &[RttRow]) {
        let changes = self.shared.rtt().merge_remote(site, rows, Instant::now());
        self.shared.publish(changes);
    }

    /// A sample of this site's prober for the entry `ldns`, as its run stores one: for tests
    /// of what reads the table.
    #[cfg(test)]
    pub(crate) fn record_local(&self, ldns: IpAddr, sample: Sample) {
        let change = self
            .shared
            .rtt()
            .record_local(ldns, Some(sample), Instant::now());
        self.shared.publish(change.into_iter().collect());
    }

    /// This site's column as a previous prober of this site measured it (see
    /// [`RttTable::restore_local`]).
    pub fn restore_local(&self, rows: &[RttRow]) {
        let changes = self.shared.rtt().restore_local(rows, Instant::now());
        self.shared.publish(changes);
    }

    /// Drops a peer's column (the site left, or MEP to it is down for good).
    pub fn forget_site(&self, site: &str) {
        let changes = self.shared.rtt().forget_site(site);
        self.shared.publish(changes);
    }

    /// This site's column, for a peer that (re)connects.
    pub fn local_column(&self) -> Vec<RttRow> {
        self.shared.rtt().local_column()
    }

    /// Every change from now on (MEP sends the local site's to peers).
    pub fn subscribe(&self) -> broadcast::Receiver<RttChange> {
        self.shared.changes.subscribe()
    }

    /// A version bumped on every batch of changes (the controller republishes when it moves).
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.shared.version.subscribe()
    }

    /// The LDNS entries and their RTTs, for the CLI ([`format_report`] makes it text).
    pub fn report(&self) -> Vec<LdnsReport> {
        // The only walk of the LDNS table, on request (gslbctl ldns, a prober's restart).
        let ldns = self.shared.ldns();
        let settings = &self.shared.settings;
        report::report(
            ldns.iter(),
            settings.mask,
            settings.ldns_timeout,
            &self.shared.rtt(),
            Instant::now(),
        )
    }

    /// The LDNS entry of `client`, if it queried us.
    pub fn ldns_entry(&self, client: IpAddr) -> Option<LdnsEntry> {
        self.shared.ldns().lookup(client).cloned()
    }

    pub fn stats(&self) -> ProbeStats {
        let mut stats = *lock(&self.shared.stats);
        stats.recorded = self.shared.recorder.stats();
        stats
    }

    /// Rows of the RTT table (LDNS entries with an RTT from some site).
    pub fn rtt_rows(&self) -> usize {
        self.shared.rtt().len()
    }

    pub fn settings(&self) -> &ProbeSettings {
        &self.shared.settings
    }
}

/// Probes the LDNS entries recorded through its [`LdnsRecorder`]; see the module
/// documentation. Dropping it stops probing.
pub struct ProbeSupervisor {
    handle: RttHandle,
    recorder: LdnsRecorder,
    /// Taken by [`ProbeSupervisor::shutdown`]; dropped (and so aborted) with the supervisor.
    task: Option<crate::supervise::Supervised>,
}

impl ProbeSupervisor {
    /// Starts probing as `local_site` (the column this site fills). Needs a tokio runtime; the
    /// probes' sockets are made on its threads (in their network namespace).
    pub fn start<P: Prober>(
        local_site: &str,
        settings: ProbeSettings,
        prober: P,
    ) -> Result<Self, ProbeSettingsError> {
        Self::start_with_recorder(local_site, settings, prober, LdnsRecorder::new())
    }

    /// [`ProbeSupervisor::start`], taking the resolvers from `recorder`: one that outlives
    /// this supervisor (gslbd's responder loops and fast-path feed keep theirs when the
    /// settings change and the supervisor is replaced).
    pub fn start_with_recorder<P: Prober>(
        local_site: &str,
        settings: ProbeSettings,
        prober: P,
        recorder: LdnsRecorder,
    ) -> Result<Self, ProbeSettingsError> {
        settings.validate()?;
        recorder.filter().set_policy(settings.sources.clone());
        let (changes, _) = broadcast::channel(CHANGE_BACKLOG);
        let (version, _) = watch::channel(0);
        let shared = Arc::new(ProberState {
            ldns: Mutex::new(LdnsTable::with_capacity(
                settings.mask,
                settings.ldns_timeout,
                settings.max_ldns,
            )),
            rtt: Mutex::new(RttTable::new(local_site, settings.tolerance)),
            stats: Arc::default(),
            recorder: recorder.clone(),
            settings,
            changes,
            version,
        });
        let task = crate::supervise::spawn(format!("rtt-prober/{local_site}"), {
            let (shared, prober) = (shared.clone(), Arc::new(prober));
            move |_| run::run(shared.clone(), prober.clone())
        });
        Ok(ProbeSupervisor {
            handle: RttHandle { shared },
            recorder,
            task: Some(task),
        })
    }

    /// Where resolvers are recorded (clone it for the responder and the fast-path feed).
    pub fn recorder(&self) -> LdnsRecorder {
        self.recorder.clone()
    }

    pub fn handle(&self) -> RttHandle {
        self.handle.clone()
    }

    /// Stops probing (rounds running are abandoned). When this returns, the prober's run has
    /// ended and takes nothing more from the recorder: a successor on the same recorder gets
    /// every resolver recorded from then on. (Dropping the supervisor aborts the run too, but
    /// a run in the middle of a poll on another worker finishes that poll first.)
    pub async fn shutdown(mut self) {
        if let Some(task) = self.task.take() {
            task.stop().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the republish path reads (compile: `to_map`; MEP: `merge_remote`,
    /// `local_column`; control: `stats`, `rtt_rows`) never waits for the LDNS table's lock,
    /// which the prober's tick holds while it takes in sightings and starts rounds.
    #[tokio::test]
    async fn the_republish_path_does_not_wait_for_the_ldns_tables_lock() {
        let supervisor =
            ProbeSupervisor::start("east", ProbeSettings::default(), NetProber::default()).unwrap();
        let handle = supervisor.handle();
        let held = handle.shared.ldns();
        let (done, finished) = std::sync::mpsc::channel();
        let reader = handle.clone();
        std::thread::spawn(move || {
            let row = RttRow {
                ldns: "198.51.100.7".parse().unwrap(),
                rtt: Some(Duration::from_millis(7)),
                kind: Some(ProbeKind::Icmp),
            };
            reader.merge_remote("west", &[row]);
            let map = reader.to_map();
            let _ = (reader.local_column(), reader.stats(), reader.rtt_rows());
            done.send(map.len()).unwrap();
        });
        let rows = finished
            .recv_timeout(Duration::from_secs(10))
            .expect("the republish path ran while the LDNS table was locked");
        assert_eq!(rows, 1);
        drop(held);
    }

    /// Never answers: every round waits until it is ended from outside.
    struct Hung;

    impl Prober for Hung {
        fn probe(
            &self,
            _: ProbeKind,
            _: IpAddr,
            _: Duration,
        ) -> impl Future<Output = ProbeOutcome> + Send {
            std::future::pending()
        }
    }

    /// gslbd's restart of the prober (`daemon::rtt`) relies on this: once `shutdown` returns,
    /// the old run has ended, so it takes no more resolvers from the recorder the new one
    /// shares. (Aborting alone returned while the run still held its state, on another
    /// worker, and could still drain the recorder: a resolver carried over was lost.) The
    /// prober never answers, so a round is still in flight when the run is stopped: the
    /// aborted round may outlive `shutdown` briefly, and must not keep the state alive.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_shut_down_prober_has_ended_and_takes_nothing_more() {
        let recorder = LdnsRecorder::new();
        let supervisor = ProbeSupervisor::start_with_recorder(
            "east",
            ProbeSettings::default(),
            Hung,
            recorder.clone(),
        )
        .unwrap();
        let handle = supervisor.handle();
        let first: IpAddr = "192.0.2.7".parse().unwrap();
        recorder.record(first);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while handle.report().is_empty() {
            assert!(std::time::Instant::now() < deadline, "never took {first}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        supervisor.shutdown().await;
        assert_eq!(
            Arc::strong_count(&handle.shared),
            1,
            "the run still holds the prober's state after shutdown returned"
        );
        let second: IpAddr = "192.0.2.8".parse().unwrap();
        recorder.record(second);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let left: Vec<IpAddr> = recorder.drain().into_iter().map(|(a, _)| a).collect();
        assert_eq!(left, [second], "left in the recorder for a successor");
    }

    #[test]
    fn settings_are_validated() {
        let ok = ProbeSettings::default();
        assert_eq!(ok.validate(), Ok(()));
        let cases: Vec<(ProbeSettings, &str)> = vec![
            (
                ProbeSettings {
                    order: vec![],
                    ..ok.clone()
                },
                "the probe order is empty",
            ),
            (
                ProbeSettings {
                    order: vec![ProbeKind::Tcp, ProbeKind::Icmp, ProbeKind::Tcp],
                    ..ok.clone()
                },
                "probe type tcp is listed twice",
            ),
            (
                ProbeSettings {
                    interval: Duration::ZERO,
                    ..ok.clone()
                },
                "interval must be more than 0",
            ),
            (
                ProbeSettings {
                    timeout: Duration::ZERO,
                    ..ok.clone()
                },
                "timeout must be more than 0",
            ),
            (
                ProbeSettings {
                    max_concurrent: 0,
                    ..ok.clone()
                },
                "max_concurrent must be at least 1",
            ),
            (
                ProbeSettings {
                    max_rate: 0,
                    ..ok.clone()
                },
                "max_rate must be at least 1",
            ),
            (
                ProbeSettings {
                    mask: LdnsMask { v4: 33, v6: 128 },
                    ..ok.clone()
                },
                "LDNS mask /33 /128 out of range",
            ),
            (
                ProbeSettings {
                    mask: LdnsMask { v4: 24, v6: 0 },
                    ..ok.clone()
                },
                "LDNS mask /24 /0 out of range",
            ),
        ];
        for (settings, want) in cases {
            let err = settings.validate().unwrap_err().to_string();
            assert!(err.contains(want), "{err:?} should contain {want:?}");
        }
    }
}
