//! Internet checksum arithmetic (RFC 1071). Sums are kept in u64 (packet words) or u32 and
//! folded once at the end; every input here is far too short to overflow.

/// Sum of `b` as big-endian 16-bit words from an even offset; an odd last byte is the high half.
#[inline(always)]
pub fn bytes<const N: usize>(b: &[u8; N]) -> u32 {
    let mut sum = 0;
    let mut i = 0;
    while i + 1 < N {
        sum += word(b[i], b[i + 1]);
        i += 2;
    }
    if N % 2 == 1 {
        sum += word(b[N - 1], 0);
    }
    sum
}

#[inline(always)]
pub fn word(hi: u8, lo: u8) -> u32 {
    ((hi as u32) << 8) | lo as u32
}

/// The sum of a native 64-bit word (four 16-bit words of the same byte order).
#[inline(always)]
pub fn w64(x: u64) -> u64 {
    (x & 0xffff_ffff) + (x >> 32)
}

#[inline(always)]
pub fn fold(mut sum: u32) -> u16 {
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum as u16
}

#[inline(always)]
pub fn fold64(sum: u64) -> u16 {
    let sum = (sum & 0xffff_ffff) + (sum >> 32);
    let sum = (sum & 0xffff_ffff) + (sum >> 32);
    fold(sum as u32)
}
