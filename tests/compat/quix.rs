//! Quix Streams (a stream-processing library on librdkafka) against strata
//! unchanged: a stateful word count with `processing_guarantee =
//! "exactly-once"`, its RocksDB state backed by a compacted changelog topic
//! it creates, killed with SIGKILL at seeded moments and started again,
//! then restarted with its local state deleted so it restores from the
//! changelog. Every word's outputs must be exactly the counts 1..n.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::broker::{Broker, TopicSpec};
use crate::driver::{Client, field, quix_script};
use crate::support::rng::{Rng, seed};

const WORDS: u64 = 20;
const KILLS: usize = 3;

#[test]
fn quix_streams_word_count_is_exactly_once_across_kills_and_a_restore() {
    let seed = seed();
    let mut rng = Rng(seed);
    let broker = Broker::start_with_config(
        &[TopicSpec::new("words", 2), TopicSpec::new("counts", 2)],
        "transaction_abort_check_interval_ms = 500\ncleaner_check_interval_ms = 1000\n",
    );
    let state = tempfile::tempdir().unwrap();
    let config = json!({
        "bootstrap": broker.addr(),
        "input": "words",
        "output": "counts",
        "group": "word-count",
        "state_dir": state.path().join("quix"),
        "idle_s": 3,
    });
    let mut sent: BTreeMap<String, u64> = BTreeMap::new();
    produce_words(&broker, &mut rng, 600, &mut sent);
    // Killed at seeded moments, started again each time.
    for kill in 0..KILLS {
        let mut app = start(&config);
        std::thread::sleep(Duration::from_millis(3_000 + rng.below(4_000)));
        match app.try_wait().expect("wait on the app") {
            Some(status) => eprintln!("seed {seed}: run {kill} ended by itself ({status})"),
            None => {
                let _ = app.kill();
                let _ = app.wait();
            }
        }
        produce_words(&broker, &mut rng, 100, &mut sent);
    }
    finish(start(&config), seed);
    // Local state gone: the app restores it from the changelog.
    std::fs::remove_dir_all(state.path().join("quix")).unwrap();
    produce_words(&broker, &mut rng, 200, &mut sent);
    finish(start(&config), seed);

    let mut outputs: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for partition in 0..2 {
        let read = Client::ConfluentKafka.run(
            "read_partition",
            broker.addr(),
            json!({"topic": "counts", "partition": partition, "isolation": "read_committed"}),
        );
        let values: Vec<String> = field(&read, "values");
        for value in values {
            let value: Value = serde_json::from_str(&value).unwrap();
            let word = value["word"].as_str().unwrap().to_string();
            outputs
                .entry(word)
                .or_default()
                .push(value["count"].as_u64().unwrap());
        }
    }
    for (word, n) in &sent {
        let mut counts = outputs.remove(word).unwrap_or_default();
        counts.sort_unstable();
        let expected: Vec<u64> = (1..=*n).collect();
        assert_eq!(counts, expected, "seed {seed}: counts of '{word}'");
    }
    assert!(
        outputs.is_empty(),
        "seed {seed}: words never sent: {outputs:?}"
    );
}

/// Sends `n` words (the key and the value), counting them in `sent`.
fn produce_words(broker: &Broker, rng: &mut Rng, n: usize, sent: &mut BTreeMap<String, u64>) {
    let records: Vec<Value> = (0..n)
        .map(|_| {
            let word = format!("w{}", rng.below(WORDS));
            *sent.entry(word.clone()).or_default() += 1;
            let partition = word[1..].parse::<u64>().unwrap() % 2;
            json!([partition, word, word])
        })
        .collect();
    Client::ConfluentKafka.run(
        "produce_values",
        broker.addr(),
        json!({"topic": "words", "records": records}),
    );
}

fn start(config: &Value) -> Child {
    let mut child = quix_script("quix_wordcount.py")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the Quix Streams app starts");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(config.to_string().as_bytes())
        .expect("the app reads its configuration");
    child
}

/// Waits for the app to stop by itself (idle), which it must do cleanly.
fn finish(mut app: Child, seed: u64) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Some(status) = app.try_wait().expect("wait on the app") {
            assert!(
                status.success(),
                "seed {seed}: the app exited with {status}"
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "seed {seed}: the app never went idle"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
