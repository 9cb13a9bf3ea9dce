//! Reading a partition: whole batches by offset, the exact offset for a
//! timestamp, and the record with the largest timestamp.

use std::os::unix::fs::FileExt;

use strata_record::{BATCH_HEADER_BYTES, BatchHeader};

use super::transactions::last_stable;
use super::{PartitionLog, decompressed_limit};
use crate::error::IoContext;
use crate::segment::Window;
use crate::{AbortedTransaction, FileSlice, LogError};

/// What a reader may see of open transactions (Kafka's `isolation.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// Everything appended, open transactions and aborted ones included.
    #[default]
    ReadUncommitted,
    /// Only up to the last stable offset, with the aborted transactions of
    /// the range listed so the reader can drop their records.
    ReadCommitted,
}

/// The result of a read: whole batches, as file ranges (to send with
/// sendfile), and their bytes too when the read already held them.
#[derive(Debug, Clone)]
pub struct LogRead {
    pub slices: Vec<FileSlice>,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// The first offset of the oldest open transaction, or the log end.
    pub last_stable_offset: i64,
    /// For a `read_committed` read: the aborted transactions its range may
    /// meet, by first offset. Empty otherwise.
    pub aborted: Vec<AbortedTransaction>,
    /// The bytes of `slices`, when the read already held them all: one
    /// slice inside what the walk to it read (at most 4 KiB). A reader
    /// that sends or decodes them need not read the file again. They
    /// describe `slices` as the read made them: a caller that changes
    /// `slices` clears them.
    pub held: Option<Vec<u8>>,
}

impl LogRead {
    pub fn size_bytes(&self) -> u64 {
        self.slices.iter().map(|s| s.len).sum()
    }

    /// All slices' bytes in one buffer: the held bytes as they are, or
    /// the slices read.
    pub fn into_vec(self) -> Result<Vec<u8>, LogError> {
        match self.held {
            Some(held) => Ok(held),
            None => self.read_to_vec(),
        }
    }

    /// All slices' bytes in one buffer: the held bytes copied, or the
    /// slices read.
    pub fn read_to_vec(&self) -> Result<Vec<u8>, LogError> {
        if let Some(held) = &self.held {
            return Ok(held.clone());
        }
        let mut out = Vec::with_capacity(self.size_bytes() as usize);
        for slice in &self.slices {
            slice.read_onto(&mut out)?;
        }
        Ok(out)
    }
}

impl PartitionLog {
    /// Whole batches starting with the one that holds `offset`, up to
    /// `max_bytes` (but always at least one batch, so a consumer can make
    /// progress past a batch larger than its limit). Reading at the log end
    /// returns no slices, except on a corrupt partition, whose readable end
    /// is where the corruption starts and reads there fail.
    pub fn read(&self, offset: i64, max_bytes: u64) -> Result<LogRead, LogError> {
        self.read_isolated(offset, max_bytes, Isolation::ReadUncommitted)
    }

    /// The newest timestamp of the batch holding `offset`, read from its
    /// header alone (`None` at or past the end): how old the next record a
    /// reader at `offset` has to read is, to within one batch, for lag in
    /// time.
    pub fn batch_timestamp_at(&self, offset: i64) -> Result<Option<i64>, LogError> {
        let read = self.read(offset, 1)?;
        let Some(slice) = read.slices.first() else {
            return Ok(None);
        };
        if slice.len < BATCH_HEADER_BYTES as u64 {
            return Ok(None);
        }
        if let Some(held) = &read.held {
            return Ok(Some(BatchHeader::parse(held)?.max_timestamp));
        }
        let mut header = [0u8; BATCH_HEADER_BYTES];
        (slice.file.read_exact_at(&mut header, slice.position))
            .context(|| format!("reading the batch header at position {}", slice.position))?;
        Ok(Some(BatchHeader::parse(&header)?.max_timestamp))
    }

