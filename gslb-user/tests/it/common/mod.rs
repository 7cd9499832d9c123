//! Shared by the XDP tests (and the XDP benchmark): the privilege check, a loaded dataplane with
//! the test configuration, builders for Ethernet frames carrying DNS queries, and running the
//! program on a frame with the checks of its reply. Also shared by the other tests: asking the
//! responder or a server on the loopback, gslbd run in the test's process, and the check of a
//! configuration's errors against the places its cases mark.
//!
//! The builders compute their own checksums (RFC 1071) rather than borrow the fast path's or
//! etherparse's, so that a test checking a reply with etherparse checks it against a third
//! implementation.
#![allow(dead_code)] // each test binary uses a different part

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::Duration;

use aya::programs::{ProgramError, TestRun, TestRunOptions, Xdp};
use etherparse::{IpNumber, Ipv4HeaderSlice, LinkSlice, NetSlice, SlicedPacket, TransportSlice};
use gslb_common::Counter;
use gslb_user::{
    compile::Snapshot,
    config::{Config, ConfigError},
    control::{self, ControlPath, Reload},
    daemon::{self, DaemonError, Listeners, Overrides},
    dataplane::Dataplane,
};
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::opt::EdnsOption;
use hickory_proto::rr::{DNSClass, Name, RData, RecordType};
use tokio::{
    sync::{mpsc, oneshot},
    task::JoinHandle,
};

// ---- Privileges and setup ----

/// Every privileged test of these modules starts here: [`gslb_tests::privileged`], named after
/// the running test (libtest names its thread so).
pub(crate) fn privileged() -> bool {
    gslb_tests::privileged(std::thread::current().name().unwrap_or("this test"))
}

/// Logs of the code under test, for the test that runs it: `RUST_LOG` (as gslbd reads it, e.g.
/// `RUST_LOG=gslb_user=debug`) picks what is logged, nothing without it. Written through
/// libtest's capture, so only a failing test's logs are shown (or every test's with
/// `--nocapture`). Called by the kit's setup helpers ([`dataplane`], [`Gslbd::start_bound`]); once
/// per process, as tracing has one global subscriber.
pub(crate) fn init_tracing() {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() else {
            return;
        };
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(filter)
            .try_init();
    });
}

/// A freshly loaded dataplane (maps of its own) with [`config_text`] published, or `None` when the
/// test is skipped for lack of privileges.
pub(crate) fn dataplane() -> Option<Dataplane> {
    if !privileged() {
        return None;
    }
    init_tracing();
    let mut dp = Dataplane::load(None).expect("loading the XDP object");
    dp.table
        .publish(&snapshot())
        .expect("publishing the test configuration");
    Some(dp)
}

/// Keeps this thread on the CPU it runs on (per-CPU maps such as the rotor then stay put).
pub(crate) fn pin_to_current_cpu() {
    // SAFETY: plain syscalls for this thread, with a zero-initialised cpu_set_t.
    unsafe {
        let cpu = libc::sched_getcpu();
        assert!(
            cpu >= 0,
            "sched_getcpu: {}",
            std::io::Error::last_os_error()
        );
        pin_to_cpu(cpu as usize);
    }
}

/// Keeps this thread on `cpu`.
/// Runs `program` on `frame` on CPU 0 over and over while CPU 1 publishes `snapshots` in turn
/// `publishes` times (the first is published before), and counts the replies by what
/// `describe` makes of each XDP_TX reply's DNS message (bytes and parsed) or by the XDP action:
/// what the atomic-republish tests check against the replies each generation may give.
pub(crate) fn replies_while_publishing(
    program: &Xdp,
    table: &mut gslb_user::dataplane::AnswerTable,
    frame: &[u8],
    snapshots: &[Snapshot; 2],
    publishes: usize,
    describe: impl Fn(&[u8], &Message) -> String + Sync,
) -> std::collections::BTreeMap<String, u64> {
    use std::sync::atomic::{AtomicBool, Ordering};
    table.publish(&snapshots[0]).expect("the first publish");
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            pin_to_cpu(0);
            let mut seen = std::collections::BTreeMap::<String, u64>::new();
            let mut out = vec![0u8; 4096];
            // Until the publisher is done, and a bounded number of runs in any case.
            for _ in 0..5_000_000 {
                if done.load(Ordering::Relaxed) {
                    break;
                }
                let result = program
                    .test_run(TestRunOptions {
                        data_in: Some(frame),
                        data_out: Some(&mut out),
                        ..TestRunOptions::new()
                    })
                    .expect("test_run");
                let reply = if result.return_value == XDP_TX {
                    // The DNS message after Ethernet 14 + IPv4 20 + UDP 8.
                    let dns = &out[42..result.data_size_out as usize];
                    describe(dns, &Message::from_vec(dns).expect("the reply parses"))
                } else {
                    format!("XDP action {}", result.return_value)
                };
                *seen.entry(reply).or_default() += 1;
            }
            seen
        });
        pin_to_cpu(1);
        for i in 0..publishes {
            table.publish(&snapshots[(i + 1) % 2]).expect("publishing");
        }
        done.store(true, Ordering::Relaxed);
        reader.join().expect("the reader")
    })
}

pub(crate) fn pin_to_cpu(cpu: usize) {
    // SAFETY: plain syscall for this thread, with a zero-initialised cpu_set_t.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let rc = libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const set);
        assert_eq!(
            rc,
            0,
            "sched_setaffinity: {}",
            std::io::Error::last_os_error()
        );
    }
}

pub(crate) fn snapshot() -> Snapshot {
    let config =
        Config::parse(&config_text(), Path::new("xdp-test.toml")).expect("test configuration");
    Snapshot::from_config(&config)
}

// ---- The test configuration ----

pub(crate) const SERVER_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 53);
pub(crate) const SERVER_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x53);
/// Clients in no view: they get the default view's answers.
pub(crate) const CLIENT_V4: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 7);
pub(crate) const CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 7);
/// Clients in view "v1".
pub(crate) const V1_CLIENT_V4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
pub(crate) const V1_CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 7);

/// The test server ([`SERVER_V4`] or [`SERVER_V6`]) of `addr`'s family.
pub(crate) fn server_of(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(_) => IpAddr::V4(SERVER_V4),
        IpAddr::V6(_) => IpAddr::V6(SERVER_V6),
    }
}

