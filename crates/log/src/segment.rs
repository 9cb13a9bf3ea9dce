//! One segment of a partition: `<base offset>.log` plus its two indexes.
//!
//! Invariants:
//! - `base_offset` ≤ the first offset of any batch in the segment, and batches
//!   are stored in strictly increasing offset order;
//! - bytes `0..size` of the `.log` file are whole, CRC-checked batches (the
//!   file may be longer only while an append is in flight or after a failed
//!   write, and `size` never covers such bytes);
//! - index entries point at batch boundaries inside `0..size`;
//! - offsets are dense (each batch starts where the previous one ended)
//!   unless the segment is compacted (a `<base>.compacted` marker file
//!   beside it, written by the cleaner before it swaps the segment in):
//!   then a batch may start past where the previous one ended, never
//!   before.
//!
//! A segment is not thread-safe; its [`PartitionLog`](super::PartitionLog)
//! serializes writers and lets readers share it.

use std::fs::File;
use std::io::IoSlice;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use strata_record::{BATCH_HEADER_BYTES, BatchHeader, RecordBatch};

use super::error::IoContext;
use super::storage::{Disk, OpenMode};
use super::{FileSlice, LogConfig, LogError, OffsetIndex, TimeIndex};

mod locate;
mod timestamps;

pub(crate) use locate::Window;

/// What the log knows about one batch it is appending.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    pub last_offset_delta: i32,
    pub max_timestamp: i64,
    pub size: u64,
}

impl BatchInfo {
    pub fn of(header: &BatchHeader) -> Self {
        Self {
            base_offset: header.base_offset,
            last_offset: header.last_offset(),
            last_offset_delta: header.last_offset_delta,
            max_timestamp: header.max_timestamp,
            size: header.size_bytes() as u64,
        }
    }
}

pub struct Segment {
    disk: Disk,
    base_offset: i64,
    dir: PathBuf,
    log: Arc<File>,
    size: u64,
    index: OffsetIndex,
    time_index: TimeIndex,
    next_offset: i64,
    max_timestamp: i64,
    max_timestamp_offset: i64,
    bytes_since_index: u64,
    first_append_ms: Option<i64>,
    index_suspect: AtomicBool,
    /// Rewritten by the cleaner: offsets may have gaps.
    compacted: bool,
}

/// Extension of the marker file of a compacted segment.
pub(crate) const COMPACTED_EXTENSION: &str = "compacted";

/// `00000000000000000042.log` and friends.
pub fn file_name(base_offset: i64, extension: &str) -> String {
    format!("{base_offset:020}.{extension}")
}

