//! DeleteRecords: moving a partition's log start offset forward on request,
//! inside a segment if need be, so that a consumer can no longer read what
//! is below it.
//!
//! The new start is kept in a file of its own (replaced durably before the
//! request is answered), because it need not fall on a segment boundary:
//!
//! ```text
//! <partition>/log-start-offset
//! offset  size  field
//!      0     8  offset  i64  nothing below it may be read
//!      8     4  crc     u32  CRC32C of bytes 0..8
//! ```
//!
//! Segments wholly below the new start are deleted at once (never the
//! active one); the rest of the one that holds it stays on disk until
//! retention or a later DeleteRecords takes it. A file that fails its CRC
//! reads as "no start recorded": the first segment's base is the start,
//! which may show records again that a DeleteRecords had hidden, and is
//! logged.

use std::path::Path;

use super::{Inner, PartitionLog, recovery_point};
use crate::LogError;

pub(super) const LOG_START_FILE: &str = "log-start-offset";
const LOG_START_TMP_FILE: &str = "log-start-offset.tmp";

/// The start offset recorded in `dir`, if any.
pub(super) fn read_recorded_start(dir: &Path, name: &str) -> Option<i64> {
    let path = dir.join(LOG_START_FILE);
    let raw = std::fs::read(&path).ok()?;
    let file_bytes = recovery_point::RECOVERY_POINT_BYTES;
    let valid = raw.len() == file_bytes
        && strata_record::crc32c(&raw[..8])
            == u32::from_be_bytes([raw[8], raw[9], raw[10], raw[11]]);
    if !valid {
        tracing::warn!(
            partition = name,
            path = %path.display(),
            "the recorded log start offset is damaged; starting at the first segment"
        );
        return None;
    }
    let mut offset = [0u8; 8];
    offset.copy_from_slice(&raw[..8]);
    Some(i64::from_be_bytes(offset))
}

impl PartitionLog {
    /// Makes `offset` the log start offset (Kafka's DeleteRecords; -1 is
    /// the log end). Returns the start after the call: `offset`, or the
    /// current start if that is already past it. An offset beyond the log
    /// end is OFFSET_OUT_OF_RANGE.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64, LogError> {
        let mut inner = self.exclusive();
        let end = inner.next_offset;
        let offset = if offset == -1 { end } else { offset };
        let start = inner.log_start_offset();
        if offset < 0 || offset > end {
            return Err(LogError::OffsetOutOfRange {
                partition: self.name.clone(),
                offset,
                log_start_offset: start,
                log_end_offset: end,
            });
        }
        if offset <= start {
            return Ok(start);
        }
        self.disk.replace_durably(
            &self.dir.join(LOG_START_FILE),
            &self.dir.join(LOG_START_TMP_FILE),
            &recovery_point::encode(offset),
        )?;
        inner.recorded_start = offset;
        let deleted = delete_segments_below(&mut inner, offset)?;
        if deleted > 0 {
            self.disk.sync_dir(&self.dir)?;
        }
        inner.transactions.forget_below(offset);
        tracing::info!(partition = %self.name, log_start_offset = offset, segments_deleted = deleted, "records deleted");
        Ok(offset)
    }
}

/// Deletes the segments that end at or below `offset`, never the active
/// one; returns how many.
fn delete_segments_below(inner: &mut Inner, offset: i64) -> Result<usize, LogError> {
    let mut deleted = 0;
    while inner.segments.len() > 1 {
        let (&base, first) = inner.segments.iter().next().expect("more than one segment");
        if first.next_offset() > offset {
            break;
        }
        let segment = inner.segments.remove(&base).expect("present");
        segment.delete()?;
        deleted += 1;
    }
    Ok(deleted)
}
