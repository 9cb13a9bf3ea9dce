//! The commit: the run's store writes, its outbox batches, the derived
//! partitions' next sequences and the next input offsets in ONE RocksDB
//! write batch, begun on the writer thread ([`TaskState::begin_commit`])
//! and settled later ([`TaskState::settle`]). A store with a changelog has
//! its writes emitted to it in the same commit (its outbox batches), so the
//! changelog never holds more or less than the committed state.
//!
//! Invariants (asserted): at most one commit is in flight; input offsets
//! never move back; once settled, the offsets in the database are the
//! offsets the commit wrote (read back). The task asserts the outbox bound:
//! a commit begins with the one before shipped (`task::commit`). A failed
//! write poisons the state: nothing more is committed until it is
//! reopened.

use std::collections::BTreeMap;
use std::sync::Arc;

use rocksdb::WriteBatch;

use super::dirty_entries::DirtyEntries;
use super::inline_bytes::InlineBytes;
use super::meta::{
    COMMIT, INPUT_OFFSET_PREFIX, NEXT_OUTBOX, RATE, START_OFFSET_PREFIX, sequence_key, topic_key,
};
use super::store_map::StoreMap;
use super::writer::{CommitJob, Writer};
use super::{META, OUTBOX, StateError, TaskState};

/// The commit pipeline: at most one commit in flight, written on the
/// writer thread (started with the first commit), and what stops commits.
pub(super) struct Pipeline {
    /// fsync the WAL with every commit.
    pub sync: bool,
    /// A commit whose write runs on its own thread (see
    /// [`TaskState::begin_commit`]).
    pub in_flight: Option<InFlight>,
    pub writer: Option<Writer>,
    /// Why the state can no longer commit: a commit failed after the
    /// tables or the bookkeeping had moved on. Reopen it to go on.
    pub poisoned: Option<String>,
    /// Store entries put in commits' write batches since the state opened.
    pub store_writes: u64,
}

impl Pipeline {
    pub(super) fn new(sync: bool) -> Self {
        Self {
            sync,
            in_flight: None,
            writer: None,
            poisoned: None,
            store_writes: 0,
        }
    }

    /// Stops commits for `why` (the first reason is kept).
    fn poison(&mut self, why: &str) {
        self.poisoned.get_or_insert_with(|| why.to_string());
    }

    fn check_poisoned(&self) -> Result<(), StateError> {
        match &self.poisoned {
            Some(why) => Err(StateError::Poisoned(why.clone())),
            None => Ok(()),
        }
    }
}

/// A commit being written.
pub(super) struct InFlight {
    /// The derived partitions' next sequences it writes.
    pub sequences: BTreeMap<(String, i32), i32>,
    /// How the write ended, once it has and the task has looked.
    pub landed: Option<Result<(), StateError>>,
}

impl TaskState {
    /// Writes everything of the run and the next input offsets in one write
    /// batch. Returns how many outbox batches it added.
    pub fn commit(&mut self, next_input_offsets: &[(&str, i64)]) -> Result<usize, StateError> {
        let added = self.begin_commit(next_input_offsets)?;
        self.settle()?;
        Ok(added)
    }

