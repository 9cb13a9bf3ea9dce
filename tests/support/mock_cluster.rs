//! librdkafka's mock Kafka cluster as a multi-broker test target: a
//! `mock_cluster.py` process (next to this file) that hosts the cluster in
//! the librdkafka the compatibility venv's confluent-kafka wheel bundles,
//! and takes one command a line (see the script's doc).
//!
//! The mock routes as Kafka does (Produce and Fetch only at a partition's
//! leader, group and transaction requests only at their coordinator) and
//! lets a test move leaders and coordinators, take brokers down and inject
//! errors. It checks idempotent sequence numbers only for transactional
//! producers. A missing venv or library fails the test, naming `make deps`.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;

/// How long one command may take to be answered (they are quick; this
/// only catches a hung harness).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(20);

/// How long the harness may take to exit once told to.
const EXIT_TIMEOUT: Duration = Duration::from_secs(5);

/// librdkafka's __TRANSPORT: as an injected error, the broker closes the
/// connection the request came on instead of answering.
pub const DROP_CONNECTION: i16 = -195;

/// Which coordinator [`MockCluster::set_coordinator`] moves.
#[derive(Debug, Clone, Copy)]
pub enum Coordinator {
    Group,
    Transaction,
}

pub struct MockCluster {
    child: Child,
    commands: Mutex<(ChildStdin, mpsc::Receiver<String>)>,
    bootstrap: String,
    /// What the harness and librdkafka wrote to stderr, shown when a test
    /// fails.
    log: Arc<Mutex<String>>,
    log_reader: Option<std::thread::JoinHandle<()>>,
}

impl MockCluster {
    /// A cluster of `brokers` brokers with `topics` (name, partitions),
    /// each replicated on every broker.
    pub fn start(brokers: usize, topics: &[(&str, i32)]) -> Self {
        let python = venv_dir().join("bin/python3");
        assert!(
            python.exists(),
            "no Python venv at {} (set STRATA_COMPAT_VENV): run `make deps` to install \
             confluent-kafka, whose librdkafka hosts the mock cluster",
            python.display()
        );
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/mock_cluster.py");
        let mut child = Command::new(&python)
            .arg(&script)
            .args(["--brokers", &brokers.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}: run `make deps`", python.display()));
        let log = Arc::new(Mutex::new(String::new()));
        let mut stderr = child.stderr.take().expect("piped stderr");
        let written = Arc::clone(&log);
        let log_reader = std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                written
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        });
        let stdout = child.stdout.take().expect("piped stdout");
        let (lines, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if lines.send(line).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take().expect("piped stdin");
        let mut cluster = Self {
            child,
            commands: Mutex::new((stdin, answers)),
            bootstrap: String::new(),
            log,
            log_reader: Some(log_reader),
        };
        let first = cluster.answer(
            "the bootstrap list (the harness's stderr follows; `make deps` installs \
             confluent-kafka, whose librdkafka it loads)",
        );
        cluster.bootstrap = first
            .strip_prefix("bootstrap ")
            .unwrap_or_else(|| cluster.fail(&format!("the harness began with {first:?}")))
            .to_string();
        for (topic, partitions) in topics {
            cluster.command(&format!("topic {topic} {partitions} {brokers}"));
        }
        cluster
    }

    /// `host:port,...` of every broker.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// Makes `broker` the leader of `topic`/`partition`.
    pub fn set_leader(&self, topic: &str, partition: i32, broker: i32) {
        self.command(&format!("leader {topic} {partition} {broker}"));
    }

    /// Closes `broker`'s connections and refuses new ones (it leaves the
    /// metadata; the partitions it leads have no reachable leader).
    pub fn broker_down(&self, broker: i32) {
        self.command(&format!("down {broker}"));
    }

    pub fn broker_up(&self, broker: i32) {
        self.command(&format!("up {broker}"));
    }

    /// The next requests of `api`, to any broker, fail with `codes`, one
    /// each, in order ([`DROP_CONNECTION`] closes the connection).
    pub fn push_errors(&self, api: ApiKey, codes: &[i16]) {
        let codes: Vec<String> = codes.iter().map(i16::to_string).collect();
        self.command(&format!("errors {} {}", api as i16, codes.join(" ")));
    }

    /// The next requests of `api` to `broker` are answered with these
    /// (error code, delay) pairs, one each, before any pushed with
    /// [`MockCluster::push_errors`]; code 0 with a delay only delays.
    pub fn push_broker_errors(&self, broker: i32, api: ApiKey, answers: &[(i16, Duration)]) {
        let answers: Vec<String> = answers
            .iter()
            .map(|(code, delay)| format!("{code}:{}", delay.as_millis()))
            .collect();
        self.command(&format!(
            "broker_errors {broker} {} {}",
            api as i16,
            answers.join(" ")
        ));
    }

