//! The compiled tables give every client the decision engine's answer (issue 5, "Compile").
//!
//! Two configurations are compiled with a location database (NetScaler CSV text and custom
//! `[[location]]` entries, nested, one range not aligned to prefixes, IPv4 and IPv6), RTT rows
//! for IPv4 and IPv6 LDNS prefixes, and service states (some down, some over their spillover
//! limits):
//!
//! - `rich`: DNS policies (MATCHES_LOCATION, IN_SUBNET over IPv4 and IPv6, question name and
//!   type), topology records by prefix and by location, static views, and a domain per method
//!   with alternate/fallback chains, backup domains, backup addresses and spillover. With a
//!   policy in the configuration the engine decides every domain.
//! - `split`: no policies, so round-robin domains are answered by static view while the others
//!   are decided by the engine, side by side in one snapshot.
//!
//! For random clients (seeded), most inside or at the edges of a configured range, the answer
//! the snapshot gives, looked up as the fast path does (longest prefix over `Snapshot::views`
//! giving the view and the LDNS view, none: the default view; the view's answer, else the
//! default view's; for a domain answered by RTT the answer of the outcome the LDNS view's
//! choice gives (`Snapshot::rtt_choices`) instead when it has
//! one), must mean the same as the engine's decision for that client, converted here
//! independently of `compile::decision_answer` (round-robin domains by static view: the
//! static-view rule, written here too). The privileged tests publish the snapshot into the real
//! maps and ask the XDP program (BPF_PROG_TEST_RUN) for a sample of the clients; the same again
//! after a sequence of health changes compiled incrementally and published in place.

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use common::{Answers, Expect, Frame, assert_passed, assert_reply, query, run, wire};
use gslb_common::{
    Counter, DEFAULT_VIEW, MAX_ADDRS, QTYPE_A, QTYPE_AAAA, RTT_OUTCOME_BIT, ViewValue,
};
use gslb_user::compile::{Answer, Compiler, Inputs, LdnsRtt, Snapshot};
use gslb_user::config::Config;
use gslb_user::dataplane::{Dataplane, PublishStats};
use gslb_user::location::db::LocationDb;
use gslb_user::policy::{AnswerMode, DownResponse};
use gslb_user::policy::{
    Bandwidth, Client, Decision, Engine, Fallback, Ldns, Pick, Query as EngineQuery, ServiceState,
    State,
};
use hickory_proto::rr::RecordType;
use ipnet::IpNet;
use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};

/// Clients of the property over the rich configuration, and over the split one.
const CLIENTS: usize = 100_000;
const SPLIT_CLIENTS: usize = 30_000;
const SHARED_CLIENTS: usize = 20_000;
/// Of those, clients asked through the XDP program.
const XDP_CLIENTS: usize = 2_000;
const SPLIT_XDP_CLIENTS: usize = 200;
/// Clients checked after each health change, and of those asked through XDP.
const INCREMENTAL_CLIENTS: usize = 10_000;
const INCREMENTAL_XDP_CLIENTS: usize = 100;

// ---- The world ----

/// Sites, services and topology records of both configurations. Sites by index: eu 0, us 1,
/// ap 2 (the RTT rows' columns).
const COMMON: &str = r#"
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
const RICH: &str = r#"
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
const SPLIT: &str = r#"
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
const TWINS: &str = r#"
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
const SPLIT_STATIC: [&str; 3] = ["www.example.com", "all.example.com", "dead.example.com"];

