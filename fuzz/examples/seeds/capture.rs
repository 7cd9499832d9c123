//! Real queries: dig, kdig and delv asking a server this program runs on 127.0.0.1 (answered by
//! the responder of examples/demo.toml), each datagram and connection kept as it arrived.

use std::{
    io::{Read, Write},
    net::{Ipv4Addr, TcpListener, UdpSocket},
    path::Path,
    process::{Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use gslb_user::{
    compile::Snapshot,
    config::Config,
    responder::{Responder, Transport},
    server::tcp_frame,
};

/// What the capture server received: a datagram, or one connection's bytes.
#[derive(Clone, Debug)]
pub(crate) enum Received {
    Udp(Vec<u8>),
    Tcp(Vec<u8>),
}

/// The queries sent, as (tool, name of the seed, arguments after the server and port).
fn invocations() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    let dig = |name, args: &[&'static str]| ("dig", name, args.to_vec());
    let kdig = |name, args: &[&'static str]| ("kdig", name, args.to_vec());
    vec![
        dig("a", &["www.example.com", "A"]),
        dig("aaaa", &["www.example.com", "AAAA"]),
        dig("dnssec", &["+dnssec", "www.example.com", "A"]),
        dig("nsid", &["+nsid", "www.example.com", "A"]),
        dig("cookie", &["+cookie", "www.example.com", "A"]),
        dig(
            "subnet-v4",
            &["+subnet=198.51.100.0/24", "www.example.com", "A"],
        ),
        dig(
            "subnet-v6",
            &["+subnet=2001:db8:1::/56", "www.example.com", "AAAA"],
        ),
        dig(
            "subnet-zero",
            &["+subnet=0.0.0.0/0", "www.example.com", "A"],
        ),
        dig("tcp", &["+tcp", "www.example.com", "A"]),
        dig("any", &["example.com", "ANY"]),
        dig("axfr", &["example.com", "AXFR"]),
        dig("ixfr", &["example.com", "IXFR=2026112900"]),
        dig("ch-txt", &["version.bind", "CH", "TXT"]),
        dig("norec", &["+norec", "all.example.com", "A"]),
        dig("noedns", &["+noedns", "example.com", "SOA"]),
        dig("edns1", &["+edns=1", "example.com", "NS"]),
        dig("ednsflags", &["+ednsflags=0x40", "example.com", "MX"]),
        dig(
            "ednsopt",
            &["+ednsopt=65001:c0ffee", "www.example.com", "A"],
        ),
        dig("bufsize", &["+bufsize=4096", "big.example.com", "TXT"]),
        // No EDNS: the answer does not fit 512 bytes, and dig asks again over TCP.
        dig("truncated", &["+noedns", "big.example.com", "TXT"]),
        dig("cname", &["alias.example.com", "A"]),
        dig("nxdomain", &["nonexistent.example.com", "A"]),
        dig("v1only", &["v1only.example.com", "A"]),
        dig("outside", &["www.example.org", "A"]),
        dig("adflag", &["+adflag", "+cdflag", "txt.example.com", "TXT"]),
        dig("opcode-notify", &["+opcode=notify", "example.com", "SOA"]),
        dig("zflag", &["+zflag", "www.example.com", "A"]),
        // As a validating resolver asks (unbound's defaults): no RD, DO, 1232 bytes, a
        // cookie, the name's case randomised (0x20).
        dig(
            "resolver",
            &[
                "+norec",
                "+dnssec",
                "+bufsize=1232",
                "+cookie",
                "wWw.ExaMPle.cOm",
                "A",
            ],
        ),
        kdig("a", &["www.example.com", "A"]),
        kdig("nsid", &["+nsid", "www.example.com", "AAAA"]),
        kdig("subnet", &["+subnet=192.0.2.0/24", "www.example.com", "A"]),
        kdig("cookie", &["+cookie", "example.com", "SOA"]),
        kdig("padding", &["+padding=468", "www.example.com", "A"]),
        kdig("dnssec", &["+dnssec", "example.com", "DNSKEY"]),
        kdig("tcp", &["+tcp", "www.example.com", "A"]),
        kdig(
            "keepopen",
            &[
                "+tcp",
                "+keepopen",
                "www.example.com",
                "A",
                "example.com",
                "NS",
            ],
        ),
        kdig("any", &["example.com", "ANY"]),
        kdig("axfr", &["example.com", "AXFR"]),
        kdig("ch-txt", &["version.server", "CH", "TXT"]),
        kdig("noedns", &["+noedns", "mail.example.com", "A"]),
        // A validating lookup: the name, then the keys up to the root it trusts.
        ("delv", "a", vec!["www.example.com", "A"]),
        ("delv", "tcp", vec!["+tcp", "example.com", "SOA"]),
    ]
}

/// Serves the responder of examples/demo.toml on 127.0.0.1 (UDP and TCP, one port), runs
/// every invocation against it and returns what each sent, by seed name.
pub(crate) fn capture(root: &Path) -> Vec<(String, Received)> {
    let text = std::fs::read_to_string(root.join("examples/demo.toml")).expect("demo.toml");
    let config = Config::parse(&text, Path::new("demo.toml")).expect("demo config");
    let responder = Arc::new(Responder::new(&Snapshot::from_config(&config)));
    let tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a TCP port");
    let port = tcp.local_addr().expect("its address").port();
    let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, port)).expect("UDP on the same port");
    let received = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let servers = [
        {
            let (responder, received, stop) = (responder.clone(), received.clone(), stop.clone());
            thread::spawn(move || serve_udp(&udp, &responder, &received, &stop))
        },
        {
            let (responder, received, stop) = (responder.clone(), received.clone(), stop.clone());
            thread::spawn(move || serve_tcp(&tcp, &responder, &received, &stop))
        },
    ];
    let mut seeds = Vec::new();
    for (tool, name, args) in invocations() {
        let mut cmd = Command::new(tool);
        cmd.args(["@127.0.0.1", "-p", &port.to_string()]);
        // One try, a short wait: the server answers at once, or not at all (e.g. over TCP
        // after AXFR's refusal).
        match tool {
            "dig" => cmd.args(["+tries=1", "+timeout=2"]),
            "kdig" => cmd.args(["+retry=0", "+time=2"]),
            _ => &mut cmd,
        };
        cmd.args(&args).stdout(Stdio::null()).stderr(Stdio::null());
        let Ok(mut child) = cmd.spawn() else {
            eprintln!("warning: {tool} is not installed: its seeds are not written");
            continue;
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().expect("waiting").is_none() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        // The connection's reader notices its end within its poll interval.
        thread::sleep(Duration::from_millis(250));
        let got = std::mem::take(&mut *received.lock().expect("the capture"));
        if got.is_empty() {
            eprintln!("warning: {tool} {args:?} sent nothing");
        }
        for (i, r) in got.into_iter().enumerate() {
            let ext = match r {
                Received::Udp(_) => "udp",
                Received::Tcp(_) => "tcp",
            };
            seeds.push((format!("{tool}-{name}-{}.{ext}", i + 1), r));
        }
    }
    stop.store(true, Ordering::Relaxed);
    for s in servers {
        s.join().expect("a capture server");
    }
    seeds
}

fn serve_udp(
    socket: &UdpSocket,
    responder: &Responder,
    received: &Mutex<Vec<Received>>,
    stop: &AtomicBool,
) {
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .expect("a read timeout");
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Relaxed) {
        let Ok((len, from)) = socket.recv_from(&mut buf) else {
            continue;
        };
        let query = buf[..len].to_vec();
        if let Some(reply) = responder.respond(&query, from.ip(), Transport::Udp) {
            let _ = socket.send_to(&reply, from);
        }
        received
            .lock()
            .expect("the capture")
            .push(Received::Udp(query));
    }
}

fn serve_tcp(
    listener: &TcpListener,
    responder: &Responder,
    received: &Mutex<Vec<Received>>,
    stop: &AtomicBool,
) {
    listener.set_nonblocking(true).expect("non-blocking accept");
    while !stop.load(Ordering::Relaxed) {
        let Ok((mut stream, from)) = listener.accept() else {
            thread::sleep(Duration::from_millis(20));
            continue;
        };
        stream.set_nonblocking(false).expect("blocking reads");
        stream
            .set_read_timeout(Some(Duration::from_millis(100)))
            .expect("a read timeout");
        let (mut all, mut pending) = (Vec::new(), Vec::new());
        let mut buf = [0u8; 4096];
        let mut quiet = 0;
        // Until the client closes, or is quiet for a second.
        while quiet < 10 {
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    quiet = 0;
                    all.extend_from_slice(&buf[..n]);
                    pending.extend_from_slice(&buf[..n]);
                    while let Some((message, used)) = tcp_frame::split(&pending) {
                        let reply = responder.respond(message, from.ip(), Transport::Tcp);
                        if let Some(framed) = reply.as_deref().and_then(tcp_frame::frame) {
                            let _ = stream.write_all(&framed);
                        }
                        pending.drain(..used);
                    }
                }
                Err(_) => quiet += 1,
            }
        }
        if !all.is_empty() {
            received
                .lock()
                .expect("the capture")
                .push(Received::Tcp(all));
        }
    }
}
