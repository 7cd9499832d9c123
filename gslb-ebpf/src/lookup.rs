//! The answer set for a parsed query: the set in `ANSWERS` under (name hash, generation, view,
//! qtype) with the name itself checked, and on a miss why there is none (`DOMAINS`); for a name
//! that is not ours, the parent whose wildcard may answer it. The order of the views tried,
//! and of the names, is the dispatch's (main.rs).

use gslb_common::{
    AnswerKey, AnswerSet, DomainKey, NAME_HASH_SEED, ProgramConfig, QNAME_MAX, QNAME_WORDS,
    WILDCARD_HASH_WORDS, any_view_bit, name_hash_step,
};

use crate::{
    ANSWERS, ANY_VIEW, DOMAINS, Miss, Scratch,
    hdr::{ld, st},
    parse::Query,
};

/// Whether (name, qtype) is hinted to have one answer for every client (`ANY_VIEW`; a hint
/// only, see `gslb_common::ANY_VIEW_WORDS`). An inlined array lookup.
#[inline(always)]
pub fn any_view_hint(hash: u64, qtype: u16) -> bool {
    let (word, bit) = any_view_bit(hash, qtype);
    ANY_VIEW.get(word).is_some_and(|w| *w & bit != 0)
}

/// The name a lookup is for, lower-cased and zero-padded in words: the question's, or the
/// parent of a wildcard that may answer it ([`wildcard_parent`]), both in `Scratch::key`.
pub struct Name {
    words: *const u8,
    /// Wire length.
    len: usize,
}

impl Name {
    /// The question's name, as the parse left it.
    #[inline(always)]
    pub fn question(scratch: &Scratch, q: &Query) -> Name {
        Name {
            words: scratch.key.name.as_ptr(),
            len: q.qlen,
        }
    }
}

/// The answer set under `key` if it answers exactly `name` (the key only holds the name's
/// hash).
#[inline(always)]
pub fn find_answer<'a>(key: &AnswerKey, name: &Name) -> Option<&'a AnswerSet> {
    // SAFETY: the map value is read-only for the program, and deleted only after the RCU grace
    // period that follows the switch away from its generation (main.rs, `ANSWERS`).
    let set: &AnswerSet = unsafe { ANSWERS.get(key) }?;
    let (ours, len) = (name.words, name.len);
    if set.name_len as usize != len {
        return None;
    }
    let theirs = set.name.as_ptr();
    // Words up to and including the one with the terminating zero; the bytes after it in that
    // word are zero in both (the parse zeroed ours, and `miss_reason` and `wildcard_parent`
    // the rest of the key before a parent is compared; the controller zero-padded its copy).
    for w in 0..QNAME_WORDS {
        if 8 * w >= len {
            break;
        }
        // SAFETY: w < QNAME_WORDS: theirs is QNAME_MAX bytes, ours a name in `Scratch::key`
        // (a parent at most 64 bytes in, and 8 * w < len, so within its QNAME_MAX + 8 bytes);
        // unaligned, as `ld` allows.
        if unsafe { ld::<u64>(ours.add(8 * w)) != ld::<u64>(theirs.add(8 * w)) } {
            return None;
        }
    }
    Some(set)
}

/// The question after its first label, as the parent of a wildcard that may answer it, and
/// the parent's `wildcard_hash`; `None` when the question is a single label. Only in
/// `gslb_xdp_wildcard`, after [`miss_reason`] found the question not ours (`UnknownName`): its
/// name is zero-padded then, and the controller keys a wildcard by its parent only when
/// nothing but the wildcard exists below the parent. The parent is read where it is,
/// unaligned, and its fixed number of words hashed in a straight line (verifier only: a
/// branch on the length per word is a path per length).
#[inline(always)]
pub fn wildcard_parent(scratch: &mut Scratch) -> Option<(Name, u64)> {
    let label = scratch.key.name[0] as usize;
    // A label length: a pointer or reserved type was counted as such (`unknown_name_reason`).
    if label == 0 || label > 63 {
        return None;
    }
    let skip = 1 + label;
    // The question's length as the parse left it in `Scratch::len`, not `q.qlen`: verifier
    // only, a compare of `q.qlen` narrows its range on this path, and the reply, which reads
    // it, is walked again for each range (past the verifier's million instructions).
    // SAFETY: a u32 of the map value.
    let qlen = unsafe { core::ptr::read_volatile(&raw const scratch.len) } as usize;
    if skip >= qlen {
        return None;
    }
    let key = (&raw mut scratch.key).cast::<u8>();
    // The key's type and generation after the name: zeros, as a set's name is padded, for
    // [`find_answer`]'s last word of a parent that ends within 8 bytes of `QNAME_MAX`.
    // SAFETY: the 8 bytes after the key's name.
    unsafe { st::<u64>(key.add(QNAME_MAX), 0) };
    let parent = key.wrapping_add(skip) as *const u8;
    let mut hash = NAME_HASH_SEED;
    for w in 0..WILDCARD_HASH_WORDS {
        // SAFETY: skip <= 64, so within the key's QNAME_MAX bytes; unaligned, as `ld` allows.
        hash = name_hash_step(hash, unsafe { ld::<u64>(parent.add(8 * w)) });
    }
    Some((
        Name {
            words: parent,
            len: qlen - skip,
        },
        hash,
    ))
}

/// Why no answer was found for the question (the slow path of a miss): the name is known with
/// this qtype but has no answer for the client's view nor the default view, or it is not a
/// name we serve.
#[inline(always)]
pub fn miss_reason(scratch: &mut Scratch, q: &Query, config: &ProgramConfig) -> Miss {
    let key = &mut scratch.key;
    let words = key.name.as_mut_ptr();
    for w in 0..QNAME_WORDS {
        if 8 * w >= q.qlen {
            // SAFETY: w < QNAME_WORDS words of the 8-byte aligned name.
            unsafe { st::<u64>(words.add(8 * w), 0) };
        }
    }
    key.qtype = q.qtype;
    key.reserved = 0;
    key.generation = config.generation;
    // SAFETY: the map value is not used.
    if unsafe { DOMAINS.get(key) }.is_some() {
        return Miss::NoAnswer;
    }
    unknown_name_reason(key)
}

/// Why a name is not in `DOMAINS`: a compression pointer or reserved label type where a label
/// length belongs, or simply a name we do not serve. Walks the key, not the packet.
#[inline(always)]
fn unknown_name_reason(key: &DomainKey) -> Miss {
    let mut at = 0usize;
    for _ in 0..QNAME_MAX / 2 {
        if at >= QNAME_MAX {
            break;
        }
        let len = key.name[at];
        if len == 0 {
            break;
        }
        if len & 0xc0 != 0 {
            return Miss::NameCompressed;
        }
        at += 1 + len as usize;
    }
    Miss::UnknownName
}
