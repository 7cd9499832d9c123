use std::net::Ipv4Addr;

use super::*;
use crate::health::load::{MAX_LOAD, UNKNOWN_LOAD};
use crate::health::state::Bandwidth;

fn hello() -> Hello {
    Hello {
        versions: vec![1, 2],
        site: "SiteP1".into(),
        peer: "SiteP2".into(),
        role: Role::Parent,
        parent: None,
        software: "gslb 0.1.0".into(),
        rtt_tolerance_ms: Some(5),
        nonce: [7; NONCE_LEN],
        kx: [8; KX_LEN],
    }
}

fn samples() -> Vec<Message> {
    vec![
        Message::Hello(hello()),
        Message::Hello(Hello {
            role: Role::Child,
            parent: Some("SiteP1".into()),
            rtt_tolerance_ms: None,
            ..hello()
        }),
        Message::Auth([9; SIG_LEN]),
        Message::Reject {
            code: RejectCode::BadAuth,
            detail: "proof mismatch".into(),
        },
        Message::Reject {
            code: RejectCode::Other(200),
            detail: String::new(),
        },
        Message::Heartbeat { seq: u64::MAX },
        Message::SiteStatus(SiteStatus {
            site: "child1".into(),
            role: Role::Child,
            parent: Some("SiteP2".into()),
            up: true,
        }),
        Message::ServiceStates(ServiceStates {
            site: "SiteP1".into(),
            services: vec![
                ServiceReport {
                    name: "web-1".into(),
                    state: ServiceState {
                        up: true,
                        connections: 12,
                        bandwidth: Bandwidth::from_bps(1_000_000),
                    },
                },
                ServiceReport {
                    name: "wéb-2".into(),
                    state: ServiceState::DOWN,
                },
            ],
        }),
        Message::RttRows(Chunk {
            first: true,
            last: false,
            items: vec![
                RttRow {
                    ldns: "192.0.2.0/24".parse().unwrap(),
                    site: "SiteP1".into(),
                    rtt_us: 12_345,
                    protocol: RttProtocol::Dns,
                    age_s: 3,
                },
                RttRow {
                    ldns: "2001:db8::/48".parse().unwrap(),
                    site: "SiteP1".into(),
                    rtt_us: 1,
                    protocol: RttProtocol::Icmp,
                    age_s: 0,
                },
            ],
        }),
        Message::Persistence(Chunk {
            first: true,
            last: true,
            items: vec![PersistEntry {
                client: "198.51.100.7/32".parse().unwrap(),
                domain: "www.example.com".into(),
                service: "web-1".into(),
                ttl_s: 120,
            }],
        }),
        Message::Persistence(Chunk {
            first: true,
            last: true,
            items: vec![],
        }),
        Message::BackupParents {
            parent: "SiteP1".into(),
            backups: vec!["SiteP2".into(), "SiteP3".into()],
        },
        Message::BackupParents {
            parent: "SiteP1".into(),
            backups: vec![],
        },
        Message::AdoptRequest {
            original_parent: "SiteP1".into(),
            backups: vec!["SiteP2".into()],
        },
        Message::AdoptAccept {
            original_parent: "SiteP1".into(),
        },
        Message::AdoptReject {
            original_parent: "SiteP1".into(),
            reason: "SiteP1 is up".into(),
        },
    ]
}

#[test]
fn every_message_round_trips() {
    for m in samples() {
        let bytes = encode(3, &m, DEFAULT_MAX_PAYLOAD).unwrap();
        let (version, back, used) = decode_frame(&bytes, DEFAULT_MAX_PAYLOAD).unwrap();
        assert_eq!((version, &back, used), (3, &m, bytes.len()), "{m:?}");
    }
}

fn services(states: &[ServiceState]) -> Message {
    Message::ServiceStates(ServiceStates {
        site: "P".into(),
        services: states
            .iter()
            .map(|&state| ServiceReport {
                name: "s".into(),
                state,
            })
            .collect(),
    })
}

