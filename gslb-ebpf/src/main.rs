//! The DNS fast path: answers hot A/AAAA queries from precomputed per-client-prefix answers in
//! BPF maps and sends the reply straight back (XDP_TX). Anything it cannot answer exactly is
//! passed to the stack (XDP_PASS), where the responder answers it, and the reason is counted.
#![no_std]
#![no_main]

mod csum;
mod hdr;

use aya_ebpf::{
    bindings::{BPF_F_NO_PREALLOC, xdp_action},
    helpers::{bpf_xdp_adjust_head, bpf_xdp_adjust_tail, bpf_xdp_load_bytes, bpf_xdp_store_bytes},
    macros::{map, xdp},
    maps::{Array, HashMap, LpmTrie, PerCpuArray, lpm_trie::Key},
    programs::XdpContext,
};
use gslb_common::{
    ANSWER_ROTATE, ANSWERS_MAX, AnswerKey, AnswerSet, Config, Counter, DEFAULT_VIEW, DNS_HEADER_LEN,
    DOMAINS_MAX, DomainKey, DomainValue, LISTEN_MAX, ListenKey, MAX_ADDRS, OPT_RR_LEN, QNAME_MAX,
    QTYPE_A, QTYPE_AAAA, RR_FIXED_LEN, VIEWS_MAX, ViewKey,
};
use hdr::{DnsHdr, EthHdr, Ipv4Hdr, Ipv6Hdr, OptHdr, UdpHdr, VlanHdr, be16};

#[map]
static CONFIG: Array<Config> = Array::with_max_entries(1, 0);
#[map]
static LISTEN: HashMap<ListenKey, u8> = HashMap::with_max_entries(LISTEN_MAX, 0);
#[map]
static VIEWS: LpmTrie<ViewKey, u32> = LpmTrie::with_max_entries(VIEWS_MAX, 0);
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
#[map]
static ROTOR: PerCpuArray<u32> = PerCpuArray::with_max_entries(1, 0);
/// Per-CPU working memory: the domain key is too big for the 512-byte stack next to everything
/// else the program keeps there.
#[map]
static SCRATCH: PerCpuArray<Scratch> = PerCpuArray::with_max_entries(1, 0);

#[repr(C)]
struct Scratch {
    key: DomainKey,
    /// See [`launder`].
    len: u32,
    reserved: u32,
    /// See [`grow_at_head`]: room for every header and the longest question.
    frame: [u8; 256],
}

const KEY_WORDS: usize = core::mem::size_of::<DomainKey>() / 8;
const _: () = assert!(core::mem::size_of::<DomainKey>() % 8 == 0);

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
fn ptr_at<T>(ctx: &XdpContext, offset: usize, miss: Miss) -> Result<*mut T, Miss> {
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
    Ok(ptr as *mut T)
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
    /// Ones' complement sum of the question name, as 16-bit words from an even offset.
    qname_sum: u32,
}

#[inline(always)]
fn try_answer(ctx: &XdpContext) -> Result<u32, Miss> {
    let config = CONFIG.get(0).ok_or(Miss::OtherPort)?;
    let scratch = SCRATCH.get_ptr_mut(0).ok_or(Miss::Malformed)?;
    // SAFETY: per-CPU slot, only this CPU uses it while the program runs; the map value is
    // 8-byte aligned, so the key is zeroed in word stores.
    let scratch = unsafe { &mut *scratch };
    let words = &mut scratch.key as *mut DomainKey as *mut u64;
    for i in 0..KEY_WORDS {
        unsafe { core::ptr::write_volatile(words.add(i), 0) };
    }
    let mut listen = ListenKey { addr: [0; 16] };
    let mut view_key = Key::new(0, ViewKey { generation: config.generation.to_be_bytes(), addr: [0; 16] });
    let q = parse(ctx, config, scratch, &mut listen)?;
    let key = &mut scratch.key;
    view_key.data.addr = client_addr(ctx, &q)?;

    key.qtype = q.qtype;
    key.generation = config.generation;
    // SAFETY: the map value is read-only for the program and freed through RCU.
    let Some(domain) = (unsafe { DOMAINS.get(key) }) else {
        return Err(unknown_name_reason(key));
    };

    view_key.prefix_len = (core::mem::size_of::<ViewKey>() * 8) as u32;
    let view = VIEWS.get(&view_key).copied().unwrap_or(DEFAULT_VIEW);
    let mut akey = AnswerKey { generation: config.generation, domain_id: domain.domain_id, view };
    // SAFETY: as for DOMAINS.
    let set = match unsafe { ANSWERS.get(&akey) } {
        Some(set) => set,
        None => {
            akey.view = DEFAULT_VIEW;
            unsafe { ANSWERS.get(&akey) }.ok_or(Miss::NoAnswer)?
        }
    };
    reply(ctx, &q, config, set)
}

