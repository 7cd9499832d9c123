//! `/metrics`: a [`Status`] in Prometheus's text exposition format 0.0.4, every name
//! `gslb_`-prefixed with its HELP and TYPE; and [`Republishes`], the republish loop's counts
//! by trigger and its latency histogram (atomics: the loop never waits for a scrape), inside
//! [`RepublishStats`], the republish loop's counters that `gslbctl stats` prints too.

use std::{
    fmt::Write as _,
    sync::atomic::{AtomicU64, Ordering::Relaxed},
    time::Duration,
};

use super::status::{Histogram, Status};

/// The republish loop's triggers (`daemon/serve/`), as label values; anything else is
/// counted as "other".
const TRIGGERS: [(&str, &str); 9] = [
    ("reload", "reload"),
    ("reload (switched)", "reload_switched"),
    ("health", "health"),
    ("rtt", "rtt"),
    ("mep", "mep"),
    ("link", "link"),
    ("load", "load"),
    ("location database", "location_database"),
    ("", "other"),
];

/// Upper bounds of the republish latency buckets, seconds (a health flip's republish is a few
/// milliseconds; a reload of a large configuration, seconds).
const BOUNDS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// What the controller's republishing did, for `gslbctl stats`: how many trigger events came in
/// (a burst counts each event it drained) against how many republishes they cost, and how long
/// the last one took from its trigger to the maps.
#[derive(Debug, Default)]
pub struct RepublishStats {
    pub events: AtomicU64,
    pub republishes: AtomicU64,
    pub last_compile_us: AtomicU64,
    pub last_total_us: AtomicU64,
    /// Reloads whose configuration was refused (it does not load, or needs a restart).
    pub reloads_refused: AtomicU64,
    /// Reloads whose configuration loaded but whose answers could not be published: everything
    /// stayed as before (daemon/serve/).
    pub reloads_failed: AtomicU64,
    /// Republishes by trigger with their latency, and reloads applied (`/metrics`).
    pub recorded: Republishes,
}

impl RepublishStats {
    /// `name value` lines.
    pub fn lines(&self) -> String {
        format!(
            "trigger_events {}\nrepublishes {}\nlast_compile_us {}\nlast_republish_us {}\nreloads_refused {}\nreloads_failed {}\n",
            self.events.load(Relaxed),
            self.republishes.load(Relaxed),
            self.last_compile_us.load(Relaxed),
            self.last_total_us.load(Relaxed),
            self.reloads_refused.load(Relaxed),
            self.reloads_failed.load(Relaxed),
        )
    }
}

/// Republishes by trigger, and how long each took.
#[derive(Debug, Default)]
pub struct Republishes {
    by_trigger: [AtomicU64; TRIGGERS.len()],
    /// Observations per bucket (not cumulative); the last one is above every bound.
    buckets: [AtomicU64; BOUNDS.len() + 1],
    sum_us: AtomicU64,
    /// Reloads put in force.
    reloads_applied: AtomicU64,
}

impl Republishes {
    /// One republish, for `trigger` (as the loop names it), that took `took`.
    pub fn record(&self, trigger: &str, took: Duration) {
        let t = TRIGGERS
            .iter()
            .position(|(name, _)| *name == trigger)
            .unwrap_or(TRIGGERS.len() - 1);
        self.by_trigger[t].fetch_add(1, Relaxed);
        let secs = took.as_secs_f64();
        let b = BOUNDS
            .iter()
            .position(|bound| secs <= *bound)
            .unwrap_or(BOUNDS.len());
        self.buckets[b].fetch_add(1, Relaxed);
        self.sum_us
            .fetch_add(u64::try_from(took.as_micros()).unwrap_or(u64::MAX), Relaxed);
    }

    /// A reload's configuration is in force.
    pub fn reload_applied(&self) {
        self.reloads_applied.fetch_add(1, Relaxed);
    }

    pub fn reloads_applied(&self) -> u64 {
        self.reloads_applied.load(Relaxed)
    }

    /// Every trigger's count, 0s included (a series that exists before its first event).
    pub fn by_trigger(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        TRIGGERS
            .iter()
            .zip(&self.by_trigger)
            .map(|((_, label), n)| (*label, n.load(Relaxed)))
    }

    pub fn histogram(&self) -> Histogram {
        let mut cumulative = 0;
        let buckets = BOUNDS
            .iter()
            .zip(&self.buckets)
            .map(|(bound, n)| {
                cumulative += n.load(Relaxed);
                (*bound, cumulative)
            })
            .collect();
        Histogram {
            buckets,
            count: cumulative + self.buckets[BOUNDS.len()].load(Relaxed),
            sum: self.sum_us.load(Relaxed) as f64 / 1e6,
        }
    }
}

