//! A zone read from an RFC 1035 master file (`[[zone]] file`), with a GSLB domain at its apex:
//! answered as written, reloaded when the file changes, and a change that does not load
//! refused at the file's line while the running zone stays. In-process gslbd, the responder
//! alone, no privileges.

use crate::common;

use std::time::Duration;

use common::{Gslbd, dig_loopback, until, www};
use gslb_tests::TempDir;

const WAIT: Duration = Duration::from_secs(20);

/// The zone file, `www` at `www_addr` (line 6).
fn zone_file(www_addr: &str) -> String {
    format!(
        "$TTL 300\n\
         @ IN SOA ns1 hostmaster ( 1 3600 600 604800 60 )\n\
         \x20 IN NS ns1\n\
         \x20 IN MX 10 mail\n\
         ns1 IN A 127.0.0.1\n\
         www IN A {www_addr}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_zone_file_is_reloaded_and_a_broken_one_refused_at_its_line() {
    let dir = TempDir::new("zone-file-watch");
    let (config, zone, control) = (
        dir.0.join("gslb.toml"),
        dir.0.join("example.com.zone"),
        dir.0.join("gslbd.sock"),
    );
    let (port, dns) = common::bound_dns();
    std::fs::write(&zone, zone_file("192.0.2.1")).unwrap();
    // The zone file is relative to the configuration's directory.
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"127.0.0.1\"]\ndns_port = {port}\n\
             [[zone]]\nname = \"example.com\"\nfile = \"example.com.zone\"\n\
             [[site]]\nname = \"dc\"\nip = \"192.0.2.200\"\n\
             [[service]]\nname = \"web\"\nip = \"198.51.100.1\"\nsite = \"dc\"\n\
             [[gslb_domain]]\nname = \"example.com\"\nservices = [\"web\"]\n"
        ),
    )
    .unwrap();
    let gslbd = Gslbd::start_bound(&config, dns, Some(control.clone()), WAIT).await;

    // The apex answers A from its service and MX from the file.
    let apex_a = dig_loopback(port, &["+short", "example.com", "A"]).await;
    assert_eq!(apex_a.trim(), "198.51.100.1");
    let apex_mx = dig_loopback(port, &["+short", "example.com", "MX"]).await;
    assert_eq!(apex_mx.trim(), "10 mail.example.com.");
    let ip = |s: &str| vec![s.parse::<std::net::IpAddr>().unwrap()];
    assert_eq!(www(port).await, ip("192.0.2.1"));

    // A change to the file is served without a reload being asked.
    std::fs::write(&zone, zone_file("192.0.2.2")).unwrap();
    until("the changed zone file is served", async || {
        www(port).await == ip("192.0.2.2")
    })
    .await;

    // A change that does not parse is refused, and the running zone stays.
    std::fs::write(&zone, zone_file("192.0.2.300")).unwrap();
    until("the broken zone file's reload is refused", async || {
        common::control_stats(&control).await["reloads_refused"] >= 1
    })
    .await;
    let refused = gslbd
        .reload()
        .await
        .expect_err("a broken zone file is refused");
    let at = format!("{}:6:", zone.display());
    assert!(refused.contains(&at), "{refused:?} names {at}");
    assert_eq!(www(port).await, ip("192.0.2.2"));
    let apex_a = dig_loopback(port, &["+short", "example.com", "A"]).await;
    assert_eq!(apex_a.trim(), "198.51.100.1");

    // Mended, it is served again.
    std::fs::write(&zone, zone_file("192.0.2.3")).unwrap();
    until("the mended zone file is served", async || {
        www(port).await == ip("192.0.2.3")
    })
    .await;
    gslbd.stop().await;
}
