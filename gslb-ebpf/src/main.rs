//! The DNS fast path: answers hot A/AAAA queries from precomputed per-client-prefix answers in
//! BPF maps and sends the reply straight back (XDP_TX). Anything it cannot answer exactly is
//! passed to the stack (XDP_PASS), where the responder answers it, and the reason is counted.
//!
//! Cost model (measured on the 2-core test VM, kernel 6.18, see benches/RESULTS.md): a hash
//! map lookup costs about 35 ns, an LPM trie lookup about 15 ns, any call about 7 ns (the
//! return-thunk mitigations); array and per-CPU array lookups are inlined by the verifier and
//! nearly free. A hit therefore makes one hash lookup (`ANSWERS`), one trie lookup (`VIEWS`;
//! `LISTEN` too when more than `LISTEN_INLINE` addresses are served) and one helper call
//! (`bpf_xdp_adjust_tail`), and touches the packet in words.
#![no_std]
#![no_main]

mod csum;
mod hdr;
mod rrl;

use aya_ebpf::{
    bindings::{BPF_F_NO_PREALLOC, BPF_NOEXIST, xdp_action},
    helpers::{
        bpf_jiffies64, bpf_ktime_get_coarse_ns, bpf_ktime_get_ns, bpf_xdp_adjust_head,
        bpf_xdp_adjust_tail, bpf_xdp_load_bytes, bpf_xdp_store_bytes,
    },
    macros::{map, xdp},
    maps::{Array, HashMap, LpmTrie, LruHashMap, PerCpuArray, lpm_trie::Key},
    programs::XdpContext,
};
use gslb_common::{
    ANSWER_BY_RTT, ANSWER_ROTATE, ANSWERS_MAX, AnswerKey, AnswerSet, Config, Counter, DEFAULT_VIEW,
    DNS_HEADER_LEN, DOMAINS_MAX, DomainKey, DomainValue, Heartbeat, LDNS_CACHE_SLOTS, LDNS_MAX,
    LDNS_OFF, LISTEN_IN_TRIE, LISTEN_INLINE, LISTEN_MAX, LISTEN_PREFIX_LEN, LOCAL_MACS_MAX,
    LdnsCacheSlot, LdnsConfig, LdnsKey, LdnsValue, ListenKey, ListenSet, LocalMacs, MAX_ADDRS,
    NAME_HASH_SEED, OPT_RR_LEN, QNAME_MAX, QNAME_WORDS, QTYPE_A, QTYPE_AAAA, ROTOR_SLOTS,
    RR_MAX_LEN, RTT_VIEW_BIT, VIEWS_MAX, ViewKey, ViewValue, ldns_slot, name_hash_step,
};
use hdr::{DnsHdr, EthHdr, Ipv4Hdr, Ipv6Hdr, OptHdr, UdpHdr, VlanHdr, be16, ld, st};

#[map]
static CONFIG: Array<Config> = Array::with_max_entries(1, 0);
/// The addresses we serve, by generation parity (see `ListenSet`); `LISTEN` when they are too
/// many to list there.
#[map]
static LISTEN_SET: Array<ListenSet> = Array::with_max_entries(2, 0);
#[map]
static LISTEN: LpmTrie<ListenKey, u8> = LpmTrie::with_max_entries(LISTEN_MAX, 0);
#[map]
static VIEWS: LpmTrie<ViewKey, ViewValue> = LpmTrie::with_max_entries(VIEWS_MAX, 0);
// NO_PREALLOC: elements are freed through RCU, so a value the program is reading is never
// recycled under it while the controller replaces it.
#[map]
static DOMAINS: HashMap<DomainKey, DomainValue> =
    HashMap::with_max_entries(DOMAINS_MAX, BPF_F_NO_PREALLOC);
#[map]
static ANSWERS: HashMap<AnswerKey, AnswerSet> =
    HashMap::with_max_entries(ANSWERS_MAX, BPF_F_NO_PREALLOC);
#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(Counter::COUNT, 0);
/// The rotation of each rotating answer set on this CPU, indexed by the set's `AnswerSet::rotor`
/// slot (the controller gives each set its own, so interleaved queries for other sets do not
/// advance its turn): the index of the record its next answer gives. A u64: per-CPU elements
/// take 8 bytes anyway, and see [`reply`] for why the width matters.
#[map]
static ROTOR: PerCpuArray<u64> = PerCpuArray::with_max_entries(ROTOR_SLOTS, 0);
/// Per-CPU working memory: the domain key is too big for the 512-byte stack next to everything
/// else the program keeps there.
#[map]
static SCRATCH: PerCpuArray<Scratch> = PerCpuArray::with_max_entries(1, 0);

/// Resolvers that sent us queries, for the controller to probe (dynamic RTT); see
/// [`record_source`]. An LRU map: the kernel side stays O(1) however many resolvers there are.
#[map]
static LDNS: LruHashMap<LdnsKey, LdnsValue> = LruHashMap::with_max_entries(LDNS_MAX, 0);
#[map]
static LDNS_CONFIG: Array<LdnsConfig> = Array::with_max_entries(1, 0);
/// The attached interfaces' own MACs: the only destinations answered (see `LocalMacs`).
#[map]
static LOCAL_MACS: Array<LocalMacs> = Array::with_max_entries(1, 0);
/// The controller's heartbeat: past its bound, every frame is passed (see [`stale`]).
#[map]
static HEARTBEAT: Array<Heartbeat> = Array::with_max_entries(1, 0);

