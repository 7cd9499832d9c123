//! The store across configurations, and the MEP side: what is sent, what is taken in.

use std::{path::Path, sync::Arc, time::Duration};

use super::*;
use crate::config::Config;

/// Services a, b (site s1), x (site s2), v6 (IPv6); domain `shop` over a and b with persistence
/// (mask /24, /56, `timeout` s) backed up by `dr` over x; `plain` without persistence;
/// `extra` (persistence) unless `extra` is false.
fn config(shop_mask: u8, timeout: u32, extra: bool) -> Config {
    let extra = if extra {
        "[[gslb_domain]]\nname = \"extra.example.com\"\nservices = [\"a\"]\npersistence = {}\n"
    } else {
        ""
    };
    let text = format!(
        r#"[server]
listen = ["127.0.0.1"]
[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"
[[site]]
name = "s1"
ip = "10.0.0.1"
[[site]]
name = "s2"
ip = "10.0.0.2"
[[service]]
name = "a"
ip = "192.0.2.1"
site = "s1"
[[service]]
name = "b"
ip = "192.0.2.2"
site = "s1"
[[service]]
name = "x"
ip = "192.0.2.3"
site = "s2"
[[service]]
name = "v6"
ip = "2001:db8::1"
site = "s2"
{extra}
[[gslb_domain]]
name = "Shop.example.com"
services = ["a", "b", "v6"]
persistence = {{ mask_v4 = {shop_mask}, mask_v6 = 56, timeout_s = {timeout}, max_entries = 100 }}
backup_domain = "dr.example.com"
[[gslb_domain]]
name = "dr.example.com"
services = ["x"]
[[gslb_domain]]
name = "plain.example.com"
services = ["a", "b"]
"#
    );
    Config::parse(&text, Path::new("test.toml")).unwrap_or_else(|e| panic!("{e}"))
}

struct Lab {
    clock: Arc<ManualClock>,
    store: Arc<Store>,
    engine: Engine,
}

impl Lab {
    fn new(config: &Config) -> Lab {
        let clock = Arc::new(ManualClock::default());
        let store = Store::with_clock(clock.clone());
        let engine = config.engine().unwrap();
        store.configure(Some(&engine), &[]);
        Lab {
            clock,
            store,
            engine,
        }
    }

    fn reload(&mut self, config: &Config, down: &[&str]) {
        self.engine = config.engine().unwrap();
        let states: Vec<ServiceState> = config
            .services
            .iter()
            .map(|s| {
                if down.contains(&s.name.as_str()) {
                    ServiceState::DOWN
                } else {
                    ServiceState::UP
                }
            })
            .collect();
        self.store.configure(Some(&self.engine), &states);
    }

    fn domain(&self, name: &str) -> usize {
        self.engine.domain_index(name).unwrap()
    }

    fn service(&self, name: &str) -> usize {
        self.engine
            .services()
            .iter()
            .position(|s| s.name == name)
            .unwrap()
    }

    /// `client` was answered `service` for `domain` (A).
    fn answer(&self, domain: &str, client: &str, service: &str) {
        let t = self.store.tables();
        let sticky = t.lookup(self.domain(domain), false, client.parse().unwrap());
        t.note(sticky.as_ref(), &[self.service(service)]);
    }

    /// The service of `client`'s entry for `domain` (A).
    fn entry(&self, domain: &str, client: &str) -> Option<String> {
        let t = self.store.tables();
        let id = t
            .lookup(self.domain(domain), false, client.parse().unwrap())?
            .service?;
        let i = (0..self.engine.services().len()).find(|&i| self.engine.service_id(i) == id)?;
        Some(self.engine.service(i).name.clone())
    }
}

fn row(client: &str, domain: &str, service: &str, ttl_s: u32) -> PersistEntry {
    PersistEntry {
        client: client.parse().unwrap(),
        domain: domain.into(),
        service: service.into(),
        ttl_s,
    }
}

#[test]
fn entries_are_per_masked_client_and_only_for_persistence_domains() {
    let lab = Lab::new(&config(24, 60, true));
    lab.answer("shop.example.com", "198.51.100.7", "b");
    assert_eq!(
        lab.entry("shop.example.com", "198.51.100.200").as_deref(),
        Some("b"),
        "the same /24"
    );
    assert_eq!(lab.entry("shop.example.com", "198.51.101.7"), None);
    // A v4-mapped client is the IPv4 client.
    assert_eq!(
        lab.entry("shop.example.com", "::ffff:198.51.100.9")
            .as_deref(),
        Some("b")
    );
    assert!(
        lab.store
            .tables()
            .lookup(
                lab.domain("plain.example.com"),
                false,
                "198.51.100.7".parse().unwrap()
            )
            .is_none()
    );
    // Several services (or none) in one answer make no entry.
    let t = lab.store.tables();
    let s = t.lookup(
        lab.domain("shop.example.com"),
        false,
        "203.0.113.1".parse().unwrap(),
    );
    t.note(s.as_ref(), &[lab.service("a"), lab.service("b")]);
    t.note(s.as_ref(), &[]);
    assert_eq!(lab.entry("shop.example.com", "203.0.113.1"), None);
    assert_eq!(lab.store.stats().entries, 1);
    assert_eq!(lab.store.stats().created, 1);
}

#[test]
fn a_reload_keeps_the_entries_of_domains_whose_mask_stayed_and_drops_the_others() {
    let mut lab = Lab::new(&config(24, 60, true));
    lab.answer("shop.example.com", "198.51.100.7", "a");
    lab.answer("extra.example.com", "198.51.100.7", "a");
    // A health change (same configuration): everything stays.
    lab.reload(&config(24, 60, true), &["b"]);
    assert_eq!(
        lab.entry("shop.example.com", "198.51.100.7").as_deref(),
        Some("a")
    );
    // extra.example.com goes, which also moves shop's index; shop's timeout changes.
    lab.reload(&config(24, 10, false), &[]);
    assert_eq!(
        lab.entry("shop.example.com", "198.51.100.7").as_deref(),
        Some("a")
    );
    assert_eq!(lab.store.stats().entries, 1);
    // The new timeout applies to the entries kept.
    lab.clock.advance(Duration::from_secs(11));
    assert_eq!(lab.entry("shop.example.com", "198.51.100.7"), None);
    // A new mask: the entries filed under the old one are dropped.
    lab.answer("shop.example.com", "198.51.100.7", "a");
    lab.reload(&config(16, 10, false), &[]);
    assert_eq!(lab.entry("shop.example.com", "198.51.100.7"), None);
    assert_eq!(lab.store.stats().entries, 0);
    // No persistence domain answered here (a child site): no tables.
    lab.answer("shop.example.com", "198.51.100.7", "a");
    lab.store.configure(None, &[]);
    assert_eq!(lab.store.stats().entries, 0);
}

#[test]
fn exports_carry_the_domain_the_service_the_masked_prefix_and_the_time_left() {
    let lab = Lab::new(&config(24, 60, false));
    lab.answer("shop.example.com", "198.51.100.7", "b");
    lab.clock.advance(Duration::from_millis(10_500));
    let t = lab.store.tables();
    // An entry of the backup domain's service, for an IPv6 client's A answer.
    let s = t.lookup(
        lab.domain("shop.example.com"),
        false,
        "2001:db8:1:203::4".parse().unwrap(),
    );
    t.note(s.as_ref(), &[lab.service("x")]);
    let mut rows = t.export(MAX_EXPORT_ROWS);
    rows.sort_by_key(|r| r.client.to_string());
    assert_eq!(
        rows,
        [
            row("198.51.100.0/24", "shop.example.com", "b", 50),
            row("2001:db8:1:200::/56", "shop.example.com", "x", 60),
        ]
    );
    assert_eq!(t.export(MAX_EXPORT_ROWS), [], "sent once");
    assert_eq!(lab.store.stats().sent, 2);

    // Another parent takes them in and answers alike.
    let other = Lab::new(&config(24, 60, false));
    other.store.tables().merge(&rows);
    assert_eq!(
        other.entry("shop.example.com", "198.51.100.99").as_deref(),
        Some("b")
    );
    assert_eq!(other.store.stats().merged, 2);
    // With the time the sender said was left.
    other.clock.advance(Duration::from_secs(50));
    assert!(other.entry("shop.example.com", "198.51.100.99").is_some());
    other.clock.advance(Duration::from_secs(1));
    assert_eq!(other.entry("shop.example.com", "198.51.100.99"), None);
    // It does not send them back.
    assert_eq!(other.store.tables().export(MAX_EXPORT_ROWS).len(), 0);
}

#[test]
fn peer_entries_are_validated_and_not_used_for_a_service_down_here() {
    let mut lab = Lab::new(&config(24, 60, false));
    lab.reload(&config(24, 60, false), &["a"]);
    let rows = [
        // Taken: the domain's and its backup domain's services, any case of the name.
        row("198.51.100.0/24", "SHOP.example.com", "b", 30),
        row("198.51.101.0/24", "shop.example.com", "x", 30),
        // Rejected.
        row("198.51.102.0/24", "nope.example.com", "b", 30),
        row("198.51.103.0/24", "plain.example.com", "b", 30),
        row("198.51.104.0/24", "shop.example.com", "nope", 30),
        row("198.51.105.0/25", "shop.example.com", "b", 30),
        row("198.51.106.0/16", "shop.example.com", "b", 30),
        row("198.51.107.1/24", "shop.example.com", "b", 30),
        row("::ffff:198.51.108.0/120", "shop.example.com", "b", 30),
        // Ignored: a is DOWN here.
        row("198.51.109.0/24", "shop.example.com", "a", 30),
        // Nothing left of it.
        row("198.51.110.0/24", "shop.example.com", "b", 0),
        // More time than our timeout: ours.
        row("198.51.111.0/24", "shop.example.com", "b", u32::MAX),
    ];
    lab.store.tables().merge(&rows);
    let stats = lab.store.stats();
    assert_eq!(
        (stats.merged, stats.rejected, stats.ignored, stats.entries),
        (3, 7, 1, 3)
    );
    assert_eq!(
        lab.entry("shop.example.com", "198.51.101.1").as_deref(),
        Some("x")
    );
    for absent in [
        "198.51.102.1",
        "198.51.107.1",
        "198.51.109.1",
        "198.51.110.1",
    ] {
        assert_eq!(lab.entry("shop.example.com", absent), None, "{absent}");
    }
    lab.clock.advance(Duration::from_secs(61));
    assert_eq!(lab.entry("shop.example.com", "198.51.111.1"), None);

    // A table beyond the bound: the rest is rejected.
    let many: Vec<PersistEntry> = (0..MAX_MERGE_ROWS + 10)
        .map(|_| row("198.51.100.0/24", "shop.example.com", "b", 30))
        .collect();
    lab.store.tables().merge(&many);
    assert_eq!(lab.store.stats().rejected, 7 + 10);
}

/// Two parents exchanging their exports every 0.7 s (the exchange and the whole seconds on the
/// wire never line up): a client answered at both in turn, then idle, loses its entry at both
/// within the idle timeout of its last answer, plus the up to 1 s that a remaining time rounded
/// up to whole seconds adds, and a tick; however long they go on exchanging.
#[test]
fn an_entry_left_idle_expires_at_both_parents_however_long_they_exchange() {
    let config = config(24, 3, false);
    let (p1, p2) = (Lab::new(&config), Lab::new(&config));
    let labs = [&p1, &p2];
    let mut last_seen = [0u64; 2];
    let mut last_used = 0;
    for tick in 1..=30u64 {
        for lab in labs {
            lab.clock.advance(Duration::from_millis(700));
        }
        // Answered at p1 and p2 in turn for the first ten ticks, then idle.
        if tick <= 10 {
            labs[(tick % 2) as usize].answer("shop.example.com", "198.51.100.7", "b");
            last_used = tick * 700;
        }
        let (one, two) = (
            p1.store.tables().export(MAX_EXPORT_ROWS),
            p2.store.tables().export(MAX_EXPORT_ROWS),
        );
        p2.store.tables().merge(&one);
        p1.store.tables().merge(&two);
        for (i, lab) in labs.into_iter().enumerate() {
            if lab.entry("shop.example.com", "198.51.100.7").is_some() {
                last_seen[i] = tick * 700;
            }
        }
    }
    for (i, seen) in last_seen.into_iter().enumerate() {
        assert!(
            seen <= last_used + 3_000 + 1_000 + 700,
            "p{}: the entry lived until {seen} ms, last used at {last_used} ms, 3 s timeout",
            i + 1
        );
        assert!(
            seen >= last_used + 2_100,
            "p{}: gone too early ({seen} ms)",
            i + 1
        );
    }
}
