//! Differential fuzzing of the fast path (issue 12): seeded random and mutated frames
//! (`fuzz_frames`) go through the XDP program (BPF_PROG_TEST_RUN); every XDP_TX reply is checked
//! against the responder's answer to the same query bytes from the same client, both from the
//! one `Snapshot` the maps were published from: the same ID, flags and RCODE, question bytes,
//! answer set (a rotating set: one of the responder's records, the responder asked round the
//! whole set) and OPT; the reply's headers and checksums are verified. Every XDP_PASS leaves
//! the frame unchanged and bumps exactly one pass counter; the counters' sums equal the passes
//! and the replies.
//!
//! `GSLB_FUZZ_FRAMES` (default 200,000), `GSLB_FUZZ_SEED` (default 12), and
//! `GSLB_FUZZ_COUNTERS_EVERY` (default 1: each frame's counter is checked; more: the sums are
//! checked per batch, which `cargo xtask bench fuzz-xdp` uses for its 10,000,000 frames).
//! Needs root (see `common::privileged`).

use crate::common;
use crate::xdp::fuzz_frames;

use std::{collections::BTreeMap, net::IpAddr, path::Path, time::Instant};

use aya::programs::{TestRun, TestRunOptions};
use common::*;
use fuzz_frames::{Generator, Population};
use gslb_common::Counter;
use gslb_tests::xdp::check::{hex, parse};
use gslb_user::{
    compile::Snapshot,
    config::Config,
    dataplane::{Counters, Dataplane},
    responder::{Responder, Transport},
};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().map_or(default, |v| {
        v.replace('_', "")
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v}"))
    })
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// [`check_reply`](gslb_tests::xdp::check_reply) against `responder`.
fn check_reply(query: &[u8], reply: &[u8], responder: &Responder) -> Result<(), String> {
    gslb_tests::xdp::check_reply(query, reply, &mut |dns, src| {
        responder.respond(dns, src, Transport::Udp)
    })
}

/// Whether the OPT record of the DNS message `dns` has an NSID option.
fn has_nsid(dns: &[u8]) -> bool {
    has_option(dns, 3)
}

/// Whether the DNS message `dns` carries a COOKIE option.
fn has_cookie(dns: &[u8]) -> bool {
    has_option(dns, 10)
}

/// Whether the DNS message `dns`'s OPT carries an option of `code`.
fn has_option(dns: &[u8], code: u16) -> bool {
    let mut rest = opt_rdata(dns).unwrap_or_default();
    while let [c0, c1, l0, l1, tail @ ..] = rest {
        if u16::from_be_bytes([*c0, *c1]) == code {
            return true;
        }
        rest = tail
            .get(usize::from(u16::from_be_bytes([*l0, *l1]))..)
            .unwrap_or_default();
    }
    false
}

/// Whether the DNS message `dns` answers with a CNAME.
fn has_cname(dns: &[u8]) -> bool {
    hickory_proto::op::Message::from_vec(dns)
        .is_ok_and(|m| m.answers.iter().any(|r| u16::from(r.record_type()) == 5))
}

/// Whether the DNS message `dns` answers a name below a wildcard of the shared configuration
/// (a wildcard's parent ends its question name).
fn below_wildcard(dns: &[u8]) -> bool {
    hickory_proto::op::Message::from_vec(dns).is_ok_and(|m| {
        m.queries.first().is_some_and(|q| {
            let name = q.name().to_ascii().to_ascii_lowercase();
            name.ends_with(".gw.example.com.") || name.ends_with(".wc.example.com.")
        })
    })
}

fn run_once(dp: &Dataplane, frame: &[u8], out: &mut [u8]) -> (u32, usize) {
    let result = dp
        .program()
        .test_run(TestRunOptions {
            data_in: Some(frame),
            data_out: Some(out),
            ..TestRunOptions::new()
        })
        .expect("BPF_PROG_TEST_RUN");
    (result.return_value, result.data_size_out as usize)
}

#[test]
fn xdp_replies_agree_with_the_responder() {
    if !privileged() {
        return;
    }
    // With an identity and cookies: a query asking for NSID gets the identity from both (the
    // program writes the option); one that brings back a fresh cookie of ours gets it back
    // from both, and one with any other cookie gets a new one from the responder, so the
    // program passes it. The ECS-allow run below keeps cookies off, so the program answers
    // them there (without the option), and has the longest identity.
    let text = config_text().replacen(
        "[server]\n",
        &format!("[server]\nidentity = \"xdp-fuzz\"\ncookie_secret = \"{COOKIE_SECRET}\"\n"),
        1,
    );
    differential(&text, env_or("GSLB_FUZZ_FRAMES", 200_000), false);
}

