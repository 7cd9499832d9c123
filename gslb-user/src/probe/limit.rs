//! Rate-limited logging: a warning that an attacker (or a broken network) can repeat at will
//! is logged at most once per period, with how many were held back meanwhile.

use std::time::Duration;

use tokio::time::Instant;

/// At most one line per `every`; see the module documentation.
#[derive(Debug)]
pub struct LogLimiter {
    every: Duration,
    last: Option<Instant>,
    held: u64,
}

impl LogLimiter {
    pub const fn new(every: Duration) -> Self {
        LogLimiter {
            every,
            last: None,
            held: 0,
        }
    }

    /// An occurrence at `now`: `Some(n)` when it may be logged (`n` occurrences were held back
    /// since the last line), `None` when it is held back.
    pub fn allow(&mut self, now: Instant) -> Option<u64> {
        if self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) < self.every)
        {
            self.held += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.held))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_period_with_the_count_held_back() {
        let t0 = Instant::now();
        let mut limiter = LogLimiter::new(Duration::from_secs(60));
        let ms = |n: u64| t0 + Duration::from_millis(n);
        // (at, outcome)
        let steps = [
            (0, Some(0)),
            (1, None),
            (59_999, None),
            (60_000, Some(2)),
            (60_001, None),
            (200_000, Some(1)),
        ];
        for (at, want) in steps {
            assert_eq!(limiter.allow(ms(at)), want, "at {at} ms");
        }
    }
}
