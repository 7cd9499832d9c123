//! The common query answered from its bytes: one A or AAAA question, class IN, for a GSLB name
//! the fast path's tables answer (a compiled entry), no EDNS or an OPT without options. Such a
//! query is what every resolver without ECS sends, and it is answered here without building a
//! `hickory_proto::op::Message`: the question is checked and looked up as bytes (lower-cased
//! into a stack buffer), and the reply is written into the caller's buffer: the header, the
//! question echoed byte for byte (0x20 case kept), the address records pointing at it (0xc00c)
//! and our OPT, the same bytes the general path (`Responder::respond_message`) encodes for the
//! same query (test: `wire::tests`, byte for byte over the table's requests and their
//! variants).
//!
//! Everything else, and everything this cannot decide (no answer for the client: NODATA;
//! another zone's data at the name; ECS; a name the engine decides per query; a MEP child
//! refusing GSLB names), goes to the general path, so no rule of `message` is bypassed: a
//! query this accepts parses there too, to the same answer.

use std::{collections::HashMap, net::IpAddr, sync::Arc};

use gslb_common::{QTYPE_A, QTYPE_AAAA};

use super::Authority;
use super::compiled::{CompiledEntry, GslbIndex};
use super::decisions::Decisions;
use super::zone::ZoneData;
use crate::policy::AnswerMode;

/// The longest name on the wire (RFC 1035 §2.3.4).
const MAX_NAME: usize = 255;
/// RR type OPT.
const TYPE_OPT: u16 = 41;
/// Class IN.
const CLASS_IN: u16 = 1;
/// Every reply written here fits: UDP without EDNS allows 512 bytes, and more is never
/// asked of it (a longer one goes to the general path, which truncates).
const MAX_REPLY: usize = 512;

/// The compiled entries this answers, by the lower-case wire form of their name: A at 0,
/// AAAA at 1.
pub(super) struct Names(HashMap<Box<[u8]>, [Option<Arc<CompiledEntry>>; 2], ahash::RandomState>);

impl Names {
    /// The entries of `gslb` whose A or AAAA answer is the GSLB answer alone: the name is a
    /// GSLB domain of the zone that holds it, not below a delegation, and not decided per
    /// query (`decisions`). (The configuration refuses static records at a GSLB name.)
    pub(super) fn new(zones: &[ZoneData], gslb: &GslbIndex, decisions: Option<&Decisions>) -> Self {
        let mut names: HashMap<Box<[u8]>, [Option<Arc<CompiledEntry>>; 2], _> = HashMap::default();
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
                || zone.cut_above(name).is_some()
                || decisions.is_some_and(|d| d.domains.contains(name))
            {
                continue;
            }
            let Some(wire) = wire_name(name) else {
                continue;
            };
            names.entry(wire).or_default()[slot] = Some(entry.clone());
        }
        Names(names)
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
    /// A: 0, AAAA: 1.
    slot: usize,
    /// The query's OPT: `Some(DO bit)`.
    opt: Option<bool>,
}

/// `request` as a [`Plain`] query, `None` for anything else: a response, another opcode, other
/// than one question, records in the answer or authority section, more than one additional
/// record or one that is not an OPT of version 0 without options, a compressed or overlong
/// name, another class or type, bytes after the last record.
fn plain(request: &[u8]) -> Option<Plain<'_>> {
    let u16_at = |at: usize| -> Option<u16> {
        Some(u16::from_be_bytes(
            request.get(at..at + 2)?.try_into().ok()?,
        ))
    };
    // QR clear, OPCODE QUERY (the other flags are not read, as in the general path).
    if request.len() < 12 || request[2] & 0xf8 != 0 {
        return None;
    }
    let arcount = u16_at(10)?;
    if u16_at(4)? != 1 || u16_at(6)? != 0 || u16_at(8)? != 0 || arcount > 1 {
        return None;
    }
    let mut name = ([0u8; MAX_NAME], 0);
    let mut at = 12;
    loop {
        let len = usize::from(*request.get(at)?);
        if len > 63 || name.1 + 1 + len > MAX_NAME {
            return None; // a pointer, an extended label type, or too long
        }
        let label = request.get(at..=at + len)?;
        for (i, &b) in label.iter().enumerate() {
            name.0[name.1 + i] = if i == 0 { b } else { b.to_ascii_lowercase() };
        }
        name.1 += 1 + len;
        at += 1 + len;
        if len == 0 {
            break;
        }
    }
    let slot = match u16_at(at)? {
        QTYPE_A => 0,
        QTYPE_AAAA => 1,
        _ => return None,
    };
    if u16_at(at + 2)? != CLASS_IN {
        return None;
    }
    let question = &request[12..at + 4];
    at += 4;
    let opt = if arcount == 1 {
        // Root owner, type OPT, any payload size, any extended RCODE, version 0, no options.
        let rr = request.get(at..at + 11)?;
        if rr[0] != 0 || u16_at(at + 1)? != TYPE_OPT || rr[6] != 0 || u16_at(at + 9)? != 0 {
            return None;
        }
        at += 11;
        Some(rr[7] & 0x80 != 0)
    } else {
        None
    };
    (at == request.len()).then_some(Plain {
        question,
        name,
        slot,
        opt,
    })
}

