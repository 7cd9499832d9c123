//! Who sent the ICMP error a connected datagram socket reports. Without `IP_RECVERR` the kernel
//! gives such a socket only the errno of a "hard" ICMP error, never where it came from, so an
//! error this host made itself (a local firewall's REJECT, answered at once) cannot be told from
//! the network's answer. With it (set by [`report_errors`]), every ICMP error about the
//! socket's packets is queued with its type, code and sender ("offender"), read by [`take`].
//!
//! Used by the echo requests ([`super::icmp::echo`]) and the RTT prober's DNS probe.

use std::{
    io,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    os::fd::{AsRawFd, BorrowedFd},
};

/// An error queued on a socket by [`report_errors`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queued {
    /// An ICMP (ICMPv6) error sent by `from`. `hard` as the kernel judges it: a soft one (a
    /// router's "no route" or "host unreachable", a TTL exceeded) is reported to a connected
    /// socket only because of `IP_RECVERR`, and is no answer of the destination.
    Icmp { from: Option<IpAddr>, hard: bool },
    /// An error of the local stack, or of an origin other than ICMP.
    Local,
}

impl Queued {
    /// The host that sent an ICMP error.
    pub(crate) fn from(self) -> Option<IpAddr> {
        match self {
            Queued::Icmp { from, .. } => from,
            Queued::Local => None,
        }
    }
}

/// Asks the kernel to queue every error about `socket`'s packets with its sender
/// (`IP_RECVERR`, `IPV6_RECVERR`).
pub(crate) fn report_errors(socket: BorrowedFd<'_>, ipv6: bool) -> io::Result<()> {
    let (level, name) = if ipv6 {
        (libc::SOL_IPV6, libc::IPV6_RECVERR)
    } else {
        (libc::SOL_IP, libc::IP_RECVERR)
    };
    let on: libc::c_int = 1;
    // SAFETY: a valid fd, and an int option of the int's size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&raw const on).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The oldest error queued on `socket`, without waiting; `None` when there is none (or it
/// cannot be read). Reading it takes it off the queue, and the socket's pending error becomes
/// the next one's.
pub(crate) fn take(socket: BorrowedFd<'_>) -> Option<Queued> {
    // The quoted packet is not wanted (a longer one is cut); the control message is.
    let mut data = [0u8; 64];
    // u64s: aligned for `cmsghdr`.
    let mut control = [0u64; 32];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // SAFETY: an all-zero msghdr is a valid empty one.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of_val(&control) as _;
    // SAFETY: `msg` points at buffers that outlive the call, with their lengths.
    let n = unsafe {
        libc::recvmsg(
            socket.as_raw_fd(),
            &raw mut msg,
            libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return None;
    }
    // SAFETY: `msg` as recvmsg filled it; the CMSG_ macros stay within its control buffer.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&raw const msg) };
    while !cmsg.is_null() {
        // SAFETY: a non-null header within the control buffer.
        let header = unsafe { &*cmsg };
        let recverr = (header.cmsg_level == libc::SOL_IP && header.cmsg_type == libc::IP_RECVERR)
            || (header.cmsg_level == libc::SOL_IPV6 && header.cmsg_type == libc::IPV6_RECVERR);
        // SAFETY: pure arithmetic.
        let len = (header.cmsg_len as usize).saturating_sub(unsafe { libc::CMSG_LEN(0) } as usize);
        if recverr {
            // SAFETY: the message's data, `len` bytes within the control buffer.
            let bytes = unsafe { std::slice::from_raw_parts(libc::CMSG_DATA(cmsg), len) };
            return Some(parse(bytes));
        }
        // SAFETY: as CMSG_FIRSTHDR.
        cmsg = unsafe { libc::CMSG_NXTHDR(&raw const msg, cmsg) };
    }
    None
}

/// `struct sock_extended_err` and the offender's address after it (`SO_EE_OFFENDER`).
fn parse(bytes: &[u8]) -> Queued {
    const EE: usize = size_of::<libc::sock_extended_err>();
    let (Some(&origin), Some(&kind), Some(&code)) = (bytes.get(4), bytes.get(5), bytes.get(6))
    else {
        return Queued::Local;
    };
    let ipv6 = match origin {
        libc::SO_EE_ORIGIN_ICMP => false,
        libc::SO_EE_ORIGIN_ICMP6 => true,
        _ => return Queued::Local,
    };
    let offender = bytes.get(EE..).unwrap_or_default();
    let family = offender
        .get(..2)
        .map(|f| libc::sa_family_t::from_ne_bytes([f[0], f[1]]));
    let from = match family.map(libc::c_int::from) {
        // sockaddr_in: family, port, address.
        Some(libc::AF_INET) => offender
            .get(4..8)
            .map(|a| IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))),
        // sockaddr_in6: family, port, flow information, address.
        Some(libc::AF_INET6) => offender
            .get(8..24)
            .and_then(|a| <[u8; 16]>::try_from(a).ok())
            .map(|a| IpAddr::V6(Ipv6Addr::from(a))),
        _ => None,
    };
    Queued::Icmp {
        from,
        hard: hard(ipv6, kind, code),
    }
}