/// Validates the frame down to the end of the DNS message and fills the domain key with the
/// lower-cased question name. Anything not exactly a plain A/AAAA query to us is a miss.
#[inline(always)]
fn parse(
    ctx: &XdpContext,
    config: &Config,
    scratch: &mut Scratch,
    listen: &mut ListenKey,
) -> Result<Query, Miss> {
    let key = &mut scratch.key;
    let eth: *const EthHdr = ptr_at(ctx, 0, Miss::NotIp)?;
    let mut ethertype = be16(unsafe { (*eth).ethertype });
    let mut l3 = EthHdr::LEN;
    if ethertype == ETH_P_8021Q {
        let vlan: *const VlanHdr = ptr_at(ctx, l3, Miss::NotIp)?;
        ethertype = be16(unsafe { (*vlan).ethertype });
        l3 += VlanHdr::LEN;
    }

    let (v6, l4, ip_payload_len) = match ethertype {
        ETH_P_IPV4 => {
            let ip: *const Ipv4Hdr = ptr_at(ctx, l3, Miss::NotIp)?;
            let ip = unsafe { &*ip };
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
            let total = be16(ip.tot_len) as usize;
            if total < Ipv4Hdr::LEN {
                return Err(Miss::Malformed);
            }
            listen.addr[10] = 0xff;
            listen.addr[11] = 0xff;
            unsafe { hdr::copy(listen.addr[12..].as_mut_ptr() as *mut [u8; 4], &ip.daddr) };
            (false, l3 + Ipv4Hdr::LEN, total - Ipv4Hdr::LEN)
        }
        ETH_P_IPV6 => {
            let ip: *const Ipv6Hdr = ptr_at(ctx, l3, Miss::NotIp)?;
            let ip = unsafe { &*ip };
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
            unsafe { hdr::copy(&mut listen.addr, &ip.daddr) };
            (true, l3 + Ipv6Hdr::LEN, be16(ip.payload_len) as usize)
        }
        _ => return Err(Miss::NotIp),
    };

    let udp: *const UdpHdr = ptr_at(ctx, l4, Miss::Malformed)?;
    let udp = unsafe { &*udp };
    if be16(udp.dest) != config.dns_port {
        return Err(Miss::OtherPort);
    }
    if LISTEN.get_ptr(listen).is_none() {
        return Err(Miss::OtherDestination);
    }
    let udp_len = be16(udp.len) as usize;
    // Ethernet padding may follow the datagram, but the datagram must be all there.
    if udp_len != ip_payload_len || ctx.data() + l4 + udp_len > ctx.data_end() {
        return Err(Miss::Malformed);
    }
    let msg_end = l4 + udp_len;

    let dns: *const DnsHdr = ptr_at(ctx, l4 + UdpHdr::LEN, Miss::Malformed)?;
    let dns = unsafe { &*dns };
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

    // Copy up to the first zero byte, lower-casing as we go. The label structure is not
    // followed here: a key only matches a configured name, whose structure is valid, and a
    // valid structure up to the first zero is the name the query really carries. Following
    // it here would make the verifier explore every label layout.
    let qname = l4 + UdpHdr::LEN + DNS_HEADER_LEN;
    let mut qname_sum: u32 = 0;
    let mut qlen = 0usize;
    // A loop, not 128 unrolled copies: LLVM cannot unroll a trip count it cannot see, while
    // the verifier still reads the bound from the stack.
    let limit = QNAME_MAX;
    let limit = unsafe { core::ptr::read_volatile(&limit) };
    for i in 0..limit {
        let b: *const u8 = ptr_at(ctx, qname + i, Miss::Malformed)?;
        let b = unsafe { *b };
        if b == 0 {
            qlen = i + 1;
            break;
        }
        // A compression pointer ends a name without a zero byte, so scanning on would take
        // QTYPE and QCLASS for name bytes and misreport the miss. A byte with both top bits
        // set is in no name we serve (configured names are letters, digits, '-' and '_'), so
        // wherever it is, the query is a miss.
        if b & 0xc0 == 0xc0 {
            return Err(Miss::NameCompressed);
        }
        // Always Some (limit == QNAME_MAX); checked because LLVM cannot see the limit.
        let Some(slot) = key.name.get_mut(i) else { break };
        *slot = b.to_ascii_lowercase();
        qname_sum += if i & 1 == 0 { (b as u32) << 8 } else { b as u32 };
    }
    if qlen == 0 {
        return Err(Miss::NameTooLong);
    }
    let qlen = launder(qlen, &mut scratch.len)?;

    let tail: *const [u8; 4] = ptr_at(ctx, qname + qlen, Miss::Malformed)?;
    let tail = unsafe { &*tail };
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
        let opt: *const OptHdr = ptr_at(ctx, end, Miss::Malformed)?;
        let opt = unsafe { &*opt };
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
            let option: *const [u8; 4] = ptr_at(ctx, end, Miss::Malformed)?;
            let option = unsafe { &*option };
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

    Ok(Query { v6, l4, qlen, qtype, edns: arcount == 1, edns_do, qname_sum })
}

