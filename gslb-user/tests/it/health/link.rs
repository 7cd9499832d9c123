//! The link load monitor over counters written by the test, and the real loopback's counter.

use std::{net::Ipv4Addr, time::Duration};

use gslb_user::health::link::{LinkMonitor, LinkSpec, SYS_CLASS_NET, rx_bytes};
use tokio::{
    net::UdpSocket,
    time::{sleep, timeout},
};

use super::WAIT;

#[tokio::test]
async fn link_load_over_and_back_under_threshold() {
    // Counters in a directory laid out like /sys/class/net, written by the test.
    let root = std::env::temp_dir().join(format!("gslb-health-links-{}", std::process::id()));
    let stats = root.join("wan0/statistics");
    std::fs::create_dir_all(&stats).unwrap();
    let counter = stats.join("rx_bytes");
    std::fs::write(&counter, "0\n").unwrap();
    let spec = LinkSpec {
        link: "wan".into(),
        interface: "wan0".into(),
        interval: Duration::from_millis(20),
        threshold_bytes_per_sec: 1_000_000,
        over_after: 2,
        under_after: 2,
    };
    let missing = LinkSpec {
        link: "gone".into(),
        interface: "nope0".into(),
        ..spec.clone()
    };
    let monitor = LinkMonitor::spawn_with_root(vec![spec, missing], root.clone());
    let mut loads = monitor.loads();

    // ~10 MB/s: 100 kB every 10 ms.
    let writer = {
        let counter = counter.clone();
        tokio::spawn(async move {
            let mut total: u64 = 0;
            for _ in 0..(WAIT.as_millis() / 10) {
                total += 100_000;
                // Replaced whole, as the kernel's file is never seen half written.
                let next = counter.with_extension("next");
                std::fs::write(&next, format!("{total}\n")).unwrap();
                std::fs::rename(&next, &counter).unwrap();
                sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let over = timeout(
        WAIT,
        loads.wait_for(|l| l.get("wan").is_some_and(|l| l.over)),
    )
    .await
    .unwrap()
    .unwrap()
    .clone();
    let wan = &over["wan"];
    assert!(
        wan.rx_bytes_per_sec.unwrap() > 1_000_000 && wan.transitions == 1 && wan.error.is_none(),
        "{wan:?}"
    );
    assert!(
        over["gone"]
            .error
            .as_ref()
            .unwrap()
            .contains("No such file"),
        "{:?}",
        over["gone"]
    );
    assert!(!over["gone"].over && over["gone"].rx_bytes_per_sec.is_none());

    // Traffic stops: back under after two quiet samples.
    writer.abort();
    let _ = writer.await;
    let under = timeout(
        WAIT,
        loads.wait_for(|l| l.get("wan").is_some_and(|l| !l.over)),
    )
    .await
    .unwrap()
    .unwrap()
    .clone();
    assert_eq!(
        (under["wan"].rx_bytes_per_sec, under["wan"].transitions),
        (Some(0), 2),
        "{:?}",
        under["wan"]
    );
    drop(monitor);
    std::fs::remove_dir_all(&root).unwrap();
}

#[tokio::test]
async fn link_counter_of_the_real_loopback() {
    let root = std::path::Path::new(SYS_CLASS_NET);
    let before = match rx_bytes(root, "lo") {
        Ok(value) => value,
        Err(error) => {
            println!("skipped: {error}");
            return;
        }
    };
    // 64 datagrams of 1000 bytes through lo.
    let receiver = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let sender = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    for _ in 0..64 {
        sender
            .send_to(&[0u8; 1000], receiver.local_addr().unwrap())
            .await
            .unwrap();
    }
    let after = rx_bytes(root, "lo").unwrap();
    assert!(after >= before + 64_000, "{before} → {after}");
}
