//! Least privilege: after gslbd has loaded, pinned and bound as root, it becomes the configured
//! `server.user` and keeps only the capabilities it still uses ([`needed`]), dropping every
//! other one from its permitted, effective, inheritable, ambient and bounding sets, with
//! `no_new_privs` set.
//!
//! Capabilities are per thread (a raw `capset` changes the calling thread only, unlike glibc's
//! `setresuid`, which it broadcasts to every thread): [`drop_to`] refuses to run unless the
//! process has one thread, so `main` calls it before the tokio runtime starts, and every thread
//! started after it inherits the reduced set.

use std::{
    ffi::CString,
    io,
    path::{Path, PathBuf},
};

use tracing::warn;

use crate::dataplane::{PinDir, PinEntry};

/// `CAP_NET_RAW` (linux/capability.h).
pub const CAP_NET_RAW: u32 = 13;
/// `CAP_BPF`.
pub const CAP_BPF: u32 = 39;

/// A user gslbd runs as, resolved from `/etc/passwd` (NSS) when the configuration loads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: u32,
    /// The user's primary group: gslbd's only group after the drop.
    pub gid: u32,
}

impl User {
    /// The user called `name`; `None` when there is none.
    pub fn lookup(name: &str) -> io::Result<Option<User>> {
        let Ok(c_name) = CString::new(name) else {
            return Ok(None);
        };
        let mut buf = vec![0u8; 4096];
        loop {
            // SAFETY: an all-zero passwd is a valid value to be overwritten by getpwnam_r.
            let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
            let mut result = std::ptr::null_mut();
            // SAFETY: every pointer is valid for the call; buf outlives the use of pwd's
            // strings (none are read).
            let rc = unsafe {
                libc::getpwnam_r(
                    c_name.as_ptr(),
                    &raw mut pwd,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    &raw mut result,
                )
            };
            match rc {
                0 if result.is_null() => return Ok(None),
                0 => {
                    return Ok(Some(User {
                        name: name.to_owned(),
                        uid: pwd.pw_uid,
                        gid: pwd.pw_gid,
                    }));
                }
                libc::ERANGE if buf.len() < 1 << 20 => buf.resize(buf.len() * 2, 0),
                // "Not found" comes back as one of these from some NSS modules.
                libc::ENOENT | libc::ESRCH | libc::EBADF | libc::EPERM => return Ok(None),
                errno => return Err(io::Error::from_raw_os_error(errno)),
            }
        }
    }
}

/// A capability gslbd keeps, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kept {
    pub cap: u32,
    pub name: &'static str,
    pub why: &'static str,
}

/// The capabilities gslbd uses after the drop. With the fast path, `CAP_BPF` only when
/// `bpf_calls_need_cap` ([`bpf_calls_need_cap`]): the maps are written on every republish and
/// heartbeat, and the program attached, through file descriptors opened as root, which
/// kernels from 6.5 on let any process use. `CAP_NET_RAW` unless `ping_sockets` (the user's
/// group may open ICMP ping sockets, by `net.ipv4.ping_group_range`), for the ICMP monitors and
/// RTT probes, which open a socket per check (a reload may add them). Never
/// `CAP_NET_ADMIN`: XDP is attached and detached through a bpf link (created on the program's
/// descriptor; closed to detach); nor `CAP_NET_BIND_SERVICE`: a reload never binds (the
/// listening addresses and ports need a restart); nor `CAP_DAC_OVERRIDE`: the pin directory
/// is given to the user instead ([`give_dir`]).
pub fn needed(xdp: bool, bpf_calls_need_cap: bool, ping_sockets: bool) -> Vec<Kept> {
    let mut kept = Vec::new();
    if xdp && bpf_calls_need_cap {
        kept.push(Kept {
            cap: CAP_BPF,
            name: "CAP_BPF",
            why: "bpf() on the maps and the attach (republish, heartbeat, counters): \
                  kernel.unprivileged_bpf_disabled on a kernel before 6.5",
        });
    }
    if !ping_sockets {
        kept.push(Kept {
            cap: CAP_NET_RAW,
            name: "CAP_NET_RAW",
            why: "raw ICMP sockets for ICMP monitors and RTT probes (no ping sockets for the \
                  user's group in net.ipv4.ping_group_range)",
        });
    }
    kept
}

