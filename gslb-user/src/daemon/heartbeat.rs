//! The controller's heartbeat into the fast path (`server.stale_after_s`): beats every quarter
//! of the bound, so only a gslbd that is gone (or stuck for most of the bound) lets the fast
//! path go stale and pass everything. Without a bound it still beats, less often: each beat
//! carries the wall clock's offset, which the fast path's DNS cookies are stamped by.

use std::time::Duration;

use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::dataplane::HeartbeatMap;

/// Beats at least this often, whatever the bound (a short bound in tests).
const MIN_PERIOD: Duration = Duration::from_millis(100);
/// How often to beat without a bound: a step of the wall clock reaches the fast path's
/// cookie timestamps within this (they are valid for minutes either way).
const CLOCK_PERIOD: Duration = Duration::from_secs(10);

/// How often to beat for `stale_after`: four beats per bound, so that a late tick or two
/// never lets the fast path go stale under a live gslbd.
pub fn period(stale_after: Option<Duration>) -> Duration {
    stale_after.map_or(CLOCK_PERIOD, |bound| {
        (bound / 4).clamp(MIN_PERIOD, CLOCK_PERIOD)
    })
}

/// Writes the first beat now (before any packet can see a stale map) and spawns the task that
/// keeps beating. `None`: the fast path is told it never goes stale.
pub fn start(mut map: HeartbeatMap, stale_after: Option<Duration>) -> JoinHandle<()> {
    if let Err(error) = map.beat(stale_after) {
        warn!(error = %error, "first heartbeat not written");
    }
    let every = period(stale_after);
    info!(
        stale_after_s = stale_after.map(|d| d.as_secs()),
        every_ms = every.as_millis() as u64,
        "fast path heartbeat"
    );
    tokio::spawn(run(map, stale_after, every))
}

async fn run(mut map: HeartbeatMap, stale_after: Option<Duration>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // One warning per run of failures, not one per beat.
    let mut failing = false;
    loop {
        tick.tick().await;
        match map.beat(stale_after) {
            Ok(()) if failing => {
                info!("heartbeat written again");
                failing = false;
            }
            Ok(()) => {}
            Err(error) if !failing => {
                warn!(error = %error, "heartbeat not written; the fast path goes stale if this lasts");
                failing = true;
            }
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_beats_per_bound_and_never_too_fast_or_too_slow() {
        let p = |ms| period(Some(Duration::from_millis(ms)));
        assert_eq!(p(20_000), Duration::from_secs(5));
        assert_eq!(p(3_000), Duration::from_millis(750));
        assert_eq!(p(200), MIN_PERIOD);
        // A long bound, or none, still beats for the clock.
        assert_eq!(p(600_000), CLOCK_PERIOD);
        assert_eq!(period(None), CLOCK_PERIOD);
    }
}
