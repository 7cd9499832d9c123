//! Wildcards (RFC 4592, issue 29) in the responder: a wildcard GSLB domain answers any name
//! below it with its own rotation, owner the name asked, beside its zone's wildcard records;
//! what a MEP child refuses and what the fast wire path leaves to the general one. The static
//! cases are RFC 4592 §2.2.1's, held against NSD and Knot by `e2e::differential`.

use super::*;

#[test]
fn wildcards_synthesise_at_the_name_asked() {
    let r = responder();
    let got = |name: &str, qtype: RecordType| ask(&r, name, qtype, OUTSIDE);
    // The GSLB answer at any name below gw.example.com (and its view's, for its clients);
    // the zone's wildcard TXT beside it.
    let gslb = got("a.gw.example.com", RecordType::A);
    assert_eq!(
        gslb,
        noerror(&[
            "a.gw.example.com. 40 A 203.0.113.23",
            "a.gw.example.com. 40 A 203.0.113.24"
        ])
    );
    assert_eq!(
        ask(&r, "x.y.gw.example.com", RecordType::A, HOST),
        noerror(&["x.y.gw.example.com. 40 A 192.0.2.80"])
    );
    assert_eq!(
        got("a.gw.example.com", RecordType::TXT),
        noerror(&["a.gw.example.com. 3600 TXT gslb wildcard"])
    );
    // No IPv6 service: NODATA, not NXDOMAIN.
    let nodata = got("a.gw.example.com", RecordType::AAAA);
    assert_eq!(nodata, noerror(&[]).authority(&[SOA_COM_NEG]));
    // The encloser itself is an empty non-terminal: NODATA; a name beside it: NXDOMAIN.
    assert_eq!(
        got("gw.example.com", RecordType::A),
        noerror(&[]).authority(&[SOA_COM_NEG])
    );
    let nx = got("a.gx.example.com", RecordType::A);
    assert_eq!(nx.rcode, ResponseCode::NXDomain, "{nx:?}");
    // RFC 4592 §2.2.1: ghost.*.example is not synthesised from *.example.
    let ghost = got("ghost.*.wild.example.com", RecordType::MX);
    assert_eq!(ghost.rcode, ResponseCode::NXDomain, "{ghost:?}");
}

#[test]
fn the_fast_wire_path_leaves_synthesis_to_the_general_path() {
    // The same reply with and without the fast path's negative answers: a synthesised name
    // is no NXDOMAIN there.
    let r = responder();
    let reply = ask(&r, "host3.wild.example.com", RecordType::TXT, OUTSIDE);
    assert_eq!(reply.rcode, ResponseCode::NoError);
    assert_eq!(
        reply.answer,
        strings(&["host3.wild.example.com. 3600 TXT this is a wildcard"])
    );
    let with_edns = r
        .respond(
            &wire(&edns(
                query("host3.wild.example.com", RecordType::A),
                1232,
                0,
            )),
            OUTSIDE,
            Transport::Udp,
        )
        .expect("a reply");
    let m = Message::from_vec(&with_edns).unwrap();
    assert_eq!(
        (m.response_code, m.answers.len()),
        (ResponseCode::NoError, 0)
    );
}

#[test]
fn a_mep_child_refuses_wildcard_gslb_names_and_answers_their_static_types() {
    let config = Config::parse(&responder_config(), Path::new("responder.toml")).unwrap();
    let snapshot = Snapshot::compile(
        &config,
        &crate::compile::Inputs {
            refuse_gslb: true,
            ..Default::default()
        },
    );
    let r = Responder::new(&snapshot);
    let refused = ask(&r, "a.gw.example.com", RecordType::A, OUTSIDE);
    assert_eq!(refused.rcode, ResponseCode::Refused, "{refused:?}");
    let txt = ask(&r, "a.gw.example.com", RecordType::TXT, OUTSIDE);
    assert_eq!(
        txt.answer,
        strings(&["a.gw.example.com. 3600 TXT gslb wildcard"])
    );
}
