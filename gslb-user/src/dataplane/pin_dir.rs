//! The pin directory (`server.pin_path`) opened so that no symbolic link is ever followed in
//! it: a real directory on a bpffs, opened `O_NOFOLLOW`, whose entries are looked at and
//! changed through that descriptor (`fstatat`, `fchownat` with `AT_SYMLINK_NOFOLLOW`).
//!
//! With `server.user`, the directory is the user's between starts
//! ([`crate::privilege::give_dir`]), so at the next start, while gslbd is still root, it may
//! hold whatever the user put there: a link to `/etc/shadow` for the chown, a link to another
//! program's pin for the adoption (`BPF_OBJ_GET` follows links), a directory. gslbd itself
//! only ever makes pins there, which bpffs shows as regular files.

use std::{
    ffi::{CString, OsStr, OsString},
    io,
    os::{
        fd::{AsRawFd, OwnedFd},
        unix::{ffi::OsStrExt, fs::MetadataExt, fs::OpenOptionsExt},
    },
    path::{Path, PathBuf},
};

/// The pin directory, opened without following a link.
pub struct PinDir {
    dir: OwnedFd,
    path: PathBuf,
}

/// What a name in the pin directory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    Absent,
    /// A pinned map, program or link (a regular file on bpffs: nothing else is).
    Pin,
    /// Anything else, named for a message: "a symbolic link", "a directory"...
    Other(&'static str),
}

impl PinDir {
    /// Opens `path`, refusing a symbolic link (only its last component is checked: the
    /// directories above it are the operator's) and a directory not on a bpffs, where no pin can
    /// be and a hard link to any file could.
    pub fn open(path: &Path) -> io::Result<PinDir> {
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| {
                // O_DIRECTORY | O_NOFOLLOW on a link fails with ENOTDIR (ELOOP without
                // O_DIRECTORY): say which it was.
                let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink());
                if link {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "is a symbolic link: gslbd follows none to its pins",
                    )
                } else {
                    e
                }
            })?;
        // SAFETY: an all-zero statfs is a valid value for fstatfs to overwrite.
        let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: `dir` is an open descriptor and `fs` a valid statfs to write.
        if unsafe { libc::fstatfs(dir.as_raw_fd(), &raw mut fs) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if fs.f_type != libc::BPF_FS_MAGIC {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "is not on a bpf file system (bpffs, e.g. /sys/fs/bpf), where pins are",
            ));
        }
        Ok(PinDir {
            dir: dir.into(),
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What `name` is, its last component not followed.
    pub fn entry(&self, name: impl AsRef<OsStr>) -> io::Result<Entry> {
        let name = c_name(name.as_ref())?;
        // SAFETY: an all-zero stat is a valid value for fstatat to overwrite.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid descriptor, C string and stat for the call.
        let rc = unsafe {
            libc::fstatat(
                self.dir.as_raw_fd(),
                name.as_ptr(),
                &raw mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if rc != 0 {
            let error = io::Error::last_os_error();
            return match error.kind() {
                io::ErrorKind::NotFound => Ok(Entry::Absent),
                _ => Err(error),
            };
        }
        Ok(match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => Entry::Pin,
            libc::S_IFLNK => Entry::Other("a symbolic link"),
            libc::S_IFDIR => Entry::Other("a directory"),
            _ => Entry::Other("neither a pin nor a directory"),
        })
    }

    /// The names in the directory, with what each is.
    pub fn entries(&self) -> io::Result<Vec<(OsString, Entry)>> {
        // Listed by path; every look and change after is through the descriptor, so a name
        // listed from another directory swapped in meanwhile is at worst absent here.
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&self.path)? {
            let name = entry?.file_name();
            let kind = self.entry(&name)?;
            if kind != Entry::Absent {
                out.push((name, kind));
            }
        }
        Ok(out)
    }

    /// Gives the directory itself to `uid:gid`.
    pub fn chown(&self, uid: u32, gid: u32) -> io::Result<()> {
        // SAFETY: a valid descriptor.
        cvt(unsafe { libc::fchown(self.dir.as_raw_fd(), uid, gid) })
    }

    /// Gives the entry `name` (never what a link points to) to `uid:gid`.
    pub fn chown_entry(&self, name: &OsStr, uid: u32, gid: u32) -> io::Result<()> {
        let name = c_name(name)?;
        // SAFETY: valid descriptor and C string.
        cvt(unsafe {
            libc::fchownat(
                self.dir.as_raw_fd(),
                name.as_ptr(),
                uid,
                gid,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })
    }

    /// Makes the directory this process's (owner and group) and writable by it alone, when it
    /// is not: the loader takes the user's directory back before it checks a pin and then
    /// opens it by path, so that nothing in it changes between the two.
    pub fn take(&self) -> io::Result<()> {
        let meta = std::fs::File::from(self.dir.try_clone()?).metadata()?;
        // SAFETY: no preconditions.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        if (meta.uid(), meta.gid()) != (uid, gid) {
            self.chown(uid, gid)?;
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o022 != 0 {
            // SAFETY: a valid descriptor.
            cvt(unsafe { libc::fchmod(self.dir.as_raw_fd(), mode & !0o022) })?;
        }
        Ok(())
    }
}

/// Opens the pin directory `dir` for the loader, as a [`super::DataplaneError::PinDir`] when
/// it cannot be trusted.
pub(super) fn open(dir: &Path) -> super::Result<PinDir> {
    PinDir::open(dir).map_err(|source| super::DataplaneError::PinDir {
        path: dir.into(),
        source,
    })
}

/// Whether the pin `name` is there: true for a pin, false when absent, and an error for
/// anything else, which gslbd never opens.
pub(super) fn has_pin(pins: &PinDir, name: &str) -> super::Result<bool> {
    let path = || pins.path().join(name);
    match pins.entry(name) {
        Ok(Entry::Absent) => Ok(false),
        Ok(Entry::Pin) => Ok(true),
        Ok(Entry::Other(found)) => Err(super::DataplaneError::NotAPin {
            path: path(),
            found,
        }),
        Err(source) => Err(super::DataplaneError::PinDir {
            path: path(),
            source,
        }),
    }
}

/// A name within the directory: one component, never a path.
fn c_name(name: &OsStr) -> io::Result<CString> {
    if name.as_bytes().contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a pin name is one path component",
        ));
    }
    CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn cvt(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