/// Whether `bpf()` calls on descriptors gslbd already holds need `CAP_BPF`: before Linux 6.5
/// every command was refused to an unprivileged caller when `kernel.unprivileged_bpf_disabled`
/// is set; since, only loading programs and creating maps are (done before the drop). True
/// when either cannot be read.
pub fn bpf_calls_need_cap() -> bool {
    let disabled = std::fs::read_to_string("/proc/sys/kernel/unprivileged_bpf_disabled")
        .map_or(true, |v| v.trim() != "0");
    disabled && !kernel_at_least(6, 5)
}

/// Whether the running kernel's release is `major.minor` or later.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    release_at_least(release.trim(), major, minor)
}

fn release_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut parts = release.split(['.', '-']).map(str::parse::<u32>);
    match (parts.next(), parts.next()) {
        (Some(Ok(a)), Some(Ok(b))) => (a, b) >= (major, minor),
        _ => false,
    }
}

/// Whether `gid` may open ICMP ping sockets (`net.ipv4.ping_group_range`, which covers IPv6
/// too). False when the range cannot be read.
pub fn ping_sockets_allowed(gid: u32) -> bool {
    let Ok(text) = std::fs::read_to_string("/proc/sys/net/ipv4/ping_group_range") else {
        return false;
    };
    let mut bounds = text.split_whitespace().map(str::parse::<u32>);
    match (bounds.next(), bounds.next()) {
        (Some(Ok(low)), Some(Ok(high))) => (low..=high).contains(&gid),
        _ => false,
    }
}

/// Why the privileges could not be dropped (gslbd does not start then).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrivilegeError {
    #[error("dropping privileges needs one thread, and gslbd has {0}")]
    Threads(usize),
    #[error("server.user: gslbd must be started as root to become {user:?}")]
    NotRoot { user: String },
    #[error("dropping privileges: {what}")]
    Syscall {
        what: &'static str,
        source: io::Error,
    },
    #[error(
        "server.state_file: {user:?} may not write in {dir}, and gslbd gives a directory to its user \
         only when it made it or it is {default} (the unit's StateDirectory): chown {dir} to \
         {user:?}, or point server.state_file into a directory that does not exist yet or that \
         {user:?} may write in"
    )]
    StateDir {
        dir: PathBuf,
        user: String,
        default: PathBuf,
    },
    #[error("giving {path} to {user:?}")]
    Chown {
        path: PathBuf,
        user: String,
        source: io::Error,
    },
}

fn check(what: &'static str, rc: libc::c_long) -> Result<(), PrivilegeError> {
    if rc == -1 {
        return Err(PrivilegeError::Syscall {
            what,
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Makes the directory of `state_file` (the admin state, `server.state_file`) writable by
/// `user`, who saves it there after the drop (a temporary file renamed over). gslbd gives away
/// only a directory that is its own: one it makes now (it did not exist), or `default`'s (the
/// unit's `StateDirectory=`, made by systemd for gslbd). Any other directory the user may not
/// write in is refused: chowning an operator's directory (`/etc`, `/tmp`...) would hand the
/// user far more than the state file.
pub fn give_state_dir(
    state_file: &Path,
    default: &Path,
    user: &User,
) -> Result<(), PrivilegeError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let dir = state_file.parent().unwrap_or(Path::new("/"));
    let failed = |source| PrivilegeError::Chown {
        path: dir.into(),
        user: user.name.clone(),
        source,
    };
    let chown = || std::os::unix::fs::chown(dir, Some(user.uid), Some(user.gid)).map_err(failed);
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o750)
                .create(dir)
                .map_err(failed)?;
            chown()
        }
        Err(e) => Err(failed(e)),
        Ok(meta) if writable_by(meta.uid(), meta.gid(), meta.mode(), user) => Ok(()),
        Ok(_) if Some(dir) == default.parent() => chown(),
        Ok(_) => Err(PrivilegeError::StateDir {
            dir: dir.into(),
            user: user.name.clone(),
            default: default.parent().unwrap_or(default).into(),
        }),
    }
}

/// Whether `user` may create and rename files in a directory of this owner and mode. A sticky
/// world-writable one (`/tmp`) is not enough: the rename over a file another user left fails.
fn writable_by(uid: u32, gid: u32, mode: u32, user: &User) -> bool {
    let sticky = mode & 0o1000 != 0;
    (uid == user.uid && mode & 0o300 == 0o300)
        || (gid == user.gid && mode & 0o030 == 0o030 && !sticky)
        || (mode & 0o003 == 0o003 && !sticky)
}

