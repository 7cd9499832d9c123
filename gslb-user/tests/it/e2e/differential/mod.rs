//! Differential test against the reference servers (issue 27): NSD and Knot DNS
//! (`gslb_tests::peers`) serve the zones gslbd serves (its GSLB names as static records,
//! `zone_files::write_zones`), each on its own port of the loopback of a namespace of the
//! test's own, and every request of the matrix ([`cases`]) goes to all three, over UDP and,
//! for its TCP subset, over TCP. The replies are compared on the RCODE, the header flags, the
//! OPT record and the sections ([`outcome`]). gslbd runs `--no-xdp`: the fast path is held to
//! the responder's answers by `xdp_fuzz` and `xdp_test_run`.
//!
//! Every case must come out as NSD's and Knot's where those two agree, unless it is in
//! [`ALLOWED`] (a difference the RFCs decide for gslbd, each a line of docs/security.md,
//! "Differences from NSD and Knot", which this test reads); where NSD and Knot disagree, the
//! case must be listed with the server gslbd follows. Entries that no longer differ fail the
//! test too, so the list and the page say what gslbd does today.

mod cases;
mod outcome;
mod zone_file;

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream, UdpSocket},
    path::Path,
    time::Duration,
};

use gslb_tests::{
    Netns, Processes, TempDir,
    peers::{Peer, wait_for_answers},
    privileged, skip,
};
use gslb_user::config::Config;

use self::outcome::{Outcome, rcode_name};
use crate::zone_files::write_zones;

/// How long a server has to answer one request before it counts as silent.
const WAIT: Duration = Duration::from_secs(2);

/// The servers compared, each on 127.0.0.1 at its own port of the test's namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Server {
    Gslbd,
    Peer(Peer),
}

const SERVERS: [(Server, u16); 3] = [
    (Server::Gslbd, 5300),
    (Server::Peer(Peer::Nsd), 5301),
    (Server::Peer(Peer::Knot), 5302),
];

impl Server {
    fn name(self) -> &'static str {
        match self {
            Server::Gslbd => "gslbd",
            Server::Peer(p) => p.name(),
        }
    }
}

/// How gslbd may answer a case otherwise than the reference servers; each is a row of
/// docs/security.md's "Differences from NSD and Knot", with the RFC that decides it.
#[derive(Clone, Copy, Debug)]
enum Allowed {
    /// NSD and Knot disagree; gslbd answers exactly as this one.
    Follows(Peer),
    /// gslbd answers as neither (whether they agree or not), with this RCODE.
    Own(Option<u16>),
}

const NOERROR: Option<u16> = Some(0);
const FORMERR: Option<u16> = Some(1);
const NXDOMAIN: Option<u16> = Some(3);
const NOTIMP: Option<u16> = Some(4);
const REFUSED: Option<u16> = Some(5);

