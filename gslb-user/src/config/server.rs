//! `[server]`: listening addresses, the XDP fast path, EDNS and the local site.

use std::net::IpAddr;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;
use toml::Spanned;

use super::error::ConfigError;
use super::names::Seen;
use super::validate::{Int, List, Str, Validator};
use crate::dataplane::XdpMode;

const DEFAULT_DNS_PORT: u16 = 53;
const DEFAULT_EDNS_UDP_SIZE: u16 = 1232;
const EDNS_UDP_SIZE_RANGE: RangeInclusive<i64> = 512..=4096;
const DEFAULT_PIN_PATH: &str = "/sys/fs/bpf/gslb";
/// Default of `server.state_file`: in the unit's `StateDirectory=gslb`, a directory gslbd owns
/// (given to `server.user` at start, [`crate::privilege::give_state_dir`]).
pub const DEFAULT_STATE_FILE: &str = "/var/lib/gslb/admin-state";

/// `[server]`: where and how DNS is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// UDP/TCP port DNS is answered on (never 0).
    pub dns_port: u16,
    /// Addresses DNS is answered on; non-empty, no duplicates.
    pub listen: Vec<IpAddr>,
    /// EDNS(0) UDP payload size we advertise, 512..=4096.
    pub edns_udp_size: u16,
    /// Interface to attach the XDP program to, if any.
    pub interface: Option<String>,
    pub xdp_mode: XdpMode,
    /// bpffs directory where maps are pinned (absolute).
    pub pin_path: PathBuf,
    /// The `[[site]]` this gslbd runs at: it probes RTTs for that site's column and takes
    /// other sites' service states from MEP.
    pub site: Option<String>,
    /// TCP connection limits (`tcp_*` keys; `clients.rs`); changing them needs a restart.
    pub tcp: crate::server::TcpLimits,
    /// `ecs_allow`: the resolvers whose EDNS Client Subnet is used; from any other client the
    /// option is ignored and its source address is the client. `None` (absent): everyone's.
    pub ecs_allow: Option<Vec<IpNet>>,
    /// `stale_after_s` (seconds, default 60; 0 = never): how long the fast path keeps
    /// answering after the last heartbeat of a gslbd (which beats every quarter of it). Past
    /// it, XDP passes every frame (counted `stale`), so with gslbd dead and XDP left attached
    /// resolvers get no answer here and fail over to another server, instead of answers that
    /// no longer follow health. `None`: never stale. 1..=86400; changes need a restart.
    pub stale_after: Option<Duration>,
    /// `user`: the user gslbd becomes once it has loaded, pinned and bound as root, keeping only
    /// the capabilities it uses (`privilege.rs`); an unknown user is refused at load. `None`
    /// (absent): gslbd stays as it was started. Changes need a restart.
    pub user: Option<crate::privilege::User>,
    /// `state_file` (absolute; default `/var/lib/gslb/admin-state`, the unit's state directory): where gslbd keeps the admin
    /// state (`gslbctl service|site|domain disable`, `crate::steering`), written (a temporary
    /// file beside it, then a rename) on every change and read at start, so that a disabled
    /// service stays disabled across restarts. With `user`, its directory must be the user's:
    /// gslbd gives it to the user at start when it is gslbd's own (the default's, or one it
    /// makes), and refuses to start when it is another the user may not write in. Changes need
    /// a restart.
    pub state_file: PathBuf,
    /// `socket_affinity` (default false): each UDP socket of an address is tied to one CPU
    /// (SO_INCOMING_CPU: the kernel hands it the datagrams it receives on that CPU) and its
    /// loop's thread runs there (`daemon::listen`, `server::udp`), so a query is answered on
    /// the CPU that received it, with no wake-up of a thread on another CPU. For NICs with at
    /// least as many receive queues as CPUs (or RPS), and for loopback and veth, where a
    /// datagram is received on its sender's CPU; with fewer queues the CPUs that receive take
    /// every query (as Knot's `socket-affinity`, off by default for that reason). Changes need
    /// a restart.
    pub socket_affinity: bool,
    /// `identity`, `nsid` and `version` (`identity.rs`).
    pub identity: crate::model::Identity,
    /// `cookie_secret` and `cookie_previous_secret` (`identity.rs`).
    pub cookies: Option<crate::model::CookieSecrets>,
}

/// Default of `server.stale_after_s`.
pub const DEFAULT_STALE_AFTER_S: i64 = 60;
/// Values of `server.stale_after_s` other than 0: a second (the heartbeat beats four times
/// within it) to a day.
const STALE_AFTER_RANGE: RangeInclusive<i64> = 1..=86_400;

// Integers are read as i64 (TOML's integer type) so out-of-range values get our
// message rather than a generic serde one.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    pub(super) dns_port: Option<Int>,
    pub(super) listen: List,
    pub(super) edns_udp_size: Option<Int>,
    pub(super) interface: Option<Str>,
    #[serde(default)]
    pub(super) xdp_mode: XdpMode,
    pub(super) pin_path: Option<Str>,
    pub(super) site: Option<Str>,
    pub(super) tcp_max_connections: Option<Int>,
    pub(super) tcp_max_per_address: Option<Int>,
    pub(super) tcp_idle_timeout_ms: Option<Int>,
    pub(super) tcp_message_timeout_ms: Option<Int>,
    pub(super) ecs_allow: Option<List>,
    pub(super) stale_after_s: Option<Int>,
    pub(super) user: Option<Str>,
    pub(super) state_file: Option<Str>,
    pub(super) socket_affinity: Option<Spanned<bool>>,
    pub(super) identity: Option<Str>,
    pub(super) nsid: Option<Spanned<bool>>,
    pub(super) version: Option<Str>,
    pub(super) cookie_secret: Option<Str>,
    pub(super) cookie_previous_secret: Option<Str>,
}

