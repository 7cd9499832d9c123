//! The database's layers, nesting and precedence.

use std::{net::Ipv4Addr, path::Path};

use super::*;
use crate::location::test_support::{at, ip};

fn csv_db(text: &str) -> LocationDb {
    LocationDb::builder()
        .netscaler_csv_text("test.csv", text)
        .build()
        .unwrap()
}

fn csv_err(text: &str) -> LocationDbError {
    LocationDb::builder()
        .netscaler_csv_text("bad.csv", text)
        .build()
        .unwrap_err()
}

fn source(db: &LocationDb, addr: &str) -> Option<Source> {
    db.lookup_with_source(ip(addr)).map(|(_, s)| s)
}

#[test]
fn nested_ranges_the_narrowest_wins_at_every_edge() {
    let text = "\
10.0.0.0,10.255.255.255,Europe,GB
10.1.0.0,10.1.255.255,Europe,GB,ENG
10.1.2.0,10.1.2.255,Europe,GB,ENG,London
10.1.255.0,10.1.255.255,Europe,GB,ENG,Leeds
10.0.0.0,10.0.0.255,Europe,GB,SCT
10.1.2.128,10.1.2.128,Europe,GB,ENG,London,Host
";
    let db = csv_db(text);
    let table = [
        ("9.255.255.255", "-"),
        ("10.0.0.0", "europe.gb.sct"),
        ("10.0.0.255", "europe.gb.sct"),
        ("10.0.1.0", "europe.gb"),
        ("10.0.255.255", "europe.gb"),
        ("10.1.0.0", "europe.gb.eng"),
        ("10.1.1.255", "europe.gb.eng"),
        ("10.1.2.0", "europe.gb.eng.london"),
        ("10.1.2.127", "europe.gb.eng.london"),
        ("10.1.2.128", "europe.gb.eng.london.host"),
        ("10.1.2.129", "europe.gb.eng.london"),
        ("10.1.2.255", "europe.gb.eng.london"),
        ("10.1.3.0", "europe.gb.eng"),
        ("10.1.254.255", "europe.gb.eng"),
        ("10.1.255.0", "europe.gb.eng.leeds"),
        ("10.1.255.255", "europe.gb.eng.leeds"),
        ("10.2.0.0", "europe.gb"),
        ("10.255.255.255", "europe.gb"),
        ("11.0.0.0", "-"),
    ];
    for (addr, want) in table {
        assert_eq!(at(&db, addr), want, "{addr}");
    }
}

#[test]
fn nesting_at_the_ends_of_the_address_space() {
    let text = "\
0.0.0.0,255.255.255.255,World
255.255.255.0,255.255.255.255,World,Top
0.0.0.0,0.0.0.0,World,Zero
::,ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff,World6
ffff::,ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff,World6,Top
";
    let db = csv_db(text);
    let table = [
        ("0.0.0.0", "world.zero"),
        ("0.0.0.1", "world"),
        ("255.255.254.255", "world"),
        ("255.255.255.0", "world.top"),
        ("255.255.255.255", "world.top"),
        ("::", "world6"),
        ("fffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "world6"),
        ("ffff::", "world6.top"),
        ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "world6.top"),
        // A mapped address is IPv4: the IPv6 catch-all does not apply.
        ("::ffff:1.2.3.4", "world"),
    ];
    for (addr, want) in table {
        assert_eq!(at(&db, addr), want, "{addr}");
    }
}

