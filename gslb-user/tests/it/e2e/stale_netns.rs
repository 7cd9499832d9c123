//! A stale fast path stops answering (issue 12): gslbd killed with SIGKILL leaves XDP attached
//! and answering from the pinned maps, but only until `server.stale_after_s` after its last
//! heartbeat; then XDP passes every frame (counted `stale`), nothing listens on port 53, and the
//! client gets no answer (the kernel's ICMP port unreachable), so a resolver would fail over to
//! another server. A new gslbd adopts the pins and answers again.

use std::{net::IpAddr, time::Duration, time::Instant};

use gslb_common::Counter;
use gslb_tests::{GslbdLab, Lab, SERVER_V4, privileged, responder_config};
use gslb_user::dataplane::pinned_counters;

/// The bound under test, short so that the test waits a few seconds.
const STALE_AFTER_S: u64 = 3;
const QUERIES: usize = 5;

/// `QUERIES` queries for www A, one `dig` each (1 s timeout, one try); how many got an answer.
fn answered(lab: &Lab) -> usize {
    (0..QUERIES)
        .filter(|_| {
            let out = lab.dig(
                IpAddr::V4(SERVER_V4),
                &["+short", "+tries=1", "+time=1", "www.example.com", "A"],
            );
            out.lines()
                .any(|l| l.trim().parse::<std::net::Ipv4Addr>().is_ok())
        })
        .count()
}

#[test]
fn xdp_stops_answering_once_the_killed_gslbds_heartbeat_is_stale() {
    if !privileged("xdp_stops_answering_once_the_killed_gslbds_heartbeat_is_stale") {
        return;
    }
    let text = responder_config().replacen(
        "[server]\n",
        &format!("[server]\nstale_after_s = {STALE_AFTER_S}\n"),
        1,
    );
    assert!(text.contains("stale_after_s"), "the bound is configured");
    let mut lab = GslbdLab::new("stale", &text);
    let pin_path = lab.pins.clone();
    let gslbd = |lab: &GslbdLab| lab.gslbd(env!("CARGO_BIN_EXE_gslbd"));
    let counters = || pinned_counters(&pin_path).expect("pinned counters");

    let first = lab.start(gslbd(&lab));
    assert_eq!(answered(&lab), QUERIES, "gslbd running");

    // Killed: XDP answers on, from the pinned maps (no responder is left to answer).
    lab.kill(first);
    let killed = Instant::now();
    let before = counters();
    assert_eq!(answered(&lab), QUERIES, "within the bound after SIGKILL");
    assert!(
        counters().hits() >= before.hits() + QUERIES as u64,
        "answered by XDP"
    );
    assert!(
        killed.elapsed()
            < Duration::from_secs(STALE_AFTER_S)
                .checked_sub(Duration::from_millis(500))
                .unwrap(),
        "the queries within the bound took too long to prove anything: {:?}",
        killed.elapsed()
    );

    // Past the bound (the last beat was at most a quarter of it before the kill): nothing.
    std::thread::sleep(
        Duration::from_secs(STALE_AFTER_S).saturating_sub(killed.elapsed())
            + Duration::from_secs(1),
    );
    let before = counters();
    assert_eq!(answered(&lab), 0, "answers past the bound");
    let after = counters();
    assert_eq!(after.hits(), before.hits(), "XDP hits past the bound");
    assert!(
        after.get(Counter::Stale) >= before.get(Counter::Stale) + QUERIES as u64,
        "passed as stale: {} → {}",
        before.get(Counter::Stale),
        after.get(Counter::Stale)
    );

    // A new gslbd adopts the pins and beats: answered by XDP again.
    let second = lab.start(gslbd(&lab));
    let before = counters();
    assert_eq!(answered(&lab), QUERIES, "after the restart");
    assert!(counters().hits() >= before.hits() + QUERIES as u64);

    lab.stop(second);
    assert!(!pin_path.exists(), "pins left behind");
}
