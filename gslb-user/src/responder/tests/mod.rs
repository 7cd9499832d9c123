//! The responder's rules, one row each, without sockets: every case of
//! `gslb_tests::responder_config` sent to [`Responder::respond`] and its reply compared
//! section by section. Then the request-path fuzz test; the hostile messages in [`hostile`].

use std::{
    collections::HashMap,
    net::{Ipv4Addr, Ipv6Addr},
    path::Path,
};

use crate::config::Config;
use gslb_tests::{BIG_TXT_LEN, HUGE_TXT_LEN, responder_config};
use hickory_proto::{
    op::{Edns, Message, MessageType, OpCode, Query, ResponseCode},
    rr::{DNSClass, Name, Record, RecordType},
};

use super::*;

mod cname;
mod cookies;
mod hostile;
mod identity;
mod wildcard;

fn responder() -> Responder {
    let config = Config::parse(&responder_config(), Path::new("responder.toml"))
        .expect("the shared test configuration is valid");
    Responder::new(&Snapshot::from_config(&config))
}

// ---- Clients (see the views of `responder_config`) ----

/// In views "wide" (/24) and "host" (/32): gets "host" by longest prefix.
const HOST: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10));
/// The same client on a dual-stack socket.
const HOST_MAPPED: IpAddr = IpAddr::V6(Ipv4Addr::new(192, 0, 2, 10).to_ipv6_mapped());
/// In view "wide" only.
const WIDE: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 99));
/// In no view: the default view.
const OUTSIDE: IpAddr = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 5));
const OUTSIDE_V6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, 1));

/// Our EDNS UDP size (`server.edns_udp_size`).
const OUR_SIZE: u16 = 1232;
const ID: u16 = 0x1234;

// ---- Requests ----

/// A query as a resolver sends it (ID, RD clear, QUERY, one IN question), without EDNS.
fn query(name: &str, qtype: RecordType) -> Message {
    let mut m = Message::new(ID, MessageType::Query, OpCode::Query);
    m.add_query(Query::query(
        Name::from_ascii(name).expect("test name"),
        qtype,
    ));
    m
}

fn edns(mut m: Message, payload: u16, version: u8) -> Message {
    let mut e = Edns::new();
    e.set_max_payload(payload).set_version(version);
    m.set_edns(e);
    m
}

fn class(mut m: Message, class: DNSClass) -> Message {
    let mut q = m.queries[0].clone();
    q.set_query_class(class);
    m.queries = vec![q];
    m
}

fn opcode(mut m: Message, op: OpCode) -> Message {
    m.metadata.op_code = op;
    m
}

fn wire(m: &Message) -> Vec<u8> {
    m.to_vec().expect("test query encodes")
}

// ---- Replies ----

/// A reply reduced to what the rules are about: records as "owner TTL TYPE data".
#[derive(Clone, Debug, PartialEq, Eq)]
struct Reply {
    rcode: ResponseCode,
    aa: bool,
    tc: bool,
    answer: Vec<String>,
    authority: Vec<String>,
    additional: Vec<String>,
    /// The OPT record's UDP payload size; `None` without an OPT.
    opt: Option<u16>,
}

fn show(r: &Record) -> String {
    format!("{} {} {} {}", r.name, r.ttl, r.record_type(), r.data)
}

fn strings(rrs: &[&str]) -> Vec<String> {
    rrs.iter().map(ToString::to_string).collect()
}

impl Reply {
    fn of(m: &Message) -> Reply {
        // 16 is BADVERS with an OPT and BADSIG with a TSIG; hickory decodes it as BADSIG.
        let rcode = match m.response_code {
            ResponseCode::BADSIG => ResponseCode::BADVERS,
            rcode => rcode,
        };
        Reply {
            rcode,
            aa: m.authoritative,
            tc: m.truncation,
            answer: m.answers.iter().map(show).collect(),
            authority: m.authorities.iter().map(show).collect(),
            additional: m.additionals.iter().map(show).collect(),
            opt: m.edns.as_ref().map(Edns::max_payload),
        }
    }
    fn answer(mut self, rrs: &[&str]) -> Self {
        self.answer = strings(rrs);
        self
    }
    fn authority(mut self, rrs: &[&str]) -> Self {
        self.authority = strings(rrs);
        self
    }
    fn additional(mut self, rrs: &[&str]) -> Self {
        self.additional = strings(rrs);
        self
    }
    fn not_aa(mut self) -> Self {
        self.aa = false;
        self
    }
    fn tc(mut self) -> Self {
        self.tc = true;
        self
    }
    fn opt(mut self) -> Self {
        self.opt = Some(OUR_SIZE);
        self
    }
}

/// An authoritative reply with `rcode` and empty sections.
fn reply(rcode: ResponseCode) -> Reply {
    Reply {
        rcode,
        aa: true,
        tc: false,
        answer: vec![],
        authority: vec![],
        additional: vec![],
        opt: None,
    }
}

fn noerror(answer: &[&str]) -> Reply {
    reply(ResponseCode::NoError).answer(answer)
}

/// `name` `qtype` from `client` over UDP, without EDNS: the reply reduced.
fn ask(r: &Responder, name: &str, qtype: RecordType, client: IpAddr) -> Reply {
    let bytes = r
        .respond(&wire(&query(name, qtype)), client, Transport::Udp)
        .expect("a reply");
    Reply::of(&Message::from_vec(&bytes).expect("the reply parses"))
}

