//! The differential check of the fast path: a reply the XDP program sent (XDP_TX) must be
//! the responder's answer to the same query bytes from the same client, in a valid envelope.

use std::{
    collections::BTreeSet,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
};

use hickory_proto::op::Message;

use super::frame::{IPPROTO_UDP, internet_checksum, transport_checksum, udp_offset};

/// The parts of a frame built as `Frame` builds them (the program only answers such frames).
pub struct Parsed<'a> {
    pub dst_mac: &'a [u8],
    pub src_mac: &'a [u8],
    pub vlan: Option<&'a [u8]>,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub ttl: u8,
    pub sport: u16,
    pub dport: u16,
    /// The UDP header and payload, by the UDP length.
    pub segment: &'a [u8],
    /// Bytes after the datagram.
    pub trailer: usize,
}

pub fn parse(frame: &[u8]) -> Result<Parsed<'_>, String> {
    let l4 = udp_offset(frame).ok_or("not plain UDP")?;
    let vlan = (l4 == 18 + 20 || l4 == 18 + 40).then(|| &frame[12..16]);
    let l3 = if vlan.is_some() { 18 } else { 14 };
    let (src, dst, ttl, ip_payload) = if l4 - l3 == 20 {
        let h = &frame[l3..l4];
        if internet_checksum(h) != 0 {
            return Err("IPv4 header checksum".into());
        }
        let a = |o: usize| IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(&h[o..o + 4]).unwrap()));
        let total = u16::from_be_bytes([h[2], h[3]]) as usize;
        (
            a(12),
            a(16),
            h[8],
            total.checked_sub(20).ok_or("IPv4 length")?,
        )
    } else {
        let h = &frame[l3..l4];
        let a = |o: usize| IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&h[o..o + 16]).unwrap()));
        (a(8), a(24), h[7], u16::from_be_bytes([h[4], h[5]]) as usize)
    };
    let udp_len = u16::from_be_bytes([frame[l4 + 4], frame[l4 + 5]]) as usize;
    if udp_len != ip_payload || udp_len < 8 || l4 + udp_len > frame.len() {
        return Err(format!("lengths: UDP {udp_len}, IP payload {ip_payload}"));
    }
    let segment = &frame[l4..l4 + udp_len];
    Ok(Parsed {
        dst_mac: &frame[0..6],
        src_mac: &frame[6..12],
        vlan,
        src,
        dst,
        ttl,
        sport: u16::from_be_bytes([segment[0], segment[1]]),
        dport: u16::from_be_bytes([segment[2], segment[3]]),
        segment,
        trailer: frame.len() - l4 - udp_len,
    })
}

pub type Rr = (String, u16, u32, Vec<u8>);

pub fn records(m: &Message) -> Vec<Rr> {
    m.answers
        .iter()
        .map(|r| {
            let data = r.data.to_string().into_bytes();
            (
                r.name.to_lowercase().to_ascii(),
                u16::from(r.record_type()),
                r.ttl,
                data,
            )
        })
        .collect()
}

pub fn edns_summary(m: &Message) -> Option<(u16, bool, u8, usize)> {
    m.edns.as_ref().map(|e| {
        (
            e.max_payload(),
            e.flags().dnssec_ok,
            e.version(),
            e.options().as_ref().len(),
        )
    })
}

/// The responder's answer to a DNS message over UDP from a client (`None`: it sends nothing).
pub type Respond<'a> = dyn FnMut(&[u8], IpAddr) -> Option<Vec<u8>> + 'a;

