//! `cargo xtask bench hostile`: what the costliest message of each hostile class
//! (`gslb_tests::hostile::Class`: max_size, max_questions, max_records, pointer_chain,
//! max_labels) costs the server, against a plain query, over UDP and over TCP; then whether
//! ordinary queries are all still answered while hostile messages arrive at 1,000 a second.
//!
//! gslbd (the bench profile's build, `--no-xdp`: the XDP program passes every one of these
//! messages to the responder anyway) serves the benches' configuration of 1,000 GSLB domains
//! (`dns_peers::gslbd_config`) on 127.0.0.1 in the server namespace of a lab, where the bench's
//! clients run too (nothing of the host's is in the way, nor sees the flood).
//!
//! **Cost.** A batch is [`BATCH`] messages of one kind (the plain query `g0.example.com` A
//! without EDNS, `hostile::plain`, or one class), sent one at a time, each reply awaited
//! before the next is sent, over one UDP socket or one TCP connection. The server's work is
//! gslbd's CPU time (every thread, user and system: the kernel's receive copy counts) over the
//! batch, read from its process CPU clock (`clock_getcpuclockid`, nanoseconds), divided by
//! the batch's messages. Each of [`ROUNDS`] rounds runs one batch of every (transport, kind),
//! the kinds' order turning by one each round, after a first round thrown away (warm-up).
//! `hostile_<class>_vs_plain` (UDP) and `hostile_<class>_tcp_vs_plain` are the class's median
//! CPU per message over the plain query's median, same transport; the goal is at most
//! [`GOAL`]. The client's round trip (median of every message of the kind) is printed beside
//! it, and any message left without a reply (it would be a stall, not a cost).
//!
//! One at a time, each message pays the wake-up of the server's loop (the plain query too):
//! the ratio compares one message with one message, not a message with a query's share of a
//! busy batch (`bench peers` `_cpu_us` has that).
//!
//! **Flood.** dnsperf sends the configuration's A and AAAA questions at [`ORDINARY_QPS`] for
//! [`FLOOD_SECONDS`], three times: alone (the baseline), with [`FLOOD_RATE`] hostile messages
//! a second over UDP (every class in turn), and with as many over one TCP connection.
//! `hostile_flood_answered_pct` is dnsperf's completed queries over those sent, over the two
//! flooded runs, and `hostile_flood_lost` the queries it lost in them (the goal: 100% and 0).
//! `_socket_drops` counts the datagrams the kernel dropped meanwhile at gslbd's sockets because
//! their receive buffers were full (/proc/net/udp), the usual place a lost query went.
//!
//! `GSLB_HOSTILE_ONLY=cost` (or `flood`) runs only that part.

#[expect(
    dead_code,
    reason = "this bench uses the benches' configuration and dnsperf, not the peer servers"
)]
mod dns_peers;

use std::{
    io::{ErrorKind, Read, Write},
    net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket},
    path::Path,
    sync::atomic::{AtomicBool, AtomicU64, Ordering},
    time::{Duration, Instant},
};

use dns_peers::{
    Figures, dnsperf, gslbd_config, have_dnsperf, query_file, questions, responder_command,
};
use gslb_tests::{
    Lab, TempDir,
    hostile::{self, Class},
    privileged, run,
};

/// Messages per batch, and rounds of batches measured (after one thrown away).
const BATCH: usize = 400;
const ROUNDS: usize = 7;
/// The most a class may cost, in plain queries.
const GOAL: f64 = 20.0;
/// The ordinary load and the flood.
const ORDINARY_QPS: &str = "3000";
const FLOOD_SECONDS: u64 = 10;
const FLOOD_RATE: u64 = 1000;
/// How long a client waits for a reply before it counts the message unanswered.
const REPLY_WAIT: Duration = Duration::from_secs(1);

const SERVER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 53);
/// The plain query's name: a GSLB domain of the configuration (answered with a record).
const PLAIN_NAME: &str = "g0.example.com";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Transport {
    Udp,
    Tcp,
}

