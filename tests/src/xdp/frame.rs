//! Ethernet frames carrying one UDP or TCP message, built field by field with their own
//! checksums, and the offsets a frame built so has.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{
    CLIENT_MAC, CLIENT_PORT, CLIENT_V4, CLIENT_V6, SERVER_MAC, SERVER_V4, SERVER_V6, server_of,
};

pub const ETH_P_IPV4: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86dd;
pub const ETH_P_ARP: u16 = 0x0806;
pub const ETH_P_8021Q: u16 = 0x8100;
pub const IPPROTO_HOPOPTS: u8 = 0;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
pub const IPPROTO_FRAGMENT: u8 = 44;

/// A frame carrying one UDP (or, with `protocol`, TCP) message. Every field is public so that
/// a test states a variant as the default query with one thing changed.
#[derive(Clone, Debug)]
pub struct Frame {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    /// 802.1Q tag control information; `None` for an untagged frame.
    pub vlan: Option<u16>,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: u8,
    /// IPv4 options, a multiple of 4 bytes.
    pub ipv4_options: Vec<u8>,
    /// IPv4 flags and fragment offset, as the 16-bit header field.
    pub ipv4_frag: u16,
    /// IPv6 extension headers between the fixed header and the transport header, as
    /// (next header value naming it, its bytes); each header's own next-header byte is
    /// filled in.
    pub ipv6_ext: Vec<(u8, Vec<u8>)>,
    pub src_port: u16,
    pub dst_port: u16,
    pub payload: Vec<u8>,
    /// Zero bytes after the IP datagram: Ethernet padding or a trailer.
    pub trailer: usize,
}

impl Frame {
    /// `payload` from a client port to port 53 of `dst`, untagged.
    pub fn udp(src: IpAddr, dst: IpAddr, payload: Vec<u8>) -> Frame {
        assert_eq!(src.is_ipv4(), dst.is_ipv4(), "one address family");
        Frame {
            dst_mac: SERVER_MAC,
            src_mac: CLIENT_MAC,
            vlan: None,
            src,
            dst,
            protocol: IPPROTO_UDP,
            ipv4_options: Vec::new(),
            ipv4_frag: 0,
            ipv6_ext: Vec::new(),
            src_port: CLIENT_PORT,
            dst_port: 53,
            payload,
            trailer: 0,
        }
    }

    /// A DNS query from the default-view client of `server`'s family to `server`.
    pub fn query_to(server: IpAddr, dns: Vec<u8>) -> Frame {
        let client = match server {
            IpAddr::V4(_) => IpAddr::V4(CLIENT_V4),
            IpAddr::V6(_) => IpAddr::V6(CLIENT_V6),
        };
        Frame::udp(client, server, dns)
    }

    /// A DNS query from `client` to the test server of its family.
    pub fn query_from(client: IpAddr, dns: Vec<u8>) -> Frame {
        Frame::udp(client, server_of(client), dns)
    }

    pub fn v4(dns: Vec<u8>) -> Frame {
        Frame::query_to(IpAddr::V4(SERVER_V4), dns)
    }

    pub fn v6(dns: Vec<u8>) -> Frame {
        Frame::query_to(IpAddr::V6(SERVER_V6), dns)
    }

    pub fn bytes(&self) -> Vec<u8> {
        let segment = match self.protocol {
            IPPROTO_TCP => tcp_segment(
                self.src,
                self.dst,
                self.src_port,
                self.dst_port,
                &self.payload,
            ),
            _ => udp_datagram(
                self.src,
                self.dst,
                self.src_port,
                self.dst_port,
                &self.payload,
            ),
        };
        let (ethertype, packet) = match (self.src, self.dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                let mut ip = ipv4_header(
                    src,
                    dst,
                    self.protocol,
                    &self.ipv4_options,
                    self.ipv4_frag,
                    segment.len(),
                );
                ip.extend_from_slice(&segment);
                (ETH_P_IPV4, ip)
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                let mut exts = Vec::new();
                let mut next = self.protocol;
                for (kind, header) in self.ipv6_ext.iter().rev() {
                    let mut header = header.clone();
                    header[0] = next;
                    header.extend_from_slice(&exts);
                    exts = header;
                    next = *kind;
                }
                let mut ip = ipv6_header(src, dst, next, exts.len() + segment.len());
                ip.extend_from_slice(&exts);
                ip.extend_from_slice(&segment);
                (ETH_P_IPV6, ip)
            }
            _ => panic!("mixed address families"),
        };
        let mut frame = ethernet_header(self.dst_mac, self.src_mac, self.vlan, ethertype);
        frame.extend_from_slice(&packet);
        frame.resize(frame.len() + self.trailer, 0);
        frame
    }
}

/// Destination, source, an optional 802.1Q tag, EtherType.
pub fn ethernet_header(dst: [u8; 6], src: [u8; 6], vlan: Option<u16>, ethertype: u16) -> Vec<u8> {
    let mut h = Vec::with_capacity(18);
    h.extend_from_slice(&dst);
    h.extend_from_slice(&src);
    if let Some(tci) = vlan {
        h.extend_from_slice(&ETH_P_8021Q.to_be_bytes());
        h.extend_from_slice(&tci.to_be_bytes());
    }
    h.extend_from_slice(&ethertype.to_be_bytes());
    h
}

