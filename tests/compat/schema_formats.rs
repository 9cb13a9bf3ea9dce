//! The registry codecs between Confluent's own serializers: orders written
//! by confluent-kafka's Avro (two versions of the schema), Protobuf and
//! JSON Schema serializers through `strata serve --schema-registry`, read
//! by the `schema_orders` example app (remote, exactly-once), whose totals,
//! written with its own schemas, the Python deserializers read back
//! (`clients/drive_schema_formats.py`); and `strata consume --format avro`
//! prints them decoded.

use std::ffi::OsStr;
use std::process::Command;

use serde_json::{Value, json};

use crate::driver::{field, python_script, run_with_input};
use crate::support::ServerProcess;
use crate::support::certs::Authority;
use crate::support::example::example;

const STRATA: &str = env!("CARGO_BIN_EXE_strata");
const ORDERS: u64 = 300;
const PARTITIONS: i32 = 2;
const FORMATS: [&str; 3] = ["avro", "protobuf", "json"];

/// Runs one op of the driver.
fn drive(op: &str, broker: &ServerProcess, mut request: Value) -> Value {
    drive_signed_in(op, broker, None, request.take())
}

/// How a driver reaches a secured registry: credentials and a CA file.
type SignIn<'a> = Option<(&'a str, &'a std::path::Path)>;

/// Runs one op of the driver, signed in to the registry with `sign_in`.
fn drive_signed_in(op: &str, broker: &ServerProcess, sign_in: SignIn, mut request: Value) -> Value {
    if let Some((auth, ca)) = sign_in {
        request["auth"] = auth.into();
        request["ca"] = ca.display().to_string().into();
    }
    request["op"] = op.into();
    request["bootstrap"] = broker.addr.clone().into();
    request["url"] = broker.schema_registry_url().into();
    let mut command = python_script("drive_schema_formats.py");
    let output = run_with_input(&mut command, request.to_string().as_bytes());
    assert!(
        output.status.success(),
        "drive_schema_formats.py {op} failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the driver prints JSON")
}

fn strata(args: &[&str]) -> String {
    let output = Command::new(STRATA)
        .args(args)
        .output()
        .expect("strata runs");
    assert!(
        output.status.success(),
        "strata {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn an_app_reads_what_confluents_serializers_wrote_and_its_deserializers_read_what_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let broker = ServerProcess::start_with(
        STRATA,
        &data,
        &[OsStr::new("--schema-registry"), OsStr::new("127.0.0.1:0")],
        std::process::Stdio::null(),
    );
    let bootstrap = broker.addr.clone();
    for format in FORMATS {
        let topic = format!("orders-{format}");
        let partitions = PARTITIONS.to_string();
        strata(&[
            "topics",
            "create",
            &topic,
            "--partitions",
            &partitions,
            "--bootstrap",
            &bootstrap,
        ]);
    }
    let produced = drive("produce", &broker, json!({"orders": ORDERS}));
    // Half the Avro orders went with the schema's first version, half with
    // its second, which adds a field with a default: accepted as BACKWARD.
    assert_eq!(field::<Vec<i64>>(&produced, "avro_versions"), [1, 2]);
    let expected: Value = produced["expected"].clone();

    let state = dir.path().join("app");
    let app = Command::new(example("schema_orders"))
        .args(["--bootstrap", &bootstrap, "--state-dir"])
        .arg(&state)
        .args(["--schema-registry", broker.schema_registry_url()])
        .args(["run", "--until-end"])
        .output()
        .expect("the app runs");
    assert!(
        app.status.success(),
        "schema_orders run --until-end: {}",
        String::from_utf8_lossy(&app.stderr)
    );

    let totals = drive("read_totals", &broker, json!({}));
    for format in FORMATS {
        let read = &totals[format];
        let customers = expected.as_object().unwrap();
        assert_eq!(
            read.as_object().unwrap().len(),
            customers.len(),
            "{format}: {read}"
        );
        for (customer, want) in customers {
            let got = &read[customer];
            assert_eq!(got[0], want[0], "{format}: {customer}'s orders");
            let (got, want) = (got[1].as_f64().unwrap(), want[1].as_f64().unwrap());
            assert!(
                (got - want).abs() < 1e-6,
                "{format}: {customer}'s total {got}, not {want}"
            );
        }
    }

    // The command line reads them too, with the schema each id names.
    let url = broker.schema_registry_url();
    let consume = |topic: &str, more: &[&str]| {
        let args = [
            "consume",
            topic,
            "--end",
            "--bootstrap",
            &bootstrap,
            "--schema-registry",
            url,
        ];
        strata(&[&args[..], more].concat())
    };
    let printed = consume("customer-totals-avro", &["--format", "avro"]);
    let lines: Vec<Value> = printed
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines.len() as u64,
        ORDERS,
        "one total per order:\n{printed}"
    );
    assert!(
        lines.iter().all(|l| l["value"]["customer"] == l["key"]),
        "{printed}"
    );
    let printed = consume("orders-protobuf", &["--format", "avro", "--count", "1"]);
    assert!(printed.contains("the value is PROTOBUF"), "{printed}");
}