impl Transport {
    /// The suffix of its bench lines after the kind's name (UDP's none: the lines the goal
    /// names).
    fn suffix(self) -> &'static str {
        match self {
            Transport::Udp => "",
            Transport::Tcp => "_tcp",
        }
    }
}

/// What a batch sends.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Plain,
    Hostile(Class),
}

impl Kind {
    fn all() -> Vec<Kind> {
        std::iter::once(Kind::Plain)
            .chain(Class::ALL.map(Kind::Hostile))
            .collect()
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Hostile(class) => class.name(),
        }
    }

    fn message(self) -> Vec<u8> {
        match self {
            Kind::Plain => hostile::plain(0, PLAIN_NAME),
            Kind::Hostile(class) => class.message(0),
        }
    }
}

/// One batch's figures.
struct Batch {
    transport: Transport,
    kind: Kind,
    /// gslbd's CPU time over the batch, per message.
    cpu_ns: f64,
    /// Each answered message's round trip.
    rtts: Vec<Duration>,
    unanswered: usize,
    /// TCP connections the server closed during the batch (each reopened).
    closed: usize,
}

fn main() {
    if !privileged("bench hostile") {
        return;
    }
    if !have_dnsperf("bench hostile") {
        return;
    }
    let tmp = TempDir::new("hostile");
    let dir = &tmp.0;
    let config = dir.join("gslbd.toml");
    std::fs::write(&config, gslbd_config(dir, &[SERVER.ip()])).unwrap();
    let questions = questions();
    let queries = query_file(dir, "queries", &questions, questions.len(), 0);

    // Declared after `tmp`: dropped first, stopping gslbd before its files go.
    let mut lab = Lab::new("hostile");
    let gslbd = responder_command(
        &lab,
        env!("CARGO_BIN_EXE_gslbd").as_ref(),
        &config,
        &dir.join("gslbd.sock"),
        "warn",
    );
    let pid = lab.spawn_until(gslbd, "ready", Duration::from_secs(30));
    let cpu = CpuClock::of(pid);
    let only = std::env::var("GSLB_HOSTILE_ONLY").ok();
    if only.as_deref() != Some("flood") {
        cost_part(&lab, &cpu);
    }
    if only.as_deref() != Some("cost") {
        flood_part(&lab, &queries);
    }
}

fn cost_part(lab: &Lab, cpu: &CpuClock) {
    println!(
        "# gslbd --no-xdp on {SERVER} (lab server namespace), clients beside it; {BATCH} \
         messages a batch, one at a time; {ROUNDS} rounds after a warm-up; cpu = gslbd's \
         process CPU clock over the batch / messages"
    );
    for (class, m) in Class::ALL.map(|c| (c, c.message(0))) {
        println!("# {}: {} bytes", class.name(), m.len());
    }
    let batches = lab.in_netns(&lab.server_ns, || cost(cpu));
    report(&batches);
}

fn flood_part(lab: &Lab, queries: &Path) {
    println!(
        "# flood: dnsperf -Q {ORDINARY_QPS} -l {FLOOD_SECONDS} (the configuration's A/AAAA), \
         alone, then beside {FLOOD_RATE} hostile messages/s (every class in turn) over UDP, \
         then over one TCP connection"
    );
    let mut flooded = Vec::new();
    for flood in [None, Some(Transport::Udp), Some(Transport::Tcp)] {
        let drops = socket_drops(lab);
        let (figures, sent, answered) = ordinary_beside(lab, queries, flood);
        let drops = socket_drops(lab) - drops;
        let name = flood.map_or("quiet", |t| match t {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
        });
        let total = figures.completed + figures.lost;
        println!(
            "bench hostile_flood_{name}_answered_pct {:.3} %",
            pct(figures.completed, total)
        );
        println!("bench hostile_flood_{name}_lost {} queries", figures.lost);
        println!(
            "bench hostile_flood_{name}_latency_us {:.0} us",
            figures.latency_s * 1e6
        );
        println!("bench hostile_flood_{name}_socket_drops {drops} datagrams");
        if flood.is_some() {
            println!("# {name} flood: {sent} hostile messages sent, {answered} replies read");
            flooded.push(figures);
        }
    }
    let completed: u64 = flooded.iter().map(|f| f.completed).sum();
    let lost: u64 = flooded.iter().map(|f| f.lost).sum();
    println!(
        "bench hostile_flood_answered_pct {:.3} %",
        pct(completed, completed + lost)
    );
    println!("bench hostile_flood_lost {lost} queries");
}