#[test]
fn partial_overlaps_and_duplicates_are_rejected_naming_both_lines() {
    // (text, line, other line, reason fragment)
    let table = [
        (
            "10.0.0.0,10.0.0.255,A\n# c\n10.0.0.128,10.0.1.127,B\n",
            3,
            1,
            "range 10.0.0.128-10.0.1.127 partially overlaps range 10.0.0.0-10.0.0.255 on line 1",
        ),
        // The later line starts first: still reported at the later line.
        (
            "10.0.0.128,10.0.1.127,B\n10.0.0.0,10.0.0.255,A\n",
            2,
            1,
            "partially overlaps",
        ),
        // Overlapping a nested range inside a wider one.
        (
            "10.0.0.0,10.255.255.255,A\n10.1.0.0,10.1.0.255,B\n10.1.0.255,10.1.1.0,C\n",
            3,
            2,
            "partially overlaps range 10.1.0.0-10.1.0.255",
        ),
        (
            "10.0.0.0,10.0.0.255,A\n10.0.0.0,10.0.0.255,B\n",
            2,
            1,
            "range 10.0.0.0-10.0.0.255 is also given on line 1",
        ),
        (
            "2001:db8::,2001:db8::ff,A\n2001:db8::80,2001:db8::1ff,B\n",
            2,
            1,
            "2001:db8::80-2001:db8::1ff partially",
        ),
    ];
    for (text, line, other_line, reason) in table {
        match csv_err(text) {
            LocationDbError::Overlap {
                file,
                line: l,
                other_file,
                other_line: o,
                reason: r,
            } => {
                assert_eq!((file.as_path(), l), (Path::new("bad.csv"), line), "{text}");
                assert_eq!(
                    (other_file.as_path(), o),
                    (Path::new("bad.csv"), other_line),
                    "{text}"
                );
                assert!(r.contains(reason), "{text}: {r:?} lacks {reason:?}");
            }
            other => panic!("{text}: {other:?}"),
        }
    }
    // Across files: both named.
    let e = LocationDb::builder()
        .netscaler_csv_text("v4.csv", "10.0.0.0,10.0.0.255,A\n")
        .netscaler_csv_text("more.csv", "# x\n10.0.0.200,10.0.1.0,B\n")
        .build()
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "more.csv:2: range 10.0.0.200-10.0.1.0 partially overlaps range 10.0.0.0-10.0.0.255 on \
         v4.csv:1; ranges may nest (the narrower one wins) but not partially overlap"
    );
    // Nesting across files is fine; adjacent ranges do not overlap.
    let db = LocationDb::builder()
        .netscaler_csv_text("v4.csv", "10.0.0.0,10.0.0.255,A\n10.0.1.0,10.0.1.255,C\n")
        .netscaler_csv_text("more.csv", "10.0.0.16,10.0.0.31,B\n")
        .build()
        .unwrap();
    let probes = [
        ("10.0.0.15", "a"),
        ("10.0.0.16", "b"),
        ("10.0.0.31", "b"),
        ("10.0.0.32", "a"),
        ("10.0.1.0", "c"),
    ];
    for (addr, want) in probes {
        assert_eq!(at(&db, addr), want, "{addr}");
    }
}

#[test]
fn custom_entries_win_over_the_files() {
    let loc = |s: &str| Location::parse(s).unwrap();
    let csv = "10.0.0.0,10.0.255.255,Europe,GB\n10.0.1.0,10.0.1.255,Europe,GB,ENG,London\n";
    let db = LocationDb::builder()
        .netscaler_csv_text("geo.csv", csv)
        .custom([
            // Inside the CSV's wide range.
            (ip("10.0.0.16"), ip("10.0.0.31"), loc("Lab.Rack1")),
            // Wider than a CSV range: wins over all of it.
            (ip("10.0.1.0"), ip("10.0.2.255"), loc("Lab.Rack2")),
            // Nested custom entries: the narrowest wins among them too.
            (ip("10.0.1.100"), ip("10.0.1.100"), loc("Lab.Rack2.Host")),
            // Where no file has an answer.
            (ip("2001:db8::"), ip("2001:db8::ff"), loc("Lab.V6")),
        ])
        .build()
        .unwrap();
    let table = [
        ("10.0.0.15", "europe.gb", Some(Source::Csv)),
        ("10.0.0.16", "lab.rack1", Some(Source::Custom)),
        ("10.0.0.31", "lab.rack1", Some(Source::Custom)),
        ("10.0.0.32", "europe.gb", Some(Source::Csv)),
        ("10.0.0.255", "europe.gb", Some(Source::Csv)),
        ("10.0.1.0", "lab.rack2", Some(Source::Custom)),
        ("10.0.1.99", "lab.rack2", Some(Source::Custom)),
        ("10.0.1.100", "lab.rack2.host", Some(Source::Custom)),
        ("10.0.1.101", "lab.rack2", Some(Source::Custom)),
        ("10.0.2.255", "lab.rack2", Some(Source::Custom)),
        ("10.0.3.0", "europe.gb", Some(Source::Csv)),
        ("2001:db8::80", "lab.v6", Some(Source::Custom)),
        ("2001:db8::100", "-", None),
    ];
    for (addr, want, src) in table {
        assert_eq!(at(&db, addr), want, "{addr}");
        assert_eq!(source(&db, addr), src, "{addr}");
    }
    assert_eq!((db.stats().custom, db.stats().csv, db.len()), (4, 2, 6));
}

