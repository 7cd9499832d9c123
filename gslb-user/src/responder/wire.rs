//! The common query answered from its bytes: one A or AAAA question, class IN, for a GSLB name
//! the fast path's tables answer (a compiled entry), with no EDNS, or an OPT of version 0 with
//! no option or one well-formed ECS option. That is what resolvers send, and it is answered
//! here without building a `hickory_proto::op::Message`: the question is checked and looked up
//! as bytes (lower-cased into a stack buffer), and the reply is written into the caller's
//! buffer: the header, the question echoed byte for byte (0x20 case kept), the address records
//! pointing at it (0xc00c) and our OPT, with the client subnet echoed with the answer's scope
//! (`Authority::scope`, as the general path computes it). These are the same bytes the general
//! path (`Responder::respond_message`) encodes for the same query (test: `wire::tests`, byte
//! for byte over the table's requests and every one-byte change of them).
//!
//! Names of our zones that do not exist (NXDOMAIN) or have no record of the type (NODATA) are
//! answered here too, with the zone's SOA as the general path writes it (`negative`).
//!
//! Everything else, and everything this cannot decide (a GSLB name without an address for the client;
//! a name the engine decides per query; other EDNS options; a MEP child refusing GSLB names),
//! goes to the general path, so no rule of `message` or `ecs` is bypassed: a query this
//! accepts parses there too, to the same answer.

use std::{collections::HashMap, net::IpAddr, sync::Arc};

use gslb_common::{QTYPE_A, QTYPE_AAAA};

use super::compiled::{CompiledEntry, GslbIndex};
use super::decisions::Decisions;
use super::ecs::{self, OPTION_SUBNET, Subnet};
use super::message;
use super::shape::{MAX_NAME, Shape, TYPE_OPT};
use super::zone::ZoneData;
use super::{Authority, Transport, canonical};

mod negative;

/// Class IN.
const CLASS_IN: u16 = 1;
/// Every reply written here fits: UDP without EDNS allows 512 bytes, and more is never
/// asked of it (a longer one goes to the general path, which truncates).
const MAX_REPLY: usize = 512;

/// The compiled entries this answers, by the lower-case wire form of their name, and each
/// zone's negative-answer SOA (`negative`), in the order of the zones.
pub(super) struct Names(
    HashMap<Box<[u8]>, Slots, ahash::RandomState>,
    Vec<Option<negative::Soa>>,
);

/// A name's entries: A at 0, AAAA at 1.
type Slots = [Option<Arc<CompiledEntry>>; 2];

impl Names {
    /// The entries of `gslb` whose A or AAAA answer is the GSLB answer alone: the name is a
    /// GSLB domain of the zone that holds it, not below a delegation, and not decided per
    /// query (`decisions`), not a CNAME domain (whose answer the general path follows). (The
    /// configuration refuses static A, AAAA and CNAME records at a GSLB name.)
    pub(super) fn new(zones: &[ZoneData], gslb: &GslbIndex, decisions: Option<&Decisions>) -> Self {
        let mut names: HashMap<Box<[u8]>, Slots, _> = HashMap::default();
        for entry in gslb.entries() {
            let (e, _) = &**entry;
            let slot = match e.qtype {
                QTYPE_A => 0,
                QTYPE_AAAA => 1,
                _ => continue,
            };
            let name = e.name.as_str();
            let Some(zone) = zones.iter().find(|z| z.contains(name)) else {
                continue;
            };
            if !zone.gslb.contains(name)
                || zone.gslb_cname.contains(name)
                || zone.cut_above(name).is_some()
                || decisions.is_some_and(|d| d.domains.contains_key(name))
            {
                continue;
            }
            let Some(wire) = wire_name(name) else {
                continue;
            };
            names.entry(wire).or_default()[slot] = Some(entry.clone());
        }
        Names(names, zones.iter().map(negative::Soa::new).collect())
    }
}

