use std::time::Duration;

use super::*;

#[test]
fn server_site_and_rtt_section() {
    use crate::probe::{LdnsMask, ProbeKind, ProbeSettings};
    let site = "site = \"eu\"\n";
    let rtt_domain = "[[gslb_domain]]\nname = \"www.example.com\"\nservices = [\"web1\", \"web2\"]\n\
                      method = \"rtt\"\nfallback = \"roundrobin\"\n";
    let full = "[rtt]\nenabled = true\norder = [\"tcp\", \"dns_rev\"]\ninterval_ms = 1000\n\
                timeout_ms = 300\ntolerance_ms = 0\nldns_timeout_s = 60\nldns_mask_v4 = 24\n\
                ldns_mask_v6 = 56\nmax_rate = 1000\nmax_concurrent = 8\nmax_ldns = 500\n\
                deny = [\"198.51.100.0/24\", \"2001:db8::/32\"]\n\
                allow = [\"127.0.0.0/8\", \"::1/128\"]\n";
    // The defaults, written out so that a changed default fails here.
    let defaults = ProbeSettings {
        order: vec![ProbeKind::Icmp, ProbeKind::DnsDot, ProbeKind::Tcp],
        interval: Duration::from_secs(5),
        timeout: Duration::from_secs(2),
        tolerance: Duration::from_millis(5),
        ldns_timeout: Duration::from_secs(180),
        mask: LdnsMask { v4: 32, v6: 128 },
        max_ldns: 100_000,
        sources: crate::probe::SourcePolicy::default(),
        ..ProbeSettings::default()
    };
    let written = ProbeSettings {
        order: vec![ProbeKind::Tcp, ProbeKind::DnsRev],
        interval: Duration::from_secs(1),
        timeout: Duration::from_millis(300),
        tolerance: Duration::ZERO,
        ldns_timeout: Duration::from_secs(60),
        mask: LdnsMask { v4: 24, v6: 56 },
        max_rate: 1000,
        max_concurrent: 8,
        tick: ProbeSettings::default().tick,
        max_ldns: 500,
        sources: crate::probe::SourcePolicy {
            deny: vec![
                "198.51.100.0/24".parse().unwrap(),
                "2001:db8::/32".parse().unwrap(),
            ],
            allow: vec!["127.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()],
        },
    };
    // (server extra, rest of the file, server.site, rtt.enabled, probe settings, probing)
    type Case<'a> = (
        &'a str,
        String,
        Option<&'a str>,
        Option<bool>,
        &'a ProbeSettings,
        bool,
    );
    let cases: Vec<Case> = vec![
        ("", String::new(), None, None, &defaults, false),
        (site, LB.to_owned(), Some("eu"), None, &defaults, false),
        // A domain using rtt turns probing on, given the site to measure from.
        (
            site,
            format!("{LB}{rtt_domain}"),
            Some("eu"),
            None,
            &defaults,
            true,
        ),
        (
            "",
            format!("{LB}{rtt_domain}"),
            None,
            None,
            &defaults,
            false,
        ),
        (
            site,
            format!("{LB}{rtt_domain}[rtt]\nenabled = false\n"),
            Some("eu"),
            Some(false),
            &defaults,
            false,
        ),
        (
            site,
            format!("{LB}[rtt]\n"),
            Some("eu"),
            None,
            &defaults,
            false,
        ),
        (
            site,
            format!("{LB}{full}"),
            Some("eu"),
            Some(true),
            &written,
            true,
        ),
        // NetScaler's names for the probe types.
        (
            site,
            format!("{LB}[rtt]\norder = [\"PING\", \"DNS\", \"TCP\"]\n"),
            Some("eu"),
            None,
            &defaults,
            false,
        ),
    ];
    for (extra, rest, want_site, enabled, probe, probing) in cases {
        let text = format!("{SERVER}{extra}{ZONE}{rest}");
        let config = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(config.server.site.as_deref(), want_site, "{text}");
        assert_eq!(config.rtt.enabled, enabled, "{text}");
        assert_eq!(&config.rtt.probe, probe, "{text}");
        assert_eq!(config.rtt_probing(), probing, "{text}");
    }
}

#[test]
fn server_site_and_rtt_section_rejected() {
    let with_site = |body: &str| format!("{SERVER}site = \"eu\"\n{ZONE}{LB}[rtt]\n{body}\n");
    let cases: Vec<(String, &str)> = vec![
        (
            format!("{SERVER}site = \"mars\" #<\n{ZONE}{LB}"),
            "server.site: unknown site \"mars\" (defined sites: eu, us)",
        ),
        (
            format!("{SERVER}site = \"eu\" #<\n"),
            "server.site: unknown site \"eu\" (no sites are defined)",
        ),
        (
            format!("{SERVER}{ZONE}{LB}[rtt]\nenabled = true #<\n"),
            "rtt: probing needs server.site",
        ),
        (
            with_site("order = [\"icmp\", \"http\"] #<"),
            "rtt: order: unknown probe type \"http\"",
        ),
        (
            with_site("order = [\"tcp\", \"TCP\"] #<"),
            "rtt: probe type tcp is listed twice",
        ),
        (with_site("order = [] #<"), "rtt: the probe order is empty"),
        (
            with_site("interval_ms = 0 #<"),
            "rtt: interval_ms 0 out of range 1..=3600000",
        ),
        (
            with_site("timeout_ms = 60001 #<"),
            "rtt: timeout_ms 60001 out of range",
        ),
        (
            with_site("tolerance_ms = -1 #<"),
            "rtt: tolerance_ms -1 out of range",
        ),
        (
            with_site("ldns_timeout_s = 0 #<"),
            "rtt: ldns_timeout_s 0 out of range",
        ),
        (
            with_site("ldns_mask_v4 = 33 #<"),
            "rtt: ldns_mask_v4 33 out of range 1..=32",
        ),
        (
            with_site("ldns_mask_v6 = 0 #<"),
            "rtt: ldns_mask_v6 0 out of range 1..=128",
        ),
        (
            with_site("max_rate = -1 #<"),
            "rtt: max_rate -1 out of range",
        ),
        // 0 would be no pacing at all: every due round's probes at once.
        (
            with_site("max_rate = 0 #<"),
            "rtt: max_rate 0 out of range 1..=1000000",
        ),
        (
            with_site("max_concurrent = 0 #<"),
            "rtt: max_concurrent 0 out of range 1..=",
        ),
        (
            with_site("enabled = \"yes\" #<"),
            "invalid type: string \"yes\", expected a boolean",
        ),
        (
            with_site("probe_interval = 5 #<"),
            "unknown field `probe_interval`",
        ),
        (
            with_site("max_ldns = 0 #<"),
            "rtt: max_ldns 0 out of range 1..=10000000",
        ),
        (
            with_site("deny = [\"10.0.0.0/8\", \"10.0.0.1/8\"] #<"),
            "rtt: deny: prefix 10.0.0.1/8 has host bits set (did you mean 10.0.0.0/8?)",
        ),
        (
            with_site("deny = [\"10.0.0.0\"] #<"),
            "rtt: deny: \"10.0.0.0\" is not a prefix",
        ),
        (
            with_site("allow = [\"127.0.0.0/8\",\n\"127.0.0.0/8\"] #<"),
            "rtt: allow: prefix 127.0.0.0/8 listed twice (first on line",
        ),
        (
            with_site("deny = [\"127.0.0.0/8\"]\nallow = [\"127.0.0.0/16\"] #<"),
            "rtt: allow: prefix 127.0.0.0/16 is inside deny prefix 127.0.0.0/8, which always wins",
        ),
    ];
    assert_rejected(&cases);
}
