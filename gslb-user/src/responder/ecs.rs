//! EDNS Client Subnet in a query: whether it is well formed (RFC 7871 §6, §7.1), and whether
//! the client that sent it may speak for its clients (`[server] ecs_allow`, NetScaler's
//! `ecsAddrValidation`).
//!
//! Without an allow list anyone can claim any subnet and so pick the answer of any view; with
//! one, a query from another client is answered as if it had no ECS option: its source address
//! is the client and no option is echoed (RFC 7871 §7.2.1: a server that does not use the option
//! for a query "MUST NOT include an ECS option" in the reply, and a resolver then knows the
//! answer holds for all its clients, as it does).

use std::net::IpAddr;

use ipnet::IpNet;

use super::shape::Opt;

/// EDNS option code of ECS.
pub(super) const OPTION_SUBNET: u16 = 8;

/// A client subnet as RFC 7871 §7.1 allows it in a query, read from the option's bytes: a
/// known family, a source prefix within it, a zero scope, exactly the address bytes the prefix
/// needs (§6: surplus bytes are FORMERR; the decoder would read only the bytes the prefix needs
/// and drop the rest) and no address bit beyond the prefix.
#[derive(Clone, Copy, Debug)]
pub(super) struct Subnet<'a> {
    /// The option's data as sent: family, source prefix, scope 0, the address bytes.
    pub(super) data: &'a [u8],
    pub(super) addr: IpAddr,
    pub(super) source: u8,
}

/// `data` (an ECS option's) as a [`Subnet`], `None` when it is not well formed.
pub(super) fn subnet(data: &[u8]) -> Option<Subnet<'_>> {
    let (&[f0, f1, source, scope], bytes) = data.split_first_chunk::<4>()?;
    let bits = match u16::from_be_bytes([f0, f1]) {
        1 => 32,
        2 => 128,
        _ => return None,
    };
    if scope != 0 || source > bits || bytes.len() != usize::from(source).div_ceil(8) {
        return None;
    }
    let mut octets = [0u8; 16];
    octets[..bytes.len()].copy_from_slice(bytes);
    let spare = bytes.len() * 8 - usize::from(source);
    if bytes
        .last()
        .is_some_and(|&last| last & ((1u16 << spare) - 1) as u8 != 0)
    {
        return None;
    }
    let addr = if bits == 32 {
        IpAddr::from([octets[0], octets[1], octets[2], octets[3]])
    } else {
        IpAddr::from(octets)
    };
    Some(Subnet { data, addr, source })
}

/// Whether the client subnet options of `opt` are acceptable: none, or one well formed
/// ([`subnet`]). A second one would leave the choice of subnet to us: FORMERR, as a malformed
/// one is (RFC 7871 §7.1.1).
pub(super) fn well_formed(opt: Option<&Opt<'_>>) -> bool {
    let mut subnets = opt
        .into_iter()
        .flat_map(Opt::options)
        .filter(|(code, _)| *code == OPTION_SUBNET);
    match (subnets.next(), subnets.next()) {
        (None, _) => true,
        (Some((_, data)), None) => subnet(data).is_some(),
        (Some(_), Some(_)) => false,
    }
}

/// The resolvers allowed to send ECS; `None`: everyone.
#[derive(Debug, Clone, Default)]
pub(super) struct Allow(Option<Vec<IpNet>>);

impl Allow {
    pub(super) fn new(prefixes: Option<&[IpNet]>) -> Self {
        Allow(prefixes.map(<[IpNet]>::to_vec))
    }

    /// Whether `client` (the query's source, IPv4-mapped already made IPv4) may send ECS.
    pub(super) fn allows(&self, client: IpAddr) -> bool {
        self.0
            .as_ref()
            .is_none_or(|nets| nets.iter().any(|n| n.contains(&client)))
    }
}

#[cfg(test)]
mod tests {
    use std::{net::Ipv4Addr, path::Path};

    use gslb_tests::responder_config;
    use hickory_proto::{
        op::{Message, ResponseCode},
        rr::rdata::opt::{EdnsCode, EdnsOption},
    };

    use super::*;
    use crate::{
        compile::Snapshot,
        config::Config,
        responder::{Responder, Transport},
    };

