//! The DNS fast path: answers hot A/AAAA queries from precomputed per-client-prefix answers in
//! BPF maps and sends the reply straight back (XDP_TX). Anything it cannot answer exactly is
//! passed to the stack (XDP_PASS), where the responder answers it, and the reason is counted.
//!
//! This file holds the maps and the dispatch; the jobs are [`parse`] (the frame down to the
//! question, and the client), [`lookup`] (an answer set with its name checked; why none),
//! [`reply`] (the frame turned into the answer), [`record`] (what userspace reads back:
//! counters, resolvers), [`rrl`], [`ecs_allow`] (whose ECS is used) and [`cookie`] (whose
//! DNS cookie is ours).
//!
//! Cost model (the 2-core test VM, kernel 6.18, BPF_PROG_TEST_RUN with the bench's query
//! repeated, so caches are warm; benches/RESULTS.md): a hash map lookup with its name compare
//! costs 11 to 16 ns (35 ns in the first, colder measurements), an LPM trie lookup about 15 ns,
//! a helper call 1 to 7 ns (the return-thunk mitigations); array and per-CPU array lookups are
//! inlined by the verifier and nearly free (an inlined array instead of the `ANSWERS` hash
//! saved 0 to 2 ns idle, 10 to 12 under load). The reply's records and the frame's growth cost
//! about 15 ns.
//!
//! A hit therefore makes one hash lookup (`ANSWERS`: publish copies the default view's sets
//! under the views without their own), one trie lookup (`VIEWS`; none for a source or ECS
//! subnet in this CPU's view cache of the generation, see [`source_view`], nor for a name whose
//! `ANY_VIEW` hint bit is set; `LISTEN` too when more than `LISTEN_INLINE` addresses are
//! served) and one helper call (`bpf_xdp_adjust_tail`), and touches the packet in words. Every
//! function is `#[inline(always)]`: the program is one function for the verifier, and a call
//! costs the call's own few ns.
#![no_std]
#![no_main]

mod cookie;
mod csum;
mod ecs_allow;
mod floor;
mod hdr;
mod lookup;
mod parse;
mod record;
mod reply;
mod rrl;

use aya_ebpf::{
    bindings::{BPF_F_MMAPABLE, BPF_F_NO_PREALLOC, xdp_action},
    helpers::{bpf_jiffies64, bpf_ktime_get_coarse_ns},
    macros::{map, xdp},
    maps::{Array, HashMap, LpmTrie, LruHashMap, PerCpuArray, ProgramArray, lpm_trie::Key},
    programs::XdpContext,
};
use gslb_common::{
    ANSWER_ANY_VIEW, ANSWER_BY_RTT, ANSWERS_MAX, ANY_VIEW_WORDS, AnswerKey, AnswerSet,
    CONFIG_WILDCARDS, Counter, DEFAULT_VIEW, DOMAINS_MAX, DomainKey, DomainValue, Heartbeat,
    LDNS_CACHE_SLOTS, LDNS_MAX, LISTEN_MAX, LdnsCacheSlot, LdnsConfig, LdnsKey, LdnsValue,
    ListenKey, ListenSet, LocalMacs, NAME_OWN, NAME_WILDCARD, NsidOption, ProgramConfig,
    ROTOR_SLOTS, RTT_CHOICE_MAX, RTT_CHOICE_WIDTH, RTT_OUTCOME_BIT, RttChoice, RttChoiceKey,
    TAIL_COOKIE, TAIL_WILDCARD, VIEWS_MAX, ViewKey, ViewValue, ldns_slot,
};

/// Written by the controller through its memory mapping, a word at a time (see
/// `ProgramConfig`).
#[map]
static CONFIG: Array<ProgramConfig> = Array::with_max_entries(1, BPF_F_MMAPABLE);
/// The addresses we serve, by generation parity (see `ListenSet`); `LISTEN` when they are too
/// many to list there.
#[map]
static LISTEN_SET: Array<ListenSet> = Array::with_max_entries(2, 0);
#[map]
static LISTEN: LpmTrie<ListenKey, u8> = LpmTrie::with_max_entries(LISTEN_MAX, 0);
#[map]
static VIEWS: LpmTrie<ViewKey, ViewValue> = LpmTrie::with_max_entries(VIEWS_MAX, 0);
// NO_PREALLOC: memory for the entries present only. A freed element may be reused at once
// (Linux >= 6.1), so the controller deletes a generation's entries only after an RCU grace
// period that began after the switch away from it, when no packet reading them still runs
// (dataplane/publish.rs, dataplane/grace.rs).
#[map]
static DOMAINS: HashMap<DomainKey, DomainValue> =
    HashMap::with_max_entries(DOMAINS_MAX, BPF_F_NO_PREALLOC);
