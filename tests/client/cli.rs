//! The `strata` commands that talk to a broker, run as a user runs them:
//! the binary against `strata serve` on a real socket.

use crate::support;

use std::process::{Command, Output, Stdio};

use serde_json::Value;
use strata::client::partitioner::partition_for_key;
use support::ServerProcess;

const STRATA: &str = env!("CARGO_BIN_EXE_strata");

struct Cli {
    server: ServerProcess,
    _dir: tempfile::TempDir,
}

impl Cli {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("strata.toml");
        std::fs::write(&config, "group_initial_rebalance_delay_ms = 0\n").unwrap();
        let server = ServerProcess::start_with(
            STRATA,
            &dir.path().join("data"),
            &["--config".as_ref(), config.as_os_str()],
            Stdio::null(),
        );
        Self { server, _dir: dir }
    }

    /// Runs `strata ARGS` with `stdin`; returns its output.
    fn run_with_input(&self, args: &[&str], stdin: &str) -> Output {
        let mut strata = Command::new(STRATA);
        strata.args(args).env("STRATA_BOOTSTRAP", &self.server.addr);
        support::process::run_with_input(&mut strata, stdin.as_bytes())
    }

    /// Runs `strata ARGS`, which must succeed; returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        self.ok_with_input(args, "")
    }

    fn ok_with_input(&self, args: &[&str], stdin: &str) -> String {
        let output = self.run_with_input(args, stdin);
        assert!(
            output.status.success(),
            "strata {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// Runs `strata ARGS`, which must fail; returns its stderr.
    fn fails(&self, args: &[&str]) -> String {
        let output = self.run_with_input(args, "");
        assert!(!output.status.success(), "strata {args:?} succeeded");
        String::from_utf8(output.stderr).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).unwrap()
    }
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn topics_are_created_listed_described_and_deleted() {
    let cli = Cli::start();
    cli.ok(&[
        "topics",
        "create",
        "orders",
        "--partitions",
        "3",
        "--config",
        "retention.ms=60000",
    ]);
    assert_eq!(cli.ok(&["topics", "list"]), "orders\n");
    cli.ok_with_input(&["produce", "orders", "--partition", "1"], "a\nb\n");

    let described = cli.json(&["topics", "describe", "orders", "--format", "json"]);
    let topic = &described[0];
    assert_eq!(topic["name"], "orders");
    assert_eq!(topic["config"]["retention.ms"], "60000");
    let partitions = topic["partitions"].as_array().unwrap();
    assert_eq!(partitions.len(), 3);
    assert_eq!(partitions[1]["latest"], 2);
    assert_eq!(partitions[0]["latest"], 0);
    assert!(partitions[1]["size_bytes"].as_u64().unwrap() > 0);
    assert_eq!(partitions[0]["size_bytes"], 0);
    let text = cli.ok(&["topics", "describe", "orders"]);
    assert!(text.contains("retention.ms 60000"), "{text}");

    let exists = cli.fails(&["topics", "create", "orders"]);
    assert!(exists.contains("TopicAlreadyExists"), "{exists}");
    cli.ok(&["topics", "delete", "orders"]);
    assert_eq!(cli.ok(&["topics", "list"]), "");
}

#[test]
fn produced_lines_come_back_with_keys_on_their_murmur2_partitions() {
    let cli = Cli::start();
    cli.ok(&["topics", "create", "clicks", "--partitions", "4"]);
    let lines: Vec<String> = (0..40)
        .map(|i| format!("user-{}:/page/{i}", i % 7))
        .collect();
    cli.ok_with_input(
        &[
            "produce",
            "clicks",
            "--key-separator",
            ":",
            "--compression",
            "lz4",
        ],
        &(lines.join("\n") + "\n"),
    );
    let records = json_lines(&cli.ok(&["consume", "clicks", "--end", "--format", "json"]));
    assert_eq!(records.len(), 40);
    for record in &records {
        let key = record["key"].as_str().unwrap();
        assert_eq!(
            record["partition"].as_i64().unwrap(),
            i64::from(partition_for_key(key.as_bytes(), 4)),
            "{record}"
        );
    }
    // Per key, the values keep their order.
    for user in 0..7 {
        let key = format!("user-{user}");
        let got: Vec<&str> = records
            .iter()
            .filter(|r| r["key"] == key.as_str())
            .map(|r| r["value"].as_str().unwrap())
            .collect();
        let want: Vec<String> = (0..40)
            .filter(|i| i % 7 == user)
            .map(|i| format!("/page/{i}"))
            .collect();
        assert_eq!(got, want);
    }
    let partition = records[0]["partition"].as_i64().unwrap().to_string();
    let from_one = cli.ok(&[
        "consume",
        "clicks",
        "--partition",
        &partition,
        "--from",
        "1",
        "--end",
        "--format",
        "key-value",
    ]);
    let total = records
        .iter()
        .filter(|r| r["partition"].as_i64().unwrap().to_string() == partition)
        .count();
    assert_eq!(from_one.lines().count(), total - 1);
    assert!(
        from_one
            .lines()
            .all(|l| l.starts_with("user-") && l.contains('\t'))
    );
    let future = cli.ok(&["consume", "clicks", "--from", "@99999999999999", "--end"]);
    assert_eq!(future, "");
    assert_eq!(
        cli.ok(&["consume", "clicks", "--count", "3"])
            .lines()
            .count(),
        3
    );
}

#[test]
fn a_group_commits_what_it_printed_and_can_be_reset() {
    let cli = Cli::start();
    cli.ok(&["topics", "create", "jobs", "--partitions", "2"]);
    let input: String = (0..10).map(|i| format!("job-{i}\n")).collect();
    cli.ok_with_input(&["produce", "jobs"], &input);

    let first = cli.ok(&["consume", "jobs", "--group", "workers", "--count", "4"]);
    assert_eq!(first.lines().count(), 4);
    let described = cli.json(&["groups", "describe", "workers", "--format", "json"]);
    let committed: i64 = described["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["committed"].as_i64().unwrap_or(0))
        .sum();
    assert_eq!(committed, 4, "{described}");
    assert_eq!(described["state"], "Empty");

    let rest = cli.ok(&["consume", "jobs", "--group", "workers", "--end"]);
    assert_eq!(
        rest.lines().count(),
        6,
        "the group resumes after what it printed"
    );
    let lags = cli.json(&["groups", "describe", "workers", "--format", "json"]);
    assert!(
        lags["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["lag"] == 0)
    );

    let listed = cli.json(&["groups", "list", "--format", "json"]);
    assert_eq!(listed[0]["group"], "workers");
    cli.ok(&[
        "groups",
        "reset-offsets",
        "workers",
        "--topic",
        "jobs",
        "--to",
        "earliest",
    ]);
    let again = cli.ok(&["consume", "jobs", "--group", "workers", "--end"]);
    assert_eq!(again.lines().count(), 10);
    let refused = cli.fails(&["consume", "jobs", "--group", "workers", "--from", "3"]);
    assert!(refused.contains("reset-offsets"), "{refused}");

    cli.ok(&["groups", "delete", "workers"]);
    let listed = cli.json(&["groups", "list", "--format", "json"]);
    assert_eq!(listed, serde_json::json!([]));
    let gone = cli.fails(&["groups", "delete", "workers"]);
    assert!(gone.contains("GroupIdNotFound"), "{gone}");
}

#[test]
fn bench_reports_what_it_measured() {
    let cli = Cli::start();
    let produced = cli.json(&[
        "bench",
        "produce",
        "--topic",
        "b",
        "--records",
        "5000",
        "--record-size",
        "200",
        "--format",
        "json",
    ]);
    assert_eq!(produced["records"], 5000);
    assert_eq!(produced["bytes"], 1_000_000);
    assert!(
        produced["latency_ms"]["p99"].as_f64().unwrap()
            >= produced["latency_ms"]["p50"].as_f64().unwrap()
    );
    let consumed = cli.json(&["bench", "consume", "--topic", "b", "--format", "json"]);
    assert_eq!(consumed["records"], 5000);
    assert_eq!(consumed["bytes"], 1_000_000);
}

#[test]
fn errors_say_what_went_wrong() {
    let cli = Cli::start();
    let unknown = cli.fails(&["consume", "missing"]);
    assert!(unknown.contains("unknown topic missing"), "{unknown}");
    let produce = cli.fails(&["produce", "missing"]);
    assert!(produce.contains("strata topics create"), "{produce}");
    let offset = cli.fails(&["consume", "missing", "--from", "soon"]);
    assert!(
        offset.contains("'soon' is not earliest, latest"),
        "{offset}"
    );
    let output = Command::new(STRATA)
        .args(["topics", "list", "--bootstrap", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot connect to 127.0.0.1:1"), "{stderr}");
    cli.ok(&["topics", "create", "one"]);
    let partition = cli.fails(&["consume", "one", "--partition", "5"]);
    assert!(partition.contains("partitions 0..1, not 5"), "{partition}");
}

#[test]
fn skew_finds_a_planted_hot_key_and_the_partition_it_loads() {
    let cli = Cli::start();
    cli.ok(&["topics", "create", "clicks", "--partitions", "4"]);
    // 100 keys; one of them (1%) carries half of the 20,000 records.
    let lines: Vec<String> = (0..20_000)
        .map(|i| {
            let key = if i % 2 == 0 {
                "hot".to_string()
            } else {
                format!("user-{}", i % 99)
            };
            format!("{key}:v{i}")
        })
        .collect();
    cli.ok_with_input(
        &["produce", "clicks", "--key-separator", ":"],
        &(lines.join("\n") + "\n"),
    );
    let report: Value = serde_json::from_str(&cli.ok(&[
        "topics", "skew", "clicks", "--since", "earliest", "--top", "3", "--format", "json",
    ]))
    .unwrap();
    assert_eq!(report["records"], 20_000, "{report}");
    let hottest = &report["keys"][0];
    assert_eq!(hottest["key"], "hot", "{report}");
    let share = hottest["share"].as_f64().unwrap();
    assert!((0.49..=0.52).contains(&share), "{report}");
    assert!(
        hottest["since"].as_str().unwrap().ends_with('Z'),
        "{report}"
    );
    // The hot key's partition holds far more than the mean.
    let loaded = partition_for_key(b"hot", 4) as usize;
    let vs_mean = report["partitions"][loaded]["vs_mean"].as_f64().unwrap();
    assert!(vs_mean > 1.5, "{report}");
    // The text report says the same.
    let text = cli.ok(&["topics", "skew", "clicks", "--since", "1h", "--top", "1"]);
    let key_line = text
        .lines()
        .find(|l| l.starts_with("hot "))
        .expect("the hot key's line");
    assert!(key_line.contains("%"), "{text}");
    let refused = cli.fails(&["topics", "skew", "clicks", "--since", "soon"]);
    assert!(refused.contains("a span back from now"), "{refused}");
}
