//! Developer tasks: `cargo xtask <command>`. Every command first runs `setup`, so a fresh
//! Debian 12 machine (as root) goes from nothing to built and tested with one command.

mod bench;
mod demo;
mod setup;
mod util;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "gslb developer tasks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install system packages, the pinned toolchain and bpf-linker; mount bpffs.
    Setup,
    /// Setup, then build the default workspace members.
    Build {
        #[arg(long)]
        release: bool,
    },
    /// Setup, then run the tests with privileged tests required; without extra arguments,
    /// `cargo fmt --check` and clippy with `-D warnings` first, then the fuzz targets and the demo.
    Test {
        /// Extra arguments for `cargo test` (after `--`).
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Setup, then run a benchmark; without a name, list them.
    Bench { name: Option<bench::Bench> },
    /// Setup, build and run the demo on examples/demo.toml.
    Demo {
        /// Run the demo once and exit instead of serving.
        #[arg(long)]
        once: bool,
    },
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Setup => setup::run().map(drop),
        Cmd::Build { release } => build(release),
        Cmd::Test { args } => test(&args),
        Cmd::Bench { name } => bench::run(name),
        Cmd::Demo { once } => demo::run(once),
    }
}

fn build(release: bool) -> Result<()> {
    let env = setup::run()?;
    let mut cmd = env.cargo();
    cmd.arg("build");
    if release {
        cmd.arg("--release");
    }
    util::run_inherit("build", &mut cmd)
}

fn test(args: &[String]) -> Result<()> {
    let env = setup::run()?;
    if args.is_empty() {
        lint(&env)?;
    }
    let mut cmd = env.cargo();
    // Without it the privileged tests skip themselves when they lack root or a kernel feature,
    // which would let a broken machine pass.
    cmd.arg("test")
        .args(args)
        .env("GSLB_REQUIRE_PRIVILEGED", "1");
    util::run_inherit("test", &mut cmd)?;
    if args.is_empty() {
        fuzz(&env)?;
        // The README's first command, end to end: it fails if a step of the demo does.
        demo::run(true)?;
    }
    Ok(())
}

/// Formatting and clippy over the default members (all targets: tests and benches too), with
/// every warning an error: the lints in the root Cargo.toml are the project's rules. Build-script
/// `warning:` lines (gslb-user's echo of the eBPF build) are cargo output, not lints.
fn lint(env: &setup::Env) -> Result<()> {
    let mut fmt = env.cargo();
    fmt.args(["fmt", "--all", "--check"]);
    util::run_inherit("fmt", &mut fmt)?;
    let mut clippy = env.cargo();
    clippy.args(["clippy", "--all-targets", "--", "-D", "warnings"]);
    util::run_inherit("clippy", &mut clippy)
}

/// A bounded libFuzzer run of every fuzz target (fuzz/). The pinned toolchain is a stable
/// release: RUSTC_BOOTSTRAP lets cargo-fuzz pass its -Z flags; no sanitizer, whose runtime only
/// nightly toolchains ship (a panic is what the targets look for).
fn fuzz(env: &setup::Env) -> Result<()> {
    const SECONDS: &str = "30";
    for target in ["responder", "mep_frame"] {
        let mut cmd = env.cargo();
        cmd.current_dir(env.root.join("fuzz"))
            .env("RUSTC_BOOTSTRAP", "1")
            .args(["fuzz", "run", target, "--sanitizer", "none", "--"])
            .arg(format!("-max_total_time={SECONDS}"));
        util::run_inherit(&format!("fuzz {target}"), &mut cmd)?;
        println!("fuzz {target}: {SECONDS} s without a crash");
    }
    Ok(())
}
