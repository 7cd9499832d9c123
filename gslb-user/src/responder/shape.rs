//! The request's shape, read from its bytes before anything else looks at it: a header, one
//! question whose name is written out (no compression pointer), no answer or authority
//! record, and in the additional section at most one OPT (root owner) and one TSIG (the last
//! record), with nothing after them. That is every query a resolver or a stub sends (NSD
//! holds queries to the same shape; RFC 6891 §6.1.1, RFC 8945 §5.1). Anything else is refused
//! here with a header-only reply (and our OPT, for a request without a question but with an
//! OPT: RFC 6891 §6.1.1), so that no later step (hickory's decoder, the lookup, the
//! encoder) ever sees more than one question and two small records, whatever the datagram
//! holds: a 64 KB message of 454 questions, or of 8,000 compression pointers, costs one pass
//! over its first bytes.
//!
//! The scan is one forward pass: it never follows a compression pointer (a question name may
//! not hold one, and the OPT's owner must be the root byte), so neither its work nor its depth
//! depends on anything but the bytes it steps over.

/// The header's length.
pub(super) const HEADER: usize = 12;
/// The longest name on the wire (RFC 1035 §2.3.4).
pub(super) const MAX_NAME: usize = 255;
/// RR type OPT (RFC 6891).
pub(super) const TYPE_OPT: u16 = 41;
/// RR type TSIG (RFC 8945).
pub(super) const TYPE_TSIG: u16 = 250;
/// RCODE FORMERR.
pub(super) const FORMERR: u8 = 1;
/// RCODE NOTIMP.
pub(super) const NOTIMP: u8 = 4;

/// A request of the shape described in the module docs, as positions in its bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Shape<'a> {
    /// The request's OPCODE (its own, whatever it is: the caller answers the ones it does not
    /// implement with NOTIMP).
    pub(super) opcode: u8,
    /// The question as sent: its name (uncompressed, with the root label), type and class.
    pub(super) question: &'a [u8],
    /// The question's type.
    pub(super) qtype: u16,
    /// The question's class.
    pub(super) qclass: u16,
    /// The OPT record, when there is one.
    pub(super) opt: Option<Opt<'a>>,
    /// Whether the request ends with a TSIG record.
    pub(super) tsig: bool,
}

impl Shape<'_> {
    /// The question's name on the wire, uncompressed, with its root label.
    pub(super) fn qname(&self) -> &[u8] {
        &self.question[..self.question.len() - 4]
    }
}

/// The OPT record's fields (RFC 6891 §6.1.2), its options checked to fill its data exactly.
#[derive(Clone, Copy, Debug)]
pub(super) struct Opt<'a> {
    /// The requestor's UDP payload size.
    pub(super) payload: u16,
    /// The EDNS version.
    pub(super) version: u8,
    /// The DO bit.
    pub(super) dnssec_ok: bool,
    /// The options, as sent (code, length, data; each one inside).
    pub(super) options: &'a [u8],
}

impl<'a> Opt<'a> {
    /// The options in order, as (code, data).
    pub(super) fn options(&self) -> impl Iterator<Item = (u16, &'a [u8])> {
        let mut rest = self.options;
        std::iter::from_fn(move || {
            let (&[c0, c1, l0, l1], tail) = rest.split_first_chunk::<4>()?;
            let (data, after) = tail.split_at(usize::from(u16::from_be_bytes([l0, l1])));
            rest = after;
            Some((u16::from_be_bytes([c0, c1]), data))
        })
    }
}

/// What a request that is not of the shape gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// Nothing: shorter than a header, or a response (QR set). Never answer one: that way lie
    /// reflection loops.
    Drop,
    /// The header alone, with `rcode`: FORMERR for a malformed request, NOTIMP for one whose
    /// OPCODE we do not implement (its sections are not a query's, so nothing is echoed). With
    /// our OPT record when `dnssec_ok` is `Some` (the DO bit of the request's own OPT): a
    /// request without a question but otherwise of the shape is read to its end, and one with
    /// an OPT gets ours back, as RFC 6891 §6.1.1 asks of every response to it (and Knot does).
    HeaderOnly { rcode: u8, dnssec_ok: Option<bool> },
}

