//! The configurations the property runs on (the rich one, the split one, twins), the location
//! file they read, the RTT rows and the services' states.

/// Sites, services and topology records of both configurations. Sites by index: eu 0, us 1,
/// ap 2 (the RTT rows' columns).
pub(super) const COMMON: &str = r#"
[server]
listen = ["192.0.2.53", "2001:db8::53"]

[[location]]
from = "10.1.2.128"
to = "10.1.2.191"
location = "Asia.HK"
[[location]]
from = "2001:db8:8000::1"
to = "2001:db8:8000::ff"
location = "Asia.JP.Tokyo"
[[location]]
from = "198.51.100.0"
to = "198.51.100.127"
location = "Europe.UK.England.London"

[[zone]]
name = "example.com"
ns = ["ns1.example.net"]
soa.rname = "hostmaster.example.com"

# Load monitors (never run here: the test hands the compiler the states), so that
# leastconnection and the spillover limits have a source, as validation asks.
[[monitor]]
name = "conns"
type = "load"
format = "prometheus"
metric = "connections"
[[monitor]]
name = "kbps"
type = "load"
format = "prometheus"
metric = "kbps"
measure = "bandwidth_kbps"

[[site]]
name = "eu"
ip = "198.51.100.1"
[[site]]
name = "us"
ip = "203.0.113.1"
[[site]]
name = "ap"
ip = "192.0.2.1"

[[service]]
name = "eu-1"
ip = "198.51.100.10"
site = "eu"
load_monitors = ["conns", "kbps"]
location = "Europe.UK.England.London"
weight = 3
max_connections = 1000
[[service]]
name = "eu-1-alt"
ip = "198.51.100.10"
port = 8080
site = "eu"
load_monitors = ["conns", "kbps"]
location = "Europe.UK"
[[service]]
name = "eu-2"
ip = "198.51.100.11"
site = "eu"
load_monitors = ["conns", "kbps"]
location = "Europe.DE.Hesse.Frankfurt"
[[service]]
name = "eu-6"
ip = "2001:db8:e0::10"
site = "eu"
load_monitors = ["conns", "kbps"]
location = "Europe.UK.England.London"
weight = 2
[[service]]
name = "us-1"
ip = "10.9.0.10"
public_ip = "203.0.113.10"
site = "us"
load_monitors = ["conns", "kbps"]
location = "NorthAmerica.US.VA.Ashburn"
weight = 2
max_bandwidth_kbps = 500000
[[service]]
name = "us-2"
ip = "203.0.113.11"
site = "us"
load_monitors = ["conns", "kbps"]
location = "NorthAmerica.US.CA.SanJose"
weight = 5
[[service]]
name = "us-6"
ip = "2001:db8:a0::10"
site = "us"
load_monitors = ["conns", "kbps"]
location = "NorthAmerica.US.VA.Ashburn"
[[service]]
name = "bw-6"
ip = "2001:db8:a0::20"
site = "us"
load_monitors = ["conns", "kbps"]
location = "NorthAmerica.US.VA"
max_bandwidth_kbps = 1000
[[service]]
name = "ap-1"
ip = "192.0.2.100"
site = "ap"
load_monitors = ["conns", "kbps"]
location = "Asia.JP.Tokyo.Tokyo"
weight = 4
[[service]]
name = "ap-2"
ip = "192.0.2.101"
site = "ap"
load_monitors = ["conns", "kbps"]
location = "Asia.HK"
[[service]]
name = "ap-6"
ip = "2001:db8:c0::10"
site = "ap"
load_monitors = ["conns", "kbps"]
location = "Asia.JP.Tokyo"
[[service]]
name = "ap-6b"
ip = "2001:db8:c0::11"
site = "ap"
load_monitors = ["conns", "kbps"]
location = "Asia.HK"
[[service]]
name = "full-1"
ip = "198.51.100.20"
site = "eu"
load_monitors = ["conns", "kbps"]
weight = 2
max_connections = 10
[[service]]
name = "full-2"
ip = "203.0.113.20"
site = "us"
load_monitors = ["conns", "kbps"]
weight = 6
max_connections = 10

