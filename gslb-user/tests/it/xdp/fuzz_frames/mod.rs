//! Seeded random frames for the fast path's differential fuzzing (`xdp_fuzz.rs`): DNS queries
//! built from a configuration's names and clients, then varied at every layer (Ethernet and
//! VLAN, IPv4/IPv6 headers, UDP, the DNS header, the name's labels and pointers, OPT and its
//! options, ECS) and, for some, mutated byte by byte with or without the lengths and checksums
//! fixed up afterwards. The same seed gives the same frames.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::common::{
    Frame, IPPROTO_TCP, IPPROTO_UDP, cookie_made, hop_by_hop_padding, internet_checksum,
    ipv6_first_fragment, transport_checksum, udp_offset, unix_now,
};

/// splitmix64: small, seedable, good enough to spread test cases.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (n > 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability 1/n.
    pub(crate) fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub(crate) fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

/// What the frames are made of: the names we serve (and their neighbours), the servers and
/// the clients (of every view, and martians).
pub(crate) struct Population {
    pub names: Vec<String>,
    pub servers: Vec<IpAddr>,
    pub clients: Vec<IpAddr>,
    /// The configuration's `server.cookie_secret`: most cookies with a server part are then
    /// ones it made for the frame's client (see [`mint_cookie`]).
    pub cookie_secret: Option<&'static str>,
}

pub(crate) struct Generator {
    pub rng: Rng,
    pop: Population,
}

const QTYPES: [u16; 12] = [1, 28, 1, 28, 1, 28, 16, 255, 2, 6, 5, 0];

impl Generator {
    pub(crate) fn new(seed: u64, pop: Population) -> Generator {
        Generator {
            rng: Rng::new(seed),
            pop,
        }
    }

    /// The next frame: half of them a query the fast path may answer (any served or unserved
    /// name in any case, A or AAAA, with or without OPT, cookies, padding, DO, VLAN, padding
    /// after the datagram, any client), the other half hostile at one or more layers.
    pub(crate) fn frame(&mut self) -> Vec<u8> {
        let r = &mut self.rng;
        let hostile = r.one_in(2);
        let dns = dns_message(r, &self.pop.names, hostile);
        let v6 = r.one_in(2);
        let family = |a: &&IpAddr| a.is_ipv6() == v6;
        let servers: Vec<IpAddr> = self.pop.servers.iter().filter(family).copied().collect();
        // Martian clients only in hostile frames.
        let martian = |a: &IpAddr| match a {
            IpAddr::V4(a) => gslb_common::martian_v4(a.octets()),
            IpAddr::V6(a) => gslb_common::martian_v6(a.octets()),
        };
        let clients: Vec<IpAddr> = self
            .pop
            .clients
            .iter()
            .filter(family)
            .filter(|a| hostile || !martian(a))
            .copied()
            .collect();
        let mut dst = *r.pick(&servers);
        let mut src = *r.pick(&clients);
        if hostile && r.one_in(10) {
            src = random_addr(r, v6);
        }
        if hostile && r.one_in(20) {
            dst = random_addr(r, v6);
        }
        if hostile && v6 && r.one_in(20) {
            // IPv4-mapped on an IPv6 wire: the kernel drops these.
            let mapped = |a: Ipv4Addr| IpAddr::V6(a.to_ipv6_mapped());
            match r.below(2) {
                0 => src = mapped(Ipv4Addr::new(198, 51, 100, 7)),
                _ => dst = mapped(Ipv4Addr::new(192, 0, 2, 53)),
            }
        }
        let mut dns = dns;
        if let Some(secret) = self.pop.cookie_secret
            && r.below(4) != 0
        {
            mint_cookie(r, &mut dns, secret, src);
        }
        let mut f = Frame::udp(src, dst, dns);
        f.src_port = match r.below(if hostile { 20 } else { 1 }) {
            1 => 0,
            2 => 53,
            3 => r.next() as u16,
            _ => 40_000 + r.below(1000) as u16,
        };
        if hostile && r.one_in(7) {
            f.dst_port = *r.pick(&[5353, 853, 0, 54]);
        }
        if r.one_in(8) {
            f.vlan = Some(r.next() as u16);
        }
        if hostile && r.one_in(7) {
            f.dst_mac = *r.pick(&[
                [0xff; 6],
                [0x01, 0x00, 0x5e, 0, 0, 0xfb],
                [0x33, 0x33, 0, 0, 0, 1],
                [0x02, 0, 0, 0, 0, 0x99],
            ]);
        }
        if hostile && r.one_in(10) {
            f.src_mac = [0x01, 0x00, 0x5e, 0, 0, 1];
        }
        if hostile && r.one_in(10) {
            f.protocol = IPPROTO_TCP;
        }
        if hostile && !v6 && r.one_in(10) {
            f.ipv4_options = vec![1, 1, 1, 0];
        }
        if hostile && !v6 && r.one_in(10) {
            f.ipv4_frag = *r.pick(&[0x2000, 0x4000, 185, 0x4000 | 1]);
        }
        if hostile && v6 && r.one_in(10) {
            f.ipv6_ext = vec![if r.one_in(2) {
                hop_by_hop_padding()
            } else {
                ipv6_first_fragment()
            }];
        }
        if r.one_in(10) {
            f.trailer = r.below(8);
        }
        let mut bytes = f.bytes();
        if hostile && r.one_in(20) {
            // IPv6 without a UDP checksum.
            if let Some(l4) = udp_offset(&bytes) {
                bytes[l4 + 6] = 0;
                bytes[l4 + 7] = 0;
            }
        }
        if hostile && r.one_in(2) {
            mutate(r, &mut bytes);
        }
        bytes
    }
}