pub(crate) const CLIENT_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
pub(crate) const SERVER_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];
pub(crate) const CLIENT_PORT: u16 = 40_000;
pub(crate) const EDNS_UDP_SIZE: u16 = 1232;

pub(crate) const WWW: &str = "www.example.com";
pub(crate) const WWW_TTL: u32 = 300;
pub(crate) const WWW_A: [&str; 2] = ["192.0.2.10", "192.0.2.11"];
pub(crate) const WWW_AAAA: [&str; 2] = ["2001:db8:10::10", "2001:db8:10::11"];
pub(crate) const WWW_V1_A: [&str; 2] = ["192.0.2.20", "192.0.2.21"];
pub(crate) const WWW_V1_AAAA: [&str; 2] = ["2001:db8:20::20", "2001:db8:20::21"];

pub(crate) const ALL: &str = "all.example.com";
pub(crate) const ALL_TTL: u32 = 60;
pub(crate) const ALL_A: [&str; 3] = ["192.0.2.31", "192.0.2.32", "192.0.2.33"];
pub(crate) const ALL_AAAA: [&str; 2] = ["2001:db8:30::1", "2001:db8:30::2"];

pub(crate) const V1_ONLY: &str = "v1only.example.com";

/// Labels of 63 and 62 bytes: 1 + 63 + 1 + 62 + 1 = 128 wire bytes, exactly `QNAME_MAX`.
pub(crate) fn longest_name() -> String {
    format!("{}.{}", "a".repeat(63), "b".repeat(62))
}
pub(crate) const LONGEST_A: &str = "192.0.2.40";

pub(crate) const CONFIG: &str = r#"
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
"#;

/// [`CONFIG`] plus the longest name the fast path answers (in a zone of its own), to probe the
/// boundary of its key.
pub(crate) fn config_text() -> String {
    let name = longest_name();
    let zone = name.split_once('.').expect("two labels").1;
    let text = CONFIG
        .replace("LONGEST_ZONE", zone)
        .replace("LONGEST_A", LONGEST_A);
    format!("{text}\n[[gslb_domain]]\nname = \"{name}\"\nservices = [\"longest\"]\n")
}

pub(crate) fn ips(addrs: &[&str]) -> Vec<IpAddr> {
    addrs
        .iter()
        .map(|a| a.parse().expect("test address"))
        .collect()
}

// ---- DNS messages ----

/// A standard query with RD set, as stub resolvers send it. `name` keeps its case.
pub(crate) fn query(id: u16, name: &str, qtype: RecordType) -> Message {
    let mut msg = Message::new(id, MessageType::Query, OpCode::Query);
    msg.metadata.recursion_desired = true;
    msg.add_query(Query::query(
        Name::from_ascii(name).expect("test name"),
        qtype,
    ));
    msg
}

/// An OPT record as a resolver sends it: version 0, no options, our advertised size.
pub(crate) fn edns() -> Edns {
    let mut edns = Edns::new();
    edns.set_max_payload(EDNS_UDP_SIZE).set_version(0);
    edns
}

pub(crate) fn wire(msg: &Message) -> Vec<u8> {
    msg.to_vec().expect("encoding the test query")
}

/// The A or AAAA addresses `responder` answers `client` for `name` over UDP, in reply order.
pub(crate) fn responder_addrs(
    responder: &gslb_user::responder::Responder,
    name: &str,
    qtype: RecordType,
    client: IpAddr,
) -> Vec<IpAddr> {
    let request = wire(&query(1, name, qtype));
    let reply = responder
        .respond(&request, client, gslb_user::responder::Transport::Udp)
        .unwrap_or_else(|| panic!("{name} {qtype} from {client}: no reply"));
    answer_addrs(&Message::from_vec(&reply).expect("the reply parses"))
}

