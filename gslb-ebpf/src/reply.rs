//! The query frame turned into its answer in place: the records after the question, an OPT
//! when the query had one (with the query's ECS option and its scope, its DNS cookie when
//! `gslb_xdp_cookie` found it ours, and our NSID option when it asked for it), the DNS
//! header's flags
//! and counts, MACs, addresses and ports
//! swapped, lengths, TTL, and the IPv4 and UDP checksums, all in word loads and stores.

use aya_ebpf::{
    bindings::xdp_action,
    helpers::{bpf_xdp_adjust_head, bpf_xdp_adjust_tail, bpf_xdp_load_bytes, bpf_xdp_store_bytes},
    programs::XdpContext,
};
use gslb_common::{
    ANSWER_ROTATE, AnswerSet, COOKIE_OPTION_LEN, MAX_ADDRS, NSID_MAX, NsidOption, OPT_RR_LEN,
    ProgramConfig, QTYPE_AAAA, RR_MAX_LEN,
};

use crate::{
    Miss, NSID, ROTOR, SCRATCH, csum,
    hdr::{
        DnsHdr, EcsHdr, EthHdr, IPPROTO_UDP, Ipv4Hdr, Ipv6Hdr, OptHdr, QuestionTail, TYPE_OPT,
        UdpHdr, ld, ld_addr6, ptr_at, st, st_addr6,
    },
    parse::Query,
    record,
};

const REPLY_TTL: u8 = 64;
const RECORDS_LEN: usize = MAX_ADDRS * RR_MAX_LEN;