impl Validator<'_> {
    pub(super) fn server(&self, raw: RawServer) -> Result<Server, ConfigError> {
        let dns_port = match raw.dns_port {
            None => DEFAULT_DNS_PORT,
            Some(p) => match u16::try_from(*p.get_ref()) {
                Ok(port) if port != 0 => port,
                _ => {
                    return Err(self.error(
                        p.span(),
                        format!("server.dns_port: {} is not a port (1..=65535)", p.get_ref()),
                    ));
                }
            },
        };

        let edns_udp_size = match raw.edns_udp_size {
            None => DEFAULT_EDNS_UDP_SIZE,
            Some(s) if EDNS_UDP_SIZE_RANGE.contains(s.get_ref()) => *s.get_ref() as u16,
            Some(s) => {
                return Err(self.error(
                    s.span(),
                    format!(
                        "server.edns_udp_size: {} out of range {EDNS_UDP_SIZE_RANGE:?}",
                        s.get_ref()
                    ),
                ));
            }
        };

        if raw.listen.get_ref().is_empty() {
            return Err(self.error(
                raw.listen.span(),
                "server.listen: at least one address is required",
            ));
        }
        let mut seen = Seen::new();
        let mut listen = Vec::new();
        for s in raw.listen.into_inner() {
            let ip: IpAddr = s.get_ref().parse().map_err(|_| {
                self.error(
                    s.span(),
                    format!("server.listen: {:?} is not an IP address", s.get_ref()),
                )
            })?;
            if let Some(first) = seen.first(ip, self.line(s.span())) {
                return Err(self.error(
                    s.span(),
                    format!("server.listen: {ip} listed twice (first on line {first})"),
                ));
            }
            listen.push(ip);
        }

        let interface = match raw.interface {
            None => None,
            Some(i) => {
                // The kernel's own rule, so a typo fails here, not at attach time.
                let name = i.get_ref();
                if !crate::health::link::valid_interface_name(name) {
                    return Err(self.error(
                        i.span(),
                        format!("server.interface: {name:?} is not a valid interface name"),
                    ));
                }
                Some(i.into_inner())
            }
        };

        let pin_path = match raw.pin_path {
            None => PathBuf::from(DEFAULT_PIN_PATH),
            // A relative pin path would depend on the daemon's working directory.
            Some(p) if Path::new(p.get_ref()).is_absolute() => PathBuf::from(p.into_inner()),
            Some(p) => {
                return Err(self.error(
                    p.span(),
                    format!(
                        "server.pin_path: {:?} must be an absolute path",
                        p.get_ref()
                    ),
                ));
            }
        };

        let tcp = self.tcp_limits(
            raw.tcp_max_connections,
            raw.tcp_max_per_address,
            raw.tcp_idle_timeout_ms,
            raw.tcp_message_timeout_ms,
        )?;
        let ecs_allow = raw.ecs_allow.map(|l| self.ecs_allow(&l)).transpose()?;
        let stale_after = match raw.stale_after_s {
            None => Some(Duration::from_secs(DEFAULT_STALE_AFTER_S as u64)),
            Some(s) if *s.get_ref() == 0 => None,
            Some(s) if STALE_AFTER_RANGE.contains(s.get_ref()) => {
                Some(Duration::from_secs(*s.get_ref() as u64))
            }
            Some(s) => {
                return Err(self.error(
                    s.span(),
                    format!(
                        "server.stale_after_s: {} out of range (0 = never, or {STALE_AFTER_RANGE:?} seconds)",
                        s.get_ref()
                    ),
                ));
            }
        };

        let user = match raw.user {
            None => None,
            Some(u) => match crate::privilege::User::lookup(u.get_ref()) {
                Ok(Some(user)) => Some(user),
                Ok(None) => {
                    return Err(self.error(
                        u.span(),
                        format!("server.user: no user {:?} on this system", u.get_ref()),
                    ));
                }
                Err(error) => {
                    return Err(self.error(
                        u.span(),
                        format!("server.user: looking up {:?}: {error}", u.get_ref()),
                    ));
                }
            },
        };

        let state_file = match raw.state_file {
            None => PathBuf::from(DEFAULT_STATE_FILE),
            // Relative would depend on the working directory; a directory cannot be renamed
            // over.
            Some(p)
                if Path::new(p.get_ref()).is_absolute()
                    && !p.get_ref().ends_with('/')
                    && Path::new(p.get_ref()).file_name().is_some() =>
            {
                PathBuf::from(p.into_inner())
            }
            Some(p) => {
                return Err(self.error(
                    p.span(),
                    format!(
                        "server.state_file: {:?} must be an absolute path to a file",
                        p.get_ref()
                    ),
                ));
            }
        };

        Ok(Server {
            dns_port,
            listen,
            edns_udp_size,
            interface,
            xdp_mode: raw.xdp_mode,
            pin_path,
            // Checked against the sites once they are read (Validator::config).
            site: raw.site.map(Spanned::into_inner),
            tcp,
            ecs_allow,
            stale_after,
            user,
            state_file,
            socket_affinity: raw.socket_affinity.is_some_and(Spanned::into_inner),
            identity: self.identity(raw.identity, raw.nsid, raw.version)?,
            cookies: self.cookies(raw.cookie_secret, raw.cookie_previous_secret)?,
        })
    }
}
