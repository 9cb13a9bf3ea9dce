//! Log compaction against a model: randomized keys, values and tombstones,
//! appends interleaved with cleans and reopens, and cleans killed with
//! SIGKILL at random moments. Whatever happens, every record the log still
//! serves is the one appended at its offset (offsets never move), the
//! latest record of every key is there (a tombstone may be gone once its
//! horizon passed), and below the cleaned offset no key appears twice.

use crate::support;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use proptest::prelude::*;
use strata::log::{
    CleanerConfig, LogConfig, LogError, LogManager, PartitionLog, Throttle, clean_partition, now_ms,
};
use strata::record::{BatchBuilder, Compression, NewRecord, RecordBatch};
use support::rng::{Rng, seed};

const TOPIC: &str = "table";

/// (key, value; `None` is a tombstone)
type Appended = (String, Option<String>);

fn compacted_config() -> LogConfig {
    let overrides = BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("segment.bytes".to_string(), "1024".to_string()),
        ("min.cleanable.dirty.ratio".to_string(), "0".to_string()),
        ("delete.retention.ms".to_string(), "0".to_string()),
    ]);
    LogConfig::default().with_overrides(&overrides).unwrap()
}

fn append(log: &PartitionLog, key: &str, value: Option<&str>) -> i64 {
    let mut builder = BatchBuilder::new(Compression::None);
    let record = match value {
        Some(value) => NewRecord::new(Some(key.as_bytes()), value.as_bytes(), 1_000),
        None => NewRecord {
            key: Some(key.as_bytes()),
            value: None,
            timestamp: 1_000,
            headers: &[],
        },
    };
    builder.push(record).unwrap();
    log.append(&builder.build().unwrap()).unwrap().base_offset
}

/// Every record the log serves from its start: (offset, key, value).
fn served(log: &PartitionLog) -> Vec<(i64, String, Option<String>)> {
    let bytes = log
        .read(log.log_start_offset(), u64::MAX)
        .unwrap()
        .read_to_vec()
        .unwrap();
    let mut out = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let batch = RecordBatch::parse_and_verify(rest).unwrap();
        rest = &rest[batch.size_bytes()..];
        for record in batch.records(1 << 20).unwrap().iter() {
            let record = record.unwrap();
            out.push((
                record.offset,
                String::from_utf8(record.key.unwrap().to_vec()).unwrap(),
                record.value.map(|v| String::from_utf8(v.to_vec()).unwrap()),
            ));
        }
    }
    out
}

/// The invariants, against everything appended (by offset).
fn check(
    log: &PartitionLog,
    appended: &BTreeMap<i64, Appended>,
    cleaned_to: i64,
) -> Result<(), String> {
    let served = served(log);
    let mut previous = -1;
    let mut latest_served: HashMap<&str, i64> = HashMap::new();
    let mut below_clean: HashMap<&str, usize> = HashMap::new();
    for (offset, key, value) in &served {
        if *offset <= previous {
            return Err(format!("offset {offset} after {previous}"));
        }
        previous = *offset;
        match appended.get(offset) {
            Some((k, v)) if k == key && v == value => {}
            other => {
                return Err(format!(
                    "offset {offset} serves {key}={value:?}, appended {other:?}"
                ));
            }
        }
        latest_served.insert(key, *offset);
        if *offset < cleaned_to {
            *below_clean.entry(key).or_default() += 1;
        }
    }
    let mut latest: HashMap<&str, (i64, &Option<String>)> = HashMap::new();
    for (offset, (key, value)) in appended {
        latest.insert(key, (*offset, value));
    }
    for (key, (offset, value)) in latest {
        match latest_served.get(key) {
            Some(served) if *served == offset => {}
            None if value.is_none() => {}
            other => {
                return Err(format!(
                    "key {key}: latest appended at {offset} ({value:?}), latest served {other:?}"
                ));
            }
        }
    }
    if let Some((key, n)) = below_clean.iter().find(|(_, n)| **n > 1) {
        return Err(format!(
            "key {key} appears {n} times below the cleaned offset {cleaned_to}"
        ));
    }
    Ok(())
}

