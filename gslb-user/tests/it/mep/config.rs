//! The `[mep]` section and the `[[site]]` MEP settings (role, parent, backup_parents, mep_port,
//! key, key_file, nat):
//! what a valid file turns into, and every rule a bad one breaks, each reported at the file,
//! line and column of the value that breaks it.

use crate::common;
use crate::mep_keys;

use std::{
    net::{IpAddr, SocketAddr},
    path::Path,
    time::Duration,
};

use common::assert_refused_at_markers;
use gslb_tests::TempDir;
use gslb_user::{
    config::Config,
    mep::{PublicKey, Role, SiteKey, SiteSpec, SiteTree},
};

const SERVER: &str = "[server]\nlisten = [\"192.0.2.1\"]\nsite = \"p1\"\n";
const ZONE: &str = "[[zone]]\nname = \"example.com\"\nns = [\"ns.example.net\"]\nsoa.rname = \"hostmaster.example.com\"\n";
/// p1's private key, in the directory of the configuration ([`key_files`]).
const MEP: &str = "[mep]\nprivate_key_file = \"p1-mep.pem\"\n";

fn public(site: &str) -> PublicKey {
    PublicKey::parse(&mep_keys::key(site).public).unwrap()
}

/// p1's private key and p3's public key as files in `dir`.
fn key_files(dir: &Path) {
    mep_keys::write_private(dir, "p1");
    let pem = format!(
        "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
        mep_keys::key("p3").public
    );
    std::fs::write(dir.join("p3.pub"), pem).unwrap();
}

/// Two parents (p1 lists p2 as its backup) and p1's child c1.
fn sites() -> String {
    site("p1", "10.0.0.1", "backup_parents = [\"p2\"]\n")
        + &site("p2", "10.0.0.2", "")
        + &site("c1", "10.0.1.1", "role = \"child\"\nparent = \"p1\"\n")
}

/// A site with its public key.
fn site(name: &str, ip: &str, extra: &str) -> String {
    site_without_key(name, ip, &format!("{}{extra}", mep_keys::site_line(name)))
}

fn site_without_key(name: &str, ip: &str, extra: &str) -> String {
    format!("[[site]]\nname = \"{name}\"\nip = \"{ip}\"\n{extra}")
}

/// A self-signed certificate for `p1` (its own CA), as PEM files in `dir`.
fn tls_files(dir: &Path) {
    let certified = rcgen::generate_simple_self_signed(vec!["p1".into()]).unwrap();
    std::fs::write(dir.join("p1.pem"), certified.cert.pem()).unwrap();
    std::fs::write(dir.join("p1.key"), certified.signing_key.serialize_pem()).unwrap();
    std::fs::write(dir.join("ca.pem"), certified.cert.pem()).unwrap();
    std::fs::write(dir.join("junk.pem"), "not PEM at all\n").unwrap();
}

