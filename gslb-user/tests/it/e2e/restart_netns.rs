//! The fast path survives its controller: gslbd killed with SIGKILL leaves XDP answering from
//! the last published maps (the link and the maps are pinned), and a new gslbd adopts the pins,
//! swaps its program into the link, republishes and carries on. A query loop runs across the
//! kill and the restart; every query must be answered.

use std::{path::PathBuf, time::Duration};

use gslb_tests::{Lab, SERVER_IF, SERVER_V4, privileged, responder_config};
use gslb_user::dataplane::pinned_counters;

/// Queries in the loop; each is a separate `dig` (a few ms each), with a 1 s timeout.
const QUERIES: usize = 300;

#[test]
fn xdp_keeps_answering_across_sigkill_and_restart() {
    if !privileged("xdp_keeps_answering_across_sigkill_and_restart") {
        return;
    }
    let mut lab = Lab::new("restart");
    let config = std::env::temp_dir().join(format!("{}.toml", lab.server_ns));
    std::fs::write(&config, responder_config()).unwrap();
    let pin_path = PathBuf::from(format!("/sys/fs/bpf/{}", lab.server_ns));
    let gslbd = |lab: &Lab| {
        let mut cmd = lab.nsenter(&lab.server_ns, env!("CARGO_BIN_EXE_gslbd").as_ref());
        cmd.args([
            "--config",
            config.to_str().unwrap(),
            "--interface",
            SERVER_IF,
        ]);
        cmd.args([
            "--xdp-mode",
            "skb",
            "--pin-path",
            pin_path.to_str().unwrap(),
        ]);
        cmd
    };
    let first = lab.spawn_until(gslbd(&lab), "gslbd: ready", Duration::from_secs(30));
    let hits_before = pinned_counters(&pin_path).expect("counters").hits();

    // The loop runs as its own process so that it keeps querying while this thread kills and
    // restarts gslbd. `dig +short` prints the address, or an error line when unanswered.
    let script = format!(
        "for i in $(seq {QUERIES}); do dig +short +tries=1 +time=1 @{SERVER_V4} www.example.com A; done"
    );
    let looper = lab
        .exec(&lab.client_ns, "sh")
        .arg("-c")
        .arg(&script)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();

    std::thread::sleep(Duration::from_millis(500));
    lab.kill(first);
    assert!(
        pin_path.join(format!("link-{SERVER_IF}")).exists(),
        "the link stays pinned after SIGKILL"
    );
    std::thread::sleep(Duration::from_millis(500));
    let second = lab.spawn_until(gslbd(&lab), "gslbd: ready", Duration::from_secs(30));

    let out = looper.wait_with_output().unwrap();
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    let answered = lines
        .iter()
        .filter(|l| l.parse::<std::net::Ipv4Addr>().is_ok())
        .count();
    assert_eq!(
        answered,
        QUERIES,
        "every query answered across the kill and the restart; unanswered:\n{}",
        lines
            .iter()
            .filter(|l| l.parse::<std::net::Ipv4Addr>().is_err())
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );

    // XDP answered them all, counted in the one COUNTERS map both gslbds used: the second
    // adopted the first's pins instead of starting empty ones.
    let hits = pinned_counters(&pin_path).expect("counters").hits() - hits_before;
    assert!(
        hits >= QUERIES as u64,
        "{hits} fast-path hits for {QUERIES} queries"
    );

    // A clean stop detaches and removes every pin.
    lab.stop(second);
    assert!(
        !pin_path.exists(),
        "pins left behind: {:?}",
        std::fs::read_dir(&pin_path).map(Iterator::count)
    );
    let _ = std::fs::remove_file(&config);
}
