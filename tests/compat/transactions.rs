//! Transactions, with real clients as the oracle: what `read_committed` and
//! `read_uncommitted` consumers see of committed, aborted and open
//! transactions; a zombie producer fenced by its successor; and a
//! consume-transform-produce loop that stays exactly-once while it and the
//! broker are killed with SIGKILL at seeded moments.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::broker::{Broker, TopicSpec};
use crate::driver::{Client, field, python_script};
use crate::support::rng::{Rng, seed};

/// Transactions end at once and time out quickly, so that a killed
/// producer's open transaction is aborted within the test.
const FAST_TIMEOUTS: &str = "transaction_abort_check_interval_ms = 500\n";

fn strings(value: &Value, key: &str) -> Vec<String> {
    field(value, key)
}

/// confluent-kafka: committed transactions are seen by both isolation
/// levels, aborted ones only by read_uncommitted, and a transaction still
/// open holds read_committed readers (and the last stable offset) back.
#[test]
fn confluent_kafka_sees_committed_and_aborted_transactions_per_isolation() {
    let broker = Broker::start(&[TopicSpec::new("txn", 1)]);
    let result = Client::ConfluentKafka.run(
        "transactions",
        broker.addr(),
        json!({
            "topic": "txn",
            "partition": 0,
            "transactional_id": "compat-tx",
            "transactions": [
                {"values": ["a1", "a2"], "commit": true},
                {"values": ["b1", "b2", "b3"], "commit": false},
                {"values": ["c1"], "commit": true},
            ],
            "leave_open": ["d1", "d2"],
        }),
    );
    assert_eq!(
        strings(&result, "read_committed"),
        ["a1", "a2", "c1"],
        "{result}"
    );
    assert_eq!(
        strings(&result, "read_uncommitted"),
        ["a1", "a2", "b1", "b2", "b3", "c1", "d1", "d2"],
        "{result}"
    );
    // Offsets: a1 a2 C | b1 b2 b3 A | c1 C | d1 d2: the open transaction
    // starts at 9, the last stable offset.
    let watermarks: Vec<i64> = field(&result, "watermarks");
    assert_eq!(watermarks, [0, 9], "{result}");
}

/// kafkajs: a second producer with the same transactional id fences the
/// first; the first's transaction is aborted and its commit fails, the
/// second's records and group offset are committed.
#[test]
fn kafkajs_successor_fences_a_zombie_producer() {
    let broker = Broker::start(&[TopicSpec::new("txn", 1)]);
    let result = Client::Kafkajs.run(
        "txn_zombie",
        broker.addr(),
        json!({
            "topic": "txn",
            "partition": 0,
            "transactional_id": "compat-zombie",
            "group": "compat-zombie-group",
            "offset": 17,
            "zombie_values": ["z1", "z2"],
            "values": ["s1", "s2", "s3"],
        }),
    );
    let error: Option<String> = field(&result, "zombie_error");
    let error = error.unwrap_or_else(|| panic!("the zombie's commit succeeded: {result}"));
    assert!(
        error.contains("FENCED") || error.contains("INVALID_PRODUCER_EPOCH"),
        "{result}"
    );
    assert_eq!(strings(&result, "values"), ["s1", "s2", "s3"], "{result}");
    let committed: i64 = field(&result, "committed");
    assert_eq!(committed, 17, "{result}");
}

/// The loop's input: `PER_PARTITION` records in each of two partitions.
const PER_PARTITION: usize = 600;
const KILLS_OF_EACH: usize = 3;

/// confluent-kafka's consume-transform-produce loop (read_committed
/// consumer, `send_offsets_to_transaction`), with the loop and the broker
/// SIGKILLed at seeded moments and started again: at the end every input
/// has exactly one output under read_committed, and aborted attempts are
/// visible to read_uncommitted only.
#[test]
fn confluent_kafka_consume_transform_produce_is_exactly_once_across_kills() {
    let seed = seed();
    let mut rng = Rng(seed);
    let mut broker = Broker::start_with_config(
        &[TopicSpec::new("ctp-in", 2), TopicSpec::new("ctp-out", 2)],
        FAST_TIMEOUTS,
    );
    let records: Vec<Value> = (0..2 * PER_PARTITION)
        .map(|i| json!([i % 2, format!("k{i}"), format!("v{i}")]))
        .collect();
    Client::ConfluentKafka.run(
        "produce_values",
        broker.addr(),
        json!({"topic": "ctp-in", "records": records}),
    );
    let config = json!({
        "bootstrap": broker.addr(),
        "input": "ctp-in",
        "output": "ctp-out",
        "group": "ctp",
        "transactional_id": "ctp-loop",
        "ends": {"0": PER_PARTITION, "1": PER_PARTITION},
    });
    let (mut loop_kills, mut broker_kills, mut runs) = (0, 0, 0);
    let deadline = Instant::now() + Duration::from_secs(600);
    'runs: loop {
        assert!(
            Instant::now() < deadline,
            "seed {seed}: the loop never finished"
        );
        runs += 1;
        let mut child = start_loop(&config);
        loop {
            let pause = Duration::from_millis(300 + rng.below(1500));
            let started = Instant::now();
            while started.elapsed() < pause {
                if let Some(status) = child.try_wait().expect("wait on the loop") {
                    if status.success() {
                        break 'runs;
                    }
                    eprintln!("seed {seed}: the loop exited with {status}; starting it again");
                    continue 'runs;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            match rng.below(3) {
                0 if loop_kills < KILLS_OF_EACH => {
                    loop_kills += 1;
                    let _ = child.kill();
                    let _ = child.wait();
                    continue 'runs;
                }
                1 if broker_kills < KILLS_OF_EACH => {
                    broker_kills += 1;
                    broker.kill_and_restart();
                }
                _ => {}
            }
        }
    }
    eprintln!("seed {seed}: {runs} runs, {loop_kills} loop kills, {broker_kills} broker kills");
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut uncommitted = 0;
    for partition in 0..2 {
        let read = |isolation: &str| {
            strings(
                &Client::ConfluentKafka.run(
                    "read_partition",
                    broker.addr(),
                    json!({"topic": "ctp-out", "partition": partition, "isolation": isolation}),
                ),
                "values",
            )
        };
        for value in read("read_committed") {
            *seen.entry(value).or_default() += 1;
        }
        uncommitted += read("read_uncommitted").len();
    }
    let expected: BTreeMap<String, usize> = (0..2 * PER_PARTITION)
        .map(|i| (format!("v{i}:out"), 1))
        .collect();
    let doubled: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).take(5).collect();
    let missing: Vec<_> = expected
        .keys()
        .filter(|v| !seen.contains_key(*v))
        .take(5)
        .collect();
    assert!(
        seen == expected,
        "seed {seed}: {} outputs for {} inputs; doubled {doubled:?}, missing {missing:?}",
        seen.values().sum::<usize>(),
        expected.len()
    );
    assert!(
        uncommitted >= expected.len(),
        "seed {seed}: read_uncommitted saw {uncommitted} values"
    );
}

fn start_loop(config: &Value) -> Child {
    let mut child = python_script("ctp_confluent.py")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the consume-transform-produce loop starts");
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin
        .write_all(config.to_string().as_bytes())
        .expect("the loop reads its configuration");
    child
}
