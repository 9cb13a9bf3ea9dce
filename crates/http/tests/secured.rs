//! An endpoint served over TLS with a token, asked by strata-http's client
//! as one instance asks another: answered with the token and the CA, 401
//! without the token, and not at all in clear or without the CA.

use std::path::Path;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use hyper::StatusCode;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use strata_http::client::{self, FetchError};
use strata_http::{HttpSecurity, Limits};

const TOKEN: &str = "3f1b0c2d4e5a69788796a5b4c3d2e1f0";
const WAIT: Duration = Duration::from_secs(20);

/// A CA, and a certificate it signed for 127.0.0.1: (ca, cert, key) files.
fn certificates(dir: &Path) -> [std::path::PathBuf; 3] {
    let mut ca = CertificateParams::default();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_certificate = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let mut server = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    (server.subject_alt_names).push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
    let key = KeyPair::generate().unwrap();
    let certificate = server.signed_by(&key, &issuer).unwrap();
    let paths = ["ca.pem", "server.pem", "server.key"].map(|name| dir.join(name));
    std::fs::write(&paths[0], ca_certificate.pem()).unwrap();
    std::fs::write(&paths[1], certificate.pem()).unwrap();
    std::fs::write(&paths[2], key.serialize_pem()).unwrap();
    paths
}

#[tokio::test]
async fn a_tls_endpoint_with_a_token_answers_only_a_client_with_both() {
    let dir = tempfile::tempdir().unwrap();
    let [ca, cert, key] = certificates(dir.path());
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let secured = HttpSecurity {
        tls: Some((cert, key)),
        tls_ca: Some(ca),
        token_file: Some(token),
        allow_unauthenticated_remote: false,
    };
    let access = secured.load().unwrap();
    assert_eq!(access.scheme(), "https");
    assert!(
        access
            .check_bind("0.0.0.0:0".parse().unwrap(), "query endpoint")
            .is_ok()
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = Router::new().route("/", get(|| async { "served" }));
    tokio::spawn(strata_http::serve(
        listener,
        router,
        Limits::default(),
        access.clone(),
    ));

    let (status, body) = client::get(addr, "/", &access, 1024, WAIT).await.unwrap();
    assert_eq!((status, &body[..]), (StatusCode::OK, &b"served"[..]));

    let without_token = HttpSecurity {
        token_file: None,
        ..secured.clone()
    };
    let (status, body) = client::get(addr, "/", &without_token.load().unwrap(), 1024, WAIT)
        .await
        .unwrap();
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        String::from_utf8_lossy(&body).contains("Bearer"),
        "{body:?}"
    );

    let without_ca = HttpSecurity {
        tls_ca: None,
        ..secured.clone()
    };
    let refused = client::get(addr, "/", &without_ca.load().unwrap(), 1024, WAIT).await;
    assert!(matches!(refused, Err(FetchError::NoCa)), "{refused:?}");

    // Without the CA, a client whose side serves nothing asks in clear.
    let in_clear = HttpSecurity {
        token_file: secured.token_file.clone(),
        ..HttpSecurity::default()
    };
    let refused = client::get(addr, "/", &in_clear.load().unwrap(), 1024, WAIT).await;
    assert!(
        matches!(refused, Err(FetchError::Unreachable(_))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn an_answer_over_the_bound_is_refused_unread() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = Router::new().route("/", get(|| async { "x".repeat(4096) }));
    let access = strata_http::Access::default();
    tokio::spawn(strata_http::serve(
        listener,
        router,
        Limits::default(),
        access.clone(),
    ));
    let refused = client::get(addr, "/", &access, 1024, WAIT).await;
    assert!(
        matches!(refused, Err(FetchError::TooLarge(1024))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_token_is_never_sent_in_clear_to_another_machine() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let access = HttpSecurity {
        token_file: Some(token),
        ..HttpSecurity::default()
    }
    .load()
    .unwrap();
    let elsewhere = "192.0.2.7:8080".parse().unwrap();
    let refused = client::get(elsewhere, "/", &access, 1024, WAIT).await;
    assert!(
        matches!(refused, Err(FetchError::TokenInClear(_))),
        "{refused:?}"
    );
}