#[map]
static ANSWERS: HashMap<AnswerKey, AnswerSet> =
    HashMap::with_max_entries(ANSWERS_MAX, BPF_F_NO_PREALLOC);
/// Per (parity, LDNS view, page): which of each RTT slot's outcomes its clients get (see
/// `RttChoiceKey`). NO_PREALLOC for the same reason as `ANSWERS`.
#[map]
static RTT_CHOICE: HashMap<RttChoiceKey, RttChoice> =
    HashMap::with_max_entries(RTT_CHOICE_MAX, BPF_F_NO_PREALLOC);
/// Per (name hash, qtype), a hint that the answer is the same for every client (see
/// `gslb_common::ANY_VIEW_WORDS`): the set is then looked up without the `VIEWS` trie. Not
/// pinned: every publish rewrites the words that changed.
#[map]
static ANY_VIEW: Array<u64> = Array::with_max_entries(ANY_VIEW_WORDS, 0);
#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(Counter::COUNT, 0);
/// The rotation of each rotating answer set on this CPU, indexed by the set's `AnswerSet::rotor`
/// slot (the controller gives each set its own, so interleaved queries for other sets do not
/// advance its turn): the index of the record its next answer gives. A u64: per-CPU elements
/// take 8 bytes anyway, and see [`reply::reply`] for why the width matters.
#[map]
static ROTOR: PerCpuArray<u64> = PerCpuArray::with_max_entries(ROTOR_SLOTS, 0);
/// Per-CPU working memory: the domain key is too big for the 512-byte stack next to everything
/// else the program keeps there.
#[map]
static SCRATCH: PerCpuArray<Scratch> = PerCpuArray::with_max_entries(1, 0);

/// Resolvers that sent us queries, for the controller to probe (dynamic RTT); see
/// [`record::source`]. An LRU map: the kernel side stays O(1) however many resolvers there are.
#[map]
static LDNS: LruHashMap<LdnsKey, LdnsValue> = LruHashMap::with_max_entries(LDNS_MAX, 0);
#[map]
static LDNS_CONFIG: Array<LdnsConfig> = Array::with_max_entries(1, 0);
/// The attached interfaces' own MACs: the only destinations answered (see `LocalMacs`).
#[map]
static LOCAL_MACS: Array<LocalMacs> = Array::with_max_entries(1, 0);
/// Our NSID option, by generation parity (see `NsidOption`): read only for a query that asks.
#[map]
static NSID: Array<NsidOption> = Array::with_max_entries(2, 0);
/// Where `gslb_xdp` goes on (tail calls): `gslb_xdp_wildcard` with a question we do not serve
/// (`TAIL_WILDCARD`), `gslb_xdp_cookie` with one that carries a DNS cookie (`TAIL_COOKIE`).
#[map]
static TAIL_CALLS: ProgramArray = ProgramArray::with_max_entries(2, 0);
/// The controller's heartbeat: past its bound, every frame is passed (see [`stale`]).
#[map]
static HEARTBEAT: Array<Heartbeat> = Array::with_max_entries(1, 0);

#[repr(C)]
struct Scratch {
    /// The parse writes the lower-cased name's words; the rest of the key is filled in only
    /// on a miss, to tell `NoAnswer` from `UnknownName`.
    key: DomainKey,
    /// See [`parse::launder`].
    len: u32,
    /// `gslb_xdp_cookie`: where the query's COOKIE option starts (0: none; see
    /// [`parse::message`]), and the option, found ours and fresh, for the reply to echo.
    cookie_at: u32,
    cookie: cookie::Echo,
    /// [`stale`]'s verdict, and the tick (jiffies) it holds for.
    stale: u32,
    stale_tick: u64,
    /// See [`reply::grow_at_head`]: room for every header and the longest question.
    frame: [u8; 256],
    /// The keys whose `LDNS` entry this CPU refreshed, by epoch: a direct-mapped cache
    /// indexed by `ldns_slot` (here, not in a map of its own: `SCRATCH` is looked up anyway).
    ldns: [LdnsCacheSlot; LDNS_CACHE_SLOTS],
    /// The `VIEWS` value of recent sources, by generation: see [`source_view`].
    views: [ViewCacheSlot; VIEW_CACHE_SLOTS],
}