fn pct(part: u64, whole: u64) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

/// Every batch of every round (the first round not kept); run where the server is reached.
fn cost(cpu: &CpuClock) -> Vec<Batch> {
    let kinds = Kind::all();
    let mut batches = Vec::new();
    for round in 0..=ROUNDS {
        for k in 0..kinds.len() {
            let kind = kinds[(round + k) % kinds.len()];
            for transport in [Transport::Udp, Transport::Tcp] {
                let batch = batch(cpu, transport, kind);
                if round > 0 {
                    batches.push(batch);
                }
            }
        }
    }
    batches
}

/// One batch: [`BATCH`] messages of `kind`, one at a time.
fn batch(cpu: &CpuClock, transport: Transport, kind: Kind) -> Batch {
    let mut message = kind.message();
    let mut rtts = Vec::with_capacity(BATCH);
    let (mut unanswered, mut closed) = (0, 0);
    let mut client = Client::open(transport);
    let before = cpu.now_ns();
    for i in 0..BATCH {
        let id = i as u16;
        message[..2].copy_from_slice(&id.to_be_bytes());
        let start = Instant::now();
        match client.exchange(&message, id) {
            Ok(()) => rtts.push(start.elapsed()),
            Err(Lost::Unanswered) => unanswered += 1,
            Err(Lost::Closed) => {
                closed += 1;
                client = Client::open(transport);
            }
        }
    }
    let cpu_ns = (cpu.now_ns() - before) as f64 / BATCH as f64;
    Batch {
        transport,
        kind,
        cpu_ns,
        rtts,
        unanswered,
        closed,
    }
}

/// A message that got no reply.
enum Lost {
    /// None within [`REPLY_WAIT`].
    Unanswered,
    /// The server closed the TCP connection.
    Closed,
}

/// A client socket to [`SERVER`].
enum Client {
    Udp(UdpSocket),
    Tcp(TcpStream),
}

impl Client {
    fn open(transport: Transport) -> Client {
        match transport {
            Transport::Udp => {
                let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("a UDP socket");
                socket.connect(SERVER).expect("connect");
                socket.set_read_timeout(Some(REPLY_WAIT)).unwrap();
                Client::Udp(socket)
            }
            Transport::Tcp => {
                let stream = TcpStream::connect_timeout(&SERVER, REPLY_WAIT).expect("connect");
                stream.set_read_timeout(Some(REPLY_WAIT)).unwrap();
                stream.set_nodelay(true).unwrap();
                Client::Tcp(stream)
            }
        }
    }

    /// Sends `message` (ID `id`) and reads until the reply with that ID.
    fn exchange(&mut self, message: &[u8], id: u16) -> Result<(), Lost> {
        let mut buf = vec![0u8; 65_535];
        match self {
            Client::Udp(socket) => {
                socket.send(message).expect("send");
                loop {
                    // A reply of an earlier message, late, is skipped.
                    let n = socket.recv(&mut buf).map_err(|_| Lost::Unanswered)?;
                    if n >= 2 && buf[..2] == id.to_be_bytes() {
                        return Ok(());
                    }
                }
            }
            Client::Tcp(stream) => {
                let framed = [&(message.len() as u16).to_be_bytes()[..], message].concat();
                stream.write_all(&framed).map_err(|_| Lost::Closed)?;
                loop {
                    let mut len = [0u8; 2];
                    stream.read_exact(&mut len).map_err(|e| lost(&e))?;
                    let reply = &mut buf[..usize::from(u16::from_be_bytes(len))];
                    stream.read_exact(reply).map_err(|e| lost(&e))?;
                    if reply.len() >= 2 && reply[..2] == id.to_be_bytes() {
                        return Ok(());
                    }
                }
            }
        }
    }
}

