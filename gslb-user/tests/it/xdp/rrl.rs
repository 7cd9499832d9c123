//! Response rate limiting in the fast path (`[rrl]`, gslb-ebpf/src/rrl.rs), through
//! BPF_PROG_TEST_RUN: a flood from one /24 gets at most the burst plus the rate for its
//! duration as answers, plus the slips (TC=1, no records, valid checksums), while a client of
//! another prefix is answered in full; without `[rrl]` the same flood is answered in full.
//! Needs root; see `common::privileged`.

use crate::common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::time::Instant;

use common::*;
use etherparse::{SlicedPacket, TransportSlice};
use gslb_user::{compile::Snapshot, config::Config, dataplane::Dataplane};
use hickory_proto::op::Message;
use hickory_proto::rr::RecordType;

const XDP_DROP: u32 = 1;
const RATE: usize = 20;
const FLOOD: usize = 600;

fn dataplane_with(extra: &str) -> Option<Dataplane> {
    dataplane_from(&format!("{}\n{extra}", config_text()))
}

fn dataplane_from(text: &str) -> Option<Dataplane> {
    if !privileged() {
        return None;
    }
    let config = Config::parse(text, Path::new("xdp-rrl.toml")).expect("test configuration");
    let mut dp = Dataplane::load(None).expect("loading the XDP object");
    dp.table
        .publish(&Snapshot::from_config(&config))
        .expect("publishing");
    Some(dp)
}

#[derive(Default, Debug)]
struct Tally {
    full: usize,
    slips: usize,
    dropped: usize,
}

/// One query from `client`, its outcome added to `tally`; a slip is checked to be a valid
/// truncated reply.
fn ask_as(dp: &Dataplane, client: IpAddr, id: u16, tally: &mut Tally) {
    ask_with(dp, client, &query(id, WWW, RecordType::A), tally);
}

/// [`ask_as`] with the message `msg` (its ID checked in the reply).
fn ask_with(dp: &Dataplane, client: IpAddr, msg: &Message, tally: &mut Tally) {
    let id = msg.id;
    let frame = Frame::query_from(client, wire(msg)).bytes();
    let out = run(dp, &frame);
    match out.action {
        XDP_DROP => tally.dropped += 1,
        XDP_TX => {
            let r = SlicedPacket::from_ethernet(&out.frame).expect("reply parses");
            let Some(TransportSlice::Udp(udp)) = &r.transport else {
                panic!("not UDP")
            };
            assert_udp_checksum("a reply to the flood", &r);
            let reply = Message::from_vec(udp.payload()).expect("reply decodes");
            assert_eq!(reply.id, id);
            assert_eq!(reply.queries.len(), 1, "question echoed");
            if reply.truncation {
                assert!(reply.answers.is_empty(), "a slip carries no records");
                tally.slips += 1;
            } else {
                assert_ne!(reply.answers, []);
                tally.full += 1;
            }
        }
        other => panic!("action {other}, counted {:?}", out.counted),
    }
}

/// The flood from 203.0.113.0/24 (many hosts), with a query from `other` after every 60.
fn flood(dp: &Dataplane, other: IpAddr) -> (Tally, Tally, f64) {
    // Per-CPU buckets: the whole flood on one CPU, as one receive queue would see it.
    pin_to_current_cpu();
    let (mut flood, mut polite) = (Tally::default(), Tally::default());
    let started = Instant::now();
    for i in 0..FLOOD {
        let host = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1 + (i % 250) as u8));
        ask_as(dp, host, i as u16, &mut flood);
        if i % 60 == 59 {
            ask_as(dp, other, 10_000 + i as u16, &mut polite);
        }
    }
    (flood, polite, started.elapsed().as_secs_f64())
}

#[test]
fn a_flood_from_one_prefix_gets_the_rate_plus_slips_and_others_everything() {
    let Some(dp) = dataplane_with(&format!("[rrl]\nrate = {RATE}\nslip = 2\n")) else {
        return;
    };
    for other in [
        IpAddr::V4(V1_CLIENT_V4),
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 7, 0, 0, 0, 0, 1)),
    ] {
        let (flood, polite, secs) = flood(&dp, other);
        println!("flood: {flood:?} in {secs:.3} s; other ({other}): {polite:?}");
        // The burst (= rate) at once, then the rate for the time the flood lasted; the second
        // round starts with what the first left in the bucket.
        let allowed = RATE + (RATE as f64 * secs).ceil() as usize;
        assert!(
            flood.full <= allowed,
            "{} answers, {allowed} allowed",
            flood.full
        );
        let over = FLOOD - flood.full;
        assert_eq!(flood.slips + flood.dropped, over);
        assert!(
            flood.slips.abs_diff(over / 2) <= 1,
            "{flood:?}: every second one slips"
        );
        assert_eq!(
            (polite.full, polite.slips, polite.dropped),
            (FLOOD / 60, 0, 0),
            "{other}"
        );
    }
    let (dropped, slipped) = dp.rrl_counters().unwrap();
    assert!(
        dropped > 0 && slipped > 0,
        "counted: {dropped} dropped, {slipped} slipped"
    );
}