/// NetScaler location data: nested ranges, one not aligned to any prefix, IPv4 and IPv6.
const CSV: &str = "\
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
const RTT_MS: [(&str, [Option<f64>; 3]); 10] = [
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
const STATES: [(&str, bool, u64, u64); 14] = [
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

/// A configuration with everything its answers depend on, and its compiled snapshot.
#[derive(Clone)]
struct World {
    name: &'static str,
    config: Config,
    db: LocationDb,
    services: Vec<ServiceState>,
    rtt: Arc<Vec<LdnsRtt>>,
    engine: Engine,
    snapshot: Snapshot,
    /// Domains answered by static view, not by the engine.
    static_domains: Vec<String>,
}

impl World {
    fn new(name: &'static str, text: &str, static_domains: &[&str]) -> World {
        let text = format!("{COMMON}\n{text}");
        let file = format!("{name}.toml");
        let config = Config::parse(&text, Path::new(&file)).unwrap_or_else(|e| panic!("{e}"));
        let db = LocationDb::builder()
            .netscaler_csv_text("compile_equivalence.csv", CSV)
            .custom_at(file, config.locations.custom.iter().cloned())
            .build()
            .expect("location database");
        let services: Vec<ServiceState> = config
            .services
            .iter()
            .map(|s| match STATES.iter().find(|(n, ..)| *n == s.name) {
                Some(&(_, down, connections, bandwidth_kbps)) => ServiceState {
                    up: !down,
                    connections,
                    bandwidth: Bandwidth::from_kbps(bandwidth_kbps),
                },
                None => ServiceState::UP,
            })
            .collect();
        let rtt: Arc<Vec<LdnsRtt>> = Arc::new(
            RTT_MS
                .iter()
                .map(|(net, ms)| LdnsRtt {
                    ldns: net.parse().unwrap(),
                    rtt_us: ms.iter().map(|m| m.map(|m| (m * 1000.0) as u32)).collect(),
                })
                .collect(),
        );
        let engine = config.engine().expect("engine");
        let started = Instant::now();
        let snapshot = Snapshot::compile(
            &config,
            &Inputs {
                locations: Some(&db),
                services: services.clone(),
                rtt: rtt.clone(),
                ..Inputs::default()
            },
        );
        eprintln!(
            "{name}: compiled in {:?}: {:?}",
            started.elapsed(),
            snapshot.stats
        );
        World {
            name,
            config,
            db,
            services,
            rtt,
            engine,
            snapshot,
            static_domains: static_domains.iter().map(ToString::to_string).collect(),
        }
    }

    fn rich() -> World {
        World::new("rich", &format!("{RICH}\n{TWINS}"), &[])
    }

    fn split() -> World {
        World::new("split", &format!("{SPLIT}\n{TWINS}"), &SPLIT_STATIC)
    }

    /// The rich configuration without its policy on the question name: then domains of one
    /// structure share their decisions, policies or not.
    fn shared() -> World {
        let text = RICH.replace(
            r#"&& DNS.REQ.QUESTION.DOMAIN.EQ("ratio.example.com")"#,
            "&& DNS.REQ.QUESTION.TYPE.EQ(A)",
        );
        assert_ne!(text, RICH);
        World::new("shared", &format!("{text}\n{TWINS}"), &[])
    }

    /// What `domain` (configuration index) must answer `client` for `qtype`.
    fn expected(
        &self,
        domain: usize,
        qtype: u16,
        client: IpAddr,
        location: Option<&gslb_user::location::Location>,
    ) -> Result<Meaning, String> {
        let d = &self.config.gslb_domains[domain];
        if self.static_domains.contains(&d.name) {
            return Ok(self.static_meaning(domain, qtype, client));
        }
        let rtt = self
            .rtt
            .iter()
            .find(|r| r.ldns.contains(&client))
            .map_or(&[][..], |r| &r.rtt_us[..]);
        let decision = self.engine.decide(
            domain,
            &EngineQuery {
                name: &d.name,
                qtype,
            },
            &Client {
                addr: client,
                location,
                // The engine decides among the view's services for a client in a view.
                view: self.static_view(client).map_or(0, |v| v as u32 + 1),
                sticky: None,
            },
            &State {
                services: &self.services,
                rtt,
                disabled_domains: &[],
            },
        );
        decision_meaning(&self.config, &decision, qtype)
    }

    /// The client's static view (configuration index): the view with the longest prefix
    /// containing it.
    fn static_view(&self, client: IpAddr) -> Option<usize> {
        self.config
            .views
            .iter()
            .enumerate()
            .flat_map(|(i, v)| v.prefixes.iter().map(move |p| (p, i)))
            .filter(|(p, _)| p.contains(&client))
            .max_by_key(|(p, _)| p.prefix_len())
            .map(|(_, i)| i)
    }

    /// The static-view rule for a round-robin domain: the up services of the family of the
    /// client's view (longest configured prefix), else the domain's own, else its backup
    /// addresses when it has services of that family at all, else nothing.
    fn static_meaning(&self, domain: usize, qtype: u16, client: IpAddr) -> Meaning {
        let d = &self.config.gslb_domains[domain];
        let family = |ip: &IpAddr| ip.is_ipv6() == (qtype == QTYPE_AAAA);
        let view = self
            .static_view(client)
            .map(|v| self.config.views[v].name.as_str());
        // Each address once, in the services' order (two services may share one).
        let up_addrs = |names: &[String]| -> Vec<IpAddr> {
            let mut addrs = Vec::new();
            for n in names {
                let i = self
                    .config
                    .services
                    .iter()
                    .position(|s| &s.name == n)
                    .unwrap();
                let s = &self.config.services[i];
                let ip = s.public_ip.unwrap_or(s.ip);
                if self.services[i].up && family(&ip) && !addrs.contains(&ip) {
                    addrs.push(ip);
                }
            }
            addrs
        };
        let in_view = view
            .and_then(|v| d.views.iter().find(|(name, _)| name == v))
            .map(|(_, names)| up_addrs(names))
            .unwrap_or_default();
        let addrs = if in_view.is_empty() {
            up_addrs(&d.services)
        } else {
            in_view
        };
        let addrs = if addrs.is_empty() {
            // Backup addresses stand in for a family the domain (or one of its views) serves.
            let has_family = d
                .services
                .iter()
                .chain(d.views.iter().flat_map(|(_, v)| v))
                .any(|n| {
                    let s = self.config.service(n).unwrap();
                    family(&s.public_ip.unwrap_or(s.ip))
                });
            if has_family && d.down_response == DownResponse::Backup {
                d.backup_ip.iter().copied().filter(family).collect()
            } else {
                Vec::new()
            }
        } else {
            addrs
        };
        match d.answer {
            AnswerMode::All => Meaning::all(d.ttl, addrs),
            AnswerMode::Rotate => Meaning::rotation(d.ttl, addrs.into_iter().map(|a| (a, 1))),
        }
    }
}

// ---- What an answer means ----

/// An answer as clients see it over many queries.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Meaning {
    /// No address of the family: NODATA.
    Nodata,
    /// One address per answer, each as often as its share; shares in lowest terms, by address.
    Rotation {
        ttl: u32,
        shares: Vec<(IpAddr, u32)>,
    },
    /// Every one of these addresses in each answer, in this order. A single address is this
    /// too, whether it rotates or not.
    All { ttl: u32, addrs: Vec<IpAddr> },
}

impl Meaning {
    /// `addrs` each once, in order.
    fn all(ttl: u32, addrs: impl IntoIterator<Item = IpAddr>) -> Meaning {
        let mut distinct: Vec<IpAddr> = Vec::new();
        for a in addrs {
            if !distinct.contains(&a) {
                distinct.push(a);
            }
        }
        match distinct.len() {
            0 => Meaning::Nodata,
            _ => Meaning::All {
                ttl,
                addrs: distinct,
            },
        }
    }

    /// One address per answer, each in proportion to the sum of its weights.
    fn rotation(ttl: u32, weighted: impl IntoIterator<Item = (IpAddr, u32)>) -> Meaning {
        let mut shares: BTreeMap<IpAddr, u32> = BTreeMap::new();
        for (a, w) in weighted {
            *shares.entry(a).or_default() += w;
        }
        shares.retain(|_, w| *w > 0);
        let g = shares.values().fold(0, |g, &w| gcd(g, w));
        match shares.len() {
            0 => Meaning::Nodata,
            1 => Meaning::All {
                ttl,
                addrs: shares.into_keys().collect(),
            },
            _ => Meaning::Rotation {
                ttl,
                shares: shares.into_iter().map(|(a, w)| (a, w / g)).collect(),
            },
        }
    }

    /// What a stored answer means: `None` (no answer for the client's view nor the default
    /// view) and an empty one are NODATA.
    fn of_answer(answer: Option<&Answer>) -> Meaning {
        match answer {
            None => Meaning::Nodata,
            Some(a) if a.addrs.is_empty() => Meaning::Nodata,
            Some(a) => match a.mode {
                // Kept as stored: a repeated address in an "all" answer is a wrong answer.
                AnswerMode::All if a.addrs.len() > 1 => Meaning::All {
                    ttl: a.ttl,
                    addrs: a.addrs.clone(),
                },
                _ => Meaning::rotation(a.ttl, a.addrs.iter().map(|&x| (x, 1))),
            },
        }
    }

    /// Addresses a reply may carry.
    fn support(&self) -> Vec<IpAddr> {
        match self {
            Meaning::Nodata => Vec::new(),
            Meaning::Rotation { shares, .. } => shares.iter().map(|s| s.0).collect(),
            Meaning::All { addrs, .. } => addrs.clone(),
        }
    }

    fn ttl(&self) -> u32 {
        match self {
            Meaning::Nodata => 0,
            Meaning::Rotation { ttl, .. } | Meaning::All { ttl, .. } => *ttl,
        }
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The engine's decision as an answer, written from the engine's contract: the candidates'
/// answer addresses under the pick (rotate: each distinct address in turn; all: every one;
/// first: the first; weighted: in proportion to the weights), the domain that decided giving
/// the TTL; no candidates: the backup addresses of the family (in the domain's answer mode)
/// or NODATA.
fn decision_meaning(config: &Config, decision: &Decision, qtype: u16) -> Result<Meaning, String> {
    let family = |ip: &IpAddr| ip.is_ipv6() == (qtype == QTYPE_AAAA);
    let domain = &config.gslb_domains[decision.domain];
    let ttl = domain.ttl;
    let ip = |s: usize| {
        let s = &config.services[s];
        s.public_ip.unwrap_or(s.ip)
    };
    let c = &decision.candidates;
    Ok(match decision.fallback {
        Some(Fallback::Empty) => Meaning::Nodata,
        Some(Fallback::BackupIp) => {
            let backup = domain.backup_ip.iter().copied().filter(family);
            match domain.answer {
                AnswerMode::All => Meaning::all(ttl, backup),
                AnswerMode::Rotate => Meaning::rotation(ttl, backup.map(|a| (a, 1))),
            }
        }
        None => match &decision.pick {
            Pick::First => Meaning::all(ttl, c.first().map(|&s| ip(s)).filter(family)),
            Pick::All => Meaning::all(ttl, c.iter().map(|&s| ip(s)).filter(family)),
            // Each distinct address in turn: two services sharing an address (on two ports)
            // are one address to a client.
            Pick::Rotate => {
                let mut distinct: Vec<IpAddr> = Vec::new();
                for a in c.iter().map(|&s| ip(s)).filter(family) {
                    if !distinct.contains(&a) {
                        distinct.push(a);
                    }
                }
                Meaning::rotation(ttl, distinct.into_iter().map(|a| (a, 1)))
            }
            Pick::Weighted(w) => {
                if w.len() != c.len() {
                    return Err(format!("{} weights for {} candidates", w.len(), c.len()));
                }
                Meaning::rotation(
                    ttl,
                    c.iter()
                        .zip(w)
                        .map(|(&s, &w)| (ip(s), w))
                        .filter(|(a, _)| family(a)),
                )
            }
            Pick::Hash { .. } => return Err("a hashed pick in a compiled domain".into()),
        },
    })
}

// ---- The fast path's lookup, written again ----

/// The snapshot's tables as the XDP program reads them: a longest-prefix match over the view
/// prefixes in the maps' key space (IPv4 as IPv4-mapped IPv6) gives the client's view and LDNS
/// view (none: the default view, no LDNS view); the answer is the view's, else the default
/// view's; when there is one and the domain is answered by RTT, the answer of the outcome the
/// LDNS view's choice gives for the domain's RTT slot replaces it if it has one.
struct Tables<'a> {
    /// Prefix lengths in key bits, longest first.
    lengths: Vec<u32>,
    prefixes: QuickMap<(u32, u128), ViewValue>,
    entries: QuickMap<(&'a str, u16), Entry<'a>>,
    choices: &'a gslb_user::compile::RttChoices,
}

#[derive(Default)]
struct Entry<'a> {
    by_rtt: bool,
    rtt_slot: u32,
    views: QuickMap<u32, &'a Answer>,
    /// By RTT outcome index.
    outcomes: QuickMap<u32, &'a Answer>,
}

/// std's HashMap with FNV-1a instead of SipHash: millions of lookups in a debug build.
type QuickMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = h;
    }
}

