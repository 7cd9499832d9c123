//! The MEP frames a site sends another, encoded by the mep module's encoder.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use gslb_user::{
    health::state::{Bandwidth, ServiceState},
    mep::frame::{
        Chunk, DEFAULT_MAX_PAYLOAD, HELLO_VERSION, Hello, KX_LEN, Message, NONCE_LEN, RejectCode,
        Role, RttProtocol, RttRow, SIG_LEN, ServiceReport, ServiceStates, SiteStatus, chunks,
        encode, persist_entry_len, rtt_row_len,
    },
    persist::PersistEntry,
};

use crate::{Corpus, MAX_LEN};

pub(crate) fn seeds(corpus: &mut Corpus) {
    let hello = |site: &str, peer: &str, role, parent: Option<&str>| {
        Message::Hello(Hello {
            versions: vec![HELLO_VERSION],
            site: site.into(),
            peer: peer.into(),
            role,
            parent: parent.map(Into::into),
            software: format!("gslb {}", env!("CARGO_PKG_VERSION")),
            rtt_tolerance_ms: Some(5),
            nonce: [0x5a; NONCE_LEN],
            kx: [0xa5; KX_LEN],
        })
    };
    let site = |name: &str| name.to_owned();
    let services = (1..=40)
        .map(|i| ServiceReport {
            name: format!("web-{i}"),
            state: if i % 7 == 0 {
                ServiceState::DOWN
            } else {
                ServiceState {
                    up: true,
                    connections: i * 17,
                    bandwidth: Bandwidth::from_kbps(i * 1000),
                }
            },
        })
        .collect();
    // The frames one site sends another: the handshake, then its state; tables long enough
    // to take several frames, cut by the chunker the sessions use.
    let mut frames: Vec<(String, u8, Message)> = vec![
        (
            "hello-parent".into(),
            HELLO_VERSION,
            hello("paris", "berlin", Role::Parent, None),
        ),
        (
            "hello-child".into(),
            HELLO_VERSION,
            hello("lyon", "paris", Role::Child, Some("paris")),
        ),
        ("auth".into(), 2, Message::Auth([0x3c; SIG_LEN])),
        (
            "reject-bad-auth".into(),
            0,
            Message::Reject {
                code: RejectCode::BadAuth,
                detail: "the proof does not match the key of site paris".into(),
            },
        ),
        ("heartbeat".into(), 2, Message::Heartbeat { seq: 1 }),
        (
            "site-status".into(),
            2,
            Message::SiteStatus(SiteStatus {
                site: site("lyon"),
                role: Role::Child,
                parent: Some(site("paris")),
                up: true,
            }),
        ),
        (
            "service-states".into(),
            2,
            Message::ServiceStates(ServiceStates {
                site: site("paris"),
                services,
            }),
        ),
        (
            "backup-parents".into(),
            2,
            Message::BackupParents {
                parent: site("paris"),
                backups: vec![site("berlin"), site("frankfurt")],
            },
        ),
        (
            "adopt-request".into(),
            2,
            Message::AdoptRequest {
                original_parent: site("paris"),
                backups: vec![site("berlin")],
            },
        ),
        (
            "adopt-accept".into(),
            2,
            Message::AdoptAccept {
                original_parent: site("paris"),
            },
        ),
        (
            "adopt-reject".into(),
            2,
            Message::AdoptReject {
                original_parent: site("paris"),
                reason: "paris is up".into(),
            },
        ),
    ];
    let rows: Vec<RttRow> = (0..3000u32)
        .map(|i| RttRow {
            ldns: if i % 2 == 0 {
                ipnet::IpNet::new(IpAddr::V4(Ipv4Addr::from(0xc633_6400 + (i << 8))), 24)
            } else {
                ipnet::IpNet::new(
                    IpAddr::V6(Ipv6Addr::from(0x2001_0db8_u128 << 96 | u128::from(i) << 64)),
                    64,
                )
            }
            .expect("a prefix"),
            site: site("paris"),
            rtt_us: 1000 + i * 13,
            protocol: [
                RttProtocol::Dns,
                RttProtocol::Icmp,
                RttProtocol::Tcp,
                RttProtocol::Udp,
            ][i as usize % 4],
            age_s: i % 60,
        })
        .collect();
    // Frames cut at a 64 KiB payload: the target's inputs end at 65,535 bytes.
    let cap = MAX_LEN - 8;
    for (i, chunk) in chunks(&rows, cap, rtt_row_len)
        .into_iter()
        .take(2)
        .enumerate()
    {
        frames.push((format!("rtt-rows-{}", i + 1), 2, Message::RttRows(chunk)));
    }
    let entries: Vec<PersistEntry> = (0..200u32)
        .map(|i| PersistEntry {
            client: ipnet::IpNet::new(IpAddr::V4(Ipv4Addr::from(0xcb00_7100 + i)), 32)
                .expect("a prefix"),
            domain: "www.example.com".into(),
            service: format!("web-{}", i % 3 + 1),
            ttl_s: 120 + i,
        })
        .collect();
    for (i, chunk) in chunks(&entries, 4096, persist_entry_len)
        .into_iter()
        .enumerate()
    {
        frames.push((
            format!("persistence-{}", i + 1),
            2,
            Message::Persistence(chunk),
        ));
    }
    frames.push((
        "persistence-empty".into(),
        2,
        Message::Persistence(Chunk {
            first: true,
            last: true,
            items: vec![],
        }),
    ));
    for (name, version, message) in frames {
        let bytes = encode(version, &message, DEFAULT_MAX_PAYLOAD).expect("a frame");
        corpus.add("mep_frame", name, bytes);
    }
}
