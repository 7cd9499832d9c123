use super::*;
use crate::location::Location;
use crate::location::WildcardMode;
use crate::policy::{Expr, Ldns, Method, Persistence, SourceMask};

#[test]
fn load_balancing_sections() {
    let text = format!(
        r#"{SERVER}{ZONE}{LB}
        [engine]
        wildcard_mode = "expression"

        [[monitor]]
        name = "busy-load"
        type = "load"
        format = "prometheus"
        metric = "connections"
        [[link]]
        name = "uplink"
        interface = "eth1"
        threshold_kbps = 100000
        services = ["busy"]

        [[service]]
        name = "busy"
        ip = "192.0.2.13"
        site = "eu"
        load_monitors = ["busy-load"]
        max_connections = 1000
        max_bandwidth_kbps = 50000

        [[gslb_domain]]
        name = "www.example.com"
        services = ["web1", "web2", "plain"]
        method = "rtt"
        alternate = "topology"
        fallback = "globalavailability"
        tolerance_ms = 5
        persistence = {{ mask_v4 = 24, mask_v6 = 56, timeout_s = 300, max_entries = 1000 }}
        backup_domain = "Backup.example.com."

        [[gslb_domain]]
        name = "backup.example.com"
        services = ["busy"]
        method = "sourceiphash"
        sourceip_mask = {{ mask_v4 = 16 }}
        persistence = {{}}

        [[gslb_domain]]
        name = "near.example.com"
        services = ["web1", "plain"]
        method = "staticproximity"
        alternate = "ratio"

        [[topology]]
        destination = "eu"
        ldns = "202.106.0.0/16"
        score = 100
        [[topology]]
        destination = "us"
        ldns = "Asia.CN"
        score = 4294967295
        [[topology]]
        destination = "us"
        ldns = "*"
        score = 1

        [[action]]
        name = "prefer-asia"
        preferred_locations = ["Asia.HK", "Europe.UK", 'Europe.UK."St. Albans"']

        [[policy]]
        name = "zmb"
        expression = 'CLIENT.IP.SRC.MATCHES_LOCATION("*.ZMB.*.*")'
        action = "prefer-asia"
        priority = 100

        [[policy]]
        name = "lab"
        expression = "CLIENT.IP.SRC.IN_SUBNET(10.0.0.0/8) && DNS.REQ.QUESTION.TYPE.EQ(A)"
        action = "prefer-asia"
        priority = 1
        "#
    );
    let config = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(config.engine.wildcard_mode, WildcardMode::Expression);
    let busy = config.service("busy").unwrap();
    assert_eq!(
        (busy.max_connections, busy.max_bandwidth_kbps),
        (Some(1000), Some(50000))
    );
    assert_eq!(config.service("web1").unwrap().max_connections, None);

    let www = config.gslb_domain("www.example.com").unwrap();
    assert_eq!(
        www.chain(),
        [Method::Rtt, Method::Topology, Method::GlobalAvailability]
    );
    assert_eq!(www.tolerance_ms, 5);
    assert_eq!(
        www.persistence,
        Some(Persistence {
            mask: SourceMask { v4: 24, v6: 56 },
            timeout_s: 300,
            max_entries: 1000,
        })
    );
    assert_eq!(www.backup_domain.as_deref(), Some("backup.example.com"));
    assert_eq!(www.sourceip_mask, SourceMask::default());

    let backup = config.gslb_domain("backup.example.com").unwrap();
    assert_eq!(backup.chain(), [Method::SourceIpHash]);
    assert_eq!(backup.sourceip_mask, SourceMask { v4: 16, v6: 128 });
    // Every persistence setting has a default (NetScaler's: one address, two minutes; 65,536
    // entries).
    assert_eq!(
        backup.persistence,
        Some(Persistence {
            mask: SourceMask::default(),
            timeout_s: 120,
            max_entries: 65_536,
        })
    );
    assert_eq!(backup.backup_domain, None);
    let near = config.gslb_domain("near.example.com").unwrap();
    assert_eq!(near.chain(), [Method::StaticProximity, Method::Ratio]);
    assert_eq!(near.tolerance_ms, 0);
    assert_eq!(near.persistence, None);

    let loc = |s: &str| Location::parse(s).unwrap();
    assert_eq!(
        config.topology,
        [
            TopologyRecordConfig {
                destination: "eu".into(),
                ldns: Ldns::Prefix("202.106.0.0/16".parse().unwrap()),
                score: 100
            },
            TopologyRecordConfig {
                destination: "us".into(),
                ldns: Ldns::Location(loc("Asia.CN")),
                score: u32::MAX
            },
            TopologyRecordConfig {
                destination: "us".into(),
                ldns: Ldns::Location(loc("*")),
                score: 1
            },
        ]
    );
    assert_eq!(
        config.actions,
        [DnsAction {
            name: "prefer-asia".into(),
            preferred_locations: vec![
                loc("Asia.HK"),
                loc("Europe.UK"),
                loc("Europe.UK.\"St. Albans\"")
            ],
        }]
    );
    assert_eq!(config.policies.len(), 2);
    assert_eq!(
        config.policies[0],
        DnsPolicy {
            name: "zmb".into(),
            expression: Expr::parse("CLIENT.IP.SRC.MATCHES_LOCATION(\"*.ZMB\")").unwrap(),
            action: "prefer-asia".into(),
            priority: 100,
        }
    );
    assert_eq!(config.policies[1].priority, 1);

    // And the engine takes it as it is.
    let engine = config.engine().unwrap();
    assert_eq!(engine.policies()[0].name, "lab");
    assert_eq!(engine.domain(0).backup, Some(crate::model::DomainId(1)));
    assert_eq!(engine.domain(0).tolerance_us, 5000);
    assert_eq!(engine.topology().len(), 3);
}

