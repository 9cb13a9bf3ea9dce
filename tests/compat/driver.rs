//! The clients under test and how the harness talks to them.
//!
//! The Python and Node clients run a driver script from `clients/`: one
//! process per operation, one JSON request on stdin (`op`, `bootstrap`, and
//! the op's fields), one JSON result on stdout. Bytes travel as hex, `null`
//! for absent. kcat is driven from Rust (`driver/kcat.rs`) with the same requests.
//!
//! | op | request fields | result |
//! |---|---|---|
//! | `create_topics` | `topics: [{name, partitions, configs: {k: v}}]` | `errors: {name: null or KAFKA_ERROR_NAME}` |
//! | `list_topics` | | `topics: {name: partition count}` |
//! | `produce` | `topic, acks ("0", "1", "all"), compression, idempotence, records: [RecordSpec]` | `offsets: [offset or null (acks 0)]` |
//! | `consume` | `topic, partitions, offset ("beginning" or n), count` | `records: [Consumed]` by partition, offset |
//! | `offsets_for_times` | `topic, partition, timestamps` | `offsets: [offset or null]` |
//! | `seek` | `topic, partition, append: RecordSpec` | `low, high, last, after_beginning, after_end` |
//! | `out_of_range` | `topic, partition, offset, reset ("earliest", "latest", "none"), count` | `records`, `position` or `error` |
//! | `group` | `topic, group, ends: [end offset per partition]` | `members: [{assigned, records}]` |
//! | `committed` | `topic, group, partitions` | `offsets: {partition: offset or -1}` |
//!
//! A missing client fails the test with a message to run `make deps`.

mod kcat;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How long one driver process may run; drivers give up on their own waits
/// after 60 s, so this only catches a hung process.
const DRIVER_TIMEOUT: Duration = Duration::from_secs(180);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    ConfluentKafka,
    KafkaPython,
    Aiokafka,
    Kafkajs,
    Kcat,
}

/// What a client can send, so generated records stay within it.
#[derive(Debug, Clone, Copy)]
pub struct Capabilities {
    /// Keys and values may hold any byte (kcat reads delimited text).
    pub binary: bool,
    /// Null keys and values (kcat always sends both).
    pub nulls: bool,
    /// A record whose key and value are both null (kafka-python and aiokafka
    /// refuse one).
    pub null_key_and_value: bool,
    /// Each record its own headers (kcat sets one list per run) and header
    /// values that are null.
    pub per_record_headers: bool,
    pub null_header_values: bool,
    /// Header values may hold any byte (kcat writes headers as text).
    pub binary_header_values: bool,
    /// The producer sets each record's timestamp (kcat cannot).
    pub timestamps: bool,
    pub codecs: &'static [&'static str],
}

impl Capabilities {
    /// What this producer can send that `consumer` can also show: kcat
    /// prints headers as `name=value` text, so it cannot show a null or
    /// binary header value.
    pub fn readable_by(self, consumer: Client) -> Self {
        if consumer != Client::Kcat {
            return self;
        }
        Self {
            null_header_values: false,
            binary_header_values: false,
            ..self
        }
    }
}

pub const ALL_CODECS: [&str; 4] = ["gzip", "snappy", "lz4", "zstd"];

impl Client {
    pub fn name(self) -> &'static str {
        match self {
            Client::ConfluentKafka => "confluent-kafka",
            Client::KafkaPython => "kafka-python",
            Client::Aiokafka => "aiokafka",
            Client::Kafkajs => "kafkajs",
            Client::Kcat => "kcat",
        }
    }

    pub fn capabilities(self) -> Capabilities {
        let full = Capabilities {
            binary: true,
            nulls: true,
            null_key_and_value: true,
            per_record_headers: true,
            null_header_values: true,
            binary_header_values: true,
            timestamps: true,
            codecs: &ALL_CODECS,
        };
        match self {
            Client::ConfluentKafka => full,
            // aiokafka's send() wants a key or a value.
            Client::Aiokafka => Capabilities {
                null_key_and_value: false,
                ..full
            },
            // kafka-python's send() takes header values as bytes only, and
            // a key or a value.
            Client::KafkaPython => Capabilities {
                null_header_values: false,
                null_key_and_value: false,
                ..full
            },
            // kafkajs: gzip built in, snappy through kafkajs-snappy; its lz4
            // and zstd codec packages need native builds. Its producer
            // cannot send a null header value (sizing one throws).
            Client::Kafkajs => Capabilities {
                null_header_values: false,
                codecs: &["gzip", "snappy"],
                ..full
            },
            Client::Kcat => Capabilities {
                binary: false,
                nulls: false,
                null_key_and_value: false,
                per_record_headers: false,
                null_header_values: false,
                binary_header_values: false,
                timestamps: false,
                codecs: &ALL_CODECS,
            },
        }
    }

    /// Runs one op; panics with the client's stderr if it fails.
    pub fn run(self, op: &str, bootstrap: &str, mut request: Value) -> Value {
        request["op"] = op.into();
        request["bootstrap"] = bootstrap.into();
        if self == Client::Kcat {
            return kcat::run(op, &request);
        }
        let (program, script) = self.command();
        let mut command = Command::new(&program);
        command
            .arg(clients_dir().join(script))
            .env("PYTHONDONTWRITEBYTECODE", "1");
        if self == Client::Kafkajs {
            command.env("NODE_PATH", node_dir().join("node_modules"));
        }
        let output = run_with_input(&mut command, &serde_json::to_vec(&request).unwrap());
        assert!(
            output.status.success(),
            "{} {op} failed ({}):\n{}\nrequest: {}",
            self.name(),
            output.status,
            String::from_utf8_lossy(&output.stderr),
            abbreviated(&request),
        );
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "{} {op} printed no JSON result ({e}): {}",
                self.name(),
                String::from_utf8_lossy(&output.stdout)
            )
        })
    }

    /// The interpreter and script; panics if the client is not installed.
    fn command(self) -> (PathBuf, &'static str) {
        let (program, script, installed) = match self {
            Client::Kafkajs => {
                let modules = node_dir().join("node_modules");
                let installed = modules.join("kafkajs").is_dir();
                (PathBuf::from("node"), "drive_kafkajs.js", installed)
            }
            python => {
                let program = venv_dir().join("bin/python");
                let script = match python {
                    Client::ConfluentKafka => "drive_confluent.py",
                    Client::KafkaPython => "drive_kafka_python.py",
                    _ => "drive_aiokafka.py",
                };
                let installed = program.exists();
                (program, script, installed)
            }
        };
        assert!(
            installed,
            "{} is not installed (looked in {} and {}): run `make deps`",
            self.name(),
            venv_dir().display(),
            node_dir().display()
        );
        (program, script)
    }
}