/// Gives `dir` (the pin directory) and the pins in it to `user`: it removes the pins on exit
/// without `CAP_DAC_OVERRIDE`, and opens a link pinned by an earlier gslbd (run as root) to
/// swap its program in. Returns the entries it left alone, each named in a warning.
///
/// This runs as root at every start on a directory that was the user's since the last one,
/// so nothing in it is followed ([`PinDir`]: the directory opened `O_NOFOLLOW` and on bpffs,
/// each entry given with `fchownat(AT_SYMLINK_NOFOLLOW)`), and only pins are given. Anything
/// else (a symbolic link, a directory) is not gslbd's, and gslbd uses nothing there but its
/// pins, which [`crate::dataplane::Dataplane::load`] has already checked (refusing the start
/// for a link in a pin's place): so it is skipped with a warning rather than refusing the
/// start. Left alone it is harmless, and the DNS service keeps running.
pub fn give_dir(dir: &Path, user: &User) -> Result<Vec<PathBuf>, PrivilegeError> {
    let failed = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PrivilegeError::Chown {
            path,
            user: user.name.clone(),
            source,
        }
    };
    let pins = PinDir::open(dir).map_err(failed(dir))?;
    pins.chown(user.uid, user.gid).map_err(failed(dir))?;
    let mut skipped = Vec::new();
    for (name, entry) in pins.entries().map_err(failed(dir))? {
        let path = dir.join(&name);
        match entry {
            PinEntry::Pin => pins
                .chown_entry(&name, user.uid, user.gid)
                .map_err(failed(&path))?,
            PinEntry::Other(found) => {
                warn!(path = %path.display(), found, user = %user.name, "not a pin: left as it is, not given to the user");
                skipped.push(path);
            }
            PinEntry::Absent => {}
        }
    }
    Ok(skipped)
}

/// The number of threads of this process (`/proc/self/status`).
pub fn threads() -> io::Result<usize> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| io::Error::other("no Threads line in /proc/self/status"))
}

const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Becomes `user` (uid, gid, and its primary group as the only group) keeping exactly `keep`
/// in the permitted and effective sets and the bounding set, none inheritable or ambient, and
/// sets `no_new_privs`. Must be called by root while the process has a single thread.
pub fn drop_to(user: &User, keep: &[Kept]) -> Result<(), PrivilegeError> {
    let threads = threads().map_err(|source| PrivilegeError::Syscall {
        what: "counting threads",
        source,
    })?;
    if threads != 1 {
        return Err(PrivilegeError::Threads(threads));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(PrivilegeError::NotRoot {
            user: user.name.clone(),
        });
    }
    let mask: u64 = keep.iter().fold(0, |m, k| m | 1 << k.cap);
    let last_cap: u32 = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63);
    // SAFETY (all the calls below): plain system calls with valid arguments; the process has one
    // thread, so what they change per thread holds for the whole process.
    unsafe {
        // While CAP_SETPCAP is still effective.
        for cap in 0..=last_cap {
            if mask & (1 << cap) == 0 {
                check(
                    "PR_CAPBSET_DROP",
                    libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0).into(),
                )?;
            }
        }
        check(
            "PR_CAP_AMBIENT_CLEAR_ALL",
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            )
            .into(),
        )?;
        check("setgroups", libc::setgroups(1, &raw const user.gid).into())?;
        // Keeps the permitted set across the change of uid (the effective set is cleared).
        check(
            "PR_SET_KEEPCAPS",
            libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0).into(),
        )?;
        check(
            "setresgid",
            libc::setresgid(user.gid, user.gid, user.gid).into(),
        )?;
        check(
            "setresuid",
            libc::setresuid(user.uid, user.uid, user.uid).into(),
        )?;
        let mut header = CapHeader {
            version: CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [
            CapData {
                effective: mask as u32,
                permitted: mask as u32,
                inheritable: 0,
            },
            CapData {
                effective: (mask >> 32) as u32,
                permitted: (mask >> 32) as u32,
                inheritable: 0,
            },
        ];
        check(
            "capset",
            libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()),
        )?;
        check(
            "PR_SET_KEEPCAPS",
            libc::prctl(libc::PR_SET_KEEPCAPS, 0, 0, 0, 0).into(),
        )?;
        check(
            "PR_SET_NO_NEW_PRIVS",
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0).into(),
        )?;
    }
    Ok(())
}

