//! Every configuration in the workspace's examples/ folder is valid: each file is parsed and
//! compiled as gslbd would at start, so a new example is covered by just being added there.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use gslb_common::{DEFAULT_VIEW, QTYPE_A, QTYPE_AAAA};
use gslb_user::compile::Snapshot;
use gslb_user::config::{Config, RecordData};
use gslb_user::dataplane::XdpMode;
use gslb_user::location::db::LocationDb;
use gslb_user::policy::AnswerMode;

fn examples_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    dir.canonicalize().unwrap_or(dir)
}

/// The `.toml` files in examples/, sorted.
fn examples() -> Vec<PathBuf> {
    let dir = examples_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("reading examples/").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_example_is_valid() {
    let files = examples();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for expected in [
        "cname-domain.toml",
        "demo.toml",
        "gslb-domain.toml",
        "nat-public-ip.toml",
        "static-zone.toml",
        "views.toml",
        "zone-file.toml",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "examples/{expected} is missing: {names:?}"
        );
    }

    let mut failures = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("reading an example");
        if !text.starts_with('#') {
            failures.push(format!("{}: does not start with a comment", file.display()));
        }
        match Config::load(file) {
            Ok(config) => {
                // Compiling must not panic either.
                drop(Snapshot::from_config(&config));
                // Location files are relative to where gslbd runs: the workspace root here.
                let mut sources = config.locations.clone();
                let root = examples_dir().join("..");
                for f in &mut sources.files {
                    f.path = root.join(&f.path);
                }
                if let Err(e) = LocationDb::from_sources(&sources, file) {
                    failures.push(format!("{}: location database: {e}", file.display()));
                }
            }
            Err(e) => failures.push(e.to_string()),
        }
    }
    assert!(
        failures.is_empty(),
        "invalid examples:\n{}",
        failures.join("\n")
    );
}

/// `cargo xtask demo` and the tests built on it rely on these properties of demo.toml.
#[test]
fn demo_has_what_the_demo_uses() {
    let config = Config::load(&examples_dir().join("demo.toml")).unwrap_or_else(|e| panic!("{e}"));
    let server = &config.server;
    let ips = |list: &[&str]| {
        list.iter()
            .map(|a| a.parse().unwrap())
            .collect::<Vec<IpAddr>>()
    };
    assert_eq!(server.listen, ips(&["192.0.2.53", "2001:db8::53"]));
    assert_eq!(server.dns_port, 53);
    assert_eq!(server.interface.as_deref(), Some("gslb0"));
    assert_eq!(server.xdp_mode, XdpMode::Auto);
    assert_eq!(server.pin_path, Path::new("/sys/fs/bpf/gslb-demo"));

    let zone = config.zone_of("example.com").expect("zone example.com");
    assert_eq!(zone.ns, ["ns1.example.com"]);
    let has = |name: &str, pred: &dyn Fn(&RecordData) -> bool| {
        zone.records.iter().any(|r| r.name == name && pred(&r.data))
    };
    assert!(has("ns1.example.com", &|d| matches!(d, RecordData::A(_))));
    assert!(has("txt.example.com", &|d| matches!(d, RecordData::Txt(_))));
    assert!(has("example.com", &|d| matches!(d, RecordData::Mx { .. })));
    assert!(has("alias.example.com", &|d| *d
        == RecordData::Cname("www.example.com".into())));

    let snapshot = Snapshot::from_config(&config);
    let answers = |name: &str, qtype: u16| {
        snapshot
            .domains
            .iter()
            .find(|d| d.name == name && d.qtype == qtype)
            .unwrap_or_else(|| panic!("{name} {qtype}"))
            .answers
            .clone()
    };
    let lab = config
        .views
        .iter()
        .position(|v| v.name == "lab")
        .expect("view lab") as u32
        + 1;

    // www: rotates over two addresses per family; the lab view gets other ones.
    for qtype in [QTYPE_A, QTYPE_AAAA] {
        let www = answers("www.example.com", qtype);
        let default = &www
            .iter()
            .find(|(v, _)| *v == DEFAULT_VIEW)
            .expect("default view")
            .1;
        let in_lab = &www.iter().find(|(v, _)| *v == lab).expect("lab view").1;
        assert_eq!(default.mode, AnswerMode::Rotate);
        assert_eq!(default.addrs.len(), 2, "{qtype}: {default:?}");
        assert!(
            in_lab.addrs.iter().all(|a| !default.addrs.contains(a)),
            "{www:?}"
        );
    }

    // all: eight A records in every answer, the most an answer set holds (truncation tests).
    let all = answers("all.example.com", QTYPE_A);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].0, DEFAULT_VIEW);
    assert_eq!(all[0].1.mode, AnswerMode::All);
    assert_eq!(all[0].1.addrs.len(), gslb_user::config::MAX_ADDRS);
}