/// Each kind of service state comes back as it was sent: DOWN, zero, the markers, and the
/// largest real values; kbit/s as the engine reads them, bit/s on the wire.
#[test]
fn service_states_round_trip_with_their_markers() {
    let state = |up, connections, bandwidth| ServiceState {
        up,
        connections,
        bandwidth,
    };
    let cases = [
        (ServiceState::DOWN, 0, 0),
        (ServiceState::UP, 0, 0),
        (state(true, 7, Bandwidth::from_kbps(5)), 5, 5_000),
        (
            state(true, UNKNOWN_LOAD, Bandwidth::UNKNOWN),
            UNKNOWN_LOAD,
            UNKNOWN_LOAD,
        ),
        (state(true, 1, Bandwidth::FULL), u64::MAX, u64::MAX),
        (
            state(false, MAX_LOAD, Bandwidth::from_kbps(MAX_LOAD)),
            MAX_LOAD / 1000,
            MAX_LOAD,
        ),
        // A value no build of ours sends (not whole kbit/s) is kept to the bit.
        (state(true, 0, Bandwidth::from_bps(1_500)), 1, 1_500),
    ];
    for (sent, kbps, bps) in cases {
        let m = services(&[sent]);
        let bytes = encode(3, &m, DEFAULT_MAX_PAYLOAD).unwrap();
        let (_, back, _) = decode_frame(&bytes, DEFAULT_MAX_PAYLOAD).unwrap();
        assert_eq!(back, m, "{sent:?}");
        assert_eq!(sent.bandwidth.kbps(), kbps, "{sent:?}");
        // The bandwidth is the frame's last 8 bytes.
        let wire = u64::from_be_bytes(bytes[bytes.len() - 8..].try_into().unwrap());
        assert_eq!(wire, bps, "{sent:?}");
        assert_eq!(encode(3, &back, DEFAULT_MAX_PAYLOAD).unwrap(), bytes);
    }
}

/// The ServiceStates payload, byte by byte (docs/mep.md: site, count, then name, up,
/// connections u64, bandwidth bit/s u64 per service): a change of the wire fails here.
#[test]
fn service_states_wire_bytes() {
    let m = services(&[
        ServiceState {
            up: true,
            connections: 0x0102,
            bandwidth: Bandwidth::from_kbps(3),
        },
        ServiceState {
            up: false,
            connections: UNKNOWN_LOAD,
            bandwidth: Bandwidth::FULL,
        },
    ]);
    let bytes = encode(2, &m, DEFAULT_MAX_PAYLOAD).unwrap();
    let mut want = vec![b'M', b'P', 2, 6];
    let payload: Vec<u8> = [
        &[0, 1, b'P'][..],                                 // site
        &[0, 0, 0, 2],                                     // services: count u32
        &[0, 1, b's', 1],                                  // name, up
        &[0, 0, 0, 0, 0, 0, 1, 2],                         // connections
        &[0, 0, 0, 0, 0, 0, 0x0b, 0xb8],                   // 3 kbit/s = 3000 bit/s
        &[0, 1, b's', 0],                                  // name, down
        &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe], // unknown
        &[0xff; 8],                                        // full
    ]
    .concat();
    want.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    want.extend_from_slice(&payload);
    assert_eq!(bytes, want);
}

#[test]
fn every_strict_prefix_is_truncated_never_a_panic() {
    for m in samples() {
        let bytes = encode(1, &m, DEFAULT_MAX_PAYLOAD).unwrap();
        for cut in 0..bytes.len() {
            match decode_frame(&bytes[..cut], DEFAULT_MAX_PAYLOAD) {
                Err(FrameError::Truncated { .. }) => {}
                other => panic!("{m:?} cut at {cut}: {other:?}"),
            }
        }
        // A payload cut short but with a consistent header: truncated inside the payload.
        if bytes.len() > HEADER_LEN {
            let mut short = bytes[..bytes.len() - 1].to_vec();
            let len = (short.len() - HEADER_LEN) as u32;
            short[4..8].copy_from_slice(&len.to_be_bytes());
            assert!(decode_frame(&short, DEFAULT_MAX_PAYLOAD).is_err(), "{m:?}");
        }
    }
}

#[test]
fn bad_headers_are_typed_errors() {
    let mut bytes = encode(1, &Message::Heartbeat { seq: 1 }, 64).unwrap();
    assert_eq!(
        decode_frame(&bytes, 7),
        Err(FrameError::Oversized { len: 8, max: 7 })
    );
    bytes[3] = 99;
    assert_eq!(decode_frame(&bytes, 64), Err(FrameError::UnknownType(99)));
    bytes[0] = b'X';
    assert_eq!(decode_frame(&bytes, 64), Err(FrameError::BadMagic(*b"XP")));
    // The cap is checked on the header alone, before any payload arrives.
    let header = [b'M', b'P', 1, 6, 0xff, 0xff, 0xff, 0xff];
    assert!(matches!(
        decode_header(&header, DEFAULT_MAX_PAYLOAD),
        Err(FrameError::Oversized { .. })
    ));
}

