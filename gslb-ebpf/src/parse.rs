//! The frame down to the end of the DNS message: Ethernet (one VLAN tag), IPv4 or IPv6, UDP to
//! an address and port we serve, and a DNS query with one A/AAAA question and at most an OPT
//! record, with at most one valid EDNS Client Subnet option. Anything else is a miss, named by
//! its counter.

use aya_ebpf::{maps::lpm_trie::Key, programs::XdpContext};
use gslb_common::{
    CONFIG_COOKIES, LISTEN_IN_TRIE, LISTEN_INLINE, LISTEN_PREFIX_LEN, LOCAL_MACS_MAX, ListenKey,
    NAME_HASH_SEED, OPTION_NSID, ProgramConfig, QNAME_MAX, QNAME_WORDS, QTYPE_A, QTYPE_AAAA,
    ViewKey, name_hash_step,
};

use crate::{
    LISTEN, LISTEN_SET, LOCAL_MACS, Miss, Scratch, TrieKey, csum,
    hdr::{
        CLASS_IN, DnsHdr, ETH_P_8021Q, ETH_P_IPV4, ETH_P_IPV6, EcsHdr, EdnsOption, EthHdr,
        IPPROTO_UDP, Ipv4Hdr, Ipv6Hdr, OPTION_COOKIE, OPTION_ECS, OptHdr, QuestionTail, TYPE_OPT,
        UdpHdr, VlanHdr, be16, ld, ld_addr6, ptr_at, st,
    },
};

/// EDNS options we look through for ECS before giving up; more than this is unusual for a
/// query (DNS cookie, padding, ECS) and goes to the responder.
const MAX_EDNS_OPTIONS: usize = 4;
const MAX_OPTION_LEN: usize = 256;
/// `::ffff:0:0/96` as the third native u32 of an address: bytes 00 00 ff ff.
const V4_MAPPED_WORD: u32 = u32::from_ne_bytes([0, 0, 0xff, 0xff]);

/// What the parse of one query established.
pub struct Query {
    pub v6: bool,
    /// Offset of the UDP header.
    pub l4: usize,
    /// Wire length of the question name.
    pub qlen: usize,
    pub qtype: u16,
    /// The query had an OPT record; the reply gets one.
    pub edns: bool,
    /// DNSSEC OK bit of the query, copied to the reply's OPT (RFC 3225).
    pub edns_do: u8,
    /// Ones' complement sum of the question name as native 16-bit words from an even offset.
    pub qname_sum: u64,
    /// `name_hash` of the lower-cased name.
    pub hash: u64,
    /// The query's EDNS Client Subnet, echoed in the reply's OPT.
    pub ecs: Subnet,
    /// 0, or the query asks for our NSID (RFC 5001): bit 16 set, and in the low 16 bits the
    /// UDP size its OPT gives, within which the reply carries it (reply.rs). Computed without
    /// a branch (see [`message`]).
    pub nsid: u32,
}

/// A valid EDNS Client Subnet of a query (RFC 7871 §7.1), as the reply echoes it.
pub struct Subnet {
    /// Wire length of the option to echo (its head and address bytes); 0: none.
    pub len: usize,
    /// The option's first 8 bytes as the reply carries them (native word): code, length,
    /// family, source prefix length, and a scope of 0 that the reply fills in.
    pub head: u64,
    /// The address bytes as sent, zero-padded to 16, as two native words.
    pub hi: u64,
    pub lo: u64,
    /// Family IPv6.
    pub v6: bool,
    /// The subnet names a client (source prefix above 0): its address chooses the view.
    pub client: bool,
}

impl Subnet {
    /// No ECS option (or one the reply does not echo: see ecs_allow.rs).
    #[inline(always)]
    pub fn none() -> Self {
        Subnet {
            len: 0,
            head: 0,
            hi: 0,
            lo: 0,
            v6: false,
            client: false,
        }
    }
}

/// The client: its address, IPv4-mapped, in the key of its view in `VIEWS` (behind the view
/// generation). Read from the packet once; the view lookup, RRL and `LDNS` take it from here,
/// in memory: held in registers across the lookups it spilled (+60 ns a hit, see
/// benches/RESULTS.md).
pub struct Client {
    key: TrieKey<5>,
}

impl Client {
    /// Zeros, until [`client`] fills it in.
    #[inline(always)]
    pub fn new() -> Self {
        Client {
            key: TrieKey {
                prefix_len: 0,
                data: [0; 5],
            },
        }
    }