/// examples/static-proximity.toml reads its location files as its comments say: the NSGEO1.0
/// file (Citrix's shape) by its header, the IP2Location file with continents derived from the
/// countries and its "-" rows skipped.
#[test]
fn static_proximity_reads_each_file_in_its_format() {
    use gslb_user::location::netscaler::FileFormat;
    let file = examples_dir().join("static-proximity.toml");
    let config = Config::load(&file).unwrap_or_else(|e| panic!("{e}"));
    let mut sources = config.locations.clone();
    let formats: Vec<FileFormat> = sources.files.iter().map(|f| f.format).collect();
    assert_eq!(
        formats,
        [
            FileFormat::Netscaler,
            FileFormat::Netscaler,
            FileFormat::IpCountry
        ]
    );
    for f in &mut sources.files {
        f.path = examples_dir().join("..").join(&f.path);
    }
    let db = LocationDb::from_sources(&sources, &file).unwrap_or_else(|e| panic!("{e}"));
    let at = |ip: &str| db.lookup(ip.parse().unwrap()).map(|l| l.to_string());
    assert_eq!(at("100.64.0.1").as_deref(), Some("eu.gb.england.london"));
    assert_eq!(
        at("100.65.0.1").as_deref(),
        Some("na.us.\"new york\".\"new york\"")
    );
    assert_eq!(at("100.66.0.1").as_deref(), Some("europe.gb"));
    assert_eq!(at("100.67.0.1").as_deref(), Some("\"north america\".us"));
    assert_eq!(at("100.68.0.1"), None);
    let london = db.find("100.64.0.1".parse().unwrap()).unwrap();
    let c = london.coordinates.expect("the NSGEO file's coordinates");
    assert_eq!((c.latitude, c.longitude), (51.4964, -0.1224));
    assert_eq!(db.stats().skipped, 1);
}

/// examples/rrl.toml says what it sets; its comments name these values.
#[test]
fn rrl_example_sets_what_it_says() {
    let config = Config::load(&examples_dir().join("rrl.toml")).unwrap();
    let rrl = config.rrl;
    assert!(rrl.enabled);
    assert_eq!(
        (
            rrl.rate,
            rrl.burst,
            rrl.slip,
            rrl.ipv4_prefix,
            rrl.ipv6_prefix,
            rrl.table_size
        ),
        (20, 20, 2, 24, 56, 65_536)
    );
    assert_eq!(
        rrl,
        gslb_user::responder::rrl::RrlSettings {
            enabled: true,
            ..Default::default()
        }
    );
    assert_eq!(config.server.tcp, gslb_user::server::TcpLimits::default());
    assert_eq!(config.server.ecs_allow.map(|l| l.len()), Some(2));
}

/// examples/admin.toml says where the admin endpoint listens (loopback: allow_remote is false);
/// a file without [admin] has none.
#[test]
fn admin_example_sets_what_it_says() {
    let config = Config::load(&examples_dir().join("admin.toml")).unwrap();
    let admin = config.admin.expect("[admin] is written");
    assert_eq!(admin.listen, "127.0.0.1:9153".parse().unwrap());
    assert!(!admin.allow_remote, "the default, written out");
    let plain = Config::load(&examples_dir().join("rrl.toml")).unwrap();
    assert_eq!(plain.admin, None);
}