#[derive(Debug, Clone)]
enum Op {
    Put { key: u8, value: u16 },
    Delete { key: u8 },
    Clean,
    Reopen { clean: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..12u8, any::<u16>()).prop_map(|(key, value)| Op::Put { key, value }),
        2 => (0..12u8).prop_map(|key| Op::Delete { key }),
        2 => Just(Op::Clean),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn the_log_matches_the_model_through_cleans_and_reopens(ops in prop::collection::vec(op(), 1..150)) {
        let dir = tempfile::tempdir().unwrap();
        let mut log = PartitionLog::open(dir.path(), "table-0", compacted_config(), true).unwrap();
        let mut appended: BTreeMap<i64, Appended> = BTreeMap::new();
        let mut cleaned_to = 0;
        let config = CleanerConfig { io_bytes_per_second: u64::MAX, ..CleanerConfig::default() };
        for op in ops {
            match op {
                Op::Put { key, value } => {
                    let (key, value) = (format!("k{key}"), format!("v{value}"));
                    let offset = append(&log, &key, Some(&value));
                    appended.insert(offset, (key, Some(value)));
                }
                Op::Delete { key } => {
                    let key = format!("k{key}");
                    let offset = append(&log, &key, None);
                    appended.insert(offset, (key, None));
                }
                Op::Clean => {
                    if let Some(outcome) = clean_partition(&log, now_ms(), &config, &mut Throttle::new(u64::MAX)).unwrap() {
                        cleaned_to = outcome.cleaned_to;
                    }
                }
                Op::Reopen { clean } => {
                    if clean {
                        log.close().unwrap();
                    }
                    drop(log);
                    log = PartitionLog::open(dir.path(), "table-0", compacted_config(), clean).unwrap();
                    prop_assert!(log.recovery_report().corruption.is_none(), "{:?}", log.recovery_report());
                }
            }
            if let Err(problem) = check(&log, &appended, cleaned_to) {
                return Err(TestCaseError::fail(problem));
            }
        }
        prop_assert_eq!(log.verify().unwrap(), None);
    }
}

/// A tombstone whose segment the first clean leaves as it is (nothing of
/// it superseded) still goes, at a clean `delete.retention.ms` after that
/// one, as in Kafka: a reader of the changelog that fell behind for longer
/// than that may miss it, and `runtime::task::restore` counts on it.
#[test]
fn a_tombstone_in_a_segment_its_first_clean_left_unchanged_goes_at_a_later_clean() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), "table-0", compacted_config(), true).unwrap();
    let config = CleanerConfig {
        io_bytes_per_second: u64::MAX,
        ..CleanerConfig::default()
    };
    let clean = || {
        let throttle = &mut Throttle::new(u64::MAX);
        clean_partition(&log, now_ms(), &config, throttle).unwrap()
    };
    // Tombstones of keys never put, in segments of their own, then enough
    // records to close them.
    for key in 0..40 {
        append(&log, &format!("gone{key}"), None);
    }
    for key in 0..40 {
        append(&log, &format!("kept{key}"), Some("v"));
    }
    let tombstones = |log: &PartitionLog| served(log).iter().filter(|r| r.2.is_none()).count();
    clean().expect("the first clean runs");
    assert_eq!(tombstones(&log), 40, "kept through their first clean");
    std::thread::sleep(std::time::Duration::from_millis(5));
    for key in 0..40 {
        append(&log, &format!("kept{key}"), Some("w"));
    }
    clean().expect("the second clean runs");
    assert_eq!(tombstones(&log), 0, "gone at the clean after the horizon");
}

#[test]
fn a_record_without_a_key_is_refused_by_a_compacted_topic() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), "table-0", compacted_config(), true).unwrap();
    let mut builder = BatchBuilder::new(Compression::None);
    builder.push(NewRecord::new(None, b"v", 1)).unwrap();
    let error = log.append(&builder.build().unwrap()).unwrap_err();
    assert!(matches!(error, LogError::UnkeyedRecord { .. }), "{error}");
    assert!(error.to_string().contains("key"), "{error}");
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn a_fetch_at_a_removed_offset_returns_the_next_record() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), "table-0", compacted_config(), true).unwrap();
    for i in 0..200 {
        append(&log, &format!("k{}", i % 5), Some(&format!("v{i}")));
    }
    let config = CleanerConfig {
        io_bytes_per_second: u64::MAX,
        ..CleanerConfig::default()
    };
    let outcome = clean_partition(&log, now_ms(), &config, &mut Throttle::new(u64::MAX))
        .unwrap()
        .expect("a clean");
    assert!(outcome.records_removed > 0, "{outcome:?}");
    let offsets: Vec<i64> = served(&log).iter().map(|r| r.0).collect();
    let removed = (0..200)
        .find(|o| !offsets.contains(o))
        .expect("a removed offset");
    let next = *offsets
        .iter()
        .find(|&&o| o > removed)
        .expect("a record after it");
    // The read at the removed offset starts with batches that may have
    // lost all their records; its first record is the next one kept.
    let read = log.read(removed, u64::MAX).unwrap().read_to_vec().unwrap();
    let mut rest = &read[..];
    let mut first = None;
    while first.is_none() && !rest.is_empty() {
        let batch = RecordBatch::parse_and_verify(rest).unwrap();
        rest = &rest[batch.size_bytes()..];
        first = batch
            .records(1 << 20)
            .unwrap()
            .iter()
            .next()
            .map(|r| r.unwrap().offset);
    }
    assert_eq!(first, Some(next));
}

