//! When paced changes republish the answers: RTT changes, health changes and loads each have a
//! pacer, so that a burst of changes costs one or two republishes, not one each.

use std::time::Duration;

use tokio::time::Instant;

/// How long the first RTT change waits for the rest of its burst (a round of probes finishing,
/// a peer's column arriving) before a republish.
const RTT_SETTLE: Duration = Duration::from_millis(100);
/// RTT-driven republishes are at least this far apart (a change of existing entries' RTTs
/// costs only their rows, but a new or gone entry reads every row and rebuilds the partition).
const RTT_REPUBLISH_GAP: Duration = Duration::from_secs(1);

/// When changes republish the answers: `settle` after the first change of a burst, and no
/// sooner than `gap` after the last republish (of any trigger: each compiles the state as it is
/// then). RTT changes: [`RTT_SETTLE`] and [`RTT_REPUBLISH_GAP`]; health changes: at once, and
/// at most one republish a [`HEALTH_REPUBLISH_GAP`], so a burst costs two republishes at most.
#[derive(Debug)]
pub(crate) struct RepublishPacer {
    due: Option<Instant>,
    last: Instant,
    settle: Duration,
    gap: Duration,
}

/// Health changes closer together than this share a republish.
const HEALTH_REPUBLISH_GAP: Duration = Duration::from_millis(50);

impl RepublishPacer {
    /// The RTT table's pacer.
    pub(crate) fn rtt(now: Instant) -> Self {
        RepublishPacer::with(now, RTT_SETTLE, RTT_REPUBLISH_GAP)
    }

    /// The health monitors' pacer: at once after a quiet spell.
    pub(crate) fn health(now: Instant) -> Self {
        RepublishPacer::with(now, Duration::ZERO, HEALTH_REPUBLISH_GAP)
    }

    pub(crate) fn with(now: Instant, settle: Duration, gap: Duration) -> Self {
        RepublishPacer {
            due: None,
            last: now,
            settle,
            gap,
        }
    }

    /// A change at `now`.
    pub(crate) fn changed(&mut self, now: Instant) {
        if self.due.is_none() {
            self.due = Some((now + self.settle).max(self.last + self.gap));
        }
    }

    /// When to republish for the changes so far; `None`: nothing pending.
    pub(crate) fn due(&self) -> Option<Instant> {
        self.due
    }

    /// The answers were republished at `now`, from the table as it was then.
    pub(crate) fn republished(&mut self, now: Instant) {
        self.due = None;
        self.last = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtt_changes_republish_once_per_burst_and_at_most_once_a_gap() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // Republished at t0. (changes at, republished at, due after them)
        let table: [(&[u64], Option<u64>, Option<u64>); 5] = [
            // Within the gap of the last republish: at its end.
            (&[10], None, Some(1000)),
            // A burst: one republish, due from its first change.
            (&[10, 50, 900], None, Some(1000)),
            // Long after: the settle time.
            (&[5000, 5050], None, Some(5100)),
            // Another trigger republished meanwhile: nothing left pending.
            (&[10], Some(500), None),
            (&[], None, None),
        ];
        for (changes, republished, due) in table {
            let mut pacer = RepublishPacer::rtt(t0);
            for &at in changes {
                pacer.changed(t0 + ms(at));
            }
            if let Some(at) = republished {
                pacer.republished(t0 + ms(at));
            }
            assert_eq!(
                pacer.due(),
                due.map(|d| t0 + ms(d)),
                "{changes:?} {republished:?}"
            );
        }
        // After a republish the gap counts from it.
        let mut pacer = RepublishPacer::rtt(t0);
        pacer.republished(t0 + ms(3000));
        pacer.changed(t0 + ms(3200));
        assert_eq!(pacer.due(), Some(t0 + ms(4000)));
    }
}