/// `request` read as described in the module docs.
pub(super) fn scan(request: &[u8]) -> Result<Shape<'_>, Refusal> {
    if request.len() < HEADER || request[2] & 0x80 != 0 {
        return Err(Refusal::Drop);
    }
    let opcode = (request[2] >> 3) & 0x0f;
    // Another OPCODE's sections need not be a query's (a NOTIFY has an answer, an UPDATE
    // records in every section): they are NOTIMP whatever they hold.
    let rcode = if opcode == 0 { FORMERR } else { NOTIMP };
    let malformed = Refusal::HeaderOnly {
        rcode,
        dnssec_ok: None,
    };
    let u16_at = |at: usize| -> Result<u16, Refusal> {
        request
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or(malformed)
    };
    let (qdcount, arcount) = (u16_at(4)?, u16_at(10)?);
    if qdcount > 1 || u16_at(6)? != 0 || u16_at(8)? != 0 || arcount > 2 {
        return Err(malformed);
    }
    let mut at = HEADER;
    let mut question = None;
    if qdcount == 1 {
        let name_end = skip_name(request, HEADER).ok_or(malformed)?;
        let (qtype, qclass) = (u16_at(name_end)?, u16_at(name_end + 2)?);
        question = Some((&request[HEADER..name_end + 4], qtype, qclass));
        at = name_end + 4;
    }
    let (mut opt, mut tsig) = (None, false);
    for i in 0..arcount {
        let owner_end = skip_name(request, at).ok_or(malformed)?;
        let rtype = u16_at(owner_end)?;
        let rdlen = usize::from(u16_at(owner_end + 8)?);
        let rdata = request
            .get(owner_end + 10..owner_end + 10 + rdlen)
            .ok_or(malformed)?;
        match rtype {
            // One OPT, owned by the root, before a TSIG (RFC 6891 §6.1.1).
            TYPE_OPT if opt.is_none() && !tsig && owner_end == at + 1 => {
                let fixed = &request[owner_end..owner_end + 8];
                opt = Some(Opt {
                    payload: u16::from_be_bytes([fixed[2], fixed[3]]),
                    version: fixed[5],
                    dnssec_ok: fixed[6] & 0x80 != 0,
                    options: options(rdata).ok_or(malformed)?,
                });
            }
            // A TSIG is the last record (RFC 8945 §5.1).
            TYPE_TSIG if i + 1 == arcount => tsig = true,
            _ => return Err(malformed),
        }
        at = owner_end + 10 + rdlen;
    }
    // Bytes after the last record are as malformed as missing ones (RFC 1035 §4.1; BIND,
    // NSD and Knot answer FORMERR too).
    if at != request.len() {
        return Err(malformed);
    }
    let Some((question, qtype, qclass)) = question else {
        return Err(Refusal::HeaderOnly {
            rcode,
            dnssec_ok: opt.map(|o| o.dnssec_ok),
        });
    };
    Ok(Shape {
        opcode,
        question,
        qtype,
        qclass,
        opt,
        tsig,
    })
}

/// The end of the uncompressed name at `at` in `message` (just after its root label), `None`
/// for a compression pointer, an extended label type (RFC 6891 §5), a name over 255 bytes or
/// one cut short.
pub(super) fn skip_name(message: &[u8], mut at: usize) -> Option<usize> {
    let start = at;
    loop {
        let len = usize::from(*message.get(at)?);
        if len > 63 || at + 1 + len - start > MAX_NAME {
            return None;
        }
        at += 1 + len;
        if len == 0 {
            return (at <= message.len()).then_some(at);
        }
    }
}

/// `rdata` when it is a sequence of options each inside it (RFC 6891 §6.1.2), `None` when one
/// runs past its end.
fn options(rdata: &[u8]) -> Option<&[u8]> {
    let mut rest = rdata;
    while !rest.is_empty() {
        let (&[_, _, l0, l1], tail) = rest.split_first_chunk::<4>()?;
        rest = tail.get(usize::from(u16::from_be_bytes([l0, l1]))..)?;
    }
    Some(rdata)
}

/// The header-only reply to `request` (at least a header long) with `rcode`: its ID, OPCODE
/// and RD, QR set, every count 0.
pub(super) fn header_only(request: &[u8], rcode: u8, out: &mut Vec<u8>) {
    out.extend_from_slice(&request[..2]);
    out.push(0x80 | (request[2] & 0x79));
    out.push(rcode);
    out.extend_from_slice(&[0; 8]);
}
