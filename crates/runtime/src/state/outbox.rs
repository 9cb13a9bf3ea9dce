//! Emitted records into outbox batches: one open v2 batch per derived
//! partition, stamped with the task's producer id, epoch and the
//! partition's next sequence; sealed at [`OUTBOX_BATCH_RECORDS_MAX`]
//! records, [`OUTBOX_BATCH_BYTES_MAX`] bytes, or at commit. The bytes
//! committed are the bytes shipped, every time, so a batch shipped again
//! after a crash carries the same sequences and the log recognises it.
//!
//! The outbox's keys are dense sequences, written by commits from
//! `next_outbox` up and deleted once shipped. No live key lies below the
//! floor (`outbox_floor`), which every read starts from; it lives in memory
//! only, 0 at open (the first read steps over the deletes not yet
//! compacted, once), and rises to the first key read and past each
//! shipped batch.

use std::sync::atomic::{AtomicU64, Ordering};

use rocksdb::{DB, Direction, IteratorMode, ReadOptions, WriteBatch};

use strata_record::{BatchBuilder, Compression, NewRecord};

use super::meta::decode_u64;
use super::outbox_codec::OutboxBatch;
use super::{OUTBOX, StateError, TaskState};

/// Most records in one outbox batch.
pub const OUTBOX_BATCH_RECORDS_MAX: usize = 8192;
/// Largest outbox batch (uncompressed records), well under the 1 MiB
/// default message size limit of Kafka brokers.
pub const OUTBOX_BATCH_BYTES_MAX: usize = 512 * 1024;
/// At most this many outbox batches per derived partition in one commit:
/// a Kafka broker recognises a resend among a producer's last 5 batches per
/// partition only, and after a crash the whole outbox is shipped again.
pub const OUTBOX_BATCHES_PER_PARTITION_MAX: usize = 5;

/// A derived partition's batch being filled.
pub(super) struct OpenBatch {
    topic: String,
    partition: i32,
    builder: BatchBuilder,
}

/// Where the outbox's sequences stand: the next one a sealed batch gets,
/// and the floor no batch lies below (the lower bound of every outbox
/// read, raised as batches are shipped).
#[derive(Debug, Default)]
pub(super) struct OutboxLedger {
    pub next: u64,
    pub floor: AtomicU64,
}

impl TaskState {
    /// Outbox batches not yet shipped, oldest first, with their outbox
    /// sequence.
    pub fn outbox(&self) -> Result<Vec<(u64, OutboxBatch)>, StateError> {
        let mut entries = Vec::new();
        for item in self.outbox_entries()? {
            let (key, value) = item?;
            let seq = decode_u64(&key)?;
            entries.push((seq, OutboxBatch::decode(seq, &value)?));
        }
        if let Some((first, _)) = entries.first() {
            self.outbox.floor.fetch_max(*first, Ordering::Relaxed);
        }
        Ok(entries)
    }

    /// Whether every committed outbox batch has been shipped.
    pub fn outbox_is_empty(&self) -> Result<bool, StateError> {
        match self.outbox_entries()?.next() {
            None => Ok(true),
            Some(item) => item.map(|_| false).map_err(StateError::from),
        }
    }

    /// Removes shipped outbox batches, up to and including `through`: one
    /// point delete per batch, from the floor up.
    ///
    /// Not one range delete from 0: every commit would add a range
    /// tombstone overlapping all the ones before, and RocksDB fragments the
    /// memtable's range tombstones over again to read, so each commit would
    /// cost more than the one before (160,000 input lines of the word count
    /// took six times as long as with point deletes, and a million never
    /// finished).
    pub fn remove_shipped(&self, through: u64) -> Result<(), StateError> {
        // Shipped batches were read from a settled commit: deleting past
        // them, or under a commit still being written, could put the floor
        // above batches never shipped.
        assert!(
            self.pipeline.in_flight.is_none(),
            "outbox batches removed while a commit is in flight"
        );
        assert!(
            through < self.outbox.next,
            "outbox batches removed through {through}, past the last committed ({})",
            self.outbox.next.wrapping_sub(1)
        );
        let cf = self.cf(OUTBOX)?;
        let floor = self.outbox.floor.load(Ordering::Relaxed);
        let mut batch = WriteBatch::default();
        for seq in floor..=through {
            batch.delete_cf(cf, seq.to_be_bytes());
        }
        self.write(batch)?;
        self.outbox.floor.fetch_max(through + 1, Ordering::Relaxed);
        Ok(())
    }

