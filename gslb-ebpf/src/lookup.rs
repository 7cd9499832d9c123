//! The answer set for a parsed query: the set in `ANSWERS` under (name hash, generation, view,
//! qtype) with the name itself checked, and on a miss why there is none (`DOMAINS`). The order
//! of the views tried is the dispatch's (main.rs).

use gslb_common::{
    AnswerKey, AnswerSet, DomainKey, ProgramConfig, QNAME_MAX, QNAME_WORDS, any_view_bit,
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

/// The answer set under `key` if it answers exactly the name in `scratch` (the key only holds
/// the name's hash).
#[inline(always)]
pub fn find_answer<'a>(key: &AnswerKey, scratch: &Scratch, qlen: usize) -> Option<&'a AnswerSet> {
    // SAFETY: the map value is read-only for the program, and deleted only after the RCU grace
    // period that follows the switch away from its generation (main.rs, `ANSWERS`).
    let set: &AnswerSet = unsafe { ANSWERS.get(key) }?;
    if set.name_len as usize != qlen {
        return None;
    }
    let ours = scratch.key.name.as_ptr();
    let theirs = set.name.as_ptr();
    // Words up to and including the one with the terminating zero; the parse zeroed the bytes
    // after it in that word, and the controller zero-padded its copy.
    for w in 0..QNAME_WORDS {
        if 8 * w >= qlen {
            break;
        }
        // SAFETY: w < QNAME_WORDS, both buffers are QNAME_MAX bytes and 8-byte aligned.
        if unsafe { ld::<u64>(ours.add(8 * w)) != ld::<u64>(theirs.add(8 * w)) } {
            return None;
        }
    }
    Some(set)
}

/// Why no answer was found (the slow path of a miss): the name is known with this qtype but has
/// no answer for the client's view nor the default view, or it is not a name we serve.
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
