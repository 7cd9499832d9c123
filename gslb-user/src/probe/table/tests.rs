use std::net::Ipv4Addr;

use super::*;
use crate::probe::ldns::DEFAULT_LDNS_TIMEOUT;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn v4(n: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(n))
}

const S: Duration = Duration::from_secs(1);
const INTERVAL: Duration = Duration::from_secs(5);

#[test]
fn a_group_is_one_entry_probed_at_its_first_address() {
    let t0 = Instant::now();
    let mut table = LdnsTable::new(LdnsMask { v4: 24, v6: 128 }, DEFAULT_LDNS_TIMEOUT);
    assert_eq!(table.see(ip("198.51.100.7"), t0), Some(ip("198.51.100.0")));
    assert_eq!(table.see(ip("198.51.100.8"), t0 + S), None);
    assert_eq!(table.see(ip("198.51.101.8"), t0), Some(ip("198.51.101.0")));
    assert_eq!(table.len(), 2);
    let entry = table.lookup(ip("198.51.100.200")).unwrap();
    assert_eq!(
        (entry.group, entry.addr),
        (ip("198.51.100.0"), ip("198.51.100.7"))
    );
    assert_eq!(entry.last_seen, t0 + S);
    // An older sighting (a late scan of the fast path's map) does not move it back.
    table.see(ip("198.51.100.9"), t0);
    assert_eq!(table.lookup(ip("198.51.100.9")).unwrap().last_seen, t0 + S);
}

#[test]
fn entries_idle_longer_than_the_timeout_expire() {
    let t0 = Instant::now();
    let mut table = LdnsTable::new(LdnsMask::default(), DEFAULT_LDNS_TIMEOUT);
    table.see(ip("192.0.2.1"), t0);
    table.see(ip("192.0.2.2"), t0);
    table.see(ip("192.0.2.2"), t0 + S * 100);
    // (time of the expiry run, entries left)
    let steps = [(179, 2), (180, 2), (181, 1), (280, 1), (281, 0)];
    for (at, left) in steps {
        table.expire(t0 + S * at);
        assert_eq!(table.len(), left, "at {at} s");
    }
    assert_eq!(table.expire(t0 + S * 1000), 0);
    assert_eq!(table.stats().expired, 2);
    let mut removed = table.take_removed();
    removed.sort();
    assert_eq!(removed, [ip("192.0.2.1"), ip("192.0.2.2")]);
}

#[test]
fn completion_rate_covers_the_last_32_rounds() {
    let t0 = Instant::now();
    let mut table = LdnsTable::new(LdnsMask::default(), DEFAULT_LDNS_TIMEOUT);
    let group = table.see(ip("192.0.2.1"), t0).unwrap();
    let entry = table.get_mut(&group).unwrap();
    assert_eq!(entry.completion_rate(), None);
    // (rounds, reply bits, rate)
    let cases = [
        (1, 1, 10_000),
        (4, 0b0101, 5_000),
        (40, u32::MAX, 10_000),
        (40, 0xffff, 5_000),
    ];
    for (rounds, replies, rate) in cases {
        entry.rounds = rounds;
        entry.replies = replies;
        assert_eq!(entry.completion_rate(), Some(rate), "{rounds} {replies:b}");
    }
}

#[test]
fn a_full_table_evicts_the_least_recently_seen_probation_entry_first() {
    let t0 = Instant::now();
    let mut table = LdnsTable::with_capacity(LdnsMask::default(), DEFAULT_LDNS_TIMEOUT, 3);
    let (a, b, c, d, e) = (v4(1), v4(2), v4(3), v4(4), v4(5));
    table.see(a, t0);
    table.see(b, t0 + S / 10);
    table.see(c, t0 + S / 5);
    // a is seen again a second later: protected, so the flood below cannot evict it.
    table.see(a, t0 + S * 2);
    assert_eq!(table.get(&a).unwrap().tier(), Tier::Protected);
    assert_eq!(table.get(&b).unwrap().tier(), Tier::Probation);
    // (new source, the entry it evicts)
    for (new, gone) in [(d, b), (e, c)] {
        table.see(new, t0 + S * 3);
        assert_eq!(table.len(), 3);
        assert!(table.get(&gone).is_none(), "{new} evicts {gone}");
        assert!(table.get(&a).is_some());
    }
    assert_eq!(table.take_removed(), [b, c]);
    // Only protected entries left to evict: the least recently seen of them goes.
    table.see(d, t0 + S * 5);
    table.see(e, t0 + S * 6);
    assert_eq!(table.get(&d).unwrap().tier(), Tier::Protected);
    table.see(v4(6), t0 + S * 7);
    assert!(table.get(&a).is_none(), "a, least recently seen, went");
    // And a probation entry again before any protected one.
    table.see(v4(7), t0 + S * 7);
    assert!(table.get(&v4(6)).is_none());
    assert!(table.get(&d).is_some() && table.get(&e).is_some());
    assert_eq!(table.stats().evicted, 4);
    assert_eq!(table.len(), 3);
}

