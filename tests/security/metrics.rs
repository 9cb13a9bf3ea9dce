//! The broker's `/metrics` by the rules of its listeners: refused beyond
//! loopback without TLS and a token; over TLS with a token, scraped only
//! with the token, every family with its HELP and TYPE.

use crate::support;

use std::time::Duration;

use strata::broker::BrokerConfig;
use strata::broker::auth::{ClientAuth, TlsSettings};
use strata_http::HttpSecurity;
use strata_http::client;
use support::certs::Authority;

const TOKEN: &str = "9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f";
const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metrics_address_beyond_loopback_is_refused_without_tls_and_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let log =
        std::sync::Arc::new(strata::log::LogManager::open(dir.path(), Default::default()).unwrap());
    let config = BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: Some("0.0.0.0:0".parse().unwrap()),
        ..BrokerConfig::default()
    };
    let refused = strata::broker::Broker::bind(config, log)
        .await
        .err()
        .expect("refused");
    let said = refused.to_string();
    assert!(
        said.contains("metrics_tls") && said.contains("metrics_token_file"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_over_tls_with_a_token_are_scraped_only_with_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::new(dir.path(), "ca");
    let server = ca.server(dir.path(), "server");
    let token = dir.path().join("metrics-token");
    std::fs::write(&token, TOKEN).unwrap();
    let config = BrokerConfig {
        tls: Some(TlsSettings {
            cert: server.cert.clone(),
            key: server.key.clone(),
            client_ca: None,
            client_auth: ClientAuth::None,
        }),
        // Beyond loopback: allowed, since TLS and a token are on.
        metrics_listen: Some("0.0.0.0:0".parse().unwrap()),
        metrics_tls: true,
        metrics_token_file: Some(token.clone()),
        ..BrokerConfig::default()
    };
    let broker = support::InProcessBroker::start_in(&dir.path().join("data"), config).await;
    let port = broker.metrics.expect("metrics are served").port();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let scraper = |token: Option<&std::path::Path>| {
        HttpSecurity {
            tls_ca: Some(ca.pem.clone()),
            token_file: token.map(std::path::Path::to_path_buf),
            ..HttpSecurity::default()
        }
        .load()
        .unwrap()
    };
    let (status, body) = client::get(addr, "/metrics", &scraper(Some(&token)), 1 << 20, WAIT)
        .await
        .unwrap();
    assert_eq!(status, 200);
    let text = String::from_utf8_lossy(&body);
    for family in [
        "strata_requests_total",
        "strata_log_end_offset",
        "strata_group_lag",
    ] {
        assert!(
            text.contains(&format!("# HELP {family} ")),
            "{family}: {text}"
        );
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "{family}: {text}"
        );
    }
    let (status, _) = client::get(addr, "/metrics", &scraper(None), 1 << 20, WAIT)
        .await
        .unwrap();
    assert_eq!(status, 401);
    broker.stop().await;
}
