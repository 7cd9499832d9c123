//! Idempotent machine setup: each step checks first and says whether it acted or skipped.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::util::run_captured;

const APT_PACKAGES: &[&str] = &[
    "clang-19",
    "llvm-19",
    "libbpf-dev",
    "bpftool",
    "ethtool",
    "dnsutils",
    "knot-dnsutils",
    "dnsperf",
    // Measured beside gslb by `cargo xtask bench dnsperf` (Knot) and `cargo xtask bench peers`
    // (Knot and NSD), on the same zone.
    "knot",
    "nsd",
    // kzonecheck, which checks the zone files gslb-user/tests/it/e2e/differential reads
    // (nsd-checkzone comes with nsd).
    "knot-dnssecutils",
    // The resolver (send-client-subnet, subnet cache) of
    // gslb-user/tests/it/e2e/ecs_unbound_netns.rs.
    "unbound",
    // The load monitors' stub_status backend in gslb-user/tests/it/load_nginx.rs.
    "nginx",
    // systemd-analyze, which verifies the installed unit in xtask's install tests.
    "systemd",
    // The admin endpoint's test (gslb-user/tests/it/admin/): a real Prometheus scraping
    // gslbd, and promtool (in the same package) checking the exposition.
    "prometheus",
    "iproute2",
    "tcpdump",
    "util-linux",
    "iputils-ping",
    "ca-certificates",
    "build-essential",
    "pkg-config",
];

const BPF_LINKER: &str = "bpf-linker@0.13.0";
const CARGO_FUZZ: &str = "cargo-fuzz@0.13.2";
const BPFFS: &str = "/sys/fs/bpf";

/// What later steps need to know about the machine once it is set up.
pub(crate) struct Env {
    pub root: PathBuf,
    cargo_home: PathBuf,
}

impl Env {
    /// `cargo` in the workspace root, with bpf-linker on PATH for the eBPF build.
    /// Callers pass no `--workspace`: it would add gslb-ebpf, which builds only for the BPF
    /// target; in the root, plain cargo takes the default members.
    pub(crate) fn cargo(&self) -> Command {
        // The cargo that started xtask is the pinned toolchain's; reuse it rather than whatever
        // `cargo` PATH finds.
        let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        let mut path = vec![self.cargo_home.join("bin")];
        path.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        cmd.current_dir(&self.root).env(
            "PATH",
            std::env::join_paths(path).expect("PATH entries have no ':'"),
        );
        cmd
    }
}

pub(crate) fn run() -> Result<Env> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits inside the workspace")
        .to_path_buf();
    let cargo_home = match std::env::var_os("CARGO_HOME") {
        Some(h) => PathBuf::from(h),
        None => {
            PathBuf::from(std::env::var_os("HOME").context("neither CARGO_HOME nor HOME is set")?)
                .join(".cargo")
        }
    };
    let channel = toolchain_channel(&root)?;

    apt()?;
    let sysroot = toolchain(&channel)?;
    bpf_linker(&channel, &sysroot, &cargo_home)?;
    cargo_fuzz(&channel, &cargo_home)?;
    bpffs()?;
    Ok(Env { root, cargo_home })
}

/// cargo-fuzz, for the bounded fuzz run of `cargo xtask test`.
fn cargo_fuzz(channel: &str, cargo_home: &Path) -> Result<()> {
    const STEP: &str = "cargo-fuzz";
    let bin = cargo_home.join("bin/cargo-fuzz");
    if bin.exists() {
        say(STEP, &format!("{} present, skipped", bin.display()));
        return Ok(());
    }
    say(STEP, &format!("installing {CARGO_FUZZ}"));
    run_captured(
        STEP,
        rustup_run(channel, "cargo")
            .args(["install", "--locked", "--root"])
            .arg(cargo_home)
            .arg(CARGO_FUZZ),
    )?;
    Ok(())
}

fn say(step: &str, what: &str) {
    println!("setup: {step}: {what}");
}

fn apt() -> Result<()> {
    const STEP: &str = "apt";
    // dpkg-query exits non-zero when any package is unknown but still reports the others.
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Package} ${Status}\n"])
        .args(APT_PACKAGES)
        .output()
        .context("apt: cannot run dpkg-query (setup supports Debian only)")?;
    let report = String::from_utf8_lossy(&out.stdout);
    let installed: Vec<&str> = report
        .lines()
        .filter_map(|l| l.strip_suffix(" install ok installed"))
        .collect();
    let missing: Vec<&str> = APT_PACKAGES
        .iter()
        .copied()
        .filter(|p| !installed.contains(p))
        .collect();
    if missing.is_empty() {
        say(
            STEP,
            &format!("all {} packages installed, skipped", APT_PACKAGES.len()),
        );
        return Ok(());
    }
    require_root(STEP, &format!("install {}", missing.join(" ")))?;
    say(STEP, &format!("installing {}", missing.join(" ")));
    let apt_get = || {
        let mut c = Command::new("apt-get");
        c.env("DEBIAN_FRONTEND", "noninteractive");
        c
    };
    run_captured(STEP, apt_get().arg("update"))?;
    run_captured(
        STEP,
        apt_get()
            .args(["install", "-y", "--no-install-recommends"])
            .args(&missing),
    )?;
    Ok(())
}

