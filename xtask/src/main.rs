//! Developer tasks: `cargo xtask <command>`. Every command but uninstall first runs `setup`,
//! so a fresh Debian 12 machine (as root) goes from nothing to built and tested with one
//! command.

mod bench;
mod demo;
mod fuzz;
mod install;
mod profile_xdp;
mod run;
mod setup;
mod util;

use std::path::PathBuf;

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
    /// `cargo fmt --check` and clippy with `-D warnings` first, then every fuzz target for a
    /// minute (`fuzz`) and the demo.
    Test {
        /// Extra arguments for `cargo test` (after `--`).
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Setup, then run every fuzz target (fuzz/, libFuzzer) for MINUTES each, starting from its
    /// seed corpus (fuzz/corpus/<target>/, left unchanged); a failing input is kept in
    /// target/fuzz/artifacts/<target>/. The xdp target needs root and BPF, and is skipped
    /// without them.
    Fuzz {
        /// Minutes each target runs.
        #[arg(long, default_value_t = 1)]
        minutes: u64,
        /// Rewrite the seed corpora instead (fuzz/examples/seeds/: real queries captured from
        /// dig, kdig and delv, hostile messages, examples/, encoded MEP frames).
        #[arg(long)]
        seeds: bool,
        /// Only these targets [default: all].
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(fuzz::TARGETS))]
        targets: Vec<String>,
    },
    /// Setup, then run a benchmark; without a name, list them.
    Bench {
        name: Option<bench::Bench>,
        /// `bench soak` only: minutes of load [default: 10, at least 2].
        #[arg(long, value_name = "N")]
        minutes: Option<u32>,
    },
    /// Setup, then profile one case of `bench xdp` by source line of the XDP program: perf
    /// samples the CPU clock while the bench runs only CASE; prints each program's lines by
    /// samples, with their source (needs root and perf).
    ProfileXdp {
        /// A case of `bench xdp` (a name it prints without `bench ` and units), e.g.
        /// xdp_a_hit_v4 or xdp_floor.
        case: String,
        /// Rounds of 2,000 runs of the case (`bench xdp` runs 50).
        #[arg(long, default_value_t = 600)]
        rounds: u32,
        /// Lines shown per program.
        #[arg(long, default_value_t = 25)]
        top: usize,
    },
    /// Setup, build and run the demo on examples/demo.toml.
    Demo {
        /// Run the demo once and exit instead of serving.
        #[arg(long)]
        once: bool,
    },
    /// Setup, a release build, then install gslbd and gslbctl (PREFIX/bin), the systemd unit
    /// (PREFIX/lib/systemd/system), docs/operations.md (PREFIX/share/doc/gslb) and a sample
    /// /etc/gslb/gslbd.toml, kept when one is there. Nothing is enabled or started.
    Install {
        /// Install prefix; any other than /usr/local or /usr holds the configuration too
        /// (PREFIX/etc/gslb), and the unit names the paths under it.
        #[arg(long, value_name = "DIR")]
        prefix: Option<PathBuf>,
    },
    /// Setup, a release build, then gslbd in the foreground on INTERFACE with FILE (Ctrl-C
    /// stops it; it detaches XDP unless told --keep-attached).
    Run {
        #[arg(long, value_name = "IF")]
        interface: String,
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// More gslbd arguments (after `--`), e.g. `--xdp-mode skb`.
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Remove what install put there (not the configuration), after detaching the XDP
    /// programs and removing the pins a gslbd left (`--keep-attached`, or killed). Refuses
    /// while the installed gslbd runs.
    Uninstall {
        /// The prefix given to install.
        #[arg(long, value_name = "DIR")]
        prefix: Option<PathBuf>,
        /// The pin directory [default: server.pin_path of the installed configuration].
        #[arg(long, value_name = "DIR")]
        pin_path: Option<PathBuf>,
    },
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Setup => setup::run().map(drop),
        Cmd::Build { release } => build(release),
        Cmd::Test { args } => test(&args),
        Cmd::Fuzz {
            minutes,
            seeds,
            targets,
        } => {
            let env = setup::run()?;
            if seeds {
                return fuzz::seeds(&env);
            }
            let targets = if targets.is_empty() {
                fuzz::TARGETS.map(String::from).to_vec()
            } else {
                targets
            };
            fuzz::run(&env, minutes * 60, &targets, false)
        }
        Cmd::Bench { name, minutes } => bench::run(name, minutes),
        Cmd::ProfileXdp { case, rounds, top } => profile_xdp::run(&case, rounds, top),
        Cmd::Demo { once } => demo::run(once),
        Cmd::Install { prefix } => install::run_install(prefix.as_deref()),
        Cmd::Run {
            interface,
            config,
            args,
        } => run::run(&interface, &config, &args),
        Cmd::Uninstall { prefix, pin_path } => {
            install::run_uninstall(prefix.as_deref(), pin_path.as_deref())
        }
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

/// Tests that measure time to a few milliseconds through threads of their own (RTTs over a
/// delaying TAP wire, 5 ms tolerance): run after the rest, alone, by `cargo xtask test`. Beside
/// the suite's other tests on a 2-core machine their samples drifted by 3 to 30 ms (three CI
/// runs in a row of 2026-12-08), which no tolerance that still tests the rule absorbs.
const ALONE: [&str; 1] = ["e2e::rtt_netns::"];

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
    if args.is_empty() {
        cmd.arg("--");
        for name in ALONE {
            cmd.args(["--skip", name]);
        }
    }
    util::run_inherit("test", &mut cmd)?;
    if args.is_empty() {
        let mut alone = env.cargo();
        alone
            .args(["test", "-p", "gslb-user", "--test", "it", "--"])
            .args(ALONE)
            .arg("--test-threads=1")
            .env("GSLB_REQUIRE_PRIVILEGED", "1");
        util::run_inherit("test (timing tests, alone)", &mut alone)?;
        // Each target a minute from its seeds (one build for all); the xdp target must run.
        fuzz::run(&env, 60, &fuzz::TARGETS.map(String::from), true)?;
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
