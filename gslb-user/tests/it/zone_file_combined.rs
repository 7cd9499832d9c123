//! Features combined in one configuration, as dig sees them through gslbd's own sockets: a zone
//! read from an RFC 1035 master file holding a GSLB domain with static views, a DNS policy that
//! narrows one view's services for part of its clients, and EDNS Client Subnet choosing the
//! view and the policy, echoed with the answer's scope.

use crate::common::{self, Gslbd, WAIT, dig_loopback};
use gslb_tests::{DigReply, TempDir, dig_answers};

/// The file's SOA, as dig prints it in an authority section: the negative TTL is the SOA's
/// minimum, 60, under the file's $TTL of 300 (RFC 2308 §5).
const SOA: &str =
    "example.com. 60 SOA ns1.example.com. hostmaster.example.com. 2024060101 3600 600 604800 60";

/// Relative names, an owner-less apex and parentheses, so that the file is read as a master
/// file. www is the GSLB domain's name: its TXT stays static, beside the GSLB addresses.
const ZONE_FILE: &str = r#"$ORIGIN example.com.
$TTL 300
@       IN SOA ns1 hostmaster (
                2024060101 ; serial
                3600 600 604800
                60 )       ; negative TTL
        IN NS  ns1
        IN MX  10 mail
        IN TXT "v=spf1 mx -all"
ns1     IN A   127.0.0.1
mail    IN A   192.0.2.25
www     IN TXT "site-verification=abc"
"#;

/// Views "local" (dig's own address), "europe" and "us", each with its own services for
/// www.example.com; clients of us in 203.0.113.0/25 match the policy "east-coast", which
/// prefers Virginia over global availability's first choice, California.
fn config(port: u16) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1"]
dns_port = {port}

[[zone]]
name = "example.com"
file = "example.com.zone"

[[view]]
name = "local"
prefixes = ["127.0.0.0/8"]

[[view]]
name = "europe"
prefixes = ["198.51.100.0/24"]

[[view]]
name = "us"
prefixes = ["203.0.113.0/24"]

[[site]]
name = "dc"
ip = "192.0.2.1"

[[service]]
name = "default"
ip = "192.0.2.100"
site = "dc"

[[service]]
name = "local"
ip = "192.0.2.10"
site = "dc"

[[service]]
name = "eu"
ip = "198.51.100.10"
site = "dc"

[[service]]
name = "us-ca"
ip = "203.0.113.31"
site = "dc"
location = "NorthAmerica.US.California"

[[service]]
name = "us-va"
ip = "203.0.113.30"
site = "dc"
location = "NorthAmerica.US.Virginia"

[[action]]
name = "prefer-virginia"
preferred_locations = ["NorthAmerica.US.Virginia"]

[[policy]]
name = "east-coast"
expression = 'CLIENT.IP.SRC.IN_SUBNET(203.0.113.0/25)'
action = "prefer-virginia"
priority = 10

[[gslb_domain]]
name = "www.example.com"
method = "globalavailability"
services = ["default"]

  [[gslb_domain.view]]
  view = "local"
  services = ["local"]

  [[gslb_domain.view]]
  view = "europe"
  services = ["eu"]

  [[gslb_domain.view]]
  view = "us"
  services = ["us-ca", "us-va"]
"#
    )
}

