//! Wire headers, and word-sized loads and stores of packet data.
//!
//! Packet data is unaligned, so header fields are byte arrays and multi-byte access goes
//! through [`ld`]/[`st`]: one BPF load or store of 2, 4 or 8 bytes each. The verifier accepts
//! unaligned packet and map-value access unless the program is loaded with
//! BPF_F_STRICT_ALIGNMENT or the architecture lacks efficient unaligned access (x86-64 has it;
//! every test loads the program). Words are native, i.e. little-endian: checksums are summed in
//! that byte order and swapped once (RFC 1071, section 2(B)).

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
    /// Offset of `saddr` (followed by `daddr`).
    pub const ADDRS: usize = 12;
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
    /// Offset of `saddr` (followed by `daddr`).
    pub const ADDRS: usize = 8;
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

const _: () = {
    assert!(core::mem::size_of::<EthHdr>() == EthHdr::LEN);
    assert!(core::mem::size_of::<VlanHdr>() == VlanHdr::LEN);
    assert!(core::mem::size_of::<Ipv4Hdr>() == Ipv4Hdr::LEN);
    assert!(core::mem::offset_of!(Ipv4Hdr, saddr) == Ipv4Hdr::ADDRS);
    assert!(core::mem::size_of::<Ipv6Hdr>() == Ipv6Hdr::LEN);
    assert!(core::mem::offset_of!(Ipv6Hdr, saddr) == Ipv6Hdr::ADDRS);
    assert!(core::mem::size_of::<UdpHdr>() == UdpHdr::LEN);
    assert!(core::mem::size_of::<DnsHdr>() == gslb_common::DNS_HEADER_LEN);
    assert!(core::mem::size_of::<OptHdr>() == OptHdr::LEN);
};

/// An integer the wire can be loaded into or stored from in one instruction.
pub trait Word: Copy {}
impl Word for u8 {}
impl Word for u16 {}
impl Word for u32 {}
impl Word for u64 {}

/// Loads a native-endian `T` from `p`, which may be unaligned.
///
/// A volatile access of the full width: `read_unaligned` would be split into byte loads by
/// the BPF backend (it does not assume unaligned access is cheap), and volatile also keeps LLVM
/// from merging or hoisting loads, which spills registers (BPF has ten).
#[inline(always)]
pub unsafe fn ld<T: Word>(p: *const u8) -> T {
    // SAFETY (for the kernel, not for Rust's model): the caller bounds-checked `p`; the BPF
    // machine has no alignment requirement for packet and map-value access on this target.
    unsafe { core::ptr::read_volatile(p as *const T) }
}

/// Stores `v` native-endian at `p`, which may be unaligned. See [`ld`].
#[inline(always)]
pub unsafe fn st<T: Word>(p: *mut u8, v: T) {
    unsafe { core::ptr::write_volatile(p as *mut T, v) }
}