    /// The outbox from its floor: the deletes of batches shipped before are
    /// below the iterator's lower bound, so it never steps over them.
    fn outbox_entries(&self) -> Result<rocksdb::DBIteratorWithThreadMode<'_, DB>, StateError> {
        let cf = self.cf(OUTBOX)?;
        let mut options = ReadOptions::default();
        let floor = self.outbox.floor.load(Ordering::Relaxed);
        options.set_iterate_lower_bound(floor.to_be_bytes());
        Ok(self.db.iterator_cf_opt(
            cf,
            options,
            IteratorMode::From(&floor.to_be_bytes(), Direction::Forward),
        ))
    }

    /// Whether the run must be committed before more is emitted: one more
    /// full batch, plus the open one sealed at the commit, could put more
    /// than [`OUTBOX_BATCHES_PER_PARTITION_MAX`] batches of one partition
    /// in the outbox.
    pub fn outbox_full(&self) -> bool {
        let sealed = &self.run.sealed;
        sealed.len() >= OUTBOX_BATCHES_PER_PARTITION_MAX - 1
            && sealed.iter().any(|batch| {
                sealed
                    .iter()
                    .filter(|b| b.partition == batch.partition && b.topic == batch.topic)
                    .count()
                    >= OUTBOX_BATCHES_PER_PARTITION_MAX - 1
            })
    }

    /// Adds a record to the derived partition's batch. The record's
    /// producer sequence is fixed here: the partition's next.
    pub fn emit(
        &mut self,
        topic: &str,
        partition: i32,
        record: NewRecord<'_>,
    ) -> Result<(), StateError> {
        let at = match self
            .run
            .open
            .iter()
            .position(|b| b.partition == partition && b.topic == topic)
        {
            Some(at) => at,
            None => {
                let (producer_id, epoch) = self.meta.producer.ok_or(StateError::NoProducer)?;
                let slot = (topic.to_string(), partition);
                let in_flight = self.pipeline.in_flight.as_ref().map(|f| &f.sequences);
                let sequence = match self.run.sequences.get(&slot) {
                    Some(next) => *next,
                    None => match in_flight.and_then(|s| s.get(&slot)) {
                        Some(next) => *next,
                        None => self.next_sequence(topic, partition)?,
                    },
                };
                self.run.open.push(OpenBatch {
                    topic: topic.to_string(),
                    partition,
                    builder: BatchBuilder::new(Compression::None).producer(
                        producer_id,
                        epoch,
                        sequence,
                    ),
                });
                self.run.sequences.insert(slot, sequence);
                self.run.open.len() - 1
            }
        };
        let open = &mut self.run.open[at];
        open.builder
            .push(record)
            .map_err(|e| StateError::Emit(format!("{topic}/{partition}"), e.to_string()))?;
        if open.builder.len() >= OUTBOX_BATCH_RECORDS_MAX
            || open.builder.uncompressed_size_bytes() >= OUTBOX_BATCH_BYTES_MAX
        {
            let open = self.run.open.swap_remove(at);
            self.seal(open)?;
        }
        Ok(())
    }

    pub(super) fn seal(&mut self, open: OpenBatch) -> Result<(), StateError> {
        let count = i32::try_from(open.builder.len()).expect("bounded by the batch limit");
        let slot = (open.topic.clone(), open.partition);
        let next = self
            .run
            .sequences
            .get_mut(&slot)
            .expect("set when the batch opened");
        *next = strata_record::add_sequence(*next, count);
        let batch = open.builder.into_batch().map_err(|e| {
            StateError::Emit(format!("{}/{}", open.topic, open.partition), e.to_string())
        })?;
        self.run.sealed.push(OutboxBatch {
            topic: open.topic,
            partition: open.partition,
            batch,
        });
        Ok(())
    }
}
