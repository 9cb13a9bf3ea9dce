//! The broker's `/metrics` and console by the rules of its listeners:
//! refused beyond loopback without TLS and authentication; over TLS with a
//! token, scraped only with the token, every family with its HELP and
//! TYPE; with `metrics_basic_auth`, read by a SCRAM user's name and
//! password (HTTP Basic, as a browser sends them, here from curl) when the
//! ACLs allow that user DESCRIBE on the cluster.

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

/// curl's answer to a GET of `url` over TLS checked against `ca`, with
/// `user:password` by HTTP Basic if given: the status and the headers.
fn curl(url: &str, ca: &std::path::Path, user: Option<&str>) -> (u16, String) {
    let mut command = std::process::Command::new("curl");
    command.args([
        "-s",
        "-o",
        "/dev/null",
        "-D",
        "-",
        "-w",
        "%{http_code}",
        "--cacert",
    ]);
    command.arg(ca).arg(url);
    if let Some(user) = user {
        command.args(["-u", user]);
    }
    let output = command.output().expect("curl runs (make deps installs it)");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let status = text.trim_end().rsplit('\n').next().unwrap_or_default();
    (status.trim().parse().unwrap_or(0), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scram_user_allowed_to_describe_the_cluster_reads_the_console_by_http_basic() {
    use strata::broker::acl::{
        AccessControlEntry, AclBinding, CLUSTER_NAME, Operation, PatternType, Permission,
        ResourcePattern, ResourceType,
    };
    use strata::broker::auth::{CredentialStore, Principal};
    use strata::sasl::{Mechanism, ScramCredential};

    const PASSWORD: &str = "correct horse battery";
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let users = CredentialStore::open(&data).unwrap();
    for user in ["alice", "bob", "carol"] {
        let credential = ScramCredential::generate(Mechanism::ScramSha256, PASSWORD, 4096).unwrap();
        users
            .upsert(user, Mechanism::ScramSha256, credential)
            .unwrap();
    }
    let ca = Authority::new(dir.path(), "ca");
    let server = ca.server(dir.path(), "server");
    let config = BrokerConfig {
        tls: Some(TlsSettings {
            cert: server.cert.clone(),
            key: server.key.clone(),
            client_ca: None,
            client_auth: ClientAuth::None,
        }),
        // Beyond loopback: allowed, since TLS and passwords are on.
        console_listen: Some("0.0.0.0:0".parse().unwrap()),
        metrics_tls: true,
        metrics_basic_auth: true,
        super_users: vec![Principal::user("alice")],
        ..BrokerConfig::default()
    };
    let broker = support::InProcessBroker::start_in(&data, config).await;
    let port = broker.console.expect("the console is served").port();
    let page = format!("https://127.0.0.1:{port}/");
    let metrics = format!("https://127.0.0.1:{port}/metrics");

    // Nobody named: 401, asking for Basic (a browser prompts for it).
    let (status, headers) = curl(&page, &ca.pem, None);
    assert_eq!(status, 401, "{headers}");
    assert!(
        headers
            .to_ascii_lowercase()
            .contains("www-authenticate: basic"),
        "{headers}"
    );
    // A super user with the right password; not with a wrong one.
    assert_eq!(
        curl(&page, &ca.pem, Some(&format!("alice:{PASSWORD}"))).0,
        200
    );
    assert_eq!(curl(&metrics, &ca.pem, Some("alice:wrong password")).0, 401);
    // A user the ACLs do not allow to describe the cluster: refused, until
    // an ACL allows it.
    assert_eq!(
        curl(&page, &ca.pem, Some(&format!("carol:{PASSWORD}"))).0,
        401
    );
    let cluster = strata::client::Cluster::connect(strata::client::ClientConfig::new(
        &broker.addr.to_string(),
    ))
    .await
    .unwrap();
    let describe = AclBinding {
        pattern: ResourcePattern::new(ResourceType::Cluster, CLUSTER_NAME, PatternType::Literal),
        entry: AccessControlEntry {
            principal: Principal::user("carol"),
            host: "*".into(),
            operation: Operation::Describe,
            permission: Permission::Allow,
        },
    };
    (strata::client::Admin::new(cluster).create_acls(&[describe]))
        .await
        .unwrap();
    let (status, _) = curl(&metrics, &ca.pem, Some(&format!("carol:{PASSWORD}")));
    assert_eq!(status, 200);
    assert_eq!(
        curl(&page, &ca.pem, Some(&format!("bob:{PASSWORD}"))).0,
        401
    );
    broker.stop().await;
}
