//! The broker's configuration: strata.toml read into it, and its limits
//! checked against each other.

use super::*;
use crate::auth::ClientAuth;

#[test]
fn a_config_file_overrides_defaults_and_names_bad_values() {
    let file = ConfigFile::parse(
        r#"
        listen = "127.0.0.1:19999"
        default_partitions = 3
        metrics = "127.0.0.1:19998"
        console = "127.0.0.1:19997"
        [topic_defaults]
        "retention.ms" = 1000
        "cleanup.policy" = "delete"
        "#,
    )
    .unwrap();
    let mut config = BrokerConfig::default();
    file.apply(&mut config).unwrap();
    assert_eq!(config.listen.port(), 19999);
    assert_eq!(config.default_partitions, 3);
    assert_eq!(config.metrics_listen.map(|a| a.port()), Some(19998));
    assert_eq!(config.console_listen.map(|a| a.port()), Some(19997));
    assert_eq!(config.log.retention_ms, 1000);

    assert!(ConfigFile::parse("no_such_key = 1").is_err());
    let bad = ConfigFile::parse("[topic_defaults]\n\"segment.bytes\" = 5").unwrap();
    let error = bad.apply(&mut BrokerConfig::default()).unwrap_err();
    assert!(error.contains("segment.bytes"), "{error}");
    let bad = ConfigFile::parse("default_partitions = 0").unwrap();
    assert!(bad.apply(&mut BrokerConfig::default()).is_err());
}

#[test]
fn limits_are_read_from_the_file_and_checked_against_each_other() {
    let file = ConfigFile::parse(
        r#"
        request_bytes_max = 2048
        request_memory_bytes_max = 8192
        in_flight_requests_max = 3
        socket_stall_timeout_ms = 500
        "#,
    )
    .unwrap();
    let mut config = BrokerConfig::default();
    file.apply(&mut config).unwrap();
    assert_eq!(config.request_memory_bytes_max, 8192);
    assert_eq!(config.in_flight_requests_max, 3);
    assert_eq!(config.socket_stall_timeout.as_millis(), 500);

    // Raising the frame limit past the default budget names both keys.
    let file = ConfigFile::parse("request_bytes_max = 536870912").unwrap();
    let error = file.apply(&mut BrokerConfig::default()).unwrap_err();
    assert!(error.contains("request_memory_bytes_max"), "{error}");
    for bad in [
        "request_bytes_max = 10",
        "in_flight_requests_max = 0",
        "connections_max = 0",
        "socket_stall_timeout_ms = 0",
        "request_memory_bytes_max = 1024",
    ] {
        let file = ConfigFile::parse(bad).unwrap();
        assert!(file.apply(&mut BrokerConfig::default()).is_err(), "{bad}");
    }
    BrokerConfig::default().check().unwrap();
}

#[test]
fn listeners_and_tls_are_read_from_the_file() {
    let file = ConfigFile::parse(
        r#"
        [[listeners]]
        name = "LOCAL"
        protocol = "PLAINTEXT"
        listen = "127.0.0.1:9092"

        [[listeners]]
        protocol = "SASL_SSL"
        listen = "0.0.0.0:9093"
        advertised = "broker.example.com:9093"

        [tls]
        cert = "/etc/strata/server.pem"
        key = "/etc/strata/server.key"
        client_ca = "/etc/strata/ca.pem"
        client_auth = "requested"
        "#,
    )
    .unwrap();
    let mut config = BrokerConfig::default();
    file.apply(&mut config).unwrap();
    let listeners = config.effective_listeners();
    assert_eq!(listeners.len(), 2);
    assert_eq!(listeners[0].name, "LOCAL");
    assert_eq!(listeners[1].name, "SASL_SSL");
    assert_eq!(
        listeners[1].advertised,
        Some(("broker.example.com".to_string(), 9093))
    );
    assert_eq!(config.tls.unwrap().client_auth, ClientAuth::Requested);
    let file = ConfigFile::parse("[sasl]\nlogin_timeout_ms = 5000").unwrap();
    let mut config = BrokerConfig::default();
    file.apply(&mut config).unwrap();
    assert_eq!(config.sasl.login_timeout.as_millis(), 5000);

    for bad in [
        "listen = \"127.0.0.1:1\"\n[[listeners]]\nprotocol = \"PLAINTEXT\"\nlisten = \"127.0.0.1:2\"",
        "[[listeners]]\nprotocol = \"TLS\"\nlisten = \"127.0.0.1:2\"",
        "[[listeners]]\nprotocol = \"SSL\"\nlisten = \"127.0.0.1:2\"",
        "[[listeners]]\nprotocol = \"PLAINTEXT\"\nlisten = \"0.0.0.0:2\"",
        "[tls]\ncert = \"c\"\nkey = \"k\"\nclient_auth = \"always\"",
        "[sasl]\nlogin_timeout_ms = 0",
    ] {
        let applied = ConfigFile::parse(bad).and_then(|f| f.apply(&mut BrokerConfig::default()));
        assert!(applied.is_err(), "{bad}");
    }
}