/// One resolver speaking for many subnets (ECS, each /56 of view v1 its own) is limited as
/// one source: the buckets are keyed by the packet's source, not by the subnet.
#[test]
fn an_ecs_flood_is_counted_by_the_resolver() {
    let Some(dp) = dataplane_with(&format!("[rrl]\nrate = {RATE}\nslip = 2\n")) else {
        return;
    };
    pin_to_current_cpu();
    let resolver = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 5));
    let mut tally = Tally::default();
    let started = Instant::now();
    for i in 0..FLOOD {
        let mut msg = query(i as u16, WWW, RecordType::A);
        let mut opt = edns();
        opt.options_mut()
            .insert(ecs_subnet(&format!("2001:db8:1:{:x}00::/56", i % 256)));
        msg.set_edns(opt);
        ask_with(&dp, resolver, &msg, &mut tally);
    }
    let secs = started.elapsed().as_secs_f64();
    let allowed = RATE + (RATE as f64 * secs).ceil() as usize;
    assert!(
        tally.full > 0 && tally.full <= allowed,
        "{tally:?}: {allowed} allowed"
    );
    assert_eq!(tally.slips + tally.dropped, FLOOD - tally.full);
}

#[test]
fn an_ipv6_flood_is_counted_by_its_56() {
    let Some(dp) = dataplane_with("[rrl]\nrate = 5\nslip = 0\n") else {
        return;
    };
    pin_to_current_cpu();
    let mut same = Tally::default();
    for i in 0..100u16 {
        // Different /64s of one /56.
        let host = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 5, i % 256, 0, 0, 0, 1));
        ask_as(&dp, host, i, &mut same);
    }
    assert!(same.full <= 6 && same.full >= 5, "{same:?}");
    assert_eq!(same.slips, 0, "slip = 0 never slips");
    let mut next = Tally::default();
    ask_as(
        &dp,
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 5, 0x100, 0, 0, 0, 1)),
        1,
        &mut next,
    );
    assert_eq!(next.full, 1, "the next /56 has its own bucket");
}

/// A client that brings back a fresh server cookie of ours has proved its address (RFC 7873
/// §5.3): its answers are not limited, while the same client's queries without the cookie
/// are, from the same bucket.
#[test]
fn a_client_with_our_cookie_is_not_limited() {
    let text = config_text().replacen(
        "[server]\n",
        &format!("[server]\ncookie_secret = \"{COOKIE_SECRET}\"\n"),
        1,
    ) + "\n[rrl]\nrate = 5\nslip = 0\n";
    let Some(mut dp) = dataplane_from(&text) else {
        return;
    };
    dp.take_heartbeat().unwrap().beat(None).unwrap();
    pin_to_current_cpu();
    let client = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 9));
    let cookie = cookie_made(COOKIE_SECRET, [9; 8], client, unix_now());
    let (mut with, mut without) = (Tally::default(), Tally::default());
    for i in 0..100u16 {
        let mut msg = query(i, WWW, RecordType::A);
        let mut opt = edns();
        opt.options_mut().insert(cookie_option(cookie.clone()));
        msg.set_edns(opt);
        ask_with(&dp, client, &msg, &mut with);
        ask_as(&dp, client, 1000 + i, &mut without);
    }
    assert_eq!(
        (with.full, with.dropped),
        (100, 0),
        "with the cookie: {with:?}"
    );
    assert!(
        without.full <= 6 && without.dropped >= 94,
        "without: {without:?}"
    );
}

#[test]
fn without_rrl_the_flood_is_answered_in_full() {
    let Some(dp) = dataplane_with("") else { return };
    let (flood, _, _) = flood(&dp, IpAddr::V4(V1_CLIENT_V4));
    assert_eq!(flood.full, FLOOD, "{flood:?}");
    assert_eq!(dp.rrl_counters().unwrap(), (0, 0));
}
