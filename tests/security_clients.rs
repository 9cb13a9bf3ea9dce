//! Real clients against `strata serve` over every security protocol:
//! confluent-kafka (librdkafka) and kcat connect over SSL, SASL_PLAINTEXT
//! and SASL_SSL with SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN, produce and
//! read back; a wrong password and an untrusted certificate are refused
//! with the clients' own errors for them. kafka-python, aiokafka and
//! kafkajs do the same over SSL, SASL_PLAINTEXT and SASL_SSL with
//! SCRAM-SHA-512.

mod support;

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use strata::sasl::Mechanism;
use support::secured_broker::SecuredBroker;

const COUNT: usize = 50;
const PASSWORD: &str = "correct horse battery staple";
const WRONG_PASSWORD: &str = "tr0ub4dor-and-3";

fn python() -> std::path::PathBuf {
    let venv = std::env::var_os("STRATA_COMPAT_VENV").map_or_else(
        || {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap())
                .join(".cache/strata/compat/venv")
        },
        std::path::PathBuf::from,
    );
    let python = venv.join("bin/python");
    assert!(
        python.exists(),
        "no Python venv at {} (set STRATA_COMPAT_VENV): run `make deps`",
        venv.display()
    );
    python
}

/// The npm project holding kafkajs, as tests/compat/driver.rs finds it.
fn node_modules() -> std::path::PathBuf {
    let node = std::env::var_os("STRATA_COMPAT_NODE").map_or_else(
        || {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap())
                .join(".cache/strata/compat/node")
        },
        std::path::PathBuf::from,
    );
    let modules = node.join("node_modules");
    assert!(
        modules.join("kafkajs").is_dir(),
        "no kafkajs under {} (set STRATA_COMPAT_NODE): run `make deps`",
        node.display()
    );
    modules
}

const CONFLUENT: &str = "confluent_roundtrip.py";
const KAFKA_PYTHON: &str = "kafka_python_roundtrip.py";
const AIOKAFKA: &str = "aiokafka_roundtrip.py";
const KAFKAJS: &str = "kafkajs_roundtrip.js";

