//! Load monitors in the configuration (`[[monitor]] type = "load"`, `[[service]]
//! load_monitors`): what a valid file turns into, and every rule a bad one breaks, each reported
//! at the file, line and column of the value that breaks it, including the settings that read a
//! load no source provides here (config/load.rs).

use crate::common;
use crate::mep_keys;

use std::{path::Path, time::Duration};

use common::assert_refused_at_markers;
use gslb_user::{
    config::Config,
    health::load::{Aggregate, LoadMonitorSpec, LoadSource, Measure, PromSelector},
};

const SERVER: &str = "[server]\nlisten = [\"192.0.2.1\"]\n";
const ZONE: &str = "[[zone]]\nname = \"example.com\"\nns = [\"ns.example.net\"]\nsoa.rname = \"hostmaster.example.com\"\n";
const SITES: &str =
    "[[site]]\nname = \"eu\"\nip = \"10.0.0.1\"\n[[site]]\nname = \"us\"\nip = \"10.0.0.2\"\n";
const PROM: &str =
    "[[monitor]]\nname = \"conns\"\ntype = \"load\"\nformat = \"prometheus\"\nmetric = \"conns\"\n";
const NGINX: &str = "[[monitor]]\nname = \"nginx\"\ntype = \"load\"\nformat = \"stub_status\"\npath = \"/status\"\n";
const BW: &str = "[[monitor]]\nname = \"bw\"\ntype = \"load\"\nformat = \"prometheus\"\nmetric = \"kbps\"\nmeasure = \"bandwidth_kbps\"\n";

fn service(name: &str, ip: &str, site: &str, extra: &str) -> String {
    format!("[[service]]\nname = \"{name}\"\nip = \"{ip}\"\nsite = \"{site}\"\n{extra}")
}