    /// [`PartitionLog::read`] as a reader of `isolation` sees the log: a
    /// `read_committed` read stops before the last stable offset (a read at
    /// or past it, up to the log end, returns nothing) and lists the aborted
    /// transactions it may meet.
    pub fn read_isolated(
        &self,
        offset: i64,
        max_bytes: u64,
        isolation: Isolation,
    ) -> Result<LogRead, LogError> {
        let inner = self.shared();
        let log_start_offset = inner.log_start_offset();
        let log_end_offset = inner.next_offset;
        let last_stable_offset = last_stable(&inner);
        let mut read = LogRead {
            slices: Vec::new(),
            log_start_offset,
            log_end_offset,
            last_stable_offset,
            aborted: Vec::new(),
            held: None,
        };
        if let Some(corruption) = &inner.corruption
            && offset >= corruption.offset
        {
            return Err(self.corrupt_error(corruption));
        }
        if offset < log_start_offset || offset > log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                partition: self.name.clone(),
                offset,
                log_start_offset,
                log_end_offset,
            });
        }
        let upper = match isolation {
            Isolation::ReadUncommitted => log_end_offset,
            Isolation::ReadCommitted => last_stable_offset,
        };
        if isolation == Isolation::ReadCommitted && offset < upper {
            read.aborted = inner.transactions.aborted_between(offset, upper);
        }
        let floor = inner
            .segments
            .range(..=offset)
            .next_back()
            .map_or(log_start_offset, |(&base, _)| base);
        let mut budget = max_bytes;
        let mut want = offset;
        for segment in inner.segments.range(floor..).map(|(_, s)| s) {
            if want >= upper {
                break;
            }
            if want >= segment.next_offset() {
                continue;
            }
            let mut window = Window::new();
            let Some((start, _)) = segment.locate_in(&mut window, want)? else {
                continue;
            };
            // The upper bound is a batch boundary (the first batch of an
            // open transaction), so the cut leaves whole batches.
            let limit = if upper < segment.next_offset() {
                segment
                    .locate_in(&mut window, upper)?
                    .map_or(segment.size_bytes(), |(position, _)| position)
            } else {
                segment.size_bytes()
            };
            let end = segment.slice_end_in(&mut window, start, budget)?.min(limit);
            if end <= start {
                break;
            }
            if !read.slices.is_empty() && end - start > budget {
                break;
            }
            budget = budget.saturating_sub(end - start);
            if read.slices.is_empty() {
                read.held = window.holding(start, end).map(<[u8]>::to_vec);
            } else {
                read.held = None;
            }
            read.slices.push(segment.slice(start, end));
            want = segment.next_offset();
            if end < segment.size_bytes() || budget == 0 {
                break;
            }
        }
        Ok(read)
    }

    /// The first record with timestamp ≥ `timestamp`, exact to the record
    /// (Kafka's ListOffsets). Returns (offset, timestamp), or `None` when no
    /// such record is retained.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>, LogError> {
        let inner = self.shared();
        let limit = decompressed_limit(inner.config.max_message_bytes);
        for segment in inner.segments.values() {
            if segment.max_timestamp() < timestamp {
                continue;
            }
            if let Some(found) =
                segment.offset_for_timestamp(timestamp, limit, segment.size_bytes())?
            {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// The record with the largest timestamp, exact to the record (Kafka's
    /// ListOffsets MAX_TIMESTAMP): of several records sharing it, the one
    /// with the lowest offset. Returns (offset, timestamp), or `None` when
    /// no retained record carries a timestamp.
    pub fn max_timestamp_record(&self) -> Result<Option<(i64, i64)>, LogError> {
        let inner = self.shared();
        let limit = decompressed_limit(inner.config.max_message_bytes);
        // The first segment holding the largest timestamp: segments are in
        // offset order and only a strictly larger one replaces it.
        let mut newest = None;
        for segment in inner.segments.values() {
            if newest.is_none_or(|n: &crate::Segment| segment.max_timestamp() > n.max_timestamp()) {
                newest = Some(segment);
            }
        }
        match newest {
            Some(segment) => segment.max_timestamp_record(limit),
            None => Ok(None),
        }
    }
}
