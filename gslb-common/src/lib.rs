//! Map layouts shared by the XDP program (`gslb-ebpf`) and the controller (`gslb-user`).
//!
//! Every struct is `#[repr(C)]` with explicit reserved fields instead of implicit padding, so the
//! kernel side and the user side agree byte for byte and hash keys never contain uninitialised
//! bytes. Sizes are asserted at compile time.
#![no_std]

mod cookie;
mod ecs_allow;
mod nsid;
mod rrl;
pub use cookie::*;
pub use ecs_allow::*;
pub use nsid::*;
pub use rrl::*;

/// Longest query name, in wire bytes (length octets and the terminating root label included),
/// that the fast path answers. Longer names go to the responder.
pub const QNAME_MAX: usize = 128;

/// Most addresses in one answer set (NetScaler's multiple-IP response is capped the same way).
pub const MAX_ADDRS: usize = 8;

/// View used when no client prefix matches.
pub const DEFAULT_VIEW: u32 = 0;

/// DNS types the fast path answers.
pub const QTYPE_A: u16 = 1;
pub const QTYPE_AAAA: u16 = 28;

/// Fixed part of every answer record: name pointer (2), type (2), class (2), TTL (4), RDLENGTH (2).
pub const RR_FIXED_LEN: usize = 12;
/// An OPT record without options: root name (1), type (2), class (2), TTL (4), RDLENGTH (2).
pub const OPT_RR_LEN: usize = 11;
/// DNS message header.
pub const DNS_HEADER_LEN: usize = 12;

/// The longest EDNS Client Subnet option the fast path echoes (RFC 7871 §6): code and length
/// (4), family, source and scope prefix lengths (4), and an IPv6 address of 16 bytes.
pub const ECS_OPTION_MAX_LEN: usize = 8 + 16;

/// The largest reply the fast path can build. It fits in the 512 bytes every client accepts,
/// so the fast path never has to truncate: "answer does not fit" cannot happen there.
pub const MAX_REPLY_DNS_LEN: usize = DNS_HEADER_LEN
    + QNAME_MAX
    + 4
    + MAX_ADDRS * (RR_FIXED_LEN + 16)
    + OPT_RR_LEN
    + ECS_OPTION_MAX_LEN
    + COOKIE_OPTION_LEN;
const _: () = assert!(MAX_REPLY_DNS_LEN <= 512);

/// Global settings, slot 0 of the `CONFIG` array (`BPF_F_MMAPABLE`). The controller writes it
/// through the map's memory mapping, one atomic 8-byte store per word of
/// [`ProgramConfig::to_words`], and the program reads it with one 8-byte load per word
/// ([`ProgramConfig::from_words`]): the kernel's map update copies with `memcpy`, which is not
/// atomic per 8 bytes on every CPU (`rep movsb`), so through it a packet copying the value
/// during a switch could take half of a word from the old value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgramConfig {
    /// Generation of the `DOMAINS` and `ANSWERS` entries the program reads
    /// ([`ProgramConfig::answers_generation`]), and [`CHOICE_FLIP`]. The controller writes a
    /// complete new generation beside the old one, then switches this; or, when only RTT
    /// choices changed, writes them into the `RTT_CHOICE` parity packets do not read and
    /// flips [`CHOICE_FLIP`] alone. In the first word with `view_generation`: the generation,
    /// the parity and the trie's generation a packet reads are always of one write.
    pub generation: u32,
    /// Generation of the `VIEWS` entries the program reads. It changes only when the client
    /// partition is rebuilt; a republish that keeps it edits the trie in place, in steps that
    /// each leave every lookup's answer unchanged (see `AnswerTable::publish`).
    pub view_generation: u32,
    /// UDP port the program answers on, host byte order. (In the second word: it changes
    /// only with a reload, and either value is one the program may answer under.)
    pub dns_port: u16,
    /// UDP payload size announced in our OPT record.
    pub edns_udp_size: u16,
    /// [`CONFIG_COOKIES`] and [`CONFIG_WILDCARDS`], or 0. (`ECS_ALLOW_LIST` is in [`ListenSet::flags`]: per
    /// generation parity, not here.)
    pub flags: u32,
}

/// [`ProgramConfig::flags`]: DNS cookies are configured (`server.cookie_secret`), so a query
/// with a COOKIE option goes on to `gslb_xdp_cookie` (a tail call), which answers one that
/// brings back a fresh server cookie of ours (`COOKIE_KEY`) with that cookie, and passes the
/// rest to the responder, which gives a new one (see cookie.rs). Without it, the option is
/// ignored, as a server without cookies does (RFC 7873 §5.2).
pub const CONFIG_COOKIES: u32 = 1;
/// [`ProgramConfig::flags`]: some wildcard is published ([`NAME_WILDCARD`]), so a question we
/// do not serve goes on to `gslb_xdp_wildcard` (a tail call, and a second parse); without it,
/// a flood of names we do not serve costs no more than it did. Either value is safe under any
/// generation: a wildcard not looked up is passed, one not published is not found.
pub const CONFIG_WILDCARDS: u32 = 2;
/// Slots of `maps::TAIL_CALLS`: where `gslb_xdp` goes on with a question it does not serve ...
pub const TAIL_WILDCARD: u32 = 0;
/// ... and with one that carries a DNS cookie.
pub const TAIL_COOKIE: u32 = 1;
// The generations share the first word, which is one store and one load.
const _: () = assert!(core::mem::offset_of!(ProgramConfig, generation) / 8 == 0);
const _: () = assert!(core::mem::offset_of!(ProgramConfig, view_generation) / 8 == 0);
const _: () = assert!(size_of::<ProgramConfig>() == 16);

/// The bit of [`ProgramConfig::generation`] that is not part of the generation: it flips the
/// `RTT_CHOICE` parity ([`ProgramConfig::choice_parity`]) without a new generation, so an RTT
/// change whose answer sets all exist already is published by writing its few choice pages
/// into the parity no packet reads and switching this bit, instead of rewriting every answer
/// set under a new generation. In the generation's word, not a field of its own: the word is
/// one store and one load (see [`ProgramConfig`]).
pub const CHOICE_FLIP: u32 = 1 << 31;

impl ProgramConfig {
    /// The value as the two native-endian words it is stored as (see [`ProgramConfig`]).
    #[inline(always)]
    pub const fn to_words(self) -> [u64; 2] {
        // SAFETY: 16 bytes of plain integers without padding (asserted above).
        unsafe { core::mem::transmute::<ProgramConfig, [u64; 2]>(self) }
    }