/// The exposition text of `status`.
pub fn render(status: &Status) -> String {
    let mut out = Exposition::default();
    out.family(
        "gslb_ready",
        "gauge",
        "1 once the first answers are published and served.",
    );
    out.sample("gslb_ready", &[], u64::from(status.ready));

    let c = &status.config;
    out.family(
        "gslb_config_generation",
        "gauge",
        "Configurations put in force: 1 at start, one more per applied reload.",
    );
    out.sample("gslb_config_generation", &[], c.generation);
    out.family(
        "gslb_config_reloads_refused_total",
        "counter",
        "Reloads refused: the file does not load or changes what needs a restart.",
    );
    out.sample("gslb_config_reloads_refused_total", &[], c.reloads_refused);
    out.family(
        "gslb_config_reloads_failed_total",
        "counter",
        "Reloads whose answers could not be published (the running configuration stayed).",
    );
    out.sample("gslb_config_reloads_failed_total", &[], c.reloads_failed);

    let r = &status.republish;
    out.family(
        "gslb_republish_trigger_events_total",
        "counter",
        "Events that asked for a republish (a burst shares one).",
    );
    out.sample("gslb_republish_trigger_events_total", &[], r.trigger_events);
    out.family(
        "gslb_republishes_total",
        "counter",
        "Answer sets published, by what triggered them.",
    );
    for (trigger, n) in &r.by_trigger {
        out.sample("gslb_republishes_total", &[("trigger", trigger)], *n);
    }
    out.histogram(
        "gslb_republish_duration_seconds",
        "From the recompute's start to the answers in force.",
        &r.duration,
    );

    let s = &status.responder;
    out.family(
        "gslb_responder_answers_total",
        "counter",
        "Responses of the responder (queries XDP passed on), by transport and RCODE.",
    );
    for a in &s.answers {
        out.sample(
            "gslb_responder_answers_total",
            &[("transport", a.transport), ("rcode", a.rcode)],
            a.count,
        );
    }
    out.family(
        "gslb_responder_rrl_responses_total",
        "counter",
        "UDP responses judged by the responder's rate limiting, by verdict.",
    );
    for (verdict, n) in [
        ("sent", s.rrl_sent),
        ("dropped", s.rrl_dropped),
        ("slipped", s.rrl_slipped),
    ] {
        out.sample(
            "gslb_responder_rrl_responses_total",
            &[("verdict", verdict)],
            n,
        );
    }

    if let Some(x) = &status.xdp {
        out.family(
            "gslb_xdp_hits_total",
            "counter",
            "Queries answered in XDP, by counter, summed over CPUs.",
        );
        for (counter, n) in &x.hits {
            out.sample("gslb_xdp_hits_total", &[("counter", counter)], *n);
        }
        out.family(
            "gslb_xdp_passes_total",
            "counter",
            "Frames XDP passed to the kernel stack, by reason, summed over CPUs.",
        );
        for (reason, n) in &x.passes {
            out.sample("gslb_xdp_passes_total", &[("reason", reason)], *n);
        }
        out.family(
            "gslb_xdp_rrl_responses_total",
            "counter",
            "Answers XDP's rate limiting held back, by verdict, summed over CPUs.",
        );
        out.sample(
            "gslb_xdp_rrl_responses_total",
            &[("verdict", "dropped")],
            x.rrl_dropped,
        );
        out.sample(
            "gslb_xdp_rrl_responses_total",
            &[("verdict", "slipped")],
            x.rrl_slipped,
        );
    }

    out.family(
        "gslb_service_up",
        "gauge",
        "1 when the service is in the answers (UP), as of the last republish.",
    );
    for sv in &status.services {
        out.sample(
            "gslb_service_up",
            &[("service", &sv.name), ("site", &sv.site)],
            u64::from(sv.up),
        );
    }
    out.family(
        "gslb_service_admin_enabled",
        "gauge",
        "0 when the operator disabled the service or its site (gslbctl service|site disable), else 1.",
    );
    for sv in &status.services {
        out.sample(
            "gslb_service_admin_enabled",
            &[("service", &sv.name), ("site", &sv.site)],
            u64::from(sv.admin_state == "enabled"),
        );
    }
    out.family(
        "gslb_domain_admin_enabled",
        "gauge",
        "0 when the operator disabled the GSLB domain (gslbctl domain disable), else 1.",
    );
    for d in &status.domains {
        out.sample(
            "gslb_domain_admin_enabled",
            &[("domain", &d.name)],
            u64::from(d.admin_state == "enabled"),
        );
    }
    out.family(
        "gslb_service_weight",
        "gauge",
        "The service's configured weight.",
    );
    for sv in &status.services {
        out.sample(
            "gslb_service_weight",
            &[("service", &sv.name), ("site", &sv.site)],
            u64::from(sv.weight),
        );
    }
    out.family(
        "gslb_service_connections",
        "gauge",
        "The connections load the decisions read (NaN: unknown; 0: DOWN or not measured).",
    );
    for sv in &status.services {
        out.sample_opt(
            "gslb_service_connections",
            &[("service", &sv.name), ("site", &sv.site)],
            sv.connections,
        );
    }
    out.family(
        "gslb_service_bandwidth_kbps",
        "gauge",
        "The bandwidth load the decisions read, kbit/s (NaN: unknown; 0: DOWN or not measured).",
    );
    for sv in &status.services {
        out.sample_opt(
            "gslb_service_bandwidth_kbps",
            &[("service", &sv.name), ("site", &sv.site)],
            sv.bandwidth_kbps,
        );
    }

    if let Some(m) = &status.mep {
        out.family(
            "gslb_mep_link_up",
            "gauge",
            "1 while the MEP link to the peer is up.",
        );
        for l in &m.sessions {
            out.sample("gslb_mep_link_up", &[("peer", &l.peer)], u64::from(l.up));
        }
        out.family(
            "gslb_mep_link_last_error_info",
            "gauge",
            "1 for the kind of error the MEP link to the peer last went down or failed to come up with (the text is in /status).",
        );
        for l in &m.sessions {
            if let Some(reason) = l.last_reason {
                out.sample(
                    "gslb_mep_link_last_error_info",
                    &[("peer", &l.peer), ("reason", reason)],
                    1,
                );
            }
        }
        out.family(
            "gslb_mep_site_reachable",
            "gauge",
            "1 while a live MEP path reaches the site.",
        );
        for s in &m.sites {
            out.sample(
                "gslb_mep_site_reachable",
                &[("site", &s.name)],
                u64::from(s.reachable),
            );
        }
        out.family(
            "gslb_mep_adopted",
            "gauge",
            "1 for each child this parent holds for its original parent.",
        );
        for (child, parent) in &m.adopted {
            out.sample(
                "gslb_mep_adopted",
                &[("child", child), ("original_parent", parent)],
                1,
            );
        }
    }

    if let Some(t) = &status.rtt {
        out.family(
            "gslb_ldns_entries",
            "gauge",
            "Resolvers (LDNS) this site probes.",
        );
        out.sample("gslb_ldns_entries", &[], t.ldns_entries);
        out.family(
            "gslb_rtt_rows",
            "gauge",
            "Resolver groups with an RTT from at least one site.",
        );
        out.sample("gslb_rtt_rows", &[], t.rtt_rows);
        out.family(
            "gslb_probes_sent_total",
            "counter",
            "RTT probes sent (each type tried).",
        );
        out.sample("gslb_probes_sent_total", &[], t.probes_sent);
        out.family(
            "gslb_probe_rounds_total",
            "counter",
            "RTT probe rounds finished.",
        );
        out.sample("gslb_probe_rounds_total", &[], t.probe_rounds);
        out.family(
            "gslb_probe_samples_total",
            "counter",
            "RTT probe rounds that measured an RTT.",
        );
        out.sample("gslb_probe_samples_total", &[], t.probe_samples);
    }

    out.family(
        "gslb_task_restarts_total",
        "counter",
        "Restarts of supervised tasks that failed, by task name.",
    );
    for (task, t) in &status.tasks {
        out.sample("gslb_task_restarts_total", &[("task", task)], t.restarts);
    }
    out.0
}

