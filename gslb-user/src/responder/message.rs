//! The message around the answer: the query parsed and checked (FORMERR, NOTIMP, BADVERS
//! before any lookup), the response's header, question and OPT record (EDNS, RFC 6891), the
//! size it must fit, and truncation (TC) when it does not.

use hickory_proto::{
    op::{Edns, Header, Message, MessageType, OpCode, ResponseCode},
    rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption},
    serialize::binary::{BinDecodable, BinDecoder, BinEncodable},
};

use super::{Transport, ecs};

/// UDP responses without EDNS are limited to 512 bytes (RFC 1035 §4.2.1).
const CLASSIC_UDP_SIZE: usize = 512;

/// The query in `request`; else what to send instead: nothing for a message too short for a
/// header or a response (never answer one: that way lie reflection loops), FORMERR for one that
/// does not parse.
pub(super) fn parse(request: &[u8]) -> Result<Message, Option<Vec<u8>>> {
    if request.len() < 12 || request[2] & 0x80 != 0 {
        return Err(None);
    }
    // Bytes after the last record are as malformed as missing ones (RFC 1035 §4.1; BIND and
    // Knot answer FORMERR too); the fast path passes such queries on as `TrailingData`.
    let mut decoder = BinDecoder::new(request);
    match Message::read(&mut decoder) {
        Ok(q) if decoder.is_empty() => Ok(q),
        _ => Err(Some(formerr(request))),
    }
}

/// The response to `query` before its answer: its ID, opcode, RD, CD and question, and our OPT
/// record (our UDP size, version 0, the DO bit echoed) when the query has one.
pub(super) fn response_to(query: &Message, edns_udp_size: u16) -> Message {
    let mut response = Message::new();
    response
        .set_id(query.id())
        .set_message_type(MessageType::Response)
        .set_op_code(query.op_code())
        .set_recursion_desired(query.recursion_desired())
        .set_checking_disabled(query.checking_disabled());
    for q in query.queries() {
        response.add_query(q.clone());
    }
    if let Some(e) = query.extensions().as_ref() {
        let mut ours = Edns::new();
        ours.set_max_payload(edns_udp_size.max(CLASSIC_UDP_SIZE as u16));
        ours.set_version(0);
        ours.set_dnssec_ok(e.flags().dnssec_ok);
        response.set_edns(ours);
    }
    response
}

/// The query's EDNS Client Subnet option: the subnet, not the resolver, is the client (RFC
/// 7871).
pub(super) fn client_subnet(edns: Option<&Edns>) -> Option<ClientSubnet> {
    edns.and_then(|e| match e.option(EdnsCode::Subnet) {
        Some(EdnsOption::Subnet(ecs)) => Some(*ecs),
        _ => None,
    })
}

/// The most bytes the response may take. Over UDP the smaller of the client's size and ours, so
/// that answers stay below the size we chose to avoid fragmentation (RFC 9715 R5), but never
/// below 512.
pub(super) fn size_limit(transport: Transport, edns: Option<&Edns>, edns_udp_size: u16) -> usize {
    match (transport, edns) {
        (Transport::Tcp, _) => u16::MAX as usize,
        (Transport::Udp, None) => CLASSIC_UDP_SIZE,
        (Transport::Udp, Some(e)) => {
            usize::from(e.max_payload().min(edns_udp_size)).max(CLASSIC_UDP_SIZE)
        }
    }
}

/// The error `query` gets without a lookup, `None` when it is to be answered: NOTIMP for an
/// opcode but QUERY, FORMERR for other than one question or for answers in a query, BADVERS for
/// EDNS above version 0, FORMERR for a malformed client subnet (`request` is the query's bytes,
/// for the option's exact lengths).
pub(super) fn rejection(
    query: &Message,
    request: &[u8],
    ecs: Option<&ClientSubnet>,
) -> Option<ResponseCode> {
    let edns = query.extensions().as_ref();
    if query.op_code() != OpCode::Query {
        Some(ResponseCode::NotImp)
    } else if query.queries().len() != 1 || !query.answers().is_empty() {
        Some(ResponseCode::FormErr)
    } else if edns.is_some_and(|e| e.version() > 0) {
        Some(ResponseCode::BADVERS)
    } else if ecs.is_some_and(|ecs| !ecs::valid(ecs) || !ecs::exact_lengths(request)) {
        Some(ResponseCode::FormErr)
    } else {
        None
    }
}

/// `response` in bytes, within `limit`: too big, its header, question and OPT with TC set, so
/// that the client retries over TCP (RFC 7766).
pub(super) fn encode(response: &Message, limit: usize) -> Option<Vec<u8>> {
    let bytes = response.to_vec().ok()?;
    if bytes.len() <= limit {
        return Some(bytes);
    }
    let mut truncated = response.truncate();
    truncated.set_authoritative(response.authoritative());
    truncated.to_vec().ok()
}

/// FORMERR for a message that does not parse: the header's ID and opcode, nothing else.
fn formerr(request: &[u8]) -> Vec<u8> {
    let mut header = Header::new();
    header
        .set_id(u16::from_be_bytes([request[0], request[1]]))
        .set_message_type(MessageType::Response)
        .set_op_code(OpCode::from_u8((request[2] >> 3) & 0x0f))
        .set_recursion_desired(request[2] & 0x01 != 0)
        .set_response_code(ResponseCode::FormErr);
    header.to_bytes().expect("a header always encodes")
}
