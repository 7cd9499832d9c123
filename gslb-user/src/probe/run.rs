//! The prober's task: every tick, take in the recorded resolvers, expire idle entries and start
//! the rounds that are due (protected entries first, within the concurrency cap); apply rounds
//! as they finish. Each step holds the LDNS table's lock for a bounded batch and the RTT
//! table's for one cell at a time (see the module documentation of [`super`]).

use std::{collections::HashMap, net::IpAddr, sync::Arc, time::Duration};

use tokio::{sync::Semaphore, task::JoinSet, time::Instant};
use tracing::{debug, info, warn};

use crate::log_limit::LogLimiter;

use super::{
    ProberState, RECORD_BATCH, lock,
    prober::{ProbeKind, ProbeOutcome, ProbeRound, Prober, probe_in_order},
    rtt::RttChange,
    table::Tier,
};

/// How often this host's own addresses are read again (an address added to an interface is
/// refused as a source from then on).
pub(super) const HOST_REFRESH: Duration = Duration::from_secs(10);

/// Repeated warnings (evictions, refused sources, failed rounds) at most this often.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Paces probes to a rate: each caller gets the next free slot, `1 / rate` after the previous.
/// Rounds of protected entries (resolvers that query us regularly) go first: their probe takes
/// the next priority slot, and pushes the shared queue back by one gap, so a flood of new
/// entries waiting for slots delays them by no more than the other protected probes, and the
/// rate holds over time (a priority probe may share an instant with one already queued).
struct Pacer {
    gap: Duration,
    /// (next shared slot, next priority slot)
    next: std::sync::Mutex<(Instant, Instant)>,
}

impl Pacer {
    /// `rate` per second (at least 1: [`super::ProbeSettings::validate`] refuses 0, and there
    /// is no unpaced mode).
    fn new(rate: u32) -> Self {
        let now = Instant::now();
        Pacer {
            gap: Duration::from_secs(1) / rate.max(1),
            next: std::sync::Mutex::new((now, now)),
        }
    }

    async fn wait(&self, priority: bool) {
        let gap = self.gap;
        let slot = {
            let mut next = lock(&self.next);
            let now = Instant::now();
            if priority {
                let slot = next.1.max(now);
                next.1 = slot + gap;
                next.0 = next.0.max(now) + gap;
                slot
            } else {
                let slot = next.0.max(now);
                next.0 = slot + gap;
                slot
            }
        };
        tokio::time::sleep_until(slot).await;
    }
}

/// A round's (group, target, start).
type RoundKey = (IpAddr, IpAddr, Instant);

/// The warnings a flood can repeat, each rate-limited.
struct Warnings {
    evicted: LogLimiter,
    refused: LogLimiter,
    failed: LogLimiter,
    host: LogLimiter,
    /// Counts at the last warning, to report what happened since.
    last_evicted: u64,
    last_refused: u64,
}

