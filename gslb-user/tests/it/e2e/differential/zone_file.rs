//! The zone-file differential (issue 29): examples/zones/example.com.zone with the file it
//! includes, which `nsd-checkzone` and `kzonecheck` accept, is served by gslbd
//! (`[[zone]] file`, no GSLB domain), NSD and Knot alike. Every name and type in it, and
//! what resolvers ask around them (a type a name lacks, a name below it, a name under the
//! wildcard, one under the delegation), gets gslbd's reply compared: it must be NSD's and
//! Knot's where they agree, and one of theirs where they do not (which parts of a reply they
//! differ on, and whom gslbd follows, is the main differential's list).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use gslb_tests::{Netns, Processes, TempDir, privileged, skip};
use gslb_user::config::{Config, RecordData};

use super::{Row, SERVERS, cases, peers_installed, start, udp};

const APEX: &str = "example.com";
const FILES: [&str; 2] = ["example.com.zone", "example.com.services"];

/// A type no name of the zone has: asked at every name, for NODATA.
const ABSENT_TYPE: u16 = 13; // HINFO

/// Copies the example's zone files into `dir`, where the peers and the checkers read them.
fn copy_zone_files(dir: &Path) {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/zones");
    std::fs::create_dir_all(dir).unwrap();
    for f in FILES {
        std::fs::copy(examples.join(f), dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
}

/// The questions: (name, type) for every RRset of `config`'s zone (a wildcard's asked at a
/// name it covers and at itself), every name with [`ABSENT_TYPE`], and names below.
fn questions(config: &Config) -> Vec<(String, u16)> {
    let zone = &config.zones[0];
    let mut asked = BTreeSet::new();
    asked.insert((APEX.to_owned(), 6));
    asked.insert((APEX.to_owned(), 2));
    asked.insert((format!("nowhere.{APEX}"), 1));
    for r in &zone.records {
        let rtype = r.data.rtype();
        let owner = r.name.clone();
        if let Some(parent) = owner.strip_prefix("*.") {
            asked.insert((format!("covered.{parent}"), rtype));
            asked.insert((format!("covered.{parent}"), ABSENT_TYPE));
        }
        if matches!(r.data, RecordData::Ns(_)) {
            // Below a delegation: a referral.
            asked.insert((format!("host.{owner}"), 1));
        }
        asked.insert((format!("below.{}", owner.trim_start_matches("*.")), 1));
        asked.insert((owner.clone(), ABSENT_TYPE));
        asked.insert((owner, rtype));
    }
    asked.into_iter().collect()
}

/// Runs `program args` in `dir`; its output when it fails.
fn check(dir: &Path, program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

#[test]
fn a_zone_file_is_answered_as_nsd_and_knot_answer_it() {
    if !privileged("zone-file differential") || !peers_installed("zone-file differential") {
        return;
    }
    let tmp = TempDir::new("zone-file-differential");
    let dir = &tmp.0;
    let zones = dir.join("zones");
    copy_zone_files(&zones);
    // The file is one the reference servers' own checkers accept.
    check(&zones, "nsd-checkzone", &[APEX, FILES[0]]).expect("nsd-checkzone accepts the file");
    match check(&zones, "kzonecheck", &["-o", APEX, FILES[0]]) {
        Err(why) if why.starts_with("kzonecheck: ") => {
            skip(&format!(
                "zone-file differential: {why} (`cargo xtask setup` installs knot-dnssecutils)"
            ));
            return;
        }
        checked => checked.expect("kzonecheck accepts the file"),
    }

    let ns = Netns::new("zonefile", "servers");
    let mut processes = Processes::default();
    let config_path = dir.join("gslbd.toml");
    std::fs::write(
        &config_path,
        format!(
            "[server]\nlisten = [\"127.0.0.1\"]\ndns_port = {}\nstate_file = \"{}\"\n\
             [[zone]]\nname = \"{APEX}\"\nfile = \"zones/{}\"\n",
            SERVERS[0].1,
            dir.join("admin-state").display(),
            FILES[0],
        ),
    )
    .unwrap();
    let config = Config::load(&config_path).expect("gslbd reads the zone file");
    start(&ns, &mut processes, dir, &config_path, |peer_dir| {
        copy_zone_files(peer_dir);
        vec![APEX.to_owned()]
    });

    let addr = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let asked = questions(&config);
    let rows: Vec<Row> = ns.enter(|| {
        asked
            .iter()
            .map(|(name, rtype)| Row {
                name: format!("{name} TYPE{rtype}"),
                outcomes: SERVERS.map(|(_, port)| udp(addr(port), &cases::plain(name, *rtype))),
            })
            .collect()
    });

    let mut report = String::new();
    let mut failures = Vec::new();
    for row in &rows {
        let [gslbd, nsd, knot] = &row.outcomes;
        let mark = match (gslbd == nsd, gslbd == knot) {
            (true, true) => "same",
            (true, false) => "as NSD",
            (false, true) => "as Knot",
            (false, false) => "FAIL",
        };
        report.push_str(&format!("{mark:7} {}\n", row.name));
        for ((server, _), outcome) in SERVERS.iter().zip(&row.outcomes) {
            report.push_str(&format!("  {:6} {outcome}\n", server.name()));
        }
        if mark == "FAIL" || (nsd == knot && gslbd != nsd) {
            failures.push(row.name.clone());
        }
    }
    println!("{report}");
    // Not vacuous: the file's every kind of answer was asked, and most replies agree in full.
    assert!(rows.len() >= 50, "{} questions", rows.len());
    let same = report.lines().filter(|l| l.starts_with("same")).count();
    assert!(
        same * 2 > rows.len(),
        "only {same} of {} the same",
        rows.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} questions differ from NSD and Knot (the report is above):\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}