#[test]
fn custom_entry_errors_name_their_line() {
    let loc = Location::parse("Lab").unwrap();
    let table = [
        (
            ip("10.0.0.9"),
            ip("10.0.0.1"),
            loc.clone(),
            "ip_from 10.0.0.9 is after ip_to 10.0.0.1",
        ),
        (
            ip("10.0.0.1"),
            ip("2001:db8::1"),
            loc.clone(),
            "different families",
        ),
        (
            ip("10.0.0.1"),
            ip("10.0.0.9"),
            Location::default(),
            "no qualifier",
        ),
    ];
    for (from, to, location, reason) in table {
        let ok = (ip("192.0.2.0"), ip("192.0.2.255"), loc.clone());
        // Positional: `<custom>:2`.
        let e = LocationDb::builder()
            .custom([ok.clone(), (from, to, location.clone())])
            .build();
        match e.unwrap_err() {
            LocationDbError::Line {
                file,
                line,
                reason: r,
            } => {
                assert_eq!((file.as_path(), line), (Path::new("<custom>"), 2));
                assert!(r.contains(reason), "{r:?} lacks {reason:?}");
            }
            other => panic!("{other:?}"),
        }
        // With the configuration's own lines.
        let e = LocationDb::builder()
            .custom_at(
                "gslb.toml",
                [(40, ok.0, ok.1, ok.2), (41, from, to, location)],
            )
            .build()
            .unwrap_err();
        assert!(e.to_string().starts_with("gslb.toml:41: "), "{e}");
    }
    let e = LocationDb::builder()
        .custom_at(
            "gslb.toml",
            [
                (7, ip("10.0.0.0"), ip("10.0.0.255"), loc.clone()),
                (9, ip("10.0.0.128"), ip("10.0.1.0"), loc),
            ],
        )
        .build()
        .unwrap_err();
    assert!(
        matches!(
            &e,
            LocationDbError::Overlap {
                line: 9,
                other_line: 7,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn ipv4_mapped_ipv6_is_ipv4() {
    let db = csv_db(
        "1.2.3.0,1.2.3.255,Asia,HK\n\
         ::ffff:5.6.7.0,::ffff:5.6.7.255,Asia,JP\n\
         ::,::ffff:ffff,Reserved\n",
    );
    let table = [
        ("1.2.3.4", "asia.hk"),
        ("::ffff:1.2.3.4", "asia.hk"),
        // A range written mapped is an IPv4 range.
        ("5.6.7.8", "asia.jp"),
        ("::ffff:5.6.7.8", "asia.jp"),
        ("::ffff:1.2.4.0", "-"),
        // IPv4-compatible (::a.b.c.d) is plain IPv6.
        ("::1.2.3.4", "reserved"),
    ];
    for (addr, want) in table {
        assert_eq!(at(&db, addr), want, "{addr}");
    }
}

#[test]
fn flat_table_agrees_with_a_naive_narrowest_match() {
    // Random laminar families of ranges in a small space, against a brute-force oracle.
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut rand = move |n: u32| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % u64::from(n)) as u32
    };
    let mut checked = 0;
    for round in 0..200 {
        let mut ranges: Vec<(u32, u32, u32)> = Vec::new();
        let mut todo = vec![(0u32, 999u32)];
        while let Some((lo, hi)) = todo.pop() {
            if ranges.len() > 40 || hi - lo < 2 {
                continue;
            }
            let a = lo + rand(hi - lo + 1);
            let b = a + rand(hi - a + 1);
            if (a, b) == (lo, hi) && ranges.iter().any(|r| (r.0, r.1) == (a, b)) {
                continue;
            }
            ranges.push((a, b, rand(5)));
            // Children nested in [a, b], and siblings beside it.
            todo.extend([(a, b), (lo, a.saturating_sub(1).max(lo)), (b + 1, hi)]);
            todo.retain(|&(l, h)| l < h && !(l == a && h == b && rand(2) == 0));
        }
        // Drop exact duplicates (rejected by design, tested elsewhere).
        ranges.sort_unstable();
        ranges.dedup_by_key(|r| (r.0, r.1));
        let text: String = ranges
            .iter()
            .map(|&(a, b, q)| format!("{a},{b},Q{q}\n"))
            .collect();
        let db = match LocationDb::builder()
            .netscaler_csv_text("r.csv", text.as_str())
            .build()
        {
            Ok(db) => db,
            Err(e) => panic!("round {round}: {e}\n{text}"),
        };
        checked += ranges.len();
        for addr in 0..1010u32 {
            let want = ranges
                .iter()
                .filter(|r| r.0 <= addr && addr <= r.1)
                .min_by_key(|r| r.1 - r.0)
                .map_or("-".to_owned(), |r| format!("q{}", r.2));
            let got = at(&db, &Ipv4Addr::from(addr).to_string());
            assert_eq!(got, want, "round {round}, address {addr}\n{text}");
        }
    }
    assert!(checked > 2000, "only {checked} ranges generated");
}

#[test]
fn empty_database_answers_nothing() {
    let db = LocationDb::empty();
    assert!(db.is_empty());
    assert_eq!(at(&db, "1.2.3.4"), "-");
    assert_eq!(at(&db, "2001:db8::1"), "-");
    let db = LocationDb::builder()
        .netscaler_csv_text("e.csv", "# nothing\n")
        .build()
        .unwrap();
    assert!(db.is_empty());
    assert_eq!(format!("{db:?}").lines().count(), 1);
}

#[test]
fn a_configuration_describes_the_database() {
    let dir = std::env::temp_dir().join(format!("gslb-locdb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("proximity.csv");
    std::fs::write(&csv, "192.0.2.0,192.0.2.255,Europe,UK,London,*,*,*\n").unwrap();
    let text = format!(
        "[server]\nlisten = [\"192.0.2.53\"]\n[locations]\nnetscaler = [{csv:?}]\n\
         [[location]]\nfrom = \"192.0.2.128\"\nto = \"192.0.2.255\"\nlocation = \"Asia.HK\"\n"
    );
    let config = crate::config::Config::parse(&text, Path::new("gslb.toml")).unwrap();
    let db = LocationDb::from_sources(&config.locations, Path::new("gslb.toml")).unwrap();
    let at = |ip: &str| db.lookup(ip.parse().unwrap()).map(|l| l.to_string());
    // The custom entry wins over the file where they overlap.
    assert_eq!(at("192.0.2.1").as_deref(), Some("europe.uk.london"));
    assert_eq!(at("192.0.2.200").as_deref(), Some("asia.hk"));
    assert_eq!(at("198.51.100.1"), None);
    // A file that is not there is named in the error.
    let missing = text.replace("proximity.csv", "missing.csv");
    let config = crate::config::Config::parse(&missing, Path::new("gslb.toml")).unwrap();
    let error = LocationDb::from_sources(&config.locations, Path::new("gslb.toml")).unwrap_err();
    assert!(error.to_string().contains("missing.csv"), "{error}");
    let _ = std::fs::remove_dir_all(&dir);
}
