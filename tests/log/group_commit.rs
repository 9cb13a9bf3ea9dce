//! Group commit under contention: many producers append to one partition
//! and each waits for its own records to be durable (acks=all). Whatever the
//! interleaving, each flush must cover the caller's records, the partition
//! must end fully durable, every producer's records must appear once and in
//! its order, and an unclean reopen must keep every record whose flush
//! returned.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;

use strata::log::{LogConfig, PartitionLog};

const PARTITION: &str = "acks-all-0";
const PRODUCERS: usize = 12;
const APPENDS_PER_PRODUCER: usize = 60;

/// Small segments so that rolls (which sync and advance the durable offset
/// themselves) race with the group syncs.
fn config() -> LogConfig {
    LogConfig {
        segment_ms: i64::MAX,
        ..support::small_config()
    }
}

/// What one producer was told: for each append, its last offset and the
/// durable offset its flush returned.
#[derive(Debug, Default)]
struct Acks {
    appends: Vec<(i64, i64)>,
}

/// Runs `PRODUCERS` threads, each appending batches of 1..=3 records keyed by
/// the producer and flushing after every append.
fn produce_concurrently(log: &PartitionLog) -> Vec<Acks> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..PRODUCERS)
            .map(|producer| scope.spawn(move || produce(log, producer)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("producer thread"))
            .collect()
    })
}

fn produce(log: &PartitionLog, producer: usize) -> Acks {
    let key = producer_key(producer);
    let mut acks = Acks::default();
    for append in 0..APPENDS_PER_PRODUCER {
        let values: Vec<String> = (0..1 + append % 3)
            .map(|i| format!("{append}.{i}"))
            .collect();
        let batch = support::batch_with(
            strata::record::Compression::None,
            values
                .iter()
                .map(|v| (Some(key.as_bytes()), v.as_bytes(), 1_000)),
        );
        let info = log.append(&batch).expect("append succeeds");
        let durable = log.flush_to(info.last_offset + 1).expect("flush succeeds");
        acks.appends.push((info.last_offset, durable));
    }
    acks
}

fn producer_key(producer: usize) -> String {
    format!("producer-{producer}")
}

/// Every keyed record, grouped by producer key, as (offset, value).
fn by_producer(log: &PartitionLog) -> BTreeMap<String, Vec<(i64, String)>> {
    let mut grouped: BTreeMap<String, Vec<(i64, String)>> = BTreeMap::new();
    for record in support::read_all(log, log.log_start_offset()) {
        let Some(key) = record.key else { continue };
        let key = String::from_utf8(key).unwrap();
        let value = String::from_utf8(record.value.expect("valued")).unwrap();
        grouped.entry(key).or_default().push((record.offset, value));
    }
    grouped
}

/// Each producer's records are all there, once, in the order it sent them,
/// at the offsets its appends were given.
fn assert_every_producer_complete(log: &PartitionLog, all_acks: &[Acks]) {
    let grouped = by_producer(log);
    assert_eq!(grouped.len(), PRODUCERS);
    for (producer, acks) in all_acks.iter().enumerate() {
        let records = &grouped[&producer_key(producer)];
        let expected: Vec<String> = (0..APPENDS_PER_PRODUCER)
            .flat_map(|append| (0..1 + append % 3).map(move |i| format!("{append}.{i}")))
            .collect();
        let values: Vec<&str> = records.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(values, expected, "producer {producer}");
        assert!(
            records.windows(2).all(|w| w[0].0 < w[1].0),
            "producer {producer} out of order"
        );
        let last_offsets: Vec<i64> = acks.appends.iter().map(|&(last, _)| last).collect();
        let mut record_offsets = records.iter().map(|&(offset, _)| offset);
        for (append, &last) in last_offsets.iter().enumerate() {
            let batch_last = record_offsets.by_ref().take(1 + append % 3).last();
            assert_eq!(
                batch_last,
                Some(last),
                "producer {producer}, append {append}"
            );
        }
    }
}