/// Makes the first COOKIE option with a server part in `dns` (found by its code and length)
/// one that `secret` made for `src`: fresh (echoed), older than half an hour (renewed), or
/// past its hour or too far ahead (not ours), never within a minute of a boundary, so that
/// the program's clock and the responder's agree on which it is.
fn mint_cookie(r: &mut Rng, dns: &mut [u8], secret: &str, src: IpAddr) {
    let Some(at) = dns.windows(4).skip(12).position(|w| w == [0, 10, 0, 24]) else {
        return;
    };
    let at = at + 12 + 4;
    if at + 24 > dns.len() {
        return;
    }
    let now = i64::from(unix_now());
    let stamp = match r.below(8) {
        0..=4 => now - r.below(1740) as i64,
        5 => now + r.below(240) as i64,
        6 => now - 1860 - r.below(1680) as i64,
        _ => now + 360 + r.below(1000) as i64,
    };
    let client: [u8; 8] = dns[at..at + 8].try_into().unwrap();
    dns[at..at + 24].copy_from_slice(&cookie_made(secret, client, src, stamp as u32));
}

fn random_addr(r: &mut Rng, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(
            (u128::from(r.next()) << 64) | u128::from(r.next()),
        ))
    } else {
        IpAddr::V4(Ipv4Addr::from(r.next() as u32))
    }
}

/// The name as wire labels, in random case (0x20), or a neighbour, or something broken.
fn qname(r: &mut Rng, names: &[String], hostile: bool) -> Vec<u8> {
    let base = r.pick(names).clone();
    let text = match r.below(12) {
        0 => format!("x.{base}"),
        1 => base
            .split_once('.')
            .map_or(base.clone(), |(_, p)| p.to_owned()),
        2 => "nope.example.com".to_owned(),
        3 => ".".to_owned(),
        _ => base,
    };
    let mut wire = Vec::new();
    for label in text.split('.').filter(|l| !l.is_empty()) {
        wire.push(label.len() as u8);
        for c in label.bytes() {
            wire.push(if r.one_in(3) {
                c.to_ascii_uppercase()
            } else {
                c
            });
        }
    }
    wire.push(0);
    match if hostile { r.below(8) } else { 99 } {
        // A pointer instead of the last label or the whole name.
        0 => {
            let at = if r.one_in(2) { 0 } else { 1 + wire[0] as usize };
            let at = at.min(wire.len() - 1);
            wire.truncate(at);
            wire.extend_from_slice(&[0xc0, 12]);
        }
        // A reserved label type (0x40, 0x80) or an overlong label.
        1 => {
            let at = 1 + wire[0] as usize;
            if at < wire.len() {
                wire[at] = *r.pick(&[0x40, 0x80, 0x41, 63, 64, 0xff]);
            }
        }
        // A label length that runs past the name.
        2 => wire[0] = wire[0].saturating_add(1 + r.below(4) as u8),
        // A NUL inside a label.
        3 if wire.len() > 2 => wire[1] = 0,
        // Longer than the fast path keys (128 wire bytes) or right at it.
        4 => {
            wire.pop();
            while wire.len() < 120 + r.below(20) {
                wire.extend_from_slice(&[7, b'a', b'b', b'c', b'd', b'e', b'f', b'g']);
            }
            wire.push(0);
        }
        _ => {}
    }
    wire
}