/// `strata log clean`, SIGKILLed at seeded moments: after each kill the
/// log opens without corruption and matches the model; a last clean run to
/// its end leaves each key once below the cleaned offset.
#[test]
fn a_clean_killed_at_any_moment_leaves_the_old_segments_or_the_cleaned_ones() {
    let seed = seed();
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let appended = fill(data, &mut rng);
    for round in 0..6 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(["log", "--data-dir"])
            .arg(data)
            .args(["clean", "--io-bytes-per-second", "1000000"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("strata log clean starts");
        std::thread::sleep(Duration::from_millis(50 + rng.below(2500)));
        let _ = child.kill();
        let _ = child.wait();
        let log = LogManager::open(data, LogConfig::default()).unwrap();
        let partition = log.partition(TOPIC, 0).unwrap();
        assert!(
            partition.recovery_report().corruption.is_none(),
            "seed {seed}, round {round}: {:?}",
            partition.recovery_report()
        );
        if let Err(problem) = check(&partition, &appended, 0) {
            panic!("seed {seed}, round {round}: {problem}");
        }
        drop(partition);
        log.close().unwrap();
    }
    let log = LogManager::open(data, LogConfig::default()).unwrap();
    let outcomes = log.clean_compacted(&CleanerConfig {
        io_bytes_per_second: u64::MAX,
        ..CleanerConfig::default()
    });
    let cleaned_to = outcomes.first().map_or(0, |(_, o)| o.cleaned_to);
    let partition = log.partition(TOPIC, 0).unwrap();
    if let Err(problem) = check(&partition, &appended, cleaned_to) {
        panic!("seed {seed}, after the last clean: {problem}");
    }
    assert_eq!(partition.verify().unwrap(), None, "seed {seed}");
}

/// A compacted topic of 6,000 records over 300 keys, one in ten a
/// tombstone, in 16 KiB segments; returns what was appended.
fn fill(data: &Path, rng: &mut Rng) -> BTreeMap<i64, Appended> {
    let log = LogManager::open(data, LogConfig::default()).unwrap();
    let overrides = BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("segment.bytes".to_string(), "16384".to_string()),
        ("min.cleanable.dirty.ratio".to_string(), "0".to_string()),
    ]);
    let topic = log.create_topic(TOPIC, 1, overrides).unwrap();
    let partition = topic.partition(0).unwrap();
    let mut appended = BTreeMap::new();
    for i in 0..6_000 {
        let key = format!("key-{}", rng.below(300));
        let value = (rng.below(10) != 0).then(|| format!("value-{i}"));
        let offset = append(&partition, &key, value.as_deref());
        appended.insert(offset, (key, value));
    }
    drop(partition);
    drop(topic);
    log.close().unwrap();
    appended
}

/// A power loss at each storage call a clean makes, in turn (the cleaned
/// copy's writes and sync, the renames, the marker, the index deletions,
/// the directory syncs, the cleaner offset): after each, the partition
/// recovers without corruption and matches the model, and a clean run
/// after the recovery leaves each key once below the cleaned offset.
#[test]
fn a_power_loss_at_every_step_of_a_clean_leaves_the_model_intact() {
    use std::sync::Arc;
    use strata::log::storage::{Disk, PowerLoss};

    /// More calls than any clean of this log makes.
    const STEPS_MAX: u64 = 10_000;
    let config = CleanerConfig {
        io_bytes_per_second: u64::MAX,
        ..CleanerConfig::default()
    };
    let clean =
        |log: &PartitionLog| clean_partition(log, now_ms(), &config, &mut Throttle::new(u64::MAX));
    let mut steps = 0;
    for step in 0..STEPS_MAX {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("table-0");
        let power = Arc::new(PowerLoss::new(&root).unwrap());
        let disk = Disk::new(Arc::clone(&power) as _);
        let log = PartitionLog::open_on(&disk, &root, "table-0", compacted_config(), true).unwrap();
        let mut appended = BTreeMap::new();
        for i in 0..80u32 {
            let key = format!("k{}", i % 7);
            let value = (i % 11 != 0).then(|| format!("v{i}"));
            let offset = append(&log, &key, value.as_deref());
            appended.insert(offset, (key, value));
        }
        log.flush().unwrap();
        power.cut_after(step);
        let outcome = clean(&log);
        if !power.is_off() {
            outcome.unwrap().expect("a clean");
            steps = step;
            break;
        }
        drop(log);
        power.restore(step).unwrap();
        let log =
            PartitionLog::open_on(&disk, &root, "table-0", compacted_config(), false).unwrap();
        assert!(
            log.recovery_report().corruption.is_none(),
            "step {step}: {:?}",
            log.recovery_report()
        );
        let cleaned_to = log.clean_view().first_dirty;
        check(&log, &appended, cleaned_to).unwrap_or_else(|e| panic!("step {step}: {e}"));
        let cleaned_to = clean(&log)
            .unwrap()
            .map_or(cleaned_to, |outcome| outcome.cleaned_to);
        check(&log, &appended, cleaned_to)
            .unwrap_or_else(|e| panic!("step {step}, cleaned again: {e}"));
    }
    assert!(
        steps > 0,
        "a clean never finished within {STEPS_MAX} storage calls"
    );
    eprintln!("a power loss at each of the {steps} storage calls of a clean");
}
