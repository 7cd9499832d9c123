//! The negative answers of a [`Plain`] query, from its bytes: NXDOMAIN for a name of one of our
//! zones that does not exist, NODATA for one that exists without a record of the type, each
//! with the zone's SOA at the negative TTL in the authority section, as `lookup` finds them
//! and `message::encode` writes them. Only what is decided exactly here: a name in a zone, not
//! at or below a delegation, whose labels write the same as `zone::key` reads them; for
//! NODATA no GSLB name, no CNAME, no record of the type, not ANY, not the apex's SOA or NS.
//! Anything else goes to the general path.
//!
//! The SOA's names are compressed as hickory's encoder compresses them ([`Pointers`]): to the
//! longest suffix written before whose bytes are the same (case included), so the owner points
//! into the question only when the question's case matches the apex's.

use hickory_proto::{rr::RData, serialize::binary::BinEncodable};

use super::super::{Authority, zone::ZoneData};
use super::{CLASS_IN, MAX_NAME, MAX_REPLY, Plain, Subnet, header, write_opt};

/// RCODE NXDOMAIN.
const NXDOMAIN: u8 = 3;
/// Types with an answer at the apex of every zone.
const APEX_TYPES: [u16; 2] = [6, 2];
/// RR type SOA.
const TYPE_SOA: u16 = 6;
/// RR type CNAME.
const TYPE_CNAME: u16 = 5;
/// QTYPE ANY.
const TYPE_ANY: u16 = 255;

/// A zone's negative-caching SOA (`ZoneData::negative_soa`) in parts: the names uncompressed
/// (as the encoder writes them before it compresses), the TTL and the five numbers.
pub(in super::super) struct Soa {
    owner: Box<[u8]>,
    mname: Box<[u8]>,
    rname: Box<[u8]>,
    ttl: u32,
    numbers: [u8; 20],
}

impl Soa {
    /// `zone`'s, `None` when its SOA does not encode (never for a validated configuration).
    pub(in super::super) fn new(zone: &ZoneData) -> Option<Self> {
        let record = zone.negative_soa();
        let RData::SOA(soa) = &record.data else {
            return None;
        };
        let mut numbers = [0u8; 20];
        numbers[..4].copy_from_slice(&soa.serial.to_be_bytes());
        numbers[4..8].copy_from_slice(&soa.refresh.to_be_bytes());
        numbers[8..12].copy_from_slice(&soa.retry.to_be_bytes());
        numbers[12..16].copy_from_slice(&soa.expire.to_be_bytes());
        numbers[16..].copy_from_slice(&soa.minimum.to_be_bytes());
        Some(Soa {
            owner: record.name.to_bytes().ok()?.into(),
            mname: soa.mname.to_bytes().ok()?.into(),
            rname: soa.rname.to_bytes().ok()?.into(),
            ttl: record.ttl,
            numbers,
        })
    }
}

/// The zone (its index) and RCODE of `query`'s negative answer, `None` when it has another
/// answer or this cannot tell exactly.
fn decide(data: &Authority, query: &Plain<'_>) -> Option<(usize, u8)> {
    // The name as `zone::key` gives it: dotted, lower case. Only labels `Label::to_ascii`
    // writes unescaped (letters, digits, `_`, `-` but first), so that it is the same name.
    let wire = &query.name.0[..query.name.1];
    let mut dotted = [0u8; MAX_NAME];
    let (mut len, mut at) = (0, 0);
    while wire[at] != 0 {
        let label = &wire[at + 1..=at + usize::from(wire[at])];
        let plain = label.iter().enumerate().all(|(i, &b)| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || (b == b'-' && i > 0)
        });
        if !plain {
            return None;
        }
        if len > 0 {
            dotted[len] = b'.';
            len += 1;
        }
        dotted[len..len + label.len()].copy_from_slice(label);
        len += label.len();
        at += 1 + label.len();
    }
    let name = std::str::from_utf8(&dotted[..len]).ok()?;
    let (i, zone) = (data.config.zones.iter().enumerate()).find(|(_, z)| z.contains(name))?;
    // A referral; a GSLB name (whose answer and ECS scope are the client's, and which a MEP
    // child refuses) in whatever zone.
    if zone.cut_above(name).is_some() || data.gslb.is_gslb(name) {
        return None;
    }
    if !zone.names.contains(name) {
        // A wildcard's synthesised answer is the general path's.
        return zone.source_of(name).is_none().then_some((i, NXDOMAIN));
    }
    let qtype = query.qtype;
    let answered = qtype == TYPE_ANY
        || zone.gslb.contains(name)
        || (name == zone.apex && APEX_TYPES.contains(&qtype))
        || zone.records.get(name).is_some_and(|rs| {
            rs.iter().any(|r| {
                let t = u16::from(r.record_type());
                t == qtype || t == TYPE_CNAME
            })
        });
    (!answered).then_some((i, 0))
}

