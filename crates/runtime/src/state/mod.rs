//! A task's durable state: one RocksDB with a column family per state
//! store, `meta` (input offsets, the task's producer identity, the next
//! producer sequence of every derived partition; see [`meta`]) and
//! `outbox` (record batches to append to derived topics, keyed by a dense
//! u64 sequence; see [`outbox_codec`]).
//!
//! A `TaskState` buffers the writes of one run of records: reads see the
//! run's own earlier writes (point reads and ordered scans merge them over
//! the database), and [`TaskState::commit`] writes the state changes, the
//! outbox batches, the producer sequences and the next input offsets in ONE
//! write batch, so none of them moves without the others. An input offset
//! never moves backwards. [`TaskState::discard`] drops a run and leaves
//! nothing behind.
//!
//! - [`stores`]: get, put, delete, range and prefix scans; [`store_map`]
//!   and [`slot_table`] hold each store's values in memory, [`inline_bytes`]
//!   the run's written keys.
//! - [`outbox`]: emitted records into sealed batches; [`outbox_codec`]: an
//!   outbox value's bytes.
//! - [`commit`]: begin and settle; [`writer`]: the thread the write runs on.
//! - [`changelog`]: store writes emitted to changelog topics with each
//!   commit, and a store restored from one.
//! - [`timers`]: the timer store (timers and the stream time) of a
//!   processor that declares timers; due timers found in firing order.
//! - [`meta`]: offsets, producer identity, sequences, rate.
//! - [`checkpoints`]: hard-linked copies of the committed state.
//!
//! A `TaskState` is made of owned parts, each with its file: the stores'
//! maps (`store_map`), [`meta`]'s `Meta` (producer, offsets, lineage,
//! commit number), [`outbox`]'s `OutboxLedger` (next sequence, floor),
//! [`commit`]'s `Pipeline` (the commit in flight, its writer, poisoning),
//! [`timers`]' `TimerState`, and the run's emits.
//!
//! Thread-safety: a `TaskState` belongs to one task; RocksDB calls block, so
//! the task runs them on a blocking thread, never an async executor's.

mod cache_line;
mod changelog;
mod checkpoints;
mod commit;
mod db_stats;
mod dirty_entries;
mod error;
pub(crate) mod inline_bytes;
mod key_words;
mod latest_table;
pub mod memory;
mod meta;
mod outbox;
#[doc(hidden)]
pub mod outbox_codec;
mod restore_buffer;
pub(crate) mod slot_table;
mod spill_slab;
mod store_map;
mod stores;
mod timers;
mod writer;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rocksdb::{ColumnFamilyDescriptor, DB, Options, WriteBatch};

pub use changelog::Restoring;
pub use db_stats::DbStats;
pub use error::StateError;
pub use meta::Restored;
pub use outbox::{
    OUTBOX_BATCH_BYTES_MAX, OUTBOX_BATCH_RECORDS_MAX, OUTBOX_BATCHES_PER_PARTITION_MAX,
};
pub use outbox_codec::OutboxBatch;
pub(crate) use stores::{EncodeBuffers, prefix_end};

use commit::Pipeline;
use meta::{Meta, NEXT_OUTBOX, decode_u64};
use outbox::{OpenBatch, OutboxLedger};
use store_map::StoreMap;
use timers::TimerState;

/// Column family of the runtime's own bookkeeping.
const META: &str = "meta";
/// Column family of record batches waiting to be shipped.
const OUTBOX: &str = "outbox";
/// RocksDB's own column family, present in every database.
const DEFAULT_FAMILY: &str = "default";
/// Most bytes of write-ahead log a task's state keeps before RocksDB
/// flushes its memtables (what an open replays).
const WAL_BYTES_MAX: u64 = 64 << 20;

/// A store's (key, value).
pub type Entry = (Vec<u8>, Vec<u8>);

