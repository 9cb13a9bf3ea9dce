//! confluent-kafka's `SchemaRegistryClient` and its Avro, Protobuf and
//! JSON Schema serializers against `strata serve --schema-registry`
//! (`clients/drive_schema_registry.py`): what each call answers, the
//! numbered errors, values serialized and read back through the registry,
//! and schemas and ids kept across a clean restart and a SIGKILL.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::driver::{python_script, run_with_input};

const STRATA: &str = env!("CARGO_BIN_EXE_strata");
/// How long a started broker has to say where it serves.
const START_WAIT: Duration = Duration::from_secs(30);

/// `strata serve` with a schema registry, on free loopback ports.
struct Served {
    child: Child,
    url: String,
}

impl Served {
    fn start(data_dir: &Path) -> Self {
        Self::start_with(data_dir, &[])
    }

    /// Like `start`, with more `strata serve` arguments.
    fn start_with(data_dir: &Path, args: &[&std::ffi::OsStr]) -> Self {
        let mut child = Command::new(STRATA)
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--schema-registry",
                "127.0.0.1:0",
            ])
            .arg("--data-dir")
            .arg(data_dir)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("strata serve starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (found, urls) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Some(url) = line.strip_prefix("schema registry on ") {
                    let _ = found.send(url.trim().to_string());
                }
            }
        });
        let url = urls.recv_timeout(START_WAIT).unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("strata serve never said where it serves the schema registry")
        });
        Self { child, url }
    }

    /// Runs one op of the driver against this registry.
    fn run(&self, op: &str) -> Value {
        self.run_with(op, json!({}))
    }

    /// Runs one op with more request fields.
    fn run_with(&self, op: &str, mut request: Value) -> Value {
        request["op"] = op.into();
        request["url"] = self.url.clone().into();
        let mut command = python_script("drive_schema_registry.py");
        let output = run_with_input(&mut command, request.to_string().as_bytes());
        assert!(
            output.status.success(),
            "drive_schema_registry.py {op} failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).expect("the driver prints one JSON result")
    }

    /// SIGTERM, and a clean exit.
    fn stop(mut self) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "SIGTERM sent to {pid}");
        let status = self.child.wait().expect("wait on the broker");
        assert!(status.success(), "the broker stopped with {status}");
    }

    /// SIGKILL: nothing flushed at exit.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `{"status", "code"}` of a refusal the driver caught.
fn refusal(found: &Value) -> (u64, u64) {
    (
        found["status"].as_u64().unwrap(),
        found["code"].as_u64().unwrap(),
    )
}

#[test]
fn the_registry_client_registers_evolves_refuses_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path());
    let seen = served.run("clients");
    assert_eq!(seen["types"], json!(["JSON", "PROTOBUF", "AVRO"]));
    // The same schema: the same id, in the subject and under another.
    assert_eq!(seen["user_id"], 1);
    assert_eq!(seen["user_id_again"], 1);
    assert_eq!(seen["other_subject_id"], 1);
    assert_eq!(seen["by_id"]["type"], "AVRO");
    assert_eq!(seen["lookup_version"], 1);
    assert_eq!(
        seen["id_versions"],
        json!([["accounts-value", 1], ["users-value", 1]])
    );
    // BACKWARD: a field with a default is accepted, one without refused.
    assert_eq!(seen["compatible_v2"], true);
    assert_eq!(seen["compatible_bad"], false);
    assert_eq!(seen["evolved_id"], 2);
    assert_eq!(seen["versions"], json!([1, 2]));
    assert_eq!(seen["latest"], json!({"version": 2, "id": 2}));
    assert_eq!(seen["version_1_id"], 1);
    assert_eq!(refusal(&seen["incompatible"]), (409, 409));
    let message = seen["incompatible"]["message"].as_str().unwrap();
    assert!(
        message.contains("email"),
        "the refusal names the field: {message}"
    );
    assert_eq!(refusal(&seen["invalid"]), (422, 42201));
    assert_eq!(refusal(&seen["missing_subject"]), (404, 40401));
    assert_eq!(refusal(&seen["missing_id"]), (404, 40403));
    // Levels.
    assert_eq!(seen["global_level"], "BACKWARD");
    assert_eq!(refusal(&seen["unset_subject_level"]), (404, 40408));
    assert_eq!(seen["set_level"], json!({"compatibility": "NONE"}));
    assert_eq!(seen["subject_level"], "NONE");
    assert_eq!(seen["accepted_under_none"], 3);
    assert_eq!(refusal(&seen["bad_level"]), (422, 42203));
    // Protobuf and JSON Schema.
    assert_eq!(seen["proto_id"], 4);
    assert_eq!(refusal(&seen["proto_incompatible"]), (409, 409));
    assert_eq!(seen["json_id"], 5);
    assert_eq!(refusal(&seen["json_invalid"]), (422, 42201));
    let subjects = json!([
        "accounts-value",
        "orders-value",
        "payments-value",
        "users-value"
    ]);
    assert_eq!(seen["subjects"], subjects);
    // Deletes: soft first, then permanent.
    assert_eq!(refusal(&seen["hard_first"]), (404, 40405));
    assert_eq!(seen["soft_deleted"], json!([1]));
    assert_eq!(refusal(&seen["after_soft"]), (404, 40401));
    assert_eq!(seen["listed_after_soft"], false);
    assert_eq!(seen["listed_with_deleted"], true);
    assert_eq!(seen["hard_deleted"], json!([1]));
    assert_eq!(seen["listed_after_hard"], false);
    assert_eq!(seen["version_soft_deleted"], 3);
    assert_eq!(refusal(&seen["version_hard_first"]), (404, 40407));
    assert_eq!(seen["version_hard_deleted"], 3);
    assert_eq!(seen["versions_at_end"], json!([1, 2]));
    served.stop();
}

