//! What the responder answered, counted by transport and response code: one relaxed atomic
//! add per response, no lock and no allocation on the query path (read by the admin
//! endpoint's `/metrics`). The counters are striped by thread: the UDP loops of every core
//! answer at once, and one shared counter made each answer move its cache line from core to
//! core; a reader sums the stripes.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use super::Transport;

/// RCODEs 0..=23 (RFC 6895 §2.3: the header's four bits and EDNS's extension, up to
/// BADCOOKIE); any higher code is counted in the last slot.
const SLOTS: usize = 24;
/// Stripes; threads past this many share them (still correct, only slower).
const STRIPES: usize = 8;

/// One stripe's counters, by transport and RCODE, on cache lines of their own.
#[derive(Debug)]
#[repr(align(128))]
struct Stripe([[AtomicU64; SLOTS]; 2]);

/// Responses by transport and RCODE.
#[derive(Debug)]
pub struct AnswerCounts {
    stripes: Box<[Stripe; STRIPES]>,
}

impl Default for AnswerCounts {
    fn default() -> Self {
        AnswerCounts {
            stripes: Box::new(std::array::from_fn(|_| {
                Stripe(std::array::from_fn(|_| {
                    std::array::from_fn(|_| AtomicU64::new(0))
                }))
            })),
        }
    }
}

/// The calling thread's stripe: threads take them in turn as they first count.
fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Relaxed) % STRIPES;
    }
    STRIPE.with(|s| *s)
}

impl AnswerCounts {
    pub(super) fn count(&self, transport: Transport, rcode: u16) {
        let slot = usize::from(rcode).min(SLOTS - 1);
        self.stripes[stripe()].0[transport as usize][slot].fetch_add(1, Relaxed);
    }

    /// Every (transport, RCODE name, responses) with at least one response.
    pub fn nonzero(&self) -> Vec<(Transport, &'static str, u64)> {
        let mut out = Vec::new();
        for transport in [Transport::Udp, Transport::Tcp] {
            for rcode in 0..SLOTS {
                let n: u64 = self
                    .stripes
                    .iter()
                    .map(|s| s.0[transport as usize][rcode].load(Relaxed))
                    .sum();
                if n > 0 {
                    out.push((transport, rcode_name(rcode), n));
                }
            }
        }
        out
    }
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
        }
    }
}

/// The IANA mnemonic of `rcode` (the last slot: any code from 23 up).
fn rcode_name(rcode: usize) -> &'static str {
    const NAMES: [&str; SLOTS] = [
        "NOERROR",
        "FORMERR",
        "SERVFAIL",
        "NXDOMAIN",
        "NOTIMP",
        "REFUSED",
        "YXDOMAIN",
        "YXRRSET",
        "NXRRSET",
        "NOTAUTH",
        "NOTZONE",
        "DSOTYPENI",
        "RCODE12",
        "RCODE13",
        "RCODE14",
        "RCODE15",
        "BADVERS",
        "BADKEY",
        "BADTIME",
        "BADMODE",
        "BADNAME",
        "BADALG",
        "BADTRUNC",
        "BADCOOKIE",
    ];
    NAMES[rcode.min(SLOTS - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads_add_up() {
        // More threads than stripes, so that some share one: every count is still there.
        let counts = AnswerCounts::default();
        std::thread::scope(|scope| {
            for t in 0..STRIPES + 3 {
                let counts = &counts;
                scope.spawn(move || {
                    for _ in 0..1000 {
                        counts.count(Transport::Udp, 0);
                    }
                    counts.count(Transport::Tcp, if t % 2 == 0 { 3 } else { 99 });
                });
            }
        });
        let n = STRIPES as u64 + 3;
        assert_eq!(
            counts.nonzero(),
            [
                (Transport::Udp, "NOERROR", 1000 * n),
                (Transport::Tcp, "NXDOMAIN", n.div_ceil(2)),
                (Transport::Tcp, "BADCOOKIE", n / 2),
            ]
        );
    }
}