/// The A and AAAA addresses in the answer section of `reply`, in reply order.
pub(crate) fn answer_addrs(reply: &Message) -> Vec<IpAddr> {
    reply
        .answers
        .iter()
        .filter_map(|r| match r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect()
}

/// One query (ID 7, RD clear, no EDNS) for `name` `rtype` over UDP from 127.0.0.1 to a server
/// on 127.0.0.1:`port`, and its reply (waited for at most 2 s).
pub(crate) fn ask_loopback(port: u16, name: &str, rtype: RecordType) -> Message {
    ask_server(SocketAddr::from(([127, 0, 0, 1], port)), name, rtype)
}

/// As [`ask_loopback`], of the server at `server` (from 127.0.0.1).
pub(crate) fn ask_server(server: SocketAddr, name: &str, rtype: RecordType) -> Message {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut q = Message::query();
    q.metadata.id = 7;
    q.add_query(Query::query(Name::from_ascii(name).unwrap(), rtype));
    socket.send_to(&q.to_vec().unwrap(), server).unwrap();
    let mut buf = [0u8; 1500];
    let len = socket.recv(&mut buf).expect("an answer");
    Message::from_vec(&buf[..len]).unwrap()
}

/// The question section of a one-question message: the name (followed label by label, no
/// pointers), QTYPE and QCLASS.
pub(crate) fn question_bytes(dns: &[u8]) -> &[u8] {
    let mut at = 12;
    while dns[at] != 0 {
        assert!(dns[at] < 64, "question name is not plain labels");
        at += 1 + dns[at] as usize;
    }
    &dns[12..at + 1 + 4]
}

/// The RDATA of the OPT record of `dns` (its options as on the wire), walking the sections;
/// `None` without an OPT or when the message does not walk.
pub(crate) fn opt_rdata(dns: &[u8]) -> Option<&[u8]> {
    let u16_at = |at: usize| -> Option<u16> {
        Some(u16::from_be_bytes(dns.get(at..at + 2)?.try_into().ok()?))
    };
    let skip_name = |mut at: usize| -> Option<usize> {
        loop {
            match *dns.get(at)? {
                0 => return Some(at + 1),
                l if l & 0xc0 == 0xc0 => return Some(at + 2),
                l => at += 1 + usize::from(l),
            }
        }
    };
    let mut at = 12;
    for _ in 0..u16_at(4)? {
        at = skip_name(at)? + 4;
    }
    let records = u32::from(u16_at(6)?) + u32::from(u16_at(8)?) + u32::from(u16_at(10)?);
    for _ in 0..records {
        at = skip_name(at)?;
        let rdlen = usize::from(u16_at(at + 8)?);
        let rdata = dns.get(at + 10..at + 10 + rdlen)?;
        if u16_at(at)? == 41 {
            return Some(rdata);
        }
        at += 10 + rdlen;
    }
    None
}

/// The ECS options (code 8, each with its head) of the OPT of `dns`, as on the wire.
pub(crate) fn ecs_options(dns: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let Some(rdata) = opt_rdata(dns) else {
        return out;
    };
    let mut at = 0;
    while at + 4 <= rdata.len() {
        let len = usize::from(u16::from_be_bytes([rdata[at + 2], rdata[at + 3]]));
        let end = (at + 4 + len).min(rdata.len());
        if rdata[at..at + 2] == [0, 8] {
            out.push(rdata[at..end].to_vec());
        }
        at = end;
    }
    out
}

/// An ECS option as written: family, source prefix, scope, address bytes (any, valid or not).
pub(crate) fn ecs_option(family: u16, source: u8, scope: u8, addr: &[u8]) -> EdnsOption {
    let mut data = family.to_be_bytes().to_vec();
    data.extend_from_slice(&[source, scope]);
    data.extend_from_slice(addr);
    EdnsOption::Unknown(8, data)
}

/// The valid ECS option of `subnet` ("addr/len"): the address truncated to whole bytes of
/// the prefix, as a resolver sends it.
pub(crate) fn ecs_subnet(subnet: &str) -> EdnsOption {
    let net: ipnet::IpNet = subnet.parse().expect("test subnet");
    let source = net.prefix_len();
    let bytes = usize::from(source).div_ceil(8);
    match net.trunc().addr() {
        IpAddr::V4(a) => ecs_option(1, source, 0, &a.octets()[..bytes]),
        IpAddr::V6(a) => ecs_option(2, source, 0, &a.octets()[..bytes]),
    }
}

// ---- Frames ----

pub(crate) const ETH_P_IPV4: u16 = 0x0800;
pub(crate) const ETH_P_IPV6: u16 = 0x86dd;
pub(crate) const ETH_P_ARP: u16 = 0x0806;
pub(crate) const ETH_P_8021Q: u16 = 0x8100;
pub(crate) const IPPROTO_HOPOPTS: u8 = 0;
pub(crate) const IPPROTO_TCP: u8 = 6;
pub(crate) const IPPROTO_UDP: u8 = 17;
pub(crate) const IPPROTO_FRAGMENT: u8 = 44;

/// A frame carrying one UDP (or, with `protocol`, TCP) message. Every field is public so that
/// a test states a variant as the default query with one thing changed.
#[derive(Clone, Debug)]
pub(crate) struct Frame {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    /// 802.1Q tag control information; `None` for an untagged frame.
    pub vlan: Option<u16>,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: u8,
    /// IPv4 options, a multiple of 4 bytes.
    pub ipv4_options: Vec<u8>,
    /// IPv4 flags and fragment offset, as the 16-bit header field.
    pub ipv4_frag: u16,
    /// IPv6 extension headers between the fixed header and the transport header, as
    /// (next header value naming it, its bytes); each header's own next-header byte is
    /// filled in.
    pub ipv6_ext: Vec<(u8, Vec<u8>)>,
    pub src_port: u16,
    pub dst_port: u16,
    pub payload: Vec<u8>,
    /// Zero bytes after the IP datagram: Ethernet padding or a trailer.
    pub trailer: usize,
}

impl Frame {
    /// `payload` from a client port to port 53 of `dst`, untagged.
    pub(crate) fn udp(src: IpAddr, dst: IpAddr, payload: Vec<u8>) -> Frame {
        assert_eq!(src.is_ipv4(), dst.is_ipv4(), "one address family");
        Frame {
            dst_mac: SERVER_MAC,
            src_mac: CLIENT_MAC,
            vlan: None,
            src,
            dst,
            protocol: IPPROTO_UDP,
            ipv4_options: Vec::new(),
            ipv4_frag: 0,
            ipv6_ext: Vec::new(),
            src_port: CLIENT_PORT,
            dst_port: 53,
            payload,
            trailer: 0,
        }
    }

    /// A DNS query from the default-view client of `server`'s family to `server`.
    pub(crate) fn query_to(server: IpAddr, dns: Vec<u8>) -> Frame {
        let client = match server {
            IpAddr::V4(_) => IpAddr::V4(CLIENT_V4),
            IpAddr::V6(_) => IpAddr::V6(CLIENT_V6),
        };
        Frame::udp(client, server, dns)
    }

    /// A DNS query from `client` to the test server of its family.
    pub(crate) fn query_from(client: IpAddr, dns: Vec<u8>) -> Frame {
        Frame::udp(client, server_of(client), dns)
    }

    pub(crate) fn v4(dns: Vec<u8>) -> Frame {
        Frame::query_to(IpAddr::V4(SERVER_V4), dns)
    }

    pub(crate) fn v6(dns: Vec<u8>) -> Frame {
        Frame::query_to(IpAddr::V6(SERVER_V6), dns)
    }

    pub(crate) fn bytes(&self) -> Vec<u8> {
        let segment = match self.protocol {
            IPPROTO_TCP => tcp_segment(
                self.src,
                self.dst,
                self.src_port,
                self.dst_port,
                &self.payload,
            ),
            _ => udp_datagram(
                self.src,
                self.dst,
                self.src_port,
                self.dst_port,
                &self.payload,
            ),
        };
        let (ethertype, packet) = match (self.src, self.dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                let mut ip = ipv4_header(
                    src,
                    dst,
                    self.protocol,
                    &self.ipv4_options,
                    self.ipv4_frag,
                    segment.len(),
                );
                ip.extend_from_slice(&segment);
                (ETH_P_IPV4, ip)
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                let mut exts = Vec::new();
                let mut next = self.protocol;
                for (kind, header) in self.ipv6_ext.iter().rev() {
                    let mut header = header.clone();
                    header[0] = next;
                    header.extend_from_slice(&exts);
                    exts = header;
                    next = *kind;
                }
                let mut ip = ipv6_header(src, dst, next, exts.len() + segment.len());
                ip.extend_from_slice(&exts);
                ip.extend_from_slice(&segment);
                (ETH_P_IPV6, ip)
            }
            _ => panic!("mixed address families"),
        };
        let mut frame = ethernet_header(self.dst_mac, self.src_mac, self.vlan, ethertype);
        frame.extend_from_slice(&packet);
        frame.resize(frame.len() + self.trailer, 0);
        frame
    }
}

