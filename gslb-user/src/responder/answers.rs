//! What the responder answered, counted by transport and response code: one relaxed atomic
//! add per response, no lock and no allocation on the query path (read by the admin
//! endpoint's `/metrics`).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::Transport;

/// RCODEs 0..=23 (RFC 6895 §2.3: the header's four bits and EDNS's extension, up to
/// BADCOOKIE); any higher code is counted in the last slot.
const SLOTS: usize = 24;

/// Responses by transport and RCODE.
#[derive(Debug)]
pub struct AnswerCounts {
    by: [[AtomicU64; SLOTS]; 2],
}

impl Default for AnswerCounts {
    fn default() -> Self {
        AnswerCounts {
            by: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
        }
    }
}

impl AnswerCounts {
    pub(super) fn count(&self, transport: Transport, rcode: u16) {
        let slot = usize::from(rcode).min(SLOTS - 1);
        self.by[transport as usize][slot].fetch_add(1, Relaxed);
    }

    /// Every (transport, RCODE name, responses) with at least one response.
    pub fn nonzero(&self) -> Vec<(Transport, &'static str, u64)> {
        let mut out = Vec::new();
        for transport in [Transport::Udp, Transport::Tcp] {
            for (rcode, n) in self.by[transport as usize].iter().enumerate() {
                let n = n.load(Relaxed);
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
