//! The table alone: entries, timeouts, the bound, merges and exports, on given times.

use super::*;

const SEC: u64 = 1000;

fn key(client: &str) -> Key {
    Key {
        v6: false,
        client: client.parse().unwrap(),
    }
}

fn svc(name: &str) -> ServiceKey {
    ServiceKey::from_name(name)
}

fn table(timeout_s: u64, max: usize) -> Table {
    Table::new(Settings {
        timeout_ms: timeout_s * SEC,
        max_entries: max,
    })
}

#[test]
fn an_entry_is_made_refreshed_by_use_and_gone_after_its_timeout() {
    let c = Counters::default();
    let t = table(10, 100);
    let k = key("192.0.2.0");
    assert_eq!(t.get(&k, 0, &c), None);
    assert_eq!(t.record(k, svc("a"), 0, &c), Recorded::Created);
    assert_eq!(
        t.get(&k, 10 * SEC, &c),
        Some(svc("a")),
        "alive at the timeout"
    );
    // Used at 8 s: the timeout counts from there (idle timeout).
    assert_eq!(t.record(k, svc("a"), 8 * SEC, &c), Recorded::Refreshed);
    assert_eq!(t.get(&k, 18 * SEC, &c), Some(svc("a")));
    assert_eq!(t.get(&k, 18 * SEC + 1, &c), None, "idle past the timeout");
    assert_eq!(c.expired.load(Ordering::Relaxed), 1);
    assert!(t.is_empty(), "an expired entry met is dropped");
    // A new answer after that is a new entry.
    assert_eq!(t.record(k, svc("b"), 20 * SEC, &c), Recorded::Created);
    assert_eq!(c.created.load(Ordering::Relaxed), 2);
    // The family is part of the key.
    let v6 = Key { v6: true, ..k };
    assert_eq!(t.get(&v6, 20 * SEC, &c), None);
}

#[test]
fn a_new_answer_replaces_the_service() {
    let c = Counters::default();
    let t = table(10, 100);
    let k = key("192.0.2.0");
    t.record(k, svc("a"), 0, &c);
    assert_eq!(t.record(k, svc("b"), SEC, &c), Recorded::Replaced);
    assert_eq!(t.get(&k, SEC, &c), Some(svc("b")));
    assert_eq!(c.replaced.load(Ordering::Relaxed), 1);
    assert_eq!(t.len(), 1);
}

#[test]
fn the_least_recently_used_entry_is_evicted_at_the_bound_and_counted() {
    let c = Counters::default();
    let t = table(100, 3);
    for (i, client) in ["10.0.0.1", "10.0.0.2", "10.0.0.3"].iter().enumerate() {
        t.record(key(client), svc("a"), i as u64, &c);
    }
    // 10.0.0.1 used again: 10.0.0.2 is now the least recently used.
    t.record(key("10.0.0.1"), svc("a"), 10, &c);
    t.record(key("10.0.0.4"), svc("a"), 11, &c);
    assert_eq!(t.len(), 3);
    assert_eq!(c.evicted.load(Ordering::Relaxed), 1);
    assert_eq!(t.get(&key("10.0.0.2"), 12, &c), None);
    for kept in ["10.0.0.1", "10.0.0.3", "10.0.0.4"] {
        assert_eq!(t.get(&key(kept), 12, &c), Some(svc("a")), "{kept}");
    }
    // Many uses of one key do not grow the queue without bound.
    for now in 0..10_000 {
        t.record(key("10.0.0.1"), svc("a"), 20 + now, &c);
    }
    assert!(t.lock(0).order.len() <= 2 * 3 + 64 + 1);
    assert_eq!(c.evicted.load(Ordering::Relaxed), 1);
}