fn lost(error: &std::io::Error) -> Lost {
    match error.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => Lost::Unanswered,
        _ => Lost::Closed,
    }
}

/// The bench lines of the cost part: per transport and kind, the median CPU per message over
/// the rounds and the median round trip; per class, its ratio to the plain query.
fn report(batches: &[Batch]) {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut worst = (0.0_f64, String::new());
    for transport in [Transport::Udp, Transport::Tcp] {
        let of = |kind: Kind| {
            batches
                .iter()
                .filter(move |b| b.transport == transport && b.kind == kind)
        };
        let cpu = |kind: Kind| median(of(kind).map(|b| b.cpu_ns).collect());
        let plain = cpu(Kind::Plain);
        let t = transport.suffix();
        for kind in Kind::all() {
            let name = kind.name();
            let rtt = median(
                of(kind)
                    .flat_map(|b| b.rtts.iter().map(|r| r.as_secs_f64() * 1e6))
                    .collect(),
            );
            let per_round: Vec<String> =
                of(kind).map(|b| format!("{:.1}", b.cpu_ns / 1e3)).collect();
            let unanswered: usize = of(kind).map(|b| b.unanswered).sum();
            let closed: usize = of(kind).map(|b| b.closed).sum();
            println!(
                "# {name}{t}: cpu us/message by round {}; unanswered {unanswered}, \
                 connections closed {closed}",
                per_round.join(" ")
            );
            println!("bench hostile_{name}{t}_cpu_us {:.2} us", cpu(kind) / 1e3);
            println!("bench hostile_{name}{t}_rtt_us {rtt:.0} us");
            if unanswered + closed > 0 {
                println!(
                    "bench hostile_{name}{t}_unanswered {} messages",
                    unanswered + closed
                );
            }
            if kind != Kind::Plain {
                let ratio = cpu(kind) / plain;
                println!("bench hostile_{name}{t}_vs_plain {ratio:.2}");
                if ratio > worst.0 {
                    worst = (ratio, format!("{name}{t}"));
                }
            }
        }
    }
    println!(
        "# the costliest: {} at {:.2}x a plain query (goal: at most {GOAL}x)",
        worst.1, worst.0
    );
    println!("bench hostile_worst_vs_plain {:.2}", worst.0);
}

/// dnsperf's run of ordinary queries from the server namespace, beside a flood of hostile
/// messages over `flood` (none: alone) for as long; its figures, and the hostile messages
/// sent and the replies to them read.
fn ordinary_beside(lab: &Lab, queries: &Path, flood: Option<Transport>) -> (Figures, u64, u64) {
    let stop = AtomicBool::new(false);
    let (sent, answered) = (AtomicU64::new(0), AtomicU64::new(0));
    let figures = std::thread::scope(|s| {
        if let Some(transport) = flood {
            let (stop, sent, answered) = (&stop, &sent, &answered);
            s.spawn(move || {
                lab.in_netns(&lab.server_ns, || {
                    send_flood(transport, stop, sent, answered);
                });
            });
        }
        let figures = dnsperf(
            lab.exec(&lab.server_ns, "dnsperf")
                .args(["-s", &SERVER.ip().to_string(), "-d"])
                .arg(queries)
                .args(["-l", &FLOOD_SECONDS.to_string(), "-Q", ORDINARY_QPS])
                .args(["-c", "4", "-t", "2"]),
        );
        stop.store(true, Ordering::Relaxed);
        figures
    });
    (
        figures,
        sent.load(Ordering::Relaxed),
        answered.load(Ordering::Relaxed),
    )
}