/// Destination, source, an optional 802.1Q tag, EtherType.
pub(crate) fn ethernet_header(
    dst: [u8; 6],
    src: [u8; 6],
    vlan: Option<u16>,
    ethertype: u16,
) -> Vec<u8> {
    let mut h = Vec::with_capacity(18);
    h.extend_from_slice(&dst);
    h.extend_from_slice(&src);
    if let Some(tci) = vlan {
        h.extend_from_slice(&ETH_P_8021Q.to_be_bytes());
        h.extend_from_slice(&tci.to_be_bytes());
    }
    h.extend_from_slice(&ethertype.to_be_bytes());
    h
}

/// An IPv4 header (TTL 64, a fixed ID) with a valid header checksum, for `payload_len` bytes.
pub(crate) fn ipv4_header(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: u8,
    options: &[u8],
    frag: u16,
    payload_len: usize,
) -> Vec<u8> {
    assert!(
        options.len().is_multiple_of(4) && options.len() <= 40,
        "IPv4 options are whole words"
    );
    let header_len = 20 + options.len();
    let total = u16::try_from(header_len + payload_len).expect("IPv4 datagram too long");
    let mut h = vec![0x40 | (header_len / 4) as u8, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&0x1234u16.to_be_bytes());
    h.extend_from_slice(&frag.to_be_bytes());
    h.extend_from_slice(&[64, protocol, 0, 0]);
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    h.extend_from_slice(options);
    let check = internet_checksum(&h);
    h[10..12].copy_from_slice(&check.to_be_bytes());
    h
}

/// An IPv6 header (hop limit 64, a non-zero flow label) for `payload_len` bytes.
pub(crate) fn ipv6_header(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    next_header: u8,
    payload_len: usize,
) -> Vec<u8> {
    let payload_len = u16::try_from(payload_len).expect("IPv6 payload too long");
    let mut h = vec![0x60, 0x01, 0x23, 0x45];
    h.extend_from_slice(&payload_len.to_be_bytes());
    h.extend_from_slice(&[next_header, 64]);
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    h
}

/// An 8-byte hop-by-hop options header holding only padding (its next-header byte is set by
/// [`Frame::bytes`]).
pub(crate) fn hop_by_hop_padding() -> (u8, Vec<u8>) {
    (IPPROTO_HOPOPTS, vec![0, 0, 1, 4, 0, 0, 0, 0])
}

/// A fragment header for the first fragment, more to come.
pub(crate) fn ipv6_first_fragment() -> (u8, Vec<u8>) {
    (IPPROTO_FRAGMENT, vec![0, 0, 0x00, 0x01, 0, 0, 0x12, 0x34])
}

/// A UDP header and `payload`, with the checksum over the pseudo-header.
pub(crate) fn udp_datagram(
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    payload: &[u8],
) -> Vec<u8> {
    let len = u16::try_from(8 + payload.len()).expect("UDP datagram too long");
    let mut d = Vec::with_capacity(len as usize);
    d.extend_from_slice(&sport.to_be_bytes());
    d.extend_from_slice(&dport.to_be_bytes());
    d.extend_from_slice(&len.to_be_bytes());
    d.extend_from_slice(&[0, 0]);
    d.extend_from_slice(payload);
    let check = transport_checksum(src, dst, IPPROTO_UDP, &d);
    // Zero would mean "no checksum" (and is invalid over IPv6).
    let check = if check == 0 { 0xffff } else { check };
    d[6..8].copy_from_slice(&check.to_be_bytes());
    d
}

/// A TCP segment (PSH+ACK, no options) carrying `message` with DNS's TCP length prefix.
pub(crate) fn tcp_segment(
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    message: &[u8],
) -> Vec<u8> {
    let mut s = Vec::new();
    s.extend_from_slice(&sport.to_be_bytes());
    s.extend_from_slice(&dport.to_be_bytes());
    s.extend_from_slice(&1u32.to_be_bytes()); // sequence
    s.extend_from_slice(&1u32.to_be_bytes()); // acknowledgment
    s.extend_from_slice(&[5 << 4, 0x18]); // data offset 5 words; PSH, ACK
    s.extend_from_slice(&64240u16.to_be_bytes());
    s.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
    s.extend_from_slice(&(message.len() as u16).to_be_bytes());
    s.extend_from_slice(message);
    let check = transport_checksum(src, dst, IPPROTO_TCP, &s);
    s[16..18].copy_from_slice(&check.to_be_bytes());
    s
}

/// An ARP request from the client for the server's IPv4 address.
pub(crate) fn arp_request() -> Vec<u8> {
    let mut f = ethernet_header([0xff; 6], CLIENT_MAC, None, ETH_P_ARP);
    f.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, 1]); // Ethernet/IPv4, request
    f.extend_from_slice(&CLIENT_MAC);
    f.extend_from_slice(&CLIENT_V4.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&SERVER_V4.octets());
    f
}

/// The UDP/TCP checksum of `segment` (its checksum field zero) under the pseudo-header.
pub(crate) fn transport_checksum(src: IpAddr, dst: IpAddr, protocol: u8, segment: &[u8]) -> u16 {
    let mut data = Vec::with_capacity(40 + segment.len());
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            data.extend_from_slice(&s.octets());
            data.extend_from_slice(&d.octets());
            data.extend_from_slice(&[0, protocol]);
            data.extend_from_slice(&(segment.len() as u16).to_be_bytes());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            data.extend_from_slice(&s.octets());
            data.extend_from_slice(&d.octets());
            data.extend_from_slice(&(segment.len() as u32).to_be_bytes());
            data.extend_from_slice(&[0, 0, 0, protocol]);
        }
        _ => panic!("mixed address families"),
    }
    data.extend_from_slice(segment);
    internet_checksum(&data)
}

/// RFC 1071: the complement of the ones' complement sum of big-endian 16-bit words; an odd
/// last byte is padded with zero.
pub(crate) fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u64 = bytes
        .chunks(2)
        .map(|w| u64::from(w[0]) << 8 | u64::from(w.get(1).copied().unwrap_or(0)))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

// ---- Running the program and checking its replies ----

