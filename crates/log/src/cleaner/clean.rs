//! One clean of one partition: which segments may be cleaned, the map of
//! each key's latest offset in the dirty ones, and the rewrite of every
//! cleanable segment keeping what must stay.
//!
//! A record of a cleanable segment is kept unless:
//! - a later record of the same key is in the mapped dirty section;
//! - it belongs to an aborted transaction;
//! - it is a tombstone (null value) that has been through a clean before
//!   and whose segment was cleaned more than `delete.retention.ms` ago (so
//!   a reader catching up had that long to see the delete).
//!
//! Batches whose records all go are dropped, except a segment's last batch
//! (kept empty, so the segment still ends where it did and the next one
//! starts there) and a producer's last batch (kept empty, so its sequence
//! and epoch survive a restart). A transaction marker goes once nothing of
//! its transaction remains and its segment is past the same horizon as
//! tombstones. Offsets never change: a reader at a removed offset gets the
//! next record.
//!
//! Cleanable segments: closed ones wholly below the last stable offset
//! (open transactions are not decided yet) whose newest record is older
//! than `min.compaction.lag.ms`. A partition is cleaned when its dirty
//! share of them reaches `min.cleanable.dirty.ratio`, or its oldest dirty
//! record is older than `max.compaction.lag.ms`.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::FileExt;

use super::offset_map::OffsetMap;
use super::throttle::Throttle;
use crate::error::IoContext;
use crate::segment_swap as swap;
use crate::storage::{Appender, OpenMode};
use crate::{
    AbortedTransaction, CleanView, CleanedSegment, LogError, PartitionLog, SegmentSnapshot,
};
use strata_record::{BATCH_HEADER_BYTES, BatchHeader, RecordBatch, retain_records};

/// Largest batch decompressed while cleaning.
const DECOMPRESSED_BYTES_MAX: usize = 1 << 30;

/// What one clean did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanOutcome {
    pub segments_rewritten: usize,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_removed: u64,
    /// Offsets below this are now clean.
    pub cleaned_to: i64,
}

/// How the cleaner runs.
#[derive(Debug, Clone)]
pub struct CleanerConfig {
    /// Memory for the key map of one clean.
    pub map_bytes_max: usize,
    /// I/O budget of the cleaner (reads and writes together).
    pub io_bytes_per_second: u64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        Self {
            map_bytes_max: 128 << 20,
            io_bytes_per_second: 1 << 30,
        }
    }
}

/// Cleans `log` if it is compacted and due; `None` when there was nothing
/// to do.
pub fn clean_partition(
    log: &PartitionLog,
    now_ms: i64,
    config: &CleanerConfig,
    throttle: &mut Throttle,
) -> Result<Option<CleanOutcome>, LogError> {
    let view = log.clean_view();
    if !view.config.cleanup.compact {
        return Ok(None);
    }
    let cleanable = cleanable_segments(&view, now_ms);
    let dirty: Vec<&SegmentSnapshot> = cleanable
        .iter()
        .filter(|s| s.next_offset > view.first_dirty)
        .collect();
    if dirty.is_empty() {
        return Ok(None);
    }
    let total: u64 = cleanable.iter().map(|s| s.size).sum();
    let dirty_bytes: u64 = dirty.iter().map(|s| s.size).sum();
    let ratio = dirty_bytes as f64 / total.max(1) as f64;
    let overdue = view.config.max_compaction_lag_ms < i64::MAX
        && dirty[0].max_timestamp >= 0
        && dirty[0].max_timestamp < now_ms.saturating_sub(view.config.max_compaction_lag_ms);
    if ratio < view.config.min_cleanable_dirty_ratio && !overdue {
        return Ok(None);
    }
    let aborted = Aborted::new(&view.aborted);
    let mut outcome = CleanOutcome::default();
    let mut map = OffsetMap::new(config.map_bytes_max);
    let mut cleaned_to = view.first_dirty;
    for segment in &dirty {
        if map.is_full() {
            break;
        }
        outcome.bytes_read += map_segment(segment, &aborted, &mut map)?;
        throttle.spend(segment.size);
        cleaned_to = segment.next_offset;
    }
    let mut cleaned: Vec<CleanedSegment> = Vec::new();
    let mut state = RewriteState::default();
    for segment in cleanable.iter().filter(|s| s.base_offset < cleaned_to) {
        let horizon_passed = segment.compacted
            && segment.modified_ms < now_ms.saturating_sub(view.config.delete_retention_ms);
        let rules = Rules {
            map: &map,
            aborted: &aborted,
            producer_last_batches: &view.producer_last_batches,
            horizon_passed,
        };
        let rewritten = match rewrite_segment(&view, segment, &rules, &mut state) {
            Ok(rewritten) => rewritten,
            Err(error) => {
                // The copies written so far go with the clean.
                for done in &cleaned {
                    let _ = swap::discard(&view.disk, &done.cleaned_path);
                }
                let _ = swap::discard(
                    &view.disk,
                    &swap::cleaned_path(&view.dir, segment.base_offset),
                );
                return Err(error);
            }
        };
        outcome.bytes_read += segment.size;
        throttle.spend(segment.size + rewritten.as_ref().map_or(0, |r| r.1));
        if let Some((cleaned_path, written, removed)) = rewritten {
            outcome.bytes_written += written;
            outcome.records_removed += removed;
            cleaned.push(CleanedSegment {
                base_offset: segment.base_offset,
                original_size: segment.size,
                cleaned_path,
            });
        }
    }
    outcome.segments_rewritten = log.swap_cleaned(cleaned, cleaned_to)?;
    outcome.cleaned_to = cleaned_to;
    tracing::info!(
        partition = view.name,
        keys = map.len(),
        segments = outcome.segments_rewritten,
        records_removed = outcome.records_removed,
        bytes_read = outcome.bytes_read,
        bytes_written = outcome.bytes_written,
        cleaned_to,
        "cleaned"
    );
    Ok(Some(outcome))
}

