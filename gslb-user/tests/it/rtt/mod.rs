//! Dynamic RTT: `probe` (the prober's supervisor), `probe_icmp_errors`, `flood` (the prober
//! under attack), `feed` (the fast path's `LDNS` map), `world` (the rtt method through the
//! controller), `daemon` (gslbd's RTT wiring and control socket).

mod daemon;
mod feed;
mod flood;
mod probe;
mod probe_icmp_errors;
mod world;