# Twins: as eu-2, ap-2, us-6 and ap-6 in everything the engine reads but the address, so that
# domains over them share decisions with domains over the originals.
[[service]]
name = "eu-2b"
ip = "198.51.100.12"
site = "eu"
load_monitors = ["conns", "kbps"]
location = "Europe.DE.Hesse.Frankfurt"
[[service]]
name = "ap-2b"
ip = "192.0.2.102"
site = "ap"
load_monitors = ["conns", "kbps"]
location = "Asia.HK"
[[service]]
name = "us-6b"
ip = "2001:db8:a0::30"
site = "us"
load_monitors = ["conns", "kbps"]
location = "NorthAmerica.US.VA.Ashburn"
[[service]]
name = "ap-6c"
ip = "2001:db8:c0::12"
site = "ap"
load_monitors = ["conns", "kbps"]
location = "Asia.JP.Tokyo"

[[topology]]
destination = "eu"
ldns = "10.0.0.0/8"
score = 100
[[topology]]
destination = "us"
ldns = "10.1.0.0/16"
score = 200
[[topology]]
destination = "ap"
ldns = "10.1.2.0/25"
score = 150
[[topology]]
destination = "ap"
ldns = "2001:db8:4000::/36"
score = 50
[[topology]]
destination = "us"
ldns = "2001:db8:4000::/40"
score = 80
[[topology]]
destination = "eu"
ldns = "Europe"
score = 10
[[topology]]
destination = "us"
ldns = "NorthAmerica.US"
score = 20
[[topology]]
destination = "ap"
ldns = "*"
score = 1
"#;

/// Every method the compiler decides per client class, and the two it leaves to the
/// responder. With DNS policies the engine decides every domain, among a view's services for
/// a client in that view.
pub(super) const RICH: &str = r#"
[[view]]
name = "corp"
prefixes = ["10.1.0.0/16", "2001:db8:4400::/40"]
[[view]]
name = "lab"
prefixes = ["10.1.2.0/24", "192.168.0.0/16", "2001:db8:4400:1::/64"]
[[view]]
name = "six"
prefixes = ["::/0"]

[[action]]
name = "prefer-hk"
preferred_locations = ["Asia.HK", "Asia.JP"]
[[action]]
name = "prefer-asia"
preferred_locations = ["Asia.JP.Tokyo", "Asia.HK"]
[[action]]
name = "prefer-uk"
preferred_locations = ["Europe.UK"]
[[action]]
name = "prefer-us"
preferred_locations = ["NorthAmerica.US.VA", "NorthAmerica"]
[[action]]
name = "prefer-de"
preferred_locations = ["Europe.DE"]

[[policy]]
name = "narrow"
expression = 'CLIENT.IP.SRC.IN_SUBNET(10.1.2.64/26)'
action = "prefer-us"
priority = 3
[[policy]]
name = "hk-net"
expression = 'CLIENT.IPV6.SRC.IN_SUBNET(2001:db8:4400::/40) && DNS.REQ.QUESTION.TYPE.EQ(AAAA)'
action = "prefer-hk"
priority = 5
[[policy]]
name = "asia"
expression = 'CLIENT.IP.SRC.MATCHES_LOCATION("Asia.*")'
action = "prefer-asia"
priority = 10
[[policy]]
name = "lab"
expression = 'CLIENT.IP.SRC.IN_SUBNET(10.0.0.0/8) && !DNS.REQ.QUESTION.TYPE.EQ(AAAA)'
action = "prefer-uk"
priority = 20
[[policy]]
name = "us-nets"
expression = 'CLIENT.IPV6.SRC.IN_SUBNET(2001:db8:4000::/36) || CLIENT.IP.SRC.IN_SUBNET(172.16.0.0/12)'
action = "prefer-us"
priority = 30
[[policy]]
name = "uk-ratio"
expression = 'CLIENT.IP.SRC.MATCHES_LOCATION("Europe.UK") && DNS.REQ.QUESTION.DOMAIN.EQ("ratio.example.com")'
action = "prefer-de"
priority = 40