/// The answer section of `dig ARGS…` as "owner TYPE value" lines, and the client subnet dig
/// read in the reply's OPT ("addr/source/scope"), if any.
async fn ask(port: u16, args: &[&str]) -> (Vec<String>, Option<String>) {
    let out = dig_loopback(port, args).await;
    let answers = dig_answers(&out)
        .into_iter()
        .map(|(owner, rtype, value)| format!("{owner} {rtype} {value}"))
        .collect();
    let ecs = out
        .lines()
        .find_map(|l| l.strip_prefix("; CLIENT-SUBNET: "))
        .map(str::to_owned);
    (answers, ecs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_file_serves_views_a_policy_and_ecs_together() {
    let dir = TempDir::new("zone-file-combined");
    let path = dir.0.join("gslb.toml");
    let (port, dns) = common::bound_dns();
    std::fs::write(dir.0.join("example.com.zone"), ZONE_FILE).unwrap();
    std::fs::write(&path, config(port)).unwrap();
    let gslbd = Gslbd::start_bound(&path, dns, None, WAIT).await;

    // 1. The file's static records, at the apex and below it, and www's TXT beside the GSLB
    // addresses.
    let (mx, _) = ask(port, &["example.com", "MX"]).await;
    assert_eq!(mx, ["example.com. MX 10 mail.example.com."]);
    let (txt, _) = ask(port, &["example.com", "TXT"]).await;
    assert_eq!(txt, ["example.com. TXT \"v=spf1 mx -all\""]);
    let (mail, _) = ask(port, &["mail.example.com", "A"]).await;
    assert_eq!(mail, ["mail.example.com. A 192.0.2.25"]);
    let (www_txt, _) = ask(port, &["www.example.com", "TXT"]).await;
    assert_eq!(www_txt, ["www.example.com. TXT \"site-verification=abc\""]);

    // 2. Each view its own service: dig's address is in "local"; a subnet of "europe" gets
    // europe's, for a scope of europe's /24 (a resolver caches it for that /24 only).
    let (local, ecs) = ask(port, &["www.example.com", "A"]).await;
    assert_eq!(local, ["www.example.com. A 192.0.2.10"]);
    assert_eq!(ecs, None, "no ECS asked, none echoed");
    for tcp in [false, true] {
        let mut args = vec!["www.example.com", "A", "+subnet=198.51.100.0/24"];
        if tcp {
            args.push("+tcp");
        }
        let (europe, ecs) = ask(port, &args).await;
        assert_eq!(europe, ["www.example.com. A 198.51.100.10"], "tcp {tcp}");
        assert_eq!(ecs.as_deref(), Some("198.51.100.0/24/24"), "tcp {tcp}");
    }
    // A subnet in no view: the domain's own service.
    let (default, _) = ask(port, &["www.example.com", "A", "+subnet=192.0.2.0/24"]).await;
    assert_eq!(default, ["www.example.com. A 192.0.2.100"]);

    // 3. The policy: us clients it does not match get global availability's first service,
    // those it matches Virginia's, each for the /25 the policy splits the view into.
    let (unmatched, ecs) = ask(port, &["www.example.com", "A", "+subnet=203.0.113.128/25"]).await;
    assert_eq!(unmatched, ["www.example.com. A 203.0.113.31"]);
    assert_eq!(ecs.as_deref(), Some("203.0.113.128/25/25"));
    let (matched, ecs) = ask(port, &["www.example.com", "A", "+subnet=203.0.113.0/25"]).await;
    assert_eq!(matched, ["www.example.com. A 203.0.113.30"]);
    assert_eq!(ecs.as_deref(), Some("203.0.113.0/25/25"));
    // A /24 is not specific enough: the scope is longer than the source (RFC 7871 §7.2.1).
    let (_, ecs) = ask(port, &["www.example.com", "A", "+subnet=203.0.113.0/24"]).await;
    assert_eq!(ecs.as_deref(), Some("203.0.113.0/24/25"));

    // ANY (a minimal answer: the GSLB addresses) holds for the same blocks as A: it carries
    // the view's and the policy's answer. (It was echoed with scope 0, valid for everyone.)
    for (subnet, want, scope) in [
        ("198.51.100.0/24", "198.51.100.10", "198.51.100.0/24/24"),
        ("203.0.113.0/25", "203.0.113.30", "203.0.113.0/25/25"),
    ] {
        let (any, ecs) = ask(
            port,
            &["www.example.com", "ANY", &format!("+subnet={subnet}")],
        )
        .await;
        assert_eq!(
            any,
            [format!("www.example.com. A {want}")],
            "ANY from {subnet}"
        );
        assert_eq!(ecs.as_deref(), Some(scope), "ANY from {subnet}");
    }

    // 4. Negative answers carry the file's SOA: NXDOMAIN, NODATA at a static name, and NODATA
    // at the GSLB name for a family none of its services has, whatever the view.
    for (args, status) in [
        (&["nothere.example.com", "A"][..], "NXDOMAIN"),
        (&["mail.example.com", "AAAA"], "NOERROR"),
        (&["www.example.com", "MX"], "NOERROR"),
        (
            &["www.example.com", "AAAA", "+subnet=198.51.100.0/24"],
            "NOERROR",
        ),
    ] {
        let reply = DigReply::parse(&dig_loopback(port, args).await);
        assert_eq!(reply.status, status, "{args:?}");
        assert!(reply.has_flag("aa"), "{args:?}: {reply:?}");
        assert_eq!(reply.answer, Vec::<String>::new(), "{args:?}");
        assert_eq!(reply.authority, [SOA], "{args:?}");
    }
    gslbd.stop().await;
}