#[test]
fn a_large_table_is_sharded_and_its_bound_holds() {
    let c = Counters::default();
    let t = table(1000, 50_000);
    assert_eq!(t.shards.len(), 12);
    assert_eq!(t.cap.iter().sum::<usize>(), 50_000);
    for i in 0..60_000u32 {
        let client = IpAddr::V4((0x0a00_0000 + (i << 8)).into());
        t.record(Key { v6: false, client }, svc("a"), u64::from(i), &c);
    }
    // Each shard holds its share: together at most the bound, and every entry made is
    // held or was counted out.
    let (len, evicted) = (t.len(), c.evicted.load(Ordering::Relaxed) as usize);
    assert!((45_000..=50_000).contains(&len), "{len}");
    assert_eq!(len + evicted, 60_000);
    // The newest survive: every shard dropped its oldest.
    let newest = IpAddr::V4((0x0a00_0000 + (59_999 << 8)).into());
    assert!(
        t.get(
            &Key {
                v6: false,
                client: newest
            },
            60_000,
            &c
        )
        .is_some()
    );
}

#[test]
fn expired_entries_leave_from_the_front_as_the_table_is_used() {
    let c = Counters::default();
    let t = table(1, 100);
    for i in 0..4 {
        t.record(key(&format!("10.0.0.{i}")), svc("a"), 0, &c);
    }
    t.record(key("10.0.1.1"), svc("a"), 5 * SEC, &c);
    assert_eq!(t.len(), 3, "two expired ones dropped on the way");
    t.record(key("10.0.1.1"), svc("a"), 5 * SEC, &c);
    assert_eq!(t.len(), 1);
    assert_eq!(c.expired.load(Ordering::Relaxed), 4);
}

#[test]
fn merges_take_the_most_recent_use_and_are_not_sent_back() {
    let c = Counters::default();
    let t = table(10, 100);
    let k = key("192.0.2.0");
    t.record(k, svc("a"), 5 * SEC, &c);
    // Older elsewhere: ours stays.
    assert_eq!(t.merge(k, svc("b"), 4 * SEC, 6 * SEC, &c), Merged::Kept);
    assert_eq!(t.get(&k, 6 * SEC, &c), Some(svc("a")));
    // More recent elsewhere: theirs.
    assert_eq!(t.merge(k, svc("b"), 6 * SEC, 6 * SEC, &c), Merged::Taken);
    assert_eq!(t.get(&k, 6 * SEC, &c), Some(svc("b")));
    // Same time: the higher service id, whichever side merges.
    let (lo, hi) = if svc("x") < svc("y") {
        (svc("x"), svc("y"))
    } else {
        (svc("y"), svc("x"))
    };
    let k2 = key("192.0.2.128");
    t.record(k2, lo, 7 * SEC, &c);
    assert_eq!(t.merge(k2, hi, 7 * SEC, 7 * SEC, &c), Merged::Taken);
    let t2 = table(10, 100);
    t2.record(k2, hi, 7 * SEC, &c);
    assert_eq!(t2.merge(k2, lo, 7 * SEC, 7 * SEC, &c), Merged::Kept);
    // An entry that has expired by our clock is not taken.
    assert_eq!(
        t.merge(key("198.51.100.0"), svc("a"), 0, 11 * SEC, &c),
        Merged::Kept
    );
    // A time in the future is taken as now.
    t.merge(key("198.51.100.1"), svc("a"), u64::MAX, 7 * SEC, &c);
    assert_eq!(t.get(&key("198.51.100.1"), 17 * SEC, &c), Some(svc("a")));
    assert_eq!(t.get(&key("198.51.100.1"), 17 * SEC + 1, &c), None);
    // What was merged is not sent back; our own entry is.
    let mut out = Vec::new();
    t.export(7 * SEC, SEC, 100, &mut out, &c);
    assert_eq!(out, []);
    t.record(key("203.0.113.0"), svc("a"), 7 * SEC, &c);
    t.export(7 * SEC, SEC, 100, &mut out, &c);
    assert_eq!(
        out,
        [Export {
            key: key("203.0.113.0"),
            service: svc("a"),
            remaining_ms: 10 * SEC
        }]
    );
}

