//! The model of every example names what its configuration names: each id the model holds
//! resolves to the name the file wrote, and the settings are carried over unchanged.

use super::*;
use crate::health::load::Measure;
use crate::model::{Fallback, Model};

fn examples() -> Vec<(std::path::PathBuf, Config)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples/")
        .map(|e| e.expect("examples/").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() > 10, "examples found: {}", files.len());
    files
        .into_iter()
        .map(|p| {
            let config = Config::load(&p).unwrap_or_else(|e| panic!("{e}"));
            (p, config)
        })
        .collect()
}

/// The names `model`'s ids resolve to, checked against `config`'s.
fn check(config: &Config, model: &Model) {
    let names = |ids: &[crate::model::ServiceId]| -> Vec<String> {
        ids.iter().map(|&s| model.service(s).name.clone()).collect()
    };
    assert_eq!(model.sites.len(), config.sites.len());
    assert_eq!(model.services.len(), config.services.len());
    for (m, c) in model.services.iter().zip(&config.services) {
        assert_eq!(m.name, c.name);
        assert_eq!(m.ip, c.answer_ip());
        assert_eq!(model.site(m.site).name, c.site);
        assert_eq!(
            m.link.map(|l| model.links[l.index()].name.as_str()),
            config.link_of(&c.name).map(|l| l.name.as_str()),
            "{}",
            c.name
        );
        assert_eq!(
            m.load.connections,
            config.load_monitor_of(c, Measure::Connections).is_some()
        );
        assert_eq!(
            m.load.bandwidth_kbps,
            config.load_monitor_of(c, Measure::BandwidthKbps).is_some()
        );
        assert_eq!(
            (
                &m.location,
                m.weight,
                m.max_connections,
                m.max_bandwidth_kbps
            ),
            (
                &c.location,
                c.weight,
                c.max_connections,
                c.max_bandwidth_kbps
            )
        );
    }
    assert_eq!(model.domains.len(), config.gslb_domains.len());
    for (m, c) in model.domains.iter().zip(&config.gslb_domains) {
        assert_eq!(m.name, c.name);
        assert_eq!(names(&m.services), c.services);
        let views: Vec<(String, Vec<String>)> = m
            .views
            .iter()
            .map(|(v, s)| (model.views[v.index()].name.clone(), names(s)))
            .collect();
        assert_eq!(views, c.views);
        assert_eq!(
            m.backup.map(|b| model.domain(b).name.as_str()),
            c.backup_domain.as_deref()
        );
        assert_eq!(
            (m.ttl, m.answer, &m.backup_ip),
            (c.ttl, c.answer, &c.backup_ip)
        );
        assert_eq!(m.chain, c.chain());
        assert_eq!(
            m.down == Fallback::BackupIp,
            c.down_response == DownResponse::Backup
        );
    }
    for (m, c) in model.topology.iter().zip(&config.topology) {
        assert_eq!(model.site(m.site).name, c.destination);
    }
    for (m, c) in model.policies.iter().zip(&config.policies) {
        assert_eq!((&m.name, &m.action.name), (&c.name, &c.action));
    }
    assert_eq!(model.policies.len(), config.policies.len());
    assert_eq!(model.actions.len(), config.actions.len());
    assert_eq!(
        model.here.map(|s| model.site(s).name.as_str()),
        config.server.site.as_deref()
    );
    assert_eq!(model.mep, config.mep_enabled().is_some());
    assert_eq!(model.zones, config.zones);
    assert_eq!(
        (model.dns.port, &model.dns.listen, &model.dns.ecs_allow),
        (
            config.server.dns_port,
            &config.server.listen,
            &config.server.ecs_allow
        )
    );
}

#[test]
fn the_model_of_every_example_names_what_its_configuration_names() {
    for (path, config) in examples() {
        let model = config.model();
        eprintln!("{}", path.display());
        check(&config, &model);
    }
}