fn key_of(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => 0xffff << 32 | u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

fn key_bits(net: &IpNet) -> u32 {
    match net {
        IpNet::V4(n) => 96 + u32::from(n.prefix_len()),
        IpNet::V6(n) => u32::from(n.prefix_len()),
    }
}

fn mask(bits: u32) -> u128 {
    if bits == 0 {
        0
    } else {
        u128::MAX << (128 - bits)
    }
}

const NO_VIEW: ViewValue = ViewValue {
    view: DEFAULT_VIEW,
    rtt_view: 0,
    scope: 0,
    reserved: [0; 3],
};

impl<'a> Tables<'a> {
    /// Checks what the maps rely on: every prefix has its host bits clear, none repeats and
    /// none lies inside another (the views are disjoint).
    fn new(snapshot: &'a Snapshot) -> Tables<'a> {
        let mut prefixes = QuickMap::default();
        for (net, view) in snapshot.views.iter() {
            let (bits, key) = (key_bits(net), key_of(net.addr()));
            assert_eq!(key & !mask(bits), 0, "{net}: host bits set");
            assert_ne!(
                (view.view, view.rtt_view),
                (DEFAULT_VIEW, 0),
                "{net}: the default view without an LDNS view needs no prefix"
            );
            // The ECS scope the fast path echoes is the prefix's own length.
            assert_eq!(view.scope, net.prefix_len(), "{net}: scope");
            assert!(prefixes.insert((bits, key), *view).is_none(), "{net} twice");
        }
        let lengths: BTreeSet<u32> = prefixes.keys().map(|k| k.0).collect();
        let lengths: Vec<u32> = lengths.into_iter().rev().collect();
        for &(bits, key) in prefixes.keys() {
            for &shorter in lengths.iter().filter(|&&b| b < bits) {
                let outer = (shorter, key & mask(shorter));
                assert!(
                    !prefixes.contains_key(&outer),
                    "view prefixes overlap: {:x}/{bits} inside {:x}/{shorter}",
                    key,
                    outer.1
                );
            }
        }
        let mut entries: QuickMap<(&str, u16), Entry> = QuickMap::default();
        for d in &snapshot.domains {
            let entry = entries.entry((d.name.as_str(), d.qtype)).or_default();
            assert!(
                entry.views.is_empty() && entry.outcomes.is_empty(),
                "{} type {} twice",
                d.name,
                d.qtype
            );
            entry.by_rtt = d.by_rtt;
            entry.rtt_slot = d.rtt_slot;
            assert!(
                !d.by_rtt || (d.rtt_slot as usize) < snapshot.rtt_choices.slots,
                "{} type {}: RTT slot {} of {}",
                d.name,
                d.qtype,
                d.rtt_slot,
                snapshot.rtt_choices.slots
            );
            for (view, answer) in &d.answers {
                assert!(
                    entry.views.insert(*view, answer).is_none(),
                    "{} type {}: view {view} twice",
                    d.name,
                    d.qtype
                );
            }
            for (outcome, answer) in &d.rtt_answers {
                assert!(
                    *outcome < 256 && outcome & RTT_OUTCOME_BIT == 0,
                    "{} type {}: RTT outcome {outcome}",
                    d.name,
                    d.qtype
                );
                assert!(
                    entry.outcomes.insert(*outcome, answer).is_none(),
                    "{} type {}: RTT outcome {outcome} twice",
                    d.name,
                    d.qtype
                );
            }
        }
        Tables {
            lengths,
            prefixes,
            entries,
            choices: &snapshot.rtt_choices,
        }
    }

    fn view(&self, client: IpAddr) -> ViewValue {
        let key = key_of(client);
        self.lengths
            .iter()
            .find_map(|&bits| self.prefixes.get(&(bits, key & mask(bits))))
            .copied()
            .unwrap_or(NO_VIEW)
    }

    /// Whether the name has a `DOMAINS` entry for `qtype` (a miss is then "no answer", not
    /// "unknown name").
    fn known(&self, name: &str, qtype: u16) -> bool {
        self.entries.contains_key(&(name, qtype))
    }

    fn answer(&self, name: &str, qtype: u16, view: ViewValue) -> Option<&'a Answer> {
        let entry = self.entries.get(&(name, qtype))?;
        let base = entry
            .views
            .get(&view.view)
            .or_else(|| entry.views.get(&DEFAULT_VIEW))
            .copied()?;
        if entry.by_rtt
            && view.rtt_view != 0
            && let Some(outcome) = self.choices.choice(view.rtt_view, entry.rtt_slot)
            && let Some(by_rtt) = entry.outcomes.get(&u32::from(outcome))
        {
            return Some(by_rtt);
        }
        Some(base)
    }
}

// ---- Clients ----

const V4_FIRST: u128 = 0xffff << 32;
const V4_LAST: u128 = V4_FIRST | 0xffff_ffff;

fn addr_of(key: u128) -> IpAddr {
    if (V4_FIRST..=V4_LAST).contains(&key) {
        IpAddr::V4(Ipv4Addr::from(key as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(key))
    }
}

/// Every range of the world that has a boundary: static view prefixes, policy subnets, topology
/// prefixes, location ranges and RTT rows, as (first, last) keys.
fn ranges(world: &World) -> Vec<(u128, u128)> {
    let mut nets: Vec<IpNet> = Vec::new();
    for v in &world.config.views {
        nets.extend(&v.prefixes);
    }
    for p in &world.config.policies {
        p.expression.subnets(&mut nets);
    }
    for r in &world.config.topology {
        if let Ldns::Prefix(net) = &r.ldns {
            nets.push(*net);
        }
    }
    nets.extend(world.rtt.iter().map(|r| r.ldns));
    let mut out: Vec<(u128, u128)> = nets
        .iter()
        .map(|n| (key_of(n.network()), key_of(n.broadcast())))
        .collect();
    let mut add = |from: IpAddr, to: IpAddr| out.push((key_of(from), key_of(to)));
    for line in CSV.lines() {
        let mut fields = line.split(',');
        let from = fields.next().unwrap().parse().unwrap();
        let to = fields.next().unwrap().parse().unwrap();
        add(from, to);
    }
    for (_, from, to, _) in &world.config.locations.custom {
        add(*from, *to);
    }
    out
}

/// `n` client addresses from a seeded generator: 45% inside a range of the world, 30% at one
/// of its edges (just inside or just outside), the rest anywhere in IPv4 or IPv6 (2001:db8::/32
/// or anywhere). No IPv4-mapped IPv6 address: those are IPv4 clients.
fn clients(world: &World, seed: u8, n: usize) -> Vec<IpAddr> {
    let ranges = ranges(world);
    let mut rng = TestRng::from_seed(RngAlgorithm::XorShift, &[seed; 16]);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let r = rng.next_u32() % 100;
        let (first, last) = ranges[rng.next_u32() as usize % ranges.len()];
        let v4 = (V4_FIRST..=V4_LAST).contains(&first);
        let random128 =
            |rng: &mut TestRng| u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64());
        let key = match r {
            // Inside a range.
            0..45 => {
                let span = last - first;
                first
                    + if span == u128::MAX {
                        random128(&mut rng)
                    } else {
                        random128(&mut rng) % (span + 1)
                    }
            }
            // At an edge, just inside or just outside.
            45..75 => {
                let offset = u128::from(rng.next_u32() % 3);
                match rng.next_u32() % 4 {
                    0 => first.wrapping_add(offset),
                    1 => first.wrapping_sub(offset + 1),
                    2 => last.wrapping_sub(offset),
                    _ => last.wrapping_add(offset + 1),
                }
            }
            75..85 => V4_FIRST | u128::from(rng.next_u32()),
            85..93 => (0x2001_0db8u128 << 96) | (random128(&mut rng) >> 32),
            _ => random128(&mut rng),
        };
        // An edge step may leave the range's family; keep the address in it.
        if (45..75).contains(&r) && (V4_FIRST..=V4_LAST).contains(&key) != v4 {
            continue;
        }
        // A key in the IPv4-mapped range is an IPv4 client, never an IPv6 one.
        out.push(addr_of(key));
    }
    out
}