/// XDP actions as the program returns them.
pub(crate) const XDP_PASS: u32 = 2;
pub(crate) const XDP_TX: u32 = 3;

/// What one run of the fast path did.
pub(crate) struct Outcome {
    pub action: u32,
    pub frame: Vec<u8>,
    /// Counters that rose during the run, by how much.
    pub counted: Vec<(Counter, u64)>,
}

/// Runs the fast path once on `frame` (BPF_PROG_TEST_RUN) and notes which counters rose.
pub(crate) fn try_run(dp: &Dataplane, frame: &[u8]) -> Result<Outcome, ProgramError> {
    try_run_program(dp, dp.program(), frame)
}

/// Runs `program`, one of `dp`'s, once on `frame` and notes which of `dp`'s counters rose.
pub(crate) fn try_run_program(
    dp: &Dataplane,
    program: &Xdp,
    frame: &[u8],
) -> Result<Outcome, ProgramError> {
    let before = dp.counters().expect("reading counters");
    // A page: more than a test run lets the program grow the frame to.
    let mut out = vec![0u8; 4096];
    let result = program.test_run(TestRunOptions {
        data_in: Some(frame),
        data_out: Some(&mut out),
        ..TestRunOptions::new()
    })?;
    out.truncate(result.data_size_out as usize);
    let after = dp.counters().expect("reading counters");
    Ok(Outcome {
        action: result.return_value,
        frame: out,
        counted: after.delta(&before),
    })
}

pub(crate) fn run(dp: &Dataplane, frame: &[u8]) -> Outcome {
    try_run(dp, frame).expect("BPF_PROG_TEST_RUN")
}

/// The answer records a reply must carry.
pub(crate) enum Answers {
    /// Rotation: exactly one of these.
    OneOf(Vec<IpAddr>),
    /// All of these, in configuration order.
    All(Vec<IpAddr>),
}

/// What a reply must answer.
pub(crate) struct Expect {
    pub rtype: RecordType,
    pub ttl: u32,
    pub answers: Answers,
}

/// The hit counter of a reply of `rtype` over IPv4 or IPv6.
pub(crate) fn hit_counter(v6: bool, rtype: RecordType) -> Counter {
    match (v6, rtype) {
        (false, RecordType::A) => Counter::HitAV4,
        (false, _) => Counter::HitAaaaV4,
        (true, RecordType::A) => Counter::HitAV6,
        (true, _) => Counter::HitAaaaV6,
    }
}

/// The reply to `query` must be the query turned around, in a valid IP/UDP envelope sized
/// exactly to the DNS reply, with the expected answers. Returns the answered addresses.
pub(crate) fn assert_reply(
    case: &str,
    query: &[u8],
    out: &Outcome,
    expect: &Expect,
) -> Vec<IpAddr> {
    assert_reply_scoped(case, query, out, expect, None)
}

/// [`assert_reply`] for a query with an ECS option (`scope` given): the reply's OPT holds
/// exactly the query's ECS option, byte for byte (family, source prefix, address bytes), but
/// with the scope `scope`. Without `scope`, the OPT has no options.
pub(crate) fn assert_reply_scoped(
    case: &str,
    query: &[u8],
    out: &Outcome,
    expect: &Expect,
    scope: Option<u8>,
) -> Vec<IpAddr> {
    let TurnedAround {
        v6,
        asked,
        reply,
        question_len,
        rdns,
        counts,
    } = assert_turned_around(case, query, out, scope);
    let mut got = Vec::new();
    for rr in &reply.answers {
        assert_eq!(&rr.name, asked.queries[0].name(), "{case}: owner name");
        assert_eq!(
            (rr.record_type(), rr.dns_class, rr.ttl),
            (expect.rtype, DNSClass::IN, expect.ttl),
            "{case}: answer type, class, TTL"
        );
        got.push(match &rr.data {
            RData::A(a) => IpAddr::V4(a.0),
            RData::AAAA(a) => IpAddr::V6(a.0),
            other => panic!("{case}: answer {other:?}"),
        });
    }
    match &expect.answers {
        Answers::OneOf(set) => {
            assert_eq!(got.len(), 1, "{case}: one answer per query: {got:?}");
            assert!(
                set.contains(&got[0]),
                "{case}: {got:?} is not one of {set:?}"
            );
        }
        Answers::All(addrs) => assert_eq!(&got, addrs, "{case}: every address"),
    }

    let sent_opt = asked.edns.as_ref();
    // hickory accepts bytes past the last record; the fast path must not leave any.
    let opt_len = if sent_opt.is_some() {
        11 + opt_rdata(&rdns).map_or(0, <[u8]>::len)
    } else {
        0
    };
    let rr_len = 12 + if expect.rtype == RecordType::A { 4 } else { 16 };
    assert_eq!(
        counts,
        [1, got.len() as u16, 0, u16::from(opt_len != 0)],
        "{case}: counts"
    );
    assert_eq!(
        rdns.len(),
        12 + question_len + got.len() * rr_len + opt_len,
        "{case}: size"
    );

    assert_eq!(
        out.counted,
        [(hit_counter(v6, expect.rtype), 1)],
        "{case}: counters"
    );
    got
}

/// What [`assert_turned_around`] checked and decoded.
pub(crate) struct TurnedAround {
    pub v6: bool,
    pub asked: Message,
    pub reply: Message,
    /// Wire length of the question (name, type, class).
    pub question_len: usize,
    /// The reply's DNS message as sent.
    pub rdns: Vec<u8>,
    /// Its header's QDCOUNT, ANCOUNT, NSCOUNT and ARCOUNT.
    pub counts: [u16; 4],
}

