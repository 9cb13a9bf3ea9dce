//! What the cleaner needs of a partition: a snapshot of its closed
//! segments to read without holding any lock, and the swap of cleaned
//! segments in place of the originals under the write lock (see
//! `log::cleaner` for the cleaning itself and the on-disk protocol).

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{PartitionLog, recovery_point};
use crate::recovery::{ScanEnd, scan_segment};
use crate::segment::Segment;
use crate::segment_swap as swap;
use crate::storage::Disk;
use crate::{AbortedTransaction, LogConfig, LogError};

/// The cleaner's progress: offsets below it have been cleaned.
///
/// ```text
/// <partition>/cleaner-offset
/// offset  size  field
///      0     8  offset  i64  the first offset not yet cleaned
///      8     4  crc     u32  CRC32C of bytes 0..8
/// ```
/// A missing or damaged file reads as 0: everything is dirty again, which
/// costs a longer clean, never a wrong one.
pub(super) const CLEANER_OFFSET_FILE: &str = "cleaner-offset";
const CLEANER_OFFSET_TMP_FILE: &str = "cleaner-offset.tmp";

/// One closed segment as the cleaner reads it.
#[derive(Debug, Clone)]
pub struct SegmentSnapshot {
    pub base_offset: i64,
    pub next_offset: i64,
    pub size: u64,
    pub file: Arc<File>,
    pub path: PathBuf,
    pub compacted: bool,
    pub max_timestamp: i64,
    /// Modification time of the file (ms): for a compacted segment, when
    /// it was cleaned.
    pub modified_ms: i64,
}

/// A partition as the cleaner sees it at one moment.
#[derive(Debug, Clone)]
pub struct CleanView {
    /// The storage the partition is on, where the cleaned copies go.
    pub(crate) disk: Disk,
    pub name: String,
    pub dir: PathBuf,
    pub config: LogConfig,
    /// Every segment but the active one, in offset order.
    pub closed: Vec<SegmentSnapshot>,
    /// Offsets below this were cleaned before.
    pub first_dirty: i64,
    /// No record at or past this may be cleaned: the last stable offset
    /// (an open transaction's records are not yet decided).
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// Base offset of each producer's last batch: kept even when emptied.
    pub producer_last_batches: HashMap<i64, i64>,
    pub aborted: Vec<AbortedTransaction>,
}

/// A cleaned segment ready to replace `base_offset`'s.
#[derive(Debug)]
pub struct CleanedSegment {
    pub base_offset: i64,
    /// The original's size when it was read: the swap is refused if the
    /// segment changed meanwhile.
    pub original_size: u64,
    /// The complete, fsynced cleaned file (`<base>.log.cleaned`).
    pub cleaned_path: PathBuf,
}

impl PartitionLog {
    /// A snapshot of the closed segments and what decides what may be
    /// cleaned, taken under the read lock (held only while copying).
    pub fn clean_view(&self) -> CleanView {
        let inner = self.shared();
        let active = inner.segments.keys().next_back().copied();
        let closed = inner
            .segments
            .values()
            .filter(|s| Some(s.base_offset()) != active)
            .map(|s| SegmentSnapshot {
                base_offset: s.base_offset(),
                next_offset: s.next_offset(),
                size: s.size_bytes(),
                file: Arc::clone(s.log_file()),
                path: s.log_path(),
                compacted: s.is_compacted(),
                max_timestamp: s.max_timestamp(),
                modified_ms: modified_ms(s.log_file()),
            })
            .collect();
        let log_start_offset = inner.log_start_offset();
        let last_stable_offset = super::transactions::last_stable(&inner);
        CleanView {
            disk: self.disk.clone(),
            name: self.name.clone(),
            dir: self.dir.clone(),
            config: inner.config.clone(),
            closed,
            first_dirty: inner.cleaner_offset.max(log_start_offset),
            last_stable_offset,
            log_start_offset,
            producer_last_batches: inner.producers.last_batch_offsets(),
            aborted: inner
                .transactions
                .aborted_between(log_start_offset, last_stable_offset),
        }
    }

    /// Replaces segments with their cleaned files and records that offsets
    /// below `cleaned_to` are clean. Each segment must still be there at the
    /// size it was read (retention or DeleteRecords may have removed it
    /// meanwhile: its cleaned file is then discarded). The write lock is
    /// taken for one segment at a time (its renames, directory syncs and
    /// index rebuild), so appends and fetches wait for at most one
    /// segment's swap, never for a whole clean's.
    pub fn swap_cleaned(
        &self,
        cleaned: Vec<CleanedSegment>,
        cleaned_to: i64,
    ) -> Result<usize, LogError> {
        let mut swapped = 0;
        let mut cleaned = cleaned.into_iter();
        while let Some(segment) = cleaned.next() {
            let mut inner = self.exclusive();
            if inner.closed {
                // Closed meanwhile: nothing more is swapped, and the
                // cleaner offset stays where it was.
                swap::discard(&self.disk, &segment.cleaned_path)?;
                for rest in cleaned {
                    swap::discard(&self.disk, &rest.cleaned_path)?;
                }
                return Ok(swapped);
            }
            let current = inner.segments.get(&segment.base_offset);
            let still_there = current.is_some_and(|s| s.size_bytes() == segment.original_size);
            let active = inner.segments.keys().next_back() == Some(&segment.base_offset);
            if !still_there || active {
                swap::discard(&self.disk, &segment.cleaned_path)?;
                continue;
            }
            swap::seal_cleaned(&self.disk, &self.dir, segment.base_offset)?;
            swap::install(&self.disk, &self.dir, segment.base_offset)?;
            let replacement = reopen(&self.disk, &self.dir, segment.base_offset, &inner.config)?;
            inner.segments.insert(segment.base_offset, replacement);
            swapped += 1;
        }
        self.disk.sync_dir(&self.dir)?;
        let mut inner = self.exclusive();
        if cleaned_to > inner.cleaner_offset && !inner.closed {
            self.disk.replace_durably(
                &self.dir.join(CLEANER_OFFSET_FILE),
                &self.dir.join(CLEANER_OFFSET_TMP_FILE),
                &recovery_point::encode(cleaned_to),
            )?;
            inner.cleaner_offset = cleaned_to;
        }
        Ok(swapped)
    }
}

/// Opens a freshly installed compacted segment and rebuilds its indexes.
fn reopen(
    disk: &Disk,
    dir: &Path,
    base_offset: i64,
    config: &LogConfig,
) -> Result<Segment, LogError> {
    let mut segment = Segment::open(disk, dir, base_offset, config, true)?;
    let size = segment.size_bytes();
    match scan_segment(&mut segment, size, config.index_interval_bytes)? {
        ScanEnd::Clean => {}
        ScanEnd::Torn { reason, .. } | ScanEnd::Corrupt { reason, .. } => {
            return Err(LogError::io(
                format!(
                    "checking the cleaned segment {}",
                    segment.log_path().display()
                ),
                std::io::Error::other(reason),
            ));
        }
    }
    segment.seal()?;
    Ok(segment)
}

fn modified_ms(file: &File) -> i64 {
    file.metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The cleaner offset recorded in `dir` (0 if none or damaged).
pub(super) fn read_cleaner_offset(dir: &Path) -> i64 {
    std::fs::File::open(dir.join(CLEANER_OFFSET_FILE))
        .map(|file| recovery_point::read(&file))
        .unwrap_or(0)
}
