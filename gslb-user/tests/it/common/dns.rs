//! DNS messages: queries built, answers read, asked of the responder or a server on the loopback.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::rdata::opt::EdnsOption;
use hickory_proto::rr::{Name, RData, RecordType};

use super::EDNS_UDP_SIZE;

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

/// `dig @127.0.0.1 -p PORT ARGS…` (over UDP unless `args` say `+tcp`, no recursion asked), its
/// output.
pub(crate) async fn dig_loopback(port: u16, args: &[&str]) -> String {
    let port = port.to_string();
    let mut cmd = tokio::process::Command::new("dig");
    cmd.args(["@127.0.0.1", "-p", &port, "+norec", "+time=2", "+tries=1"])
        .args(args);
    let out = cmd.output().await.expect("dig runs (bind9-dnsutils)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The DNS cookie secret of the tests that configure cookies (`server.cookie_secret`; RFC 9018
/// Appendix A's).
pub(crate) const COOKIE_SECRET: &str = "e5e973e5a6b2a43f48e7dc849e37bfcf";

/// Seconds since the epoch mod 2^32: the cookies' clock.
pub(crate) fn unix_now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as u32
}

/// A COOKIE option's data as a client brings it back: its client cookie `client_cookie` and
/// the server cookie `secret` (hex) gave `client` at `stamp` (seconds since the epoch).
pub(crate) fn cookie_made(
    secret: &str,
    client_cookie: [u8; 8],
    client: IpAddr,
    stamp: u32,
) -> Vec<u8> {
    let secret: [u8; 16] = data_encoding::HEXLOWER
        .decode(secret.as_bytes())
        .expect("hex")
        .try_into()
        .expect("16 bytes");
    let mut data = client_cookie.to_vec();
    data.extend(gslb_user::responder::server_cookie(
        &secret,
        client_cookie,
        [0; 3],
        stamp,
        client,
    ));
    data
}

/// The COOKIE option carrying `data`.
pub(crate) fn cookie_option(data: Vec<u8>) -> EdnsOption {
    EdnsOption::Unknown(10, data)
}