/// Writes the reply to `request` from `client` into `out` when it is a [`Plain`] query with a
/// GSLB answer for the client; `false` (and `out` as it was) otherwise.
pub(super) fn answer(data: &Authority, request: &[u8], client: IpAddr, out: &mut Vec<u8>) -> bool {
    let Some(query) = plain(request) else {
        return false;
    };
    let Some(entry) = data
        .wire
        .0
        .get(&query.name.0[..query.name.1])
        .and_then(|slots| slots[query.slot].as_ref())
    else {
        return false;
    };
    // No address for this client: NODATA, with the SOA the general path adds.
    let Some((answer, turn)) = data.gslb.answer_of(entry, client) else {
        return false;
    };
    let addrs = match answer.mode {
        AnswerMode::All => &answer.addrs[..],
        AnswerMode::Rotate => {
            let turn = turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed) as usize;
            let i = turn % answer.addrs.len();
            &answer.addrs[i..=i]
        }
    };
    let start = out.len();
    // ID; QR, OPCODE QUERY, AA and RD as asked; CD as asked, NOERROR.
    out.extend_from_slice(&request[..2]);
    out.push(0x84 | (request[2] & 0x01));
    out.push(request[3] & 0x10);
    out.extend_from_slice(&[0, 1]);
    out.extend_from_slice(&(addrs.len() as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, u8::from(query.opt.is_some())]);
    out.extend_from_slice(query.question);
    for addr in addrs {
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
    if let Some(dnssec_ok) = query.opt {
        let ours = data.edns_udp_size.max(MAX_REPLY as u16);
        out.extend_from_slice(&[0, 0, TYPE_OPT as u8]);
        out.extend_from_slice(&ours.to_be_bytes());
        out.extend_from_slice(&[0, 0, if dnssec_ok { 0x80 } else { 0 }, 0, 0, 0]);
    }
    // Never for a compiled answer (at most 8 AAAA after a 255-byte name); to be sure, the
    // general path truncates what does not fit.
    if out.len() - start > MAX_REPLY {
        out.truncate(start);
        return false;
    }
    true
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
        compile::Snapshot,
        config::Config,
        responder::{Responder, Transport},
    };

    fn responder_of(text: &str) -> Responder {
        let config = Config::parse(text, Path::new("wire.toml")).unwrap();
        Responder::new(&config, &Snapshot::from_config(&config))
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

    /// The general path alone, as `respond` answered before the wire path existed.
    fn general(r: &Responder, request: &[u8], client: IpAddr) -> Option<Vec<u8>> {
        r.respond_message(&r.data.load(), request, client, Transport::Udp)
    }

    #[test]
    fn the_wire_answer_is_the_general_paths_byte_for_byte() {
        // Two responders asked the same in the same order: their rotation turns stay equal.
        let text = responder_config();
        let (wire_side, general_side) = (responder_of(&text), responder_of(&text));
        let mut by_wire = 0;
        for (i, request) in mutants().iter().enumerate() {
            let client = CLIENTS[i % CLIENTS.len()];
            let mut out = Vec::new();
            let took = answer(&wire_side.data.load(), request, client, &mut out);
            // When `answer` took it, it advanced the turn: the general side does too.
            if took {
                by_wire += 1;
                let want = general(&general_side, request, client);
                assert_eq!(Some(&out), want.as_ref(), "{request:02x?} from {client}");
            }
            let got = wire_side.respond(request, client, Transport::Udp);
            let want = general(&general_side, request, client);
            assert_eq!(got, want, "{request:02x?} from {client}");
        }
        assert!(by_wire > 1000, "only {by_wire} answered on the wire");
    }

    #[test]
    fn the_wire_path_answers_gslb_names_and_leaves_the_rest() {
        let r = responder_of(&responder_config());
        let outside = CLIENTS[2];
        let takes = |r: &Responder, request: &[u8], client| {
            answer(&r.data.load(), request, client, &mut Vec::new())
        };
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
        let mut ecs = query("www.example.com", QTYPE_A, Some((1232, false)));
        ecs.truncate(ecs.len() - 2);
        ecs.extend_from_slice(&[0, 8, 0, 8, 0, 8, 0, 1, 24, 0, 198, 51, 100]);
        let mut opcode = query("www.example.com", QTYPE_A, None);
        opcode[2] |= 2 << 3;
        for (what, request) in [
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
            ("ECS", ecs),
            ("opcode STATUS: NOTIMP", opcode),
            (
                "a byte after the OPT",
                [&query("www.example.com", 1, None)[..], &[0]].concat(),
            ),
        ] {
            assert!(!takes(&r, &request, outside), "{what}");
        }
        // A MEP child refuses GSLB names: `respond` asks the general path.
        r.set_gslb_refused(true);
        let refused = r
            .respond(
                &query("www.example.com", QTYPE_A, None),
                outside,
                Transport::Udp,
            )
            .unwrap();
        assert_eq!(refused[3] & 0x0f, 5, "REFUSED");

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
