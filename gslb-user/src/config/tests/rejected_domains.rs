//! Rejected records, sites, services and GSLB domains (the rest is in `rejected.rs`).

use super::*;

/// Each case marks the offending line with `#<`; the error must point there.
#[test]
fn rejected_records_sites_services_domains() {
    let long_label = format!("{}.example.com", "a".repeat(64));
    let long_name = format!("{}.example.com", vec!["a".repeat(63); 4].join("."));
    // Body of a record in ZONE: its first line is line 8.
    let record = |body: &str| format!("{SERVER}{ZONE}[[zone.record]]\n{body}\n");
    // Body of a gslb_domain www.example.com: its first line is line 27.
    let dom = |body: &str| {
        format!(
            "{SERVER}{VIEW}{ZONE}{SITE}{SERVICES}[[gslb_domain]]\nname = \"www.example.com\"\n{body}\n"
        )
    };
    let svc = |body: &str| format!("{SERVER}{SITE}[[service]]\nname = \"web\"\n{body}\n");
    let nine_v6: Vec<String> = (1..=9).map(|i| format!("\"2001:db8::{i}\"")).collect();

    let cases: Vec<(String, &str)> = vec![
        // ---- [[zone.record]] ----
        (
            record("name = \"x\"\ntype = \"HINFO\" #<\nvalue = \"x\""),
            "record x.example.com: unknown type \"HINFO\" (supported: A, AAAA, CNAME, TXT, MX, NS, SRV, CAA, PTR, NAPTR, SVCB, HTTPS, TLSA, SSHFP, DS, and TYPEnnn with RFC 3597 data)",
        ),
        (
            record("name = \"x\"\ntype = \"CAA\"\nvalue = \"0 issue\" #<"),
            "record x.example.com CAA: not CAA data",
        ),
        (
            record(&format!(
                "name = \"x\" #<\ntype = \"DS\"\nvalue = \"1 13 2 {}\"",
                "00".repeat(32)
            )),
            "record x.example.com DS: a DS record belongs at a delegation",
        ),
        (
            record("name = \"x\"\ntype = \"TYPE65534\"\nvalue = \"10.0.0.1\" #<"),
            "record x.example.com TYPE65534: TYPE65534 is a type gslbd does not know: write its data as RFC 3597",
        ),
        (
            record("name = \"@\"\ntype = \"soa\" #<\nvalue = \"x\""),
            "the SOA record is [zone.soa]",
        ),
        (
            record("name = \"x\"\ntype = \"A\"\ndata = \"192.0.2.1\" #<"),
            "unknown field `data`",
        ),
        (
            format!("{SERVER}{ZONE}[[zone.record]] #<\nname = \"x\"\ntype = \"A\""),
            "missing field `value`",
        ),
        (
            record("name = \"www.example.net.\" #<\ntype = \"A\"\nvalue = \"192.0.2.1\""),
            "www.example.net is outside the zone example.com",
        ),
        (
            record("name = \"www.Example.com\" #<\ntype = \"A\"\nvalue = \"192.0.2.1\""),
            "so this is www.example.com.example.com; write \"www\" or \"www.Example.com.\"",
        ),
        (
            record("name = \"example.com\" #<\ntype = \"A\"\nvalue = \"192.0.2.1\""),
            "write \"@\"",
        ),
        (
            record("name = \"a.*\" #<\ntype = \"A\"\nvalue = \"192.0.2.1\""),
            "'*' is a wildcard (RFC 4592) only as the leftmost label",
        ),
        (
            record("name = \"*\" #<\ntype = \"NS\"\nvalue = \"ns.example.net.\""),
            "record *.example.com NS: a wildcard cannot delegate",
        ),
        (
            record("name = \"www\"\ntype = \"CNAME\"\nvalue = \"*.example.com.\" #<"),
            "'*' is a wildcard (RFC 4592) only as the leftmost label of a record's owner",
        ),
        (
            record(
                "name = \"*\"\ntype = \"A\"\nvalue = \"192.0.2.1\"\n[[zone.record]]\nname = \"*\" #<\ntype = \"CNAME\"\nvalue = \"www\"",
            ),
            "a CNAME must be the only record at its name",
        ),
        (
            record(&format!(
                "name = \"{}\" #<\ntype = \"A\"\nvalue = \"192.0.2.1\"",
                "a".repeat(64)
            )),
            "is 64 bytes, at most 63",
        ),
        (
            record("name = \"x\"\ntype = \"A\"\nvalue = \"2001:db8::1\" #<"),
            "record x.example.com A: 2001:db8::1 is an IPv6 address (use type AAAA)",
        ),
        (
            record("name = \"x\"\ntype = \"AAAA\"\nvalue = \"192.0.2.1\" #<"),
            "192.0.2.1 is an IPv4 address (use type A)",
        ),
        (
            record("name = \"x\"\ntype = \"A\"\nvalue = \"192.0.2\" #<"),
            "\"192.0.2\" is not an IP address",
        ),
        (
            record("name = \"x\"\ntype = \"CNAME\"\nvalue = \".\" #<"),
            "the root is not allowed here",
        ),
        (
            record("name = \"x\"\ntype = \"CNAME\"\nvalue = \"www.example.com\" #<"),
            "\"www.example.com\": relative names are relative to the zone",
        ),
        (
            record("name = \"x\"\ntype = \"NS\"\nvalue = \"ns..example.net.\" #<"),
            "empty label",
        ),
        (
            record("name = \"@\"\ntype = \"MX\"\nvalue = \"mail.example.com.\" #<"),
            "is not \"preference exchange\"",
        ),
        (
            record("name = \"@\"\ntype = \"MX\"\nvalue = \"70000 mail\" #<"),
            "preference \"70000\" is not a number in 0..=65535",
        ),
        (
            record("name = \"_x._tcp\"\ntype = \"SRV\"\nvalue = \"1 2 sip.example.com.\" #<"),
            "is not \"priority weight port target\"",
        ),
        (
            record("name = \"_x._tcp\"\ntype = \"SRV\"\nvalue = \"1 2 http sip\" #<"),
            "port \"http\" is not a number",
        ),
        (
            record(&format!(
                "name = \"big\"\ntype = \"TXT\"\nvalue = \"{}\" #<",
                "x".repeat(65_300)
            )),
            "65300 bytes of text in 257 strings make 65557 bytes of record data",
        ),
        (
            record("name = \"x\"\ntype = \"A\"\nvalue = \"192.0.2.1\"\nttl = 2147483648 #<"),
            "record x.example.com A: ttl 2147483648 out of range",
        ),
        (
            record("name = \"@\" #<\ntype = \"NS\"\nvalue = \"ns2.example.net.\""),
            "the apex NS records are the zone's ns list",
        ),
        (
            record("name = \"@\" #<\ntype = \"CNAME\"\nvalue = \"www.example.net.\""),
            "a CNAME cannot be at the apex",
        ),
        (
            record(
                "name = \"x\"\ntype = \"A\"\nvalue = \"192.0.2.1\"\n[[zone.record]]\nname = \"x\"\ntype = \"A\"\nvalue = \"192.0.2.1\" #<",
            ),
            "record x.example.com A: listed twice (first on line 8)",
        ),
        (
            record(
                "name = \"x\"\ntype = \"A\"\nvalue = \"192.0.2.1\"\n[[zone.record]]\nname = \"x\" #<\ntype = \"CNAME\"\nvalue = \"y\"",
            ),
            "record x.example.com CNAME: a CNAME must be the only record at its name (A on line 8)",
        ),
        (
            record(
                "name = \"x\"\ntype = \"CNAME\"\nvalue = \"y\"\n[[zone.record]]\nname = \"X.example.com.\" #<\ntype = \"TXT\"\nvalue = \"t\"",
            ),
            "a CNAME must be the only record at its name (CNAME on line 8)",
        ),
        (
            record(
                "name = \"x\"\ntype = \"CNAME\"\nvalue = \"y\"\n[[zone.record]]\nname = \"x\" #<\ntype = \"CNAME\"\nvalue = \"z\"",
            ),
            "(CNAME on line 8)",
        ),
        (
            record(
                "name = \"x\"\ntype = \"A\"\nvalue = \"192.0.2.1\"\nttl = 60\n[[zone.record]]\nname = \"x\"\ntype = \"A\"\nvalue = \"192.0.2.2\"\nttl = 120 #<",
            ),
            "TTL 120 differs from TTL 60 of the x.example.com A record on line 8",
        ),
        (
            record(
                "name = \"x\"\ntype = \"TXT\"\nvalue = \"a\"\nttl = 60\n[[zone.record]]\nname = \"x\" #<\ntype = \"TXT\"\nvalue = \"b\"",
            ),
            "TTL 3600 differs from TTL 60",
        ),
        (
            record(
                "name = \"sub\"\ntype = \"NS\"\nvalue = \"ns.example.net.\"\n[[zone.record]]\nname = \"x.sub\" #<\ntype = \"TXT\"\nvalue = \"t\"",
            ),
            "x.sub.example.com is at or below the delegation of sub.example.com (NS on line 8)",
        ),
        (
            record(
                "name = \"sub\" #<\ntype = \"TXT\"\nvalue = \"t\"\n[[zone.record]]\nname = \"sub\"\ntype = \"NS\"\nvalue = \"ns.example.net.\"",
            ),
            "is at or below the delegation of sub.example.com (NS on line 12)",
        ),
        (
            record(
                "name = \"sub\"\ntype = \"NS\"\nvalue = \"ns.example.net.\"\n[[zone.record]]\nname = \"a.sub\" #<\ntype = \"NS\"\nvalue = \"ns.example.net.\"",
            ),
            "below the delegation of sub.example.com",
        ),
        (
            record("name = \"sub\"\ntype = \"NS\"\nvalue = \"ns.sub\" #<"),
            "name server ns.sub.example.com is inside a zone served here but has no address",
        ),
        // ---- [[site]] ----
        (
            format!("{SERVER}[[site]]\nname = \"eu west\" #<\nip = \"192.0.2.1\""),
            "site name \"eu west\": only letters, digits, '-', '_' and '.'",
        ),
        (
            format!("{SERVER}[[site]]\nname = \"-eu\" #<\nip = \"192.0.2.1\""),
            "starting with a letter, digit or '_'",
        ),
        (
            format!("{SERVER}{SITE}[[site]]\nname = \"eu\" #<\nip = \"192.0.2.2\""),
            "site name \"eu\": defined twice (first on line 4)",
        ),
        (
            format!("{SERVER}[[site]]\nname = \"eu\"\nip = \"eu.example.com\" #<"),
            "site \"eu\": ip \"eu.example.com\" is not an IP address",
        ),
        (
            format!("{SERVER}{SITE}[[site]]\nname = \"us\"\nip = \"192.0.2.201\" #<"),
            "site \"us\": ip 192.0.2.201 is already site \"eu\"'s (line 5)",
        ),
        (
            format!("{SERVER}{SITE}public_ip = \"2001:db8::1\" #<"),
            "site \"eu\": public_ip 2001:db8::1 is IPv6 but ip 192.0.2.201 is IPv4",
        ),
        // MEP-only settings without MEP.
        (
            format!("{SERVER}{SITE}public_ip = \"203.0.113.201\" #<"),
            "site \"eu\": public_ip is a metric exchange setting, and there is no [mep]",
        ),
        (
            format!("{SERVER}{SITE}role = \"parent\" #<"),
            "site \"eu\": role is a metric exchange setting, and there is no [mep]",
        ),
        (
            format!("{SERVER}{SITE}mep_port = 3012 #<"),
            "site \"eu\": mep_port is a metric exchange setting, and there is no [mep]",
        ),
        (
            format!("{SERVER}{SITE}region = \"eu\" #<"),
            "unknown field `region`",
        ),
        (
            format!("{SERVER}[[site]] #<\nname = \"eu\""),
            "missing field `ip`",
        ),
        // ---- [[service]] ----
        (
            svc("ip = \"192.0.2.10\"\nsite = \"asia\" #<"),
            "service \"web\": unknown site \"asia\" (defined sites: eu)",
        ),
        (
            format!("{SERVER}[[service]]\nname = \"web\"\nip = \"192.0.2.10\"\nsite = \"eu\" #<"),
            "unknown site \"eu\" (no sites are defined)",
        ),
        (
            format!("{SERVER}[[service]] #<\nname = \"web\"\nip = \"192.0.2.10\""),
            "missing field `site`",
        ),
        (
            svc("ip = \"192.0.2.10\"\nsite = \"eu\"\nport = 0 #<"),
            "service \"web\": port 0 out of range 1..=65535",
        ),
        (
            svc("ip = \"192.0.2.10\"\nsite = \"eu\"\nport = 65536 #<"),
            "port 65536 out of range",
        ),
        (
            svc("ip = \"192.0.2.10\"\nsite = \"eu\"\nweight = 0 #<"),
            "weight 0 out of range 1..=100",
        ),
        (
            svc("ip = \"192.0.2.10\"\nsite = \"eu\"\nweight = 101 #<"),
            "weight 101 out of range 1..=100",
        ),
        (
            svc("ip = \"192.0.2.10\"\nsite = \"eu\"\nlocation = \"a.b.c.d.e.f.g\" #<"),
            "service \"web\": location \"a.b.c.d.e.f.g\": 7 qualifiers, at most 6",
        ),
        (
            svc("ip = \"192.0.2.10\"\nsite = \"eu\"\nlocation = \"Europe..London\" #<"),
            "qualifier 2 is empty",
        ),
        (
            svc("ip = \"192.0.2.10\"\nsite = \"eu\"\nlocation = 'Europe.\"St. Albans' #<"),
            "unterminated quote",
        ),
        (
            svc("ip = \"10.0.0.1\"\nsite = \"eu\"\npublic_ip = \"2001:db8::1\" #<"),
            "public_ip 2001:db8::1 is IPv6 but ip 10.0.0.1 is IPv4",
        ),
        (
            svc("ip = \"10.0.0.1\"\nsite = \"eu\"\npublic_ip = \"any\" #<"),
            "public_ip \"any\" is not an IP address",
        ),
        (
            svc(
                "ip = \"10.0.0.1\"\nsite = \"eu\"\n[[service]]\nname = \"web\" #<\nip = \"10.0.0.2\"\nsite = \"eu\"",
            ),
            "service name \"web\": defined twice (first on line 7)",
        ),
        (
            svc(
                "ip = \"10.0.0.1\"\nsite = \"eu\"\n[[service]]\nname = \"web2\"\nip = \"10.0.0.1\" #<\nsite = \"eu\"",
            ),
            "service \"web2\": 10.0.0.1 port 80 is already service \"web\" (line 7)",
        ),
        (
            svc(
                "ip = \"10.0.0.1\"\nport = 443\nsite = \"eu\"\n[[service]]\nname = \"web2\"\nip = \"10.0.0.1\"\nport = 443 #<\nsite = \"eu\"",
            ),
            "10.0.0.1 port 443 is already service \"web\"",
        ),
        (
            svc("ip = \"10.0.0.1\"\nsite = \"eu\"\nprotocol = \"HTTP\" #<"),
            "unknown field `protocol`",
        ),
        // ---- [[gslb_domain]] ----
        (
            format!(
                "{SERVER}{SITE}{SERVICES}[[gslb_domain]]\nname = \"www.example.com\" #<\nservices = [\"web1\"]"
            ),
            "gslb_domain \"www.example.com\": not inside any zone (no [[zone]] is defined)",
        ),
        (
            format!(
                "{SERVER}{ZONE}{SITE}{SERVICES}[[gslb_domain]]\nname = \"www.example.org\" #<\nservices = [\"web1\"]"
            ),
            "not inside any zone (zones: example.com)",
        ),
        (
            dom(
                "services = [\"web1\"]\n[[gslb_domain]]\nname = \"WWW.example.com.\" #<\nservices = [\"web1\"]",
            ),
            "gslb_domain \"www.example.com\": defined twice (first on line 26)",
        ),
        (
            format!(
                "{SERVER}{ZONE}[[zone.record]]\nname = \"www\"\ntype = \"TXT\"\nvalue = \"t\"\n\
                 [[zone.record]]\nname = \"www\"\ntype = \"AAAA\"\nvalue = \"2001:db8::1\"\n{SITE}{SERVICES}\
                 [[gslb_domain]]\nname = \"www.example.com\" #<\nservices = [\"web1\"]"
            ),
            "zone \"example.com\" has a static AAAA record of this name (line 12); the GSLB domain answers A and AAAA at its name (other types may be static)",
        ),
        (
            format!(
                "{SERVER}{ZONE}[[zone.record]]\nname = \"www\"\ntype = \"CNAME\"\nvalue = \"web\"\n{SITE}{SERVICES}\
                 [[gslb_domain]]\nname = \"www.example.com\" #<\nservices = [\"web1\"]"
            ),
            "zone \"example.com\" has a CNAME of this name (line 8); a CNAME must be the only record at its name",
        ),
        (
            format!(
                "{SERVER}{ZONE}[[zone.record]]\nname = \"sub\"\ntype = \"NS\"\nvalue = \"ns.example.net.\"\n{SITE}{SERVICES}\
                 [[gslb_domain]]\nname = \"www.sub.example.com\" #<\nservices = [\"web1\"]"
            ),
            "at or below the delegation of sub.example.com (NS on line 8)",
        ),
        (
            format!(
                "{SERVER}{ZONE}[[gslb_domain]]\nname = \"{long_label}\" #<\nservices = [\"x\"]"
            ),
            "is 64 bytes, at most 63",
        ),
        (
            format!("{SERVER}{ZONE}[[gslb_domain]]\nname = \"{long_name}\" #<\nservices = [\"x\"]"),
            "269 bytes in wire format",
        ),
        (
            format!(
                "{SERVER}{ZONE}[[gslb_domain]]\nname = \"www.exa$mple.com\" #<\nservices = [\"x\"]"
            ),
            "gslb_domain name \"www.exa$mple.com\": invalid character '$'",
        ),
        (
            format!(
                "{SERVER}{ZONE}[[gslb_domain]]\nname = \"app.*.example.com\" #<\nservices = [\"x\"]"
            ),
            "'*' is a wildcard (RFC 4592) only as the leftmost label",
        ),
        (
            format!(
                "{SERVER}{ZONE}[[gslb_domain]]\nname = \"a..example.com\" #<\nservices = [\"x\"]"
            ),
            "empty label",
        ),
        // A label may not start with '-' (RFC 952/1123 host names; the responder's DNS names,
        // hickory's, refuse it: the fuzz target `config` found one that loaded and then
        // panicked the responder's build).
        (
            format!(
                "{SERVER}{ZONE}[[gslb_domain]]\nname = \"-www.example.com\" #<\nservices = [\"x\"]"
            ),
            "gslb_domain name \"-www.example.com\": label \"-www\" starts with '-'",
        ),
        (
            format!(
                "{SERVER}{ZONE}[[zone.record]]\nname = \"-s1\" #<\ntype = \"AAAA\"\nvalue = \"2001:db8::53\""
            ),
            "starts with '-'",
        ),
        (
            format!(
                "{SERVER}{ZONE}[[zone.record]]\nname = \"ftp\"\ntype = \"CNAME\"\nvalue = \"www.-x.example.com.\" #<"
            ),
            "starts with '-'",
        ),
        (
            format!("{SERVER}{ZONE}[[gslb_domain]] #<\nname = \"www.example.com\""),
            "missing field `services`",
        ),
        (dom("services = [] #<"), "services is empty"),
        (
            dom("services = [\"web1\", \"nope\"] #<"),
            "gslb_domain \"www.example.com\": unknown service \"nope\" (defined services: web1, web2, web6)",
        ),
        (
            dom("services = [\"web1\",\n \"web1\"] #<"),
            "service \"web1\" listed twice (first on line 27)",
        ),
        (
            dom("services = [\"web1\"]\nttl = 2147483648 #<"),
            "gslb_domain \"www.example.com\": ttl 2147483648 out of range 0..=2147483647",
        ),
        (
            dom("services = [\"web1\"]\nanswer = \"first\" #<"),
            "unknown variant `first`",
        ),
        (
            dom("services = [\"web1\"]\na = [\"192.0.2.1\"] #<"),
            "unknown field `a`",
        ),
        (
            dom("services = [\"web1\"]\ndown_response = \"backup\" #<"),
            "down_response \"backup\" needs backup_ip addresses",
        ),
        (
            dom(
                "services = [\"web1\"]\nbackup_ip = [\"192.0.2.99\"] #<\ndown_response = \"nodata\"",
            ),
            "backup_ip is never answered with down_response \"nodata\" (line 29)",
        ),
        (
            dom("services = [\"web1\"]\ndown_response = \"empty\" #<"),
            "unknown variant `empty`",
        ),
        (
            dom("services = [\"web1\"]\nbackup_ip = [\"backup.example.net\"] #<"),
            "backup_ip \"backup.example.net\" is not an IP address",
        ),
        (
            dom("services = [\"web1\"]\nbackup_ip = [\"2001:db8::99\",\n \"2001:db8:0::99\"] #<"),
            "backup_ip 2001:db8::99 listed twice (first on line 28)",
        ),
        (
            dom(&format!(
                "services = [\"web1\"]\nbackup_ip = [{},\n {}] #<",
                nine_v6[..8].join(", "),
                nine_v6[8]
            )),
            "more than 8 IPv6 backup_ip addresses",
        ),
        (
            dom(
                "services = [\"web1\"]\n[[gslb_domain.view]]\nview = \"asia\" #<\nservices = [\"web2\"]",
            ),
            "unknown view \"asia\" (defined views: europe)",
        ),
        (
            dom(
                "services = [\"web1\"]\n[[gslb_domain.view]]\nview = \"default\" #<\nservices = [\"web2\"]",
            ),
            "implicit",
        ),
        (
            dom(
                "services = [\"web1\"]\n[[gslb_domain.view]]\nview = \"europe\"\nservices = [\"web2\"]\n\
                 [[gslb_domain.view]]\nview = \"europe\" #<\nservices = [\"web6\"]",
            ),
            "view \"europe\" listed twice (first on line 29)",
        ),
        (
            dom("services = [\"web1\"]\n[[gslb_domain.view]]\nview = \"europe\"\nservices = [] #<"),
            "gslb_domain \"www.example.com\", view \"europe\": services is empty",
        ),
        (
            dom(
                "services = [\"web1\"]\n[[gslb_domain.view]]\nview = \"europe\"\nservices = [\"web9\"] #<",
            ),
            "view \"europe\": unknown service \"web9\"",
        ),
        (
            dom("services = [\"web1\"]\n[[gslb_domain.view]] #<\nview = \"europe\""),
            "missing field `services`",
        ),
    ];
    assert_rejected(&cases);
}
