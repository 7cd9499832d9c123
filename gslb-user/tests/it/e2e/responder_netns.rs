//! The responder over the wire: gslbd in the lab serving the shared responder configuration
//! (`gslb_tests::responder_config`), and for every rule one query from the client namespace,
//! with `dig` or, for what dig cannot send, a raw socket.
//!
//! gslbd runs twice. First with XDP attached (skb mode): the hot queries (GSLB A/AAAA over UDP)
//! must be answered by XDP (a hit counted) and everything else by the responder (no hit). Then
//! without an interface, so nothing is attached: the responder must give the same answers to
//! everything, the hot queries included.

use std::{
    collections::HashSet,
    net::{IpAddr, SocketAddr},
    path::{Path, PathBuf},
    time::Duration,
};

use gslb_tests::{
    BIG_TXT_LEN, DigReply, HUGE_TXT_LEN, Lab, SERVER_IF, SERVER_V4, SERVER_V6, privileged,
    responder_config,
};
use gslb_user::dataplane::{self, Counters};
use hickory_proto::{
    op::{Message, MessageType, OpCode, Query, ResponseCode},
    rr::{Name, RecordType},
};

const V4: IpAddr = IpAddr::V4(SERVER_V4);
const V6: IpAddr = IpAddr::V6(SERVER_V6);
const WAIT: Duration = Duration::from_secs(2);

// ---- Expected dig replies ----

fn rrs(rrs: &[&str]) -> Vec<String> {
    rrs.iter().map(ToString::to_string).collect()
}

/// A reply to a QUERY with `status`, header `flags`, the `answer` section and our OPT (dig
/// sends EDNS unless told +noedns).
fn reply(status: &str, flags: &str, answer: &[&str]) -> DigReply {
    DigReply {
        opcode: "QUERY".into(),
        status: status.into(),
        flags: flags.split_whitespace().map(str::to_owned).collect(),
        answer: rrs(answer),
        authority: vec![],
        additional: vec![],
        edns_udp: Some(1232),
    }
}

fn ok(answer: &[&str]) -> DigReply {
    reply("NOERROR", "qr aa", answer)
}

fn negative(status: &str, answer: &[&str], soa: &str) -> DigReply {
    DigReply {
        authority: rrs(&[soa]),
        ..reply(status, "qr aa", answer)
    }
}

fn no_edns(reply: DigReply) -> DigReply {
    DigReply {
        edns_udp: None,
        ..reply
    }
}

const SOA: &str =
    "example.com. 3600 SOA ns1.example.com. hostmaster.example.com. 7 3600 600 604800 60";
const SOA_NEG: &str =
    "example.com. 60 SOA ns1.example.com. hostmaster.example.com. 7 3600 600 604800 60";
const SOA_ORG_NEG: &str =
    "example.org. 30 SOA ns1.example.com. hostmaster.example.org. 1 3600 600 604800 300";
const WWW_HOST_A: &str = "www.example.com. 30 A 192.0.2.80";

fn all_a() -> Vec<String> {
    (21..=28)
        .map(|i| format!("all.example.com. 20 A 203.0.113.{i}"))
        .collect()
}

/// A TXT record of `len` times `letter`, as dig shows it: 255-byte strings, quoted.
fn txt(name: &str, letter: char, len: usize) -> String {
    let text = letter.to_string().repeat(len);
    let strings: Vec<String> = text
        .as_bytes()
        .chunks(255)
        .map(|c| format!("\"{}\"", String::from_utf8_lossy(c)))
        .collect();
    format!("{name}.example.com. 3600 TXT {}", strings.join(" "))
}

// ---- The table ----

struct Case {
    what: &'static str,
    server: IpAddr,
    /// dig's arguments after @server +norec.
    args: &'static [&'static str],
    /// Answered by XDP when it is attached.
    hot: bool,
    want: DigReply,
}

