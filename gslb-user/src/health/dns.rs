//! DNS monitor: one query over UDP; the response's code, and optionally an address among its
//! answers, are checked.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use hickory_proto::{
    ProtoError,
    op::{Message, MessageType, OpCode, Query, ResponseCode},
    rr::{Name, RData, RecordType},
};
use tokio::net::UdpSocket;

use super::{CheckError, DnsCheck, random_u64};

/// One query as sent on the wire, RD clear: the DNS monitor's, and the RTT prober's (a
/// resolver then answers from its cache or refuses, and does not recurse, which would add the
/// recursion to the RTT).
pub(crate) fn query_wire(id: u16, query: Query) -> Result<Vec<u8>, ProtoError> {
    let mut message = Message::new(id, MessageType::Query, OpCode::Query);
    message.metadata.recursion_desired = false;
    message.add_query(query);
    message.to_vec()
}

/// Why a DNS monitor's check cannot be sent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DnsCheckError {
    /// The cause is in the message too: these end up as text in configuration errors.
    #[error("query name {name:?}: {source}")]
    Name {
        name: String,
        source: Box<ProtoError>,
    },
    #[error("an expected answer address needs qtype A or AAAA, not {qtype}")]
    AnswerNeedsAddressType { qtype: RecordType },
}

pub(super) struct DnsChecker {
    addr: SocketAddr,
    query: Query,
    expect_rcode: ResponseCode,
    expect_answer: Option<IpAddr>,
}

impl DnsChecker {
    pub(super) fn new(addr: SocketAddr, check: &DnsCheck) -> Result<Self, DnsCheckError> {
        let mut name = Name::from_utf8(&check.qname).map_err(|source| DnsCheckError::Name {
            name: check.qname.clone(),
            source: Box::new(source),
        })?;
        name.set_fqdn(true);
        if check.expect_answer.is_some() && !matches!(check.qtype, RecordType::A | RecordType::AAAA)
        {
            return Err(DnsCheckError::AnswerNeedsAddressType { qtype: check.qtype });
        }
        Ok(DnsChecker {
            addr,
            query: Query::query(name, check.qtype),
            expect_rcode: check.expect_rcode,
            expect_answer: check.expect_answer,
        })
    }

    pub(super) async fn check(&self) -> Result<(), CheckError> {
        let id = random_u64() as u16;
        let query =
            query_wire(id, self.query.clone()).map_err(|e| CheckError::Dns(e.to_string()))?;

        let local: IpAddr = if self.addr.is_ipv4() {
            Ipv4Addr::UNSPECIFIED.into()
        } else {
            Ipv6Addr::UNSPECIFIED.into()
        };
        let io = |e: std::io::Error| CheckError::Dns(e.to_string());
        let socket = UdpSocket::bind((local, 0)).await.map_err(io)?;
        // Connected: only the target's datagrams are received, and a closed port is reported
        // (ECONNREFUSED) instead of waited out.
        socket.connect(self.addr).await.map_err(io)?;
        socket.send(&query).await.map_err(io)?;
        let mut buf = vec![0u8; 4096];
        let response = loop {
            let len = socket.recv(&mut buf).await.map_err(io)?;
            match Message::from_vec(&buf[..len]) {
                Ok(m) if m.id == id && m.message_type == MessageType::Response => break m,
                // Not an answer to this query (a late one to an earlier check, garbage): wait on.
                _ => {}
            }
        };
        if response.response_code != self.expect_rcode {
            return Err(CheckError::Rcode {
                got: response.response_code,
                expected: self.expect_rcode,
            });
        }
        if let Some(want) = self.expect_answer {
            let found = response.answers.iter().any(|record| match &record.data {
                RData::A(a) => IpAddr::V4(a.0) == want,
                RData::AAAA(a) => IpAddr::V6(a.0) == want,
                _ => false,
            });
            if !found {
                return Err(CheckError::Answer(want));
            }
        }
        Ok(())
    }
}
