//! The configuration shared by the responder's tests (the handler table, the loopback socket
//! tests and the netns end-to-end test), served on the lab's server addresses.

use crate::{SERVER_V4, SERVER_V6};

/// Length of the text of `big.example.com` TXT: its response is over 512 bytes, the most a
/// client without EDNS accepts, and under the 1232 the server advertises.
pub const BIG_TXT_LEN: usize = 700;
/// Length of the text of `huge.example.com` TXT: its response is over 1232 bytes, so it is
/// truncated over UDP even for a client offering 4096.
pub const HUGE_TXT_LEN: usize = 1500;

/// The configuration shared by the responder's tests (the handler table, the loopback socket
/// tests and the netns end-to-end test): one name for every case the responder treats
/// differently (static records beside GSLB names: all.example.com's TXT and MX, the GSLB apex
/// example.org's MX and TXT), served on the lab's server addresses. The lab's IPv4 client (192.0.2.10) is
/// in view "host" (longest prefix over "wide"), its IPv6 client in no view (the default view).
pub fn responder_config() -> String {
    let big = "b".repeat(BIG_TXT_LEN);
    let huge = "h".repeat(HUGE_TXT_LEN);
    format!(
        r#"
[server]
listen = ["{SERVER_V4}", "{SERVER_V6}"]
edns_udp_size = 1232

[[view]]
name = "wide"
prefixes = ["192.0.2.0/24"]

[[view]]
name = "host"
prefixes = ["192.0.2.10/32"]

[[zone]]
name = "example.com"
ttl = 3600
ns = ["ns1.example.com", "ns2.example.net"]
  [zone.soa]
  rname = "hostmaster.example.com"
  serial = 7
  minimum = 60

  [[zone.record]]
  name = "ns1"
  type = "A"
  value = "192.0.2.53"
  [[zone.record]]
  name = "ns1"
  type = "AAAA"
  value = "2001:db8::53"
  [[zone.record]]
  name = "@"
  type = "MX"
  value = "10 mail"
  [[zone.record]]
  name = "mail"
  type = "A"
  value = "192.0.2.25"
  ttl = 300
  [[zone.record]]
  name = "txt"
  type = "TXT"
  value = "hello"
  [[zone.record]]
  name = "big"
  type = "TXT"
  value = "{big}"
  [[zone.record]]
  name = "huge"
  type = "TXT"
  value = "{huge}"
  [[zone.record]]
  name = "_sip._tcp"
  type = "SRV"
  value = "10 60 5060 sip"
  [[zone.record]]
  name = "sip"
  type = "A"
  value = "192.0.2.60"
  [[zone.record]]
  name = "host.dept"
  type = "A"
  value = "192.0.2.61"
  [[zone.record]]
  name = "host.dept"
  type = "AAAA"
  value = "2001:db8::61"
  [[zone.record]]
  name = "alias"
  type = "CNAME"
  value = "www"
  [[zone.record]]
  name = "chain"
  type = "CNAME"
  value = "alias"
  [[zone.record]]
  name = "to-org"
  type = "CNAME"
  value = "www.example.org."
  [[zone.record]]
  name = "cdn"
  type = "CNAME"
  value = "edge.cdn.example.net."
  [[zone.record]]
  name = "dangling"
  type = "CNAME"
  value = "nowhere"
  [[zone.record]]
  name = "loop1"
  type = "CNAME"
  value = "loop2"
  [[zone.record]]
  name = "loop2"
  type = "CNAME"
  value = "loop1"
  [[zone.record]]
  name = "into-lab"
  type = "CNAME"
  value = "host.lab"
  [[zone.record]]
  name = "lab"
  type = "NS"
  value = "ns.lab"
  [[zone.record]]
  name = "ns.lab"
  type = "A"
  value = "192.0.2.70"
  # The other types (issue 29), in their presentation forms and RFC 3597's.
  [[zone.record]]
  name = "@"
  type = "CAA"
  value = '0 issue "letsencrypt.org"'
  [[zone.record]]
  name = "ptr"
  type = "PTR"
  value = "host.dept"
  # Wildcards (RFC 4592 §2.2.1's example, under wild.example.com): synthesised at any name
  # below wild.example.com but host, and below it; a wildcard CNAME.
  [[zone.record]]
  name = "*.wild"
  type = "TXT"
  value = "this is a wildcard"
  [[zone.record]]
  name = "*.wild"
  type = "MX"
  value = "10 host.wild"
  [[zone.record]]
  name = "host.wild"
  type = "A"
  value = "192.0.2.61"
  [[zone.record]]
  name = "_ssh._tcp.host.wild"
  type = "SRV"
  value = "0 0 22 host.wild"
  [[zone.record]]
  name = "*.cw"
  type = "CNAME"
  value = "host.wild"
  # Beside the wildcard GSLB domain *.gw.example.com: its zone's other types.
  [[zone.record]]
  name = "*.gw"
  type = "TXT"
  value = "gslb wildcard"
  [[zone.record]]
  name = "naptr"
  type = "NAPTR"
  value = '100 10 "S" "SIP+D2U" "" _sip._udp'
  [[zone.record]]
  name = "svc"
  type = "SVCB"
  value = "1 svc.example.net. alpn=h2 port=8443"
  [[zone.record]]
  name = "_443._tcp.host.dept"
  type = "TLSA"
  value = "3 1 1 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
  [[zone.record]]
  name = "host.dept"
  type = "SSHFP"
  value = "4 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
  [[zone.record]]
  name = "lab"
  type = "DS"
  value = "12345 13 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
  [[zone.record]]
  name = "unknown"
  type = "TYPE65534"
  value = '\# 4 0a000001'
  # Beside the GSLB domain all.example.com: its other types are static.
  [[zone.record]]
  name = "all"
  type = "TXT"
  value = "v=spf1 -all"
  [[zone.record]]
  name = "all"
  type = "MX"
  value = "10 mail"

[[zone]]
name = "example.org"
ttl = 30
ns = ["ns1.example.com"]
  [zone.soa]
  rname = "hostmaster.example.org"
  minimum = 300

  [[zone.record]]
  name = "www"
  type = "A"
  value = "192.0.2.90"
  # Beside the apex GSLB domain example.org (and its SOA and NS).
  [[zone.record]]
  name = "@"
  type = "MX"
  value = "10 mail.example.com."
  [[zone.record]]
  name = "@"
  type = "TXT"
  value = "org"
  [[zone.record]]
  name = "@"
  type = "HTTPS"
  value = "1 . alpn=h2"

[[site]]
name = "dc"
ip = "198.51.100.1"

[[service]]
name = "web-1"
ip = "198.51.100.10"
site = "dc"
[[service]]
name = "web-2"
ip = "198.51.100.11"
site = "dc"
[[service]]
name = "web-1-v6"
ip = "2001:db8:100::10"
site = "dc"
[[service]]
name = "web-2-v6"
ip = "2001:db8:100::11"
site = "dc"
[[service]]
name = "wide-web"
ip = "192.0.2.81"
site = "dc"
[[service]]
name = "host-web"
ip = "192.0.2.80"
site = "dc"
[[service]]
name = "host-web-v6"
ip = "2001:db8::80"
site = "dc"
{apps}
# One address per answer, rotating; per-view services ("wide" has no IPv6 service, so its
# AAAA answer is the default view's).
[[gslb_domain]]
name = "www.example.com"
ttl = 30
answer = "rotate"
services = ["web-1", "web-2", "web-1-v6", "web-2-v6"]
  [[gslb_domain.view]]
  view = "wide"
  services = ["wide-web"]
  [[gslb_domain.view]]
  view = "host"
  services = ["host-web", "host-web-v6"]

# Every address at once; no IPv6 service, so AAAA is NODATA.
[[gslb_domain]]
name = "all.example.com"
ttl = 20
answer = "all"
services = ["app-1", "app-2", "app-3", "app-4", "app-5", "app-6", "app-7", "app-8"]

# A wildcard GSLB domain: every name below gw.example.com answered from its services, the
# owner the name asked.
[[gslb_domain]]
name = "*.gw.example.com"
ttl = 40
answer = "all"
services = ["app-3", "app-4"]
  [[gslb_domain.view]]
  view = "host"
  services = ["host-web"]

# A CNAME domain: the name of its service (its address monitored), followed into the zone.
[[service]]
name = "dept-host"
ip = "192.0.2.62"
site = "dc"
cname = "host.dept.example.com"
[[gslb_domain]]
name = "go.example.com"
record_type = "CNAME"
ttl = 25
services = ["dept-host"]

# A GSLB apex: A from its services, SOA, NS, MX and TXT from the zone.
[[gslb_domain]]
name = "example.org"
ttl = 30
answer = "all"
services = ["app-1", "app-2"]
"#,
        apps = (1..=8)
            .map(|i| format!(
                "[[service]]\nname = \"app-{i}\"\nip = \"203.0.113.{}\"\nsite = \"dc\"\n",
                20 + i
            ))
            .collect::<String>(),
    )
}

/// A small file of the lib's unit tests (the compiler's, the responder's): gslbd on
/// 192.0.2.53; zone example.com with `zone_extra` (its records) after its SOA; site "eu" with
/// services "a" (192.0.2.10) and "b" (192.0.2.20); www.example.com over both, with
/// `domain_extra` (its method, TTL, ...) after its services.
pub fn two_services_config(zone_extra: &str, domain_extra: &str) -> String {
    format!(
        r#"
[server]
listen = ["192.0.2.53"]
[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"
{zone_extra}
[[site]]
name = "eu"
ip = "192.0.2.1"
[[service]]
name = "a"
ip = "192.0.2.10"
site = "eu"
[[service]]
name = "b"
ip = "192.0.2.20"
site = "eu"
[[gslb_domain]]
name = "www.example.com"
services = ["a", "b"]
{domain_extra}
"#
    )
}