    #[inline(always)]
    pub fn view_key(&self) -> &Key<ViewKey> {
        self.key.as_key()
    }

    /// The key's first word: the trie generation it is looked up in.
    #[inline(always)]
    pub fn view_generation_word(&self) -> u32 {
        self.key.data[0]
    }

    /// The source address, IPv4-mapped, as two native words (the key's generation comes
    /// first).
    #[inline(always)]
    pub fn source(&self) -> (u64, u64) {
        let d = &self.key.data;
        (
            d[1] as u64 | (d[2] as u64) << 32,
            d[3] as u64 | (d[4] as u64) << 32,
        )
    }
}

/// The query's ECS subnet address as the client whose view is looked up (RFC 7871: the subnet
/// is the client the resolver asks for); only when `q.ecs.client`.
#[inline(always)]
pub fn subnet_client(q: &Query, config: &ProgramConfig) -> Client {
    let ecs = &q.ecs;
    let generation = u32::from_ne_bytes(config.view_generation.to_be_bytes());
    let key = if ecs.v6 {
        TrieKey::<5> {
            prefix_len: (core::mem::size_of::<ViewKey>() * 8) as u32,
            data: [
                generation,
                ecs.hi as u32,
                (ecs.hi >> 32) as u32,
                ecs.lo as u32,
                (ecs.lo >> 32) as u32,
            ],
        }
    } else {
        TrieKey::<5> {
            prefix_len: (core::mem::size_of::<ViewKey>() * 8) as u32,
            data: [generation, 0, 0, V4_MAPPED_WORD, ecs.hi as u32],
        }
    };
    Client { key }
}

