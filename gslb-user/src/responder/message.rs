//! The message around the answer: the query's question decoded and checked (FORMERR,
//! NOTIMP, BADVERS, REFUSED before any lookup), the response's header, question and OPT record
//! (EDNS, RFC 6891), the size it must fit, and truncation (TC) when it does not. Only the
//! question is decoded: the header and the OPT record are read from the [`Shape`], which
//! checked them, so no other record of the request is ever decoded.

use std::net::IpAddr;

use hickory_proto::{
    op::{Edns, Message, MessageType, OpCode, Query, ResponseCode},
    rr::{
        RecordType,
        rdata::opt::{ClientSubnet, EdnsOption, NSIDPayload},
    },
    serialize::binary::{BinDecodable, BinDecoder},
};

use super::{
    Transport, cookies,
    ecs::{self, OPTION_SUBNET},
    shape::{self, Shape},
};
use crate::model::CookieSecrets;

/// UDP responses without EDNS are limited to 512 bytes (RFC 1035 §4.2.1).
const CLASSIC_UDP_SIZE: usize = 512;

/// The question of a request of `shape`, `None` when the decoder refuses it all the same (a
/// label it cannot hold).
pub(super) fn question(shape: &Shape<'_>) -> Option<Query> {
    let mut decoder = BinDecoder::new(shape.question);
    Query::read(&mut decoder)
        .ok()
        .filter(|_| decoder.is_empty())
}

/// The response to `request` (of `shape`, asking `question`) before its answer: its ID,
/// opcode, RD, CD and question, and our OPT record (our UDP size, version 0, the DO bit
/// echoed) when the request has one.
pub(super) fn response_to(
    request: &[u8],
    shape: &Shape<'_>,
    question: Query,
    edns_udp_size: u16,
) -> Message {
    let id = u16::from_be_bytes([request[0], request[1]]);
    let mut response = Message::new(id, MessageType::Response, OpCode::from_u8(shape.opcode));
    response.metadata.recursion_desired = request[2] & 0x01 != 0;
    response.metadata.checking_disabled = request[3] & 0x10 != 0;
    response.add_query(question);
    if let Some(opt) = shape.opt {
        let mut ours = Edns::new();
        ours.set_max_payload(edns_udp_size.max(CLASSIC_UDP_SIZE as u16));
        ours.set_version(0);
        ours.set_dnssec_ok(opt.dnssec_ok);
        response.set_edns(ours);
    }
    response
}

/// What a query's COOKIE option was (RFC 7873), where cookies are configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CookieSeen {
    /// No option, or cookies are not configured (the option is ignored).
    None,
    /// A length no cookie has: FORMERR.
    Malformed,
    /// A client cookie, and maybe a server cookie that is not ours or no longer fresh.
    Client,
    /// A fresh server cookie of ours, for this client's address.
    Verified,
}

/// Gives `response` a COOKIE option with a new server cookie (`secrets`, when configured) if
/// the request (of `shape`, from `client`) carries a well-formed one; what it carried.
pub(super) fn add_cookie(
    response: &mut Message,
    shape: &Shape<'_>,
    secrets: Option<&CookieSecrets>,
    client: IpAddr,
) -> CookieSeen {
    let (Some(secrets), Some(opt)) = (secrets, shape.opt) else {
        return CookieSeen::None;
    };
    let Some((_, data)) = opt
        .options()
        .find(|(code, _)| *code == cookies::OPTION_COOKIE)
    else {
        return CookieSeen::None;
    };
    let Some(cookie) = cookies::parse(data) else {
        return CookieSeen::Malformed;
    };
    let (verified, data) = cookies::respond(secrets, &cookie, client, cookies::now());
    let seen = if verified {
        CookieSeen::Verified
    } else {
        CookieSeen::Client
    };
    if let Some(edns) = response.edns.as_mut() {
        edns.options_mut()
            .insert(EdnsOption::Unknown(cookies::OPTION_COOKIE, data));
    }
    seen
}

/// The NSID option code (RFC 5001).
const OPTION_NSID: u16 = 3;

/// Gives `response` our NSID option (`nsid`, when configured) if the request (of `shape`)
/// asks for it with one (RFC 5001 §2.1: the request's option is empty; we do not look at its
/// data).
pub(super) fn add_nsid(response: &mut Message, shape: &Shape<'_>, nsid: Option<&[u8]>) {
    let (Some(nsid), Some(opt), Some(edns)) = (nsid, shape.opt, response.edns.as_mut()) else {
        return;
    };
    if opt.options().any(|(code, _)| code == OPTION_NSID)
        && let Ok(payload) = NSIDPayload::new(nsid)
    {
        edns.options_mut().insert(EdnsOption::NSID(payload));
    }
}