// ---- The property ----

/// Every (client, domain, qtype) the snapshot answers otherwise than the engine, described.
struct Check {
    /// ((domain, qtype), description).
    mismatches: Vec<((String, u16), String)>,
    count: usize,
    /// Per domain, the distinct meanings seen: the test must exercise something.
    seen: BTreeMap<String, usize>,
    views: BTreeSet<(u32, u32)>,
    fast: usize,
    passed: usize,
    nodata: usize,
}

fn check(world: &World, clients: &[IpAddr]) -> Check {
    let tables = Tables::new(&world.snapshot);
    let mut out = Check {
        mismatches: Vec::new(),
        count: 0,
        seen: BTreeMap::new(),
        views: BTreeSet::new(),
        fast: 0,
        passed: 0,
        nodata: 0,
    };
    let domains = &world.config.gslb_domains;
    let per_query: Vec<bool> = domains
        .iter()
        .map(|d| world.snapshot.engine_domains.contains(&d.name))
        .collect();
    // Per domain and type, the distinct answers the engine gave.
    let mut seen: Vec<[HashSet<Meaning>; 2]> = vec![Default::default(); domains.len()];
    for (i, &client) in clients.iter().enumerate() {
        let view = tables.view(client);
        out.views.insert((view.view, view.rtt_view));
        let location = world.db.lookup(client);
        for (d, domain) in domains.iter().enumerate() {
            for (t, qtype) in [QTYPE_A, QTYPE_AAAA].into_iter().enumerate() {
                if per_query[d] {
                    if tables.known(&domain.name, qtype) {
                        out.mismatches.push((
                            (domain.name.clone(), qtype),
                            "a per-query domain has an entry".into(),
                        ));
                    }
                    continue;
                }
                out.count += 1;
                let stored = tables.answer(&domain.name, qtype, view);
                let got = Meaning::of_answer(stored);
                let want = world.expected(d, qtype, client, location.as_deref());
                match stored.map(|a| a.addrs.len()) {
                    Some(1..=MAX_ADDRS) => out.fast += 1,
                    _ if got == Meaning::Nodata => out.nodata += 1,
                    _ => out.passed += 1,
                }
                // (Of every 16th client: hashing answers is not free.)
                if let Ok(want) = &want
                    && i % 16 == 0
                    && !seen[d][t].contains(want)
                {
                    seen[d][t].insert(want.clone());
                }
                if want.as_ref() != Ok(&got) {
                    out.mismatches.push(((domain.name.clone(), qtype), format!(
                        "{}: client {client} (location {:?}, view {view:?}), {} type {qtype}: snapshot {got:?} \
                         (stored {stored:?}), engine {want:?}",
                        world.name,
                        location.as_deref().map(ToString::to_string),
                        domain.name,
                    )));
                }
            }
        }
    }
    for (d, [a, aaaa]) in seen.iter().enumerate() {
        if !per_query[d] {
            out.seen
                .insert(domains[d].name.clone(), a.len() + aaaa.len());
        }
    }
    out
}

