//! Idempotent producers at the log: a resend is answered with the original
//! offsets and not stored twice, a gap or a fenced epoch is refused with
//! nothing written, and the producer state survives a clean and an unclean
//! reopen, a torn tail cut by recovery, and retention; producer ids handed
//! out stay above every id found in the logs.

use crate::support;

use std::fs;

use strata::log::{
    AppendInfo, BATCHES_PER_PRODUCER, LogConfig, LogError, LogManager, PRODUCER_ID_BLOCK,
    PartitionLog,
};
use strata::record::{BatchBuilder, Compression, NewRecord};
use support::{read_all, segment_logs, small_config};

const NAME: &str = "idem-0";
const TIMESTAMP: i64 = 1_700_000_000_000;

/// A batch of `count` records from producer `id` at `epoch`, sequences from
/// `first`, each naming its producer, epoch and sequence.
fn producer_batch(id: i64, epoch: i16, first: i32, count: usize) -> Vec<u8> {
    let values: Vec<String> = (0..count)
        .map(|i| format!("p{id}-e{epoch}-s{}", i64::from(first) + i as i64))
        .collect();
    support::producer_batch(Compression::None, (id, epoch), first, &values)
}

/// Like [`producer_batch`], with records of 40 KiB.
fn large_producer_batch(id: i64, epoch: i16, first: i32, count: usize) -> Vec<u8> {
    let values = vec![vec![b'v'; 40 << 10]; count];
    support::producer_batch(Compression::None, (id, epoch), first, &values)
}

fn values(log: &PartitionLog) -> Vec<String> {
    support::values(&read_all(log, log.log_start_offset()))
}

#[test]
fn a_resend_is_answered_with_the_original_offsets_and_not_stored_twice() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), NAME, small_config(), true).unwrap();
    log.append(&support::batch(&["plain"], TIMESTAMP)).unwrap();
    let mut originals = Vec::new();
    for i in 0..6 {
        let info = log.append(&producer_batch(7, 0, i * 3, 3)).unwrap();
        assert!(!info.duplicate);
        originals.push(info);
    }
    let end = log.log_end_offset();
    let stored = values(&log);
    // Each of the last five batches, resent, points at its original.
    for (i, original) in originals.iter().enumerate().skip(1) {
        let again = log.append(&producer_batch(7, 0, i as i32 * 3, 3)).unwrap();
        assert!(again.duplicate, "batch {i}");
        assert_eq!(
            (again.base_offset, again.last_offset, again.record_count),
            (original.base_offset, original.last_offset, 0)
        );
    }
    // The sixth-newest is no longer remembered with its offsets.
    let error = log.append(&producer_batch(7, 0, 0, 3)).unwrap_err();
    assert!(
        matches!(error, LogError::DuplicateSequence { .. }),
        "{error}"
    );
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(values(&log), stored);
    assert_eq!(log.producer_batches(7).len(), BATCHES_PER_PRODUCER);
}

#[test]
fn gaps_fenced_epochs_and_new_epochs_not_at_zero_are_refused_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), NAME, small_config(), true).unwrap();
    log.append(&producer_batch(3, 1, 0, 2)).unwrap();
    let end = log.log_end_offset();
    let size = log.size_bytes();
    let gap = log.append(&producer_batch(3, 1, 3, 1)).unwrap_err();
    assert!(
        matches!(
            gap,
            LogError::OutOfOrderSequence {
                first_sequence: 3,
                expected_sequence: 2,
                ..
            }
        ),
        "{gap}"
    );
    let fenced = log.append(&producer_batch(3, 0, 2, 1)).unwrap_err();
    assert!(
        matches!(
            fenced,
            LogError::InvalidProducerEpoch {
                epoch: 0,
                current_epoch: 1,
                ..
            }
        ),
        "{fenced}"
    );
    let new_epoch_late = log.append(&producer_batch(3, 2, 5, 1)).unwrap_err();
    assert!(
        matches!(new_epoch_late, LogError::OutOfOrderSequence { .. }),
        "{new_epoch_late}"
    );
    assert_eq!((log.log_end_offset(), log.size_bytes()), (end, size));

    // A new epoch at 0 is taken, and fences the old one.
    log.append(&producer_batch(3, 2, 0, 1)).unwrap();
    assert_eq!(log.producer_epoch(3), Some(2));
    assert!(matches!(
        log.append(&producer_batch(3, 1, 2, 1)),
        Err(LogError::InvalidProducerEpoch { .. })
    ));
    // Batches without a producer id are never checked.
    log.append(&support::batch(&["x"], TIMESTAMP)).unwrap();
    log.append(&support::batch(&["x"], TIMESTAMP)).unwrap();
}