/// Makes room for the answers when the frame has no tailroom (veth, and drivers that size
/// buffers to the packet): the frame grows at the head instead and everything before the answers
/// (headers and question, `keep` bytes) moves to the new start.
#[inline(always)]
fn grow_at_head(ctx: &XdpContext, keep: usize, delta: i32) -> Result<(), Miss> {
    // Verifier only: element 0 of an array always exists.
    let scratch = SCRATCH.get_ptr_mut(0).ok_or(Miss::NoTailroom)?;
    // SAFETY: per-CPU slot, only this CPU uses it while the program runs.
    let buf = unsafe { &mut (*scratch).frame };
    // `keep > buf.len()` for the verifier and the helpers' buffer (no parsed frame has headers
    // and a question that long; LLVM may prove it and drop the test). Growing at the head
    // cannot help a tail that failed to shrink (`delta <= 0`).
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

/// Writes the query's ECS option at `at` with `scope` and returns its checksum sum as the tail
/// takes it (big-endian from an even offset; see [`reply`]), folded only as far as a u32 needs.
///
/// The option is the head's 8 bytes and the address's `n` (0..=16), stored as whole words in
/// an order that leaves every byte right: the word that ends with the address first, then
/// (n > 8) the address's first 8 bytes, then the head, each overwriting the stale bytes of
/// the one before, so no store goes past the option and none is a byte loop.
#[inline(always)]
fn echo_subnet(ctx: &XdpContext, q: &Query, at: usize, scope: u8) -> Result<u32, Miss> {
    let ecs = &q.ecs;
    let n = ecs.len - EcsHdr::LEN;
    // Verifier only: the parse gave n <= 16.
    if n > 16 {
        return Err(Miss::NoTailroom);
    }
    let head = ecs.head | (scope as u64) << 56;
    if n > 0 {
        // The word at `at + n` ends with the address's last byte.
        let last = if n > 8 {
            ecs.lo << (8 * (16 - n))
        } else {
            ecs.hi << (8 * (8 - n))
        };
        let p = ptr_at::<u64>(ctx, at + n, Miss::NoTailroom)?;
        unsafe { st(p, last) };
        if n > 8 {
            let p = ptr_at::<u64>(ctx, at + EcsHdr::LEN, Miss::NoTailroom)?;
            unsafe { st(p, ecs.hi) };
        }
    }
    let p = ptr_at::<u64>(ctx, at, Miss::NoTailroom)?;
    unsafe { st(p, head) };
    // The option starts at an odd offset of the tail (after the 11-byte OPT): big-endian
    // from there is native from the option's own start, and the padding bytes are zeros.
    // Below 2^35, so one 16-bit fold leaves it below 2^20 (the caller folds the rest).
    let sum = csum::w64(head) + csum::w64(ecs.hi) + csum::w64(ecs.lo);
    Ok(((sum & 0xffff) + (sum >> 16)) as u32)
}

/// Our NSID option (in the slot of the packet's generation) and the bytes of it the reply to
/// `q` carries: its length when the query asks for it, else 0 (as when no identity is
/// configured). Without a branch on the query: the verifier walks what follows once for both
/// (with a branch, the reply's call sites took it past its million instructions).
#[inline(always)]
fn nsid_option(q: &Query, config: &ProgramConfig) -> Result<(&'static NsidOption, usize), Miss> {
    // Verifier only: both elements exist.
    let o = NSID.get(config.generation & 1).ok_or(Miss::Nsid)?;
    // All ones when the query asks (bit 16 of `nsid`), else zero.
    let asks = 0u32.wrapping_sub(q.nsid >> 16);
    // The mask bounds it for the verifier too (the controller writes at most 4 + NSID_MAX).
    Ok((o, (o.len & 0x1ff & asks) as usize))
}

/// Writes our NSID option `o` at `at` and returns its checksum sum as the tail takes it: after
/// an ECS option of even length (or none) the option starts at an odd offset of the tail,
/// where big-endian is native from its own start; after one of odd length, at an even offset,
/// where it is the byte swap.
///
/// One helper call copies it from the map: a loop of word stores over up to 259 bytes, inlined
/// at each of the reply's call sites, took the verifier past its million instructions.
#[inline(always)]
fn write_nsid(ctx: &XdpContext, at: usize, o: &NsidOption, ecs_len: usize) -> Result<u32, Miss> {
    // Verifier only, both: the mask bounds `len` for the helper's read of the map value
    // whatever LLVM makes of the compare; the controller writes 5..=4 + NSID_MAX (0 is not
    // given here).
    let len = o.len & 0x1ff;
    if len < 5 || len > 4 + NSID_MAX as u32 {
        return Err(Miss::Nsid);
    }
    let words = o.words.as_ptr() as *mut core::ffi::c_void;
    // SAFETY: helper call on our own context, from a map value of at least `len` bytes; the
    // frame was sized for the option.
    if unsafe { bpf_xdp_store_bytes(ctx.ctx, at as u32, words, len) } != 0 {
        return Err(Miss::NoTailroom);
    }
    let sum = o.sum & 0xffff;
    Ok(if ecs_len & 1 == 0 {
        sum
    } else {
        (sum as u16).swap_bytes() as u32
    })
}

/// Writes the query's cookie (`SCRATCH`'s `cookie`: see `cookie::check`) at `at` and returns
/// its checksum sum as the tail takes it: it starts where [`write_nsid`]'s option would, and
/// its length is even, so an NSID option after it keeps that parity. One helper call, as for
/// NSID: stores of its words took the program past its 512 bytes of stack.
#[inline(always)]
fn write_cookie(ctx: &XdpContext, at: usize, ecs_len: usize) -> Result<u32, Miss> {
    // Verifier only: element 0 of an array always exists.
    let scratch = SCRATCH.get_ptr_mut(0).ok_or(Miss::Cookie)?;
    // SAFETY: per-CPU slot, only this CPU uses it while the program runs.
    let echo = unsafe { &mut (*scratch).cookie };
    let option = echo.option.as_mut_ptr() as *mut core::ffi::c_void;
    // SAFETY: helper call on our own context, from a map value of `COOKIE_OPTION_LEN` bytes;
    // the frame was sized for the option.
    if unsafe { bpf_xdp_store_bytes(ctx.ctx, at as u32, option, COOKIE_OPTION_LEN as u32) } != 0 {
        return Err(Miss::NoTailroom);
    }
    let sum = echo.sum;
    Ok(if ecs_len & 1 == 0 {
        sum
    } else {
        (sum as u16).swap_bytes() as u32
    })
}

/// All ones when `x < n`, else zero, without a branch: the sign of `x - n`. (For `x` below 2^63,
/// which a slot the program alone writes always is.)
#[inline(always)]
fn below(x: u64, n: u64) -> u64 {
    (x.wrapping_sub(n) as i64 >> 63) as u64
}

/// Turns the query into the reply in place and returns XDP_TX. A `slip` (rate limiting) is the
/// reply without records and with TC=1. `scope`: the ECS scope echoed when the query had ECS.
/// `cookie`: the query's DNS cookie is echoed (`gslb_xdp_cookie` only: see [`write_cookie`]).
///
/// Checksums: every part is summed as native (little-endian) 16-bit words, which is the
/// big-endian sum byte-swapped (RFC 1071); the result is stored natively, i.e. right.
#[inline(always)]
pub fn reply(
    ctx: &XdpContext,
    q: &Query,
    config: &ProgramConfig,
    set: &AnswerSet,
    slip: bool,
    scope: u8,
    cookie: bool,
) -> Result<u32, Miss> {
    let stored = set.count as usize;
    if stored == 0 || stored > MAX_ADDRS {
        return Err(Miss::NoAnswer);
    }
    let rr_len = set.rr_len();
    let (first, n, answers_sum, answers_len) = if slip {
        (0, 0, 0, 0)
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
        (i, 1, set.rr_csum[i], rr_len)
    } else {
        // Every record: the controller's length of them (a CNAME answer's records have
        // lengths of their own). Verifier only: the mask bounds it (the controller writes
        // 8..=RECORDS_LEN; RECORDS_LEN is below 256).
        (0, stored, set.all_csum, set.answers_len as usize & 0xff)
    };

    let (nsid, nsid_len) = nsid_option(q, config)?;
    let cookie_len = if cookie { COOKIE_OPTION_LEN } else { 0 };
    let layout = Layout::new(q, answers_len, nsid_len, cookie_len);
    // With our NSID the reply may pass what the client takes (less than 512 counts as 512,
    // RFC 6891 §6.2.5) or what we announce: the responder answers that one, within the size.
    // No reply without it passes 512 (`MAX_REPLY_DNS_LEN`), so for every other answer this is
    // one compare (a min and a max here cost the EDNS hit 10 ns).
    let dns_len = layout.msg_end - layout.dns_off;
    if dns_len > 512
        && (dns_len > (q.nsid & 0xffff) as usize || dns_len > config.edns_udp_size as usize)
    {
        return Err(Miss::Nsid);
    }
    let Layout {
        answers_off,
        answers_len,
        ..
    } = layout;
    let delta = layout.msg_end as i32 - (ctx.data_end() - ctx.data()) as i32;
    // SAFETY: plain helper call on our own context; every pointer is re-derived afterwards.
    if unsafe { bpf_xdp_adjust_tail(ctx.ctx, delta) } != 0 {
        grow_at_head(ctx, answers_off, delta)?;
    }

    // Answers: the records as the controller laid them out, in 8-byte words and a last one
    // that ends with them (over bytes already written with the same ones): any length of at
    // least 8 (an address record is 16 or 28 bytes, a CNAME answer any sum of lengths).
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
        // Verifier only, both: answers_len >= 8 and `src + at` inside `records`, as above.
        let Some(at) = answers_len.checked_sub(8) else {
            return Err(Miss::NoAnswer);
        };
        let from = src + at;
        if from + 8 > RECORDS_LEN {
            return Err(Miss::NoAnswer);
        }
        let p = ptr_at::<u64>(ctx, answers_off + at, Miss::NoTailroom)?;
        unsafe { st(p, ld::<u64>(records.add(from))) };
    }

    let nsid = (nsid_len != 0).then_some(nsid);
    turn_around(
        ctx,
        q,
        config,
        &layout,
        n,
        answers_sum,
        slip,
        scope,
        nsid,
        cookie,
    )?;
    // A slip is counted by rrl.rs.
    if !slip {
        record::count(record::hit(q.v6, q.qtype == QTYPE_AAAA));
    }
    Ok(xdp_action::XDP_TX)
}