fn total_records() -> i64 {
    (0..APPENDS_PER_PRODUCER)
        .map(|append| 1 + (append % 3) as i64)
        .sum::<i64>()
        * PRODUCERS as i64
}

fn open(dir: &Path, clean: bool) -> PartitionLog {
    PartitionLog::open(dir, PARTITION, config(), clean).expect("partition opens")
}

#[test]
fn every_concurrent_flush_covers_its_own_appends() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);

    let all_acks = produce_concurrently(&log);

    for (producer, acks) in all_acks.iter().enumerate() {
        for &(last_offset, durable) in &acks.appends {
            assert!(
                durable > last_offset,
                "producer {producer}: flush to {} returned {durable}",
                last_offset + 1
            );
            assert!(durable <= log.log_end_offset());
        }
    }
    assert_eq!(log.log_end_offset(), total_records());
    assert_eq!(log.durable_offset(), log.log_end_offset());
    assert!(log.segment_count() > 1, "no roll raced with the flushes");
    assert_every_producer_complete(&log, &all_acks);
}

#[test]
fn a_flush_to_an_offset_already_durable_returns_at_once_with_the_durable_offset() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    log.append(&support::batch(&["a", "b", "c"], 1_000))
        .unwrap();
    assert_eq!(log.flush_to(3).unwrap(), 3);
    log.append(&support::batch(&["d"], 1_000)).unwrap();
    // Offsets below 3 are durable already, so no sync runs: the answer is the
    // durable offset as it stands, short of the unflushed "d".
    assert_eq!(log.flush_to(2).unwrap(), 3);
    assert_eq!(log.durable_offset(), 3);
    assert_eq!(log.flush().unwrap(), 4);
    assert_eq!(log.durable_offset(), 4);
}

#[test]
fn every_flushed_record_survives_an_unclean_reopen() {
    let dir = tempfile::tempdir().unwrap();
    // The log is dropped without close at the end of this block, as a crash
    // would leave it.
    let all_acks = {
        let log = open(dir.path(), true);
        let all_acks = produce_concurrently(&log);
        // One more append, unkeyed and never flushed: it may or may not
        // survive, and it belongs to no producer.
        log.append(&support::batch(&["unflushed"], 1_000)).unwrap();
        all_acks
    };
    let flushed_to = all_acks
        .iter()
        .flat_map(|acks| acks.appends.iter().map(|&(_, durable)| durable))
        .max()
        .unwrap();

    let log = open(dir.path(), false);

    let report = log.recovery_report();
    assert!(report.segments_scanned > 0, "{report:?}");
    assert!(
        report.truncation.is_none() && report.corruption.is_none(),
        "{report:?}"
    );
    assert!(log.log_end_offset() >= flushed_to);
    assert_eq!(log.durable_offset(), log.log_end_offset());
    let keyed = by_producer(&log).values().map(Vec::len).sum::<usize>();
    assert_eq!(keyed as i64, total_records());
    assert_every_producer_complete(&log, &all_acks);
}

#[test]
fn partitions_flushed_together_each_reach_their_target_and_answer_in_order() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let logs: Vec<_> = dirs.iter().map(|dir| open(dir.path(), true)).collect();
    for (i, log) in logs.iter().enumerate() {
        let values: Vec<String> = (0..=i).map(|n| n.to_string()).collect();
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        log.append(&support::batch(&values, 1_000)).unwrap();
    }
    let targets: Vec<(&PartitionLog, i64)> =
        logs.iter().map(|log| (log, log.log_end_offset())).collect();
    let durable: Vec<i64> = strata::log::flush_together(&targets)
        .into_iter()
        .map(|result| result.expect("the sync succeeds"))
        .collect();
    assert_eq!(durable, vec![1, 2, 3], "one result per target, in order");
    for log in &logs {
        assert_eq!(log.durable_offset(), log.log_end_offset());
    }
    assert!(strata::log::flush_together(&[]).is_empty());
}