    /// The value of the two words [`ProgramConfig::to_words`] gives.
    #[inline(always)]
    pub const fn from_words(words: [u64; 2]) -> ProgramConfig {
        // SAFETY: every bit pattern is a valid `ProgramConfig` (plain integers), same size.
        unsafe { core::mem::transmute::<[u64; 2], ProgramConfig>(words) }
    }

    /// The generation of the `ANSWERS`, `DOMAINS` keys, `LISTEN_SET` slot and `ECS_ALLOW`
    /// parity: [`ProgramConfig::generation`] without [`CHOICE_FLIP`].
    #[inline(always)]
    pub const fn answers_generation(&self) -> u32 {
        self.generation & !CHOICE_FLIP
    }

    /// The `RTT_CHOICE` parity (`RttChoiceKey::parity`): the generation's, flipped by
    /// [`CHOICE_FLIP`]. A new generation flips it (its low bit), and so does a choice-only
    /// switch (the flip bit): either way the parity a switch goes to is the one the packets of
    /// the value before did not read.
    #[inline(always)]
    pub const fn choice_parity(&self) -> u32 {
        (self.generation ^ (self.generation >> 31)) & 1
    }
}

/// Key of `LISTEN` (an LPM trie used as an exact-match set: every entry is a /128): a
/// destination address we serve. IPv4 is stored IPv4-mapped (`::ffff:a.b.c.d`). A trie, not a
/// hash: on the test machine a trie lookup costs about 15 ns, a hash lookup about 35 ns (the
/// hash map also calls `memcmp`, and every call pays for the return-thunk mitigations).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ListenKey {
    pub addr: [u8; 16],
}
const _: () = assert!(size_of::<ListenKey>() == 16);

/// Prefix length of every `LISTEN` entry and lookup: the whole address.
pub const LISTEN_PREFIX_LEN: u32 = 128;

/// Listen addresses a [`ListenSet`] holds inline.
pub const LISTEN_INLINE: usize = 8;

/// `ListenSet::count` when there are more addresses than fit inline: the program looks the
/// destination up in `LISTEN` instead.
pub const LISTEN_IN_TRIE: u32 = u32::MAX;

/// Value of `LISTEN_SET`, an array of two indexed by `generation & 1`: the addresses we serve
/// in that generation, compared inline (an array lookup is inlined by the verifier; a trie
/// lookup costs a call, about 15 ns). IPv4 is stored IPv4-mapped. The controller writes the
/// slot of the new generation before switching to it, so it never rewrites the slot packets
/// of the current generation read.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListenSet {
    /// Number of valid `addrs`, or [`LISTEN_IN_TRIE`].
    pub count: u32,
    /// [`ECS_ALLOW_LIST`] or 0, for this generation. Here rather than in `CONFIG`: a packet
    /// copying `CONFIG` while the switch rewrites it could take a flag of one generation with
    /// the other's number (two words, each copied on its own), while this slot is written
    /// before the switch to its generation and not again while packets read it.
    pub flags: u32,
    pub addrs: [[u8; 16]; LISTEN_INLINE],
}
const _: () = assert!(size_of::<ListenSet>() == 8 + 16 * LISTEN_INLINE);

/// Data part of the `VIEWS` LPM trie key. The generation comes first so that a prefix length
/// of `32 + 96 + n` (IPv4, mapped) or `32 + n` (IPv6) matches one generation only.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ViewKey {
    /// Big-endian, so that it forms the leading bits of the trie key.
    pub generation: [u8; 4],
    pub addr: [u8; 16],
}
const _: () = assert!(size_of::<ViewKey>() == 20);

/// Value of `VIEWS`: the client's view, and its LDNS view (0: none) for domains answered by
/// RTT (their answer sets carry [`ANSWER_BY_RTT`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ViewValue {
    pub view: u32,
    pub rtt_view: u32,
    /// The entry's own prefix length, counted in its family (an IPv4 prefix's without the 96
    /// mapped bits): the ECS scope (RFC 7871 §7.2.1) of every answer read through this entry,
    /// unless the answer set is [`ANSWER_ANY_VIEW`]. The block holds one (view, LDNS view),
    /// so no answer changes inside it; the responder computes the same number
    /// (`Segments::block_scope`).
    pub scope: u8,
    pub reserved: [u8; 3],
}
const _: () = assert!(size_of::<ViewValue>() == 12);

/// `AnswerKey::view` of a domain's answer for one of its RTT outcomes: the outcome's index (as
/// [`RttChoice`] gives it) with this bit set. Views are numbered from 0 upwards and never reach
/// it, so outcome answers and view answers share `ANSWERS` without meeting.
pub const RTT_OUTCOME_BIT: u32 = 1 << 31;

/// Outcome indexes one [`RttChoice`] holds: the RTT slots of one page.
pub const RTT_CHOICE_WIDTH: usize = 64;
const _: () = assert!(RTT_CHOICE_WIDTH.is_power_of_two());

/// Key of `RTT_CHOICE` (a hash): one page of an LDNS view's choices in one parity.
///
/// Why a choice map: domains of one structure share a decision signature, and a signature
/// answered by RTT has only a few possible outcomes (which of its layout's sites are nearest).
/// So instead of one answer set per (domain, LDNS view), which at 100,000 RTT rows is tens of
/// millions, the maps hold per (LDNS view, signature) the index of the outcome (here, a byte),
/// and per (domain, outcome index) the answer set (`ANSWERS` under [`RTT_OUTCOME_BIT`]). A
/// signature's place in the choices is its *RTT slot*: page `slot / RTT_CHOICE_WIDTH`, byte
/// `slot % RTT_CHOICE_WIDTH`; the domain's view answer set carries it
/// ([`AnswerSet::rtt_slot`]).
///
/// Why a parity instead of the generation: a republish changes few choices (an RTT change moves
/// a few rows), and rewriting 100,000 pages per generation would cost ~200 ms. A packet reads
/// the parity `ProgramConfig::choice_parity` gives (the generation's, flipped by
/// [`CHOICE_FLIP`]); the controller writes the other one (which no packet reads any more: it
/// was switched away from a publish ago, after the grace pause) with only the pages that differ
/// from what that parity held, then switches `CONFIG`: to a new generation, or, when only
/// choices changed, by flipping [`CHOICE_FLIP`] (the generation's answer sets serve both
/// parities then). The same rule as `LISTEN_SET`'s slots, so a packet still sees all old or all
/// new tables.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RttChoiceKey {
    /// `ProgramConfig::choice_parity` of the `CONFIG` value these choices belong to.
    pub parity: u32,
    /// The client's LDNS view (`ViewValue::rtt_view`, never 0).
    pub rtt_view: u32,
    /// `AnswerSet::rtt_slot / RTT_CHOICE_WIDTH`.
    pub page: u32,
    pub reserved: u32,
}
const _: () = assert!(size_of::<RttChoiceKey>() == 16);

