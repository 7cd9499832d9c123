mod cname_domains;
mod load_balancing;
mod model;
mod rejected;
mod rejected_domains;
mod server_site_rtt;
mod valid;
mod zone_files;

use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

use super::*;
use crate::config::record::txt_strings;
use crate::config::validate::line_col;
use crate::dataplane::XdpMode;
use crate::location::parse_location;
use crate::model::RecordType;
use crate::policy::{AnswerMode, DownResponse, Method, SourceMask};

const SERVER: &str = "[server]\nlisten = [\"192.0.2.1\"]\n";

/// Lines 3–6 after SERVER; its name server is outside every zone, so it needs no glue.
const ZONE: &str = "[[zone]]\nname = \"example.com\"\nns = [\"ns.example.net\"]\nsoa.rname = \"hostmaster.example.com\"\n";

/// Sites, services (two with locations, one without) for the load-balancing sections.
const LB: &str = "[[site]]\nname = \"eu\"\nip = \"192.0.2.201\"\n\
    [[site]]\nname = \"us\"\nip = \"192.0.2.202\"\n\
    [[service]]\nname = \"web1\"\nip = \"192.0.2.10\"\nsite = \"eu\"\nlocation = \"Europe.UK\"\n\
    [[service]]\nname = \"web2\"\nip = \"192.0.2.11\"\nsite = \"us\"\nlocation = \"NorthAmerica.US\"\n\
    [[service]]\nname = \"plain\"\nip = \"192.0.2.12\"\nsite = \"us\"\n";

/// Fixtures of the rejected cases.
const VIEW: &str = "[[view]]\nname = \"europe\"\nprefixes = [\"198.51.100.0/24\"]\n";
const SITE: &str = "[[site]]\nname = \"eu\"\nip = \"192.0.2.201\"\n";
const SERVICES: &str = "[[service]]\nname = \"web1\"\nip = \"192.0.2.10\"\nsite = \"eu\"\n\
    [[service]]\nname = \"web2\"\nip = \"192.0.2.11\"\nsite = \"eu\"\n\
    [[service]]\nname = \"web6\"\nip = \"2001:db8::10\"\nsite = \"eu\"\n";

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("test.toml"))
}

fn server(listen: &[&str]) -> Server {
    Server {
        dns_port: 53,
        listen: listen.iter().map(|s| s.parse().unwrap()).collect(),
        edns_udp_size: 1232,
        interface: None,
        xdp_mode: XdpMode::Auto,
        pin_path: "/sys/fs/bpf/gslb".into(),
        site: None,
        tcp: crate::server::TcpLimits::default(),
        ecs_allow: None,
        stale_after: Some(Duration::from_secs(60)),
        user: None,
        state_file: "/var/lib/gslb/admin-state".into(),
        socket_affinity: false,
        identity: crate::model::Identity::default(),
        cookies: None,
    }
}

fn empty() -> Config {
    Config {
        server: server(&["192.0.2.1"]),
        views: vec![],
        zones: vec![],
        sites: vec![],
        services: vec![],
        gslb_domains: vec![],
        topology: vec![],
        actions: vec![],
        policies: vec![],
        engine: EngineSettings::default(),
        locations: LocationSources::default(),
        monitors: vec![],
        load_monitors: vec![],
        rtt: RttSettings::default(),
        mep: None,
        links: vec![],
        rrl: crate::model::RrlSettings::default(),
        admin: None,
        zone_files: vec![],
    }
}

/// A zone with every default and an out-of-zone name server, as [`ZONE`] writes it.
fn zone(name: &str) -> Zone {
    Zone {
        name: name.into(),
        ttl: 3600,
        ns_ttl: 3600,
        ns: vec!["ns.example.net".into()],
        soa: Soa {
            mname: "ns.example.net".into(),
            rname: "hostmaster.example.com".into(),
            serial: 1,
            refresh: 3600,
            retry: 600,
            expire: 604_800,
            minimum: 60,
        },
        records: vec![],
    }
}

