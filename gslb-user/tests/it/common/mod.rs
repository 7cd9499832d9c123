//! Shared by the XDP tests (and the XDP benchmark): the privilege check, a loaded dataplane with
//! the test configuration, builders for Ethernet frames carrying DNS queries, and running the
//! program on a frame with the checks of its reply. Also shared by the other tests: asking the
//! responder or a server on the loopback, gslbd run in the test's process, and the check of a
//! configuration's errors against the places its cases mark.
//!
//! The test configuration, the frame builders and the differential check of a fast-path reply
//! live in the kit (`gslb_tests::xdp`, re-exported here), where the fuzz targets reach them too.
#![allow(dead_code)] // each test binary uses a different part

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::Duration;

use aya::programs::{ProgramError, TestRun, TestRunOptions, Xdp};
use etherparse::{IpNumber, Ipv4HeaderSlice, LinkSlice, NetSlice, SlicedPacket, TransportSlice};
use gslb_common::Counter;
use gslb_user::{
    compile::Snapshot,
    config::{Config, ConfigError},
    control::{self, ControlPath, Reload},
    daemon::{self, DaemonError, Listeners, Overrides, Started},
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

// ---- The test configuration, frames and the differential check (in the kit) ----

#[allow(unused_imports)] // each includer uses a different part
pub(crate) use gslb_tests::xdp::*;

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

// ---- Running the program and checking its replies ----

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
        let path = path.to_owned();
        let task = tokio::spawn(async move {
            let config = daemon::load_config(&path, &overrides)?;
            let started = Started::with_listeners(&config, &overrides, dns)?;
            let ready = move || {
                let _ = ready_tx.send(());
            };
            let shutdown = async move {
                let _ = stop_rx.await;
            };
            Box::pin(daemon::run(
                path, config, overrides, started, ready, shutdown, reload_rx,
            ))
            .await
        });
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
