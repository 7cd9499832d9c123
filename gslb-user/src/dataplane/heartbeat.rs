//! The controller's heartbeat in the `HEARTBEAT` map: the program passes every frame once it is
//! older than its bound (`server.stale_after_s`), so a fast path whose gslbd is gone stops
//! answering from maps nobody keeps current. Each beat also gives the program the wall clock
//! (the timestamps of DNS cookies). `daemon/heartbeat.rs` refreshes it.

use std::time::Duration;

use aya::maps::{Array, MapData};
use gslb_common::{Heartbeat, maps};

use super::{Result, map_err, monotonic_ns};

/// CLOCK_REALTIME less CLOCK_MONOTONIC now, in ns (`Heartbeat::wall_offset_ns`).
fn wall_offset_ns() -> u64 {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    wall.wrapping_sub(monotonic_ns())
}

/// The `HEARTBEAT` map. Not pinned: a restarted gslbd beats into its own program's map before
/// it swaps that program into the link, and the old program (still reading the dead gslbd's
/// map until then) goes stale on its own.
pub struct HeartbeatMap {
    pub(super) map: Array<MapData, Heartbeat>,
}

impl HeartbeatMap {
    /// Says the controller is alive now; `stale_after`: how long the program trusts this beat
    /// (`None`: forever, i.e. never stale).
    pub fn beat(&mut self, stale_after: Option<Duration>) -> Result<()> {
        self.beat_at(monotonic_ns(), stale_after)
    }

    /// Writes a beat taken at `beat_ns` (CLOCK_MONOTONIC, see [`monotonic_ns`]); tests use it
    /// to write an old one.
    pub fn beat_at(&mut self, beat_ns: u64, stale_after: Option<Duration>) -> Result<()> {
        let value = Heartbeat {
            beat_ns,
            stale_after_ns: stale_after.map_or(0, |d| d.as_nanos().min(i64::MAX as u128) as u64),
            wall_offset_ns: wall_offset_ns(),
        };
        self.map.set(0, &value, 0).map_err(map_err(maps::HEARTBEAT))
    }
}