/// The same under `server.ecs_allow`: the population's clients are on both sides of the list
/// (CLIENT_V4, V1_CLIENT_V6 and 198.51.100.200 in it; V1_CLIENT_V4 and CLIENT_V6 not), so
/// ECS is used from some and ignored from others, and the program must agree with the
/// responder on which. Half the frames of the plain run.
#[test]
fn xdp_replies_agree_with_the_responder_under_an_ecs_allow_list() {
    if !privileged() {
        return;
    }
    let text = config_text().replacen(
        "[server]\n",
        &format!(
            "[server]\necs_allow = [\"203.0.113.0/24\", \"198.51.100.128/25\", \"2001:db8:1::/48\"]\n\
             identity = \"{}\"\n",
            "n".repeat(255)
        ),
        1,
    );
    differential(&text, env_or("GSLB_FUZZ_FRAMES", 200_000) / 2, true);
}

/// Runs `frames` generated frames through the program published from `text` and checks every
/// outcome against the responder of the same snapshot. `allow_list`: ECS queries answered
/// without the option (their source is not listed) must occur too.
fn differential(text: &str, frames: u64, allow_list: bool) {
    let seed = env_or("GSLB_FUZZ_SEED", 12);
    let every = env_or("GSLB_FUZZ_COUNTERS_EVERY", 1).max(1);

    let config = Config::parse(text, Path::new("xdp-fuzz.toml")).unwrap();
    let snapshot = Snapshot::from_config(&config);
    let mut dp = Dataplane::load(None).expect("loading the XDP object");
    dp.table.publish(&snapshot).expect("publishing");
    dp.add_local_mac(SERVER_MAC).unwrap();
    // The program's wall clock, for the cookies' timestamps.
    dp.take_heartbeat().unwrap().beat(None).unwrap();
    let responder = Responder::new(&snapshot);

    let pop = Population {
        names: vec![
            WWW.into(),
            ALL.into(),
            V1_ONLY.into(),
            WINDOW.into(),
            MANY.into(),
            longest_name(),
            "example.com".into(),
            // A GSLB apex with static records beside it.
            "example.org".into(),
            CNAME.into(),
            CNAMES.into(),
            CHASE.into(),
            // Names below wildcards: answered one label below a parent with nothing else
            // below it, passed deeper, beside a static name, or for a CNAME with records after.
            WILD.into(),
            "a.gw.example.com".into(),
            "Host-7.GW.example.com".into(),
            "a.b.gw.example.com".into(),
            "gw.example.com".into(),
            "x.beside.example.com".into(),
            "cdn.wc.example.com".into(),
        ],
        servers: vec![IpAddr::V4(SERVER_V4), IpAddr::V6(SERVER_V6)],
        clients: vec![
            IpAddr::V4(CLIENT_V4),
            IpAddr::V4(V1_CLIENT_V4),
            IpAddr::V6(CLIENT_V6),
            IpAddr::V6(V1_CLIENT_V6),
            ip("198.51.100.200"),
            ip("2001:db8:1:ff::1"),
            ip("127.0.0.1"),
            ip("::1"),
            ip("fe80::1"),
            ip("224.0.0.1"),
        ],
        cookie_secret: snapshot.cookie_secret.is_some().then_some(COOKIE_SECRET),
    };
    let mut generator = Generator::new(seed, pop);
    let mut out = vec![0u8; 4096];
    let (mut tx, mut passes, mut wrong) = (0u64, 0u64, 0u64);
    // Replies that echo an ECS option (answered from the subnet's view), and replies to an
    // ECS query that echo none (the option ignored: a source not in `server.ecs_allow`).
    let (mut ecs_tx, mut ecs_ignored_tx) = (0u64, 0u64);
    // Replies with our NSID option; with a cookie echoed; with a CNAME answer.
    let mut nsid_tx = 0u64;
    let mut cookie_tx = 0u64;
    let mut cname_tx = 0u64;
    // Replies to names below a wildcard.
    let mut wild_tx = 0u64;
    let mut reasons: BTreeMap<&str, u64> = BTreeMap::new();
    let mut examples = Vec::new();
    let start = dp.counters().unwrap();
    let mut batch_start = start;
    let (mut batch_tx, mut batch_passes) = (0u64, 0u64);
    let started = Instant::now();
    for i in 0..frames {
        let frame = generator.frame();
        let before = (every == 1).then(|| dp.counters().unwrap());
        let (action, len) = run_once(&dp, &frame, &mut out);
        let reply = &out[..len];
        match action {
            XDP_TX => {
                tx += 1;
                batch_tx += 1;
                let echoes = |f: &[u8]| {
                    udp_offset(f).is_some_and(|l4| !ecs_options(&f[l4 + 8..]).is_empty())
                };
                if echoes(reply) {
                    ecs_tx += 1;
                } else if echoes(&frame) {
                    ecs_ignored_tx += 1;
                }
                if udp_offset(reply).is_some_and(|l4| has_nsid(&reply[l4 + 8..])) {
                    nsid_tx += 1;
                }
                if udp_offset(reply).is_some_and(|l4| has_cookie(&reply[l4 + 8..])) {
                    cookie_tx += 1;
                }
                if udp_offset(reply).is_some_and(|l4| has_cname(&reply[l4 + 8..])) {
                    cname_tx += 1;
                }
                if udp_offset(reply).is_some_and(|l4| below_wildcard(&reply[l4 + 8..])) {
                    wild_tx += 1;
                }
                if let Err(why) = check_reply(&frame, reply, &responder) {
                    wrong += 1;
                    if examples.len() < 10 {
                        examples.push(format!("frame {i}: {why}\n  query {}", hex(&frame)));
                    }
                }
            }
            XDP_PASS => {
                passes += 1;
                batch_passes += 1;
                if reply != frame.as_slice() {
                    wrong += 1;
                    examples.push(format!("frame {i}: passed changed\n  {}", hex(&frame)));
                }
            }
            other => {
                wrong += 1;
                examples.push(format!("frame {i}: action {other}\n  {}", hex(&frame)));
            }
        }
        if let Some(before) = before {
            let counted = dp.counters().unwrap().delta(&before);
            let want_hit = action == XDP_TX;
            match counted.as_slice() {
                [(c, 1)] if c.is_hit() == want_hit => {
                    if !want_hit {
                        *reasons.entry(c.name()).or_default() += 1;
                    }
                }
                _ => {
                    wrong += 1;
                    examples.push(format!("frame {i}: action {action}, counted {counted:?}"));
                }
            }
        }
        if every > 1 && (i + 1) % every == 0 {
            let now = dp.counters().unwrap();
            check_sums(&now, &batch_start, batch_tx, batch_passes);
            batch_start = now;
            (batch_tx, batch_passes) = (0, 0);
        }
    }
    let end = dp.counters().unwrap();
    check_sums(&end, &start, tx, passes);
    if every > 1 {
        for (c, n) in end.delta(&start) {
            if !c.is_hit() {
                reasons.insert(c.name(), n);
            }
        }
    }
    println!(
        "fuzz-xdp: {frames} frames (seed {seed}, ecs_allow {allow_list}) in {:.1?}: {tx} XDP_TX ({ecs_tx} with ECS, {ecs_ignored_tx} with ECS ignored, {nsid_tx} with NSID, {cookie_tx} with a cookie, {cname_tx} with a CNAME, {wild_tx} below a wildcard), {passes} XDP_PASS, {wrong} wrong",
        started.elapsed()
    );
    println!("fuzz-xdp passes by reason: {reasons:?}");
    assert_eq!(
        wrong,
        0,
        "{wrong} wrong of {frames}; first:\n{}",
        examples.join("\n")
    );
    // The generator reaches both sides: many answers, and many passes of many reasons.
    assert!(tx > frames / 20, "only {tx} replies");
    assert!(ecs_tx > frames / 200, "only {ecs_tx} ECS replies");
    if allow_list {
        assert!(
            ecs_ignored_tx > frames / 200,
            "only {ecs_ignored_tx} replies with ECS ignored"
        );
    } else {
        assert_eq!(ecs_ignored_tx, 0, "ECS ignored without a list");
    }
    assert!(reasons.len() >= 15 || frames < 10_000, "{reasons:?}");
    // NSID requests are answered with the identity (the responder's replies agreed above).
    assert!(
        nsid_tx > frames / 1000 || frames < 10_000,
        "{nsid_tx} replies with the NSID"
    );
    // CNAME domains' answers (the CNAME and its target's addresses) agreed above.
    assert!(
        cname_tx > frames / 1000 || frames < 10_000,
        "{cname_tx} replies with a CNAME"
    );
    // Names below wildcards, answered with the owner asked (agreed above).
    assert!(
        wild_tx > frames / 1000 || frames < 10_000,
        "{wild_tx} replies below a wildcard"
    );
    // Cookies: where configured (the plain run), fresh ones of ours echoed and the rest
    // passed; where not (the other), answered without the option.
    let cookie = reasons.get("cookie").copied().unwrap_or(0);
    if allow_list {
        assert_eq!(
            (cookie, cookie_tx),
            (0, 0),
            "cookies seen without cookies configured"
        );
    } else {
        assert!(
            cookie > frames / 1000 || frames < 10_000,
            "{cookie} cookie passes"
        );
        assert!(
            cookie_tx > frames / 1000 || frames < 10_000,
            "{cookie_tx} replies with a cookie"
        );
    }
}

