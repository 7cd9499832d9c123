//! Link load monitor (F5 link bandwidth, spec §5): an interface's inbound bytes per second from
//! the kernel's counter `/sys/class/net/<interface>/statistics/rx_bytes`, sampled every
//! `interval`, and whether it is over the link's threshold.
//!
//! "Over" has the same hysteresis as a monitor's DOWN: `over_after` samples over the threshold
//! in a row make the link over, `under_after` samples at or under it in a row make it normal
//! again, so one burst does not move answers back and forth.
//!
//! [`LinkMonitor::set_links`] follows a reloaded configuration link by link: an unchanged link
//! keeps its task and its over state (a reload that touches another link does not move this
//! one's answers back), a changed one starts again from normal, a removed one stops and leaves
//! [`LinkMonitor::loads`] at once.

use std::{
    collections::HashMap,
    io,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::state::MonitorTracker;
use crate::supervise::{self, Supervised};

/// Where the kernel shows the interfaces' counters.
pub const SYS_CLASS_NET: &str = "/sys/class/net";

/// One link to watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkSpec {
    /// The link's id (key of [`LinkMonitor::loads`]).
    pub link: String,
    /// The interface whose inbound bytes are counted, e.g. `eth0`.
    pub interface: String,
    pub interval: Duration,
    /// Inbound bytes per second above which the link is over; 0: never over.
    pub threshold_bytes_per_sec: u64,
    /// Samples over the threshold in a row that make the link over; 0 acts as 1.
    pub over_after: u32,
    /// Samples at or under the threshold in a row that make it normal again; 0 acts as 1.
    pub under_after: u32,
}

/// A link's load as last sampled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkLoad {
    pub interface: String,
    /// Inbound bytes per second over the last interval; `None` until two samples were read.
    pub rx_bytes_per_sec: Option<u64>,
    pub over: bool,
    /// Times the link went over or back.
    pub transitions: u64,
    pub at: SystemTime,
    /// Why the counter could not be read, when it could not.
    pub error: Option<String>,
}

/// Rates from samples of a growing byte counter.
#[derive(Clone, Debug, Default)]
pub struct RateMeter {
    last: Option<(Instant, u64)>,
}

impl RateMeter {
    /// Takes the counter's value at `at`; returns the bytes per second since the previous
    /// sample. `None` for the first sample, when no time passed, and when the counter went
    /// backwards (the interface was recreated): the next sample measures from this one.
    pub fn sample(&mut self, at: Instant, counter: u64) -> Option<u64> {
        let previous = self.last.replace((at, counter));
        let (then, before) = previous?;
        let elapsed = at.checked_duration_since(then)?.as_nanos();
        if elapsed == 0 || counter < before {
            return None;
        }
        let rate = u128::from(counter - before) * 1_000_000_000 / elapsed;
        Some(u64::try_from(rate).unwrap_or(u64::MAX))
    }
}

/// Whether the kernel accepts `name` as an interface name (its `dev_valid_name()`): 1 to 15
/// bytes (IFNAMSIZ - 1), not `.` or `..`, no '/', ':' or white space. Such a name is one path
/// component, so it cannot lead [`rx_bytes`] out of its root.
pub fn valid_interface_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 16
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace())
}

/// Reads `interface`'s inbound byte counter under `root` (normally [`SYS_CLASS_NET`]).
pub fn rx_bytes(root: &Path, interface: &str) -> io::Result<u64> {
    if !valid_interface_name(interface) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name {interface:?}"),
        ));
    }
    let path = root.join(interface).join("statistics/rx_bytes");
    let text = std::fs::read_to_string(&path)?;
    text.trim().parse().map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

/// Samples the links, each in its own task, until dropped.
pub struct LinkMonitor {
    sender: Arc<watch::Sender<HashMap<String, LinkLoad>>>,
    loads: watch::Receiver<HashMap<String, LinkLoad>>,
    root: Arc<PathBuf>,
    tasks: HashMap<String, Sampler>,
}

/// One link's sampling task.
struct Sampler {
    spec: LinkSpec,
    task: Supervised,
    /// Set before the task is aborted: an abort takes effect at the task's next await, and a
    /// task running on another worker meanwhile must not put its link back into the loads.
    stopped: Arc<AtomicBool>,
}

impl LinkMonitor {
    /// Starts sampling `links` from [`SYS_CLASS_NET`]. Needs a tokio runtime.
    pub fn spawn(links: Vec<LinkSpec>) -> Self {
        Self::spawn_with_root(links, SYS_CLASS_NET.into())
    }

    /// Starts sampling `links` from counters under `root` (tests use a directory of their own).
    pub fn spawn_with_root(links: Vec<LinkSpec>, root: PathBuf) -> Self {
        let (sender, loads) = watch::channel(HashMap::new());
        let mut monitor = LinkMonitor {
            sender: Arc::new(sender),
            loads,
            root: Arc::new(root),
            tasks: HashMap::new(),
        };
        monitor.set_links(links);
        monitor
    }

    /// The links' loads, updated after every sample.
    pub fn loads(&self) -> watch::Receiver<HashMap<String, LinkLoad>> {
        self.loads.clone()
    }

