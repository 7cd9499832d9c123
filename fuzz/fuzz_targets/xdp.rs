//! The XDP program under BPF_PROG_TEST_RUN against the responder: the differential check of
//! the `xdp::fuzz` test (gslb-user/tests/it/xdp/fuzz.rs), driven by libFuzzer. The program is
//! loaded and the XDP tests' configuration published once; for each input frame, an XDP_TX
//! reply must be the responder's answer to the same query from the same client in a valid
//! envelope (`gslb_tests::xdp::check_reply`), an XDP_PASS must leave the frame as it was, no
//! other action may occur, and exactly one counter rises (a hit counter for a reply). The
//! program's own branches are not instrumented: what guides libFuzzer is the responder's
//! coverage, which a passed query's answer adds too.
//!
//! Input: a byte of choices, then the DNS message the frame carries. The byte's low three bits
//! pick the client (of each view and family, and martians), bit 3 an 802.1Q tag, bit 4
//! Ethernet padding after the datagram; with bit 5 the rest is the whole frame instead
//! (checksums and lengths as given).
//!
//! Needs root and BPF: without them it says why and exits with status 77, which
//! `cargo xtask fuzz` reports as skipped.
#![no_main]

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    path::Path,
    sync::{LazyLock, Mutex},
};

use aya::programs::{TestRun, TestRunOptions};
use gslb_tests::xdp::{
    CLIENT_V4, CLIENT_V6, Frame, SERVER_MAC, V1_CLIENT_V4, V1_CLIENT_V6, XDP_PASS, XDP_TX,
    check::{hex, parse},
    check_reply, config_text,
};
use gslb_user::{
    compile::Snapshot,
    config::Config,
    dataplane::Dataplane,
    responder::{Responder, Transport},
};
use libfuzzer_sys::{Corpus, fuzz_target};

/// The exit status of a target that cannot run here (automake's "skipped").
const SKIPPED: i32 = 77;
/// The largest frame BPF_PROG_TEST_RUN takes for XDP: a page less the headroom (256) and the
/// shared info's room (320).
const MAX_FRAME: usize = 4096 - 256 - 320;

struct Fixture {
    dp: Dataplane,
    responder: Responder,
}

static FIXTURE: LazyLock<Mutex<Fixture>> = LazyLock::new(|| {
    let skip = |why: String| -> ! {
        eprintln!("skipped: the xdp fuzz target {why}");
        std::process::exit(SKIPPED);
    };
    if let Some(why) = gslb_tests::missing_privilege() {
        skip(why);
    }
    let config = Config::parse(&config_text(), Path::new("xdp-fuzz.toml")).expect("config");
    let snapshot = Snapshot::from_config(&config);
    let mut dp =
        Dataplane::load(None).unwrap_or_else(|e| skip(format!("cannot load the XDP program: {e}")));
    dp.table.publish(&snapshot).expect("publishing");
    dp.add_local_mac(SERVER_MAC).expect("the server's MAC");
    let responder = Responder::new(&snapshot);
    Mutex::new(Fixture { dp, responder })
});

const CLIENTS: [IpAddr; 8] = [
    IpAddr::V4(CLIENT_V4),
    IpAddr::V4(V1_CLIENT_V4),
    IpAddr::V6(CLIENT_V6),
    IpAddr::V6(V1_CLIENT_V6),
    IpAddr::V4(Ipv4Addr::new(198, 51, 100, 200)),
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 0xff, 0, 0, 0, 1)),
    IpAddr::V4(Ipv4Addr::LOCALHOST),
    IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1)),
];

fuzz_target!(
    init: {
        LazyLock::force(&FIXTURE);
    },
    |data: &[u8]| -> Corpus {
        let Some((&choice, rest)) = data.split_first() else {
            return Corpus::Reject;
        };
        if rest.len() > MAX_FRAME {
            return Corpus::Reject;
        }
        let frame = if choice & 0x20 != 0 {
            rest.to_vec()
        } else {
            let mut frame = Frame::query_from(CLIENTS[usize::from(choice & 7)], rest.to_vec());
            frame.vlan = (choice & 8 != 0).then_some(0x0064);
            frame.trailer = if choice & 0x10 != 0 { 6 } else { 0 };
            frame.bytes()
        };
        if !(14..=MAX_FRAME).contains(&frame.len()) {
            return Corpus::Reject;
        }
        let fixture = FIXTURE.lock().expect("the fixture");
        let Fixture { dp, responder } = &*fixture;
        let before = dp.counters().expect("counters");
        let mut out = vec![0u8; 4096];
        let run = dp
            .program()
            .test_run(TestRunOptions {
                data_in: Some(&frame),
                data_out: Some(&mut out),
                ..TestRunOptions::new()
            })
            .unwrap_or_else(|e| panic!("BPF_PROG_TEST_RUN on {} bytes: {e}", frame.len()));
        let counted = dp.counters().expect("counters").delta(&before);
        let reply = &out[..run.data_size_out as usize];
        match run.return_value {
            XDP_TX => {
                if let Err(why) = check_reply(&frame, reply, &mut |dns, src| {
                    responder.respond(dns, src, Transport::Udp)
                }) {
                    panic!("{why}\n  query {}\n  reply {}", hex(&frame), hex(reply));
                }
            }
            XDP_PASS => {
                assert!(reply == frame.as_slice(), "passed changed: {}", hex(&frame));
                // The responder answers what is passed: its coverage is what guides libFuzzer
                // here (the program's own branches are not instrumented).
                if let Ok(q) = parse(&frame) {
                    let _ = responder.respond(&q.segment[8..], q.src, Transport::Udp);
                }
            }
            other => panic!("action {other} for {}", hex(&frame)),
        }
        match counted.as_slice() {
            [(c, 1)] if c.is_hit() == (run.return_value == XDP_TX) => {}
            _ => panic!(
                "action {}, counted {counted:?}: {}",
                run.return_value,
                hex(&frame)
            ),
        }
        Corpus::Keep
    }
);
