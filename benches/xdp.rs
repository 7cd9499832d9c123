//! `cargo xtask bench xdp`: nanoseconds per query of the XDP program, measured in the kernel
//! with BPF_PROG_TEST_RUN.
//!
//! Every run must do the full work. With `repeat` > 1 the kernel reruns the program on the
//! buffer the previous run rewrote, i.e. on our own reply, which the program passes at once;
//! so each sample is one run (`repeat` = 1) on a fresh copy of the query, timed by the kernel
//! around that run only. The kernel's timer adds a fixed cost to every sample: the pass-through
//! program, measured the same way on the same frame, shows it, and each result is also given
//! with it subtracted. Results are medians, cases interleaved so that noise from the shared
//! machine hits all of them alike. The kernel's timer ticks in steps of about 10 ns here, so
//! medians move in such steps; each case is also given as the mean of its middle 80% of samples
//! (`<name>_tmean`, and `_tmean_net` net of the baseline's), which resolves smaller changes.
//!
//! `GSLB_BENCH_XDP_ONLY=xdp_a_hit_v4,xdp_floor` runs only the cases named (the baseline always
//! runs), `GSLB_BENCH_XDP_ROUNDS=n` n rounds: to compare two builds in a minute, or to give a
//! profiler (`perf record -e cpu-clock -a`) samples of one case; run the bench binary itself
//! (`target/release/deps/xdp-*`) after `cargo xtask bench xdp` built it.
//! `GSLB_BENCH_XDP_LINES=FILE` writes each program's JIT code as source lines to FILE: with the
//! two above, what `cargo xtask profile-xdp CASE` runs to place perf's samples on source lines.
//!
//! `xdp_floor` is the floor program (`gslb_floor`, gslb-ebpf's floor.rs) on the A query of
//! `xdp_a_hit_v4`: the same parse and turn-around without a lookup or a record, so
//! `xdp_a_hit_v4_vs_floor` (hit net / floor net) is what the lookups and records multiply the
//! unavoidable work by, on this machine. `xdp_floor_grow` is `gslb_floor_grow` on the same
//! query: the floor plus one constant record and the `bpf_xdp_adjust_tail` call that grows the
//! frame for it, which no answer can do without; `xdp_floor_grow_vs_floor` is thus the lowest
//! `xdp_a_hit_v4_vs_floor` this machine allows (a kernel call's cost varies with the CPU's
//! return-thunk mitigations: benches/RESULTS.md).

#[path = "../gslb-user/tests/it/common/mod.rs"]
mod common;

use aya::programs::{TestRun, TestRunOptions, Xdp};
use common::{ALL, Frame, V1_CLIENT_V4, WWW, ecs_subnet, edns, query, wire};
use hickory_proto::rr::RecordType;

const ROUNDS: usize = 50;
const RUNS_PER_ROUND: usize = 2_000;
const XDP_TX: u32 = 3;
const XDP_PASS: u32 = 2;

/// The program a case runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Run {
    Answer,
    /// The pass-through program: the baseline.
    Pass,
    /// The answering program whose maps have `[rrl]` on (at a rate no run reaches).
    Rrl,
    /// The floor program (`gslb_floor`: the same parse and turn-around, no lookups).
    Floor,
    /// The floor program that answers one constant record, the frame grown for it
    /// (`gslb_floor_grow`).
    FloorGrow,
    /// The answering program whose maps have `server.ecs_allow` listing the bench client.
    EcsAllow,
    /// The answering program whose maps were published without shortcuts.
    Plain,
}

struct Case {
    name: &'static str,
    frame: Vec<u8>,
    want: u32,
    run: Run,
    samples: Vec<u64>,
}

/// Added to the test configuration: a view v2 that only `v2only` answers in, so a v2 client's
/// www (which has an answer of its own in v1 only) is the default view's, from the copy publish
/// writes under v2 (`xdp_a_hit_v4_copy`) or, without it, from a second lookup. (The bench
/// client's RTT row gives it an LDNS view but the default view: its www takes one lookup
/// either way.)
const V2: &str = r#"
[[view]]
name = "v2"
prefixes = ["198.51.101.0/24"]
[[gslb_domain]]
name = "v2only.example.com"
services = ["www-a1"]
[[gslb_domain.view]]
view = "v2"
services = ["www-a2"]
"#;

