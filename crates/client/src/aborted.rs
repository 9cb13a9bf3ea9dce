//! Which fetched batches a `read_committed` reader sees, as Kafka's
//! consumers decide it: never a control batch (a transaction marker), and
//! never a batch of an aborted transaction. A read_committed Fetch answer
//! lists, for each partition, the (producer id, first offset) of every
//! aborted transaction its batches may hold; such a transaction's batches
//! run from its first offset to the producer's ABORT marker.

use std::collections::HashSet;

use strata_record::{ControlRecord, MarkerKind, RecordBatch};

/// The aborted transactions of one fetched partition, walked with its
/// batches in log order.
#[derive(Debug, Default)]
pub struct AbortedFilter {
    /// (producer id, first offset), by first offset, not yet reached.
    pending: std::collections::VecDeque<(i64, i64)>,
    /// Producers whose aborted transaction is under way.
    skipping: HashSet<i64>,
}

impl AbortedFilter {
    pub fn new(mut aborted: Vec<(i64, i64)>) -> Self {
        aborted.sort_by_key(|&(_, first)| first);
        Self {
            pending: aborted.into(),
            skipping: HashSet::new(),
        }
    }

    /// Whether an application sees `batch`; to be asked of every fetched
    /// batch, markers included, in log order.
    pub fn visible(&mut self, batch: &RecordBatch<'_>) -> bool {
        let header = batch.header();
        // Every batch, markers included, starts the aborted transactions
        // that begin at or before it.
        while let Some(&(producer_id, first)) = self.pending.front() {
            if first > header.last_offset() {
                break;
            }
            self.skipping.insert(producer_id);
            self.pending.pop_front();
        }
        if header.is_control() {
            let ends_abort = ControlRecord::of(batch).is_ok_and(|m| m.kind == MarkerKind::Abort);
            if ends_abort {
                self.skipping.remove(&header.producer_id);
            }
            return false;
        }
        !(header.is_transactional() && self.skipping.contains(&header.producer_id))
    }
}
