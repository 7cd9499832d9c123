//! install and uninstall into a temporary prefix (stand-in binaries: install copies files, it
//! does not run them), `systemd-analyze verify` on the installed unit, and uninstall detaching
//! the XDP program a real gslbd (the debug build) left attached with `--keep-attached`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use gslb_common::maps;
use gslb_tests::{GslbdLab, SERVER_IF, TempDir, privileged, skip};

use super::{Layout, install, pins, sample_config, uninstall};

fn mode(path: &Path) -> u32 {
    fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// A directory with executables named like the real binaries, each with its own content.
fn stand_ins(dir: &Path) -> PathBuf {
    let from = dir.join("built");
    fs::create_dir_all(&from).unwrap();
    for name in super::BINARIES {
        let path = from.join(name);
        fs::write(&path, format!("#!/bin/sh\necho {name}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o700)).unwrap();
    }
    from
}

#[test]
fn install_lays_out_a_prefix_keeps_a_configuration_and_uninstall_removes_the_rest() {
    let tmp = TempDir::new("xtask-install");
    let from = stand_ins(&tmp.0);
    let prefix = tmp.0.join("prefix");
    let layout = Layout::new(Some(&prefix)).unwrap();
    install(&layout, &from).unwrap();

    for name in super::BINARIES {
        let installed = prefix.join("bin").join(name);
        assert_eq!(
            fs::read(&installed).unwrap(),
            fs::read(from.join(name)).unwrap()
        );
        assert_eq!(mode(&installed), 0o755, "{}", installed.display());
    }
    let unit = prefix.join("lib/systemd/system/gslbd.service");
    let text = fs::read_to_string(&unit).unwrap();
    let exec = format!(
        "ExecStart={}/bin/gslbd --config {}/etc/gslb/gslbd.toml --control /run/gslb/gslbd.sock",
        prefix.display(),
        prefix.display()
    );
    assert!(text.lines().any(|l| l == exec), "no {exec:?} in\n{text}");
    let default_paths: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == '=')
        .map(|t| t.trim_start_matches("file://"))
        .filter(|t| t.starts_with("/usr/local/") || t.starts_with("/etc/gslb/"))
        .collect();
    assert!(
        default_paths.is_empty(),
        "default paths left in the unit: {default_paths:?}"
    );
    assert_eq!(mode(&unit), 0o644);
    let doc = prefix.join("share/doc/gslb/operations.md");
    assert_eq!(mode(&doc), 0o644);
    let config = prefix.join("etc/gslb/gslbd.toml");
    assert_eq!(fs::read_to_string(&config).unwrap(), sample_config());
    assert_eq!(mode(&config), 0o644);
    // The header is comments only: the sample is the example's configuration.
    let parse = |s: &str| s.parse::<toml::Table>().unwrap();
    assert_eq!(
        parse(&sample_config()),
        parse(include_str!("../../../examples/gslb-domain.toml"))
    );

    verify_unit(&unit);

    // A second install keeps the operator's configuration and updates the rest.
    let edited = format!("{}\n# edited by the operator\n", sample_config());
    fs::write(&config, &edited).unwrap();
    fs::write(prefix.join("bin/gslbd"), "old").unwrap();
    install(&layout, &from).unwrap();
    assert_eq!(fs::read_to_string(&config).unwrap(), edited);
    assert_eq!(
        fs::read(prefix.join("bin/gslbd")).unwrap(),
        fs::read(from.join("gslbd")).unwrap()
    );

    // No pins there: uninstall only removes files.
    let pin_dir = tmp.0.join("no-pins");
    uninstall(&layout, Some(&pin_dir)).unwrap();
    for gone in [
        prefix.join("bin/gslbd"),
        prefix.join("bin/gslbctl"),
        unit,
        doc,
    ] {
        assert!(!gone.exists(), "{} still there", gone.display());
    }
    assert_eq!(fs::read_to_string(&config).unwrap(), edited);
}

/// `systemd-analyze verify` on the installed unit: no error and no warning; and its sandbox
/// (`systemd-analyze security`) at an exposure of 5.0 or less ("OK"; the unit is at 4.6, a
/// unit without hardening at 9.6).
fn verify_unit(unit: &Path) {
    let out = match Command::new("systemd-analyze")
        .arg("verify")
        .arg(unit)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            skip(&format!(
                "systemd-analyze verify: cannot run systemd-analyze ({e}; package systemd)"
            ));
            return;
        }
    };
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify {}: {}\n{said}",
        unit.display(),
        out.status
    );
    // The threshold is on systemd's internal 0..=100 scale (the printed level times ten).
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--threshold=50"])
        .arg(unit)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "systemd-analyze security {}: exposure above 5.0\n{}",
        unit.display(),
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn uninstall_refuses_while_the_installed_gslbd_runs() {
    let tmp = TempDir::new("xtask-running");
    let from = tmp.0.join("built");
    fs::create_dir_all(&from).unwrap();
    // A real executable that stays up: sleep, installed as gslbd.
    fs::copy("/bin/sleep", from.join("gslbd")).unwrap();
    fs::copy("/bin/sleep", from.join("gslbctl")).unwrap();
    let layout = Layout::new(Some(&tmp.0.join("prefix"))).unwrap();
    install(&layout, &from).unwrap();
    let mut child = Command::new(layout.bin.join("gslbd"))
        .arg("30")
        .spawn()
        .unwrap();
    let refused = uninstall(&layout, Some(&tmp.0.join("no-pins")));
    let _ = child.kill();
    let _ = child.wait();
    let error = format!("{:#}", refused.expect_err("uninstall went ahead"));
    assert!(
        error.contains(&format!("pid {}", child.id())) && error.contains("stop it first"),
        "{error}"
    );
    assert!(layout.bin.join("gslbd").exists());
    uninstall(&layout, Some(&tmp.0.join("no-pins"))).unwrap();
    assert!(!layout.bin.join("gslbd").exists());
}

