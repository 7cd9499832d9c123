//! ICMP echo monitor. A socket per check, connected to the target so that the kernel hands it
//! only the target's packets:
//!
//! - first an unprivileged ping socket (`SOCK_DGRAM`, `IPPROTO_ICMP[V6]`), which Linux allows
//!   to the groups in `net.ipv4.ping_group_range` (for IPv6 too); the kernel picks the echo
//!   identifier and hands back only replies to this socket, without the IP header;
//! - else a raw socket (root or `CAP_NET_RAW`), which sees every ICMP packet from the target
//!   (IPv4 with its IP header): replies are matched on identifier, sequence and a random token
//!   in the payload.

use std::{
    io,
    net::{IpAddr, SocketAddr},
    os::fd::AsFd,
};

use socket2::{Domain, Protocol, Socket, Type};

use super::{
    CheckError,
    icmp_error::{self, Queued},
    random_u64,
};

/// How ICMP echo checks open their socket here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IcmpMode {
    /// Unprivileged ping socket.
    Datagram,
    /// Raw socket.
    Raw,
}

/// Which kind of ICMP socket can be opened for this address family, or why none can.
pub fn icmp_mode(ipv6: bool) -> io::Result<IcmpMode> {
    open(ipv6).map(|(_, mode)| mode)
}

fn open(ipv6: bool) -> io::Result<(Socket, IcmpMode)> {
    let (domain, protocol) = if ipv6 {
        (Domain::IPV6, Protocol::ICMPV6)
    } else {
        (Domain::IPV4, Protocol::ICMPV4)
    };
    let dgram_error = match Socket::new(domain, Type::DGRAM, Some(protocol)) {
        Ok(socket) => return Ok((socket, IcmpMode::Datagram)),
        Err(e) => e,
    };
    match Socket::new(domain, Type::RAW, Some(protocol)) {
        Ok(socket) => Ok((socket, IcmpMode::Raw)),
        Err(raw_error) => Err(io::Error::new(
            raw_error.kind(),
            format!(
                "no ICMP socket: ping socket: {dgram_error} (net.ipv4.ping_group_range); \
                 raw socket: {raw_error} (needs CAP_NET_RAW)"
            ),
        )),
    }
}

/// Sends one echo request to `target` and waits (without a limit: the caller has one) for its
/// reply.
pub(super) async fn ping(target: IpAddr) -> Result<(), CheckError> {
    match echo(target).await {
        Ok((Echo::Reply, _)) => Ok(()),
        Ok((Echo::Error { error, .. }, _)) | Err(error) => Err(CheckError::Icmp(error)),
    }
}

/// What came back for an echo request.
#[derive(Debug)]
pub(crate) enum Echo {
    /// The echo reply.
    Reply,
    /// An error the kernel reported on the connected socket instead: an ICMP unreachable, sent
    /// by `from` (`None`: unknown, or not an ICMP error). Soft ICMP errors (a router's "no
    /// route", a TTL exceeded) are not reported: they are no answer of the target.
    Error {
        error: io::Error,
        from: Option<IpAddr>,
    },
}

/// Sends one echo request to `target` and waits (without a limit: the caller has one) for what
/// comes back, and the time from the send until then. `Err` when no request could be sent.
/// Shared by the ICMP monitor and the LDNS RTT prober ([`crate::probe`]).
pub(crate) async fn echo(target: IpAddr) -> io::Result<(Echo, std::time::Duration)> {
    let ipv6 = target.is_ipv6();
    let (socket, mode) = open(ipv6)?;
    socket.set_nonblocking(true)?;
    icmp_error::report_errors(socket.as_fd(), ipv6)?;
    socket.connect(&SocketAddr::new(target, 0).into())?;
    // tokio's UDP socket is only a non-blocking datagram fd with `send` and `recv`, which is
    // what an ICMP socket needs; no unsafe registration of our own.
    let socket = tokio::net::UdpSocket::from_std(std::net::UdpSocket::from(socket))?;

    let random = random_u64();
    let (ident, seq) = ((random >> 48) as u16, (random >> 32) as u16);
    let token = random_u64().to_be_bytes();
    let request = echo_request(ipv6, ident, seq, token);
    let sent = tokio::time::Instant::now();
    socket.send(&request).await?;
    let mut buf = [0u8; 2048];
    loop {
        match socket.recv(&mut buf).await {
            Ok(len) if is_reply(&buf[..len], ipv6, mode, ident, seq, token) => {
                return Ok((Echo::Reply, sent.elapsed()));
            }
            Ok(_) => {}
            Err(error) => match icmp_error::take(socket.as_fd()) {
                // Reported only because every error is asked for: wait on, as without.
                Some(Queued::Icmp { hard: false, .. }) => {}
                queued => {
                    let from = queued.and_then(Queued::from);
                    return Ok((Echo::Error { error, from }, sent.elapsed()));
                }
            },
        }
    }
}