/// The hit counters rose by the replies and the pass counters by the passes.
fn check_sums(now: &Counters, then: &Counters, tx: u64, passes: u64) {
    let delta = now.delta(then);
    let hits: u64 = delta
        .iter()
        .filter(|(c, _)| c.is_hit())
        .map(|(_, n)| n)
        .sum();
    let passed: u64 = delta
        .iter()
        .filter(|(c, _)| !c.is_hit())
        .map(|(_, n)| n)
        .sum();
    assert_eq!(
        (hits, passed),
        (tx, passes),
        "counter sums vs replies and passes"
    );
    let _ = Counter::COUNT;
}

/// Rewrites the UDP checksum of a reply built as `Frame` builds frames (after an edit).
fn refresh_udp_checksum(frame: &mut [u8]) {
    let l4 = udp_offset(frame).unwrap();
    let (src, dst) = {
        let p = parse(frame).unwrap();
        (p.src, p.dst)
    };
    frame[l4 + 6..l4 + 8].fill(0);
    let check = transport_checksum(src, dst, IPPROTO_UDP, &frame[l4..]);
    frame[l4 + 6..l4 + 8].copy_from_slice(&check.to_be_bytes());
}

/// The checker is no rubber stamp: a real reply passes it, and each kind of wrong reply it
/// exists for fails it.
#[test]
fn the_checker_rejects_wrong_replies() {
    if !privileged() {
        return;
    }
    let config = Config::parse(&config_text(), Path::new("xdp-fuzz.toml")).unwrap();
    let snapshot = Snapshot::from_config(&config);
    let mut dp = Dataplane::load(None).expect("loading the XDP object");
    dp.table.publish(&snapshot).expect("publishing");
    let responder = Responder::new(&snapshot);
    let query = Frame::v4(wire(&query(0x77, ALL, hickory_proto::rr::RecordType::A))).bytes();
    let mut out = vec![0u8; 4096];
    let (action, len) = run_once(&dp, &query, &mut out);
    assert_eq!(action, XDP_TX);
    let reply = out[..len].to_vec();
    check_reply(&query, &reply, &responder).expect("a real reply");

    let l4 = udp_offset(&reply).unwrap();
    let dns = l4 + 8;
    type Edit<'a> = Box<dyn Fn(&mut Vec<u8>) + 'a>;
    let edits: [(&str, Edit<'_>, &str); 5] = [
        ("UDP checksum", Box::new(|f| f[l4 + 6] ^= 1), "UDP checksum"),
        (
            "an answer's address",
            Box::new(|f| {
                let last = f.len() - 1;
                f[last] ^= 1;
                refresh_udp_checksum(f);
            }),
            "answer",
        ),
        (
            "RD flipped",
            Box::new(|f| {
                f[dns + 2] ^= 1;
                refresh_udp_checksum(f);
            }),
            "flags",
        ),
        (
            "the ID",
            Box::new(|f| {
                f[dns] ^= 1;
                refresh_udp_checksum(f);
            }),
            "ID",
        ),
        (
            "the question's case",
            Box::new(|f| {
                f[dns + 13] ^= 0x20;
                refresh_udp_checksum(f);
            }),
            "question",
        ),
    ];
    for (what, edit, why) in edits {
        let mut bad = reply.clone();
        edit(&mut bad);
        let err = check_reply(&query, &bad, &responder).expect_err(what);
        assert!(err.contains(why), "{what}: {err}");
    }

    // An ECS reply (view v1's subnet, scope 24) with another scope.
    let mut msg = common::query(0x78, WWW, hickory_proto::rr::RecordType::A);
    let mut opt = edns();
    opt.options_mut().insert(ecs_subnet("198.51.100.0/24"));
    msg.set_edns(opt);
    let query = Frame::v4(wire(&msg)).bytes();
    let (action, len) = run_once(&dp, &query, &mut out);
    assert_eq!(action, XDP_TX, "an ECS query of view v1 is answered");
    let mut reply = out[..len].to_vec();
    check_reply(&query, &reply, &responder).expect("a real ECS reply");
    // The option ends the reply: its head, then 3 address bytes; the scope is the head's last.
    let scope = reply.len() - 4;
    assert_eq!(reply[scope], 24);
    reply[scope] = 23;
    refresh_udp_checksum(&mut reply);
    let err = check_reply(&query, &reply, &responder).expect_err("another scope");
    assert!(err.contains("OPT options"), "another scope: {err}");
}
