use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Runs a command quietly and returns its stdout; on failure shows everything it printed.
pub(crate) fn run_captured(step: &str, cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("{step}: cannot start {}", show(cmd)))?;
    if !out.status.success() {
        eprint!("{}", String::from_utf8_lossy(&out.stdout));
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        bail!("{step}: {} failed ({})", show(cmd), out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a command with its output forwarded, for the long steps the user wants to watch.
pub(crate) fn run_inherit(step: &str, cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("{step}: cannot start {}", show(cmd)))?;
    if !status.success() {
        bail!("{step}: {} failed ({status})", show(cmd));
    }
    Ok(())
}

fn show(cmd: &Command) -> String {
    let mut s = format!("`{}", cmd.get_program().to_string_lossy());
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s.push('`');
    s
}

/// The workspace's cargo target directory (`CARGO_TARGET_DIR` when set).
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

/// Setup, then a release build of gslbd and gslbctl (`step` names it in the output); the
/// directory that holds them.
pub(crate) fn release_binaries(step: &str) -> Result<PathBuf> {
    let env = crate::setup::run()?;
    run_inherit(
        &format!("{step} build"),
        env.cargo()
            .args(["build", "--release", "-p", "gslb-user", "--bins"]),
    )?;
    Ok(target_dir(&env.root).join("release"))
}
