//! Shared by the XDP tests (and the XDP benchmark): the privilege check, a loaded dataplane with
//! the test configuration, builders for Ethernet frames carrying DNS queries, and running the
//! program on a frame with the checks of its reply. Also shared by the other tests: asking the
//! responder or a server on the loopback, gslbd run in the test's process, and the check of a
//! configuration's errors against the places its cases mark.
//!
//! The test configuration, the frame builders and the differential check of a fast-path reply
//! live in the kit (`gslb_tests::xdp`, re-exported here), where the fuzz targets reach them too.
//!
//! Files by job: `xdp.rs` (the dataplane loaded, the program run), `replies.rs` (its replies
//! checked), `dns.rs` (messages, asking the responder or a server), `gslbd.rs` (gslbd in this
//! process), `loopback.rs` (sockets and backends on the loopback), `metrics.rs`.
#![allow(dead_code)] // each test binary uses a different part

use std::net::IpAddr;
use std::path::Path;

use gslb_user::config::{Config, ConfigError};

// ---- Privileges and setup ----

/// Every privileged test of these modules starts here: [`gslb_tests::privileged`], named after
/// the running test (libtest names its thread so).
pub(crate) fn privileged() -> bool {
    gslb_tests::privileged(std::thread::current().name().unwrap_or("this test"))
}

/// Logs of the code under test, for the test that runs it: `RUST_LOG` (as gslbd reads it, e.g.
/// `RUST_LOG=gslb_user=debug`) picks what is logged, nothing without it. Written through
/// libtest's capture, so only a failing test's logs are shown (or every test's with
/// `--nocapture`). Called by the kit's setup helpers ([`dataplane`], [`Gslbd::start_bound`]); once
/// per process, as tracing has one global subscriber.
pub(crate) fn init_tracing() {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() else {
            return;
        };
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(filter)
            .try_init();
    });
}

mod dns;
mod gslbd;
mod replies;
mod xdp;

// Named as `common::X` whatever file holds them; each includer (the tests, the XDP and scale
// benches) uses a different part.
#[allow(unused_imports)]
pub(crate) use dns::*;
#[allow(unused_imports)]
pub(crate) use gslbd::*;
#[allow(unused_imports)]
pub(crate) use replies::*;
#[allow(unused_imports)]
pub(crate) use xdp::*;

// ---- The test configuration, frames and the differential check (in the kit) ----

#[allow(unused_imports)] // each includer uses a different part
pub(crate) use gslb_tests::xdp::*;

pub(crate) fn ips(addrs: &[&str]) -> Vec<IpAddr> {
    addrs
        .iter()
        .map(|a| a.parse().expect("test address"))
        .collect()
}

// ---- Configuration errors ----

/// Each case is a configuration text with one line marked `#<`, the text on that line the error
/// must point at, and what its reason must contain. Parsed as `file`, every case must be
/// refused with that reason, at that line and column of `file`; the failures of all cases are
/// reported at once.
pub(crate) fn assert_refused_at_markers(cases: &[(String, &str, &str)], file: &Path) {
    let mut failures = Vec::new();
    for (text, at, reason) in cases {
        let (line_no, line) = text
            .lines()
            .enumerate()
            .find(|(_, l)| l.contains("#<"))
            .expect("case has a #< marker");
        let want = (
            line_no + 1,
            line[..line
                .find(at)
                .unwrap_or_else(|| panic!("{at:?} in {line:?}"))]
                .chars()
                .count()
                + 1,
        );
        match Config::parse(text, file) {
            Ok(_) => failures.push(format!("accepted, wanted {reason:?}:\n{text}")),
            Err(ConfigError::Invalid {
                file: f,
                line,
                column,
                reason: got,
            }) => {
                if !got.contains(reason) || (line, column) != want || f != file {
                    failures.push(format!(
                        "{}:{line}:{column}: {got}\n  wanted {}:{}:{}: …{reason}…\n{text}",
                        f.display(),
                        file.display(),
                        want.0,
                        want.1
                    ));
                }
            }
            Err(e) => failures.push(format!("{e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

// ---- Load monitor backends ----

mod loopback;
pub(crate) mod metrics;

#[allow(unused_imports)] // the XDP benchmark includes this kit and uses none of them
pub(crate) use loopback::{
    Backend, PortTaken, bound_dns, bound_dns_on, bound_mep, refusing_tcp_port, start_on_picked_port,
};