    /// [`commit`](Self::commit), with the write (and its fsync) left to run
    /// on a thread of its own while the task goes on with its next run;
    /// [`settle`](Self::settle) waits for it. Until then the commit is not
    /// durable: its outbox batches must not be shipped, and another commit
    /// waits for it first. Reads see its values all along (they stay in
    /// the stores' tables, not evicted while it runs). Returns how many
    /// outbox batches it added.
    pub fn begin_commit(
        &mut self,
        next_input_offsets: &[(&str, i64)],
    ) -> Result<usize, StateError> {
        self.settle()?;
        self.check_poisoned()?;
        assert!(
            self.pipeline.in_flight.is_none(),
            "at most one commit in flight: the one before is settled first"
        );
        self.check_forward(next_input_offsets)?;
        self.stage_timers();
        // The run's writes, taken from the tables: from here on a failure
        // poisons the state (the tables no longer hold them as written).
        // Sorted and put in the write batch by the commit's own thread.
        let mut writes = self.take_writes();
        if let Err(error) = self.emit_changelogs(&writes) {
            self.poison("a commit's changelog records could not be built");
            return Err(error);
        }
        for open in std::mem::take(&mut self.run.open) {
            if let Err(error) = self.seal(open) {
                self.poison("a commit's outbox batch could not be sealed");
                return Err(error);
            }
        }
        let mut batch = WriteBatch::default();
        self.put_journal(&mut batch, &mut writes)?;
        let (next_outbox, commit_number) = self.put_meta(&mut batch, next_input_offsets)?;
        let writes = (writes.into_iter())
            .map(|(index, entries)| (self.stores[index].clone(), entries))
            .collect();
        self.send(CommitJob { batch, writes })?;
        self.pipeline.in_flight = Some(InFlight {
            sequences: std::mem::take(&mut self.run.sequences),
            landed: None,
        });
        self.run.rate = None;
        self.run.starts.clear();
        self.outbox.next = next_outbox;
        self.meta.commit_number = commit_number;
        for (topic, next) in next_input_offsets {
            self.meta.offsets.insert(topic.to_string(), *next);
        }
        for map in &mut self.maps {
            // The written values stay, clean: the cache of what is committed
            // (dropped whole when it next outgrows its bound, not before
            // the write is settled).
            map.limit = 0;
            map.reshare();
            map.dirty.clear();
        }
        let added = self.run.sealed.len();
        self.run.sealed.clear();
        Ok(added)
    }

    /// Refuses input offsets that move back.
    fn check_forward(&self, next_input_offsets: &[(&str, i64)]) -> Result<(), StateError> {
        for (topic, next) in next_input_offsets {
            if let Some(current) = self.input_offset(topic)
                && *next < current
            {
                return Err(StateError::OffsetBackwards {
                    topic: topic.to_string(),
                    current,
                    next: *next,
                });
            }
        }
        Ok(())
    }

    /// The run's dirty entries of each store (by index), taken out of the
    /// tables.
    fn take_writes(&mut self) -> Vec<(usize, Vec<u8>)> {
        let mut writes = Vec::new();
        for (index, map) in self.maps.iter_mut().enumerate() {
            if map.dirty.is_empty() {
                continue;
            }
            let mut entries = Vec::new();
            if map.dirty.len() * 16 < map.slots.capacity() {
                // A few keys of a large table: looked up one by one.
                map.slots
                    .take_dirty_keys(map.dirty.iter().map(InlineBytes::as_slice), &mut entries);
            } else {
                map.slots.take_dirty(&mut entries);
            }
            writes.push((index, entries));
        }
        writes
    }

    /// With the write cache off, every write of the run as it was made, in
    /// order (the last of a key's writes wins within the batch), in place
    /// of the merged ones (`writes` emptied); counted either way.
    fn put_journal(
        &mut self,
        batch: &mut WriteBatch,
        writes: &mut Vec<(usize, Vec<u8>)>,
    ) -> Result<(), StateError> {
        let Some(journal) = self.journal.as_mut().map(std::mem::take) else {
            self.pipeline.store_writes += writes.iter().map(|(_, e)| dirty_count(e)).sum::<u64>();
            return Ok(());
        };
        self.pipeline.store_writes += journal.len() as u64;
        let families: Result<Vec<_>, _> = (self.stores.iter()).map(|s| self.cf(s)).collect();
        let families = match families {
            Ok(families) => families,
            Err(error) => {
                self.poison("a commit's store could not be found");
                return Err(error);
            }
        };
        for (index, key, value) in journal {
            match value {
                Some(value) => batch.put_cf(families[index], key, value),
                None => batch.delete_cf(families[index], key),
            }
        }
        writes.clear();
        Ok(())
    }