/// The frame `out` is `query` turned around: TX, MACs, addresses and ports swapped, TTL 64,
/// both checksums right, lengths exact, a DNS response with AA (RD and CD copied, NOERROR) and
/// the question echoed byte for byte, no authority or additional records, our OPT (DO copied;
/// no options, or the query's ECS with `scope` when given) iff the query had one. The answers,
/// counts and size are the caller's to check.
pub(crate) fn assert_turned_around(
    case: &str,
    query: &[u8],
    out: &Outcome,
    scope: Option<u8>,
) -> TurnedAround {
    assert_eq!(
        out.action, XDP_TX,
        "{case}: action (counted {:?})",
        out.counted
    );
    let q = SlicedPacket::from_ethernet(query).unwrap_or_else(|e| panic!("{case}: query: {e}"));
    let r = SlicedPacket::from_ethernet(&out.frame)
        .unwrap_or_else(|e| panic!("{case}: reply does not parse: {e}"));

    let (Some(LinkSlice::Ethernet2(qeth)), Some(LinkSlice::Ethernet2(reth))) = (&q.link, &r.link)
    else {
        panic!("{case}: not Ethernet II");
    };
    assert_eq!(
        (reth.source(), reth.destination()),
        (qeth.destination(), qeth.source()),
        "{case}: MACs swapped"
    );
    assert_eq!(
        r.link_exts.len(),
        q.link_exts.len(),
        "{case}: link extensions"
    );
    let l3 = 14
        + r.link_exts
            .iter()
            .map(etherparse::LinkExtSlice::header_len)
            .sum::<usize>();
    assert_eq!(
        out.frame[12..l3],
        query[12..l3],
        "{case}: VLAN tag and EtherType kept"
    );

    let (v6, ip_header_len) = match (&q.net, &r.net) {
        (Some(NetSlice::Ipv4(qip)), Some(NetSlice::Ipv4(rip))) => {
            let (qh, rh) = (qip.header(), rip.header());
            assert_eq!(
                (rh.source(), rh.destination()),
                (qh.destination(), qh.source()),
                "{case}: addresses swapped"
            );
            assert_eq!(
                (rh.ttl(), rh.ihl(), rh.protocol()),
                (64, 5, IpNumber::UDP),
                "{case}: IPv4"
            );
            assert_eq!(
                rh.total_len() as usize,
                out.frame.len() - l3,
                "{case}: IPv4 total length"
            );
            let want = rh.to_header().calc_header_checksum();
            assert_eq!(rh.header_checksum(), want, "{case}: IPv4 header checksum");
            let kept =
                |h: &Ipv4HeaderSlice| (h.identification(), h.dont_fragment(), h.dcp(), h.ecn());
            assert_eq!(kept(&rh), kept(&qh), "{case}: other IPv4 fields kept");
            (false, 20)
        }
        (Some(NetSlice::Ipv6(qip)), Some(NetSlice::Ipv6(rip))) => {
            let (qh, rh) = (qip.header(), rip.header());
            assert_eq!(
                (rh.source(), rh.destination()),
                (qh.destination(), qh.source()),
                "{case}: addresses swapped"
            );
            assert_eq!(
                (rh.hop_limit(), rh.next_header()),
                (64, IpNumber::UDP),
                "{case}: IPv6"
            );
            let payload_len = out.frame.len() - l3 - 40;
            assert_eq!(
                rh.payload_length() as usize,
                payload_len,
                "{case}: IPv6 payload length"
            );
            assert_eq!(
                (rh.traffic_class(), rh.flow_label()),
                (qh.traffic_class(), qh.flow_label()),
                "{case}: traffic class and flow label kept"
            );
            (true, 40)
        }
        _ => panic!("{case}: reply is not IP of the query's version"),
    };

    let (Some(TransportSlice::Udp(qudp)), Some(TransportSlice::Udp(rudp))) =
        (&q.transport, &r.transport)
    else {
        panic!("{case}: not UDP");
    };
    assert_eq!(
        (rudp.source_port(), rudp.destination_port()),
        (qudp.destination_port(), qudp.source_port()),
        "{case}: ports swapped"
    );
    // The reply ends where the datagram does: no padding or trailer is carried over.
    assert_eq!(
        rudp.length() as usize,
        out.frame.len() - l3 - ip_header_len,
        "{case}: UDP length"
    );
    assert_udp_checksum(case, &r);

    let (qdns, rdns) = (qudp.payload(), rudp.payload());
    let asked = Message::from_vec(qdns).expect("test query decodes");
    let reply =
        Message::from_vec(rdns).unwrap_or_else(|e| panic!("{case}: reply does not decode: {e}"));
    assert_eq!(reply.id, asked.id, "{case}: id");
    assert_eq!(reply.message_type, MessageType::Response, "{case}: QR");
    assert_eq!(reply.op_code, OpCode::Query, "{case}: opcode");
    assert!(reply.authoritative, "{case}: AA");
    assert!(!reply.truncation, "{case}: TC");
    assert_eq!(
        reply.recursion_desired, asked.recursion_desired,
        "{case}: RD copied"
    );
    assert!(!reply.recursion_available, "{case}: RA");
    assert!(!reply.authentic_data, "{case}: AD");
    assert_eq!(
        reply.checking_disabled, asked.checking_disabled,
        "{case}: CD copied"
    );
    assert_eq!(reply.response_code, ResponseCode::NoError, "{case}: RCODE");
    let question = question_bytes(qdns);
    assert_eq!(
        question_bytes(rdns),
        question,
        "{case}: question echoed byte for byte"
    );
    assert!(
        reply.authorities.is_empty() && reply.additionals.is_empty(),
        "{case}: sections"
    );

    let sent_opt = asked.edns.as_ref();
    assert_eq!(
        reply.edns.is_some(),
        sent_opt.is_some(),
        "{case}: OPT iff the query's"
    );
    if let (Some(sent), Some(opt)) = (sent_opt, &reply.edns) {
        assert_eq!(
            (opt.max_payload(), opt.version(), opt.rcode_high()),
            (EDNS_UDP_SIZE, 0, 0),
            "{case}: OPT"
        );
        match scope {
            None => assert!(
                opt.options().as_ref().is_empty(),
                "{case}: OPT options {:?}",
                opt.options()
            ),
            Some(scope) => {
                let [mut want] = <[Vec<u8>; 1]>::try_from(ecs_options(qdns))
                    .unwrap_or_else(|o| panic!("{case}: the query has ECS options {o:?}"));
                want[7] = scope;
                assert_eq!(
                    opt_rdata(rdns),
                    Some(want.as_slice()),
                    "{case}: OPT options: the query's ECS with scope {scope}"
                );
            }
        }
        assert_eq!(
            opt.flags().dnssec_ok,
            sent.flags().dnssec_ok,
            "{case}: DO copied"
        );
    }
    TurnedAround {
        v6,
        asked,
        reply,
        question_len: question.len(),
        rdns: rdns.to_vec(),
        counts: [0, 1, 2, 3].map(|i| u16::from_be_bytes([rdns[4 + 2 * i], rdns[5 + 2 * i]])),
    }
}

