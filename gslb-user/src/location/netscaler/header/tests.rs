//! The NSGEO1.0 header, in the shapes Citrix's own tools write.

use crate::location::{
    Coordinates,
    netscaler::FileFormat,
    test_support::{at, coordinates, csv_db, db_of, line_error},
};

/// What Citrix's Convert_GeoIPDB_To_Netscaler_Format.pl writes from GeoLite2 City (the shape of
/// NetScaler's built-in Citrix_Netscaler_InBuilt_GeoIP_DB_IPv4): continent codes, the two
/// subdivision names, the city in the fifth qualifier column, longitude then latitude.
const CITRIX_GEOLITE2_V4: &str = "\
NSGEO1.0
Qualifier1=Continent
Qualifier2=Country_Code
Qualifier3=Subdivision_1_Name
Qualifier4=Subdivision_2_Name
Qualifier5=City
Start
1.0.0.0,1.0.0.255,OC,AU,,,,,143.2104,-33.4940
2.16.11.0,2.16.11.255,EU,GB,England,Greater London,London,,-0.1224,51.4964
4.14.0.0,4.14.0.255,NA,US,\"District of Columbia\",,Washington,,-77.0364,38.8951
5.44.16.0,5.44.16.255,EU,DE,Hesse,,\"Frankfurt am Main\",,8.6843,50.1188
";

#[test]
fn citrix_converted_geolite2_files_load() {
    // Before: "test.csv:2: 1 fields" at the first header line.
    let db = csv_db(CITRIX_GEOLITE2_V4);
    assert_eq!(db.stats().csv, 4);
    let table = [
        ("1.0.0.7", "oc.au"),
        // Subdivision_2_Name has no qualifier: read past; the city is the city.
        ("2.16.11.9", "eu.gb.england.london"),
        ("4.14.0.1", "na.us.\"district of columbia\".washington"),
        ("5.44.16.255", "eu.de.hesse.\"frankfurt am main\""),
        ("5.44.17.0", "-"),
    ];
    for (addr, want) in table {
        assert_eq!(at(&db, addr), want, "{addr}");
    }
    assert_eq!(
        coordinates(&db, "2.16.11.9"),
        Some(Coordinates {
            latitude: 51.4964,
            longitude: -0.1224
        })
    );
    // The IPv6 file, as `add locationfile6 -format netscaler6` loads it: fully written
    // addresses (Net::IP's ip_prefix_to_range), and an End line.
    let v6 = "NSGEO1.0\nContext=geographic\nQualifier1=Continent\nQualifier2=Country_Code\n\
              Start\n\
              2001:0200:0000:0000:0000:0000:0000:0000,2001:0200:ffff:ffff:ffff:ffff:ffff:ffff,AS,JP,,,,,139.6899,35.6895\n\
              End\n";
    let db = db_of(FileFormat::from_name("netscaler6").unwrap(), v6);
    assert_eq!(at(&db, "2001:200:1::1"), "as.jp");
    assert_eq!(
        coordinates(&db, "2001:200::").map(|c| c.longitude),
        Some(139.6899)
    );
}

#[test]
fn a_custom_context_names_its_own_columns() {
    // What Citrix's GenerateCitrixCNIPDB.py writes from APNIC: one qualifier column.
    let text = "NSGEO1.0\nContext=custom\nQualifier1=ispname\nStart\n\
                1.0.1.0,1.0.3.255,CHINANET-FJ\n\
                1.0.8.0,1.0.15.255,CHINANET-GD\n";
    let db = csv_db(text);
    assert_eq!(at(&db, "1.0.2.1"), "chinanet-fj");
    assert_eq!(at(&db, "1.0.9.1"), "chinanet-gd");
    // No continent is derived in the custom context, even for a country-like second column.
    let db = csv_db(
        "NSGEO1.0\nContext=custom\nQualifier1=Net\nQualifier2=Rack\nStart\n10.0.0.0,10.0.0.255,,GB\n",
    );
    assert_eq!(at(&db, "10.0.0.1"), "*.gb");
    // A column the header does not name must stay empty.
    let (line, reason) = line_error(
        FileFormat::Netscaler,
        "NSGEO1.0\nContext=custom\nQualifier1=ispname\nStart\n1.0.1.0,1.0.3.255,CHINANET-FJ,FJ\n",
    );
    assert_eq!(line, 5);
    assert!(
        reason.contains("field 4: \"FJ\" is in a qualifier column the header does not name"),
        "{reason}"
    );
}

#[test]
fn geographic_labels_say_which_qualifier_a_column_holds() {
    let text = "# reordered and fewer columns\n\
                NSGEO1.0\n\
                Context=geographic\n\
                Qualifier1=Country\n\
                Qualifier2=City\n\
                Qualifier3=continent\n\
                Start\n\
                10.0.0.0,10.0.0.255,GB,London,Europe\n\
                10.0.1.0,10.0.1.255,US,\"New York\"\n\
                10.0.2.0,10.0.2.255,JP,Tokyo,,,,,139.69,35.69\n\
                End\n\
                # trailing comment\n";
    let db = csv_db(text);
    let table = [
        ("10.0.0.1", "europe.gb.*.london"),
        // No continent column on the line: derived from the country.
        ("10.0.1.1", "\"north america\".us.*.\"new york\""),
        ("10.0.2.1", "asia.jp.*.tokyo"),
    ];
    for (addr, want) in table {
        assert_eq!(at(&db, addr), want, "{addr}");
    }
    assert_eq!(
        coordinates(&db, "10.0.2.1").map(|c| c.latitude),
        Some(35.69)
    );
    let (line, reason) = line_error(
        FileFormat::Netscaler,
        "NSGEO1.0\nQualifier1=Country\nQualifier2=City\nStart\n10.0.0.0,10.0.0.255,GB,London,ENG\n",
    );
    assert_eq!(line, 5);
    assert!(reason.contains("field 5: \"ENG\""), "{reason}");
}