impl Check {
    /// The clients met every view and every LDNS view, and each named domain (`www` for
    /// www.example.com) answered them at least this many ways (the two types counted apart).
    fn assert_met(&self, world: &World, domains: &[(&str, usize)]) {
        let views: BTreeSet<u32> = self.views.iter().map(|v| v.0).collect();
        let rtt_views: BTreeSet<u32> = self.views.iter().map(|v| v.1).filter(|&r| r != 0).collect();
        let stats = world.snapshot.stats;
        assert_eq!(
            (views.len(), rtt_views.len()),
            (stats.views, stats.rtt_views),
            "views and LDNS views met"
        );
        for &(name, least) in domains {
            let name = format!("{name}.example.com");
            let seen = self.seen[&name];
            assert!(seen >= least, "{name}: only {seen} distinct answers");
        }
    }
}

fn report(world: &World, clients: &[IpAddr], check: &Check) {
    let v4 = clients.iter().filter(|c| c.is_ipv4()).count();
    eprintln!(
        "{}: {} clients ({v4} IPv4, {} IPv6), {} answers compared: {} by the fast path, {} passed to \
         the responder (more than {MAX_ADDRS} records), {} NODATA; {} (view, LDNS view) pairs met",
        world.name,
        clients.len(),
        clients.len() - v4,
        check.count,
        check.fast,
        check.passed,
        check.nodata,
        check.views.len(),
    );
    let kinds: Vec<String> = check
        .seen
        .iter()
        .map(|(name, seen)| format!("{name} {seen}"))
        .collect();
    eprintln!(
        "{}: distinct answers per domain: {}",
        world.name,
        kinds.join(", ")
    );
    // The first mismatch of each domain and type, and how many there are.
    let mut first: BTreeMap<(String, u16), (usize, &String)> = BTreeMap::new();
    for (key, m) in &check.mismatches {
        first.entry(key.clone()).or_insert((0, m)).0 += 1;
    }
    for ((name, qtype), (n, m)) in &first {
        eprintln!("MISMATCH {name} type {qtype}: {n} clients, e.g. {m}");
    }
}

#[test]
fn the_rich_configuration_compiles_to_the_engines_answers() {
    let world = World::rich();
    let started = Instant::now();
    let clients = clients(&world, 1, CLIENTS);
    let check = check(&world, &clients);
    eprintln!("rich: checked in {:?}", started.elapsed());
    report(&world, &clients, &check);
    assert!(
        check.mismatches.is_empty(),
        "{} mismatches, the first: {:#?}",
        check.mismatches.len(),
        check.mismatches.first()
    );
    // The property must have met what it is about: clients in several views, and the domains
    // whose answer depends on the client answering several ways.
    check.assert_met(
        &world,
        &[
            ("ratio", 4),
            ("least", 4),
            ("near", 4),
            ("rtt", 4),
            ("topo", 4),
            ("spill", 4),
            ("chain", 4),
            ("rr", 4),
            ("v4only", 4),
            ("ga", 3),
            ("shared", 2),
            ("down", 2),
            ("overload", 2),
        ],
    );
    assert!(
        check.fast > check.count / 2,
        "the fast path answers most queries"
    );
    assert!(
        check.passed > 0 && check.nodata > 0,
        "some answers are passed, some are NODATA"
    );
}

#[test]
fn domains_of_one_structure_share_decisions_and_keep_their_own_answers() {
    let world = World::shared();
    let clients = clients(&world, 4, SHARED_CLIENTS);
    let check = check(&world, &clients);
    report(&world, &clients, &check);
    assert!(
        check.mismatches.is_empty(),
        "{} mismatches, the first: {:#?}",
        check.mismatches.len(),
        check.mismatches.first()
    );
    check.assert_met(
        &world,
        &[("twin-a", 4), ("twin-b", 4), ("rtt-a", 3), ("rtt-b", 3)],
    );
    // Fewer signatures than decided (domain, type) entries: some were decided once for two.
    let decided = 2 * (world.config.gslb_domains.len() - world.snapshot.engine_domains.len());
    assert!(
        world.snapshot.stats.signatures < decided,
        "{:?}",
        world.snapshot.stats
    );
}

#[test]
fn static_views_and_decided_domains_share_one_snapshot() {
    let world = World::split();
    let clients = clients(&world, 2, SPLIT_CLIENTS);
    let check = check(&world, &clients);
    report(&world, &clients, &check);
    assert!(
        check.mismatches.is_empty(),
        "{} mismatches, the first: {:#?}",
        check.mismatches.len(),
        check.mismatches.first()
    );
    check.assert_met(
        &world,
        &[
            ("www", 4),
            ("all", 3),
            ("dead", 3),
            ("near", 4),
            ("rtt", 4),
            ("topo", 4),
            ("twin-a", 4),
            ("twin-b", 4),
        ],
    );
}

#[test]
fn the_compile_is_not_trivial() {
    for world in [World::rich(), World::split()] {
        let s = &world.snapshot;
        let stats = s.stats;
        eprintln!("{}: {stats:#?}", world.name);
        let per_view = s.domains.iter().filter(|d| d.answers.len() > 1).count();
        let v6 = s
            .views
            .iter()
            .filter(|(n, _)| matches!(n, IpNet::V6(_)))
            .count();
        eprintln!(
            "{}: {} prefixes ({v6} IPv6), {} (name, type) entries, {per_view} with per-view answers, \
             engine domains {:?}",
            world.name,
            s.views.len(),
            s.domains.len(),
            s.engine_domains
        );
        assert!(stats.views >= 8, "{}: {} views", world.name, stats.views);
        assert_eq!(stats.prefixes, s.views.len());
        assert!(
            s.views.len() >= 50 && v6 >= 10 && s.views.len() - v6 >= 10,
            "{}: {} prefixes, {v6} IPv6",
            world.name,
            s.views.len()
        );
        assert!(
            per_view >= 4,
            "{}: {per_view} entries with per-view answers",
            world.name
        );
        // RTT domains answer per LDNS view too.
        let by_rtt = s
            .domains
            .iter()
            .filter(|d| d.by_rtt && !d.rtt_answers.is_empty())
            .count();
        assert!(
            stats.rtt_views >= 3 && by_rtt >= 2,
            "{}: {by_rtt} entries by RTT, {stats:?}",
            world.name
        );
        assert!(
            stats.classes >= stats.views && stats.segments >= stats.classes,
            "{stats:?}"
        );
        assert!(
            stats.entries >= s.domains.len() && stats.map_bytes > 0,
            "{stats:?}"
        );
        // A view's NODATA beside the default view's addresses is stored as an empty answer.
        let empty = s
            .domains
            .iter()
            .flat_map(|d| &d.answers)
            .filter(|(_, a)| a.addrs.is_empty())
            .count();
        eprintln!("{}: {empty} per-view NODATA answers", world.name);
    }
    let rich = World::rich();
    let mut engine: Vec<&str> = rich
        .snapshot
        .engine_domains
        .iter()
        .map(String::as_str)
        .collect();
    engine.sort_unstable();
    assert_eq!(
        engine,
        [
            "hash.example.com",
            "sticky.example.com",
            "viahash.example.com"
        ]
    );
}