#[test]
fn uninstall_reads_the_pin_path_of_the_installed_configuration() {
    let tmp = TempDir::new("xtask-pin-path");
    let config = tmp.0.join("gslbd.toml");
    assert_eq!(
        pins::configured_pin_path(&config).unwrap(),
        Path::new("/sys/fs/bpf/gslb")
    );
    fs::write(&config, "[server]\nlisten = [\"127.0.0.1\"]\n").unwrap();
    assert_eq!(
        pins::configured_pin_path(&config).unwrap(),
        Path::new("/sys/fs/bpf/gslb")
    );
    fs::write(
        &config,
        "[server]\nlisten = [\"127.0.0.1\"]\npin_path = \"/sys/fs/bpf/edge\"\n",
    )
    .unwrap();
    assert_eq!(
        pins::configured_pin_path(&config).unwrap(),
        Path::new("/sys/fs/bpf/edge")
    );
    fs::write(&config, "[server\n").unwrap();
    let error = format!("{:#}", pins::configured_pin_path(&config).unwrap_err());
    assert!(error.contains("pass --pin-path"), "{error}");
}

/// The debug gslbd beside this test binary (target/debug/deps/..), built by `cargo test` of
/// the workspace (gslb-user's tests need it) or `cargo build -p gslb-user --bins`.
fn debug_gslbd() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let gslbd = exe.parent()?.parent()?.join("gslbd");
    gslbd.is_file().then_some(gslbd)
}

#[test]
fn uninstall_detaches_the_xdp_program_gslbd_left_attached_and_unpins_it() {
    const TEST: &str = "uninstall_detaches_the_xdp_program_gslbd_left_attached_and_unpins_it";
    if !privileged(TEST) {
        return;
    }
    let Some(gslbd) = debug_gslbd() else {
        skip(&format!(
            "{TEST}: no debug gslbd beside this test (cargo build -p gslb-user --bins)"
        ));
        return;
    };
    let config = include_str!("../../../examples/gslb-domain.toml");
    let mut lab = GslbdLab::new("xtun", config);
    let mut cmd = lab.with_control(&gslbd);
    cmd.arg("--keep-attached");
    let pid = lab.start(cmd);
    lab.stop(pid);
    let ns = lab.server_ns.clone();
    let pins = lab.pins.clone();
    // What --keep-attached leaves: XDP on the interface, held by the link pin.
    assert_eq!(
        lab.in_netns(&ns, || pins::xdp_attached(SERVER_IF)),
        Some(true),
        "gslbd --keep-attached left no XDP on {SERVER_IF}"
    );
    assert!(pins.join(format!("link-{SERVER_IF}")).exists());
    assert!(pins.join(maps::CONFIG).exists());

    let tmp = TempDir::new("xtask-unpin");
    let layout = Layout::new(Some(&tmp.0)).unwrap();
    lab.in_netns(&ns, || uninstall(&layout, Some(&pins)))
        .unwrap();
    assert_eq!(
        lab.in_netns(&ns, || pins::xdp_attached(SERVER_IF)),
        Some(false),
        "XDP still on {SERVER_IF} after uninstall"
    );
    assert!(!pins.exists(), "{} still there", pins.display());
}

#[test]
fn the_default_prefix_keeps_the_configuration_in_etc_and_the_shipped_paths() {
    let layout = Layout::new(None).unwrap();
    assert_eq!(layout.bin, Path::new("/usr/local/bin"));
    assert_eq!(
        layout.unit(),
        Path::new("/usr/local/lib/systemd/system/gslbd.service")
    );
    assert_eq!(layout.config(), Path::new("/etc/gslb/gslbd.toml"));
    // The unit as shipped names the default layout's paths: nothing is rewritten.
    assert_eq!(layout.unit_text(), super::UNIT);
    assert!(super::UNIT.lines().any(|l| l
        == "ExecStart=/usr/local/bin/gslbd --config /etc/gslb/gslbd.toml --control /run/gslb/gslbd.sock"));
    // A path the unit could not name unquoted is refused before anything is written.
    let error = format!(
        "{:#}",
        Layout::new(Some(Path::new("/tmp/a b"))).unwrap_err()
    );
    assert!(error.contains("escaping in the systemd unit"), "{error}");
}
