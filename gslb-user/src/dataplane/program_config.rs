//! `CONFIG`, the program's global settings, written through the map's memory mapping: one
//! atomic 8-byte store per word, the generations' word last (see `gslb_common::ProgramConfig`).
//! Through `bpf_map_update_elem` the kernel copies the value with `memcpy`, which is not atomic
//! per 8 bytes on every CPU, so a packet reading during a switch could pair the new
//! generation with the old trie's.

use std::os::fd::{AsFd as _, AsRawFd as _};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use aya::maps::{Array, IterableMap as _, MapData};
use gslb_common::{ProgramConfig, maps};

use super::{DataplaneError, Result};

pub(super) struct ConfigMap {
    /// Kept for the map's lifetime (the mapping holds its own reference to the map).
    _map: Array<MapData, ProgramConfig>,
    /// The value's two words in the mapping.
    words: NonNull<[AtomicU64; 2]>,
    len: usize,
}

// SAFETY: the mapping is owned by this value and only accessed through atomics.
unsafe impl Send for ConfigMap {}
// SAFETY: as above; every access is an atomic load or store.
unsafe impl Sync for ConfigMap {}

impl ConfigMap {
    /// Maps `CONFIG` (created `BPF_F_MMAPABLE` by the object) for reading and writing.
    pub(super) fn new(map: Array<MapData, ProgramConfig>) -> Result<ConfigMap> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let len = usize::try_from(page).unwrap_or(4096);
        let fd = map.map().fd().as_fd().as_raw_fd();
        // SAFETY: a fresh shared mapping of the map's data (slot 0 at offset 0, the array's
        // values being 8-byte aligned); nothing else aliases it in this process.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(DataplaneError::MapMemory {
                name: maps::CONFIG,
                source: std::io::Error::last_os_error(),
            });
        }
        let words =
            NonNull::new(ptr.cast::<[AtomicU64; 2]>()).ok_or(DataplaneError::MapMemory {
                name: maps::CONFIG,
                source: std::io::Error::from(std::io::ErrorKind::InvalidData),
            })?;
        Ok(ConfigMap {
            _map: map,
            words,
            len,
        })
    }

    fn words(&self) -> &[AtomicU64; 2] {
        // SAFETY: mapped for `self`'s lifetime, page-aligned, at least 16 bytes.
        unsafe { self.words.as_ref() }
    }

    pub(super) fn get(&self) -> ProgramConfig {
        let [head, tail] = self.words();
        ProgramConfig::from_words([head.load(Ordering::Acquire), tail.load(Ordering::Acquire)])
    }

    /// Writes `config`: the second word, then the generations' word, each in one store. Every
    /// map write the new value's generation names was made before (program order, and the
    /// release store orders them before it on every CPU).
    pub(super) fn set(&self, config: &ProgramConfig) {
        let [head, tail] = config.to_words();
        let words = self.words();
        words[1].store(tail, Ordering::Release);
        words[0].store(head, Ordering::Release);
    }
}

impl Drop for ConfigMap {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, of `len` bytes, no longer used.
        unsafe { libc::munmap(self.words.as_ptr().cast(), self.len) };
    }
}
