//! A server's reply reduced to what the servers are compared on: the RCODE (with the OPT's
//! extended bits), the opcode and header flags, the questions echoed (case kept), the OPT
//! record (version, flags, option codes; not the payload size, which is each server's own
//! choice) and the records of each section, in a fixed order. The header and the OPT are read
//! from the bytes here; the records are decoded by hickory.

use std::fmt;

use hickory_proto::{
    op::Message,
    rr::{Record, RecordType},
};

/// What a server did with a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// No reply in time (UDP), or the connection closed without one (TCP).
    Silent,
    Reply(Reply),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Reply {
    pub(super) rcode: u16,
    pub(super) opcode: u8,
    /// The flags set, by name: qr aa tc rd ra z ad cd.
    pub(super) flags: Vec<&'static str>,
    /// Each question as "name TYPE CLASS", its name as sent back (case kept).
    pub(super) questions: Vec<String>,
    pub(super) opt: Option<Opt>,
    /// Each section's records ([`show`]), sorted; the OPT is in `opt`.
    pub(super) answer: Vec<String>,
    pub(super) authority: Vec<String>,
    pub(super) additional: Vec<String>,
}

/// The reply's OPT record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Opt {
    pub(super) version: u8,
    /// The 16 flag bits (DO and the Z bits).
    pub(super) flags: u16,
    /// The options' codes, in order.
    pub(super) options: Vec<u16>,
}

const FLAGS: [(&str, usize, u8); 8] = [
    ("qr", 2, 0x80),
    ("aa", 2, 0x04),
    ("tc", 2, 0x02),
    ("rd", 2, 0x01),
    ("ra", 3, 0x80),
    ("z", 3, 0x40),
    ("ad", 3, 0x20),
    ("cd", 3, 0x10),
];

impl Outcome {
    /// `reply` (a whole message) reduced; a reply too short for a header, or whose header
    /// counts more than it holds, panics with its bytes: no server of the three sends one.
    pub(super) fn of(reply: &[u8]) -> Outcome {
        assert!(
            reply.len() >= 12,
            "a reply shorter than a header: {reply:02x?}"
        );
        let count = |at: usize| usize::from(u16::from_be_bytes([reply[at], reply[at + 1]]));
        let mut at = 12;
        let mut questions = Vec::new();
        for _ in 0..count(4) {
            let (name, end) = read_name(reply, at)
                .unwrap_or_else(|| panic!("a question that does not parse: {reply:02x?}"));
            let fixed = reply
                .get(end..end + 4)
                .unwrap_or_else(|| panic!("a question cut short: {reply:02x?}"));
            let (qtype, class) = (
                u16::from_be_bytes([fixed[0], fixed[1]]),
                u16::from_be_bytes([fixed[2], fixed[3]]),
            );
            questions.push(format!("{name} TYPE{qtype} CLASS{class}"));
            at = end + 4;
        }
        let mut opt = None;
        let mut ext_rcode = 0;
        let records = count(6) + count(8) + count(10);
        for i in 0..records {
            let end = skip_name(reply, at)
                .unwrap_or_else(|| panic!("a record that does not parse: {reply:02x?}"));
            let fixed = reply
                .get(end..end + 10)
                .unwrap_or_else(|| panic!("a record cut short: {reply:02x?}"));
            let rtype = u16::from_be_bytes([fixed[0], fixed[1]]);
            let rdlen = usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
            let rdata = reply
                .get(end + 10..end + 10 + rdlen)
                .unwrap_or_else(|| panic!("record data cut short: {reply:02x?}"));
            if rtype == 41 && i >= count(6) + count(8) {
                ext_rcode = u16::from(fixed[4]);
                opt = Some(Opt {
                    version: fixed[5],
                    flags: u16::from_be_bytes([fixed[6], fixed[7]]),
                    options: option_codes(rdata),
                });
            }
            at = end + 10 + rdlen;
        }
        let show = |records: &[Record]| {
            let mut shown: Vec<String> = records.iter().map(show).collect();
            shown.sort();
            shown
        };
        let (answer, authority, additional) = match Message::from_vec(reply) {
            Ok(m) => (show(&m.answers), show(&m.authorities), show(&m.additionals)),
            // Compared all the same: the same bytes fail the same way.
            Err(e) => (vec![format!("undecodable by hickory: {e}")], vec![], vec![]),
        };
        Outcome::Reply(Reply {
            rcode: ext_rcode << 4 | u16::from(reply[3] & 0x0f),
            opcode: (reply[2] >> 3) & 0x0f,
            flags: FLAGS
                .iter()
                .filter(|(_, byte, mask)| reply[*byte] & mask != 0)
                .map(|(name, ..)| *name)
                .collect(),
            questions,
            opt,
            answer,
            authority,
            additional,
        })
    }