    /// How many of the answers pushed for `broker` and `api` are still to
    /// come.
    pub fn broker_errors_left(&self, broker: i32, api: ApiKey) -> usize {
        let answer = self.command(&format!("error_count {broker} {}", api as i16));
        answer
            .parse()
            .unwrap_or_else(|_| self.fail(&format!("an error count {answer:?}")))
    }

    /// Metadata answers report `code` for `topic` (0 to stop).
    pub fn set_topic_error(&self, topic: &str, code: i16) {
        self.command(&format!("topic_error {topic} {code}"));
    }

    /// Moves the coordinator of a group or transactional id to `broker`.
    pub fn set_coordinator(&self, kind: Coordinator, key: &str, broker: i32) {
        let kind = match kind {
            Coordinator::Group => "group",
            Coordinator::Transaction => "transaction",
        };
        self.command(&format!("coordinator {kind} {key} {broker}"));
    }

    /// The versions of `api` the brokers offer.
    pub fn set_api_versions(&self, api: ApiKey, min: i16, max: i16) {
        self.command(&format!("apiversion {} {min} {max}", api as i16));
    }

    /// Offers group APIs only in the versions the mock parses: it reads a
    /// flexible JoinGroup's protocol count and SyncGroup's assignment as if
    /// not flexible, and answers LeaveGroup v3+ without its members
    /// (librdkafka itself sends JoinGroup v5, SyncGroup v3, LeaveGroup v1).
    pub fn offer_group_versions_it_parses(&self) {
        self.set_api_versions(ApiKey::JoinGroup, 0, 5);
        self.set_api_versions(ApiKey::SyncGroup, 0, 3);
        self.set_api_versions(ApiKey::LeaveGroup, 0, 2);
    }

    /// How long the first rebalance of a new group waits for more members.
    pub fn set_initial_rebalance_delay(&self, delay: Duration) {
        self.command(&format!("rebalance_delay {}", delay.as_millis()));
    }

    /// Starts counting requests by broker and API.
    pub fn track_requests(&self) {
        self.command("track");
    }

    /// (broker, API key) → requests since tracking began or the last call.
    pub fn requests(&self) -> std::collections::BTreeMap<(i32, i16), usize> {
        let answer = self.command("requests");
        answer
            .split_whitespace()
            .map(|entry| {
                let parts: Vec<&str> = entry.split(':').collect();
                let [broker, api, count] = parts.as_slice() else {
                    self.fail(&format!("a request count {entry:?}"))
                };
                let parse = |text: &str| {
                    text.parse::<i64>()
                        .unwrap_or_else(|_| self.fail(&format!("a request count {entry:?}")))
                };
                (
                    (parse(broker) as i32, parse(api) as i16),
                    parse(count) as usize,
                )
            })
            .collect()
    }

    /// Sends one command and returns what follows its `ok`.
    fn command(&self, line: &str) -> String {
        {
            let mut commands = self.commands.lock().unwrap();
            if let Err(error) = writeln!(commands.0, "{line}") {
                drop(commands);
                self.fail(&format!("sending {line:?}: {error}"));
            }
        }
        let answer = self.answer(line);
        match answer.strip_prefix("ok") {
            Some(rest) => rest.trim().to_string(),
            None => self.fail(&format!("{line:?} was answered {answer:?}")),
        }
    }

    fn answer(&self, waiting_for: &str) -> String {
        let answer = self.commands.lock().unwrap().1.recv_timeout(ANSWER_TIMEOUT);
        answer.unwrap_or_else(|_| self.fail(&format!("no answer to {waiting_for:?}")))
    }

    /// Fails the test; dropping the cluster then shows its stderr.
    fn fail(&self, what: &str) -> ! {
        panic!("mock cluster: {what}");
    }
}

impl Drop for MockCluster {
    fn drop(&mut self) {
        if let Ok(mut commands) = self.commands.lock() {
            let _ = writeln!(commands.0, "quit");
        }
        let deadline = std::time::Instant::now() + EXIT_TIMEOUT;
        while !matches!(self.child.try_wait(), Ok(Some(_))) {
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if std::thread::panicking() {
            // Its stderr is closed now: all of it has been read.
            if let Some(reader) = self.log_reader.take() {
                let _ = reader.join();
            }
            eprintln!(
                "--- the mock cluster's stderr ---\n{}",
                self.log.lock().unwrap_or_else(|e| e.into_inner())
            );
        }
    }
}

/// The compatibility venv: `STRATA_COMPAT_VENV`, as the Makefile sets it,
/// or the same default as scripts/install-clients.sh.
pub fn venv_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("STRATA_COMPAT_VENV") {
        return PathBuf::from(dir);
    }
    let cache = match std::env::var_os("STRATA_CACHE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/strata"),
    };
    cache.join("compat/venv")
}
