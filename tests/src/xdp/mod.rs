//! The XDP tests' kit, shared by gslb-user's XDP tests (`tests/it/common` re-exports it), the
//! XDP benchmark and the `xdp` fuzz target (fuzz/): the test configuration, Ethernet frames
//! carrying DNS queries ([`frame`]), and the differential check of a fast-path reply against
//! the responder's answer to the same query ([`check`]).
//!
//! The builders compute their own checksums (RFC 1071) rather than borrow the fast path's or
//! etherparse's, so that a test checking a reply with etherparse checks it against a third
//! implementation.

pub mod check;
pub mod frame;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub use check::{check_reply, ecs_options, opt_rdata, opt_record};
pub use frame::*;

/// XDP actions as the program returns them.
pub const XDP_PASS: u32 = 2;
pub const XDP_TX: u32 = 3;

// ---- The test configuration ----

pub const SERVER_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 53);
pub const SERVER_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x53);
/// Clients in no view: they get the default view's answers.
pub const CLIENT_V4: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 7);
pub const CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 7);
/// Clients in view "v1".
pub const V1_CLIENT_V4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
pub const V1_CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 7);

/// The test server ([`SERVER_V4`] or [`SERVER_V6`]) of `addr`'s family.
pub fn server_of(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(_) => IpAddr::V4(SERVER_V4),
        IpAddr::V6(_) => IpAddr::V6(SERVER_V6),
    }
}

pub const CLIENT_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
pub const SERVER_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];
pub const CLIENT_PORT: u16 = 40_000;
pub const EDNS_UDP_SIZE: u16 = 1232;

pub const WWW: &str = "www.example.com";
pub const WWW_TTL: u32 = 300;
pub const WWW_A: [&str; 2] = ["192.0.2.10", "192.0.2.11"];
pub const WWW_AAAA: [&str; 2] = ["2001:db8:10::10", "2001:db8:10::11"];
pub const WWW_V1_A: [&str; 2] = ["192.0.2.20", "192.0.2.21"];
pub const WWW_V1_AAAA: [&str; 2] = ["2001:db8:20::20", "2001:db8:20::21"];

pub const ALL: &str = "all.example.com";
pub const ALL_TTL: u32 = 60;
pub const ALL_A: [&str; 3] = ["192.0.2.31", "192.0.2.32", "192.0.2.33"];
pub const ALL_AAAA: [&str; 2] = ["2001:db8:30::1", "2001:db8:30::2"];

pub const V1_ONLY: &str = "v1only.example.com";
/// Two addresses an answer, a window that moves: the program leaves it to the responder.
pub const WINDOW: &str = "window.example.com";
/// Ten IPv4 services, one an answer: more than an answer set holds, so the responder's; in
/// AAAA, its one IPv6 service, which the program answers.
pub const MANY: &str = "many.example.com";

/// A CNAME domain the fast path answers: to edge.example.com with its addresses, to view v1
/// o.cdn.example.net alone; CNAMES (two names in turn) and CHASE (a GSLB target) it passes.
pub const CNAME: &str = "cname.example.com";
pub const CNAME_TTL: u32 = 120;
pub const CNAMES: &str = "cnames.example.com";
pub const CHASE: &str = "chase.example.com";
/// A wildcard GSLB domain the fast path answers for every name one label below `gw.example.com`
/// (nothing else is below it).
pub const WILD: &str = "*.gw.example.com";
pub const WILD_TTL: u32 = 90;
/// A wildcard with a static name beside it below its parent: left to the responder.
pub const WILD_BESIDE: &str = "*.beside.example.com";
/// A wildcard CNAME domain: the fast path gives the CNAME alone (view v1), and passes the one
/// whose target's addresses follow it (the default view's).
pub const WILD_CNAME: &str = "*.wc.example.com";

/// Labels of 63 and 62 bytes: 1 + 63 + 1 + 62 + 1 = 128 wire bytes, exactly `QNAME_MAX`.
pub fn longest_name() -> String {
    format!("{}.{}", "a".repeat(63), "b".repeat(62))
}
pub const LONGEST_A: &str = "192.0.2.40";

pub const CONFIG: &str = r#"
[server]
listen = ["192.0.2.53", "2001:db8::53"]
dns_port = 53
edns_udp_size = 1232

[[view]]
name = "v1"
prefixes = ["198.51.100.0/24", "2001:db8:1::/48"]

