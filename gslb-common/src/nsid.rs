//! The node's identity in the fast path's replies: the EDNS NSID option (RFC 5001) that a
//! query asking for it gets beside its answer, the same option the responder adds
//! (`server.identity`, `server.nsid`).

/// The longest NSID payload: `server.identity` is 1 to 255 bytes.
pub const NSID_MAX: usize = 255;

/// Words of [`NsidOption::words`]: the longest option (code, length and payload), rounded up.
pub const NSID_WORDS: usize = (4 + NSID_MAX).div_ceil(8);

/// The EDNS option code of NSID (RFC 5001).
pub const OPTION_NSID: u16 = 3;

/// Value of `NSID`, one per generation parity (slot `generation & 1`, written before the
/// switch to its generation like `ECS_ALLOW`, so a packet reads one whole value): the NSID
/// option as it goes on the wire, after the OPT record and the echoed ECS option.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NsidOption {
    /// The option's wire length: 4 and the payload's. 0: no identity is configured, so a
    /// query's NSID request is ignored, as the responder ignores it.
    pub len: u32,
    /// The ones' complement sum of the option as native 16-bit words from its first byte
    /// (the padding zeros add nothing), folded to 16 bits.
    pub sum: u32,
    /// The option's bytes (code, length, payload) in native words, zero-padded: the program
    /// copies its first `len` bytes into the reply.
    pub words: [u64; NSID_WORDS],
}
const _: () = assert!(size_of::<NsidOption>() == 8 + 8 * NSID_WORDS);

impl NsidOption {
    /// No identity: NSID requests are ignored.
    pub const NONE: NsidOption = NsidOption {
        len: 0,
        sum: 0,
        words: [0; NSID_WORDS],
    };

    /// The option carrying `payload` (1 to [`NSID_MAX`] bytes; `None` otherwise).
    pub fn new(payload: &[u8]) -> Option<NsidOption> {
        if payload.is_empty() || payload.len() > NSID_MAX {
            return None;
        }
        let len = 4 + payload.len();
        let mut bytes = [0u8; 8 * NSID_WORDS];
        bytes[..2].copy_from_slice(&OPTION_NSID.to_be_bytes());
        bytes[2..4].copy_from_slice(&(payload.len() as u16).to_be_bytes());
        bytes[4..len].copy_from_slice(payload);
        let mut words = [0u64; NSID_WORDS];
        for (word, chunk) in words.iter_mut().zip(bytes.as_chunks::<8>().0) {
            *word = u64::from_ne_bytes(*chunk);
        }
        let mut sum: u64 = bytes
            .as_chunks::<2>()
            .0
            .iter()
            .map(|pair| u64::from(u16::from_ne_bytes(*pair)))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        Some(NsidOption {
            len: len as u32,
            sum: sum as u32,
            words,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_is_laid_out_as_on_the_wire() {
        for payload in [&b"a"[..], b"abcd", b"node-1", b"xdp-fuzz", &[0x5a; 255]] {
            let o = NsidOption::new(payload).unwrap();
            let len = o.len as usize;
            assert_eq!(len, 4 + payload.len());
            let bytes: [u8; 8 * NSID_WORDS] =
                unsafe { core::mem::transmute::<[u64; NSID_WORDS], _>(o.words) };
            assert_eq!(&bytes[..4], &[0, 3, 0, payload.len() as u8]);
            assert_eq!(&bytes[4..len], payload);
            assert!(bytes[len..].iter().all(|&b| b == 0));
            // The sum is the RFC 1071 sum of the bytes (big-endian words, byte-swapped).
            let mut be = 0u32;
            for pair in bytes[..len.next_multiple_of(2)].as_chunks::<2>().0 {
                be += u32::from(u16::from_be_bytes(*pair));
            }
            while be > 0xffff {
                be = (be & 0xffff) + (be >> 16);
            }
            assert_eq!(o.sum, u32::from((be as u16).swap_bytes()));
        }
        assert_eq!(NsidOption::new(b""), None);
        assert_eq!(NsidOption::new(&[1; 256]), None);
    }
}
