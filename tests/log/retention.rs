//! Retention: whole segments leave the partition, oldest first, when their
//! newest record is older than `retention.ms` or while the rest of the
//! partition still holds `retention.bytes`. The log start moves to a segment
//! boundary, the files leave the disk, reads below the log start are out of
//! range, the active segment is never deleted by size, and an expired active
//! segment is rolled away so the partition empties yet keeps its offsets.
//! Every outcome must survive a clean and an unclean reopen.
//!
//! Batches here all have the same size, and a segment holds exactly
//! `BATCHES_PER_SEGMENT` of them, so which offsets a segment holds is known
//! without asking the log.

use crate::support;

use std::path::Path;

use strata::log::{LogConfig, LogError, PartitionLog, file_name};

const PARTITION: &str = "retained-0";
const NOW_MS: i64 = 1_700_000_000_000;
const DAY_MS: i64 = 24 * 3_600_000;
const RETENTION_MS: i64 = DAY_MS;
const OLD_MS: i64 = NOW_MS - 30 * DAY_MS;
const RECENT_MS: i64 = NOW_MS - 60_000;
const RECORDS_PER_BATCH: i64 = 4;
const BATCHES_PER_SEGMENT: i64 = 4;
const OFFSETS_PER_SEGMENT: i64 = RECORDS_PER_BATCH * BATCHES_PER_SEGMENT;
const VALUE: &str = "a value long enough that four batches fill a minimum-size segment..";

fn sample_batch(timestamp: i64) -> Vec<u8> {
    support::batch(&[VALUE; RECORDS_PER_BATCH as usize], timestamp)
}

fn batch_bytes() -> u64 {
    sample_batch(NOW_MS).len() as u64
}

fn segment_bytes() -> u64 {
    BATCHES_PER_SEGMENT as u64 * batch_bytes()
}

/// Segments of exactly `BATCHES_PER_SEGMENT` batches; no time-based rolls,
/// so the layout does not depend on the wall clock.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: segment_bytes(),
        index_interval_bytes: 128,
        segment_ms: i64::MAX,
        retention_ms: RETENTION_MS,
        retention_bytes: -1,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, config: LogConfig, clean: bool) -> PartitionLog {
    PartitionLog::open(dir, PARTITION, config, clean).expect("partition opens")
}

/// Appends one batch per timestamp.
fn append_batches(log: &PartitionLog, timestamps: &[i64]) {
    for &timestamp in timestamps {
        log.append(&sample_batch(timestamp))
            .expect("append succeeds");
    }
}

/// Appends one full segment per timestamp, every record carrying it.
fn append_segments(log: &PartitionLog, timestamps: &[i64]) {
    for &timestamp in timestamps {
        append_batches(log, &[timestamp; BATCHES_PER_SEGMENT as usize]);
    }
}

fn segment_bases_on_disk(dir: &Path) -> Vec<i64> {
    support::segment_bases(dir).expect("segment files list")
}

fn assert_segment_files_gone(dir: &Path, base_offset: i64) {
    for extension in ["log", "index", "timeindex"] {
        let path = dir.join(file_name(base_offset, extension));
        assert!(!path.exists(), "{} survived retention", path.display());
    }
}

/// A read just below the log start fails, naming the offset asked for, the
/// log start and the log end.
fn assert_out_of_range_below(log: &PartitionLog, log_start: i64) {
    let offset = log_start - 1;
    let log_end = log.log_end_offset();
    let error = log.read(offset, u64::MAX).unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(
            error,
            LogError::OffsetOutOfRange { offset: o, log_start_offset: s, log_end_offset: e, .. }
                if (o, s, e) == (offset, log_start, log_end)
        ),
        "{error:?}"
    );
    for named in [offset, log_start, log_end] {
        assert!(
            message.contains(&named.to_string()),
            "'{message}' does not name {named}"
        );
    }
    assert!(
        message.contains(PARTITION),
        "'{message}' does not name the partition"
    );
}

/// The partition holds exactly offsets `log_start..log_end`, all readable.
fn assert_holds(log: &PartitionLog, log_start: i64, log_end: i64) {
    assert_eq!(log.log_start_offset(), log_start);
    assert_eq!(log.log_end_offset(), log_end);
    let offsets: Vec<i64> = support::read_all(log, log_start)
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, (log_start..log_end).collect::<Vec<_>>());
    if log_start > 0 {
        assert_out_of_range_below(log, log_start);
    }
}

#[test]
fn segments_older_than_retention_ms_are_deleted_with_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config(), true);
    append_segments(&log, &[OLD_MS, OLD_MS, OLD_MS, RECENT_MS, RECENT_MS]);
    assert_eq!(segment_bases_on_disk(dir.path()), [0, 16, 32, 48, 64]);

    let outcome = log.enforce_retention(NOW_MS).unwrap();

    assert_eq!(outcome.segments_deleted, 3);
    assert_eq!(outcome.bytes_deleted, 3 * segment_bytes());
    assert_eq!(outcome.log_start_offset, 3 * OFFSETS_PER_SEGMENT);
    assert_eq!(log.size_bytes(), 2 * segment_bytes());
    for base in [0, 16, 32] {
        assert_segment_files_gone(dir.path(), base);
    }
    assert_eq!(segment_bases_on_disk(dir.path()), [48, 64]);
    assert_holds(&log, 48, 80);
    assert_eq!(log.offset_for_timestamp(0).unwrap(), Some((48, RECENT_MS)));
}

