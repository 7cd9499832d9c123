//! MaxMind databases built by the tests (mmdb-writer), below custom entries and files.

use std::{
    borrow::Cow,
    path::{Path, PathBuf},
};

use gslb_tests::TempDir;
use mmdb_writer::{Value, Writer};

use crate::location::{
    Coordinates, Location,
    db::{ContinentStyle, LocationDb, LocationDbBuilder, LocationDbError, Source},
    test_support::{at, ip},
};

fn source(db: &LocationDb, addr: &str) -> Option<Source> {
    db.lookup_with_source(ip(addr)).map(|(_, s)| s)
}

fn names(en: &str) -> Value {
    Value::map([(
        "names",
        Value::map([("en", Value::from(en)), ("de", Value::from("x"))]),
    )])
}

fn city_record(continent: (&str, &str), country: &str, region: Option<&str>, city: &str) -> Value {
    let mut m = vec![
        (
            "continent",
            Value::map([
                ("code", Value::from(continent.0)),
                ("names", Value::map([("en", Value::from(continent.1))])),
            ]),
        ),
        ("country", Value::map([("iso_code", Value::from(country))])),
        ("city", names(city)),
        (
            "location",
            Value::map([
                ("latitude", Value::from(51.5)),
                ("longitude", Value::from(-0.1)),
            ]),
        ),
    ];
    if let Some(region) = region {
        m.push((
            "subdivisions",
            Value::array([
                Value::map([("iso_code", Value::from(region))]),
                Value::map([("iso_code", Value::from("XX"))]),
            ]),
        ));
    }
    Value::map(m)
}

fn write_mmdb(dir: &TempDir, name: &str, db_type: &str, records: &[(&str, Value)]) -> PathBuf {
    let mut w = Writer::new(db_type);
    for (net, value) in records {
        w.insert_value(net.parse::<ipnet::IpNet>().unwrap(), value.clone())
            .unwrap();
    }
    dir.write(name, &w.to_bytes().unwrap())
}

fn mmdb_fixture(dir: &TempDir) -> (PathBuf, PathBuf) {
    let city = write_mmdb(
        dir,
        "city.mmdb",
        "GeoLite2-City",
        &[
            (
                "81.2.69.0/24",
                city_record(("EU", "Europe"), "GB", Some("ENG"), "London"),
            ),
            (
                "81.2.70.0/24",
                city_record(("EU", "Europe"), "GB", Some("ENG"), "London"),
            ),
            (
                "10.0.0.0/8",
                city_record(("EU", "Europe"), "DE", None, "Berlin"),
            ),
            (
                "2001:db8::/32",
                city_record(("AS", "Asia"), "JP", Some("13"), "Tokyo"),
            ),
            // No location at all (only where the block is registered): ignored.
            (
                "192.0.2.0/24",
                Value::map([(
                    "registered_country",
                    Value::map([("iso_code", Value::from("US"))]),
                )]),
            ),
        ],
    );
    let asn = write_mmdb(
        dir,
        "asn.mmdb",
        "GeoLite2-ASN",
        &[
            (
                "81.2.68.0/22",
                Value::map([
                    ("autonomous_system_number", Value::from(20_712_u32)),
                    (
                        "autonomous_system_organization",
                        Value::from("Andrews & Arnold Ltd"),
                    ),
                ]),
            ),
            (
                "10.0.0.0/8",
                Value::map([("autonomous_system_organization", Value::from("Private"))]),
            ),
            (
                "198.51.100.0/24",
                Value::map([("autonomous_system_organization", Value::from("Only ASN"))]),
            ),
            (
                "2001:db8::/48",
                Value::map([("autonomous_system_number", Value::from(64_512_u32))]),
            ),
        ],
    );
    (city, asn)
}