#[test]
fn exports_send_new_changed_and_refreshed_entries_within_the_budget() {
    let c = Counters::default();
    let t = table(10, 100);
    for i in 0..5 {
        t.record(key(&format!("10.0.0.{i}")), svc("a"), 0, &c);
    }
    let mut out = Vec::new();
    t.export(0, 2 * SEC, 3, &mut out, &c);
    assert_eq!(out.len(), 3, "the budget");
    out.clear();
    t.export(0, 2 * SEC, 3, &mut out, &c);
    assert_eq!(out.len(), 2, "the rest");
    out.clear();
    t.export(0, 2 * SEC, 3, &mut out, &c);
    assert_eq!(out, [], "nothing new");
    // Used again at 1 s: sent again only once the refresh interval has passed.
    t.record(key("10.0.0.1"), svc("a"), SEC, &c);
    t.export(SEC, 2 * SEC, 10, &mut out, &c);
    assert_eq!(out, []);
    t.export(2 * SEC, 2 * SEC, 10, &mut out, &c);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].remaining_ms, 9 * SEC);
    out.clear();
    // Another service: sent at once.
    t.record(key("10.0.0.2"), svc("b"), 2 * SEC, &c);
    t.export(2 * SEC, 2 * SEC, 10, &mut out, &c);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].service, svc("b"));
    out.clear();
    // New and replaced entries are also sent on their own, at once; once only.
    t.record(key("10.0.0.9"), svc("a"), 2 * SEC, &c);
    t.record(key("10.0.0.3"), svc("b"), 2 * SEC, &c);
    t.record(key("10.0.0.4"), svc("a"), 2 * SEC, &c);
    t.export_fresh(2 * SEC, 10, &mut out);
    let mut fresh: Vec<Key> = out.iter().map(|e| e.key).collect();
    fresh.sort_by_key(|k| k.client);
    assert_eq!(fresh, [key("10.0.0.3"), key("10.0.0.9")]);
    out.clear();
    t.export_fresh(2 * SEC, 10, &mut out);
    // (10.0.0.4 was refreshed, not made: the periodic export sends it once its refresh
    // interval has passed, not before.)
    t.export(2 * SEC, 10 * SEC, 10, &mut out, &c);
    assert_eq!(out, [], "sent already");
    for i in 0..3 {
        t.record(key(&format!("10.0.1.{i}")), svc("a"), 2 * SEC, &c);
    }
    t.export_fresh(2 * SEC, 2, &mut out);
    assert_eq!(out.len(), 2, "the budget");
    out.clear();
    t.export(2 * SEC, 10 * SEC, 10, &mut out, &c);
    assert_eq!(out.len(), 1, "the rest, by the periodic export");
    out.clear();
    // A resync sends everything again; expired entries are dropped on the way.
    t.resync();
    t.export(10 * SEC + 1, 2 * SEC, 10, &mut out, &c);
    assert_eq!(out.len(), 8, "{out:?}");
    assert_eq!(t.len(), 8);
}

#[test]
fn resizing_keeps_the_most_recent_entries() {
    let c = Counters::default();
    let t = table(10, 10);
    for i in 0..6 {
        t.record(key(&format!("10.0.0.{i}")), svc("a"), i * SEC, &c);
    }
    let smaller = t.resized(
        Settings {
            timeout_ms: 3 * SEC,
            max_entries: 2,
        },
        6 * SEC,
        &c,
    );
    assert_eq!(smaller.len(), 2);
    assert_eq!(smaller.get(&key("10.0.0.5"), 6 * SEC, &c), Some(svc("a")));
    assert_eq!(smaller.get(&key("10.0.0.4"), 6 * SEC, &c), Some(svc("a")));
    assert_eq!(smaller.get(&key("10.0.0.4"), 7 * SEC + 1, &c), None);
}
