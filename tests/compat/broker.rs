//! One `strata serve` per test: its own temporary data directory, topics
//! created before it starts, an optional `strata.toml`, its log kept in a file
//! and printed when the test fails.

use std::ffi::OsStr;
use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use strata::log::{LogConfig, LogManager};
use strata::record::{BatchHeader, RecordBatch};

use crate::support::ServerProcess;

const STRATA: &str = env!("CARGO_BIN_EXE_strata");

/// A topic to create before the broker starts.
pub struct TopicSpec<'a> {
    pub name: &'a str,
    pub partitions: i32,
    /// Kafka-named topic settings, e.g. `("retention.ms", "60000")`.
    pub configs: &'a [(&'a str, &'a str)],
}

impl<'a> TopicSpec<'a> {
    pub fn new(name: &'a str, partitions: i32) -> Self {
        Self {
            name,
            partitions,
            configs: &[],
        }
    }
}

pub struct Broker {
    server: Option<ServerProcess>,
    dir: tempfile::TempDir,
}

impl Broker {
    /// A broker with default settings and these topics.
    pub fn start(topics: &[TopicSpec]) -> Self {
        Self::start_with_config(topics, "")
    }

    /// A broker with `config` as its strata.toml.
    pub fn start_with_config(topics: &[TopicSpec], config: &str) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut broker = Self { server: None, dir };
        fs::write(broker.config_path(), config).expect("strata.toml written");
        for topic in topics {
            let mut command = Command::new(STRATA);
            command
                .args(["log", "--data-dir"])
                .arg(broker.data_dir())
                .args(["create-topic", topic.name, "--partitions"])
                .arg(topic.partitions.to_string());
            for (key, value) in topic.configs {
                command.arg("--config").arg(format!("{key}={value}"));
            }
            let output = command.output().expect("strata log create-topic runs");
            assert!(
                output.status.success(),
                "creating topic {}: {}",
                topic.name,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        broker.serve();
        broker
    }

    /// The `host:port` clients bootstrap from.
    pub fn addr(&self) -> &str {
        &self.server.as_ref().expect("the broker is running").addr
    }

    /// Stops the broker with SIGTERM (a clean shutdown) and starts it again on
    /// the same data directory, on a new port.
    pub fn restart(&mut self) {
        self.stop();
        self.serve();
    }

    /// SIGKILLs the broker and starts it again on the same address, data
    /// directory and configuration: clients keep their bootstrap address.
    pub fn kill_and_restart(&mut self) {
        let server = self.server.as_mut().expect("the broker is running");
        let addr = server.addr.clone();
        let _ = server.child.kill();
        let _ = server.child.wait();
        self.server = None;
        self.serve_at(&addr);
    }

    /// The header of every batch in `topic`'s partitions, read from the data
    /// directory after a clean stop.
    pub fn stop_and_read_batch_headers(
        &mut self,
        topic: &str,
        partitions: i32,
    ) -> Vec<BatchHeader> {
        self.stop();
        let log = LogManager::open(&self.data_dir(), LogConfig::default()).expect("the log opens");
        let mut headers = Vec::new();
        for p in 0..partitions {
            let partition = log.partition(topic, p).expect("the partition exists");
            let bytes = partition
                .read(partition.log_start_offset(), u64::MAX)
                .and_then(|read| read.read_to_vec())
                .expect("the partition reads");
            let mut rest = &bytes[..];
            while !rest.is_empty() {
                let batch = RecordBatch::parse_and_verify(rest).expect("a valid batch");
                headers.push(*batch.header());
                rest = &rest[batch.size_bytes()..];
            }
        }
        log.close().expect("the log closes");
        headers
    }

    fn stop(&mut self) {
        let mut server = self.server.take().expect("the broker is running");
        let pid = server.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "SIGTERM sent to {pid}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = server.child.try_wait().expect("wait on the broker") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "the broker did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "the broker stopped with {status}");
    }

    fn serve(&mut self) {
        self.serve_at("127.0.0.1:0");
    }

    fn serve_at(&mut self, listen: &str) {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("broker log file opens");
        let config = self.config_path();
        self.server = Some(ServerProcess::start_listening(
            STRATA,
            &self.data_dir(),
            listen,
            &[OsStr::new("--config"), config.as_os_str()],
            Stdio::from(log),
        ));
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn config_path(&self) -> PathBuf {
        self.dir.path().join("strata.toml")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("broker.log")
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        // Stop the process before the directory goes.
        drop(self.server.take());
        if std::thread::panicking() {
            let log = fs::read_to_string(self.log_path()).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(60)..];
            eprintln!("--- broker log (last {} lines) ---", tail.len());
            for line in tail {
                eprintln!("{line}");
            }
        }
    }
}
