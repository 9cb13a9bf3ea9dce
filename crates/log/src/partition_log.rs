//! One partition: an ordered run of segments, the active one last.
//!
//! Invariants:
//! - segments are contiguous: each one's base offset equals the previous
//!   one's next offset, and `log_start_offset` is the first one's base;
//! - every offset below `durable_offset` is on disk (fdatasync returned);
//!   every segment but the active one is durable (it was synced when rolled);
//! - if the partition is corrupt, nothing at or after the corrupt offset is
//!   served or appended, and nothing is deleted;
//! - the producer state (see `producer_state`) describes exactly the batches
//!   in the segments: it is checked and updated under the same lock as the
//!   write, and rebuilt from the batch headers on open, after recovery.
//!
//! Thread-safety: `PartitionLog` is `Sync`. Appends, rolls and retention take
//! the write lock; reads and lookups share the read lock; fsync runs outside
//! both through [`GroupCommit`].

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use strata_record::time::now_ms;

use super::group_commit::GroupCommit;
use super::header_walk;
use super::producer_state::ProducerStateTable;
use super::recovery::{
    Corruption, LoadedSegments, RecoveryReport, ScanEnd, Truncation, load_segments, scan_segment,
    verify_segment,
};
use super::segment::Segment;
use super::storage::{Disk, OpenMode};
use super::transaction_index::TransactionIndex;
use super::{LogConfig, LogError};

mod append;
mod compaction;
mod delete_records;
mod flush;
mod producers;
mod read;
mod recovery_point;
mod retention;
mod transactions;

pub use compaction::{CleanView, CleanedSegment, SegmentSnapshot};
pub use flush::flush_together;
pub use producers::ActiveProducer;
pub use read::{Isolation, LogRead};
pub use retention::RetentionOutcome;

/// File holding the recovery point: offsets below it were flushed.
///
/// ```text
/// 0  8  offset   i64 big-endian
/// 8  4  crc32c   u32 of bytes 0..8
/// ```
/// Written in place after each successful flush and roll; not itself synced.
/// A stale value makes recovery walk more segments, and makes its "had been
/// reported flushed" warning err on the side of "not flushed". A bad CRC
/// reads as "unknown" (0).
const RECOVERY_POINT_FILE: &str = "recovery-point";

/// Where appended batches landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    /// Records written by this append (0 for a duplicate).
    pub record_count: i64,
    pub log_start_offset: i64,
    /// Every batch was a resend by an idempotent producer of batches the log
    /// already holds: nothing was written, and `base_offset..=last_offset`
    /// are where the originals are. Not necessarily durable yet either.
    pub duplicate: bool,
}

struct Inner {
    config: LogConfig,
    segments: BTreeMap<i64, Segment>,
    next_offset: i64,
    corruption: Option<Corruption>,
    unflushed_records: i64,
    oldest_unflushed_ms: Option<i64>,
    /// Set by `close`: no appends after the clean-shutdown flush.
    closed: bool,
    producers: ProducerStateTable,
    transactions: TransactionIndex,
    /// The start a DeleteRecords moved the log to (0 if none): offsets
    /// below it are not served even where a segment still holds them.
    recorded_start: i64,
    /// Offsets below this were cleaned (compacted topics).
    cleaner_offset: i64,
}

pub struct PartitionLog {
    disk: Disk,
    name: String,
    dir: PathBuf,
    inner: RwLock<Inner>,
    commit: GroupCommit,
    recovery_point: File,
    report: RecoveryReport,
}

impl PartitionLog {
    /// Opens (or creates) the partition in `dir`. `clean` says the previous
    /// process shut down cleanly; otherwise every segment from the recovery
    /// point on is walked and checked (see `recovery`).
    pub fn open(dir: &Path, name: &str, config: LogConfig, clean: bool) -> Result<Self, LogError> {
        Self::open_on(&Disk::os(), dir, name, config, clean)
    }

