//! `[[zone]] file`: zones read from RFC 1035 master files, alone and with `[[zone.record]]`s
//! and GSLB domains, and every error at the zone file's own line.

use std::path::PathBuf;

use super::*;

/// A directory of its own for one test's configuration and zone files, removed after.
struct Files(PathBuf);

impl Files {
    fn new(tag: &str) -> Files {
        let dir =
            std::env::temp_dir().join(format!("gslb-zone-files-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Files(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Loads `toml` as `gslb.toml` of this directory.
    fn load(&self, toml: &str) -> Result<Config, ConfigError> {
        Config::load(&self.write("gslb.toml", toml))
    }

    /// The error `toml` gets, as gslbd prints it, with this directory's path left out.
    fn refusal(&self, toml: &str) -> String {
        let err = self.load(toml).expect_err("refused");
        err.to_string()
            .replace(&format!("{}/", self.0.display()), "")
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The zone file of the tests: what BIND, NSD and Knot files have (`$TTL`, `$ORIGIN`, `@`,
/// owner-less records, a multi-line SOA, relative and absolute names, comments), with a
/// delegation and its glue, a wildcard, and an `$INCLUDE` with an origin of its own.
const ZONE_FILE: &str = "\
$TTL 300 ; the default TTL
@   IN SOA ns1 hostmaster (
        2026120701 ; serial
        7200 900 1209600
        60 )
    86400 IN NS ns1
    86400 IN NS ns.example.net.
    MX 10 mail
    TXT \"v=spf1 mx -all\"
    CAA 0 issue \"letsencrypt.org\"
ns1 A 192.0.2.53
mail A 192.0.2.25
www TXT ( \"site-verification\"
          \"second string\" )
*.wild 60 A 192.0.2.99
sub NS ns.sub
ns.sub A 192.0.2.54
$ORIGIN svc.example.com.
_sip._udp SRV 10 5 5060 sip
sip AAAA 2001:db8::5
$INCLUDE extra.zone extra.example.com.
";

const EXTRA: &str = "; included with origin extra.example.com.\n@ TXT \"from the include\"\nptr PTR host.example.net.\n$INCLUDE nested.zone\n";

/// Included by [`EXTRA`], without a `$TTL` of its own: the zone file's still holds.
const NESTED: &str = "nested TXT \"two deep\"\n";

/// A GSLB domain at the apex of a file zone, beside the file's MX, TXT and CAA there.
const APEX_GSLB: &str = "[[site]]\nname = \"eu\"\nip = \"192.0.2.201\"\n\
    [[service]]\nname = \"web1\"\nip = \"192.0.2.10\"\nsite = \"eu\"\n\
    [[gslb_domain]]\nname = \"example.com\"\nservices = [\"web1\"]\n";

fn file_config(extra: &str) -> String {
    format!("{SERVER}[[zone]]\nname = \"example.com\"\nfile = \"zones/example.com.zone\"\n{extra}")
}

fn record(name: &str, ttl: u32, data: RecordData) -> StaticRecord {
    StaticRecord {
        name: name.into(),
        ttl,
        data,
    }
}

#[test]
fn a_zone_file_gives_the_zone_its_soa_ns_and_records() {
    let files = Files::new("whole");
    let zone_path = files.write("zones/example.com.zone", ZONE_FILE);
    let extra_path = files.write("zones/extra.zone", EXTRA);
    let nested_path = files.write("zones/nested.zone", NESTED);
    let toml = file_config(&format!(
        "[[zone.record]]\nname = \"toml\"\ntype = \"A\"\nvalue = \"192.0.2.77\"\n{APEX_GSLB}"
    ));
    let config = files.load(&toml).expect("the zone file loads");
    let zone = &config.zones[0];
    assert_eq!(
        zone.soa,
        Soa {
            mname: "ns1.example.com".into(),
            rname: "hostmaster.example.com".into(),
            serial: 2_026_120_701,
            refresh: 7200,
            retry: 900,
            expire: 1_209_600,
            minimum: 60,
        }
    );
    assert_eq!((zone.ttl, zone.ns_ttl), (300, 86400));
    assert_eq!(zone.ns, ["ns1.example.com", "ns.example.net"]);
    let want = [
        record(
            "example.com",
            300,
            RecordData::Mx {
                preference: 10,
                exchange: "mail.example.com".into(),
            },
        ),
        record(
            "example.com",
            300,
            RecordData::Txt(vec!["v=spf1 mx -all".into()]),
        ),
        record(
            "example.com",
            300,
            RecordData::Generic {
                rtype: 257,
                rdata: [&[0u8, 5][..], b"issue", b"letsencrypt.org"].concat(),
            },
        ),
        record(
            "ns1.example.com",
            300,
            RecordData::A("192.0.2.53".parse().unwrap()),
        ),
        record(
            "mail.example.com",
            300,
            RecordData::A("192.0.2.25".parse().unwrap()),
        ),
        record(
            "www.example.com",
            300,
            RecordData::Txt(vec!["site-verification".into(), "second string".into()]),
        ),
        record(
            "*.wild.example.com",
            60,
            RecordData::A("192.0.2.99".parse().unwrap()),
        ),
        record(
            "sub.example.com",
            300,
            RecordData::Ns("ns.sub.example.com".into()),
        ),
        record(
            "ns.sub.example.com",
            300,
            RecordData::A("192.0.2.54".parse().unwrap()),
        ),
        record(
            "_sip._udp.svc.example.com",
            300,
            RecordData::Srv {
                priority: 10,
                weight: 5,
                port: 5060,
                target: "sip.svc.example.com".into(),
            },
        ),
        record(
            "sip.svc.example.com",
            300,
            RecordData::Aaaa("2001:db8::5".parse().unwrap()),
        ),
        record(
            "extra.example.com",
            300,
            RecordData::Txt(vec!["from the include".into()]),
        ),
        record(
            "ptr.extra.example.com",
            300,
            RecordData::Generic {
                rtype: 12,
                rdata: b"\x04host\x07example\x03net\x00".to_vec(),
            },
        ),
        record(
            "nested.extra.example.com",
            300,
            RecordData::Txt(vec!["two deep".into()]),
        ),
        // The configuration's records follow the file's, at the SOA's TTL by default.
        record(
            "toml.example.com",
            300,
            RecordData::A("192.0.2.77".parse().unwrap()),
        ),
    ];
    assert_eq!(zone.records, want);
    // The GSLB domain at the apex sits beside the file's apex MX, TXT and CAA.
    assert_eq!(config.gslb_domains[0].name, "example.com");
    let read: Vec<&Path> = config.zone_files.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(
        read,
        [
            zone_path.as_path(),
            extra_path.as_path(),
            nested_path.as_path()
        ]
    );
    assert!(config.zone_files.iter().all(|f| f.stamp.is_some()));
}

/// Every mistake in a zone file is refused with the zone file's name and line (the line
/// where the record starts, for one written over several lines), and one in the
/// configuration about the file with the configuration's.
#[test]
fn zone_file_errors_name_the_file_and_line() {
    let files = Files::new("errors");
    let cases: &[(&str, &str, &str)] = &[
        // (zone file, the configuration's extra text, the error)
        (
            "$TTL 300\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\nns1 A 192.0.2.1\nwww A 192.0.2.300\n",
            "",
            "zones/example.com.zone:5:",
        ),
        (
            "@ 300 SOA ns1 h 1 2 3 4 5\n@ 300 NS ns1\nns1 300 A 192.0.2.1\nwww 300 A 192.0.2.2\nwww 60 A 192.0.2.3\n",
            "",
            "zones/example.com.zone:5:1: zone \"example.com\", record www.example.com A: TTL 60 differs from TTL 300 of the www.example.com A record on zones/example.com.zone:4",
        ),
        (
            "@ 300 SOA ns1 h 1 2 3 4 5\n@ 300 NS ns1\nns1 300 A 192.0.2.1\nwww 300 A 192.0.2.2\n",
            "[[zone.record]]\nname = \"www\"\ntype = \"CNAME\"\nvalue = \"ns1\"\n",
            "gslb.toml:7:8: zone \"example.com\", record www.example.com CNAME: a CNAME must be the only record at its name (A on zones/example.com.zone:4)",
        ),
        (
            "@ 300 SOA ns1 h 1 2 3 4 5\n@ 300 NS ns1\nns1 300 A 192.0.2.1\nwww.example.net. 300 A 192.0.2.2\n",
            "",
            "zones/example.com.zone:4:1: zone \"example.com\", record www.example.net A: www.example.net is outside the zone example.com",
        ),
        (
            "@ 300 NS ns.example.net.\n",
            "",
            "gslb.toml:5:8: zone \"example.com\": zone file zones/example.com.zone has no SOA record at the apex example.com",
        ),
        (
            "@ 300 SOA ns1 h 1 2 3 4 5\n@ 300 NS ns.example.net.\n",
            "soa.rname = \"h.example.com\"\n",
            "zone \"example.com\": the SOA record comes from its file",
        ),
        (
            "@ 300 SOA ns1 h 1 2 3 4 5\n@ 300 NS ns.example.net.\n$INCLUDE example.com.zone\n",
            "",
            "zones/example.com.zone:3:1: zone \"example.com\": zone file zones/example.com.zone: includes itself ($INCLUDE loop)",
        ),
        (
            "@ 300 SOA ns1 h 1 2 3 4 5\n@ 300 NS ns.example.net.\n\n$INCLUDE missing.zone\n",
            "",
            "zones/example.com.zone:4:1: zone \"example.com\": zone file zones/missing.zone:",
        ),
        (
            "@ 300 SOA ns1 h 1 2 3 4 5\n@ 300 NS ns.example.net.\n@ 300 DNSKEY 257 3 13 (\n  AAAA )\n",
            "",
            "zones/example.com.zone:3:1: zone \"example.com\", record example.com DNSKEY: DNSKEY records are DNSSEC's own",
        ),
        (
            "@ 300 SOA ns1 h 1 2 3 4 5\n@ 300 NS ns.example.net.\n@ 300 CH TXT \"x\"\n",
            "",
            // The parser holds a file to one class (RFC 1035 §5.2), IN from the start.
            "zones/example.com.zone:3:15: different class: CH != IN",
        ),
        (
            // A multi-line record is cited at its first line.
            "@ 300 SOA ns1 h 1 2 3 4 5\n@ 300 NS ns.example.net.\nwww 300 MX ( 10\n  mail )\nwww 300 MX ( 10\n  mail )\n",
            "",
            "zones/example.com.zone:5:1: zone \"example.com\", record www.example.com MX: listed twice (first on zones/example.com.zone:3)",
        ),
        (
            "@ 300 SOA ns1 h 1 2 3 4 5\n@ 300 NS ns.example.net.\n@ 300 A 192.0.2.1\n",
            APEX_GSLB,
            "zone \"example.com\" has a static A record of this name (zones/example.com.zone:3)",
        ),
        (
            "@ 300 SOA ns1 h 1 2 3 4 5\n@ 300 NS ns.example.net.\n@ 60 NS ns2.example.net.\n",
            "",
            "zones/example.com.zone:3:1: zone \"example.com\", record example.com NS: TTL 60 differs from TTL 300",
        ),
        (
            // A device would never end: only regular files are read.
            "@ 300 SOA ns1 h 1 2 3 4 5\n@ 300 NS ns.example.net.\n$INCLUDE /dev/zero\n",
            "",
            "zones/example.com.zone:3:1: zone \"example.com\": zone file /dev/zero: not a regular file",
        ),
        (
            "@ 300 SOA ns1 h 1 2 3 4 5\n@ 300 NS ns1\n",
            "",
            "zones/example.com.zone:2:1: zone \"example.com\": name server ns1.example.com is inside a zone served here but has no address",
        ),
    ];
    for (zone_file, extra, want) in cases {
        files.write("zones/example.com.zone", zone_file);
        let got = files.refusal(&file_config(extra));
        assert!(
            got.contains(want),
            "{zone_file:?} + {extra:?}\n got: {got}\nwant: {want}"
        );
    }
    // The file itself cannot be read: the configuration's `file` key is cited.
    let got = files.refusal(&format!(
        "{SERVER}[[zone]]\nname = \"example.com\"\nfile = \"zones/nowhere.zone\"\n"
    ));
    assert!(
        got.starts_with("gslb.toml:5:8: zone \"example.com\": zone file zones/nowhere.zone:"),
        "{got}"
    );
}

/// A file on which `domain`'s parser panics (an index past its buffer while scanning a
/// character string; found by the `zone_file` fuzz target): refused at a line of the file, and
/// gslbd goes on.
#[test]
fn a_panic_of_the_parser_refuses_the_file() {
    let files = Files::new("panic");
    let text = include_bytes!("../../../../fuzz/corpus/zone_file/domain-charstr-panic");
    std::fs::create_dir_all(files.0.join("zones")).unwrap();
    std::fs::write(files.0.join("zones/example.com.zone"), text).unwrap();
    let got = files.refusal(&file_config(""));
    assert!(
        got.starts_with("zones/example.com.zone:")
            && got.contains("the zone-file parser failed on this entry"),
        "{got}"
    );
}
