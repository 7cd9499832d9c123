//! `cargo xtask profile-xdp CASE`: where the XDP program spends its time on one case of
//! `bench xdp`, by source line. perf samples the CPU clock while the bench runs only that case
//! (and its baseline) for many rounds; the bench writes each program's JIT code as source
//! lines (`GSLB_BENCH_XDP_LINES`), and each sample in a program counts for the line its
//! address falls in. Counts, unlike the bench's nanoseconds, split a case's time into its
//! parts; two cases profiled one after the other show where one costs more.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::{setup, util};

/// Samples a second, capped by the kernel's `perf_event_max_sample_rate`.
const FREQUENCY: u32 = 20_000;

pub(crate) fn run(case: &str, rounds: u32, top: usize) -> Result<()> {
    let env = setup::run()?;
    let bench = ["bench", "-p", "gslb-user", "--bench", "xdp"];
    util::run_inherit("profile-xdp build", env.cargo().args(bench).arg("--no-run"))?;
    let dir = util::target_dir(&env.root).join("profile-xdp");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let (data, lines) = (dir.join("perf.data"), dir.join("jit-lines.tsv"));
    let max_rate = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(FREQUENCY);
    // perf would keep the last run's data as perf.data.old.
    let _ = std::fs::remove_file(&data);
    let cargo = env.cargo();
    let mut record = Command::new("perf");
    record
        .args(["record", "-q", "-g", "-e", "cpu-clock", "-F"])
        .arg(FREQUENCY.min(max_rate).to_string())
        .arg("-o")
        .arg(&data)
        .arg("--")
        .arg(cargo.get_program())
        .args(bench)
        .current_dir(&env.root)
        .env("GSLB_BENCH_XDP_ONLY", case)
        .env("GSLB_BENCH_XDP_ROUNDS", rounds.to_string())
        .env("GSLB_BENCH_XDP_LINES", &lines);
    for (key, value) in cargo.get_envs() {
        if let Some(value) = value {
            record.env(key, value);
        }
    }
    util::run_inherit("profile-xdp perf record", &mut record)?;
    let script = util::run_captured(
        "profile-xdp perf script",
        Command::new("perf")
            .args(["script", "-F", "ip,sym", "-i"])
            .arg(&data),
    )?;
    let table = std::fs::read_to_string(&lines)
        .with_context(|| format!("reading the bench's JIT lines, {}", lines.display()))?;
    let table = LineTable::parse(&table)?;
    let profile = table.count(&samples(&script));
    println!(
        "# perf record -e cpu-clock of `bench xdp` with GSLB_BENCH_XDP_ONLY={case}, {rounds} rounds"
    );
    print(&profile, top, &env.root);
    Ok(())
}

/// A sample's call chain from `perf script -F ip,sym` (samples apart by a blank line, a
/// frame a line: address, symbol), the leaf first.
fn samples(script: &str) -> Vec<Vec<(u64, &str)>> {
    script
        .split("\n\n")
        .map(|sample| {
            sample
                .lines()
                .filter_map(|frame| {
                    let frame = frame.trim();
                    let (ip, sym) = frame.split_once(' ').unwrap_or((frame, ""));
                    Some((u64::from_str_radix(ip, 16).ok()?, sym.trim()))
                })
                .collect::<Vec<_>>()
        })
        .filter(|chain| !chain.is_empty())
        .collect()
}

/// One run of JIT code of one program, as the bench wrote it.
#[derive(Debug, PartialEq)]
struct Run {
    program: String,
    start: u64,
    end: u64,
    file: String,
    line: u32,
}

/// The bench's JIT line tables, sorted by address.
struct LineTable(Vec<Run>);

/// Samples by program, then by line.
#[derive(Debug, Default, PartialEq)]
struct Profile {
    /// All samples taken, in the programs or not.
    samples: usize,
    /// Most samples first.
    programs: Vec<ProgramProfile>,
}

#[derive(Debug, PartialEq)]
struct ProgramProfile {
    program: String,
    /// In its own code and in what it calls.
    samples: usize,
    /// (file, line) and its samples, most first.
    lines: Vec<(String, u32, usize)>,
    /// Where the samples taken in kernel functions it called (helpers, and what they call)
    /// were taken, by symbol, most first.
    calls: Vec<(String, usize)>,
}