    /// [`open`](Self::open) on the given storage.
    pub fn open_on(
        disk: &Disk,
        dir: &Path,
        name: &str,
        config: LogConfig,
        clean: bool,
    ) -> Result<Self, LogError> {
        disk.create_dir_all(dir)?;
        let fresh = !dir.join(RECOVERY_POINT_FILE).exists();
        let recovery_point_file = disk.open(
            &dir.join(RECOVERY_POINT_FILE),
            OpenMode::Create,
            &format!("opening recovery point of {name} at"),
        )?;
        let recovery_point = recovery_point::read(&recovery_point_file);
        // A clean the process did not finish: its files go, or it is done.
        super::segment_swap::recover(disk, dir, name)?;
        let LoadedSegments {
            mut segments,
            mut report,
        } = load_segments(disk, dir, name, &config, clean, recovery_point)?;
        let created = segments.is_empty();
        if created {
            segments.insert(0, Segment::create(disk, dir, 0, &config)?);
        }
        if fresh || created || report.segments_scanned > 0 {
            // New files' names (and the recovery's deletions) must be durable
            // before anything appended to them is reported flushed.
            disk.sync_dir(dir)?;
        }
        let corrupt = report.corruption.is_some();
        let last = segments.values_mut().last().expect("at least one segment");
        let next_offset = last.next_offset();
        if !corrupt {
            last.unseal(&config);
        }
        // Whatever recovery read may still be only in the page cache (a killed
        // process, not a lost machine): make it durable before promising so.
        if report.segments_scanned > 0 && !corrupt {
            last.sync()?;
        }
        if report.truncation.is_none() && !corrupt && next_offset < recovery_point {
            // Whole batches that had been reported flushed are gone without
            // leaving a torn tail: the disk lost data it had confirmed.
            let truncation = Truncation {
                segment: last.log_path(),
                position: last.size_bytes(),
                bytes_cut: 0,
                log_end_offset: next_offset,
                recovery_point,
                reason: "the log ends below its recovery point".into(),
            };
            tracing::error!(partition = name, "{truncation}");
            report.truncation = Some(truncation);
        }
        // After recovery, so the state matches the batches that remain.
        let (producers, transactions, load) = header_walk::rebuild(&segments, name, now_ms())?;
        if load.batches_read > 0 {
            tracing::info!(
                partition = name,
                batches = load.batches_read,
                producers = load.producers,
                markers = load.markers,
                open_transactions = transactions.open_transactions().len(),
                elapsed_ms = load.elapsed_ms,
                "rebuilt producer state and transactions from batch headers"
            );
        }
        report.producer_state = load;
        let corruption = report.corruption.clone();
        // Recovery synced the last segment unless it found corruption.
        let durable_offset = if clean || (report.segments_scanned > 0 && !corrupt) {
            next_offset
        } else {
            recovery_point.min(next_offset)
        };
        let log = Self {
            disk: disk.clone(),
            name: name.to_string(),
            dir: dir.to_path_buf(),
            inner: RwLock::new(Inner {
                config,
                segments,
                next_offset,
                corruption,
                unflushed_records: 0,
                oldest_unflushed_ms: None,
                closed: false,
                producers,
                transactions,
                recorded_start: delete_records::read_recorded_start(dir, name).unwrap_or(0),
                cleaner_offset: compaction::read_cleaner_offset(dir),
            }),
            commit: GroupCommit::new(durable_offset),
            recovery_point: recovery_point_file,
            report,
        };
        log.write_recovery_point(durable_offset);
        Ok(log)
    }