/// NODATA: NOERROR, no answer (or only the CNAME chain), the SOA with the negative TTL.
fn nodata() -> Reply {
    reply(ResponseCode::NoError).authority(&[SOA_COM_NEG])
}

fn nxdomain(soa: &str) -> Reply {
    reply(ResponseCode::NXDomain).authority(&[soa])
}

/// An error without records, AA clear (REFUSED, FORMERR, NOTIMP, BADVERS).
fn error(rcode: ResponseCode) -> Reply {
    reply(rcode).not_aa()
}

const SOA_COM: &str =
    "example.com. 3600 SOA ns1.example.com. hostmaster.example.com. 7 3600 600 604800 60";
/// min(zone TTL 3600, SOA minimum 60).
const SOA_COM_NEG: &str =
    "example.com. 60 SOA ns1.example.com. hostmaster.example.com. 7 3600 600 604800 60";
/// min(zone TTL 30, SOA minimum 300).
const SOA_ORG_NEG: &str =
    "example.org. 30 SOA ns1.example.com. hostmaster.example.org. 1 3600 600 604800 300";
const WWW_HOST_A: &str = "www.example.com. 30 A 192.0.2.80";
const LAB_NS: &str = "lab.example.com. 3600 NS ns.lab.example.com.";
const LAB_GLUE: &str = "ns.lab.example.com. 3600 A 192.0.2.70";
const ALL_A: [&str; 8] = [
    "all.example.com. 20 A 203.0.113.21",
    "all.example.com. 20 A 203.0.113.22",
    "all.example.com. 20 A 203.0.113.23",
    "all.example.com. 20 A 203.0.113.24",
    "all.example.com. 20 A 203.0.113.25",
    "all.example.com. 20 A 203.0.113.26",
    "all.example.com. 20 A 203.0.113.27",
    "all.example.com. 20 A 203.0.113.28",
];

fn txt_answer(name: &str, len: usize, letter: &str) -> String {
    format!("{name}.example.com. 3600 TXT {}", letter.repeat(len))
}

// ---- The table ----

struct Case {
    what: &'static str,
    request: Vec<u8>,
    client: IpAddr,
    transport: Transport,
    /// The reply to each sending of the request, in order (several for rotation); `None`:
    /// no reply at all.
    replies: Vec<Option<Reply>>,
}

/// `request` over UDP from a client in no view, answered with `reply`.
fn case(what: &'static str, request: Vec<u8>, reply: Reply) -> Case {
    Case {
        what,
        request,
        client: OUTSIDE,
        transport: Transport::Udp,
        replies: vec![Some(reply)],
    }
}

fn silent(what: &'static str, request: Vec<u8>) -> Case {
    Case {
        what,
        request,
        client: OUTSIDE,
        transport: Transport::Udp,
        replies: vec![None],
    }
}

impl Case {
    fn from(mut self, client: IpAddr) -> Self {
        self.client = client;
        self
    }
    fn tcp(mut self) -> Self {
        self.transport = Transport::Tcp;
        self
    }
    /// The reply to the request sent once more.
    fn then(mut self, reply: Reply) -> Self {
        self.replies.push(Some(reply));
        self
    }
}

/// The header of a query with the given counts, then `rest`.
fn raw(qdcount: u16, arcount: u16, rest: &[u8]) -> Vec<u8> {
    let mut m = Vec::from(ID.to_be_bytes());
    m.extend_from_slice(&[0x00, 0x00]); // QR=0, QUERY
    for count in [qdcount, 0, 0, arcount] {
        m.extend_from_slice(&count.to_be_bytes());
    }
    m.extend_from_slice(rest);
    m
}

