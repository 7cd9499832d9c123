//! The test's world: a configuration with everything its answers depend on (locations, RTT
//! rows, service states), its compiled snapshot and the engine, and what the static views say.

use super::*;

/// A configuration with everything its answers depend on, and its compiled snapshot.
#[derive(Clone)]
pub(super) struct World {
    pub(super) name: &'static str,
    pub(super) config: Config,
    pub(super) db: LocationDb,
    pub(super) services: Vec<ServiceState>,
    pub(super) rtt: Arc<Vec<LdnsRtt>>,
    pub(super) engine: Engine,
    pub(super) snapshot: Snapshot,
    /// Domains answered by static view, not by the engine.
    pub(super) static_domains: Vec<String>,
}

impl World {
    pub(super) fn new(name: &'static str, text: &str, static_domains: &[&str]) -> World {
        let text = format!("{COMMON}\n{text}");
        let file = format!("{name}.toml");
        let config = Config::parse(&text, Path::new(&file)).unwrap_or_else(|e| panic!("{e}"));
        let db = LocationDb::builder()
            .netscaler_csv_text("compile_equivalence.csv", CSV)
            .custom_at(file, config.locations.custom.iter().cloned())
            .build()
            .expect("location database");
        let services: Vec<ServiceState> = config
            .services
            .iter()
            .map(|s| match STATES.iter().find(|(n, ..)| *n == s.name) {
                Some(&(_, down, connections, bandwidth_kbps)) => ServiceState {
                    up: !down,
                    connections,
                    bandwidth: Bandwidth::from_kbps(bandwidth_kbps),
                },
                None => ServiceState::UP,
            })
            .collect();
        let rtt: Arc<Vec<LdnsRtt>> = Arc::new(
            RTT_MS
                .iter()
                .map(|(net, ms)| LdnsRtt {
                    ldns: net.parse().unwrap(),
                    rtt_us: ms.iter().map(|m| m.map(|m| (m * 1000.0) as u32)).collect(),
                })
                .collect(),
        );
        let engine = config.engine().expect("engine");
        let started = Instant::now();
        let snapshot = Snapshot::compile(
            &config,
            &Inputs {
                locations: Some(&db),
                services: services.clone(),
                rtt: rtt.clone(),
                ..Inputs::default()
            },
        );
        eprintln!(
            "{name}: compiled in {:?}: {:?}",
            started.elapsed(),
            snapshot.stats
        );
        World {
            name,
            config,
            db,
            services,
            rtt,
            engine,
            snapshot,
            static_domains: static_domains.iter().map(ToString::to_string).collect(),
        }
    }

    pub(super) fn rich() -> World {
        World::new("rich", &format!("{RICH}\n{TWINS}"), &[])
    }

    pub(super) fn split() -> World {
        World::new("split", &format!("{SPLIT}\n{TWINS}"), &SPLIT_STATIC)
    }

    /// The rich configuration without its policy on the question name: then domains of one
    /// structure share their decisions, policies or not.
    pub(super) fn shared() -> World {
        let text = RICH.replace(
            r#"&& DNS.REQ.QUESTION.DOMAIN.EQ("ratio.example.com")"#,
            "&& DNS.REQ.QUESTION.TYPE.EQ(A)",
        );
        assert_ne!(text, RICH);
        World::new("shared", &format!("{text}\n{TWINS}"), &[])
    }

    /// What `domain` (configuration index) must answer `client` for `qtype`.
    pub(super) fn expected(
        &self,
        domain: usize,
        qtype: u16,
        client: IpAddr,
        location: Option<&gslb_user::location::Location>,
    ) -> Result<Meaning, String> {
        let d = &self.config.gslb_domains[domain];
        if self.static_domains.contains(&d.name) {
            return Ok(self.static_meaning(domain, qtype, client));
        }
        let rtt = self
            .rtt
            .iter()
            .find(|r| r.ldns.contains(&client))
            .map_or(&[][..], |r| &r.rtt_us[..]);
        let decision = self.engine.decide(
            domain,
            &EngineQuery {
                name: &d.name,
                qtype,
            },
            &Client {
                addr: client,
                location,
                // The engine decides among the view's services for a client in a view.
                view: self.static_view(client).map_or(0, |v| v as u32 + 1),
                sticky: None,
            },
            &State {
                services: &self.services,
                rtt,
                disabled_domains: &[],
            },
        );
        decision_meaning(&self.config, &decision, qtype)
    }

    /// The client's static view (configuration index): the view with the longest prefix
    /// containing it.
    pub(super) fn static_view(&self, client: IpAddr) -> Option<usize> {
        self.config
            .views
            .iter()
            .enumerate()
            .flat_map(|(i, v)| v.prefixes.iter().map(move |p| (p, i)))
            .filter(|(p, _)| p.contains(&client))
            .max_by_key(|(p, _)| p.prefix_len())
            .map(|(_, i)| i)
    }

    /// The static-view rule for a round-robin domain: the up services of the family of the
    /// client's view (longest configured prefix), else the domain's own, else its backup
    /// addresses when it has services of that family at all, else nothing.
    pub(super) fn static_meaning(&self, domain: usize, qtype: u16, client: IpAddr) -> Meaning {
        let d = &self.config.gslb_domains[domain];
        let family = |ip: &IpAddr| ip.is_ipv6() == (qtype == QTYPE_AAAA);
        let view = self
            .static_view(client)
            .map(|v| self.config.views[v].name.as_str());
        // Each address once, in the services' order (two services may share one).
        let up_addrs = |names: &[String]| -> Vec<IpAddr> {
            let mut addrs = Vec::new();
            for n in names {
                let i = self
                    .config
                    .services
                    .iter()
                    .position(|s| &s.name == n)
                    .unwrap();
                let s = &self.config.services[i];
                let ip = s.public_ip.unwrap_or(s.ip);
                if self.services[i].up && family(&ip) && !addrs.contains(&ip) {
                    addrs.push(ip);
                }
            }
            addrs
        };
        let in_view = view
            .and_then(|v| d.views.iter().find(|(name, _)| name == v))
            .map(|(_, names)| up_addrs(names))
            .unwrap_or_default();
        let addrs = if in_view.is_empty() {
            up_addrs(&d.services)
        } else {
            in_view
        };
        let addrs = if addrs.is_empty() {
            // Backup addresses stand in for a family the domain (or one of its views) serves.
            let has_family = d
                .services
                .iter()
                .chain(d.views.iter().flat_map(|(_, v)| v))
                .any(|n| {
                    let s = self.config.service(n).unwrap();
                    family(&s.public_ip.unwrap_or(s.ip))
                });
            if has_family && d.down_response == DownResponse::Backup {
                d.backup_ip.iter().copied().filter(family).collect()
            } else {
                Vec::new()
            }
        } else {
            addrs
        };
        Meaning::carried(
            d.ttl,
            d.answer,
            d.max_answers,
            addrs.into_iter().map(|a| (a, 1)),
        )
    }
}
