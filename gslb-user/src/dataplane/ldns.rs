//! The resolvers the fast path has seen: the `LDNS` map it fills and the `LDNS_CONFIG` that
//! says how it groups them (the LDNS mask) and whether it records at all.

use std::{collections::HashSet, time::Duration};

use aya::maps::{Array, HashMap, Map, MapData, MapError};
use gslb_common::{LDNS_MAX, LDNS_OFF, LdnsConfig, LdnsKey, LdnsValue, maps};

use super::{DataplaneError, Result, encode::unmapped, map_err};
use std::net::IpAddr;

/// The resolvers (LDNS) the fast path has seen (`LDNS`, an LRU map the program fills, see
/// gslb-ebpf's `record_ldns`) and how it records them (`LDNS_CONFIG`). Not pinned: a restarted
/// gslbd learns resolvers again from their next queries.
pub struct LdnsMap {
    pub(super) config: Array<MapData, LdnsConfig>,
    pub(super) seen: HashMap<MapData, LdnsKey, LdnsValue>,
}

/// A resolver (or masked prefix of resolvers) the fast path has seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeenLdns {
    /// The entry's key: the resolver's address with the LDNS mask's host bits cleared.
    pub group: IpAddr,
    /// The address of the query that created the entry: the one to probe.
    pub addr: IpAddr,
    /// Time since its last query, as recorded (it may have queried up to one epoch later).
    pub idle: Duration,
}

/// What one [`LdnsMap::scan`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LdnsScan {
    /// Entries seen within the timeout.
    pub seen: Vec<SeenLdns>,
    /// Entries idle longer than the timeout, deleted.
    pub expired: usize,
}

impl LdnsMap {
    /// Another handle on the same two maps (duplicated descriptors): the fast-path feed's runs
    /// each read through one, so that a run that dies does not close the maps, which the
    /// program's reload on detach needs open.
    pub fn try_clone(&self) -> Result<LdnsMap, DataplaneError> {
        use aya::maps::IterableMap;
        use std::os::fd::AsFd;
        fn dup(data: &MapData, name: &'static str) -> Result<Map, DataplaneError> {
            let fd = data
                .fd()
                .as_fd()
                .try_clone_to_owned()
                .map_err(|e| map_err(name)(MapError::from(e)))?;
            MapData::from_fd(fd)
                .and_then(Map::from_map_data)
                .map_err(map_err(name))
        }
        Ok(LdnsMap {
            config: Array::try_from(dup(self.config.map(), maps::LDNS_CONFIG)?)
                .map_err(map_err(maps::LDNS_CONFIG))?,
            seen: HashMap::try_from(dup(self.seen.map(), maps::LDNS)?)
                .map_err(map_err(maps::LDNS))?,
        })
    }

    fn settings(&self) -> Result<LdnsConfig> {
        self.config.get(&0, 0).map_err(map_err(maps::LDNS_CONFIG))
    }

    fn set_settings(&mut self, config: &LdnsConfig) -> Result<()> {
        self.config
            .set(0, config, 0)
            .map_err(map_err(maps::LDNS_CONFIG))
    }

    /// Groups resolvers by prefix (NetScaler `ldnsmask`): queries from one /`v4` (IPv4) or
    /// /`v6` (IPv6) prefix share one entry; 32 and 128 keep every address apart (the default).
    /// Entries recorded under other masks stay until they expire. Lengths above the family's
    /// are taken as the whole address.
    pub fn set_masks(&mut self, v4: u8, v6: u8) -> Result<()> {
        let mut config = self.settings()?;
        config.host_v4 = host_bytes(96 + u32::from(v4.min(32)));
        config.host_v6 = host_bytes(u32::from(v6.min(128)));
        config.epoch = config.epoch.wrapping_add(1);
        self.set_settings(&config)
    }

    /// Turns recording on or off.
    pub fn set_enabled(&mut self, enabled: bool) -> Result<()> {
        let mut config = self.settings()?;
        config.flags = if enabled {
            config.flags & !LDNS_OFF
        } else {
            config.flags | LDNS_OFF
        };
        self.set_settings(&config)
    }

    /// Starts a new epoch: each resolver's next query (per CPU) refreshes its entry's time.
    /// [`LdnsMap::scan`] does this too.
    pub fn new_epoch(&mut self) -> Result<u32> {
        let mut config = self.settings()?;
        config.epoch = config.epoch.wrapping_add(1);
        self.set_settings(&config)?;
        Ok(config.epoch)
    }

    /// Reads every entry, deletes those idle longer than `timeout` (the LDNS entry timeout)
    /// and starts a new epoch, so that the times read by the next scan are at most one scan
    /// interval old. Costs two syscalls per entry: scan about once a second.
    pub fn scan(&mut self, timeout: Duration) -> Result<LdnsScan> {
        let now = monotonic_ns();
        let mut scan = LdnsScan::default();
        let mut stale = Vec::new();
        let mut visited = HashSet::new();
        // Entries evicted or deleted while iterating can restart the kernel's walk: bounded,
        // and each key taken once.
        for item in self.seen.iter().take(2 * LDNS_MAX as usize) {
            // An entry gone between the key walk and the read: nothing to do.
            let Ok((key, value)) = item else { continue };
            if !visited.insert(key.addr) {
                continue;
            }
            let idle = Duration::from_nanos(now.saturating_sub(value.last_seen_ns));
            if idle > timeout {
                stale.push(key);
                continue;
            }
            scan.seen.push(SeenLdns {
                group: unmapped(key.addr),
                addr: unmapped(value.addr),
                idle,
            });
        }
        for key in stale {
            match self.seen.remove(&key) {
                Ok(()) => scan.expired += 1,
                // Evicted meanwhile.
                Err(MapError::KeyNotFound) => {}
                Err(source) => {
                    return Err(DataplaneError::Map {
                        name: maps::LDNS,
                        source: Box::new(source),
                    });
                }
            }
        }
        self.new_epoch()?;
        Ok(scan)
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of `bpf_ktime_get_ns`.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A 16-byte address mask with the bits after the first `prefix` set.
fn host_bytes(prefix: u32) -> [u8; 16] {
    let keep = if prefix >= 128 {
        u128::MAX
    } else {
        !(u128::MAX >> prefix)
    };
    (!keep).to_be_bytes()
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;
    use crate::dataplane::encode::mapped;

    #[test]
    fn ldns_masks_clear_the_host_bits_of_the_mapped_address() {
        // (prefix over the 128-bit mapped address, host bytes)
        let table: [(u32, [u8; 16]); 6] = [
            (128, [0; 16]),
            (96 + 32, [0; 16]),
            (96 + 24, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff]),
            (
                96 + 20,
                [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0f, 0xff],
            ),
            (
                96 + 12,
                [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0f, 0xff, 0xff],
            ),
            (
                56,
                [
                    0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                ],
            ),
        ];
        for (prefix, host) in table {
            assert_eq!(host_bytes(prefix), host, "/{prefix}");
        }
        for addr in ["192.0.2.7", "2001:db8::7"] {
            let addr: IpAddr = addr.parse().unwrap();
            assert_eq!(unmapped(mapped(addr)), addr);
        }
    }
}
