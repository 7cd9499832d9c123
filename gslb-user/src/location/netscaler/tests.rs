//! Location file lines in every format NetScaler loads.

use std::{net::Ipv4Addr, path::Path};

use gslb_tests::TempDir;

use crate::location::{
    Coordinates, Qualifier,
    db::{ContinentStyle, LocationDb, LocationDbError, Source},
    netscaler::FileFormat,
    test_support::{at, coordinates, csv_db, csv_err, db_of, ip, line_error, source},
};

#[test]
fn csv_lines_of_every_shape() {
    // (line, address probed, location expected there)
    let table = [
        (
            "1.0.0.0,1.0.0.255,Asia,IN,KA,Bangalore,ISP1,Org1",
            "1.0.0.7",
            "asia.in.ka.bangalore.isp1.org1",
        ),
        ("16777472,16777727,Asia,JP", "1.0.1.200", "asia.jp"),
        ("2.0.0.0,33554687,Europe,FR", "2.0.0.255", "europe.fr"),
        (
            "2001:db8::,2001:db8::ffff,Europe,DE,*,Berlin",
            "2001:db8::1234",
            "europe.de.*.berlin",
        ),
        (
            r#""3.0.0.0","3.0.0.255","Europe","UK","ENG","St. Albans","Big ISP, Ltd","""#,
            "3.0.0.1",
            r#"europe.uk.eng."st. albans"."big isp, ltd""#,
        ),
        (
            "  4.0.0.0 , 4.0.0.255 , Africa , ZMB  ",
            "4.0.0.9",
            "africa.zmb",
        ),
        (
            "5.0.0.0,5.0.0.255,NA,US,CA,San Jose,,,-121.89,37.33",
            "5.0.0.1",
            "na.us.ca.\"san jose\"",
        ),
        ("6.0.0.0,6.0.0.255,NA,US,,,,,,", "6.0.0.1", "na.us"),
        ("7.0.0.0,7.0.0.255,,,,,ISP7\r", "7.0.0.1", "*.*.*.*.isp7"),
        ("8.0.0.0,8.0.0.0,EUROPE,Gb", "8.0.0.0", "europe.gb"),
    ];
    for (line, addr, want) in table {
        let db = csv_db(line);
        assert_eq!(db.len(), 1, "{line}");
        assert_eq!(at(&db, addr), want, "{line}");
        assert_eq!(source(&db, addr), Some(Source::Csv), "{line}");
    }
    // A doubled quote inside a quoted field is one quote.
    let db = csv_db(r#"3.0.0.0,3.0.0.255,Europe,UK,,,"The ""Big"" ISP, Ltd","""#);
    assert_eq!(
        db.lookup(ip("3.0.0.1")).unwrap().0[4],
        Qualifier::Is(r#"the "big" isp, ltd"#.into())
    );
}

#[test]
fn repeated_locations_are_stored_once() {
    let text = "1.0.0.0,1.0.0.255,Asia,IN\n\
                1.0.2.0,1.0.2.255,Asia,IN\n\
                1.0.4.0,1.0.4.255,asia,in,,\n\
                1.0.6.0,1.0.6.255,\"Asia\",IN\n";
    let db = csv_db(text);
    assert_eq!(db.stats().locations, 1);
    assert_eq!(db.len(), 4);
    assert_eq!(at(&db, "1.0.6.1"), "asia.in");
    assert_eq!(at(&db, "1.0.5.1"), "-");
}

#[test]
fn malformed_lines_name_file_line_and_reason() {
    let ok = "# header\n1.0.0.0,1.0.0.255,Asia,IN\n";
    // (bad third line, reason fragment)
    let table = [
        (
            "1.0.1.0,1.0.1.255",
            "2 fields; expected ip_from,ip_to,continent",
        ),
        ("1.0.1.0,1.0.1.255,A,B,C,D,E,F,1.0", "9 fields"),
        ("1.0.1.0,1.0.1.255,A,B,C,D,E,F,1,2,3", "more than 10 fields"),
        (
            "1.0.1,1.0.1.255,Asia,IN",
            "ip_from \"1.0.1\": not an IPv4 address",
        ),
        (
            "1.0.1.0,1.0.1.256,Asia,IN",
            "ip_to \"1.0.1.256\": not an IPv4 address",
        ),
        (",1.0.1.255,Asia,IN", "ip_from \"\": not an IPv4 address"),
        (
            "1.0.1.0,4294967296,Asia,IN",
            "ip_to \"4294967296\": a numeric address is IPv4",
        ),
        ("1.0.1.0,2001:db8::1,Asia,IN", "different families"),
        ("::ffff:1.0.1.0,2001:db8::1,Asia,IN", "different families"),
        (
            "1.0.1.255,1.0.1.0,Asia,IN",
            "ip_from 1.0.1.255 is after ip_to 1.0.1.0",
        ),
        ("2001:db8::2,2001:db8::1,Asia,IN", "is after ip_to"),
        ("1.0.1.0,1.0.1.255,\"Asia,IN", "field 3: unterminated quote"),
        (
            "1.0.1.0,1.0.1.255,\"Asia\"x,IN",
            "field 3: text after the closing quote",
        ),
        (
            "1.0.1.0,1.0.1.255,Asia,IN,,,,,east,10",
            "longitude \"east\": not a number from -180 to 180",
        ),
        (
            "1.0.1.0,1.0.1.255,Asia,IN,,,,,10,91",
            "latitude \"91\": not a number from -90 to 90",
        ),
        (
            "1.0.1.0,1.0.1.255,Asia,IN,,,,,10,",
            "longitude without latitude",
        ),
        (
            "1.0.1.0,1.0.1.255,Asia,IN,,,,,,10",
            "latitude without longitude",
        ),
        ("1.0.1.0,1.0.1.255,*,,\"\"", "no qualifier"),
    ];
    for (bad, reason) in table {
        let text = format!("{ok}{bad}\n1.0.2.0,1.0.2.255,Asia,IN\n");
        match csv_err(&text) {
            LocationDbError::Line {
                file,
                line,
                reason: got,
            } => {
                assert_eq!(file, Path::new("bad.csv"), "{bad}");
                assert_eq!(line, 3, "{bad}");
                assert!(got.contains(reason), "{bad}: {got:?} lacks {reason:?}");
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
    // The whole message, as an operator reads it.
    let e = csv_err("1.0.0.0,1.0.0.255,Asia,IN\n1.0.1.0,nope,Asia,IN\n");
    assert_eq!(
        e.to_string(),
        "bad.csv:2: ip_to \"nope\": not an IPv4 address, an IPv6 address or a 32-bit number"
    );
}

#[test]
fn file_errors_not_utf8_and_missing() {
    let dir = TempDir::new("locdb");
    let path = dir.write(
        "latin1.csv",
        b"1.0.0.0,1.0.0.255,Europe,FR\n1.0.1.0,1.0.1.255,Europe,FR,Orl\xe9ans\n",
    );
    match LocationDb::builder()
        .netscaler_csv(&path)
        .build()
        .unwrap_err()
    {
        LocationDbError::Line { file, line, reason } => {
            assert_eq!((file, line), (path.clone(), 2));
            assert!(reason.contains("not UTF-8 (byte 32"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let missing = dir.0.join("missing.csv");
    match LocationDb::builder()
        .netscaler_csv(&missing)
        .build()
        .unwrap_err()
    {
        LocationDbError::Io { file, source } => {
            assert_eq!(file, missing);
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("{other:?}"),
    }
    // A readable file loads like text.
    let path = dir.write("ok.csv", b"1.0.0.0,1.0.0.255,Europe,FR\n");
    let db = LocationDb::builder().netscaler_csv(&path).build().unwrap();
    assert_eq!(at(&db, "1.0.0.1"), "europe.fr");
}

#[test]
fn every_format_reads_its_shipped_shape() {
    use FileFormat::*;
    // (format, file text, (address, location) probes)
    type Case<'a> = (FileFormat, &'a str, &'a [(&'a str, &'a str)]);
    let table: [Case<'_>; 11] = [
        // IP2Location DB1, with its "-" rows for unassigned space.
        (
            IpCountry,
            "\"0\",\"16777215\",\"-\",\"-\"\n\
             \"16777216\",\"16777471\",\"US\",\"United States of America\"\n\
             \"16777472\",\"16778239\",\"CN\",\"China\"\n",
            &[
                ("0.0.0.1", "-"),
                ("1.0.0.1", "\"north america\".us"),
                ("1.0.3.255", "asia.cn"),
            ],
        ),
        (
            IpCountryIsp,
            "\"16777216\",\"16777471\",\"AU\",\"Australia\",\"APNIC and Cloudflare DNS Resolver project\"\n\
             \"16778240\",\"16779263\",\"AU\",\"Australia\",\"-\"\n",
            &[
                (
                    "1.0.0.1",
                    "oceania.au.*.*.\"apnic and cloudflare dns resolver project\"",
                ),
                ("1.0.4.1", "oceania.au"),
            ],
        ),
        (
            IpCountryRegionCity,
            "\"16777216\",\"16777471\",\"US\",\"United States of America\",\"California\",\"Los Angeles\"\n\
             \"16778240\",\"16779263\",\"AU\",\"Australia\",\"Victoria\",\"Melbourne\"\n",
            &[
                ("1.0.0.1", "\"north america\".us.california.\"los angeles\""),
                ("1.0.4.1", "oceania.au.victoria.melbourne"),
            ],
        ),
        (
            IpCountryRegionCityIsp,
            "\"16777216\",\"16777471\",\"US\",\"United States of America\",\"California\",\"Los Angeles\",\"Cloudflare Inc.\"\n",
            &[(
                "1.0.0.1",
                "\"north america\".us.california.\"los angeles\".\"cloudflare inc.\"",
            )],
        ),
        // MaxMind GeoIPCountryWhois.csv.
        (
            GeoipCountry,
            "\"1.0.0.0\",\"1.0.0.255\",\"16777216\",\"16777471\",\"AU\",\"Australia\"\n\
             \"1.0.1.0\",\"1.0.3.255\",\"16777472\",\"16778239\",\"CN\",\"China\"\n",
            &[
                ("1.0.0.1", "oceania.au"),
                ("1.0.2.1", "asia.cn"),
                ("1.0.4.1", "-"),
            ],
        ),
        (
            GeoipRegion,
            "\"1.0.0.0\",\"1.0.0.255\",\"16777216\",\"16777471\",\"AU\",\"07\"\n",
            &[("1.0.0.1", "oceania.au.07")],
        ),
        (
            GeoipCountryIsp,
            "\"1.0.0.0\",\"1.0.0.255\",\"16777216\",\"16777471\",\"AU\",\"Australia\",\"Cloudflare\"\n",
            &[("1.0.0.1", "oceania.au.*.*.cloudflare")],
        ),
        (
            GeoipCountryOrg,
            "\"1.0.0.0\",\"1.0.0.255\",\"16777216\",\"16777471\",\"AU\",\"Australia\",\"APNIC\"\n",
            &[("1.0.0.1", "oceania.au.*.*.*.apnic")],
        ),
        // GeoLite City's blocks joined with its locations (numeric addresses).
        (
            GeoipCity,
            "16777216,16777471,AU,07,Melbourne,3000,-37.8139,144.9634,,\n\
             \"16778240\",\"16779263\",\"US\",\"CA\",\"Mountain View\",\"94043\",\"37.4192\",\"-122.0574\",\"807\",\"650\"\n",
            &[
                ("1.0.0.1", "oceania.au.07.melbourne"),
                ("1.0.4.1", "\"north america\".us.ca.\"mountain view\""),
            ],
        ),
        (
            GeoipCityIspOrg,
            "16777216,16777471,AU,07,Melbourne,3000,-37.8139,144.9634,,,Telstra,\"Telstra Internet\"\n",
            &[(
                "1.0.0.1",
                "oceania.au.07.melbourne.telstra.\"telstra internet\"",
            )],
        ),
        // MaxMind GeoIPv6.csv, as `add locationfile6 -format geoip-country6` reads it.
        (
            GeoipCountry,
            "\"2001:200::\", \"2001:200:ffff:ffff:ffff:ffff:ffff:ffff\", \"42540528726795050063891204319802818560\", \"42540528806023212578155541913346768895\", \"JP\", \"Japan\"\n",
            &[("2001:200::1", "asia.jp"), ("2001:201::", "-")],
        ),
    ];
    for (format, text, probes) in table {
        let db = db_of(format, text);
        for (addr, want) in probes {
            assert_eq!(at(&db, addr), *want, "{}: {addr}", format.name());
        }
    }
    // geoip-city gives latitude before longitude.
    let db = db_of(
        GeoipCity,
        "16777216,16777471,AU,07,Melbourne,3000,-37.8139,144.9634,,\n",
    );
    assert_eq!(
        coordinates(&db, "1.0.0.1"),
        Some(Coordinates {
            latitude: -37.8139,
            longitude: 144.9634
        })
    );
}

#[test]
fn formats_have_their_column_counts() {
    use FileFormat::*;
    let table = [
        (
            IpCountry,
            "\"16777216\",\"16777471\",\"AU\"",
            "3 fields; expected ip_from,ip_to,country,country_name",
        ),
        (
            IpCountry,
            "\"16777216\",\"16777471\",\"AU\",\"Australia\",\"x\"",
            "more than 4 fields; expected ip_from,ip_to,country,country_name",
        ),
        (
            GeoipCity,
            "16777216,16777471,AU,07,Melbourne",
            "5 fields; expected ip_from,ip_to,country,region,city,postal_code,latitude",
        ),
        (
            GeoipCity,
            "16777216,16777471,AU,07,Melbourne,3000,north,144.9,,",
            "latitude \"north\"",
        ),
        // A line with no location is an error outside IP2Location's formats.
        (
            GeoipCountry,
            "\"1.0.0.0\",\"1.0.0.255\",\"16777216\",\"16777471\",\"\",\"\"",
            "no qualifier",
        ),
    ];
    for (format, line, reason) in table {
        let (l, r) = line_error(format, &format!("{line}\n"));
        assert_eq!(l, 1, "{line}");
        assert!(
            r.contains(reason),
            "{}: {r:?} lacks {reason:?}",
            format.name()
        );
    }
}

#[test]
fn ip2location_dashes_are_no_data() {
    let text = "\"0\",\"16777215\",\"-\",\"-\"\n\
                \"16777216\",\"16777471\",\"AU\",\"Australia\"\n\
                \"16777472\",\"16778239\",\"-\",\"-\"\n";
    let db = db_of(FileFormat::IpCountry, text);
    let s = db.stats();
    assert_eq!((s.csv, s.skipped), (1, 2), "{s:?}");
    assert_eq!(at(&db, "0.0.0.1"), "-");
    assert_eq!(at(&db, "1.0.1.1"), "-");
    assert_eq!(at(&db, "1.0.0.1"), "oceania.au");
}

#[test]
fn the_continent_is_derived_from_the_country() {
    // (line, location there): netscaler lines with an empty or * continent.
    let table = [
        ("1.0.0.0,1.0.0.255,,GB,England", "europe.gb.england"),
        ("1.0.0.0,1.0.0.255,*,us", "\"north america\".us"),
        ("1.0.0.0,1.0.0.255,,BR", "\"south america\".br"),
        ("1.0.0.0,1.0.0.255,,AQ", "antarctica.aq"),
        // A continent the file gives is kept, even when it disagrees.
        ("1.0.0.0,1.0.0.255,Asia,GB", "asia.gb"),
        // Codes the table does not know stay without continent.
        ("1.0.0.0,1.0.0.255,,ZMB", "*.zmb"),
        ("1.0.0.0,1.0.0.255,,A1", "*.a1"),
    ];
    for (line, want) in table {
        assert_eq!(at(&csv_db(line), "1.0.0.1"), want, "{line}");
    }
    // As codes with `continent = "code"`, as NetScaler's built-in database writes them.
    let db = LocationDb::builder()
        .file_text(
            "c.csv",
            "\"16777216\",\"16777471\",\"US\",\"United States\"\n",
            FileFormat::IpCountry,
        )
        .netscaler_csv_text("n.csv", "2.0.0.0,2.0.0.255,,JP\n")
        .continent_style(ContinentStyle::Code)
        .build()
        .unwrap();
    assert_eq!(at(&db, "1.0.0.1"), "na.us");
    assert_eq!(at(&db, "2.0.0.1"), "as.jp");
}

#[test]
fn coordinates_are_kept_on_the_range_not_the_location() {
    let text = "10.0.0.0,10.0.255.255,Europe,GB,,,,,-0.12,51.5\n\
                10.0.1.0,10.0.1.255,Europe,GB,,,,,-2.24,53.48\n\
                10.0.2.0,10.0.2.255,Europe,GB\n";
    let db = csv_db(text);
    let table = [
        ("10.0.0.1", Some((51.5, -0.12))),
        ("10.0.1.1", Some((53.48, -2.24))),
        ("10.0.2.1", None),
        ("10.0.3.1", Some((51.5, -0.12))),
    ];
    for (addr, want) in table {
        let found = db.find(ip(addr)).unwrap();
        assert_eq!(found.location.to_string(), "europe.gb", "{addr}");
        assert_eq!(found.source, Source::Csv);
        assert_eq!(
            found.coordinates.map(|c| (c.latitude, c.longitude)),
            want,
            "{addr}"
        );
    }
    // One location for all four segments: the compiler sees no cut and one class.
    assert_eq!(db.stats().locations, 1);
    let mut cuts = db.boundaries();
    cuts.sort_unstable();
    let mapped =
        |s: &str| (0xffff_u128 << 32) | u128::from(u32::from(s.parse::<Ipv4Addr>().unwrap()));
    assert_eq!(cuts, [mapped("10.0.0.0"), mapped("10.1.0.0")]);
    assert_eq!(db.class(ip("10.0.0.1")), db.class(ip("10.0.1.1")));
    assert_eq!(db.class(ip("10.0.0.1")), db.class(ip("10.0.2.1")));
}

#[test]
fn format_names_are_netscalers() {
    for name in FileFormat::names() {
        let format = FileFormat::from_name(name).unwrap();
        assert_eq!(FileFormat::from_name(format.name()), Some(format), "{name}");
    }
    assert_eq!(FileFormat::names().count(), 13);
    assert_eq!(
        FileFormat::from_name("netscaler6"),
        Some(FileFormat::Netscaler)
    );
    assert_eq!(
        FileFormat::from_name("geoip-country6"),
        Some(FileFormat::GeoipCountry)
    );
    assert_eq!(FileFormat::from_name("Netscaler"), None);
    assert_eq!(FileFormat::from_name("csv"), None);
    assert_eq!(FileFormat::default(), FileFormat::Netscaler);
}
