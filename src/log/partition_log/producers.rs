//! Idempotent producers in a partition: what append refuses before the
//! producer state sees it, and what the state knows.

use super::PartitionLog;
use crate::log::LogError;
use crate::log::producer_state::{BatchMetadata, ProducerStateLoad};
use crate::record::{BatchHeader, RecordError};

impl PartitionLog {
    /// Refuses what the producer state cannot account for: transactions,
    /// control batches (only transaction markers are), and idempotent
    /// batches without an epoch or a sequence.
    pub(super) fn check_producer_fields(&self, header: &BatchHeader) -> Result<(), LogError> {
        let invalid = |reason: String| Err(RecordError::Invalid(reason).into());
        if header.is_transactional() {
            return Err(LogError::TransactionalBatch {
                partition: self.name.clone(),
            });
        }
        if header.is_control() {
            return invalid("control batches are written by the broker, not by producers".into());
        }
        if header.producer_id >= 0 && (header.producer_epoch < 0 || header.base_sequence < 0) {
            return invalid(format!(
                "batch of producer {} has epoch {} and base sequence {}; an idempotent \
                 producer's batch needs both",
                header.producer_id, header.producer_epoch, header.base_sequence
            ));
        }
        Ok(())
    }

    /// The current epoch of an idempotent producer in this partition, if it
    /// has batches here (or had, before retention deleted them while open).
    pub fn producer_epoch(&self, producer_id: i64) -> Option<i16> {
        self.shared().producers.epoch(producer_id)
    }

    /// The batches remembered for an idempotent producer, oldest first.
    pub fn producer_batches(&self, producer_id: i64) -> Vec<BatchMetadata> {
        self.shared().producers.batches(producer_id)
    }

    /// The largest producer id this partition has seen since it was opened
    /// (including in the batches it was opened with); -1 if none.
    pub fn max_producer_id(&self) -> i64 {
        self.shared().producers.max_producer_id()
    }

    /// Producers whose state this partition keeps.
    pub fn producer_count(&self) -> usize {
        self.shared().producers.len()
    }

    /// Forgets producers idle for
    /// [`PRODUCER_EXPIRATION_MS`](crate::log::PRODUCER_EXPIRATION_MS) as of
    /// `now_ms`; returns how many.
    pub fn expire_producers(&self, now_ms: i64) -> usize {
        self.exclusive().producers.expire(now_ms)
    }

    /// What rebuilding the producer state on open read.
    pub fn producer_state_load(&self) -> ProducerStateLoad {
        self.report.producer_state
    }
}