/// Where the parts of the reply to `q` go, with `answers_len` bytes of records.
#[derive(Clone, Copy)]
pub struct Layout {
    pub dns_off: usize,
    pub answers_off: usize,
    answers_len: usize,
    opt_off: usize,
    /// Where the echoed ECS option goes (after the OPT), when the query had one.
    ecs_off: usize,
    /// Where our NSID option goes (after the cookie), when the reply carries it.
    nsid_off: usize,
    /// The end of the reply: the frame's length once it is built.
    pub msg_end: usize,
    udp_len: usize,
}

impl Layout {
    #[inline(always)]
    pub fn new(q: &Query, answers_len: usize, nsid_len: usize, cookie_len: usize) -> Layout {
        let dns_off = q.l4 + UdpHdr::LEN;
        let answers_off = dns_off
            + core::mem::size_of::<DnsHdr>()
            + q.qlen
            + core::mem::size_of::<QuestionTail>();
        let opt_off = answers_off + answers_len;
        let ecs_off = opt_off + OPT_RR_LEN;
        // The echoed cookie (`cookie_len` bytes) goes after the ECS option.
        let nsid_off = ecs_off + q.ecs.len + cookie_len;
        let msg_end = if q.edns { nsid_off + nsid_len } else { opt_off };
        Layout {
            dns_off,
            answers_off,
            answers_len,
            opt_off,
            ecs_off,
            nsid_off,
            msg_end,
            udp_len: msg_end - q.l4,
        }
    }
}

