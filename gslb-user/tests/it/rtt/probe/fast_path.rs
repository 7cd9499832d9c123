//! The fast path's LDNS recording with BPF_PROG_TEST_RUN (root): sources recorded, refreshed
//! once per epoch, grouped by the LDNS mask.

use crate::common;

use std::{net::IpAddr, time::Duration};

use aya::programs::{TestRun, TestRunOptions};
use gslb_user::{
    dataplane::Dataplane,
    probe::{LdnsMask, LdnsRecorder},
};
use hickory_proto::{op::MessageType, rr::RecordType};

use super::{ip, ms, secs};

// ---- The fast path's recording (root) ----

fn run(dp: &Dataplane, frame: &[u8]) -> u32 {
    let mut out = vec![0u8; 4096];
    dp.program()
        .test_run(TestRunOptions {
            data_in: Some(frame),
            data_out: Some(&mut out),
            ..TestRunOptions::new()
        })
        .expect("BPF_PROG_TEST_RUN")
        .return_value
}

fn www_from(src: IpAddr, rtype: RecordType) -> Vec<u8> {
    let server = match src {
        IpAddr::V4(_) => IpAddr::V4(common::SERVER_V4),
        IpAddr::V6(_) => IpAddr::V6(common::SERVER_V6),
    };
    common::Frame::udp(
        src,
        server,
        common::wire(&common::query(1, common::WWW, rtype)),
    )
    .bytes()
}

fn scan(dp: &mut Dataplane, timeout: Duration) -> gslb_user::dataplane::LdnsScan {
    let mut scan = dp
        .ldns()
        .expect("the LDNS map")
        .scan(timeout)
        .expect("scanning LDNS");
    scan.seen.sort_by_key(|s| s.group);
    scan
}

#[test]
fn the_fast_path_records_the_sources_of_queries() {
    let Some(mut dp) = common::dataplane() else {
        return;
    };
    common::pin_to_current_cpu();
    const XDP_TX: u32 = 3;
    const XDP_PASS: u32 = 2;
    let v4 = IpAddr::V4(common::CLIENT_V4);
    let v6 = IpAddr::V6(common::V1_CLIENT_V6);
    let unknown = ip("203.0.113.99");
    let response = ip("203.0.113.98");
    let other_port = ip("203.0.113.97");
    let mut not_a_query = common::query(1, common::WWW, RecordType::A);
    not_a_query.metadata.message_type = MessageType::Response;
    let www_a = common::wire(&common::query(1, common::WWW, RecordType::A));
    let mut to_other_port = common::Frame::udp(other_port, IpAddr::V4(common::SERVER_V4), www_a);
    to_other_port.dst_port = 5353;
    // (frame, action): hits are recorded; a name we do not serve, a response and another
    // port are not (only queries for our names make a resolver).
    let cases: Vec<(Vec<u8>, u32)> = vec![
        (www_from(v4, RecordType::A), XDP_TX),
        (www_from(v4, RecordType::AAAA), XDP_TX),
        (www_from(v6, RecordType::AAAA), XDP_TX),
        (
            common::Frame::udp(
                unknown,
                IpAddr::V4(common::SERVER_V4),
                common::wire(&common::query(1, "nope.example.com", RecordType::A)),
            )
            .bytes(),
            XDP_PASS,
        ),
        (
            common::Frame::udp(
                response,
                IpAddr::V4(common::SERVER_V4),
                common::wire(&not_a_query),
            )
            .bytes(),
            XDP_PASS,
        ),
        (to_other_port.bytes(), XDP_PASS),
    ];
    for (i, (frame, action)) in cases.iter().enumerate() {
        assert_eq!(run(&dp, frame), *action, "case {i}");
    }
    let found = scan(&mut dp, secs(180));
    let seen: Vec<(IpAddr, IpAddr)> = found.seen.iter().map(|s| (s.group, s.addr)).collect();
    let mut want = vec![(v4, v4), (v6, v6)];
    want.sort();
    assert_eq!(seen, want);
    assert!(found.seen.iter().all(|s| s.idle < secs(5)), "{found:?}");
    assert_eq!(found.expired, 0);

    // Fed to a recorder, they are the resolvers to probe.
    let recorder = LdnsRecorder::new();
    recorder.record_scan(&found);
    let mut drained: Vec<IpAddr> = recorder.drain().into_iter().map(|(a, _)| a).collect();
    drained.sort();
    assert_eq!(drained, [v4, v6]);

    // Idle longer than the timeout: deleted.
    std::thread::sleep(ms(20));
    let expired = scan(&mut dp, ms(10));
    assert_eq!((expired.seen.len(), expired.expired), (0, 2));
    assert!(scan(&mut dp, secs(180)).seen.is_empty());

    // Recording off.
    dp.ldns().unwrap().set_enabled(false).unwrap();
    run(&dp, &www_from(v4, RecordType::A));
    assert!(scan(&mut dp, secs(180)).seen.is_empty());
    dp.ldns().unwrap().set_enabled(true).unwrap();
    run(&dp, &www_from(v4, RecordType::A));
    assert_eq!(scan(&mut dp, secs(180)).seen.len(), 1);
}

