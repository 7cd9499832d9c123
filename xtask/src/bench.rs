use anyhow::{Result, bail};
use clap::ValueEnum;

use crate::{setup, util};

/// Benchmarks; each prints lines `bench <name> <value> <unit>`.
// To add one (dnsperf against a running gslbd, pure controller logic, ...): add a variant here
// with a doc comment (shown by `cargo xtask bench`) and an arm in `run`.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Bench {
    /// XDP program timed in the kernel with BPF_PROG_TEST_RUN (needs root)
    Xdp,
    /// Whole-server qps with dnsperf in a namespace lab: XDP attached vs responder only (needs root)
    Dnsperf,
    /// kxdpgun (AF_XDP) in a namespace lab at 200k and at its maximum qps: gslbd XDP, Knot XDP and
    /// the floor program; replies/s, % answered, CPU per answer (needs root)
    Kxdpgun,
    /// Location database lookups and loading (criterion)
    Location,
    /// One decision of the selection engine (criterion)
    Policy,
    /// MEP at scale on loopback: 32 parents + 1,024 children vs flat meshes
    Mep,
    /// The controller at scale: 1M location ranges, 100k RTT rows, 1,000 domains, 64 sites
    /// (compile time, peak RSS, map memory, service flip to maps updated; publishing needs root)
    Scale,
    /// Differential fuzzing of the XDP program against the responder: 10,000,000 frames through
    /// BPF_PROG_TEST_RUN (the xdp_fuzz test, release build); prints the count and wrong answers
    /// (needs root)
    FuzzXdp,
    /// A health flip under a flood of spoofed LDNS sources: flip to XDP answer changed, quiet
    /// vs 20,000 spoofed sources a second (needs root)
    RttFlood,
    /// The responder alone (gslbd --no-xdp) beside NSD and Knot on the same zone, with dnsperf
    /// on loopback and in a namespace lab: qps, lost, responder/NSD ratio (needs root)
    Peers,
    /// The costliest message of each hostile class against a plain query (gslbd's CPU per
    /// message, UDP and TCP), and ordinary queries beside 1,000 hostile messages a second
    /// (needs root)
    Hostile,
    /// dnsperf load for --minutes with a reload a second, a health flip every 2 s and a MEP
    /// peer restarted every 15 s: lost queries, RSS and fd growth (needs root)
    Soak,
}

/// `bench soak`'s minutes of load when `--minutes` is not given.
const SOAK_MINUTES: u32 = 10;

/// Frames `cargo xtask bench fuzz-xdp` sends (`cargo xtask test` runs the test's 200,000).
const FUZZ_XDP_FRAMES: &str = "10000000";

/// Runs `name` (without one, lists the benches). `minutes` is `bench soak`'s length, refused
/// for the others.
pub(crate) fn run(name: Option<Bench>, minutes: Option<u32>) -> Result<()> {
    if minutes.is_some() && !matches!(name, Some(Bench::Soak)) {
        bail!("--minutes is for `cargo xtask bench soak` only");
    }
    let Some(bench) = name else {
        println!("available benches (cargo xtask bench <name>):");
        for b in Bench::value_variants() {
            let v = b.to_possible_value().expect("no skipped variants");
            println!(
                "  {:<8} {}",
                v.get_name(),
                v.get_help().map(ToString::to_string).unwrap_or_default()
            );
        }
        return Ok(());
    };
    let env = setup::run()?;
    let name = bench
        .to_possible_value()
        .expect("no skipped variants")
        .get_name()
        .to_owned();
    let mut cmd = env.cargo();
    if let Bench::FuzzXdp = bench {
        // A test, not a bench target: the harness is the test's, run longer. The counters are
        // summed per 1,000 frames (reading them per frame would dominate the run). The test is
        // the module xdp::fuzz of gslb-user's one test binary, `it`.
        cmd.args(["test", "--release", "-p", "gslb-user", "--test", "it"])
            .args(["--", "xdp::fuzz::", "--nocapture"])
            .env("GSLB_FUZZ_FRAMES", FUZZ_XDP_FRAMES)
            .env("GSLB_FUZZ_COUNTERS_EVERY", "1000")
            .env("GSLB_REQUIRE_PRIVILEGED", "1");
        return util::run_inherit(&format!("bench {name}"), &mut cmd);
    }
    // Bench targets are named with underscores (rtt_flood), the command line with dashes.
    cmd.args([
        "bench",
        "-p",
        "gslb-user",
        "--bench",
        &name.replace('-', "_"),
    ]);
    if let Bench::Soak = bench {
        // A bench target takes no arguments of ours through cargo bench; the environment
        // reaches it.
        let minutes = minutes.unwrap_or(SOAK_MINUTES);
        if minutes < 2 {
            bail!("--minutes: at least 2 (growth is measured from the end of the first minute)");
        }
        cmd.env("GSLB_SOAK_MINUTES", minutes.to_string());
    }
    util::run_inherit(&format!("bench {name}"), &mut cmd)
}