/// Installs the pinned toolchain if needed and returns its sysroot.
fn toolchain(channel: &str) -> Result<PathBuf> {
    let step = format!("toolchain {channel}");
    // The eBPF crate is built with -Z build-std, which needs rust-src.
    let sysroot = || -> Option<PathBuf> {
        let out = rustup_run(channel, "rustc")
            .args(["--print", "sysroot"])
            .output()
            .ok()?;
        let s = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
        (out.status.success() && s.join("lib/rustlib/src").is_dir()).then_some(s)
    };
    if let Some(s) = sysroot() {
        say(&step, "installed with rust-src, skipped");
        return Ok(s);
    }
    say(&step, "installing");
    run_captured(
        &step,
        Command::new("rustup")
            .args(["toolchain", "install", channel, "--profile", "minimal"])
            .args(["-c", "rust-src", "-c", "clippy", "-c", "rustfmt"]),
    )?;
    sysroot().with_context(|| format!("{step}: rust-src still missing after install"))
}

/// bpf-linker must load the very LLVM that rustc uses, so it is built against the toolchain's
/// own libLLVM through a prefix of symlinks; the binary keeps that prefix as RUNPATH.
fn bpf_linker(channel: &str, sysroot: &Path, cargo_home: &Path) -> Result<()> {
    const STEP: &str = "bpf-linker";
    let lib = sysroot.join("lib");
    let so = fs::read_dir(&lib)
        .with_context(|| format!("{STEP}: cannot read {}", lib.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .find(|n| n.starts_with("libLLVM.so."))
        .with_context(|| format!("{STEP}: no libLLVM.so.* in {}", lib.display()))?;
    let prefix = cargo_home.join("gslb").join(format!("llvm-{channel}"));
    let plib = prefix.join("lib");
    fs::create_dir_all(&plib)
        .with_context(|| format!("{STEP}: cannot create {}", plib.display()))?;
    ensure_symlink(&lib.join(&so), &plib.join(&so))?;
    ensure_symlink(Path::new(&so), &plib.join("libLLVM.so"))?;

    let bin = cargo_home.join("bin/bpf-linker");
    if resolves(&bin, &so) {
        say(STEP, &format!("{} uses {so}, skipped", bin.display()));
        return Ok(());
    }
    let vv = run_captured(STEP, rustup_run(channel, "rustc").arg("-vV"))?;
    let major = vv
        .lines()
        .find_map(|l| l.strip_prefix("LLVM version: "))
        .and_then(|v| v.split('.').next())
        .with_context(|| format!("{STEP}: no LLVM version in `rustc -vV`"))?;
    say(
        STEP,
        &format!("building {BPF_LINKER} against LLVM {major} of {channel} (about a minute)"),
    );
    run_captured(
        STEP,
        rustup_run(channel, "cargo")
            .env("LLVM_PREFIX", &prefix)
            // --force: a stale binary (older toolchain's LLVM) would otherwise count as installed.
            .args(["install", "--locked", "--force", "--root"])
            .arg(cargo_home)
            .args([BPF_LINKER, "--no-default-features", "--features"])
            .arg(format!("llvm-{major}")),
    )?;
    if !resolves(&bin, &so) {
        bail!(
            "{STEP}: {} was installed but does not load {so}",
            bin.display()
        );
    }
    Ok(())
}

/// Whether `ldd bin` finds the exact versioned LLVM library as an existing file.
fn resolves(bin: &Path, so: &str) -> bool {
    if !bin.exists() {
        return false;
    }
    let Ok(out) = Command::new("ldd").arg(bin).output() else {
        return false;
    };
    String::from_utf8_lossy(&out.stdout).lines().any(|l| {
        let mut f = l.split_whitespace();
        f.next() == Some(so)
            && f.next() == Some("=>")
            && f.next().is_some_and(|p| Path::new(p).exists())
    })
}

fn ensure_symlink(target: &Path, link: &Path) -> Result<()> {
    if fs::read_link(link).is_ok_and(|t| t == target) {
        return Ok(());
    }
    let _ = fs::remove_file(link);
    symlink(target, link).with_context(|| {
        format!(
            "bpf-linker: cannot link {} -> {}",
            link.display(),
            target.display()
        )
    })
}

fn bpffs() -> Result<()> {
    const STEP: &str = "bpffs";
    let mounts = fs::read_to_string("/proc/mounts").context("bpffs: cannot read /proc/mounts")?;
    let mounted = mounts.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.get(1) == Some(&BPFFS) && f.get(2) == Some(&"bpf")
    });
    if mounted {
        say(STEP, &format!("{BPFFS} already mounted, skipped"));
        return Ok(());
    }
    require_root(STEP, &format!("mount bpf at {BPFFS}"))?;
    fs::create_dir_all(BPFFS).with_context(|| format!("{STEP}: cannot create {BPFFS}"))?;
    run_captured(
        STEP,
        Command::new("mount").args(["-t", "bpf", "bpf", BPFFS]),
    )?;
    say(STEP, &format!("mounted {BPFFS}"));
    Ok(())
}

fn rustup_run(channel: &str, tool: &str) -> Command {
    let mut c = Command::new("rustup");
    c.args(["run", channel, tool]);
    c
}

/// The `channel` of rust-toolchain.toml, the single place the toolchain is pinned.
fn toolchain_channel(root: &Path) -> Result<String> {
    let file = root.join("rust-toolchain.toml");
    let text =
        fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("channel"))
        .filter_map(|rest| rest.trim_start().strip_prefix('='))
        .map(|v| v.trim().trim_matches('"').to_string())
        .next()
        .with_context(|| format!("no channel in {}", file.display()))
}

fn require_root(step: &str, what: &str) -> Result<()> {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1));
    if euid != Some("0") {
        bail!("{step}: need root to {what}");
    }
    Ok(())
}