[[gslb_domain]]
name = "rr.example.com"
ttl = 60
answer = "all"
services = ["eu-1", "eu-2", "us-1", "us-2", "ap-1", "eu-6", "us-6", "ap-6"]
[[gslb_domain.view]]
view = "corp"
services = ["us-1", "us-6"]

[[gslb_domain]]
name = "ratio.example.com"
ttl = 45
method = "ratio"
services = ["eu-1", "eu-2", "us-1", "us-2", "ap-1", "ap-2", "eu-6", "us-6", "ap-6"]

# max_answers: a window from the pick (ratio, hashed), and "all" over more than the cap.
[[gslb_domain]]
name = "ratio-window.example.com"
method = "ratio"
max_answers = 3
services = ["eu-1", "eu-2", "us-1", "us-2", "ap-1", "ap-2", "eu-6", "us-6", "ap-6"]

[[gslb_domain]]
name = "all-window.example.com"
answer = "all"
max_answers = 2
services = ["eu-1", "eu-2", "us-1", "us-2", "ap-1", "eu-6", "us-6", "ap-6"]
[[gslb_domain.view]]
view = "corp"
services = ["us-1", "us-6"]

[[gslb_domain]]
name = "hash-window.example.com"
method = "sourceiphash"
max_answers = 2
services = ["eu-1", "eu-2", "us-1", "ap-1", "eu-6", "us-6", "ap-6"]

[[gslb_domain]]
name = "least.example.com"
method = "leastconnection"
services = ["eu-1", "eu-2", "us-1", "ap-1", "ap-2", "eu-6", "us-6", "ap-6"]

[[gslb_domain]]
name = "near.example.com"
ttl = 20
method = "staticproximity"
alternate = "ratio"
services = ["eu-1", "eu-2", "us-1", "ap-1", "ap-2", "eu-6", "us-6", "ap-6"]

[[gslb_domain]]
name = "rtt.example.com"
ttl = 10
answer = "all"
method = "rtt"
alternate = "topology"
fallback = "globalavailability"
tolerance_ms = 20
services = ["eu-1", "us-1", "ap-1", "eu-6", "us-6", "ap-6"]
backup_ip = ["192.0.2.99", "2001:db8:99::99"]

[[gslb_domain]]
name = "topo.example.com"
method = "topology"
alternate = "staticproximity"
fallback = "roundrobin"
services = ["eu-2", "us-1", "ap-2", "eu-6", "us-6", "ap-6"]

[[gslb_domain]]
name = "ga.example.com"
method = "globalavailability"
services = ["us-2", "ap-2", "eu-1", "ap-6b", "ap-6", "eu-6"]

# Both services over their limits: the RTT domain answers instead.
[[gslb_domain]]
name = "spill.example.com"
ttl = 15
services = ["full-1", "full-2"]
backup_domain = "rtt.example.com"

# Over their limits with nowhere to spill: they answer anyway, by ratio.
[[gslb_domain]]
name = "overload.example.com"
method = "ratio"
services = ["full-1", "full-2"]

[[gslb_domain]]
name = "spill6.example.com"
method = "leastconnection"
services = ["bw-6", "us-6"]

[[gslb_domain]]
name = "down.example.com"
answer = "all"
services = ["us-2", "ap-6b"]
backup_ip = ["192.0.2.98", "192.0.2.97", "2001:db8:98::1"]

[[gslb_domain]]
name = "down2.example.com"
services = ["us-2"]

[[gslb_domain]]
name = "chain.example.com"
services = ["us-2", "ap-6b"]
backup_domain = "topo.example.com"
backup_ip = ["192.0.2.96"]

[[gslb_domain]]
name = "shared.example.com"
services = ["eu-1", "eu-1-alt", "eu-2"]

[[gslb_domain]]
name = "v4only.example.com"
method = "staticproximity"
alternate = "roundrobin"
services = ["eu-1", "us-1"]
backup_ip = ["2001:db8:97::1"]