pub(super) async fn run<P: Prober>(shared: Arc<ProberState>, prober: Arc<P>) {
    let settings = shared.settings.clone();
    let recorder = shared.recorder.clone();
    let order: Arc<[ProbeKind]> = settings.order.clone().into();
    let pacer = Arc::new(Pacer::new(settings.max_rate));
    let slots = Arc::new(Semaphore::new(settings.max_concurrent));
    let mut rounds: JoinSet<(RoundKey, ProbeRound)> = JoinSet::new();
    // The round of each task, to reschedule it should the task fail (a panicking prober).
    let mut running: HashMap<tokio::task::Id, RoundKey> = HashMap::new();
    let mut ticker = tokio::time::interval(settings.tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut next_host_refresh = Instant::now() + HOST_REFRESH;
    let mut warnings = Warnings {
        evicted: LogLimiter::new(WARN_EVERY),
        refused: LogLimiter::new(WARN_EVERY),
        failed: LogLimiter::new(WARN_EVERY),
        host: LogLimiter::new(WARN_EVERY),
        last_evicted: 0,
        last_refused: 0,
    };
    loop {
        tokio::select! {
            Some(done) = rounds.join_next_with_id(), if !rounds.is_empty() => match done {
                Ok((id, (key, round))) => {
                    running.remove(&id);
                    finish_round(&shared, key, &round);
                }
                Err(error) => {
                    let key = running.remove(&error.id());
                    if let Some(suppressed) = warnings.failed.allow(Instant::now()) {
                        warn!(ldns = ?key.map(|k| k.0), %error, suppressed, "probe round failed");
                    }
                    if let Some((group, target, started)) = key {
                        shared.ldns().finish(group, target, false, started, settings.interval);
                    }
                }
            },
            _ = ticker.tick() => {
                let now = Instant::now();
                if now >= next_host_refresh {
                    next_host_refresh = now + HOST_REFRESH;
                    if let Err(error) = recorder.filter().refresh_host_addresses()
                        && let Some(suppressed) = warnings.host.allow(now)
                    {
                        warn!(%error, suppressed, "reading this host's addresses failed; the last ones stay refused");
                    }
                }
                tick(&shared, &prober, &mut rounds, &mut running, &slots, &order, &pacer, now);
                warn_flood(&shared, &mut warnings, now);
            }
        }
    }
}

/// One tick: takes in what was recorded, expires, starts the due rounds and drops the RTT of
/// entries that left; the counters say what happened.
#[allow(clippy::too_many_arguments)]
fn tick<P: Prober>(
    shared: &Arc<ProberState>,
    prober: &Arc<P>,
    rounds: &mut JoinSet<(RoundKey, ProbeRound)>,
    running: &mut HashMap<tokio::task::Id, RoundKey>,
    slots: &Arc<Semaphore>,
    order: &Arc<[ProbeKind]>,
    pacer: &Arc<Pacer>,
    now: Instant,
) {
    let settings = &shared.settings;
    let recorder = &shared.recorder;
    let recorded = recorder.drain();
    for batch in recorded.chunks(RECORD_BATCH) {
        let mut ldns = shared.ldns();
        for &(addr, at) in batch {
            if let Some(group) = ldns.see(addr, at) {
                debug!(ldns = %group, %addr, "new LDNS entry");
            }
        }
    }
    let mut refused = 0;
    let (removed, table_stats, entries) = {
        let mut ldns = shared.ldns();
        ldns.expire(now);
        // Protected entries first: a flood of one-time sources waits behind the resolvers
        // that query us regularly. At most one round per free slot, so the hold is bounded.
        'tiers: for tier in [Tier::Protected, Tier::Probation] {
            while ldns.has_due(tier, now) {
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    break 'tiers;
                };
                let (group, target) = ldns.take_due(tier, now).expect("due");
                if recorder.filter().check(target).is_err() {
                    ldns.drop_entry(group);
                    refused += 1;
                    continue;
                }
                let (prober, order, pacer) = (prober.clone(), order.clone(), pacer.clone());
                let counting = shared.stats.clone();
                let timeout = settings.timeout;
                let key = (group, target, now);
                let priority = tier == Tier::Protected;
                let handle = rounds.spawn(async move {
                    let round = probe_in_order(&*prober, &order, target, timeout, || {
                        lock(&counting).probes += 1;
                        let pacer = pacer.clone();
                        async move { pacer.wait(priority).await }
                    })
                    .await;
                    drop(permit);
                    (key, round)
                });
                running.insert(handle.id(), key);
            }
        }
        (ldns.take_removed(), ldns.stats(), ldns.len())
    };
    let changes: Vec<RttChange> = removed
        .iter()
        .filter_map(|&group| {
            debug!(ldns = %group, "LDNS entry removed");
            shared.rtt().remove_local(group)
        })
        .collect();
    {
        let mut stats = lock(&shared.stats);
        let in_flight = settings.max_concurrent - slots.available_permits();
        stats.max_in_flight = stats.max_in_flight.max(in_flight);
        stats.expired = table_stats.expired;
        stats.evicted = table_stats.evicted;
        stats.backoffs = table_stats.backoffs;
        stats.held = table_stats.held;
        stats.tick_work = table_stats.work;
        stats.refused_at_probe += refused;
        stats.ldns_entries = entries;
    }
    shared.publish(changes);
}

fn finish_round(shared: &ProberState, (group, target, started): RoundKey, round: &ProbeRound) {
    let now = Instant::now();
    let answered = round.sample.is_some();
    let local_errors = round
        .tried
        .iter()
        .filter(|(_, outcome)| matches!(outcome, ProbeOutcome::Failed(_)))
        .count() as u64;
    {
        let mut stats = lock(&shared.stats);
        stats.rounds += 1;
        stats.samples += u64::from(answered);
        stats.local_errors += local_errors;
    }
    match round.sample {
        Some(sample) => {
            debug!(ldns = %group, %target, kind = %sample.kind, rtt = ?sample.rtt, "RTT sample");
        }
        None => debug!(ldns = %group, %target, tried = ?round.tried, "no reply to any probe"),
    }
    // The entry may have gone meanwhile (expired, evicted): then the sample is dropped.
    let interval = shared.settings.interval;
    if !shared
        .ldns()
        .finish(group, target, answered, started, interval)
    {
        return;
    }
    let change = shared.rtt().record_local(group, round.sample, now);
    if let Some(change) = &change {
        debug!(ldns = %change.ldns, rtt = ?change.rtt, kind = ?change.kind, "local RTT stored");
    }
    shared.publish(change.into_iter().collect());
}

/// Rate-limited warnings for what a flood of spoofed sources causes: evictions from a full
/// table and refused sources (the counters have every one).
fn warn_flood(shared: &ProberState, warnings: &mut Warnings, now: Instant) {
    let stats = *lock(&shared.stats);
    if stats.evicted > warnings.last_evicted && warnings.evicted.allow(now).is_some() {
        warn!(
            evicted = stats.evicted - warnings.last_evicted,
            max_ldns = shared.settings.max_ldns,
            "LDNS table full: least recently seen entries evicted (a flood of new sources?)"
        );
        warnings.last_evicted = stats.evicted;
    }
    let r = shared.recorder.stats();
    let refused = r.denied + r.martian + r.own;
    if refused > warnings.last_refused && warnings.refused.allow(now).is_some() {
        info!(
            denied = r.denied,
            martian = r.martian,
            own = r.own,
            "query sources refused as LDNS (spoofable or denied; totals so far)"
        );
        warnings.last_refused = refused;
    }
}