/// Value of `RTT_CHOICE`: for each RTT slot of the page, the index of the slot's outcome for
/// clients of this LDNS view (`AnswerKey::view = RTT_OUTCOME_BIT | index`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RttChoice {
    pub outcomes: [u8; RTT_CHOICE_WIDTH],
}
const _: () = assert!(size_of::<RttChoice>() == RTT_CHOICE_WIDTH);

impl Default for RttChoice {
    fn default() -> Self {
        RttChoice {
            outcomes: [0; RTT_CHOICE_WIDTH],
        }
    }
}

/// Number of leading key bits taken by the generation in `VIEWS` keys.
pub const VIEW_KEY_GENERATION_BITS: u32 = 32;
/// Extra prefix bits an IPv4 prefix gets from being IPv4-mapped.
pub const V4_MAPPED_BITS: u32 = 96;
/// `::ffff:0.0.0.0`, the first IPv4-mapped address: the maps key IPv4 as IPv4-mapped IPv6, so
/// that one trie or hash serves both families.
pub const V4_MAPPED: u128 = 0xffff << 32;

/// An address in the one form of the maps, as a number: IPv6 as it is, IPv4 as IPv4-mapped
/// IPv6 (`::ffff:a.b.c.d`). Its big-endian bytes are the keys' `addr`; the controller's
/// client-space keys (gslb-user's `compile::partition`) are the same numbers.
pub const fn mapped_key(addr: core::net::IpAddr) -> u128 {
    match addr {
        core::net::IpAddr::V4(a) => V4_MAPPED | a.to_bits() as u128,
        core::net::IpAddr::V6(a) => a.to_bits(),
    }
}

/// Key of `DOMAINS`: the query name exactly as on the wire but lower-cased, zero-padded, and the
/// query type. Wire form is self-delimiting, so padding cannot make two names collide.
///
/// The fast path looks answers up by [`name_hash`] in `ANSWERS` and reads `DOMAINS` only on a
/// miss, to tell a known name without an answer (`NoAnswer`) from an unknown one.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DomainKey {
    pub name: [u8; QNAME_MAX],
    pub qtype: u16,
    pub reserved: u16,
    pub generation: u32,
}
const _: () = assert!(size_of::<DomainKey>() == QNAME_MAX + 8);

impl Default for DomainKey {
    fn default() -> Self {
        Self {
            name: [0; QNAME_MAX],
            qtype: 0,
            reserved: 0,
            generation: 0,
        }
    }
}

/// Value of `DOMAINS`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DomainValue {
    pub domain_id: u32,
    pub reserved: u32,
}
const _: () = assert!(size_of::<DomainValue>() == 8);

/// Question names are hashed and compared in little-endian 64-bit words.
pub const QNAME_WORDS: usize = QNAME_MAX / 8;
const _: () = assert!(QNAME_MAX.is_multiple_of(8));

/// Seed of [`name_hash`].
pub const NAME_HASH_SEED: u64 = 0x243f_6a88_85a3_08d3;

/// One step of [`name_hash`], for the XDP program, which hashes the name word by word as it
/// reads it.
#[inline(always)]
pub const fn name_hash_step(hash: u64, word: u64) -> u64 {
    let h = (hash ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (h >> 29)
}

/// The `ANSWERS` key hash of a lower-cased wire name (its terminating zero included): the name
/// as little-endian 64-bit words, the last one zero-padded. It only spreads keys: the fast path
/// compares the whole name stored in the [`AnswerSet`], and the controller leaves names whose
/// hashes collide to the responder, so a collision can never give a wrong answer.
pub fn name_hash(wire: &[u8]) -> u64 {
    let mut hash = NAME_HASH_SEED;
    for chunk in wire.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        hash = name_hash_step(hash, u64::from_le_bytes(word));
    }
    hash
}

/// Words of a wildcard's parent that [`wildcard_hash`] hashes: every name one label below a
/// parent starts its parent at most 64 bytes into the question (a label is at most 63 bytes),
/// so the program reads these words inside the question's `QNAME_MAX` bytes whatever the
/// first label's length.
pub const WILDCARD_HASH_WORDS: usize = 8;

/// The `ANSWERS` key hash of a wildcard's entries ([`NAME_WILDCARD`]): [`name_hash`] steps
/// over the parent's (lower-cased wire name's) first [`WILDCARD_HASH_WORDS`] words, zero-padded
/// to that many (a fixed count, so the program hashes without a branch on the length). Two
/// parents alike in their first 64 bytes share it; the controller leaves such a pair to the
/// responder, and the program compares the whole name anyway.
pub fn wildcard_hash(parent: &[u8]) -> u64 {
    let mut hash = NAME_HASH_SEED;
    for w in 0..WILDCARD_HASH_WORDS {
        let mut word = [0u8; 8];
        let start = (8 * w).min(parent.len());
        let end = (8 * w + 8).min(parent.len());
        word[..end - start].copy_from_slice(&parent[start..end]);
        hash = name_hash_step(hash, u64::from_le_bytes(word));
    }
    hash
}

/// Key of `ANSWERS`: (name, qtype, view) of one generation. The name is represented by its
/// [`name_hash`]; the value holds the name itself, which the program compares.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AnswerKey {
    pub name_hash: u64,
    pub generation: u32,
    pub view: u32,
    pub qtype: u16,
    /// [`NAME_OWN`], or [`NAME_WILDCARD`]: the hash is of the wildcard's parent. (Beside a
    /// word-sized reserved field, which is zero, so the program stores them in words.)
    pub wildcard: u16,
    pub reserved: u32,
}
const _: () = assert!(size_of::<AnswerKey>() == 24);