    /// The outbox batches sealed in the run and the meta of the commit
    /// (next outbox sequence, derived partitions' sequences, input
    /// offsets, commit number, rate, start offsets) into `batch`; the next
    /// outbox sequence and the commit's number.
    fn put_meta(
        &self,
        batch: &mut WriteBatch,
        next_input_offsets: &[(&str, i64)],
    ) -> Result<(u64, u64), StateError> {
        let outbox = self.cf(OUTBOX)?;
        let first = self.outbox.next;
        for (seq, entry) in (first..).zip(&self.run.sealed) {
            batch.put_cf(outbox, seq.to_be_bytes(), entry.encode());
        }
        let meta = self.cf(META)?;
        let next_outbox = first + self.run.sealed.len() as u64;
        if !self.run.sealed.is_empty() {
            batch.put_cf(meta, NEXT_OUTBOX, next_outbox.to_be_bytes());
        }
        for ((topic, partition), next) in &self.run.sequences {
            let key = sequence_key(topic, *partition);
            batch.put_cf(meta, key, i64::from(*next).to_be_bytes());
        }
        for (topic, next) in next_input_offsets {
            let key = topic_key(INPUT_OFFSET_PREFIX, topic);
            batch.put_cf(meta, key, next.to_be_bytes());
        }
        let commit_number = self.meta.commit_number + 1;
        batch.put_cf(meta, COMMIT, commit_number.to_be_bytes());
        if let Some(rate) = self.run.rate {
            batch.put_cf(meta, RATE, rate.to_bits().to_be_bytes());
        }
        for (topic, start) in &self.run.starts {
            let key = topic_key(START_OFFSET_PREFIX, topic);
            batch.put_cf(meta, key, start.to_be_bytes());
        }
        Ok((next_outbox, commit_number))
    }

    /// Hands the commit's write to the writer thread (started on the first
    /// commit).
    fn send(&mut self, job: CommitJob) -> Result<(), StateError> {
        if self.pipeline.writer.is_none() {
            let (db, stores) = (Arc::clone(&self.db), self.stores.join(", "));
            match Writer::start(db, self.pipeline.sync, stores) {
                Ok(writer) => self.pipeline.writer = Some(writer),
                Err(error) => {
                    self.poison("the commit writer could not be started");
                    return Err(StateError::Io("starting the commit writer".into(), error));
                }
            }
        }
        let writer = self.pipeline.writer.as_mut().expect("started above");
        if writer.send(job).is_err() {
            self.poison("the commit writer stopped");
            return Err(StateError::WriterStopped {
                stores: self.stores.join(", "),
            });
        }
        Ok(())
    }

    /// Whether a commit is in flight (begun, not yet settled).
    pub fn commit_in_flight(&self) -> bool {
        self.pipeline.in_flight.is_some()
    }

    /// Whether a commit's write is running and has finished.
    pub fn commit_landed(&mut self) -> bool {
        let (Some(flight), Some(writer)) =
            (&mut self.pipeline.in_flight, &mut self.pipeline.writer)
        else {
            return false;
        };
        if flight.landed.is_none()
            && let Some(written) = writer.try_answer()
        {
            flight.landed = Some(written);
        }
        flight.landed.is_some()
    }

    /// Waits for the commit in flight, if any: once this returns Ok, it is
    /// durable (as `sync` makes it).
    pub fn settle(&mut self) -> Result<(), StateError> {
        self.check_poisoned()?;
        let Some(mut flight) = self.pipeline.in_flight.take() else {
            return Ok(());
        };
        let writer = (self.pipeline.writer)
            .as_mut()
            .expect("a commit in flight has a writer");
        let written = match flight.landed.take() {
            Some(written) => written,
            None => writer.answer(),
        };
        if written.is_ok() {
            // What the commit wrote is what the database holds now.
            let stored = self.read_input_offsets()?;
            assert_eq!(
                stored, self.meta.offsets,
                "the input offsets read back differ from the offsets committed"
            );
        }
        if let Err(error) = &written {
            // The offsets, outbox numbers and sequences have moved past
            // what the database holds: nothing more is committed from this
            // state, and nothing that did not reach the database stays
            // readable.
            self.poison(&format!("a commit's write failed: {error}"));
            for map in &mut self.maps {
                *map = StoreMap::open();
            }
        }
        written
    }

    fn poison(&mut self, why: &str) {
        self.pipeline.poison(why);
    }

    fn check_poisoned(&self) -> Result<(), StateError> {
        self.pipeline.check_poisoned()
    }
}

/// How many entries a store's taken writes hold.
fn dirty_count(entries: &[u8]) -> u64 {
    DirtyEntries::new(entries).count() as u64
}
