//! The health state machines, free of any network: a monitor's fall/rise hysteresis, a
//! service's weighted threshold over its monitors (NetScaler `monThreshold`), and what a
//! service is now ([`ServiceState`]: the one type the engine decides on and MEP carries).

use super::load::{MAX_LOAD, UNKNOWN_LOAD};

/// One service's current state: UP or DOWN, and its load. The default is UP with no load
/// reported. The engine decides on it; MEP carries it (with the service's name) as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ServiceState {
    pub up: bool,
    /// Current connections; [`UNKNOWN_LOAD`] while the load monitor's value is not known (above
    /// every real count and every configurable limit, below the engine's "no limit").
    pub connections: u64,
    pub bandwidth: Bandwidth,
}

impl ServiceState {
    pub const UP: ServiceState = ServiceState {
        up: true,
        connections: 0,
        bandwidth: Bandwidth::ZERO,
    };
    pub const DOWN: ServiceState = ServiceState {
        up: false,
        connections: 0,
        bandwidth: Bandwidth::ZERO,
    };
}

impl Default for ServiceState {
    /// UP with no load: nothing says otherwise.
    fn default() -> Self {
        ServiceState::UP
    }
}

/// A service's current bandwidth, or one of two markers.
///
/// The engine and the configuration count in kbit/s ([`Bandwidth::kbps`]); MEP carries bit/s
/// ([`Bandwidth::bps`]). It is held as MEP's bit/s so that a frame decodes and encodes back to
/// the same bytes (bit/s → kbit/s is not one to one). The markers keep their order against the
/// engine's limits (a configurable one is at most [`MAX_LOAD`], "no limit" is `u64::MAX`):
/// - [`Bandwidth::UNKNOWN`] ([`UNKNOWN_LOAD`] in either unit): the load monitor's value is not
///   known: full for a service with a limit, never full without one;
/// - [`Bandwidth::FULL`] (`u64::MAX` in either unit): the service's link is over its threshold
///   at its site, so the service is full: at or above every limit, "no limit" included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Bandwidth(u64);

impl Bandwidth {
    pub const ZERO: Bandwidth = Bandwidth(0);
    pub const UNKNOWN: Bandwidth = Bandwidth(UNKNOWN_LOAD);
    pub const FULL: Bandwidth = Bandwidth(u64::MAX);

    /// A kbit/s value (a marker stays that marker); a real one saturates at [`MAX_LOAD`] bit/s.
    pub const fn from_kbps(kbps: u64) -> Bandwidth {
        match kbps {
            u64::MAX | UNKNOWN_LOAD => Bandwidth(kbps),
            v => {
                let bps = v.saturating_mul(1000);
                Bandwidth(if bps > MAX_LOAD { MAX_LOAD } else { bps })
            }
        }
    }

    /// As the engine compares it with `max_bandwidth_kbps`: kbit/s, or the marker.
    pub const fn kbps(self) -> u64 {
        match self.0 {
            u64::MAX | UNKNOWN_LOAD => self.0,
            v => v / 1000,
        }
    }

    /// MEP's bandwidth field, as it is: any value is a bandwidth in bit/s or a marker.
    pub const fn from_bps(bps: u64) -> Bandwidth {
        Bandwidth(bps)
    }

    /// As MEP carries it: bit/s, or the marker.
    pub const fn bps(self) -> u64 {
        self.0
    }
}

/// One monitor's UP/DOWN state with fall/rise hysteresis.
///
/// An UP monitor goes DOWN after `fall` failed checks in a row; a DOWN monitor goes UP after
/// `rise` successful checks in a row. A result that agrees with the current state resets the
/// opposite run, so an isolated failure between successes never accumulates towards `fall`.
/// `fall` and `rise` of 0 act as 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonitorTracker {
    up: bool,
    fall: u32,
    rise: u32,
    /// Successes in a row (the last results).
    ok_run: u32,
    /// Failures in a row (the last results).
    fail_run: u32,
}

impl MonitorTracker {
    /// A tracker starting in `initial_up` with no results yet.
    pub fn new(initial_up: bool, fall: u32, rise: u32) -> Self {
        MonitorTracker {
            up: initial_up,
            fall: fall.max(1),
            rise: rise.max(1),
            ok_run: 0,
            fail_run: 0,
        }
    }

    /// The current state.
    pub fn up(&self) -> bool {
        self.up
    }

    /// Successes in a row so far.
    pub fn ok_run(&self) -> u32 {
        self.ok_run
    }

    /// Failures in a row so far.
    pub fn fail_run(&self) -> u32 {
        self.fail_run
    }

    /// Takes one check result; returns the new state when it changed.
    pub fn record(&mut self, ok: bool) -> Option<bool> {
        if ok {
            self.fail_run = 0;
            self.ok_run = self.ok_run.saturating_add(1);
            if !self.up && self.ok_run >= self.rise {
                self.up = true;
                return Some(true);
            }
        } else {
            self.ok_run = 0;
            self.fail_run = self.fail_run.saturating_add(1);
            if self.up && self.fail_run >= self.fall {
                self.up = false;
                return Some(false);
            }
        }
        None
    }
}

