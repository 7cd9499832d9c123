use super::*;

/// Each case marks the offending line with `#<`; the error must point there.
#[test]
fn rejected() {
    let cases: Vec<(String, &str)> = vec![
        // ---- syntax and schema ----
        // ---- health monitors ----
        (
            format!(
                "{SERVER}{SITE}[[service]]\nname = \"web\"\nip = \"192.0.2.10\"\nsite = \"eu\"\nmonitors = [\"nope\"] #<"
            ),
            "unknown monitor \"nope\"",
        ),
        (
            format!("{SERVER}[[monitor]]\nname = \"m\"\ntype = \"tcp\"\npath = \"/\" #<"),
            "path applies to http and https monitors only",
        ),
        (
            format!("{SERVER}[[monitor]]\nname = \"m\"\ntype = \"tcp\"\nweight = 3 #<"),
            "monitor \"m\": weight only counts toward a service's monitor_threshold",
        ),
        (
            format!("{SERVER}[[monitor]]\nname = \"m\"\ntype = \"icmp\"\nport = 80 #<"),
            "port applies to tcp, http, https and dns monitors only",
        ),
        (
            format!(
                "{SERVER}[[monitor]]\nname = \"m\"\ntype = \"https\"\ninsecure = true\nca_file = \"ca.pem\" #<"
            ),
            "ca_file is not read with insecure = true",
        ),
        (
            format!("{SERVER}[[monitor]]\nname = \"m\"\ntype = \"dns\" #<"),
            "a dns monitor needs qname",
        ),
        (
            format!(
                "{SERVER}[[monitor]]\nname = \"m\"\ntype = \"http\"\nexpect_status = [200, 700] #<"
            ),
            "is not an HTTP status",
        ),
        (
            format!("{SERVER}[[monitor]]\nname = \"m\"\ntype = \"smtp\" #<"),
            "unknown variant `smtp`",
        ),
        (
            format!("{SERVER}[[monitor]]\nname = \"m\"\ntype = \"tcp\"\nfall = 0 #<"),
            "fall",
        ),
        (
            format!(
                "{SERVER}[[monitor]]\nname = \"m\"\ntype = \"tcp\"\n{SITE}[[service]]\nname = \"web\"\nip = \"192.0.2.10\"\nsite = \"eu\"\nmonitors = [\"m\"]\nmonitor_threshold = 2 #<"
            ),
            "could never be UP",
        ),
        // ---- client locations ----
        (
            format!(
                "{SERVER}[[location]]\nfrom = \"192.0.2.0\"\nto = \"nope\" #<\nlocation = \"Europe\""
            ),
            "to \"nope\" is not an IP address",
        ),
        (
            format!(
                "{SERVER}[[location]]\nfrom = \"192.0.2.9\"\nto = \"192.0.2.1\" #<\nlocation = \"Europe\""
            ),
            "is below from",
        ),
        (
            format!(
                "{SERVER}[[location]]\nfrom = \"192.0.2.0\"\nto = \"2001:db8::1\" #<\nlocation = \"Europe\""
            ),
            "different families",
        ),
        (
            format!(
                "{SERVER}[[location]]\nfrom = \"192.0.2.0\"\nto = \"192.0.2.9\"\nlocation = \"a.b.c.d.e.f.g\" #<"
            ),
            "qualifiers, at most 6",
        ),
        (
            format!("{SERVER}[locations]\nmaxmind = \"x.mmdb\" #<"),
            "unknown field `maxmind`",
        ),
        (
            format!("{SERVER}[locations]\ncontinent = \"short\" #<"),
            "unknown variant `short`",
        ),
        (
            format!("{SERVER}[[locations.file]]\npath = \"geo.csv\"\nformat = \"ip-countryy\" #<"),
            "locations.file \"geo.csv\": unknown format \"ip-countryy\"; NetScaler's formats \
             are netscaler, netscaler6, ip-country,",
        ),
        (
            format!("{SERVER}[[locations.file]] #<\nformat = \"ip-country\""),
            "missing field `path`",
        ),
        (
            format!("{SERVER}[[locations.file]]\npath = \"\" #<"),
            "locations.file \"\": path is empty",
        ),
        (
            format!("{SERVER}[[locations.file]]\npath = \"geo.csv\"\ncontext = \"custom\" #<"),
            "unknown field `context`",
        ),
        (format!("{SERVER}bogus = 1 #<"), "unknown field `bogus`"),
        (
            "[server]\nlisten = [\"192.0.2.1\"\n[view] #<\n".into(),
            "expected",
        ),
        (
            format!("{SERVER}dns_port = 1\ndns_port = 2 #<"),
            "duplicate key `dns_port`",
        ),
        (
            format!("{VIEW}{SERVER}[server] #<"),
            "duplicate key `server`",
        ),
        (
            "# comment\n\n[server] #<\ndns_port = 53".into(),
            "missing field `listen`",
        ),
        (
            format!("{SERVER}[[domain]] #<\nname = \"www.example.com\"\na = [\"192.0.2.1\"]"),
            "[[domain]] is no longer supported",
        ),
        // ---- [server] ----
        ("[server]\nlisten = [] #<\n".into(), "at least one address"),
        (
            "[server]\nlisten = [\n  \"192.0.2.1\",\n  \"192.0.2.300\", #<\n]\n".into(),
            "\"192.0.2.300\" is not an IP address",
        ),
        (
            "[server]\nlisten = [\"2001:db8::1\",\n \"2001:DB8::1\"] #<\n".into(),
            "2001:db8::1 listed twice (first on line 2)",
        ),
        (format!("{SERVER}dns_port = 0 #<"), "0 is not a port"),
        (
            format!("{SERVER}edns_udp_size = 511 #<"),
            "511 out of range 512..=4096",
        ),
        (
            format!("{SERVER}edns_udp_size = 4097 #<"),
            "4097 out of range",
        ),
        (
            format!("{SERVER}stale_after_s = -1 #<"),
            "server.stale_after_s: -1 out of range (0 = never, or 1..=86400 seconds)",
        ),
        (
            format!("{SERVER}stale_after_s = 86401 #<"),
            "86401 out of range",
        ),
        (
            format!("{SERVER}user = \"no-such-user-gslb\" #<"),
            "server.user: no user \"no-such-user-gslb\" on this system",
        ),
        (
            format!("{SERVER}user = 0 #<"),
            "invalid type: integer `0`, expected a string",
        ),
        (
            format!("{SERVER}xdp_mode = \"generic\" #<"),
            "unknown variant `generic`",
        ),
        (
            format!("{SERVER}pin_path = \"bpf/gslb\" #<"),
            "must be an absolute path",
        ),
        (
            format!("{SERVER}state_file = \"admin-state\" #<"),
            "server.state_file: \"admin-state\" must be an absolute path to a file",
        ),
        (
            format!("{SERVER}state_file = \"/var/lib/gslb/\" #<"),
            "must be an absolute path to a file",
        ),
        (
            format!("{SERVER}interface = \"eth0:1\" #<"),
            "not a valid interface name",
        ),
        // ---- [[view]] ----
        (
            format!("{SERVER}{VIEW}[[view]]\nname = \"europe\" #<\nprefixes = [\"10.0.0.0/8\"]"),
            "defined twice (first on line 4)",
        ),
        (
            format!("{SERVER}[[view]]\nname = \"default\" #<\nprefixes = [\"10.0.0.0/8\"]"),
            "reserved",
        ),
        (
            format!("{SERVER}[[view]]\nname = \"eu west\" #<\nprefixes = [\"10.0.0.0/8\"]"),
            "only letters, digits",
        ),
        (
            format!("{SERVER}[[view]]\nname = \"eu\"\nprefixes = [] #<"),
            "prefixes is empty",
        ),
        (
            format!("{SERVER}[[view]]\nname = \"eu\"\nprefixes = [\"198.51.100.0\"] #<"),
            "is not a prefix",
        ),
        (
            format!("{SERVER}[[view]]\nname = \"eu\"\nprefixes = [\"198.51.100.1/24\"] #<"),
            "view \"eu\": prefix 198.51.100.1/24 has host bits set (did you mean 198.51.100.0/24?)",
        ),
        (
            format!(
                "{SERVER}{VIEW}[[view]]\nname = \"eu2\"\nprefixes = [\n \"10.0.0.0/8\",\n \"198.51.100.0/24\"] #<"
            ),
            "already in view \"europe\" (line 5)",
        ),
        (
            format!(
                "{SERVER}[[view]]\nname = \"eu\"\nprefixes = [\"10.0.0.0/8\",\n \"10.0.0.0/8\"] #<"
            ),
            "listed twice",
        ),
        (
            format!("{SERVER}[[view]] #<\nname = \"eu\""),
            "missing field `prefixes`",
        ),
        // ---- [[zone]] ----
        (
            format!(
                "{SERVER}{ZONE}[[zone]]\nname = \"EXAMPLE.com.\" #<\nns = [\"ns.example.net\"]\nsoa.rname = \"h.example.com\""
            ),
            "zone \"example.com\" defined twice (first on line 4)",
        ),
        (
            format!(
                "{SERVER}{ZONE}[[zone]]\nname = \"sub.example.com\" #<\nns = [\"ns.example.net\"]\nsoa.rname = \"h.example.com\""
            ),
            "zone \"sub.example.com\" is inside zone \"example.com\" (line 4); nested zones are not supported",
        ),
        (
            format!(
                "{SERVER}[[zone]]\nname = \"sub.example.com\"\nns = [\"ns.example.net\"]\nsoa.rname = \"h.example.com\"\n\
                 [[zone]]\nname = \"example.com\" #<\nns = [\"ns.example.net\"]\nsoa.rname = \"h.example.com\""
            ),
            "zone \"example.com\" contains zone \"sub.example.com\" (line 4)",
        ),
        (
            format!(
                "{SERVER}[[zone]]\nname = \"exa mple.com\" #<\nns = [\"ns.example.net\"]\nsoa.rname = \"h.example.com\""
            ),
            "zone name \"exa mple.com\": invalid character ' '",
        ),
        (
            format!(
                "{SERVER}[[zone]]\nname = \".\" #<\nns = [\"ns.example.net\"]\nsoa.rname = \"h.example.com\""
            ),
            "the root is not allowed",
        ),
        (
            format!("{SERVER}{ZONE}ttl = -1 #<"),
            "zone \"example.com\": ttl -1 out of range 0..=2147483647",
        ),
        (
            format!(
                "{SERVER}[[zone]]\nname = \"example.com\"\nns = [] #<\nsoa.rname = \"h.example.com\""
            ),
            "zone \"example.com\": ns is empty",
        ),
        (
            format!(
                "{SERVER}[[zone]]\nname = \"example.com\"\nns = [\"ns1\"] #<\nsoa.rname = \"h.example.com\""
            ),
            "ns \"ns1\": a single label",
        ),
        (
            format!(
                "{SERVER}[[zone]]\nname = \"example.com\"\nns = [\"ns.example.net\",\n \"NS.example.net.\"] #<\nsoa.rname = \"h.example.com\""
            ),
            "ns ns.example.net listed twice (first on line 5)",
        ),
        (
            format!("{SERVER}[[zone]]\nname = \"example.com\" #<\nsoa.rname = \"h.example.com\""),
            "ns is missing; list the zone's name servers, or read the zone from a file",
        ),
        (
            format!("{SERVER}[[zone]]\nname = \"example.com\" #<\nns = [\"ns.example.net\"]"),
            "[zone.soa] is missing",
        ),
        (
            format!(
                "{SERVER}[[zone]]\nname = \"example.com\"\nns = [\"ns.example.net\"]\n[zone.soa] #<\nserial = 1"
            ),
            "missing field `rname`",
        ),
        (
            format!(
                "{SERVER}[[zone]]\nname = \"example.com\"\nns = [\"ns.example.net\"]\nsoa.rname = \"hostmaster@example.com\" #<"
            ),
            "write the mailbox as a name, with '.' for '@' (\"hostmaster.example.com\")",
        ),
        (
            format!("{SERVER}{ZONE}soa.mname = \"ns..example.com\" #<"),
            "soa.mname \"ns..example.com\": empty label",
        ),
        (
            format!("{SERVER}{ZONE}soa.serial = 4294967296 #<"),
            "soa.serial 4294967296 out of range 0..=4294967295",
        ),
        (
            format!("{SERVER}{ZONE}soa.minimum = -5 #<"),
            "soa.minimum -5 out of range",
        ),
        (
            format!("{SERVER}{ZONE}soa.bogus = 1 #<"),
            "unknown field `bogus`",
        ),
        (
            format!(
                "{SERVER}[[zone]]\nname = \"example.com\"\nns = [\"ns1.example.com\"] #<\nsoa.rname = \"h.example.com\""
            ),
            "name server ns1.example.com is inside a zone served here but has no address",
        ),
    ];
    assert_rejected(&cases);
}