/// Sources whose view this CPU keeps (4 KiB of `SCRATCH`, which a per-CPU value's 32 KiB
/// limit bounds beside the LDNS cache).
const VIEW_CACHE_SLOTS: usize = 128;

/// A source address (two native words, IPv4-mapped) and its `VIEWS` value in the generation
/// and trie generation of `tag`.
#[repr(C)]
struct ViewCacheSlot {
    addr: [u64; 2],
    /// The generation the value was read in (high word) and the trie's generation in the key
    /// it was read with (low word); 0 (no generation is 0: the first publish writes 1): empty.
    /// Both, not the generation alone: the value is the trie's of that generation, and both
    /// come from one word of `CONFIG` (one load).
    tag: u64,
    view: u32,
    rtt_view: u32,
    scope: u32,
}

/// An LPM trie key laid out like `Key<K>` (a u32 prefix length, then the data) but 4-byte
/// aligned, so that it is built in word stores: `Key` is packed, and LLVM zero-fills a packed
/// key through a call to `memset`.
#[repr(C, align(4))]
struct TrieKey<const W: usize> {
    prefix_len: u32,
    data: [u32; W],
}

impl<const W: usize> TrieKey<W> {
    #[inline(always)]
    fn as_key<K>(&self) -> &Key<K> {
        const { assert!(core::mem::size_of::<Key<K>>() == 4 + 4 * W) };
        // SAFETY: same size (asserted) and layout (u32 then data bytes); Key is packed, so any
        // alignment will do.
        unsafe { &*(self as *const Self as *const Key<K>) }
    }
}

/// Why a packet was passed: the per-CPU counter slot it bumps.
type Miss = Counter;

/// The ECS scope of a client in no `VIEWS` prefix: unknown to the program.
const NO_SCOPE: u32 = u32::MAX;

#[xdp]
pub fn gslb_xdp(ctx: XdpContext) -> u32 {
    verdict(try_answer::<false, false>(&ctx))
}

/// Where `gslb_xdp` hands a question it does not serve (through `TAIL_WILDCARD`): the same parse,
/// then the wildcard of the question's parent. A program of its own because the verifier
/// walks each program's states apart: the wildcard's lookup and reply in `gslb_xdp` took it
/// past its million instructions (benches/RESULTS.md).
#[xdp]
pub fn gslb_xdp_wildcard(ctx: XdpContext) -> u32 {
    verdict(try_answer::<true, false>(&ctx))
}

/// Where `gslb_xdp` hands a question that carries a DNS cookie (through `TAIL_COOKIE`, when
/// cookies are configured): the same parse and lookups, answered, with the cookie echoed and
/// without rate limiting, when the cookie is a fresh one of ours (cookie.rs); passed
/// otherwise, for the responder to give a new one. A program of its own for the verifier's
/// sake, as `gslb_xdp_wildcard` is; a question of a wildcard's with a cookie is passed.
#[xdp]
pub fn gslb_xdp_cookie(ctx: XdpContext) -> u32 {
    verdict(try_answer::<false, true>(&ctx))
}

/// The action for an answer, or XDP_PASS for a miss, counted by its reason.
#[inline(always)]
fn verdict(answer: Result<u32, Miss>) -> u32 {
    answer.unwrap_or_else(|miss| {
        record::count(miss);
        xdp_action::XDP_PASS
    })
}

/// Attached to the client end of a veth pair: native XDP_TX frames are only delivered to a
/// peer that runs an XDP program.
#[xdp]
pub fn gslb_pass(_ctx: XdpContext) -> u32 {
    xdp_action::XDP_PASS
}