#[test]
fn header_errors_name_their_line() {
    use FileFormat::*;
    // (format, text, line, reason fragment)
    let table = [
        (
            Netscaler,
            "NSGEO1.0\nQualifier7=Foo\nStart\n",
            2,
            "expected Context= or Qualifier1= to Qualifier6=",
        ),
        (
            Netscaler,
            "NSGEO1.0\nFormat=netscaler\nStart\n",
            2,
            "expected Context= or Qualifier1= to Qualifier6=",
        ),
        (
            Netscaler,
            "NSGEO1.0\nQualifier1=\nStart\n",
            2,
            "the label is empty",
        ),
        (
            Netscaler,
            "NSGEO1.0\nQualifier1=Continent\nQualifier1=Country\nStart\n",
            3,
            "Qualifier1 is also set on line 2",
        ),
        (
            Netscaler,
            "NSGEO1.0\nQualifier1=Country\nQualifier2=Country_Code\nStart\n",
            3,
            "Qualifier2=Country_Code: Qualifier1 names the same qualifier",
        ),
        (
            Netscaler,
            "NSGEO1.0\nQualifier1=Planet\nStart\n",
            2,
            "Qualifier1=Planet: not a geographic qualifier",
        ),
        (
            Netscaler,
            "NSGEO1.0\nQualifier1=Subdivision_2_Name\nStart\n",
            2,
            "the header names no qualifier column",
        ),
        (
            Netscaler,
            "NSGEO1.0\nContext=galactic\nStart\n",
            2,
            "the context is geographic or custom",
        ),
        (
            Netscaler,
            "NSGEO1.0\nbogus\nStart\n",
            2,
            "expected Context=, QualifierN= or Start in the NSGEO1.0 header",
        ),
        (
            Netscaler,
            "\n# c\nNSGEO1.0\nQualifier1=Continent\n",
            3,
            "the NSGEO1.0 header has no Start line",
        ),
        (
            Netscaler,
            "NSGEO1.0\n1.0.0.0,1.0.0.255,EU\n",
            2,
            "a range in the NSGEO1.0 header",
        ),
        (Netscaler, "NSGEO2.0\nStart\n", 1, "unknown format tag"),
        (
            Netscaler,
            "# no tag\nContext=geographic\nStart\n",
            2,
            "a header line without the NSGEO1.0 line",
        ),
        (
            Netscaler,
            "NSGEO1.0\nStart\n1.0.0.0,1.0.0.255,EU\nQualifier1=Continent\n",
            4,
            "a header line among the ranges",
        ),
        (
            Netscaler,
            "NSGEO1.0\nStart\nStart\n",
            3,
            "\"Start\" among the ranges",
        ),
        (
            Netscaler,
            "1.0.0.0,1.0.0.255,EU\nNSGEO1.0\n",
            2,
            "\"NSGEO1.0\" among the ranges",
        ),
        (
            Netscaler,
            "NSGEO1.0\nStart\n1.0.0.0,1.0.0.255,EU\nEnd\n1.0.1.0,1.0.1.255,EU\n",
            5,
            "a range after End",
        ),
        (
            Netscaler,
            "1.0.0.0,1.0.0.255,EU\nEnd\ntrailer\n",
            3,
            "\"trailer\" after End",
        ),
        (
            Netscaler,
            "1.0.0.0,1.0.0.255,EU\nnot a range\n",
            2,
            "1 field; expected ip_from,ip_to,continent",
        ),
        (
            IpCountry,
            "NSGEO1.0\nQualifier1=Country\nStart\n",
            2,
            "only Context= may be set for the ip-country format",
        ),
    ];
    for (format, text, line, reason) in table {
        let (l, r) = line_error(format, text);
        assert_eq!(l, line, "{text:?}: {r}");
        assert!(r.contains(reason), "{text:?}: {r:?} lacks {reason:?}");
    }
}

#[test]
fn start_and_end_mark_the_ranges_of_a_file_without_header() {
    let db = csv_db("\u{feff}# plain\nStart\n1.0.0.0,1.0.0.255,EU,GB\nEnd\n\n# done\n");
    assert_eq!(at(&db, "1.0.0.1"), "eu.gb");
    // Headers and markers are case-insensitive, and a header may set only the context.
    let db = csv_db("nsgeo1.0\ncontext=Geographic\nSTART\n1.0.0.0,1.0.0.255,,GB\nend\n");
    assert_eq!(at(&db, "1.0.0.1"), "europe.gb");
    // A header is allowed in every format, for its context.
    let db = db_of(
        FileFormat::IpCountry,
        "NSGEO1.0\nContext=custom\nStart\n\"16777216\",\"16777471\",\"AU\",\"Australia\"\n",
    );
    assert_eq!(at(&db, "1.0.0.1"), "*.au");
}