#[test]
fn mmdb_city_and_asn_below_custom_and_csv() {
    let dir = TempDir::new("locdb");
    let (city, asn) = mmdb_fixture(&dir);
    let db = LocationDb::builder()
        .netscaler_csv_text(
            "geo.csv",
            "10.1.0.0,10.1.255.255,Europe,DE,BE,Berlin,CsvNet\n",
        )
        .custom([(
            ip("10.2.0.0"),
            ip("10.2.0.255"),
            Location::parse("Lab").unwrap(),
        )])
        .mmdb_city(&city)
        .mmdb_asn(&asn)
        .build()
        .unwrap();
    let table = [
        (
            "81.2.69.160",
            "europe.gb.eng.london.\"andrews & arnold ltd\"",
            Some(Source::MmdbCity),
        ),
        (
            "81.2.70.1",
            "europe.gb.eng.london.\"andrews & arnold ltd\"",
            Some(Source::MmdbCity),
        ),
        (
            "::ffff:81.2.69.160",
            "europe.gb.eng.london.\"andrews & arnold ltd\"",
            Some(Source::MmdbCity),
        ),
        // In the ASN database only.
        (
            "81.2.68.1",
            "*.*.*.*.\"andrews & arnold ltd\"",
            Some(Source::MmdbAsn),
        ),
        (
            "198.51.100.7",
            "*.*.*.*.\"only asn\"",
            Some(Source::MmdbAsn),
        ),
        // City database, with and without an ISP.
        (
            "10.0.0.1",
            "europe.de.*.berlin.private",
            Some(Source::MmdbCity),
        ),
        // CSV and custom answers are kept as written: the ASN never touches them.
        ("10.1.0.1", "europe.de.be.berlin.csvnet", Some(Source::Csv)),
        ("10.2.0.1", "lab", Some(Source::Custom)),
        (
            "10.3.0.1",
            "europe.de.*.berlin.private",
            Some(Source::MmdbCity),
        ),
        (
            "2001:db8::1",
            "asia.jp.13.tokyo.as64512",
            Some(Source::MmdbCity),
        ),
        ("2001:db8:1::1", "asia.jp.13.tokyo", Some(Source::MmdbCity)),
        ("192.0.2.1", "-", None),
        ("8.8.8.8", "-", None),
        ("2001:db9::1", "-", None),
    ];
    for (addr, want, src) in table {
        assert_eq!(at(&db, addr), want, "{addr}");
        assert_eq!(source(&db, addr), src, "{addr}");
    }
    let s = db.stats();
    assert_eq!(
        (s.custom, s.csv, s.mmdb_city, s.mmdb_asn),
        (1, 1, 4, 4),
        "{s:?}"
    );
    // The record's coordinates come with the answer, also when the ASN adds the ISP; CSV
    // ranges without coordinates have none.
    let london = Some(Coordinates {
        latitude: 51.5,
        longitude: -0.1,
    });
    assert_eq!(db.find(ip("81.2.69.160")).unwrap().coordinates, london);
    assert_eq!(db.find(ip("10.3.0.1")).unwrap().coordinates, london);
    assert_eq!(db.find(ip("10.1.0.1")).unwrap().coordinates, None);
    assert_eq!(db.find(ip("198.51.100.7")).unwrap().coordinates, None);
    // A city answer without an ISP is borrowed, not assembled.
    let plain = LocationDb::builder().mmdb_city(&city).build().unwrap();
    assert!(matches!(
        plain.lookup(ip("81.2.69.1")),
        Some(Cow::Borrowed(_))
    ));
    assert_eq!(at(&plain, "81.2.69.1"), "europe.gb.eng.london");
    assert_eq!(at(&plain, "81.2.68.1"), "-");
    // Continent codes instead of names.
    let codes = LocationDb::builder()
        .mmdb_city(&city)
        .continent_style(ContinentStyle::Code)
        .build()
        .unwrap();
    assert_eq!(at(&codes, "81.2.69.1"), "eu.gb.eng.london");
    assert_eq!(at(&codes, "2001:db8::1"), "as.jp.13.tokyo");
}

#[test]
fn mmdb_errors() {
    let dir = TempDir::new("locdb");
    let (city, asn) = mmdb_fixture(&dir);
    let junk = dir.write("junk.mmdb", b"not a database at all");
    let empty = dir.write("empty.mmdb", b"");
    // A database cut short (a copy still being written): its metadata is missing.
    let whole = std::fs::read(&city).unwrap();
    let cut = dir.write("cut.mmdb", &whole[..whole.len() / 2]);
    let missing = dir.0.join("missing.mmdb");
    let table: [(LocationDbBuilder, &Path, &str); 6] = [
        (
            LocationDb::builder().mmdb_city(&empty),
            &empty,
            "not a MaxMind database",
        ),
        (
            LocationDb::builder().mmdb_city(&cut),
            &cut,
            "not a MaxMind database",
        ),
        (
            LocationDb::builder().mmdb_city(&junk),
            &junk,
            "not a MaxMind database",
        ),
        (
            LocationDb::builder().mmdb_asn(&junk),
            &junk,
            "not a MaxMind database",
        ),
        (
            LocationDb::builder().mmdb_city(&asn),
            &asn,
            "is a GeoLite2-ASN database, not a City",
        ),
        (
            LocationDb::builder().mmdb_asn(&city),
            &city,
            "is a GeoLite2-City database, not an ASN",
        ),
    ];
    for (builder, path, reason) in table {
        match builder.build().unwrap_err() {
            LocationDbError::Mmdb { file, reason: r } => {
                assert_eq!(file, path);
                assert!(r.contains(reason), "{r:?} lacks {reason:?}");
            }
            other => panic!("{other:?}"),
        }
    }
    let e = LocationDb::builder()
        .mmdb_city(&missing)
        .build()
        .unwrap_err();
    assert!(
        matches!(e, LocationDbError::Io { ref file, .. } if *file == missing),
        "{e:?}"
    );
}

#[test]
fn networks_are_flattened_in_address_order_and_disorder_is_refused() {
    use super::Ordered;
    use crate::location::table::NONE;
    let mut o = Ordered::<u32>::default();
    assert!(o.push(10, 19, 1));
    assert!(o.push(20, 29, 2));
    assert!(o.push(40, 49, 1));
    // Overlapping or backwards: refused.
    assert!(!o.push(45, 60, 3));
    assert!(!o.push(60, 50, 3));
    let got: Vec<(u32, u32)> = o.steps.finish().segments().collect();
    assert_eq!(got, [(10, 1), (20, 2), (30, NONE), (40, 1), (50, NONE)]);
    // Nothing follows a range that ends at the last address.
    let mut o = Ordered::<u128>::default();
    assert!(o.push(0, u128::MAX, 7));
    assert!(!o.push(5, 6, 8));
}