/// The request's EDNS Client Subnet option (well formed: [`rejection`] answers the others):
/// the subnet, not the resolver, is the client (RFC 7871).
pub(super) fn client_subnet(shape: &Shape<'_>) -> Option<ClientSubnet> {
    let (_, data) = shape
        .opt?
        .options()
        .find(|(code, _)| *code == OPTION_SUBNET)?;
    let subnet = ecs::subnet(data)?;
    Some(ClientSubnet::new(subnet.addr, subnet.source, 0))
}

/// The most bytes the response may take. Over UDP the smaller of the client's size (`payload`,
/// from its OPT record) and ours, so that answers stay below the size we chose to avoid
/// fragmentation (RFC 9715 R5), but never below 512.
pub(super) fn size_limit(transport: Transport, payload: Option<u16>, edns_udp_size: u16) -> usize {
    match (transport, payload) {
        (Transport::Tcp, _) => u16::MAX as usize,
        (Transport::Udp, None) => CLASSIC_UDP_SIZE,
        (Transport::Udp, Some(payload)) => {
            usize::from(payload.min(edns_udp_size)).max(CLASSIC_UDP_SIZE)
        }
    }
}

/// The error a query of `shape` over `transport` gets without a lookup, `None` when it is to
/// be answered: NOTIMP for an opcode but QUERY; BADVERS for EDNS above version 0; FORMERR for
/// a malformed client subnet and for a question of a type that is never asked
/// (OPT, TSIG: RFC 6891 §6.1.1, RFC 8945 §4.2); REFUSED for zone transfers (we serve no
/// secondaries; NSD and Knot refuse them too without a transfer ACL), but NOTIMP for AXFR over
/// UDP, where it is not defined (RFC 5936 §4.2; NSD and Knot answer NOTIMP); NOTIMP for the
/// other meta-types (TKEY, MAILB, MAILA and the unassigned 128–254: RFC 6895 §3.1 keeps them
/// for queries with their own semantics, which we do not implement); NOTAUTH for a TSIG-signed
/// query (we hold no key: RFC 8945 §5.2.1). Whether a query is rejected does not depend on
/// the transport, only which error.
pub(super) fn rejection(shape: &Shape<'_>, transport: Transport) -> Option<ResponseCode> {
    let qtype = RecordType::from(shape.qtype);
    if shape.opcode != 0 {
        Some(ResponseCode::NotImp)
    } else if shape.opt.is_some_and(|o| o.version > 0) {
        Some(ResponseCode::BADVERS)
    } else if !ecs::well_formed(shape.opt.as_ref())
        || matches!(qtype, RecordType::OPT | RecordType::TSIG)
    {
        Some(ResponseCode::FormErr)
    } else if qtype == RecordType::AXFR && transport == Transport::Udp {
        Some(ResponseCode::NotImp)
    } else if matches!(qtype, RecordType::AXFR | RecordType::IXFR) {
        Some(ResponseCode::Refused)
    } else if (128..=254).contains(&shape.qtype) {
        Some(ResponseCode::NotImp)
    } else if shape.tsig {
        Some(ResponseCode::NotAuth)
    } else {
        None
    }
}

/// `response` to `request` in bytes, within `limit`. Too big, an authoritative answer first
/// loses its additional records (the hosts' addresses beside an NS, MX or SRV answer:
/// optional, RFC 2181 §9; a referral's glue is not), and if still too big, its header,
/// question and OPT go with TC set, so that the client retries over TCP (RFC 7766). A request
/// of its [`Shape`] has one question and our OPT at most one option, so that always fits 512
/// bytes; were it not to, the header alone with TC goes, never more than `limit`. A response
/// that does not encode (a bug, not an input: every name in it decoded or was loaded) is
/// SERVFAIL from the header, counted as such, rather than nothing.
pub(super) fn encode(response: &mut Message, request: &[u8], limit: usize) -> Vec<u8> {
    let mut header_only = Vec::with_capacity(shape::HEADER);
    let Ok(bytes) = response.to_vec() else {
        response.metadata.response_code = ResponseCode::ServFail;
        shape::header_only(request, ResponseCode::ServFail.low(), &mut header_only);
        return header_only;
    };
    if bytes.len() <= limit {
        return bytes;
    }
    if response.authoritative && !response.additionals.is_empty() {
        response.additionals.clear();
        if let Ok(bytes) = response.to_vec()
            && bytes.len() <= limit
        {
            return bytes;
        }
    }
    let truncated = response.truncate();
    match truncated.to_vec() {
        Ok(bytes) if bytes.len() <= limit => bytes,
        _ => {
            shape::header_only(request, response.response_code.low(), &mut header_only);
            header_only[2] |= 0x02 | u8::from(response.authoritative) << 2; // TC, and AA as answered
            header_only
        }
    }
}