#[test]
fn avro_protobuf_and_json_values_round_trip_through_the_serializers() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path());
    let seen = served.run("serializers");
    assert_eq!(seen["avro"]["ids"], json!([1, 2]));
    let values = json!([{"name": "ada"}, {"name": "bob", "age": 36}]);
    assert_eq!(seen["avro"]["values"], values);
    assert_eq!(seen["avro"]["versions"], json!([1, 2]));
    assert_eq!(seen["protobuf"]["id"], 3);
    assert_eq!(seen["protobuf"]["type"], "PROTOBUF");
    assert_eq!(
        seen["protobuf"]["value"],
        json!({"id": "o-1", "cents": 1250})
    );
    assert_eq!(seen["protobuf_text_compatible"], true);
    assert_eq!(
        seen["json"],
        json!({"id": 4, "value": {"amount": 12.5, "currency": "EUR"}})
    );
    served.stop();
}

#[test]
fn schemas_levels_and_ids_survive_a_restart_and_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path());
    let populated = served.run("populate");
    assert_eq!(
        populated["ids"],
        json!({"users-value": 1, "orders-value": 2, "gone-value": 3})
    );
    served.stop();

    let served = Served::start(dir.path());
    let seen = served.run("verify");
    assert_eq!(seen["subjects"], json!(["orders-value", "users-value"]));
    assert_eq!(seen["users_versions"], json!([1, 2]));
    assert!(seen["users_v1"].as_str().unwrap().contains("\"User\""));
    assert_eq!(seen["orders_type"], "PROTOBUF");
    assert_eq!(seen["level"], "FULL_TRANSITIVE");
    assert_eq!(refusal(&seen["gone"]), (404, 40401));
    // Ids 1 to 4 were given (3 then deleted permanently): never again.
    assert_eq!(seen["new_id"], 5);
    served.kill();

    // Acknowledged means on disk: a SIGKILL loses nothing.
    let served = Served::start(dir.path());
    let again = served.run("verify");
    assert_eq!(
        again["subjects"],
        json!(["fresh-value", "orders-value", "users-value"])
    );
    assert_eq!(again["new_id"], 5);
    assert_eq!(again["level"], "FULL_TRANSITIVE");
    served.stop();
}

#[test]
fn a_registry_with_a_token_answers_only_clients_that_send_it() {
    let dir = tempfile::tempdir().unwrap();
    let token = "5f4e3d2c1b0a99887766554433221100";
    let token_file = dir.path().join("registry-token");
    std::fs::write(&token_file, token).unwrap();
    let config = dir.path().join("strata.toml");
    let setting = format!(
        "metrics_token_file = {:?}\n",
        token_file.display().to_string()
    );
    std::fs::write(&config, setting).unwrap();
    let data_dir = dir.path().join("data");
    let args = [std::ffi::OsStr::new("--config"), config.as_os_str()];
    let served = Served::start_with(&data_dir, &args);
    let seen = served.run_with("secured", json!({"token": token}));
    assert_eq!(seen["anonymous"]["status"], 401);
    assert_eq!(seen["signed_in_id"], 1);
    assert_eq!(seen["signed_in_subjects"], json!(["s-value"]));
    served.stop();
}

#[test]
fn a_registry_beyond_loopback_is_refused_without_tls_and_authentication() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(STRATA)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--schema-registry",
            "0.0.0.0:0",
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .expect("strata serve runs");
    assert!(!output.status.success(), "strata serve started anyway");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("schema registry") && said.contains("metrics_tls"),
        "{said}"
    );
}
