//! The authoritative responder: answers every query the fast path passes on, by the same data
//! (the compiled [`Snapshot`]) for GSLB names, plus what XDP does not do: static zone records,
//! CNAME chains, NXDOMAIN and NODATA with the SOA, REFUSED outside our zones, FORMERR, NOTIMP,
//! BADVERS, minimal ANY (RFC 8482) and truncation. Pure: bytes in, bytes out; the sockets are in
//! `server`. The one state it keeps is the persistence entries (`crate::persist`, on a clock
//! the caller can inject) and the rotation turn of each answer set (`turns`); the rate limiter
//! of UDP responses (`rrl`) lives here to be configured with the rest, but `respond` does not
//! read it: the server loops ask it before sending.
//!
//! One file per job: [`message`] (the query parsed and checked, OPT, size and truncation),
//! [`lookup`] (answer building: zones, referrals, CNAME chains, NXDOMAIN and NODATA), [`zone`]
//! (static zone data), [`compiled`] (the compiled answers as the fast path looks them up),
//! [`decisions`] (per-query engine decisions), [`authority`] (all of it for one snapshot),
//! [`ecs`] (client subnets), [`turns`] (rotation), [`rrl`] and [`answers`] (responses counted
//! by transport and RCODE); [`wire`] answers the common query (A or AAAA of a compiled GSLB
//! name, or NXDOMAIN/NODATA for a name of ours, with or without ECS) from its bytes, without
//! building a message, and leaves the rest to the others.

mod answers;
mod authority;
mod compiled;
mod cookies;
mod decisions;
mod ecs;
mod lookup;
mod message;
pub mod rrl;
mod shape;
#[cfg(test)]
mod tests;
mod turns;
mod wire;
mod zone;

use std::{net::IpAddr, sync::Arc};

use arc_swap::ArcSwap;
use hickory_proto::{
    op::{Message, Query, ResponseCode},
    rr::{
        DNSClass,
        rdata::opt::{ClientSubnet, EdnsOption},
    },
};

use crate::{compile::Snapshot, location::db::LocationDb, persist::Store as PersistStore};

pub use self::answers::AnswerCounts;
use self::authority::Authority;
pub use self::cookies::server_cookie;
use self::shape::{Refusal, Shape};
use self::zone::key;

/// How the query arrived, which bounds the response size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
}

/// Where a response goes; the servers send it, tests collect it.
pub trait ResponseSink {
    fn send(&mut self, response: &[u8]);
}

impl ResponseSink for Vec<Vec<u8>> {
    fn send(&mut self, response: &[u8]) {
        self.push(response.to_vec());
    }
}

/// What [`Responder::respond_into`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// Nothing may be sent back (a response, a fragment of a header).
    Nothing,
    /// A response.
    Response,
    /// A response to a query that brought back a fresh server cookie of ours for its address
    /// (RFC 7873 §5.2.3): it cannot be spoofed, so response rate limiting lets it through.
    Verified,
}

/// The authoritative responder (see the module docs); shared by the UDP and TCP loops.
pub struct Responder {
    /// Replaced whole on a configuration reload; a query in flight keeps the data it started
    /// with.
    data: ArcSwap<Authority>,
    /// Source-IP persistence entries, kept across reloads (`crate::persist`).
    persistence: Arc<PersistStore>,
    /// `[rrl]`: asked by the UDP loops, configured with every reload.
    rrl: rrl::Limiter,
    /// Responses by transport and RCODE.
    answers: AnswerCounts,
}

/// An IPv4-mapped IPv6 client (dual-stack socket) is the IPv4 client it maps.
fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 @ IpAddr::V4(_) => v4,
    }
}

impl Responder {
    /// The responder of `snapshot`: its answers, and the zones, engine and DNS settings of the
    /// model it was compiled from.
    pub fn new(snapshot: &Snapshot) -> Self {
        Responder::with_persistence(snapshot, PersistStore::new())
    }

