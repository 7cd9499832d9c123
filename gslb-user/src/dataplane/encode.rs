//! The encoding of the maps' keys and values, as the program reads them: addresses
//! IPv4-mapped, names in lower-cased wire form, answer records with their checksum sums.

use std::net::{IpAddr, Ipv6Addr};

use aya::maps::lpm_trie::Key;
use gslb_common::{
    ANSWER_ROTATE, AnswerKey, AnswerSet, DomainKey, LISTEN_IN_TRIE, LISTEN_INLINE,
    LISTEN_PREFIX_LEN, ListenKey, ListenSet, MAX_ADDRS, NAME_OWN, QNAME_MAX, QTYPE_A, QTYPE_AAAA,
    RR_FIXED_LEN, V4_MAPPED_BITS, VIEW_KEY_GENERATION_BITS, ViewKey,
};
use hickory_proto::{rr::Name, serialize::binary::BinEncodable};

use super::{DataplaneError, Result};
use crate::{
    compile::{Answer, CnameTarget},
    policy::AnswerMode,
};

/// RR type CNAME.
const QTYPE_CNAME: u16 = 5;

/// A map address back to an `IpAddr`: IPv4-mapped addresses as IPv4.
pub fn unmapped(addr: [u8; 16]) -> IpAddr {
    Ipv6Addr::from(addr).to_canonical()
}

/// IPv4 as IPv4-mapped IPv6, the one address form of the maps.
pub fn mapped(addr: IpAddr) -> [u8; 16] {
    gslb_common::mapped_key(addr).to_be_bytes()
}

/// The `LISTEN_SET` value for the addresses we serve: inline when they fit, otherwise a
/// pointer to the `LISTEN` trie.
pub fn listen_set(listen: &[IpAddr]) -> ListenSet {
    let mut set = ListenSet::default();
    let mut distinct: Vec<[u8; 16]> = listen.iter().map(|a| mapped(*a)).collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() > LISTEN_INLINE {
        set.count = LISTEN_IN_TRIE;
        return set;
    }
    set.count = distinct.len() as u32;
    set.addrs[..distinct.len()].copy_from_slice(&distinct);
    set
}

/// The `LISTEN` trie key of an address we serve: the whole address.
pub fn listen_key(addr: IpAddr) -> Key<ListenKey> {
    Key::new(LISTEN_PREFIX_LEN, ListenKey { addr: mapped(addr) })
}

/// The `ANSWERS` key of (name, qtype, view) in one generation, the name given by its hash.
pub fn answer_key(name_hash: u64, qtype: u16, generation: u32, view: u32) -> AnswerKey {
    AnswerKey {
        name_hash,
        generation,
        view,
        qtype,
        wildcard: NAME_OWN,
        reserved: 0,
    }
}

/// The `VIEWS` trie key for a client prefix in one generation.
pub fn view_key(generation: u32, network: IpAddr, prefix_len: u8) -> Key<ViewKey> {
    let bits = match network {
        IpAddr::V4(_) => V4_MAPPED_BITS + u32::from(prefix_len),
        IpAddr::V6(_) => u32::from(prefix_len),
    };
    Key::new(
        VIEW_KEY_GENERATION_BITS + bits,
        ViewKey {
            generation: generation.to_be_bytes(),
            addr: mapped(network),
        },
    )
}

/// A name in uncompressed wire form, lower-cased: what the fast path builds from a query.
pub fn wire_name(name: &str) -> Result<Vec<u8>> {
    let err = |source| DataplaneError::Name {
        name: name.into(),
        source: Box::new(source),
    };
    let fqdn = Name::from_ascii(name).map_err(err)?.to_lowercase();
    let mut fqdn = fqdn;
    fqdn.set_fqdn(true);
    fqdn.to_bytes().map_err(err)
}

/// The `DOMAINS` key for (name, qtype) in one generation; `None` when the name is longer than
/// the fast path's key, so only the responder can answer it.
pub fn domain_key(name: &str, qtype: u16, generation: u32) -> Result<Option<DomainKey>> {
    Ok(wire_domain_key(&wire_name(name)?, qtype, generation))
}

