//! Dynamic RTT in a real gslbd: gslbd serves an rtt domain with XDP on a veth in a server
//! namespace, at site "east"; the client namespace is the resolver (LDNS) that asks with dig.
//! Its first query is answered by the fallback (global availability: west's service first);
//! the fast path records the resolver, the prober measures it (ICMP: the namespace answers
//! echo), the RTT change republishes, and XDP answers east's service by RTT. `gslbctl ldns`
//! shows the row with its protocol and age; `gslbctl reload` with a bad configuration says why
//! it was refused, and the answers go on.
//!
//! Needs root (namespaces, XDP).

use std::{
    path::Path,
    time::{Duration, Instant},
};

use gslb_tests::{CLIENT_V4, GslbdLab, Lab, SERVER_V4, dig_answers, gslbctl, privileged};
use gslb_user::dataplane::pinned_counters;

const GSLBCTL: &str = env!("CARGO_BIN_EXE_gslbctl");
const EAST: &str = "198.51.100.1";
const WEST: &str = "198.51.100.2";

fn config(ttl: u32) -> String {
    format!(
        r#"
[server]
listen = ["{SERVER_V4}"]
site = "east"

[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

[[site]]
name = "east"
ip = "{SERVER_V4}"

[[site]]
name = "west"
ip = "203.0.113.1"

[[service]]
name = "web-west"
ip = "{WEST}"
site = "west"

[[service]]
name = "web-east"
ip = "{EAST}"
site = "east"

[[gslb_domain]]
name = "www.example.com"
ttl = {ttl}
services = ["web-west", "web-east"]
method = "rtt"
fallback = "globalavailability"

[rtt]
interval_ms = 500
timeout_ms = 500
"#
    )
}

/// The A records dig gets for www.example.com, and how many fast-path hits that query made.
fn ask(lab: &Lab, pin_path: &Path) -> (Vec<String>, u64) {
    let before = pinned_counters(pin_path).expect("counters").hits();
    let out = lab.dig(SERVER_V4.into(), &["www.example.com", "A"]);
    let hits = pinned_counters(pin_path).expect("counters").hits() - before;
    let answers = dig_answers(&out)
        .into_iter()
        .filter(|(_, t, _)| t == "A")
        .map(|(_, _, v)| v)
        .collect();
    (answers, hits)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn gslbd_probes_the_resolver_and_xdp_answers_by_rtt() {
    if !privileged("gslbd_probes_the_resolver_and_xdp_answers_by_rtt") {
        return;
    }
    // Declared before the lab, so dropped after it: once gslbd is stopped.
    let mut lab = GslbdLab::new("rttd", &config(30));
    let (config_path, pin_path, control) =
        (lab.config.clone(), lab.pins.clone(), lab.control.clone());
    let pid = lab.start(lab.with_control(env!("CARGO_BIN_EXE_gslbd")));

    // Before any probe: the fallback, from the fast path (which records the resolver).
    let (first, hits) = ask(&lab, &pin_path);
    assert_eq!(first, [WEST], "the first query gets the fallback's answer");
    assert_eq!(hits, 1, "answered by XDP");

    // Once probed: the RTT method, still from the fast path.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (answers, hits) = ask(&lab, &pin_path);
        if answers == [EAST] {
            assert_eq!(hits, 1, "the RTT answer comes from XDP");
            break;
        }
        assert_eq!(answers, [WEST], "only the fallback until then");
        assert!(
            Instant::now() < deadline,
            "never answered by RTT; gslbctl ldns:\n{}",
            text(&gslbctl(GSLBCTL, &control, "ldns").stdout)
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let out = gslbctl(GSLBCTL, &control, "ldns");
    let report = text(&out.stdout);
    assert!(
        out.status.success(),
        "gslbctl ldns: {}{report}",
        text(&out.stderr)
    );
    assert!(
        report.starts_with(&format!(
            "ldns {CLIENT_V4}  address {CLIENT_V4}  last query "
        )),
        "{report}"
    );
    let row = report
        .lines()
        .find(|l| l.trim_start().starts_with("east "))
        .unwrap_or_else(|| panic!("{report}"));
    // site, rtt ("0.123 ms"), protocol, age, confirmed, (local)
    let fields: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(fields.len(), 7, "{row}");
    assert_eq!(
        (fields[2], fields[3], fields[6]),
        ("ms", "icmp", "(local)"),
        "{report}"
    );
    let age: u64 = fields[4]
        .strip_suffix('s')
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("age in {row}"));
    assert!(age < 60, "{row}");

    // A bad configuration is refused, with where and why; the answers go on.
    let bad = config(30).replace("interval_ms = 500", "interval_ms = 0");
    std::fs::write(&config_path, &bad).unwrap();
    let line = bad.lines().position(|l| l == "interval_ms = 0").unwrap() + 1;
    let out = gslbctl(GSLBCTL, &control, "reload");
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "a bad reload is an error: {stderr}");
    let want = format!(
        "{}:{line}:15: rtt: interval_ms 0 out of range",
        config_path.display()
    );
    assert!(
        stderr.contains("reload refused") && stderr.contains(&want),
        "{stderr}\nwant {want}"
    );
    let (answers, hits) = ask(&lab, &pin_path);
    assert_eq!(
        (answers, hits),
        (vec![EAST.to_owned()], 1),
        "answers after the refused reload"
    );

    // A good one is taken (a new TTL) and the RTT answer stays.
    std::fs::write(&config_path, config(45)).unwrap();
    let out = gslbctl(GSLBCTL, &control, "reload");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "configuration reloaded\n");
    let out = lab.dig(SERVER_V4.into(), &["www.example.com", "A"]);
    assert_eq!(
        dig_answers(&out),
        [("www.example.com.".into(), "A".into(), EAST.into())],
        "{out}"
    );
    assert!(out.contains("\t45\tIN\t"), "the new TTL\n{out}");

    lab.stop(pid);
    assert!(
        !control.exists(),
        "gslbd removes its control socket on exit"
    );
    // Only a clean exit gets as far as removing the pins (after detaching XDP).
    assert!(
        !pin_path.exists(),
        "pins left behind: {:?}",
        std::fs::read_dir(&pin_path).map(Iterator::count)
    );
}