/// A registry over TLS that asks for credentials: without them the
/// registry's refusal (401) stops the app, saying so; with those of its
/// file, and the CA its certificate chains to, the app signs in and then
/// counts every order once.
#[test]
fn an_app_signs_in_to_a_secured_registry_and_stops_when_refused() {
    let dir = tempfile::tempdir().unwrap();
    let token = "0a1b2c3d4e5f60718293a4b5c6d7e8f9";
    let token_file = dir.path().join("registry-token");
    std::fs::write(&token_file, token).unwrap();
    let ca = Authority::new(dir.path(), "ca");
    let server = ca.server(dir.path(), "registry");
    let config = dir.path().join("strata.toml");
    let settings = format!(
        "metrics_tls = true\nmetrics_token_file = {:?}\n",
        token_file.display().to_string()
    );
    std::fs::write(&config, settings).unwrap();
    let broker = ServerProcess::start_with(
        STRATA,
        &dir.path().join("data"),
        &[
            OsStr::new("--config"),
            config.as_os_str(),
            OsStr::new("--tls-cert"),
            server.cert.as_os_str(),
            OsStr::new("--tls-key"),
            server.key.as_os_str(),
            OsStr::new("--schema-registry"),
            OsStr::new("127.0.0.1:0"),
        ],
        std::process::Stdio::null(),
    );
    let url = broker.schema_registry_url();
    assert!(url.starts_with("https://"), "{url}");
    let bootstrap = broker.addr.clone();
    let auth = format!("strata:{token}");
    let sign_in = Some((auth.as_str(), ca.pem.as_path()));
    let produced = drive_signed_in("produce", &broker, sign_in, json!({"orders": 20}));
    let expected = produced["expected"].as_object().unwrap().clone();

    let state = dir.path().join("app");
    let run = |auth_file: Option<&std::path::Path>| {
        let mut app = Command::new(example("schema_orders"));
        app.args(["--bootstrap", &bootstrap, "--state-dir"])
            .arg(&state)
            .args(["--schema-registry", broker.schema_registry_url()])
            .arg("--schema-registry-ca")
            .arg(&ca.pem)
            .env_remove("STRATA_SCHEMA_REGISTRY_AUTH");
        if let Some(file) = auth_file {
            app.arg("--schema-registry-auth-file").arg(file);
        }
        app.args(["run", "--until-end"])
            .output()
            .expect("the app runs")
    };
    let refused = run(None);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "ran without credentials: {said}");
    assert!(said.contains("schema registry refused (401)"), "{said}");

    let auth_file = dir.path().join("registry-auth");
    std::fs::write(&auth_file, format!("{auth}\n")).unwrap();
    let signed_in = run(Some(&auth_file));
    assert!(
        signed_in.status.success(),
        "with credentials: {}",
        String::from_utf8_lossy(&signed_in.stderr)
    );
    let totals = drive_signed_in("read_totals", &broker, sign_in, json!({}));
    for format in FORMATS {
        let read = totals[format].as_object().unwrap();
        assert_eq!(read.len(), expected.len(), "{format}: {read:?}");
        for (customer, want) in &expected {
            assert_eq!(
                read[customer][0], want[0],
                "{format}: {customer}'s orders, once each"
            );
        }
    }
}
