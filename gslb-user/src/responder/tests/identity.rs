//! Node identity (issue 29): CH TXT `id.server`, `hostname.bind`, `version.bind` and
//! `version.server` (RFC 4892), and the NSID option (RFC 5001), as configured and only then.

use hickory_proto::rr::{
    RData,
    rdata::opt::{EdnsCode, EdnsOption, NSIDPayload},
};

use super::*;

fn responder_with(keys: &str) -> Responder {
    let text = responder_config().replacen("[server]\n", &format!("[server]\n{keys}\n"), 1);
    let config = Config::parse(&text, Path::new("identity.toml")).expect("valid");
    Responder::new(&Snapshot::from_config(&config))
}

fn ask(r: &Responder, m: &Message) -> Message {
    let reply = r
        .respond(&wire(m), OUTSIDE, Transport::Udp)
        .expect("a reply");
    Message::from_vec(&reply).expect("the reply parses")
}

fn chaos(name: &str, qtype: RecordType) -> Message {
    class(query(name, qtype), DNSClass::CH)
}

/// The TXT strings of `reply`'s answers.
fn texts(reply: &Message) -> Vec<String> {
    reply
        .answers
        .iter()
        .map(|a| {
            assert_eq!((a.dns_class, a.ttl), (DNSClass::CH, 0), "{a}");
            match &a.data {
                RData::TXT(t) => t
                    .txt_data
                    .iter()
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect(),
                other => panic!("not TXT: {other}"),
            }
        })
        .collect()
}

#[test]
fn chaos_names_tell_what_is_configured_and_refuse_the_rest() {
    let r = responder_with("identity = \"fra-1\"\nversion = \"gslbd 1\"");
    for (name, text) in [
        ("id.server", "fra-1"),
        ("hostname.bind", "fra-1"),
        ("version.bind", "gslbd 1"),
        ("VERSION.Server.", "gslbd 1"),
    ] {
        for qtype in [RecordType::TXT, RecordType::ANY] {
            let reply = ask(&r, &chaos(name, qtype));
            assert_eq!(reply.response_code, ResponseCode::NoError, "{name} {qtype}");
            assert!(reply.authoritative, "{name} {qtype}");
            assert_eq!(texts(&reply), [text], "{name} {qtype}");
        }
        // Another type at the name: no record.
        let a = ask(&r, &chaos(name, RecordType::A));
        assert_eq!(
            (a.response_code, a.answers.len()),
            (ResponseCode::NoError, 0)
        );
    }
    let other = ask(&r, &chaos("authors.bind", RecordType::TXT));
    assert_eq!(other.response_code, ResponseCode::Refused);

    // Not configured (the default): REFUSED, as NSD's hide-identity and hide-version.
    let quiet = responder();
    let only_name = responder_with("identity = \"fra-1\"");
    for (r, name) in [
        (&quiet, "id.server"),
        (&quiet, "version.bind"),
        (&only_name, "version.server"),
    ] {
        let reply = ask(r, &chaos(name, RecordType::TXT));
        assert_eq!(reply.response_code, ResponseCode::Refused, "{name}");
        assert!(!reply.authoritative && reply.answers.is_empty());
    }
}

#[test]
fn nsid_is_given_to_queries_that_ask_for_it() {
    let asking = |name: &str, qtype: RecordType| {
        let mut m = edns(query(name, qtype), 1232, 0);
        m.edns
            .as_mut()
            .expect("EDNS")
            .options_mut()
            .insert(EdnsOption::NSID(NSIDPayload::new(Vec::new()).unwrap()));
        m
    };
    let nsid = |reply: &Message| -> Option<Vec<u8>> {
        match reply.edns.as_ref()?.option(EdnsCode::NSID)? {
            EdnsOption::NSID(p) => Some(p.as_ref().to_vec()),
            other => panic!("{other:?}"),
        }
    };
    let r = responder_with("identity = \"fra-1\"");
    // A GSLB name, a static one, a negative answer: the option beside each.
    for (name, qtype) in [
        ("www.example.com", RecordType::A),
        ("txt.example.com", RecordType::TXT),
        ("nope.example.com", RecordType::A),
    ] {
        let reply = ask(&r, &asking(name, qtype));
        assert_eq!(nsid(&reply).as_deref(), Some(&b"fra-1"[..]), "{name}");
        // The same answer as without the option.
        let plain = ask(&r, &edns(query(name, qtype), 1232, 0));
        assert_eq!(
            (reply.response_code, reply.answers.len()),
            (plain.response_code, plain.answers.len())
        );
        assert_eq!(nsid(&plain), None, "not asked: {name}");
    }
    for keys in ["", "identity = \"fra-1\"\nnsid = false"] {
        let r = responder_with(keys);
        let reply = ask(&r, &asking("www.example.com", RecordType::A));
        assert_eq!(nsid(&reply), None, "{keys:?}");
    }
}
