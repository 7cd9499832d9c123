//! Rate-limited logging: a warning that an attacker (or a broken network) can repeat at will
//! (per packet, per peer, per probe) is logged at most once per period, and the next line
//! logged carries `suppressed = N`, how many were held back meanwhile. [`LogLimiter`] for one
//! warning, [`KeyedLimiter`] for one per key (a reason, a peer), with a bounded number of keys.
//!
//! The clock is tokio's, which tests can pause and advance; callers pass `now`.

use std::{collections::HashMap, hash::Hash, time::Duration};

use tokio::time::Instant;

/// At most one line per `every`; see the module documentation.
#[derive(Debug)]
pub struct LogLimiter {
    every: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl LogLimiter {
    pub const fn new(every: Duration) -> Self {
        LogLimiter {
            every,
            last: None,
            suppressed: 0,
        }
    }

    /// An occurrence at `now`: `Some(n)` when it may be logged (`n` occurrences were held back
    /// since the last line), `None` when it is held back.
    pub fn allow(&mut self, now: Instant) -> Option<u64> {
        if self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) < self.every)
        {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

/// A [`LogLimiter`] per key, for at most `max_keys` keys: past that, the keys whose period is
/// over are forgotten (their counts were logged or are stale), and if none is, the new key
/// shares one limiter with every other key that found no room (an attacker choosing keys gets
/// no more lines, nor memory).
#[derive(Debug)]
pub struct KeyedLimiter<K> {
    every: Duration,
    max_keys: usize,
    keys: HashMap<K, LogLimiter>,
    overflow: LogLimiter,
}

impl<K: Eq + Hash> KeyedLimiter<K> {
    pub fn new(every: Duration, max_keys: usize) -> Self {
        KeyedLimiter {
            every,
            max_keys,
            keys: HashMap::new(),
            overflow: LogLimiter::new(every),
        }
    }

    /// An occurrence of `key` at `now`, as [`LogLimiter::allow`].
    pub fn allow(&mut self, key: K, now: Instant) -> Option<u64> {
        if !self.keys.contains_key(&key) && self.keys.len() >= self.max_keys {
            let every = self.every;
            self.keys.retain(|_, l| {
                l.suppressed > 0
                    || l.last
                        .is_some_and(|last| now.saturating_duration_since(last) < every)
            });
            if self.keys.len() >= self.max_keys {
                return self.overflow.allow(now);
            }
        }
        self.keys
            .entry(key)
            .or_insert_with(|| LogLimiter::new(self.every))
            .allow(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n_calls_in_a_period_log_once_and_the_next_carries_n_minus_one() {
        // The clock is passed in: a fake one, never the time of the test.
        let t0 = Instant::now();
        let mut limiter = LogLimiter::new(Duration::from_secs(10));
        let n = 50u64;
        let logged: Vec<u64> = (0..n)
            .filter_map(|i| limiter.allow(t0 + Duration::from_millis(i * 100)))
            .collect();
        assert_eq!(logged, [0], "one line for {n} calls within the period");
        assert_eq!(
            limiter.allow(t0 + Duration::from_secs(10)),
            Some(n - 1),
            "the next line carries suppressed = N - 1"
        );
    }

    #[test]
    fn keys_are_limited_apart_and_bounded() {
        let t0 = Instant::now();
        let mut limiter = KeyedLimiter::new(Duration::from_secs(1), 2);
        assert_eq!(limiter.allow("a", t0), Some(0));
        assert_eq!(limiter.allow("a", t0), None);
        assert_eq!(limiter.allow("b", t0), Some(0), "per key");
        // No room for a third key while a and b are in their period: it shares the overflow.
        assert_eq!(limiter.allow("c", t0), Some(0));
        assert_eq!(limiter.allow("d", t0), None);
        assert_eq!(limiter.keys.len(), 2);
        let later = t0 + Duration::from_secs(2);
        assert_eq!(limiter.allow("a", later), Some(1));
        // b's period is over with nothing held: forgotten to make room for c.
        assert_eq!(limiter.allow("c", later), Some(0));
        assert!(!limiter.keys.contains_key("b"));
    }

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
