//! The LDNS RTT prober (`gslb_user::probe`): the supervisor with a scripted prober on a paused
//! clock (order, interval, tolerance, expiry, limits, merge, dump), the real probers on the
//! loopback (TCP, DNS, ICMP), and the fast path's LDNS recording with BPF_PROG_TEST_RUN (root).

mod fast_path;
mod net;
mod supervisor;

use std::{net::IpAddr, time::Duration};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}