/// The permitted, effective and bounding sets of this thread (`/proc/thread-self/status`).
pub fn current_sets() -> io::Result<(u64, u64, u64)> {
    let status = std::fs::read_to_string("/proc/thread-self/status")?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .ok_or_else(|| io::Error::other(format!("no {name} in /proc/thread-self/status")))
    };
    Ok((field("CapPrm:")?, field("CapEff:")?, field("CapBnd:")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_unknown_users_resolve() {
        let root = User::lookup("root").unwrap().expect("root exists");
        assert_eq!((root.uid, root.gid), (0, 0));
        assert_eq!(User::lookup("no-such-user-gslb").unwrap(), None);
        assert_eq!(User::lookup("nul\0name").unwrap(), None);
    }

    #[test]
    fn the_kept_set_follows_what_is_used() {
        let caps =
            |xdp, bpf, ping| -> Vec<u32> { needed(xdp, bpf, ping).iter().map(|k| k.cap).collect() };
        assert_eq!(caps(true, true, false), [CAP_BPF, CAP_NET_RAW]);
        assert_eq!(caps(true, true, true), [CAP_BPF]);
        assert_eq!(caps(true, false, true), Vec::<u32>::new());
        assert_eq!(caps(false, true, false), [CAP_NET_RAW]);
    }

    #[test]
    fn kernel_releases_compare() {
        assert!(release_at_least("6.18.44-fc-v857", 6, 5));
        assert!(release_at_least("6.5.0", 6, 5));
        assert!(!release_at_least("6.1.0-18-amd64", 6, 5));
        assert!(!release_at_least("5.15.0-91-generic", 6, 5));
        assert!(!release_at_least("garbage", 6, 5));
    }

    #[test]
    fn a_state_directory_is_writable_by_its_owner_or_a_shared_group() {
        let user = User {
            name: "gslb".into(),
            uid: 100,
            gid: 200,
        };
        assert!(writable_by(100, 0, 0o700, &user));
        assert!(!writable_by(100, 0, 0o500, &user));
        assert!(!writable_by(0, 0, 0o755, &user));
        assert!(writable_by(0, 200, 0o770, &user));
        assert!(!writable_by(0, 200, 0o1770, &user));
        assert!(!writable_by(0, 0, 0o1777, &user), "/tmp");
        assert!(writable_by(0, 0, 0o777, &user));
    }

    /// The pin directory is the user's between starts, so at the next start, while gslbd is
    /// still root, it may hold anything the user put there: a link to a file of root's, a
    /// directory. Only the pins are given; the rest is left as it is.
    #[test]
    fn give_dir_gives_the_pins_and_follows_no_link() {
        use std::os::unix::fs::MetadataExt;
        if !crate::dataplane::can_load_xdp() {
            return;
        }
        let nobody = User {
            name: "nobody".into(),
            uid: 65534,
            gid: 65534,
        };
        let outside = gslb_tests::TempDir::new("give-dir-outside");
        let shadow = outside.join("shadow");
        std::fs::write(&shadow, "root:secret\n").unwrap();
        let pins = gslb_tests::TempDir::bpffs("give-dir");
        drop(crate::dataplane::Dataplane::load(Some(&pins.0)).expect("loading and pinning"));
        std::os::unix::fs::symlink(&shadow, pins.join("planted")).unwrap();
        std::fs::create_dir(pins.join("sub")).unwrap();

        let given = give_dir(&pins.0, &nobody);

        let owner = |path: &Path| {
            let meta = std::fs::symlink_metadata(path).unwrap();
            (meta.uid(), meta.gid())
        };
        assert_eq!(owner(&shadow), (0, 0), "the link's target was given away");
        assert_eq!(owner(&pins.join("planted")), (0, 0), "the link itself");
        assert_eq!(owner(&pins.join("sub")), (0, 0), "not a pin");
        assert_eq!(owner(&pins.0), (65534, 65534));
        for name in gslb_common::maps::PINNED {
            assert_eq!(owner(&pins.join(name)), (65534, 65534), "{name}");
        }
        let mut skipped = given.expect("the pins are given");
        skipped.sort();
        assert_eq!(
            skipped,
            [pins.join("planted"), pins.join("sub")],
            "skipped, each with a warning"
        );
    }

    #[test]
    fn drop_refuses_a_threaded_process() {
        // The test harness runs tests on threads of their own: never one thread here.
        let nobody = User {
            name: "nobody".into(),
            uid: 65534,
            gid: 65534,
        };
        let _other = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(1)));
        assert!(matches!(
            drop_to(&nobody, &[]),
            Err(PrivilegeError::Threads(n)) if n > 1
        ));
    }
}
