//! librdkafka's idempotent producer (kcat with `enable.idempotence=true`)
//! against `strata serve`: it gets a producer id from InitProducerId, its
//! batches carry that id with dense sequences, and everything it wrote reads
//! back once, in order. kcat is installed by `make test`.

use crate::support;

use std::process::Command;

use strata::log::{LogConfig, LogManager};
use strata::record::BatchHeader;

const TOPIC: &str = "idempotent";

fn kcat(args: &[&str], input: &str) -> String {
    let output =
        support::process::run_with_input(Command::new("kcat").args(args), input.as_bytes());
    assert!(
        output.status.success(),
        "kcat {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn kcat_produces_idempotently_and_reads_everything_back_once() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        log.create_topic(TOPIC, 1, Default::default()).unwrap();
        log.close().unwrap();
    }
    let server = support::ServerProcess::start(env!("CARGO_BIN_EXE_strata"), dir.path());
    let b = server.addr.as_str();
    let mut expected = Vec::new();
    // Two runs: two producers, each with its own producer id.
    for run in 0..2 {
        let lines: Vec<String> = (0..500)
            .map(|i| format!("key-{}:run {run} value {i}", i % 7))
            .collect();
        kcat(
            &[
                "-P",
                "-b",
                b,
                "-t",
                TOPIC,
                "-K:",
                "-z",
                "lz4",
                "-X",
                "enable.idempotence=true",
                "-X",
                "linger.ms=5",
                "-X",
                "batch.num.messages=64",
            ],
            &(lines.join("\n") + "\n"),
        );
        expected.extend(lines);
    }
    let consumed = kcat(
        &[
            "-C",
            "-b",
            b,
            "-t",
            TOPIC,
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%k:%s\n",
        ],
        "",
    );
    assert_eq!(consumed.lines().collect::<Vec<_>>(), expected);
    drop(server);

    // The stored batches: each run's producer id, its sequences dense from 0.
    let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
    let bytes = log
        .partition(TOPIC, 0)
        .unwrap()
        .read(0, u64::MAX)
        .unwrap()
        .read_to_vec()
        .unwrap();
    let mut rest = &bytes[..];
    let mut producers: Vec<(i64, i32)> = Vec::new(); // (id, next sequence)
    while !rest.is_empty() {
        let header = BatchHeader::parse(rest).unwrap();
        assert!(header.producer_id >= 0, "an idempotent batch: {header:?}");
        assert_eq!(header.producer_epoch, 0);
        match producers.last_mut() {
            Some((id, next)) if *id == header.producer_id => {
                assert_eq!(header.base_sequence, *next);
                *next += header.record_count;
            }
            _ => {
                assert_eq!(header.base_sequence, 0);
                producers.push((header.producer_id, header.record_count));
            }
        }
        rest = &rest[header.size_bytes()..];
    }
    assert_eq!(producers.len(), 2);
    assert_ne!(producers[0].0, producers[1].0);
    assert_eq!((producers[0].1, producers[1].1), (500, 500));
}