/// Whether the controller's heartbeat is older than its bound: then no gslbd keeps these maps
/// current, and answering from them would keep resolvers on a server whose answers no longer
/// follow health, so every frame goes to the stack (where nothing answers once gslbd is gone,
/// and resolvers fail over).
///
/// Cost: the verdict is kept per CPU for one kernel tick (`bpf_jiffies64`, which the verifier
/// inlines into a load), so the clock helper (a call, about 10 ns here) runs once per tick and
/// CPU, not per packet; staleness shows at most a tick late. The coarse clock lags the
/// controller's CLOCK_MONOTONIC by at most a tick, hence the signed difference.
#[inline(always)]
fn stale(scratch: &mut Scratch) -> bool {
    // SAFETY: a helper without arguments.
    let tick = unsafe { bpf_jiffies64() };
    if tick == scratch.stale_tick {
        return scratch.stale != 0;
    }
    let stale = match HEARTBEAT.get(0) {
        Some(beat) if beat.stale_after_ns != 0 => {
            // SAFETY: a helper without arguments.
            let now = unsafe { bpf_ktime_get_coarse_ns() };
            (now.wrapping_sub(beat.beat_ns) as i64) > beat.stale_after_ns as i64
        }
        _ => false,
    };
    scratch.stale_tick = tick;
    scratch.stale = stale as u32;
    stale
}

/// The view, LDNS view and ECS scope of the packet's source, or of its ECS subnet (`VIEWS`;
/// the default view and [`NO_SCOPE`] outside every prefix), through a per-CPU cache of the
/// addresses seen in this generation: a resolver sends many queries (and its clients' subnets
/// repeat), and the trie costs 15 to 30 ns a lookup, the cache a multiply and three compares.
///
/// Sound because a generation's answers do not depend on which state of the trie a packet
/// reads: the trie changes under a generation only by a refinement's in-place edit, each of
/// whose writes leaves every lookup's answer as it was (publish.rs), and every other trie
/// change comes with a new generation, which no cached value is of. A choice-only publish
/// (`CHOICE_FLIP`) keeps the generation and so never edits the trie: the flip bit returns to
/// its old value, and a value cached before an LDNS view split would come back with it.
#[inline(always)]
fn source_view(scratch: &mut Scratch, client: &parse::Client, generation: u32) -> (u32, u32, u32) {
    let (hi, lo) = client.source();
    let tag = (generation as u64) << 32 | client.view_generation_word() as u64;
    // Verifier only: the mask bounds the index, which the shift bounds already.
    let i = ldns_slot([hi, lo]) as usize & (VIEW_CACHE_SLOTS - 1);
    // SAFETY: i < VIEW_CACHE_SLOTS.
    let slot = unsafe { scratch.views.get_unchecked_mut(i) };
    // One branch, not one per word: each is a way for the verifier to walk.
    if (slot.addr[0] ^ hi) | (slot.addr[1] ^ lo) | (slot.tag ^ tag) == 0 {
        return (slot.view, slot.rtt_view, slot.scope);
    }
    let (view, rtt_view, scope) = match VIEWS.get(client.view_key()) {
        Some(v) => (v.view, v.rtt_view, v.scope as u32),
        None => (DEFAULT_VIEW, 0, NO_SCOPE),
    };
    *slot = ViewCacheSlot {
        addr: [hi, lo],
        tag,
        view,
        rtt_view,
        scope,
    };
    (view, rtt_view, scope)
}

