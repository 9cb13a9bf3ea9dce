//! The transactions of one partition: which are open (they hold back the
//! last stable offset) and which were aborted (the index a `read_committed`
//! fetch returns beside its batches, so the consumer can drop their records).
//!
//! A transaction opens in a partition with the first transactional batch of
//! its producer there, and ends with the control batch (COMMIT or ABORT
//! marker) the coordinator has the log write. Per producer at most one
//! transaction is open at a time: a producer begins its next one only after
//! the coordinator has ended the last everywhere.
//!
//! ```text
//! offsets   10   11   12   13    14     15   16
//! batches   P1   P2   P1   P2   P1:ABORT  P3  P2:COMMIT
//! ```
//! After offset 14, P1's transaction 10..=14 is aborted (an index entry
//! `(P1, first 10, last 14)`) and P2's is still open, so the last stable
//! offset is 11: `read_committed` consumers read up to, not including, 11.
//! After 16 nothing is open and it is the log end, 17.
//!
//! The invariants, kept under the partition's write lock:
//! - `open` holds, per producer, the offset of its first batch of the open
//!   transaction; the last stable offset is the least of them (or the log
//!   end, with none open) — always at a batch boundary;
//! - every aborted entry's `first_offset..=last_offset` spans exactly one
//!   transaction of one producer, and its last offset is its ABORT marker.
//!
//! Durability: none of its own. Like producer state, the table is rebuilt
//! on open from the batch headers that remain after recovery (a marker's
//! type is read from its one small record), so it always describes the log
//! as it is; retention forgets entries that end below the log start.

use std::collections::{BTreeMap, HashMap};

use strata_record::MarkerKind;

/// One aborted transaction, as a `read_committed` fetch reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTransaction {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The offset of its ABORT marker.
    pub last_offset: i64,
}

/// An open transaction in this partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenTransaction {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub first_offset: i64,
    /// Offset of its latest batch here.
    pub last_offset: i64,
}

#[derive(Debug, Default)]
pub(crate) struct TransactionIndex {
    open: HashMap<i64, OpenTransaction>,
    /// Aborted transactions by the offset of their ABORT marker.
    aborted: BTreeMap<i64, AbortedTransaction>,
}

impl TransactionIndex {
    /// A transactional data batch of `producer_id` at `base..=last`.
    pub fn data(&mut self, producer_id: i64, producer_epoch: i16, base: i64, last: i64) {
        let open = self.open.entry(producer_id).or_insert(OpenTransaction {
            producer_id,
            producer_epoch,
            first_offset: base,
            last_offset: last,
        });
        open.last_offset = last;
        open.producer_epoch = producer_epoch;
    }

    /// A marker of `producer_id` at `offset`: its open transaction (if any)
    /// ends. A marker with nothing open (a coordinator writing markers again
    /// after a restart, or a transaction that wrote nothing here) changes
    /// nothing.
    pub fn marker(&mut self, producer_id: i64, kind: MarkerKind, offset: i64) {
        let Some(open) = self.open.remove(&producer_id) else {
            return;
        };
        debug_assert!(open.first_offset < offset, "a marker follows its data");
        if kind == MarkerKind::Abort {
            self.aborted.insert(
                offset,
                AbortedTransaction {
                    producer_id,
                    first_offset: open.first_offset,
                    last_offset: offset,
                },
            );
        }
    }

    /// The first offset still in an open transaction, if any.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.open.values().map(|t| t.first_offset).min()
    }

    /// The open transaction of `producer_id`, if any.
    pub fn open_transaction(&self, producer_id: i64) -> Option<OpenTransaction> {
        self.open.get(&producer_id).copied()
    }

    /// Whether `producer_id` has a transaction open here (its producer
    /// state is then never forgotten: `producer_state`).
    pub fn has_open(&self, producer_id: i64) -> bool {
        self.open.contains_key(&producer_id)
    }

    /// Every open transaction, by first offset.
    pub fn open_transactions(&self) -> Vec<OpenTransaction> {
        let mut open: Vec<_> = self.open.values().copied().collect();
        open.sort_by_key(|t| t.first_offset);
        open
    }

    /// Aborted transactions a read of `from..to` may meet: those ending at
    /// or after `from` and starting before `to`, by first offset.
    pub fn aborted_between(&self, from: i64, to: i64) -> Vec<AbortedTransaction> {
        let mut found: Vec<_> = self
            .aborted
            .range(from..)
            .map(|(_, aborted)| *aborted)
            .filter(|aborted| aborted.first_offset < to)
            .collect();
        found.sort_by_key(|a| a.first_offset);
        found
    }

    /// Forgets aborted transactions that end below `log_start_offset`
    /// (retention deleted them), and open ones wholly below it.
    pub fn forget_below(&mut self, log_start_offset: i64) {
        self.aborted = self.aborted.split_off(&log_start_offset);
        self.open.retain(|_, t| t.last_offset >= log_start_offset);
    }

    #[cfg(test)]
    pub fn aborted_count(&self) -> usize {
        self.aborted.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_of_the_module_doc() {
        let mut index = TransactionIndex::default();
        index.data(1, 0, 10, 10);
        index.data(2, 0, 11, 11);
        index.data(1, 0, 12, 12);
        index.data(2, 0, 13, 13);
        index.marker(1, MarkerKind::Abort, 14);
        assert_eq!(index.first_unstable_offset(), Some(11));
        index.data(3, 0, 15, 15);
        index.marker(3, MarkerKind::Commit, 16);
        assert_eq!(index.first_unstable_offset(), Some(11));
        index.marker(2, MarkerKind::Commit, 17);
        assert_eq!(index.first_unstable_offset(), None);
        let aborted = AbortedTransaction {
            producer_id: 1,
            first_offset: 10,
            last_offset: 14,
        };
        assert_eq!(index.aborted_between(0, 100), [aborted]);
        assert_eq!(index.aborted_between(14, 15), [aborted]);
        assert!(index.aborted_between(15, 100).is_empty());
        assert!(index.aborted_between(0, 10).is_empty());
    }

    #[test]
    fn a_marker_with_nothing_open_changes_nothing() {
        let mut index = TransactionIndex::default();
        index.marker(7, MarkerKind::Abort, 3);
        assert_eq!(index.aborted_count(), 0);
        assert_eq!(index.first_unstable_offset(), None);
    }

    #[test]
    fn retention_forgets_what_ends_below_the_log_start() {
        let mut index = TransactionIndex::default();
        index.data(1, 0, 0, 0);
        index.marker(1, MarkerKind::Abort, 1);
        index.data(1, 0, 2, 2);
        index.marker(1, MarkerKind::Abort, 5);
        index.forget_below(2);
        assert_eq!(index.aborted_count(), 1);
        assert_eq!(index.aborted_between(0, 10)[0].first_offset, 2);
    }
}