/// The closed segments that may be cleaned, in order: wholly below the
/// last stable offset and older than `min.compaction.lag.ms`.
fn cleanable_segments(view: &CleanView, now_ms: i64) -> Vec<SegmentSnapshot> {
    let young = now_ms.saturating_sub(view.config.min_compaction_lag_ms);
    view.closed
        .iter()
        .take_while(|s| s.next_offset <= view.last_stable_offset)
        .take_while(|s| {
            let newest = if s.max_timestamp >= 0 {
                s.max_timestamp
            } else {
                s.modified_ms
            };
            view.config.min_compaction_lag_ms == 0 || newest <= young
        })
        .filter(|s| s.next_offset > view.log_start_offset)
        .cloned()
        .collect()
}

/// Aborted transactions by producer, to tell whether a batch is in one.
struct Aborted {
    by_producer: HashMap<i64, Vec<(i64, i64)>>,
}

impl Aborted {
    fn new(aborted: &[AbortedTransaction]) -> Self {
        let mut by_producer: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
        for a in aborted {
            by_producer
                .entry(a.producer_id)
                .or_default()
                .push((a.first_offset, a.last_offset));
        }
        Self { by_producer }
    }

    fn contains(&self, header: &BatchHeader) -> bool {
        header.is_transactional()
            && !header.is_control()
            && self
                .by_producer
                .get(&header.producer_id)
                .is_some_and(|ranges| {
                    ranges.iter().any(|&(first, last)| {
                        first <= header.base_offset && header.base_offset <= last
                    })
                })
    }
}

/// Reads `segment`'s batches in order, calling `visit` with each.
fn for_each_batch(
    segment: &SegmentSnapshot,
    mut visit: impl FnMut(&RecordBatch<'_>) -> Result<(), LogError>,
) -> Result<(), LogError> {
    let mut position = 0u64;
    let mut buf = Vec::new();
    while position < segment.size {
        let mut header = [0u8; BATCH_HEADER_BYTES];
        segment
            .file
            .read_exact_at(&mut header, position)
            .context(|| format!("reading {} at {position}", segment.path.display()))?;
        let size = BatchHeader::parse(&header)?.size_bytes();
        if size < BATCH_HEADER_BYTES || size as u64 > segment.size - position {
            return Err(LogError::InvalidBatch(strata_record::RecordError::Invalid(
                format!(
                    "{} at {position}: a batch of {size} bytes does not fit the segment",
                    segment.path.display()
                ),
            )));
        }
        buf.resize(size, 0);
        segment
            .file
            .read_exact_at(&mut buf, position)
            .context(|| format!("reading {} at {position}", segment.path.display()))?;
        let batch = RecordBatch::parse_and_verify(&buf)?;
        visit(&batch)?;
        position += size as u64;
    }
    Ok(())
}

/// Adds every keyed record of `segment` (but those of aborted transactions)
/// to the map; returns the bytes read.
fn map_segment(
    segment: &SegmentSnapshot,
    aborted: &Aborted,
    map: &mut OffsetMap,
) -> Result<u64, LogError> {
    for_each_batch(segment, |batch| {
        let header = batch.header();
        if header.is_control() || aborted.contains(header) {
            return Ok(());
        }
        for record in batch.records(DECOMPRESSED_BYTES_MAX)?.iter() {
            let record = record?;
            if let Some(key) = record.key {
                map.put(key, record.offset);
            }
        }
        Ok(())
    })?;
    Ok(segment.size)
}

struct Rules<'a> {
    map: &'a OffsetMap,
    aborted: &'a Aborted,
    producer_last_batches: &'a HashMap<i64, i64>,
    horizon_passed: bool,
}