/// `name` (lower case, no trailing dot) on the wire, `None` when it cannot be a question's.
fn wire_name(name: &str) -> Option<Box<[u8]>> {
    let mut wire = Vec::with_capacity(name.len() + 2);
    for label in name.split('.').filter(|l| !l.is_empty()) {
        if label.len() > 63 {
            return None;
        }
        wire.push(label.len() as u8);
        wire.extend(label.bytes().map(|b| b.to_ascii_lowercase()));
    }
    wire.push(0);
    (wire.len() <= MAX_NAME).then(|| wire.into_boxed_slice())
}

/// A query this module answers, as read from its bytes.
struct Plain<'a> {
    /// The question as sent: name, type and class.
    question: &'a [u8],
    /// The name lower-cased, on the wire.
    name: ([u8; MAX_NAME], usize),
    /// The question's type.
    qtype: u16,
    /// The query's OPT record.
    opt: Option<Opt<'a>>,
}

/// An OPT record of version 0 with no option or one well-formed ECS option.
#[derive(Clone, Copy)]
struct Opt<'a> {
    dnssec_ok: bool,
    ecs: Option<Subnet<'a>>,
}

/// `shape` (over `transport`) as a [`Plain`] query, `None` for anything else: a query
/// `message::rejection` refuses (another opcode, a type never asked, an OPT of another
/// version...), another class, an OPT with options other than one well-formed ECS.
fn plain<'a>(shape: &Shape<'a>, transport: Transport) -> Option<Plain<'a>> {
    if message::rejection(shape, transport).is_some() || shape.qclass != CLASS_IN {
        return None;
    }
    let opt = match shape.opt {
        None => None,
        Some(opt) => {
            let mut options = opt.options();
            let ecs = match (options.next(), options.next()) {
                (None, _) => None,
                (Some((OPTION_SUBNET, data)), None) => Some(ecs::subnet(data)?),
                _ => return None,
            };
            Some(Opt {
                dnssec_ok: opt.dnssec_ok,
                ecs,
            })
        }
    };
    // Lower case: the length bytes (at most 63) are not letters, so the whole name can be.
    let qname = shape.qname();
    let mut name = ([0u8; MAX_NAME], qname.len());
    name.0[..qname.len()].copy_from_slice(qname);
    name.0[..qname.len()].make_ascii_lowercase();
    Some(Plain {
        question: shape.question,
        name,
        qtype: shape.qtype,
        opt,
    })
}

/// Writes the reply to `request` from `client` (over `transport`) into `out` when it is a
/// [`Plain`] query with a GSLB answer for the client, or a name of ours that does not exist or
/// has no record of the type (`negative`); `false` (and `out` as it was) otherwise.
pub(super) fn answer(
    data: &Authority,
    request: &[u8],
    shape: &Shape<'_>,
    client: IpAddr,
    transport: Transport,
    out: &mut Vec<u8>,
) -> bool {
    let Some(query) = plain(shape, transport) else {
        return false;
    };
    // From a client not in `server.ecs_allow` the option is ignored and not echoed; a /0
    // subnet carries no client (as in `Responder::answer`).
    let ecs = query
        .opt
        .and_then(|o| o.ecs)
        .filter(|_| data.config.ecs_allow.allows(canonical(client)));
    let slot = match query.qtype {
        QTYPE_A => Some(0),
        QTYPE_AAAA => Some(1),
        _ => None,
    };
    let entry = slot.and_then(|slot| {
        data.wire
            .0
            .get(&query.name.0[..query.name.1])
            .and_then(|slots| slots[slot].as_ref())
    });
    let Some(entry) = entry else {
        return negative::answer(data, request, &query, ecs, out);
    };
    let client = ecs.filter(|e| e.source > 0).map_or(client, |e| e.addr);
    // No address for this client: NODATA, with the SOA the general path adds.
    let Some((answer, turn)) = data.gslb.answer_of(entry, client) else {
        return false;
    };
    let addrs = answer.carried(|| turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed) as usize);
    let start = out.len();
    header(out, request, 0, addrs.len() as u16, 0, query.opt.is_some());
    out.extend_from_slice(query.question);
    for addr in addrs.iter() {
        let (rtype, rdlen): (u16, u16) = match addr {
            IpAddr::V4(_) => (QTYPE_A, 4),
            IpAddr::V6(_) => (QTYPE_AAAA, 16),
        };
        out.extend_from_slice(&[0xc0, 0x0c]);
        out.extend_from_slice(&rtype.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&answer.ttl.to_be_bytes());
        out.extend_from_slice(&rdlen.to_be_bytes());
        match addr {
            IpAddr::V4(v4) => out.extend_from_slice(&v4.octets()),
            IpAddr::V6(v6) => out.extend_from_slice(&v6.octets()),
        }
    }
    if let Some(opt) = query.opt {
        // The subnet echoed with the answer's scope (`Authority::scope`).
        let scope = ecs
            .filter(|e| e.source > 0)
            .and_then(|e| data.scope(&entry.0.name, query.qtype, client, e.source))
            .unwrap_or(0);
        write_opt(out, data.edns_udp_size, opt.dnssec_ok, ecs, scope);
    }
    // A wide `max_answers` (up to 256 AAAA): the general path writes it within the client's
    // size, truncated (TC) when it does not fit.
    if out.len() - start > MAX_REPLY {
        out.truncate(start);
        return false;
    }
    true
}

