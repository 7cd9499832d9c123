//! Wire headers, the bounds check every packet access goes through ([`ptr_at`]), and
//! word-sized loads and stores of packet data.
//!
//! Every header is a `#[repr(C)]` struct of bytes whose size is asserted below, and fields are
//! reached by name (`&raw const (*p).field`), never by a byte offset. Packet data is unaligned, so header fields are byte arrays and multi-byte access goes
//! through [`ld`]/[`st`]: one BPF load or store of 2, 4 or 8 bytes each. The verifier accepts
//! unaligned packet and map-value access unless the program is loaded with
//! BPF_F_STRICT_ALIGNMENT or the architecture lacks efficient unaligned access (x86-64 has it;
//! every test loads the program). Words are native, i.e. little-endian: checksums are summed in
//! that byte order and swapped once (RFC 1071, section 2(B)).

use aya_ebpf::programs::XdpContext;
use gslb_common::Counter;

use crate::csum;

pub const ETH_P_IPV4: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86dd;
pub const ETH_P_8021Q: u16 = 0x8100;
pub const IPPROTO_UDP: u8 = 17;
pub const CLASS_IN: u16 = 1;
pub const TYPE_OPT: u16 = 41;
pub const OPTION_ECS: u16 = 8;
pub use gslb_common::OPTION_COOKIE;

#[inline(always)]
pub fn be16(b: [u8; 2]) -> u16 {
    u16::from_be_bytes(b)
}

#[repr(C)]
pub struct EthHdr {
    pub dst: [u8; 6],
    pub src: [u8; 6],
    pub ethertype: [u8; 2],
}

impl EthHdr {
    pub const LEN: usize = 14;
}

#[repr(C)]
pub struct VlanHdr {
    pub tci: [u8; 2],
    pub ethertype: [u8; 2],
}

impl VlanHdr {
    pub const LEN: usize = 4;
}

#[repr(C)]
pub struct Ipv4Hdr {
    pub version_ihl: u8,
    pub tos: u8,
    pub tot_len: [u8; 2],
    pub id: [u8; 2],
    pub frag_off: [u8; 2],
    pub ttl: u8,
    pub protocol: u8,
    pub check: [u8; 2],
    pub saddr: [u8; 4],
    pub daddr: [u8; 4],
}

impl Ipv4Hdr {
    pub const LEN: usize = 20;

    /// The ones' complement sum of the whole header (checksum included) as native words: two
    /// 8-byte loads and a 4-byte one.
    ///
    /// # Safety
    /// `p` is bounds-checked for the whole header.
    #[inline(always)]
    pub unsafe fn sum(p: *const Self) -> u64 {
        let b = p as *const u8;
        unsafe {
            csum::w64(ld::<u64>(b)) + csum::w64(ld::<u64>(b.add(8))) + ld::<u32>(b.add(16)) as u64
        }
    }
}

#[repr(C)]
pub struct Ipv6Hdr {
    pub vtc_flow: [u8; 4],
    pub payload_len: [u8; 2],
    pub next_header: u8,
    pub hop_limit: u8,
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
}

impl Ipv6Hdr {
    pub const LEN: usize = 40;
}

/// A 16-byte address (`Ipv6Hdr::saddr`, `daddr`, or an IPv4-mapped one in a map value) as two
/// native words, high half first.
///
/// # Safety
/// `a` points into a bounds-checked header or a map value.
#[inline(always)]
pub unsafe fn ld_addr6(a: *const [u8; 16]) -> (u64, u64) {
    unsafe { (ld::<u64>(a), ld::<u64>(&raw const (*a)[8])) }
}

/// Stores an IPv6 address given as two native words (see [`ld_addr6`]).
///
/// # Safety
/// As [`ld_addr6`].
#[inline(always)]
pub unsafe fn st_addr6(a: *mut [u8; 16], (hi, lo): (u64, u64)) {
    unsafe {
        st(a, hi);
        st(&raw mut (*a)[8], lo);
    }
}

#[repr(C)]
pub struct UdpHdr {
    pub source: [u8; 2],
    pub dest: [u8; 2],
    pub len: [u8; 2],
    pub check: [u8; 2],
}

impl UdpHdr {
    pub const LEN: usize = 8;
}

