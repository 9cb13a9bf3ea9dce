//! Appending to a partition: validating a producer's batches, checking
//! them against the producer state, and writing them (or a transaction
//! marker, in `transactions`) at the log end.

use super::{AppendInfo, Inner, PartitionLog, decompressed_limit};
use crate::decompression_slots;
use crate::producer_state::{Admission, ProducerBatch};
use crate::segment::BatchInfo;
use crate::{LogError, SEGMENT_BYTES_MAX};
use strata_record::time::now_ms;
use strata_record::{Compression, RecordBatch};

impl PartitionLog {
    /// Appends one or more v2 batches (concatenated, as in a Produce request).
    /// Every batch is validated (header, CRC, every record) and checked
    /// against the producer state before anything is written; each batch is
    /// written with its assigned baseOffset in place of the one it carries
    /// (`batches` itself is not changed, so a request's bytes are written
    /// without being copied). Returns where they
    /// landed, or where they already are when every batch is an idempotent
    /// producer's resend ([`AppendInfo::duplicate`]). Not durable until
    /// [`PartitionLog::flush_to`].
    pub fn append(&self, batches: &[u8]) -> Result<AppendInfo, LogError> {
        let (mut infos, mut producer_batches) = self.validate(batches)?;
        let mut inner = self.exclusive();
        self.check_writable(&inner)?;
        let base_offset = inner.next_offset;
        let mut next = base_offset;
        for (info, producer) in infos.iter_mut().zip(&mut producer_batches) {
            // From the header field: the client's baseOffset is arbitrary, so
            // last_offset - base_offset may have saturated.
            let delta = i64::from(info.last_offset_delta);
            *info = BatchInfo {
                base_offset: next,
                last_offset: next + delta,
                ..*info
            };
            if let Some(producer) = producer {
                producer.base_offset = next;
                producer.last_offset = next + delta;
            }
            next += delta + 1;
        }
        let log_start_offset = inner.log_start_offset();
        let producer_updates = match inner.producers.check(&self.name, &producer_batches)? {
            Admission::Append(updates) => updates,
            Admission::Duplicate {
                base_offset,
                last_offset,
            } => {
                return Ok(AppendInfo {
                    base_offset,
                    last_offset,
                    record_count: 0,
                    log_start_offset,
                    duplicate: true,
                });
            }
        };
        let last_offset = next - 1;
        let now = now_ms();
        self.write(&mut inner, batches, &infos, next, now)?;
        let Inner {
            producers,
            transactions,
            ..
        } = &mut *inner;
        producers.apply(&producer_updates, now);
        for batch in producer_updates.iter().filter(|b| b.transactional) {
            transactions.data(
                batch.producer_id,
                batch.epoch,
                batch.base_offset,
                batch.last_offset,
            );
        }
        producers.enforce_limit(|id| transactions.has_open(id));
        let record_count = next - base_offset;
        let flush_now = inner.config.flush_messages > 0
            && inner.unflushed_records >= inner.config.flush_messages;
        // A roll may have happened, but never deletes a segment.
        debug_assert_eq!(inner.log_start_offset(), log_start_offset);
        drop(inner);
        if flush_now && let Err(error) = self.flush_to(next) {
            // The records are appended and readable; the failed flush has
            // turned the partition read-only, which the next append reports.
            tracing::error!(partition = %self.name, "flush.messages flush failed: {error}");
        }
        Ok(AppendInfo {
            base_offset,
            last_offset,
            record_count,
            log_start_offset,
            duplicate: false,
        })
    }

    /// Refuses a write to a read-only, closed or corrupt partition.
    pub(super) fn check_writable(&self, inner: &Inner) -> Result<(), LogError> {
        if let Some(reason) = self.commit.failure() {
            return Err(self.read_only(reason));
        }
        if inner.closed {
            return Err(self.read_only("the log has been closed".into()));
        }
        if let Some(corruption) = &inner.corruption {
            return Err(self.corrupt_error(corruption));
        }
        Ok(())
    }

