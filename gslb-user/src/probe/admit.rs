//! Which query sources may become LDNS entries (and so probe targets). A UDP source address is
//! only a claim: anyone can send a query "from" 127.0.0.1, from a multicast group or from this
//! host's own address, and gslbd would then probe it on the sender's behalf. The rule, applied
//! by the recorder before anything is recorded and again before a round is started:
//!
//! 1. a source in a `[rtt] deny` prefix is refused, always;
//! 2. else a source in a `[rtt] allow` prefix is admitted, even if rule 3 would refuse it (a
//!    lab, or resolvers on this host's loopback);
//! 3. else a martian source is refused: unspecified (0.0.0.0/8, ::), loopback (127.0.0.0/8,
//!    ::1), link-local (169.254.0.0/16, fe80::/10), multicast (224.0.0.0/4, ff00::/8),
//!    broadcast and reserved (240.0.0.0/4, which holds 255.255.255.255), and this host's own
//!    addresses (read from its interfaces, [`host_addresses`], refreshed by the prober);
//! 4. else it is admitted.
//!
//! IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry.

use std::{
    collections::HashSet,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    sync::Arc,
};

use arc_swap::ArcSwap;
use ipnet::IpNet;

/// The operator's prefixes (`[rtt] deny` and `[rtt] allow`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourcePolicy {
    /// Never recorded nor probed; wins over everything.
    pub deny: Vec<IpNet>,
    /// Admitted even when martian or one of this host's addresses (but not when denied).
    pub allow: Vec<IpNet>,
}

/// Why a source is not recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// In a `[rtt] deny` prefix.
    Denied,
    /// Unspecified, loopback, link-local, multicast, broadcast or reserved.
    Martian,
    /// One of this host's own addresses.
    OwnAddress,
}

/// Whether `addr` can be nothing but a claim: no resolver on the internet sends from it.
pub fn is_martian(addr: IpAddr) -> bool {
    match addr.to_canonical() {
        IpAddr::V4(a) => {
            let first = a.octets()[0];
            first == 0 // "this network", 0.0.0.0 included
                || a.is_loopback()
                || a.is_link_local()
                || a.is_multicast()
                || first >= 240 // reserved, and the limited broadcast 255.255.255.255
        }
        IpAddr::V6(a) => {
            a.is_unspecified() || a.is_loopback() || a.is_unicast_link_local() || a.is_multicast()
        }
    }
}

/// The rule of the module documentation: the policy, and this host's addresses as last read.
/// Cheap to clone; clones share the host's addresses and the policy, which
/// [`SourceFilter::set_policy`] and [`SourceFilter::set_host_addresses`] replace atomically.
#[derive(Clone, Debug)]
pub struct SourceFilter {
    policy: Arc<ArcSwap<SourcePolicy>>,
    own: Arc<ArcSwap<HashSet<IpAddr>>>,
    /// The host's addresses were given, not read: refreshes keep them (tests).
    fixed: bool,
}

impl Default for SourceFilter {
    /// No prefixes; this host's addresses read now (none if they cannot be read: the
    /// prober's refresh tries again).
    fn default() -> Self {
        SourceFilter {
            fixed: false,
            ..SourceFilter::with_host_addresses(host_addresses().unwrap_or_default())
        }
    }
}

impl SourceFilter {
    /// A filter that takes `own` as this host's addresses for good: refreshes keep them
    /// (tests, whose resolvers' addresses might be the test host's; [`SourceFilter::default`]
    /// reads the real ones, and the prober refreshes them).
    pub fn with_host_addresses(own: HashSet<IpAddr>) -> Self {
        SourceFilter {
            policy: Arc::new(ArcSwap::from_pointee(SourcePolicy::default())),
            own: Arc::new(ArcSwap::from_pointee(canonical(own))),
            fixed: true,
        }
    }

    pub fn set_policy(&self, policy: SourcePolicy) {
        self.policy.store(Arc::new(policy));
    }

    pub fn policy(&self) -> Arc<SourcePolicy> {
        self.policy.load_full()
    }

    pub fn set_host_addresses(&self, own: HashSet<IpAddr>) {
        self.own.store(Arc::new(canonical(own)));
    }

    /// Reads this host's addresses again (unless they were given); on failure the last ones
    /// stay.
    pub fn refresh_host_addresses(&self) -> std::io::Result<()> {
        if !self.fixed {
            self.set_host_addresses(host_addresses()?);
        }
        Ok(())
    }

    /// `Ok` when `addr` may be recorded and probed; see the module documentation.
    pub fn check(&self, addr: IpAddr) -> Result<(), Refusal> {
        let addr = addr.to_canonical();
        let policy = self.policy.load();
        if policy.deny.iter().any(|n| n.contains(&addr)) {
            return Err(Refusal::Denied);
        }
        if policy.allow.iter().any(|n| n.contains(&addr)) {
            return Ok(());
        }
        if is_martian(addr) {
            return Err(Refusal::Martian);
        }
        if self.own.load().contains(&addr) {
            return Err(Refusal::OwnAddress);
        }
        Ok(())
    }
}

fn canonical(own: HashSet<IpAddr>) -> HashSet<IpAddr> {
    own.into_iter().map(|a| a.to_canonical()).collect()
}