#[test]
fn a_buffer_of_several_batches_is_checked_whole_and_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), NAME, small_config(), true).unwrap();
    let mut two = producer_batch(1, 0, 0, 2);
    two.extend(producer_batch(1, 0, 2, 2));
    let info = log.append(&two).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (0, 3));
    // Both resent together: one duplicate answer spanning both.
    let again = log.append(&two).unwrap();
    assert!(again.duplicate);
    assert_eq!((again.base_offset, again.last_offset), (0, 3));
    // The second batch has a gap: the first, fine on its own, is not written.
    let mut gapped = producer_batch(1, 0, 4, 1);
    gapped.extend(producer_batch(1, 0, 9, 1));
    assert!(matches!(
        log.append(&gapped),
        Err(LogError::OutOfOrderSequence { .. })
    ));
    assert_eq!(log.log_end_offset(), 4);
    log.append(&producer_batch(1, 0, 4, 1)).unwrap();
}

#[test]
fn batches_without_a_producer_or_a_sequence_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), NAME, small_config(), true).unwrap();
    // A transactional batch needs a producer id.
    let mut builder = BatchBuilder::new(Compression::None).transactional(true);
    builder.push(NewRecord::new(None, b"t", TIMESTAMP)).unwrap();
    let error = log.append(&builder.build().unwrap()).unwrap_err();
    assert!(matches!(error, LogError::InvalidBatch(_)), "{error}");
    // An idempotent batch needs an epoch and a sequence.
    let mut bad = producer_batch(5, 0, 0, 1);
    bad[53..57].copy_from_slice(&(-1i32).to_be_bytes()); // baseSequence
    reseal(&mut bad);
    assert!(matches!(log.append(&bad), Err(LogError::InvalidBatch(_))));
    assert_eq!(log.log_end_offset(), 0);
}

/// Rewrites the CRC after a header edit.
fn reseal(batch: &mut [u8]) {
    let crc = strata::record::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

#[test]
fn producer_state_survives_a_clean_and_an_unclean_reopen() {
    // Segments that hold large batches (larger than the walk's read
    // window) and the small ones after them.
    let config = LogConfig {
        segment_bytes: 200 << 10,
        ..small_config()
    };
    for clean in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let offsets: Vec<AppendInfo> = {
            let log = PartitionLog::open(dir.path(), NAME, config.clone(), true).unwrap();
            let mut offsets = Vec::new();
            // Enough batches to roll several segments; some large, whose
            // successors' headers the walk on open reads one by one.
            for i in 0..60 {
                let batch = if i % 10 == 5 {
                    large_producer_batch(11, 4, i * 2, 2)
                } else {
                    producer_batch(11, 4, i * 2, 2)
                };
                offsets.push(log.append(&batch).unwrap());
                log.append(&support::batch(
                    &["filler between producer batches"],
                    TIMESTAMP,
                ))
                .unwrap();
            }
            log.append(&producer_batch(12, 0, 100, 1)).unwrap();
            if clean {
                log.close().unwrap();
            }
            offsets
        };
        assert!(segment_logs(dir.path()).unwrap().len() > 1);
        let log = PartitionLog::open(dir.path(), NAME, config.clone(), clean).unwrap();
        let load = log.producer_state_load();
        assert_eq!(load.batches_read, 121);
        assert_eq!(load.producers, 2);
        let end = log.log_end_offset();
        let last = offsets.last().unwrap();
        let again = log.append(&producer_batch(11, 4, 118, 2)).unwrap();
        assert!(again.duplicate, "clean={clean}");
        assert_eq!(again.base_offset, last.base_offset);
        assert!(matches!(
            log.append(&producer_batch(11, 4, 121, 1)),
            Err(LogError::OutOfOrderSequence { .. })
        ));
        assert!(matches!(
            log.append(&producer_batch(11, 3, 0, 1)),
            Err(LogError::InvalidProducerEpoch { .. })
        ));
        assert!(
            log.append(&producer_batch(12, 0, 100, 1))
                .unwrap()
                .duplicate
        );
        assert_eq!(log.log_end_offset(), end);
        assert!(
            !log.append(&producer_batch(11, 4, 120, 1))
                .unwrap()
                .duplicate
        );
    }
}

