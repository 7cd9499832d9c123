//! DNS cookies (RFC 7873, RFC 9018) in the responder: a query with a client cookie gets it
//! back with a server cookie of ours; one that brings a fresh one back is `Written::Verified`
//! (response rate limiting lets it through); a malformed option is FORMERR; without
//! `server.cookie_secret` the option is ignored, as before.

use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};

use super::*;

const SECRET: &str = "e5e973e5a6b2a43f48e7dc849e37bfcf";

fn responder_with_cookies() -> Responder {
    let text = responder_config().replacen(
        "[server]\n",
        &format!("[server]\ncookie_secret = \"{SECRET}\"\n"),
        1,
    );
    let config = Config::parse(&text, Path::new("cookies.toml")).expect("valid");
    Responder::new(&Snapshot::from_config(&config))
}

fn with_cookie(name: &str, cookie: &[u8]) -> Message {
    let mut m = edns(query(name, RecordType::A), 1232, 0);
    m.edns
        .as_mut()
        .unwrap()
        .options_mut()
        .insert(EdnsOption::Unknown(10, cookie.to_vec()));
    m
}

fn ask(r: &Responder, m: &Message, client: IpAddr) -> (Message, Written) {
    let mut out = Vec::new();
    let written = r.respond_into(&wire(m), client, Transport::Udp, &mut out);
    (Message::from_vec(&out).expect("the reply parses"), written)
}

fn cookie_of(m: &Message) -> Option<Vec<u8>> {
    m.edns.as_ref()?.option(EdnsCode::Cookie).map(|o| match o {
        EdnsOption::Unknown(10, data) => data.clone(),
        other => panic!("{other:?}"),
    })
}

#[test]
fn a_client_cookie_gets_a_server_cookie_that_then_verifies() {
    let r = responder_with_cookies();
    let client = [0x24, 0x64, 0xc4, 0xab, 0xcf, 0x10, 0xc9, 0x57];
    for name in ["txt.example.com", "all.example.com", "nx.example.com"] {
        let (reply, written) = ask(&r, &with_cookie(name, &client), OUTSIDE);
        assert_eq!(
            written,
            Written::Response,
            "{name}: a client cookie proves nothing"
        );
        let cookie = cookie_of(&reply).unwrap_or_else(|| panic!("{name}: no cookie"));
        assert_eq!((cookie.len(), &cookie[..8]), (24, &client[..]), "{name}");
        assert_eq!(cookie[8], 1, "version 1");
        // Brought back from the same address: verified; from another: a new one, unverified.
        let (again, written) = ask(&r, &with_cookie(name, &cookie), OUTSIDE);
        assert_eq!(written, Written::Verified, "{name}");
        assert_eq!(
            cookie_of(&again).map(|c| c[..8].to_vec()),
            Some(client.to_vec())
        );
        let (_, elsewhere) = ask(&r, &with_cookie(name, &cookie), OUTSIDE_V6);
        assert_eq!(elsewhere, Written::Response, "{name}");
        // A server cookie of ours altered in one bit is not ours.
        let mut forged = cookie.clone();
        forged[23] ^= 1;
        assert_eq!(
            ask(&r, &with_cookie(name, &forged), OUTSIDE).1,
            Written::Response
        );
    }
    // The answer itself is the same as without the option.
    let (reply, _) = ask(&r, &with_cookie("all.example.com", &client), OUTSIDE);
    let (without, _) = ask(
        &r,
        &edns(query("all.example.com", RecordType::A), 1232, 0),
        OUTSIDE,
    );
    assert_eq!(reply.answers.len(), 8);
    assert_eq!(reply.answers, without.answers);
}

#[test]
fn malformed_cookies_are_formerr_and_unconfigured_ones_ignored() {
    let r = responder_with_cookies();
    for len in [0, 7, 9, 15, 41] {
        let (reply, _) = ask(&r, &with_cookie("txt.example.com", &vec![1; len]), OUTSIDE);
        assert_eq!(reply.response_code, ResponseCode::FormErr, "{len} bytes");
        assert!(reply.answers.is_empty());
    }
    let plain = responder();
    let (reply, written) = ask(&plain, &with_cookie("txt.example.com", &[1; 7]), OUTSIDE);
    assert_eq!(
        (reply.response_code, cookie_of(&reply), written),
        (ResponseCode::NoError, None, Written::Response)
    );
}
