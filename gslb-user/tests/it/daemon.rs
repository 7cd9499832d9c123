//! gslbd's reactions, in-process with the responder alone (`no_xdp`) on a loopback port, so no
//! privileges are needed: a configuration reload takes effect without a restart and a bad one is
//! refused with the running one kept; a service whose monitor fails leaves the answers and
//! comes back when it recovers; a service whose link (the loopback interface, made busy by the
//! test) goes over its threshold leaves the answers until the link is quiet again.

use crate::common;

use std::{
    net::{IpAddr, UdpSocket},
    path::Path,
    time::Duration,
};

use common::{Gslbd, PortTaken, answer_addrs, answer_becomes, ask_loopback};
use gslb_tests::TempDir;
use gslb_user::control::Reload;
use hickory_proto::rr::RecordType;
use tokio::sync::mpsc;

/// How long gslbd may take to start or to stop.
const WAIT: Duration = Duration::from_secs(20);

pub(super) fn config(port: u16, web_ip: &str) -> String {
    let head = common::loopback_zone(port);
    format!(
        r#"{head}
[[site]]
name = "dc"
ip = "192.0.2.1"

[[service]]
name = "web"
ip = "{web_ip}"
site = "dc"

[[gslb_domain]]
name = "www.example.com"
services = ["web"]
"#
    )
}

/// The A answer for www.example.com from the server on `port`.
pub(super) fn ask(port: u16) -> Vec<IpAddr> {
    answer_addrs(&ask_loopback(port, "www.example.com.", RecordType::A))
}