/// Fills in the client of a parsed query, unless its source is one no resolver sends from.
#[inline(always)]
pub fn client(
    ctx: &XdpContext,
    q: &Query,
    config: &ProgramConfig,
    client: &mut Client,
) -> Result<(), Miss> {
    let key = &mut client.key;
    *key = TrieKey::<5> {
        prefix_len: (core::mem::size_of::<ViewKey>() * 8) as u32,
        data: [
            u32::from_ne_bytes(config.view_generation.to_be_bytes()),
            0,
            0,
            V4_MAPPED_WORD,
            0,
        ],
    };
    if q.v6 {
        let ip = ptr_at::<Ipv6Hdr>(ctx, q.l4 - Ipv6Hdr::LEN, Miss::Malformed)?;
        // SAFETY: bounds-checked by `ptr_at`.
        let (hi, lo) = unsafe { ld_addr6(&raw const (*ip).saddr) };
        // The key's four words are the halves of the address's two.
        key.data[1] = hi as u32;
        key.data[2] = (hi >> 32) as u32;
        key.data[3] = lo as u32;
        key.data[4] = (lo >> 32) as u32;
        if martian_v6(hi, lo) {
            return Err(Miss::MartianSource);
        }
    } else {
        let ip = ptr_at::<Ipv4Hdr>(ctx, q.l4 - Ipv4Hdr::LEN, Miss::Malformed)?;
        // SAFETY: bounds-checked by `ptr_at`.
        let saddr: u32 = unsafe { ld(&raw const (*ip).saddr) };
        key.data[4] = saddr;
        if martian_v4(saddr) {
            return Err(Miss::MartianSource);
        }
    }
    Ok(())
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

/// Whether we serve the destination address (IPv4-mapped, as two native words).
#[inline(always)]
fn listened(config: &ProgramConfig, hi: u64, lo: u64) -> bool {
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

/// A UDP datagram to the DNS port, as far as [`datagram`] parsed it: the IP version, where the
/// UDP header is, what the IP header says its payload is, and the destination address
/// (IPv4-mapped, as two native words).
pub struct Datagram {
    pub v6: bool,
    pub l4: usize,
    ip_payload_len: usize,
    udp: *const UdpHdr,
    dst_hi: u64,
    dst_lo: u64,
}

/// Validates the frame down to the end of the DNS message and leaves the lower-cased question
/// name in `scratch`. Anything not exactly a plain A/AAAA query to us is a miss. `COOKIE`: see
/// [`message`].
#[inline(always)]
pub fn query<const COOKIE: bool>(
    ctx: &XdpContext,
    config: &ProgramConfig,
    scratch: &mut Scratch,
) -> Result<Query, Miss> {
    let d = datagram(ctx, config)?;
    if !listened(config, d.dst_hi, d.dst_lo) {
        return Err(Miss::OtherDestination);
    }
    // A DNS query to us: now whether it may be answered at all.
    check_macs(ctx)?;
    message::<COOKIE>(
        ctx,
        &d,
        scratch.key.name.as_mut_ptr(),
        &mut scratch.len,
        &mut scratch.cookie_at,
        config,
    )
}

/// The frame down to the UDP header: Ethernet (one VLAN tag), IPv4 without options and not a
/// fragment, with a correct header checksum, or IPv6 without extension headers, and UDP to
/// `dns_port`. Reads no map (the floor program runs it too, see floor.rs).
#[inline(always)]
pub fn datagram(ctx: &XdpContext, config: &ProgramConfig) -> Result<Datagram, Miss> {
    let eth = ptr_at::<EthHdr>(ctx, 0, Miss::NotIp)?;
    // SAFETY (every load of a header below): bounds-checked by `ptr_at`.
    let mut ethertype = be16(unsafe { ld::<u16>(&raw const (*eth).ethertype) }.to_ne_bytes());
    let mut l3 = EthHdr::LEN;
    if ethertype == ETH_P_8021Q {
        let vlan = ptr_at::<VlanHdr>(ctx, l3, Miss::NotIp)?;
        ethertype = be16(unsafe { ld::<u16>(&raw const (*vlan).ethertype) }.to_ne_bytes());
        l3 += VlanHdr::LEN;
    }

    // The destination address, IPv4-mapped, as two native words.
    let (v6, l4, ip_payload_len, dst_hi, dst_lo) = match ethertype {
        ETH_P_IPV4 => {
            let p = ptr_at::<Ipv4Hdr>(ctx, l3, Miss::NotIp)?;
            let ip = unsafe { &*p };
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
            if csum::fold64(unsafe { Ipv4Hdr::sum(p) }) != 0xffff {
                return Err(Miss::Ipv4Checksum);
            }
            let total = be16(ip.tot_len) as usize;
            if total < Ipv4Hdr::LEN {
                return Err(Miss::Malformed);
            }
            let daddr = unsafe { ld::<u32>(&raw const (*p).daddr) };
            let dst_lo = V4_MAPPED_WORD as u64 | (daddr as u64) << 32;
            (false, l3 + Ipv4Hdr::LEN, total - Ipv4Hdr::LEN, 0, dst_lo)
        }
        ETH_P_IPV6 => {
            let p = ptr_at::<Ipv6Hdr>(ctx, l3, Miss::NotIp)?;
            let ip = unsafe { &*p };
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
            let (dst_hi, dst_lo) = unsafe { ld_addr6(&raw const (*p).daddr) };
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
    // SAFETY: bounds-checked by `ptr_at`.
    if be16(unsafe { (*udp).dest }) != config.dns_port {
        return Err(Miss::OtherPort);
    }
    Ok(Datagram {
        v6,
        l4,
        ip_payload_len,
        udp,
        dst_hi,
        dst_lo,
    })
}

/// The DNS message of a datagram to the DNS port (see [`datagram`]), from the UDP header's
/// checks to its end: one A/AAAA question, at most an OPT with at most one valid ECS option
/// (see [`subnet`]). The question name's
/// lower-cased words go to `name` (`QNAME_MAX` bytes, 8-byte aligned) and its length through
/// `len_slot` (see [`launder`]). Reads no map: `config` is the caller's copy of `CONFIG`, read
/// only for a cookie ([`CONFIG_COOKIES`]). A cookie, when they are configured, is a miss
/// (`Cookie`) unless `COOKIE`, which takes one (and only one, and without an ECS option) and
/// writes where it starts to `cookie_slot` (0: none; through memory, not the `Query`, for the
/// stack's sake).
#[inline(always)]
pub fn message<const COOKIE: bool>(
    ctx: &XdpContext,
    d: &Datagram,
    name: *mut u8,
    len_slot: &mut u32,
    cookie_slot: &mut u32,
    config: &ProgramConfig,
) -> Result<Query, Miss> {
    let (v6, l4, ip_payload_len) = (d.v6, d.l4, d.ip_payload_len);
    // SAFETY: bounds-checked by `datagram`'s `ptr_at`.
    let udp = unsafe { &*d.udp };
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

    let qname = l4 + UdpHdr::LEN + core::mem::size_of::<DnsHdr>();
    let (qlen, qname_sum, hash) = qname_words(ctx, qname, name, len_slot)?;

    let tail = ptr_at::<QuestionTail>(ctx, qname + qlen, Miss::Malformed)?;
    let tail = unsafe { &*tail };
    if be16(tail.qclass) != CLASS_IN {
        return Err(Miss::Qclass);
    }
    let qtype = be16(tail.qtype);
    if qtype != QTYPE_A && qtype != QTYPE_AAAA {
        return Err(Miss::Qtype);
    }

    let mut end = qname + qlen + core::mem::size_of::<QuestionTail>();
    let mut edns_do = 0;
    let mut ecs = Subnet::none();
    let mut nsid = 0;
    if arcount == 1 {
        let opt = ptr_at::<OptHdr>(ctx, end, Miss::Malformed)?;
        // SAFETY (both loads, and the option's below): bounds-checked by `ptr_at`.
        // Name, type, UDP size, extended RCODE, version and the flags' first byte (DO) in one
        // word; the flags and RDLENGTH in another.
        let fixed = unsafe { ld::<u64>(opt) };
        let flags_rdlen = unsafe { ld::<u32>(&raw const (*opt).flags) };
        // The root name (a zero byte), then the type big-endian.
        if fixed & 0xff_ffff != (TYPE_OPT.to_be() as u64) << 8 {
            return Err(Miss::Additional);
        }
        if (fixed >> 48) as u8 != 0 {
            return Err(Miss::EdnsVersion);
        }
        edns_do = (fixed >> 56) as u8 & 0x80;
        end += OptHdr::LEN;
        let opts_end = end + u16::from_be((flags_rdlen >> 16) as u16) as usize;
        // Where the ECS option starts (0: none); read after the walk, once.
        let mut ecs_at = 0;
        // 1 when an option asks for our NSID, else 0. Without a branch: a value the walk sets
        // on one path and not the other splits every path after it for the verifier (which
        // then passed its million instructions), where a computed one is one range.
        let mut nsid_asked = 0u32;
        for _ in 0..MAX_EDNS_OPTIONS {
            if end >= opts_end {
                break;
            }
            let option = ptr_at::<EdnsOption>(ctx, end, Miss::Malformed)?;
            // Code and length in one word, each big-endian.
            let option = unsafe { ld::<u32>(option) };
            // The reply carries our identity beside the answer (reply.rs): 1 when the code
            // is NSID's (the XOR is 0 and the subtraction borrows).
            nsid_asked |= ((option as u16 ^ OPTION_NSID.to_be()) as u32).wrapping_sub(1) >> 31;
            // With cookies configured, a cookie is `gslb_xdp_cookie`'s (main.rs) to check.
            if option as u16 == OPTION_COOKIE.to_be() && config.flags & CONFIG_COOKIES != 0 {
                if !COOKIE || *cookie_slot != 0 {
                    return Err(Miss::Cookie);
                }
                *cookie_slot = end as u32;
            }
            if option as u16 == OPTION_ECS.to_be() {
                // A cookie beside ECS is the responder's: `gslb_xdp_cookie` has no room on
                // its stack for both (and resolvers seldom send both).
                if COOKIE {
                    return Err(Miss::Cookie);
                }
                // Two: which subnet is the client would be ours to choose (FORMERR).
                if ecs_at != 0 {
                    return Err(Miss::EcsInvalid);
                }
                ecs_at = end;
            }
            let len = u16::from_be((option >> 16) as u16) as usize;
            // No option of a query we answer is this long (a cookie is at most 40 bytes); the
            // bound also keeps packet offsets small enough for the verifier to track.
            if len > MAX_OPTION_LEN {
                return Err(Miss::Additional);
            }
            end += core::mem::size_of::<EdnsOption>() + len;
        }
        if end < opts_end {
            return Err(Miss::Additional);
        }
        if end != opts_end {
            return Err(Miss::Malformed);
        }
        if ecs_at != 0 {
            ecs = subnet(ctx, ecs_at)?;
        }
        // The client's UDP size (the OPT's class) with the request bit.
        let size = u16::from_be((fixed >> 24) as u16) as u32;
        nsid = (size | 0x1_0000) & 0u32.wrapping_sub(nsid_asked);
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
        ecs,
        nsid,
    })
}

/// The ECS option at `at` (inside the OPT record, which the caller walked), if it is valid in
/// a query as the responder checks it (`responder::ecs`): family 1 or 2, a source prefix
/// within it, exactly the address bytes the prefix needs, no address bit beyond the prefix,
/// a zero scope. An IPv6 subnet inside `::ffff:0:0/96` is valid but passed: the responder
/// takes it for the IPv4 client, whose scope is counted in another family.
#[inline(always)]
fn subnet(ctx: &XdpContext, at: usize) -> Result<Subnet, Miss> {
    // The whole head in one load (an option shorter than it is invalid whatever follows, and
    // one cut by the packet's end fails the bounds check).
    let h = ptr_at::<EcsHdr>(ctx, at, Miss::EcsInvalid)?;
    // SAFETY (every load below): bounds-checked by `ptr_at`.
    let head = unsafe { ld::<u64>(h) };
    // Its bytes: code (2), length (2), family (2), source prefix, scope. The address bytes
    // `n`: the length less the family and prefixes (its high byte is checked zero below),
    // compared with what the source prefix needs.
    // Verifier only, the shape of these checks: the family as a match (each path knows `v6`
    // as a constant) and `n` from the packet compared with the source's need (an IPv4 path
    // then knows n <= 5). Written otherwise (`v6` computed, `n` computed from the source, or
    // the length checked inside one compare of the whole head) the verifier processed about
    // 100,000 more instructions (697k against 594k of its 1M), or hit its limit.
    let n = ((head >> 24) as u8 as usize).wrapping_sub(EcsHdr::LEN - 4);
    // Bytes 4 and 5: the family big-endian, 1 or 2.
    let v6 = match (head >> 32) as u16 {
        0x0100 => false,
        0x0200 => true,
        _ => return Err(Miss::EcsInvalid),
    };
    let source = (head >> 48) as u8 as usize;
    // The length's high byte and the scope are zero.
    if head & 0xff00_0000_00ff_0000 != 0
        || source > if v6 { 128 } else { 32 }
        || n != (source + 7) / 8
    {
        return Err(Miss::EcsInvalid);
    }
    let (mut hi, mut lo) = (0u64, 0u64);
    if n > 0 {
        // The word that ends with the last address byte: it starts inside the option (its
        // head is 8 bytes), so no byte of it is outside the packet when the address is not.
        let w = ptr_at::<u64>(ctx, at + n, Miss::EcsInvalid)?;
        let w = unsafe { ld::<u64>(w) };
        if n > 8 {
            let p = ptr_at::<u64>(ctx, at + EcsHdr::LEN, Miss::EcsInvalid)?;
            hi = unsafe { ld::<u64>(p) };
            lo = w >> (8 * (16 - n));
        } else {
            hi = w >> (8 * (8 - n));
        }
        // The last byte's bits below the prefix (8n - source of them) are zero.
        if (w >> 56) & ((1 << (8 * n - source)) - 1) != 0 {
            return Err(Miss::EcsInvalid);
        }
    }
    if v6 && hi == 0 && lo as u32 == V4_MAPPED_WORD {
        return Err(Miss::ClientSubnet);
    }
    Ok(Subnet {
        len: EcsHdr::LEN + n,
        head,
        hi,
        lo,
        v6,
        client: source > 0,
    })
}

/// The question name at `qname`, up to the first zero byte, 8 bytes at a time: lower-cased into
/// `words` (`QNAME_MAX` bytes, 8-byte aligned), hashed, and summed for the checksum. Returns its wire length, its sum and
/// its hash.
///
/// The label structure is not followed here: a name only matches a configured name, whose
/// structure is valid, and a valid structure up to the first zero is the name the query really
/// carries. Following it here would make the verifier explore every label layout.
#[inline(always)]
fn qname_words(
    ctx: &XdpContext,
    qname: usize,
    words: *mut u8,
    len_slot: &mut u32,
) -> Result<(usize, u64, u64), Miss> {
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
        // SAFETY: w < QNAME_WORDS words of the 8-byte aligned name buffer.
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
    // SAFETY: w < QNAME_WORDS words of the 8-byte aligned name buffer.
    unsafe { st(words.add(8 * w), x) };
    hash = name_hash_step(hash, x);
    let qlen = launder(8 * w + k + 1, len_slot)?;
    Ok((qlen, qname_sum, hash))
}
