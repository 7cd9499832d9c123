//! `cargo xtask install` and `uninstall`: gslbd and gslbctl, the systemd unit
//! (contrib/systemd/gslbd.service), docs/operations.md and a sample configuration, laid out
//! under a prefix ([`Layout`]); uninstall also detaches and unpins what a gslbd left attached
//! (`pins`). Neither starts nor stops a service.

mod pins;
#[cfg(test)]
mod tests;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::util;

/// Where `install` puts things unless told `--prefix`.
const DEFAULT_PREFIX: &str = "/usr/local";
/// The binaries installed, from gslb-user.
const BINARIES: [&str; 2] = ["gslbd", "gslbctl"];
const UNIT_NAME: &str = "gslbd.service";
/// The unit as shipped: its paths are those of the default prefix, rewritten for another one.
const UNIT: &str = include_str!("../../../contrib/systemd/gslbd.service");
const OPERATIONS: &str = include_str!("../../../docs/operations.md");
/// The sample configuration: a small example whose comments hold on any host.
const SAMPLE: &str = include_str!("../../../examples/gslb-domain.toml");
const SAMPLE_HEADER: &str = "\
# Installed by `cargo xtask install` from examples/gslb-domain.toml of the gslb repository; the
# examples/ named below are there too, one for every feature. Edit [server] listen to this
# host's addresses (and set server.interface for the XDP fast path) before starting gslbd.
#
";
const CONFIG_NAME: &str = "gslbd.toml";

/// Where each installed file goes. The default prefix (`/usr/local`, also `/usr`) keeps the
/// configuration in /etc/gslb; any other prefix holds everything, so that a test or a staging
/// tree installs without touching the system. The unit names the installed paths.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(crate) prefix: PathBuf,
    pub(crate) bin: PathBuf,
    pub(crate) unit_dir: PathBuf,
    pub(crate) doc_dir: PathBuf,
    pub(crate) config_dir: PathBuf,
    /// The system's own prefix: systemd is told about the unit (when it runs).
    system: bool,
}

impl Layout {
    pub(crate) fn new(prefix: Option<&Path>) -> Result<Layout> {
        let prefix = match prefix {
            None => PathBuf::from(DEFAULT_PREFIX),
            Some(p) => std::path::absolute(p)
                .with_context(|| format!("--prefix {}: not a usable path", p.display()))?,
        };
        let text = prefix.to_string_lossy();
        // The unit names these paths unquoted; systemd would read such characters as
        // separators, quotes or specifiers.
        if text.contains(|c: char| c.is_whitespace() || "\"'\\%$;".contains(c)) {
            bail!(
                "--prefix {text:?}: whitespace, quotes, '\\', '%', '$' and ';' would need escaping in the systemd unit"
            );
        }
        let system = prefix == Path::new("/usr") || prefix == Path::new(DEFAULT_PREFIX);
        let config_dir = if system {
            PathBuf::from("/etc/gslb")
        } else {
            prefix.join("etc/gslb")
        };
        Ok(Layout {
            bin: prefix.join("bin"),
            unit_dir: prefix.join("lib/systemd/system"),
            doc_dir: prefix.join("share/doc/gslb"),
            config_dir,
            prefix,
            system,
        })
    }

    pub(crate) fn unit(&self) -> PathBuf {
        self.unit_dir.join(UNIT_NAME)
    }

    pub(crate) fn config(&self) -> PathBuf {
        self.config_dir.join(CONFIG_NAME)
    }

    fn operations(&self) -> PathBuf {
        self.doc_dir.join("operations.md")
    }

    /// The shipped unit with this layout's paths.
    pub(crate) fn unit_text(&self) -> String {
        UNIT.replace("/usr/local/", &format!("{}/", self.prefix.display()))
            .replace("/etc/gslb/", &format!("{}/", self.config_dir.display()))
    }

    /// Whether systemd manages this machine (and so should hear of a changed unit).
    fn systemd(&self) -> bool {
        self.system && Path::new("/run/systemd/system").is_dir()
    }
}

/// `cargo xtask install`: setup, a release build, then [`install`] from it.
pub(crate) fn run_install(prefix: Option<&Path>) -> Result<()> {
    let layout = Layout::new(prefix)?;
    install(&layout, &util::release_binaries("install")?)?;
    if layout.system {
        say(
            "install",
            &format!(
                "done; edit {} then `systemctl enable --now gslbd`",
                layout.config().display()
            ),
        );
    }
    Ok(())
}