/// The UDP checksum of the reply `packet` is present and right (computed by etherparse: a
/// third implementation, beside the fast path's and the kit's builders').
pub(crate) fn assert_udp_checksum(case: &str, packet: &SlicedPacket) {
    let Some(TransportSlice::Udp(udp)) = &packet.transport else {
        panic!("{case}: not UDP");
    };
    let want = match &packet.net {
        Some(NetSlice::Ipv4(ip)) => udp.to_header().calc_checksum_ipv4_raw(
            ip.header().source(),
            ip.header().destination(),
            udp.payload(),
        ),
        Some(NetSlice::Ipv6(ip)) => udp.to_header().calc_checksum_ipv6_raw(
            ip.header().source(),
            ip.header().destination(),
            udp.payload(),
        ),
        _ => panic!("{case}: not IP"),
    }
    .expect("UDP checksum");
    assert_ne!(udp.checksum(), 0, "{case}: UDP checksum present");
    assert_eq!(udp.checksum(), want, "{case}: UDP checksum");
}

/// Sends `frame` and checks the reply; returns the answered addresses.
pub(crate) fn ask(dp: &Dataplane, case: &str, frame: &Frame, expect: &Expect) -> Vec<IpAddr> {
    let bytes = frame.bytes();
    assert_reply(case, &bytes, &run(dp, &bytes), expect)
}

/// [`ask`] with an ECS query: the reply echoes the option with `scope`.
pub(crate) fn ask_scoped(
    dp: &Dataplane,
    case: &str,
    frame: &Frame,
    expect: &Expect,
    scope: u8,
) -> Vec<IpAddr> {
    let bytes = frame.bytes();
    assert_reply_scoped(case, &bytes, &run(dp, &bytes), expect, Some(scope))
}

/// A frame the fast path cannot answer exactly goes to the stack untouched, for `reason`.
pub(crate) fn assert_passed(case: &str, dp: &Dataplane, frame: &[u8], reason: Counter) {
    let out = run(dp, frame);
    assert_eq!(out.action, XDP_PASS, "{case}: action");
    assert_eq!(out.counted, [(reason, 1)], "{case}: counters");
    assert!(
        out.frame == frame,
        "{case}: a passed frame must reach the stack unchanged"
    );
}

// ---- gslbd in this process ----

/// Held by the tests whose in-process gslbd runs a task that every gslbd of this process names
/// alike (`mep-persist-sync` with MEP on), shared among them; exclusively by the tests that kill
/// such a task by its name (`supervise::inject_panic` kills every task of that name), so that
/// no other test's daemon is killed with it. All the tests are one binary, so they share the
/// supervision registry.
static SAME_NAMED_TASKS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// For a test whose gslbd runs MEP (see [`SAME_NAMED_TASKS`]); hold it until gslbd stopped.
pub(crate) async fn running_same_named_tasks() -> tokio::sync::RwLockReadGuard<'static, ()> {
    SAME_NAMED_TASKS.read().await
}

/// For a test that kills `mep-persist-sync` (see [`SAME_NAMED_TASKS`]).
pub(crate) async fn killing_same_named_tasks() -> tokio::sync::RwLockWriteGuard<'static, ()> {
    SAME_NAMED_TASKS.write().await
}

/// gslbd running in this process on `path`, on the sockets the test bound ([`bound_dns`],
/// and [`bound_mep`] for MEP) whose ports the file names; responder only (`no_xdp`, so no
/// privileges are needed) unless the test's [`Overrides`] say otherwise.
pub(crate) struct Gslbd {
    /// What SIGHUP and the control socket's `reload` feed: a [`Reload`] without a reply is
    /// SIGHUP's.
    pub reloads: mpsc::Sender<Reload>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), DaemonError>>,
    /// How long it may take to start, to answer a reload and to stop.
    wait: Duration,
}

impl Gslbd {
    /// Starts gslbd on the file `path` and the sockets `dns`, responder only, with its control
    /// socket at `control` (required) if given, and waits until it is ready.
    pub(crate) async fn start_bound(
        path: &Path,
        dns: Listeners,
        control: Option<PathBuf>,
        wait: Duration,
    ) -> Gslbd {
        Gslbd::start_bound_with(path, Gslbd::responder_only(control), dns, wait).await
    }

    /// What [`Gslbd::start_bound`] runs with: the responder alone, the control socket at
    /// `control` (required) if given.
    pub(crate) fn responder_only(control: Option<PathBuf>) -> Overrides {
        Overrides {
            no_xdp: true,
            control: control.map(|path| ControlPath {
                path,
                required: true,
            }),
            ..Overrides::default()
        }
    }

    /// [`Gslbd::start_bound`] with the command line's `overrides` (the fast path loaded, say).
    pub(crate) async fn start_bound_with(
        path: &Path,
        overrides: Overrides,
        dns: Listeners,
        wait: Duration,
    ) -> Gslbd {
        Gslbd::try_start_bound_with(path, overrides, dns, wait)
            .await
            .expect("gslbd starts")
    }

    /// [`Gslbd::start_bound_with`], for a test of a start that fails: the error of a gslbd
    /// that ended before it was ready.
    pub(crate) async fn try_start_bound_with(
        path: &Path,
        overrides: Overrides,
        dns: Listeners,
        wait: Duration,
    ) -> Result<Gslbd, DaemonError> {
        init_tracing();
        let (ready_tx, ready_rx) = oneshot::channel();
        let (stop, stop_rx) = oneshot::channel::<()>();
        let (reloads, reload_rx) = mpsc::channel::<Reload>(4);
        let task = tokio::spawn(daemon::run(
            path.to_owned(),
            overrides,
            dns,
            move || {
                let _ = ready_tx.send(());
            },
            async move {
                let _ = stop_rx.await;
            },
            reload_rx,
        ));
        let ready = tokio::time::timeout(wait, ready_rx)
            .await
            .expect("gslbd ready (or failed) in time");
        if ready.is_err() {
            // `ready` was dropped unsent: `run` ended before it was ready.
            let ended = tokio::time::timeout(wait, task)
                .await
                .expect("gslbd ends")
                .expect("gslbd's task");
            return Err(ended.expect_err("gslbd ended before it was ready, without an error"));
        }
        Ok(Gslbd {
            reloads,
            stop,
            task,
            wait,
        })
    }

