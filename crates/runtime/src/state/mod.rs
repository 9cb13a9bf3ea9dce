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
//! Thread-safety: a `TaskState` belongs to one task; RocksDB calls block, so
//! the task runs them on a blocking thread, never an async executor's.

mod changelog;
mod checkpoints;
mod commit;
mod error;
pub(crate) mod inline_bytes;
mod key_words;
pub mod memory;
mod meta;
mod outbox;
#[doc(hidden)]
pub mod outbox_codec;
mod restore_buffer;
pub(crate) mod slot_table;
mod store_map;
mod stores;
mod timers;
mod writer;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use rocksdb::{ColumnFamilyDescriptor, DB, Options, WriteBatch};

pub use changelog::Restoring;
pub use error::StateError;
pub use meta::Restored;
pub use outbox::{
    OUTBOX_BATCH_BYTES_MAX, OUTBOX_BATCH_RECORDS_MAX, OUTBOX_BATCHES_PER_PARTITION_MAX,
};
pub use outbox_codec::OutboxBatch;
pub(crate) use stores::{EncodeBuffers, prefix_end};

use commit::InFlight;
use meta::{NEXT_OUTBOX, decode_u64};
use outbox::OpenBatch;
use store_map::StoreMap;
use timers::TimerState;
use writer::Writer;

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
    /// fsync the WAL with every commit.
    sync: bool,
    maps: Vec<StoreMap>,
    producer: Option<(i64, i16)>,
    next_outbox: u64,
    /// No outbox batch lies below this sequence: the lower bound of every
    /// outbox read, raised as batches are shipped (see `outbox`).
    outbox_floor: AtomicU64,
    /// The input offsets of the last commit begun (durable once it is
    /// settled).
    offsets: BTreeMap<String, i64>,
    /// See [`meta`]: this state's lineage and its last commit's number.
    lineage: Option<u64>,
    commit_number: u64,
    /// Per store (in the order of `stores`), the changelog partition its
    /// writes are emitted to with every commit, if it has one.
    changelogs: Vec<Option<(String, i32)>>,
    /// A commit whose write runs on its own thread (see
    /// [`TaskState::begin_commit`]).
    in_flight: Option<InFlight>,
    writer: Option<Writer>,
    /// Opened for writing: flushed when it closes.
    writable: bool,
    /// Why the state can no longer commit: a commit failed after the
    /// tables or the bookkeeping had moved on. Reopen it to go on.
    poisoned: Option<String>,
    /// With the write cache off (see [`TaskState::set_write_cache`]): every
    /// store write of the run, in order, each to be written as it is.
    journal: Option<Vec<JournalEntry>>,
    /// Store entries put in commits' write batches since the state opened.
    store_writes: u64,
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
            sync,
            producer: None,
            next_outbox: 0,
            outbox_floor: AtomicU64::new(0),
            offsets: BTreeMap::new(),
            lineage: None,
            commit_number: 0,
            changelogs: Vec::new(),
            in_flight: None,
            writer: None,
            writable: false,
            poisoned: None,
            journal: None,
            store_writes: 0,
            run: Run::default(),
            timers: None,
            buffers: EncodeBuffers::default(),
        };
        state.producer = state.read_producer()?;
        state.offsets = state.read_input_offsets()?;
        (state.lineage, state.commit_number) = state.read_lineage()?;
        state.next_outbox = match state.db.get_cf(state.cf(META)?, NEXT_OUTBOX)? {
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
        self.store_writes
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
        options.set_sync(self.sync);
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
        if self.in_flight.is_some()
            && let Err(error) = self.settle()
        {
            tracing::warn!("a commit in flight failed as its state closed: {error}");
        }
        // Settled above: no commit of this state is queued any more.
        drop(self.writer.take());
        if self.writable && self.poisoned.is_none() {
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