/// `AnswerKey::wildcard` of a name's own entries.
pub const NAME_OWN: u16 = 0;
/// `AnswerKey::wildcard` of a wildcard domain `*.P` answered in the fast path, keyed by its
/// parent P (RFC 4592, hashed by [`wildcard_hash`]; `AnswerSet::name` is P): what answers a
/// query for any name one label below P that is not ours. The controller keys a wildcard so
/// only when nothing else exists below P, so that P is the closest encloser of every such
/// name (and for `*.P` itself, the wildcard answers its own name): the program, on a name we
/// do not serve (`UnknownName`), looks the name after its first label up as a wildcard's
/// parent. No `DOMAINS` entry: a wildcard's name without a set for its type is counted
/// `UnknownName`.
pub const NAME_WILDCARD: u16 = 1;

/// `AnswerSet::flags`: answer one address per query, rotating, instead of all of them. The
/// turn comes from the set's own `ROTOR` slot ([`AnswerSet::rotor`]). Only on sets of two or
/// more records: one record is answered the same either way, without touching a slot.
pub const ANSWER_ROTATE: u8 = 1;
/// `AnswerSet::flags`: the domain is answered by RTT: a client with an LDNS view takes the
/// answer of the outcome `RTT_CHOICE` gives for that view and the set's
/// [`AnswerSet::rtt_slot`] when there is one (this set is the answer without an RTT).
pub const ANSWER_BY_RTT: u8 = 2;
/// `AnswerSet::flags`: the domain has this answer for every client (it has no other view's
/// set and no LDNS view's): its ECS scope is 0.
pub const ANSWER_ANY_VIEW: u8 = 4;

/// Words of `ANY_VIEW`, an array of `u64` bit words: per (name hash, qtype), a hint that its
/// answer set is [`ANSWER_ANY_VIEW`], so the program looks it up under [`DEFAULT_VIEW`] without
/// the `VIEWS` trie (an array lookup is inlined, about 1 ns; the trie costs about 15). 2^18 bits
/// (32 KiB): at 2,000 names one other (name, qtype) in ~130 shares a bit.
///
/// A hint only: the program answers from the set only when the set it finds, in the generation
/// it read, carries [`ANSWER_ANY_VIEW`] (which the controller sets only on a domain whose one
/// answer is every client's). A bit set by another name's hash, or left over from the last
/// publish while the next one is written, costs one lookup; it cannot change an answer. So the
/// bits need no generation: the controller rewrites the words that changed at each publish.
pub const ANY_VIEW_WORDS: u32 = 1 << 12;
pub const ANY_VIEW_MAP: &str = "ANY_VIEW";

/// The `ANY_VIEW` word index and bit of (name hash, qtype).
#[inline(always)]
pub const fn any_view_bit(name_hash: u64, qtype: u16) -> (u32, u64) {
    let h = (name_hash ^ qtype as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (
        (h >> (64 - ANY_VIEW_WORDS.trailing_zeros())) as u32,
        1 << ((h >> 40) & 63),
    )
}
const _: () = assert!(ANY_VIEW_WORDS.is_power_of_two());

/// Longest answer record: name pointer, fixed fields and an IPv6 address.
pub const RR_MAX_LEN: usize = RR_FIXED_LEN + 16;

/// Value of `ANSWERS`: the records to answer with, exactly as they go on the wire, and the name
/// they answer. The controller also stores each record's contribution to the UDP checksum, so
/// the fast path never sums the answer bytes itself.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnswerSet {
    pub ttl: u32,
    /// Number of valid records, 1..=MAX_ADDRS.
    pub count: u8,
    pub flags: u8,
    /// `QTYPE_A` or `QTYPE_AAAA`: records of `RR_FIXED_LEN` + 4 or + 16 bytes; 5 (CNAME)
    /// for a CNAME domain's set, which never rotates (see `records`).
    pub qtype: u16,
    /// Ones' complement sum (folded to 16 bits) of each answer record as it is put on the
    /// wire, taken as if the record began at an even offset.
    pub rr_csum: [u32; MAX_ADDRS],
    /// The same sum over all `count` records together.
    pub all_csum: u32,
    /// Wire length of `name` (at most `QNAME_MAX`).
    pub name_len: u16,
    /// The set's slot in the per-CPU `ROTOR` array, which holds its rotation on each CPU (the
    /// index of the record to answer next; read only with [`ANSWER_ROTATE`]). The controller gives every rotating set it publishes
    /// a slot of its own, so that queries for other names, types or views do not advance this
    /// set's turn; beyond [`ROTOR_SLOTS`] rotating sets, slots are shared (see
    /// `gslb-user`'s `dataplane::rotors`). A `u16`: every value is a valid slot, and the set
    /// keeps the size and layout it had with a `u32` `name_len` (little-endian: the same bytes).
    pub rotor: u16,
    /// The lower-cased wire name this set answers, zero-padded: the program compares it word
    /// by word with the query's (the key only holds its hash). 8-byte aligned.
    pub name: [u8; QNAME_MAX],
    /// `count` records back to back, each `rr_len()` bytes: a pointer to the question name
    /// (0xc00c), type, class IN, TTL, RDLENGTH, address. A CNAME domain's set (never
    /// rotating) holds its answer section instead: the CNAME (owner 0xc00c, the target
    /// uncompressed), then the target's addresses (owner a pointer to the CNAME's RDATA).
    pub records: [u8; MAX_ADDRS * RR_MAX_LEN],
    /// With [`ANSWER_BY_RTT`]: the domain's signature's RTT slot, where `RTT_CHOICE` gives the
    /// index of its outcome for the client's LDNS view (see [`RttChoiceKey`]). Last, so the
    /// fields before keep their offsets.
    pub rtt_slot: u32,
    /// The wire length of all `count` records, what a set without [`ANSWER_ROTATE`] copies
    /// (8..=`MAX_ADDRS * RR_MAX_LEN`): `count * rr_len()` for addresses; a CNAME answer's
    /// records have lengths of their own, their sum of either parity.
    pub answers_len: u32,
}
const _: () = assert!(size_of::<AnswerSet>() == 56 + QNAME_MAX + MAX_ADDRS * RR_MAX_LEN);
const _: () = assert!(core::mem::offset_of!(AnswerSet, name) % 8 == 0);
const _: () = assert!(QNAME_MAX <= u16::MAX as usize);

/// Slots of the per-CPU `ROTOR` array: one per value of [`AnswerSet::rotor`]. Each holds the
/// index of its set's next record on that CPU, as a u64: 512 KiB per CPU.
pub const ROTOR_SLOTS: u32 = 1 << 16;
const _: () = assert!(ROTOR_SLOTS == u16::MAX as u32 + 1);