    fn shared(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn exclusive(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    /// `topic-partition`, as used in errors and on disk.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What opening the partition found.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    pub fn log_start_offset(&self) -> i64 {
        self.shared().log_start_offset()
    }

    /// One past the last offset appended (the high watermark of one node).
    pub fn log_end_offset(&self) -> i64 {
        self.shared().next_offset
    }

    /// Offsets below this are on disk.
    pub fn durable_offset(&self) -> i64 {
        self.commit.durable_offset()
    }

    /// Total bytes of all segments.
    pub fn size_bytes(&self) -> u64 {
        self.shared()
            .segments
            .values()
            .map(Segment::size_bytes)
            .sum()
    }

    pub fn segment_count(&self) -> usize {
        self.shared().segments.len()
    }

    pub fn config(&self) -> LogConfig {
        self.shared().config.clone()
    }

    /// Replaces the config (new values apply to the next append or retention pass).
    pub fn set_config(&self, config: LogConfig) {
        self.exclusive().config = config;
    }

    /// Why the partition refuses appends, if it does.
    pub fn read_only_reason(&self) -> Option<String> {
        self.commit.failure()
    }

    /// The corruption found when the partition was opened, if any.
    pub fn corruption(&self) -> Option<Corruption> {
        self.shared().corruption.clone()
    }

    /// Seals the active segment (synced, so everything before `base_offset`
    /// is durable) and starts a new one at `base_offset`.
    fn roll(&self, inner: &mut Inner, base_offset: i64) -> Result<(), LogError> {
        // A roll syncs; after a failed sync nothing may sync again and
        // claim durability.
        if let Some(reason) = self.commit.failure() {
            return Err(self.read_only(reason));
        }
        let active = inner.active_mut();
        let sealed = active.sync().and_then(|()| active.seal());
        if let Err(error) = sealed {
            self.commit
                .fail(format!("rolling the segment failed: {error}"));
            return Err(error);
        }
        let segment = Segment::create(&self.disk, &self.dir, base_offset, &inner.config)?;
        self.disk.sync_dir(&self.dir)?;
        inner.segments.insert(base_offset, segment);
        self.commit.advance(base_offset);
        self.write_recovery_point(base_offset);
        tracing::debug!(partition = %self.name, base_offset, "rolled a new segment");
        Ok(())
    }

    /// Reads every batch of every segment and checks it as recovery would,
    /// including the segments an open trusts without reading. Changes
    /// nothing; returns the first bad batch found, if any.
    pub fn verify(&self) -> Result<Option<Corruption>, LogError> {
        let inner = self.shared();
        for segment in inner.segments.values() {
            if let Some((position, offset, reason)) = verify_segment(segment)? {
                return Ok(Some(Corruption {
                    segment: segment.log_path(),
                    position,
                    offset,
                    reason,
                }));
            }
        }
        Ok(None)
    }

    /// Rebuilds the index of any segment a reader found inconsistent.
    pub fn repair_indexes(&self) -> Result<usize, LogError> {
        let mut inner = self.exclusive();
        let Inner {
            config, segments, ..
        } = &mut *inner;
        let active_base = segments.keys().next_back().copied();
        let mut repaired = 0;
        for segment in segments.values_mut().filter(|s| s.index_suspect()) {
            let size = segment.size_bytes();
            let mut rebuilt =
                Segment::open(&self.disk, &self.dir, segment.base_offset(), config, true)?;
            if !matches!(
                scan_segment(&mut rebuilt, size, config.index_interval_bytes)?,
                ScanEnd::Clean
            ) {
                continue;
            }
            if Some(segment.base_offset()) != active_base {
                rebuilt.seal()?;
            }
            *segment = rebuilt;
            repaired += 1;
        }
        Ok(repaired)
    }

    /// Flushes and seals the indexes: the partition's part of a clean shutdown.
    /// Later appends fail; reads keep working.
    pub fn close(&self) -> Result<(), LogError> {
        self.exclusive().closed = true;
        if self.commit.failure().is_none() && self.corruption().is_none() {
            self.flush()?;
        }
        let mut inner = self.exclusive();
        inner.active_mut().seal()?;
        Ok(())
    }

    fn read_only(&self, reason: String) -> LogError {
        LogError::ReadOnly {
            partition: self.name.clone(),
            reason,
        }
    }

    fn corrupt_error(&self, corruption: &Corruption) -> LogError {
        LogError::Corrupt {
            partition: self.name.clone(),
            offset: corruption.offset,
            path: corruption.segment.clone(),
            position: corruption.position,
            reason: corruption.reason.clone(),
        }
    }
}

impl Inner {
    /// The first offset served: the first segment's base, or where a
    /// DeleteRecords moved it (never past the log end).
    fn log_start_offset(&self) -> i64 {
        let first = self
            .segments
            .keys()
            .next()
            .copied()
            .unwrap_or(self.next_offset);
        first.max(self.recorded_start).min(self.next_offset)
    }

