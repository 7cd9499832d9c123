//! The raw `bpf(2)` call, for the commands aya 0.16 lacks (batch writes, the grace period's
//! map-in-map, a program's JIT line table). One place for the `unsafe` call and its errors.

use std::io;

// bpf(2) commands (include/uapi/linux/bpf.h).
pub(super) const BPF_MAP_CREATE: libc::c_long = 0;
pub(super) const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
pub(super) const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
pub(super) const BPF_BTF_GET_FD_BY_ID: libc::c_long = 19;
pub(super) const BPF_MAP_UPDATE_BATCH: libc::c_long = 26;
pub(super) const BPF_MAP_DELETE_BATCH: libc::c_long = 27;

/// `bpf(cmd, attr, size_of::<T>())`: the call's result (a new descriptor for the commands that
/// make one), or the error. The kernel may write back into `attr` (counts, lengths).
///
/// # Safety
/// `attr` is the head of the `bpf_attr` that `cmd` takes (the kernel zeroes the rest), and
/// every pointer in it points to live memory of the size it gives the kernel, for the call.
pub(super) unsafe fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: the caller's contract above; `attr` is `size_of::<T>()` bytes the kernel may
    // read and write.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, std::ptr::from_mut(attr), size_of::<T>()) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}
