//! The fast path loaded for a test, and its program run on a frame (BPF_PROG_TEST_RUN).

use std::net::IpAddr;
use std::path::Path;

use aya::programs::{ProgramError, TestRun, TestRunOptions, Xdp};
use gslb_common::Counter;
use gslb_user::{compile::Snapshot, config::Config, dataplane::Dataplane};
use hickory_proto::op::Message;
use hickory_proto::rr::RecordType;

use super::{XDP_TX, config_text, init_tracing, privileged};

/// A freshly loaded dataplane (maps of its own) with [`config_text`] published, or `None` when the
/// test is skipped for lack of privileges.
pub(crate) fn dataplane() -> Option<Dataplane> {
    if !privileged() {
        return None;
    }
    init_tracing();
    let mut dp = Dataplane::load(None).expect("loading the XDP object");
    dp.table
        .publish(&snapshot())
        .expect("publishing the test configuration");
    Some(dp)
}

/// Keeps this thread on the CPU it runs on (per-CPU maps such as the rotor then stay put).
pub(crate) fn pin_to_current_cpu() {
    // SAFETY: plain syscalls for this thread, with a zero-initialised cpu_set_t.
    unsafe {
        let cpu = libc::sched_getcpu();
        assert!(
            cpu >= 0,
            "sched_getcpu: {}",
            std::io::Error::last_os_error()
        );
        pin_to_cpu(cpu as usize);
    }
}

/// Keeps this thread on `cpu`.
/// Runs `program` on `frame` on CPU 0 over and over while CPU 1 publishes `snapshots` in turn
/// `publishes` times (the first is published before), and counts the replies by what
/// `describe` makes of each XDP_TX reply's DNS message (bytes and parsed) or by the XDP action:
/// what the atomic-republish tests check against the replies each generation may give.
pub(crate) fn replies_while_publishing(
    program: &Xdp,
    table: &mut gslb_user::dataplane::AnswerTable,
    frame: &[u8],
    snapshots: &[Snapshot; 2],
    publishes: usize,
    describe: impl Fn(&[u8], &Message) -> String + Sync,
) -> std::collections::BTreeMap<String, u64> {
    use std::sync::atomic::{AtomicBool, Ordering};
    table.publish(&snapshots[0]).expect("the first publish");
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            pin_to_cpu(0);
            let mut seen = std::collections::BTreeMap::<String, u64>::new();
            let mut out = vec![0u8; 4096];
            // Until the publisher is done, and a bounded number of runs in any case.
            for _ in 0..5_000_000 {
                if done.load(Ordering::Relaxed) {
                    break;
                }
                let result = program
                    .test_run(TestRunOptions {
                        data_in: Some(frame),
                        data_out: Some(&mut out),
                        ..TestRunOptions::new()
                    })
                    .expect("test_run");
                let reply = if result.return_value == XDP_TX {
                    // The DNS message after Ethernet 14 + IPv4 20 + UDP 8.
                    let dns = &out[42..result.data_size_out as usize];
                    describe(dns, &Message::from_vec(dns).expect("the reply parses"))
                } else {
                    format!("XDP action {}", result.return_value)
                };
                *seen.entry(reply).or_default() += 1;
            }
            seen
        });
        pin_to_cpu(1);
        for i in 0..publishes {
            table.publish(&snapshots[(i + 1) % 2]).expect("publishing");
        }
        done.store(true, Ordering::Relaxed);
        reader.join().expect("the reader")
    })
}

pub(crate) fn pin_to_cpu(cpu: usize) {
    // SAFETY: plain syscall for this thread, with a zero-initialised cpu_set_t.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let rc = libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const set);
        assert_eq!(
            rc,
            0,
            "sched_setaffinity: {}",
            std::io::Error::last_os_error()
        );
    }
}

pub(crate) fn snapshot() -> Snapshot {
    let config =
        Config::parse(&config_text(), Path::new("xdp-test.toml")).expect("test configuration");
    Snapshot::from_config(&config)
}

/// What one run of the fast path did.
pub(crate) struct Outcome {
    pub action: u32,
    pub frame: Vec<u8>,
    /// Counters that rose during the run, by how much.
    pub counted: Vec<(Counter, u64)>,
}

/// Runs the fast path once on `frame` (BPF_PROG_TEST_RUN) and notes which counters rose.
pub(crate) fn try_run(dp: &Dataplane, frame: &[u8]) -> Result<Outcome, ProgramError> {
    try_run_program(dp, dp.program(), frame)
}

/// Runs `program`, one of `dp`'s, once on `frame` and notes which of `dp`'s counters rose.
pub(crate) fn try_run_program(
    dp: &Dataplane,
    program: &Xdp,
    frame: &[u8],
) -> Result<Outcome, ProgramError> {
    let before = dp.counters().expect("reading counters");
    // A page: more than a test run lets the program grow the frame to.
    let mut out = vec![0u8; 4096];
    let result = program.test_run(TestRunOptions {
        data_in: Some(frame),
        data_out: Some(&mut out),
        ..TestRunOptions::new()
    })?;
    out.truncate(result.data_size_out as usize);
    let after = dp.counters().expect("reading counters");
    Ok(Outcome {
        action: result.return_value,
        frame: out,
        counted: after.delta(&before),
    })
}

pub(crate) fn run(dp: &Dataplane, frame: &[u8]) -> Outcome {
    try_run(dp, frame).expect("BPF_PROG_TEST_RUN")
}

/// The answer records a reply must carry.
pub(crate) enum Answers {
    /// Rotation: exactly one of these.
    OneOf(Vec<IpAddr>),
    /// All of these, in configuration order.
    All(Vec<IpAddr>),
}

/// What a reply must answer.
pub(crate) struct Expect {
    pub rtype: RecordType,
    pub ttl: u32,
    pub answers: Answers,
}

/// The hit counter of a reply of `rtype` over IPv4 or IPv6.
pub(crate) fn hit_counter(v6: bool, rtype: RecordType) -> Counter {
    match (v6, rtype) {
        (false, RecordType::A) => Counter::HitAV4,
        (false, _) => Counter::HitAaaaV4,
        (true, RecordType::A) => Counter::HitAV6,
        (true, _) => Counter::HitAaaaV6,
    }
}

/// A configuration served at 192.0.2.53 (the test frames' server), authoritative for
/// example.com, with `views` (name, prefix) and the one site "s" of `body`'s services.
pub(crate) fn site_s_config(views: &[(&str, &str)], body: &str) -> String {
    let views: String = views
        .iter()
        .map(|(name, prefix)| format!("[[view]]\nname = \"{name}\"\nprefixes = [\"{prefix}\"]\n"))
        .collect();
    format!(
        r#"
[server]
listen = ["192.0.2.53"]

{views}
[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

[[site]]
name = "s"
ip = "192.0.2.1"
{body}"#
    )
}
