//! DNS over TCP framing (RFC 1035 §4.2.2, RFC 7766 §8): each message follows its length, two
//! bytes big-endian, and a client may send several before reading an answer. Pure functions
//! over bytes: the connection loop (`server::serve_connection`) splits what it has read with
//! them and frames its answers, and the `responder_tcp` fuzz target drives the same code.

/// The first whole message at the start of `buf` and the bytes it takes with its prefix;
/// `None` while its prefix or its bytes are not all there yet.
pub fn split(buf: &[u8]) -> Option<(&[u8], usize)> {
    let len = usize::from(u16::from_be_bytes([*buf.first()?, *buf.get(1)?]));
    Some((buf.get(2..2 + len)?, 2 + len))
}

/// `message` behind its length prefix; `None` if it is longer than a prefix can say (65,535
/// bytes), which no answer of the responder is.
pub fn frame(message: &[u8]) -> Option<Vec<u8>> {
    let len = u16::try_from(message.len()).ok()?;
    let mut framed = Vec::with_capacity(2 + message.len());
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(message);
    Some(framed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipelined_messages_split_in_order_and_a_partial_one_waits() {
        let stream = [&[0, 3][..], b"abc", &[0, 0], &[0, 2], b"de", &[0, 5], b"fg"].concat();
        let mut rest = stream.as_slice();
        let mut got = Vec::new();
        while let Some((message, used)) = split(rest) {
            got.push(message.to_vec());
            rest = &rest[used..];
        }
        assert_eq!(got, [b"abc".to_vec(), vec![], b"de".to_vec()]);
        // The last says 5 bytes and has 2: not yet.
        assert_eq!(rest, [0, 5, b'f', b'g']);
        assert_eq!(split(&[]), None);
        assert_eq!(split(&[0]), None);
    }

    #[test]
    fn a_framed_message_splits_back_and_a_too_long_one_is_not_framed() {
        for len in [0, 1, 512, 65_535] {
            let message = vec![0x5a; len];
            let framed = frame(&message).expect("fits");
            assert_eq!(framed.len(), 2 + len);
            assert_eq!(split(&framed), Some((message.as_slice(), 2 + len)));
        }
        assert_eq!(frame(&vec![0; 65_536]), None);
    }
}
