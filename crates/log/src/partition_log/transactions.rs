//! Transactions in a partition: the markers that end them, the last stable
//! offset they hold back, and what `read_committed` readers are told about
//! aborted ones (see `transaction_index`).

use super::{AppendInfo, Inner, PartitionLog};
use crate::{AbortedTransaction, LogError, OpenTransaction};
use strata_record::time::now_ms;
use strata_record::{ControlRecord, RecordBatch};

use crate::segment::BatchInfo;

impl PartitionLog {
    /// Appends a transaction marker for `producer_id` at `producer_epoch`
    /// (which ends its open transaction here, if it has one) and returns
    /// where it landed. A marker of an epoch older than the producer's
    /// current one here is refused: that producer was fenced. Not durable
    /// until [`PartitionLog::flush_to`].
    pub fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: ControlRecord,
    ) -> Result<AppendInfo, LogError> {
        let now = now_ms();
        let bytes = marker.batch(producer_id, producer_epoch, now);
        let header = *RecordBatch::parse(&bytes)?.header();
        let mut inner = self.exclusive();
        self.check_writable(&inner)?;
        if let Some(current) = inner.producers.epoch(producer_id)
            && producer_epoch < current
        {
            return Err(LogError::InvalidProducerEpoch {
                partition: self.name.clone(),
                producer_id,
                epoch: producer_epoch,
                current_epoch: current,
            });
        }
        let offset = inner.next_offset;
        let info = BatchInfo {
            base_offset: offset,
            last_offset: offset,
            ..BatchInfo::of(&header)
        };
        self.write(&mut inner, &bytes, &[info], offset + 1, now)?;
        inner
            .producers
            .marker(producer_id, producer_epoch, offset, now);
        inner.transactions.marker(producer_id, marker.kind, offset);
        tracing::debug!(
            partition = %self.name,
            producer_id,
            producer_epoch,
            offset,
            marker = marker.kind.name(),
            "wrote a transaction marker"
        );
        Ok(AppendInfo {
            base_offset: offset,
            last_offset: offset,
            record_count: 1,
            log_start_offset: inner.log_start_offset(),
            duplicate: false,
        })
    }

    /// The first offset a `read_committed` reader may not see yet: the
    /// first offset of the oldest open transaction, or the log end.
    pub fn last_stable_offset(&self) -> i64 {
        let inner = self.shared();
        last_stable(&inner)
    }

    /// The open transactions of this partition, oldest first.
    pub fn open_transactions(&self) -> Vec<OpenTransaction> {
        self.shared().transactions.open_transactions()
    }

    /// Aborted transactions that a read from `from` up to `to` may meet.
    pub fn aborted_transactions(&self, from: i64, to: i64) -> Vec<AbortedTransaction> {
        self.shared().transactions.aborted_between(from, to)
    }
}

/// The last stable offset under a lock already held.
pub(super) fn last_stable(inner: &Inner) -> i64 {
    let first = inner
        .transactions
        .first_unstable_offset()
        .map_or(inner.next_offset, |first| first.min(inner.next_offset));
    // An open transaction whose start retention took is read from the start.
    first.max(inner.log_start_offset())
}