    fn active(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .expect("a partition always has a segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a partition always has a segment")
    }
}

/// Most bytes one batch may decompress to when it is validated or searched.
const DECOMPRESSED_BYTES_MAX: usize = 1 << 30;

/// Decompressed batches may be larger than the limit on compressed ones
/// (Kafka bounds neither): allow a generous expansion, never past 1 GiB.
fn decompressed_limit(max_message_bytes: usize) -> usize {
    max_message_bytes
        .saturating_mul(64)
        .clamp(64 << 20, DECOMPRESSED_BYTES_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_record::{BatchBuilder, Compression, NewRecord, RecordBatch};

    fn batch(values: &[&str], timestamp: i64) -> Vec<u8> {
        let mut builder = BatchBuilder::new(Compression::None);
        for value in values {
            builder
                .push(NewRecord::new(None, value.as_bytes(), timestamp))
                .unwrap();
        }
        builder.build().unwrap()
    }

    fn small_config() -> LogConfig {
        LogConfig {
            segment_bytes: 1024,
            index_interval_bytes: 128,
            ..LogConfig::default()
        }
    }

    fn values_from(log: &PartitionLog, offset: i64) -> Vec<(i64, String)> {
        let bytes = log.read(offset, u64::MAX).unwrap().read_to_vec().unwrap();
        let mut out = Vec::new();
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let batch = RecordBatch::parse_and_verify(rest).unwrap();
            for record in batch.records(1 << 20).unwrap().iter() {
                let record = record.unwrap();
                out.push((
                    record.offset,
                    String::from_utf8(record.value.unwrap().to_vec()).unwrap(),
                ));
            }
            rest = &rest[batch.size_bytes()..];
        }
        out
    }

    #[test]
    fn appends_assign_consecutive_offsets_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let log = PartitionLog::open(dir.path(), "t-0", small_config(), true).unwrap();
        assert_eq!(log.append(&batch(&["a", "b"], 1)).unwrap().base_offset, 0);
        let info = log.append(&batch(&["c"], 2)).unwrap();
        assert_eq!((info.base_offset, info.last_offset), (2, 2));
        assert_eq!(log.log_end_offset(), 3);
        assert_eq!(
            values_from(&log, 1),
            [(0, "a".into()), (1, "b".into()), (2, "c".into())]
        );
        assert!(log.read(3, 100).unwrap().slices.is_empty());
        assert!(matches!(
            log.read(4, 100),
            Err(LogError::OffsetOutOfRange { .. })
        ));
    }

