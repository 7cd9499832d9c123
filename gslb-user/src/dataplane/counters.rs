//! The fast path's hit and miss counters (`COUNTERS`, per CPU), summed, from the loaded program
//! or from the pins of a running gslbd (gslbctl).

use std::path::Path;

use aya::maps::{Map, MapData, PerCpuArray};
use gslb_common::{Counter, maps};

use super::{Result, map_err};

/// Hit and miss counters, one per [`Counter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counters(pub [u64; Counter::COUNT as usize]);

// By hand: arrays of more than 32 elements derive no `Default`.
impl Default for Counters {
    fn default() -> Self {
        Counters([0; Counter::COUNT as usize])
    }
}

impl Counters {
    pub fn get(&self, counter: Counter) -> u64 {
        self.0[counter as usize]
    }

    pub fn hits(&self) -> u64 {
        Counter::ALL
            .iter()
            .filter(|c| c.is_hit())
            .map(|c| self.get(*c))
            .sum()
    }

    /// Counters that rose from `earlier` to `self`, by how much.
    pub fn delta(&self, earlier: &Counters) -> Vec<(Counter, u64)> {
        Counter::ALL
            .iter()
            .map(|c| (*c, self.get(*c).wrapping_sub(earlier.get(*c))))
            .filter(|(_, d)| *d != 0)
            .collect()
    }
}

/// Reads counters from a pinned `COUNTERS` map, e.g. of a running gslbd.
pub fn pinned_counters(dir: &Path) -> Result<Counters> {
    let data = MapData::from_pin(dir.join(maps::COUNTERS)).map_err(map_err(maps::COUNTERS))?;
    let map: PerCpuArray<MapData, u64> =
        PerCpuArray::try_from(Map::PerCpuArray(data)).map_err(map_err(maps::COUNTERS))?;
    read_counters(&map)
}

pub(super) fn read_counters(map: &PerCpuArray<MapData, u64>) -> Result<Counters> {
    let mut out = Counters::default();
    for c in Counter::ALL {
        let values = map.get(&(c as u32), 0).map_err(map_err(maps::COUNTERS))?;
        out.0[c as usize] = values.iter().sum();
    }
    Ok(out)
}