/// Verifier only: returns `len` (a question name length) as a value known to the verifier by
/// its range alone, by a round trip through map memory (`slot`). Otherwise every length is a distinct constant and everything after the name
/// is verified once per length, which exceeds the verifier's budget.
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

/// The client address as a view key: IPv4 mapped into IPv6.
#[inline(always)]
fn client_addr(ctx: &XdpContext, q: &Query) -> Result<[u8; 16], Miss> {
    let mut addr = [0u8; 16];
    if q.v6 {
        let ip: *const Ipv6Hdr = ptr_at(ctx, q.l4 - Ipv6Hdr::LEN, Miss::Malformed)?;
        unsafe { hdr::copy(&mut addr, &(*ip).saddr) };
    } else {
        let ip: *const Ipv4Hdr = ptr_at(ctx, q.l4 - Ipv4Hdr::LEN, Miss::Malformed)?;
        addr[10] = 0xff;
        addr[11] = 0xff;
        unsafe { hdr::copy(addr[12..].as_mut_ptr() as *mut [u8; 4], &(*ip).saddr) };
    }
    Ok(addr)
}

/// Turns the query into the reply in place and returns XDP_TX.
#[inline(always)]
fn reply(ctx: &XdpContext, q: &Query, config: &Config, set: &AnswerSet) -> Result<u32, Miss> {
    let stored = set.count as usize;
    if stored == 0 || stored > MAX_ADDRS {
        return Err(Miss::NoAnswer);
    }
    let (first, n, answers_sum) = if set.flags & ANSWER_ROTATE != 0 {
        let rotor = ROTOR.get_ptr_mut(0).ok_or(Miss::NoAnswer)?;
        // SAFETY: per-CPU slot, only this CPU writes it while the program runs.
        let turn = unsafe {
            let t = *rotor;
            *rotor = t.wrapping_add(1);
            t
        };
        let i = turn as usize % stored;
        // Verifier only: it does not bound the result of `%`. The volatile read hides the value
        // from LLVM so that the mask (a no-op, i < stored <= MAX_ADDRS) survives to bound it.
        let i = unsafe { core::ptr::read_volatile(&i) } & (MAX_ADDRS - 1);
        (i, 1, set.rr_csum[i])
    } else {
        (0, stored, set.all_csum)
    };
    let rdlen = if set.qtype == QTYPE_AAAA { 16 } else { 4 };
    let rr_len = RR_FIXED_LEN + rdlen;

    let dns_off = q.l4 + UdpHdr::LEN;
    let answers_off = dns_off + DNS_HEADER_LEN + q.qlen + 4;
    let opt_off = answers_off + n * rr_len;
    let msg_end = opt_off + if q.edns { OPT_RR_LEN } else { 0 };
    let udp_len = msg_end - q.l4;
    let delta = msg_end as i32 - (ctx.data_end() - ctx.data()) as i32;
    // SAFETY: plain helper call on our own context; every pointer is re-derived afterwards.
    if unsafe { bpf_xdp_adjust_tail(ctx.ctx, delta) } != 0 {
        grow_at_head(ctx, answers_off, delta)?;
    }

    // Answers: a pointer to the question name, then the precomputed fields and address.
    let ttl = set.ttl.to_be_bytes();
    let rtype = set.qtype.to_be_bytes();
    for k in 0..MAX_ADDRS {
        if k >= n {
            break;
        }
        let addr = &set.addrs[(first + k) & (MAX_ADDRS - 1)];
        let rr_off = answers_off + k * rr_len;
        let rr: *mut [u8; RR_FIXED_LEN] = ptr_at(ctx, rr_off, Miss::NoTailroom)?;
        let header = [
            0xc0,
            DNS_HEADER_LEN as u8,
            rtype[0],
            rtype[1],
            0,
            CLASS_IN as u8,
            ttl[0],
            ttl[1],
            ttl[2],
            ttl[3],
            0,
            rdlen as u8,
        ];
        unsafe { hdr::put(rr, header) };
        if rdlen == 16 {
            let rdata: *mut [u8; 16] = ptr_at(ctx, rr_off + RR_FIXED_LEN, Miss::NoTailroom)?;
            unsafe { hdr::copy(rdata, addr) };
        } else {
            let rdata: *mut [u8; 4] = ptr_at(ctx, rr_off + RR_FIXED_LEN, Miss::NoTailroom)?;
            unsafe { hdr::copy(rdata, addr.as_ptr() as *const [u8; 4]) };
        }
    }

    // Everything after the question name shares one parity: the qtype/qclass, the answers
    // (whose sums the controller stored as if at an even offset) and the OPT record.
    let qtail: *const [u8; 4] = ptr_at(ctx, answers_off - 4, Miss::NoTailroom)?;
    let qtail = unsafe { *qtail };
    let mut tail_sum = csum::word(qtail[0], qtail[1]) + csum::word(qtail[2], qtail[3]) + answers_sum;
    if q.edns {
        let size = config.edns_udp_size.to_be_bytes();
        let opt: *mut [u8; OPT_RR_LEN] = ptr_at(ctx, opt_off, Miss::NoTailroom)?;
        let opt_bytes = [0, 0, TYPE_OPT as u8, size[0], size[1], 0, 0, q.edns_do, 0, 0, 0];
        unsafe { hdr::put(opt, opt_bytes) };
        tail_sum += csum::bytes(&opt_bytes);
    }
    let mut tail_sum = csum::fold(tail_sum);
    if q.qlen & 1 == 1 {
        tail_sum = tail_sum.swap_bytes();
    }

    let dns: *mut DnsHdr = ptr_at(ctx, dns_off, Miss::NoTailroom)?;
    let dns = unsafe { &mut *dns };
    // QR=1, OPCODE=0, AA=1, TC=0, RD copied; RA=0, AD=0, CD copied, RCODE=NOERROR.
    dns.flags = [0x84 | (dns.flags[0] & 0x01), dns.flags[1] & 0x10];
    dns.ancount = (n as u16).to_be_bytes();
    dns.arcount = (q.edns as u16).to_be_bytes();
    let dns_sum = csum::word(dns.id[0], dns.id[1])
        + csum::word(dns.flags[0], dns.flags[1])
        + 1
        + n as u32
        + q.edns as u32;

    let eth: *mut EthHdr = ptr_at(ctx, 0, Miss::NoTailroom)?;
    let eth = unsafe { &mut *eth };
    unsafe { hdr::swap(&mut eth.dst, &mut eth.src) };

    let mut pseudo_sum = IPPROTO_UDP as u32 + udp_len as u32;
    if q.v6 {
        let ip: *mut Ipv6Hdr = ptr_at(ctx, q.l4 - Ipv6Hdr::LEN, Miss::NoTailroom)?;
        let ip = unsafe { &mut *ip };
        pseudo_sum += unsafe { hdr::swap(&mut ip.saddr, &mut ip.daddr) };
        ip.payload_len = (udp_len as u16).to_be_bytes();
        ip.hop_limit = REPLY_TTL;
    } else {
        let ip: *mut Ipv4Hdr = ptr_at(ctx, q.l4 - Ipv4Hdr::LEN, Miss::NoTailroom)?;
        let ip = unsafe { &mut *ip };
        pseudo_sum += unsafe { hdr::swap(&mut ip.saddr, &mut ip.daddr) };
        ip.tot_len = ((udp_len + Ipv4Hdr::LEN) as u16).to_be_bytes();
        ip.ttl = REPLY_TTL;
        ip.check = [0, 0];
        ip.check = (!csum::fold(csum::ipv4_header(ip))).to_be_bytes();
    }

    let udp: *mut UdpHdr = ptr_at(ctx, q.l4, Miss::NoTailroom)?;
    let udp = unsafe { &mut *udp };
    let ports_sum = unsafe { hdr::swap(&mut udp.source, &mut udp.dest) };
    udp.len = (udp_len as u16).to_be_bytes();
    let udp_sum = ports_sum + udp_len as u32;
    let total = csum::fold(pseudo_sum) as u32
        + csum::fold(udp_sum) as u32
        + csum::fold(dns_sum) as u32
        + csum::fold(q.qname_sum) as u32
        + tail_sum as u32;
    let check = !csum::fold(total);
    // A computed zero is sent as all ones: zero means "no checksum" (and is illegal in IPv6).
    udp.check = (if check == 0 { 0xffff } else { check }).to_be_bytes();

    count(match (q.v6, q.qtype == QTYPE_AAAA) {
        (false, false) => Counter::HitAV4,
        (false, true) => Counter::HitAaaaV4,
        (true, false) => Counter::HitAV6,
        (true, true) => Counter::HitAaaaV6,
    });
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