/// The text being written.
#[derive(Default)]
struct Exposition(String);

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        self.line(name, labels, &value.to_string());
    }

    fn sample_opt(&mut self, name: &str, labels: &[(&str, &str)], value: Option<u64>) {
        let value = value.map_or_else(|| "NaN".to_owned(), |v| v.to_string());
        self.line(name, labels, &value);
    }

    fn line(&mut self, name: &str, labels: &[(&str, &str)], value: &str) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (key, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{key}=\"{}\"", escape(v));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }

    fn histogram(&mut self, name: &str, help: &str, h: &Histogram) {
        self.family(name, "histogram", help);
        let bucket = format!("{name}_bucket");
        for (bound, n) in &h.buckets {
            self.sample(&bucket, &[("le", &bound.to_string())], *n);
        }
        self.sample(&bucket, &[("le", "+Inf")], h.count);
        self.line(&format!("{name}_sum"), &[], &h.sum.to_string());
        self.sample(&format!("{name}_count"), &[], h.count);
    }
}

/// A label value as the format writes it: backslash, double quote and line feed escaped.
fn escape(value: &str) -> std::borrow::Cow<'_, str> {
    if !value.contains(['\\', '"', '\n']) {
        return value.into();
    }
    value
        .replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_histogram_is_cumulative_and_triggers_have_their_labels() {
        let r = Republishes::default();
        r.record("health", Duration::from_micros(800));
        r.record("reload", Duration::from_millis(30));
        r.record("reload", Duration::from_secs(20));
        r.record("something new", Duration::ZERO);
        let h = r.histogram();
        assert_eq!(h.count, 4);
        assert_eq!(h.buckets[0], (0.001, 2));
        assert_eq!(h.buckets.last().copied(), Some((10.0, 3)));
        assert!((h.sum - 20.0308).abs() < 1e-9, "{}", h.sum);
        let by: Vec<_> = r.by_trigger().filter(|(_, n)| *n > 0).collect();
        assert_eq!(by, [("reload", 2), ("health", 1), ("other", 1)]);
    }

    #[test]
    fn label_values_are_escaped() {
        let mut out = Exposition::default();
        out.sample("gslb_x", &[("site", "a\"b\\c\nd")], 1);
        assert_eq!(out.0, "gslb_x{site=\"a\\\"b\\\\c\\nd\"} 1\n");
    }
}
