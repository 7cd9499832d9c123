//! Wire headers as byte arrays: packet data is unaligned, so every field is read byte-wise.

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
    assert!(core::mem::size_of::<Ipv6Hdr>() == Ipv6Hdr::LEN);
    assert!(core::mem::size_of::<UdpHdr>() == UdpHdr::LEN);
    assert!(core::mem::size_of::<DnsHdr>() == gslb_common::DNS_HEADER_LEN);
    assert!(core::mem::size_of::<OptHdr>() == OptHdr::LEN);
};

/// Copies N bytes one at a time. Volatile, so that LLVM keeps each load next to its store:
/// hoisting all loads first needs N live registers, and BPF has ten, so it spills them and
/// overflows the 512-byte stack. It also keeps the loop from becoming a call to memcpy.
#[inline(always)]
pub unsafe fn copy<const N: usize>(dst: *mut [u8; N], src: *const [u8; N]) {
    let (dst, src) = (dst as *mut u8, src as *const u8);
    let mut i = 0;
    while i < N {
        unsafe { core::ptr::write_volatile(dst.add(i), core::ptr::read_volatile(src.add(i))) };
        i += 1;
    }
}

/// Writes `bytes` to `dst` one at a time (no call to memcpy).
#[inline(always)]
pub unsafe fn put<const N: usize>(dst: *mut [u8; N], bytes: [u8; N]) {
    let dst = dst as *mut u8;
    let mut i = 0;
    while i < N {
        unsafe { *dst.add(i) = bytes[i] };
        i += 1;
    }
}

/// Swaps two N-byte fields byte by byte (volatile, see [`copy`]) and returns the ones'
/// complement sum of both as 16-bit words from an even offset. Summing here, as each byte goes
/// by, keeps LLVM from holding all the bytes for a later checksum pass (which spills them).
#[inline(always)]
pub unsafe fn swap<const N: usize>(a: *mut [u8; N], b: *mut [u8; N]) -> u32 {
    let (a, b) = (a as *mut u8, b as *mut u8);
    let mut sum = 0u32;
    let mut i = 0;
    while i < N {
        unsafe {
            let x = core::ptr::read_volatile(a.add(i));
            let y = core::ptr::read_volatile(b.add(i));
            core::ptr::write_volatile(a.add(i), y);
            core::ptr::write_volatile(b.add(i), x);
            let pair = x as u32 + y as u32;
            sum += if i & 1 == 0 { pair << 8 } else { pair };
        }
        i += 1;
    }
    sum
}