impl Default for AnswerSet {
    fn default() -> Self {
        Self {
            ttl: 0,
            count: 0,
            flags: 0,
            qtype: 0,
            rr_csum: [0; MAX_ADDRS],
            all_csum: 0,
            name_len: 0,
            rotor: 0,
            name: [0; QNAME_MAX],
            records: [0; MAX_ADDRS * RR_MAX_LEN],
            rtt_slot: 0,
            answers_len: 0,
        }
    }
}

impl AnswerSet {
    /// RDATA length of one record.
    pub const fn rdata_len(&self) -> usize {
        if self.qtype == QTYPE_AAAA { 16 } else { 4 }
    }

    /// Wire length of one record.
    pub const fn rr_len(&self) -> usize {
        RR_FIXED_LEN + self.rdata_len()
    }
}

/// Key of `LDNS` (an LRU hash): a resolver (LDNS) that sent us a DNS query, IPv4-mapped, with
/// the host bits of the LDNS mask cleared, so that one entry stands for every resolver of a
/// masked prefix (NetScaler `ldnsmask`). Without a mask it is the source address itself.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LdnsKey {
    pub addr: [u8; 16],
}
const _: () = assert!(size_of::<LdnsKey>() == 16);

/// Value of `LDNS`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LdnsValue {
    /// `bpf_ktime_get_ns()` (CLOCK_MONOTONIC) of a query of this entry, refreshed at most once
    /// per LDNS epoch (see [`LdnsConfig::epoch`]) and CPU: a query in the current epoch may be
    /// newer than this by up to one epoch.
    pub last_seen_ns: u64,
    /// The source address (IPv4-mapped) of the query that created the entry: the address the
    /// controller probes for the whole masked prefix. Written once, so never torn.
    pub addr: [u8; 16],
}
const _: () = assert!(size_of::<LdnsValue>() == 24);

/// `LdnsConfig::flags`: record no resolvers.
pub const LDNS_OFF: u32 = 1;

/// Slot 0 of the `LDNS_CONFIG` array: how the program records resolvers. Written by the
/// controller only (not by `publish`); all zero (the state before the controller writes it)
/// records every source address without a mask.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LdnsConfig {
    /// Advanced by the controller each time it reads `LDNS` (about once a second). The program
    /// refreshes an entry's `last_seen_ns` on the first query of a resolver in each epoch on each
    /// CPU (a per-CPU cache of [`LdnsCacheSlot`]s remembers which it refreshed), so a busy
    /// resolver costs the LRU map one lookup per epoch and CPU, not one per query.
    pub epoch: u32,
    pub flags: u32,
    /// Bytes set where an IPv4-mapped source address has host bits: cleared to form the key.
    pub host_v4: [u8; 16],
    /// The same for IPv6 sources.
    pub host_v6: [u8; 16],
}
const _: () = assert!(size_of::<LdnsConfig>() == 40);

/// A slot of the program's per-CPU LDNS cache (part of its `SCRATCH` memory), direct-mapped
/// and indexed by [`ldns_slot`] of the key: the key (as two native words) whose entry this CPU
/// refreshed in `epoch`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LdnsCacheSlot {
    pub key: [u64; 2],
    pub epoch: u32,
    pub reserved: u32,
}
const _: () = assert!(size_of::<LdnsCacheSlot>() == 24);

/// Slots of the per-CPU LDNS cache (`1 << LDNS_CACHE_BITS`). A resolver whose slot another
/// takes costs an LRU lookup per query while both are busy: 1024 slots keep that rare for
/// the resolvers that send most queries, and the cache within a per-CPU value's 32 KiB limit.
pub const LDNS_CACHE_BITS: u32 = 10;
pub const LDNS_CACHE_SLOTS: usize = 1 << LDNS_CACHE_BITS;

/// The LDNS cache slot of a key given as its two native words.
#[inline(always)]
pub const fn ldns_slot(key: [u64; 2]) -> u32 {
    ((key[0] ^ key[1]).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - LDNS_CACHE_BITS)) as u32
}

/// Slots of the per-CPU `COUNTERS` array: hits by qtype and transport, then one per reason a
/// packet was passed to the stack.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    HitAV4 = 0,
    HitAaaaV4,
    HitAV6,
    HitAaaaV6,
    /// Not IPv4 or IPv6 (after at most one VLAN tag), or a frame too short for its headers.
    NotIp,
    /// IPv4 header with options (IHL != 5).
    Ipv4Options,
    /// IPv6 with an extension header before UDP.
    Ipv6ExtHeader,
    /// IPv4 fragment (MF or offset set).
    Fragment,
    NotUdp,
    /// UDP to a port other than the DNS port.
    OtherPort,
    /// UDP to the DNS port but an address we do not serve.
    OtherDestination,
    /// IP or UDP lengths inconsistent with the frame, or the DNS message shorter than its parts.
    Malformed,
    /// QR=1: a response, not a query.
    NotQuery,
    /// OPCODE other than QUERY, or TC set in the query.
    Opcode,
    /// QDCOUNT != 1, ANCOUNT != 0 or NSCOUNT != 0.
    Sections,
    /// ARCOUNT > 1, or the one additional record is not an OPT at the root.
    Additional,
    /// EDNS version above 0 (the responder answers BADVERS).
    EdnsVersion,
    /// A valid EDNS Client Subnet whose scope the program does not know: the subnet's address
    /// is in no `VIEWS` prefix (the default view, whose blocks are not published) and the
    /// answer differs between views, or an IPv6 subnet of IPv4-mapped addresses. The
    /// responder answers it with the scope it computes.
    ClientSubnet,
    /// A compression pointer or reserved label type inside the question name.
    NameCompressed,
    /// Question name longer than `QNAME_MAX` wire bytes.
    NameTooLong,
    /// QCLASS other than IN.
    Qclass,
    /// QTYPE other than A or AAAA.
    Qtype,
    /// Bytes after the question and the OPT record.
    TrailingData,
    /// Name (with this qtype) not in `DOMAINS`.
    UnknownName,
    /// Domain known but no answer set for the client's view nor the default view.
    NoAnswer,
    /// The kernel refused to grow the frame for the reply, at the tail and at the head.
    NoTailroom,
    // Hygiene (checked once a frame is a DNS query to a served address and port): frames the
    // fast path must not answer even though it could.
    /// The destination or the source MAC is a group (multicast or broadcast) address.
    GroupMac,
    /// The destination MAC is none of the attached interfaces' own ([`LocalMacs`]): a frame
    /// seen in promiscuous mode, for another host.
    OtherMac,
    /// The source address is one no real resolver sends from (see [`martian_v4`],
    /// [`martian_v6`]): an answer would go to a spoofed or local address.
    MartianSource,
    /// UDP source port 0: no client can receive the answer.
    SourcePortZero,
    /// IPv6 UDP with checksum 0, which RFC 8200 forbids (the stack drops it).
    UdpChecksumZero,
    /// The controller's heartbeat is older than its bound ([`Heartbeat`]): every frame goes
    /// to the stack, so resolvers fail over to another server when gslbd is gone.
    Stale,
    /// IPv4 header checksum wrong: the stack drops such a packet, so the fast path must not
    /// answer it (found by the differential fuzzing).
    Ipv4Checksum,
    /// An EDNS Client Subnet option that is not valid in a query (RFC 7871 §6, §7.1): an
    /// unknown family, a source prefix too long for it, address bytes other than the prefix
    /// needs, address bits beyond the prefix, a scope, or a second ECS option. The responder
    /// answers FORMERR.
    EcsInvalid,
    /// The query asks for the server's identity (an EDNS NSID option, RFC 5001) and the
    /// answer with it (`NSID`) would not fit the client's UDP size or ours: the responder
    /// answers it, within the size.
    Nsid,
    /// The query carries a DNS cookie, cookies are configured ([`CONFIG_COOKIES`]), and it is
    /// not one the program echoes: a client cookie alone, a server cookie that is not ours for
    /// this address under the current secret, or one older than half an hour (see
    /// [`cookie_echoed`]), or one beside an ECS option. The responder answers it with a new
    /// server cookie (or the same one, beside ECS).
    Cookie,
}

