//! The `bpf(BPF_MAP_*_BATCH)` commands, which aya 0.16 lacks: a republish writes and
//! deletes thousands of hash-map entries in a few calls instead of one each.

use aya::maps::{HashMap, MapData, MapError};

use super::syscall::{BPF_MAP_DELETE_BATCH, BPF_MAP_UPDATE_BATCH, bpf};

/// Writes (`values`: `Some`) or deletes (`None`) many entries of a hash map in one
/// `bpf(BPF_MAP_UPDATE_BATCH / BPF_MAP_DELETE_BATCH)` call instead of a call per entry: a
/// republish rewrites every answer set, and the calls were most of its time. aya 0.16 has no
/// batch operations, hence the raw syscall. A kernel without them (before 5.6) gets one call
/// per entry. A delete of a key that is not there is not an error (adopted maps, retries).
pub(super) fn batch<K: aya::Pod, V: aya::Pod>(
    map: &mut HashMap<MapData, K, V>,
    keys: &[K],
    values: Option<&[V]>,
) -> Result<(), MapError> {
    use aya::maps::IterableMap;
    use std::os::fd::{AsFd, AsRawFd};
    if keys.is_empty() {
        return Ok(());
    }
    if let Some(values) = values {
        assert_eq!(keys.len(), values.len(), "one value per key");
    }
    // `union bpf_attr`'s batch member (include/uapi/linux/bpf.h).
    #[repr(C)]
    struct BatchAttr {
        in_batch: u64,
        out_batch: u64,
        keys: u64,
        values: u64,
        count: u32,
        map_fd: u32,
        elem_flags: u64,
        flags: u64,
    }
    let fd = map.map().fd().as_fd().as_raw_fd();
    let mut done = 0;
    while done < keys.len() {
        let mut attr = BatchAttr {
            in_batch: 0,
            out_batch: 0,
            keys: keys[done..].as_ptr() as u64,
            values: values.map_or(0, |v| v[done..].as_ptr() as u64),
            count: (keys.len() - done) as u32,
            map_fd: fd as u32,
            elem_flags: 0,
            flags: 0,
        };
        let cmd = if values.is_some() {
            BPF_MAP_UPDATE_BATCH
        } else {
            BPF_MAP_DELETE_BATCH
        };
        // SAFETY: `attr` points at `count` keys (and values) that live through the call; the
        // kernel reads them and writes back `count` only.
        let Err(error) = (unsafe { bpf(cmd, &mut attr) }) else {
            return Ok(());
        };
        // The kernel stopped at entry `count`: a delete of a missing key; skip it and go on.
        done += attr.count as usize;
        match error.raw_os_error() {
            Some(libc::ENOENT) if values.is_none() => done += 1,
            // 524: the kernel's internal ENOTSUPP, which map commands can return as is.
            Some(libc::EINVAL | 524 | libc::EOPNOTSUPP) if done == 0 => {
                return one_by_one(map, keys, values);
            }
            _ => {
                let call = if values.is_some() {
                    "bpf_map_update_batch"
                } else {
                    "bpf_map_delete_batch"
                };
                return Err(MapError::SyscallError(aya::sys::SyscallError {
                    call,
                    io_error: error,
                }));
            }
        }
    }
    Ok(())
}

/// [`batch`] one entry at a time.
fn one_by_one<K: aya::Pod, V: aya::Pod>(
    map: &mut HashMap<MapData, K, V>,
    keys: &[K],
    values: Option<&[V]>,
) -> Result<(), MapError> {
    for (i, key) in keys.iter().enumerate() {
        match values {
            Some(values) => map.insert(key, &values[i], 0)?,
            None => match map.remove(key) {
                Err(MapError::KeyNotFound) | Ok(()) => {}
                Err(e) => return Err(e),
            },
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use gslb_common::{DomainKey, DomainValue};

    use super::*;
    use crate::dataplane::{Dataplane, can_load_xdp};

    /// Batch writes and deletes reach every entry, in several thousands at once, and a delete
    /// that meets a missing key in the middle goes on past it.
    #[test]
    fn batch_writes_and_deletes_every_entry() {
        if !can_load_xdp() {
            return;
        }
        let mut dp = Dataplane::load(None).expect("loading the XDP object");
        let map = &mut dp.table.domains;
        let key = |i: u32| DomainKey {
            qtype: 1,
            generation: i,
            ..DomainKey::default()
        };
        let keys: Vec<DomainKey> = (0..5000).map(key).collect();
        let values: Vec<DomainValue> = (0..5000)
            .map(|i| DomainValue {
                domain_id: i,
                reserved: 0,
            })
            .collect();
        batch(map, &keys, Some(&values)).expect("batch update");
        for i in [0u32, 1, 2500, 4999] {
            assert_eq!(map.get(&key(i), 0).expect("written").domain_id, i);
        }
        // Delete a range with holes: 100..200 are gone already.
        batch::<_, DomainValue>(map, &keys[100..200], None).expect("first delete");
        batch::<_, DomainValue>(map, &keys, None).expect("delete over missing keys");
        assert_eq!(map.keys().count(), 0, "every entry deleted");
    }
}
