//! gslbd's feed of the fast path's `LDNS` map follows its settings as reloads change them
//! (`daemon::rtt::run_xdp_feed_with`): a new LDNS mask groups the resolvers the program records from
//! then on, and turning probing off stops the program recording. Queries are run through the
//! program with BPF_PROG_TEST_RUN (root).

use crate::common;

use std::{
    net::{IpAddr, Ipv4Addr},
    time::{Duration, Instant},
};

use common::{Frame, SERVER_V4, query, wire};
use gslb_user::{
    daemon::rtt::{XdpFeedSettings, run_xdp_feed_with},
    dataplane::Dataplane,
    probe::{LdnsMask, LdnsRecorder},
};
use hickory_proto::rr::RecordType;
use tokio::sync::watch;

const SCAN_EVERY: Duration = Duration::from_millis(50);
const WAIT: Duration = Duration::from_secs(5);

const A: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 7);
const B: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 8);
const C: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 9);
const D: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 9);

fn query_from(dp: &Dataplane, client: Ipv4Addr) {
    let frame = Frame::udp(
        client.into(),
        SERVER_V4.into(),
        wire(&query(1, common::WWW, RecordType::A)),
    );
    assert_eq!(
        common::run(dp, &frame.bytes()).action,
        common::XDP_TX,
        "{client}: answered"
    );
}

/// The addresses of the next scan that finds any (every scan re-records the live entries).
async fn next_scan(recorder: &LdnsRecorder) -> Vec<IpAddr> {
    recorder.drain();
    let deadline = Instant::now() + WAIT;
    loop {
        let got: Vec<IpAddr> = recorder.drain().into_iter().map(|(a, _)| a).collect();
        if !got.is_empty() {
            return got;
        }
        assert!(Instant::now() < deadline, "no scan in {WAIT:?}");
        tokio::time::sleep(SCAN_EVERY / 5).await;
    }
}

/// Two scans: settings sent before them are in force by the second (the feed applies a change
/// before its next scan).
async fn settled(recorder: &LdnsRecorder) -> Vec<IpAddr> {
    next_scan(recorder).await;
    next_scan(recorder).await
}

#[tokio::test]
async fn the_fast_path_feed_follows_mask_and_on_off_changes() {
    let Some(mut dp) = common::dataplane() else {
        return;
    };
    let map = dp.take_ldns().expect("the LDNS map");
    let recorder = LdnsRecorder::new();
    let on = |v4| XdpFeedSettings {
        enabled: true,
        mask: LdnsMask { v4, v6: 128 },
        ldns_timeout: Duration::from_secs(180),
    };
    let (settings, watched) = watch::channel(on(32));
    let feed = tokio::spawn(run_xdp_feed_with(
        map,
        recorder.clone(),
        watched,
        SCAN_EVERY,
    ));

    query_from(&dp, A);
    assert!(next_scan(&recorder).await.contains(&A.into()));

    // /24 from now on: B makes its /24's entry, C joins it and is never an entry of its own.
    settings.send_replace(on(24));
    settled(&recorder).await;
    query_from(&dp, B);
    query_from(&dp, C);
    let deadline = Instant::now() + WAIT;
    while !next_scan(&recorder).await.contains(&B.into()) {
        assert!(Instant::now() < deadline, "B never recorded");
    }
    for _ in 0..3 {
        let seen = next_scan(&recorder).await;
        assert!(
            seen.contains(&A.into()) && !seen.contains(&C.into()),
            "{seen:?}"
        );
    }

    // Off: the feed stops scanning (two quiet scan periods in a row tell it applied), and the
    // program records nothing: D, asked meanwhile, is not there once it is on again.
    settings.send_replace(XdpFeedSettings {
        enabled: false,
        ..on(24)
    });
    let deadline = Instant::now() + WAIT;
    let mut quiet = 0;
    while quiet < 2 {
        recorder.drain();
        tokio::time::sleep(SCAN_EVERY * 4).await;
        quiet = if recorder.drain().is_empty() {
            quiet + 1
        } else {
            0
        };
        assert!(Instant::now() < deadline, "the feed kept scanning");
    }
    query_from(&dp, D);
    settings.send_replace(on(24));
    for _ in 0..3 {
        let seen = next_scan(&recorder).await;
        assert!(
            seen.contains(&A.into()) && !seen.contains(&D.into()),
            "{seen:?}"
        );
    }

    // Without a sender, the feed ends and hands the map back.
    drop(settings);
    let (_map, outcome) = tokio::time::timeout(WAIT, feed)
        .await
        .expect("the feed ends")
        .unwrap();
    assert!(outcome.is_ok());
}
