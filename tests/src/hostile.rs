//! The costliest DNS messages of each class an attacker can send a server in one UDP datagram
//! (65,507 bytes of payload over IPv4) or one TCP message, for the responder's tests, the fuzz
//! corpora and `bench hostile`. Each is built on the wire by hand: no DNS library would
//! write most of them.

/// The most payload one UDP datagram carries over IPv4 (65,535 less the IPv4 and UDP headers).
pub const MAX_UDP_PAYLOAD: usize = 65_507;

/// A class of hostile message, each the worst of its kind within [`MAX_UDP_PAYLOAD`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// A valid query for `www.example.com` A whose OPT carries one padding option (RFC 7830)
    /// filling the datagram: the most bytes a well-formed query can have.
    MaxSize,
    /// As many distinct 139-byte questions as fit (471): the report's 64 KB datagram, whose
    /// every question a lenient server decodes and echoes.
    MaxQuestions,
    /// One question, then as many 11-byte records (root owner, type A, no data) in the answer
    /// section as fit.
    MaxRecords,
    /// One question, then an answer record whose data holds a chain of 8,000 compression
    /// pointers, each to the one before, and as many records as fit whose owner is the
    /// chain's last pointer: every owner a decoder follows costs 8,000 hops.
    PointerChain,
    /// One question whose name has the most labels a name can have (127 one-letter labels
    /// and the root: 255 bytes), with an OPT.
    MaxLabels,
}

impl Class {
    pub const ALL: [Class; 5] = [
        Class::MaxSize,
        Class::MaxQuestions,
        Class::MaxRecords,
        Class::PointerChain,
        Class::MaxLabels,
    ];

    /// The class's name in bench lines and corpus file names.
    pub fn name(self) -> &'static str {
        match self {
            Class::MaxSize => "max_size",
            Class::MaxQuestions => "max_questions",
            Class::MaxRecords => "max_records",
            Class::PointerChain => "pointer_chain",
            Class::MaxLabels => "max_labels",
        }
    }

    /// The message of this class with ID `id`.
    pub fn message(self, id: u16) -> Vec<u8> {
        let m = match self {
            Class::MaxSize => max_size(id),
            Class::MaxQuestions => max_questions(id),
            Class::MaxRecords => max_records(id),
            Class::PointerChain => pointer_chain(id),
            Class::MaxLabels => max_labels(id),
        };
        debug_assert!(m.len() <= MAX_UDP_PAYLOAD, "{self:?}: {} bytes", m.len());
        m
    }
}

/// A query header with ID `id`, RD clear, and the four counts.
pub fn header(id: u16, counts: [u16; 4]) -> Vec<u8> {
    let mut m = Vec::with_capacity(MAX_UDP_PAYLOAD);
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&[0, 0]);
    for count in counts {
        m.extend_from_slice(&count.to_be_bytes());
    }
    m
}

/// `name` (dotted) on the wire, uncompressed, then `qtype` and class IN: a question.
pub fn question(name: &str, qtype: u16) -> Vec<u8> {
    let mut q = Vec::new();
    for label in name.split('.').filter(|l| !l.is_empty()) {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&1u16.to_be_bytes());
    q
}

/// A plain query for `name` A with ID `id`, without EDNS: what the hostile classes are
/// measured against.
pub fn plain(id: u16, name: &str) -> Vec<u8> {
    [header(id, [1, 0, 0, 0]), question(name, 1)].concat()
}

/// An OPT record (root owner, payload 1232, version 0) holding `options` as written.
fn opt(options: &[u8]) -> Vec<u8> {
    let mut rr = vec![0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0];
    rr.extend_from_slice(&(options.len() as u16).to_be_bytes());
    rr.extend_from_slice(options);
    rr
}

fn max_size(id: u16) -> Vec<u8> {
    let mut m = [header(id, [1, 0, 0, 1]), question("www.example.com", 1)].concat();
    // The OPT's fixed part (11 bytes) and the option's header (4).
    let padding = MAX_UDP_PAYLOAD - m.len() - 11 - 4;
    let mut option = vec![0, 12];
    option.extend_from_slice(&(padding as u16).to_be_bytes());
    option.resize(4 + padding, 0);
    m.extend_from_slice(&opt(&option));
    m
}

fn max_questions(id: u16) -> Vec<u8> {
    // 139 bytes: a 135-byte name of two 63-byte labels and a 5-byte one, type, class.
    let count = (MAX_UDP_PAYLOAD - 12) / 139;
    let mut body = Vec::with_capacity(count * 139);
    for i in 0..count {
        let first = format!("{i:0>63}");
        body.extend_from_slice(&question(&format!("{first}.{}.xxxxx", "x".repeat(63)), 1));
    }
    [header(id, [count as u16, 0, 0, 0]), body].concat()
}

fn max_records(id: u16) -> Vec<u8> {
    let q = question("www.example.com", 1);
    let count = (MAX_UDP_PAYLOAD - 12 - q.len()) / 11;
    let mut m = [header(id, [1, count as u16, 0, 0]), q].concat();
    for _ in 0..count {
        m.extend_from_slice(&[0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0]);
    }
    m
}

fn pointer_chain(id: u16) -> Vec<u8> {
    const CHAIN: usize = 8_000;
    let q = question("www.example.com", 1);
    let mut m = [header(id, [1, 0, 0, 0]), q].concat();
    // Record 1: root owner, type NULL, its data a root label then the chain.
    m.extend_from_slice(&[0, 0, 10, 0, 1, 0, 0, 0, 0]);
    m.extend_from_slice(&((1 + 2 * CHAIN) as u16).to_be_bytes());
    let root = m.len();
    m.push(0);
    let mut previous = root;
    for _ in 0..CHAIN {
        let here = m.len();
        m.extend_from_slice(&(0xc000 | previous as u16).to_be_bytes());
        previous = here;
    }
    // Then records owned by the chain's last pointer: 2 + 10 bytes each.
    let owners = (MAX_UDP_PAYLOAD - m.len()) / 12;
    for _ in 0..owners {
        m.extend_from_slice(&(0xc000 | previous as u16).to_be_bytes());
        m.extend_from_slice(&[0, 1, 0, 1, 0, 0, 0, 0, 0, 0]);
    }
    let ancount = (1 + owners) as u16;
    m[6..8].copy_from_slice(&ancount.to_be_bytes());
    m
}

fn max_labels(id: u16) -> Vec<u8> {
    let name = vec!["a"; 127].join(".");
    [header(id, [1, 0, 0, 1]), question(&name, 1), opt(&[])].concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_fits_one_datagram_and_fills_it_when_it_can() {
        for class in Class::ALL {
            let m = class.message(7);
            assert!(m.len() <= MAX_UDP_PAYLOAD, "{class:?}");
            assert_eq!(&m[..2], &[0, 7], "{class:?}: ID");
            if class != Class::MaxLabels {
                assert!(
                    m.len() > MAX_UDP_PAYLOAD - 139,
                    "{class:?}: {} bytes",
                    m.len()
                );
            }
        }
        let questions = max_questions(0);
        assert_eq!(u16::from_be_bytes([questions[4], questions[5]]), 471);
        assert_eq!(questions.len(), 12 + 471 * 139);
    }
}