impl LineTable {
    fn parse(text: &str) -> Result<Self> {
        let mut runs = Vec::new();
        for (i, row) in text.lines().enumerate() {
            let fields: Vec<&str> = row.split('\t').collect();
            let [program, start, end, file, line] = fields[..] else {
                bail!("JIT line table, row {}: {row:?} is not 5 fields", i + 1);
            };
            let hex = |s: &str| {
                u64::from_str_radix(s, 16)
                    .with_context(|| format!("JIT line table, row {}: address {s:?}", i + 1))
            };
            runs.push(Run {
                program: program.to_owned(),
                start: hex(start)?,
                end: hex(end)?,
                file: file.to_owned(),
                line: line
                    .parse()
                    .with_context(|| format!("JIT line table, row {}: line {line:?}", i + 1))?,
            });
        }
        runs.sort_by_key(|r| r.start);
        Ok(LineTable(runs))
    }

    /// The run `ip` falls in.
    fn find(&self, ip: u64) -> Option<&Run> {
        let i = self.0.partition_point(|r| r.start <= ip).checked_sub(1)?;
        let run = &self.0[i];
        (ip < run.end).then_some(run)
    }

    /// Counts each sample for the program line it was taken in or, when it was taken in a
    /// function a program called, for that function under the program.
    fn count(&self, samples: &[Vec<(u64, &str)>]) -> Profile {
        #[derive(Default)]
        struct Counts<'a> {
            lines: HashMap<(&'a str, u32), usize>,
            calls: HashMap<&'a str, usize>,
        }
        fn most_first<K: Ord>(counts: HashMap<K, usize>) -> Vec<(K, usize)> {
            let mut v: Vec<_> = counts.into_iter().collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            v
        }
        let mut by_program: HashMap<&str, Counts> = HashMap::new();
        for chain in samples {
            let Some((depth, run)) = chain
                .iter()
                .enumerate()
                .find_map(|(depth, &(ip, _))| Some((depth, self.find(ip)?)))
            else {
                continue;
            };
            let counts = by_program.entry(&run.program).or_default();
            if depth == 0 {
                *counts.lines.entry((&run.file, run.line)).or_default() += 1;
            } else {
                *counts.calls.entry(chain[0].1).or_default() += 1;
            }
        }
        let mut programs: Vec<_> = by_program
            .into_iter()
            .map(|(program, counts)| {
                let lines: Vec<_> = most_first(counts.lines)
                    .into_iter()
                    .map(|((file, line), n)| (file.to_owned(), line, n))
                    .collect();
                let calls: Vec<_> = most_first(counts.calls)
                    .into_iter()
                    .map(|(sym, n)| (sym.to_owned(), n))
                    .collect();
                ProgramProfile {
                    program: program.to_owned(),
                    samples: lines.iter().map(|l| l.2).sum::<usize>()
                        + calls.iter().map(|c| c.1).sum::<usize>(),
                    lines,
                    calls,
                }
            })
            .collect();
        programs.sort_by(|a, b| {
            b.samples
                .cmp(&a.samples)
                .then_with(|| a.program.cmp(&b.program))
        });
        Profile {
            samples: samples.len(),
            programs,
        }
    }
}

/// Each program's samples, its `top` lines with their share and source text.
fn print(profile: &Profile, top: usize, root: &Path) {
    let mut sources: HashMap<String, Option<Vec<String>>> = HashMap::new();
    println!("# {} samples in all", profile.samples);
    for ProgramProfile {
        program,
        samples,
        lines,
        calls,
    } in &profile.programs
    {
        let own: usize = lines.iter().map(|l| l.2).sum();
        println!(
            "{program}: {samples} samples, {own} in its own code, {} in kernel functions it called",
            samples - own
        );
        for (file, line, n) in lines.iter().take(top) {
            let text = sources
                .entry(file.clone())
                .or_insert_with(|| {
                    let path = Path::new(file);
                    let text = std::fs::read_to_string(path)
                        .or_else(|_| std::fs::read_to_string(root.join(path)));
                    text.ok().map(|t| t.lines().map(str::to_owned).collect())
                })
                .as_ref()
                .and_then(|t| t.get((*line as usize).checked_sub(1)?))
                .map_or("", |l| l.trim());
            let share = 100.0 * *n as f64 / *samples as f64;
            println!(
                "  {n:>7} {share:>5.1}%  {}:{line}  {text}",
                short(file, root)
            );
        }
        for (sym, n) in calls.iter().take(top) {
            let share = 100.0 * *n as f64 / *samples as f64;
            println!("  {n:>7} {share:>5.1}%  called: {sym}");
        }
    }
}

