//! CNAME domains (`record_type = "CNAME"`, services with `cname`): what loads, into which
//! model, and every refusal at its line.

use super::*;
use crate::model::RecordType;

/// Two CNAME services (one monitored at an IPv6 address), an address service, a view.
const CNAME_SERVICES: &str = "[[service]]\nname = \"cdn-a\"\nip = \"192.0.2.10\"\nsite = \"eu\"\n\
    cname = \"edge.cdn-a.example.net.\"\n\
    [[service]]\nname = \"cdn-b\"\nip = \"2001:db8::10\"\nsite = \"eu\"\ncname = \"Edge.CDN-B.example.net\"\n\
    [[service]]\nname = \"web\"\nip = \"192.0.2.11\"\nsite = \"eu\"\n";

#[test]
fn a_cname_domain_loads_into_the_model() {
    let config = parse(&format!(
        "{SERVER}{VIEW}{ZONE}{SITE}{CNAME_SERVICES}\
         [[zone.record]]\nname = \"www\"\ntype = \"A\"\nvalue = \"192.0.2.80\"\n\
         [[gslb_domain]]\nname = \"app.example.com\"\nrecord_type = \"CNAME\"\nmethod = \"ratio\"\n\
         services = [\"cdn-a\", \"cdn-b\"]\nbackup_domain = \"*.spare.example.com\"\n\
         [[gslb_domain.view]]\nview = \"europe\"\nservices = [\"cdn-b\"]\n\
         [[gslb_domain]]\nname = \"*.spare.example.com\"\nrecord_type = \"CNAME\"\nservices = [\"cdn-a\"]\n\
         [[gslb_domain]]\nname = \"web.example.com\"\nservices = [\"web\"]\n"
    ))
    .unwrap();
    let model = config.model();
    let by_name = |n: &str| model.domains.iter().find(|d| d.name == n).unwrap();
    let app = by_name("app.example.com");
    assert_eq!(app.record_type, RecordType::Cname);
    assert_eq!(app.max_answers, 1);
    assert_eq!(app.views.len(), 1);
    assert_eq!(
        by_name("*.spare.example.com").record_type,
        RecordType::Cname
    );
    assert_eq!(by_name("web.example.com").record_type, RecordType::A);
    let cname = |n: &str| {
        model
            .services
            .iter()
            .find(|s| s.name == n)
            .unwrap()
            .cname
            .clone()
    };
    // Lower-case, without the trailing dot; the address stays what the monitors probe.
    assert_eq!(cname("cdn-a").as_deref(), Some("edge.cdn-a.example.net"));
    assert_eq!(cname("cdn-b").as_deref(), Some("edge.cdn-b.example.net"));
    assert_eq!(cname("web"), None);
    assert_eq!(config.service("cdn-b").unwrap().ip, ip("2001:db8::10"));
}

/// Each case marks the offending line with `#<`.
#[test]
fn cname_domains_are_refused_where_they_cannot_act() {
    let base = format!("{SERVER}{VIEW}{ZONE}{SITE}{CNAME_SERVICES}");
    let dom = |body: &str| {
        format!(
            "{base}[[gslb_domain]]\nname = \"app.example.com\"\nrecord_type = \"CNAME\"\n{body}\n"
        )
    };
    let cases: Vec<(String, &str)> = vec![
        (
            dom("services = [\"cdn-a\", \"web\"] #<"),
            "service \"web\" answers an address (192.0.2.11); a record_type = \"CNAME\" domain answers names: give the service a cname",
        ),
        (
            dom(
                "services = [\"cdn-a\"]\n[[gslb_domain.view]]\nview = \"europe\"\nservices = [\"web\"] #<",
            ),
            "view \"europe\": service \"web\" answers an address",
        ),
        (
            format!(
                "{base}[[gslb_domain]]\nname = \"web.example.com\"\nservices = [\"web\", \"cdn-b\"] #<\n"
            ),
            "service \"cdn-b\" answers the name edge.cdn-b.example.net (cname): bind it to a gslb_domain with record_type = \"CNAME\"",
        ),
        (
            dom("services = [\"cdn-a\"]\nbackup_ip = [\"192.0.2.99\"] #<"),
            "a CNAME domain answers names; backup_ip addresses would never be answered",
        ),
        (
            dom("services = [\"cdn-a\"]\nmax_answers = 2 #<"),
            "a CNAME answer carries one name (RFC 1034 §3.6.2); max_answers 2 cannot act",
        ),
        (
            dom("services = [\"cdn-a\", \"cdn-b\"]\nanswer = \"all\" #<"),
            "a CNAME answer carries one name (RFC 1034 §3.6.2), so answer = \"all\" cannot act",
        ),
        (
            format!(
                "{base}[[zone.record]]\nname = \"app\"\ntype = \"TXT\"\nvalue = \"v=spf1 -all\"\n\
                 [[gslb_domain]]\nname = \"app.example.com\"\nrecord_type = \"CNAME\" #<\nservices = [\"cdn-a\"]\n"
            ),
            "zone \"example.com\" has a static TXT record of this name (line 28); a CNAME must be the only record at its name",
        ),
        (
            format!(
                "{base}[[gslb_domain]]\nname = \"example.com\"\nrecord_type = \"CNAME\" #<\nservices = [\"cdn-a\"]\n"
            ),
            "a CNAME domain cannot be the apex of zone \"example.com\"",
        ),
        (
            dom(
                "services = [\"cdn-a\"]\nbackup_domain = \"web.example.com\" #<\n\
                 [[gslb_domain]]\nname = \"web.example.com\"\nservices = [\"web\"]",
            ),
            "backup_domain \"web.example.com\" answers addresses (record_type \"A\"), this domain a name (record_type \"CNAME\")",
        ),
        (
            dom(
                "services = [\"cdn-a\"]\n[[gslb_domain]]\nname = \"x.example.com\"\nrecord_type = \"MX\" #<\nservices = [\"web\"]",
            ),
            "unknown variant `MX`, expected `A` or `CNAME`",
        ),
        (
            format!(
                "{SERVER}{SITE}[[service]]\nname = \"s\"\nip = \"192.0.2.10\"\nsite = \"eu\"\ncname = \"edge\" #<\n"
            ),
            "service \"s\": cname \"edge\": a single label",
        ),
        (
            format!(
                "{SERVER}{SITE}[[service]]\nname = \"s\"\nip = \"192.0.2.10\"\nsite = \"eu\"\ncname = \"a..example.net\" #<\n"
            ),
            "empty label",
        ),
        (
            format!(
                "{SERVER}{SITE}[[service]]\nname = \"s\"\nip = \"10.0.0.1\"\npublic_ip = \"192.0.2.10\"\nsite = \"eu\"\ncname = \"edge.example.net\" #<\n"
            ),
            "a service with cname answers that name, never an address: public_ip 192.0.2.10 (line 9) would never be answered",
        ),
    ];
    assert_rejected(&cases);
}
