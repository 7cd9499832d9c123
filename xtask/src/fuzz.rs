//! `cargo xtask fuzz`: the libFuzzer targets of fuzz/ (cargo fuzz), built once, then each run
//! for a while from its seed corpus, fuzz/corpus/<target>/. The seeds are only read: libFuzzer
//! is given a fresh directory under target/fuzz/ first (where it writes what it finds; removed
//! afterwards) and the seeds second. A panic, a timeout or an input over the memory limit leaves
//! its input in target/fuzz/artifacts/<target>/, whose path is printed.
//!
//! `--seeds` rewrites the corpus instead, with the `seeds` example of fuzz/ (it captures real
//! queries with dig, kdig and delv on 127.0.0.1; examples/seeds/ says where each seed comes
//! from).

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::SystemTime,
};

use anyhow::{Context, Result, bail};

use crate::{setup, util};

/// Every target, in the order they run (fuzz/fuzz_targets/<name>.rs).
pub(crate) const TARGETS: [&str; 9] = [
    "responder",
    "responder_tcp",
    "config",
    "zone_file",
    "location",
    "prometheus",
    "http_body",
    "mep_frame",
    "xdp",
];

/// The exit status of a target that cannot run on this machine (fuzz_targets/xdp.rs: no root
/// or no BPF); libFuzzer is told to exit with 1 on a failure, so that the two differ.
const SKIPPED: i32 = 77;
/// The longest input (`-max_len`): the largest DNS message over TCP, and more than one UDP
/// datagram can carry.
const MAX_LEN: u32 = 65_535;
/// A single input taking longer than this is a failure (`-timeout`): every target's work per
/// input is meant to be bounded far below it.
const TIMEOUT_S: u32 = 25;

/// Builds every target once, then runs each of `targets` for `seconds`. With
/// `require_privileged` (as in CI), a target that skips itself for lack of root or BPF fails.
pub(crate) fn run(
    env: &setup::Env,
    seconds: u64,
    targets: &[String],
    require_privileged: bool,
) -> Result<()> {
    for t in targets {
        if !TARGETS.contains(&t.as_str()) {
            bail!("fuzz: no target {t:?} (targets: {})", TARGETS.join(", "));
        }
    }
    let fuzz_dir = env.root.join("fuzz");
    // Release with debug assertions (overflow checks too): an overflow is a finding. No
    // sanitizer: their runtimes only come with nightly toolchains, and a panic is what the
    // targets look for. RUSTC_BOOTSTRAP lets cargo-fuzz pass its -Z flags to the pinned stable.
    let mut build = env.cargo();
    build
        .current_dir(&fuzz_dir)
        .env("RUSTC_BOOTSTRAP", "1")
        .args(["fuzz", "build", "--sanitizer", "none", "--debug-assertions"]);
    util::run_inherit("fuzz build", &mut build)?;
    let bin_dir = fuzz_dir
        .join("target")
        .join(host_triple(&env.root)?)
        .join("release");
    let work = util::target_dir(&env.root).join("fuzz");
    for target in targets {
        run_one(
            &env.root,
            &bin_dir,
            &work,
            target,
            seconds,
            require_privileged,
        )?;
    }
    Ok(())
}

fn run_one(
    root: &Path,
    bin_dir: &Path,
    work: &Path,
    target: &str,
    seconds: u64,
    require_privileged: bool,
) -> Result<()> {
    let seeds = root.join("fuzz/corpus").join(target);
    let found = work.join(format!("corpus-{target}-{}", std::process::id()));
    let artifacts = work.join("artifacts").join(target);
    for dir in [&found, &artifacts] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let started = SystemTime::now();
    let mut cmd = Command::new(bin_dir.join(target));
    cmd.arg(&found)
        .arg(&seeds)
        .arg(format!("-max_len={MAX_LEN}"))
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-timeout={TIMEOUT_S}"))
        .arg("-error_exitcode=1")
        .arg("-timeout_exitcode=1")
        // The trailing slash: libFuzzer prefixes the file name with it.
        .arg(format!("-artifact_prefix={}/", artifacts.display()));
    println!(
        "fuzz {target}: {seconds} s from {} (+ {})",
        seeds.display(),
        found.display()
    );
    let status = cmd.status().with_context(|| {
        format!(
            "fuzz {target}: cannot start {}",
            bin_dir.join(target).display()
        )
    })?;
    // What the run found is in the seeds' coverage or in the artifacts; not kept.
    let _ = std::fs::remove_dir_all(&found);
    match status.code() {
        Some(0) => {
            println!("fuzz {target}: {seconds} s without a failure");
            Ok(())
        }
        Some(SKIPPED) => {
            let why = gslb_tests::missing_privilege().unwrap_or_else(|| {
                "BPF is not available (the target's line above says why)".into()
            });
            if require_privileged {
                bail!("fuzz {target}: skipped ({why}), but this run requires every target");
            }
            println!("fuzz {target}: skipped: {why}");
            Ok(())
        }
        _ => {
            let new: Vec<PathBuf> = std::fs::read_dir(&artifacts)
                .map(|entries| {
                    entries
                        .filter_map(Result::ok)
                        .filter(|e| {
                            e.metadata()
                                .and_then(|m| m.modified())
                                .is_ok_and(|t| t >= started)
                        })
                        .map(|e| e.path())
                        .collect()
                })
                .unwrap_or_default();
            for path in &new {
                eprintln!("fuzz {target}: failing input: {}", path.display());
            }
            bail!(
                "fuzz {target}: failed ({status}); inputs in {} (rerun one: {} FILE)",
                artifacts.display(),
                bin_dir.join(target).display()
            )
        }
    }
}

/// Rewrites fuzz/corpus with the `seeds` example (a plain build, not instrumented).
pub(crate) fn seeds(env: &setup::Env) -> Result<()> {
    let mut cmd = env.cargo();
    cmd.current_dir(env.root.join("fuzz"))
        .args(["run", "--example", "seeds", "--"])
        .arg(env.root.join("fuzz/corpus"));
    util::run_inherit("fuzz seeds", &mut cmd)
}

/// The host's target triple (of the toolchain `root` pins), under which cargo-fuzz puts the
/// targets.
fn host_triple(root: &Path) -> Result<String> {
    let out = util::run_captured(
        "rustc -vV",
        Command::new("rustc").current_dir(root).arg("-vV"),
    )?;
    out.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_owned)
        .context("rustc -vV names no host")
}