// ---- Through the XDP program ----

/// Every compiled domain's A and AAAA for `clients`, asked of the real program with the
/// snapshot published: a query the snapshot answers (1 to MAX_ADDRS records for the client's
/// view or the default view) must be answered with the engine's answer, the others passed.
/// Rotations are asked as many times in a row as the answer holds records, on one CPU, so that
/// the replies show the whole rotation.
/// Returns the queries answered and those passed.
/// The sources the fast path refuses to answer (`Counter::MartianSource`): the martian ones
/// and, over IPv6, every IPv4-mapped one.
fn martian(client: IpAddr) -> bool {
    match client {
        IpAddr::V4(a) => gslb_common::martian_v4(a.octets()),
        IpAddr::V6(a) => gslb_common::martian_v6(a.octets()) || a.to_ipv4_mapped().is_some(),
    }
}

fn ask_xdp(dp: &Dataplane, world: &World, clients: &[IpAddr]) -> (usize, usize) {
    let tables = Tables::new(&world.snapshot);
    let started = Instant::now();
    let (mut hits, mut passes, mut runs) = (0usize, 0usize, 0usize);
    let mut id = 0u16;
    for &client in clients {
        let view = tables.view(client);
        let location = world.db.lookup(client);
        for (d, domain) in world.config.gslb_domains.iter().enumerate() {
            let per_query = world.snapshot.engine_domains.contains(&domain.name);
            for (qtype, rtype) in [(QTYPE_A, RecordType::A), (QTYPE_AAAA, RecordType::AAAA)] {
                id = id.wrapping_add(1);
                let frame =
                    Frame::query_from(client, wire(&query(id, &domain.name, rtype))).bytes();
                let case = format!(
                    "{}: {} {rtype} from {client} (view {view:?})",
                    world.name, domain.name
                );
                // A source no resolver sends from is passed before any lookup (the responder
                // answers it, from the same tables; XDP does not trust it).
                if martian(client) {
                    assert_passed(&case, dp, &frame, Counter::MartianSource);
                    passes += 1;
                    runs += 1;
                    continue;
                }
                let stored = tables.answer(&domain.name, qtype, view);
                let Some(stored) = stored.filter(|a| (1..=MAX_ADDRS).contains(&a.addrs.len()))
                else {
                    let reason = if tables.known(&domain.name, qtype) {
                        Counter::NoAnswer
                    } else {
                        assert!(
                            per_query || Meaning::of_answer(stored) == Meaning::Nodata,
                            "{case}"
                        );
                        Counter::UnknownName
                    };
                    assert_passed(&case, dp, &frame, reason);
                    passes += 1;
                    runs += 1;
                    continue;
                };
                let want = world
                    .expected(d, qtype, client, location.as_deref())
                    .unwrap_or_else(|e| panic!("{case}: {e}"));
                let rotates = stored.mode == AnswerMode::Rotate;
                let expect = Expect {
                    rtype,
                    ttl: want.ttl(),
                    answers: if rotates {
                        Answers::OneOf(want.support())
                    } else {
                        Answers::All(want.support())
                    },
                };
                let times = if rotates { stored.addrs.len() } else { 1 };
                let mut got = Vec::new();
                for _ in 0..times {
                    got.extend(assert_reply(&case, &frame, &run(dp, &frame), &expect));
                    runs += 1;
                }
                let seen = if rotates {
                    Meaning::rotation(want.ttl(), got.into_iter().map(|a| (a, 1)))
                } else {
                    Meaning::All {
                        ttl: want.ttl(),
                        addrs: got,
                    }
                };
                assert_eq!(seen, want, "{case}: the replies over one rotation");
                hits += 1;
            }
        }
    }
    eprintln!(
        "{}: {} clients through XDP in {:?}: {hits} answered, {passes} passed, {runs} runs",
        world.name,
        clients.len(),
        started.elapsed()
    );
    (hits, passes)
}

/// Most queries are answered by the fast path and some (more than it can carry) are passed.
fn ask_xdp_mostly_answered(dp: &Dataplane, world: &World, clients: &[IpAddr]) {
    let (hits, passes) = ask_xdp(dp, world, clients);
    assert!(hits > passes && passes > 0, "hits {hits}, passes {passes}");
}

/// A sample of the property's clients, both families.
fn sample(clients: &[IpAddr], n: usize) -> Vec<IpAddr> {
    let step = clients.len() / n;
    let sample: Vec<IpAddr> = clients.iter().step_by(step).take(n).copied().collect();
    assert!(sample.iter().any(IpAddr::is_ipv4) && sample.iter().any(IpAddr::is_ipv6));
    sample
}

/// A dataplane of its own (fresh maps) with `snapshot` published, on this thread's CPU (the
/// rotor is per CPU); `None` when skipped for lack of privileges.
fn dataplane(world: &World) -> Option<Dataplane> {
    if !common::privileged() {
        return None;
    }
    common::pin_to_current_cpu();
    let mut dp = Dataplane::load(None).expect("loading the XDP object");
    publish(&mut dp, world);
    Some(dp)
}

fn publish(dp: &mut Dataplane, world: &World) -> PublishStats {
    let stats = dp.table.publish(&world.snapshot).expect("publishing");
    eprintln!("{}: published {stats:?}", world.name);
    assert_eq!((stats.too_long, stats.collisions), (0, 0));
    stats
}

#[test]
fn xdp_answers_the_rich_configuration_as_the_engine() {
    let world = World::rich();
    let Some(dp) = dataplane(&world) else { return };
    let clients = clients(&world, 1, CLIENTS);
    ask_xdp_mostly_answered(&dp, &world, &sample(&clients, XDP_CLIENTS));
}

#[test]
fn xdp_answers_the_split_configuration_as_the_engine() {
    let world = World::split();
    let Some(dp) = dataplane(&world) else { return };
    let clients = clients(&world, 2, SPLIT_CLIENTS);
    ask_xdp_mostly_answered(&dp, &world, &sample(&clients, SPLIT_XDP_CLIENTS));
}

// ---- After health changes ----

