//! Retention: deleting whole segments past `retention.ms` or beyond
//! `retention.bytes`, oldest first, on topics whose `cleanup.policy`
//! includes `delete`.

use super::PartitionLog;
use crate::LogError;
use crate::segment::Segment;

/// What a retention pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionOutcome {
    pub segments_deleted: usize,
    pub bytes_deleted: u64,
    pub log_start_offset: i64,
}

impl PartitionLog {
    /// Deletes whole segments, oldest first, that are past `retention.ms` (by
    /// their newest record's timestamp, or the file's modification time when
    /// no record has one) or beyond `retention.bytes`. Never touches a corrupt
    /// partition. When every segment, the active one included, has expired,
    /// the active one is rolled first so it can go too (not on a read-only
    /// partition, since a roll syncs).
    pub fn enforce_retention(&self, now_ms: i64) -> Result<RetentionOutcome, LogError> {
        let mut inner = self.exclusive();
        let mut outcome = RetentionOutcome::default();
        // A compact-only topic keeps every segment: the cleaner bounds it.
        if inner.corruption.is_none() && inner.config.cleanup.delete {
            let retention_ms = inner.config.retention_ms;
            let expired = |s: &Segment| {
                retention_ms >= 0
                    && !s.is_empty()
                    && s.retention_timestamp() < now_ms.saturating_sub(retention_ms)
            };
            if inner.segments.values().all(expired) && self.read_only_reason().is_none() {
                let next = inner.next_offset;
                self.roll(&mut inner, next)?;
            }
            loop {
                let total: u64 = inner.segments.values().map(Segment::size_bytes).sum();
                let retention_bytes = inner.config.retention_bytes;
                let (&base, first) = inner.segments.iter().next().expect("at least one segment");
                let is_active = inner.segments.len() == 1;
                let over_size =
                    retention_bytes >= 0 && total - first.size_bytes() >= retention_bytes as u64;
                if is_active || !(expired(first) || over_size) {
                    break;
                }
                let segment = inner.segments.remove(&base).expect("present");
                outcome.segments_deleted += 1;
                outcome.bytes_deleted += segment.size_bytes();
                tracing::info!(partition = %self.name, base_offset = base, "retention deleted segment");
                segment.delete()?;
            }
            if outcome.segments_deleted > 0 {
                // Otherwise a power loss could bring a deleted segment back.
                self.disk.sync_dir(&self.dir)?;
            }
        }
        outcome.log_start_offset = inner.log_start_offset();
        if outcome.segments_deleted > 0 {
            let start = outcome.log_start_offset;
            inner.transactions.forget_below(start);
        }
        Ok(outcome)
    }
}