/// [`domain_key`] of a name already in wire form.
pub(super) fn wire_domain_key(wire: &[u8], qtype: u16, generation: u32) -> Option<DomainKey> {
    if wire.len() > QNAME_MAX {
        return None;
    }
    let mut key = DomainKey {
        qtype,
        generation,
        ..Default::default()
    };
    key.name[..wire.len()].copy_from_slice(wire);
    Some(key)
}

/// The ones' complement sum of `bytes` as 16-bit big-endian words from an even offset, folded.
pub fn ones_sum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|w| u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0)))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// One answer record exactly as the fast path writes it: a pointer to the question name at
/// offset 12, then type, class IN, TTL, RDLENGTH and the address.
pub fn answer_record(qtype: u16, ttl: u32, addr: IpAddr) -> Vec<u8> {
    match addr {
        IpAddr::V4(a) => question_record(qtype, ttl, &a.octets()),
        IpAddr::V6(a) => question_record(qtype, ttl, &a.octets()),
    }
}

/// A record owned by the question name (a pointer to offset 12): type, class IN, TTL,
/// RDLENGTH and `rdata`.
fn question_record(qtype: u16, ttl: u32, rdata: &[u8]) -> Vec<u8> {
    let mut rr = vec![0xc0, 12];
    rr.extend_from_slice(&qtype.to_be_bytes());
    rr.extend_from_slice(&1u16.to_be_bytes());
    rr.extend_from_slice(&ttl.to_be_bytes());
    rr.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    rr.extend_from_slice(rdata);
    rr
}

/// `set`'s records: `all`, their checksum sum and length.
fn put_records(set: &mut AnswerSet, all: &[u8]) {
    set.all_csum = u32::from(ones_sum(all));
    set.answers_len = all.len() as u32;
    set.records[..all.len()].copy_from_slice(all);
}

/// The map value for one answer to the name `wire` (lower-cased wire form, at most
/// `QNAME_MAX` bytes): the records as the fast path copies them to the wire, with the checksum
/// sums it adds instead of summing the records itself. A rotating answer of two or more
/// records is flagged `ANSWER_ROTATE`; one record is the same answer without a rotation, so it
/// takes no `ROTOR` slot (slots are given at publish, see `rotors`). `wildcard`: `wire` is the
/// parent of the wildcard whose answer this is (`gslb_common::NAME_WILDCARD`), so the question
/// is a name one label longer, of a length the query chooses.
pub fn answer_set(answer: &Answer, wire: &[u8], wildcard: bool) -> AnswerSet {
    if let Some(target) = answer.names.first() {
        return cname_set(answer, target, wire, wildcard);
    }
    let qtype = match answer.addrs.first() {
        Some(IpAddr::V6(_)) => QTYPE_AAAA,
        _ => QTYPE_A,
    };
    // No records (NODATA for this view), more than the set holds, or a window of several
    // that moves (`Answer::fast`): the program passes the query (count 0) and the responder
    // answers it from the same snapshot.
    let fits = answer.fast();
    let count = if fits { answer.addrs.len() as u8 } else { 0 };
    let mut set = AnswerSet {
        ttl: answer.ttl,
        count,
        flags: if answer.mode == AnswerMode::Rotate && count > 1 {
            ANSWER_ROTATE
        } else {
            0
        },
        qtype,
        name_len: wire.len() as u16,
        ..Default::default()
    };
    set.name[..wire.len()].copy_from_slice(wire);
    let mut all = Vec::new();
    for (i, addr) in answer
        .addrs
        .iter()
        .take(if fits { MAX_ADDRS } else { 0 })
        .enumerate()
    {
        let rr = answer_record(qtype, answer.ttl, *addr);
        set.rr_csum[i] = u32::from(ones_sum(&rr));
        all.extend_from_slice(&rr);
    }
    put_records(&mut set, &all);
    set
}