/// An incremental compilation decides a domain again when only its backup domain's services
/// changed state (the decision signature holds the backup chain's states too).
#[test]
fn incremental_compilation_follows_the_health_of_a_backup_domains_services() {
    let config = Config::parse(
        r#"
        [server]
        listen = ["192.0.2.53"]
        [[zone]]
        name = "example.com"
        ns = ["ns.example.net"]
        soa.rname = "hostmaster.example.com"
        [[site]]
        name = "s"
        ip = "192.0.2.1"
        [[service]]
        name = "a"
        ip = "192.0.2.10"
        site = "s"
        [[service]]
        name = "b"
        ip = "192.0.2.20"
        site = "s"
        [[service]]
        name = "c"
        ip = "192.0.2.30"
        site = "s"
        [[gslb_domain]]
        name = "www.example.com"
        services = ["a"]
        backup_domain = "backup.example.com"
        [[gslb_domain]]
        name = "backup.example.com"
        services = ["b", "c"]
        "#,
        Path::new("backup-health.toml"),
    )
    .unwrap();
    let states = |down: &[&str]| Inputs {
        services: config
            .services
            .iter()
            .map(|s| {
                if down.contains(&s.name.as_str()) {
                    ServiceState::DOWN
                } else {
                    ServiceState::UP
                }
            })
            .collect(),
        ..Inputs::default()
    };
    let www_a = |s: &Snapshot| {
        let entry = s
            .domains
            .iter()
            .find(|d| d.name == "www.example.com" && d.qtype == QTYPE_A)
            .unwrap();
        entry
            .answers
            .iter()
            .find(|(v, _)| *v == DEFAULT_VIEW)
            .unwrap()
            .1
            .addrs
            .clone()
    };
    let mut compiler = Compiler::default();
    // a down: the backup domain answers, b and c.
    assert_eq!(
        www_a(&compiler.compile(&config, &states(&["a"]))),
        common::ips(&["192.0.2.20", "192.0.2.30"])
    );
    // b down too: c alone, as a compilation from scratch says.
    let fresh = Snapshot::compile(&config, &states(&["a", "b"]));
    assert_eq!(www_a(&fresh), common::ips(&["192.0.2.30"]));
    let incremental = compiler.compile(&config, &states(&["a", "b"]));
    assert!(incremental.stats.incremental);
    assert_eq!(
        www_a(&incremental),
        common::ips(&["192.0.2.30"]),
        "still answers b, which is down"
    );
}

/// Health changes applied one after the other to [`STATES`] (the last goes back to it):
/// (service, down, connections, bandwidth kbit/s).
const CHANGES: [&[(&str, bool, u64, u64)]; 4] = [
    &[("us-2", false, 0, 0), ("eu-1", true, 10, 0)],
    &[
        ("full-1", false, 0, 0),
        ("ap-6b", false, 0, 0),
        ("us-6", true, 5, 0),
        ("bw-6", false, 0, 0),
    ],
    &[
        ("us-1", true, 3, 100),
        ("ap-1", true, 3, 0),
        ("ap-2", true, 7, 0),
        ("ap-6", true, 0, 0),
        ("eu-6", true, 0, 0),
        ("full-1", true, 0, 0),
        ("full-2", true, 10, 0),
        ("bw-6", true, 0, 0),
        ("us-2", true, 0, 0),
        ("us-6", false, 5, 0),
    ],
    &STATES,
];

/// Recompiles `world` after each of [`CHANGES`] with one [`Compiler`] that keeps its partition
/// and decisions between compilations, as the controller does, and hands each state to `each`.
fn after_health_changes(world: &mut World, mut each: impl FnMut(&World, usize)) {
    let mut compiler = Compiler::default();
    let inputs = |services: Vec<ServiceState>| Inputs {
        locations: Some(&world.db),
        services,
        rtt: world.rtt.clone(),
        ..Inputs::default()
    };
    let first = compiler.compile(&world.config, &inputs(world.services.clone()));
    assert_eq!(
        first, world.snapshot,
        "a compiler's first compilation is a fresh one"
    );
    for (step, changes) in CHANGES.iter().enumerate() {
        let mut services = world.services.clone();
        for &(name, down, connections, bandwidth_kbps) in *changes {
            let i = world
                .config
                .services
                .iter()
                .position(|s| s.name == name)
                .unwrap();
            services[i] = ServiceState {
                up: !down,
                connections,
                bandwidth: Bandwidth::from_kbps(bandwidth_kbps),
            };
        }
        let snapshot = compiler.compile(&world.config, &inputs(services.clone()));
        eprintln!("{} after change {step}: {:?}", world.name, snapshot.stats);
        assert!(
            snapshot.stats.incremental,
            "change {step}: the partition is kept"
        );
        world.services = services;
        world.snapshot = snapshot;
        each(world, step);
    }
}

#[test]
fn incremental_compilations_give_the_engines_answers() {
    let mut world = World::rich();
    let clients = clients(&world, 3, INCREMENTAL_CLIENTS);
    after_health_changes(&mut world, |world, step| {
        let checked = check(world, &clients);
        report(world, &clients, &checked);
        if !checked.mismatches.is_empty() {
            // Whether a compilation from scratch gets it right tells where the fault is.
            let fresh = Snapshot::compile(
                &world.config,
                &Inputs {
                    locations: Some(&world.db),
                    services: world.services.clone(),
                    rtt: world.rtt.clone(),
                    ..Inputs::default()
                },
            );
            let fresh = World {
                snapshot: fresh,
                ..world.clone()
            };
            let again = check(&fresh, &clients);
            panic!(
                "change {step}: {} mismatches (from scratch: {}), the first: {:#?}",
                checked.mismatches.len(),
                again.mismatches.len(),
                checked.mismatches.first()
            );
        }
    });
}

#[test]
fn xdp_answers_as_the_engine_after_health_changes() {
    let mut world = World::rich();
    let Some(mut dp) = dataplane(&world) else {
        return;
    };
    let clients = clients(&world, 3, INCREMENTAL_CLIENTS);
    let clients = sample(&clients, INCREMENTAL_XDP_CLIENTS);
    let mut in_place = 0;
    after_health_changes(&mut world, |world, _| {
        in_place += usize::from(publish(&mut dp, world).in_place);
        ask_xdp_mostly_answered(&dp, world, &clients);
    });
    eprintln!(
        "{in_place} of {} publishes edited the view trie in place",
        CHANGES.len()
    );
}

// ---- Random configurations: views, policies and methods together ----

/// Configurations drawn at random (seeded) over the common world: static views, DNS policies
/// and domains of every compiled method with per-view services. The defect this guards
/// against: a view's services silently replaced by the domain's own as soon as anything made
/// the engine decide (a policy, a method, a chain, a limit).
const RANDOM_CONFIGS: u64 = 24;
const RANDOM_CLIENTS: usize = 4_000;
const RANDOM_XDP_CLIENTS: usize = 150;