/// The differences, by case name (`NAME/tcp` for a case's TCP run), a group per row of
/// docs/security.md.
const ALLOWED: &[(&[&str], Allowed)] = &[
    (&["cd", "z-ad-cd-edns"], Allowed::Own(NOERROR)),
    (
        &["opcode15-header-only/tcp", "qdcount0/tcp"],
        Allowed::Follows(Peer::Knot),
    ),
    (
        &[
            "opcode1",
            "opcode2",
            "opcode3",
            "opcode6",
            "opcode7",
            "opcode8",
            "opcode9",
            "opcode10",
            "opcode11",
            "opcode12",
            "opcode13",
            "opcode14",
            "opcode15",
            "opcode15/tcp",
        ],
        Allowed::Follows(Peer::Knot),
    ),
    (&["opcode4", "opcode4/tcp"], Allowed::Own(NOTIMP)),
    (&["opcode5", "opcode5/tcp"], Allowed::Own(NOTIMP)),
    (&["opcode4-header-only"], Allowed::Own(NOTIMP)),
    (&["edns-nsid", "edns-expire"], Allowed::Follows(Peer::Nsd)),
    (&["edns-ecs"], Allowed::Own(NOERROR)),
    (&["any-apex", "any-apex/tcp"], Allowed::Follows(Peer::Nsd)),
    (&["qtype-opt", "qtype-tsig"], Allowed::Own(FORMERR)),
    (&["qtype-tkey"], Allowed::Own(NOTIMP)),
    (&["qtype-maila", "qtype-mailb"], Allowed::Own(NOTIMP)),
    (
        &["qtype-128", "qtype-200", "qtype-248"],
        Allowed::Own(NOTIMP),
    ),
    (
        &["qtype-axfr/tcp", "qtype-ixfr", "qtype-ixfr/tcp"],
        Allowed::Follows(Peer::Nsd),
    ),
    (&["ch-id.server", "ch-hostname.bind"], Allowed::Own(REFUSED)),
    (
        &["ch-version.bind", "ch-version.server"],
        Allowed::Own(REFUSED),
    ),
    (&["class-any"], Allowed::Follows(Peer::Nsd)),
    (&["class-any-nxdomain"], Allowed::Own(NXDOMAIN)),
    (&["class-none", "class-hs"], Allowed::Follows(Peer::Knot)),
    (&["qdcount0-edns"], Allowed::Follows(Peer::Knot)),
    (&["qdcount2", "qdcount2/tcp"], Allowed::Follows(Peer::Nsd)),
    (
        &[
            "answer-record",
            "authority-record",
            "a-record-in-additional",
        ],
        Allowed::Follows(Peer::Nsd),
    ),
    (
        &["opt-in-authority", "two-opts"],
        Allowed::Follows(Peer::Nsd),
    ),
    (
        &[
            "mx",
            "srv",
            "gslb-sibling-mx",
            "wildcard-mx",
            "wildcard-mx/tcp",
        ],
        Allowed::Follows(Peer::Knot),
    ),
    (&["wildcard-any"], Allowed::Own(NOERROR)),
    (&["gslb-apex-ns", "gslb-apex-mx"], Allowed::Own(NOERROR)),
    (&["cname-other-zone"], Allowed::Follows(Peer::Nsd)),
];

/// gslbd's configuration: the responder tests' shared one (`gslb_tests::responder_config`:
/// two zones, a name for every case the responder treats differently), which `write_zones`
/// writes for NSD and Knot, served on 127.0.0.1 at `port`, its admin state file in `dir`. The
/// clients here are in none of its views. Its GSLB names are asked only where the answer is
/// the same from a static zone: `all.example.com` answers all its addresses, where
/// `www.example.com` rotates.
fn config(dir: &Path, port: u16) -> String {
    let listen = format!(
        "listen = [\"{}\", \"{}\"]\n",
        gslb_tests::SERVER_V4,
        gslb_tests::SERVER_V6
    );
    let text = gslb_tests::responder_config();
    assert!(text.contains(&listen), "responder_config's listen line");
    text.replacen(
        &listen,
        &format!(
            "listen = [\"127.0.0.1\"]\ndns_port = {port}\nstate_file = \"{}\"\n",
            dir.join("admin-state").display()
        ),
        1,
    )
}

/// Starts the three servers in `ns`, each on 127.0.0.1 at its [`SERVERS`] port: gslbd
/// (`--no-xdp`) on `config_path`, and NSD and Knot each from a directory of its own in `dir`
/// with the zones `zones` writes there (it returns their names); waits until each answers.
fn start(
    ns: &Netns,
    processes: &mut Processes,
    dir: &Path,
    config_path: &Path,
    zones: impl Fn(&Path) -> Vec<String>,
) {
    let addr = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    for (server, port) in SERVERS {
        match server {
            Server::Gslbd => {
                let mut gslbd = ns.nsenter(env!("CARGO_BIN_EXE_gslbd").as_ref());
                gslbd
                    .env("RUST_LOG", "warn")
                    .arg("--config")
                    .arg(config_path)
                    .arg("--no-xdp")
                    .arg("--control")
                    .arg(dir.join("gslbd.sock"));
                processes.spawn_until(gslbd, "ready", Duration::from_secs(30));
            }
            Server::Peer(peer) => {
                let peer_dir = dir.join(peer.name());
                std::fs::create_dir_all(&peer_dir).unwrap();
                let zones = zones(&peer_dir);
                let cmd = peer
                    .command(&zones, &peer_dir, &[addr(port)], None, false, ns.exec("sh"))
                    .unwrap_or_else(|why| panic!("{}: {why}", peer.name()));
                processes.spawn_until(cmd, "ready", Duration::from_secs(10));
                let port = port.to_string();
                wait_for_answers(peer.name(), || {
                    ns.dig(addr(0).ip(), &["-p", &port, "example.com", "SOA"])
                });
            }
        }
    }
}

