//! The kernel side as the rest of the code sees it: loads the XDP object built by build.rs,
//! attaches and pins it, and hides the raw maps behind [`AnswerTable::publish`],
//! [`Dataplane::counters`] and [`LdnsMap::scan`] (the resolvers the fast path has seen).
//! `loader`: load, attach, pin. `program_config`: `CONFIG`, written a word at a time through
//! its memory mapping. `publish`: the atomic republish (`refine`: whether the view
//! trie can be edited in place; `choices`: the `RTT_CHOICE` pages by parity; `ecs_allow`:
//! `server.ecs_allow` in `ECS_ALLOW`, by parity; `grace`: the RCU grace period after a
//! switch, waited for on a thread, before a replaced generation is deleted). `batch`: batch writes and deletes. `syscall`: the raw `bpf(2)` call they and `grace` make. `encode`: map keys and
//! values. `ldns`: the resolver map. `counters`: the hit and miss counters. `rotors`: the
//! `ROTOR` slot of each rotating answer set. `shortcuts`: what spares a hit lookups (default-view
//! copies, any-view hints). `heartbeat`: the controller's heartbeat the
//! program trusts for `server.stale_after_s`. `local_mac`: the attached interfaces' own MACs,
//! the only destinations the program answers. `pin_dir`: the pin directory, opened so that no
//! symbolic link in it is followed. `jit_lines`: a loaded program's JIT code as
//! source lines, for profiles.

mod batch;
mod choices;
mod counters;
mod ecs_allow;
pub mod encode;
mod error;
mod grace;
mod heartbeat;
mod jit_lines;
mod ldns;
mod loader;
mod local_mac;
mod pin_dir;
mod program_config;
mod publish;
mod refine;
mod rotors;
mod shortcuts;
mod syscall;
mod xdp_mode;

pub use self::counters::{CounterReader, Counters, pinned_counters};
pub use self::ecs_allow::ecs_allow_key;
pub use self::encode::{
    answer_key, answer_record, answer_set, domain_key, listen_key, listen_set, mapped, ones_sum,
    unmapped, view_key, wire_name,
};
pub use self::error::DataplaneError;
pub use self::heartbeat::HeartbeatMap;
pub use self::jit_lines::{JitLine, JitLines, jit_lines};
pub use self::ldns::{LdnsMap, LdnsScan, SeenLdns, monotonic_ns};
pub use self::loader::{Dataplane, OBJECT};
pub use self::local_mac::{interface_mac, mac_word};
pub use self::pin_dir::{Entry as PinEntry, PinDir};
pub use self::publish::{AnswerTable, PublishStats};
pub use self::xdp_mode::{ParseXdpModeError, XdpMode};

use self::error::{Result, map_err};

/// Whether this test may load XDP programs (root): says why it skips when it cannot, and fails
/// instead under `GSLB_REQUIRE_PRIVILEGED=1`.
#[cfg(test)]
pub(crate) fn can_load_xdp() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert_ne!(
        std::env::var("GSLB_REQUIRE_PRIVILEGED").as_deref(),
        Ok("1"),
        "needs root"
    );
    eprintln!("skipped: loading XDP programs needs root");
    false
}
