//! The outside attacks of issue 27 against the gslbd binary of this build (a debug build under
//! `cargo test`, whose stack an 8,000-pointer chain once overflowed), over real loopback
//! sockets: the costliest message of each class (`gslb_tests::hostile`) over UDP and TCP gets
//! a reply within the client's size and gslbd lives on; ordinary queries sent during a flood
//! of 64 KB datagrams are all answered.

use std::{
    io::{Read, Write},
    net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket},
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use gslb_tests::{
    TempDir,
    hostile::{self, Class, MAX_UDP_PAYLOAD},
};

use super::daemon::{config, gslbd_child};

const WAIT: Duration = Duration::from_secs(5);

/// The reply to `request` over UDP from a fresh socket.
fn over_udp(server: SocketAddr, request: &[u8]) -> std::io::Result<Vec<u8>> {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
    socket.set_read_timeout(Some(WAIT))?;
    socket.send_to(request, server)?;
    let mut buf = vec![0; MAX_UDP_PAYLOAD];
    let len = socket.recv(&mut buf)?;
    buf.truncate(len);
    Ok(buf)
}

/// The reply to `request` over a fresh TCP connection.
fn over_tcp(server: SocketAddr, request: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect_timeout(&server, WAIT)?;
    stream.set_read_timeout(Some(WAIT))?;
    let framed = [&(request.len() as u16).to_be_bytes()[..], request].concat();
    stream.write_all(&framed)?;
    let mut len = [0; 2];
    stream.read_exact(&mut len)?;
    let mut reply = vec![0; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut reply)?;
    Ok(reply)
}

#[test]
fn the_outside_attacks_no_longer_reproduce() {
    let dir = TempDir::new("hostile");
    let (port, mut gslbd) = gslbd_child(&dir.join("gslb.toml"), &dir.join("gslbd.log"), |port| {
        config(port, "198.51.100.1")
    });
    let server = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut failures = Vec::new();

    // Each class once over UDP and TCP: a reply, within 512 bytes without EDNS (the 64 KB
    // query of 454 questions once drew 59,951), and gslbd alive after it (the pointer chain
    // once aborted a debug gslbd).
    for class in Class::ALL {
        let request = class.message(0x2727);
        let udp_limit = if matches!(class, Class::MaxSize | Class::MaxLabels) {
            1232
        } else {
            512
        };
        match over_udp(server, &request) {
            Ok(udp) if udp.len() <= udp_limit && udp[..2] == request[..2] => {}
            Ok(udp) => failures.push(format!("{} over UDP: {} bytes", class.name(), udp.len())),
            Err(e) => failures.push(format!("{} over UDP: {e}", class.name())),
        }
        match over_tcp(server, &request) {
            Ok(tcp) if tcp[..2] == request[..2] && tcp[2] & 0x80 != 0 => {}
            Ok(_) => failures.push(format!("{} over TCP: not its reply", class.name())),
            Err(e) => failures.push(format!("{} over TCP: {e}", class.name())),
        }
        if let Some(status) = gslbd.try_wait().unwrap() {
            let log = std::fs::read_to_string(dir.join("gslbd.log")).unwrap_or_default();
            let tail = &log[log.len().saturating_sub(600)..];
            panic!(
                "gslbd ended after {}: {status}\n{}\n...{tail}",
                class.name(),
                failures.join("\n")
            );
        }
    }

    // A flood of 64 KB datagrams of 471 questions, 200 a second for 3 s (twenty times the
    // rate that stalled the responder), while a client asks plain queries one after another:
    // every one is answered.
    let flooding = AtomicBool::new(true);
    let (answered, asked) = std::thread::scope(|s| {
        s.spawn(|| {
            let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            let datagram = Class::MaxQuestions.message(1);
            let start = Instant::now();
            for i in 0..600u32 {
                socket.send_to(&datagram, server).unwrap();
                let next = start + Duration::from_millis(5) * (i + 1);
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
            flooding.store(false, Ordering::Relaxed);
        });
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        socket.set_read_timeout(Some(WAIT)).unwrap();
        let (mut answered, mut asked) = (0, 0u16);
        let mut buf = [0u8; 512];
        while flooding.load(Ordering::Relaxed) {
            asked += 1;
            socket
                .send_to(&hostile::plain(asked, "www.example.com"), server)
                .unwrap();
            // An answer: this query's ID, NOERROR, one record.
            if let Ok(len) = socket.recv(&mut buf)
                && len > 12
                && buf[..2] == asked.to_be_bytes()
                && buf[3] == 0
                && buf[6..8] == [0, 1]
            {
                answered += 1;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        (answered, asked)
    });
    if answered != asked || asked < 100 {
        failures.push(format!(
            "during the flood {answered} of {asked} queries answered"
        ));
    }

    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(gslbd.id() as i32, libc::SIGTERM) };
    let status = gslbd.wait().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(status.success(), "gslbd exit: {status}");
}