/// Sends a reload and waits until `ask` gives `want` (the reload is applied asynchronously),
/// or panics after 20 s.
async fn reload_until(reloads: &mpsc::Sender<Reload>, port: u16, want: &str) {
    reloads.send(Reload::default()).await.unwrap();
    let want: IpAddr = want.parse().unwrap();
    for _ in 0..400 {
        if tokio::task::spawn_blocking(move || ask(port))
            .await
            .unwrap()
            == vec![want]
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("answer never became {want}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_applies_a_good_config_and_refuses_a_bad_one() {
    let dir = TempDir::new("reload");
    let path = dir.0.join("gslb.toml");
    let (port, dns) = common::bound_dns();
    std::fs::write(&path, config(port, "198.51.100.1")).unwrap();

    let gslbd = Gslbd::start_bound(&path, dns, None, WAIT).await;
    let reload_tx = &gslbd.reloads;
    let before = tokio::task::spawn_blocking(move || ask(port))
        .await
        .unwrap();
    assert_eq!(before, vec!["198.51.100.1".parse::<IpAddr>().unwrap()]);

    // A new service address takes effect.
    std::fs::write(&path, config(port, "198.51.100.2")).unwrap();
    reload_until(reload_tx, port, "198.51.100.2").await;

    // Refused, each with the running configuration kept: a file that does not parse, one that
    // does not validate, and one that changes what needs a restart (the port).
    let bad = [
        "[server\nlisten = [".to_owned(),
        config(port, "not-an-address"),
        config(port + 1, "198.51.100.3"),
    ];
    for text in bad {
        std::fs::write(&path, &text).unwrap();
        reload_tx.send(Reload::default()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = tokio::task::spawn_blocking(move || ask(port))
            .await
            .unwrap();
        assert_eq!(
            now,
            vec!["198.51.100.2".parse::<IpAddr>().unwrap()],
            "after refusing:\n{text}"
        );
    }

    // And a good one after the refusals still applies.
    std::fs::write(&path, config(port, "198.51.100.4")).unwrap();
    reload_until(reload_tx, port, "198.51.100.4").await;

    gslbd.stop().await;
}

/// gslbd as a child process on the file `path`, written for a DNS port of `config`, once it
/// says it is ready; with its stderr in `log`. The binary binds the port the file names (it
/// takes no socket from its parent), so the port is picked for it, which is a race
/// ([`common::start_on_picked_port`]): a child that exits saying the port is in use is
/// started again on another.
pub(super) fn gslbd_child(
    path: &Path,
    log: &Path,
    config: impl Fn(u16) -> String,
) -> (u16, std::process::Child) {
    use std::io::{BufRead, BufReader};
    common::start_on_picked_port("127.0.0.1", "a gslbd child process", |port| {
        std::fs::write(path, config(port)).unwrap();
        let mut gslbd = std::process::Command::new(env!("CARGO_BIN_EXE_gslbd"))
            .args(["--no-xdp", "--config"])
            .arg(path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(gslbd.stdout.take().unwrap()).lines();
        if lines
            .next()
            .is_some_and(|l| l.unwrap().contains("gslbd: ready"))
        {
            return Ok((port, gslbd));
        }
        let status = gslbd.wait().unwrap();
        let said = std::fs::read_to_string(log).unwrap_or_default();
        if said.contains("in use") {
            return Err(PortTaken(said));
        }
        panic!("gslbd did not start ({status}):\n{said}");
    })
}

/// The same through the real signal: SIGHUP to a running gslbd.
#[test]
fn sighup_reloads_a_running_gslbd() {
    let dir = TempDir::new("hup");
    let path = dir.0.join("gslb.toml");
    let (port, mut gslbd) = gslbd_child(&path, &dir.0.join("gslbd.log"), |port| {
        config(port, "198.51.100.1")
    });
    assert_eq!(ask(port), vec!["198.51.100.1".parse::<IpAddr>().unwrap()]);

    std::fs::write(&path, config(port, "198.51.100.9")).unwrap();
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(gslbd.id() as i32, libc::SIGHUP) };
    let want = vec!["198.51.100.9".parse::<IpAddr>().unwrap()];
    let reloaded = (0..400).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        ask(port) == want
    });
    // SAFETY: as above.
    unsafe { libc::kill(gslbd.id() as i32, libc::SIGTERM) };
    let status = gslbd.wait().unwrap();
    assert!(reloaded, "SIGHUP did not reload");
    assert!(status.success(), "gslbd exit: {status}");
}

/// A configuration whose www.example.com has two services with TCP monitors on loopback ports
/// (answering their public addresses) and a backup address.
fn monitored_config(port: u16, backend_a: u16, backend_b: u16) -> String {
    let head = common::loopback_zone(port);
    let pair = common::monitored_pair(
        ("127.0.0.1", backend_a),
        ("127.0.0.2", backend_b),
        "",
        "203.0.113.99",
    );
    format!("{head}{pair}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_service_leaves_the_answers_and_returns() {
    let dir = TempDir::new("health");
    let path = dir.0.join("gslb.toml");
    let (port, dns) = common::bound_dns();
    let backend_a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let backend_b = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let (pa, pb) = (
        backend_a.local_addr().unwrap().port(),
        backend_b.local_addr().unwrap().port(),
    );
    std::fs::write(&path, monitored_config(port, pa, pb)).unwrap();

    let gslbd = Gslbd::start_bound(&path, dns, None, WAIT).await;
    answer_becomes(port, &["198.51.100.1", "198.51.100.2"]).await;

    drop(backend_a); // a's backend stops: a leaves the answer
    answer_becomes(port, &["198.51.100.2"]).await;
    drop(backend_b); // both down: the backup address
    answer_becomes(port, &["203.0.113.99"]).await;
    // a's backend returns on the same port: a is answered again.
    let _backend_a = std::net::TcpListener::bind(("127.0.0.1", pa)).unwrap();
    answer_becomes(port, &["198.51.100.1"]).await;

    gslbd.stop().await;
}

/// www.example.com over services "a" (on link "lan", the loopback interface, over
/// `threshold_kbps`) and "b" (on no link), every address in each answer.
fn linked_config(port: u16, threshold_kbps: u64) -> String {
    let head = common::loopback_zone(port);
    format!(
        r#"{head}
[[site]]
name = "dc"
ip = "192.0.2.1"

[[service]]
name = "a"
ip = "198.51.100.1"
site = "dc"

[[service]]
name = "b"
ip = "198.51.100.2"
site = "dc"

[[link]]
name = "lan"
interface = "lo"
threshold_kbps = {threshold_kbps}
interval_ms = 50
over_after = 2
under_after = 2
services = ["a"]

[[gslb_domain]]
name = "www.example.com"
answer = "all"
services = ["a", "b"]
"#
    )
}

/// Inbound traffic on the loopback interface while it lives: 64 kB datagrams to a socket
/// nobody reads, about 40 MB/s (the kernel counts them as received before it drops them).
struct LoopbackTraffic {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LoopbackTraffic {
    fn start() -> LoopbackTraffic {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        let thread = std::thread::spawn({
            let stop = stop.clone();
            move || {
                let to = sink.local_addr().unwrap();
                let datagram = vec![0u8; 60_000];
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..4 {
                        // A full queue drops some; the rate stays far over the threshold.
                        let _ = sender.send_to(&datagram, to);
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                drop(sink);
            }
        });
        LoopbackTraffic {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for LoopbackTraffic {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_link_moves_the_answers_away_until_it_is_quiet() {
    // The loopback's own traffic (other tests' queries) is far under this: 10 MB/s.
    const LOW: u64 = 80_000;
    // Far over what the test sends: 100 Gbit/s.
    const HIGH: u64 = 100_000_000;
    if gslb_user::health::link::rx_bytes(Path::new(gslb_user::health::link::SYS_CLASS_NET), "lo")
        .is_err()
    {
        eprintln!("skipped: no counters for lo under /sys/class/net");
        return;
    }
    let dir = TempDir::new("link");
    let path = dir.0.join("gslb.toml");
    let (port, dns) = common::bound_dns();
    std::fs::write(&path, linked_config(port, LOW)).unwrap();

    let gslbd = Gslbd::start_bound(&path, dns, None, WAIT).await;
    answer_becomes(port, &["198.51.100.1", "198.51.100.2"]).await;

    let traffic = LoopbackTraffic::start();
    answer_becomes(port, &["198.51.100.2"]).await;
    // A reload with another threshold replaces the link's sampling: not over at the new one.
    std::fs::write(&path, linked_config(port, HIGH)).unwrap();
    gslbd.reloads.send(Reload::default()).await.unwrap();
    answer_becomes(port, &["198.51.100.1", "198.51.100.2"]).await;
    // And the replaced one still moves answers.
    std::fs::write(&path, linked_config(port, LOW)).unwrap();
    gslbd.reloads.send(Reload::default()).await.unwrap();
    answer_becomes(port, &["198.51.100.2"]).await;

    drop(traffic);
    answer_becomes(port, &["198.51.100.1", "198.51.100.2"]).await;

    gslbd.stop().await;
}

/// www.example.com by static proximity over "gb" (EU.GB) and "us" (NA.US); the clients'
/// locations come from `locations` (a `[locations]` section and its files).
pub(super) fn located_config(port: u16, locations: &str) -> String {
    let head = common::loopback_zone(port);
    format!(
        r#"{head}
{locations}

[[site]]
name = "dc"
ip = "192.0.2.1"

[[service]]
name = "gb"
ip = "198.51.100.1"
site = "dc"
location = "EU.GB"

[[service]]
name = "us"
ip = "198.51.100.2"
site = "dc"
location = "NA.US"

[[gslb_domain]]
name = "www.example.com"
method = "staticproximity"
services = ["gb", "us"]
"#
    )
}

/// A NetScaler file as Citrix ships them (NSGEO1.0 header, Start/End) placing loopback at
/// `continent.country`.
pub(super) fn nsgeo(continent: &str, country: &str) -> String {
    format!(
        "NSGEO1.0\nContext=geographic\nQualifier1=Continent\nQualifier2=Country_Code\nStart\n\
         127.0.0.0,127.255.255.255,{continent},{country},,,,,-0.1224,51.4964\nEnd\n"
    )
}

/// Asks for a reload and returns its outcome (the refusal's reason).
async fn reload_outcome(reloads: &mpsc::Sender<Reload>) -> Result<(), String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    reloads.send(Reload { reply: Some(tx) }).await.unwrap();
    tokio::time::timeout(WAIT, rx)
        .await
        .unwrap()
        .unwrap()
        .map_err(|refused| refused.to_string())
}

/// Asks for 3 s (past one poll of the location files) that the answer stays `want`.
async fn answer_stays(port: u16, want: &str, why: &str) {
    let want: IpAddr = want.parse().unwrap();
    for _ in 0..30 {
        let answer = tokio::task::spawn_blocking(move || ask(port))
            .await
            .unwrap();
        assert_eq!(answer, vec![want], "{why}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Location files as shipped drive the answers: the loopback client moves when its file
/// changes (picked up without a reload); a file that no longer loads is refused, by the file
/// watch and by a reload (which names the file, line and reason), and the loaded database stays
/// in force; a reload to another file format (an IP2Location file, continents derived from
/// the country) takes effect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_location_file_moves_the_answers() {
    let dir = TempDir::new("locations");
    let (path, csv) = (dir.0.join("gslb.toml"), dir.0.join("locations.csv"));
    let (port, dns) = common::bound_dns();
    std::fs::write(&csv, nsgeo("EU", "GB")).unwrap();
    let netscaler = format!(
        "[[locations.file]]\npath = \"{}\"\nformat = \"netscaler\"",
        csv.display()
    );
    std::fs::write(&path, located_config(port, &netscaler)).unwrap();

    let gslbd = Gslbd::start_bound(&path, dns, None, WAIT).await;
    answer_becomes(port, &["198.51.100.1"]).await;
    std::fs::write(&csv, nsgeo("NA", "US")).unwrap();
    answer_becomes(port, &["198.51.100.2"]).await;

    // Broken (the range runs backwards, line 6): refused, North America stays.
    let broken =
        nsgeo("EU", "GB").replace("127.0.0.0,127.255.255.255", "127.255.255.255,127.0.0.0");
    std::fs::write(&csv, &broken).unwrap();
    answer_stays(port, "198.51.100.2", "a broken file changed the answers").await;
    let reason = reload_outcome(&gslbd.reloads)
        .await
        .expect_err("a reload with a broken location file is refused");
    let at = format!(
        "{}:6: ip_from 127.255.255.255 is after ip_to 127.0.0.0",
        csv.display()
    );
    assert!(reason.contains(&at), "{reason}");
    answer_stays(port, "198.51.100.2", "a refused reload changed the answers").await;

    // Another format by a reload: an IP2Location DB1 file, continents derived (as codes).
    let ip2location = dir.0.join("ip2location.csv");
    std::fs::write(
        &ip2location,
        "\"2130706432\",\"2147483647\",\"GB\",\"United Kingdom of Great Britain and Northern Ireland\"\n",
    )
    .unwrap();
    let locations = format!(
        "[locations]\ncontinent = \"code\"\n[[locations.file]]\npath = \"{}\"\nformat = \"ip-country\"",
        ip2location.display()
    );
    std::fs::write(&path, located_config(port, &locations)).unwrap();
    assert_eq!(reload_outcome(&gslbd.reloads).await, Ok(()));
    answer_becomes(port, &["198.51.100.1"]).await;

    gslbd.stop().await;
}

/// Eight services whose backends stop at once: eight health events, far fewer republishes (a
/// burst is drained into one recompile), and the answers end at the latest state (the backup
/// address). `gslbctl stats` shows the counters and the last republish's duration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_health_changes_is_one_republish() {
    let dir = TempDir::new("burst");
    let (path, control) = (dir.0.join("gslb.toml"), dir.0.join("control.sock"));
    let (port, dns) = common::bound_dns();
    let backends: Vec<std::net::TcpListener> = (0..8)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let mut text = monitored_config(port, 1, 2);
    // Replace services a and b by eight, one per backend.
    let start = text.find("[[service]]").unwrap();
    text.truncate(start);
    let mut names = Vec::new();
    for (i, b) in backends.iter().enumerate() {
        let p = b.local_addr().unwrap().port();
        text.push_str(&format!(
            "[[service]]\nname = \"s{i}\"\nip = \"127.0.0.1\"\nport = {p}\npublic_ip = \"198.51.100.{}\"\nsite = \"dc\"\nmonitors = [\"tcp\"]\n",
            10 + i
        ));
        names.push(format!("\"s{i}\""));
    }
    text.push_str(&format!(
        "[[gslb_domain]]\nname = \"www.example.com\"\nanswer = \"all\"\nservices = [{}]\nbackup_ip = [\"203.0.113.99\"]\n",
        names.join(", ")
    ));
    std::fs::write(&path, text).unwrap();

    let gslbd = Gslbd::start_bound(&path, dns, Some(control.clone()), WAIT).await;
    let all: Vec<String> = (0..8).map(|i| format!("198.51.100.{}", 10 + i)).collect();
    answer_becomes(port, &all.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let before = common::control_stats(&control).await;

    drop(backends); // every backend at once
    answer_becomes(port, &["203.0.113.99"]).await;
    // The last monitor's event may still be on its way: wait until all eight are counted.
    let mut after = common::control_stats(&control).await;
    for _ in 0..100 {
        if after["trigger_events"] - before["trigger_events"] >= 8 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        after = common::control_stats(&control).await;
    }
    let events = after["trigger_events"] - before["trigger_events"];
    let republishes = after["republishes"] - before["republishes"];
    assert!(
        events >= 8,
        "every health event counted: {before:?} → {after:?}"
    );
    assert!(
        republishes < events,
        "bursts coalesced: {events} events, {republishes} republishes"
    );
    assert!(after["last_republish_us"] > 0, "{after:?}");
    answer_becomes(port, &["203.0.113.99"]).await;

    gslbd.stop().await;
}
