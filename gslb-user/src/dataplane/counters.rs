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
    // Through no link: run as root, `gslbctl` would read another program's map.
    super::pin_dir::has_pin(&super::pin_dir::open(dir)?, maps::COUNTERS)?;
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

/// The hit and miss counters and the rate limiter's, opened a second time (file descriptors of
/// their own), for a reader beside the dataplane's owner: the admin endpoint reads them while
/// the republish loop holds the [`super::Dataplane`].
pub struct CounterReader {
    counters: PerCpuArray<MapData, u64>,
    rrl: PerCpuArray<MapData, u64>,
}

impl CounterReader {
    pub(super) fn duplicate(counters: &Map, rrl: &Map) -> Result<CounterReader> {
        Ok(CounterReader {
            counters: duplicate(counters, maps::COUNTERS)?,
            rrl: duplicate(rrl, gslb_common::RRL_COUNTERS_MAP)?,
        })
    }

    /// Hits and misses, summed over CPUs.
    pub fn counters(&self) -> Result<Counters> {
        read_counters(&self.counters)
    }

    /// Answers the fast path's rate limiting dropped and slipped, summed over CPUs.
    pub fn rrl(&self) -> Result<(u64, u64)> {
        let sum = |slot: u32| -> Result<u64> {
            let per_cpu = self
                .rrl
                .get(&slot, 0)
                .map_err(map_err(gslb_common::RRL_COUNTERS_MAP))?;
            Ok(per_cpu.iter().sum())
        };
        Ok((
            sum(gslb_common::RRL_DROPPED)?,
            sum(gslb_common::RRL_SLIPPED)?,
        ))
    }
}

/// A per-CPU array of `map` on a new file descriptor of the same kernel map.
fn duplicate(map: &Map, name: &'static str) -> Result<PerCpuArray<MapData, u64>> {
    use std::os::fd::AsFd;
    let Map::PerCpuArray(data) = map else {
        return Err(super::DataplaneError::Missing {
            kind: "per-CPU array",
            name,
        });
    };
    let fd = data.fd().as_fd().try_clone_to_owned().map_err(|e| {
        map_err(name)(aya::maps::MapError::SyscallError(aya::sys::SyscallError {
            call: "dup",
            io_error: e,
        }))
    })?;
    let data = MapData::from_fd(fd).map_err(map_err(name))?;
    PerCpuArray::try_from(Map::PerCpuArray(data)).map_err(map_err(name))
}