/// The addresses of this host's interfaces (in the calling thread's network namespace).
pub fn host_addresses() -> std::io::Result<HashSet<IpAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list that we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&raw mut head) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut out = HashSet::new();
    let mut cursor = head;
    while !cursor.is_null() {
        // SAFETY: `cursor` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cursor };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points at a sockaddr whose family tells its real type.
            let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
            if family == libc::AF_INET {
                // SAFETY: AF_INET: a sockaddr_in.
                // The kernel's sockaddr storage is aligned for the family's own type.
                #[allow(clippy::cast_ptr_alignment)]
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                out.insert(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                    sin.sin_addr.s_addr,
                ))));
            } else if family == libc::AF_INET6 {
                // SAFETY: AF_INET6: a sockaddr_in6.
                // The kernel's sockaddr storage is aligned for the family's own type.
                #[allow(clippy::cast_ptr_alignment)]
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                out.insert(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
            }
        }
        cursor = ifa.ifa_next;
    }
    // SAFETY: the list from getifaddrs, freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn martian_sources_are_refused_unless_allowed_and_deny_always_wins() {
        let own: HashSet<IpAddr> = [ip("192.0.2.53"), ip("2001:db8::53")].into();
        let filter = SourceFilter::with_host_addresses(own);
        // (address, with no prefixes, with allow 127.0.0.0/8 + 192.0.2.53/32 + ff02::/16
        //  and deny 198.51.100.0/24 + 127.0.0.9/32)
        use Refusal::*;
        type Verdict = Result<(), Refusal>;
        let table: &[(&str, Verdict, Verdict)] = &[
            ("127.0.0.1", Err(Martian), Ok(())),
            ("127.0.0.9", Err(Martian), Err(Denied)),
            ("::ffff:127.0.0.1", Err(Martian), Ok(())),
            ("::1", Err(Martian), Err(Martian)),
            ("0.0.0.0", Err(Martian), Err(Martian)),
            ("0.1.2.3", Err(Martian), Err(Martian)),
            ("::", Err(Martian), Err(Martian)),
            ("169.254.1.1", Err(Martian), Err(Martian)),
            ("fe80::1", Err(Martian), Err(Martian)),
            ("224.0.0.1", Err(Martian), Err(Martian)),
            ("239.255.255.250", Err(Martian), Err(Martian)),
            ("ff02::1", Err(Martian), Ok(())),
            ("255.255.255.255", Err(Martian), Err(Martian)),
            ("240.0.0.1", Err(Martian), Err(Martian)),
            ("192.0.2.53", Err(OwnAddress), Ok(())),
            ("::ffff:192.0.2.53", Err(OwnAddress), Ok(())),
            ("2001:db8::53", Err(OwnAddress), Err(OwnAddress)),
            ("198.51.100.7", Ok(()), Err(Denied)),
            ("203.0.113.7", Ok(()), Ok(())),
            ("2001:db8::54", Ok(()), Ok(())),
            // Just outside the martian blocks.
            ("1.0.0.1", Ok(()), Ok(())),
            ("126.255.255.255", Ok(()), Ok(())),
            ("128.0.0.0", Ok(()), Ok(())),
            ("223.255.255.255", Ok(()), Ok(())),
            ("169.253.255.255", Ok(()), Ok(())),
            ("fec0::1", Ok(()), Ok(())),
        ];
        for (addr, plain, _) in table {
            assert_eq!(filter.check(ip(addr)), *plain, "{addr} without prefixes");
        }
        filter.set_policy(SourcePolicy {
            deny: nets(&["198.51.100.0/24", "127.0.0.9/32"]),
            allow: nets(&[
                "127.0.0.0/8",
                "192.0.2.53/32",
                "ff02::/16",
                "198.51.100.0/25",
            ]),
        });
        for (addr, _, with) in table {
            assert_eq!(filter.check(ip(addr)), *with, "{addr} with prefixes");
        }
    }

    #[test]
    fn the_host_addresses_include_loopback_and_a_refresh_replaces_them() {
        let own = host_addresses().expect("getifaddrs");
        assert!(own.contains(&ip("127.0.0.1")), "{own:?}");
        let filter = SourceFilter::with_host_addresses(HashSet::new());
        filter.set_host_addresses([ip("203.0.113.1")].into());
        assert_eq!(filter.check(ip("203.0.113.1")), Err(Refusal::OwnAddress));
        filter.set_host_addresses([ip("203.0.113.2")].into());
        assert_eq!(filter.check(ip("203.0.113.1")), Ok(()));
        assert_eq!(filter.check(ip("203.0.113.2")), Err(Refusal::OwnAddress));
        // Given addresses stay through a refresh; read ones are replaced by the host's.
        filter.refresh_host_addresses().unwrap();
        assert_eq!(filter.check(ip("203.0.113.2")), Err(Refusal::OwnAddress));
        let read = SourceFilter::default();
        read.set_host_addresses([ip("203.0.113.2")].into());
        read.refresh_host_addresses().unwrap();
        assert_eq!(read.check(ip("203.0.113.2")), Ok(()));
        let real = own.iter().find(|a| !is_martian(**a));
        if let Some(&real) = real {
            assert_eq!(read.check(real), Err(Refusal::OwnAddress), "{real}");
        }
    }
}
