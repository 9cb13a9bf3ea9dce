//! Idempotent producers in a partition: what append refuses before the
//! producer state sees it, and what the state knows.

use super::{Inner, PartitionLog};
use crate::LogError;
use crate::ProducerStateLoad;
use crate::producer_state::BatchMetadata;
use strata_record::{BatchHeader, RecordError};

/// A producer as DescribeProducers reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp: i64,
    pub open_transaction_first_offset: Option<i64>,
}

impl PartitionLog {
    /// Refuses what the producer state cannot account for: transactions,
    /// control batches (only transaction markers are), and idempotent
    /// batches without an epoch or a sequence.
    pub(super) fn check_producer_fields(&self, header: &BatchHeader) -> Result<(), LogError> {
        let invalid = |reason: String| Err(RecordError::Invalid(reason).into());
        if header.is_transactional() && header.producer_id < 0 {
            return invalid(
                "a transactional batch needs a producer id: the producer must be \
                 initialised with InitProducerId"
                    .into(),
            );
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

    /// Forgets producers idle for `expiration_ms` (Kafka's
    /// `producer.id.expiration.ms`; by default
    /// [`PRODUCER_EXPIRATION_MS`](crate::PRODUCER_EXPIRATION_MS)) as
    /// of `now_ms`, but none with a transaction open here; returns how many.
    pub fn expire_producers(&self, now_ms: i64, expiration_ms: i64) -> usize {
        let mut inner = self.exclusive();
        let Inner {
            producers,
            transactions,
            ..
        } = &mut *inner;
        producers.expire(now_ms, expiration_ms, |id| transactions.has_open(id))
    }

    /// Every producer this partition remembers, by id: its epoch, its last
    /// batch in that epoch (if any) and the first offset of its open
    /// transaction here (if any).
    pub fn active_producers(&self) -> Vec<ActiveProducer> {
        let inner = self.shared();
        inner
            .producers
            .snapshot()
            .into_iter()
            .map(|(producer_id, epoch, last)| ActiveProducer {
                producer_id,
                epoch,
                last_sequence: last.map_or(-1, |b| b.last_sequence),
                last_timestamp: last.map_or(-1, |b| b.max_timestamp),
                open_transaction_first_offset: inner
                    .transactions
                    .open_transaction(producer_id)
                    .map(|t| t.first_offset),
            })
            .collect()
    }

    /// What rebuilding the producer state on open read.
    pub fn producer_state_load(&self) -> ProducerStateLoad {
        self.report.producer_state
    }
}
