//! The XDP fast path run on synthetic frames through BPF_PROG_TEST_RUN.
//!
//! Each answered query is checked down to its checksums by implementations independent of the
//! fast path (etherparse for the frame, hickory for the DNS message); each frame the fast path
//! must leave to the stack is checked to come back unchanged, with the reason counted.
//! Needs root; see `common::privileged`.

mod answered;
mod cname;
mod cookie;
mod passed;
mod wildcard;

use crate::common;

use std::net::{IpAddr, Ipv4Addr};

use common::*;
use hickory_proto::op::Message;
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsOption};
use hickory_proto::rr::{DNSClass, RData, RecordType};

const V4: IpAddr = IpAddr::V4(SERVER_V4);
const V6: IpAddr = IpAddr::V6(SERVER_V6);

// ---- What a reply must be ----

fn www(rtype: RecordType, addrs: &[&str]) -> Expect {
    Expect {
        rtype,
        ttl: WWW_TTL,
        answers: Answers::OneOf(ips(addrs)),
    }
}

fn www_default(rtype: RecordType) -> Expect {
    www(
        rtype,
        if rtype == RecordType::A {
            &WWW_A
        } else {
            &WWW_AAAA
        },
    )
}

fn all(rtype: RecordType) -> Expect {
    let addrs: &[&str] = if rtype == RecordType::A {
        &ALL_A
    } else {
        &ALL_AAAA
    };
    Expect {
        rtype,
        ttl: ALL_TTL,
        answers: Answers::All(ips(addrs)),
    }
}

/// The fast path with the tests' configuration, `server_extra` in its `[server]` (an
/// identity, cookies) and `more` at its end, published; `None` (having said why) when the test
/// cannot run here.
fn dataplane_with(server_extra: &str, more: &str) -> Option<gslb_user::dataplane::Dataplane> {
    if !privileged() {
        return None;
    }
    let text = config_text().replacen("[server]\n", &format!("[server]\n{server_extra}"), 1) + more;
    let config = gslb_user::config::Config::parse(&text, std::path::Path::new("test-run.toml"))
        .expect("valid");
    let mut dp = gslb_user::dataplane::Dataplane::load(None).expect("loading the XDP object");
    dp.table
        .publish(&gslb_user::compile::Snapshot::from_config(&config))
        .expect("publishing");
    Some(dp)
}

/// An NSID request (RFC 5001: empty).
fn nsid() -> EdnsOption {
    EdnsOption::Unknown(3, vec![])
}

// ---- Replies ----

/// The reply to `frame`, checked as the fast path's turn-around (addresses, ports, lengths,
/// both checksums, header, question, OPT with `scope` and `id`), counted as a hit of its
/// family and `rtype`, with these answer records ("owner TTL TYPE data").
fn assert_records(
    dp: &gslb_user::dataplane::Dataplane,
    case: &str,
    frame: &Frame,
    rtype: RecordType,
    scope: Option<u8>,
    id: Option<&[u8]>,
    records: &[String],
) {
    let bytes = frame.bytes();
    let out = run(dp, &bytes);
    let TurnedAround {
        v6,
        reply,
        counts,
        rdns,
        question_len,
        ..
    } = assert_turned_around_with(case, &bytes, &out, scope, id);
    let got: Vec<String> = reply
        .answers
        .iter()
        .map(|r| {
            assert_eq!(r.dns_class, DNSClass::IN, "{case}: class");
            format!("{} {} {} {}", r.name, r.ttl, r.record_type(), r.data)
        })
        .collect();
    assert_eq!(got, records, "{case}: answers");
    assert_eq!(counts[1] as usize, records.len(), "{case}: ANCOUNT");
    // Nothing after the OPT: each record (owner a pointer; a CNAME's target uncompressed), then
    // the OPT.
    let answers_len: usize = reply
        .answers
        .iter()
        .map(|r| match &r.data {
            RData::CNAME(target) => 12 + target.0.to_ascii().trim_end_matches('.').len() + 2,
            RData::A(_) => 16,
            _ => 28,
        })
        .sum();
    let opt_len = opt_rdata(&rdns).map_or(0, |o| 11 + o.len());
    assert_eq!(
        rdns.len(),
        12 + question_len + answers_len + opt_len,
        "{case}: size"
    );
    assert_eq!(
        out.counted,
        [(hit_counter(v6, rtype), 1)],
        "{case}: counters"
    );
}

// ---- Queries ----

fn with_edns(mut msg: Message) -> Message {
    msg.set_edns(edns());
    msg
}

/// www A with an OPT record carrying `options`.
fn with_options(options: Vec<EdnsOption>) -> Message {
    let mut opt = edns();
    for option in options {
        opt.options_mut().insert(option);
    }
    let mut msg = query(0x5151, WWW, RecordType::A);
    msg.set_edns(opt);
    msg
}

/// A DNS cookie as dig sends it first: a client cookie only.
fn client_cookie() -> EdnsOption {
    EdnsOption::Unknown(10, vec![0x5e, 0x1f, 0x2a, 0x3b, 0x4c, 0x5d, 0x6e, 0x7f])
}

fn padding(len: usize) -> EdnsOption {
    EdnsOption::Unknown(12, vec![0; len])
}

/// A subnet in no view: `www`'s answer differs between views and the default view's blocks
/// are not in the trie, so the fast path does not know its scope.
fn ecs() -> EdnsOption {
    EdnsOption::Subnet(ClientSubnet::new(
        IpAddr::V4(Ipv4Addr::new(203, 0, 113, 0)),
        24,
        0,
    ))
}

/// `name` `rtype` with an OPT carrying `options`, from `client` to `server`.
fn ecs_frame(
    client: IpAddr,
    server: IpAddr,
    name: &str,
    rtype: RecordType,
    options: Vec<EdnsOption>,
) -> Frame {
    let mut opt = edns();
    for option in options {
        opt.options_mut().insert(option);
    }
    let mut msg = query(0x5eca, name, rtype);
    msg.set_edns(opt);
    Frame::udp(client, server, wire(&msg))
}