/// The map value for a CNAME domain's answer to the name `wire` (see [`answer_set`]): its
/// answer section as the fast path copies it, the CNAME to `target` (owner a pointer to the
/// question, the target uncompressed) and the records after it (owner a pointer to the
/// CNAME's RDATA, right after the question). Passed (count 0) when the fast path does not give
/// this answer ([`Answer::fast`]: several names in turn, or more after the CNAME than records),
/// or when it is more records or bytes than the set holds.
fn cname_set(answer: &Answer, target: &CnameTarget, wire: &[u8], wildcard: bool) -> AnswerSet {
    let mut set = AnswerSet {
        ttl: answer.ttl,
        qtype: QTYPE_CNAME,
        name_len: wire.len() as u16,
        ..Default::default()
    };
    set.name[..wire.len()].copy_from_slice(wire);
    let (Some(follow), true) = (&target.follow, answer.fast()) else {
        return set;
    };
    // The records after the CNAME point into the reply at the question's end, which a
    // wildcard's question does not fix: the responder gives those.
    if wildcard && !follow.is_empty() {
        return set;
    }
    let Ok(rdata) = wire_name(&target.name) else {
        return set;
    };
    let mut all = question_record(QTYPE_CNAME, answer.ttl, &rdata);
    // Header, question (name, type, class), then the CNAME's owner, type, class, TTL and
    // RDLENGTH: where the target's name starts (below 0x4000, a pointer's reach).
    let at = 12 + wire.len() + 4 + RR_FIXED_LEN;
    for &(ttl, addr) in follow {
        let mut rr = answer_record(if addr.is_ipv6() { QTYPE_AAAA } else { QTYPE_A }, ttl, addr);
        rr[..2].copy_from_slice(&(0xc000 | at as u16).to_be_bytes());
        all.extend_from_slice(&rr);
    }
    let count = 1 + follow.len();
    if count > MAX_ADDRS || all.len() > set.records.len() {
        return set;
    }
    set.count = count as u8;
    put_records(&mut set, &all);
    set
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use std::sync::Arc;

    use gslb_common::name_hash;

    use super::*;

    #[test]
    fn qname_key_encoding() {
        let table: &[(&str, &[u8])] = &[
            ("www.example.com", b"\x03www\x07example\x03com\x00"),
            ("WWW.Example.COM.", b"\x03www\x07example\x03com\x00"),
            ("a", b"\x01a\x00"),
            ("_dns.x-y.example", b"\x04_dns\x03x-y\x07example\x00"),
        ];
        for (name, wire) in table {
            let key = domain_key(name, 1, 7).unwrap().unwrap();
            assert_eq!(&key.name[..wire.len()], *wire, "{name}");
            assert!(
                key.name[wire.len()..].iter().all(|b| *b == 0),
                "{name}: padding"
            );
            assert_eq!((key.qtype, key.generation, key.reserved), (1, 7, 0));
        }
    }

    #[test]
    fn names_longer_than_the_key_are_left_to_the_responder() {
        // 2 labels of 63 + root: 1+63+1+63+1 = 129 wire bytes, one over the key.
        let long = format!("{}.{}", "a".repeat(63), "b".repeat(63));
        assert_eq!(wire_name(&long).unwrap().len(), QNAME_MAX + 1);
        assert!(domain_key(&long, 1, 0).unwrap().is_none());
        let fits = format!("{}.{}", "a".repeat(63), "b".repeat(62));
        assert!(domain_key(&fits, 1, 0).unwrap().is_some());
    }

    #[test]
    fn view_keys_put_the_generation_first_and_map_ipv4() {
        let table = [
            (IpAddr::V4(Ipv4Addr::new(198, 51, 100, 0)), 24, 32 + 96 + 24),
            (
                IpAddr::V6("2001:db8:100::".parse::<Ipv6Addr>().unwrap()),
                48,
                32 + 48,
            ),
            (IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0, 32 + 96),
        ];
        for (net, len, bits) in table {
            let key = view_key(0x0102_0304, net, len);
            assert_eq!(key.prefix_len(), bits, "{net}/{len}");
            assert_eq!(key.data().generation, [1, 2, 3, 4]);
            assert_eq!(key.data().addr, mapped(net));
        }
    }

    const WWW: &str = "www.example.com";

    #[test]
    fn answer_keys_hash_the_lower_case_wire_name() {
        let wire = wire_name("WWW.Example.COM").unwrap();
        assert_eq!(wire, b"\x03www\x07example\x03com\x00");
        let key = answer_key(name_hash(&wire), QTYPE_AAAA, 7, 3);
        assert_eq!(
            (key.name_hash, key.qtype, key.generation, key.view),
            (name_hash(&wire), 28, 7, 3)
        );
        assert_eq!((key.wildcard, key.reserved), (NAME_OWN, 0));
    }

    #[test]
    fn listen_sets_hold_up_to_eight_addresses_inline() {
        let v4 = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 53));
        let v6: IpAddr = "2001:db8::53".parse().unwrap();
        let set = listen_set(&[v4, v6, v4]);
        assert_eq!(set.count, 2, "distinct addresses");
        assert!(set.addrs[..2].contains(&mapped(v4)) && set.addrs[..2].contains(&mapped(v6)));
        assert!(set.addrs[2..].iter().all(|a| *a == [0; 16]));
        let many: Vec<IpAddr> = (1..=LISTEN_INLINE as u8 + 1)
            .map(|i| IpAddr::V4(Ipv4Addr::new(192, 0, 2, i)))
            .collect();
        assert_eq!(
            listen_set(&many[..LISTEN_INLINE]).count,
            LISTEN_INLINE as u32
        );
        assert_eq!(listen_set(&many).count, LISTEN_IN_TRIE);
    }

    #[test]
    fn listen_keys_are_whole_mapped_addresses() {
        let key = listen_key(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 53)));
        assert_eq!(key.prefix_len(), 128);
        assert_eq!(
            key.data().addr,
            Ipv4Addr::new(192, 0, 2, 53).to_ipv6_mapped().octets()
        );
    }

    #[test]
    fn answer_set_checksums_match_the_records() {
        let answer = Answer {
            ttl: 300,
            mode: AnswerMode::Rotate,
            max_answers: 1,
            addrs: vec!["192.0.2.10".parse().unwrap(), "192.0.2.11".parse().unwrap()],
            names: Vec::new(),
        };
        let wire = wire_name(WWW).unwrap();
        let set = answer_set(&answer, &wire, false);
        assert_eq!(
            (set.count, set.flags, set.qtype, set.ttl),
            (2, ANSWER_ROTATE, 1, 300)
        );
        assert_eq!(set.name_len as usize, wire.len());
        assert_eq!(&set.name[..wire.len()], &wire[..]);
        assert!(
            set.name[wire.len()..].iter().all(|b| *b == 0),
            "name padding"
        );
        let rr0 = answer_record(1, 300, answer.addrs[0]);
        assert_eq!(
            rr0,
            [0xc0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 10]
        );
        // Sum by hand: c00c + 0001 + 0001 + 0000 + 012c + 0004 + c000 + 020a.
        let by_hand: u32 = 0xc00c + 1 + 1 + 0x012c + 4 + 0xc000 + 0x020a;
        let folded = (by_hand & 0xffff) + (by_hand >> 16);
        assert_eq!(set.rr_csum[0], folded);
        let both = [rr0, answer_record(1, 300, answer.addrs[1])].concat();
        assert_eq!(set.all_csum, u32::from(ones_sum(&both)));
        assert_eq!(set.rr_len(), 16);
        assert_eq!(
            &set.records[..32],
            &both[..],
            "records back to back, as on the wire"
        );
        assert!(set.records[32..].iter().all(|b| *b == 0));
    }

    #[test]
    fn answer_sets_hold_what_the_program_gives_as_the_responder_does() {
        let addrs = |n: u8| -> Vec<IpAddr> {
            (1..=n)
                .map(|i| IpAddr::V4(Ipv4Addr::new(192, 0, 2, i)))
                .collect()
        };
        let wire = wire_name(WWW).unwrap();
        #[rustfmt::skip]
        let cases: &[(&str, AnswerMode, u16, u8, u8)] = &[
            // (what, mode, max_answers, addresses, records stored: 0 passes the query)
            ("one in turn of eight", AnswerMode::Rotate, 1, 8, 8),
            ("one in turn of nine: more than the set holds", AnswerMode::Rotate, 1, 9, 0),
            ("a window of two that moves", AnswerMode::Rotate, 2, 5, 0),
            ("a window over one address is that address", AnswerMode::Rotate, 3, 1, 1),
            ("all of eight", AnswerMode::All, 8, 8, 8),
            ("all of three under a cap of four", AnswerMode::All, 4, 3, 3),
            ("all of five over a cap of four: a window", AnswerMode::All, 4, 5, 0),
            ("all of 256", AnswerMode::All, 256, 255, 0),
        ];
        for &(what, mode, max_answers, n, stored) in cases {
            let answer = Answer {
                ttl: 30,
                mode,
                max_answers,
                addrs: addrs(n),
                names: Vec::new(),
            };
            let set = answer_set(&answer, &wire, false);
            assert_eq!(set.count, stored, "{what}");
            // What the program answers from a set it holds is what the responder gives:
            // every record, or one of them in turn.
            if stored > 0 {
                let given = answer.carried(|| 0);
                let rotates = set.flags & ANSWER_ROTATE != 0;
                assert_eq!(
                    given.len(),
                    if rotates { 1 } else { stored as usize },
                    "{what}"
                );
            }
        }
    }

    /// A CNAME set holds its answer section exactly, and passes (count 0) what it cannot hold:
    /// more records than `MAX_ADDRS`, more bytes than the set, names in turn, or an answer with
    /// more after the CNAME than records.
    #[test]
    fn cname_sets_hold_the_answer_section_or_pass() {
        let wire = wire_name("www.example.com").unwrap();
        let target = |name: &str, follow: Option<Vec<(u32, IpAddr)>>| {
            Arc::new(CnameTarget {
                name: name.into(),
                follow,
            })
        };
        let answer = |names: Vec<Arc<CnameTarget>>| Answer {
            ttl: 30,
            mode: AnswerMode::Rotate,
            max_answers: 1,
            addrs: Vec::new(),
            names,
        };
        let edge = |n: u8| -> Vec<(u32, IpAddr)> {
            (0..n)
                .map(|i| (60, IpAddr::V4(Ipv4Addr::new(192, 0, 2, i))))
                .collect()
        };
        // The CNAME (owner 0xc00c, the target whole), then an A owned by a pointer to the
        // target at 12 (the header) + 21 (the question: its name, type and class) + 12 (the
        // CNAME's fixed part) = 45.
        let set = answer_set(
            &answer(vec![target("e.example.net", Some(edge(1)))]),
            &wire,
            false,
        );
        let mut want = vec![0xc0, 12, 0, 5, 0, 1, 0, 0, 0, 30, 0, 15];
        want.extend_from_slice(b"\x01e\x07example\x03net\x00");
        want.extend_from_slice(&[0xc0, 45, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 0]);
        assert_eq!(set.count, 2);
        assert_eq!(set.answers_len as usize, want.len());
        assert_eq!(&set.records[..want.len()], &want[..]);
        assert_eq!(set.all_csum, u32::from(ones_sum(&want)));
        assert_eq!(set.flags & ANSWER_ROTATE, 0, "a CNAME set never rotates");

        let long = format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61)
        );
        let cases: Vec<(&str, Answer)> = vec![
            (
                "seven addresses after it fit",
                answer(vec![target("e.example.net", Some(edge(7)))]),
            ),
            (
                "eight do not",
                answer(vec![target("e.example.net", Some(edge(8)))]),
            ),
            (
                "a 255-byte target does not",
                answer(vec![target(&long, Some(vec![]))]),
            ),
            (
                "more than records after it",
                answer(vec![target("e.example.net", None)]),
            ),
            (
                "names in turn",
                answer(vec![
                    target("e.example.net", Some(vec![])),
                    target("f.example.net", Some(vec![])),
                ]),
            ),
        ];
        let counts: Vec<(&str, u8)> = cases
            .iter()
            .map(|(what, a)| (*what, answer_set(a, &wire, false).count))
            .collect();
        assert_eq!(
            counts,
            [
                ("seven addresses after it fit", 8),
                ("eight do not", 0),
                ("a 255-byte target does not", 0),
                ("more than records after it", 0),
                ("names in turn", 0),
            ]
        );
    }
}
