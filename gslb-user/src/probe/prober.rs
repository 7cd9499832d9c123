//! The probes that measure the RTT to a resolver: ICMP echo, a DNS query over UDP (`dns_dot`:
//! NS for "."; `dns_rev`: PTR of the resolver's own address) and a TCP connect, all to port 53.
//! Unlike a health monitor, any reply is a sample: an echo reply or an ICMP error reported on
//! the socket, a DNS response with any RCODE or a port unreachable, a SYN-ACK or a reset. Only
//! silence (nothing within the response timeout) or a local failure (no ICMP socket, no
//! route, a send refused) is not.
//!
//! An ICMP error is a reply only when the network sent it: the target, or a router that is not
//! this host. One from this host's own address was made here (a local firewall's REJECT), comes
//! back at once and would win every RTT decision at ~0 ms: it is a local failure
//! ([`ProbeOutcome::Failed`]). The ICMP and DNS probes read the sender off the socket's error
//! queue ([`crate::health::icmp_error`]). A TCP reset carries no such sender: a refused connect
//! stays a sample, whoever reset it.

use std::{
    fmt,
    future::Future,
    io,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    os::fd::AsFd,
    str::FromStr,
    time::Duration,
};

use hickory_proto::{
    op::Query,
    rr::{Name, RecordType},
};
use tokio::{
    net::{TcpStream, UdpSocket},
    time::Instant,
};

use crate::health::{
    Echo,
    dns::query_wire,
    echo,
    icmp_error::{self, Queued},
};

/// A probe type (NetScaler's `ldns-ping`, `ldns-dns`, `ldns-tcp` monitors; F5's `icmp`,
/// `dns_dot`, `dns_rev`, `tcp` probe protocols).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeKind {
    /// ICMP (ICMPv6) echo.
    Icmp,
    /// A DNS query over UDP for the NS records of the root (".").
    DnsDot,
    /// A DNS query over UDP for the PTR record of the resolver's own address.
    DnsRev,
    /// A TCP connect to port 53.
    Tcp,
}

/// NetScaler's default `ldnsprobeOrder`: PING, DNS (UDP), TCP.
pub const DEFAULT_ORDER: [ProbeKind; 3] = [ProbeKind::Icmp, ProbeKind::DnsDot, ProbeKind::Tcp];

impl ProbeKind {
    pub const ALL: [ProbeKind; 4] = [
        ProbeKind::Icmp,
        ProbeKind::DnsDot,
        ProbeKind::DnsRev,
        ProbeKind::Tcp,
    ];

    /// The name in configurations, logs and the table dump (F5's probe protocol names).
    pub const fn name(self) -> &'static str {
        match self {
            ProbeKind::Icmp => "icmp",
            ProbeKind::DnsDot => "dns_dot",
            ProbeKind::DnsRev => "dns_rev",
            ProbeKind::Tcp => "tcp",
        }
    }
}

impl fmt::Display for ProbeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A probe type name that is none of [`ProbeKind`]'s.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown probe type {name:?} (expected icmp, dns_dot, dns_rev or tcp)")]
pub struct UnknownProbeKind {
    pub name: String,
}

impl FromStr for ProbeKind {
    type Err = UnknownProbeKind;

    /// F5's names, and NetScaler's (`PING`, `DNS`, `TCP`, any case; `DNS` is `dns_dot`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "icmp" | "ping" => Ok(ProbeKind::Icmp),
            "dns_dot" | "dns" | "udp" => Ok(ProbeKind::DnsDot),
            "dns_rev" => Ok(ProbeKind::DnsRev),
            "tcp" => Ok(ProbeKind::Tcp),
            _ => Err(UnknownProbeKind { name: s.into() }),
        }
    }
}

/// What one probe got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// A reply of any kind, this long after the request was sent.
    Reply(Duration),
    /// Nothing within the response timeout.
    NoReply,
    /// The probe could not be sent (no ICMP socket, no route, …): the next type is tried.
    Failed(String),
}

/// Sends probes. [`NetProber`] is the real one; tests use fakes.
pub trait Prober: Send + Sync + 'static {
    /// One probe of `kind` to `target`, waiting at most `timeout` for a reply.
    fn probe(
        &self,
        kind: ProbeKind,
        target: IpAddr,
        timeout: Duration,
    ) -> impl Future<Output = ProbeOutcome> + Send;
}