/// The round trip of `tests/security/<script>` (Python from the venv,
/// JavaScript with node) under `config`: the script's JSON answer.
fn round_trip(script: &str, bootstrap: &str, config: Value, topic: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/security")
        .join(script);
    let mut command = if script.ends_with(".js") {
        let mut node = Command::new("node");
        node.env("NODE_PATH", node_modules());
        node
    } else {
        let mut python = Command::new(python());
        python.env("PYTHONDONTWRITEBYTECODE", "1");
        python
    };
    let mut child = command
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let request = json!({"bootstrap": bootstrap, "config": config, "topic": topic, "count": COUNT});
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap_or_else(|_| {
        panic!(
            "{script} said nothing readable:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn assert_round_trip(answer: &Value, what: &str) {
    assert_eq!(answer["produced"], COUNT, "{what}: {answer}");
    assert_eq!(answer["consumed"], COUNT, "{what}: {answer}");
}

fn tls(broker: &SecuredBroker) -> Value {
    json!({"ssl.ca.location": broker.ca.pem})
}

fn sasl(mechanism: Mechanism, user: &str, password: &str) -> Value {
    json!({"sasl.mechanism": mechanism.name(), "sasl.username": user, "sasl.password": password})
}

fn merged(parts: &[Value]) -> Value {
    let mut all = serde_json::Map::new();
    for part in parts {
        all.extend(part.as_object().unwrap().clone());
    }
    Value::Object(all)
}

#[test]
fn confluent_kafka_connects_over_ssl() {
    let broker = SecuredBroker::start("");
    let config = merged(&[json!({"security.protocol": "SSL"}), tls(&broker)]);
    assert_round_trip(
        &round_trip(CONFLUENT, broker.addr("SSL"), config, "over-ssl"),
        "SSL",
    );
}

#[test]
fn confluent_kafka_authenticates_with_every_mechanism_over_sasl_plaintext_and_sasl_ssl() {
    let broker = SecuredBroker::start("");
    for mechanism in [Mechanism::ScramSha512, Mechanism::ScramSha256] {
        broker.add_user("alice", PASSWORD, mechanism);
    }
    for (protocol, mechanism) in [
        ("SASL_PLAINTEXT", Mechanism::ScramSha512),
        ("SASL_SSL", Mechanism::ScramSha512),
        ("SASL_SSL", Mechanism::ScramSha256),
        ("SASL_SSL", Mechanism::Plain),
    ] {
        let mut parts = vec![
            json!({"security.protocol": protocol}),
            sasl(mechanism, "alice", PASSWORD),
        ];
        if protocol == "SASL_SSL" {
            parts.push(tls(&broker));
        }
        let topic = format!("{}-{}", protocol, mechanism.name()).to_lowercase();
        let answer = round_trip(CONFLUENT, broker.addr(protocol), merged(&parts), &topic);
        assert_round_trip(&answer, &format!("{protocol} {}", mechanism.name()));
    }
}

#[test]
fn a_wrong_password_an_unknown_user_and_an_untrusted_certificate_are_refused() {
    let broker = SecuredBroker::start("[sasl]\nfailed_login_delay_ms = 50\n");
    broker.add_user("alice", PASSWORD, Mechanism::ScramSha512);
    for (user, password) in [("alice", "wrong"), ("mallory", PASSWORD)] {
        let config = merged(&[
            json!({"security.protocol": "SASL_PLAINTEXT"}),
            sasl(Mechanism::ScramSha512, user, password),
        ]);
        let answer = round_trip(CONFLUENT, broker.addr("SASL_PLAINTEXT"), config, "refused");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("Authentication failed") || error.contains("SASL authentication error"),
            "{user}: {answer}"
        );
        assert!(
            !error.contains(password),
            "the error quotes the password: {error}"
        );
    }
    let untrusted = json!({"security.protocol": "SSL", "ssl.ca.location": broker.stranger.pem});
    let answer = round_trip(CONFLUENT, broker.addr("SSL"), untrusted, "refused");
    let error = answer["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("certificate verify failed") || error.contains("SSL handshake failed"),
        "{answer}"
    );
    assert!(
        !broker.log().contains(PASSWORD),
        "the broker logged a password"
    );
}

/// kcat: `-X` takes librdkafka's settings as they are.
fn kcat(args: &[&str], input: Option<&str>) -> std::process::Output {
    let mut child = Command::new("kcat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat is installed (`make deps`)");
    let mut stdin = child.stdin.take().unwrap();
    if let Some(input) = input {
        stdin.write_all(input.as_bytes()).unwrap();
    }
    drop(stdin);
    child.wait_with_output().unwrap()
}

#[test]
fn kcat_produces_and_consumes_over_ssl_and_sasl_ssl() {
    let broker = SecuredBroker::start("");
    broker.add_user("alice", PASSWORD, Mechanism::ScramSha512);
    let ca = format!("ssl.ca.location={}", broker.ca.pem.display());
    let user = "sasl.username=alice".to_string();
    let password = format!("sasl.password={PASSWORD}");
    let settings: [(&str, Vec<&str>); 2] = [
        ("SSL", vec!["-X", "security.protocol=SSL", "-X", &ca]),
        (
            "SASL_SSL",
            vec![
                "-X",
                "security.protocol=SASL_SSL",
                "-X",
                &ca,
                "-X",
                "sasl.mechanism=SCRAM-SHA-512",
                "-X",
                &user,
                "-X",
                &password,
            ],
        ),
    ];
    for (listener, security) in settings {
        let topic = format!("kcat-{}", listener.to_lowercase());
        let lines: Vec<String> = (0..COUNT).map(|i| format!("line-{i}")).collect();
        let mut produce = vec!["-b", broker.addr(listener), "-t", &topic, "-P"];
        produce.extend(&security);
        let produced = kcat(&produce, Some(&(lines.join("\n") + "\n")));
        assert!(
            produced.status.success(),
            "{listener}: {}",
            String::from_utf8_lossy(&produced.stderr)
        );
        let mut consume = vec![
            "-b",
            broker.addr(listener),
            "-t",
            &topic,
            "-C",
            "-e",
            "-o",
            "beginning",
        ];
        consume.extend(&security);
        let consumed = kcat(&consume, None);
        let text = String::from_utf8_lossy(&consumed.stdout);
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            lines,
            "{listener}: {}",
            String::from_utf8_lossy(&consumed.stderr)
        );
    }
}

/// `script` produces and reads back over SSL, then over SASL_PLAINTEXT and
/// SASL_SSL as a SCRAM-SHA-512 user.
fn round_trips_over_ssl_sasl_plaintext_and_sasl_ssl(script: &str) {
    let broker = SecuredBroker::start("");
    broker.add_user("alice", PASSWORD, Mechanism::ScramSha512);
    for protocol in ["SSL", "SASL_PLAINTEXT", "SASL_SSL"] {
        let mut parts = vec![json!({"security.protocol": protocol})];
        if protocol.starts_with("SASL") {
            parts.push(sasl(Mechanism::ScramSha512, "alice", PASSWORD));
        }
        if protocol.ends_with("SSL") {
            parts.push(tls(&broker));
        }
        let topic = format!("{script}-{protocol}")
            .to_lowercase()
            .replace(['.', '_'], "-");
        let answer = round_trip(script, broker.addr(protocol), merged(&parts), &topic);
        assert_round_trip(&answer, &format!("{script} over {protocol}"));
    }
}

/// `script` is refused with a wrong SCRAM-SHA-512 password (its error
/// names authentication and does not quote the password) and when it
/// trusts another CA than the broker's (its error contains one of
/// `tls_errors`).
fn refused_for_a_wrong_password_and_an_untrusted_certificate(script: &str, tls_errors: &[&str]) {
    let broker = SecuredBroker::start("[sasl]\nfailed_login_delay_ms = 50\n");
    broker.add_user("alice", PASSWORD, Mechanism::ScramSha512);
    let config = merged(&[
        json!({"security.protocol": "SASL_PLAINTEXT"}),
        sasl(Mechanism::ScramSha512, "alice", WRONG_PASSWORD),
    ]);
    let answer = round_trip(script, broker.addr("SASL_PLAINTEXT"), config, "refused");
    let error = answer["error"].as_str().unwrap_or_default();
    assert!(
        error.to_lowercase().contains("authentication"),
        "{script} with a wrong password: {answer}"
    );
    assert!(
        !error.contains(WRONG_PASSWORD),
        "the error quotes the password: {error}"
    );
    let untrusted = json!({"security.protocol": "SSL", "ssl.ca.location": broker.stranger.pem});
    let answer = round_trip(script, broker.addr("SSL"), untrusted, "refused");
    let error = answer["error"].as_str().unwrap_or_default();
    assert!(
        tls_errors.iter().any(|e| error.contains(e)),
        "{script} trusting another CA: {answer}"
    );
}

#[test]
fn kafka_python_connects_over_ssl_sasl_plaintext_and_sasl_ssl() {
    round_trips_over_ssl_sasl_plaintext_and_sasl_ssl(KAFKA_PYTHON);
}

#[test]
fn kafka_python_is_refused_for_a_wrong_password_and_an_untrusted_certificate() {
    refused_for_a_wrong_password_and_an_untrusted_certificate(
        KAFKA_PYTHON,
        &["certificate verify failed"],
    );
}

#[test]
fn aiokafka_connects_over_ssl_sasl_plaintext_and_sasl_ssl() {
    round_trips_over_ssl_sasl_plaintext_and_sasl_ssl(AIOKAFKA);
}

#[test]
fn aiokafka_is_refused_for_a_wrong_password_and_an_untrusted_certificate() {
    refused_for_a_wrong_password_and_an_untrusted_certificate(
        AIOKAFKA,
        &["certificate verify failed"],
    );
}

#[test]
fn kafkajs_connects_over_ssl_sasl_plaintext_and_sasl_ssl() {
    round_trips_over_ssl_sasl_plaintext_and_sasl_ssl(KAFKAJS);
}

#[test]
fn kafkajs_is_refused_for_a_wrong_password_and_an_untrusted_certificate() {
    refused_for_a_wrong_password_and_an_untrusted_certificate(
        KAFKAJS,
        &[
            "self-signed certificate",
            "unable to get local issuer certificate",
            "unable to verify",
        ],
    );
}

/// `strata acls add` through the broker's PLAINTEXT listener.
fn acl(broker: &SecuredBroker, args: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["acls", "add", "--bootstrap", broker.addr("PLAINTEXT")])
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn on_a_sasl_listener_only_what_an_acl_allows_the_authenticated_user_is_done() {
    let broker = SecuredBroker::start_locked("");
    broker.add_user("alice", PASSWORD, Mechanism::ScramSha512);
    for (operation, resource) in [
        ("all", "--topic"),
        ("read", "--group"),
        ("create", "--topic"),
    ] {
        let name = if resource == "--group" {
            "security-check"
        } else {
            "granted"
        };
        acl(
            &broker,
            &[
                "--allow-principal",
                "User:alice",
                "--operation",
                operation,
                resource,
                name,
            ],
        );
    }
    let config = merged(&[
        json!({"security.protocol": "SASL_PLAINTEXT"}),
        sasl(Mechanism::ScramSha512, "alice", PASSWORD),
    ]);
    let granted = round_trip(
        CONFLUENT,
        broker.addr("SASL_PLAINTEXT"),
        config.clone(),
        "granted",
    );
    assert_round_trip(&granted, "alice on her topic");
    let denied = round_trip(CONFLUENT, broker.addr("SASL_PLAINTEXT"), config, "not-hers");
    let error = denied["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("Authorization") || error.contains("authorization"),
        "{denied}"
    );
}

#[test]
fn a_client_certificate_is_the_principal_acls_name() {
    let broker = SecuredBroker::start_locked("");
    let app = broker.client_cert(
        "app",
        &[
            (rcgen::DnType::OrganizationName, "Example"),
            (rcgen::DnType::CommonName, "app"),
        ],
    );
    // The SSL listener only requests certificates, so it allows what no
    // ACL denies: a DENY for the certificate's subject tells the two apart.
    acl(
        &broker,
        &[
            "--deny-principal",
            "User:CN=app,O=Example",
            "--operation",
            "write",
            "--topic",
            "fenced",
        ],
    );
    let anonymous = merged(&[json!({"security.protocol": "SSL"}), tls(&broker)]);
    let with_cert = merged(&[
        anonymous.clone(),
        json!({"ssl.certificate.location": app.cert, "ssl.key.location": app.key}),
    ]);
    assert_round_trip(
        &round_trip(CONFLUENT, broker.addr("SSL"), anonymous, "fenced"),
        "without a certificate",
    );
    let denied = round_trip(CONFLUENT, broker.addr("SSL"), with_cert.clone(), "fenced");
    let error = denied["error"].as_str().unwrap_or_default();
    assert!(error.contains("uthorization"), "{denied}");
    assert_round_trip(
        &round_trip(CONFLUENT, broker.addr("SSL"), with_cert, "open-to-app"),
        "with the certificate, another topic",
    );
}