impl Counter {
    pub const COUNT: u32 = Counter::Cookie as u32 + 1;

    /// Every counter, in slot order.
    pub const ALL: [Counter; Counter::COUNT as usize] = [
        Counter::HitAV4,
        Counter::HitAaaaV4,
        Counter::HitAV6,
        Counter::HitAaaaV6,
        Counter::NotIp,
        Counter::Ipv4Options,
        Counter::Ipv6ExtHeader,
        Counter::Fragment,
        Counter::NotUdp,
        Counter::OtherPort,
        Counter::OtherDestination,
        Counter::Malformed,
        Counter::NotQuery,
        Counter::Opcode,
        Counter::Sections,
        Counter::Additional,
        Counter::EdnsVersion,
        Counter::ClientSubnet,
        Counter::NameCompressed,
        Counter::NameTooLong,
        Counter::Qclass,
        Counter::Qtype,
        Counter::TrailingData,
        Counter::UnknownName,
        Counter::NoAnswer,
        Counter::NoTailroom,
        Counter::GroupMac,
        Counter::OtherMac,
        Counter::MartianSource,
        Counter::SourcePortZero,
        Counter::UdpChecksumZero,
        Counter::Stale,
        Counter::Ipv4Checksum,
        Counter::EcsInvalid,
        Counter::Nsid,
        Counter::Cookie,
    ];

    /// Stable snake_case name for logs, metrics and the CLI.
    pub const fn name(self) -> &'static str {
        match self {
            Counter::HitAV4 => "hit_a_v4",
            Counter::HitAaaaV4 => "hit_aaaa_v4",
            Counter::HitAV6 => "hit_a_v6",
            Counter::HitAaaaV6 => "hit_aaaa_v6",
            Counter::NotIp => "not_ip",
            Counter::Ipv4Options => "ipv4_options",
            Counter::Ipv6ExtHeader => "ipv6_ext_header",
            Counter::Fragment => "fragment",
            Counter::NotUdp => "not_udp",
            Counter::OtherPort => "other_port",
            Counter::OtherDestination => "other_destination",
            Counter::Malformed => "malformed",
            Counter::NotQuery => "not_query",
            Counter::Opcode => "opcode",
            Counter::Sections => "sections",
            Counter::Additional => "additional",
            Counter::EdnsVersion => "edns_version",
            Counter::ClientSubnet => "client_subnet",
            Counter::NameCompressed => "name_compressed",
            Counter::NameTooLong => "name_too_long",
            Counter::Qclass => "qclass",
            Counter::Qtype => "qtype",
            Counter::TrailingData => "trailing_data",
            Counter::UnknownName => "unknown_name",
            Counter::NoAnswer => "no_answer",
            Counter::NoTailroom => "no_tailroom",
            Counter::GroupMac => "group_mac",
            Counter::OtherMac => "other_mac",
            Counter::MartianSource => "martian_source",
            Counter::SourcePortZero => "source_port_zero",
            Counter::UdpChecksumZero => "udp_checksum_zero",
            Counter::Stale => "stale",
            Counter::Ipv4Checksum => "ipv4_checksum",
            Counter::EcsInvalid => "ecs_invalid",
            Counter::Nsid => "nsid",
            Counter::Cookie => "cookie",
        }
    }

    pub const fn is_hit(self) -> bool {
        (self as u32) <= Counter::HitAaaaV6 as u32
    }
}

/// Interfaces' own MACs a [`LocalMacs`] holds.
pub const LOCAL_MACS_MAX: usize = 4;

/// Slot 0 of `LOCAL_MACS`: the MACs of the interfaces the program is attached to, written by
/// the controller before it attaches (`Dataplane::attach`). The program answers only frames
/// sent to one of them, and its reply swaps the MACs, so the reply always leaves from the
/// interface's own MAC (never from an address a frame seen in promiscuous mode was sent to).
/// `count` 0 (a program that was never attached, as under BPF_PROG_TEST_RUN) checks nothing.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalMacs {
    pub count: u32,
    pub reserved: u32,
    /// Each MAC in the low six bytes of a little-endian word (the bytes as on the wire, then
    /// two zeros), compared with the first word of the frame masked to six bytes.
    pub macs: [u64; LOCAL_MACS_MAX],
}
const _: () = assert!(size_of::<LocalMacs>() == 8 + 8 * LOCAL_MACS_MAX);

/// Slot 0 of `HEARTBEAT`: when the controller last said it is alive. Written by the controller
/// only, periodically (`daemon/heartbeat.rs`); all zero (never written) is never stale.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Heartbeat {
    /// CLOCK_MONOTONIC (`bpf_ktime_get_ns`'s clock) of the last refresh, in ns. The program
    /// reads the coarse variant of the same clock, which lags it by at most a tick.
    pub beat_ns: u64,
    /// How old `beat_ns` may get before the program passes everything; 0: never stale.
    pub stale_after_ns: u64,
    /// CLOCK_REALTIME less CLOCK_MONOTONIC at the beat, in ns: the program's wall clock (the
    /// timestamps of DNS cookies) is its monotonic clock plus this. Refreshed with every beat,
    /// so a step of the wall clock reaches the program within a beat.
    pub wall_offset_ns: u64,
}
const _: () = assert!(size_of::<Heartbeat>() == 24);