/// Whether NSD and Knot can run here; if not, says why the test skips.
fn peers_installed(test: &str) -> bool {
    for peer in Peer::ALL {
        if let Err(why) = peer.binary() {
            skip(&format!("{test}: {why}"));
            return false;
        }
    }
    true
}

/// One request to a server and what came of it, over one transport.
type Exchange = fn(SocketAddr, &[u8]) -> Outcome;

/// One request over UDP from a socket of its own.
fn udp(server: SocketAddr, request: &[u8]) -> Outcome {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("a UDP socket");
    socket.set_read_timeout(Some(WAIT)).unwrap();
    socket.send_to(request, server).expect("send");
    let mut buf = vec![0; 65535];
    match socket.recv(&mut buf) {
        Ok(len) => Outcome::of(&buf[..len]),
        Err(_) => Outcome::Silent,
    }
}

/// One request over a TCP connection of its own.
fn tcp(server: SocketAddr, request: &[u8]) -> Outcome {
    let mut stream = TcpStream::connect_timeout(&server, WAIT).expect("connect");
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let framed = [&(request.len() as u16).to_be_bytes()[..], request].concat();
    stream.write_all(&framed).expect("write");
    let mut len = [0u8; 2];
    if stream.read_exact(&mut len).is_err() {
        return Outcome::Silent;
    }
    let mut reply = vec![0; usize::from(u16::from_be_bytes(len))];
    match stream.read_exact(&mut reply) {
        Ok(()) => Outcome::of(&reply),
        Err(_) => Outcome::Silent,
    }
}

/// A case's run over one transport: its name and each server's outcome, in [`SERVERS`] order.
struct Row {
    name: String,
    outcomes: [Outcome; 3],
}

/// What is wrong with `row` by [`ALLOWED`], if anything.
fn verdict(row: &Row) -> Option<String> {
    let [gslbd, nsd, knot] = &row.outcomes;
    let allowed = ALLOWED
        .iter()
        .find(|(names, _)| names.contains(&row.name.as_str()))
        .map(|(_, a)| *a);
    let rcode_is = |want: Option<u16>| {
        (gslbd.rcode() != want).then(|| {
            format!(
                "gslbd's RCODE is {}, the allow-list says {}",
                gslbd.rcode().map_or("no reply".into(), rcode_name),
                want.map_or("no reply".into(), rcode_name)
            )
        })
    };
    match allowed {
        None if nsd == knot => (gslbd != nsd).then(|| "gslbd differs from NSD and Knot".into()),
        None => Some("NSD and Knot disagree, and the case is not listed".into()),
        Some(Allowed::Follows(_)) if nsd == knot => Some(format!(
            "listed as following one of NSD and Knot, but they agree{}",
            if gslbd == nsd { " with gslbd" } else { "" }
        )),
        Some(Allowed::Follows(peer)) => {
            let followed = if peer == Peer::Nsd { nsd } else { knot };
            (gslbd != followed).then(|| format!("gslbd does not answer as {}", peer.name()))
        }
        Some(Allowed::Own(_)) if gslbd == nsd || gslbd == knot => Some(format!(
            "listed as answered its own way, but gslbd answers as {}",
            if gslbd == nsd { "NSD" } else { "Knot" }
        )),
        Some(Allowed::Own(rcode)) => rcode_is(rcode),
    }
}

