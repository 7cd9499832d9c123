//! A gslb configuration's zones as zone files, for NSD and Knot (`gslb_tests::peers`) to serve
//! what gslbd serves: shared by the benches that measure them (each includes it with
//! `mod zone_files;`) and by the differential test (gslb-user's tests/it includes it by path,
//! as it does `rng.rs`); not a bench itself.

use std::{fmt::Write as _, net::IpAddr, path::Path};

use gslb_user::{
    compile::Snapshot,
    config::{Config, RecordData},
};

/// `config`'s zones written into `dir` as `{zone}.zone` files; returns the zone names. The
/// GSLB names become static records of their default view's first answer (`Answer::carried`:
/// one address for a rotating domain, every address of an "all" domain up to its
/// `max_answers`; a CNAME domain's first name, once), so the answers are the same size as
/// gslb's.
pub(crate) fn write_zones(config: &Config, dir: &Path) -> Vec<String> {
    let snapshot = Snapshot::from_config(config);
    let mut names = Vec::new();
    for zone in &config.zones {
        let mut text = format!("$ORIGIN {}.\n$TTL {}\n", zone.name, zone.ttl);
        let soa = &zone.soa;
        writeln!(
            text,
            "@ SOA {}. {}. {} {} {} {} {}",
            soa.mname, soa.rname, soa.serial, soa.refresh, soa.retry, soa.expire, soa.minimum
        )
        .unwrap();
        for ns in &zone.ns {
            writeln!(text, "@ {} NS {ns}.", zone.ns_ttl).unwrap();
        }
        for r in &zone.records {
            writeln!(text, "{}. {} {}", r.name, r.ttl, record_data(&r.data)).unwrap();
        }
        for d in snapshot.domains.iter().filter(|d| zone.contains(&d.name)) {
            let Some((_, answer)) = d.answers.first() else {
                continue;
            };
            // A CNAME domain has the same name under A and AAAA: written with the first.
            if let Some(target) = answer.carried_name(|| 0) {
                if d.qtype == gslb_common::QTYPE_A {
                    writeln!(text, "{}. {} CNAME {}.", d.name, answer.ttl, target.name).unwrap();
                }
                continue;
            }
            // What the first answer carries: every address of an "all" set within
            // max_answers, or the window of the first turn.
            for addr in answer.carried(|| 0).iter() {
                let rtype = if matches!(addr, IpAddr::V4(_)) {
                    "A"
                } else {
                    "AAAA"
                };
                writeln!(text, "{}. {} {rtype} {addr}", d.name, answer.ttl).unwrap();
            }
        }
        let path = dir.join(format!("{}.zone", zone.name));
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        names.push(zone.name.clone());
    }
    names
}

/// A static record's type and data in zone file syntax.
fn record_data(data: &RecordData) -> String {
    match data {
        RecordData::A(a) => format!("A {a}"),
        RecordData::Aaaa(a) => format!("AAAA {a}"),
        RecordData::Cname(t) => format!("CNAME {t}."),
        RecordData::Txt(t) => format!(
            "TXT {}",
            t.iter()
                .map(|s| format!("\"{s}\""))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        RecordData::Mx {
            preference,
            exchange,
        } => format!("MX {preference} {exchange}."),
        RecordData::Ns(t) => format!("NS {t}."),
        RecordData::Srv {
            priority,
            weight,
            port,
            target,
        } => format!("SRV {priority} {weight} {port} {target}."),
        // RFC 3597's generic form, which NSD and Knot read for any type: the same bytes.
        RecordData::Generic { rtype, rdata } => format!(
            "TYPE{rtype} \\# {} {}",
            rdata.len(),
            rdata.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ),
    }
}