/// `file` without the checkout's path, or from the crate's directory (`aya-ebpf-0.3.0/src/…`)
/// or the standard library's (`core/src/…`).
fn short<'a>(file: &'a str, root: &Path) -> &'a str {
    if let Some(rest) = Path::new(file)
        .strip_prefix(root)
        .ok()
        .and_then(Path::to_str)
    {
        return rest;
    }
    if let Some((_, rest)) = file.split_once("/rustlib/src/rust/library/") {
        return rest;
    }
    if let Some((_, rest)) = file.split_once("/index.crates.io-") {
        // Past the registry's directory, from the crate's.
        return rest.split_once('/').map_or(rest, |r| r.1);
    }
    file
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "gslb_xdp\t100\t110\tsrc/lib.rs\t10\n\
                         gslb_floor\t200\t240\tsrc/floor.rs\t3\n\
                         gslb_xdp\t110\t120\tsrc/lib.rs\t12\n\
                         gslb_xdp\t120\t130\tsrc/lib.rs\t10\n";

    /// `perf script -F ip,sym` with call chains: a sample a block, the leaf first.
    const SCRIPT: &str = "\
\t             100 bpf_prog_1_gslb_xdp
\tffffffff81000001 bpf_test_run

\t             10f bpf_prog_1_gslb_xdp

\t             110 bpf_prog_1_gslb_xdp

\t             125 bpf_prog_1_gslb_xdp

\t             12f bpf_prog_1_gslb_xdp

\t             130 bpf_prog_1_gslb_xdp

\t              99 somewhere

\t             200 bpf_prog_2_gslb_floor

\t             23f bpf_prog_2_gslb_floor

\tffffffff81000002 htab_map_hash
\tffffffff81000003 __htab_map_lookup_elem
\t             104 bpf_prog_1_gslb_xdp
\tffffffff81000001 bpf_test_run

\tffffffff81000002 htab_map_hash
\t             108 bpf_prog_1_gslb_xdp

\tffffffff81000004 bpf_xdp_adjust_tail
\t             204 bpf_prog_2_gslb_floor

\tffffffff81000001 bpf_test_run
";

    /// A sample taken in a program counts for the line of the run holding its address (the
    /// first byte in, the end out; one line's runs add up); one taken in a function a
    /// program called counts for that function under the program; the others only in all.
    #[test]
    fn samples_count_for_the_line_they_fall_in_or_the_function_the_program_called() {
        let table = LineTable::parse(TABLE).unwrap();
        let samples = samples(SCRIPT);
        assert_eq!(samples.len(), 13);
        assert_eq!(
            samples[9],
            [
                (0xffff_ffff_8100_0002, "htab_map_hash"),
                (0xffff_ffff_8100_0003, "__htab_map_lookup_elem"),
                (0x104, "bpf_prog_1_gslb_xdp"),
                (0xffff_ffff_8100_0001, "bpf_test_run")
            ]
        );
        let program = |name: &str,
                       samples,
                       lines: &[(&str, u32, usize)],
                       calls: &[(&str, usize)]| ProgramProfile {
            program: name.into(),
            samples,
            lines: lines.iter().map(|&(f, l, n)| (f.into(), l, n)).collect(),
            calls: calls.iter().map(|&(f, n)| (f.into(), n)).collect(),
        };
        assert_eq!(
            table.count(&samples),
            Profile {
                samples: 13,
                programs: vec![
                    program(
                        "gslb_xdp",
                        7,
                        &[("src/lib.rs", 10, 4), ("src/lib.rs", 12, 1)],
                        &[("htab_map_hash", 2)],
                    ),
                    program(
                        "gslb_floor",
                        3,
                        &[("src/floor.rs", 3, 2)],
                        &[("bpf_xdp_adjust_tail", 1)]
                    ),
                ],
            }
        );
    }

    #[test]
    fn file_names_are_shown_from_the_checkout_the_crate_or_the_library() {
        let root = Path::new("/work/main");
        for (file, want) in [
            ("/work/main/gslb-ebpf/src/csum.rs", "gslb-ebpf/src/csum.rs"),
            (
                "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-ebpf-0.3.0/src/programs/xdp.rs",
                "aya-ebpf-0.3.0/src/programs/xdp.rs",
            ),
            (
                "/root/.rustup/toolchains/1.99.1-x86_64-unknown-linux-gnu/lib/rustlib/src/rust/library/core/src/ptr/mod.rs",
                "core/src/ptr/mod.rs",
            ),
            ("/elsewhere/x.rs", "/elsewhere/x.rs"),
        ] {
            assert_eq!(short(file, root), want);
        }
    }

    #[test]
    fn a_bad_row_is_refused_with_its_number() {
        for (text, want) in [
            ("gslb_xdp\t100\t110\tsrc/lib.rs\n", "row 1"),
            (
                "gslb_xdp\t100\t110\ta\t1\ngslb_xdp\tzz\t110\ta\t1\n",
                "row 2: address \"zz\"",
            ),
            ("gslb_xdp\t100\t110\ta\tx\n", "row 1: line \"x\""),
        ] {
            let error = format!("{:#}", LineTable::parse(text).err().expect(text));
            assert!(error.contains(want), "{error}");
        }
    }
}
