//! `cargo xtask run`: gslbd built from this checkout (release), in the foreground, on a real
//! interface, for a first try on an edge node. Ctrl-C reaches gslbd too (the terminal signals
//! the whole foreground group); xtask waits while gslbd detaches XDP and removes its pins,
//! unless `--keep-attached` was among the extra arguments.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::util;

pub(crate) fn run(interface: &str, config: &Path, extra: &[String]) -> Result<()> {
    preflight(interface, config)?;
    let gslbd = util::release_binaries("run")?.join("gslbd");
    // gslbd gets the terminal's SIGINT itself; xtask must outlive it to report how it ended.
    ctrlc::set_handler(|| {}).context("installing the Ctrl-C handler")?;
    println!(
        "run: {} on {interface} with {} (Ctrl-C stops it)",
        gslbd.display(),
        config.display()
    );
    let mut cmd = Command::new(&gslbd);
    cmd.arg("--config")
        .arg(config)
        .args(["--interface", interface])
        .args(extra);
    util::run_inherit("run", &mut cmd)
}

/// What can be checked before a build: the interface exists in this network namespace and
/// the configuration file is there.
pub(crate) fn preflight(interface: &str, config: &Path) -> Result<()> {
    if interface.is_empty() || interface.contains('/') || interface == "." || interface == ".." {
        bail!("run: {interface:?} is not an interface name");
    }
    if !Path::new("/sys/class/net").join(interface).exists() {
        bail!(
            "run: there is no interface {interface:?} here (`ip link` lists them); gslbd attaches its XDP program to a real one"
        );
    }
    if !config.is_file() {
        bail!("run: the configuration {} does not exist", config.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::preflight;

    const CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/gslb-domain.toml");

    #[test]
    fn run_refuses_an_interface_that_does_not_exist_before_building() {
        let error = format!(
            "{:#}",
            preflight("gslb-nosuch0", Path::new(CONFIG)).unwrap_err()
        );
        assert!(
            error.contains("no interface \"gslb-nosuch0\"") && error.contains("ip link"),
            "{error}"
        );
        for bad in ["", "../lo", ".."] {
            let error = format!("{:#}", preflight(bad, Path::new(CONFIG)).unwrap_err());
            assert!(
                error.contains("is not an interface name"),
                "{bad:?}: {error}"
            );
        }
        // Every Linux network namespace has lo: the checks pass, and a missing file is named.
        preflight("lo", Path::new(CONFIG)).unwrap();
        let error = format!(
            "{:#}",
            preflight("lo", Path::new("/nonexistent/gslbd.toml")).unwrap_err()
        );
        assert!(
            error.contains("/nonexistent/gslbd.toml does not exist"),
            "{error}"
        );
    }
}