/// Writes the negative answer to `query` (of `request`) into `out` when [`decide`] finds one,
/// with `ecs` echoed at scope 0 (the answer is the same for every client, as
/// `Authority::scope` says of a name that is not a GSLB name). `false` (and `out` as it was)
/// otherwise.
pub(super) fn answer(
    data: &Authority,
    request: &[u8],
    query: &Plain<'_>,
    ecs: Option<Subnet<'_>>,
    out: &mut Vec<u8>,
) -> bool {
    let Some((zone, rcode)) = decide(data, query) else {
        return false;
    };
    let Some(soa) = data.wire.1.get(zone).and_then(Option::as_ref) else {
        return false;
    };
    let start = out.len();
    header(out, request, rcode, 0, 1, query.opt.is_some());
    let mut pointers = Pointers::new();
    let qname = &query.question[..query.question.len() - 4];
    // The question, as sent (no suffix before it to point to).
    let written = pointers.name(out, start, qname).is_some()
        && {
            out.extend_from_slice(&query.question[qname.len()..]);
            true
        }
        && pointers.name(out, start, &soa.owner).is_some()
        && {
            out.extend_from_slice(&TYPE_SOA.to_be_bytes());
            out.extend_from_slice(&CLASS_IN.to_be_bytes());
            out.extend_from_slice(&soa.ttl.to_be_bytes());
            let rdlen_at = out.len();
            out.extend_from_slice(&[0, 0]);
            let names = pointers.name(out, start, &soa.mname).is_some()
                && pointers.name(out, start, &soa.rname).is_some();
            out.extend_from_slice(&soa.numbers);
            let rdlen = (out.len() - rdlen_at - 2) as u16;
            out[rdlen_at..rdlen_at + 2].copy_from_slice(&rdlen.to_be_bytes());
            names
        };
    if let Some(opt) = query.opt {
        write_opt(out, data.edns_udp_size, opt.dnssec_ok, ecs, 0);
    }
    // A reply that does not fit 512 bytes (long names) is the general path's to truncate.
    if !written || out.len() - start > MAX_REPLY {
        out.truncate(start);
        return false;
    }
    true
}

/// The most name suffixes kept for compression; a reply that needs more goes to the general
/// path.
const MAX_POINTERS: usize = 48;

/// The names written so far as `BinEncoder` keeps them for compression: the offset of every
/// label written uncompressed, with the name from that label on (without the root label).
struct Pointers<'a> {
    list: [(u16, &'a [u8]); MAX_POINTERS],
    len: usize,
}

impl<'a> Pointers<'a> {
    fn new() -> Self {
        Pointers {
            list: [(0, &[]); MAX_POINTERS],
            len: 0,
        }
    }

    /// Writes `name` (on the wire, uncompressed) at the end of `out` (whose message starts at
    /// `start`), compressed as `Name::emit_as_canonical` does: each label in turn, the first whose suffix was
    /// written before becomes a pointer to it, and each written label is kept. `None` when the
    /// pointers would overflow.
    fn name(&mut self, out: &mut Vec<u8>, start: usize, name: &'a [u8]) -> Option<()> {
        let body = &name[..name.len() - 1];
        let mut at = 0;
        while at < body.len() {
            let suffix = &body[at..];
            if let Some(&(to, _)) = self.list[..self.len].iter().find(|(_, n)| *n == suffix) {
                out.extend_from_slice(&(0xc000 | to).to_be_bytes());
                return Some(());
            }
            if self.len == MAX_POINTERS {
                return None;
            }
            self.list[self.len] = (u16::try_from(out.len() - start).ok()?, suffix);
            self.len += 1;
            let label = usize::from(body[at]);
            out.extend_from_slice(&body[at..=at + label]);
            at += 1 + label;
        }
        out.push(0);
        Some(())
    }
}