    #[test]
    fn segments_roll_and_survive_a_clean_and_an_unclean_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let expected: Vec<(i64, String)> = (0..200).map(|i| (i, format!("value-{i}"))).collect();
        {
            let log = PartitionLog::open(dir.path(), "t-0", small_config(), true).unwrap();
            for (_, value) in &expected {
                log.append(&batch(&[value], 5)).unwrap();
            }
            assert!(log.segment_count() > 5);
            log.close().unwrap();
        }
        for clean in [true, false] {
            let log = PartitionLog::open(dir.path(), "t-0", small_config(), clean).unwrap();
            assert_eq!(log.log_end_offset(), 200);
            assert_eq!(values_from(&log, 0), expected);
            assert_eq!(values_from(&log, 137)[0], expected[137]);
            let report = log.recovery_report();
            assert!(
                report.truncation.is_none() && report.corruption.is_none(),
                "{report:?}"
            );
        }
    }

    #[test]
    fn a_small_max_bytes_still_returns_one_whole_batch() {
        let dir = tempfile::tempdir().unwrap();
        let log = PartitionLog::open(dir.path(), "t-0", small_config(), true).unwrap();
        let b = batch(&["0123456789"; 5], 1);
        let size = b.len() as u64;
        log.append(&b).unwrap();
        log.append(&batch(&["x"], 1)).unwrap();
        let read = log.read(2, 1).unwrap();
        assert_eq!(read.size_bytes(), size);
    }
}

#[cfg(test)]
mod read_only_tests {
    use super::*;
    use crate::group_commit::Turn;
    use strata_record::{BatchBuilder, Compression, NewRecord};

    fn one_record() -> Vec<u8> {
        let mut builder = BatchBuilder::new(Compression::None);
        builder.push(NewRecord::new(None, b"v", 1)).unwrap();
        builder.build().unwrap()
    }

    #[test]
    fn a_failed_fsync_turns_the_partition_read_only_for_good() {
        let dir = tempfile::tempdir().unwrap();
        let log = PartitionLog::open(dir.path(), "t-0", LogConfig::default(), true).unwrap();
        log.append(&one_record()).unwrap();
        // What flush_to does when fdatasync fails.
        assert!(matches!(log.commit.begin(1, "t-0").unwrap(), Turn::Lead));
        log.commit
            .finish(Err("fdatasync of 0.log failed: EIO".into()));

        let error = log.append(&one_record()).unwrap_err();
        assert!(matches!(error, LogError::ReadOnly { .. }), "{error}");
        assert!(error.to_string().contains("EIO"), "{error}");
        assert!(matches!(log.flush(), Err(LogError::ReadOnly { .. })));
        assert!(log.read_only_reason().is_some());
        assert_eq!(log.log_end_offset(), 1);
        // Reads of what is there still work.
        assert_eq!(log.read(0, 1024).unwrap().slices.len(), 1);
    }

    #[test]
    fn retention_on_a_read_only_partition_neither_syncs_nor_claims_durability() {
        let dir = tempfile::tempdir().unwrap();
        let log = PartitionLog::open(dir.path(), "t-0", LogConfig::default(), true).unwrap();
        log.append(&one_record()).unwrap();
        assert!(matches!(log.commit.begin(1, "t-0").unwrap(), Turn::Lead));
        log.commit.finish(Err("fdatasync failed: EIO".into()));
        // Everything is expired, which would roll (and sync) a healthy log.
        let outcome = log.enforce_retention(i64::MAX).unwrap();
        assert_eq!(outcome.segments_deleted, 0);
        assert_eq!(log.durable_offset(), 0);
        assert_eq!(log.segment_count(), 1);
    }

    #[test]
    fn appends_after_close_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let log = PartitionLog::open(dir.path(), "t-0", LogConfig::default(), true).unwrap();
        log.close().unwrap();
        assert!(matches!(
            log.append(&one_record()),
            Err(LogError::ReadOnly { .. })
        ));
        assert!(log.read(0, 10).unwrap().slices.is_empty());
    }

    #[test]
    fn waiting_flushers_share_the_leaders_sync() {
        let commit = GroupCommit::new(0);
        assert!(matches!(commit.begin(5, "t-0").unwrap(), Turn::Lead));
        std::thread::scope(|s| {
            let follower = s.spawn(|| commit.begin(3, "t-0"));
            commit.finish(Ok(7));
            assert!(matches!(follower.join().unwrap().unwrap(), Turn::Done(7)));
        });
    }
}