    /// Samples exactly `links` from now on: new links start, removed ones stop and leave the
    /// loads, changed ones start again (not over), unchanged ones carry on with their state.
    /// Needs a tokio runtime.
    pub fn set_links(&mut self, links: Vec<LinkSpec>) {
        let wanted: HashMap<String, LinkSpec> =
            links.into_iter().map(|l| (l.link.clone(), l)).collect();
        let stale: Vec<String> = self
            .tasks
            .iter()
            .filter(|(link, sampler)| wanted.get(*link) != Some(&sampler.spec))
            .map(|(link, _)| link.clone())
            .collect();
        for link in &stale {
            if let Some(sampler) = self.tasks.remove(link) {
                sampler.stop();
                info!(link, interface = %sampler.spec.interface, "link sampling stopped");
            }
        }
        // After every `stopped` flag is set: a stopped task's last sample, if it is being sent
        // right now, is either in before this removal or not sent at all (same lock).
        self.sender.send_if_modified(|loads| {
            let before = loads.len();
            loads.retain(|link, _| self.tasks.contains_key(link));
            loads.len() != before
        });
        for (link, spec) in wanted {
            if self.tasks.contains_key(&link) {
                continue;
            }
            info!(
                link,
                interface = %spec.interface,
                threshold_bytes_per_sec = spec.threshold_bytes_per_sec,
                interval_ms = spec.interval.as_millis() as u64,
                over_after = spec.over_after,
                under_after = spec.under_after,
                "link sampling started"
            );
            let stopped = Arc::new(AtomicBool::new(false));
            let task = supervise::spawn(format!("link/{link}"), {
                let (spec, root, sender, flag) = (
                    spec.clone(),
                    self.root.clone(),
                    self.sender.clone(),
                    stopped.clone(),
                );
                move |_| sample_link(spec.clone(), root.clone(), sender.clone(), flag.clone())
            });
            self.tasks.insert(
                link,
                Sampler {
                    spec,
                    task,
                    stopped,
                },
            );
        }
    }
}

impl Sampler {
    fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.task.abort();
    }
}

impl Drop for LinkMonitor {
    fn drop(&mut self) {
        for sampler in self.tasks.values() {
            sampler.stop();
        }
    }
}

async fn sample_link(
    spec: LinkSpec,
    root: Arc<PathBuf>,
    loads: Arc<watch::Sender<HashMap<String, LinkLoad>>>,
    stopped: Arc<AtomicBool>,
) {
    let mut ticker = tokio::time::interval(spec.interval.max(Duration::from_millis(1)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut meter = RateMeter::default();
    // "Up" here means "not over".
    let mut normal = MonitorTracker::new(true, spec.over_after, spec.under_after);
    let mut transitions = 0;
    loop {
        ticker.tick().await;
        let (rate, error) = match rx_bytes(&root, &spec.interface) {
            Ok(counter) => (meter.sample(Instant::now(), counter), None),
            Err(error) => {
                debug!(link = %spec.link, interface = %spec.interface, %error, "link counter");
                meter = RateMeter::default();
                (None, Some(error.to_string()))
            }
        };
        if let Some(rate) = rate
            && spec.threshold_bytes_per_sec > 0
            && let Some(now_normal) = normal.record(rate <= spec.threshold_bytes_per_sec)
        {
            transitions += 1;
            let (link, interface, threshold) =
                (&spec.link, &spec.interface, spec.threshold_bytes_per_sec);
            if now_normal {
                info!(
                    link,
                    interface, rate, threshold, transitions, "link load back under its threshold"
                );
            } else {
                warn!(
                    link,
                    interface, rate, threshold, transitions, "link load over its threshold"
                );
            }
        }
        let load = LinkLoad {
            interface: spec.interface.clone(),
            rx_bytes_per_sec: rate,
            over: !normal.up(),
            transitions,
            at: SystemTime::now(),
            error,
        };
        loads.send_if_modified(|loads| {
            // Checked under the channel's lock, which `set_links` takes to remove the link.
            if stopped.load(Ordering::Acquire) {
                return false;
            }
            loads.insert(spec.link.clone(), load);
            true
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_from_counter_samples() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut meter = RateMeter::default();
        assert_eq!(meter.sample(at(0), 1_000), None);
        assert_eq!(meter.sample(at(500), 1_500), Some(1_000));
        assert_eq!(meter.sample(at(1_500), 1_500), Some(0));
        assert_eq!(meter.sample(at(1_500), 9_999), None, "no time passed");
        // Reset (interface recreated): no rate, then measured from the new value.
        assert_eq!(meter.sample(at(2_500), 10), None);
        assert_eq!(meter.sample(at(2_750), 2_510), Some(10_000));
        // Huge rates saturate.
        assert_eq!(meter.sample(at(2_751), u64::MAX), Some(u64::MAX));
    }

    #[test]
    fn interface_names_are_one_component() {
        let root = Path::new("/nonexistent");
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "../../etc",
            "sixteen-chars-xx",
            "eth0:1",
            "eth 0",
            "eth0\n",
        ] {
            assert!(!valid_interface_name(bad), "{bad:?}");
            let error = rx_bytes(root, bad).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        for good in [
            "eth0",
            "fifteen-chars-x",
            ".hidden",
            "br-lan.10",
            "\u{e9}th0",
        ] {
            assert!(valid_interface_name(good), "{good:?}");
            assert_eq!(
                rx_bytes(root, good).unwrap_err().kind(),
                io::ErrorKind::NotFound,
                "{good:?}"
            );
        }
    }
}