/// What the rewrite carries from segment to segment.
#[derive(Default)]
struct RewriteState {
    /// Producers with records kept in their current transaction.
    kept_in_transaction: HashMap<i64, bool>,
}

/// Writes the cleaned copy of `segment`; `None` when it would be the same
/// (nothing removed) and is marked cleaned already, or holds nothing a
/// horizon applies to. A segment cleaned for the first time that keeps
/// tombstones or markers is written anyway, unchanged, for its marker and
/// its time: their horizon counts from this clean (Kafka, since KIP-534,
/// stamps the batches' delete horizon at their first clean), and without
/// it a segment the clean did not change would keep its tombstones for
/// ever. Returns the fsynced `.cleaned` path, the bytes written and the
/// records removed.
fn rewrite_segment(
    view: &CleanView,
    segment: &SegmentSnapshot,
    rules: &Rules<'_>,
    state: &mut RewriteState,
) -> Result<Option<(std::path::PathBuf, u64, u64)>, LogError> {
    let path = swap::cleaned_path(&view.dir, segment.base_offset);
    let mut out = Appender::new(
        &view.disk,
        view.disk.open(&path, OpenMode::Truncate, "creating")?,
    );
    let mut written = 0u64;
    let mut removed = 0u64;
    let mut changed = false;
    // Kept tombstones or markers, which a later clean removes.
    let mut keeps_horizon_bound = false;
    let mut write = |bytes: &[u8], out: &mut Appender<'_>| -> Result<(), LogError> {
        out.write_all(bytes)
            .context(|| format!("writing {}", path.display()))?;
        written += bytes.len() as u64;
        Ok(())
    };
    for_each_batch(segment, |batch| {
        let header = *batch.header();
        let last_of_segment = header.next_offset() == segment.next_offset;
        if header.is_control() {
            let kept_any = state
                .kept_in_transaction
                .insert(header.producer_id, false)
                .unwrap_or(false);
            if rules.horizon_passed && !kept_any && !last_of_segment {
                changed = true;
                removed += u64::try_from(header.record_count).unwrap_or(0);
                return Ok(());
            }
            keeps_horizon_bound = true;
            return write(batch.as_bytes(), &mut out);
        }
        let in_aborted = rules.aborted.contains(&header);
        let rewritten = retain_records(batch, DECOMPRESSED_BYTES_MAX, |record| {
            if in_aborted {
                return false;
            }
            let Some(key) = record.key else {
                return true;
            };
            match rules.map.latest(key) {
                Some(latest) if latest > record.offset => false,
                _ if record.value.is_none() => {
                    keeps_horizon_bound |= !rules.horizon_passed;
                    !rules.horizon_passed
                }
                _ => true,
            }
        })?;
        let Some(rewritten) = rewritten else {
            if header.is_transactional() {
                state.kept_in_transaction.insert(header.producer_id, true);
            }
            return write(batch.as_bytes(), &mut out);
        };
        changed = true;
        let kept = RecordBatch::parse(&rewritten)?.header().record_count;
        removed += u64::try_from(header.record_count - kept).unwrap_or(0);
        let producers_last = header.producer_id >= 0
            && rules.producer_last_batches.get(&header.producer_id) == Some(&header.base_offset);
        if kept > 0 || last_of_segment || producers_last {
            // A transactional batch kept, even empty, reopens its
            // transaction when the header walk rebuilds the partition: its
            // marker must stay.
            if header.is_transactional() {
                state.kept_in_transaction.insert(header.producer_id, true);
            }
            write(&rewritten, &mut out)?;
        }
        Ok(())
    })?;
    let file = out
        .into_file()
        .context(|| format!("writing {}", path.display()))?;
    if !changed && (segment.compacted || !keeps_horizon_bound) {
        drop(file);
        swap::discard(&view.disk, &path)?;
        return Ok(None);
    }
    view.disk.sync(&file, &path)?;
    drop(file);
    Ok(Some((path, written, removed)))
}