/// An RTT sample and the probe type that produced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub kind: ProbeKind,
    pub rtt: Duration,
}

/// The result of one probe round: the types tried in order, and the sample of the first that
/// got a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeRound {
    pub tried: Vec<(ProbeKind, ProbeOutcome)>,
    pub sample: Option<Sample>,
}

/// One probe round: the types of `order` in turn, the next only when the previous got no
/// reply; `before_each` runs before every probe sent (the rate limit).
pub async fn probe_in_order<P, F, Fut>(
    prober: &P,
    order: &[ProbeKind],
    target: IpAddr,
    timeout: Duration,
    mut before_each: F,
) -> ProbeRound
where
    P: Prober,
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut round = ProbeRound {
        tried: Vec::with_capacity(order.len()),
        sample: None,
    };
    for &kind in order {
        before_each().await;
        let outcome = prober.probe(kind, target, timeout).await;
        let rtt = match outcome {
            ProbeOutcome::Reply(rtt) => Some(rtt),
            _ => None,
        };
        round.tried.push((kind, outcome));
        if let Some(rtt) = rtt {
            round.sample = Some(Sample { kind, rtt });
            break;
        }
    }
    round
}

/// Probes over the network. The ports are 53 except in tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetProber {
    pub dns_port: u16,
    pub tcp_port: u16,
}

impl Default for NetProber {
    fn default() -> Self {
        NetProber {
            dns_port: 53,
            tcp_port: 53,
        }
    }
}

impl Prober for NetProber {
    fn probe(
        &self,
        kind: ProbeKind,
        target: IpAddr,
        timeout: Duration,
    ) -> impl Future<Output = ProbeOutcome> + Send {
        let this = *self;
        async move {
            let attempt = async {
                match kind {
                    ProbeKind::Icmp => icmp(target).await,
                    ProbeKind::DnsDot => {
                        dns(SocketAddr::new(target, this.dns_port), Name::root()).await
                    }
                    ProbeKind::DnsRev => {
                        dns(SocketAddr::new(target, this.dns_port), Name::from(target)).await
                    }
                    ProbeKind::Tcp => tcp(SocketAddr::new(target, this.tcp_port)).await,
                }
            };
            tokio::time::timeout(timeout, attempt)
                .await
                .unwrap_or(ProbeOutcome::NoReply)
        }
    }
}

/// An error on receiving that only a reply can cause: the kernel reports an ICMP error (port or
/// host unreachable, administratively prohibited, …) that came back for our packet on the
/// connected socket. Errors of the local stack (no route, …) come from the send and are
/// failures.
fn is_remote_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::NetworkUnreachable
    ) || e.raw_os_error() == Some(libc::EHOSTDOWN)
        || e.raw_os_error() == Some(libc::EACCES)
        || e.raw_os_error() == Some(libc::EPROTO)
}

/// Whether `error`, reported on a probe's socket for an ICMP error that `from` sent, is the
/// network's answer to a probe of `target`: an error that only a reply can cause, sent by the
/// target itself or by a host that is not this one (this host's addresses read now; when they
/// cannot be, it is not taken).
fn answered_by_network(error: &io::Error, from: Option<IpAddr>, target: IpAddr) -> bool {
    let Some(from) = from.map(|a| a.to_canonical()) else {
        return false;
    };
    is_remote_error(error)
        && (from == target.to_canonical()
            || super::admit::host_addresses().is_ok_and(|own| !own.contains(&from)))
}

/// The failure of a probe whose socket reported `error`, sent by `from` (this host, or unknown).
fn not_answered(what: &str, error: &io::Error, from: Option<IpAddr>) -> ProbeOutcome {
    match from {
        Some(from) => {
            ProbeOutcome::Failed(format!("{what}: {error} (sent by {from}: not a reply)"))
        }
        None => ProbeOutcome::Failed(format!("{what}: {error}")),
    }
}

async fn icmp(target: IpAddr) -> ProbeOutcome {
    match echo(target).await {
        Ok((Echo::Reply, rtt)) => ProbeOutcome::Reply(rtt),
        Ok((Echo::Error { error, from }, rtt)) => {
            if answered_by_network(&error, from, target) {
                ProbeOutcome::Reply(rtt)
            } else {
                not_answered("ICMP", &error, from)
            }
        }
        Err(e) => ProbeOutcome::Failed(format!("ICMP: {e}")),
    }
}