/// Addresses valid ECS subnets are cut from: in view v1, in no view, of both families, and
/// IPv4-mapped (the responder's IPv4 client, passed by the fast path).
const SUBNET_ADDRS: [&str; 8] = [
    "198.51.100.7",
    "198.51.100.200",
    "203.0.113.9",
    "10.1.2.3",
    "2001:db8:1::7",
    "2001:db8:1:ff::1",
    "2001:db8:2::7",
    "::ffff:198.51.100.7",
];

/// A valid ECS option's data: one of [`SUBNET_ADDRS`] cut to a random source prefix, the
/// address bytes the prefix needs.
fn valid_subnet(r: &mut Rng) -> Vec<u8> {
    let addr: IpAddr = r.pick(&SUBNET_ADDRS).parse().expect("subnet address");
    let (family, bits, octets): (u16, usize, Vec<u8>) = match addr {
        IpAddr::V4(a) => (1, 32, a.octets().to_vec()),
        IpAddr::V6(a) => (2, 128, a.octets().to_vec()),
    };
    // Mostly the prefixes resolvers send, sometimes any.
    let source = match r.below(4) {
        0 => r.below(bits + 1),
        _ => *r.pick(&if bits == 32 { [24, 32, 0] } else { [56, 48, 0] }),
    };
    let mut data = family.to_be_bytes().to_vec();
    data.extend_from_slice(&[source as u8, 0]);
    let bytes = source.div_ceil(8);
    for (i, b) in octets[..bytes].iter().enumerate() {
        let keep = (source - 8 * i).min(8);
        data.push(b & (0xffu16 << (8 - keep)) as u8);
    }
    data
}

/// An EDNS option: a cookie, padding or a valid ECS (answered), an NSID request (answered with
/// the node's identity), or, in a hostile message, invalid ECS variants and unknown codes.
fn option(r: &mut Rng, hostile: bool) -> Vec<u8> {
    let (code, data): (u16, Vec<u8>) = match r.below(if hostile { 11 } else { 6 }) {
        0 | 1 => (10, (0..8).map(|_| r.byte()).collect()),
        2 => (10, (0..24).map(|_| r.byte()).collect()),
        3 if r.one_in(2) => (3, Vec::new()),
        3 => (12, vec![0; r.below(40)]),
        4 | 5 => (8, valid_subnet(r)),
        // ECS: IPv4 /24, IPv6 /56, with surplus address bytes, family 3, scope set.
        6 => (8, vec![0, 1, 24, 0, 198, 51, 100]),
        7 => (8, vec![0, 2, 56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 1, 0]),
        8 => (8, vec![0, 1, 8, 0, 198, 51, 100, 7]),
        9 => (8, vec![0, 3, 0, 0]),
        _ => (r.next() as u16, (0..r.below(6)).map(|_| r.byte()).collect()),
    };
    let mut o = code.to_be_bytes().to_vec();
    o.extend_from_slice(&(data.len() as u16).to_be_bytes());
    o.extend_from_slice(&data);
    o
}

fn dns_message(r: &mut Rng, names: &[String], hostile: bool) -> Vec<u8> {
    // Rare variations of a hostile message, absent from a plain one.
    let odd = |r: &mut Rng, n: usize| hostile && r.one_in(n / 3);
    let mut m = Vec::new();
    m.extend_from_slice(&(r.next() as u16).to_be_bytes());
    let mut flags: u16 = if r.one_in(2) { 0x0100 } else { 0 };
    if odd(r, 12) {
        // One or two random bits: QR, OPCODE, AA, TC, RA, Z, AD, CD, RCODE.
        for _ in 0..=r.below(2) {
            flags ^= 1 << r.below(16);
        }
    }
    m.extend_from_slice(&flags.to_be_bytes());
    let edns = r.below(3) != 0;
    let mut counts = [1u16, 0, 0, u16::from(edns)];
    if odd(r, 30) {
        counts[r.below(4)] = r.below(3) as u16;
    }
    let extra_additional = !edns && counts[3] > 0 || counts[3] > 1;
    for c in counts {
        m.extend_from_slice(&c.to_be_bytes());
    }
    m.extend_from_slice(&qname(r, names, hostile));
    let qtype = if odd(r, 30) {
        r.next() as u16
    } else if hostile {
        *r.pick(&QTYPES)
    } else {
        *r.pick(&[1, 28])
    };
    m.extend_from_slice(&qtype.to_be_bytes());
    let qclass: u16 = match if hostile { r.below(30) } else { 99 } {
        0 => 3,
        1 => 255,
        2 => 254,
        _ => 1,
    };
    m.extend_from_slice(&qclass.to_be_bytes());
    if counts[1] > 0 || counts[2] > 0 || extra_additional {
        // Some record: an A for the question name (by pointer).
        m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
    }
    if edns {
        let mut opt = vec![u8::from(odd(r, 30))];
        if opt[0] == 1 {
            opt.extend_from_slice(b"x\0");
        }
        opt.extend_from_slice(&41u16.to_be_bytes());
        let size: u16 = *r.pick(&[1232, 4096, 512, 0, 65535, 1400]);
        opt.extend_from_slice(&size.to_be_bytes());
        opt.push(u8::from(odd(r, 30))); // extended RCODE
        opt.push(u8::from(odd(r, 15))); // version
        opt.push(if r.one_in(2) { 0x80 } else { 0 } | u8::from(odd(r, 30)));
        opt.push(if odd(r, 30) { r.byte() } else { 0 });
        let mut options = Vec::new();
        for _ in 0..r.below(4) {
            options.extend_from_slice(&option(r, hostile));
        }
        let mut rdlen = options.len() as u16;
        if odd(r, 30) {
            rdlen = rdlen.wrapping_add(*r.pick(&[1, 0xffff, 4]));
        }
        opt.extend_from_slice(&rdlen.to_be_bytes());
        opt.extend_from_slice(&options);
        m.extend_from_slice(&opt);
    }
    if odd(r, 40) {
        m.extend_from_slice(&[0; 3][..=r.below(3)]);
    }
    m
}