    /// Reloads the file; the outcome once the new answers are published (or refused).
    pub(crate) async fn reload(&self) -> Result<(), String> {
        let (reply, outcome) = oneshot::channel();
        self.reloads
            .send(Reload { reply: Some(reply) })
            .await
            .unwrap();
        tokio::time::timeout(self.wait, outcome)
            .await
            .expect("reload answered in time")
            .expect("reload answered")
            .map_err(|refused| refused.to_string())
    }

    /// Stops it as SIGTERM does; it must shut down cleanly.
    pub(crate) async fn stop(self) {
        self.stop.send(()).unwrap();
        tokio::time::timeout(self.wait, self.task)
            .await
            .expect("gslbd stops")
            .unwrap()
            .expect("clean shutdown");
    }
}

/// How the files of the in-process gslbd tests begin: gslbd on 127.0.0.1:`port`, authoritative
/// for example.com, whose name server ns1.example.com is 127.0.0.1.
pub(crate) fn loopback_zone(port: u16) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1"]
dns_port = {port}

[[zone]]
name = "example.com"
ns = ["ns1.example.com"]
  [zone.soa]
  rname = "hostmaster.example.com"
  [[zone.record]]
  name = "ns1"
  type = "A"
  value = "127.0.0.1"
"#
    )
}

/// `gslbctl stats` of the gslbd whose control socket is `path`, as (name, value): the lines
/// whose value is a number.
pub(crate) async fn control_stats(path: &Path) -> std::collections::HashMap<String, u64> {
    let body = control::request(path, "stats", WAIT)
        .await
        .unwrap_or_else(|e| panic!("stats from {}: {e}", path.display()));
    body.lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter_map(|(k, v)| Some((k.to_owned(), v.parse().ok()?)))
        .collect()
}

/// The address web1 answers with in [`two_parents`].
pub(crate) const WEB1: &str = "192.0.2.1";
/// The address web2 answers with in [`two_parents`].
pub(crate) const WEB2: &str = "192.0.2.2";

/// The sites and services of the MEP tests with two parents: p1 at 127.0.0.1 (with `p1_extra`
/// in its table) and p2 at 127.0.0.2, on their MEP ports; web1 is p1's, answering [`WEB1`],
/// checked by a TCP monitor ("tcp", fall 2 at 50 ms) on 127.0.0.1:`backend`; web2 is p2's.
pub(crate) fn two_parents(p1_mep: u16, p2_mep: u16, backend: u16, p1_extra: &str) -> String {
    format!(
        r#"
[[site]]
name = "p1"
ip = "127.0.0.1"
mep_port = {p1_mep}
{p1_extra}

[[site]]
name = "p2"
ip = "127.0.0.2"
mep_port = {p2_mep}

[[monitor]]
name = "tcp"
type = "tcp"
interval_ms = 50
timeout_ms = 200
fall = 2
rise = 1

[[service]]
name = "web1"
ip = "127.0.0.1"
port = {backend}
public_ip = "{WEB1}"
site = "p1"
monitors = ["tcp"]

[[service]]
name = "web2"
ip = "{WEB2}"
site = "p2"
"#
    )
}

/// Longest wait of the in-process gslbd tests for anything (the CI machine runs other suites
/// at the same time).
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// Polls `f` every 10 ms until it holds, or panics after [`WAIT`].
pub(crate) async fn until(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + WAIT;
    while !f().await {
        assert!(
            std::time::Instant::now() < deadline,
            "not within {WAIT:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The A answer for www.example.com from the server on 127.0.0.1:`port`, in reply order (asked
/// off the runtime's threads, as [`ask_loopback`] blocks).
pub(crate) async fn www(port: u16) -> Vec<IpAddr> {
    tokio::task::spawn_blocking(move || {
        answer_addrs(&ask_loopback(port, "www.example.com.", RecordType::A))
    })
    .await
    .expect("the query's thread")
}

/// Asks [`www`] until it is `want` in this order (monitors take a few intervals, a reload is
/// applied asynchronously), or panics after [`WAIT`].
pub(crate) async fn answer_becomes(port: u16, want: &[&str]) {
    www_becomes(port, want, false, "www").await;
}

/// [`answer_becomes`] in any order; `what` says what the answer shows.
pub(crate) async fn answer_set_becomes(port: u16, want: &[&str], what: &str) {
    www_becomes(port, want, true, what).await;
}

async fn www_becomes(port: u16, want: &[&str], any_order: bool, what: &str) {
    let sorted = |mut v: Vec<IpAddr>| {
        if any_order {
            v.sort();
        }
        v
    };
    let want = sorted(ips(want));
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let got = sorted(www(port).await);
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: the answer stayed {got:?}, not {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---- Configuration errors ----

/// Each case is a configuration text with one line marked `#<`, the text on that line the error
/// must point at, and what its reason must contain. Parsed as `file`, every case must be
/// refused with that reason, at that line and column of `file`; the failures of all cases are
/// reported at once.
pub(crate) fn assert_refused_at_markers(cases: &[(String, &str, &str)], file: &Path) {
    let mut failures = Vec::new();
    for (text, at, reason) in cases {
        let (line_no, line) = text
            .lines()
            .enumerate()
            .find(|(_, l)| l.contains("#<"))
            .expect("case has a #< marker");
        let want = (
            line_no + 1,
            line[..line
                .find(at)
                .unwrap_or_else(|| panic!("{at:?} in {line:?}"))]
                .chars()
                .count()
                + 1,
        );
        match Config::parse(text, file) {
            Ok(_) => failures.push(format!("accepted, wanted {reason:?}:\n{text}")),
            Err(ConfigError::Invalid {
                file: f,
                line,
                column,
                reason: got,
            }) => {
                if !got.contains(reason) || (line, column) != want || f != file {
                    failures.push(format!(
                        "{}:{line}:{column}: {got}\n  wanted {}:{}:{}: …{reason}…\n{text}",
                        f.display(),
                        file.display(),
                        want.0,
                        want.1
                    ));
                }
            }
            Err(e) => failures.push(format!("{e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

// ---- Load monitor backends ----

mod loopback;
pub(crate) mod metrics;

#[allow(unused_imports)] // the XDP benchmark includes this kit and uses none of them
pub(crate) use loopback::{
    Backend, PortTaken, bound_dns, bound_dns_on, bound_mep, refusing_tcp_port, start_on_picked_port,
};