    /// As [`Responder::new`], with persistence entries kept in `persistence` (tests give it a
    /// clock of their own).
    pub fn with_persistence(snapshot: &Snapshot, persistence: Arc<PersistStore>) -> Self {
        Responder {
            data: ArcSwap::from_pointee(Authority::new(snapshot, None, &persistence, None)),
            persistence,
            rrl: rrl::Limiter::new(&snapshot.rrl),
            answers: AnswerCounts::default(),
        }
    }

    /// The persistence entries (gslbd exchanges them with the other parents over MEP).
    pub fn persistence(&self) -> &Arc<PersistStore> {
        &self.persistence
    }

    /// Answers from `snapshot` (and the model it was compiled from) from now on, keeping the
    /// location database. A snapshot with the previous one's [`Spec`](crate::compile::Spec)
    /// (a republish after a health change) keeps the zones and the engine: only the answers
    /// and the states are new.
    pub fn replace(&self, snapshot: &Snapshot) {
        let locations = self
            .data
            .load()
            .decisions
            .as_ref()
            .and_then(|d| d.locations.clone());
        self.replace_with_locations(snapshot, locations);
    }

    /// As [`Responder::replace`], with client locations from `locations` (static proximity,
    /// MATCHES_LOCATION policies).
    pub fn replace_with_locations(&self, snapshot: &Snapshot, locations: Option<Arc<LocationDb>>) {
        let old = self.data.load();
        let next = Authority::new(snapshot, locations, &self.persistence, Some(&old));
        next.carry_turns(&old);
        self.data.store(Arc::new(next));
        self.rrl.configure(&snapshot.rrl);
    }

    /// The rate limiter of UDP responses (`[rrl]`), which the server loops ask before sending:
    /// kept here so that a reload configures it with the rest.
    pub fn rrl(&self) -> &rrl::Limiter {
        &self.rrl
    }

    /// Answers `request` from `client` into `sink`; sends nothing for what must not be answered
    /// (responses, fragments of a header).
    pub fn handle<S: ResponseSink>(
        &self,
        request: &[u8],
        client: IpAddr,
        transport: Transport,
        sink: &mut S,
    ) {
        if let Some(response) = self.respond(request, client, transport) {
            sink.send(&response);
        }
    }

