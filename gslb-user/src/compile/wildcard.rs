//! Stage 0, with the spec: which wildcard GSLB domains the fast path answers below them.
//!
//! A wildcard `*.P` answers a query for a name below P that does not exist, when P is that
//! name's closest encloser (RFC 4592 §3.3.1). The program knows only its own entries: on a name
//! none of them answers, it looks the name after the first label up as a wildcard's parent
//! (`gslb_common::NAME_WILDCARD`). That gives the responder's answer exactly when nothing but
//! the wildcard exists below P: then no name one label below P exists (so P is their closest
//! encloser), except `*.P` itself, which the wildcard answers as its own name. So a wildcard is
//! keyed by its parent only when no static owner or other GSLB domain is below P, at any depth
//! (which also rules out empty non-terminals). Zones do not nest (`model::Zone`), so no other
//! zone's names are below P, and no GSLB domain is at or below a delegation (refused at load),
//! so no cut is above P. Names two labels or more below P are left to the responder.

use std::collections::HashMap;

use crate::model::{Model, in_zone};

/// By domain index: the domain is a wildcard whose answers the fast path gives for every name
/// one label below its parent.
pub(super) fn fast(model: &Model) -> Vec<bool> {
    // Parent → (domain index, still fast), of every wildcard domain in a zone.
    let mut parents: HashMap<&str, (usize, bool)> = HashMap::new();
    for (d, domain) in model.domains.iter().enumerate() {
        let Some(parent) = domain.name.strip_prefix("*.") else {
            continue;
        };
        if model.zones.iter().any(|z| in_zone(&domain.name, &z.name)) {
            parents.insert(parent, (d, true));
        }
    }
    let mut fast = vec![false; model.domains.len()];
    if parents.is_empty() {
        return fast;
    }
    // A name below a parent, other than its wildcard, makes the parent's wildcard slow: walked
    // up label by label, once per name (a zone file may hold a million owners).
    let mut below = |name: &str| {
        let mut n = name;
        while let Some((_, up)) = n.split_once('.') {
            if let Some((d, ok)) = parents.get_mut(up)
                && model.domains[*d].name != name
            {
                *ok = false;
            }
            n = up;
        }
    };
    for zone in &model.zones {
        for record in &zone.records {
            below(&record.name);
        }
    }
    for domain in &model.domains {
        below(&domain.name);
    }
    for (d, ok) in parents.into_values() {
        fast[d] = ok;
    }
    fast
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::compile::Snapshot;
    use crate::config::Config;

    /// Whether each GSLB domain named in `wildcards` is answered below its parent
    /// (`DomainEntry::wildcard`), with `records` in the zone and `domains` beside them.
    fn fast(records: &str, domains: &str, wildcards: &[&str]) -> Vec<bool> {
        let text = format!(
            r#"
            [server]
            listen = ["192.0.2.1"]
            [[zone]]
            name = "example.com"
            ns = ["ns.example.net"]
            soa.rname = "hostmaster.example.com"
            {records}
            [[site]]
            name = "s"
            ip = "192.0.2.200"
            [[service]]
            name = "a"
            ip = "192.0.2.10"
            site = "s"
            [[gslb_domain]]
            name = "*.gw.example.com"
            services = ["a"]
            {domains}
            "#
        );
        let config = Config::parse(&text, Path::new("test.toml")).unwrap();
        let snapshot = Snapshot::from_config(&config);
        wildcards
            .iter()
            .map(|w| {
                let entries: Vec<bool> = snapshot
                    .domains
                    .iter()
                    .filter(|d| d.name == *w)
                    .map(|d| d.wildcard)
                    .collect();
                assert!(!entries.is_empty(), "{w}: no entry");
                entries.iter().all(|f| *f)
            })
            .collect()
    }

    fn record(name: &str) -> String {
        format!("[[zone.record]]\nname = \"{name}\"\ntype = \"TXT\"\nvalue = \"x\"\n")
    }

    #[test]
    fn a_wildcard_is_answered_below_its_parent_only_when_nothing_else_is_below_it() {
        let gw = "*.gw.example.com";
        let other = "[[gslb_domain]]\nname = \"other.gw.example.com\"\nservices = [\"a\"]\n";
        let apex = "[[gslb_domain]]\nname = \"*.example.com\"\nservices = [\"a\"]\n";
        // (case, zone records, GSLB domains, the wildcards asked about, whether each is fast)
        type Row<'a> = (&'a str, String, &'a str, Vec<&'a str>, Vec<bool>);
        let table: Vec<Row<'_>> = vec![
            ("alone", String::new(), "", vec![gw], vec![true]),
            // Its own static records (a wildcard TXT) and names elsewhere change nothing.
            ("own TXT", record("*.gw"), "", vec![gw], vec![true]),
            ("elsewhere", record("www"), "", vec![gw], vec![true]),
            // A name one label below the parent is not the wildcard's.
            ("static sibling", record("x.gw"), "", vec![gw], vec![false]),
            // A deeper one makes an empty non-terminal one label below.
            ("deeper", record("a.b.gw"), "", vec![gw], vec![false]),
            ("GSLB sibling", String::new(), other, vec![gw], vec![false]),
            // A wildcard at the apex has gw (an empty non-terminal) beside it; gw's is alone.
            (
                "apex",
                String::new(),
                apex,
                vec![gw, "*.example.com"],
                vec![true, false],
            ),
        ];
        for (case, records, domains, wildcards, want) in table {
            assert_eq!(fast(&records, domains, &wildcards), want, "{case}");
        }
    }
}