impl Segment {
    /// Creates an empty segment; fails if its files already hold data.
    pub(crate) fn create(
        disk: &Disk,
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
    ) -> Result<Self, LogError> {
        let log_path = dir.join(file_name(base_offset, "log"));
        let log = disk.open(&log_path, OpenMode::Create, "creating")?;
        let existing = log
            .metadata()
            .context(|| format!("reading {}", log_path.display()))?
            .len();
        if existing > 0 {
            return Err(LogError::io(
                format!("creating {}", log_path.display()),
                std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "segment file already holds data",
                ),
            ));
        }
        let mut segment = Self::assemble(disk, dir, base_offset, log, config.segment_index_bytes)?;
        segment.index.clear();
        segment.time_index.clear();
        Ok(segment)
    }

    /// Opens an existing segment's files without reading the log. The caller
    /// then either trusts it ([`Segment::load_trusted`]) or rebuilds it
    /// ([`Segment::recover`](super::recovery)).
    pub(crate) fn open(
        disk: &Disk,
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        active: bool,
    ) -> Result<Self, LogError> {
        let log_path = dir.join(file_name(base_offset, "log"));
        let log = disk.open(&log_path, OpenMode::Existing, "opening")?;
        let capacity = if active {
            config.segment_index_bytes
        } else {
            0
        };
        let mut segment = Self::assemble(disk, dir, base_offset, log, capacity)?;
        segment.size = segment
            .log
            .metadata()
            .context(|| format!("reading size of {}", log_path.display()))?
            .len();
        Ok(segment)
    }

    fn assemble(
        disk: &Disk,
        dir: &Path,
        base_offset: i64,
        log: File,
        index_capacity_bytes: u64,
    ) -> Result<Self, LogError> {
        let index = OffsetIndex::open(
            disk,
            &dir.join(file_name(base_offset, "index")),
            base_offset,
            index_capacity_bytes,
        )?;
        let time_index = TimeIndex::open(
            disk,
            &dir.join(file_name(base_offset, "timeindex")),
            base_offset,
            index_capacity_bytes,
        )?;
        Ok(Self {
            disk: disk.clone(),
            base_offset,
            dir: dir.to_path_buf(),
            log: Arc::new(log),
            size: 0,
            index,
            time_index,
            next_offset: base_offset,
            max_timestamp: -1,
            max_timestamp_offset: base_offset,
            bytes_since_index: 0,
            first_append_ms: None,
            index_suspect: AtomicBool::new(false),
            compacted: dir
                .join(file_name(base_offset, COMPACTED_EXTENSION))
                .exists(),
        })
    }

    /// Whether the cleaner rewrote this segment (its offsets may have gaps).
    pub(crate) fn is_compacted(&self) -> bool {
        self.compacted
    }

    /// Whether a batch starting at `base_offset` may follow a batch that
    /// ended before `next`: exactly there, or later in a compacted segment.
    pub(crate) fn may_start_at(&self, base_offset: i64, next: i64) -> bool {
        base_offset == next || (self.compacted && base_offset > next)
    }

    /// Accepts the indexes of a cleanly closed (or already flushed) segment
    /// after checking them, and finds the segment's end by scanning from the
    /// last index entry. Returns `Err(reason)` if the indexes must be rebuilt.
    pub(crate) fn load_trusted(
        &mut self,
        index_interval_bytes: u64,
    ) -> Result<Result<(), String>, LogError> {
        if let Err(reason) = self.index.check(self.size) {
            return Ok(Err(format!("offset index: {reason}")));
        }
        let (mut position, mut next) = match self.index.len().checked_sub(1) {
            Some(i) => {
                let (offset, position) = self.index.entry(i);
                (position, offset)
            }
            None => (0, self.base_offset),
        };
        let mut tail_max_timestamp = -1;
        while position < self.size {
            if self.bytes_since_index >= index_interval_bytes && position > 0 {
                // An append would have indexed this batch: entries are missing
                // (a deleted or truncated index file).
                return Ok(Err(format!(
                    "no entry for the batch at position {position}"
                )));
            }
            let header = match self.read_header(position) {
                Ok(header) if self.may_start_at(header.base_offset, next) => header,
                Ok(header) => {
                    return Ok(Err(format!(
                        "batch at {position} starts at offset {} where {next} was expected",
                        header.base_offset
                    )));
                }
                Err(LogError::InvalidBatch(e)) => {
                    return Ok(Err(format!("batch at {position}: {e}")));
                }
                Err(e) => return Err(e),
            };
            next = header.next_offset();
            tail_max_timestamp = tail_max_timestamp.max(header.max_timestamp);
            self.bytes_since_index += header.size_bytes() as u64;
            position += header.size_bytes() as u64;
            if position > self.size {
                return Ok(Err(format!(
                    "last batch runs past the end at {}",
                    self.size
                )));
            }
        }
        self.next_offset = next;
        if let Err(reason) = self.time_index.check(next) {
            return Ok(Err(format!("time index: {reason}")));
        }
        match self.time_index.last() {
            // Sealing records the segment's largest timestamp last, so a
            // newer batch in the unindexed tail means entries were lost.
            Some((ts, _)) if ts < tail_max_timestamp => {
                return Ok(Err(format!(
                    "time index ends at timestamp {ts} but a batch holds {tail_max_timestamp}"
                )));
            }
            Some((ts, offset)) => {
                self.max_timestamp = ts;
                self.max_timestamp_offset = offset;
            }
            None if self.size > 0 => return Ok(Err("time index is empty".into())),
            None => {}
        }
        Ok(Ok(()))
    }

    /// Forgets all index state, before a rebuild by a full scan.
    pub(crate) fn reset_for_scan(&mut self) {
        self.index.clear();
        self.time_index.clear();
        self.next_offset = self.base_offset;
        self.max_timestamp = -1;
        self.max_timestamp_offset = self.base_offset;
        self.bytes_since_index = 0;
    }

    /// Makes room in both indexes for the entries `batches` more batches can
    /// add, before anything is written.
    pub(crate) fn reserve_index_entries(&mut self, batches: usize) -> Result<(), LogError> {
        self.index.reserve(batches)?;
        self.time_index.reserve(batches + 1)
    }

    /// Records a batch present at `position` in the in-memory state and
    /// indexes. Room must have been reserved.
    pub(crate) fn note_batch(
        &mut self,
        position: u64,
        batch: BatchInfo,
        index_interval_bytes: u64,
    ) {
        debug_assert!(batch.base_offset >= self.next_offset);
        if self.bytes_since_index >= index_interval_bytes && position > 0 {
            if !self.index.is_full() {
                self.index.push(batch.base_offset, position);
            }
            self.time_index
                .maybe_push(self.max_timestamp, self.max_timestamp_offset);
            self.bytes_since_index = 0;
        }
        if batch.max_timestamp > self.max_timestamp {
            self.max_timestamp = batch.max_timestamp;
            self.max_timestamp_offset = batch.last_offset;
        }
        self.bytes_since_index += batch.size;
        self.next_offset = batch.last_offset.saturating_add(1);
    }

    /// Sets the readable end after a scan.
    pub(crate) fn set_scanned_size(&mut self, size: u64) {
        self.size = size;
    }

    /// Writes `bytes` (the given batches, offsets already assigned) at the end.
    /// On a failed write nothing is accounted and the caller truncates.
    pub(crate) fn append(
        &mut self,
        bytes: &[u8],
        batches: &[BatchInfo],
        index_interval_bytes: u64,
        now_ms: i64,
    ) -> Result<(), LogError> {
        debug_assert_eq!(
            batches.iter().map(|b| b.size).sum::<u64>(),
            bytes.len() as u64
        );
        self.reserve_index_entries(batches.len())?;
        // Each batch goes out as its assigned baseOffset followed by the
        // rest of the batch as given; the CRC does not cover the offset.
        let offsets: Vec<[u8; 8]> = batches
            .iter()
            .map(|b| b.base_offset.to_be_bytes())
            .collect();
        let mut slices = Vec::with_capacity(2 * batches.len());
        let mut start = 0usize;
        for (batch, offset) in batches.iter().zip(&offsets) {
            let end = start + batch.size as usize;
            slices.push(IoSlice::new(offset));
            slices.push(IoSlice::new(&bytes[start + offset.len()..end]));
            start = end;
        }
        self.disk
            .storage()
            .write_at(&self.log, &mut slices, self.size)
            .context(|| {
                format!(
                    "appending {} bytes to {}",
                    bytes.len(),
                    self.log_path().display()
                )
            })?;
        let mut position = self.size;
        for batch in batches {
            self.note_batch(position, *batch, index_interval_bytes);
            position += batch.size;
        }
        self.size = position;
        self.first_append_ms.get_or_insert(now_ms);
        Ok(())
    }

    /// Cuts the file back to `size` bytes (undoing a failed append or a torn
    /// tail). Only ever called with a batch boundary.
    pub(crate) fn truncate_file(&mut self, size: u64) -> Result<(), LogError> {
        self.disk
            .storage()
            .set_len(&self.log, size)
            .context(|| format!("truncating {} to {size} bytes", self.log_path().display()))?;
        self.size = size;
        Ok(())
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// One past the last offset stored here (`base_offset` when empty).
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    pub fn size_bytes(&self) -> u64 {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// How old retention takes the segment to be: its newest record's
    /// timestamp, or, when records carry none (-1), the file's modification
    /// time, as Kafka does.
    pub(crate) fn retention_timestamp(&self) -> i64 {
        if self.max_timestamp >= 0 {
            return self.max_timestamp;
        }
        self.log
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(i64::MAX, |d| {
                i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
            })
    }

    /// Largest record timestamp in the segment, -1 if empty.
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join(file_name(self.base_offset, "log"))
    }

    pub(crate) fn log_file(&self) -> &Arc<File> {
        &self.log
    }

    /// Whether an append of `batch_bytes` covering up to `last_offset` must go
    /// to a new segment instead.
    pub(crate) fn should_roll(
        &self,
        config: &LogConfig,
        batch_bytes: u64,
        last_offset: i64,
        now_ms: i64,
    ) -> bool {
        if self.is_empty() {
            return false;
        }
        let too_big = self.size + batch_bytes > config.segment_bytes;
        let too_old = self
            .first_append_ms
            .unwrap_or(self.max_timestamp)
            .saturating_add(config.segment_ms)
            <= now_ms;
        let offsets_overflow = last_offset - self.base_offset > i64::from(i32::MAX);
        too_big || too_old || offsets_overflow || self.index.is_full() || self.time_index.is_full()
    }

    /// Reads and checks the header of the batch at `position`.
    pub(crate) fn read_header(&self, position: u64) -> Result<BatchHeader, LogError> {
        let mut raw = [0u8; BATCH_HEADER_BYTES];
        self.header_fits(position, BATCH_HEADER_BYTES)?;
        self.read_at(&mut raw, position)?;
        self.checked_header(&raw, position)
    }

    /// Fails unless `needed` bytes of the segment start at `position`.
    fn header_fits(&self, position: u64, needed: usize) -> Result<(), LogError> {
        let available = self.size.saturating_sub(position);
        if available < needed as u64 {
            return Err(LogError::InvalidBatch(
                strata_record::RecordError::Truncated {
                    needed,
                    available: available as usize,
                },
            ));
        }
        Ok(())
    }

    /// Fills `buf` from `position` of the log file.
    fn read_at(&self, buf: &mut [u8], position: u64) -> Result<(), LogError> {
        self.log.read_exact_at(buf, position).context(|| {
            format!(
                "reading batch headers at {position} of {}",
                self.log_path().display()
            )
        })
    }

    /// The header of the batch at `position`, from its first bytes `raw`,
    /// checked, and checked to end within the segment.
    fn checked_header(&self, raw: &[u8], position: u64) -> Result<BatchHeader, LogError> {
        let header = BatchHeader::parse(raw)?;
        header.check()?;
        self.header_fits(position, header.size_bytes())?;
        Ok(header)
    }

    /// Reads the whole batch at `position` into `buf`.
    pub(crate) fn read_batch<'b>(
        &self,
        position: u64,
        header: &BatchHeader,
        buf: &'b mut Vec<u8>,
    ) -> Result<RecordBatch<'b>, LogError> {
        buf.resize(header.size_bytes(), 0);
        self.log.read_exact_at(buf, position).context(|| {
            format!(
                "reading batch at {position} of {}",
                self.log_path().display()
            )
        })?;
        Ok(RecordBatch::parse(buf)?)
    }

    pub(crate) fn index_suspect(&self) -> bool {
        self.index_suspect.load(Ordering::Relaxed)
    }

    pub(crate) fn slice(&self, start: u64, end: u64) -> FileSlice {
        FileSlice {
            file: Arc::clone(&self.log),
            position: start,
            len: end - start,
        }
    }

    /// fdatasync of the `.log` file.
    pub(crate) fn sync(&self) -> Result<(), LogError> {
        self.disk.sync(&self.log, &self.log_path())
    }

    /// Prepares the segment to stop taking appends: records the final
    /// largest timestamp and trims the index files to their entries.
    pub(crate) fn seal(&mut self) -> Result<(), LogError> {
        if self.max_timestamp >= 0 {
            self.time_index
                .push_final(self.max_timestamp, self.max_timestamp_offset)?;
        }
        self.index.seal()?;
        self.time_index.seal()
    }

    /// Makes a sealed segment appendable again (the active one after open).
    pub(crate) fn unseal(&mut self, config: &LogConfig) {
        self.index.unseal(config.segment_index_bytes);
        self.time_index.unseal(config.segment_index_bytes);
    }

    /// Removes the segment's files.
    pub(crate) fn delete(self) -> Result<(), LogError> {
        let log_path = self.log_path();
        self.index.delete()?;
        self.time_index.delete()?;
        self.disk.remove_if_exists(&log_path)?;
        self.disk.remove_if_exists(
            &self
                .dir
                .join(file_name(self.base_offset, COMPACTED_EXTENSION)),
        )
    }
}