/// [`FLOOD_RATE`] hostile messages a second to [`SERVER`] over `transport`, every class in
/// turn, on a schedule (a late message is sent at once, not skipped), until `stop`; counts
/// what it sent and the replies it read.
fn send_flood(transport: Transport, stop: &AtomicBool, sent: &AtomicU64, answered: &AtomicU64) {
    let messages: Vec<Vec<u8>> = Class::ALL.iter().map(|c| c.message(0)).collect();
    let start = Instant::now();
    let due = |k: u64| start + Duration::from_micros(k * 1_000_000 / FLOOD_RATE);
    match transport {
        Transport::Udp => {
            let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("a UDP socket");
            socket.connect(SERVER).expect("connect");
            socket.set_nonblocking(true).unwrap();
            let mut buf = vec![0u8; 65_535];
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if let Some(wait) = due(k).checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                let m = &messages[(k % messages.len() as u64) as usize];
                match socket.send(m) {
                    Ok(_) => {
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("hostile send: {e}"),
                }
                while socket.recv(&mut buf).is_ok() {
                    answered.fetch_add(1, Ordering::Relaxed);
                }
                k += 1;
            }
        }
        Transport::Tcp => {
            let framed: Vec<Vec<u8>> = messages
                .iter()
                .map(|m| [&(m.len() as u16).to_be_bytes()[..], m].concat())
                .collect();
            let mut stream = TcpStream::connect_timeout(&SERVER, REPLY_WAIT).expect("connect");
            stream.set_nodelay(true).unwrap();
            let reader = stream.try_clone().unwrap();
            std::thread::scope(|s| {
                s.spawn(move || read_replies(reader, answered));
                let mut k = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if let Some(wait) = due(k).checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let m = &framed[(k % framed.len() as u64) as usize];
                    if let Err(e) = stream.write_all(m) {
                        panic!("the server closed the flood's connection: {e}");
                    }
                    sent.fetch_add(1, Ordering::Relaxed);
                    k += 1;
                }
                // Ends the reader: it sees the end of the stream.
                let _ = stream.shutdown(std::net::Shutdown::Both);
            });
        }
    }
}

/// Reads framed replies until the connection ends, counting them.
fn read_replies(mut stream: TcpStream, answered: &AtomicU64) {
    let mut buf = vec![0u8; 65_535];
    loop {
        let mut len = [0u8; 2];
        if stream.read_exact(&mut len).is_err() {
            return;
        }
        if stream
            .read_exact(&mut buf[..usize::from(u16::from_be_bytes(len))])
            .is_err()
        {
            return;
        }
        answered.fetch_add(1, Ordering::Relaxed);
    }
}

/// Datagrams the kernel dropped so far at gslbd's UDP sockets (port 53 in the server
/// namespace) because their receive buffers were full: the `drops` column of /proc/net/udp.
fn socket_drops(lab: &Lab) -> u64 {
    let out = run(lab.exec(&lab.server_ns, "cat").arg("/proc/net/udp"));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address is ADDR:PORT in hex; drops is the 13th field.
            (f.get(1)?.ends_with(":0035")).then(|| f.get(12)?.parse::<u64>().ok())?
        })
        .sum()
}

/// A process's CPU clock: the user and system time of all its threads, also of those that
/// ended, in nanoseconds.
struct CpuClock(libc::clockid_t);

impl CpuClock {
    fn of(pid: u32) -> CpuClock {
        let mut clock: libc::clockid_t = 0;
        // SAFETY: a valid pointer to a clockid_t; the call has no other precondition.
        let rc = unsafe { libc::clock_getcpuclockid(pid as libc::pid_t, &raw mut clock) };
        assert_eq!(rc, 0, "clock_getcpuclockid({pid}): error {rc}");
        CpuClock(clock)
    }

    fn now_ns(&self) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid pointer to a timespec.
        let rc = unsafe { libc::clock_gettime(self.0, &raw mut ts) };
        assert_eq!(rc, 0, "clock_gettime: {}", std::io::Error::last_os_error());
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}