#[test]
fn malformed_payloads_are_typed_errors() {
    let frame = |kind: u8, payload: &[u8]| {
        let mut b = vec![b'M', b'P', 1, kind];
        b.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        b.extend_from_slice(payload);
        b
    };
    let malformed = |b: Vec<u8>| match decode_frame(&b, DEFAULT_MAX_PAYLOAD) {
        Err(FrameError::Malformed { what, .. }) => what,
        other => panic!("{other:?}"),
    };
    // A bool of 2.
    assert_eq!(
        malformed(frame(5, b"\x00\x01a\x01\x00\x02")),
        "bool not 0 or 1"
    );
    // Unknown role.
    assert_eq!(
        malformed(frame(5, b"\x00\x01a\x09\x00\x01")),
        "unknown role"
    );
    // Invalid UTF-8 in a site name.
    assert_eq!(malformed(frame(11, b"\x00\x01\xff")), "string not UTF-8");
    // Empty site name.
    assert_eq!(malformed(frame(11, b"\x00\x00")), "empty site name");
    // A site name over the cap.
    let mut long = vec![0, 64];
    long.extend_from_slice(&[b'a'; 64]);
    assert_eq!(malformed(frame(11, &long)), "string longer than its cap");
    // A count of four billion services in a few bytes: refused before allocating.
    assert_eq!(
        malformed(frame(6, b"\x00\x01a\xff\xff\xff\xff")),
        "item count larger than the payload can hold"
    );
    // Six backups.
    let mut six = b"\x00\x01a\x06".to_vec();
    for _ in 0..6 {
        six.extend_from_slice(b"\x00\x01b");
    }
    assert_eq!(malformed(frame(9, &six)), "more than 5 backup parents");
    // A /33 IPv4 prefix and an unknown family.
    assert_eq!(
        malformed(frame(
            8,
            b"\x01\x01\x00\x00\x00\x01\x04\x21\x01\x02\x03\x04\x00\x00\x00\x00\x00\x00\x00\x00"
        )),
        "prefix length too long"
    );
    assert_eq!(
        malformed(frame(
            8,
            b"\x01\x01\x00\x00\x00\x01\x05\x20\x01\x02\x03\x04\x00\x00\x00\x00\x00\x00\x00\x00"
        )),
        "unknown address family"
    );
    // No versions in a Hello.
    assert_eq!(malformed(frame(1, b"\x00")), "version count not in 1..=16");
    // Trailing bytes.
    assert_eq!(
        decode_frame(&frame(4, &[0; 9]), DEFAULT_MAX_PAYLOAD),
        Err(FrameError::TrailingBytes {
            kind: MessageType::Heartbeat,
            extra: 1
        })
    );
}

#[test]
fn encoder_refuses_what_the_decoder_would() {
    let long = "x".repeat(MAX_SITE_NAME + 1);
    let m = Message::AdoptAccept {
        original_parent: long,
    };
    assert!(matches!(
        encode(1, &m, DEFAULT_MAX_PAYLOAD),
        Err(FrameError::Malformed { .. })
    ));
    let m = Message::BackupParents {
        parent: "p".into(),
        backups: vec!["b".into(); 6],
    };
    assert!(matches!(
        encode(1, &m, DEFAULT_MAX_PAYLOAD),
        Err(FrameError::Malformed { .. })
    ));
    let m = Message::Heartbeat { seq: 0 };
    assert_eq!(
        encode(1, &m, 4),
        Err(FrameError::Oversized { len: 8, max: 4 })
    );
    // Over-long reasons are cut (on a character boundary), not refused.
    let m = Message::Reject {
        code: RejectCode::Closing,
        detail: "é".repeat(MAX_DETAIL),
    };
    let (_, back, _) = decode_frame(
        &encode(1, &m, DEFAULT_MAX_PAYLOAD).unwrap(),
        DEFAULT_MAX_PAYLOAD,
    )
    .unwrap();
    let Message::Reject { detail, .. } = back else {
        panic!()
    };
    assert_eq!(detail.len(), MAX_DETAIL);
}

#[test]
fn chunks_stay_under_the_cap_and_cover_everything() {
    let rows: Vec<RttRow> = (0..1000u32)
        .map(|i| RttRow {
            ldns: IpNet::new(Ipv4Addr::from(i << 8).into(), 24).unwrap(),
            site: "SiteP1".into(),
            rtt_us: i,
            protocol: RttProtocol::Icmp,
            age_s: 0,
        })
        .collect();
    let max = 2000;
    let parts = chunks(&rows, max, rtt_row_len);
    assert!(parts.len() > 10);
    assert!(parts[0].first && parts.iter().skip(1).all(|c| !c.first));
    assert!(parts.last().unwrap().last && parts.iter().rev().skip(1).all(|c| !c.last));
    let mut all = Vec::new();
    for c in parts {
        let bytes = encode(1, &Message::RttRows(c.clone()), max).expect("under the cap");
        assert!(bytes.len() <= HEADER_LEN + max);
        all.extend(c.items);
    }
    assert_eq!(all, rows);
    let empty: Vec<Chunk<RttRow>> = chunks(&[], max, rtt_row_len);
    assert_eq!(
        empty,
        vec![Chunk {
            first: true,
            last: true,
            items: vec![]
        }]
    );
}
