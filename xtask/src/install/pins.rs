//! What a gslbd leaves in the kernel: its pinned XDP links (`link-<interface>`, which keep the
//! program attached after gslbd exits with `--keep-attached` or is killed) and its pinned maps
//! in `server.pin_path`. Removing a link's pin drops the kernel's last reference to the link,
//! which detaches XDP from that interface: the same thing gslbd's own clean stop does.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use gslb_common::maps;

use super::say;

/// gslbd's default `server.pin_path`.
const DEFAULT_PIN_PATH: &str = "/sys/fs/bpf/gslb";
/// The prefix of gslbd's link pins, followed by the interface name (dataplane/loader.rs).
const LINK_PREFIX: &str = "link-";
/// The kernel frees an unpinned link after an RCU grace period, not at once.
const DETACH_WAIT: Duration = Duration::from_secs(3);

/// The pids of processes running `exe`.
pub(super) fn running(exe: &Path) -> Vec<u32> {
    let exe = fs::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
    let deleted = PathBuf::from(format!("{} (deleted)", exe.display()));
    let Ok(procs) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe || p == deleted)
        })
        .collect()
}

/// `server.pin_path` of the configuration at `config`, or gslbd's default when there is no
/// configuration or it does not set one.
pub(super) fn configured_pin_path(config: &Path) -> Result<PathBuf> {
    let text = match fs::read_to_string(config) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(DEFAULT_PIN_PATH.into()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", config.display())),
    };
    let table: toml::Table = toml::from_str(&text).with_context(|| {
        format!(
            "{}: cannot read server.pin_path (pass --pin-path)",
            config.display()
        )
    })?;
    match table.get("server").and_then(|s| s.get("pin_path")) {
        None => Ok(DEFAULT_PIN_PATH.into()),
        Some(toml::Value::String(p)) => Ok(p.into()),
        Some(other) => bail!(
            "{}: server.pin_path is {other}, not a path (pass --pin-path)",
            config.display()
        ),
    }
}

/// Detaches and unpins what a gslbd left in `dir`: every link pin (XDP leaves its interface)
/// and the maps gslbd pins; the directory goes when nothing else is in it. Fails when an
/// interface still runs XDP afterwards (another process holds the link: a running gslbd).
pub(super) fn remove(dir: &Path) -> Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            say("uninstall", &format!("no pins at {}", dir.display()));
            return Ok(());
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    let mut still_attached = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(interface) = name.strip_prefix(LINK_PREFIX) else {
            continue;
        };
        fs::remove_file(entry.path())
            .with_context(|| format!("unpinning {}", entry.path().display()))?;
        match wait_detached(interface) {
            None => say(
                "uninstall",
                &format!(
                    "unpinned {} (no interface {interface} here)",
                    entry.path().display()
                ),
            ),
            Some(true) => say(
                "uninstall",
                &format!(
                    "unpinned {}: XDP detached from {interface}",
                    entry.path().display()
                ),
            ),
            Some(false) => still_attached.push(interface.to_owned()),
        }
    }
    for name in maps::PINNED {
        let path = dir.join(name);
        match fs::remove_file(&path) {
            Ok(()) => say("uninstall", &format!("unpinned {}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("unpinning {}", path.display())),
        }
    }
    if fs::remove_dir(dir).is_ok() {
        say("uninstall", &format!("removed {}", dir.display()));
    } else {
        let left: Vec<String> = fs::read_dir(dir)
            .map(|e| {
                e.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        say(
            "uninstall",
            &format!(
                "kept {}: it holds pins that are not gslbd's ({})",
                dir.display(),
                left.join(", ")
            ),
        );
    }
    if !still_attached.is_empty() {
        bail!(
            "XDP is still attached to {} after its pin was removed: another process holds the link (a gslbd started by hand?)",
            still_attached.join(", ")
        );
    }
    Ok(())
}

/// Waits until `interface` runs no XDP program: `Some(true)` when it does not (any more),
/// `Some(false)` when it still does after [`DETACH_WAIT`], `None` without such an interface.
fn wait_detached(interface: &str) -> Option<bool> {
    let start = Instant::now();
    loop {
        match xdp_attached(interface) {
            None => return None,
            Some(false) => return Some(true),
            Some(true) if start.elapsed() >= DETACH_WAIT => return Some(false),
            Some(true) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Whether `interface` (in this network namespace) runs an XDP program; `None` when there is
/// no such interface.
pub(super) fn xdp_attached(interface: &str) -> Option<bool> {
    let out = Command::new("ip")
        .args(["-j", "link", "show", "dev", interface])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).contains("\"xdp\":"))
}