/// The case names of docs/security.md's "Differences from NSD and Knot": the `code` spans of
/// each table row's first cell.
fn documented(page: &str) -> Vec<String> {
    let section = page
        .split("\n## ")
        .find(|s| s.starts_with("Differences from NSD and Knot"))
        .expect("docs/security.md has a section \"Differences from NSD and Knot\"");
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once(" |"))
        .flat_map(|(cell, _)| {
            cell.split('`')
                .step_by(2)
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The verdicts are not vacuous: a difference that is not listed fails, so does a listed one
/// that gslbd answers otherwise, or no longer differs.
#[test]
fn the_verdict_fails_unlisted_wrong_and_stale_differences() {
    // A header-only NOERROR and FORMERR, and silence.
    let (a, b) = (
        Outcome::of(&[0, 1, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        Outcome::of(&[0, 1, 0x80, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
    );
    let silent = Outcome::Silent;
    let row = |name: &str, outcomes: [&Outcome; 3]| Row {
        name: name.into(),
        outcomes: outcomes.map(Clone::clone),
    };
    // (row, whether it fails)
    let rows = [
        (row("soa", [&a, &a, &a]), false),
        (row("soa", [&silent, &a, &a]), true),
        (row("soa", [&a, &a, &b]), true),
        (row("mx", [&b, &a, &b]), false),
        (row("mx", [&a, &a, &b]), true),
        (row("mx", [&b, &b, &b]), true),
        (row("cd", [&a, &b, &b]), false),
        (row("cd", [&b, &a, &a]), true),
        (row("cd", [&a, &a, &a]), true),
        (row("qdcount2", [&b, &b, &silent]), false),
    ];
    for (row, fails) in rows {
        let got = verdict(&row);
        assert_eq!(
            got.is_some(),
            fails,
            "{}: {:?} for {}",
            row.name,
            got,
            row.outcomes.map(|o| o.to_string()).join(" / ")
        );
    }
}

#[test]
fn gslbd_answers_as_nsd_and_knot_or_as_the_documented_differences_say() {
    if !privileged("differential") || !peers_installed("differential") {
        return;
    }
    // Dropped in reverse: the servers stop, then the namespace goes, then the files.
    let tmp = TempDir::new("differential");
    let ns = Netns::new("diff", "servers");
    let mut processes = Processes::default();
    let dir = &tmp.0;
    let addr = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));

    let config_path = dir.join("gslbd.toml");
    std::fs::write(&config_path, config(dir, SERVERS[0].1)).unwrap();
    let loaded = Config::load(&config_path).expect("the test's configuration");
    start(&ns, &mut processes, dir, &config_path, |peer_dir| {
        write_zones(&loaded, peer_dir)
    });

    let rows: Vec<Row> = ns.enter(|| {
        let mut rows = Vec::new();
        for case in cases::all() {
            let transports: &[(&str, Exchange)] = if case.tcp {
                &[("", udp), ("/tcp", tcp)]
            } else {
                &[("", udp)]
            };
            for (suffix, exchange) in transports {
                rows.push(Row {
                    name: format!("{}{suffix}", case.name),
                    outcomes: SERVERS.map(|(_, port)| exchange(addr(port), &case.request)),
                });
            }
        }
        rows
    });

    let mut report = String::new();
    let mut failures = Vec::new();
    for row in &rows {
        let [gslbd, nsd, knot] = &row.outcomes;
        let verdict = verdict(row);
        let mark = match (&verdict, nsd == knot && gslbd == nsd) {
            (Some(_), _) => "FAIL",
            (None, true) => "same",
            (None, false) => "allowed",
        };
        report.push_str(&format!("{mark:7} {}\n", row.name));
        for ((server, _), outcome) in SERVERS.iter().zip(&row.outcomes) {
            report.push_str(&format!("  {:6} {outcome}\n", server.name()));
        }
        if let Some(why) = verdict {
            failures.push(format!("{}: {why}", row.name));
        }
    }
    println!("{report}");
    let allowed = ALLOWED.iter().flat_map(|(names, _)| names.iter());
    for name in allowed.clone() {
        if !rows.iter().any(|r| r.name == *name) {
            failures.push(format!("{name}: in the allow-list, but no such case"));
        }
    }
    let page_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/security.md");
    let page = std::fs::read_to_string(&page_path).unwrap();
    let documented = documented(&page);
    for name in allowed.clone() {
        if !documented.iter().any(|d| d == name) {
            failures.push(format!("{name}: allowed, but not in docs/security.md"));
        }
    }
    for name in &documented {
        if !allowed.clone().any(|n| n == name) {
            failures.push(format!("{name}: in docs/security.md, but not allowed here"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} runs fail (the report is above):\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}