#[test]
fn load_balancing_sections_rejected() {
    let lb = |body: &str| format!("{SERVER}{ZONE}{LB}{body}\n");
    // A domain over web1 (eu, located) and web2 (us, located).
    let dom = |body: &str| {
        lb(&format!(
            "[[gslb_domain]]\nname = \"www.example.com\"\nservices = [\"web1\", \"web2\"]\n{body}"
        ))
    };
    let topo = |body: &str| lb(&format!("[[topology]]\n{body}"));
    let action = |body: &str| lb(&format!("[[action]]\nname = \"prefer\"\n{body}"));
    let policy = |body: &str| {
        lb(&format!(
            "[[action]]\nname = \"prefer\"\npreferred_locations = [\"Asia\"]\n\
             [[policy]]\nname = \"p\"\nexpression = \"TRUE\"\naction = \"prefer\"\npriority = 10\n{body}"
        ))
    };
    let nine: Vec<String> = (1..=9).map(|i| format!("\"Asia.C{i}\"")).collect();
    let cases: Vec<(String, &str)> = vec![
        // ---- [[service]] limits ----
        (
            lb(
                "[[service]]\nname = \"s\"\nip = \"192.0.2.50\"\nsite = \"eu\"\nmax_connections = 0 #<",
            ),
            "service \"s\": max_connections 0 out of range 1..=",
        ),
        (
            lb(
                "[[service]]\nname = \"s\"\nip = \"192.0.2.50\"\nsite = \"eu\"\nmax_bandwidth_kbps = -5 #<",
            ),
            "max_bandwidth_kbps -5 out of range",
        ),
        // ---- [[gslb_domain]] method chain ----
        (
            dom("method = \"fastest\" #<"),
            "unknown variant `fastest`, expected one of `roundrobin`",
        ),
        (
            dom("method = \"roundrobin\"\nalternate = \"rtt\" #<"),
            "alternate \"rtt\" is never used: method \"roundrobin\" always decides",
        ),
        (
            dom("fallback = \"rtt\" #<"),
            "fallback \"rtt\" is never used: method \"roundrobin\"",
        ),
        (
            dom("method = \"rtt\"\nalternate = \"rtt\" #<"),
            "alternate \"rtt\" repeats the method",
        ),
        (
            dom(
                "method = \"rtt\"\nalternate = \"staticproximity\"\nfallback = \"staticproximity\" #<",
            ),
            "fallback \"staticproximity\" repeats the alternate",
        ),
        (
            dom("method = \"rtt\"\nalternate = \"ratio\"\nfallback = \"globalavailability\" #<"),
            "fallback \"globalavailability\" is never used: alternate \"ratio\" always decides",
        ),
        (
            lb(
                "[[gslb_domain]]\nname = \"www.example.com\"\nservices = [\"plain\"]\nmethod = \"rtt\"\nalternate = \"staticproximity\" #<",
            ),
            "staticproximity needs services with a location",
        ),
        (
            dom("method = \"topology\" #<"),
            "topology needs [[topology]] records",
        ),
        (
            lb(
                "[[topology]]\ndestination = \"eu\"\nldns = \"10.0.0.0/8\"\nscore = 1\n\
                [[gslb_domain]]\nname = \"www.example.com\"\nservices = [\"web2\"]\nmethod = \"topology\" #<",
            ),
            "whose destination is a site of this domain's services",
        ),
        (
            dom("tolerance_ms = 5 #<"),
            "tolerance_ms is only used by the rtt method",
        ),
        (
            dom("method = \"rtt\"\ntolerance_ms = 10001 #<"),
            "tolerance_ms 10001 out of range 0..=10000",
        ),
        (
            dom("sourceip_mask = { mask_v4 = 24 } #<"),
            "sourceip_mask is only used by the sourceiphash method",
        ),
        (
            dom("method = \"sourceiphash\"\nsourceip_mask = { mask_v4 = 33 } #<"),
            "sourceip_mask.mask_v4 33 out of range 1..=32",
        ),
        (
            dom("method = \"sourceiphash\"\nsourceip_mask = { mask_v4 = 24, bits = 3 } #<"),
            "unknown field `bits`",
        ),
        (
            dom("persistence = { mask_v6 = 129 } #<"),
            "persistence.mask_v6 129 out of range 1..=128",
        ),
        (
            dom("persistence = { mask_v4 = 0 } #<"),
            "persistence.mask_v4 0 out of range 1..=32",
        ),
        (
            dom("persistence = { timeout_s = 0 } #<"),
            "persistence.timeout_s 0 out of range 1..=86400",
        ),
        (
            dom("persistence = { mask = 24 } #<"),
            "unknown field `mask`",
        ),
        (
            dom("persistence = { max_entries = 0 } #<"),
            "persistence.max_entries 0 out of range 1..=16777216",
        ),
        (
            dom("answer = \"all\"\npersistence = { timeout_s = 60 } #<"),
            "persistence keeps a client on one service, and answer = \"all\" gives every service",
        ),
        (
            dom("answer = \"all\"\nmethod = \"ratio\" #<"),
            "ratio hands out services in proportion to their weights, and answer = \"all\"",
        ),
        (
            dom("answer = \"all\"\nmethod = \"globalavailability\" #<"),
            "globalavailability answers the first available service only, and answer = \"all\"",
        ),
        (
            dom("answer = \"all\"\nmethod = \"sourceiphash\" #<"),
            "sourceiphash gives each client prefix one service, and answer = \"all\"",
        ),
        // ---- max_answers ----
        (
            dom("max_answers = 0 #<"),
            "gslb_domain \"www.example.com\": max_answers 0 out of range 1..=256",
        ),
        (
            dom("max_answers = 257 #<"),
            "gslb_domain \"www.example.com\": max_answers 257 out of range 1..=256",
        ),
        (
            dom("persistence = { timeout_s = 60 }\nmax_answers = 2 #<"),
            "max_answers 2 never acts: persistence keeps a client on one service; leave it at 1",
        ),
        (
            dom("method = \"globalavailability\"\nmax_answers = 3 #<"),
            "max_answers 3 never acts: globalavailability alone answers the first available service only",
        ),
        // ---- backup_domain ----
        (
            dom("backup_domain = \"nope.example.com\" #<"),
            "backup_domain: unknown gslb_domain \"nope.example.com\" (defined gslb_domains: www.example.com)",
        ),
        (
            dom("backup_domain = \"WWW.example.com\" #<"),
            "backup_domain is the domain itself",
        ),
        (
            dom("backup_domain = \"api.example.com\" #<\n\
                 [[gslb_domain]]\nname = \"api.example.com\"\nservices = [\"web1\"]\nbackup_domain = \"www.example.com\""),
            "backup domains form a cycle (www.example.com → api.example.com → www.example.com)",
        ),
        // ---- [[topology]] ----
        (
            topo("destination = \"asia\" #<\nldns = \"10.0.0.0/8\"\nscore = 1"),
            "destination: unknown site \"asia\" (defined sites: eu, us)",
        ),
        (
            topo("destination = \"eu\"\nldns = \"10.0.0.1/8\" #<\nscore = 1"),
            "10.0.0.1/8 has host bits set (did you mean 10.0.0.0/8?)",
        ),
        (
            topo("destination = \"eu\"\nldns = \"10.0.0.1\" #<\nscore = 1"),
            "10.0.0.1 is an address; write a prefix (10.0.0.1/32)",
        ),
        (
            topo("destination = \"eu\"\nldns = \"10.0.0.0/33\" #<\nscore = 1"),
            "\"10.0.0.0/33\" is not a prefix",
        ),
        (
            topo("destination = \"eu\"\nldns = \"a.b.c.d.e.f.g\" #<\nscore = 1"),
            "not a prefix, nor a location: 7 qualifiers",
        ),
        (
            topo("destination = \"eu\"\nldns = \"Asia\"\nscore = 0 #<"),
            "score 0 out of range 1..=4294967295",
        ),
        (
            topo("destination = \"eu\"\nldns = \"Asia\"\nscore = 4294967296 #<"),
            "score 4294967296 out of range",
        ),
        (
            topo("destination = \"eu\"\nldns = \"Asia\"\nscore = 1\nweight = 2 #<"),
            "unknown field `weight`",
        ),
        (
            lb("[[topology]] #<\ndestination = \"eu\"\nscore = 1"),
            "missing field `ldns`",
        ),
        (
            topo(
                "destination = \"eu\"\nldns = \"asia.*\"\nscore = 1\n[[topology]]\ndestination = \"eu\"\nldns = \"ASIA\" #<\nscore = 2",
            ),
            "for this destination is already on line",
        ),
        // ---- [[action]] ----
        (
            action("preferred_locations = [] #<"),
            "action \"prefer\": preferred_locations is empty",
        ),
        (
            action(&format!(
                "preferred_locations = [{},\n {}] #<",
                nine[..8].join(", "),
                nine[8]
            )),
            "action \"prefer\": 9 preferred locations, at most 8",
        ),
        (
            action("preferred_locations = [\"a..b\"] #<"),
            "location \"a..b\": qualifier 2 is empty",
        ),
        (
            action("preferred_locations = [\"Asia.HK\",\n \"asia.hk.*\"] #<"),
            "location \"asia.hk.*\" listed twice",
        ),
        (
            action(
                "preferred_locations = [\"Asia\"]\n[[action]]\nname = \"prefer\" #<\npreferred_locations = [\"Asia\"]",
            ),
            "action name \"prefer\": defined twice",
        ),
        // ---- [[policy]] ----
        (
            policy(
                "[[policy]]\nname = \"q\"\nexpression = 'CLIENT.IP.SRC.IN_SUBNET(10.0.0.1/8)' #<\naction = \"prefer\"\npriority = 11",
            ),
            "policy \"q\": expression: column 25: IN_SUBNET: 10.0.0.1/8 has host bits set",
        ),
        (
            policy(
                "[[policy]]\nname = \"q\"\nexpression = \"\" #<\naction = \"prefer\"\npriority = 11",
            ),
            "expression: column 1: the expression is empty",
        ),
        (
            policy(
                "[[policy]]\nname = \"q\"\nexpression = \"TRUE\"\naction = \"nope\" #<\npriority = 11",
            ),
            "policy \"q\": unknown action \"nope\" (defined actions: prefer)",
        ),
        (
            policy(
                "[[policy]]\nname = \"q\"\nexpression = \"TRUE\"\naction = \"prefer\"\npriority = 0 #<",
            ),
            "priority 0 out of range 1..=2147483647",
        ),
        (
            policy(
                "[[policy]]\nname = \"q\"\nexpression = \"TRUE\"\naction = \"prefer\"\npriority = 10 #<",
            ),
            "policy \"q\": priority 10 is already policy \"p\"'s",
        ),
        (
            policy(
                "[[policy]]\nname = \"p\" #<\nexpression = \"TRUE\"\naction = \"prefer\"\npriority = 11",
            ),
            "policy name \"p\": defined twice",
        ),
        (
            policy("[[policy]] #<\nname = \"q\"\nexpression = \"TRUE\"\naction = \"prefer\""),
            "missing field `priority`",
        ),
        // ---- [engine] ----
        (
            lb("[engine]\nwildcard_mode = \"maybe\" #<"),
            "unknown variant `maybe`, expected one of `yes`, `no`, `expression`",
        ),
        (lb("[engine]\nbogus = 1 #<"), "unknown field `bogus`"),
    ];
    assert_rejected(&cases);
}