/// Why the fast path's reply to `query` (both frames) is wrong, if it is, against the
/// responder's answer `respond` gives.
pub fn check_reply(query: &[u8], reply: &[u8], respond: &mut Respond<'_>) -> Result<(), String> {
    let q = parse(query).map_err(|e| format!("the query: {e}"))?;
    let r = parse(reply).map_err(|e| format!("the reply: {e}"))?;
    if (r.dst_mac, r.src_mac) != (q.src_mac, q.dst_mac) || r.vlan != q.vlan {
        return Err("MACs or VLAN tag".into());
    }
    if (r.src, r.dst, r.sport, r.dport) != (q.dst, q.src, q.dport, q.sport) {
        return Err("addresses or ports not swapped".into());
    }
    if r.ttl != 64 || r.trailer != 0 {
        return Err(format!("TTL {} or trailer {}", r.ttl, r.trailer));
    }
    if transport_checksum(r.src, r.dst, IPPROTO_UDP, r.segment) != 0 {
        return Err("UDP checksum".into());
    }
    let dns = &q.segment[8..];
    let ours = &r.segment[8..];
    let theirs = respond(dns, q.src).ok_or("the responder sends nothing")?;
    if ours[..4] != theirs[..4] {
        return Err(format!(
            "ID/flags/RCODE: XDP {:02x?}, responder {:02x?}",
            &ours[..4],
            &theirs[..4]
        ));
    }
    let question = |m: &[u8]| -> Result<Vec<u8>, String> {
        let mut at = 12;
        while *m.get(at).ok_or("question cut")? != 0 {
            at += 1 + m[at] as usize;
        }
        m.get(12..at + 5)
            .map(<[u8]>::to_vec)
            .ok_or("question cut".into())
    };
    if question(ours)? != question(&theirs)? {
        return Err("question bytes".into());
    }
    let ours_m = Message::from_vec(ours).map_err(|e| format!("XDP reply: {e}"))?;
    let theirs_m = Message::from_vec(&theirs).map_err(|e| format!("responder reply: {e}"))?;
    if edns_summary(&ours_m) != edns_summary(&theirs_m) {
        return Err(format!(
            "OPT: XDP {:?}, responder {:?}",
            edns_summary(&ours_m),
            edns_summary(&theirs_m)
        ));
    }
    // The options as on the wire: the ECS option echoed byte for byte, with the same scope.
    if opt_rdata(ours) != opt_rdata(&theirs) {
        return Err(format!(
            "OPT options: XDP {:02x?}, responder {:02x?}",
            opt_rdata(ours),
            opt_rdata(&theirs)
        ));
    }
    if !ours_m.authorities.is_empty() || !ours_m.additionals.is_empty() {
        return Err("XDP sent authority or additional records".into());
    }
    let (ours_rr, theirs_rr) = (records(&ours_m), records(&theirs_m));
    if ours_rr.len() != theirs_rr.len() {
        return Err(format!("answers: XDP {ours_rr:?}, responder {theirs_rr:?}"));
    }
    // A rotating set answers one record per query: asked round the whole set, the responder
    // must have given XDP's. Otherwise the sets are equal.
    let mut every: BTreeSet<Rr> = theirs_rr.iter().cloned().collect();
    if theirs_rr.len() == 1 {
        for _ in 0..gslb_common::MAX_ADDRS {
            if let Some(more) = respond(dns, q.src) {
                every.extend(records(
                    &Message::from_vec(&more).map_err(|e| e.to_string())?,
                ));
            }
        }
    }
    if !ours_rr.iter().all(|rr| every.contains(rr)) {
        return Err(format!("answers: XDP {ours_rr:?}, responder {every:?}"));
    }
    if theirs_rr.len() > 1 && ours_rr.iter().collect::<BTreeSet<_>>() != theirs_rr.iter().collect()
    {
        return Err(format!(
            "answer sets: XDP {ours_rr:?}, responder {theirs_rr:?}"
        ));
    }
    // With the same records (every reply but a rotation's other turn), the same bytes; but
    // for a CNAME answer's names, which each compresses its own way (hickory to the question
    // when their case agrees, the fast path never in the target and to the CNAME's RDATA for
    // the target's owner): the same message but for the answer section, whose records are
    // the same (above) and whose length is the message's less the rest.
    let cname = ours_m
        .answers
        .iter()
        .any(|r| u16::from(r.record_type()) == 5);
    if cname {
        let ours_opt = opt_rdata(ours).map_or(0, |o| 11 + o.len());
        let theirs_opt = opt_rdata(&theirs).map_or(0, |o| 11 + o.len());
        let head = |m: &[u8]| m[..12].to_vec();
        if head(ours) != head(&theirs) || ours_opt != theirs_opt {
            return Err(format!(
                "CNAME answer: header or OPT: XDP {}, responder {}",
                hex(ours),
                hex(&theirs)
            ));
        }
        let tail = |m: &[u8], opt: usize| m[m.len() - opt..].to_vec();
        if tail(ours, ours_opt) != tail(&theirs, theirs_opt) {
            return Err(format!(
                "CNAME answer: OPT bytes: XDP {}, responder {}",
                hex(ours),
                hex(&theirs)
            ));
        }
    } else if ours_rr == theirs_rr && ours != theirs.as_slice() {
        return Err(format!(
            "bytes: XDP {}, responder {}",
            hex(ours),
            hex(&theirs)
        ));
    }
    Ok(())
}

/// The RDATA of the OPT record of `dns` (its options as on the wire), walking the sections;
/// `None` without an OPT or when the message does not walk.
pub fn opt_rdata(dns: &[u8]) -> Option<&[u8]> {
    opt_record(dns).map(|(_, rdata)| rdata)
}

/// The first OPT record of `dns`, in any section: its CLASS (the UDP payload size its sender
/// takes) and its RDATA; `None` without an OPT or when the message does not walk.
pub fn opt_record(dns: &[u8]) -> Option<(u16, &[u8])> {
    let u16_at = |at: usize| -> Option<u16> {
        Some(u16::from_be_bytes(dns.get(at..at + 2)?.try_into().ok()?))
    };
    let skip_name = |mut at: usize| -> Option<usize> {
        loop {
            match *dns.get(at)? {
                0 => return Some(at + 1),
                l if l & 0xc0 == 0xc0 => return Some(at + 2),
                l => at += 1 + usize::from(l),
            }
        }
    };
    let mut at = 12;
    for _ in 0..u16_at(4)? {
        at = skip_name(at)? + 4;
    }
    let records = u32::from(u16_at(6)?) + u32::from(u16_at(8)?) + u32::from(u16_at(10)?);
    for _ in 0..records {
        at = skip_name(at)?;
        let rdlen = usize::from(u16_at(at + 8)?);
        let rdata = dns.get(at + 10..at + 10 + rdlen)?;
        if u16_at(at)? == 41 {
            return Some((u16_at(at + 2)?, rdata));
        }
        at += 10 + rdlen;
    }
    None
}

/// The ECS options (code 8, each with its head) of the OPT of `dns`, as on the wire.
pub fn ecs_options(dns: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let Some(rdata) = opt_rdata(dns) else {
        return out;
    };
    let mut at = 0;
    while at + 4 <= rdata.len() {
        let len = usize::from(u16::from_be_bytes([rdata[at + 2], rdata[at + 3]]));
        let end = (at + 4 + len).min(rdata.len());
        if rdata[at..at + 2] == [0, 8] {
            out.push(rdata[at..end].to_vec());
        }
        at = end;
    }
    out
}

/// `b` in hex, for failure messages.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