fn parse(text: &str) -> Config {
    Config::parse(text, Path::new("load.toml")).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn load_monitors_and_their_bindings() {
    let text = format!(
        "{SERVER}{ZONE}{SITES}{PROM}labels = {{ pool = \"web\", site = \"eu\" }}\naggregate = \"sum\"\n\
         port = 9100\ninterval_ms = 500\ntimeout_ms = 300\nunknown_after = 2\nhost = \"metrics.example\"\n\
         scheme = \"https\"\ninsecure = true\n{NGINX}{BW}path = \"/stats\"\n\
         [[monitor]]\nname = \"tcp\"\ntype = \"tcp\"\n{}{}\
         [[gslb_domain]]\nname = \"www.example.com\"\nservices = [\"web\", \"api\"]\nmethod = \"leastconnection\"\n",
        service(
            "web",
            "192.0.2.10",
            "eu",
            "monitors = [\"tcp\"]\nload_monitors = [\"conns\", \"bw\"]\nmax_connections = 100\nmax_bandwidth_kbps = 5000\n"
        ),
        service("api", "192.0.2.11", "us", "load_monitors = [\"nginx\"]\n"),
    );
    let config = parse(&text);
    let mut conns = LoadMonitorSpec::new(
        "conns",
        LoadSource::Prometheus(PromSelector {
            metric: "conns".into(),
            labels: vec![("pool".into(), "web".into()), ("site".into(), "eu".into())],
            aggregate: Aggregate::Sum,
        }),
        "/metrics",
    );
    conns.port = Some(9100);
    conns.interval = Duration::from_millis(500);
    conns.timeout = Duration::from_millis(300);
    conns.unknown_after = 2;
    conns.host = Some("metrics.example".into());
    conns.tls = Some(gslb_user::health::TlsCheck {
        insecure: true,
        ..Default::default()
    });
    let nginx = LoadMonitorSpec::new("nginx", LoadSource::StubStatus, "/status");
    let mut bw = LoadMonitorSpec::new(
        "bw",
        LoadSource::Prometheus(PromSelector {
            metric: "kbps".into(),
            labels: vec![],
            aggregate: Aggregate::One,
        }),
        "/stats",
    );
    bw.measure = Measure::BandwidthKbps;
    assert_eq!(config.load_monitors, [conns, nginx, bw]);
    // Load monitors are not health monitors.
    assert_eq!(config.monitors.len(), 1);
    let web = config.service("web").unwrap();
    assert_eq!(web.monitors, ["tcp"]);
    assert_eq!(web.load_monitors, ["conns", "bw"]);
    assert_eq!(
        config
            .load_monitor_of(web, Measure::BandwidthKbps)
            .map(|m| m.name.as_str()),
        Some("bw")
    );
    assert!(
        config
            .load_monitor_of(config.service("api").unwrap(), Measure::BandwidthKbps)
            .is_none()
    );
}

#[test]
fn a_link_is_a_bandwidth_source_and_mep_brings_other_sites_loads() {
    // A [[link]] carrying a service of this site is its bandwidth source.
    let link = "[[link]]\nname = \"isp\"\ninterface = \"eth1\"\nthreshold_kbps = 1000\nservices = [\"web\"]\n";
    parse(&format!(
        "{SERVER}{ZONE}{SITES}{}{link}",
        service("web", "192.0.2.10", "eu", "max_bandwidth_kbps = 500\n")
    ));
    // At site eu with MEP: us's service is measured at us and reaches here over MEP; its
    // bandwidth may come from a link of that site, which this file cannot show.
    let mep = "[server]\nlisten = [\"192.0.2.1\"]\nsite = \"eu\"\n[mep]\n";
    parse(&mep_keys::keyed(
        &format!(
            "{mep}{ZONE}{SITES}{PROM}{}{}\
         [[gslb_domain]]\nname = \"www.example.com\"\nservices = [\"web\", \"api\"]\nmethod = \"rtt\"\nalternate = \"leastconnection\"\n",
            service("web", "192.0.2.10", "eu", "load_monitors = [\"conns\"]\n"),
            service(
                "api",
                "192.0.2.11",
                "us",
                "load_monitors = [\"conns\"]\nmax_connections = 9\nmax_bandwidth_kbps = 9\n"
            ),
        ),
        "eu",
    ));
}

#[test]
fn refused_at_the_value() {
    let domain = |services: &str, method: &str| {
        format!("[[gslb_domain]]\nname = \"www.example.com\"\nservices = [{services}]\n{method}\n")
    };
    let web = service("web", "192.0.2.10", "eu", "load_monitors = [\"conns\"]\n");
    let at_eu = "[server]\nlisten = [\"192.0.2.1\"]\nsite = \"eu\"\n";
    let cases: Vec<(String, &str, &str)> = vec![
        // ---- the monitor ----
        (
            format!("{SERVER}[[monitor]]\nname = \"m\"\ntype = \"load\" #<\n"),
            "\"load\"",
            "a load monitor needs format = \"prometheus\" or \"stub_status\"",
        ),
        (
            format!(
                "{SERVER}[[monitor]]\nname = \"m\"\ntype = \"load\"\nformat = \"prometheus\" #<\n"
            ),
            "\"prometheus\"",
            "a prometheus monitor needs metric",
        ),
        (
            format!(
                "{SERVER}[[monitor]]\nname = \"m\"\ntype = \"load\"\nformat = \"stub_status\" #<\n"
            ),
            "\"stub_status\"",
            "a stub_status monitor needs path",
        ),
        (
            format!("{SERVER}[[monitor]]\nname = \"m\"\ntype = \"load\"\nformat = \"statsd\" #<\n"),
            "\"statsd\"",
            "unknown variant",
        ),
        (
            format!("{SERVER}{NGINX}metric = \"x\" #<\n"),
            "\"x\"",
            "metric applies to format = \"prometheus\" only",
        ),
        (
            format!("{SERVER}{NGINX}measure = \"bandwidth_kbps\" #<\n"),
            "\"bandwidth_kbps\"",
            "stub_status reports active connections",
        ),
        (
            format!("{SERVER}{PROM}fall = 2 #<\n"),
            "2",
            "fall applies to health monitors only (a load monitor does not decide health",
        ),
        (
            format!("{SERVER}{PROM}weight = 2 #<\n"),
            "2",
            "weight applies to health monitors only",
        ),
        (
            format!("{SERVER}{PROM}body_contains = \"ok\" #<\n"),
            "\"ok\"",
            "body_contains applies to health monitors only",
        ),
        (
            format!("{SERVER}{PROM}insecure = true #<\n"),
            "true",
            "insecure applies to scheme = \"https\" only",
        ),
        (
            format!("{SERVER}{PROM}path = \"metrics\" #<\n"),
            "\"metrics\"",
            "path \"metrics\" does not start with /",
        ),
        (
            format!("{SERVER}{PROM}unknown_after = 0 #<\n"),
            "0",
            "unknown_after 0 out of range 1..=100",
        ),
        (
            format!("{SERVER}{PROM}aggregate = \"max\" #<\n"),
            "\"max\"",
            "unknown variant",
        ),
        (
            format!("{SERVER}{PROM}labels = {{ __name__ = \"conns\" }} #<\n"),
            "{",
            "\"__name__\" is not a label name to match",
        ),
        (
            format!(
                "{SERVER}[[monitor]]\nname = \"m\"\ntype = \"load\"\nformat = \"prometheus\"\nmetric = \"\" #<\n"
            ),
            "\"\"",
            "metric \"\" is not a metric name",
        ),
        (
            format!("{SERVER}[[monitor]]\nname = \"m\"\ntype = \"http\"\nunknown_after = 2 #<\n"),
            "2",
            "unknown_after applies to load monitors only",
        ),
        (
            format!(
                "{SERVER}[[monitor]]\nname = \"m\"\ntype = \"tcp\"\nformat = \"prometheus\" #<\n"
            ),
            "\"prometheus\"",
            "format applies to load monitors only",
        ),
        // ---- the bindings ----
        (
            format!(
                "{SERVER}{SITES}{PROM}{}",
                service("web", "192.0.2.10", "eu", "monitors = [\"conns\"] #<\n")
            ),
            "\"conns\"",
            "monitor \"conns\" is a load monitor: bind it in load_monitors",
        ),
        (
            format!(
                "{SERVER}{SITES}[[monitor]]\nname = \"tcp\"\ntype = \"tcp\"\n{}",
                service("web", "192.0.2.10", "eu", "load_monitors = [\"tcp\"] #<\n")
            ),
            "\"tcp\"",
            "monitor \"tcp\" is a health monitor: bind it in monitors",
        ),
        (
            format!(
                "{SERVER}{SITES}{PROM}{}",
                service("web", "192.0.2.10", "eu", "load_monitors = [\"nope\"] #<\n")
            ),
            "\"nope\"",
            "unknown load monitor \"nope\" (defined load monitors: conns)",
        ),
        (
            format!(
                "{SERVER}{SITES}{PROM}{NGINX}{}",
                service(
                    "web",
                    "192.0.2.10",
                    "eu",
                    "load_monitors = [\"conns\", \"nginx\"] #<\n"
                )
            ),
            "\"nginx\"",
            "load monitors \"conns\" and \"nginx\" both measure connections: bind one",
        ),
        // ---- settings no load reaches ----
        (
            format!(
                "{SERVER}{SITES}{}",
                service("web", "192.0.2.10", "eu", "max_connections = 100 #<\n")
            ),
            "100",
            "service \"web\": max_connections could never act: service \"web\" has no load monitor measuring connections",
        ),
        (
            format!(
                "{SERVER}{SITES}{PROM}{}",
                service(
                    "web",
                    "192.0.2.10",
                    "eu",
                    "load_monitors = [\"conns\"]\nmax_bandwidth_kbps = 100 #<\n"
                )
            ),
            "100",
            "max_bandwidth_kbps could never act: service \"web\" has no load monitor measuring bandwidth_kbps, and no [[link]] carries it",
        ),
        (
            format!(
                "{SERVER}{ZONE}{SITES}{PROM}{web}{}{}",
                service("api", "192.0.2.11", "us", ""),
                domain("\"web\", \"api\"", "method = \"leastconnection\" #<")
            ),
            "\"leastconnection\"",
            "gslb_domain \"www.example.com\": leastconnection cannot rank its services: service \"api\" has no load monitor measuring connections",
        ),
        // A view's services count too; the method may come as the fallback.
        (
            format!(
                "{SERVER}[[view]]\nname = \"eu\"\nprefixes = [\"198.51.100.0/24\"]\n{ZONE}{SITES}{PROM}{web}location = \"Europe\"\n{}\
                 [[gslb_domain]]\nname = \"www.example.com\"\nservices = [\"web\"]\nmethod = \"staticproximity\"\n\
                 fallback = \"leastconnection\" #<\n[[gslb_domain.view]]\nview = \"eu\"\nservices = [\"api\"]\n",
                service("api", "192.0.2.11", "us", ""),
            ),
            "\"leastconnection\"",
            "service \"api\" has no load monitor measuring connections",
        ),
        // At site eu without MEP: us's load is measured at us and cannot get here.
        (
            format!(
                "{at_eu}{SITES}{PROM}{}",
                service(
                    "api",
                    "192.0.2.11",
                    "us",
                    "load_monitors = [\"conns\"]\nmax_connections = 5 #<\n"
                )
            ),
            "5",
            "service \"api\" is at site \"us\": its load is measured there (this server is site \"eu\") and reaches here only over MEP, which is off",
        ),
        (
            format!(
                "{at_eu}{ZONE}{SITES}{PROM}{web}{}{}",
                service("api", "192.0.2.11", "us", "load_monitors = [\"conns\"]\n"),
                domain("\"web\", \"api\"", "method = \"leastconnection\" #<")
            ),
            "\"leastconnection\"",
            "reaches here only over MEP, which is off",
        ),
        // A link of this site does not carry another site's service, so it cannot be one's
        // bandwidth source (refused by the link's own rule first).
        (
            format!(
                "{at_eu}{SITES}{}[[link]]\nname = \"isp\"\ninterface = \"eth1\"\nthreshold_kbps = 1000\nservices = [\"api\"] #<\n",
                service("api", "192.0.2.11", "us", "max_bandwidth_kbps = 5\n")
            ),
            "\"api\"",
            "only this site's services can be on it",
        ),
    ];
    assert_refused_at_markers(&cases, Path::new("load.toml"));
}
