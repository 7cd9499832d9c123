//! The fast path on a real interface: gslbd attaches to a veth in a server namespace and `dig`
//! in a client namespace gets its A and AAAA answers over IPv4 and IPv6 from XDP (the hit
//! counters rise), a CNAME domain's CNAME with its target's address, and the node's identity
//! when it asks (`+nsid`), in native and in generic (SKB) mode.

use std::{net::IpAddr, path::PathBuf, process::Command, time::Duration};

use gslb_common::Counter;
use gslb_tests::{
    CLIENT_IF, Lab, SERVER_IF, SERVER_V4, SERVER_V6, dig_answers, dig_flags, privileged, run,
};
use gslb_user::dataplane::{self, XdpMode};

const CONFIG: &str = r#"
[server]
listen = ["192.0.2.53", "2001:db8::53"]
identity = "xdp-lab"

[[zone]]
name = "example.com"
ns = ["ns1.example.com"]
soa.rname = "hostmaster.example.com"
  [[zone.record]]
  name = "ns1"
  type = "A"
  value = "192.0.2.53"
  [[zone.record]]
  name = "origin"
  type = "AAAA"
  value = "2001:db8:100::80"

[[site]]
name = "lab"
ip = "192.0.2.1"

[[service]]
name = "web-v4"
ip = "198.51.100.10"
site = "lab"

[[service]]
name = "web-v6"
ip = "2001:db8:100::10"
site = "lab"

[[gslb_domain]]
name = "www.example.com"
ttl = 45
services = ["web-v4", "web-v6"]

# A CNAME domain whose target is a static name of ours.
[[service]]
name = "origin"
ip = "198.51.100.80"
site = "lab"
cname = "origin.example.com"

[[gslb_domain]]
name = "app.example.com"
record_type = "CNAME"
ttl = 50
services = ["origin"]
"#;

fn answered_by_xdp(mode: XdpMode) {
    let mut lab = Lab::new(&format!("x{mode}"));
    let dir = std::env::temp_dir().join(format!("{}.toml", lab.server_ns));
    std::fs::write(&dir, CONFIG).unwrap();
    let pin_path = PathBuf::from(format!("/sys/fs/bpf/{}", lab.server_ns));

    // Native XDP_TX on veth only reaches a peer that runs XDP itself, and the peer must not
    // leave UDP checksums to an offload that never happens for XDP frames.
    let _peer = (mode == XdpMode::Native).then(|| {
        run(lab
            .exec(&lab.client_ns, "ethtool")
            .args(["-K", CLIENT_IF, "tx", "off"]));
        lab.in_netns(&lab.client_ns.clone(), || {
            let mut dp = dataplane::Dataplane::load(None).expect("load pass program");
            dp.attach_pass(CLIENT_IF, XdpMode::Native)
                .expect("attach pass program");
            dp
        })
    });

    let mut gslbd = lab.nsenter(&lab.server_ns, env!("CARGO_BIN_EXE_gslbd").as_ref());
    gslbd.args(["--config", dir.to_str().unwrap(), "--interface", SERVER_IF]);
    gslbd.args([
        "--xdp-mode",
        &mode.to_string(),
        "--pin-path",
        pin_path.to_str().unwrap(),
    ]);
    lab.spawn_until(gslbd, "gslbd: ready", Duration::from_secs(30));

    let cases: [(IpAddr, &str, &str, Counter); 4] = [
        (SERVER_V4.into(), "A", "198.51.100.10", Counter::HitAV4),
        (
            SERVER_V4.into(),
            "AAAA",
            "2001:db8:100::10",
            Counter::HitAaaaV4,
        ),
        (SERVER_V6.into(), "A", "198.51.100.10", Counter::HitAV6),
        (
            SERVER_V6.into(),
            "AAAA",
            "2001:db8:100::10",
            Counter::HitAaaaV6,
        ),
    ];
    for (server, qtype, want, counter) in cases {
        let before = dataplane::pinned_counters(&pin_path).expect("read counters");
        let out = lab.dig(server, &["www.example.com", qtype]);
        let after = dataplane::pinned_counters(&pin_path).expect("read counters");
        let delta = after.delta(&before);
        let flags = dig_flags(&out);
        assert!(
            flags.contains(&"qr".into()) && flags.contains(&"aa".into()),
            "{mode} {qtype} via {server}: flags {flags:?}, counters {delta:?}\n{out}"
        );
        assert_eq!(
            dig_answers(&out),
            vec![("www.example.com.".into(), qtype.into(), want.into())],
            "{mode} {qtype} via {server}:\n{out}"
        );
        assert!(
            out.contains("\t45\tIN\t"),
            "{mode}: TTL from the map\n{out}"
        );
        // Misses may rise too (ARP and neighbour discovery are passed as not_ip).
        let hits: Vec<_> = delta.into_iter().filter(|(c, _)| c.is_hit()).collect();
        assert_eq!(
            hits,
            vec![(counter, 1)],
            "{mode} {qtype} via {server}: exactly one hit, counted as {counter:?}"
        );
    }
    // A CNAME domain: the CNAME and its target's address, from XDP, with and without EDNS.
    for edns in ["+edns", "+noedns"] {
        let before = dataplane::pinned_counters(&pin_path).expect("read counters");
        let out = lab.dig(SERVER_V6.into(), &[edns, "app.example.com", "AAAA"]);
        let delta = dataplane::pinned_counters(&pin_path)
            .expect("read counters")
            .delta(&before);
        assert_eq!(
            dig_answers(&out),
            vec![
                (
                    "app.example.com.".into(),
                    "CNAME".into(),
                    "origin.example.com.".into()
                ),
                (
                    "origin.example.com.".into(),
                    "AAAA".into(),
                    "2001:db8:100::80".into()
                ),
            ],
            "{mode} CNAME {edns}:\n{out}"
        );
        let hits: Vec<_> = delta.into_iter().filter(|(c, _)| c.is_hit()).collect();
        assert_eq!(
            hits,
            vec![(Counter::HitAaaaV6, 1)],
            "{mode} CNAME {edns}: answered by XDP\n{out}"
        );
    }
    // The identity beside the answer, from XDP too (RFC 5001).
    let before = dataplane::pinned_counters(&pin_path).expect("read counters");
    let out = lab.dig(SERVER_V4.into(), &["+nsid", "www.example.com", "A"]);
    let delta = dataplane::pinned_counters(&pin_path)
        .expect("read counters")
        .delta(&before);
    assert!(
        out.contains("; NSID: ") && out.contains("(\"xdp-lab\")"),
        "{mode}: NSID\n{out}"
    );
    let hits: Vec<_> = delta.into_iter().filter(|(c, _)| c.is_hit()).collect();
    assert_eq!(
        hits,
        vec![(Counter::HitAV4, 1)],
        "{mode} +nsid: answered by XDP"
    );
    drop(lab);
    let _ = std::fs::remove_file(dir);
    assert!(
        !pin_path.join("COUNTERS").exists(),
        "gslbd removes its pins on SIGTERM"
    );
    let _ = Command::new("rmdir").arg(&pin_path).status();
}

#[test]
fn dig_is_answered_by_xdp_in_native_mode() {
    if privileged("dig_is_answered_by_xdp_in_native_mode") {
        answered_by_xdp(XdpMode::Native);
    }
}

#[test]
fn dig_is_answered_by_xdp_in_skb_mode() {
    if privileged("dig_is_answered_by_xdp_in_skb_mode") {
        answered_by_xdp(XdpMode::Skb);
    }
}