#[test]
fn mep_section_and_site_keys() {
    let dir = TempDir::new("mep-config-valid");
    tls_files(&dir.0);
    key_files(&dir.0);
    let file = dir.0.join("gslb.toml");
    let text = format!(
        "{SERVER}{ZONE}{MEP}heartbeat_ms = 100\ndead_after_ms = 450\n\
         [mep.tls]\ncert_file = \"p1.pem\"\nkey_file = \"{}\"\nca_file = \"ca.pem\"\n{}{}",
        dir.0.join("p1.key").display(),
        sites(),
        site_without_key(
            "p3",
            "10.0.0.3",
            "public_ip = \"203.0.113.3\"\nmep_port = 4000\nbackup_parents = []\n\
             key_file = \"p3.pub\"\nnat = true\n"
        ),
    );
    let config = Config::parse(&text, &file).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mep = config.mep.as_ref().expect("[mep]");
    assert!(mep.enabled, "enabled by default");
    assert_eq!(config.mep_enabled(), Some(mep));
    // The local site's ip and port, when listen is not written.
    assert_eq!(mep.listen, "10.0.0.1:3011".parse::<SocketAddr>().unwrap());
    let key = mep.key.as_ref().expect("private_key_file");
    assert_eq!(key.public(), public("p1"), "p1's own key, from its file");
    assert_eq!(
        key,
        &SiteKey::from_pem(mep_keys::key("p1").private_pem.as_bytes()).unwrap()
    );
    assert!(
        !format!("{mep:?}").contains(&mep_keys::key("p1").private_pem[28..60]),
        "Debug never shows the private key: {mep:?}"
    );
    assert_eq!(
        (mep.heartbeat, mep.dead_after),
        (Duration::from_millis(100), Duration::from_millis(450))
    );
    let tls = mep.tls.as_ref().expect("[mep.tls]");
    assert_eq!(
        tls.cert_file,
        dir.0.join("p1.pem"),
        "relative to the configuration file"
    );
    assert_eq!(tls.key_file, dir.0.join("p1.key"));
    assert!(tls.tls().is_ok());

    let want = SiteTree::new(vec![
        SiteSpec::parent("p1", ip("10.0.0.1"))
            .with_backups(["p2"])
            .with_key(public("p1")),
        SiteSpec::parent("p2", ip("10.0.0.2")).with_key(public("p2")),
        SiteSpec::child("c1", ip("10.0.1.1"), "p1").with_key(public("c1")),
        SiteSpec {
            connect: Some("203.0.113.3:4000".parse().unwrap()),
            nat: true,
            ..SiteSpec::parent("p3", ip("10.0.0.3"))
                .with_port(4000)
                .with_key(public("p3"))
        },
    ])
    .unwrap();
    assert_eq!(config.mep_topology().unwrap(), want);
    assert_eq!(config.site("c1").unwrap().role, Role::Child);
    assert_eq!(config.site("c1").unwrap().parent.as_deref(), Some("p1"));

    // Defaults, an explicit listen (address only, or with a port), and off.
    let parse = |mep: &str| {
        let text = format!("{SERVER}{ZONE}{mep}{}", sites());
        Config::parse(&text, &file).unwrap_or_else(|e| panic!("{e}\n{text}"))
    };
    let c = parse(MEP);
    let m = c.mep.as_ref().unwrap();
    assert_eq!(
        (m.heartbeat, m.dead_after, m.tls.is_none()),
        (Duration::from_millis(500), Duration::from_secs(2), true)
    );
    assert_eq!(
        parse(&format!("{MEP}listen = \"0.0.0.0\"\n"))
            .mep
            .unwrap()
            .listen,
        "0.0.0.0:3011".parse().unwrap()
    );
    assert_eq!(
        parse(&format!("{MEP}listen = \"[::1]:5000\"\n"))
            .mep
            .unwrap()
            .listen,
        "[::1]:5000".parse().unwrap()
    );
    let off = parse(&format!("{MEP}enabled = false\n"));
    assert!(off.mep.as_ref().is_some_and(|m| !m.enabled) && off.mep_enabled().is_none());
    // Off, the key need not be there yet.
    let off = parse("[mep]\nenabled = false\n");
    assert!(off.mep.as_ref().is_some_and(|m| m.key.is_none()));

    // Without [mep] nor MEP keys, sites are only answer locations: no topology limits (here
    // 40 parents, over MEP's 32).
    let many: String = (0..40)
        .map(|i| site_without_key(&format!("s{i}"), &format!("10.9.0.{i}"), ""))
        .collect();
    let text = format!("[server]\nlisten = [\"192.0.2.1\"]\n{ZONE}{many}");
    let c = Config::parse(&text, Path::new("test.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert!(c.mep.is_none() && c.sites.len() == 40);
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn example_is_a_two_parent_tree() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/mep.toml");
    let config = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.server.site.as_deref(), Some("paris"));
    let topology = config.mep_topology().unwrap();
    assert_eq!(
        topology
            .parents()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["paris", "frankfurt"]
    );
    assert_eq!(
        topology
            .children_of("paris")
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["lyon"]
    );
    assert_eq!(topology.site("paris").unwrap().backups, ["frankfurt"]);
    assert_eq!(
        topology.initiator("paris", "frankfurt"),
        Some("paris"),
        "the lower IP"
    );
    assert_eq!(
        topology.site("frankfurt").unwrap().mep_addr(),
        "198.51.100.1:3011".parse().unwrap()
    );
    assert_eq!(
        config.mep_enabled().unwrap().listen,
        "10.1.0.1:3011".parse().unwrap()
    );
}

/// Each case: the file, a `#<` marking the line the error must be on, the text the column
/// must point at (its first occurrence on that line), and a part of the reason.
#[test]
fn mep_rules_are_reported_at_the_value() {
    let dir = TempDir::new("mep-config-rejected");
    tls_files(&dir.0);
    key_files(&dir.0);
    let file = dir.0.join("gslb.toml");
    let with = |mep: &str, sites: &str| format!("{SERVER}{ZONE}{mep}{sites}");
    let tls = |cert: &str, key: &str, ca: &str| {
        format!(
            "{MEP}[mep.tls]\ncert_file = \"{cert}\"\nkey_file = \"{key}\"\nca_file = \"{ca}\"\n"
        )
    };
    let parents = |n: usize| -> String {
        (0..n)
            .map(|i| {
                let s = site(&format!("p{}", i + 1), &format!("10.0.0.{}", i + 1), "");
                if i == 32 {
                    s.replacen("\"\nip", "\" #<\nip", 1)
                } else {
                    s
                }
            })
            .collect()
    };
    let cases: Vec<(String, &str, &str)> = vec![
        // [mep]
        (
            format!(
                "[server]\nlisten = [\"192.0.2.1\"]\n{ZONE}{MEP}enabled = true #<\n{}",
                sites()
            ),
            "true",
            "mep: needs server.site",
        ),
        // MEP 1's one secret for every site: refused, with the way to keys.
        (
            with(&format!("{MEP}secret = \"0123456789\" #<\n"), &sites()),
            "\"0123",
            "mep: secret and secret_file (one secret shared by every site) are no longer accepted",
        ),
        (
            with("[mep]\nsecret_file = \"secret\" #<\n", &sites()),
            "\"secret\"",
            "each site now proves its name with its own key",
        ),
        (
            with("[mep] #<\nheartbeat_ms = 100\n", &sites()),
            "[mep]",
            "mep: private_key_file is missing",
        ),
        (
            with("[mep]\nprivate_key_file = \"nope/key\" #<\n", &sites()),
            "\"nope",
            "mep: private_key_file: cannot read",
        ),
        (
            with("[mep]\nprivate_key_file = \"junk.pem\" #<\n", &sites()),
            "\"junk",
            "mep: private_key_file: not a PEM private key",
        ),
        (
            // A certificate's ECDSA key is no site key.
            with("[mep]\nprivate_key_file = \"p1.key\" #<\n", &sites()),
            "\"p1.key",
            "not an Ed25519 PKCS#8 key",
        ),
        // Site keys.
        (
            with(
                MEP,
                &(site("p1", "10.0.0.1", "")
                    + &site_without_key("p2", "10.0.0.2", "").replacen("\"p2\"", "\"p2\" #<", 1)),
            ),
            "\"p2\"",
            "site \"p2\": key (or key_file) is missing",
        ),
        (
            with(
                MEP,
                &(site_without_key(
                    "p1",
                    "10.0.0.1",
                    &format!("{} #<\n", mep_keys::site_line("p2").trim_end()),
                ) + &site("p2", "10.0.0.2", "")),
            ),
            "\"",
            "site \"p1\": key is not the public key of mep.private_key_file",
        ),
        (
            with(
                MEP,
                &(site("p1", "10.0.0.1", "")
                    + &site("p2", "10.0.0.2", "key_file = \"p3.pub\" #<\n")),
            ),
            "\"p3.pub",
            "site \"p2\": key and key_file are both set",
        ),
        (
            with(
                MEP,
                &(site("p1", "10.0.0.1", "")
                    + &site_without_key("p2", "10.0.0.2", "key = \"AAAA\" #<\n")),
            ),
            "\"AAAA",
            "site \"p2\": key: ",
        ),
        (
            with(
                MEP,
                &(site("p1", "10.0.0.1", "")
                    + &site_without_key("p2", "10.0.0.2", "key_file = \"ca.pem\" #<\n")),
            ),
            "\"ca.pem",
            "site \"p2\": key_file: not a PEM public key",
        ),
        (
            with(
                MEP,
                &(site("p1", "10.0.0.1", "") + &site("p2", "10.0.0.2", "nat = 1 #<\n")),
            ),
            "1",
            "invalid type",
        ),
        (
            with(&format!("{MEP}listen = \"10.0.0.1:0\" #<\n"), &sites()),
            "\"10.0.0.1:0\"",
            "mep: listen \"10.0.0.1:0\" is not",
        ),
        (
            with(&format!("{MEP}listen = \"somewhere\" #<\n"), &sites()),
            "\"somewhere\"",
            "is not an address",
        ),
        (
            with(&format!("{MEP}heartbeat_ms = 5 #<\n"), &sites()),
            "5",
            "mep: heartbeat_ms 5 out of range 10..=60000",
        ),
        (
            with(
                &format!("{MEP}heartbeat_ms = 1000\ndead_after_ms = 1000 #<\n"),
                &sites(),
            ),
            "1000",
            "dead_after_ms (1000) must be longer than heartbeat_ms (1000)",
        ),
        (
            with(&format!("{MEP}port = 3011 #<\n"), &sites()),
            "port",
            "unknown field `port`",
        ),
        (
            with(
                &format!("{MEP}[mep.tls] #<\ncert_file = \"p1.pem\"\nca_file = \"ca.pem\"\n"),
                &sites(),
            ),
            "[mep.tls]",
            "missing field `key_file`",
        ),
        (
            with(
                &tls("p1.pem", "p1.key", "missing.pem")
                    .replace("missing.pem\"", "missing.pem\" #<"),
                &sites(),
            ),
            "\"missing",
            "tls.ca_file: cannot read",
        ),
        (
            with(
                &tls("junk.pem", "p1.key", "ca.pem").replace("junk.pem\"", "junk.pem\" #<"),
                &sites(),
            ),
            "\"junk",
            "certificate: no PEM certificate",
        ),
        (
            with(
                &tls("p1.pem", "junk.pem", "ca.pem")
                    .replace("key_file = \"junk.pem\"", "key_file = \"junk.pem\" #<"),
                &sites(),
            ),
            "\"junk",
            "private key",
        ),
        (
            with(
                &tls("p1.pem", "p1.key", "junk.pem")
                    .replace("ca_file = \"junk.pem\"", "ca_file = \"junk.pem\" #<"),
                &sites(),
            ),
            "\"junk",
            "CA: no PEM certificate",
        ),
        // [[site]] keys
        (
            with(
                MEP,
                &format!(
                    "{}{}",
                    sites(),
                    site("x", "10.0.2.1", "role = \"leaf\" #<\n")
                ),
            ),
            "\"leaf\"",
            "unknown variant `leaf`",
        ),
        (
            with(
                MEP,
                &format!("{}{}", sites(), site("x", "10.0.2.1", "mep_port = 0 #<\n")),
            ),
            "0",
            "site \"x\": mep_port 0 out of range",
        ),
        (
            with(
                MEP,
                &format!(
                    "{}{}",
                    sites(),
                    site("x", "10.0.2.1", "role = \"child\" #<\n")
                ),
            ),
            "\"child\"",
            "child \"x\" has no parent",
        ),
        (
            with(
                MEP,
                &format!(
                    "{}{}",
                    sites(),
                    site("x", "10.0.2.1", "parent = \"p1\" #<\n")
                ),
            ),
            "\"p1\"",
            "parent \"x\" has a parent of its own (a child needs role = \"child\")",
        ),
        (
            with(
                MEP,
                &format!(
                    "{}{}",
                    sites(),
                    site("x", "10.0.2.1", "role = \"child\"\nparent = \"p9\" #<\n")
                ),
            ),
            "\"p9\"",
            "child \"x\": parent \"p9\" is not defined",
        ),
        (
            with(
                MEP,
                &format!(
                    "{}{}",
                    sites(),
                    site("x", "10.0.2.1", "role = \"child\"\nparent = \"c1\" #<\n")
                ),
            ),
            "\"c1\"",
            "parent \"c1\" is not a parent",
        ),
        (
            with(
                MEP,
                &format!(
                    "{}{}",
                    sites(),
                    site(
                        "x",
                        "10.0.2.1",
                        "role = \"child\"\nparent = \"p1\"\nbackup_parents = [\"p2\"] #<\n"
                    )
                ),
            ),
            "[\"p2\"]",
            "site \"x\": only parents have backup parents",
        ),
        (
            with(
                MEP,
                &format!(
                    "{}{}",
                    site(
                        "p1",
                        "10.0.0.9",
                        "backup_parents = [\"a\", \"b\", \"c\", \"d\", \"e\", \"f\"] #<\n"
                    ),
                    ["a", "b", "c", "d", "e", "f"]
                        .iter()
                        .enumerate()
                        .map(|(i, n)| site(n, &format!("10.0.3.{i}"), ""))
                        .collect::<String>()
                ),
            ),
            "[\"a\"",
            "6 backup parents, at most 5",
        ),
        (
            with(
                MEP,
                &format!(
                    "{}{}",
                    sites(),
                    site("x", "10.0.2.1", "backup_parents = [\"p2\", \"zz\"] #<\n")
                ),
            ),
            "\"zz\"",
            "backup parent \"zz\" is not defined (add the site first)",
        ),
        (
            with(
                MEP,
                &format!(
                    "{}{}",
                    sites(),
                    site("x", "10.0.2.1", "backup_parents = [\"c1\"] #<\n")
                ),
            ),
            "\"c1\"",
            "backup parent \"c1\" is not a parent",
        ),
        (
            with(
                MEP,
                &format!(
                    "{}{}",
                    sites(),
                    site("x", "10.0.2.1", "backup_parents = [\"x\"] #<\n")
                ),
            ),
            "\"x\"]",
            "backup parent \"x\" is the site itself",
        ),
        (
            with(
                MEP,
                &format!(
                    "{}{}",
                    sites(),
                    site(
                        "x",
                        "10.0.2.1",
                        "backup_parents = [\"p2\", \"p1\", \"p2\"] #<\n"
                    )
                ),
            ),
            "\"p2\"]",
            "backup parent \"p2\" is listed twice",
        ),
        (with(MEP, &parents(33)), "\"p33\"", "33 parents, at most 32"),
        (
            with(
                MEP,
                &format!(
                    "{}{}",
                    sites(),
                    site(&"x".repeat(64), "10.0.2.1", "").replacen("\"\nip", "\" #<\nip", 1)
                ),
            ),
            "\"xxx",
            "is empty or longer than 63 bytes",
        ),
        (
            format!(
                "{SERVER}{ZONE}{}",
                site_without_key(
                    "p1",
                    "10.0.0.1",
                    &format!("{} #<\n", mep_keys::site_line("p1").trim_end())
                )
            ),
            "\"",
            "site \"p1\": key is a metric exchange setting, and there is no [mep]",
        ),
        // MEP settings without [mep] are still checked.
        (
            format!(
                "{SERVER}{ZONE}{}",
                site("p1", "10.0.0.1", "backup_parents = [\"nope\"] #<\n")
            ),
            "\"nope\"",
            "backup parent \"nope\" is not defined",
        ),
    ];
    assert_refused_at_markers(&cases, &file);
}