    pub(super) fn rcode(&self) -> Option<u16> {
        match self {
            Outcome::Silent => None,
            Outcome::Reply(r) => Some(r.rcode),
        }
    }
}

/// `record` as "owner TTL CLASS TYPE data", its names in lower case: names compare without
/// case (RFC 4343), and a server that compresses its answer's names to the question writes
/// them in the question's case (the question itself is compared byte for byte). A TXT
/// record's text keeps its case.
fn show(record: &Record) -> String {
    let data = record.data.to_string();
    let data = if record.record_type() == RecordType::TXT {
        data
    } else {
        data.to_lowercase()
    };
    format!(
        "{} {} {} {} {data}",
        record.name.to_lowercase(),
        record.ttl,
        record.dns_class,
        record.record_type()
    )
}

/// The name at `at` (labels, then the root or a compression pointer) as text, with the
/// position after it. Pointers are not followed: a question name has none.
fn read_name(message: &[u8], mut at: usize) -> Option<(String, usize)> {
    let mut text = String::new();
    loop {
        let len = usize::from(*message.get(at)?);
        if len & 0xc0 == 0xc0 {
            text.push_str("<pointer>");
            return Some((text, at + 2));
        }
        at += 1;
        if len == 0 {
            if text.is_empty() {
                text.push('.');
            }
            return Some((text, at));
        }
        for &b in message.get(at..at + len)? {
            if b.is_ascii_graphic() && b != b'.' && b != b'\\' {
                text.push(char::from(b));
            } else {
                text.push_str(&format!("\\{b:03}"));
            }
        }
        text.push('.');
        at += len;
    }
}

fn skip_name(message: &[u8], at: usize) -> Option<usize> {
    read_name(message, at).map(|(_, end)| end)
}

/// The codes of the options in an OPT record's data.
fn option_codes(mut rdata: &[u8]) -> Vec<u16> {
    let mut codes = Vec::new();
    while let Some((&[c0, c1, l0, l1], rest)) = rdata.split_first_chunk::<4>() {
        codes.push(u16::from_be_bytes([c0, c1]));
        rdata = rest
            .get(usize::from(u16::from_be_bytes([l0, l1]))..)
            .unwrap_or(&[]);
    }
    codes
}

/// An RCODE's name (extended ones included).
pub(super) fn rcode_name(rcode: u16) -> String {
    match rcode {
        0 => "NOERROR".into(),
        1 => "FORMERR".into(),
        2 => "SERVFAIL".into(),
        3 => "NXDOMAIN".into(),
        4 => "NOTIMP".into(),
        5 => "REFUSED".into(),
        9 => "NOTAUTH".into(),
        16 => "BADVERS".into(),
        other => format!("RCODE{other}"),
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Outcome::Reply(r) = self else {
            return write!(f, "no reply");
        };
        write!(f, "{} [{}]", rcode_name(r.rcode), r.flags.join(" "))?;
        if r.opcode != 0 {
            write!(f, " opcode {}", r.opcode)?;
        }
        write!(f, " qd {}", r.questions.len())?;
        if r.questions.len() == 1 {
            write!(f, " ({})", r.questions[0])?;
        }
        match &r.opt {
            None => write!(f, " no-opt")?,
            Some(o) => write!(
                f,
                " opt v{} flags {:#06x} options {:?}",
                o.version, o.flags, o.options
            )?,
        }
        for (name, section) in [
            ("an", &r.answer),
            ("ns", &r.authority),
            ("ar", &r.additional),
        ] {
            if !section.is_empty() {
                write!(f, " {name} {{{}}}", section.join("; "))?;
            }
        }
        Ok(())
    }
}
