//! `gslbctl show services`'s WHY and SINCE against an in-process gslbd: a TCP-monitored
//! service says which monitor failed and why, and since when (the time of its last change);
//! an unmonitored one says so; a disabled one names the operator.

use crate::common::FAST_TCP_MONITOR;
use crate::common::{self, Backend, Gslbd, answer_set_becomes, until};
use crate::steering::gslbctl;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gslb_tests::TempDir;
use gslb_user::control;

const WAIT: Duration = Duration::from_secs(15);

/// web1, TCP-monitored (the backend at `backend`), and web2, unmonitored; the admin state in
/// `state`.
fn config(dns: u16, backend: u16, state: &std::path::Path) -> String {
    let head = common::loopback_zone(dns).replacen(
        "dns_port",
        &format!("state_file = \"{}\"\ndns_port", state.display()),
        1,
    );
    format!(
        r#"{head}
[[site]]
name = "dc1"
ip = "192.0.2.100"

{FAST_TCP_MONITOR}

[[service]]
name = "web1"
ip = "127.0.0.1"
port = {backend}
public_ip = "192.0.2.1"
site = "dc1"
monitors = ["tcp"]

[[service]]
name = "web2"
ip = "192.0.2.2"
site = "dc1"

[[gslb_domain]]
name = "www.example.com"
answer = "all"
services = ["web1", "web2"]
"#
    )
}

/// `service`'s row of `show services`: SINCE and WHY (the last column, which has spaces).
fn since_and_why(table: &str, service: &str) -> (String, String) {
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    let since = header.iter().position(|&c| c == "SINCE").expect("SINCE");
    assert_eq!(header.last(), Some(&"WHY"), "{table}");
    let line = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(service))
        .unwrap_or_else(|| panic!("no {service} in\n{table}"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    (cells[since].to_owned(), cells[since + 1..].join(" "))
}

/// `YYYY-MM-DDTHH:MM:SSZ` as Unix seconds (the inverse of the table's, for days since 1970).
fn unix_s(utc: &str) -> u64 {
    let n = |r: std::ops::Range<usize>| utc[r].parse::<i64>().unwrap();
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    let (y, m) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    assert_eq!(&utc[19..], "Z", "{utc}");
    (days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19)) as u64
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_services_says_why_and_since_when() {
    let dir = TempDir::new("show-why");
    let path = dir.0.join("gslb.toml");
    let ctl = dir.0.join("gslbd.sock");
    let (dns, sockets) = common::bound_dns();
    let backend = Backend::bind("127.0.0.1").await;
    std::fs::write(&path, config(dns, backend.port(), &dir.0.join("state"))).unwrap();
    let gslbd = Gslbd::start_bound(&path, sockets, Some(ctl.clone()), WAIT).await;
    let show = async || gslbctl(&ctl, &["show", "services"]).await.unwrap();

    answer_set_becomes(dns, &["192.0.2.1", "192.0.2.2"], "both up").await;
    until("web1's monitors up", async || {
        since_and_why(&show().await, "web1").1 == "monitors up"
    })
    .await;
    assert_eq!(
        since_and_why(&show().await, "web2"),
        ("-".to_owned(), "no monitor".to_owned())
    );

    // The backend goes: the monitor says why, and the change's time is between these two.
    let before = now_s();
    drop(backend);
    answer_set_becomes(dns, &["192.0.2.2"], "web1's backend gone").await;
    let after = now_s();
    let table = show().await;
    let (since, why) = since_and_why(&table, "web1");
    assert!(why.starts_with("monitor tcp down: "), "{table}");
    assert!(why.len() > "monitor tcp down: ".len(), "the error: {table}");
    assert!(
        (before..=after).contains(&unix_s(&since)),
        "{since} not in {before}..={after}: {table}"
    );

    // The operator wins over the monitors.
    control::request(&ctl, "service disable web2", WAIT)
        .await
        .unwrap();
    assert_eq!(
        since_and_why(&show().await, "web2").1,
        "disabled by the operator"
    );
    gslbd.stop().await;
}
