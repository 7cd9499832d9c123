//! MEP over TLS: links carry state, plain peers are refused.

use std::sync::Arc;

use gslb_user::mep::{
    CloseReason, LocalState, MepConfig, MepTls,
    session::{self, Identity},
};
use tokio::net::TcpStream;
use tokio_rustls::rustls::{
    self,
    pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer},
};

use super::{Lab, WAIT, key, parent_hello, rtt, service, two_parents, wait_until};

// ---- TLS ----

/// TLS settings every site shares: a self-signed certificate for the names A and B, trusted
/// as the only root.
fn tls() -> MepTls {
    let certified = rcgen::generate_simple_self_signed(vec!["A".into(), "B".into()]).unwrap();
    let cert = CertificateDer::from(certified.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let provider = gslb_user::tls::provider();
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    MepTls {
        server: Arc::new(server),
        client: Arc::new(client),
    }
}

#[tokio::test]
async fn tls_links_carry_state_and_refuse_plain_peers() {
    let t = tls();
    let mut lab = Lab::new(two_parents()).await;
    for site in ["A", "B"] {
        let t = t.clone();
        lab.tweaks.insert(
            site.into(),
            Box::new(move |c: &mut MepConfig| c.tls = Some(t.clone())),
        );
    }
    lab.start_all().await;
    lab.wait("A", "TLS link to B", |v| v.session_up("B")).await;
    lab.node("A")
        .publish_local(LocalState {
            services: vec![service("a", true, 1)],
            rtt: rtt("A", 100),
            ..Default::default()
        })
        .unwrap();
    lab.wait("B", "A's state over TLS", |v| {
        v.service_up("A", "a", None) && v.sites["A"].rtt.len() == 100
    })
    .await;

    // A plain MEP caller is refused by a TLS site.
    let mut s = TcpStream::connect(lab.listen["B"]).await.unwrap();
    let me = Identity {
        hello: &parent_hello("A"),
        key: &key("A"),
    };
    assert!(
        session::handshake_initiator(&mut s, me, "B", &key("B").public(), 1 << 20, WAIT)
            .await
            .is_err()
    );
    wait_until("B counts tls", || {
        lab.node("B").stats().closed(CloseReason::Tls) >= 1
    })
    .await;
    assert!(
        lab.node("B").view().session_up("A"),
        "the real link is untouched"
    );

    // A TLS site calling a plain one: no session, a reason on both sides.
    let mut lab = Lab::new(two_parents()).await;
    let t2 = t.clone();
    lab.tweaks.insert(
        "A".into(),
        Box::new(move |c: &mut MepConfig| c.tls = Some(t2.clone())),
    );
    lab.start_all().await;
    wait_until("A counts tls", || {
        lab.node("A").stats().closed(CloseReason::Tls) >= 1
    })
    .await;
    wait_until("B counts malformed", || {
        lab.node("B").stats().closed(CloseReason::Malformed) >= 1
    })
    .await;
    assert!(!lab.node("A").view().session_up("B"));
}
