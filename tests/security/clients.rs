//! Real clients against `strata serve` over every security protocol:
//! confluent-kafka (librdkafka) and kcat connect over SSL, SASL_PLAINTEXT
//! and SASL_SSL with SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN, produce and
//! read back; a wrong password and an untrusted certificate are refused
//! with the clients' own errors for them. kafka-python, aiokafka and
//! kafkajs do the same over SSL, SASL_PLAINTEXT and SASL_SSL with
//! SCRAM-SHA-512.
//!
//! ACLs: confluent-kafka is refused a topic no ACL allows it and takes a
//! client certificate's subject as its principal; kafka-python, aiokafka,
//! kafkajs and kcat, as a SCRAM user over SASL_SSL, are refused a produce
//! without WRITE and a consume without READ on the group or the topic with
//! their own names for Kafka's errors, write nothing while refused, and
//! succeed once the ACLs allow them.

use crate::support;

use std::process::Command;

use serde_json::{Value, json};
use strata::sasl::Mechanism;
use support::process::{TIMED_OUT, run_with_input};
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
    let request = json!({"bootstrap": bootstrap, "config": config, "topic": topic, "count": COUNT});
    run_script(script, &request)
}

/// Runs `tests/security/<script>` on `request`: its JSON answer.
fn run_script(script: &str, request: &Value) -> Value {
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
    let output = run_with_input(command.arg(&path), request.to_string().as_bytes());
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

/// Seconds kcat may run before it is stopped: a client a broker refuses
/// may retry, and must not hang the test.
const KCAT_WAIT_S: &str = "60";

/// kcat: `-X` takes librdkafka's settings as they are.
fn kcat(args: &[&str], input: Option<&str>) -> std::process::Output {
    let mut kcat = Command::new("timeout");
    kcat.args(["--kill-after=5", KCAT_WAIT_S, "kcat"])
        .args(args);
    run_with_input(&mut kcat, input.unwrap_or_default().as_bytes())
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

/// The topic the ACL tests guard, the group its readers join, and how many
/// records an administrator put there before alice tries.
const GUARDED: &str = "guarded";
const READERS: &str = "readers";
const ALREADY_THERE: usize = 3;

/// One half of a round trip as alice over SASL_SSL (SCRAM-SHA-512):
/// produce COUNT records to GUARDED, or read up to ALREADY_THERE of its
/// records as a member of READERS.
#[derive(Debug, Clone, Copy)]
enum Half {
    Produce,
    Consume,
}

/// What a client did: the records it produced or consumed, or its own
/// name for the error that stopped it; `said` is everything it answered.
struct Outcome {
    records: usize,
    refusal: Option<String>,
    said: String,
}

/// A client's own names for Kafka's TOPIC_AUTHORIZATION_FAILED and
/// GROUP_AUTHORIZATION_FAILED.
struct Refusals {
    topic: &'static str,
    group: &'static str,
}

fn alice_over_sasl_ssl(broker: &SecuredBroker) -> Value {
    merged(&[
        json!({"security.protocol": "SASL_SSL"}),
        sasl(Mechanism::ScramSha512, "alice", PASSWORD),
        tls(broker),
    ])
}

/// `half` through `tests/security/<script>` in its "produce" or "consume"
/// mode.
fn script_half(script: &str, broker: &SecuredBroker, half: Half) -> Outcome {
    let (mode, count, done) = match half {
        Half::Produce => ("produce", COUNT, "produced"),
        Half::Consume => ("consume", ALREADY_THERE, "consumed"),
    };
    let request = json!({
        "bootstrap": broker.addr("SASL_SSL"),
        "config": alice_over_sasl_ssl(broker),
        "topic": GUARDED,
        "count": count,
        "mode": mode,
        "group": READERS,
    });
    let answer = run_script(script, &request);
    Outcome {
        records: answer[done].as_u64().unwrap_or(0) as usize,
        refusal: answer["error_name"].as_str().map(str::to_string),
        said: answer.to_string(),
    }
}

/// `half` with kcat: `-P` from stdin, or `-G READERS -e` (a group member
/// that stops at the end). Its refusal is librdkafka's text for the
/// broker's error code ("Topic authorization failed").
fn kcat_half(broker: &SecuredBroker, half: Half) -> Outcome {
    let ca = format!("ssl.ca.location={}", broker.ca.pem.display());
    let password = format!("sasl.password={PASSWORD}");
    let mut args = vec![
        "-b",
        broker.addr("SASL_SSL"),
        "-X",
        "security.protocol=SASL_SSL",
        "-X",
        &ca,
        "-X",
        "sasl.mechanism=SCRAM-SHA-512",
        "-X",
        "sasl.username=alice",
        "-X",
        &password,
    ];
    let lines: String = (0..COUNT).map(|i| format!("line-{i}\n")).collect();
    let output = match half {
        Half::Produce => {
            args.extend(["-t", GUARDED, "-P"]);
            kcat(&args, Some(&lines))
        }
        Half::Consume => {
            // kcat stopped by an error leaves no LeaveGroup behind: the
            // next member waits out its session, the shortest the broker
            // allows.
            args.extend(["-X", "session.timeout.ms=6000"]);
            args.extend(["-G", READERS, "-o", "beginning", "-e", GUARDED]);
            kcat(&args, None)
        }
    };
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let refusal = stderr
        .split("Broker: ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .map(|text| text.trim().to_string())
        .filter(|_| !output.status.success() && output.status.code() != Some(TIMED_OUT));
    let records = match half {
        Half::Produce if output.status.success() => COUNT,
        Half::Produce => 0,
        Half::Consume => String::from_utf8_lossy(&output.stdout).lines().count(),
    };
    Outcome {
        records,
        refusal,
        said: format!("exit {}: {stderr}", output.status),
    }
}

/// `strata ARGS` through the PLAINTEXT listener, as an administrator.
fn administer(broker: &SecuredBroker, args: &[&str], input: &str) -> String {
    let mut strata = Command::new(env!("CARGO_BIN_EXE_strata"));
    strata
        .args(args)
        .args(["--bootstrap", broker.addr("PLAINTEXT")]);
    let output = run_with_input(&mut strata, input.as_bytes());
    assert!(
        output.status.success(),
        "strata {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The records `topic` holds, as an administrator reads them.
fn records_in(broker: &SecuredBroker, topic: &str) -> usize {
    administer(broker, &["consume", topic, "--end"], "")
        .lines()
        .count()
}

/// Allows alice `operation` on `resources` (`--topic T`, `--group G`).
fn allow(broker: &SecuredBroker, operation: &str, resources: &[&str]) {
    let principal = ["--allow-principal", "User:alice", "--operation", operation];
    acl(broker, &[&principal[..], resources].concat());
}

/// `client`, as alice over SASL_SSL, is refused with its own name for
/// TOPIC_AUTHORIZATION_FAILED or GROUP_AUTHORIZATION_FAILED while the ACLs
/// deny what it does, writes nothing while refused, and succeeds once they
/// allow it (so it is not refused for being broken).
fn refused_what_acls_deny_until_they_allow_it(
    client: impl Fn(&SecuredBroker, Half) -> Outcome,
    refusals: Refusals,
) {
    let broker = SecuredBroker::start_locked("");
    broker.add_user("alice", PASSWORD, Mechanism::ScramSha512);
    administer(&broker, &["topics", "create", GUARDED], "");
    administer(&broker, &["produce", GUARDED], "one\ntwo\nthree\n");
    // A topic of her own: an idempotent producer (kafka-python's default)
    // gets its producer id with WRITE on some topic.
    allow(&broker, "write", &["--topic", "alices-own"]);
    let refused = |half: Half, name: &str, what: &str| {
        let outcome = client(&broker, half);
        assert_eq!(
            outcome.refusal.as_deref(),
            Some(name),
            "{what}: {}",
            outcome.said
        );
        assert_eq!(outcome.records, 0, "{what}: {}", outcome.said);
    };

    refused(
        Half::Produce,
        refusals.topic,
        "produce, no ACL on the topic",
    );
    // DESCRIBE on both: the produce request itself is refused, and so is
    // the group's join.
    allow(
        &broker,
        "describe",
        &["--topic", GUARDED, "--group", READERS],
    );
    refused(Half::Produce, refusals.topic, "produce without WRITE");
    refused(
        Half::Consume,
        refusals.group,
        "consume without READ on the group",
    );
    allow(&broker, "read", &["--group", READERS]);
    refused(
        Half::Consume,
        refusals.topic,
        "consume without READ on the topic",
    );
    assert_eq!(
        records_in(&broker, GUARDED),
        ALREADY_THERE,
        "a refused produce wrote nothing"
    );

    allow(&broker, "read", &["--topic", GUARDED]);
    let consumed = client(&broker, Half::Consume);
    assert_eq!(
        consumed.refusal, None,
        "consume with READ: {}",
        consumed.said
    );
    assert_eq!(consumed.records, ALREADY_THERE, "{}", consumed.said);
    allow(&broker, "write", &["--topic", GUARDED]);
    let produced = client(&broker, Half::Produce);
    assert_eq!(
        produced.refusal, None,
        "produce with WRITE: {}",
        produced.said
    );
    assert_eq!(produced.records, COUNT, "{}", produced.said);
    assert_eq!(records_in(&broker, GUARDED), ALREADY_THERE + COUNT);
}

#[test]
fn kafka_python_is_refused_what_acls_deny_until_they_allow_it() {
    refused_what_acls_deny_until_they_allow_it(
        |broker, half| script_half(KAFKA_PYTHON, broker, half),
        Refusals {
            topic: "TopicAuthorizationFailedError",
            group: "GroupAuthorizationFailedError",
        },
    );
}

#[test]
fn aiokafka_is_refused_what_acls_deny_until_they_allow_it() {
    refused_what_acls_deny_until_they_allow_it(
        |broker, half| script_half(AIOKAFKA, broker, half),
        Refusals {
            topic: "TopicAuthorizationFailedError",
            group: "GroupAuthorizationFailedError",
        },
    );
}

#[test]
fn kafkajs_is_refused_what_acls_deny_until_they_allow_it() {
    refused_what_acls_deny_until_they_allow_it(
        |broker, half| script_half(KAFKAJS, broker, half),
        Refusals {
            topic: "TOPIC_AUTHORIZATION_FAILED",
            group: "GROUP_AUTHORIZATION_FAILED",
        },
    );
}

#[test]
fn kcat_is_refused_what_acls_deny_until_they_allow_it() {
    refused_what_acls_deny_until_they_allow_it(
        kcat_half,
        Refusals {
            topic: "Topic authorization failed",
            group: "Group authorization failed",
        },
    );
}