#[test]
fn the_fast_path_refreshes_a_resolver_once_per_epoch() {
    let Some(mut dp) = common::dataplane() else {
        return;
    };
    common::pin_to_current_cpu();
    let src = IpAddr::V4(common::CLIENT_V4);
    // Each scan also starts a new epoch.
    let idle = |dp: &mut Dataplane| dp.ldns().unwrap().scan(secs(180)).unwrap().seen[0].idle;
    run(&dp, &www_from(src, RecordType::A));
    // The scan started a new epoch: the next query refreshes the time...
    std::thread::sleep(ms(50));
    assert!(idle(&mut dp) >= ms(50));
    run(&dp, &www_from(src, RecordType::A));
    assert!(idle(&mut dp) < ms(40), "refreshed in the new epoch");
    // ...but within one epoch only the first query does.
    let epoch = dp.ldns().unwrap().new_epoch().unwrap();
    run(&dp, &www_from(src, RecordType::A));
    std::thread::sleep(ms(50));
    for _ in 0..10 {
        run(&dp, &www_from(src, RecordType::A));
    }
    assert!(
        idle(&mut dp) >= ms(50),
        "not refreshed again in epoch {epoch}"
    );
}

#[test]
fn the_fast_path_groups_resolvers_by_the_ldns_mask() {
    let Some(mut dp) = common::dataplane() else {
        return;
    };
    dp.ldns().unwrap().set_masks(24, 48).unwrap();
    let sources = [
        "198.51.100.7",
        "198.51.100.8",
        "198.51.101.9",
        "2001:db8:1:aa::7",
        "2001:db8:1:bb::8",
        "2001:db8:2::9",
    ];
    for src in sources {
        let rtype = if src.contains(':') {
            RecordType::AAAA
        } else {
            RecordType::A
        };
        run(&dp, &www_from(ip(src), rtype));
    }
    let seen: Vec<(IpAddr, IpAddr)> = scan(&mut dp, secs(180))
        .seen
        .iter()
        .map(|s| (s.group, s.addr))
        .collect();
    assert_eq!(
        seen,
        [
            (ip("198.51.100.0"), ip("198.51.100.7")),
            (ip("198.51.101.0"), ip("198.51.101.9")),
            (ip("2001:db8:1::"), ip("2001:db8:1:aa::7")),
            (ip("2001:db8:2::"), ip("2001:db8:2::9")),
        ]
    );
    // The user-space grouping agrees with the kernel's.
    let mask = LdnsMask { v4: 24, v6: 48 };
    for src in sources {
        assert!(
            seen.iter().any(|(group, _)| *group == mask.group(ip(src))),
            "{src}"
        );
    }
}