    /// A query for www.example.com A with an OPT whose rdata is `options` as written.
    fn query_with_options(options: &[u8]) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
        m.extend_from_slice(b"\x03www\x07example\x03com\x00\x00\x01\x00\x01");
        m.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0]);
        m.extend_from_slice(&(options.len() as u16).to_be_bytes());
        m.extend_from_slice(options);
        m
    }

    /// An ECS option as written: family, source, scope, address bytes.
    fn ecs(family: u16, source: u8, scope: u8, addr: &[u8]) -> Vec<u8> {
        let mut o = OPTION_SUBNET.to_be_bytes().to_vec();
        o.extend_from_slice(&((4 + addr.len()) as u16).to_be_bytes());
        o.extend_from_slice(&family.to_be_bytes());
        o.extend_from_slice(&[source, scope]);
        o.extend_from_slice(addr);
        o
    }

    fn responder(server_extra: &str) -> Responder {
        let text =
            responder_config().replacen("[server]\n", &format!("[server]\n{server_extra}\n"), 1);
        let config = Config::parse(&text, Path::new("responder.toml")).unwrap();
        Responder::new(&Snapshot::from_config(&config))
    }

    const RESOLVER: IpAddr = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 5));

    fn ask(r: &Responder, from: IpAddr, request: &[u8]) -> Message {
        Message::from_vec(&r.respond(request, from, Transport::Udp).expect("a reply")).unwrap()
    }

    fn echoed(m: &Message) -> Option<hickory_proto::rr::rdata::opt::ClientSubnet> {
        match m.edns.as_ref()?.option(EdnsCode::Subnet)? {
            EdnsOption::Subnet(s) => Some(*s),
            _ => None,
        }
    }

    #[test]
    fn malformed_client_subnets_are_formerr() {
        let r = responder("");
        use ResponseCode::{FormErr, NoError};
        // (what, options, rcode)
        let table: Vec<(&str, Vec<u8>, ResponseCode)> = vec![
            ("/24 in 3 bytes", ecs(1, 24, 0, &[192, 0, 2]), NoError),
            ("/0 in no bytes", ecs(1, 0, 0, &[]), NoError),
            ("/20 in 3 bytes", ecs(1, 20, 0, &[192, 0, 0x20]), NoError),
            (
                "v6 /56 in 7 bytes",
                ecs(2, 56, 0, &[0x20, 1, 0xd, 0xb8, 0, 0, 0]),
                NoError,
            ),
            (
                "/24 in 4 bytes (surplus byte)",
                ecs(1, 24, 0, &[192, 0, 2, 0]),
                FormErr,
            ),
            ("/0 with 4 bytes", ecs(1, 0, 0, &[0, 0, 0, 0]), FormErr),
            (
                "v6 /48 in 16 bytes",
                ecs(
                    2,
                    48,
                    0,
                    &[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                ),
                FormErr,
            ),
            (
                "/24 in 2 bytes (missing)",
                ecs(1, 24, 0, &[192, 0]),
                FormErr,
            ),
            (
                "bits set beyond /20",
                ecs(1, 20, 0, &[192, 0, 0x21]),
                FormErr,
            ),
            (
                "scope set in a query",
                ecs(1, 24, 24, &[192, 0, 2]),
                FormErr,
            ),
            ("/33", ecs(1, 33, 0, &[192, 0, 2, 0, 0]), FormErr),
            ("unknown family", ecs(3, 8, 0, &[1]), FormErr),
            (
                "no family at all",
                OPTION_SUBNET
                    .to_be_bytes()
                    .iter()
                    .chain(&[0, 1, 0])
                    .copied()
                    .collect(),
                FormErr,
            ),
            (
                "two ECS options",
                [ecs(1, 24, 0, &[192, 0, 2]), ecs(1, 24, 0, &[198, 51, 100])].concat(),
                FormErr,
            ),
        ];
        for (what, options, want) in table {
            let reply = ask(&r, RESOLVER, &query_with_options(&options));
            assert_eq!(reply.response_code, want, "{what}");
            assert_eq!(reply.id, 0x1234, "{what}");
        }
    }

    #[test]
    fn only_allowed_resolvers_speak_for_their_clients() {
        // 192.0.2.10/32 is view "host", whose www answer differs from the default view's.
        let subnet = query_with_options(&ecs(1, 32, 0, &[192, 0, 2, 10]));
        let host_answer = |m: &Message| {
            m.answers
                .iter()
                .map(|a| a.data.to_string())
                .collect::<Vec<_>>()
        };
        let everyone = responder("");
        let as_host = ask(
            &everyone,
            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10)),
            &query_with_options(&[]),
        );
        let spoken_for = ask(&everyone, RESOLVER, &subnet);
        assert_eq!(
            host_answer(&spoken_for),
            host_answer(&as_host),
            "no list: ECS from anyone"
        );
        assert!(echoed(&spoken_for).is_some());

        let listed = responder("ecs_allow = [\"203.0.113.0/24\", \"2001:db8:53::/48\"]");
        let allowed = ask(&listed, RESOLVER, &subnet);
        assert_eq!(
            host_answer(&allowed),
            host_answer(&as_host),
            "an allowed resolver"
        );
        assert_eq!(echoed(&allowed).map(|e| e.source_prefix()), Some(32));
        // The same client on a dual-stack socket is the same resolver.
        let mapped = IpAddr::V6(Ipv4Addr::new(203, 0, 113, 5).to_ipv6_mapped());
        assert_eq!(
            host_answer(&ask(&listed, mapped, &subnet)),
            host_answer(&as_host)
        );

        // Anyone else: its own address decides, and nothing is echoed.
        let stranger = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7));
        let own = ask(&listed, stranger, &query_with_options(&[]));
        let ignored = ask(&listed, stranger, &subnet);
        assert_eq!(ignored.response_code, ResponseCode::NoError);
        assert_ne!(
            host_answer(&ignored),
            host_answer(&as_host),
            "the claim was used"
        );
        assert_eq!(ignored.answers.len(), own.answers.len());
        assert_eq!(
            echoed(&ignored),
            None,
            "ECS echoed to a client whose ECS was ignored"
        );
        assert!(ignored.edns.is_some(), "the OPT itself is still answered");
        // Malformed stays malformed, whoever sends it.
        let surplus = query_with_options(&ecs(1, 24, 0, &[192, 0, 2, 0]));
        assert_eq!(
            ask(&listed, stranger, &surplus).response_code,
            ResponseCode::FormErr
        );
    }
}