#[test]
fn a_torn_tail_cut_by_recovery_leaves_its_batch_unknown_to_the_producer_state() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_ms: i64::MAX,
        ..small_config()
    };
    {
        let log = PartitionLog::open(dir.path(), NAME, config.clone(), true).unwrap();
        for i in 0..4 {
            log.append(&producer_batch(2, 0, i * 5, 5)).unwrap();
        }
        // Dropped without close: a crash. Then the last batch is torn.
    }
    let active = segment_logs(dir.path()).unwrap().pop().unwrap();
    let len = fs::metadata(&active).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&active)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    let log = PartitionLog::open(dir.path(), NAME, config, false).unwrap();
    assert!(log.recovery_report().truncation.is_some());
    assert_eq!(log.log_end_offset(), 15);
    // The cut batch (sequences 15..=19) is not a duplicate: it is appended,
    // at the offset the cut freed.
    let info = log.append(&producer_batch(2, 0, 15, 5)).unwrap();
    assert!(!info.duplicate);
    assert_eq!(info.base_offset, 15);
    // And the ones before it still are duplicates.
    assert_eq!(
        log.append(&producer_batch(2, 0, 10, 5))
            .unwrap()
            .base_offset,
        10
    );
    assert_eq!(log.producer_batches(2).len(), 4);
}

#[test]
fn retention_keeps_producer_state_until_a_restart_forgets_deleted_producers() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_ms: i64::MAX,
        retention_ms: 1,
        ..small_config()
    };
    let log = PartitionLog::open(dir.path(), NAME, config.clone(), true).unwrap();
    // Old timestamps: everything is past retention.
    let mut builder = BatchBuilder::new(Compression::None).producer(8, 0, 0);
    builder.push(NewRecord::new(None, b"old", 1_000)).unwrap();
    log.append(&builder.build().unwrap()).unwrap();
    let outcome = log.enforce_retention(TIMESTAMP).unwrap();
    assert_eq!(outcome.segments_deleted, 1);
    assert_eq!(log.log_start_offset(), 1);
    // Still known while open: the resend is a duplicate, a gap is refused.
    let mut resend = BatchBuilder::new(Compression::None).producer(8, 0, 0);
    resend.push(NewRecord::new(None, b"old", 1_000)).unwrap();
    assert!(log.append(&resend.build().unwrap()).unwrap().duplicate);
    assert!(matches!(
        log.append(&producer_batch(8, 0, 5, 1)),
        Err(LogError::OutOfOrderSequence { .. })
    ));
    log.close().unwrap();
    drop(log);
    // After a restart the producer is unknown: any sequence is accepted.
    let log = PartitionLog::open(dir.path(), NAME, config, true).unwrap();
    assert_eq!(log.producer_epoch(8), None);
    assert!(!log.append(&producer_batch(8, 0, 5, 1)).unwrap().duplicate);
}

#[test]
fn producer_ids_stay_above_every_id_found_in_the_logs() {
    let dir = tempfile::tempdir().unwrap();
    let client_chosen = 3 * PRODUCER_ID_BLOCK + 41;
    {
        let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        let handed = log.producer_ids().new_producer().unwrap();
        assert_eq!(handed.producer_id, 0);
        let topic = log.create_topic("t", 2, Default::default()).unwrap();
        topic.partitions[1]
            .append(&producer_batch(client_chosen, 0, 0, 1))
            .unwrap();
        // Killed: no close.
    }
    let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
    let next = log.producer_ids().new_producer().unwrap();
    assert_eq!(next.producer_id, client_chosen + 1);
    assert_eq!(log.producer_epoch(client_chosen), Some(0));
}