/// A task's state: see the module docs.
pub struct TaskState {
    db: Arc<DB>,
    stores: Vec<String>,
    maps: Vec<StoreMap>,
    /// What the state records of itself: producer, offsets, lineage and
    /// commit number (see [`meta`]).
    meta: Meta,
    /// Where the outbox's sequences stand (see [`outbox`]).
    outbox: OutboxLedger,
    /// The commit in flight, its writer thread, and what stops commits
    /// (see [`commit`]).
    pipeline: Pipeline,
    /// Per store (in the order of `stores`), the changelog partition its
    /// writes are emitted to with every commit, if it has one.
    changelogs: Vec<Option<(String, i32)>>,
    /// Opened for writing: flushed when it closes.
    writable: bool,
    /// With the write cache off (see [`TaskState::set_write_cache`]): every
    /// store write of the run, in order, each to be written as it is.
    journal: Option<Vec<JournalEntry>>,
    /// The emits of the run in progress.
    run: Run,
    /// The timer store's bookkeeping, when the processor declares timers
    /// (see [`timers`]).
    timers: Option<TimerState>,
    /// Reused for the encoded key and value of each store call.
    pub(crate) buffers: EncodeBuffers,
}

/// Locks of a store's in-place memtable updates (one task writes at a
/// time; readers are queries and scans).
const INPLACE_UPDATE_LOCKS: usize = 256;

impl TaskState {
    /// Opens (creating if missing) the state of one task with the given
    /// stores.
    pub fn open(dir: &Path, stores: &[&str], sync: bool) -> Result<Self, StateError> {
        for store in stores {
            if [META, OUTBOX, DEFAULT_FAMILY].contains(store) || store.is_empty() {
                return Err(StateError::ReservedName(store.to_string()));
            }
        }
        let mut options = Options::default();
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        // For in-place memtable updates (below).
        options.set_allow_concurrent_memtable_write(false);
        // Updated in place, the memtables stay small and are rarely
        // flushed by size, while the WAL keeps every commit: flushed once
        // the WAL holds this much, so an open replays at most this.
        options.set_max_total_wal_size(WAL_BYTES_MAX);
        let memory = memory::shared();
        memory.apply_to_database(&mut options);
        let families = stores.iter().copied().chain([META, OUTBOX]).map(|name| {
            let mut family = Options::default();
            memory.apply_to_family(&mut family);
            if name != META && name != OUTBOX {
                // A commit rewrites the values of keys written before
                // (counters, indexes): updated in place, the memtable
                // holds one entry per key instead of one per commit, so
                // commits stay fast as it fills, and flushes carry one
                // version per key. What that rules out for store
                // families, and nothing here does: snapshots, range
                // deletes, reverse iteration, and scans racing a write
                // (a scan settles the commit in flight first).
                family.set_inplace_update_support(true);
                // Its locks are striped over keys; RocksDB's default of
                // 10,000 costs over half a MiB per store, per task.
                family.set_inplace_update_locks(INPLACE_UPDATE_LOCKS);
            }
            ColumnFamilyDescriptor::new(name, family)
        });
        let db = Arc::new(DB::open_cf_descriptors(&options, dir, families)?);
        let stores = stores.iter().map(|s| s.to_string()).collect();
        let mut state = Self::with_db(db, stores, sync)?;
        state.writable = true;
        Ok(state)
    }

    /// Opens existing state for reading only, with whatever stores it has;
    /// works while the task's process holds the database open.
    pub fn open_read_only(dir: &Path) -> Result<Self, StateError> {
        let options = Options::default();
        if !crate::layout::has_database(dir) {
            return Err(StateError::NeverOpened(dir.display().to_string()));
        }
        let families = DB::list_cf(&options, dir)?;
        // The runtime's families are created with the database; a process
        // killed during that first open leaves some missing.
        if ![META, OUTBOX]
            .iter()
            .all(|f| families.iter().any(|g| g == f))
        {
            return Err(StateError::NeverOpened(dir.display().to_string()));
        }
        let db = Arc::new(DB::open_cf_for_read_only(&options, dir, &families, false)?);
        let stores = families
            .into_iter()
            .filter(|f| ![META, OUTBOX, DEFAULT_FAMILY].contains(&f.as_str()))
            .collect();
        Self::with_db(db, stores, false)
    }

    fn with_db(db: Arc<DB>, stores: Vec<String>, sync: bool) -> Result<Self, StateError> {
        let mut state = Self {
            db,
            maps: stores.iter().map(|_| StoreMap::open()).collect(),
            stores,
            meta: Meta::default(),
            outbox: OutboxLedger::default(),
            pipeline: Pipeline::new(sync),
            changelogs: Vec::new(),
            writable: false,
            journal: None,
            run: Run::default(),
            timers: None,
            buffers: EncodeBuffers::default(),
        };
        state.meta.producer = state.read_producer()?;
        state.meta.offsets = state.read_input_offsets()?;
        (state.meta.lineage, state.meta.commit_number) = state.read_lineage()?;
        state.outbox.next = match state.db.get_cf(state.cf(META)?, NEXT_OUTBOX)? {
            None => 0,
            Some(raw) => decode_u64(&raw)?,
        };
        Ok(state)
    }

