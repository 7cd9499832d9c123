//! Spoofed packets: a raw IPv4 socket (in whatever namespace the calling thread is) sending
//! UDP queries (the flood tests) or ICMP errors (the prober's tests) to a server from any
//! source address the caller picks.

use std::net::Ipv4Addr;

/// A DNS query for `www.example.com` A with id `id`, no EDNS.
pub fn www_query(id: u16) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    m.extend_from_slice(&[0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    m.extend_from_slice(b"\x03www\x07example\x03com\x00\x00\x01\x00\x01");
    m
}

/// A raw IPv4 socket that sends datagrams with the headers it builds.
pub struct SpoofSender {
    fd: i32,
    server: Ipv4Addr,
}

impl SpoofSender {
    /// A sender to `server` (queries to its port 53; needs CAP_NET_RAW).
    pub fn new(server: Ipv4Addr) -> SpoofSender {
        // SAFETY: a plain socket call; the fd is owned by the returned value.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
        assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
        SpoofSender { fd, server }
    }

    /// Sends `payload` over UDP from `src`:`sport` to the server's port 53 (UDP checksum 0,
    /// none, valid for IPv4; the kernel fills the IP checksum). A full queue (ENOBUFS) drops
    /// it, as a real link would.
    pub fn send(&self, src: Ipv4Addr, sport: u16, payload: &[u8]) {
        let mut udp = Vec::with_capacity(8 + payload.len());
        udp.extend_from_slice(&sport.to_be_bytes());
        udp.extend_from_slice(&53u16.to_be_bytes());
        udp.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        udp.extend_from_slice(&[0, 0]);
        udp.extend_from_slice(payload);
        self.send_ip(src, 17, &udp);
    }

    /// Sends an ICMP destination unreachable with `code` from `src` to the server about
    /// `original`, an IPv4 packet the server sent (its header and first 8 bytes of payload
    /// are quoted, as routers do): the server's kernel hands the error to the socket that sent
    /// `original`, whoever `src` is. `src` one of the server's own addresses is what a local
    /// firewall's REJECT makes; the destination's or a router's, what the network answers.
    pub fn send_unreachable(&self, src: Ipv4Addr, code: u8, original: &[u8]) {
        let quoted = usize::from(original[0] & 0x0f) * 4 + 8;
        let mut icmp = vec![3, code, 0, 0, 0, 0, 0, 0];
        icmp.extend_from_slice(&original[..quoted.min(original.len())]);
        let sum = checksum(&icmp);
        icmp[2..4].copy_from_slice(&sum.to_be_bytes());
        self.send_ip(src, 1, &icmp);
    }

    /// Sends `l4` as the payload of protocol `proto` from `src` to the server (the kernel
    /// fills the IP checksum).
    fn send_ip(&self, src: Ipv4Addr, proto: u8, l4: &[u8]) {
        let total = 20 + l4.len();
        let mut p = Vec::with_capacity(total);
        p.extend_from_slice(&[0x45, 0]);
        p.extend_from_slice(&(total as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0, 0x40, 0, 64, proto, 0, 0]);
        p.extend_from_slice(&src.octets());
        p.extend_from_slice(&self.server.octets());
        p.extend_from_slice(l4);
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from(self.server).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: `p` and `addr` outlive the call; the lengths are theirs.
        let rc = unsafe {
            libc::sendto(
                self.fd,
                p.as_ptr().cast(),
                p.len(),
                0,
                (&raw const addr).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            let error = std::io::Error::last_os_error();
            assert_eq!(error.raw_os_error(), Some(libc::ENOBUFS), "sendto: {error}");
        }
    }

    /// Sends one query from each of `count` distinct sources in 10.0.0.0/8 starting at
    /// `first`, in bursts of `burst` every 100 ms (`burst` × 10 a second), and `claims`
    /// after each burst; until `count` are sent or `stop` returns true. Returns how many
    /// distinct sources were sent.
    pub fn flood(
        &self,
        first: u32,
        count: u32,
        burst: u32,
        claims: &[Ipv4Addr],
        stop: impl Fn() -> bool,
    ) -> u32 {
        let payload = www_query(0x5353);
        let mut sent = 0;
        while sent < count && !stop() {
            let started = std::time::Instant::now();
            for _ in 0..burst.min(count - sent) {
                let n = first.wrapping_add(sent);
                self.send(
                    Ipv4Addr::from(0x0a00_0000 + (n & 0x00ff_ffff)),
                    1024 + (n % 60000) as u16,
                    &payload,
                );
                sent += 1;
            }
            for &c in claims {
                self.send(c, 4000, &payload);
            }
            if let Some(rest) = std::time::Duration::from_millis(100).checked_sub(started.elapsed())
            {
                std::thread::sleep(rest);
            }
        }
        sent
    }
}

/// The Internet checksum (RFC 1071) of `data`.
fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Drop for SpoofSender {
    fn drop(&mut self) {
        // SAFETY: our fd, closed once.
        unsafe { libc::close(self.fd) };
    }
}
