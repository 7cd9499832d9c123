//! The controller's heartbeat into the fast path (`server.stale_after_s`): beats every quarter
//! of the bound, so only a gslbd that is gone (or stuck for most of the bound) lets the fast
//! path go stale and pass everything.

use std::time::Duration;

use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::dataplane::HeartbeatMap;

/// Beats at least this often, whatever the bound (a short bound in tests).
const MIN_PERIOD: Duration = Duration::from_millis(100);

/// How often to beat for `stale_after`: four beats per bound, so that a late tick or two
/// never lets the fast path go stale under a live gslbd.
pub fn period(stale_after: Duration) -> Duration {
    (stale_after / 4).max(MIN_PERIOD)
}

/// Writes the first beat now (before any packet can see a stale map) and, with a bound,
/// spawns the task that keeps beating. `None`: the fast path is told it never goes stale.
pub fn start(mut map: HeartbeatMap, stale_after: Option<Duration>) -> Option<JoinHandle<()>> {
    if let Err(error) = map.beat(stale_after) {
        warn!(error = %error, "first heartbeat not written");
    }
    let stale_after = stale_after?;
    let every = period(stale_after);
    info!(
        stale_after_s = stale_after.as_secs(),
        every_ms = every.as_millis() as u64,
        "fast path heartbeat"
    );
    Some(tokio::spawn(run(map, stale_after, every)))
}

async fn run(mut map: HeartbeatMap, stale_after: Duration, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // One warning per run of failures, not one per beat.
    let mut failing = false;
    loop {
        tick.tick().await;
        match map.beat(Some(stale_after)) {
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
    fn four_beats_per_bound_and_never_too_fast() {
        assert_eq!(period(Duration::from_secs(60)), Duration::from_secs(15));
        assert_eq!(period(Duration::from_secs(3)), Duration::from_millis(750));
        assert_eq!(period(Duration::from_millis(200)), MIN_PERIOD);
    }
}