    /// The response to `request`, or `None` when nothing may be sent back.
    pub fn respond(&self, request: &[u8], client: IpAddr, transport: Transport) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        (self.respond_into(request, client, transport, &mut out) != Written::Nothing).then_some(out)
    }

    /// [`Responder::respond`] into `out` (cleared first): the server loops keep one buffer
    /// per socket instead of one per response.
    pub fn respond_into(
        &self,
        request: &[u8],
        client: IpAddr,
        transport: Transport,
        out: &mut Vec<u8>,
    ) -> Written {
        out.clear();
        // Every request is held to a query's shape first: what is not is refused from its
        // header, and nothing after this sees more than one question and two small records.
        let data = self.data.load();
        let shape = match shape::scan(request) {
            Ok(shape) => shape,
            Err(Refusal::Drop) => return Written::Nothing,
            Err(Refusal::HeaderOnly { rcode, dnssec_ok }) => {
                shape::header_only(request, rcode, out);
                if let Some(dnssec_ok) = dnssec_ok {
                    out[11] = 1; // ARCOUNT: our OPT
                    wire::write_opt(out, data.edns_udp_size, dnssec_ok, None, 0);
                }
                self.answers.count(transport, u16::from(rcode));
                return Written::Response;
            }
        };
        // A MEP child refuses GSLB names, which `wire` answers (and leaves its NXDOMAIN and
        // NODATA to the general path too, as before).
        if !data.gslb_refused && wire::answer(&data, request, &shape, client, transport, out) {
            self.answers.count(transport, u16::from(out[3] & 0x0f));
            return Written::Response;
        }
        let (reply, verified) = self.respond_message(&data, &shape, request, client, transport);
        out.extend_from_slice(&reply);
        if verified {
            Written::Verified
        } else {
            Written::Response
        }
    }

    /// The response to `request` (of `shape`) built as a message (every query `wire` does not
    /// answer), and whether it brought back a server cookie of ours.
    fn respond_message(
        &self,
        data: &Authority,
        shape: &Shape<'_>,
        request: &[u8],
        client: IpAddr,
        transport: Transport,
    ) -> (Vec<u8>, bool) {
        let Some(question) = message::question(shape) else {
            let mut reply = Vec::with_capacity(shape::HEADER);
            shape::header_only(request, shape::FORMERR, &mut reply);
            self.answers.count(transport, u16::from(shape::FORMERR));
            return (reply, false);
        };
        let mut response =
            message::response_to(request, shape, question.clone(), data.edns_udp_size);
        let cookie =
            message::add_cookie(&mut response, shape, data.config.cookies.as_ref(), client);
        let payload = shape.opt.map(|o| o.payload);
        let limit = message::size_limit(transport, payload, data.edns_udp_size);
        match message::rejection(shape, transport) {
            Some(rcode) => {
                response.metadata.response_code = rcode;
            }
            // RFC 7873 §5.2.2: a COOKIE option of a length no cookie has.
            None if cookie == message::CookieSeen::Malformed => {
                response.metadata.response_code = ResponseCode::FormErr;
            }
            None => {
                let ecs = message::client_subnet(shape);
                Self::answer(data, &question, client, ecs, &mut response);
            }
        }
        // Last of the options, after the ECS echo: the order the fast path writes them in.
        message::add_nsid(&mut response, shape, data.config.identity.nsid.as_deref());
        let reply = message::encode(&mut response, request, limit);
        self.answers
            .count(transport, u16::from(response.response_code));
        (reply, cookie == message::CookieSeen::Verified)
    }

    /// The responses sent so far, by transport and RCODE (before the UDP loops' rate
    /// limiting, which counts its own drops: [`rrl::Limiter::stats`]).
    pub fn answers(&self) -> &AnswerCounts {
        &self.answers
    }

    /// Fills `response` with the answer to `question` from `client`, and echoes the client
    /// subnet `ecs` with the answer's scope.
    fn answer(
        data: &Authority,
        question: &Query,
        client: IpAddr,
        ecs: Option<ClientSubnet>,
        response: &mut Message,
    ) {
        // From a client not in `server.ecs_allow`, the option is ignored: not used, not
        // echoed (`responder::ecs`).
        let ecs = ecs.filter(|_| data.config.ecs_allow.allows(canonical(client)));
        // A /0 subnet carries no client information (RFC 7871 §7.1.2): the resolver is the
        // client, as without ECS, and the answer's scope is 0.
        let client = ecs
            .filter(|ecs| ecs.source_prefix() > 0)
            .map_or(client, |ecs| ecs.addr());
        let found = Self::lookup(data, question, client);
        if let (Some(ecs), Some(edns)) = (ecs, response.edns.as_mut()) {
            // Scope 0 (valid for every client) unless a GSLB name, whose answer may depend
            // on the client, took part.
            let qtype = u16::from(question.query_type());
            let source = ecs.source_prefix();
            let scope = std::iter::once(question.name())
                .chain(found.answers.iter().map(|r| &r.name))
                .filter(|_| source > 0)
                .filter_map(|n| data.scope(&key(n), qtype, client, source))
                .max()
                .unwrap_or(0);
            edns.options_mut()
                .insert(EdnsOption::Subnet(ClientSubnet::new(
                    ecs.addr(),
                    ecs.source_prefix(),
                    scope,
                )));
        }
        response.metadata.response_code = found.rcode;
        // QCLASS ANY is answered from our class IN data, but not authoritatively: we cannot
        // vouch that no other class has data at the name (as NSD answers it).
        response.metadata.authoritative =
            found.authoritative && question.query_class() != DNSClass::ANY;
        response.answers = found.answers;
        response.authorities = found.authority;
        response.additionals = found.additional;
    }
}