/// The answer to the frame, or why there is none. `WILDCARD`: the question is not ours
/// (`gslb_xdp` found so), and the answer is its parent's wildcard's, if one is published.
/// `COOKIE`: the query carries a DNS cookie (`gslb_xdp` found so), answered only when the
/// cookie is a fresh one of ours.
#[inline(always)]
fn try_answer<const WILDCARD: bool, const COOKIE: bool>(ctx: &XdpContext) -> Result<u32, Miss> {
    // Verifier only: element 0 of an array always exists; the verifier wants the null checks.
    let config = CONFIG.get(0).ok_or(Miss::OtherPort)?;
    // Read once for the whole packet: a publish rewrites `CONFIG` while packets run, and every
    // map the packet reads must be of one generation (`LISTEN_SET`'s, `RTT_CHOICE`'s and
    // `ECS_ALLOW`'s parities, the `ANSWERS` and `DOMAINS` keys). Through the map pointer, each
    // use was a load of its own: the xdp_ecs_allow test saw one generation's `ECS_ALLOW` list
    // with the next one's answers.
    // One load per word, the generations' word first: the controller stores each word at
    // once, so a packet's generation, choice parity and trie generation are of one value.
    let words = (config as *const ProgramConfig).cast::<u64>();
    // SAFETY: a map value pointer the lookup just checked: 16 bytes, 8-byte aligned.
    let config = ProgramConfig::from_words(unsafe {
        [
            core::ptr::read_volatile(words),
            core::ptr::read_volatile(words.add(1)),
        ]
    });
    // The `RTT_CHOICE` parity and the generation come from one word (`CHOICE_FLIP`), read
    // once here: a choice-only switch flips the parity alone, and a packet sees the old word
    // or the new one. Every other map is read under the generation without the flip bit.
    let choice_parity = config.choice_parity();
    let config = &ProgramConfig {
        generation: config.answers_generation(),
        ..config
    };
    let scratch = SCRATCH.get_ptr_mut(0).ok_or(Miss::Malformed)?;
    // SAFETY: per-CPU slot, only this CPU uses it while the program runs.
    let scratch = unsafe { &mut *scratch };
    if stale(scratch) {
        return Err(Miss::Stale);
    }
    if COOKIE {
        // None yet: the parse says where this packet's is.
        scratch.cookie_at = 0;
    }
    let mut q = match parse::query::<COOKIE>(ctx, config, scratch) {
        Ok(q) => q,
        Err(Miss::Cookie) if !COOKIE => {
            // SAFETY: `TAIL_CALLS` holds only our programs; this one does not return.
            let _ = unsafe { TAIL_CALLS.tail_call(ctx, TAIL_COOKIE) };
            return Err(Miss::Cookie);
        }
        Err(miss) => return Err(miss),
    };
    if COOKIE {
        cookie::check(ctx, &q, config, scratch)?;
    }
    let mut client = parse::Client::new();
    parse::client(ctx, &q, config, &mut client)?;
    ecs_allow::apply(&mut q, config, &client);
    // The ECS subnet as the client whose view is looked up, when the query names one (RFC
    // 7871); RRL and `LDNS` below keep the source (the resolver). Built here, ahead of the
    // lookups before its own, as the source's key is: built right before its trie lookup, an
    // ECS hit took ~5 ns more (benches/RESULTS.md, h-ecs second pass; likely the trie's first
    // 8-byte read of the key, over two 4-byte stores still in flight, which no store forwards).
    let subnet = q.ecs.client.then(|| parse::subnet_client(&q, config));

    let mut akey = AnswerKey {
        name_hash: q.hash,
        generation: config.generation,
        view: DEFAULT_VIEW,
        qtype: q.qtype,
        wildcard: NAME_OWN,
        reserved: 0,
    };
    let mut set = None;
    let mut miss = Miss::UnknownName;
    let name;
    if WILDCARD {
        // The wildcard of the parent the question has after its first label, if one is
        // published (`NAME_WILDCARD`), looked up below as a name of ours is. Its names have
        // no `DOMAINS` entry: without a set, `UnknownName` still. (`miss_reason` zero-pads the
        // question's name for the parent's compare.)
        miss = lookup::miss_reason(scratch, &q, config);
        let parent = if miss == Miss::UnknownName {
            lookup::wildcard_parent(scratch)
        } else {
            None
        };
        let Some((parent, hash)) = parent else {
            return Err(miss);
        };
        akey.name_hash = hash;
        akey.wildcard = NAME_WILDCARD;
        name = parent;
    } else {
        name = lookup::Name::question(scratch, &q);
        // A name whose answer is every client's needs no view: its `ANY_VIEW` bit sends it
        // straight to the default view's set, answered only if that set (of this generation)
        // says so; a bit of another name, or a stale one, costs this lookup and nothing else.
        if lookup::any_view_hint(q.hash, q.qtype) {
            set = lookup::find_answer(&akey, &name).filter(|s| s.flags & ANSWER_ANY_VIEW != 0);
        }
    }
    // Otherwise the answer set for the client's view, else for the default view (publish
    // copies the default's set under the views without their own, within a budget, so most
    // hits take one lookup). (Here rather than in a function: LLVM, inlining one, unrolls it
    // into ~140 more instructions, and the hit took 20 ns more.) `scope`: the ECS scope of the
    // view's block, `NO_SCOPE` outside every published prefix.
    let (mut rtt_view, mut scope) = (0, 0);
    if set.is_none() {
        // The view is the ECS subnet's when the query names one, the source's otherwise, both
        // through the per-CPU cache (`source_view`): a subnet's key is the key of a source
        // with its address, so the two share the cache's entries soundly.
        let viewer = subnet.as_ref().unwrap_or(&client);
        let view;
        (view, rtt_view, scope) = source_view(scratch, viewer, config.generation);
        akey.view = view;
        set = lookup::find_answer(&akey, &name);
        if set.is_none() && view != DEFAULT_VIEW {
            akey.view = DEFAULT_VIEW;
            set = lookup::find_answer(&akey, &name);
        }
    }
    // A domain answered by RTT, for a client whose LDNS has an RTT row: the LDNS view's choice
    // among the outcomes of the domain's signature (`RTT_CHOICE`, in the parity this packet's
    // `CONFIG` word gives), then the domain's answer for that outcome. Only these pay the
    // extra lookups.
    if let Some(s) = set
        && s.flags & ANSWER_BY_RTT != 0
        && rtt_view != 0
    {
        let slot = s.rtt_slot;
        let ckey = RttChoiceKey {
            parity: choice_parity,
            rtt_view,
            page: slot / RTT_CHOICE_WIDTH as u32,
            reserved: 0,
        };
        // SAFETY: the map value is read-only for the program, and deleted or rewritten only
        // after the RCU grace period that follows the switch away from its parity
        // (dataplane/grace.rs).
        if let Some(choice) = unsafe { RTT_CHOICE.get(&ckey) } {
            let outcome = choice.outcomes[slot as usize % RTT_CHOICE_WIDTH];
            akey.view = RTT_OUTCOME_BIT | u32::from(outcome);
            if let Some(by_rtt) = lookup::find_answer(&akey, &name) {
                set = Some(by_rtt);
            }
        }
    }
    if !WILDCARD && set.is_none() {
        miss = lookup::miss_reason(scratch, &q, config);
        // A name we do not serve: on to its wildcard, when some wildcard is published and the
        // program is there (it does not return then).
        if !COOKIE && miss == Miss::UnknownName && config.flags & CONFIG_WILDCARDS != 0 {
            // SAFETY: `TAIL_CALLS` holds only our programs; this one does not return.
            let _ = unsafe { TAIL_CALLS.tail_call(ctx, TAIL_WILDCARD) };
        }
    }

    // Only a query for a name we serve makes its source a resolver to record (and probe): a
    // query for any other name could come from anyone claiming any address.
    match set {
        Some(set) => {
            record::source(scratch, q.v6, &client);
            // `COOKIE`: the reply echoes the cookie (checked ours and fresh above).
            let cookie = COOKIE;
            if set.count == 0 {
                return reply::reply(ctx, &q, config, set, false, 0, cookie);
            }
            // The scope the reply echoes: 0 for an answer every client gets (and for a /0
            // subnet, which names no client), else the view block's; a subnet in no published
            // block (the default view's) is left to the responder, which computes it.
            let scope = if !q.ecs.client || set.flags & ANSWER_ANY_VIEW != 0 {
                0
            } else if scope == NO_SCOPE {
                return Err(Miss::ClientSubnet);
            } else {
                scope as u8
            };
            // Response rate limiting (rrl.rs): only answers we would send count, and none to
            // a client that brought back our cookie (it proved its address, RFC 7873 §5.3).
            let (hi, lo) = client.source();
            let verdict = if COOKIE {
                rrl::Verdict::Send
            } else {
                rrl::verdict(q.v6, hi, lo)
            };
            match verdict {
                rrl::Verdict::Send => reply::reply(ctx, &q, config, set, false, scope, cookie),
                rrl::Verdict::Slip => reply::reply(ctx, &q, config, set, true, scope, cookie),
                rrl::Verdict::Drop => Ok(xdp_action::XDP_DROP),
            }
        }
        None => {
            if miss == Miss::NoAnswer {
                record::source(scratch, q.v6, &client);
            }
            Err(miss)
        }
    }
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