fn rec(name: &str, ttl: u32, data: RecordData) -> StaticRecord {
    StaticRecord {
        name: name.into(),
        ttl,
        data,
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn service(name: &str, addr: &str, site: &str) -> Service {
    Service {
        name: name.into(),
        ip: ip(addr),
        port: 80,
        site: site.into(),
        location: None,
        weight: 1,
        public_ip: None,
        cname: None,
        max_connections: None,
        max_bandwidth_kbps: None,
        monitors: vec![],
        monitor_threshold: 0,
        load_monitors: vec![],
    }
}

fn gslb(name: &str, services: &[&str]) -> GslbDomain {
    GslbDomain {
        name: name.into(),
        record_type: RecordType::A,
        ttl: 30,
        answer: AnswerMode::Rotate,
        max_answers: 1,
        services: services.iter().map(ToString::to_string).collect(),
        backup_ip: vec![],
        down_response: DownResponse::Nodata,
        views: vec![],
        method: Method::RoundRobin,
        alternate: None,
        fallback: None,
        tolerance_ms: 0,
        sourceip_mask: SourceMask::default(),
        persistence: None,
        backup_domain: None,
    }
}

#[test]
fn lookups() {
    let config = parse(&format!(
        "{SERVER}{ZONE}[[zone]]\nname = \"sub.example.org\"\nns = [\"ns.example.net\"]\nsoa.rname = \"h.example.org\"\n\
         [[site]]\nname = \"s\"\nip = \"192.0.2.9\"\n\
         [[service]]\nname = \"nat\"\nip = \"10.0.0.1\"\npublic_ip = \"192.0.2.1\"\nsite = \"s\"\n\
         [[service]]\nname = \"plain\"\nip = \"2001:db8::1\"\nsite = \"s\"\n\
         [[gslb_domain]]\nname = \"www.example.com\"\nservices = [\"nat\"]\n"
    ))
    .unwrap();
    assert_eq!(config.service("nat").unwrap().answer_ip(), ip("192.0.2.1"));
    assert_eq!(
        config.service("plain").unwrap().answer_ip(),
        ip("2001:db8::1")
    );
    assert!(config.service("NAT").is_none());
    assert_eq!(config.site("s").unwrap().ip, ip("192.0.2.9"));
    assert!(config.site("t").is_none());
    let zone = |name: &str| config.zone_of(name).map(|z| z.name.as_str());
    assert_eq!(zone("example.com"), Some("example.com"));
    assert_eq!(zone("A.B.Example.COM."), Some("example.com"));
    assert_eq!(zone("x.sub.example.org"), Some("sub.example.org"));
    assert_eq!(zone("example.org"), None);
    assert_eq!(zone("badexample.com"), None);
    assert_eq!(zone("com"), None);
    assert_eq!(
        config
            .gslb_domain("WWW.example.com.")
            .map(|d| d.name.as_str()),
        Some("www.example.com")
    );
    assert!(config.gslb_domain("example.com").is_none());
    assert_eq!(
        RecordData::Srv {
            priority: 0,
            weight: 0,
            port: 0,
            target: String::new()
        }
        .rtype(),
        33
    );
    assert_eq!(RecordData::Aaaa(Ipv6Addr::LOCALHOST).type_name(), "AAAA");
}

#[test]
fn zone_of_prefers_the_longest_apex() {
    // Validation forbids nested zones, but the lookup does not rely on it.
    let mut config = empty();
    config.zones = vec![zone("example.com"), zone("a.example.com")];
    assert_eq!(
        config.zone_of("x.a.example.com").unwrap().name,
        "a.example.com"
    );
    assert_eq!(config.zone_of("x.example.com").unwrap().name, "example.com");
}

#[test]
fn locations() {
    let ok = |s: &str| parse_location(s).unwrap_or_else(|e| panic!("{s}: {e}"));
    assert_eq!(ok("Europe"), ["Europe"]);
    assert_eq!(ok("Europe.UK.London"), ["Europe", "UK", "London"]);
    assert_eq!(
        ok("NA.US.\"New York\".\"N.Y.C\".*.org"),
        ["NA", "US", "New York", "N.Y.C", "*", "org"]
    );
    for (bad, reason) in [
        ("", "qualifier 1 is empty"),
        ("a..b", "qualifier 2 is empty"),
        ("a.", "qualifier 2 is empty"),
        ("a.b.c.d.e.f.g", "7 qualifiers, at most 6"),
        ("a.\"b", "unterminated quote in qualifier 2"),
        ("\"a\"b", "continues after its closing quote"),
        ("New York", "contains ' '"),
        ("a.b\"c\"", "contains '\"'"),
        ("\"\"", "qualifier 1 is empty"),
    ] {
        let got = parse_location(bad).expect_err(bad).to_string();
        assert!(got.contains(reason), "{bad:?}: {got:?} lacks {reason:?}");
    }
}

/// Every name the configuration accepts is one the responder can build (it makes hickory
/// names of them, and would panic on one refused there), and the other way round.
#[test]
fn domain_names_are_what_the_responder_can_name() {
    for label in [
        "www",
        "-www",
        "www-",
        "w-w",
        "_sip",
        "s_1",
        "0day",
        "xn--bcher-kva",
        "a*",
        "-",
        "_",
    ] {
        let name = format!("{label}.example.com");
        assert_eq!(
            names::domain_name(&name).is_ok(),
            hickory_proto::rr::Name::from_ascii(&name).is_ok(),
            "{name}"
        );
    }
}

#[test]
fn txt_splits_on_character_boundaries() {
    assert_eq!(txt_strings(""), [""]);
    assert_eq!(txt_strings(&"a".repeat(255)), ["a".repeat(255)]);
    assert_eq!(txt_strings(&"a".repeat(256)), ["a".repeat(255), "a".into()]);
    let s = format!("{}€", "a".repeat(254)); // the euro sign (3 bytes) would straddle 255
    assert_eq!(txt_strings(&s), ["a".repeat(254), "€".into()]);
}

/// Each case marks the offending line with `#<`; the error must point there and contain the
/// reason. Every failing case is reported, not only the first.
fn assert_rejected(cases: &[(String, &str)]) {
    let mut failures = Vec::new();
    for (text, reason) in cases {
        let want_line = text
            .lines()
            .position(|l| l.contains("#<"))
            .expect("case has a #< marker")
            + 1;
        let failure = match parse(text) {
            Ok(_) => "accepted".to_owned(),
            Err(ConfigError::Invalid {
                line,
                reason: got,
                file,
                ..
            }) => {
                if !got.contains(reason) {
                    format!("reason {got:?} lacks {reason:?}")
                } else if line != want_line {
                    format!("line {line} instead of {want_line} for {got:?}")
                } else if file != Path::new("test.toml") {
                    format!("file {}", file.display())
                } else {
                    continue;
                }
            }
            Err(e) => format!("unexpected {e:?}"),
        };
        let shown = &text[..text.floor_char_boundary(2000)];
        failures.push(format!("{failure}\n{shown}"));
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

#[test]
fn expression_errors_point_into_the_expression() {
    let text = format!(
        "{SERVER}[[action]]\nname = \"a\"\npreferred_locations = [\"Asia\"]\n\
         [[policy]]\nname = \"p\"\naction = \"a\"\npriority = 1\n\
         expression = 'TRUE && CLIENT.IP.SRC.MATCHES_LOCATION(\"Asia..x\")'\n"
    );
    let err = parse(&text).unwrap_err().to_string();
    // Line 10; the string opens at column 14, the bad argument is its 40th character.
    assert!(
        err.starts_with("test.toml:10:54: policy \"p\": expression: column 40: "),
        "{err}"
    );
    // With escapes in a basic string, the error points at the string.
    let escaped = text.replace(
        "'TRUE && CLIENT.IP.SRC.MATCHES_LOCATION(\"Asia..x\")'",
        "\"TRUE && CLIENT.IP.SRC.MATCHES_LOCATION(\\\"Asia..x\\\")\"",
    );
    let err = parse(&escaped).unwrap_err().to_string();
    assert!(
        err.starts_with("test.toml:10:14: policy \"p\": expression: column 40: "),
        "{err}"
    );
}

#[test]
fn error_display_points_at_value() {
    let err = parse("[server]\nlisten = [\"192.0.2.1\",  \"nope\"]\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "test.toml:2:25: server.listen: \"nope\" is not an IP address"
    );
    let err = Config::load(Path::new("/nonexistent/gslb.toml")).unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }), "{err:?}");
    assert_eq!(err.to_string(), "cannot read /nonexistent/gslb.toml");
}

#[test]
fn xdp_mode_round_trips() {
    for mode in [XdpMode::Auto, XdpMode::Native, XdpMode::Skb] {
        assert_eq!(mode.to_string().parse::<XdpMode>(), Ok(mode));
    }
    assert!("Native".parse::<XdpMode>().is_err());
}

#[test]
fn line_col_counts_characters() {
    assert_eq!(line_col("ab\né\u{1F600}x", 9), (2, 3));
    assert_eq!(line_col("", 0), (1, 1));
}

/// The line index gives, for every offset (inside characters, on newlines, past the end),
/// what counting from the start of the text gives.
#[test]
fn line_col_agrees_with_counting_from_the_start() {
    let text = "a = 1\n\n[x]\né = \"\u{1F600}\"\n\nlast";
    for offset in 0..=text.len() + 2 {
        let before = &text[..text.floor_char_boundary(offset)];
        let line = before.matches('\n').count() + 1;
        let column = before[before.rfind('\n').map_or(0, |i| i + 1)..]
            .chars()
            .count()
            + 1;
        assert_eq!(line_col(text, offset), (line, column), "offset {offset}");
    }
}