[[gslb_domain]]
name = "hash.example.com"
method = "sourceiphash"
sourceip_mask = { mask_v4 = 24, mask_v6 = 56 }
services = ["eu-1", "eu-2", "us-1"]

[[gslb_domain]]
name = "sticky.example.com"
persistence = { mask_v4 = 24, mask_v6 = 56, timeout_s = 300 }
services = ["eu-1", "eu-2"]

[[gslb_domain]]
name = "viahash.example.com"
services = ["us-2"]
backup_domain = "hash.example.com"
"#;

/// No policies: round-robin domains by static view, the others by the engine.
pub(super) const SPLIT: &str = r#"
[[view]]
name = "corp"
prefixes = ["10.1.0.0/16", "2001:db8:4400::/40"]
[[view]]
name = "lab"
prefixes = ["10.1.2.0/24", "192.168.0.0/16"]
[[view]]
name = "six"
prefixes = ["::/0"]
[[view]]
name = "low"
prefixes = ["0.0.0.0/1"]

# Static domains: round robin over services without spillover limits (a limit would make the
# engine decide them, among the same per-view services).
[[gslb_domain]]
name = "www.example.com"
services = ["eu-2", "eu-1-alt", "ap-1", "eu-6", "ap-6"]
backup_ip = ["192.0.2.95"]
[[gslb_domain.view]]
view = "corp"
services = ["ap-2", "us-6"]
[[gslb_domain.view]]
view = "lab"
services = ["us-2"]
[[gslb_domain.view]]
view = "six"
services = ["ap-6b", "us-6"]
[[gslb_domain.view]]
view = "low"
services = ["ap-1", "ap-2"]

[[gslb_domain]]
name = "all.example.com"
ttl = 120
answer = "all"
services = ["eu-1-alt", "eu-2", "ap-1", "eu-6", "us-6"]
[[gslb_domain.view]]
view = "lab"
services = ["ap-1", "ap-2", "ap-6"]

# Round robin, two addresses an answer: the fast path leaves the window to the responder.
[[gslb_domain]]
name = "rr-window.example.com"
max_answers = 2
services = ["eu-2", "eu-1-alt", "ap-1", "eu-6", "ap-6"]
backup_ip = ["192.0.2.93", "192.0.2.92", "192.0.2.91"]
[[gslb_domain.view]]
view = "lab"
services = ["us-2"]

[[gslb_domain]]
name = "dead.example.com"
services = ["us-2"]
backup_ip = ["192.0.2.94", "2001:db8:94::1"]
[[gslb_domain.view]]
view = "corp"
services = ["ap-1"]

[[gslb_domain]]
name = "near.example.com"
method = "staticproximity"
alternate = "roundrobin"
services = ["eu-1", "eu-2", "us-1", "ap-1", "ap-2", "eu-6", "us-6", "ap-6"]

[[gslb_domain]]
name = "rtt.example.com"
method = "rtt"
alternate = "globalavailability"
tolerance_ms = 5
services = ["eu-1", "us-1", "ap-1", "eu-6", "us-6", "ap-6"]

[[gslb_domain]]
name = "topo.example.com"
answer = "all"
method = "topology"
alternate = "roundrobin"
services = ["eu-2", "us-1", "ap-2", "eu-6", "us-6", "ap-6"]

[[gslb_domain]]
name = "least.example.com"
method = "leastconnection"
services = ["eu-1", "eu-2", "us-1", "ap-1", "ap-2"]

# A service with a spillover limit: the engine decides, per-view services or not.
[[gslb_domain]]
name = "spill.example.com"
services = ["full-1", "eu-2"]
[[gslb_domain.view]]
view = "corp"
services = ["us-1"]
"#;