/// An IPv4 source no resolver sends from (`addr` as on the wire): 0/8, 127/8, 169.254/16,
/// 224/4 (multicast) and 240/4 (reserved, with the limited broadcast 255.255.255.255).
#[inline(always)]
pub const fn martian_v4(addr: [u8; 4]) -> bool {
    addr[0] == 0 || addr[0] == 127 || addr[0] >= 224 || (addr[0] == 169 && addr[1] == 254)
}

/// An IPv6 source no resolver sends from: `::`, `::1`, link-local `fe80::/10`, multicast
/// `ff00::/8`, and an IPv4-mapped martian IPv4 address. (The XDP program passes every
/// IPv4-mapped source of an IPv6 packet: the kernel drops those anyway.)
#[inline(always)]
pub const fn martian_v6(addr: [u8; 16]) -> bool {
    let mut zeros = 0;
    while zeros < 15 && addr[zeros] == 0 {
        zeros += 1;
    }
    let unspecified_or_loopback = zeros == 15 && addr[15] <= 1;
    let mapped = zeros >= 10 && addr[10] == 0xff && addr[11] == 0xff;
    unspecified_or_loopback
        || addr[0] == 0xff
        || (addr[0] == 0xfe && addr[1] & 0xc0 == 0x80)
        || (mapped && martian_v4([addr[12], addr[13], addr[14], addr[15]]))
}

/// Map names, shared so the loader and the pins agree with the program.
pub mod maps {
    pub const CONFIG: &str = "CONFIG";
    pub const LISTEN: &str = "LISTEN";
    pub const LISTEN_SET: &str = "LISTEN_SET";
    pub const VIEWS: &str = "VIEWS";
    pub const DOMAINS: &str = "DOMAINS";
    pub const ANSWERS: &str = "ANSWERS";
    pub const COUNTERS: &str = "COUNTERS";
    pub const ROTOR: &str = "ROTOR";
    pub const LDNS: &str = "LDNS";
    pub const LDNS_CONFIG: &str = "LDNS_CONFIG";
    pub const LOCAL_MACS: &str = "LOCAL_MACS";
    pub const HEARTBEAT: &str = "HEARTBEAT";
    pub const RTT_CHOICE: &str = "RTT_CHOICE";
    pub const ECS_ALLOW: &str = "ECS_ALLOW";
    pub const NSID: &str = "NSID";
    /// The program array `gslb_xdp` tail-calls into: [`TAIL_WILDCARD`](crate::TAIL_WILDCARD)
    /// (`programs::WILDCARD`) and [`TAIL_COOKIE`](crate::TAIL_COOKIE) (`programs::COOKIE`).
    pub const TAIL_CALLS: &str = "TAIL_CALLS";
    pub const COOKIE_KEY: &str = "COOKIE_KEY";

    /// The maps shared between the program and the controller, pinned in `server.pin_path`
    /// and adopted across restarts (`ROTOR` and `SCRATCH` are the program's own working
    /// memory: a restarted gslbd's program starts its rotations afresh). `cargo xtask
    /// uninstall` removes these pins.
    /// `ECS_ALLOW`, `NSID` and `COOKIE_KEY` are pinned too: a new gslbd's first publish
    /// switches the shared `CONFIG` while the old program still runs, and that program must
    /// read the list, the identity and the cookie secret of the generation it switched to.
    pub const PINNED: [&str; 11] = [
        CONFIG, LISTEN, LISTEN_SET, VIEWS, DOMAINS, ANSWERS, COUNTERS, RTT_CHOICE, ECS_ALLOW, NSID,
        COOKIE_KEY,
    ];
}

/// Program names in the object file.
pub mod programs {
    /// The DNS fast path.
    pub const ANSWER: &str = "gslb_xdp";
    /// Its second half: the wildcard of a question it does not serve (a tail call through
    /// `maps::TAIL_CALLS`).
    pub const WILDCARD: &str = "gslb_xdp_wildcard";
    /// Its third: a question with a DNS cookie, answered when the cookie is a fresh one of
    /// ours (a tail call through `maps::TAIL_CALLS`).
    pub const COOKIE: &str = "gslb_xdp_cookie";
    /// Returns XDP_PASS for every frame; attached to the far end of a veth pair so that native
    /// XDP_TX frames are received there (veth drops them otherwise).
    pub const PASS: &str = "gslb_pass";
    /// The floor of the hit path (the same parse, the frame turned around, no map lookups):
    /// benches only, loaded on demand (`Dataplane::load_floor`).
    pub const FLOOR: &str = "gslb_floor";
    /// The floor with one A record, the frame grown for it (`bpf_xdp_adjust_tail`, as every
    /// answer needs): benches only, loaded with [`FLOOR`].
    pub const FLOOR_GROW: &str = "gslb_floor_grow";
}

/// Map capacities. Each holds two generations during a republish.
pub const LISTEN_MAX: u32 = 256;
pub const VIEWS_MAX: u32 = 1 << 22;
pub const DOMAINS_MAX: u32 = 1 << 16;
pub const ANSWERS_MAX: u32 = 1 << 22;
/// `RTT_CHOICE` pages, both parities together: 2 × LDNS views × pages per view.
pub const RTT_CHOICE_MAX: u32 = 1 << 20;
/// Resolvers (or masked prefixes of resolvers) `LDNS` remembers; the least recently used go.
pub const LDNS_MAX: u32 = 1 << 16;