/// The question section of a query for `name` A IN, uncompressed.
fn question(name: &str) -> Vec<u8> {
    let mut q = Vec::new();
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

fn cases() -> Vec<Case> {
    use RecordType::*;
    use ResponseCode::*;
    let q = |name, qtype| wire(&query(name, qtype));
    let two_questions = [question("txt.example.com"), question("www.example.com")].concat();
    let mut a_response = query("www.example.com", A);
    a_response.metadata.message_type = MessageType::Response;
    vec![
        // Authoritative data.
        case(
            "SOA at the apex",
            q("example.com", SOA),
            noerror(&[SOA_COM]),
        ),
        case(
            "NS at the apex: the addresses of the servers in our zones in additional (RFC 1035 \
             §3.3.11), as NSD and Knot give them",
            q("example.com", NS),
            noerror(&[
                "example.com. 3600 NS ns1.example.com.",
                "example.com. 3600 NS ns2.example.net.",
            ])
            .additional(&[
                "ns1.example.com. 3600 A 192.0.2.53",
                "ns1.example.com. 3600 AAAA 2001:db8::53",
            ]),
        ),
        case(
            "NS of a zone whose server is in another of our zones: its addresses too",
            q("example.org", NS),
            noerror(&["example.org. 30 NS ns1.example.com."]).additional(&[
                "ns1.example.com. 3600 A 192.0.2.53",
                "ns1.example.com. 3600 AAAA 2001:db8::53",
            ]),
        ),
        case(
            "static A",
            q("ns1.example.com", A),
            noerror(&["ns1.example.com. 3600 A 192.0.2.53"]),
        ),
        case(
            "static AAAA",
            q("ns1.example.com", AAAA),
            noerror(&["ns1.example.com. 3600 AAAA 2001:db8::53"]),
        ),
        case(
            "static A with its own TTL",
            q("mail.example.com", A),
            noerror(&["mail.example.com. 300 A 192.0.2.25"]),
        ),
        case(
            "static TXT",
            q("txt.example.com", TXT),
            noerror(&["txt.example.com. 3600 TXT hello"]),
        ),
        // Static records beside GSLB names (issue 29): the GSLB domain answers A and AAAA, the
        // zone every other type at its name.
        case(
            "static TXT beside a GSLB name",
            q("all.example.com", TXT),
            noerror(&["all.example.com. 3600 TXT v=spf1 -all"]),
        ),
        case(
            "static MX beside a GSLB name, the exchange's address in additional",
            q("all.example.com", MX),
            noerror(&["all.example.com. 3600 MX 10 mail.example.com."])
                .additional(&["mail.example.com. 300 A 192.0.2.25"]),
        ),
        case(
            "NODATA beside a GSLB name: a type neither has",
            q("all.example.com", SRV),
            nodata(),
        ),
        case(
            "GSLB apex: A from its services",
            q("example.org", A),
            noerror(&[
                "example.org. 30 A 203.0.113.21",
                "example.org. 30 A 203.0.113.22",
            ]),
        ),
        case(
            "GSLB apex: MX from the zone",
            q("example.org", MX),
            noerror(&["example.org. 30 MX 10 mail.example.com."])
                .additional(&["mail.example.com. 300 A 192.0.2.25"]),
        ),
        case(
            "GSLB apex: TXT from the zone",
            q("example.org", TXT),
            noerror(&["example.org. 30 TXT org"]),
        ),
        case(
            "GSLB apex: SOA from the zone",
            q("example.org", SOA),
            noerror(&[
                "example.org. 30 SOA ns1.example.com. hostmaster.example.org. 1 3600 600 604800 300",
            ]),
        ),
        case(
            "GSLB apex without IPv6 services: NODATA with its zone's SOA",
            q("example.org", AAAA),
            reply(NoError).authority(&[SOA_ORG_NEG]),
        ),
        case(
            "static MX at the apex, the exchange's address in additional (RFC 1035 §3.3.9)",
            q("example.com", MX),
            noerror(&["example.com. 3600 MX 10 mail.example.com."])
                .additional(&["mail.example.com. 300 A 192.0.2.25"]),
        ),
        case(
            "static SRV, the target's address in additional (RFC 2782), as Knot",
            q("_sip._tcp.example.com", SRV),
            noerror(&["_sip._tcp.example.com. 3600 SRV 10 60 5060 sip.example.com."])
                .additional(&["sip.example.com. 3600 A 192.0.2.60"]),
        ),
        case(
            "static CNAME asked for itself",
            q("alias.example.com", CNAME),
            noerror(&["alias.example.com. 3600 CNAME www.example.com."]),
        ),
        case(
            "names match case-insensitively",
            q("TXT.Example.COM", TXT),
            noerror(&["TXT.Example.COM. 3600 TXT hello"]),
        ),
        case(
            "the question is echoed as sent (0x20), answers point at it",
            q("WwW.eXaMpLe.CoM", A),
            noerror(&["WwW.eXaMpLe.CoM. 30 A 192.0.2.80"]),
        )
        .from(HOST),
        // CNAME chains.
        case(
            "CNAME to a GSLB name: the CNAME and the target's answer",
            q("alias.example.com", A),
            noerror(&["alias.example.com. 3600 CNAME www.example.com.", WWW_HOST_A]),
        )
        .from(HOST),
        case(
            "CNAME chain of two inside the zone",
            q("chain.example.com", A),
            noerror(&[
                "chain.example.com. 3600 CNAME alias.example.com.",
                "alias.example.com. 3600 CNAME www.example.com.",
                WWW_HOST_A,
            ]),
        )
        .from(HOST),
        case(
            "CNAME into another of our zones",
            q("to-org.example.com", A),
            noerror(&[
                "to-org.example.com. 3600 CNAME www.example.org.",
                "www.example.org. 30 A 192.0.2.90",
            ]),
        ),
        case(
            "CNAME leaving our zones stops at the CNAME",
            q("cdn.example.com", A),
            noerror(&["cdn.example.com. 3600 CNAME edge.cdn.example.net."]),
        ),
        case(
            "CNAME to a name without the type: the CNAME, then NODATA",
            q("alias.example.com", TXT),
            nodata().answer(&["alias.example.com. 3600 CNAME www.example.com."]),
        ),
        case(
            "CNAME to a missing name: NXDOMAIN for the last name (RFC 6604)",
            q("dangling.example.com", A),
            nxdomain(SOA_COM_NEG)
                .answer(&["dangling.example.com. 3600 CNAME nowhere.example.com."]),
        ),
        case(
            "CNAME loop: each CNAME once",
            q("loop1.example.com", A),
            noerror(&[
                "loop1.example.com. 3600 CNAME loop2.example.com.",
                "loop2.example.com. 3600 CNAME loop1.example.com.",
            ]),
        ),
        case(
            "CNAME into a delegation: the CNAME, then the referral (RFC 1034 §4.3.2), as NSD \
             and Knot",
            q("into-lab.example.com", A),
            noerror(&["into-lab.example.com. 3600 CNAME host.lab.example.com."])
                .authority(&[LAB_NS])
                .additional(&[LAB_GLUE]),
        ),
        // Names and types that do not exist.
        case(
            "NXDOMAIN with the SOA at min(TTL, minimum)",
            q("nope.example.com", A),
            nxdomain(SOA_COM_NEG),
        ),
        case(
            "NXDOMAIN, zone TTL below the SOA minimum",
            q("nope.example.org", A),
            nxdomain(SOA_ORG_NEG),
        ),
        case(
            "NXDOMAIN below an existing leaf",
            q("x.txt.example.com", A),
            nxdomain(SOA_COM_NEG),
        ),
        case(
            "NODATA: static name without the type",
            q("txt.example.com", A),
            nodata(),
        ),
        case("NODATA: the apex without A", q("example.com", A), nodata()),
        case(
            "NODATA: GSLB name without the type",
            q("www.example.com", TXT),
            nodata(),
        ),
        case(
            "NODATA: GSLB name without IPv6 services",
            q("all.example.com", AAAA),
            nodata(),
        ),
        case(
            "NODATA: empty non-terminal",
            q("dept.example.com", A),
            nodata(),
        ),
        case(
            "NODATA: empty non-terminal of a SRV owner",
            q("_tcp.example.com", SRV),
            nodata(),
        ),
        // Not ours.
        case(
            "REFUSED outside our zones",
            q("www.example.net", A),
            error(Refused),
        ),
        case("REFUSED above our zone", q("com", NS), error(Refused)),
        case(
            "REFUSED for a name that only ends like our zone",
            q("notexample.com", A),
            error(Refused),
        ),
        case(
            "REFUSED for class CH",
            wire(&class(query("version.bind", TXT), DNSClass::CH)),
            error(Refused),
        ),
        case(
            "REFUSED for class CH of one of our names",
            wire(&class(query("txt.example.com", TXT), DNSClass::CH)),
            error(Refused),
        ),
        case(
            "class ANY: the class IN data, not authoritative for every class (as NSD)",
            wire(&class(query("txt.example.com", TXT), DNSClass::ANY)),
            noerror(&["txt.example.com. 3600 TXT hello"]).not_aa(),
        ),
        case(
            "class ANY: NXDOMAIN from the class IN data, not authoritative",
            wire(&class(query("nope.example.com", A), DNSClass::ANY)),
            nxdomain(SOA_COM_NEG).not_aa(),
        ),
        case(
            "class ANY outside our zones: REFUSED",
            wire(&class(query("www.example.net", A), DNSClass::ANY)),
            error(Refused),
        ),
        case(
            "class NONE: REFUSED",
            wire(&class(query("txt.example.com", TXT), DNSClass::NONE)),
            error(Refused),
        ),
        case(
            "referral below a delegation: NS in authority, glue in additional",
            q("host.lab.example.com", A),
            reply(NoError)
                .not_aa()
                .authority(&[LAB_NS])
                .additional(&[LAB_GLUE]),
        ),
        case(
            "referral at the delegation point",
            q("lab.example.com", NS),
            reply(NoError)
                .not_aa()
                .authority(&[LAB_NS])
                .additional(&[LAB_GLUE]),
        ),
        // Malformed and unsupported.
        case(
            "FORMERR: garbage after a valid header",
            raw(1, 0, &[0xff; 20]),
            error(FormErr),
        ),
        case(
            "FORMERR: truncated question",
            raw(1, 0, &question("www.example.com")[..9]),
            error(FormErr),
        ),
        case(
            "FORMERR: QDCOUNT=2",
            raw(2, 0, &two_questions),
            error(FormErr),
        ),
        case("FORMERR: QDCOUNT=0", raw(0, 0, &[]), error(FormErr)),
        case(
            "FORMERR: QDCOUNT=0 with an OPT gets ours (RFC 6891 §6.1.1), as Knot",
            raw(0, 1, &[0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0]),
            error(FormErr).opt(),
        ),
        case(
            "NOTIMP: another opcode without a question, with an OPT, gets ours",
            {
                let mut m = raw(0, 1, &[0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0]);
                m[2] = 15 << 3;
                m
            },
            error(NotImp).opt(),
        ),
        case(
            "AXFR over UDP: NOTIMP, AXFR being defined over TCP only (RFC 5936 §4.2), as NSD \
             and Knot",
            q("example.com", AXFR),
            error(NotImp),
        ),
        case(
            "AXFR over TCP: REFUSED, no zone is transferred",
            q("example.com", AXFR),
            error(Refused),
        )
        .tcp(),
        case(
            "FORMERR: bytes after a complete query",
            [q("www.example.com", A), vec![0; 4]].concat(),
            error(FormErr),
        ),
        case(
            "NOTIMP: NOTIFY",
            wire(&opcode(query("example.com", SOA), OpCode::Notify)),
            error(NotImp),
        ),
        case(
            "NOTIMP: UPDATE",
            wire(&opcode(query("example.com", SOA), OpCode::Update)),
            error(NotImp),
        ),
        case(
            "NOTIMP: STATUS",
            wire(&opcode(query("example.com", SOA), OpCode::Status)),
            error(NotImp),
        ),
        silent("no reply to a response (QR=1)", wire(&a_response)),
        silent("no reply to 11 bytes", raw(1, 0, &[])[..11].to_vec()),
        silent("no reply to nothing", vec![]),
        // ANY (RFC 8482): one RRset.
        case(
            "ANY at the apex: one RRset",
            q("example.com", ANY),
            noerror(&[SOA_COM]),
        ),
        case(
            "ANY at a static name: one RRset",
            q("ns1.example.com", ANY),
            noerror(&["ns1.example.com. 3600 A 192.0.2.53"]),
        ),
        case(
            "ANY at an all-addresses GSLB name: its A RRset",
            q("all.example.com", ANY),
            noerror(&ALL_A),
        ),
        // GSLB answers: the fast path's.
        case(
            "GSLB: longest prefix picks the view",
            q("www.example.com", A),
            noerror(&[WWW_HOST_A]),
        )
        .from(HOST),
        case(
            "GSLB: IPv4-mapped client is the IPv4 client",
            q("www.example.com", A),
            noerror(&[WWW_HOST_A]),
        )
        .from(HOST_MAPPED),
        case(
            "GSLB: AAAA of the view",
            q("www.example.com", AAAA),
            noerror(&["www.example.com. 30 AAAA 2001:db8::80"]),
        )
        .from(HOST),
        case(
            "GSLB: the shorter prefix's view",
            q("www.example.com", A),
            noerror(&["www.example.com. 30 A 192.0.2.81"]),
        )
        .from(WIDE),
        case(
            "GSLB: rotate through the default view's set in order",
            q("www.example.com", A),
            noerror(&["www.example.com. 30 A 198.51.100.10"]),
        )
        .then(noerror(&["www.example.com. 30 A 198.51.100.11"]))
        .then(noerror(&["www.example.com. 30 A 198.51.100.10"])),
        case(
            "GSLB: a view without the family falls back to the default view",
            q("www.example.com", AAAA),
            noerror(&["www.example.com. 30 AAAA 2001:db8:100::10"]),
        )
        .from(WIDE)
        .then(noerror(&["www.example.com. 30 AAAA 2001:db8:100::11"])),
        case(
            "GSLB: an IPv6 client in no view",
            q("www.example.com", A),
            noerror(&["www.example.com. 30 A 198.51.100.10"]),
        )
        .from(OUTSIDE_V6),
        case(
            "GSLB: all addresses, in order",
            q("all.example.com", A),
            noerror(&ALL_A),
        ),
        // EDNS(0).
        case(
            "EDNS: OPT with our size",
            wire(&edns(query("txt.example.com", TXT), 4096, 0)),
            noerror(&["txt.example.com. 3600 TXT hello"]).opt(),
        ),
        case(
            "EDNS: BADVERS for version 1",
            wire(&edns(query("txt.example.com", TXT), 4096, 1)),
            error(BADVERS).opt(),
        ),
        case(
            "TC: too big for 512 without EDNS",
            q("big.example.com", TXT),
            reply(NoError).tc(),
        ),
        case(
            "TC: too big for the client's EDNS size",
            wire(&edns(query("big.example.com", TXT), 512, 0)),
            reply(NoError).tc().opt(),
        ),
        case(
            "EDNS: the client's size is honoured",
            wire(&edns(query("big.example.com", TXT), 1232, 0)),
            noerror(&[&txt_answer("big", BIG_TXT_LEN, "b")]).opt(),
        ),
        case(
            "TC: too big for our size, whatever the client offers",
            wire(&edns(query("huge.example.com", TXT), 4096, 0)),
            reply(NoError).tc().opt(),
        ),
        case(
            "TCP: the whole answer without EDNS",
            q("big.example.com", TXT),
            noerror(&[&txt_answer("big", BIG_TXT_LEN, "b")]),
        )
        .tcp(),
        case(
            "TCP: the whole answer beyond our UDP size",
            wire(&edns(query("huge.example.com", TXT), 4096, 0)),
            noerror(&[&txt_answer("huge", HUGE_TXT_LEN, "h")]).opt(),
        )
        .tcp(),
    ]
}

/// The question section of a message with one uncompressed question, as bytes.
fn question_bytes(message: &[u8]) -> Option<&[u8]> {
    let mut end = 12;
    while *message.get(end)? != 0 {
        end += 1 + message[end] as usize;
    }
    message.get(12..end + 5)
}

/// What is wrong with `bytes` as the reply to `case` wanted as `want`, if anything.
fn mismatch(case: &Case, bytes: &[u8], want: &Reply) -> Option<String> {
    let m = match Message::from_vec(bytes) {
        Ok(m) => m,
        Err(e) => return Some(format!("the reply does not parse: {e}")),
    };
    let mut wrong = Vec::new();
    if m.id != ID || m.message_type != MessageType::Response {
        wrong.push(format!("ID {:#x}, {:?}", m.id, m.message_type));
    }
    if u8::from(m.op_code) != (case.request[2] >> 3) & 0x0f {
        wrong.push(format!("opcode {:?} not echoed", m.op_code));
    }
    if case.transport == Transport::Udp && bytes.len() > OUR_SIZE as usize {
        wrong.push(format!("{} bytes over UDP", bytes.len()));
    }
    // A request without a question has none to echo (QDCOUNT=0: what follows is its OPT).
    let asks = case.request.get(4..6) != Some(&[0, 0]);
    if m.response_code != ResponseCode::FormErr
        && asks
        && question_bytes(bytes) != question_bytes(&case.request)
    {
        wrong.push("the question is not echoed byte for byte".into());
    }
    let got = Reply::of(&m);
    if got != *want {
        wrong.push(format!("want {want:#?}\n  got {got:#?}"));
    }
    (!wrong.is_empty()).then(|| wrong.join("\n  "))
}

#[test]
fn handler_table() {
    let mut failures = Vec::new();
    for case in cases() {
        // A responder per case: rotation starts at the first address.
        let responder = responder();
        for (i, want) in case.replies.iter().enumerate() {
            let mut sink: Vec<Vec<u8>> = Vec::new();
            responder.handle(&case.request, case.client, case.transport, &mut sink);
            let wrong = match (sink.as_slice(), want) {
                ([], None) => None,
                ([bytes], Some(want)) => mismatch(&case, bytes, want),
                (sent, _) => Some(format!("{} replies, want {want:?}", sent.len())),
            };
            if let Some(wrong) = wrong {
                failures.push(format!("{} (reply {}):\n  {wrong}", case.what, i + 1));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// An authoritative answer's additional records (the hosts' addresses beside an NS or MX
/// answer) are optional: dropped when the reply would not fit, rather than truncating it (RFC 2181
/// §9). A referral's glue is not, so a referral that does not fit is truncated.
#[test]
fn the_addresses_beside_an_ns_answer_are_dropped_before_it_would_be_truncated() {
    let servers: Vec<String> = (0..8).map(|i| format!("name-server-{i}")).collect();
    let mut text = format!(
        "[server]\nlisten = [\"192.0.2.53\"]\n[[zone]]\nname = \"example.com\"\nns = [{}]\n\
         soa.rname = \"hostmaster.example.com\"\n",
        servers
            .iter()
            .map(|s| format!("\"{s}.example.com\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (i, s) in servers.iter().enumerate() {
        text.push_str(&format!(
            "[[zone.record]]\nname = \"{s}\"\ntype = \"A\"\nvalue = \"192.0.2.{i}\"\n\
             [[zone.record]]\nname = \"{s}\"\ntype = \"AAAA\"\nvalue = \"2001:db8::{i}\"\n"
        ));
    }
    let config = Config::parse(&text, Path::new("ns.toml")).unwrap();
    let r = Responder::new(&Snapshot::from_config(&config));
    let request = wire(&query("example.com", RecordType::NS));
    let over = |transport| {
        let reply = r.respond(&request, OUTSIDE, transport).unwrap();
        (reply.len(), Message::from_vec(&reply).unwrap())
    };
    let (len, tcp) = over(Transport::Tcp);
    assert!(len > 512, "the whole answer ({len} bytes) must not fit 512");
    assert_eq!((tcp.answers.len(), tcp.additionals.len()), (8, 16));
    let (len, udp) = over(Transport::Udp);
    assert!(
        len <= 512 && !udp.truncation,
        "{len} bytes, TC {}",
        udp.truncation
    );
    assert_eq!((udp.answers.len(), udp.additionals.len()), (8, 0));
}

// ---- The request-path fuzz test ----

/// SplitMix64: a small deterministic generator, so that a failure replays from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.byte()).collect()
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Valid queries to start mutations from: every name of the configuration and some outside
/// it, with the types the responder treats differently, with and without EDNS.
fn seeds() -> Vec<Vec<u8>> {
    use RecordType::*;
    let names = [
        "example.com",
        "www.example.com",
        "all.example.com",
        "alias.example.com",
        "chain.example.com",
        "loop1.example.com",
        "dangling.example.com",
        "to-org.example.com",
        "host.lab.example.com",
        "lab.example.com",
        "dept.example.com",
        "big.example.com",
        "huge.example.com",
        "_sip._tcp.example.com",
        "nope.example.org",
        "www.example.net",
    ];
    let mut seeds = Vec::new();
    for name in names {
        for qtype in [A, AAAA, ANY, TXT, SOA, NS, CNAME, SRV, MX] {
            let q = query(name, qtype);
            seeds.push(wire(&q));
            seeds.push(wire(&edns(q.clone(), 512, 0)));
            seeds.push(wire(&edns(q, 4096, 0)));
        }
    }
    seeds
}

/// Plain random bytes, or a valid query with one to three mutations: bytes flipped anywhere,
/// a header field or the question's type and class rewritten, letters' case swapped,
/// truncated, or random bytes appended.
fn mutant(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    if rng.below(4) == 0 {
        let len = rng.below(600);
        return rng.bytes(len);
    }
    let mut m = rng.pick(seeds).clone();
    let question_end = question_bytes(&m).map_or(m.len(), |q| 12 + q.len());
    let ops = if rng.below(3) == 0 {
        2 + rng.below(2)
    } else {
        1
    };
    for _ in 0..ops {
        if m.is_empty() {
            break;
        }
        match rng.below(6) {
            0 => {
                for _ in 0..=rng.below(3) {
                    let at = rng.below(m.len());
                    m[at] = rng.byte();
                }
            }
            1 if m.len() >= 12 => m[2 + rng.below(10)] = rng.byte(),
            2 if m.len() >= question_end => m[question_end - 1 - rng.below(4)] = rng.byte(),
            3 => {
                for _ in 0..4 {
                    let at = rng.below(m.len());
                    if m[at].is_ascii_alphabetic() {
                        m[at] ^= 0x20;
                    }
                }
            }
            4 => {
                let len = rng.below(m.len() + 1);
                m.truncate(len);
            }
            _ => {
                let len = 1 + rng.below(64);
                m.extend(rng.bytes(len));
            }
        }
    }
    m
}

/// The most bytes a reply to `request` may take over `transport`: over UDP 512 without an
/// OPT record (RFC 1035 §4.2.1), the client's size with one (RFC 6891 §6.2.5: never below
/// 512, and here never above ours); over TCP a message's most.
fn client_limit(request: &[u8], transport: Transport) -> usize {
    // The decoder's reading, not the responder's own.
    let payload = Message::from_vec(request)
        .ok()
        .and_then(|m| m.edns)
        .map(|e| e.max_payload());
    match (transport, payload) {
        (Transport::Tcp, _) => u16::MAX as usize,
        (Transport::Udp, None) => 512,
        (Transport::Udp, Some(p)) => usize::from(p.min(OUR_SIZE)).max(512),
    }
}

/// The request-path fuzz test: 200 000 random and mutated requests over UDP and TCP from
/// random clients. `respond` must not panic; every reply must parse, carry the request's ID,
/// be a response and fit the transport; every query with a whole header gets one. (A
/// libFuzzer target can run the same property without a bound.) GSLB_FUZZ_ITERATIONS and
/// GSLB_FUZZ_SEED run it longer or elsewhere.
#[test]
fn request_path_fuzz_never_panics_and_replies_parse() {
    let env = |name, default| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let iterations = env("GSLB_FUZZ_ITERATIONS", 200_000) as usize;
    let seed = env("GSLB_FUZZ_SEED", 0x6a09_e667_f3bc_c908);
    let responder = responder();
    let seeds = seeds();
    let clients = [HOST, HOST_MAPPED, WIDE, OUTSIDE, OUTSIDE_V6];
    let mut rng = Rng(seed);
    let mut rcodes: HashMap<u16, usize> = HashMap::new();
    for i in 0..iterations {
        let request = mutant(&mut rng, &seeds);
        let transport = if rng.below(2) == 0 {
            Transport::Udp
        } else {
            Transport::Tcp
        };
        let client = *rng.pick(&clients);
        let context = || format!("iteration {i} (seed {seed:#x}), {transport:?} {request:02x?}");
        let Some(reply) = responder.respond(&request, client, transport) else {
            assert!(
                request.len() < 12 || request[2] & 0x80 != 0,
                "no reply to a query: {}",
                context()
            );
            continue;
        };
        let m = Message::from_vec(&reply)
            .unwrap_or_else(|e| panic!("reply does not parse ({e}): {}", context()));
        *rcodes.entry(m.response_code.into()).or_default() += 1;
        assert_eq!(
            m.id,
            u16::from_be_bytes([request[0], request[1]]),
            "ID: {}",
            context()
        );
        assert_eq!(m.message_type, MessageType::Response, "QR: {}", context());
        assert!(
            reply.len() <= client_limit(&request, transport),
            "{} bytes: {}",
            reply.len(),
            context()
        );
    }
    // The mutants must get past the parser often enough to exercise the lookups.
    let mut rcodes: Vec<_> = rcodes.into_iter().collect();
    rcodes.sort_unstable();
    eprintln!("replies by rcode: {rcodes:?}");
    for (rcode, share) in [(ResponseCode::NoError, 10), (ResponseCode::NXDomain, 100)] {
        let n = rcodes
            .iter()
            .find(|(r, _)| *r == u16::from(rcode))
            .map_or(0, |(_, n)| *n);
        assert!(
            n * share >= iterations,
            "only {n} {rcode} replies: {rcodes:?}"
        );
    }
}

#[test]
fn client_subnet_is_the_client_and_is_echoed_with_its_scope() {
    use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption};
    let r = responder();
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let ask = |name: &str, qtype: RecordType, subnet: &str, source: u8, scope: u8| {
        let mut m = query(name, qtype);
        let mut edns = Edns::new();
        edns.set_max_payload(1232);
        edns.options_mut()
            .insert(EdnsOption::Subnet(ClientSubnet::new(
                ip(subnet),
                source,
                scope,
            )));
        m.set_edns(edns);
        let bytes = r
            .respond(&wire(&m), OUTSIDE, Transport::Udp)
            .expect("a reply");
        Message::from_vec(&bytes).expect("reply parses")
    };
    // (what, name, qtype, subnet, source, expected answer, expected scope): views are
    // "wide" 192.0.2.0/24 and "host" 192.0.2.10/32, both IPv4 only; the resolver itself is
    // in no view. `None`: a rotating default-view answer, not checked here.
    type Case<'a> = (
        &'a str,
        &'a str,
        RecordType,
        &'a str,
        u8,
        Option<&'a str>,
        u8,
    );
    let table: [Case; 5] = [
        (
            "host view by subnet",
            "www.example.com",
            RecordType::A,
            "192.0.2.10",
            32,
            Some(WWW_HOST_A),
            32,
        ),
        // A name a wildcard GSLB domain answers: that domain's view and scope.
        (
            "wildcard GSLB name, host view",
            "a.gw.example.com",
            RecordType::A,
            "192.0.2.10",
            32,
            Some("a.gw.example.com. 40 A 192.0.2.80"),
            32,
        ),
        // 192.0.2.0/29 is all "wide" and leaves out 192.0.2.10.
        (
            "wide view, scope excludes host",
            "www.example.com",
            RecordType::A,
            "192.0.2.0",
            24,
            Some("www.example.com. 30 A 192.0.2.81"),
            29,
        ),
        // Static data is the same for every client.
        (
            "static record",
            "txt.example.com",
            RecordType::TXT,
            "192.0.2.10",
            32,
            Some("txt.example.com. 3600 TXT hello"),
            0,
        ),
        // No IPv6 view: the default view holds for every IPv6 client.
        (
            "default view, v6",
            "www.example.com",
            RecordType::AAAA,
            "2001:db8::",
            48,
            None,
            0,
        ),
    ];
    for (what, name, qtype, subnet, source, answer, scope) in table {
        let reply = ask(name, qtype, subnet, source, 0);
        assert_eq!(reply.response_code, ResponseCode::NoError, "{what}");
        if let Some(answer) = answer {
            assert_eq!(
                reply.answers.iter().map(show).collect::<Vec<_>>(),
                strings(&[answer]),
                "{what}"
            );
        }
        let echoed = reply
            .edns
            .as_ref()
            .and_then(|e| e.option(EdnsCode::Subnet).cloned());
        let Some(EdnsOption::Subnet(echoed)) = echoed else {
            panic!("{what}: ECS not echoed")
        };
        assert_eq!(
            (echoed.addr(), echoed.source_prefix(), echoed.scope_prefix()),
            (ip(subnet), source, scope),
            "{what}"
        );
    }
    // Invalid in a query (RFC 7871 §7.1): a scope, or address bits beyond the prefix.
    // (Only whole bytes of the address are sent, so the stray bits sit in a partial byte.)
    for (subnet, source, scope) in [
        ("192.0.2.0", 24, 8),
        ("192.0.2.10", 28, 0),
        ("2001:db8::1", 127, 0),
    ] {
        let reply = ask("www.example.com", RecordType::A, subnet, source, scope);
        assert_eq!(
            reply.response_code,
            ResponseCode::FormErr,
            "{subnet}/{source} scope {scope}"
        );
    }
}

/// A health change republishes the snapshot of the same configuration: the responder keeps
/// that configuration's zones and engine (the spec's, not one of its own) and takes only the
/// new states; a reload builds them anew.
#[test]
fn a_health_change_keeps_the_configurations_zones_and_engine() {
    use crate::compile::{Compiler, Inputs};
    use crate::policy::ServiceState;

    let text = gslb_tests::two_services_config(
        "[[zone.record]]\nname = \"static\"\ntype = \"A\"\nvalue = \"192.0.2.80\"",
        "method = \"sourceiphash\"\nsourceip_mask = { mask_v4 = 24, mask_v6 = 56 }",
    );
    let config = Config::parse(&text, Path::new("health.toml")).unwrap();
    let states = |down: &[usize]| Inputs {
        services: (0..2)
            .map(|i| {
                if down.contains(&i) {
                    ServiceState::DOWN
                } else {
                    ServiceState::UP
                }
            })
            .collect(),
        ..Inputs::default()
    };
    let answers = |r: &Responder| -> Vec<String> {
        (0..16u8)
            .flat_map(|i| {
                let client = IpAddr::V4(Ipv4Addr::new(198, 51, i, 1));
                let bytes = r
                    .respond(
                        &wire(&query("www.example.com.", RecordType::A)),
                        client,
                        Transport::Udp,
                    )
                    .unwrap();
                let reply = Message::from_vec(&bytes).unwrap();
                reply.answers.iter().map(show).collect::<Vec<_>>()
            })
            .collect()
    };
    let mut compiler = Compiler::default();
    let up = compiler.compile(&config, &states(&[]));
    assert_eq!(up.engine_domains, ["www.example.com"], "decided per query");
    let r = Responder::new(&up);
    assert!(answers(&r).iter().any(|a| a.ends_with("192.0.2.10")));
    let before = r.data.load_full();

    let down = compiler.compile(&config, &states(&[0]));
    r.replace(&down);
    let after = r.data.load_full();
    assert!(
        Arc::ptr_eq(&before.config, &after.config),
        "the zones and the engine's data are the configuration's, kept"
    );
    let spec_engine = down.spec.as_ref().unwrap().engine.as_ref().unwrap();
    for authority in [&before, &after] {
        let engine = &authority.decisions.as_ref().unwrap().data.engine;
        assert!(Arc::ptr_eq(engine, spec_engine), "the snapshot's engine");
    }
    // The new state is in force.
    assert!(answers(&r).iter().all(|a| a.ends_with("192.0.2.20")));

    // A reload (a new spec) builds the configuration's data again.
    r.replace(&Compiler::default().compile(&config, &states(&[])));
    assert!(!Arc::ptr_eq(&after.config, &r.data.load().config));
}