    pub fn stores(&self) -> &[String] {
        &self.stores
    }

    /// Emits every store write to the store's changelog partition with the
    /// commit it belongs to (`changelogs` in the order of the stores; None
    /// for a store without one).
    pub fn set_changelogs(&mut self, changelogs: Vec<Option<(String, i32)>>) {
        debug_assert_eq!(changelogs.len(), self.stores.len());
        self.changelogs = changelogs;
    }

    /// Forgets the run in progress: nothing of it is written (a commit in
    /// flight, of the run before, is settled first).
    pub fn discard(&mut self) {
        if let Err(error) = self.settle() {
            tracing::warn!("a commit in flight failed: {error}");
        }
        for map in &mut self.maps {
            map.discard();
        }
        self.discard_timers();
        self.run.open.clear();
        self.run.sealed.clear();
        self.run.sequences.clear();
        if let Some(journal) = &mut self.journal {
            journal.clear();
        }
    }

    /// Whether repeated writes of one key within a commit are merged into
    /// one database write (on: the default). Off, every put and delete of a
    /// run goes into the commit's write batch as it was made, which is what
    /// the cache saves a hot key; reads are the same either way.
    pub fn set_write_cache(&mut self, on: bool) {
        self.journal = (!on).then(Vec::new);
    }

    /// Store entries put in commits' write batches (puts and deletes) since
    /// the state was opened: a measure of the database writes the stores
    /// cost.
    pub fn store_writes(&self) -> u64 {
        self.pipeline.store_writes
    }

    /// The position of a store, for the `*_at` calls.
    pub(crate) fn index(&self, store: &str) -> Result<usize, StateError> {
        self.stores
            .iter()
            .position(|s| s == store)
            .ok_or_else(|| StateError::UnknownStore(store.to_string(), self.stores.join(", ")))
    }

    fn store_cf(&self, store: &str) -> Result<&rocksdb::ColumnFamily, StateError> {
        self.index(store)?;
        self.cf(store)
    }

    fn cf(&self, name: &str) -> Result<&rocksdb::ColumnFamily, StateError> {
        self.db
            .cf_handle(name)
            .ok_or_else(|| StateError::UnknownStore(name.to_string(), self.stores.join(", ")))
    }

    fn write(&self, batch: WriteBatch) -> Result<(), StateError> {
        let mut options = rocksdb::WriteOptions::default();
        options.set_sync(self.pipeline.sync);
        self.db.write_opt(batch, &options)?;
        Ok(())
    }
}

/// A store write as a processor made it: the store's position, the key,
/// the value (None: a delete).
type JournalEntry = (usize, Vec<u8>, Option<Vec<u8>>);

/// The emits of one run of records (its store writes are in the stores'
/// maps).
#[derive(Default)]
struct Run {
    /// Batches being filled, one per derived partition emitted to.
    open: Vec<OpenBatch>,
    /// Batches full before the commit, in the order they filled.
    sealed: Vec<OutboxBatch>,
    /// Next producer sequence of the derived partitions this run emitted to.
    sequences: BTreeMap<(String, i32), i32>,
    /// The processing rate to record with the commit.
    rate: Option<f64>,
    /// Where the task began reading inputs it had no offset for.
    starts: Vec<(String, i64)>,
}

impl Drop for TaskState {
    fn drop(&mut self) {
        if self.pipeline.in_flight.is_some()
            && let Err(error) = self.settle()
        {
            tracing::warn!("a commit in flight failed as its state closed: {error}");
        }
        // Settled above: no commit of this state is queued any more.
        drop(self.pipeline.writer.take());
        if self.writable && self.pipeline.poisoned.is_none() {
            // Everything committed goes to table files, so the next open
            // (a run, a rebuild, dump-state) has no write-ahead log to
            // replay: up to WAL_BYTES_MAX of it otherwise.
            let families = self.stores.iter().map(String::as_str).chain([META, OUTBOX]);
            for family in families {
                let flushed = match self.db.cf_handle(family) {
                    Some(handle) => self.db.flush_cf(handle),
                    None => Ok(()),
                };
                if let Err(error) = flushed {
                    tracing::warn!("flushing {family} as the state closed: {error}");
                }
            }
        }
    }
}