/// A service's state from its monitors' states and weights (NetScaler `monThreshold`):
///
/// - no monitors: UP (nothing says otherwise), whatever the threshold;
/// - `threshold` 0: UP only when every monitor is UP (NetScaler's behaviour without a
///   threshold: any monitor DOWN marks the service DOWN);
/// - otherwise: UP when the weights of the UP monitors add up to at least `threshold`.
pub fn service_up(monitors: impl IntoIterator<Item = (bool, u32)>, threshold: u32) -> bool {
    let mut up_weight: u64 = 0;
    let mut all_up = true;
    let mut any = false;
    for (up, weight) in monitors {
        any = true;
        if up {
            up_weight += u64::from(weight);
        } else {
            all_up = false;
        }
    }
    if !any || threshold == 0 {
        all_up
    } else {
        up_weight >= u64::from(threshold)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `results` ('+' success, '-' failure) and returns the state after each ('U'/'D').
    fn run(initial_up: bool, fall: u32, rise: u32, results: &str) -> String {
        let mut t = MonitorTracker::new(initial_up, fall, rise);
        results
            .chars()
            .map(|c| {
                let before = t.up();
                let changed = t.record(c == '+');
                // `record` reports exactly the changes.
                assert_eq!(changed.is_some(), before != t.up());
                assert_eq!(changed.unwrap_or(before), t.up());
                if t.up() { 'U' } else { 'D' }
            })
            .collect()
    }

    #[test]
    fn bandwidth_in_both_units() {
        for kbps in [0, 1, 999_999, u64::MAX, UNKNOWN_LOAD] {
            assert_eq!(Bandwidth::from_kbps(kbps).kbps(), kbps, "{kbps}");
        }
        assert_eq!(Bandwidth::from_kbps(5).bps(), 5000);
        assert_eq!(Bandwidth::FULL.bps(), u64::MAX);
        assert_eq!(Bandwidth::UNKNOWN.bps(), UNKNOWN_LOAD);
        // A huge real value stays real (not unknown, not full).
        assert_eq!(Bandwidth::from_kbps(MAX_LOAD).bps(), MAX_LOAD);
        assert!(Bandwidth::from_kbps(MAX_LOAD).kbps() < UNKNOWN_LOAD);
        // Any bit/s value is kept as it is, and read in whole kbit/s.
        for bps in [0, 999, 1500, MAX_LOAD, MAX_LOAD + 1, UNKNOWN_LOAD - 1] {
            assert_eq!(Bandwidth::from_bps(bps).bps(), bps);
            assert_eq!(Bandwidth::from_bps(bps).kbps(), bps / 1000);
        }
    }

    #[test]
    fn the_default_is_up_without_load() {
        let default = ServiceState::default();
        assert_eq!(default, ServiceState::UP);
        assert!(default.up);
        assert_eq!(default.connections, 0);
        assert_eq!(default.bandwidth.kbps(), 0);
    }

    #[test]
    fn fall_and_rise_table() {
        // (initial up, fall, rise, results, states after each result)
        let table: &[(bool, u32, u32, &str, &str)] = &[
            // Down after `fall` failures in a row, up after `rise` successes in a row.
            (true, 3, 2, "+++---++", "UUUUUDDU"),
            // A success between failures restarts the count to `fall`.
            (true, 3, 2, "--+--+---", "UUUUUUUUD"),
            // A failure between successes restarts the count to `rise`.
            (false, 1, 3, "++-++-+++", "DDDDDDDDU"),
            // fall = rise = 1: every change of result is a change of state.
            (true, 1, 1, "-+-+", "DUDU"),
            // 0 acts as 1.
            (true, 0, 0, "-+", "DU"),
            // Starting DOWN needs `rise` successes; starting UP needs `fall` failures.
            (false, 3, 2, "++", "DU"),
            (true, 3, 2, "--", "UU"),
            // Results that agree with the state change nothing.
            (true, 2, 2, "++++", "UUUU"),
            (false, 2, 2, "----", "DDDD"),
            // Flapping target, damped by fall = rise = 2: one state change only.
            (true, 2, 2, "-+-+--+-++", "UUUUUDDDDU"),
        ];
        for &(initial, fall, rise, results, want) in table {
            assert_eq!(
                run(initial, fall, rise, results),
                want,
                "initial_up={initial} fall={fall} rise={rise} results={results}"
            );
        }
    }

    #[test]
    fn runs_are_counted() {
        let mut t = MonitorTracker::new(true, 5, 5);
        for _ in 0..3 {
            t.record(false);
        }
        assert_eq!((t.ok_run(), t.fail_run()), (0, 3));
        t.record(true);
        assert_eq!((t.ok_run(), t.fail_run()), (1, 0));
    }

    /// Monitors as (up, weight), threshold, service up.
    type ThresholdCase = (&'static [(bool, u32)], u32, bool);

    #[test]
    fn threshold_table() {
        let table: &[ThresholdCase] = &[
            (&[], 0, true),
            (&[], 5, true),
            (&[(true, 1), (true, 1)], 0, true),
            (&[(true, 1), (false, 1)], 0, false),
            (&[(false, 1)], 0, false),
            (&[(true, 1), (false, 1)], 1, true),
            (&[(true, 1), (false, 1)], 2, false),
            (&[(true, 3), (false, 1), (true, 1)], 4, true),
            (&[(false, 3), (true, 1), (true, 1)], 3, false),
            (&[(false, 3), (true, 1), (true, 2)], 3, true),
            // A weight-0 monitor is informational once there is a threshold.
            (&[(true, 2), (false, 0)], 2, true),
            (&[(true, u32::MAX), (true, u32::MAX)], u32::MAX, true),
        ];
        for &(monitors, threshold, want) in table {
            assert_eq!(
                service_up(monitors.iter().copied(), threshold),
                want,
                "monitors={monitors:?} threshold={threshold}"
            );
        }
    }
}