/// A query for `name` (NS for the root, else PTR), RD clear: a resolver answers from its cache
/// or refuses, and does not recurse, which would add the recursion to the RTT.
fn dns_query(id: u16, name: Name) -> Vec<u8> {
    let qtype = if name.is_root() {
        RecordType::NS
    } else {
        RecordType::PTR
    };
    query_wire(id, Query::query(name, qtype)).expect("a query for a valid name encodes")
}

async fn dns(addr: SocketAddr, name: Name) -> ProbeOutcome {
    let id = query_id();
    let query = dns_query(id, name);
    let local: IpAddr = if addr.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    let failed = |what: &str, e: io::Error| ProbeOutcome::Failed(format!("DNS {what}: {e}"));
    let socket = match UdpSocket::bind((local, 0)).await {
        Ok(s) => s,
        Err(e) => return failed("bind", e),
    };
    if let Err(e) = icmp_error::report_errors(socket.as_fd(), addr.is_ipv6()) {
        return failed("IP_RECVERR", e);
    }
    // Connected: only the target's datagrams are received, and an ICMP error for the query is
    // reported (a port unreachable is a reply too).
    if let Err(e) = socket.connect(addr).await {
        return failed("connect", e);
    }
    let sent = Instant::now();
    if let Err(e) = socket.send(&query).await {
        return failed("send", e);
    }
    let mut buf = [0u8; 512];
    loop {
        match socket.recv(&mut buf).await {
            // A response (QR) to this query, whatever its RCODE or content.
            Ok(len) if len >= 12 && buf[..2] == id.to_be_bytes() && buf[2] & 0x80 != 0 => {
                return ProbeOutcome::Reply(sent.elapsed());
            }
            Ok(_) => {}
            Err(error) => match icmp_error::take(socket.as_fd()) {
                // Reported only because every error is asked for (a router's "no route"): no
                // answer of the target; wait on, as without.
                Some(Queued::Icmp { hard: false, .. }) => {}
                queued => {
                    let from = queued.and_then(Queued::from);
                    return if answered_by_network(&error, from, addr.ip()) {
                        ProbeOutcome::Reply(sent.elapsed())
                    } else {
                        not_answered("DNS receive", &error, from)
                    };
                }
            },
        }
    }
}

async fn tcp(addr: SocketAddr) -> ProbeOutcome {
    let sent = Instant::now();
    match TcpStream::connect(addr).await {
        Ok(stream) => {
            let rtt = sent.elapsed();
            // Closed with a reset: no TIME_WAIT left behind on either side per probe.
            let _ = stream.set_zero_linger();
            ProbeOutcome::Reply(rtt)
        }
        // A reset. (Other connect errors may come from the local stack at once, e.g. no route:
        // not a sample.)
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            ProbeOutcome::Reply(sent.elapsed())
        }
        Err(e) => ProbeOutcome::Failed(format!("TCP connect: {e}")),
    }
}

/// A DNS message id: random enough that a late response to another probe is not taken.
fn query_id() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish() as u16
}

#[cfg(test)]
mod tests {
    use hickory_proto::op::Message;

    use super::*;

    #[test]
    fn probe_kinds_parse_by_f5_and_netscaler_names() {
        let table = [
            ("icmp", ProbeKind::Icmp),
            ("PING", ProbeKind::Icmp),
            ("dns", ProbeKind::DnsDot),
            ("DNS_DOT", ProbeKind::DnsDot),
            ("dns_rev", ProbeKind::DnsRev),
            ("TCP", ProbeKind::Tcp),
        ];
        for (text, kind) in table {
            assert_eq!(text.parse::<ProbeKind>(), Ok(kind), "{text}");
        }
        for kind in ProbeKind::ALL {
            assert_eq!(kind.name().parse::<ProbeKind>(), Ok(kind));
        }
        assert!(
            "http"
                .parse::<ProbeKind>()
                .unwrap_err()
                .to_string()
                .contains("unknown probe type \"http\"")
        );
    }

