//! One check, ready to run ([`Checker`]: the spec parsed and loaded once), and why a check
//! failed ([`CheckError`]).

use std::{
    collections::hash_map::RandomState,
    hash::{BuildHasher, Hasher},
    net::{IpAddr, SocketAddr},
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use hickory_proto::op::ResponseCode;

use super::spec::{MonitorKind, MonitorSpec, MonitorSpecError};
use super::{dns, http, icmp, load, tcp};

/// Why a check failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("connect: {0}")]
    Connect(std::io::Error),
    #[error("TLS: {0}")]
    Tls(std::io::Error),
    #[error("HTTP: {0}")]
    Http(String),
    #[error("HTTP status {got}, expected {expected}")]
    Status { got: u16, expected: String },
    #[error("response body does not contain {0:?}")]
    Body(String),
    #[error("DNS: {0}")]
    Dns(String),
    #[error("DNS response code {got}, expected {expected}")]
    Rcode {
        got: ResponseCode,
        expected: ResponseCode,
    },
    #[error("DNS answer does not contain {0}")]
    Answer(IpAddr),
    #[error("ICMP: {0}")]
    Icmp(std::io::Error),
    #[error("load: {0}")]
    Load(#[from] load::LoadReadError),
    #[error("invalid monitor: {0}")]
    Invalid(#[from] MonitorSpecError),
}

/// A monitor's check, ready to run: everything parsed and loaded once.
pub(super) enum Checker {
    Tcp(SocketAddr),
    Http(http::HttpChecker),
    Dns(dns::DnsChecker),
    Icmp(IpAddr),
}

impl Checker {
    pub(super) fn new(
        target: IpAddr,
        service_port: u16,
        spec: &MonitorSpec,
    ) -> Result<Checker, MonitorSpecError> {
        let addr = SocketAddr::new(target, spec.port.unwrap_or(service_port));
        if spec.interval.is_zero() {
            return Err(MonitorSpecError::ZeroInterval);
        }
        if spec.timeout.is_zero() {
            return Err(MonitorSpecError::ZeroTimeout);
        }
        Ok(match &spec.kind {
            MonitorKind::Tcp => Checker::Tcp(addr),
            MonitorKind::Http(check) => Checker::Http(http::HttpChecker::new(addr, check, None)?),
            MonitorKind::Https(check, tls) => {
                Checker::Http(http::HttpChecker::new(addr, check, Some(tls))?)
            }
            MonitorKind::Dns(check) => Checker::Dns(dns::DnsChecker::new(addr, check)?),
            MonitorKind::Icmp => Checker::Icmp(target),
        })
    }

    /// One check, without a timeout of its own.
    async fn check(&self) -> Result<(), CheckError> {
        match self {
            Checker::Tcp(addr) => tcp::connect(*addr).await,
            Checker::Http(checker) => checker.check().await,
            Checker::Dns(checker) => checker.check().await,
            Checker::Icmp(target) => icmp::ping(*target).await,
        }
    }

    /// One check within `timeout`.
    pub(super) async fn check_within(&self, timeout: Duration) -> Result<(), CheckError> {
        tokio::time::timeout(timeout, self.check())
            .await
            .unwrap_or(Err(CheckError::Timeout(timeout)))
    }
}

/// Runs one check of `spec` against `target` (`port` unless the spec has its own) within the
/// spec's timeout, outside any supervisor: for tools and tests.
pub async fn check_once(target: IpAddr, port: u16, spec: &MonitorSpec) -> Result<(), CheckError> {
    let checker = Checker::new(target, port, spec).map_err(CheckError::Invalid)?;
    checker.check_within(spec.timeout).await
}

/// A random number, without a random number crate: std's hasher keys are random per process
/// and per `RandomState`, and the counter makes every call different.
pub(super) fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}