/// NetScaler binds any number of services to a GSLB virtual server, and BIG-IP pools have many
/// members: candidates are unlimited; how many addresses an answer carries is `max_answers`.
#[test]
fn any_number_of_services_and_max_answers() {
    let mut text = format!("{SERVER}{ZONE}{VIEW}{SITE}");
    let mut names = Vec::new();
    for i in 0..300u32 {
        let (a, b) = (i / 250, i % 250);
        text += &format!(
            "[[service]]\nname = \"v4-{i}\"\nip = \"10.{a}.{b}.1\"\nsite = \"eu\"\n\
             [[service]]\nname = \"v6-{i}\"\nip = \"2001:db8:{a}:{b}::1\"\nsite = \"eu\"\n"
        );
        names.push(format!("\"v4-{i}\", \"v6-{i}\""));
    }
    let all = names.join(", ");
    let view: Vec<&str> = all.split(", ").take(512).collect();
    text += &format!(
        "[[gslb_domain]]\nname = \"rr.example.com\"\nservices = [{all}]\n\
         [[gslb_domain.view]]\nview = \"europe\"\nservices = [{}]\n\
         [[gslb_domain]]\nname = \"all.example.com\"\nanswer = \"all\"\nservices = [{all}]\n\
         [[gslb_domain]]\nname = \"ratio.example.com\"\nmethod = \"ratio\"\nmax_answers = 16\nservices = [{all}]\n\
         [[gslb_domain]]\nname = \"wide.example.com\"\nanswer = \"all\"\nmax_answers = 256\nservices = [{all}]\n",
        view.join(", ")
    );
    let config = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    let domain = |n: &str| config.gslb_domain(n).unwrap();
    let rr = domain("rr.example.com");
    assert_eq!(rr.services.len(), 600);
    assert_eq!(rr.views[0].1.len(), 512);
    // The defaults: one address per answer, or the fast path's answer set with "all".
    assert_eq!(rr.max_answers, 1);
    assert_eq!(domain("all.example.com").max_answers, 8);
    assert_eq!(domain("ratio.example.com").max_answers, 16);
    assert_eq!(domain("wide.example.com").max_answers, 256);
}