#[repr(C)]
struct Scratch {
    /// The parse writes the lower-cased name's words; the rest of the key is filled in only
    /// on a miss, to tell `NoAnswer` from `UnknownName`.
    key: DomainKey,
    /// See [`launder`].
    len: u32,
    /// [`stale`]'s verdict, and the tick (jiffies) it holds for.
    stale: u32,
    stale_tick: u64,
    /// See [`grow_at_head`]: room for every header and the longest question.
    frame: [u8; 256],
    /// The keys whose `LDNS` entry this CPU refreshed, by epoch: a direct-mapped cache
    /// indexed by `ldns_slot` (here, not in a map of its own: `SCRATCH` is looked up anyway).
    ldns: [LdnsCacheSlot; LDNS_CACHE_SLOTS],
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

const ETH_P_IPV4: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const ETH_P_8021Q: u16 = 0x8100;
const IPPROTO_UDP: u8 = 17;
const CLASS_IN: u16 = 1;
const TYPE_OPT: u16 = 41;
const OPTION_ECS: u16 = 8;
/// EDNS options we look through for ECS before giving up; more than this is unusual for a
/// query (DNS cookie, padding, ECS) and goes to the responder.
const MAX_EDNS_OPTIONS: usize = 4;
const MAX_OPTION_LEN: usize = 256;
const REPLY_TTL: u8 = 64;
/// `::ffff:0:0/96` as the third native u32 of an address: bytes 00 00 ff ff.
const V4_MAPPED_WORD: u32 = u32::from_ne_bytes([0, 0, 0xff, 0xff]);
const RECORDS_LEN: usize = MAX_ADDRS * RR_MAX_LEN;

/// Why a packet was passed: the per-CPU counter slot it bumps.
type Miss = Counter;

#[xdp]
pub fn gslb_xdp(ctx: XdpContext) -> u32 {
    match try_answer(&ctx) {
        Ok(action) => action,
        Err(miss) => {
            count(miss);
            xdp_action::XDP_PASS
        }
    }
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

/// Attached to the client end of a veth pair: native XDP_TX frames are only delivered to a
/// peer that runs an XDP program.
#[xdp]
pub fn gslb_pass(_ctx: XdpContext) -> u32 {
    xdp_action::XDP_PASS
}

#[inline(always)]
fn count(counter: Counter) {
    if let Some(slot) = COUNTERS.get_ptr_mut(counter as u32) {
        // SAFETY: per-CPU slot, only this CPU writes it while the program runs.
        unsafe { *slot += 1 };
    }
}

/// The one bounds check every packet access goes through.
#[inline(always)]
fn ptr_at<T>(ctx: &XdpContext, offset: usize, miss: Miss) -> Result<*mut u8, Miss> {
    let start = ctx.data();
    let end = ctx.data_end();
    // Verifier only: the volatile round trip hides how `offset` was computed, so LLVM cannot
    // fold constants of it into negative offsets from the pointer it compares; the verifier
    // learns no packet range from a compare at a negative offset and rejects the access.
    let offset = unsafe { core::ptr::read_volatile(&offset) };
    let ptr = start + offset;
    if ptr + core::mem::size_of::<T>() > end {
        return Err(miss);
    }
    Ok(ptr as *mut u8)
}

/// What the parse of one query established.
struct Query {
    v6: bool,
    /// Offset of the UDP header.
    l4: usize,
    /// Wire length of the question name.
    qlen: usize,
    qtype: u16,
    /// The query had an OPT record; the reply gets one.
    edns: bool,
    /// DNSSEC OK bit of the query, copied to the reply's OPT (RFC 3225).
    edns_do: u8,
    /// Ones' complement sum of the question name as native 16-bit words from an even offset.
    qname_sum: u64,
    /// `name_hash` of the lower-cased name.
    hash: u64,
}

#[inline(always)]
fn try_answer(ctx: &XdpContext) -> Result<u32, Miss> {
    let config = CONFIG.get(0).ok_or(Miss::OtherPort)?;
    let scratch = SCRATCH.get_ptr_mut(0).ok_or(Miss::Malformed)?;
    // SAFETY: per-CPU slot, only this CPU uses it while the program runs.
    let scratch = unsafe { &mut *scratch };
    if stale(scratch) {
        return Err(Miss::Stale);
    }
    let q = parse(ctx, config, scratch)?;

    // The client's view: (view generation ‖ client address) in the trie.
    let mut view_key = TrieKey::<5> {
        prefix_len: (core::mem::size_of::<ViewKey>() * 8) as u32,
        data: [
            u32::from_ne_bytes(config.view_generation.to_be_bytes()),
            0,
            0,
            V4_MAPPED_WORD,
            0,
        ],
    };
    // The source address, IPv4-mapped, into the view key (which also keeps it for `LDNS`,
    // recorded once the name turns out to be ours, without holding registers across lookups).
    if q.v6 {
        let ip = ptr_at::<Ipv6Hdr>(ctx, q.l4 - Ipv6Hdr::LEN, Miss::Malformed)?;
        // The address as two native words; the key's four are their halves.
        let (hi, lo) = unsafe {
            (
                ld::<u64>(ip.add(Ipv6Hdr::ADDRS)),
                ld::<u64>(ip.add(Ipv6Hdr::ADDRS + 8)),
            )
        };
        view_key.data[1] = hi as u32;
        view_key.data[2] = (hi >> 32) as u32;
        view_key.data[3] = lo as u32;
        view_key.data[4] = (lo >> 32) as u32;
        if martian_v6(hi, lo) {
            return Err(Miss::MartianSource);
        }
    } else {
        let ip = ptr_at::<Ipv4Hdr>(ctx, q.l4 - Ipv4Hdr::LEN, Miss::Malformed)?;
        let saddr: u32 = unsafe { ld(ip.add(Ipv4Hdr::ADDRS)) };
        view_key.data[4] = saddr;
        if martian_v4(saddr) {
            return Err(Miss::MartianSource);
        }
    }
    let (view, rtt_view) = match VIEWS.get(view_key.as_key::<ViewKey>()) {
        Some(v) => (v.view, v.rtt_view),
        None => (DEFAULT_VIEW, 0),
    };

    let mut akey = AnswerKey {
        name_hash: q.hash,
        generation: config.generation,
        view,
        qtype: q.qtype,
        reserved: 0,
        reserved2: 0,
    };
    let mut set = find_answer(&akey, scratch, q.qlen);
    if set.is_none() && view != DEFAULT_VIEW {
        akey.view = DEFAULT_VIEW;
        set = find_answer(&akey, scratch, q.qlen);
    }
    // A domain answered by RTT: the answer for the client's LDNS, when it has an RTT row.
    // Only these pay the third lookup.
    if let Some(s) = set
        && s.flags & ANSWER_BY_RTT != 0
        && rtt_view != 0
    {
        akey.view = rtt_view | RTT_VIEW_BIT;
        if let Some(by_rtt) = find_answer(&akey, scratch, q.qlen) {
            set = Some(by_rtt);
        }
    }
    // Only a query for a name we serve makes its source a resolver to record (and probe): a
    // query for any other name could come from anyone claiming any address.
    match set {
        Some(set) => {
            record_source(scratch, q.v6, &view_key);
            if set.count == 0 {
                return reply(ctx, &q, config, set, false);
            }
            // Response rate limiting (rrl.rs): only answers we would send count. The source
            // words are read back from the view key (IPv4-mapped, as the buckets key them).
            let d = &view_key.data;
            let hi = d[1] as u64 | (d[2] as u64) << 32;
            let lo = d[3] as u64 | (d[4] as u64) << 32;
            match rrl::verdict(q.v6, hi, lo) {
                rrl::Verdict::Send => reply(ctx, &q, config, set, false),
                rrl::Verdict::Slip => reply(ctx, &q, config, set, true),
                rrl::Verdict::Drop => Ok(xdp_action::XDP_DROP),
            }
        }
        None => {
            let miss = miss_reason(scratch, &q, config);
            if miss == Miss::NoAnswer {
                record_source(scratch, q.v6, &view_key);
            }
            Err(miss)
        }
    }
}

/// An IPv4 source (native word of the address as on the wire) that `gslb_common::martian_v4`
/// refuses, tested on the word: first byte 0, 127 or 224 and up, or 169.254/16.
#[inline(always)]
fn martian_v4(saddr: u32) -> bool {
    let first = saddr & 0xff;
    first == 0 || first == 127 || first >= 224 || saddr & 0xffff == 0xfea9
}

/// An IPv6 source (two native words) that `gslb_common::martian_v6` refuses (`::`, `::1`,
/// `ff00::/8`, `fe80::/10`), or any IPv4-mapped one: on an IPv6 wire the kernel drops those
/// (RFC 4291 2.5.5.2), so the responder would never see the query, and the fast path keys
/// them as the IPv4 client they name.
#[inline(always)]
fn martian_v6(hi: u64, lo: u64) -> bool {
    (hi == 0 && (lo == 0 || lo == 1 << 56 || lo as u32 == V4_MAPPED_WORD))
        || hi & 0xff == 0xff
        || hi & 0xc0ff == 0x80fe
}

/// Whether the frame's MACs allow an answer: neither is a group address (the I/G bit, the low
/// bit of the first byte; broadcast is one too), and the destination is an attached
/// interface's own (so the swapped reply leaves from it).
#[inline(always)]
fn check_macs(ctx: &XdpContext) -> Result<(), Miss> {
    let eth = ptr_at::<EthHdr>(ctx, 0, Miss::NotIp)?;
    // SAFETY: bounds-checked by `ptr_at`.
    // The destination's six bytes and the source's first two, native: byte 0 is the
    // destination's first, byte 6 the source's.
    let dst = unsafe { ld::<u64>(eth) };
    if dst & 0x01 != 0 || (dst >> 48) & 0x01 != 0 {
        return Err(Miss::GroupMac);
    }
    let Some(local) = LOCAL_MACS.get(0) else {
        return Ok(());
    };
    let count = local.count;
    if count == 0 {
        return Ok(());
    }
    let dst = dst & 0xffff_ffff_ffff;
    for i in 0..LOCAL_MACS_MAX {
        if i as u32 >= count {
            break;
        }
        if local.macs[i] == dst {
            return Ok(());
        }
    }
    Err(Miss::OtherMac)
}

/// The answer set under `key` if it answers exactly the name in `scratch` (the key only holds
/// the name's hash).
#[inline(always)]
fn find_answer<'a>(key: &AnswerKey, scratch: &Scratch, qlen: usize) -> Option<&'a AnswerSet> {
    // SAFETY: the map value is read-only for the program and freed through RCU.
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
fn miss_reason(scratch: &mut Scratch, q: &Query, config: &Config) -> Miss {
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

/// Bytes with the top bit set where `x` has a zero byte; exact for the lowest one (the only
/// one used), a byte above a zero byte may be flagged too.
#[inline(always)]
fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(0x0101_0101_0101_0101) & !x & 0x8080_8080_8080_8080
}

/// Bytes with the top bit set where `x` has a byte with both top bits set: a compression
/// pointer or a reserved label type, never part of a name we serve.
#[inline(always)]
fn pointer_bytes(x: u64) -> u64 {
    x & (x << 1) & 0x8080_8080_8080_8080
}

/// `x` with the ASCII capitals of every byte lower-cased.
#[inline(always)]
fn lower(x: u64) -> u64 {
    let low7 = x & 0x7f7f_7f7f_7f7f_7f7f;
    let at_least_a = low7 + 0x3f3f_3f3f_3f3f_3f3f; // top bit set from 'A' (0x41) up
    let above_z = low7 + 0x2525_2525_2525_2525; // top bit set from '[' (0x5b) up
    let upper = at_least_a & !above_z & !x & 0x8080_8080_8080_8080;
    x | (upper >> 2)
}

/// Index of the byte whose top bit is `bit` (a single bit at 8k + 7): k.
#[inline(always)]
fn byte_index(bit: u64) -> usize {
    ((bit >> 7).wrapping_mul(0x0001_0203_0405_0607) >> 56) as usize
}

/// Validates the frame down to the end of the DNS message and leaves the lower-cased question
/// name in `scratch`. Anything not exactly a plain A/AAAA query to us is a miss.
#[inline(always)]
fn parse(ctx: &XdpContext, config: &Config, scratch: &mut Scratch) -> Result<Query, Miss> {
    let eth = ptr_at::<EthHdr>(ctx, 0, Miss::NotIp)?;
    let mut ethertype = be16(unsafe { ld::<u16>(eth.add(12)) }.to_ne_bytes());
    let mut l3 = EthHdr::LEN;
    if ethertype == ETH_P_8021Q {
        let vlan = ptr_at::<VlanHdr>(ctx, l3, Miss::NotIp)?;
        ethertype = be16(unsafe { ld::<u16>(vlan.add(2)) }.to_ne_bytes());
        l3 += VlanHdr::LEN;
    }

    // The destination address, IPv4-mapped, as two native words.
    let (v6, l4, ip_payload_len, dst_hi, dst_lo) = match ethertype {
        ETH_P_IPV4 => {
            let p = ptr_at::<Ipv4Hdr>(ctx, l3, Miss::NotIp)?;
            let ip = unsafe { &*(p as *const Ipv4Hdr) };
            if ip.version_ihl >> 4 != 4 {
                return Err(Miss::Malformed);
            }
            if ip.version_ihl & 0x0f != 5 {
                return Err(Miss::Ipv4Options);
            }
            if be16(ip.frag_off) & 0x3fff != 0 {
                return Err(Miss::Fragment);
            }
            if ip.protocol != IPPROTO_UDP {
                return Err(Miss::NotUdp);
            }
            // The header's ones' complement sum, its checksum included, is all ones: the
            // stack drops any other (a corrupted source would get the answer).
            // SAFETY: the 20 header bytes are bounds-checked by `ptr_at`.
            let sum = unsafe {
                csum::w64(ld::<u64>(p))
                    + csum::w64(ld::<u64>(p.add(8)))
                    + ld::<u32>(p.add(16)) as u64
            };
            if csum::fold64(sum) != 0xffff {
                return Err(Miss::Ipv4Checksum);
            }
            let total = be16(ip.tot_len) as usize;
            if total < Ipv4Hdr::LEN {
                return Err(Miss::Malformed);
            }
            let daddr = unsafe { ld::<u32>(p.add(Ipv4Hdr::ADDRS + 4)) };
            let dst_lo = V4_MAPPED_WORD as u64 | (daddr as u64) << 32;
            (false, l3 + Ipv4Hdr::LEN, total - Ipv4Hdr::LEN, 0, dst_lo)
        }
        ETH_P_IPV6 => {
            let p = ptr_at::<Ipv6Hdr>(ctx, l3, Miss::NotIp)?;
            let ip = unsafe { &*(p as *const Ipv6Hdr) };
            if ip.vtc_flow[0] >> 4 != 6 {
                return Err(Miss::Malformed);
            }
            match ip.next_header {
                IPPROTO_UDP => {}
                44 => return Err(Miss::Fragment),
                0 | 43 | 50 | 51 | 60 | 135 | 139 | 140 | 253 | 254 => {
                    return Err(Miss::Ipv6ExtHeader);
                }
                _ => return Err(Miss::NotUdp),
            }
            let (dst_hi, dst_lo) = unsafe {
                (
                    ld::<u64>(p.add(Ipv6Hdr::ADDRS + 16)),
                    ld::<u64>(p.add(Ipv6Hdr::ADDRS + 24)),
                )
            };
            // An IPv4-mapped destination on an IPv6 wire matches the IPv4 listen address as
            // stored, but is no address of ours (the kernel drops it).
            if dst_hi == 0 && dst_lo as u32 == V4_MAPPED_WORD {
                return Err(Miss::OtherDestination);
            }
            (
                true,
                l3 + Ipv6Hdr::LEN,
                be16(ip.payload_len) as usize,
                dst_hi,
                dst_lo,
            )
        }
        _ => return Err(Miss::NotIp),
    };

    let udp = ptr_at::<UdpHdr>(ctx, l4, Miss::Malformed)?;
    let udp = unsafe { &*(udp as *const UdpHdr) };
    if be16(udp.dest) != config.dns_port {
        return Err(Miss::OtherPort);
    }
    if !listened(config, dst_hi, dst_lo) {
        return Err(Miss::OtherDestination);
    }
    // A DNS query to us: now whether it may be answered at all.
    check_macs(ctx)?;
    if udp.source == [0, 0] {
        return Err(Miss::SourcePortZero);
    }
    if v6 && udp.check == [0, 0] {
        return Err(Miss::UdpChecksumZero);
    }
    let udp_len = be16(udp.len) as usize;
    // Ethernet padding may follow the datagram, but the datagram must be all there.
    if udp_len != ip_payload_len || ctx.data() + l4 + udp_len > ctx.data_end() {
        return Err(Miss::Malformed);
    }
    let msg_end = l4 + udp_len;

    let dns = ptr_at::<DnsHdr>(ctx, l4 + UdpHdr::LEN, Miss::Malformed)?;
    let dns = unsafe { &*(dns as *const DnsHdr) };
    if dns.flags[0] & 0x80 != 0 {
        return Err(Miss::NotQuery);
    }
    // OPCODE != QUERY, or TC set on a query: not ours to interpret.
    if dns.flags[0] & 0x7a != 0 {
        return Err(Miss::Opcode);
    }
    if be16(dns.qdcount) != 1 || be16(dns.ancount) != 0 || be16(dns.nscount) != 0 {
        return Err(Miss::Sections);
    }
    let arcount = be16(dns.arcount);
    if arcount > 1 {
        return Err(Miss::Additional);
    }

    // The name, up to the first zero byte, 8 bytes at a time: lower-cased into the scratch
    // key, hashed, and summed for the checksum. The label structure is not followed here: a
    // name only matches a configured name, whose structure is valid, and a valid structure up
    // to the first zero is the name the query really carries. Following it here would make the
    // verifier explore every label layout.
    let qname = l4 + UdpHdr::LEN + DNS_HEADER_LEN;
    let words = scratch.key.name.as_mut_ptr();
    let mut hash = NAME_HASH_SEED;
    let mut qname_sum: u64 = 0;
    // The word holding the end of the name, how many of its bytes are in the packet, and its
    // index.
    let mut last: Option<(u64, usize, usize)> = None;
    for w in 0..QNAME_WORDS {
        let at = qname + 8 * w;
        let Ok(p) = ptr_at::<u64>(ctx, at, Miss::Malformed) else {
            // Fewer than 8 bytes of the packet left: read what there is (4, 2 and 1 bytes)
            // into the low bytes of a word, zeros above them.
            let mut x = 0u64;
            let mut avail = 0;
            if let Ok(p) = ptr_at::<u32>(ctx, at, Miss::Malformed) {
                x = unsafe { ld::<u32>(p) } as u64;
                avail = 4;
            }
            if let Ok(p) = ptr_at::<u16>(ctx, at + avail, Miss::Malformed) {
                x |= (unsafe { ld::<u16>(p) } as u64) << (8 * avail);
                avail += 2;
            }
            if let Ok(p) = ptr_at::<u8>(ctx, at + avail, Miss::Malformed) {
                x |= (unsafe { ld::<u8>(p) } as u64) << (8 * avail);
                avail += 1;
            }
            last = Some((x, avail, w));
            break;
        };
        let x = unsafe { ld::<u64>(p) };
        if zero_bytes(x) | pointer_bytes(x) != 0 {
            last = Some((x, 8, w));
            break;
        }
        qname_sum += csum::w64(x);
        let x = lower(x);
        // SAFETY: w < QNAME_WORDS words of the 8-byte aligned key name.
        unsafe { st(words.add(8 * w), x) };
        hash = name_hash_step(hash, x);
    }
    // No zero byte in QNAME_MAX bytes.
    let Some((x, avail, w)) = last else {
        return Err(Miss::NameTooLong);
    };
    // The first of: a zero byte (the end), a pointer byte, the end of the packet (only
    // `avail` bytes of `x` are in it; the bytes above are zero, so `first` is never 0).
    let pointers = pointer_bytes(x);
    let events = zero_bytes(x) | pointers;
    let first = events & events.wrapping_neg();
    let k = byte_index(first);
    if k >= avail {
        return Err(Miss::Malformed);
    }
    if first & pointers != 0 {
        return Err(Miss::NameCompressed);
    }
    // Bytes up to and including the zero byte; `first << 1` is 0 for the top byte, and 0 - 1
    // keeps all eight.
    let x = x & (first << 1).wrapping_sub(1);
    qname_sum += csum::w64(x);
    let x = lower(x);
    let w = w & (QNAME_WORDS - 1); // Verifier only: w < QNAME_WORDS already.
    // SAFETY: w < QNAME_WORDS words of the 8-byte aligned key name.
    unsafe { st(words.add(8 * w), x) };
    hash = name_hash_step(hash, x);
    let qlen = launder(8 * w + k + 1, &mut scratch.len)?;

    let tail = ptr_at::<[u8; 4]>(ctx, qname + qlen, Miss::Malformed)?;
    let tail = unsafe { &*(tail as *const [u8; 4]) };
    if u16::from_be_bytes([tail[2], tail[3]]) != CLASS_IN {
        return Err(Miss::Qclass);
    }
    let qtype = u16::from_be_bytes([tail[0], tail[1]]);
    if qtype != QTYPE_A && qtype != QTYPE_AAAA {
        return Err(Miss::Qtype);
    }

    let mut end = qname + qlen + 4;
    let mut edns_do = 0;
    if arcount == 1 {
        let opt = ptr_at::<OptHdr>(ctx, end, Miss::Malformed)?;
        let opt = unsafe { &*(opt as *const OptHdr) };
        if opt.name != 0 || be16(opt.rtype) != TYPE_OPT {
            return Err(Miss::Additional);
        }
        if opt.version != 0 {
            return Err(Miss::EdnsVersion);
        }
        edns_do = opt.flags[0] & 0x80;
        end += OptHdr::LEN;
        let opts_end = end + be16(opt.rdlen) as usize;
        for _ in 0..MAX_EDNS_OPTIONS {
            if end >= opts_end {
                break;
            }
            let option = ptr_at::<[u8; 4]>(ctx, end, Miss::Malformed)?;
            let option = unsafe { &*(option as *const [u8; 4]) };
            if u16::from_be_bytes([option[0], option[1]]) == OPTION_ECS {
                return Err(Miss::ClientSubnet);
            }
            let len = u16::from_be_bytes([option[2], option[3]]) as usize;
            // No option of a query we answer is this long (a cookie is at most 40 bytes); the
            // bound also keeps packet offsets small enough for the verifier to track.
            if len > MAX_OPTION_LEN {
                return Err(Miss::Additional);
            }
            end += 4 + len;
        }
        if end < opts_end {
            return Err(Miss::Additional);
        }
        if end != opts_end {
            return Err(Miss::Malformed);
        }
    }
    if end > msg_end {
        return Err(Miss::Malformed);
    }
    if end < msg_end {
        return Err(Miss::TrailingData);
    }

    Ok(Query {
        v6,
        l4,
        qlen,
        qtype,
        edns: arcount == 1,
        edns_do,
        qname_sum,
        hash,
    })
}

/// Records a query's source (`hi`, `lo`: the IPv4-mapped address as two native words) in
/// `LDNS`: key, the address with the LDNS mask's host bits cleared; value, when it was last
/// seen and the address to probe. The common case, a resolver already refreshed in this epoch
/// on this CPU, costs an inlined array lookup, a multiply and a compare with the cache slot in
/// `scratch`; otherwise one LRU lookup and an in-place store of the time, or an insert for a
/// new resolver. (An LRU value may be recycled under the program: the worst that can happen
/// is another resolver's time refreshed once.)
#[inline(always)]
fn record_source(scratch: &mut Scratch, v6: bool, view_key: &TrieKey<5>) {
    // The address words of the view key (the generation comes first).
    let d = &view_key.data;
    let hi = d[1] as u64 | (d[2] as u64) << 32;
    let lo = d[3] as u64 | (d[4] as u64) << 32;
    let Some(config) = LDNS_CONFIG.get(0) else {
        return;
    };
    let host = if v6 {
        config.host_v6.as_ptr()
    } else {
        config.host_v4.as_ptr()
    };
    // SAFETY: 16 bytes of the map value.
    let key = unsafe { [hi & !ld::<u64>(host), lo & !ld::<u64>(host.add(8))] };
    // Verifier only: the slot index is below LDNS_CACHE_SLOTS already.
    let i = ldns_slot(key) as usize & (LDNS_CACHE_SLOTS - 1);
    // SAFETY: i < LDNS_CACHE_SLOTS.
    let slot = unsafe { scratch.ldns.get_unchecked_mut(i) };
    // (Recording off: checked after the cache, which never holds a key then, so that the
    // common case does not pay for it.)
    if slot.key[0] == key[0] && slot.key[1] == key[1] && slot.epoch == config.epoch
        || config.flags & LDNS_OFF != 0
    {
        return;
    }
    // SAFETY: a helper without arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    // SAFETY: same size, and every byte pattern is an address.
    let map_key: LdnsKey = unsafe { core::mem::transmute::<[u64; 2], LdnsKey>(key) };
    match LDNS.get_ptr_mut(&map_key) {
        // SAFETY: a map value; a plain store of one word.
        Some(value) => unsafe {
            st(
                (value as *mut u8).add(core::mem::offset_of!(LdnsValue, last_seen_ns)),
                now,
            )
        },
        None => {
            let value = LdnsValue {
                last_seen_ns: now,
                // SAFETY: as above.
                addr: unsafe { core::mem::transmute::<[u64; 2], [u8; 16]>([hi, lo]) },
            };
            // Another CPU may have inserted it meanwhile: then its entry stays.
            let _ = LDNS.insert(&map_key, &value, BPF_NOEXIST as u64);
        }
    }
    slot.key = key;
    slot.epoch = config.epoch;
}

/// Whether we serve the destination address (IPv4-mapped, as two native words).
#[inline(always)]
fn listened(config: &Config, hi: u64, lo: u64) -> bool {
    let Some(set) = LISTEN_SET.get(config.generation & 1) else {
        return false;
    };
    let count = set.count;
    if count == LISTEN_IN_TRIE {
        let key = TrieKey::<4> {
            prefix_len: LISTEN_PREFIX_LEN,
            data: [hi as u32, (hi >> 32) as u32, lo as u32, (lo >> 32) as u32],
        };
        return LISTEN.get(key.as_key::<ListenKey>()).is_some();
    }
    let addrs = set.addrs.as_ptr() as *const u8;
    for i in 0..LISTEN_INLINE {
        if i as u32 >= count {
            break;
        }
        // SAFETY: i < LISTEN_INLINE addresses of 16 bytes, 8-byte aligned in the map value.
        if unsafe { ld::<u64>(addrs.add(16 * i)) == hi && ld::<u64>(addrs.add(16 * i + 8)) == lo } {
            return true;
        }
    }
    false
}

/// Verifier only: returns `len` (a question name length) as a value known to the verifier by
/// its range alone, by a round trip through map memory (`slot`). Otherwise every length is a
/// distinct constant and everything after the name is verified once per length, which exceeds
/// the verifier's budget.
#[inline(always)]
fn launder(len: usize, slot: &mut u32) -> Result<usize, Miss> {
    let len = unsafe {
        core::ptr::write_volatile(slot, len as u32);
        core::ptr::read_volatile(slot)
    } as usize;
    if len == 0 || len > QNAME_MAX {
        return Err(Miss::Malformed);
    }
    Ok(len)
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

/// Makes room for the answers when the frame has no tailroom (veth, and drivers that size
/// buffers to the packet): the frame grows at the head instead and everything before the answers
/// (headers and question, `keep` bytes) moves to the new start.
#[inline(always)]
fn grow_at_head(ctx: &XdpContext, keep: usize, delta: i32) -> Result<(), Miss> {
    let scratch = SCRATCH.get_ptr_mut(0).ok_or(Miss::NoTailroom)?;
    // SAFETY: per-CPU slot, only this CPU uses it while the program runs.
    let buf = unsafe { &mut (*scratch).frame };
    if keep > buf.len() || delta <= 0 {
        return Err(Miss::NoTailroom);
    }
    let buf = buf.as_mut_ptr() as *mut core::ffi::c_void;
    // SAFETY: helper calls on our own context with a buffer of at least `keep` bytes.
    unsafe {
        if bpf_xdp_load_bytes(ctx.ctx, 0, buf, keep as u32) != 0
            || bpf_xdp_adjust_head(ctx.ctx, -delta) != 0
            || bpf_xdp_store_bytes(ctx.ctx, 0, buf, keep as u32) != 0
        {
            return Err(Miss::NoTailroom);
        }
    }
    Ok(())
}

/// All ones when `x < n`, else zero, without a branch: the sign of `x - n`. (For `x` below 2^63,
/// which a slot the program alone writes always is.)
#[inline(always)]
fn below(x: u64, n: u64) -> u64 {
    (x.wrapping_sub(n) as i64 >> 63) as u64
}

/// Turns the query into the reply in place and returns XDP_TX. A `slip` (rate limiting) is the
/// reply without records and with TC=1.
///
/// Checksums: every part is summed as native (little-endian) 16-bit words, which is the
/// big-endian sum byte-swapped (RFC 1071); the result is stored natively, i.e. right.
#[inline(always)]
fn reply(
    ctx: &XdpContext,
    q: &Query,
    config: &Config,
    set: &AnswerSet,
    slip: bool,
) -> Result<u32, Miss> {
    let stored = set.count as usize;
    if stored == 0 || stored > MAX_ADDRS {
        return Err(Miss::NoAnswer);
    }
    let (first, n, answers_sum) = if slip {
        (0, 0, 0)
    } else if set.flags & ANSWER_ROTATE != 0 {
        // The set's own slot. No mask needed: every u16 is below ROTOR_SLOTS, and the
        // (inlined) lookup checks the index against the map's size anyway.
        let rotor = ROTOR.get_ptr_mut(set.rotor as u32).ok_or(Miss::NoAnswer)?;
        // The slot holds the index of the set's next record itself, so no division is needed
        // (a 32-bit remainder is ~25 cycles on the critical path). A slot at or past `stored`
        // (the set lost records at a republish, or the slot is shared by sets of other sizes)
        // starts again at the first record. Without branches: BPF has no conditional move, so
        // a compare is a jump, mispredicted every other query of a two-record set (measured:
        // +20 ns). LLVM turns the sign trick of `below` back into a compare when it can bound
        // both operands; a whole u64 from the map is what it cannot bound.
        // SAFETY: per-CPU slot, only this CPU writes it while the program runs.
        let i = unsafe {
            let t = *rotor;
            let i = t & below(t, stored as u64);
            *rotor = (i + 1) & below(i + 1, stored as u64);
            i as usize
        };
        // Verifier only: the mask (a no-op, i < stored <= MAX_ADDRS) bounds `i` for it
        // whatever LLVM makes of the compares; the volatile read keeps LLVM from dropping it.
        let i = unsafe { core::ptr::read_volatile(&i) } & (MAX_ADDRS - 1);
        (i, 1, set.rr_csum[i])
    } else {
        (0, stored, set.all_csum)
    };
    let rr_len = set.rr_len();

    let dns_off = q.l4 + UdpHdr::LEN;
    let answers_off = dns_off + DNS_HEADER_LEN + q.qlen + 4;
    let answers_len = n * rr_len;
    let opt_off = answers_off + answers_len;
    let msg_end = opt_off + if q.edns { OPT_RR_LEN } else { 0 };
    let udp_len = msg_end - q.l4;
    let delta = msg_end as i32 - (ctx.data_end() - ctx.data()) as i32;
    // SAFETY: plain helper call on our own context; every pointer is re-derived afterwards.
    if unsafe { bpf_xdp_adjust_tail(ctx.ctx, delta) } != 0 {
        grow_at_head(ctx, answers_off, delta)?;
    }

    // Answers: the records as the controller laid them out, in 8-byte words and a last 4
    // (records are 16 or 28 bytes).
    let src = first * rr_len;
    let records = set.records.as_ptr();
    for i in 0..RECORDS_LEN / 8 {
        let at = 8 * i;
        if at + 8 > answers_len {
            break;
        }
        // Verifier only: `src + at` stays inside `records` (first = 0 unless n = 1).
        let from = src + at;
        if from + 8 > RECORDS_LEN {
            return Err(Miss::NoAnswer);
        }
        let p = ptr_at::<u64>(ctx, answers_off + at, Miss::NoTailroom)?;
        unsafe { st(p, ld::<u64>(records.add(from))) };
    }
    if answers_len % 8 != 0 {
        let at = answers_len - 4;
        let from = src + at;
        // Verifier only, as above.
        if from + 4 > RECORDS_LEN {
            return Err(Miss::NoAnswer);
        }
        let p = ptr_at::<u32>(ctx, answers_off + at, Miss::NoTailroom)?;
        unsafe { st(p, ld::<u32>(records.add(from))) };
    }

    // Everything after the question name shares one parity: the qtype/qclass, the answers
    // (whose sums the controller stored big-endian, as if at an even offset) and the OPT.
    let qtail = ptr_at::<[u8; 4]>(ctx, answers_off - 4, Miss::NoTailroom)?;
    let qtail = unsafe { *(qtail as *const [u8; 4]) };
    let mut tail_sum =
        csum::word(qtail[0], qtail[1]) + csum::word(qtail[2], qtail[3]) + answers_sum;
    if q.edns {
        let size = config.edns_udp_size.to_be_bytes();
        let opt_bytes = [
            0,
            0,
            TYPE_OPT as u8,
            size[0],
            size[1],
            0,
            0,
            q.edns_do,
            0,
            0,
            0,
        ];
        let opt = ptr_at::<[u8; OPT_RR_LEN]>(ctx, opt_off, Miss::NoTailroom)?;
        let head = u64::from_le_bytes([0, 0, TYPE_OPT as u8, size[0], size[1], 0, 0, q.edns_do]);
        unsafe {
            st(opt, head);
            // Bytes 7..11: DO again, then the flags' low byte and RDLENGTH 0.
            st(opt.add(7), q.edns_do as u32);
        }
        tail_sum += csum::bytes(&opt_bytes);
    }
    // Big-endian from an even offset; native from an odd one is the same bytes, and native
    // from an even offset is the byte swap.
    let mut tail_sum = csum::fold(tail_sum);
    if q.qlen & 1 == 0 {
        tail_sum = tail_sum.swap_bytes();
    }

    let dns = ptr_at::<DnsHdr>(ctx, dns_off, Miss::NoTailroom)?;
    // QR=1, OPCODE=0, AA=1, TC=0 (1 for a slip), RD copied; RA=0, AD=0, CD copied, NOERROR.
    let flags = unsafe { ld::<u16>(dns.add(2)) }.to_ne_bytes();
    let flags = [
        0x84 | (slip as u8) << 1 | (flags[0] & 0x01),
        flags[1] & 0x10,
    ];
    let ancount = (n as u16).to_be();
    let arcount = (q.edns as u16).to_be();
    unsafe {
        st(dns.add(2), u16::from_ne_bytes(flags));
        st(dns.add(6), ancount);
        st(dns.add(10), arcount);
    }
    // id and flags, then QDCOUNT (1), ANCOUNT and ARCOUNT, all native.
    let dns_sum = csum::w64(unsafe { ld::<u32>(dns) } as u64)
        + (1u16.to_be() as u64)
        + ancount as u64
        + arcount as u64;

    // MACs: bytes 0..6 and 6..12 trade places, as one u64 and one u32. `check_macs` let only
    // a frame to an attached interface's own MAC through, so the reply leaves from that MAC.
    // (Swapping, rather than storing the MAC from `LOCAL_MACS`, keeps the hit path at two
    // register stores; the two are the same once the destination was checked.)
    let eth = ptr_at::<EthHdr>(ctx, 0, Miss::NoTailroom)?;
    unsafe {
        let a = ld::<u64>(eth); // dst[0..6], src[0..2]
        let b = ld::<u32>(eth.add(8)); // src[2..6]
        st(eth, (a >> 48) | ((b as u64) << 16) | (a << 48));
        st(eth.add(8), (a >> 16) as u32);
    }

    let udp_len_be = (udp_len as u16).to_be();
    // Pseudo-header: both addresses (swapping does not change their sum), the protocol and
    // the UDP length (IPv6: the 32-bit length and next header, the same words).
    let mut pseudo_sum = (IPPROTO_UDP as u16).to_be() as u64 + udp_len_be as u64;
    if q.v6 {
        let ip = ptr_at::<Ipv6Hdr>(ctx, q.l4 - Ipv6Hdr::LEN, Miss::NoTailroom)?;
        unsafe {
            let a = ip.add(Ipv6Hdr::ADDRS);
            let s0 = ld::<u64>(a);
            let s1 = ld::<u64>(a.add(8));
            let d0 = ld::<u64>(a.add(16));
            let d1 = ld::<u64>(a.add(24));
            st(a, d0);
            st(a.add(8), d1);
            st(a.add(16), s0);
            st(a.add(24), s1);
            pseudo_sum += csum::w64(s0) + csum::w64(s1) + csum::w64(d0) + csum::w64(d1);
            st(ip.add(4), udp_len_be); // payload length
            st(ip.add(7), REPLY_TTL); // hop limit
        }
    } else {
        let ip = ptr_at::<Ipv4Hdr>(ctx, q.l4 - Ipv4Hdr::LEN, Miss::NoTailroom)?;
        unsafe {
            let a = ip.add(Ipv4Hdr::ADDRS);
            let addrs = ld::<u64>(a);
            st(a, addrs.rotate_left(32));
            pseudo_sum += csum::w64(addrs);
            st(ip.add(2), ((udp_len + Ipv4Hdr::LEN) as u16).to_be()); // total length
            st(ip.add(8), REPLY_TTL);
            st(ip.add(10), 0u16); // checksum
            let header = csum::w64(ld::<u64>(ip))
                + csum::w64(ld::<u64>(ip.add(8)))
                + ld::<u32>(ip.add(16)) as u64;
            st(ip.add(10), !csum::fold64(header));
        }
    }

    let udp = ptr_at::<UdpHdr>(ctx, q.l4, Miss::NoTailroom)?;
    let ports = unsafe { ld::<u32>(udp) };
    unsafe {
        st(udp, ports.rotate_left(16));
        st(udp.add(4), udp_len_be);
    }
    let total =
        pseudo_sum + ports as u64 + udp_len_be as u64 + dns_sum + q.qname_sum + tail_sum as u64;
    let check = !csum::fold64(total);
    // A computed zero is sent as all ones: zero means "no checksum" (and is illegal in IPv6).
    unsafe { st(udp.add(6), if check == 0 { 0xffffu16 } else { check }) };

    // A slip is counted by rrl.rs.
    if !slip {
        count(match (q.v6, q.qtype == QTYPE_AAAA) {
            (false, false) => Counter::HitAV4,
            (false, true) => Counter::HitAaaaV4,
            (true, false) => Counter::HitAV6,
            (true, true) => Counter::HitAaaaV6,
        });
    }
    Ok(xdp_action::XDP_TX)
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
