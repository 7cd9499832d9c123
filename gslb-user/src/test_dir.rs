//! A directory for one test, unique to the process and the tag, removed with everything in it
//! when dropped (even when the test fails): under the system's temporary directory, or under
//! the bpffs at `/sys/fs/bpf` for tests that pin.

use std::path::{Path, PathBuf};

pub(crate) struct TestDir(pub PathBuf);

impl TestDir {
    /// A fresh directory `gslb-test-TAG-PID` under the temporary directory.
    pub(crate) fn new(tag: &str) -> TestDir {
        TestDir::under(&std::env::temp_dir(), tag)
    }

    /// A fresh directory `gslb-test-TAG-PID` on the host's bpffs (root only).
    pub(crate) fn bpffs(tag: &str) -> TestDir {
        TestDir::under(Path::new("/sys/fs/bpf"), tag)
    }

    fn under(parent: &Path, tag: &str) -> TestDir {
        let dir = parent.join(format!("gslb-test-{tag}-{}", std::process::id()));
        // A leftover of a killed run of the same process id.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        TestDir(dir)
    }

    pub(crate) fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        // Follows no symbolic link: a link planted by a test goes, its target stays.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