#[test]
fn reads_below_log_start_are_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config(), true);
    append_segments(&log, &[OLD_MS, RECENT_MS]);
    log.enforce_retention(NOW_MS).unwrap();
    assert_eq!(log.log_start_offset(), 16);
    for offset in [0, 1, 15] {
        assert!(
            matches!(log.read(offset, 1), Err(LogError::OffsetOutOfRange { .. })),
            "offset {offset}"
        );
    }
    assert_out_of_range_below(&log, 16);
    let read = log.read(16, 1).unwrap();
    assert_eq!(read.log_start_offset, 16);
    assert_eq!(support::decode(&read.read_to_vec().unwrap())[0].offset, 16);
}

#[test]
fn retention_stops_at_the_first_segment_that_is_not_expired() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config(), true);
    // Retention removes a prefix: the old third segment waits behind the
    // recent second one.
    append_segments(&log, &[OLD_MS, RECENT_MS, OLD_MS, RECENT_MS]);

    let outcome = log.enforce_retention(NOW_MS).unwrap();

    assert_eq!(outcome.segments_deleted, 1);
    assert_eq!(segment_bases_on_disk(dir.path()), [16, 32, 48]);
    assert_holds(&log, 16, 64);
}

#[test]
fn a_segment_is_kept_while_its_newest_record_is_within_retention() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config(), true);
    append_batches(&log, &[OLD_MS, OLD_MS, RECENT_MS, OLD_MS]);
    append_segments(&log, &[OLD_MS, NOW_MS]);

    assert_eq!(log.enforce_retention(NOW_MS).unwrap().segments_deleted, 0);
    assert_holds(&log, 0, 48);
    // A day later the newest record of the first two segments is past
    // retention; the third, a minute newer, is not.
    let outcome = log.enforce_retention(RECENT_MS + RETENTION_MS + 1).unwrap();
    assert_eq!(outcome.segments_deleted, 2);
    assert_holds(&log, 32, 48);
}

#[test]
fn retention_ms_of_minus_one_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_ms: -1,
        ..config()
    };
    let log = open(dir.path(), config, true);
    append_segments(&log, &[OLD_MS, OLD_MS, OLD_MS]);
    let outcome = log.enforce_retention(i64::MAX).unwrap();
    assert_eq!(outcome.segments_deleted, 0);
    assert_holds(&log, 0, 48);
}

#[test]
fn an_expired_active_segment_is_rolled_and_the_partition_empties_but_keeps_its_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config(), true);
    // One and a half segments, all old: the active one is expired too.
    append_batches(&log, &[OLD_MS; 6]);
    assert_eq!(log.segment_count(), 2);

    let outcome = log.enforce_retention(NOW_MS).unwrap();

    assert_eq!(outcome.segments_deleted, 2);
    assert_eq!(outcome.log_start_offset, 24);
    assert_eq!(log.segment_count(), 1);
    assert_eq!(segment_bases_on_disk(dir.path()), [24]);
    assert_segment_files_gone(dir.path(), 0);
    assert_segment_files_gone(dir.path(), 16);
    assert_holds(&log, 24, 24);
    assert!(log.read(24, u64::MAX).unwrap().slices.is_empty());
    assert_eq!(log.offset_for_timestamp(0).unwrap(), None);
    log.close().unwrap();
    drop(log);

    let log = open(dir.path(), config(), true);
    assert_holds(&log, 24, 24);
    let info = log.append(&sample_batch(RECENT_MS)).unwrap();
    assert_eq!((info.base_offset, info.log_start_offset), (24, 24));
    assert_holds(&log, 24, 28);
    drop(log);

    let log = open(dir.path(), config(), false);
    assert_holds(&log, 24, 28);
    assert_eq!(
        log.append(&sample_batch(RECENT_MS)).unwrap().base_offset,
        28
    );
    assert_eq!(log.enforce_retention(NOW_MS).unwrap().segments_deleted, 0);
    assert_holds(&log, 24, 32);
}