/// Byte-level mutations: flips, interesting values, cuts and insertions, anywhere or in the
/// DNS message; then, most of the time, the IP and UDP lengths and checksums are made to fit
/// again, so that the mutation reaches the DNS parse instead of failing the length checks.
fn mutate(r: &mut Rng, frame: &mut Vec<u8>) {
    let l4 = udp_offset(frame);
    let dns = l4.map_or(0, |l4| l4 + 8);
    for _ in 0..=r.below(3) {
        if frame.is_empty() {
            return;
        }
        let lo = if dns > 0 && dns < frame.len() && r.below(3) != 0 {
            dns
        } else {
            0
        };
        let at = lo + r.below(frame.len() - lo);
        match r.below(6) {
            0 => frame[at] ^= 1 << r.below(8),
            1 => frame[at] = *r.pick(&[0, 1, 0x3f, 0x40, 0x7f, 0x80, 0xc0, 0xff]),
            2 => frame[at] = r.byte(),
            // Never below an Ethernet header: test_run refuses those (and no NIC delivers one).
            3 => frame.truncate(at.max(14)),
            4 => frame.insert(at, r.byte()),
            _ => {
                let from = r.below(frame.len());
                frame[at] = frame[from];
            }
        }
    }
    if let Some(l4) = l4
        && r.below(4) != 0
    {
        fix_up(frame, l4);
    }
}

/// Rewrites the IP and UDP lengths for the frame's end and recomputes the checksums.
fn fix_up(frame: &mut [u8], l4: usize) {
    if frame.len() < l4 + 8 {
        return;
    }
    let udp_len = frame.len() - l4;
    let v6 = l4 >= 40 && frame[l4 - 40] >> 4 == 6 && frame[l4 - 34] == IPPROTO_UDP;
    let (src, dst) = if v6 {
        frame[l4 - 36..l4 - 34].copy_from_slice(&(udp_len as u16).to_be_bytes());
        let a = |o: usize| -> IpAddr {
            IpAddr::V6(Ipv6Addr::from(
                <[u8; 16]>::try_from(&frame[l4 - 40 + o..l4 - 40 + o + 16]).unwrap(),
            ))
        };
        (a(8), a(24))
    } else {
        let ip = l4 - 20;
        frame[ip + 2..ip + 4].copy_from_slice(&((udp_len + 20) as u16).to_be_bytes());
        frame[ip + 10..ip + 12].fill(0);
        let check = internet_checksum(&frame[ip..ip + 20]);
        frame[ip + 10..ip + 12].copy_from_slice(&check.to_be_bytes());
        let a = |o: usize| -> IpAddr {
            IpAddr::V4(Ipv4Addr::from(
                <[u8; 4]>::try_from(&frame[ip + o..ip + o + 4]).unwrap(),
            ))
        };
        (a(12), a(16))
    };
    frame[l4 + 4..l4 + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    frame[l4 + 6..l4 + 8].fill(0);
    let check = transport_checksum(src, dst, IPPROTO_UDP, &frame[l4..]);
    let check = if check == 0 { 0xffff } else { check };
    frame[l4 + 6..l4 + 8].copy_from_slice(&check.to_be_bytes());
}