#[test]
fn a_million_one_time_sources_leave_regular_resolvers_in_a_bounded_table() {
    let t0 = Instant::now();
    let max = 10_000;
    let mut table = LdnsTable::with_capacity(LdnsMask::default(), DEFAULT_LDNS_TIMEOUT, max);
    let resolvers: Vec<IpAddr> = (0..100).map(|i| v4(0xc633_6400 + i)).collect();
    // Resolvers that queried before the flood, twice.
    for at in [t0 - S * 2, t0 - S] {
        for &r in &resolvers {
            table.see(r, at);
        }
    }
    for (i, n) in (0..1_000_000u32).enumerate() {
        let at = t0 + Duration::from_micros(i as u64 * 10);
        // The resolvers query every 0.5 s of the flood (10 s in all).
        if i % 50_000 == 0 {
            for &r in &resolvers {
                table.see(r, at);
            }
        }
        table.see(v4(0x0a00_0000 + n), at);
        assert!(table.len() <= max);
    }
    assert_eq!(table.len(), max);
    for r in &resolvers {
        assert_eq!(
            table.get(r).map(LdnsEntry::tier),
            Some(Tier::Protected),
            "{r}"
        );
    }
    assert_eq!(table.stats().evicted, 1_000_000 + 100 - max as u64);
    // Each regular resolver's last sighting is its latest query.
    let last = t0 + Duration::from_millis(9500);
    assert!(
        resolvers
            .iter()
            .all(|r| table.get(r).unwrap().last_seen == last)
    );
}

/// Runs every due round of `tier` at `now`, answered or not; returns the targets.
fn run_due(table: &mut LdnsTable, now: Instant, answered: bool) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for tier in [Tier::Protected, Tier::Probation] {
        while let Some((group, target)) = table.take_due(tier, now) {
            table.finish(group, target, answered, now, INTERVAL);
            out.push(target);
        }
    }
    out
}

#[test]
fn rounds_without_answer_back_off_exponentially_capped_and_an_answer_resets() {
    let t0 = Instant::now();
    let mut table = LdnsTable::new(LdnsMask::default(), Duration::from_hours(24));
    let r = ip("192.0.2.1");
    table.see(r, t0);
    // Unanswered rounds: the next is due 2, 4, 8, 16, 16... intervals after the last start.
    let mut now = t0;
    let mut gaps = Vec::new();
    for _ in 0..6 {
        assert_eq!(run_due(&mut table, now, false), [r]);
        let next = table.get(&r).unwrap().next_probe();
        gaps.push((next - now).as_secs() / INTERVAL.as_secs());
        // Not before then, however often the prober looks.
        assert!(run_due(&mut table, next - S / 10, false).is_empty());
        now = next;
    }
    assert_eq!(gaps, [2, 4, 8, 16, 16, 16]);
    assert_eq!(table.get(&r).unwrap().failures(), 6);
    // An answer: back to one interval.
    assert_eq!(run_due(&mut table, now, true), [r]);
    assert_eq!(table.get(&r).unwrap().next_probe(), now + INTERVAL);
    assert_eq!(table.get(&r).unwrap().failures(), 0);
    assert_eq!(table.stats().backoffs, 6);
}

#[test]
fn an_evicted_entry_that_comes_back_waits_for_its_targets_budget() {
    let t0 = Instant::now();
    let mut table = LdnsTable::with_capacity(LdnsMask::default(), DEFAULT_LDNS_TIMEOUT, 1);
    let victim = ip("192.0.2.1");
    table.see(victim, t0);
    assert_eq!(run_due(&mut table, t0, true), [victim]);
    // A flood pushes the victim out and back in, again and again, within one interval.
    let mut probed = 0;
    for i in 0..1000u32 {
        let at = t0 + Duration::from_millis(u64::from(i) * 4);
        table.see(v4(0x0a00_0000 + 2 * i), at);
        table.see(v4(0x0a00_0001 + 2 * i), at);
        table.see(victim, at);
        probed += run_due(&mut table, at, true)
            .iter()
            .filter(|&&t| t == victim)
            .count();
    }
    assert_eq!(probed, 0, "not again within its interval");
    assert!(table.stats().held > 0);
    // After the interval it is due again.
    let later = t0 + INTERVAL;
    table.see(victim, later);
    assert!(run_due(&mut table, later, true).contains(&victim));
}

#[test]
fn a_round_in_flight_for_an_evicted_entry_blocks_a_second_one() {
    let t0 = Instant::now();
    let mut table = LdnsTable::with_capacity(LdnsMask::default(), DEFAULT_LDNS_TIMEOUT, 1);
    let victim = ip("192.0.2.1");
    table.see(victim, t0);
    let (group, target) = table.take_due(Tier::Probation, t0).unwrap();
    table.see(ip("192.0.2.2"), t0);
    table.see(victim, t0);
    assert!(!table.has_due(Tier::Probation, t0), "its round still runs");
    // The old round ends: it is the new entry's (same target), and schedules the next.
    assert!(table.finish(group, target, true, t0, INTERVAL));
    assert_eq!(table.get(&victim).unwrap().next_probe(), t0 + INTERVAL);
}

#[test]
fn per_tick_work_follows_what_is_due_not_the_table_size() {
    let t0 = Instant::now();
    let mut table = LdnsTable::new(LdnsMask::default(), DEFAULT_LDNS_TIMEOUT);
    for n in 0..50_000u32 {
        table.see(v4(0x0a00_0000 + n), t0);
    }
    // Every entry probed once: due an interval later.
    assert_eq!(run_due(&mut table, t0, true).len(), 50_000);
    // Ticks within the interval: nothing due, nothing expired, nothing touched.
    let before = table.stats().work;
    for i in 1..=49 {
        let now = t0 + INTERVAL * i / 50;
        table.expire(now);
        assert!(run_due(&mut table, now, true).is_empty());
    }
    assert_eq!(table.stats().work, before, "idle ticks touch no entry");
    // Ten new entries half an interval in: the tick touches those ten (seen, taken, finished:
    // 3 visits each) and none of the 50,000 others.
    let now = t0 + INTERVAL / 2;
    let before = table.stats().work;
    for n in 0..10u32 {
        table.see(v4(0x0b00_0000 + n), now);
    }
    table.expire(now);
    assert_eq!(run_due(&mut table, now, true).len(), 10);
    assert_eq!(table.stats().work - before, 30);
}