/// Whether the kernel reports an ICMP error of this type and code to a connected socket that
/// did not ask for every error: Linux's `icmp_err_convert` and `icmpv6_err_convert` "fatal"
/// flags (a datagram too big counts as hard, as with path MTU discovery on, the default).
fn hard(ipv6: bool, kind: u8, code: u8) -> bool {
    if ipv6 {
        match kind {
            // Destination unreachable: all but no route (0), beyond scope (2), address
            // unreachable (3).
            1 => !matches!(code, 0 | 2 | 3),
            // Packet too big, parameter problem.
            2 | 4 => true,
            // Time exceeded, and the rest.
            _ => false,
        }
    } else {
        match kind {
            // Destination unreachable: protocol (2), port (3), fragmentation needed (4), network
            // or host unknown (6, 7), isolated (8), administratively prohibited (9, 10, 13),
            // precedence (14, 15); not network or host unreachable (0, 1, 11, 12) nor source
            // route failed (5).
            3 => matches!(code, 2..=4 | 6..=10 | 13..=15),
            // Parameter problem.
            12 => true,
            // Time exceeded, and the rest.
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A control message's data as the kernel writes it.
    fn message(origin: u8, kind: u8, code: u8, offender: Option<IpAddr>) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&(libc::EHOSTUNREACH as u32).to_ne_bytes());
        bytes.extend_from_slice(&[origin, kind, code, 0]);
        bytes.extend_from_slice(&[0; 8]);
        match offender {
            Some(IpAddr::V4(a)) => {
                bytes.extend_from_slice(&(libc::AF_INET as libc::sa_family_t).to_ne_bytes());
                bytes.extend_from_slice(&[0, 0]);
                bytes.extend_from_slice(&a.octets());
                bytes.extend_from_slice(&[0; 8]);
            }
            Some(IpAddr::V6(a)) => {
                bytes.extend_from_slice(&(libc::AF_INET6 as libc::sa_family_t).to_ne_bytes());
                bytes.extend_from_slice(&[0; 6]);
                bytes.extend_from_slice(&a.octets());
                bytes.extend_from_slice(&[0; 4]);
            }
            None => bytes.extend_from_slice(&[0; 16]),
        }
        bytes
    }

    #[test]
    fn queued_errors_are_read_with_their_sender_and_weight() {
        let v4: IpAddr = "192.0.2.1".parse().unwrap();
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        let (icmp, icmp6) = (libc::SO_EE_ORIGIN_ICMP, libc::SO_EE_ORIGIN_ICMP6);
        let table = [
            (
                message(icmp, 3, 3, Some(v4)),
                Queued::Icmp {
                    from: Some(v4),
                    hard: true,
                },
            ),
            (
                message(icmp, 3, 13, Some(v4)),
                Queued::Icmp {
                    from: Some(v4),
                    hard: true,
                },
            ),
            (
                message(icmp, 3, 1, Some(v4)),
                Queued::Icmp {
                    from: Some(v4),
                    hard: false,
                },
            ),
            (
                message(icmp, 11, 0, Some(v4)),
                Queued::Icmp {
                    from: Some(v4),
                    hard: false,
                },
            ),
            (
                message(icmp6, 1, 1, Some(v6)),
                Queued::Icmp {
                    from: Some(v6),
                    hard: true,
                },
            ),
            (
                message(icmp6, 1, 4, Some(v6)),
                Queued::Icmp {
                    from: Some(v6),
                    hard: true,
                },
            ),
            (
                message(icmp6, 1, 3, Some(v6)),
                Queued::Icmp {
                    from: Some(v6),
                    hard: false,
                },
            ),
            (
                message(icmp6, 3, 0, Some(v6)),
                Queued::Icmp {
                    from: Some(v6),
                    hard: false,
                },
            ),
            (
                message(icmp, 3, 3, None),
                Queued::Icmp {
                    from: None,
                    hard: true,
                },
            ),
            (message(libc::SO_EE_ORIGIN_LOCAL, 0, 0, None), Queued::Local),
            (vec![0; 3], Queued::Local),
        ];
        for (bytes, want) in table {
            assert_eq!(parse(&bytes), want, "{bytes:?}");
        }
    }
}