#[test]
fn size_retention_deletes_the_oldest_segments_while_the_rest_still_holds_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config(), true);
    append_segments(&log, &[RECENT_MS; 5]);
    let segment = segment_bytes();

    // Two and a half segments: deleting a third would go below the limit.
    log.set_config(LogConfig {
        retention_bytes: (5 * segment / 2) as i64,
        ..config()
    });
    let outcome = log.enforce_retention(NOW_MS).unwrap();
    assert_eq!(
        (outcome.segments_deleted, outcome.bytes_deleted),
        (2, 2 * segment)
    );
    assert_eq!(segment_bases_on_disk(dir.path()), [32, 48, 64]);
    assert_segment_files_gone(dir.path(), 0);
    assert_segment_files_gone(dir.path(), 16);
    assert_holds(&log, 32, 80);

    // Exactly two segments: the remainder may equal the limit.
    log.set_config(LogConfig {
        retention_bytes: (2 * segment) as i64,
        ..config()
    });
    assert_eq!(log.enforce_retention(NOW_MS).unwrap().segments_deleted, 1);
    assert_eq!(log.size_bytes(), 2 * segment);
    assert_holds(&log, 48, 80);
}

#[test]
fn size_retention_never_deletes_the_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config(), true);
    append_batches(&log, &[RECENT_MS; 3]);
    log.set_config(LogConfig {
        retention_bytes: 1,
        ..config()
    });
    // The only segment is far over the limit, and it is the active one.
    assert_eq!(log.enforce_retention(NOW_MS).unwrap().segments_deleted, 0);
    assert_holds(&log, 0, 12);

    append_batches(&log, &[RECENT_MS; 7]);
    assert_eq!(log.segment_count(), 3);
    let outcome = log.enforce_retention(NOW_MS).unwrap();
    assert_eq!(outcome.segments_deleted, 2);
    assert_eq!(segment_bases_on_disk(dir.path()), [32]);
    assert_holds(&log, 32, 40);
    assert_eq!(
        log.append(&sample_batch(RECENT_MS)).unwrap().base_offset,
        40
    );
}

#[test]
fn retention_results_survive_a_clean_and_an_unclean_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = open(dir.path(), config(), true);
        append_segments(&log, &[OLD_MS, OLD_MS, RECENT_MS, RECENT_MS]);
        append_batches(&log, &[RECENT_MS]);
        assert_eq!(log.enforce_retention(NOW_MS).unwrap().segments_deleted, 2);
        log.close().unwrap();
    }
    for clean in [true, false] {
        let log = open(dir.path(), config(), clean);
        assert_eq!(
            segment_bases_on_disk(dir.path()),
            [32, 48, 64],
            "clean: {clean}"
        );
        assert_holds(&log, 32, 68);
        assert_eq!(log.enforce_retention(NOW_MS).unwrap().segments_deleted, 0);
        // Dropped without close: the next open is unclean.
    }
}

#[test]
fn a_segment_rolled_because_its_time_index_filled_is_not_expired_early_after_a_reopen() {
    // The smallest `segment.index.bytes` (64) gives a time index of five
    // entries; indexing every batch fills it after six batches and forces a
    // roll. The sealed segment's age must still be its newest record's.
    let config = LogConfig {
        segment_index_bytes: 64,
        index_interval_bytes: 1,
        segment_bytes: 1 << 20,
        ..config()
    };
    let dir = tempfile::tempdir().unwrap();
    {
        let log = open(dir.path(), config.clone(), true);
        append_batches(
            &log,
            &[
                OLD_MS,
                OLD_MS + 1,
                OLD_MS + 2,
                OLD_MS + 3,
                OLD_MS + 4,
                RECENT_MS,
            ],
        );
        append_batches(&log, &[RECENT_MS]);
        assert_eq!(segment_bases_on_disk(dir.path()), [0, 24]);
        assert_eq!(log.enforce_retention(NOW_MS).unwrap().segments_deleted, 0);
        log.close().unwrap();
    }
    for clean in [true, false] {
        let log = open(dir.path(), config.clone(), clean);
        let outcome = log.enforce_retention(NOW_MS).unwrap();
        assert_eq!(
            outcome.segments_deleted, 0,
            "clean: {clean}: a recent record was deleted"
        );
        assert_holds(&log, 0, 28);
    }
}

#[test]
fn records_without_timestamps_age_by_the_segment_files_modification_time() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config(), true);
    // -1 is "no timestamp": such a segment must not count as ancient.
    log.append(&support::batch(&["a", "b"], -1)).unwrap();
    log.flush().unwrap();
    let now = strata_now_ms();
    let outcome = log.enforce_retention(now).unwrap();
    assert_eq!(outcome.segments_deleted, 0);
    assert_eq!(log.log_start_offset(), 0);
    // Once the file is older than retention.ms, it goes.
    let outcome = log.enforce_retention(now + 30 * 24 * 3_600_000).unwrap();
    assert_eq!(outcome.segments_deleted, 1);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (2, 2));
}

#[test]
fn a_batch_whose_max_timestamp_understates_its_records_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config(), true);
    let mut bytes = support::batch(&["a"], 1_700_000_000_000);
    // maxTimestamp lies at bytes 35..43; the CRC starts at 21, so re-seal.
    bytes[35..43].copy_from_slice(&0i64.to_be_bytes());
    let crc = strata::record::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    let error = log.append(&bytes).unwrap_err();
    assert!(error.to_string().contains("maxTimestamp"), "{error}");
    assert_eq!(log.log_end_offset(), 0);
}

fn strata_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}