/// Everything of the reply but its records, in a frame already sized to `layout` with the
/// records (`n` of them, summing to `answers_sum`) in place: the OPT (with the query's ECS
/// option and `scope`, when it had one, its `cookie`, and our NSID option `nsid`), the DNS
/// header's flags
/// and counts, MACs, addresses and ports swapped, lengths, TTL, and both checksums. Reads no
/// map (the floor program runs it too, with no records: see floor.rs).
#[inline(always)]
pub fn turn_around(
    ctx: &XdpContext,
    q: &Query,
    config: &ProgramConfig,
    layout: &Layout,
    n: usize,
    answers_sum: u32,
    slip: bool,
    scope: u8,
    nsid: Option<&NsidOption>,
    cookie: bool,
) -> Result<(), Miss> {
    let Layout {
        dns_off,
        answers_off,
        answers_len,
        opt_off,
        ecs_off,
        nsid_off,
        msg_end,
        udp_len,
    } = *layout;
    // Everything after the question name shares one parity: the qtype/qclass, the answers
    // (whose sums the controller stored big-endian, as if at an even offset) and the OPT.
    let qtail = ptr_at::<QuestionTail>(
        ctx,
        answers_off - core::mem::size_of::<QuestionTail>(),
        Miss::NoTailroom,
    )?;
    let qtail = unsafe { &*qtail };
    let mut tail_sum = csum::word(qtail.qtype[0], qtail.qtype[1])
        + csum::word(qtail.qclass[0], qtail.qclass[1])
        + answers_sum;
    if q.edns {
        // The OPT's sum as if the answers' length were even; swapped below when it is not.
        let mut opt_sum = 0;
        let size = config.edns_udp_size.to_be_bytes();
        let ecs_len = q.ecs.len;
        if let Some(o) = nsid {
            opt_sum += write_nsid(ctx, nsid_off, o, ecs_len)?;
        }
        if cookie {
            opt_sum += write_cookie(ctx, ecs_off + ecs_len, ecs_len)?;
        }
        let rdlen = ((msg_end - ecs_off) as u16).to_be_bytes();
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
            rdlen[0],
            rdlen[1],
        ];
        let opt = ptr_at::<OptHdr>(ctx, opt_off, Miss::NoTailroom)?;
        // Name, type, UDP size, extended RCODE and version, and the flags' high byte (DO).
        let head = u64::from_le_bytes([0, 0, TYPE_OPT as u8, size[0], size[1], 0, 0, q.edns_do]);
        unsafe {
            st(opt, head);
            // The flags again (DO, then the low byte) and RDLENGTH: the options' (ECS, NSID).
            st(
                &raw mut (*opt).flags,
                u32::from_le_bytes([q.edns_do, 0, rdlen[0], rdlen[1]]),
            );
        }
        opt_sum += csum::bytes(&opt_bytes);
        if ecs_len != 0 {
            opt_sum += echo_subnet(ctx, q, ecs_off, scope)?;
        }
        // After an odd number of answer bytes (a CNAME answer's) the OPT starts at the other
        // parity: its sum is the byte swap. Without a branch (all ones when odd).
        let opt_sum = csum::fold(opt_sum) as u32;
        let odd = 0u32.wrapping_sub(answers_len as u32 & 1);
        let swapped = (opt_sum >> 8 | opt_sum << 8) & 0xffff;
        tail_sum += opt_sum & !odd | swapped & odd;
    }
    // Big-endian from an even offset; native from an odd one is the same bytes, and native
    // from an even offset is the byte swap.
    let mut tail_sum = csum::fold(tail_sum);
    if q.qlen & 1 == 0 {
        tail_sum = tail_sum.swap_bytes();
    }

    let dns = ptr_at::<DnsHdr>(ctx, dns_off, Miss::NoTailroom)?;
    // QR=1, OPCODE=0, AA=1, TC=0 (1 for a slip), RD copied; RA=0, AD=0, CD copied, NOERROR.
    let flags = unsafe { ld::<u16>(&raw const (*dns).flags) }.to_ne_bytes();
    let flags = [
        0x84 | (slip as u8) << 1 | (flags[0] & 0x01),
        flags[1] & 0x10,
    ];
    let ancount = (n as u16).to_be();
    let arcount = (q.edns as u16).to_be();
    unsafe {
        st(&raw mut (*dns).flags, u16::from_ne_bytes(flags));
        st(&raw mut (*dns).ancount, ancount);
        st(&raw mut (*dns).arcount, arcount);
    }
    // id and flags (one load of both), then QDCOUNT (1), ANCOUNT and ARCOUNT, all native.
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
        let b = ld::<u32>(&raw const (*eth).src[2]); // src[2..6]
        st(eth, (a >> 48) | ((b as u64) << 16) | (a << 48));
        st(&raw mut (*eth).src[2], (a >> 16) as u32);
    }

    let udp_len_be = (udp_len as u16).to_be();
    // Pseudo-header: both addresses (swapping does not change their sum), the protocol and
    // the UDP length (IPv6: the 32-bit length and next header, the same words).
    let mut pseudo_sum = (IPPROTO_UDP as u16).to_be() as u64 + udp_len_be as u64;
    if q.v6 {
        let ip = ptr_at::<Ipv6Hdr>(ctx, q.l4 - Ipv6Hdr::LEN, Miss::NoTailroom)?;
        unsafe {
            let (s0, s1) = ld_addr6(&raw const (*ip).saddr);
            let (d0, d1) = ld_addr6(&raw const (*ip).daddr);
            st_addr6(&raw mut (*ip).saddr, (d0, d1));
            st_addr6(&raw mut (*ip).daddr, (s0, s1));
            pseudo_sum += csum::w64(s0) + csum::w64(s1) + csum::w64(d0) + csum::w64(d1);
            st(&raw mut (*ip).payload_len, udp_len_be);
            st(&raw mut (*ip).hop_limit, REPLY_TTL);
        }
    } else {
        let ip = ptr_at::<Ipv4Hdr>(ctx, q.l4 - Ipv4Hdr::LEN, Miss::NoTailroom)?;
        unsafe {
            // saddr and daddr, adjacent (asserted in hdr.rs), as one word.
            let addrs = ld::<u64>(&raw const (*ip).saddr);
            st(&raw mut (*ip).saddr, addrs.rotate_left(32));
            pseudo_sum += csum::w64(addrs);
            st(
                &raw mut (*ip).tot_len,
                ((udp_len + Ipv4Hdr::LEN) as u16).to_be(),
            );
            st(&raw mut (*ip).ttl, REPLY_TTL);
            st(&raw mut (*ip).check, 0u16);
            st(&raw mut (*ip).check, !csum::fold64(Ipv4Hdr::sum(ip)));
        }
    }

    let udp = ptr_at::<UdpHdr>(ctx, q.l4, Miss::NoTailroom)?;
    // Source and destination port, as one word.
    let ports = unsafe { ld::<u32>(udp) };
    unsafe {
        st(udp, ports.rotate_left(16));
        st(&raw mut (*udp).len, udp_len_be);
    }
    let total =
        pseudo_sum + ports as u64 + udp_len_be as u64 + dns_sum + q.qname_sum + tail_sum as u64;
    let check = !csum::fold64(total);
    // A computed zero is sent as all ones: zero means "no checksum" (and is illegal in IPv6).
    unsafe {
        st(
            &raw mut (*udp).check,
            if check == 0 { 0xffffu16 } else { check },
        )
    };
    Ok(())
}