#[cfg(feature = "user")]
mod pod {
    use super::{
        AnswerKey, AnswerSet, DomainKey, DomainValue, EcsAllowKey, Heartbeat, LdnsCacheSlot,
        LdnsConfig, LdnsKey, LdnsValue, ListenKey, ListenSet, LocalMacs, NsidOption, ProgramConfig,
        RttChoice, RttChoiceKey, ViewKey, ViewValue, cookie::CookieKey,
    };
    // SAFETY: all of these are repr(C), Copy, without padding (sizes asserted above), and every
    // bit pattern is a valid value.
    unsafe impl aya::Pod for ProgramConfig {}
    unsafe impl aya::Pod for ViewValue {}
    unsafe impl aya::Pod for ListenKey {}
    unsafe impl aya::Pod for ListenSet {}
    unsafe impl aya::Pod for ViewKey {}
    unsafe impl aya::Pod for DomainKey {}
    unsafe impl aya::Pod for DomainValue {}
    unsafe impl aya::Pod for AnswerKey {}
    unsafe impl aya::Pod for AnswerSet {}
    unsafe impl aya::Pod for LdnsKey {}
    unsafe impl aya::Pod for LdnsValue {}
    unsafe impl aya::Pod for LdnsConfig {}
    unsafe impl aya::Pod for LdnsCacheSlot {}
    unsafe impl aya::Pod for LocalMacs {}
    unsafe impl aya::Pod for Heartbeat {}
    unsafe impl aya::Pod for RttChoiceKey {}
    unsafe impl aya::Pod for RttChoice {}
    unsafe impl aya::Pod for EcsAllowKey {}
    unsafe impl aya::Pod for NsidOption {}
    unsafe impl aya::Pod for CookieKey {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_listed_in_slot_order_with_unique_names() {
        for (i, c) in Counter::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
            for other in &Counter::ALL[..i] {
                assert_ne!(c.name(), other.name());
            }
        }
        assert_eq!(Counter::ALL.iter().filter(|c| c.is_hit()).count(), 4);
    }

    /// A packet that reads `CONFIG`'s first word from a new value and its second from the old
    /// one (the controller stores them one at a time) still has the generation, the choice
    /// parity and the trie's generation of one value.
    #[test]
    fn the_generations_and_the_flip_are_one_word_of_config() {
        let old = ProgramConfig {
            generation: 6,
            view_generation: 3,
            dns_port: 53,
            edns_udp_size: 1232,
            flags: 0,
        };
        let new = ProgramConfig {
            generation: 7 | CHOICE_FLIP,
            view_generation: 4,
            dns_port: 5353,
            edns_udp_size: 1400,
            flags: CONFIG_COOKIES,
        };
        assert_eq!(ProgramConfig::from_words(new.to_words()), new);
        let torn = ProgramConfig::from_words([new.to_words()[0], old.to_words()[1]]);
        assert_eq!(
            (torn.generation, torn.view_generation),
            (new.generation, new.view_generation)
        );
    }

    /// Both ways of switching `CONFIG` go to the choice parity the value before did not read,
    /// and the flip leaves the answers' generation as it was.
    #[test]
    fn a_new_generation_and_a_choice_flip_each_switch_the_choice_parity() {
        for generation in [0, 1, 6, 7, CHOICE_FLIP - 1] {
            for flip in [0, CHOICE_FLIP] {
                let config = |generation| ProgramConfig {
                    generation,
                    ..ProgramConfig::default()
                };
                let now = config(generation | flip);
                let next = config(((generation + 1) & !CHOICE_FLIP) | flip);
                let flipped = config(now.generation ^ CHOICE_FLIP);
                assert_eq!(now.answers_generation(), generation);
                assert_ne!(next.choice_parity(), now.choice_parity(), "{generation}");
                assert_ne!(flipped.choice_parity(), now.choice_parity(), "{generation}");
                assert_eq!(flipped.answers_generation(), generation);
                assert!(now.choice_parity() <= 1);
            }
        }
    }

    #[test]
    fn shared_struct_sizes() {
        use core::mem::size_of;
        let table: [(usize, usize); 18] = [
            (size_of::<ProgramConfig>(), 16),
            (size_of::<ViewValue>(), 12),
            (size_of::<ListenKey>(), 16),
            (size_of::<ListenSet>(), 136),
            (size_of::<ViewKey>(), 20),
            (size_of::<DomainKey>(), 136),
            (size_of::<DomainValue>(), 8),
            (size_of::<AnswerKey>(), 24),
            (size_of::<AnswerSet>(), 408),
            (size_of::<LdnsKey>(), 16),
            (size_of::<LdnsValue>(), 24),
            (size_of::<LdnsConfig>(), 40),
            (size_of::<LdnsCacheSlot>(), 24),
            (size_of::<LocalMacs>(), 40),
            (size_of::<Heartbeat>(), 24),
            (size_of::<RttChoiceKey>(), 16),
            (size_of::<RttChoice>(), 64),
            (size_of::<EcsAllowKey>(), 20),
        ];
        for (got, want) in table {
            assert_eq!(got, want);
        }
    }

    #[test]
    fn martian_sources() {
        let v4 = |s: [u8; 4]| martian_v4(s);
        for m in [
            [0, 1, 2, 3],
            [127, 0, 0, 1],
            [127, 0, 0, 9],
            [169, 254, 1, 1],
            [224, 0, 0, 251],
            [239, 255, 255, 250],
            [240, 0, 0, 1],
            [255, 255, 255, 255],
        ] {
            assert!(v4(m), "{m:?}");
        }
        for ok in [
            [1, 1, 1, 1],
            [192, 0, 2, 7],
            [169, 253, 1, 1],
            [223, 255, 255, 255],
        ] {
            assert!(!v4(ok), "{ok:?}");
        }
        let v6 = |s: &str| martian_v6(s.parse::<core::net::Ipv6Addr>().unwrap().octets());
        for m in [
            "::",
            "::1",
            "fe80::1",
            "febf::1",
            "ff02::1",
            "ff0e::fb",
            "::ffff:127.0.0.1",
            "::ffff:0.0.0.0",
            "::ffff:224.0.0.1",
            "::ffff:169.254.0.1",
        ] {
            assert!(v6(m), "{m}");
        }
        for ok in [
            "2001:db8::7",
            "fec0::1",
            "::2",
            "::ffff:192.0.2.7",
            "64:ff9b::7f00:1",
            "fd00::1",
        ] {
            assert!(!v6(ok), "{ok}");
        }
    }

    #[test]
    fn name_hash_pads_the_last_word_and_depends_on_every_byte() {
        let www = b"\x03www\x07example\x03com\x00";
        assert_eq!(www.len(), 17);
        let mut padded = [0u8; 24];
        padded[..17].copy_from_slice(www);
        let mut by_words = NAME_HASH_SEED;
        for w in padded.chunks(8) {
            by_words = name_hash_step(by_words, u64::from_le_bytes(w.try_into().unwrap()));
        }
        assert_eq!(name_hash(www), by_words);
        for i in 0..www.len() {
            let mut other = *www;
            other[i] ^= 1;
            assert_ne!(name_hash(&other), name_hash(www), "byte {i}");
        }
    }
}
