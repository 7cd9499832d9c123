use super::*;
use crate::location::Location;

#[test]
fn valid() {
    let server_and_views = r#"
        [server]
        dns_port = 5353
        listen = ["192.0.2.1", "2001:db8::1"]
        edns_udp_size = 4096
        interface = "eth0"
        xdp_mode = "skb"
        pin_path = "/sys/fs/bpf/other"
        stale_after_s = 0
        user = "root"
        state_file = "/run/gslb/steering"
        socket_affinity = true

        [[view]]
        name = "europe"
        prefixes = ["198.51.100.0/24", "2001:db8:100::/48"]

        [[view]]
        name = "us-east_1"
        prefixes = ["203.0.113.0/25"]
    "#;
    let long_txt = "x".repeat(300);
    let utf8_txt = "é".repeat(200); // 400 bytes: split after 127 characters (254 bytes)
    let zones = format!(
        r#"
        [server]
        listen = ["192.0.2.1"]

        [[zone]]
        name = "Example.COM."
        ttl = 600
        ns = ["NS1.example.com.", "ns2.example.net"]
          [zone.soa]
          mname = "ns0.example.com"
          rname = "hostmaster.example.com."
          serial = 4294967295
          refresh = 1
          retry = 2
          expire = 3
          minimum = 0
          [[zone.record]]
          name = "ns1"
          type = "A"
          value = "192.0.2.53"
          [[zone.record]]
          name = "NS1.Example.com."
          type = "aaaa"
          value = "2001:db8::53"
          [[zone.record]]
          name = "@"
          type = "TXT"
          value = "{long_txt}"
          [[zone.record]]
          name = "@"
          type = "TXT"
          value = "{utf8_txt}"
          [[zone.record]]
          name = "empty"
          type = "TXT"
          value = ""
          [[zone.record]]
          name = "@"
          type = "MX"
          value = "10  mail"
          [[zone.record]]
          name = "nomail"
          type = "MX"
          value = "0 ."
          [[zone.record]]
          name = "alias"
          type = "CNAME"
          value = "WWW.example.net."
          [[zone.record]]
          name = "_sip._tcp"
          type = "SRV"
          value = "10 5 5060 sip"
          ttl = 60
          [[zone.record]]
          name = "_none._tcp"
          type = "SRV"
          value = "0 0 0 ."
          # Glue may come before its delegation.
          [[zone.record]]
          name = "ns.sub"
          type = "A"
          value = "192.0.2.54"
          [[zone.record]]
          name = "sub"
          type = "NS"
          value = "ns.sub"

        # Its name server is in another zone served here, which has its address.
        [[zone]]
        name = "example.org"
        ns = ["ns1.example.com"]
        soa.rname = "hostmaster.example.org"
    "#
    );
    let gslb_text = r#"
        [server]
        listen = ["192.0.2.1"]
        [[view]]
        name = "europe"
        prefixes = ["198.51.100.0/24"]
        [[zone]]
        name = "example.com"
        ns = ["ns.example.net"]
        soa.rname = "hostmaster.example.com"
        [[site]]
        name = "eu-west"
        ip = "192.0.2.201"
        [[site]]
        name = "us_east.1"
        ip = "2001:db8::201"
        [[service]]
        name = "web-eu-1"
        ip = "10.0.0.10"
        port = 8080
        site = "eu-west"
        location = 'Europe.UK."St. Albans".*'
        weight = 100
        public_ip = "198.51.100.10"
        [[service]]
        name = "web-us-1"
        ip = "192.0.2.10"
        site = "us_east.1"
        [[service]]
        name = "web6"
        ip = "2001:db8::10"
        site = "eu-west"
        [[gslb_domain]]
        name = "WWW.example.com."
        ttl = 0
        answer = "all"
        services = ["web-eu-1", "web6"]
        backup_ip = ["192.0.2.99", "2001:db8::99"]
          [[gslb_domain.view]]
          view = "europe"
          services = ["web-us-1"]
        [[gslb_domain]]
        name = "example.com"
        ttl = 2147483647
        services = ["web-us-1"]
        down_response = "nodata"
        [[gslb_domain]]
        name = "api.example.com"
        services = ["web-us-1"]
        backup_ip = ["192.0.2.99"]
        down_response = "backup"
    "#;

    let zones_want = {
        let mut com = zone("example.com");
        com.ttl = 600;
        com.ns_ttl = 600;
        com.ns = vec!["ns1.example.com".into(), "ns2.example.net".into()];
        com.soa = Soa {
            mname: "ns0.example.com".into(),
            rname: "hostmaster.example.com".into(),
            serial: u32::MAX,
            refresh: 1,
            retry: 2,
            expire: 3,
            minimum: 0,
        };
        let name = |n: &str| n.to_owned();
        com.records = vec![
            rec(
                "ns1.example.com",
                600,
                RecordData::A("192.0.2.53".parse().unwrap()),
            ),
            rec(
                "ns1.example.com",
                600,
                RecordData::Aaaa("2001:db8::53".parse().unwrap()),
            ),
            rec(
                "example.com",
                600,
                RecordData::Txt(vec!["x".repeat(255), "x".repeat(45)]),
            ),
            rec(
                "example.com",
                600,
                RecordData::Txt(vec!["é".repeat(127), "é".repeat(73)]),
            ),
            rec(
                "empty.example.com",
                600,
                RecordData::Txt(vec![String::new()]),
            ),
            rec(
                "example.com",
                600,
                RecordData::Mx {
                    preference: 10,
                    exchange: name("mail.example.com"),
                },
            ),
            rec(
                "nomail.example.com",
                600,
                RecordData::Mx {
                    preference: 0,
                    exchange: String::new(),
                },
            ),
            rec(
                "alias.example.com",
                600,
                RecordData::Cname(name("www.example.net")),
            ),
            rec(
                "_sip._tcp.example.com",
                60,
                RecordData::Srv {
                    priority: 10,
                    weight: 5,
                    port: 5060,
                    target: name("sip.example.com"),
                },
            ),
            rec(
                "_none._tcp.example.com",
                600,
                RecordData::Srv {
                    priority: 0,
                    weight: 0,
                    port: 0,
                    target: String::new(),
                },
            ),
            rec(
                "ns.sub.example.com",
                600,
                RecordData::A("192.0.2.54".parse().unwrap()),
            ),
            rec(
                "sub.example.com",
                600,
                RecordData::Ns(name("ns.sub.example.com")),
            ),
        ];
        let mut org = zone("example.org");
        org.ns = vec!["ns1.example.com".into()];
        org.soa.mname = "ns1.example.com".into();
        org.soa.rname = "hostmaster.example.org".into();
        Config {
            zones: vec![com, org],
            ..empty()
        }
    };

    let cases: Vec<(&str, Config)> = vec![
        (SERVER, empty()),
        (
            server_and_views,
            Config {
                server: Server {
                    dns_port: 5353,
                    edns_udp_size: 4096,
                    interface: Some("eth0".into()),
                    xdp_mode: XdpMode::Skb,
                    pin_path: "/sys/fs/bpf/other".into(),
                    stale_after: None,
                    state_file: "/run/gslb/steering".into(),
                    socket_affinity: true,
                    user: Some(crate::privilege::User {
                        name: "root".into(),
                        uid: 0,
                        gid: 0,
                    }),
                    ..server(&["192.0.2.1", "2001:db8::1"])
                },
                views: vec![
                    View {
                        name: "europe".into(),
                        prefixes: vec![
                            "198.51.100.0/24".parse().unwrap(),
                            "2001:db8:100::/48".parse().unwrap(),
                        ],
                    },
                    View {
                        name: "us-east_1".into(),
                        prefixes: vec!["203.0.113.0/25".parse().unwrap()],
                    },
                ],
                ..empty()
            },
        ),
        (&zones, zones_want),
        (
            gslb_text,
            Config {
                views: vec![View {
                    name: "europe".into(),
                    prefixes: vec!["198.51.100.0/24".parse().unwrap()],
                }],
                zones: vec![zone("example.com")],
                sites: vec![
                    Site {
                        name: "eu-west".into(),
                        ip: ip("192.0.2.201"),
                        public_ip: None,
                        role: crate::mep::Role::Parent,
                        parent: None,
                        backup_parents: vec![],
                        mep_port: 3011,
                        key: None,
                        nat: false,
                    },
                    Site {
                        name: "us_east.1".into(),
                        ip: ip("2001:db8::201"),
                        public_ip: None,
                        role: crate::mep::Role::Parent,
                        parent: None,
                        backup_parents: vec![],
                        mep_port: 3011,
                        key: None,
                        nat: false,
                    },
                ],
                services: vec![
                    Service {
                        port: 8080,
                        location: Some(Location::parse("Europe.UK.\"St. Albans\".*").unwrap()),
                        weight: 100,
                        public_ip: Some(ip("198.51.100.10")),
                        ..service("web-eu-1", "10.0.0.10", "eu-west")
                    },
                    service("web-us-1", "192.0.2.10", "us_east.1"),
                    service("web6", "2001:db8::10", "eu-west"),
                ],
                gslb_domains: vec![
                    GslbDomain {
                        ttl: 0,
                        answer: AnswerMode::All,
                        max_answers: 8,
                        backup_ip: vec![ip("192.0.2.99"), ip("2001:db8::99")],
                        down_response: DownResponse::Backup,
                        views: vec![("europe".into(), vec!["web-us-1".into()])],
                        ..gslb("www.example.com", &["web-eu-1", "web6"])
                    },
                    GslbDomain {
                        ttl: 2_147_483_647,
                        ..gslb("example.com", &["web-us-1"])
                    },
                    GslbDomain {
                        backup_ip: vec![ip("192.0.2.99")],
                        down_response: DownResponse::Backup,
                        ..gslb("api.example.com", &["web-us-1"])
                    },
                ],
                ..empty()
            },
        ),
    ];
    for (text, want) in cases {
        assert_eq!(
            parse(text).unwrap_or_else(|e| panic!("{e}\n{text}")),
            want,
            "{text}"
        );
    }
}