/// The domains [`RICH`] and [`SPLIT`] both end with. Twin domains: the same structure over twin
/// services (other addresses, TTLs and backup addresses), so that the compiler may decide them
/// once.
pub(super) const TWINS: &str = r#"
[[gslb_domain]]
name = "twin-a.example.com"
ttl = 25
method = "topology"
alternate = "staticproximity"
fallback = "ratio"
services = ["eu-2", "ap-2", "us-6", "ap-6"]
backup_ip = ["192.0.2.90"]
[[gslb_domain]]
name = "twin-b.example.com"
ttl = 35
method = "topology"
alternate = "staticproximity"
fallback = "ratio"
services = ["eu-2b", "ap-2b", "us-6b", "ap-6c"]
backup_ip = ["192.0.2.91", "2001:db8:91::1"]
[[gslb_domain]]
name = "rtt-a.example.com"
method = "rtt"
alternate = "globalavailability"
services = ["eu-2", "us-6", "ap-2"]
[[gslb_domain]]
name = "rtt-b.example.com"
ttl = 12
method = "rtt"
alternate = "globalavailability"
services = ["eu-2b", "us-6b", "ap-2b"]
"#;

/// Round-robin domains of `SPLIT` that are answered by static view, without the engine.
pub(super) const SPLIT_STATIC: [&str; 3] =
    ["www.example.com", "all.example.com", "dead.example.com"];

/// NetScaler location data: nested ranges, one not aligned to any prefix, IPv4 and IPv6.
pub(super) const CSV: &str = "\
10.0.0.0,10.255.255.255,Europe,UK,England,London,*,*
10.1.0.0,10.1.255.255,NorthAmerica,US,VA,Ashburn,*,*
10.1.2.0,10.1.2.255,Asia,JP,Tokyo,Tokyo,*,*
10.2.3.7,10.2.9.200,NorthAmerica,US,CA,SanJose,*,*
172.16.0.0,172.31.255.255,Europe,DE,Hesse,Frankfurt,*,*
100.64.0.0,100.127.255.255,Asia,HK,*,*,*,*
198.51.100.0,198.51.100.255,Europe,DE,*,*,*,*
2001:db8:4000::,2001:db8:4fff:ffff:ffff:ffff:ffff:ffff,Asia,JP,Tokyo,*,*,*
2001:db8:4400::,2001:db8:44ff:ffff:ffff:ffff:ffff:ffff,Europe,UK,*,*,*,*
2001:db8:8000::,2001:db8:8fff:ffff:ffff:ffff:ffff:ffff,NorthAmerica,US,*,*,*,*
2001:db8:8000:1::7,2001:db8:8000:3::ffff,Asia,HK,*,*,*,*
";

/// RTT rows (disjoint), milliseconds from eu, us, ap.
pub(super) const RTT_MS: [(&str, [Option<f64>; 3]); 10] = [
    ("10.0.0.0/24", [Some(10.0), Some(25.0), None]),
    ("10.1.2.0/24", [Some(80.0), Some(20.0), Some(30.0)]),
    ("10.1.3.7/32", [None, None, Some(5.0)]),
    ("10.3.0.0/16", [None, None, None]),
    ("172.16.5.0/24", [Some(1.0), Some(1.0), Some(1.0)]),
    ("198.51.100.128/25", [Some(40.0), Some(10.0), Some(70.0)]),
    ("2001:db8:4000::/48", [Some(50.0), Some(10.0), Some(40.0)]),
    ("2001:db8:4400:1::/64", [Some(5.0), None, None]),
    ("2001:db8:8000::5/128", [Some(0.1), Some(0.2), Some(0.15)]),
    ("2001:db8:8000:2::/64", [Some(30.0), Some(60.0), Some(45.0)]),
];

/// (service, down, connections, bandwidth kbit/s); the others are up with no load.
pub(super) const STATES: [(&str, bool, u64, u64); 14] = [
    ("us-2", true, 0, 0),
    ("ap-6b", true, 0, 0),
    ("eu-1", false, 10, 0),
    ("eu-2", false, 10, 0),
    ("us-1", false, 3, 100),
    ("ap-1", false, 3, 0),
    ("ap-2", false, 7, 0),
    ("us-6", false, 5, 0),
    ("full-1", false, 50, 0),
    ("full-2", false, 10, 0),
    ("bw-6", false, 0, 5000),
    ("eu-2b", false, 10, 0),
    ("ap-2b", false, 7, 0),
    ("us-6b", false, 5, 0),
];