/// An IPv4 header (TTL 64, a fixed ID) with a valid header checksum, for `payload_len` bytes.
pub fn ipv4_header(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: u8,
    options: &[u8],
    frag: u16,
    payload_len: usize,
) -> Vec<u8> {
    assert!(
        options.len().is_multiple_of(4) && options.len() <= 40,
        "IPv4 options are whole words"
    );
    let header_len = 20 + options.len();
    let total = u16::try_from(header_len + payload_len).expect("IPv4 datagram too long");
    let mut h = vec![0x40 | (header_len / 4) as u8, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&0x1234u16.to_be_bytes());
    h.extend_from_slice(&frag.to_be_bytes());
    h.extend_from_slice(&[64, protocol, 0, 0]);
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    h.extend_from_slice(options);
    let check = internet_checksum(&h);
    h[10..12].copy_from_slice(&check.to_be_bytes());
    h
}

/// An IPv6 header (hop limit 64, a non-zero flow label) for `payload_len` bytes.
pub fn ipv6_header(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, payload_len: usize) -> Vec<u8> {
    let payload_len = u16::try_from(payload_len).expect("IPv6 payload too long");
    let mut h = vec![0x60, 0x01, 0x23, 0x45];
    h.extend_from_slice(&payload_len.to_be_bytes());
    h.extend_from_slice(&[next_header, 64]);
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    h
}

/// An 8-byte hop-by-hop options header holding only padding (its next-header byte is set by
/// [`Frame::bytes`]).
pub fn hop_by_hop_padding() -> (u8, Vec<u8>) {
    (IPPROTO_HOPOPTS, vec![0, 0, 1, 4, 0, 0, 0, 0])
}

/// A fragment header for the first fragment, more to come.
pub fn ipv6_first_fragment() -> (u8, Vec<u8>) {
    (IPPROTO_FRAGMENT, vec![0, 0, 0x00, 0x01, 0, 0, 0x12, 0x34])
}

/// A UDP header and `payload`, with the checksum over the pseudo-header.
pub fn udp_datagram(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let len = u16::try_from(8 + payload.len()).expect("UDP datagram too long");
    let mut d = Vec::with_capacity(len as usize);
    d.extend_from_slice(&sport.to_be_bytes());
    d.extend_from_slice(&dport.to_be_bytes());
    d.extend_from_slice(&len.to_be_bytes());
    d.extend_from_slice(&[0, 0]);
    d.extend_from_slice(payload);
    let check = transport_checksum(src, dst, IPPROTO_UDP, &d);
    // Zero would mean "no checksum" (and is invalid over IPv6).
    let check = if check == 0 { 0xffff } else { check };
    d[6..8].copy_from_slice(&check.to_be_bytes());
    d
}

/// A TCP segment (PSH+ACK, no options) carrying `message` with DNS's TCP length prefix.
pub fn tcp_segment(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, message: &[u8]) -> Vec<u8> {
    let mut s = Vec::new();
    s.extend_from_slice(&sport.to_be_bytes());
    s.extend_from_slice(&dport.to_be_bytes());
    s.extend_from_slice(&1u32.to_be_bytes()); // sequence
    s.extend_from_slice(&1u32.to_be_bytes()); // acknowledgment
    s.extend_from_slice(&[5 << 4, 0x18]); // data offset 5 words; PSH, ACK
    s.extend_from_slice(&64240u16.to_be_bytes());
    s.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
    s.extend_from_slice(&(message.len() as u16).to_be_bytes());
    s.extend_from_slice(message);
    let check = transport_checksum(src, dst, IPPROTO_TCP, &s);
    s[16..18].copy_from_slice(&check.to_be_bytes());
    s
}

/// An ARP request from the client for the server's IPv4 address.
pub fn arp_request() -> Vec<u8> {
    let mut f = ethernet_header([0xff; 6], CLIENT_MAC, None, ETH_P_ARP);
    f.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, 1]); // Ethernet/IPv4, request
    f.extend_from_slice(&CLIENT_MAC);
    f.extend_from_slice(&CLIENT_V4.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&SERVER_V4.octets());
    f
}

/// The UDP/TCP checksum of `segment` (its checksum field zero) under the pseudo-header.
pub fn transport_checksum(src: IpAddr, dst: IpAddr, protocol: u8, segment: &[u8]) -> u16 {
    let mut data = Vec::with_capacity(40 + segment.len());
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            data.extend_from_slice(&s.octets());
            data.extend_from_slice(&d.octets());
            data.extend_from_slice(&[0, protocol]);
            data.extend_from_slice(&(segment.len() as u16).to_be_bytes());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            data.extend_from_slice(&s.octets());
            data.extend_from_slice(&d.octets());
            data.extend_from_slice(&(segment.len() as u32).to_be_bytes());
            data.extend_from_slice(&[0, 0, 0, protocol]);
        }
        _ => panic!("mixed address families"),
    }
    data.extend_from_slice(segment);
    internet_checksum(&data)
}

/// RFC 1071: the complement of the ones' complement sum of big-endian 16-bit words; an odd
/// last byte is padded with zero.
pub fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u64 = bytes
        .chunks(2)
        .map(|w| u64::from(w[0]) << 8 | u64::from(w.get(1).copied().unwrap_or(0)))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Offset of the UDP header of a frame built by `Frame` (untagged or one tag, no IPv4
/// options, no IPv6 extension headers), if it is UDP.
pub fn udp_offset(frame: &[u8]) -> Option<usize> {
    let mut l3 = 14;
    let mut ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    if ethertype == ETH_P_8021Q {
        ethertype = u16::from_be_bytes([*frame.get(16)?, *frame.get(17)?]);
        l3 = 18;
    }
    match ethertype {
        0x0800 if frame.get(l3)? & 0x0f == 5 && *frame.get(l3 + 9)? == IPPROTO_UDP => Some(l3 + 20),
        0x86dd if *frame.get(l3 + 6)? == IPPROTO_UDP => Some(l3 + 40),
        _ => None,
    }
    .filter(|&l4| l4 + 8 <= frame.len())
}