/// The reply's header: the ID; QR, OPCODE QUERY, AA and RD as asked; CD as asked, `rcode`;
/// one question, `answers` and `authority` records, the OPT when `opt`.
fn header(out: &mut Vec<u8>, request: &[u8], rcode: u8, answers: u16, authority: u16, opt: bool) {
    out.extend_from_slice(&request[..2]);
    out.push(0x84 | (request[2] & 0x01));
    out.push((request[3] & 0x10) | rcode);
    out.extend_from_slice(&[0, 1]);
    out.extend_from_slice(&answers.to_be_bytes());
    out.extend_from_slice(&authority.to_be_bytes());
    out.extend_from_slice(&[0, u8::from(opt)]);
}

/// Our OPT record (as `message::response_to` makes it) answering an OPT whose DO bit is
/// `dnssec_ok`, with `ecs` echoed at `scope`.
pub(super) fn write_opt(
    out: &mut Vec<u8>,
    edns_udp_size: u16,
    dnssec_ok: bool,
    ecs: Option<Subnet<'_>>,
    scope: u8,
) {
    let ours = edns_udp_size.max(MAX_REPLY as u16);
    out.extend_from_slice(&[0, 0, TYPE_OPT as u8]);
    out.extend_from_slice(&ours.to_be_bytes());
    out.extend_from_slice(&[0, 0, if dnssec_ok { 0x80 } else { 0 }, 0]);
    match ecs {
        None => out.extend_from_slice(&[0, 0]),
        Some(e) => {
            let len = e.data.len() as u16;
            out.extend_from_slice(&(len + 4).to_be_bytes());
            out.extend_from_slice(&OPTION_SUBNET.to_be_bytes());
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(&e.data[..3]);
            out.push(scope);
            out.extend_from_slice(&e.data[4..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        net::{Ipv4Addr, Ipv6Addr},
        path::Path,
    };

    use gslb_tests::{responder_config, two_services_config};

    use super::*;
    use crate::{
        compile::{Inputs, Snapshot},
        config::Config,
        responder::shape::scan,
        responder::{Responder, Transport},
    };

    fn responder_of(text: &str) -> Responder {
        let config = Config::parse(text, Path::new("wire.toml")).unwrap();
        Responder::new(&Snapshot::from_config(&config))
    }

    /// The clients of `responder_config`'s views: "host", "wide", the default view (IPv4 and
    /// IPv6) and "host" on a dual-stack socket.
    const CLIENTS: [IpAddr; 5] = [
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10)),
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, 99)),
        IpAddr::V4(Ipv4Addr::new(203, 0, 113, 5)),
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, 1)),
        IpAddr::V6(Ipv4Addr::new(192, 0, 2, 10).to_ipv6_mapped()),
    ];

    /// [`query`] with an OPT holding `option` (code, data).
    fn with_option(name: &str, qtype: u16, code: u16, data: &[u8]) -> Vec<u8> {
        let mut m = query(name, qtype, Some((1232, false)));
        m.truncate(m.len() - 2);
        m.extend_from_slice(&(data.len() as u16 + 4).to_be_bytes());
        m.extend_from_slice(&code.to_be_bytes());
        m.extend_from_slice(&(data.len() as u16).to_be_bytes());
        m.extend_from_slice(data);
        m
    }

    /// A query for `name` (dotted, as written: its case is kept) of `qtype`, with `opt`'s OPT
    /// record (payload size, DO) when given.
    fn query(name: &str, qtype: u16, opt: Option<(u16, bool)>) -> Vec<u8> {
        let mut m = vec![
            0xab,
            0xcd,
            0x01,
            0,
            0,
            1,
            0,
            0,
            0,
            0,
            0,
            u8::from(opt.is_some()),
        ];
        for label in name.split('.').filter(|l| !l.is_empty()) {
            m.push(label.len() as u8);
            m.extend_from_slice(label.as_bytes());
        }
        m.push(0);
        m.extend_from_slice(&qtype.to_be_bytes());
        m.extend_from_slice(&CLASS_IN.to_be_bytes());
        if let Some((payload, dnssec_ok)) = opt {
            m.extend_from_slice(&[0, 0, 41]);
            m.extend_from_slice(&payload.to_be_bytes());
            m.extend_from_slice(&[0, 0, if dnssec_ok { 0x80 } else { 0 }, 0, 0, 0]);
        }
        m
    }

    /// Valid queries the wire path answers or must leave: GSLB names in any case, static and
    /// missing names, other zones, other types, with and without an OPT.
    fn seeds() -> Vec<Vec<u8>> {
        let names = [
            "www.example.com",
            "WwW.ExAmPlE.CoM",
            "all.example.com",
            "alias.example.com",
            "ns1.example.com",
            "nx.example.com",
            "example.com",
            "www.example.org",
            "host.lab.example.com",
            "www.example.net",
            // NXDOMAIN: below a name, below a GSLB name, beside the SOA's names (whose
            // compression points into the question when the case matches), another zone.
            "NX.ExAmple.com",
            "a.b.nx.example.com",
            "sub.www.example.com",
            "x.ns1.example.com",
            "x.hostmaster.EXAMPLE.com",
            "nx.example.org",
            // NODATA: an empty non-terminal, other zone's apex, types a name lacks; below a
            // delegation (a referral: the general path's).
            "dept.example.com",
            "example.org",
            "txt.example.com",
            "nx.lab.example.com",
        ];
        let mut seeds = Vec::new();
        for name in names {
            for qtype in [QTYPE_A, QTYPE_AAAA, 16, 255] {
                for opt in [
                    None,
                    Some((1232, false)),
                    Some((4096, true)),
                    Some((100, false)),
                ] {
                    seeds.push(query(name, qtype, opt));
                }
                // Client subnets: in views "host" and "wide", outside both, /0, IPv6.
                for subnet in [
                    &[0, 1, 32, 0, 192, 0, 2, 10][..],
                    &[0, 1, 24, 0, 192, 0, 2],
                    &[0, 1, 20, 0, 198, 51, 96],
                    &[0, 1, 0, 0],
                    &[0, 2, 56, 0, 0x20, 1, 0xd, 0xb8, 0xff, 0xff, 0],
                ] {
                    seeds.push(with_option(name, qtype, 8, subnet));
                }
            }
        }
        seeds
    }

    /// Every seed with each of its bytes replaced in turn by a few values (flags, counts,
    /// lengths, letters, the OPT's fields), and cut short or lengthened by a byte.
    fn mutants() -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for seed in seeds() {
            for at in 0..seed.len() {
                for value in [
                    0,
                    0xff,
                    seed[at] ^ 0x20,
                    seed[at] ^ 0x80,
                    seed[at].wrapping_add(1),
                ] {
                    let mut m = seed.clone();
                    m[at] = value;
                    out.push(m);
                }
            }
            out.push(seed[..seed.len() - 1].to_vec());
            out.push([&seed[..], &[0]].concat());
            out.push(seed);
        }
        out
    }

    /// Whether `reply` (one of ours: an uncompressed question, answers pointing at it) ends
    /// with an OPT holding an option.
    fn echoes_a_subnet(reply: &[u8]) -> bool {
        let mut at = 12;
        while reply[at] != 0 {
            at += 1 + usize::from(reply[at]);
        }
        at += 5;
        for _ in 0..u16::from_be_bytes([reply[6], reply[7]]) {
            at += 12 + usize::from(u16::from_be_bytes([reply[at + 10], reply[at + 11]]));
        }
        reply[11] == 1
            && reply
                .get(at + 9..at + 11)
                .is_some_and(|rdlen| rdlen != [0, 0])
    }

    /// The general path alone, as `respond` answered before the wire path existed (after the
    /// shape check, which both paths share).
    fn general(r: &Responder, request: &[u8], client: IpAddr) -> Option<Vec<u8>> {
        match scan(request) {
            Ok(shape) => Some(
                r.respond_message(&r.data.load(), &shape, request, client, Transport::Udp)
                    .0,
            ),
            Err(_) => r.respond(request, client, Transport::Udp),
        }
    }

    /// Whether the wire path answers `request` (into `out`), after the shape check.
    fn on_wire(r: &Responder, request: &[u8], client: IpAddr, out: &mut Vec<u8>) -> bool {
        scan(request)
            .is_ok_and(|shape| answer(&r.data.load(), request, &shape, client, Transport::Udp, out))
    }

    #[test]
    fn the_wire_answer_is_the_general_paths_byte_for_byte() {
        // ECS from anyone, and only from "wide" (so ignored from the others).
        for server in ["", "ecs_allow = [\"192.0.2.0/24\"]\n"] {
            let text = responder_config().replacen("[server]\n", &format!("[server]\n{server}"), 1);
            // Two responders asked the same in the same order: their rotation turns stay equal.
            let (wire_side, general_side) = (responder_of(&text), responder_of(&text));
            let (mut by_wire, mut with_ecs, mut nxdomain, mut nodata) = (0, 0, 0, 0);
            for (i, request) in mutants().iter().enumerate() {
                let client = CLIENTS[i % CLIENTS.len()];
                let mut out = Vec::new();
                let took = on_wire(&wire_side, request, client, &mut out);
                // When `answer` took it, it advanced the turn: the general side does too.
                if took {
                    by_wire += 1;
                    with_ecs += usize::from(echoes_a_subnet(&out));
                    // Negative answers: an SOA in the authority section, no answer.
                    if out[7] == 0 && out[9] == 1 {
                        match out[3] & 0x0f {
                            3 => nxdomain += 1,
                            0 => nodata += 1,
                            rcode => panic!("rcode {rcode} on the wire"),
                        }
                    }
                    let want = general(&general_side, request, client);
                    assert_eq!(Some(&out), want.as_ref(), "{request:02x?} from {client}");
                }
                let got = wire_side.respond(request, client, Transport::Udp);
                let want = general(&general_side, request, client);
                assert_eq!(got, want, "{request:02x?} from {client}");
            }
            assert!(by_wire > 1000, "only {by_wire} answered on the wire");
            assert!(with_ecs > 100, "only {with_ecs} ECS answers on the wire");
            assert!(
                nxdomain > 1000,
                "only {nxdomain} NXDOMAIN answers on the wire"
            );
            assert!(nodata > 500, "only {nodata} NODATA answers on the wire");
        }
    }

    #[test]
    fn the_wire_path_answers_gslb_names_and_leaves_the_rest() {
        let r = responder_of(&responder_config());
        let outside = CLIENTS[2];
        let takes =
            |r: &Responder, request: &[u8], client| on_wire(r, request, client, &mut Vec::new());
        for request in [
            query("www.example.com", QTYPE_A, None),
            query("WWW.example.COM", QTYPE_AAAA, Some((1232, true))),
            query("all.example.com", QTYPE_A, Some((512, false))),
        ] {
            assert!(takes(&r, &request, outside), "{request:02x?}");
        }
        let mut version_1 = query("www.example.com", QTYPE_A, Some((1232, false)));
        let len = version_1.len();
        version_1[len - 5] = 1;
        let ecs = with_option("www.example.com", QTYPE_A, 8, &[0, 1, 24, 0, 198, 51, 100]);
        assert!(takes(&r, &ecs, outside), "a client subnet");
        let surplus = with_option(
            "www.example.com",
            QTYPE_A,
            8,
            &[0, 1, 24, 0, 198, 51, 100, 0],
        );
        let cookie = with_option("www.example.com", QTYPE_A, 10, &[1, 2, 3, 4, 5, 6, 7, 8]);
        let mut opcode = query("www.example.com", QTYPE_A, None);
        opcode[2] |= 2 << 3;
        for (what, request) in [
            ("NXDOMAIN", query("nx.example.com", QTYPE_A, None)),
            ("NXDOMAIN, any type", query("a.nx.example.com", 16, None)),
            ("NODATA", query("txt.example.com", QTYPE_A, None)),
            (
                "NODATA, empty non-terminal",
                query("dept.example.com", 99, None),
            ),
        ] {
            assert!(takes(&r, &request, outside), "{what}");
        }
        for (what, request) in [
            (
                "below a delegation",
                query("nx.lab.example.com", QTYPE_A, None),
            ),
            ("an escaped label", query("n*x.example.com", QTYPE_A, None)),
            ("outside our zones", query("nx.example.net", QTYPE_A, None)),
            ("the apex's NS", query("example.com", 2, None)),
            ("ANY at a name", query("txt.example.com", 255, None)),
            (
                "NODATA (no IPv6 service)",
                query("all.example.com", QTYPE_AAAA, None),
            ),
            ("a static name", query("ns1.example.com", QTYPE_A, None)),
            (
                "a CNAME to a GSLB name",
                query("alias.example.com", QTYPE_A, None),
            ),
            ("ANY", query("www.example.com", 255, None)),
            ("EDNS version 1: BADVERS", version_1),
            ("ECS with a byte too many: FORMERR", surplus),
            ("another option", cookie),
            ("opcode STATUS: NOTIMP", opcode),
            (
                "a byte after the OPT",
                [&query("www.example.com", 1, None)[..], &[0]].concat(),
            ),
        ] {
            assert!(!takes(&r, &request, outside), "{what}");
        }
        // A MEP child refuses GSLB names: `respond` asks the general path.
        let config = Config::parse(&responder_config(), Path::new("wire.toml")).unwrap();
        let child = Inputs {
            refuse_gslb: true,
            ..Inputs::default()
        };
        r.replace(&Snapshot::compile(&config, &child));
        let refused = r
            .respond(
                &query("www.example.com", QTYPE_A, None),
                outside,
                Transport::Udp,
            )
            .unwrap();
        assert_eq!(refused[3] & 0x0f, 5, "REFUSED");
        // ... and ANY there, which would carry the GSLB answer; but the zone's other types at
        // a GSLB name are static, answered as by a parent.
        for (qtype, rcode, answers) in [(255, 5, 0), (15, 0, 1), (16, 0, 1)] {
            let reply = r
                .respond(
                    &query("all.example.com", qtype, None),
                    outside,
                    Transport::Udp,
                )
                .unwrap();
            assert_eq!(reply[3] & 0x0f, rcode, "qtype {qtype}: RCODE");
            assert_eq!(
                u16::from_be_bytes([reply[6], reply[7]]),
                answers,
                "qtype {qtype}: answers"
            );
        }

        // A domain decided per query (source IP hash) is the engine's, never the wire's.
        let hashed = responder_of(&two_services_config("", "method = \"sourceiphash\""));
        assert!(!takes(
            &hashed,
            &query("www.example.com", QTYPE_A, None),
            outside
        ));
        let plain = responder_of(&two_services_config("", ""));
        assert!(takes(
            &plain,
            &query("www.example.com", QTYPE_A, None),
            outside
        ));
    }
}