#[repr(C)]
pub struct DnsHdr {
    pub id: [u8; 2],
    pub flags: [u8; 2],
    pub qdcount: [u8; 2],
    pub ancount: [u8; 2],
    pub nscount: [u8; 2],
    pub arcount: [u8; 2],
}

/// The fixed part of the question, after its name.
#[repr(C)]
pub struct QuestionTail {
    pub qtype: [u8; 2],
    pub qclass: [u8; 2],
}

/// The fixed part of an OPT pseudo-record (RFC 6891), up to its options.
#[repr(C)]
pub struct OptHdr {
    pub name: u8,
    pub rtype: [u8; 2],
    pub udp_size: [u8; 2],
    pub ext_rcode: u8,
    pub version: u8,
    pub flags: [u8; 2],
    pub rdlen: [u8; 2],
}

impl OptHdr {
    pub const LEN: usize = 11;
}

/// The head of one EDNS option (RFC 6891, section 6.1.2), before its data.
#[repr(C)]
pub struct EdnsOption {
    pub code: [u8; 2],
    pub len: [u8; 2],
}

/// An EDNS Client Subnet option (RFC 7871 §6) up to its address bytes.
#[repr(C)]
pub struct EcsHdr {
    pub code: [u8; 2],
    pub len: [u8; 2],
    pub family: [u8; 2],
    pub source: u8,
    pub scope: u8,
}

impl EcsHdr {
    pub const LEN: usize = 8;
}

const _: () = {
    assert!(core::mem::size_of::<EcsHdr>() == EcsHdr::LEN);
    assert!(EcsHdr::LEN + 16 == gslb_common::ECS_OPTION_MAX_LEN);
    assert!(core::mem::size_of::<EthHdr>() == EthHdr::LEN);
    assert!(core::mem::size_of::<VlanHdr>() == VlanHdr::LEN);
    assert!(core::mem::size_of::<Ipv4Hdr>() == Ipv4Hdr::LEN);
    assert!(core::mem::size_of::<Ipv6Hdr>() == Ipv6Hdr::LEN);
    assert!(core::mem::size_of::<UdpHdr>() == UdpHdr::LEN);
    assert!(core::mem::size_of::<DnsHdr>() == gslb_common::DNS_HEADER_LEN);
    assert!(core::mem::size_of::<QuestionTail>() == 4);
    assert!(core::mem::size_of::<OptHdr>() == OptHdr::LEN);
    assert!(OptHdr::LEN == gslb_common::OPT_RR_LEN);
    assert!(core::mem::size_of::<EdnsOption>() == 4);
    // The u64 loads that span two fields (see their callers): saddr then daddr, and a MAC.
    assert!(core::mem::offset_of!(Ipv4Hdr, daddr) == core::mem::offset_of!(Ipv4Hdr, saddr) + 4);
    assert!(core::mem::offset_of!(EthHdr, src) == 6);
};

/// An integer the wire can be loaded into or stored from in one instruction.
pub trait Word: Copy {}
impl Word for u8 {}
impl Word for u16 {}
impl Word for u32 {}
impl Word for u64 {}

/// The one bounds check every packet access goes through: a pointer to the `T` at `offset`
/// bytes into the packet, if the packet holds all of it; else `miss`.
#[inline(always)]
pub fn ptr_at<T>(ctx: &XdpContext, offset: usize, miss: Counter) -> Result<*mut T, Counter> {
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

/// Loads a native-endian `T` from `p` (any field or header), which may be unaligned.
///
/// A volatile access of the full width: `read_unaligned` would be split into byte loads by
/// the BPF backend (it does not assume unaligned access is cheap), and volatile also keeps LLVM
/// from merging or hoisting loads, which spills registers (BPF has ten).
#[inline(always)]
pub unsafe fn ld<T: Word>(p: *const impl Sized) -> T {
    // SAFETY (for the kernel, not for Rust's model): the caller bounds-checked `p`; the BPF
    // machine has no alignment requirement for packet and map-value access on this target.
    unsafe { core::ptr::read_volatile(p as *const T) }
}

/// Stores `v` native-endian at `p`, which may be unaligned. See [`ld`].
#[inline(always)]
pub unsafe fn st<T: Word>(p: *mut impl Sized, v: T) {
    unsafe { core::ptr::write_volatile(p as *mut T, v) }
}