fn case(what: &'static str, server: IpAddr, args: &'static [&'static str], want: DigReply) -> Case {
    Case {
        what,
        server,
        args,
        hot: false,
        want,
    }
}

fn hot(what: &'static str, server: IpAddr, args: &'static [&'static str], want: DigReply) -> Case {
    Case {
        what,
        server,
        args,
        hot: true,
        want,
    }
}

fn cases() -> Vec<Case> {
    let big = txt("big", 'b', BIG_TXT_LEN);
    let huge = txt("huge", 'h', HUGE_TXT_LEN);
    let lab_ns = "lab.example.com. 3600 NS ns.lab.example.com.";
    let lab_glue = "ns.lab.example.com. 3600 A 192.0.2.70";
    vec![
        // GSLB A/AAAA over UDP: the fast path's.
        hot(
            "GSLB A: view by longest prefix",
            V4,
            &["www.example.com", "A"],
            ok(&[WWW_HOST_A]),
        ),
        hot(
            "GSLB AAAA of the view",
            V4,
            &["www.example.com", "AAAA"],
            ok(&["www.example.com. 30 AAAA 2001:db8::80"]),
        ),
        hot(
            "GSLB all addresses, default view (IPv6 client), our EDNS size",
            V6,
            &["+bufsize=4096", "all.example.com", "A"],
            DigReply {
                answer: all_a(),
                ..ok(&[])
            },
        ),
        hot(
            "GSLB without EDNS",
            V4,
            &["+noedns", "www.example.com", "A"],
            no_edns(ok(&[WWW_HOST_A])),
        ),
        hot(
            "GSLB 0x20: the question as sent",
            V4,
            &["WwW.ExAmPlE.cOm", "A"],
            ok(&["WwW.ExAmPlE.cOm. 30 A 192.0.2.80"]),
        ),
        case(
            "GSLB over TCP",
            V4,
            &["+tcp", "www.example.com", "A"],
            ok(&[WWW_HOST_A]),
        ),
        case(
            "GSLB with EDNS version 1: BADVERS",
            V4,
            &["+edns=1", "+noednsnegotiation", "www.example.com", "A"],
            reply("BADVERS", "qr", &[]),
        ),
        // Static data.
        case("SOA at the apex", V4, &["example.com", "SOA"], ok(&[SOA])),
        case(
            "NS at the apex, with the in-zone server's addresses",
            V6,
            &["example.com", "NS"],
            DigReply {
                additional: rrs(&[
                    "ns1.example.com. 3600 A 192.0.2.53",
                    "ns1.example.com. 3600 AAAA 2001:db8::53",
                ]),
                ..ok(&[
                    "example.com. 3600 NS ns1.example.com.",
                    "example.com. 3600 NS ns2.example.net.",
                ])
            },
        ),
        case(
            "static A",
            V4,
            &["ns1.example.com", "A"],
            ok(&["ns1.example.com. 3600 A 192.0.2.53"]),
        ),
        case(
            "static AAAA",
            V6,
            &["ns1.example.com", "AAAA"],
            ok(&["ns1.example.com. 3600 AAAA 2001:db8::53"]),
        ),
        case(
            "static TXT",
            V4,
            &["txt.example.com", "TXT"],
            ok(&["txt.example.com. 3600 TXT \"hello\""]),
        ),
        case(
            "static MX, with the exchange's address",
            V4,
            &["example.com", "MX"],
            DigReply {
                additional: rrs(&["mail.example.com. 300 A 192.0.2.25"]),
                ..ok(&["example.com. 3600 MX 10 mail.example.com."])
            },
        ),
        // The other record types (issue 29), as dig shows them (hex in groups of 56 digits).
        case(
            "static CAA",
            V4,
            &["example.com", "CAA"],
            ok(&["example.com. 3600 CAA 0 issue \"letsencrypt.org\""]),
        ),
        case(
            "static PTR",
            V4,
            &["ptr.example.com", "PTR"],
            ok(&["ptr.example.com. 3600 PTR host.dept.example.com."]),
        ),
        case(
            "static NAPTR",
            V4,
            &["naptr.example.com", "NAPTR"],
            ok(&[
                "naptr.example.com. 3600 NAPTR 100 10 \"S\" \"SIP+D2U\" \"\" _sip._udp.example.com.",
            ]),
        ),
        case(
            "static SVCB",
            V4,
            &["svc.example.com", "SVCB"],
            ok(&["svc.example.com. 3600 SVCB 1 svc.example.net. alpn=\"h2\" port=8443"]),
        ),
        case(
            "static HTTPS beside a GSLB apex",
            V4,
            &["example.org", "HTTPS"],
            ok(&["example.org. 30 HTTPS 1 . alpn=\"h2\""]),
        ),
        case(
            "static TLSA",
            V4,
            &["_443._tcp.host.dept.example.com", "TLSA"],
            ok(&[
                "_443._tcp.host.dept.example.com. 3600 TLSA 3 1 1 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF01234567 89ABCDEF",
            ]),
        ),
        case(
            "static SSHFP",
            V4,
            &["host.dept.example.com", "SSHFP"],
            ok(&[
                "host.dept.example.com. 3600 SSHFP 4 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF01234567 89ABCDEF",
            ]),
        ),
        case(
            "DS at a delegation, answered by the parent",
            V4,
            &["lab.example.com", "DS"],
            ok(&[
                "lab.example.com. 3600 DS 12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF01234567 89ABCDEF",
            ]),
        ),
        case(
            "a type gslbd does not know (RFC 3597)",
            V4,
            &["unknown.example.com", "TYPE65534"],
            ok(&["unknown.example.com. 3600 TYPE65534 \\# 4 0A000001"]),
        ),
        case(
            "static SRV, with the target's address",
            V4,
            &["_sip._tcp.example.com", "SRV"],
            DigReply {
                additional: rrs(&["sip.example.com. 3600 A 192.0.2.60"]),
                ..ok(&["_sip._tcp.example.com. 3600 SRV 10 60 5060 sip.example.com."])
            },
        ),
        case(
            "static CNAME",
            V4,
            &["alias.example.com", "CNAME"],
            ok(&["alias.example.com. 3600 CNAME www.example.com."]),
        ),
        // CNAME chains.
        case(
            "CNAME to a GSLB name",
            V4,
            &["alias.example.com", "A"],
            ok(&["alias.example.com. 3600 CNAME www.example.com.", WWW_HOST_A]),
        ),
        case(
            "CNAME into another of our zones",
            V4,
            &["to-org.example.com", "A"],
            ok(&[
                "to-org.example.com. 3600 CNAME www.example.org.",
                "www.example.org. 30 A 192.0.2.90",
            ]),
        ),
        case(
            "CNAME leaving our zones",
            V4,
            &["cdn.example.com", "A"],
            ok(&["cdn.example.com. 3600 CNAME edge.cdn.example.net."]),
        ),
        case(
            "CNAME to a missing name",
            V4,
            &["dangling.example.com", "A"],
            negative(
                "NXDOMAIN",
                &["dangling.example.com. 3600 CNAME nowhere.example.com."],
                SOA_NEG,
            ),
        ),
        // Negative answers.
        case(
            "NXDOMAIN, SOA TTL = SOA minimum",
            V4,
            &["nope.example.com", "A"],
            negative("NXDOMAIN", &[], SOA_NEG),
        ),
        case(
            "NXDOMAIN, SOA TTL = zone TTL",
            V6,
            &["nope.example.org", "A"],
            negative("NXDOMAIN", &[], SOA_ORG_NEG),
        ),
        case(
            "NODATA: static name",
            V4,
            &["txt.example.com", "A"],
            negative("NOERROR", &[], SOA_NEG),
        ),
        case(
            "NODATA: GSLB name without AAAA",
            V6,
            &["all.example.com", "AAAA"],
            negative("NOERROR", &[], SOA_NEG),
        ),
        case(
            "NODATA: empty non-terminal",
            V4,
            &["dept.example.com", "A"],
            negative("NOERROR", &[], SOA_NEG),
        ),
        // Not ours, not a query, not well-formed.
        case(
            "REFUSED outside our zones",
            V4,
            &["www.example.net", "A"],
            reply("REFUSED", "qr", &[]),
        ),
        case(
            "REFUSED for class CH",
            V4,
            &["version.bind", "TXT", "CH"],
            reply("REFUSED", "qr", &[]),
        ),
        case(
            "referral below a delegation",
            V4,
            &["host.lab.example.com", "A"],
            DigReply {
                authority: rrs(&[lab_ns]),
                additional: rrs(&[lab_glue]),
                ..reply("NOERROR", "qr", &[])
            },
        ),
        case(
            "FORMERR: no question",
            V4,
            &["+header-only"],
            reply("FORMERR", "qr", &[]),
        ),
        case(
            "NOTIMP: NOTIFY",
            V4,
            &["+opcode=notify", "example.com", "SOA"],
            DigReply {
                opcode: "NOTIFY".into(),
                ..reply("NOTIMP", "qr", &[])
            },
        ),
        case(
            "NOTIMP: UPDATE",
            V4,
            &["+opcode=update", "example.com", "SOA"],
            DigReply {
                opcode: "UPDATE".into(),
                ..reply("NOTIMP", "qr", &[])
            },
        ),
        case(
            "NOTIMP: STATUS",
            V4,
            &["+opcode=status", "example.com", "SOA"],
            DigReply {
                opcode: "STATUS".into(),
                ..reply("NOTIMP", "qr", &[])
            },
        ),
        case("ANY: one RRset", V4, &["example.com", "ANY"], ok(&[SOA])),
        // Sizes.
        case(
            "TC without EDNS",
            V4,
            &["+noedns", "+ignore", "big.example.com", "TXT"],
            no_edns(reply("NOERROR", "qr aa tc", &[])),
        ),
        case(
            "TC over the client's EDNS size",
            V4,
            &["+bufsize=512", "+ignore", "big.example.com", "TXT"],
            reply("NOERROR", "qr aa tc", &[]),
        ),
        case(
            "the client's EDNS size honoured",
            V4,
            &["+bufsize=1232", "big.example.com", "TXT"],
            ok(&[&big]),
        ),
        case(
            "TCP after TC without EDNS",
            V4,
            &["+tcp", "+noedns", "big.example.com", "TXT"],
            no_edns(ok(&[&big])),
        ),
        case(
            "TC over our size",
            V6,
            &["+bufsize=4096", "+ignore", "huge.example.com", "TXT"],
            reply("NOERROR", "qr aa tc", &[]),
        ),
        case(
            "TCP beyond our UDP size",
            V6,
            &["+tcp", "huge.example.com", "TXT"],
            ok(&[&huge]),
        ),
    ]
}

// ---- Running it ----

fn counters(pin_path: &Path) -> Counters {
    dataplane::pinned_counters(pin_path).expect("reading the pinned counters")
}

fn hits(after: &Counters, before: &Counters) -> u64 {
    after.hits() - before.hits()
}

/// Runs `f` and returns its result with the XDP hits counted meanwhile.
fn counting<T>(pin_path: &Path, f: impl FnOnce() -> T) -> (T, u64) {
    let before = counters(pin_path);
    let out = f();
    (out, hits(&counters(pin_path), &before))
}

fn query(id: u16, name: &str, qtype: RecordType) -> Vec<u8> {
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    m.to_vec().unwrap()
}

/// The rules dig cannot send, from a raw socket: (what, request, expected rcode or no reply,
/// answered by XDP when attached).
fn raw_cases() -> Vec<(&'static str, Vec<u8>, Option<ResponseCode>, bool)> {
    let mut two = query(1, "www.example.com", RecordType::A);
    two[5] = 2; // QDCOUNT=2
    two.extend_from_slice(&query(1, "txt.example.com", RecordType::TXT)[12..]);
    let mut garbage = query(2, "www.example.com", RecordType::A)[..12].to_vec();
    garbage.extend_from_slice(&[0xff; 20]);
    let mut trailing = query(3, "www.example.com", RecordType::A);
    trailing.extend_from_slice(&[0; 4]);
    let mut response = query(4, "www.example.com", RecordType::A);
    response[2] |= 0x80;
    vec![
        (
            "GSLB A from a raw socket",
            query(5, "www.example.com", RecordType::A),
            Some(ResponseCode::NoError),
            true,
        ),
        (
            "FORMERR: QDCOUNT=2",
            two,
            Some(ResponseCode::FormErr),
            false,
        ),
        (
            "FORMERR: garbage after a valid header",
            garbage,
            Some(ResponseCode::FormErr),
            false,
        ),
        (
            "FORMERR: bytes after a hot query",
            trailing,
            Some(ResponseCode::FormErr),
            false,
        ),
        ("no reply to a response", response, None, false),
        ("no reply to 11 bytes", vec![0; 11], None, false),
    ]
}

/// The question section of a message with one uncompressed question.
fn question_bytes(message: &[u8]) -> &[u8] {
    let mut end = 12;
    while message[end] != 0 {
        end += 1 + message[end] as usize;
    }
    &message[12..end + 5]
}

/// Every rule once against the running gslbd; returns what went wrong.
fn check_rules(lab: &Lab, pin_path: &Path, attached: bool) -> Vec<String> {
    let mode = if attached {
        "XDP attached"
    } else {
        "XDP not attached"
    };
    let mut failures = Vec::new();
    let mut fail = |what: &str, why: String| failures.push(format!("{mode}, {what}: {why}"));
    let want_hits = |hot: bool| u64::from(hot && attached);

    for c in cases() {
        let (out, hits) = counting(pin_path, || lab.dig(c.server, c.args));
        let got = DigReply::parse(&out);
        if got != c.want {
            fail(c.what, format!("want {:#?}\ngot {got:#?}\n{out}", c.want));
        }
        if hits != want_hits(c.hot) {
            fail(
                c.what,
                format!("{hits} XDP hits, want {}", want_hits(c.hot)),
            );
        }
    }

    for (what, request, want, hot) in raw_cases() {
        let server = SocketAddr::new(V4, 53);
        let (reply, hits) = counting(pin_path, || lab.udp_exchange(server, &request, WAIT));
        let got = reply.map(|r| Message::from_vec(&r).expect("the reply parses"));
        if got.as_ref().map(|m| m.response_code) != want {
            fail(what, format!("want {want:?}, got {got:?}"));
        }
        if got
            .as_ref()
            .is_some_and(|m| m.id != u16::from_be_bytes([request[0], request[1]]))
        {
            fail(what, "the ID is not the request's".into());
        }
        if hits != want_hits(hot) {
            fail(what, format!("{hits} XDP hits, want {}", want_hits(hot)));
        }
    }

    // The question echoed byte for byte, by XDP and by the responder.
    for (qtype, hot) in [(RecordType::A, true), (RecordType::TXT, false)] {
        let request = query(6, "wWw.eXaMpLe.CoM", qtype);
        let (reply, hits) = counting(pin_path, || {
            lab.udp_exchange(SocketAddr::new(V6, 53), &request, WAIT)
        });
        match reply {
            Some(reply) if question_bytes(&reply) == question_bytes(&request) => {}
            reply => fail("0x20 byte for byte", format!("{qtype}: {reply:02x?}")),
        }
        if hits != want_hits(hot) {
            fail("0x20 byte for byte", format!("{qtype}: {hits} XDP hits"));
        }
    }

    // Rotation: one address of the default view's set each time; the responder's rotor steps
    // through it in order (XDP's rotors are per CPU, so only membership is checked there).
    let (answers, hits) = counting(pin_path, || {
        (0..4)
            .map(|_| DigReply::parse(&lab.dig(V6, &["www.example.com", "A"])).answer)
            .collect::<Vec<_>>()
    });
    let set = [
        "www.example.com. 30 A 198.51.100.10",
        "www.example.com. 30 A 198.51.100.11",
    ];
    if !answers
        .iter()
        .all(|a| a.len() == 1 && set.contains(&a[0].as_str()))
    {
        fail("rotation", format!("{answers:?}"));
    }
    if !attached && answers.windows(2).any(|w| w[0] == w[1]) {
        fail("rotation in order", format!("{answers:?}"));
    }
    if hits != want_hits(true) * 4 {
        fail(
            "rotation",
            format!("{hits} XDP hits, want {}", want_hits(true) * 4),
        );
    }

    // TCP: pipelined queries on one connection, answered in order.
    let names = ["www.example.com", "txt.example.com", "nope.example.com"];
    let requests: Vec<Vec<u8>> = names
        .iter()
        .enumerate()
        .map(|(i, n)| query(10 + i as u16, n, RecordType::A))
        .collect();
    let replies = lab.tcp_exchange(SocketAddr::new(V4, 53), &requests, WAIT);
    let ids: Vec<u16> = replies
        .iter()
        .map(|r| Message::from_vec(r).expect("the reply parses").id)
        .collect();
    if ids != [10, 11, 12] {
        fail("TCP pipelined", format!("reply IDs {ids:?}"));
    }

    // A silent TCP client blocks nobody.
    let silent = lab.tcp_connect(SocketAddr::new(V4, 53));
    for args in [
        &["+tcp", "txt.example.com", "TXT"][..],
        &["txt.example.com", "TXT"],
    ] {
        let got = DigReply::parse(&lab.dig(V4, args));
        if got.answer != ["txt.example.com. 3600 TXT \"hello\""] {
            fail("a silent TCP client open", format!("{args:?}: {got:?}"));
        }
    }
    drop(silent);
    failures
}

fn start_gslbd(lab: &mut Lab, config: &Path, pin_path: &Path, attach: bool) -> u32 {
    let mut gslbd = lab.nsenter(&lab.server_ns, env!("CARGO_BIN_EXE_gslbd").as_ref());
    gslbd.args([
        "--config",
        config.to_str().unwrap(),
        "--pin-path",
        pin_path.to_str().unwrap(),
    ]);
    if attach {
        gslbd.args(["--interface", SERVER_IF, "--xdp-mode", "skb"]);
    }
    lab.spawn_until(gslbd, "gslbd: ready", Duration::from_secs(30))
}

#[test]
fn responder_rules_over_the_wire_with_and_without_xdp() {
    if !privileged("responder_rules_over_the_wire_with_and_without_xdp") {
        return;
    }
    let mut lab = Lab::new("resp");
    let config = std::env::temp_dir().join(format!("{}.toml", lab.server_ns));
    std::fs::write(&config, responder_config()).unwrap();
    let mut failures = Vec::new();
    let mut pins = HashSet::new();
    for attached in [true, false] {
        let pin_path = PathBuf::from(format!("/sys/fs/bpf/{}-{attached}", lab.server_ns));
        let gslbd = start_gslbd(&mut lab, &config, &pin_path, attached);
        failures.extend(check_rules(&lab, &pin_path, attached));
        lab.stop(gslbd);
        pins.insert(pin_path);
    }
    drop(lab);
    let _ = std::fs::remove_file(config);
    for pin_path in pins {
        assert!(
            !pin_path.join("COUNTERS").exists(),
            "gslbd removes its pins on SIGTERM"
        );
        let _ = std::fs::remove_dir(&pin_path);
    }
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
