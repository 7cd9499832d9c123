//! Source-IP persistence through the responder, on a clock the test moves (no sleeps): a client
//! keeps the service of its first answer while that service is UP and it asks within the
//! timeout, across other services going down and back, across a move to a backup (it does not
//! flap back), and moves only once its entry has timed out; a reload keeps the entries.

use crate::common;

use std::{net::IpAddr, path::Path, sync::Arc, time::Duration};

use common::{ips, responder_addrs};
use gslb_user::{
    compile::Snapshot,
    config::Config,
    persist::{ManualClock, Store},
    responder::Responder,
};
use hickory_proto::rr::RecordType;

const CONFIG: &str = r#"
[server]
listen = ["127.0.0.1"]

[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

[[site]]
name = "eu"
ip = "10.0.0.1"

[[site]]
name = "us"
ip = "10.0.0.2"

[[service]]
name = "eu-1"
ip = "192.0.2.1"
site = "eu"

[[service]]
name = "eu-2"
ip = "192.0.2.2"
site = "eu"

[[service]]
name = "us-1"
ip = "198.51.100.1"
site = "us"

[[service]]
name = "dr"
ip = "203.0.113.1"
site = "us"

# eu-1 while it is available, then eu-2, then us-1; a client stays where it was sent.
[[gslb_domain]]
name = "shop.example.com"
services = ["eu-1", "eu-2", "us-1"]
method = "globalavailability"
persistence = { mask_v4 = 24, timeout_s = 60 }

# Round robin, but one service per client /24.
[[gslb_domain]]
name = "rr.example.com"
services = ["eu-1", "eu-2", "us-1"]
persistence = { mask_v4 = 24, timeout_s = 60 }

# eu-1, else the backup domain.
[[gslb_domain]]
name = "app.example.com"
services = ["eu-1"]
persistence = { mask_v4 = 24, timeout_s = 60 }
backup_domain = "dr.example.com"

[[gslb_domain]]
name = "dr.example.com"
services = ["dr"]
"#;

const EU1: &str = "192.0.2.1";
const EU2: &str = "192.0.2.2";
const US1: &str = "198.51.100.1";
const DR: &str = "203.0.113.1";

struct Lab {
    config: Config,
    clock: Arc<ManualClock>,
    responder: Responder,
}

impl Lab {
    fn new() -> Lab {
        let config = Config::parse(CONFIG, Path::new("persistence.toml")).unwrap();
        let clock = Arc::new(ManualClock::default());
        let snapshot = Snapshot::with_health(&config, |_| true);
        let responder = Responder::with_persistence(&snapshot, Store::with_clock(clock.clone()));
        Lab {
            config,
            clock,
            responder,
        }
    }

    /// The services in `down` go DOWN, every other one is UP (a health change republishes).
    fn down(&self, down: &[&str]) {
        let snapshot = Snapshot::with_health(&self.config, |s| !down.contains(&s));
        self.responder.replace(&snapshot);
    }

    fn ask(&self, name: &str, client: &str) -> Vec<IpAddr> {
        let client = client.parse().unwrap();
        responder_addrs(&self.responder, name, RecordType::A, client)
    }

    fn later(&self, secs: u64) {
        self.clock.advance(Duration::from_secs(secs));
    }
}

#[test]
fn a_client_stays_on_its_service_across_flips_and_moves_only_after_its_timeout() {
    let lab = Lab::new();
    let shop = "shop.example.com.";
    let client = "198.51.100.7";
    assert_eq!(
        lab.ask(shop, client),
        ips(&[EU1]),
        "the method's first answer"
    );

    // Another service flips: nothing changes for the client.
    lab.down(&["eu-2"]);
    assert_eq!(lab.ask(shop, client), ips(&[EU1]));
    lab.down(&[]);
    assert_eq!(lab.ask(shop, client), ips(&[EU1]));

    // Its own service goes: the method answers again, and the entry follows.
    lab.down(&["eu-1"]);
    assert_eq!(lab.ask(shop, client), ips(&[EU2]));
    // eu-1 is back, and first by the method; the client stays on eu-2 (no flap back), as long
    // as it asks within the timeout (each answer refreshes it), while a new client gets eu-1.
    lab.down(&[]);
    for _ in 0..3 {
        lab.later(50);
        assert_eq!(lab.ask(shop, client), ips(&[EU2]));
        assert_eq!(lab.ask(shop, "198.51.100.200"), ips(&[EU2]), "same /24");
    }
    assert_eq!(lab.ask(shop, "203.0.113.9"), ips(&[EU1]), "a new client");
    // eu-2 and eu-1 flip (eu-1 down, then back): the client stays on eu-2 throughout.
    lab.down(&["eu-1"]);
    assert_eq!(lab.ask(shop, client), ips(&[EU2]));
    lab.down(&[]);
    assert_eq!(lab.ask(shop, client), ips(&[EU2]));

    // Idle past the timeout: the entry is gone, the method decides again.
    lab.later(61);
    assert_eq!(lab.ask(shop, client), ips(&[EU1]));
}

#[test]
fn a_client_moved_to_the_backup_domain_stays_there_until_its_timeout() {
    let lab = Lab::new();
    let app = "app.example.com.";
    let client = "192.0.2.77";
    assert_eq!(lab.ask(app, client), ips(&[EU1]));
    lab.down(&["eu-1"]);
    assert_eq!(lab.ask(app, client), ips(&[DR]));
    lab.down(&[]);
    lab.later(30);
    assert_eq!(
        lab.ask(app, client),
        ips(&[DR]),
        "kept on the backup domain"
    );
    lab.later(61);
    assert_eq!(lab.ask(app, client), ips(&[EU1]));
}

#[test]
fn round_robin_gives_each_client_one_service_and_a_reload_keeps_it() {
    let lab = Lab::new();
    let rr = "rr.example.com.";
    let clients: Vec<String> = (0..6).map(|i| format!("10.{i}.0.1")).collect();
    let first: Vec<Vec<IpAddr>> = clients.iter().map(|c| lab.ask(rr, c)).collect();
    // Rotation is per answer: several clients asking in turn get different services...
    let mut seen: Vec<&Vec<IpAddr>> = first.iter().collect();
    seen.sort();
    seen.dedup();
    assert!(seen.len() > 1, "{first:?}");
    // ...but each keeps its own, answer after answer, and after a reload of the same file.
    for _ in 0..4 {
        for (c, want) in clients.iter().zip(&first) {
            assert_eq!(&lab.ask(rr, c), want, "{c}");
        }
    }
    let snapshot = Snapshot::with_health(&lab.config, |_| true);
    lab.responder.replace(&snapshot);
    for (c, want) in clients.iter().zip(&first) {
        assert_eq!(&lab.ask(rr, c), want, "{c} after a reload");
    }
    let stats = lab.responder.persistence().stats();
    assert_eq!((stats.entries, stats.created), (6, 6));
    assert!(
        first
            .iter()
            .all(|a| a.len() == 1 && ips(&[EU1, EU2, US1]).contains(&a[0]))
    );
}