    #[test]
    fn dns_probes_ask_for_the_root_ns_or_the_resolvers_ptr_without_recursion() {
        let table: [(IpAddr, &str, RecordType); 3] = [
            ("0.0.0.0".parse().unwrap(), ".", RecordType::NS),
            (
                "198.51.100.7".parse().unwrap(),
                "7.100.51.198.in-addr.arpa.",
                RecordType::PTR,
            ),
            (
                "2001:db8::7".parse().unwrap(),
                "7.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.",
                RecordType::PTR,
            ),
        ];
        for (i, (addr, name, qtype)) in table.into_iter().enumerate() {
            let qname = if i == 0 {
                Name::root()
            } else {
                Name::from(addr)
            };
            let message = Message::from_vec(&dns_query(0x1234, qname)).unwrap();
            assert_eq!(message.id, 0x1234);
            assert!(!message.recursion_desired);
            assert_eq!(message.queries.len(), 1);
            assert_eq!(message.queries[0].name().to_ascii(), name);
            assert_eq!(message.queries[0].query_type(), qtype);
        }
    }

    /// Replies per (kind, target); everything else is silence.
    struct Scripted(Vec<(ProbeKind, ProbeOutcome)>);

    impl Prober for Scripted {
        fn probe(
            &self,
            kind: ProbeKind,
            _: IpAddr,
            _: Duration,
        ) -> impl Future<Output = ProbeOutcome> + Send {
            let outcome = self
                .0
                .iter()
                .find(|(k, _)| *k == kind)
                .map_or(ProbeOutcome::NoReply, |(_, o)| o.clone());
            async move { outcome }
        }
    }

    #[tokio::test]
    async fn each_type_is_tried_only_when_the_previous_got_no_reply() {
        use ProbeKind::*;
        let ms = Duration::from_millis;
        let target: IpAddr = "192.0.2.1".parse().unwrap();
        let reply = |kind, n| (kind, ProbeOutcome::Reply(ms(n)));
        let failed = |kind| (kind, ProbeOutcome::Failed("no ICMP socket".into()));
        // (order, what the target answers, types tried, the sample's type)
        type Case = (
            Vec<ProbeKind>,
            Vec<(ProbeKind, ProbeOutcome)>,
            Vec<ProbeKind>,
            Option<ProbeKind>,
        );
        let table: Vec<Case> = vec![
            (
                DEFAULT_ORDER.to_vec(),
                vec![reply(Icmp, 10), reply(Tcp, 12)],
                vec![Icmp],
                Some(Icmp),
            ),
            (
                DEFAULT_ORDER.to_vec(),
                vec![reply(DnsDot, 11), reply(Tcp, 12)],
                vec![Icmp, DnsDot],
                Some(DnsDot),
            ),
            (
                DEFAULT_ORDER.to_vec(),
                vec![reply(Tcp, 12)],
                vec![Icmp, DnsDot, Tcp],
                Some(Tcp),
            ),
            (
                DEFAULT_ORDER.to_vec(),
                vec![],
                vec![Icmp, DnsDot, Tcp],
                None,
            ),
            // A local failure moves on like silence.
            (
                DEFAULT_ORDER.to_vec(),
                vec![failed(Icmp), reply(DnsDot, 11)],
                vec![Icmp, DnsDot],
                Some(DnsDot),
            ),
            // NetScaler `ldnsprobeOrder DNS PING TCP`.
            (
                vec![DnsRev, Icmp, Tcp],
                vec![reply(Icmp, 10), reply(DnsRev, 11)],
                vec![DnsRev],
                Some(DnsRev),
            ),
            (vec![Tcp], vec![reply(Icmp, 10)], vec![Tcp], None),
        ];
        for (order, script, tried, sample) in table {
            let prober = Scripted(script.clone());
            let mut sent = 0;
            let round = probe_in_order(&prober, &order, target, ms(2000), || {
                sent += 1;
                async {}
            })
            .await;
            let kinds: Vec<ProbeKind> = round.tried.iter().map(|(k, _)| *k).collect();
            assert_eq!(kinds, tried, "{order:?} {script:?}");
            assert_eq!(sent, tried.len(), "rate-limit hook once per probe sent");
            assert_eq!(round.sample.map(|s| s.kind), sample, "{order:?} {script:?}");
            if let Some(s) = round.sample {
                let want = script.iter().find(|(k, _)| *k == s.kind).unwrap().1.clone();
                assert_eq!(ProbeOutcome::Reply(s.rtt), want);
            }
        }
    }
}