/// Services of `COMMON`, and those with a spillover limit (which make the engine decide).
const POOL: [&str; 14] = [
    "eu-1", "eu-1-alt", "eu-2", "eu-6", "us-1", "us-2", "us-6", "bw-6", "ap-1", "ap-2", "ap-6",
    "ap-6b", "full-1", "full-2",
];
const LIMITED: [&str; 5] = ["eu-1", "us-1", "bw-6", "full-1", "full-2"];
const VIEW_PREFIXES: [&str; 13] = [
    "10.0.0.0/8",
    "10.1.0.0/16",
    "10.1.2.0/24",
    "10.1.2.128/26",
    "192.168.0.0/16",
    "198.51.100.0/25",
    "203.0.113.0/24",
    "172.16.0.0/12",
    "0.0.0.0/1",
    "2001:db8:4400::/40",
    "2001:db8:8000::/33",
    "2001:db8:4000::/36",
    "::/0",
];
const POLICIES: [(&str, &str); 6] = [
    (r#"CLIENT.IP.SRC.MATCHES_LOCATION("Asia.*")"#, "prefer-asia"),
    ("CLIENT.IP.SRC.IN_SUBNET(10.1.0.0/16)", "prefer-uk"),
    (
        r#"CLIENT.IP.SRC.MATCHES_LOCATION("Europe.UK")"#,
        "prefer-de",
    ),
    ("CLIENT.IPV6.SRC.IN_SUBNET(2001:db8:4000::/36)", "prefer-us"),
    // Matches nobody: its mere presence once made every view vanish.
    ("CLIENT.IP.SRC.IN_SUBNET(100.64.0.0/10)", "prefer-hk"),
    ("DNS.REQ.QUESTION.TYPE.EQ(AAAA)", "prefer-hk"),
];
const ACTIONS: &str = r#"
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
"#;
/// Method chains (preferred, alternate, fallback) the compiler decides per class.
const CHAINS: [&[&str]; 10] = [
    &["roundrobin"],
    &["ratio"],
    &["leastconnection"],
    &["globalavailability"],
    &["staticproximity"],
    &["staticproximity", "ratio"],
    &["rtt", "topology", "globalavailability"],
    &["topology", "roundrobin"],
    &["rtt"],
    &["topology", "staticproximity", "leastconnection"],
];

/// One random configuration's text, and the domains the compiler answers by static view (round
/// robin with nothing else to decide).
fn random_config(rng: &mut TestRng) -> (String, Vec<String>) {
    let mut pick = |n: usize| rng.next_u32() as usize % n;
    let mut text = String::new();
    // 1 to 4 views; no prefix in two views.
    let mut prefixes: Vec<&str> = VIEW_PREFIXES.to_vec();
    let views = 1 + pick(4);
    for v in 0..views {
        let mut mine = Vec::new();
        for _ in 0..=pick(3) {
            if !prefixes.is_empty() {
                mine.push(prefixes.swap_remove(pick(prefixes.len())));
            }
        }
        let list: Vec<String> = mine.iter().map(|p| format!("\"{p}\"")).collect();
        text += &format!(
            "[[view]]\nname = \"v{v}\"\nprefixes = [{}]\n",
            list.join(", ")
        );
    }
    let policies = [0, 0, 1, 1, 2, 3][pick(6)];
    if policies > 0 {
        text += ACTIONS;
    }
    let mut used = Vec::new();
    for p in 0..policies {
        let mut i = pick(POLICIES.len());
        while used.contains(&i) {
            i = (i + 1) % POLICIES.len();
        }
        used.push(i);
        let (expression, action) = POLICIES[i];
        text += &format!(
            "[[policy]]\nname = \"p{p}\"\nexpression = '{expression}'\naction = \"{action}\"\npriority = {}\n",
            10 * (p + 1)
        );
    }
    let mut static_domains = Vec::new();
    for d in 0..2 + pick(4) {
        let chain = CHAINS[pick(CHAINS.len())];
        let name = format!("d{d}.example.com");
        let mut services: Vec<&str> = Vec::new();
        for _ in 0..2 + pick(5) {
            let s = POOL[pick(POOL.len())];
            if !services.contains(&s) {
                services.push(s);
            }
        }
        let quoted = |list: &[&str]| {
            list.iter()
                .map(|s| format!("\"{s}\""))
                .collect::<Vec<_>>()
                .join(", ")
        };
        text += &format!(
            "[[gslb_domain]]\nname = \"{name}\"\nttl = {}\nservices = [{}]\nmethod = \"{}\"\n",
            10 + d,
            quoted(&services),
            chain[0]
        );
        for (key, m) in ["alternate", "fallback"].iter().zip(&chain[1..]) {
            text += &format!("{key} = \"{m}\"\n");
        }
        if chain.contains(&"rtt") && pick(2) == 0 {
            text += "tolerance_ms = 5\n";
        }
        // (answer = "all" is refused after a method that picks one service per answer.)
        if pick(4) == 0 && !["ratio", "globalavailability"].contains(&chain[0]) {
            text += "answer = \"all\"\n";
        }
        if pick(3) == 0 {
            text += "backup_ip = [\"192.0.2.250\", \"2001:db8::250\"]\n";
        }
        let mut limited = services.iter().any(|s| LIMITED.contains(s));
        for v in 0..views {
            if pick(3) == 0 {
                continue;
            }
            let mut list: Vec<&str> = Vec::new();
            for _ in 0..=pick(3) {
                let s = POOL[pick(POOL.len())];
                if !list.contains(&s) {
                    list.push(s);
                }
            }
            limited |= list.iter().any(|s| LIMITED.contains(s));
            text += &format!(
                "[[gslb_domain.view]]\nview = \"v{v}\"\nservices = [{}]\n",
                quoted(&list)
            );
        }
        if chain == ["roundrobin"] && policies == 0 && !limited {
            static_domains.push(name);
        }
    }
    (text, static_domains)
}

fn random_worlds() -> Vec<(World, u64)> {
    (0..RANDOM_CONFIGS)
        .map(|seed| {
            let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[seed as u8 + 100; 32]);
            let (text, static_domains) = random_config(&mut rng);
            let name: &'static str = Box::leak(format!("random-{seed}").into_boxed_str());
            let statics: Vec<&str> = static_domains.iter().map(String::as_str).collect();
            let world = World::new(name, &text, &statics);
            (world, seed)
        })
        .collect()
}

#[test]
fn random_configurations_with_views_and_policies_compile_to_the_engines_answers() {
    let mut in_view_answers = 0;
    for (world, seed) in random_worlds() {
        let clients = clients(&world, seed as u8 + 10, RANDOM_CLIENTS);
        let check = check(&world, &clients);
        assert!(
            check.mismatches.is_empty(),
            "{}: {} mismatches, the first: {:#?}\nconfiguration:\n{}",
            world.name,
            check.mismatches.len(),
            check.mismatches.first(),
            world
                .config
                .gslb_domains
                .iter()
                .map(|d| format!(
                    "{} {:?} {:?} views {:?}",
                    d.name,
                    d.chain(),
                    d.services,
                    d.views
                ))
                .collect::<Vec<_>>()
                .join("\n")
        );
        // Clients in a view got the view's own services from the engine somewhere.
        in_view_answers += world
            .snapshot
            .domains
            .iter()
            .filter(|d| d.answers.len() > 1)
            .count();
    }
    assert!(
        in_view_answers >= RANDOM_CONFIGS as usize,
        "only {in_view_answers} entries answer differently per view"
    );
}

#[test]
fn xdp_answers_random_configurations_as_the_engine() {
    let mut answered = 0;
    for (world, seed) in random_worlds().into_iter().step_by(3) {
        let Some(dp) = dataplane(&world) else { return };
        let clients = clients(&world, seed as u8 + 10, RANDOM_CLIENTS);
        answered += ask_xdp(&dp, &world, &sample(&clients, RANDOM_XDP_CLIENTS)).0;
    }
    assert!(answered > 0, "the fast path answered nothing");
}