/// Added to the test configuration: a domain answered by RTT, so that a hit takes the LDNS
/// view's answer (the third lookup) for a client with an RTT row.
const RTT_DOMAIN: &str = r#"
[[site]]
name = "far"
ip = "192.0.2.2"
[[service]]
name = "far-a"
ip = "192.0.2.150"
site = "far"
[[gslb_domain]]
name = "rtt.example.com"
method = "rtt"
services = ["www-a1", "far-a"]
"#;

fn main() {
    let Some(mut dp) = common::dataplane() else {
        return;
    };
    // The same program and answers without the publish's shortcuts (no default-view copies,
    // no any-view hints): the `_without_shortcuts` cases, timed in the same run.
    let Some(mut dp_plain) = common::dataplane() else {
        return;
    };
    dp_plain.table.without_shortcuts();
    for dp in [&mut dp, &mut dp_plain] {
        use gslb_user::compile::{Inputs, LdnsRtt, Snapshot};
        // With an identity, as anycast nodes run: every hit reads its length (`NSID`). With
        // DNS cookies: a query with one goes on to `gslb_xdp_cookie`.
        let text = format!("{}{RTT_DOMAIN}{V2}", common::config_text()).replacen(
            "[server]\n",
            &format!(
                "[server]\nidentity = \"fra-1\"\ncookie_secret = \"{}\"\n",
                common::COOKIE_SECRET
            ),
            1,
        );
        let config =
            gslb_user::config::Config::parse(&text, std::path::Path::new("xdp-bench.toml"))
                .expect("bench configuration");
        // The bench client's /24 is 10 ms from "s" and 40 ms from "far".
        let row = LdnsRtt {
            ldns: "203.0.113.0/24".parse().unwrap(),
            rtt_us: vec![Some(10_000), Some(40_000)].into(),
        };
        let inputs = Inputs {
            rtt: std::sync::Arc::new(vec![row]),
            ..Inputs::default()
        };
        let stats = dp
            .table
            .publish(&Snapshot::compile(&config, &inputs))
            .expect("publishing");
        println!(
            "# published {} answer sets, {} of them default-view copies",
            stats.answers, stats.default_copies
        );
    }

    // The same program with response rate limiting on, at a rate the bench never reaches, so
    // that every hit pays the bucket lookup and update (`xdp_a_hit_v4_rrl` vs `xdp_a_hit_v4`).
    let Some(mut dp_rrl) = common::dataplane() else {
        return;
    };
    {
        let text = format!(
            "{}\n[rrl]\nrate = 1000000\nburst = 1000000\n",
            common::config_text()
        );
        let config =
            gslb_user::config::Config::parse(&text, std::path::Path::new("xdp-bench-rrl.toml"))
                .expect("bench configuration with [rrl]");
        dp_rrl
            .table
            .publish(&gslb_user::compile::Snapshot::from_config(&config))
            .expect("publishing");
    }
    // As gslbd runs it: the interface's MAC checked, a heartbeat within its bound.
    for dp in [&mut dp, &mut dp_plain] {
        dp.add_local_mac(common::SERVER_MAC).expect("the local MAC");
        dp.take_heartbeat()
            .expect("the heartbeat map")
            .beat(Some(std::time::Duration::from_secs(3600)))
            .expect("a heartbeat");
    }
    // The same program under `server.ecs_allow` listing the bench client's /24, run as gslbd
    // runs it too: an ECS hit also looks the resolver up in `ECS_ALLOW`
    // (`xdp_a_hit_v4_ecs_allowed` vs `xdp_a_hit_v4_ecs`).
    let Some(mut dp_ecs) = common::dataplane() else {
        return;
    };
    {
        let text = common::config_text().replacen(
            "[server]\n",
            "[server]\necs_allow = [\"192.0.2.0/24\", \"203.0.113.0/24\", \"2001:db8::/32\"]\n",
            1,
        );
        let config =
            gslb_user::config::Config::parse(&text, std::path::Path::new("xdp-bench-ecs.toml"))
                .expect("bench configuration with ecs_allow");
        dp_ecs
            .table
            .publish(&gslb_user::compile::Snapshot::from_config(&config))
            .expect("publishing");
    }
    dp_ecs
        .add_local_mac(common::SERVER_MAC)
        .expect("the local MAC");
    dp_ecs
        .take_heartbeat()
        .expect("the heartbeat map")
        .beat(Some(std::time::Duration::from_secs(3600)))
        .expect("a heartbeat");

    let mut edns_query = query(1, WWW, RecordType::A);
    edns_query.set_edns(edns());
    let mut cname_edns_query = query(1, common::CNAME, RecordType::A);
    cname_edns_query.set_edns(edns());
    // With a subnet of view v1 (a trie entry): answered from its view, the option echoed.
    let mut ecs_query = edns_query.clone();
    if let Some(opt) = ecs_query.edns.as_mut() {
        opt.options_mut().insert(ecs_subnet("198.51.100.0/24"));
    }
    // The bench client's own /24: the trie entry of `xdp_a_hit_v4` (its RTT row's, in the
    // default view), so the ECS hit without the longer trie path to v1's block (v1's and v2's
    // /24s share 23 bits: one node more than the client's).
    let mut ecs_own_query = edns_query.clone();
    if let Some(opt) = ecs_own_query.edns.as_mut() {
        opt.options_mut().insert(ecs_subnet("203.0.113.0/24"));
    }
    // Asking for our NSID: the identity written beside the answer (one helper call).
    let mut nsid_query = edns_query.clone();
    if let Some(opt) = nsid_query.edns.as_mut() {
        opt.options_mut()
            .insert(hickory_proto::rr::rdata::opt::EdnsOption::Unknown(
                3,
                vec![],
            ));
    }
    // Bringing back a fresh server cookie of ours: `gslb_xdp` sees the option and tail-calls
    // `gslb_xdp_cookie`, which parses again, checks the cookie (SipHash-2-4) and echoes it.
    let mut cookie_query = edns_query.clone();
    if let Some(opt) = cookie_query.edns.as_mut() {
        let client = std::net::IpAddr::V4(common::CLIENT_V4);
        let data = common::cookie_made(common::COOKIE_SECRET, [7; 8], client, common::unix_now());
        opt.options_mut().insert(common::cookie_option(data));
    }
    // A /0 subnet: the option parsed and echoed (scope 0), no client named, so the source's
    // view answers, as for `edns_query`.
    let mut ecs_zero_query = edns_query.clone();
    if let Some(opt) = ecs_zero_query.edns.as_mut() {
        opt.options_mut().insert(ecs_subnet("0.0.0.0/0"));
    }
    let a = wire(&query(1, WWW, RecordType::A));
    // A source in v1, the view of `ecs_query`'s subnet: the same trie entry and answer set as
    // the ECS hit, without the option.
    let v1_client = std::net::IpAddr::V4(V1_CLIENT_V4);
    let mut other_port = Frame::v4(a.clone());
    other_port.dst_port = 5353;
    let v2_client = std::net::IpAddr::V4(std::net::Ipv4Addr::new(198, 51, 101, 7));
    let server = std::net::IpAddr::V4(common::SERVER_V4);
    let case = |name, frame: Vec<u8>, want, pass_program| Case {
        name,
        frame,
        want,
        run: if pass_program { Run::Pass } else { Run::Answer },
        samples: Vec::with_capacity(ROUNDS * RUNS_PER_ROUND),
    };
    let mut cases = vec![
        case(
            "xdp_pass_program",
            Frame::v4(a.clone()).bytes(),
            XDP_PASS,
            true,
        ),
        case("xdp_a_hit_v4", Frame::v4(a.clone()).bytes(), XDP_TX, false),
        case(
            "xdp_aaaa_hit_v6",
            Frame::v6(wire(&query(1, WWW, RecordType::AAAA))).bytes(),
            XDP_TX,
            false,
        ),
        case(
            "xdp_a_hit_v4_edns",
            Frame::v4(wire(&edns_query)).bytes(),
            XDP_TX,
            false,
        ),
        case(
            "xdp_a_hit_v4_ecs",
            Frame::v4(wire(&ecs_query)).bytes(),
            XDP_TX,
            false,
        ),
        case(
            "xdp_a_hit_v4_nsid",
            Frame::v4(wire(&nsid_query)).bytes(),
            XDP_TX,
            false,
        ),
        case(
            "xdp_cookie_hit_v4",
            Frame::v4(wire(&cookie_query)).bytes(),
            XDP_TX,
            false,
        ),
        // A CNAME domain's answer: the CNAME and the two addresses of its target (62 bytes,
        // plain and with EDNS), and to view v1 the CNAME alone (31 bytes: the OPT's checksum
        // sum swapped).
        case(
            "xdp_cname_hit_v4",
            Frame::v4(wire(&query(1, common::CNAME, RecordType::A))).bytes(),
            XDP_TX,
            false,
        ),
        case(
            "xdp_cname_hit_v4_edns",
            Frame::v4(wire(&cname_edns_query)).bytes(),
            XDP_TX,
            false,
        ),
        case(
            "xdp_cname_alone_v4_v1_edns",
            Frame::udp(v1_client, server, wire(&cname_edns_query)).bytes(),
            XDP_TX,
            false,
        ),
        // A name below a wildcard (`gslb_xdp` misses it and tail-calls `gslb_xdp_wildcard`,
        // which parses again and looks the parent up), and a name we do not serve at all while
        // wildcards are published (the same way, passed).
        case(
            "xdp_wildcard_hit_v4",
            Frame::v4(wire(&query(1, "host-1.gw.example.com", RecordType::A))).bytes(),
            XDP_TX,
            false,
        ),
        case(
            "xdp_unknown_name_v4",
            Frame::v4(wire(&query(1, "host-1.nowhere.example.com", RecordType::A))).bytes(),
            XDP_PASS,
            false,
        ),
        // The parts of the ECS hit's cost: the same view and answers from a source in v1
        // (plain and with EDNS), and the option without a client (/0).
        case(
            "xdp_a_hit_v4_v1",
            Frame::udp(v1_client, server, a.clone()).bytes(),
            XDP_TX,
            false,
        ),
        case(
            "xdp_a_hit_v4_v1_edns",
            Frame::udp(v1_client, server, wire(&edns_query)).bytes(),
            XDP_TX,
            false,
        ),
        case(
            "xdp_a_hit_v4_ecs_own",
            Frame::v4(wire(&ecs_own_query)).bytes(),
            XDP_TX,
            false,
        ),
        case(
            "xdp_a_hit_v4_ecs_zero",
            Frame::v4(wire(&ecs_zero_query)).bytes(),
            XDP_TX,
            false,
        ),
        Case {
            run: Run::EcsAllow,
            ..case(
                "xdp_a_hit_v4_ecs_allowed",
                Frame::v4(wire(&ecs_query)).bytes(),
                XDP_TX,
                false,
            )
        },
        case(
            "xdp_a_hit_v4_by_rtt",
            Frame::v4(wire(&query(1, "rtt.example.com", RecordType::A))).bytes(),
            XDP_TX,
            false,
        ),
        case(
            "xdp_early_pass_other_port",
            other_port.bytes(),
            XDP_PASS,
            false,
        ),
        Case {
            run: Run::Rrl,
            ..case(
                "xdp_a_hit_v4_rrl",
                Frame::v4(a.clone()).bytes(),
                XDP_TX,
                false,
            )
        },
        // The client's view has no set of its own for www: with the default's copied under
        // it, one `ANSWERS` lookup; without, two.
        Case {
            run: Run::Plain,
            ..case(
                "xdp_a_hit_v4_without_shortcuts",
                Frame::v4(a.clone()).bytes(),
                XDP_TX,
                false,
            )
        },
        case(
            "xdp_a_hit_v4_copy",
            Frame::udp(v2_client, server, a.clone()).bytes(),
            XDP_TX,
            false,
        ),
        Case {
            run: Run::Plain,
            ..case(
                "xdp_a_hit_v4_copy_without_shortcuts",
                Frame::udp(v2_client, server, a.clone()).bytes(),
                XDP_TX,
                false,
            )
        },
        // A name with one answer for every client: no trie with its hint, the trie without.
        case(
            "xdp_a_hit_v4_any_view",
            Frame::v4(wire(&query(1, ALL, RecordType::A))).bytes(),
            XDP_TX,
            false,
        ),
        Case {
            run: Run::Plain,
            ..case(
                "xdp_a_hit_v4_any_view_without_shortcuts",
                Frame::v4(wire(&query(1, ALL, RecordType::A))).bytes(),
                XDP_TX,
                false,
            )
        },
        // The floor of `xdp_a_hit_v4`: the same query through the same parse and turn-around,
        // without a lookup or a record (`xdp_a_hit_v4_vs_floor` below).
        Case {
            run: Run::Floor,
            ..case("xdp_floor", Frame::v4(a.clone()).bytes(), XDP_TX, false)
        },
        // The floor of the EDNS and ECS hits: the OPT, and the ECS option, parsed and echoed
        // (the floor's reply is the query's size, so with the option too).
        Case {
            run: Run::Floor,
            ..case(
                "xdp_floor_edns",
                Frame::v4(wire(&edns_query)).bytes(),
                XDP_TX,
                false,
            )
        },
        Case {
            run: Run::Floor,
            ..case(
                "xdp_floor_ecs",
                Frame::v4(wire(&ecs_query)).bytes(),
                XDP_TX,
                false,
            )
        },
        // The floor with one record and the frame grown for it, the one kernel call every
        // answer makes (`xdp_floor_grow_vs_floor` below: what the hit cannot get under here).
        Case {
            run: Run::FloorGrow,
            ..case(
                "xdp_floor_grow",
                Frame::v4(a.clone()).bytes(),
                XDP_TX,
                false,
            )
        },
    ];
    dp.load_floor().expect("loading the floor program");

    let answer = dp.program();
    let pass = dp.pass_program();
    let answer_rrl = dp_rrl.program();
    let floor = dp.floor_program();
    let floor_grow = dp.floor_grow_program();
    let answer_ecs = dp_ecs.program();
    let answer_plain = dp_plain.program();
    // `GSLB_BENCH_XDP_LINES=FILE`: each program's JIT code as source lines, for
    // `cargo xtask profile-xdp` to place a profiler's samples.
    if let Some(path) = std::env::var_os("GSLB_BENCH_XDP_LINES") {
        write_jit_lines(
            path.as_ref(),
            &[
                ("gslb_xdp", answer),
                ("gslb_xdp (rrl on)", answer_rrl),
                ("gslb_xdp (ecs_allow)", answer_ecs),
                ("gslb_xdp (no shortcuts)", answer_plain),
                ("gslb_floor", floor),
                ("gslb_floor_grow", floor_grow),
                ("pass (the baseline)", pass),
            ],
        );
    }
    let mut out = vec![0u8; 4096];
    // `GSLB_BENCH_XDP_ONLY=a,b`: only the cases named (and the baseline, always first), to
    // compare two builds quickly or to profile a case (`perf record` sees little else).
    // `GSLB_BENCH_XDP_ROUNDS=n`: n rounds instead of `ROUNDS`, for a profiler's samples.
    if let Ok(only) = std::env::var("GSLB_BENCH_XDP_ONLY") {
        let only: Vec<&str> = only.split(',').collect();
        for name in &only {
            assert!(
                cases.iter().any(|c| c.name == *name),
                "GSLB_BENCH_XDP_ONLY: no case {name:?}"
            );
        }
        cases.retain(|c| c.run == Run::Pass || only.contains(&c.name));
    }
    let rounds = std::env::var("GSLB_BENCH_XDP_ROUNDS").map_or(ROUNDS, |n| {
        n.parse()
            .ok()
            .filter(|&n| n > 0)
            .unwrap_or_else(|| panic!("GSLB_BENCH_XDP_ROUNDS: {n:?} is not a positive count"))
    });
    for _ in 0..rounds {
        for case in &mut cases {
            let program: &Xdp = match case.run {
                Run::Answer => answer,
                Run::Pass => pass,
                Run::Rrl => answer_rrl,
                Run::Floor => floor,
                Run::FloorGrow => floor_grow,
                Run::EcsAllow => answer_ecs,
                Run::Plain => answer_plain,
            };
            for _ in 0..RUNS_PER_ROUND {
                let result = program
                    .test_run(TestRunOptions {
                        data_in: Some(&case.frame),
                        data_out: Some(&mut out),
                        ..TestRunOptions::new()
                    })
                    .expect("BPF_PROG_TEST_RUN");
                assert_eq!(
                    result.return_value, case.want,
                    "{}: unexpected XDP action",
                    case.name
                );
                case.samples.push(result.duration.as_nanos() as u64);
            }
        }
    }

    let median = |s: &mut Vec<u64>| {
        s.sort_unstable();
        s[s.len() / 2]
    };
    // Mean of the middle 80% of the (sorted) samples.
    let trimmed_mean = |s: &[u64]| {
        let cut = s.len() / 10;
        let middle = &s[cut..s.len() - cut];
        middle.iter().sum::<u64>() as f64 / middle.len() as f64
    };
    for (name, program) in [
        ("gslb_xdp", answer),
        ("gslb_floor", floor),
        ("gslb_floor_grow", floor_grow),
    ] {
        if let Ok(info) = program.info() {
            // Instructions the verifier processed (its budget is 1,000,000) and the size.
            let show = |n: Option<u32>| n.map_or("?".to_owned(), |n| n.to_string());
            println!(
                "# {name}: verifier processed {} instructions; {} bytes translated",
                show(info.verified_instruction_count()),
                show(info.size_translated())
            );
        }
    }
    let baseline = median(&mut cases[0].samples);
    let baseline_tmean = trimmed_mean(&cases[0].samples);
    println!("# {rounds} rounds x {RUNS_PER_ROUND} runs per case, interleaved; medians");
    // Net of the baseline, by case: (median, trimmed mean).
    let mut net = std::collections::HashMap::new();
    for case in &mut cases {
        let m = median(&mut case.samples);
        let t = trimmed_mean(&case.samples);
        net.insert(
            case.name,
            (m.saturating_sub(baseline) as f64, t - baseline_tmean),
        );
        println!("bench {} {} ns/query", case.name, m);
        if case.run != Run::Pass {
            println!(
                "bench {}_net {} ns/query",
                case.name,
                m.saturating_sub(baseline)
            );
        }
        println!("bench {}_tmean {:.1} ns/query", case.name, t);
        if case.run != Run::Pass {
            println!(
                "bench {}_tmean_net {:.1} ns/query",
                case.name,
                t - baseline_tmean
            );
        }
    }
    // How near the hit path is to its floor (issue 15: at most 1.5x, never over 2x).
    // `name`: `a` net over `b` net, by medians and by trimmed means, when both ran.
    let ratio = |name: &str, a: &str, b: &str| {
        if let (Some((x, x_t)), Some((y, y_t))) = (net.get(a), net.get(b)) {
            println!("bench {name} {:.2} ratio", x / y);
            println!("bench {name}_tmean {:.2} ratio", x_t / y_t);
        }
    };
    ratio("xdp_a_hit_v4_vs_floor", "xdp_a_hit_v4", "xdp_floor");
    // The floor that grows the frame for one record, against the floor: the least an answer
    // can cost on this machine, as a multiple of the floor (the hit's ratio cannot be lower).
    ratio("xdp_floor_grow_vs_floor", "xdp_floor_grow", "xdp_floor");
    // What the shortcuts save, and what ECS costs over the plain hit (issue 15: within 15 ns),
    // in trimmed means of this run (of the cases that ran: see `GSLB_BENCH_XDP_ONLY`).
    let diff = |a: &str, b: &str| Some(net.get(a)?.1 - net.get(b)?.1);
    for (name, a, b) in [
        (
            "xdp_default_copy_saves",
            "xdp_a_hit_v4_copy_without_shortcuts",
            "xdp_a_hit_v4_copy",
        ),
        (
            "xdp_hint_bit_costs",
            "xdp_a_hit_v4",
            "xdp_a_hit_v4_without_shortcuts",
        ),
        (
            "xdp_any_view_hint_saves",
            "xdp_a_hit_v4_any_view_without_shortcuts",
            "xdp_a_hit_v4_any_view",
        ),
        ("xdp_ecs_over_plain", "xdp_a_hit_v4_ecs", "xdp_a_hit_v4"),
        ("xdp_cname_over_plain", "xdp_cname_hit_v4", "xdp_a_hit_v4"),
        (
            "xdp_wildcard_over_plain",
            "xdp_wildcard_hit_v4",
            "xdp_a_hit_v4",
        ),
        (
            "xdp_cname_edns_over_edns",
            "xdp_cname_hit_v4_edns",
            "xdp_a_hit_v4_edns",
        ),
        ("xdp_ecs_over_edns", "xdp_a_hit_v4_ecs", "xdp_a_hit_v4_edns"),
        (
            "xdp_nsid_over_edns",
            "xdp_a_hit_v4_nsid",
            "xdp_a_hit_v4_edns",
        ),
        (
            "xdp_cookie_over_edns",
            "xdp_cookie_hit_v4",
            "xdp_a_hit_v4_edns",
        ),
        // Its parts: the same view's EDNS hit, the /0 option, and the floor's share.
        (
            "xdp_ecs_over_v1_edns",
            "xdp_a_hit_v4_ecs",
            "xdp_a_hit_v4_v1_edns",
        ),
        (
            "xdp_v1_edns_over_plain",
            "xdp_a_hit_v4_v1_edns",
            "xdp_a_hit_v4",
        ),
        (
            "xdp_ecs_own_over_plain",
            "xdp_a_hit_v4_ecs_own",
            "xdp_a_hit_v4",
        ),
        (
            "xdp_ecs_own_over_edns",
            "xdp_a_hit_v4_ecs_own",
            "xdp_a_hit_v4_edns",
        ),
        (
            "xdp_ecs_zero_over_edns",
            "xdp_a_hit_v4_ecs_zero",
            "xdp_a_hit_v4_edns",
        ),
        ("xdp_floor_edns_over_floor", "xdp_floor_edns", "xdp_floor"),
        ("xdp_floor_ecs_over_edns", "xdp_floor_ecs", "xdp_floor_edns"),
    ] {
        if let Some(d) = diff(a, b) {
            println!("bench {name}_tmean {d:.1} ns/query");
        }
    }
    // What the `ECS_ALLOW` lookup adds to an ECS hit, in the same run.
    if let (Some((ecs, ecs_t)), Some((allowed, allowed_t))) = (
        net.get("xdp_a_hit_v4_ecs"),
        net.get("xdp_a_hit_v4_ecs_allowed"),
    ) {
        println!(
            "bench xdp_a_hit_v4_ecs_allowed_minus_ecs {:.0} ns/query (trimmed means {:.1})",
            allowed - ecs,
            allowed_t - ecs_t
        );
    }
}

/// Writes the JIT line table of each program to `path`, a run of code per line: program,
/// start and end address (hex), file, line, tab-separated (read by `cargo xtask profile-xdp`).
fn write_jit_lines(path: &std::path::Path, programs: &[(&str, &Xdp)]) {
    use std::io::Write;
    let file = std::fs::File::create(path)
        .unwrap_or_else(|e| panic!("GSLB_BENCH_XDP_LINES: creating {}: {e}", path.display()));
    let mut out = std::io::BufWriter::new(file);
    for (name, program) in programs {
        let code = gslb_user::dataplane::jit_lines(program)
            .unwrap_or_else(|e| panic!("{name}: {:#}", anyhow::Error::new(e)));
        for l in &code.lines {
            writeln!(
                out,
                "{name}\t{:x}\t{:x}\t{}\t{}",
                l.start, l.end, l.file, l.line
            )
            .expect("writing GSLB_BENCH_XDP_LINES");
        }
    }
    out.flush().expect("writing GSLB_BENCH_XDP_LINES");
}