const ECHO_REQUEST_V4: u8 = 8;
const ECHO_REPLY_V4: u8 = 0;
const ECHO_REQUEST_V6: u8 = 128;
const ECHO_REPLY_V6: u8 = 129;

/// An echo request with `token` as payload. The checksum is filled in for ICMPv4 (the kernel
/// does it for ICMPv6, whose checksum covers a pseudo-header, and for ping sockets).
fn echo_request(ipv6: bool, ident: u16, seq: u16, token: [u8; 8]) -> Vec<u8> {
    let mut packet = Vec::with_capacity(16);
    packet.push(if ipv6 {
        ECHO_REQUEST_V6
    } else {
        ECHO_REQUEST_V4
    });
    packet.push(0); // code
    packet.extend_from_slice(&[0, 0]); // checksum
    packet.extend_from_slice(&ident.to_be_bytes());
    packet.extend_from_slice(&seq.to_be_bytes());
    packet.extend_from_slice(&token);
    if !ipv6 {
        let sum = checksum(&packet);
        packet[2..4].copy_from_slice(&sum.to_be_bytes());
    }
    packet
}

/// Whether `packet` (as the socket returned it) is the reply to our request.
fn is_reply(
    packet: &[u8],
    ipv6: bool,
    mode: IcmpMode,
    ident: u16,
    seq: u16,
    token: [u8; 8],
) -> bool {
    // A raw IPv4 socket returns the IP header too.
    let icmp = if !ipv6 && mode == IcmpMode::Raw {
        let Some(&first) = packet.first() else {
            return false;
        };
        let header = usize::from(first & 0x0f) * 4;
        if first >> 4 != 4 || header < 20 {
            return false;
        }
        packet.get(header..).unwrap_or(&[])
    } else {
        packet
    };
    if icmp.len() < 16 {
        return false;
    }
    let reply_type = if ipv6 { ECHO_REPLY_V6 } else { ECHO_REPLY_V4 };
    icmp[0] == reply_type
        && icmp[1] == 0
        // A ping socket's identifier is the kernel's choice.
        && (mode == IcmpMode::Datagram || icmp[4..6] == ident.to_be_bytes())
        && icmp[6..8] == seq.to_be_bytes()
        && icmp[8..16] == token[..]
}

/// The Internet checksum (RFC 1071).
pub(crate) fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for chunk in data.chunks(2) {
        let word = u16::from_be_bytes([chunk[0], chunk.get(1).copied().unwrap_or(0)]);
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_checksum_verifies() {
        let request = echo_request(false, 0x1234, 0xabcd, *b"01234567");
        assert_eq!(request.len(), 16);
        assert_eq!(request[0], ECHO_REQUEST_V4);
        // The checksum over a packet with its checksum filled in is 0.
        assert_eq!(checksum(&request), 0);
        // RFC 1071's example: 0001 f203 f4f5 f6f7 sums to ddf2.
        assert_eq!(
            checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            !0xddf2
        );
        assert_eq!(checksum(&[0xff]), !0xff00);
    }

    #[test]
    fn replies_are_matched() {
        let token = *b"abcdefgh";
        let mut reply = echo_request(false, 7, 9, token);
        reply[0] = ECHO_REPLY_V4;
        assert!(is_reply(&reply, false, IcmpMode::Datagram, 7, 9, token));
        // A ping socket's identifier is the kernel's; a raw socket's must match.
        assert!(is_reply(&reply, false, IcmpMode::Datagram, 8, 9, token));
        let mut with_ip = vec![0x45; 1];
        with_ip.resize(20, 0);
        with_ip.extend_from_slice(&reply);
        assert!(is_reply(&with_ip, false, IcmpMode::Raw, 7, 9, token));
        assert!(!is_reply(&with_ip, false, IcmpMode::Raw, 8, 9, token));
        // Other sequence, other token, the request itself, truncated, empty.
        assert!(!is_reply(&reply, false, IcmpMode::Datagram, 7, 10, token));
        assert!(!is_reply(
            &reply,
            false,
            IcmpMode::Datagram,
            7,
            9,
            *b"abcdefgX"
        ));
        assert!(!is_reply(
            &echo_request(false, 7, 9, token),
            false,
            IcmpMode::Datagram,
            7,
            9,
            token
        ));
        assert!(!is_reply(
            &reply[..15],
            false,
            IcmpMode::Datagram,
            7,
            9,
            token
        ));
        assert!(!is_reply(&[], false, IcmpMode::Raw, 7, 9, token));
        // ICMPv6: no IP header even on a raw socket.
        let mut reply6 = echo_request(true, 7, 9, token);
        reply6[0] = ECHO_REPLY_V6;
        assert!(is_reply(&reply6, true, IcmpMode::Raw, 7, 9, token));
        assert!(!is_reply(&reply, true, IcmpMode::Raw, 7, 9, token));
    }
}
