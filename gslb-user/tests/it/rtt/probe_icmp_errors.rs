//! Which ICMP errors the real prober takes as RTT samples: those the network sent (the target,
//! or a router on the way), never those this host made itself (a local firewall's REJECT, a
//! prohibited route), which come back at once and would win every RTT decision at ~0 ms.
//!
//! A network namespace whose only link is a TUN device: the test is the network behind it,
//! reads what the prober sends and answers with ICMP errors from whichever source address a
//! case needs, through a raw socket to the host's own address (so that an error "from" the
//! host itself arrives exactly as one its firewall makes). Needs root.

use std::{
    net::{IpAddr, Ipv4Addr},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use gslb_tests::{Netns, open_tun, privileged, read_frame, spoof::SpoofSender};
use gslb_user::{
    health::{IcmpMode, icmp_mode},
    probe::{NetProber, ProbeKind, ProbeOutcome, Prober},
};

/// This host's address on the TUN link.
const OWN: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// The resolver probed, behind the TUN link.
const TARGET: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 9);
/// A router between them.
const ROUTER: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 254);
/// An address this host's routing table prohibits (the kernel refuses the send itself).
const PROHIBITED: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 9);

/// ICMP destination unreachable codes.
const HOST_UNREACHABLE: u8 = 1;
const PORT_UNREACHABLE: u8 = 3;
const ADMIN_PROHIBITED: u8 = 13;

/// The network behind the TUN device: every packet to [`TARGET`] gets the ICMP unreachable
/// `(from, code)` set now back, or nothing.
struct Network {
    answer: Arc<Mutex<Option<(Ipv4Addr, u8)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Network {
    fn start(ns: &Netns) -> Network {
        let tun = ns.enter(|| open_tun("tun0"));
        ns.ip(&["addr", "add", "10.77.0.1/24", "dev", "tun0"]);
        ns.ip(&["link", "set", "tun0", "up"]);
        ns.ip(&["route", "add", "prohibit", "10.78.0.9/32"]);
        let answer = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let (set, stopped) = (answer.clone(), stop.clone());
        let thread = ns.spawn(move || {
            let sender = SpoofSender::new(OWN);
            let mut buf = vec![0u8; 65536];
            while !stopped.load(Ordering::Relaxed) {
                let Some(len) = read_frame(&tun, &mut buf) else {
                    continue;
                };
                let packet = &buf[..len];
                if packet.len() < 28 || packet[0] >> 4 != 4 || packet[16..20] != TARGET.octets() {
                    continue;
                }
                if let Some((from, code)) = *set.lock().unwrap() {
                    sender.send_unreachable(from, code, packet);
                }
            }
        });
        Network {
            answer,
            stop,
            thread: Some(thread),
        }
    }

    fn answer_with(&self, answer: Option<(Ipv4Addr, u8)>) {
        *self.answer.lock().unwrap() = answer;
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One probe of `kind` to `target` from inside `ns`, waiting 500 ms at most.
fn probe(ns: &Netns, kind: ProbeKind, target: Ipv4Addr) -> ProbeOutcome {
    ns.enter(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(NetProber::default().probe(
                kind,
                IpAddr::V4(target),
                Duration::from_millis(500),
            ))
    })
}

fn failed(outcome: &ProbeOutcome) -> bool {
    matches!(outcome, ProbeOutcome::Failed(_))
}

fn replied(outcome: &ProbeOutcome) -> bool {
    matches!(outcome, ProbeOutcome::Reply(rtt) if *rtt < Duration::from_millis(500))
}

fn silent(outcome: &ProbeOutcome) -> bool {
    *outcome == ProbeOutcome::NoReply
}

#[test]
fn an_icmp_error_from_this_host_is_no_sample_and_one_from_the_network_is() {
    if !privileged("an_icmp_error_from_this_host_is_no_sample_and_one_from_the_network_is") {
        return;
    }
    let ns = Netns::new("probe-icmp", "host");
    let network = Network::start(&ns);
    // (the ICMP error the network sends back, what the probe must give, why)
    type Case = (
        Option<(Ipv4Addr, u8)>,
        fn(&ProbeOutcome) -> bool,
        &'static str,
    );
    let cases: [Case; 6] = [
        (
            Some((OWN, ADMIN_PROHIBITED)),
            failed,
            "a local firewall refuses (admin prohibited from this host)",
        ),
        (
            Some((OWN, PORT_UNREACHABLE)),
            failed,
            "a local REJECT (its default, port unreachable from this host)",
        ),
        (
            Some((TARGET, PORT_UNREACHABLE)),
            replied,
            "the resolver answers port unreachable",
        ),
        (
            Some((ROUTER, ADMIN_PROHIBITED)),
            replied,
            "a firewall on the way refuses",
        ),
        // Soft: the kernel reports it only to sockets that ask for every error; it never was
        // a sample, and is not one now.
        (
            Some((ROUTER, HOST_UNREACHABLE)),
            silent,
            "a router cannot reach the host",
        ),
        (None, silent, "nothing comes back"),
    ];
    // Echo requests from a raw socket (root, as the namespace allows no ping socket), then
    // from a ping socket (the kernel matches errors to it by the echo's identifier).
    for (mode, ping_group) in [(IcmpMode::Raw, "1 0"), (IcmpMode::Datagram, "0 0")] {
        gslb_tests::run(
            ns.exec("sysctl")
                .args(["-qw", &format!("net.ipv4.ping_group_range={ping_group}")]),
        );
        assert_eq!(ns.enter(|| icmp_mode(false).unwrap()), mode);
        for (answer, expect, why) in cases {
            network.answer_with(answer);
            for kind in [ProbeKind::Icmp, ProbeKind::DnsDot, ProbeKind::DnsRev] {
                let outcome = probe(&ns, kind, TARGET);
                assert!(
                    expect(&outcome),
                    "{why}, {kind} probe ({mode:?}): {outcome:?}"
                );
            }
        }
    }
    // The kernel refuses the send itself: a failure of every type, TCP included.
    network.answer_with(None);
    for kind in ProbeKind::ALL {
        let outcome = probe(&ns, kind, PROHIBITED);
        assert!(
            failed(&outcome),
            "prohibited route, {kind} probe: {outcome:?}"
        );
    }
}