    /// Writes `batches` (already given their offsets in `infos`) at the log
    /// end, rolling first if the active segment is due, and counts them as
    /// unflushed. `next` is the offset after the last of them. On an error
    /// nothing was written: a partial write is undone, or the partition
    /// turns read-only if it cannot be.
    pub(super) fn write(
        &self,
        inner: &mut Inner,
        batches: &[u8],
        infos: &[BatchInfo],
        next: i64,
        now: i64,
    ) -> Result<(), LogError> {
        let base_offset = inner.next_offset;
        let last_offset = next - 1;
        let total = batches.len() as u64;
        if inner
            .active()
            .should_roll(&inner.config, total, last_offset, now)
        {
            self.roll(inner, base_offset)?;
        }
        let interval = inner.config.index_interval_bytes;
        let active = inner.active_mut();
        let size_before = active.size_bytes();
        if let Err(error) = active.append(batches, infos, interval, now) {
            // Undo a partial write so the file holds only whole batches.
            if let Err(undo) = active.truncate_file(size_before) {
                self.commit.fail(format!(
                    "{error}, then could not undo the partial write: {undo}"
                ));
            }
            return Err(error);
        }
        inner.next_offset = next;
        inner.unflushed_records += next - base_offset;
        inner.oldest_unflushed_ms.get_or_insert(now);
        Ok(())
    }

    /// Checks every batch; returns what the log and the producer state need
    /// of each (the offsets still to be assigned).
    fn validate(
        &self,
        batches: &[u8],
    ) -> Result<(Vec<BatchInfo>, Vec<Option<ProducerBatch>>), LogError> {
        let (limit, compacted) = {
            let inner = self.shared();
            (inner.config.max_message_bytes, inner.config.cleanup.compact)
        };
        let mut infos = Vec::new();
        let mut producers = Vec::new();
        let mut rest = batches;
        while !rest.is_empty() {
            let batch = RecordBatch::parse_and_verify(rest)?;
            if batch.size_bytes() > limit {
                return Err(LogError::BatchTooLarge {
                    size: batch.size_bytes(),
                    limit,
                });
            }
            // A compressed batch is inflated whole to be checked: under a
            // slot, so that memory is bounded whatever the producers.
            let inflated = !matches!(batch.header().compression(), Ok(Compression::None));
            let _slot = inflated.then(decompression_slots::take);
            batch.validate_records(decompressed_limit(limit))?;
            if compacted {
                self.check_keyed(&batch, decompressed_limit(limit))?;
            }
            if batch.header().record_count == 0 {
                return Err(
                    strata_record::RecordError::Invalid("batch holds no records".into()).into(),
                );
            }
            self.check_producer_fields(batch.header())?;
            infos.push(BatchInfo::of(batch.header()));
            producers.push(ProducerBatch::of(batch.header()));
            rest = &rest[batch.size_bytes()..];
        }
        if infos.is_empty() {
            return Err(
                strata_record::RecordError::Invalid("no record batch to append".into()).into(),
            );
        }
        // One append lands in one segment, whose positions and relative
        // offsets are 31-bit.
        let span: i64 = infos
            .iter()
            .map(|i| i64::from(i.last_offset_delta) + 1)
            .sum();
        if batches.len() as u64 > SEGMENT_BYTES_MAX || span > i64::from(i32::MAX) {
            return Err(LogError::BatchTooLarge {
                size: batches.len(),
                limit: SEGMENT_BYTES_MAX as usize,
            });
        }
        Ok((infos, producers))
    }

    /// Refuses a batch with a record without a key (Kafka's rule for
    /// compacted topics: such a record could never be compacted away).
    fn check_keyed(
        &self,
        batch: &RecordBatch<'_>,
        decompressed_max: usize,
    ) -> Result<(), LogError> {
        for record in batch.records(decompressed_max)?.iter() {
            let record = record?;
            if record.key.is_none() {
                return Err(LogError::UnkeyedRecord {
                    partition: self.name.clone(),
                    offset: record.offset - batch.header().base_offset,
                });
            }
        }
        Ok(())
    }
}