/// `cargo xtask uninstall`.
pub(crate) fn run_uninstall(prefix: Option<&Path>, pin_path: Option<&Path>) -> Result<()> {
    uninstall(&Layout::new(prefix)?, pin_path)
}

/// One line of progress: `step` is `install` or `uninstall`.
fn say(step: &str, what: &str) {
    println!("{step}: {what}");
}

/// Installs the binaries found in `from` (a cargo profile directory) and the files shipped
/// in the repository into `layout`. The configuration is written only where there is none.
pub(crate) fn install(layout: &Layout, from: &Path) -> Result<()> {
    for name in BINARIES {
        let source = from.join(name);
        if !source.is_file() {
            bail!("install: {} is missing (not built?)", source.display());
        }
        copy_executable(&source, &layout.bin.join(name))?;
    }
    write_file(&layout.unit(), &layout.unit_text(), 0o644)?;
    write_file(&layout.operations(), OPERATIONS, 0o644)?;
    let config = layout.config();
    if config.exists() {
        say(
            "install",
            &format!(
                "kept {} (an existing configuration is never overwritten)",
                config.display()
            ),
        );
    } else {
        write_file(&config, &sample_config(), 0o644)?;
    }
    if layout.systemd() {
        util::run_captured("install", Command::new("systemctl").arg("daemon-reload"))?;
        say(
            "install",
            "systemd reloaded its units (nothing was started)",
        );
    }
    Ok(())
}

/// The sample configuration as installed: the example with a header saying where it is from.
pub(crate) fn sample_config() -> String {
    format!("{SAMPLE_HEADER}{SAMPLE}")
}

/// Removes what [`install`] put into `layout`, after detaching and unpinning the fast path a
/// gslbd left in the pin directory (`pin_path`, else the configuration's `server.pin_path`).
/// Refuses while the installed gslbd runs: uninstall stops nothing. The configuration stays.
pub(crate) fn uninstall(layout: &Layout, pin_path: Option<&Path>) -> Result<()> {
    let gslbd = layout.bin.join("gslbd");
    let running = pins::running(&gslbd);
    if !running.is_empty() {
        bail!(
            "uninstall: {} runs (pid {}); stop it first (`systemctl stop gslbd`): uninstall stops nothing it did not start",
            gslbd.display(),
            running
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if layout.systemd() && layout.unit().exists() {
        // Only the enablement symlinks go; the service is not running (checked above).
        util::run_captured(
            "uninstall",
            Command::new("systemctl").args(["disable", UNIT_NAME]),
        )?;
    }
    let pin_dir = match pin_path {
        Some(p) => p.to_path_buf(),
        None => pins::configured_pin_path(&layout.config())?,
    };
    let detached = pins::remove(&pin_dir);
    for path in BINARIES
        .iter()
        .map(|name| layout.bin.join(name))
        .chain([layout.unit(), layout.operations()])
    {
        match fs::remove_file(&path) {
            Ok(()) => say("uninstall", &format!("removed {}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                say("uninstall", &format!("{} was not there", path.display()));
            }
            Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
        }
    }
    // Only when empty: something else may have put files there.
    let _ = fs::remove_dir(&layout.doc_dir);
    if layout.systemd() {
        util::run_captured("uninstall", Command::new("systemctl").arg("daemon-reload"))?;
    }
    say(
        "uninstall",
        &format!(
            "kept {} (the configuration is yours: remove it by hand if it should go)",
            layout.config_dir.display()
        ),
    );
    detached
}

/// Copies a binary beside its destination and renames it into place: a running gslbd keeps
/// its old file (writing into an executing file fails with ETXTBSY), the next start runs the
/// new one.
fn copy_executable(source: &Path, dest: &Path) -> Result<()> {
    let dir = dest.parent().expect("a file in a directory");
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = dest.file_name().expect("a file name").to_string_lossy();
    let staged = dir.join(format!(".{name}.new"));
    fs::copy(source, &staged)
        .with_context(|| format!("copying {} to {}", source.display(), staged.display()))?;
    fs::set_permissions(&staged, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("chmod {}", staged.display()))?;
    fs::rename(&staged, dest)
        .with_context(|| format!("renaming {} to {}", staged.display(), dest.display()))?;
    say("install", &format!("installed {}", dest.display()));
    Ok(())
}

fn write_file(path: &Path, text: &str, mode: u32) -> Result<()> {
    let dir = path.parent().expect("a file in a directory");
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", path.display()))?;
    say("install", &format!("installed {}", path.display()));
    Ok(())
}