/// A command running one of the Python scripts in `clients/` with the
/// compatibility venv's interpreter (for scripts the harness runs as a
/// long-lived process rather than one op).
pub fn python_script(script: &str) -> Command {
    let (program, _) = Client::ConfluentKafka.command();
    let mut command = Command::new(program);
    command
        .arg(clients_dir().join(script))
        .env("PYTHONDONTWRITEBYTECODE", "1");
    command
}

/// A command running `clients/<script>` with Quix Streams' venv, which
/// scripts/install-clients.sh builds apart (it pins an older
/// confluent-kafka).
pub fn quix_script(script: &str) -> Command {
    let venv = std::env::var_os("STRATA_COMPAT_QUIX_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("compat/quix-venv"));
    let program = venv.join("bin/python");
    assert!(
        program.exists(),
        "Quix Streams is not installed (looked in {}): run `make deps`",
        venv.display()
    );
    let mut command = Command::new(program);
    command
        .arg(clients_dir().join(script))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        // Its dependencies' deprecation notices would bury a failure.
        .env("PYTHONWARNINGS", "ignore");
    command
}

fn cache_dir() -> PathBuf {
    match std::env::var_os("STRATA_CACHE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/strata"),
    }
}

/// The Python venv: `STRATA_COMPAT_VENV`, as the Makefile sets it, or the
/// same default as scripts/install-clients.sh.
fn venv_dir() -> PathBuf {
    std::env::var_os("STRATA_COMPAT_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("compat/venv"))
}

/// The npm project holding kafkajs: `STRATA_COMPAT_NODE` or the default.
fn node_dir() -> PathBuf {
    std::env::var_os("STRATA_COMPAT_NODE")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("compat/node"))
}

fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/compat/clients")
}

/// Runs `command` with `input` on stdin, its output collected, killing it
/// after `DRIVER_TIMEOUT`.
pub fn run_with_input(command: &mut Command, input: &[u8]) -> std::process::Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {command:?} ({e}): run `make deps`"));
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let err = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    let deadline = Instant::now() + DRIVER_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait on the client") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{command:?} ran longer than {DRIVER_TIMEOUT:?}; stderr so far:\n{}",
                String::from_utf8_lossy(&err.join().unwrap())
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    writer.join().unwrap();
    std::process::Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// A request with its record list shortened, for failure messages.
fn abbreviated(request: &Value) -> String {
    let mut request = request.clone();
    if let Some(records) = request.get_mut("records").and_then(Value::as_array_mut) {
        let count = records.len();
        records.truncate(2);
        records.push(format!("... {count} records in all").into());
    }
    request.to_string()
}

/// A record to produce. Bytes are hex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordSpec {
    pub partition: i32,
    pub key: Option<String>,
    pub value: Option<String>,
    pub headers: Vec<(String, Option<String>)>,
    /// None: the producer's clock (CreateTime set by the client).
    pub timestamp: Option<i64>,
}

/// A record as a consumer returned it. Bytes are hex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consumed {
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<String>,
    pub value: Option<String>,
    pub headers: Vec<(String, Option<String>)>,
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A field of a result, deserialized.
pub fn field<T: serde::de::DeserializeOwned>(result: &Value, name: &str) -> T {
    serde_json::from_value(result[name].clone())
        .unwrap_or_else(|e| panic!("result field {name}: {e} in {result}"))
}