[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"
  # Beside the GSLB domain all.example.com: the fast path answers its A and AAAA, and passes
  # the other types to the responder.
  [[zone.record]]
  name = "all"
  type = "TXT"
  value = "v=spf1 -all"
  # The static target of the CNAME domain cname.example.com: its addresses follow the CNAME
  # in the answer (the fast path's too).
  [[zone.record]]
  name = "edge"
  type = "A"
  value = "192.0.2.80"
  [[zone.record]]
  name = "edge"
  type = "A"
  value = "192.0.2.81"
  [[zone.record]]
  name = "edge"
  type = "AAAA"
  value = "2001:db8::80"
  # The wildcard *.gw.example.com's TXT beside its GSLB answers.
  [[zone.record]]
  name = "*.gw"
  type = "TXT"
  value = "wildcard"
  # A name beside the wildcard *.beside.example.com: the fast path leaves that wildcard to
  # the responder.
  [[zone.record]]
  name = "static.beside"
  type = "TXT"
  value = "beside"

# A GSLB apex beside its zone's SOA, NS, MX and TXT.
[[zone]]
name = "example.org"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.org"
  [[zone.record]]
  name = "@"
  type = "MX"
  value = "10 mail.example.net."
  [[zone.record]]
  name = "@"
  type = "TXT"
  value = "org"

[[zone]]
name = "LONGEST_ZONE"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

[[site]]
name = "s"
ip = "192.0.2.1"

[[service]]
name = "www-a1"
ip = "192.0.2.10"
site = "s"
[[service]]
name = "www-a2"
ip = "192.0.2.11"
site = "s"
[[service]]
name = "www-6a"
ip = "2001:db8:10::10"
site = "s"
[[service]]
name = "www-6b"
ip = "2001:db8:10::11"
site = "s"
[[service]]
name = "v1-a1"
ip = "192.0.2.20"
site = "s"
[[service]]
name = "v1-a2"
ip = "192.0.2.21"
site = "s"
[[service]]
name = "v1-6a"
ip = "2001:db8:20::20"
site = "s"
[[service]]
name = "v1-6b"
ip = "2001:db8:20::21"
site = "s"
[[service]]
name = "all-1"
ip = "192.0.2.31"
site = "s"
[[service]]
name = "all-2"
ip = "192.0.2.32"
site = "s"
[[service]]
name = "all-3"
ip = "192.0.2.33"
site = "s"
[[service]]
name = "all-6a"
ip = "2001:db8:30::1"
site = "s"
[[service]]
name = "all-6b"
ip = "2001:db8:30::2"
site = "s"
[[service]]
name = "longest"
ip = "LONGEST_A"
site = "s"

[[gslb_domain]]
name = "www.example.com"
ttl = 300
answer = "rotate"
services = ["www-a1", "www-a2", "www-6a", "www-6b"]
[[gslb_domain.view]]
view = "v1"
services = ["v1-a1", "v1-a2", "v1-6a", "v1-6b"]

[[gslb_domain]]
name = "all.example.com"
ttl = 60
answer = "all"
services = ["all-1", "all-2", "all-3", "all-6a", "all-6b"]

[[gslb_domain]]
name = "example.org"
ttl = 60
answer = "all"
services = ["all-1", "all-6a"]

[[gslb_domain]]
name = "window.example.com"
max_answers = 2
services = ["all-1", "all-2", "all-3", "all-6a", "all-6b"]

[[service]]
name = "many-0"
ip = "192.0.2.60"
site = "s"
[[service]]
name = "many-1"
ip = "192.0.2.61"
site = "s"
[[service]]
name = "many-2"
ip = "192.0.2.62"
site = "s"
[[service]]
name = "many-3"
ip = "192.0.2.63"
site = "s"
[[service]]
name = "many-4"
ip = "192.0.2.64"
site = "s"
[[service]]
name = "many-5"
ip = "192.0.2.65"
site = "s"
[[service]]
name = "many-6"
ip = "192.0.2.66"
site = "s"
[[service]]
name = "many-7"
ip = "192.0.2.67"
site = "s"
[[service]]
name = "many-8"
ip = "192.0.2.68"
site = "s"
[[service]]
name = "many-9"
ip = "192.0.2.69"
site = "s"
[[gslb_domain]]
name = "many.example.com"
services = ["many-0", "many-1", "many-2", "many-3", "many-4", "many-5", "many-6", "many-7", "many-8", "many-9", "all-6a"]

# Answers for view v1 only in A: a default-view client has no A answer here.
[[service]]
name = "v1only-a"
ip = "192.0.2.50"
site = "s"
[[service]]
name = "v1only-6"
ip = "2001:db8:50::50"
site = "s"
[[gslb_domain]]
name = "v1only.example.com"
services = ["v1only-6"]
[[gslb_domain.view]]
view = "v1"
services = ["v1only-a"]

# CNAME domains: cname.example.com answers edge.example.com (ours: its addresses follow) and,
# to view v1, o.cdn.example.net (not ours: the CNAME alone, an odd number of bytes); the fast
# path answers both. cnames.example.com hands two names out in turn, and chase.example.com's
# target is a GSLB domain: the responder answers those.
[[service]]
name = "cn-edge"
ip = "192.0.2.70"
site = "s"
cname = "edge.example.com"
[[service]]
name = "cn-cdn"
ip = "2001:db8:70::70"
site = "s"
cname = "o.cdn.example.net"
[[service]]
name = "cn-www"
ip = "192.0.2.71"
site = "s"
cname = "www.example.com"
[[gslb_domain]]
name = "cname.example.com"
record_type = "CNAME"
ttl = 120
services = ["cn-edge"]
[[gslb_domain.view]]
view = "v1"
services = ["cn-cdn"]
[[gslb_domain]]
name = "cnames.example.com"
record_type = "CNAME"
services = ["cn-edge", "cn-cdn"]
[[gslb_domain]]
name = "chase.example.com"
record_type = "CNAME"
services = ["cn-www"]

# Wildcards (RFC 4592).
[[gslb_domain]]
name = "*.gw.example.com"
ttl = 90
services = ["www-a1", "www-6a"]
  [[gslb_domain.view]]
  view = "v1"
  services = ["v1-a1", "v1-6a"]
[[gslb_domain]]
name = "*.beside.example.com"
services = ["www-a2", "www-6b"]
[[gslb_domain]]
name = "*.wc.example.com"
record_type = "CNAME"
ttl = 120
services = ["cn-edge"]
  [[gslb_domain.view]]
  view = "v1"
  services = ["cn-cdn"]
"#;

/// [`CONFIG`] plus the longest name the fast path answers (in a zone of its own), to probe the
/// boundary of its key.
pub fn config_text() -> String {
    let name = longest_name();
    let zone = name.split_once('.').expect("two labels").1;
    let text = CONFIG
        .replace("LONGEST_ZONE", zone)
        .replace("LONGEST_A", LONGEST_A);
    format!("{text}\n[[gslb_domain]]\nname = \"{name}\"\nservices = [\"longest\"]\n")
}
