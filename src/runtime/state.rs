//! A task's durable state: one RocksDB with a column family per state
//! store, `meta` (input offsets, the task's producer identity, the next
//! producer sequence of every derived partition) and `outbox` (record
//! batches to append to derived topics, keyed by a dense u64 sequence).
//!
//! A `TaskState` buffers the writes of one run of records: reads see the
//! run's own earlier writes (point reads and ordered scans merge them over
//! the database), and [`TaskState::commit`] writes the state changes, the
//! outbox batches, the producer sequences and the next input offsets in ONE
//! write batch, so none of them moves without the others. An input offset
//! never moves backwards. [`TaskState::discard`] drops a run and leaves
//! nothing behind.
//!
//! Emitted records go straight into Kafka v2 record batches, one per derived
//! partition, stamped with the task's producer id, epoch and the
//! partition's next sequence. A batch is sealed when it reaches
//! [`OUTBOX_BATCH_RECORDS_MAX`] records or [`OUTBOX_BATCH_BYTES_MAX`] bytes,
//! or at commit; the bytes committed are the bytes shipped, every time, so a
//! batch shipped again after a crash carries the same sequences and the log
//! recognises it as a duplicate.
//!
//! `meta` layout (all integers big-endian):
//!
//! | key | value |
//! |---|---|
//! | `input_offset/<topic>` | i64: next offset to read from the input topic |
//! | `start_offset/<topic>` | i64: where the task began reading it (what a rebuild starts from) |
//! | `producer` | i64 producer id, i16 epoch |
//! | `sequence/<topic>\0<partition i32>` | i64: the partition's next sequence |
//! | `next_outbox` | u64: the next outbox sequence (kept once all are shipped) |
//! | `rate` | f64 bits: records/s while busy, smoothed (for `status`) |
//!
//! An `outbox` value:
//!
//! | bytes | field |
//! |---|---|
//! | 2 | topic name length n (u16) |
//! | n | topic name (UTF-8) |
//! | 4 | partition (i32) |
//! | rest | one v2 record batch, baseOffset 0 |
//!
//! Each store keeps the values the task has read or written in one hashed
//! table (`slot_table`): the run's writes (dirty, until the commit) and
//! committed values read back or written earlier (clean: a bounded cache,
//! emptied when full; the database stays the truth). A get or put is one
//! lookup, and the task can ask for a key's entry ahead of its record
//! ([`TaskState::prefetch`]).
//!
//! Thread-safety: a `TaskState` belongs to one task; RocksDB calls block, so
//! the task runs them on a blocking thread, never an async executor's.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, mpsc};

use rocksdb::{ColumnFamilyDescriptor, DB, Direction, IteratorMode, Options, WriteBatch};

use crate::record::{BatchBuilder, Compression, NewRecord, RecordBatch};

use super::inline_bytes::InlineBytes;
use super::slot_table::{DirtyEntries, Probe, SlotTable};

/// Column family of the runtime's own bookkeeping.
const META: &str = "meta";
/// Column family of record batches waiting to be shipped.
const OUTBOX: &str = "outbox";
const INPUT_OFFSET_PREFIX: &[u8] = b"input_offset/";
const START_OFFSET_PREFIX: &[u8] = b"start_offset/";
const PRODUCER: &[u8] = b"producer";
const NEXT_OUTBOX: &[u8] = b"next_outbox";
const RATE: &[u8] = b"rate";
const SEQUENCE_PREFIX: &[u8] = b"sequence/";
/// RocksDB's own column family, present in every database.
const DEFAULT_FAMILY: &str = "default";

/// Most records in one outbox batch.
pub const OUTBOX_BATCH_RECORDS_MAX: usize = 8192;
/// Largest outbox batch (uncompressed records), well under the 1 MiB
/// default message size limit of Kafka brokers.
pub const OUTBOX_BATCH_BYTES_MAX: usize = 512 * 1024;
/// At most this many outbox batches per derived partition in one commit:
/// a Kafka broker recognises a resend among a producer's last 5 batches per
/// partition only, and after a crash the whole outbox is shipped again.
pub const OUTBOX_BATCHES_PER_PARTITION_MAX: usize = 5;

/// Bytes of keys and values one task keeps cached per store (emptied when
/// full; the database stays the truth).
const CACHE_BYTES_MAX: usize = 64 << 20;

/// Most bytes of write-ahead log a task's state keeps before RocksDB
/// flushes its memtables (what an open replays).
const WAL_BYTES_MAX: u64 = 64 << 20;

/// A store's (key, value).
pub type Entry = (Vec<u8>, Vec<u8>);

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state store: {0}")]
    Db(#[from] rocksdb::Error),
    #[error("no state store named {0:?} (declared: {1})")]
    UnknownStore(String, String),
    #[error("{0:?} is the runtime's own column family, not a store name")]
    ReservedName(String),
    #[error("the input offset of {topic} may not move back from {current} to {next}")]
    OffsetBackwards {
        topic: String,
        current: i64,
        next: i64,
    },
    #[error("corrupt state entry: {0}")]
    Corrupt(String),
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("emitting to {0}: {1}")]
    Emit(String, String),
    #[error("the task has no producer identity yet")]
    NoProducer,
    /// The task's first open was cut short: nothing was ever committed.
    #[error("state in {0} was never fully created (nothing committed)")]
    NeverOpened(String),
    /// An earlier commit failed after the state had moved on.
    #[error("the state commits no more until it is reopened: {0}")]
    Poisoned(String),
}

/// A record batch to append to a derived partition, fixed at commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxBatch {
    pub topic: String,
    pub partition: i32,
    /// One v2 record batch with the task's producer id, epoch and sequences.
    pub batch: Vec<u8>,
}

impl OutboxBatch {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(2 + self.topic.len() + 4 + self.batch.len());
        let len = u16::try_from(self.topic.len()).expect("topic names are at most 249 bytes");
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(self.topic.as_bytes());
        out.extend_from_slice(&self.partition.to_be_bytes());
        out.extend_from_slice(&self.batch);
        out
    }

    fn decode(seq: u64, raw: &[u8]) -> Result<Self, StateError> {
        let corrupt = |what: &str| StateError::Corrupt(format!("outbox entry {seq}: {what}"));
        let len = raw
            .get(..2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
            .ok_or_else(|| corrupt("shorter than its header"))?;
        let topic = raw
            .get(2..2 + len)
            .ok_or_else(|| corrupt("topic name cut short"))?;
        let topic = std::str::from_utf8(topic).map_err(|_| corrupt("topic name not UTF-8"))?;
        let partition = raw
            .get(2 + len..6 + len)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| corrupt("partition cut short"))?;
        let batch = &raw[6 + len..];
        RecordBatch::parse_and_verify(batch).map_err(|e| corrupt(&e.to_string()))?;
        Ok(Self {
            topic: topic.to_string(),
            partition,
            batch: batch.to_vec(),
        })
    }

    /// Records in the batch.
    pub fn record_count(&self) -> usize {
        RecordBatch::parse(&self.batch).map_or(0, |b| b.header().record_count.max(0) as usize)
    }
}

/// One store's values in memory: the run's writes and a cache of committed
/// values, in one table.
#[derive(Default)]
struct StoreMap {
    slots: SlotTable,
    /// The keys the run wrote, each once.
    dirty: Vec<InlineBytes>,
    /// About how many bytes the slots hold.
    bytes: usize,
    /// Gets since [`TaskState::take_reads`] last asked.
    reads: u64,
    /// Above this many bytes the clean slots are dropped: the cache's
    /// bound, raised past what the run's own writes hold (those stay until
    /// the commit), so eviction is never repeated for nothing.
    limit: usize,
}

impl StoreMap {
    /// Room for a new slot of `added` bytes: when the cache is full, the
    /// clean slots go (the run's writes stay), unless a commit is in
    /// flight: the values it writes, clean in the table, may not be in the
    /// database yet.
    fn make_room(&mut self, added: usize, committing: bool) {
        self.bytes += added;
        if self.bytes > self.limit.max(CACHE_BYTES_MAX) && !committing {
            self.slots.retain_dirty();
            self.bytes = self.slots.iter().map(|(k, s)| slot_bytes(k, s.value)).sum();
            self.limit = self.bytes + CACHE_BYTES_MAX / 2;
        }
    }

    fn write(&mut self, key: &[u8], value: Option<&[u8]>, committing: bool) {
        let was_dirty = match self.slots.set(&Probe::new(key), value, true) {
            Some((held, was_dirty)) => {
                self.bytes = (self.bytes + value.map_or(0, <[u8]>::len)).saturating_sub(held);
                was_dirty
            }
            None => {
                // A new slot, dirty: room is made among the clean ones.
                self.make_room(slot_bytes(key, value), committing);
                false
            }
        };
        if !was_dirty {
            self.dirty.push(InlineBytes::from(key));
        }
    }

    /// Forgets the run's writes (their committed values are read again
    /// when needed).
    fn discard(&mut self) {
        for key in self.dirty.drain(..) {
            self.slots.remove(&Probe::new(&key));
        }
    }
}

fn slot_bytes(key: &[u8], value: Option<&[u8]>) -> usize {
    key.len() + value.map_or(0, <[u8]>::len) + 48
}

pub struct TaskState {
    db: Arc<DB>,
    stores: Vec<String>,
    /// fsync the WAL with every commit.
    sync: bool,
    maps: Vec<StoreMap>,
    producer: Option<(i64, i16)>,
    next_outbox: u64,
    /// The input offsets of the last commit begun (durable once it is
    /// settled).
    offsets: BTreeMap<String, i64>,
    /// A commit whose write runs on its own thread (see
    /// [`TaskState::begin_commit`]).
    in_flight: Option<InFlight>,
    writer: Option<Writer>,
    /// Opened for writing: flushed when it closes.
    writable: bool,
    /// Why the state can no longer commit: a commit failed after the
    /// tables or the bookkeeping had moved on. Reopen it to go on.
    poisoned: Option<String>,
    /// The emits of the run in progress.
    run: Run,
    /// Reused for the encoded key and value of each store call.
    pub(crate) buffers: EncodeBuffers,
}

/// A commit being written.
struct InFlight {
    /// The derived partitions' next sequences it writes.
    sequences: BTreeMap<(String, i32), i32>,
    /// How the write ended, once it has and the task has looked.
    landed: Option<Result<(), StateError>>,
}

/// A commit for the writer: the write batch of the bookkeeping, and the
/// run's store writes to add to it.
struct CommitJob {
    batch: WriteBatch,
    writes: Vec<(String, Vec<u8>)>,
}

/// The thread a task's commits are written on (started with the first),
/// one at a time, each answered in order.
struct Writer {
    jobs: mpsc::Sender<CommitJob>,
    done: mpsc::Receiver<Result<(), StateError>>,
    thread: std::thread::JoinHandle<()>,
}

impl Writer {
    fn start(db: Arc<DB>, sync: bool, stores: String) -> std::io::Result<Self> {
        let (jobs, incoming) = mpsc::channel::<CommitJob>();
        let (finished, done) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("strata-commit".into())
            .spawn(move || {
                for job in incoming {
                    let written = write_commit(&db, job.batch, &job.writes, sync, &stores);
                    if finished.send(written).is_err() {
                        break;
                    }
                }
            })?;
        Ok(Self { jobs, done, thread })
    }

    /// Stops the thread once its last job is done (the database closes
    /// with the state, not after it).
    fn stop(self) {
        drop(self.jobs);
        let _ = self.thread.join();
    }
}

/// Buffers a store call encodes into, kept between calls.
#[derive(Default)]
pub(crate) struct EncodeBuffers {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

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
        let families = stores.iter().copied().chain([META, OUTBOX]).map(|name| {
            let mut family = Options::default();
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
        if !dir.join("CURRENT").exists() {
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
            maps: stores.iter().map(|_| StoreMap::default()).collect(),
            stores,
            sync,
            producer: None,
            next_outbox: 0,
            offsets: BTreeMap::new(),
            in_flight: None,
            writer: None,
            writable: false,
            poisoned: None,
            run: Run::default(),
            buffers: EncodeBuffers::default(),
        };
        state.producer = state.read_producer()?;
        state.offsets = state.read_input_offsets()?;
        state.next_outbox = match state.db.get_cf(state.cf(META)?, NEXT_OUTBOX)? {
            None => 0,
            Some(raw) => decode_u64(&raw)?,
        };
        Ok(state)
    }

    pub fn stores(&self) -> &[String] {
        &self.stores
    }

    /// The next offset to read from `topic`; `None` before the first commit.
    pub fn input_offset(&self, topic: &str) -> Option<i64> {
        self.offsets.get(topic).copied()
    }

    /// Every input topic's next offset.
    pub fn input_offsets(&self) -> BTreeMap<String, i64> {
        self.offsets.clone()
    }

    fn read_input_offsets(&self) -> Result<BTreeMap<String, i64>, StateError> {
        self.read_prefixed(INPUT_OFFSET_PREFIX)
    }

    /// `meta` entries `<prefix><topic>` → i64.
    fn read_prefixed(&self, prefix: &[u8]) -> Result<BTreeMap<String, i64>, StateError> {
        let meta = self.cf(META)?;
        let mut offsets = BTreeMap::new();
        let iter = self
            .db
            .iterator_cf(meta, IteratorMode::From(prefix, Direction::Forward));
        for item in iter {
            let (key, value) = item?;
            let Some(topic) = key.strip_prefix(prefix) else {
                break;
            };
            let topic = String::from_utf8_lossy(topic).into_owned();
            offsets.insert(topic, decode_i64(&value)?);
        }
        Ok(offsets)
    }

    /// Records where the task begins reading `topic` (it has no offset for
    /// it yet), with the next commit.
    pub fn note_start(&mut self, topic: &str, offset: i64) {
        self.run.starts.push((topic.to_string(), offset));
    }

    /// Where the task began reading each input (absent for inputs whose
    /// state predates the record of it).
    pub fn start_offsets(&self) -> Result<BTreeMap<String, i64>, StateError> {
        self.read_prefixed(START_OFFSET_PREFIX)
    }

    /// Records the task's processing rate (records/s while busy) with the
    /// next commit.
    pub fn note_rate(&mut self, records_per_second: f64) {
        self.run.rate = Some(records_per_second);
    }

    /// The processing rate last committed, if any.
    pub fn rate(&self) -> Result<Option<f64>, StateError> {
        match self.db.get_cf(self.cf(META)?, RATE)? {
            None => Ok(None),
            Some(raw) => Ok(Some(f64::from_bits(decode_u64(&raw)?))),
        }
    }

    /// The task's producer id and epoch, once assigned.
    pub fn producer(&self) -> Option<(i64, i16)> {
        self.producer
    }

    /// Records the task's producer identity (synced: every batch the task
    /// ever emits carries it).
    pub fn set_producer(&mut self, producer_id: i64, epoch: i16) -> Result<(), StateError> {
        let mut value = producer_id.to_be_bytes().to_vec();
        value.extend_from_slice(&epoch.to_be_bytes());
        let mut options = rocksdb::WriteOptions::default();
        options.set_sync(true);
        self.db
            .put_cf_opt(self.cf(META)?, PRODUCER, value, &options)?;
        self.producer = Some((producer_id, epoch));
        Ok(())
    }

    fn read_producer(&self) -> Result<Option<(i64, i16)>, StateError> {
        let Some(raw) = self.db.get_cf(self.cf(META)?, PRODUCER)? else {
            return Ok(None);
        };
        if raw.len() != 10 {
            return Err(StateError::Corrupt(format!(
                "producer identity of {} bytes",
                raw.len()
            )));
        }
        let id = decode_i64(&raw[..8])?;
        Ok(Some((id, i16::from_be_bytes([raw[8], raw[9]]))))
    }

    /// The next producer sequence of a derived partition (0 before any).
    pub fn next_sequence(&self, topic: &str, partition: i32) -> Result<i32, StateError> {
        let meta = self.cf(META)?;
        match self.db.get_cf(meta, sequence_key(topic, partition))? {
            None => Ok(0),
            Some(raw) => Ok(decode_i64(&raw)? as i32),
        }
    }

    /// Outbox batches not yet shipped, oldest first, with their outbox
    /// sequence.
    pub fn outbox(&self) -> Result<Vec<(u64, OutboxBatch)>, StateError> {
        let cf = self.cf(OUTBOX)?;
        let mut entries = Vec::new();
        for item in self.db.iterator_cf(cf, IteratorMode::Start) {
            let (key, value) = item?;
            let seq = decode_u64(&key)?;
            entries.push((seq, OutboxBatch::decode(seq, &value)?));
        }
        Ok(entries)
    }

    /// Removes shipped outbox batches, up to and including `through`.
    pub fn remove_shipped(&self, through: u64) -> Result<(), StateError> {
        let cf = self.cf(OUTBOX)?;
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(cf, 0u64.to_be_bytes(), (through + 1).to_be_bytes());
        self.write(batch)
    }

    /// A committed value of a store (the run in progress not included).
    pub fn committed(&self, store: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        let cf = self.store_cf(store)?;
        Ok(self.db.get_cf(cf, key)?)
    }

    /// Every committed (key, value) of a store, in key order.
    pub fn entries(&self, store: &str) -> Result<Vec<Entry>, StateError> {
        let cf = self.store_cf(store)?;
        self.db
            .iterator_cf(cf, IteratorMode::Start)
            .map(|item| {
                item.map(|(k, v)| (k.to_vec(), v.to_vec()))
                    .map_err(StateError::from)
            })
            .collect()
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
        self.run.open.clear();
        self.run.sealed.clear();
        self.run.sequences.clear();
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

    /// Takes over `from`'s bookkeeping, replacing its own: everything in
    /// `meta` and `outbox` (input offsets, producer identity and sequences,
    /// batches not yet shipped), in one synced write. A rebuilt state goes
    /// on exactly where the state it replaces stopped.
    pub fn adopt_bookkeeping(&mut self, from: &TaskState) -> Result<(), StateError> {
        let mut batch = WriteBatch::default();
        for family in [META, OUTBOX] {
            let (mine, theirs) = (self.cf(family)?, from.cf(family)?);
            for item in self.db.iterator_cf(mine, IteratorMode::Start) {
                batch.delete_cf(mine, item?.0);
            }
            for item in from.db.iterator_cf(theirs, IteratorMode::Start) {
                let (key, value) = item?;
                batch.put_cf(mine, key, value);
            }
        }
        let mut options = rocksdb::WriteOptions::default();
        options.set_sync(true);
        self.db.write_opt(batch, &options)?;
        self.producer = self.read_producer()?;
        self.offsets = self.read_input_offsets()?;
        self.next_outbox = from.next_outbox;
        Ok(())
    }

    /// Takes a checkpoint of the committed state (RocksDB hard-links its
    /// files) as `<dir>/<offset, 20 digits>` (`offset`: the first input's),
    /// built aside and renamed into place, so a checkpoint directory is
    /// always whole; one already at that offset is replaced (another input
    /// may have moved since). Then removes the oldest beyond `keep`.
    pub fn checkpoint(&mut self, dir: &Path, offset: i64, keep: usize) -> Result<(), StateError> {
        self.settle()?;
        let io = |what: String, error: std::io::Error| {
            StateError::Io(format!("checkpoint: {what}"), error)
        };
        std::fs::create_dir_all(dir).map_err(|e| io(format!("creating {}", dir.display()), e))?;
        let target = dir.join(checkpoint_name(offset));
        let building = dir.join(format!("{}.partial", checkpoint_name(offset)));
        if building.exists() {
            std::fs::remove_dir_all(&building)
                .map_err(|e| io(format!("removing {}", building.display()), e))?;
        }
        rocksdb::checkpoint::Checkpoint::new(&self.db)?.create_checkpoint(&building)?;
        // One already at this offset is renamed aside first and removed
        // last: some checkpoint at this offset exists at every moment.
        let replaced = dir.join(format!("{}.replaced", checkpoint_name(offset)));
        if target.exists() {
            if replaced.exists() {
                std::fs::remove_dir_all(&replaced)
                    .map_err(|e| io(format!("removing {}", replaced.display()), e))?;
            }
            std::fs::rename(&target, &replaced)
                .map_err(|e| io(format!("renaming {}", target.display()), e))?;
        }
        std::fs::rename(&building, &target)
            .map_err(|e| io(format!("renaming {}", building.display()), e))?;
        if replaced.exists() {
            std::fs::remove_dir_all(&replaced)
                .map_err(|e| io(format!("removing {}", replaced.display()), e))?;
        }
        let all = checkpoints(dir).map_err(|e| io(format!("listing {}", dir.display()), e))?;
        for (_, old) in all.iter().take(all.len().saturating_sub(keep)) {
            std::fs::remove_dir_all(old)
                .map_err(|e| io(format!("removing {}", old.display()), e))?;
        }
        Ok(())
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

/// A derived partition's batch being filled.
struct OpenBatch {
    topic: String,
    partition: i32,
    builder: BatchBuilder,
}

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

impl TaskState {
    /// The value of `key`, as this run has left it.
    pub fn get(&mut self, store: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        let index = self.index(store)?;
        self.read_at(index, key, |value| value.map(<[u8]>::to_vec))
    }

    pub fn put(&mut self, store: &str, key: &[u8], value: &[u8]) -> Result<(), StateError> {
        let index = self.index(store)?;
        self.put_at(index, key, value);
        Ok(())
    }

    pub fn delete(&mut self, store: &str, key: &[u8]) -> Result<(), StateError> {
        let index = self.index(store)?;
        self.delete_at(index, key);
        Ok(())
    }

    /// `get` by store position: `read` sees the value without a copy.
    pub(crate) fn read_at<R>(
        &mut self,
        index: usize,
        key: &[u8],
        read: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<R, StateError> {
        let map = &mut self.maps[index];
        map.reads += 1;
        let probe = Probe::new(key);
        if let Some(slot) = self.maps[index].slots.get(&probe) {
            return Ok(read(slot.value));
        }
        let value = self.db.get_cf(self.cf(&self.stores[index])?, key)?;
        let result = read(value.as_deref());
        let committing = self.in_flight.is_some();
        let map = &mut self.maps[index];
        map.make_room(slot_bytes(key, value.as_deref()), committing);
        map.slots.set(&probe, value.as_deref(), false);
        Ok(result)
    }

    /// Runs `f` with the state and its reused encode buffers, apart (a
    /// store call encodes into them, then hands them to the state).
    pub(crate) fn with_buffers<R>(
        &mut self,
        f: impl FnOnce(&mut Self, &mut EncodeBuffers) -> R,
    ) -> R {
        let mut buffers = std::mem::take(&mut self.buffers);
        let result = f(self, &mut buffers);
        self.buffers = buffers;
        result
    }

    /// Asks the CPU to bring `key`'s entry in each of `stores` (positions)
    /// into its cache, ahead of a get.
    pub(crate) fn prefetch(&self, key: &[u8], stores: &[usize]) {
        let probe = Probe::new(key);
        for index in stores {
            self.maps[*index].slots.prefetch(&probe);
        }
    }

    /// How many gets the store had since the last call.
    pub(crate) fn take_reads(&mut self, index: usize) -> u64 {
        std::mem::take(&mut self.maps[index].reads)
    }

    pub(crate) fn put_at(&mut self, index: usize, key: &[u8], value: &[u8]) {
        let committing = self.in_flight.is_some();
        self.maps[index].write(key, Some(value), committing);
    }

    pub(crate) fn delete_at(&mut self, index: usize, key: &[u8]) {
        let committing = self.in_flight.is_some();
        self.maps[index].write(key, None, committing);
    }

    /// (key, value) pairs with `from <= key < to` (`to` None: to the end),
    /// in key order, as this run has left them.
    pub fn range(
        &mut self,
        store: &str,
        from: &[u8],
        to: Option<&[u8]>,
    ) -> Result<Vec<Entry>, StateError> {
        // The database is read with no commit writing it (its store values
        // are updated in place, which a scan must not race).
        self.settle()?;
        let index = self.index(store)?;
        let cf = self.cf(store)?;
        let below_end = |key: &[u8]| to.is_none_or(|end| key < end);
        let mut merged: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        let iter = self
            .db
            .iterator_cf(cf, IteratorMode::From(from, Direction::Forward));
        for item in iter {
            let (key, value) = item?;
            if !below_end(&key) {
                break;
            }
            merged.insert(key.to_vec(), Some(value.to_vec()));
        }
        let map = &self.maps[index];
        for key in &map.dirty {
            if key.as_slice() < from || !below_end(key) {
                continue;
            }
            let value = map
                .slots
                .get(&Probe::new(key))
                .and_then(|slot| slot.value.map(<[u8]>::to_vec));
            merged.insert(key.to_vec(), value);
        }
        Ok(merged
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect())
    }

    /// (key, value) pairs whose key starts with `prefix`, in key order.
    pub fn scan_prefix(&mut self, store: &str, prefix: &[u8]) -> Result<Vec<Entry>, StateError> {
        let end = prefix_end(prefix);
        self.range(store, prefix, end.as_deref())
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
                let (producer_id, epoch) = self.producer.ok_or(StateError::NoProducer)?;
                let slot = (topic.to_string(), partition);
                let in_flight = self.in_flight.as_ref().map(|f| &f.sequences);
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

    fn seal(&mut self, open: OpenBatch) -> Result<(), StateError> {
        let count = i32::try_from(open.builder.len()).expect("bounded by the batch limit");
        let slot = (open.topic.clone(), open.partition);
        let next = self
            .run
            .sequences
            .get_mut(&slot)
            .expect("set when the batch opened");
        *next = crate::log::add_sequence(*next, count);
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
        for open in std::mem::take(&mut self.run.open) {
            self.seal(open)?;
        }
        let mut batch = WriteBatch::default();
        let outbox = self.cf(OUTBOX)?;
        let first = self.next_outbox;
        for (seq, entry) in (first..).zip(&self.run.sealed) {
            batch.put_cf(outbox, seq.to_be_bytes(), entry.encode());
        }
        let meta = self.cf(META)?;
        let next_outbox = first + self.run.sealed.len() as u64;
        if !self.run.sealed.is_empty() {
            batch.put_cf(meta, NEXT_OUTBOX, next_outbox.to_be_bytes());
        }
        for ((topic, partition), next) in &self.run.sequences {
            batch.put_cf(
                meta,
                sequence_key(topic, *partition),
                i64::from(*next).to_be_bytes(),
            );
        }
        for (topic, next) in next_input_offsets {
            batch.put_cf(
                meta,
                topic_key(INPUT_OFFSET_PREFIX, topic),
                next.to_be_bytes(),
            );
        }
        if let Some(rate) = self.run.rate {
            batch.put_cf(meta, RATE, rate.to_bits().to_be_bytes());
        }
        for (topic, start) in &self.run.starts {
            batch.put_cf(
                meta,
                topic_key(START_OFFSET_PREFIX, topic),
                start.to_be_bytes(),
            );
        }
        // The run's writes, taken from the tables (nothing fails from
        // here on but starting the thread, which poisons the state); sorted
        // and put in the write batch by the commit's own thread.
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
            writes.push((self.stores[index].clone(), entries));
        }
        if self.writer.is_none() {
            let (db, stores) = (Arc::clone(&self.db), self.stores.join(", "));
            match Writer::start(db, self.sync, stores) {
                Ok(writer) => self.writer = Some(writer),
                Err(error) => {
                    self.poison("the commit writer could not be started");
                    return Err(StateError::Io("starting the commit writer".into(), error));
                }
            }
        }
        let writer = self.writer.as_ref().expect("started above");
        if writer.jobs.send(CommitJob { batch, writes }).is_err() {
            self.poison("the commit writer stopped");
            return Err(StateError::Corrupt("the commit writer stopped".into()));
        }
        self.in_flight = Some(InFlight {
            sequences: std::mem::take(&mut self.run.sequences),
            landed: None,
        });
        self.run.rate = None;
        self.run.starts.clear();
        self.next_outbox = next_outbox;
        for (topic, next) in next_input_offsets {
            self.offsets.insert(topic.to_string(), *next);
        }
        for map in &mut self.maps {
            // The written values stay, clean: the cache of what is committed
            // (dropped whole when it next outgrows its bound, not before
            // the write is settled).
            map.limit = 0;
            map.dirty.clear();
        }
        let added = self.run.sealed.len();
        self.run.sealed.clear();
        Ok(added)
    }

    /// Whether a commit's write is running and has finished.
    pub fn commit_landed(&mut self) -> bool {
        let (Some(flight), Some(writer)) = (&mut self.in_flight, &self.writer) else {
            return false;
        };
        if flight.landed.is_none()
            && let Ok(written) = writer.done.try_recv()
        {
            flight.landed = Some(written);
        }
        flight.landed.is_some()
    }

    /// Waits for the commit in flight, if any: once this returns Ok, it is
    /// durable (as `sync` makes it).
    pub fn settle(&mut self) -> Result<(), StateError> {
        self.check_poisoned()?;
        let Some(mut flight) = self.in_flight.take() else {
            return Ok(());
        };
        let writer = self
            .writer
            .as_ref()
            .expect("a commit in flight has a writer");
        let written = match flight.landed.take() {
            Some(written) => written,
            None => writer
                .done
                .recv()
                .unwrap_or_else(|_| Err(StateError::Corrupt("the commit writer stopped".into()))),
        };
        if let Err(error) = &written {
            // The offsets, outbox numbers and sequences have moved past
            // what the database holds: nothing more is committed from this
            // state, and nothing that did not reach the database stays
            // readable.
            self.poison(&format!("a commit's write failed: {error}"));
            for map in &mut self.maps {
                *map = StoreMap::default();
            }
        }
        written
    }

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

impl Drop for TaskState {
    fn drop(&mut self) {
        if self.in_flight.is_some()
            && let Err(error) = self.settle()
        {
            tracing::warn!("a commit in flight failed as its state closed: {error}");
        }
        if let Some(writer) = self.writer.take() {
            writer.stop();
        }
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

/// A commit's write: the run's store writes (per store, as
/// [`SlotTable::take_dirty`] left them) added to `batch` in key order, then
/// the one atomic write. In key order, the memtable's skip list inserts a
/// run of ascending keys next to each other, several times faster than
/// scattered ones.
fn write_commit(
    db: &DB,
    mut batch: WriteBatch,
    writes: &[(String, Vec<u8>)],
    sync: bool,
    stores: &str,
) -> Result<(), StateError> {
    for (store, entries) in writes {
        let family = db
            .cf_handle(store)
            .ok_or_else(|| StateError::UnknownStore(store.clone(), stores.to_string()))?;
        let mut entries: Vec<_> = DirtyEntries::new(entries).collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (key, value) in entries {
            match value {
                Some(value) => batch.put_cf(family, key, value),
                None => batch.delete_cf(family, key),
            }
        }
    }
    let mut options = rocksdb::WriteOptions::default();
    options.set_sync(sync);
    db.write_opt(batch, &options)?;
    Ok(())
}

fn checkpoint_name(offset: i64) -> String {
    format!("{offset:020}")
}

/// A task's whole checkpoints in `dir`, oldest (lowest offset) first.
pub fn checkpoints(dir: &Path) -> std::io::Result<Vec<(i64, std::path::PathBuf)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry?;
        if let Some(offset) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i64>().ok())
        {
            found.push((offset, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// A `meta` key `<prefix><topic>` (read back by `read_prefixed`).
fn topic_key(prefix: &[u8], topic: &str) -> Vec<u8> {
    let mut key = prefix.to_vec();
    key.extend_from_slice(topic.as_bytes());
    key
}

fn sequence_key(topic: &str, partition: i32) -> Vec<u8> {
    let mut key = SEQUENCE_PREFIX.to_vec();
    key.extend_from_slice(topic.as_bytes());
    key.push(0);
    key.extend_from_slice(&partition.to_be_bytes());
    key
}

/// The smallest key above every key starting with `prefix` (None: there is
/// none, the prefix is all 0xff).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

fn decode_i64(raw: &[u8]) -> Result<i64, StateError> {
    let bytes: [u8; 8] = raw
        .try_into()
        .map_err(|_| StateError::Corrupt(format!("{} bytes for an i64", raw.len())))?;
    Ok(i64::from_be_bytes(bytes))
}

fn decode_u64(raw: &[u8]) -> Result<u64, StateError> {
    Ok(decode_i64(raw)? as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> TaskState {
        let mut state = TaskState::open(dir, &["counts", "users"], false).unwrap();
        if state.producer().is_none() {
            state.set_producer(7, 0).unwrap();
        }
        state
    }

    fn entries(pairs: &[(&str, &str)]) -> Vec<Entry> {
        pairs
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    fn record(value: &[u8]) -> NewRecord<'_> {
        NewRecord::new(None, value, 100)
    }

    /// (outbox seq, partition, base sequence, record count) of each batch.
    fn outbox_shape(state: &TaskState) -> Vec<(u64, i32, i32, i32)> {
        state
            .outbox()
            .unwrap()
            .iter()
            .map(|(seq, b)| {
                let header = *RecordBatch::parse(&b.batch).unwrap().header();
                (*seq, b.partition, header.base_sequence, header.record_count)
            })
            .collect()
    }

    /// A commit left in flight while the next run goes on: the next run
    /// reads its values (points and scans) and emits after its sequences;
    /// a discard of the next run keeps it; settled, it is on disk.
    #[test]
    fn a_commit_in_flight_is_seen_by_the_next_run_and_lands_whole() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut state = open(dir.path());
            state.put("counts", b"a", b"1").unwrap();
            state.put("counts", b"b", b"2").unwrap();
            state.emit("out", 0, record(b"x")).unwrap();
            assert_eq!(state.begin_commit(&[("in", 2)]).unwrap(), 1);
            assert_eq!(state.input_offset("in"), Some(2));
            // The next run, while the write may still be running.
            assert_eq!(state.get("counts", b"a").unwrap(), Some(b"1".to_vec()));
            state.put("counts", b"b", b"3").unwrap();
            state.delete("counts", b"a").unwrap();
            assert_eq!(
                state.scan_prefix("counts", b"").unwrap(),
                entries(&[("b", "3")])
            );
            state.emit("out", 0, record(b"y")).unwrap();
            state.discard();
            assert_eq!(
                state.scan_prefix("counts", b"").unwrap(),
                entries(&[("a", "1"), ("b", "2")])
            );
            state.emit("out", 0, record(b"z")).unwrap();
            state.begin_commit(&[("in", 3)]).unwrap();
            state.settle().unwrap();
            // Sequences go on from the commit in flight's: 0, then 1.
            assert_eq!(outbox_shape(&state), vec![(0, 0, 0, 1), (1, 0, 1, 1)]);
        }
        let state = open(dir.path());
        assert_eq!(state.input_offset("in"), Some(3));
        assert_eq!(
            state.entries("counts").unwrap(),
            entries(&[("a", "1"), ("b", "2")])
        );
        assert_eq!(state.next_sequence("out", 0).unwrap(), 2);
    }

    #[test]
    fn a_run_reads_its_own_writes_and_commits_them_with_the_offset() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = open(dir.path());
        assert_eq!(state.input_offset("in"), None);
        state.put("counts", b"a", b"1").unwrap();
        state.put("counts", b"b", b"2").unwrap();
        assert_eq!(state.get("counts", b"a").unwrap(), Some(b"1".to_vec()));
        state.commit(&[("in", 10)]).unwrap();
        assert_eq!(
            state.committed("counts", b"a").unwrap(),
            Some(b"1".to_vec())
        );

        state.put("counts", b"a", b"5").unwrap();
        state.delete("counts", b"b").unwrap();
        state.put("counts", b"c", b"3").unwrap();
        assert_eq!(
            state.get("counts", b"b").unwrap(),
            None,
            "the delete is seen"
        );
        assert_eq!(
            state.range("counts", b"", None).unwrap(),
            entries(&[("a", "5"), ("c", "3")])
        );
        state.discard();
        assert_eq!(
            state.entries("counts").unwrap(),
            entries(&[("a", "1"), ("b", "2")]),
            "a dropped run leaves nothing"
        );
        assert_eq!(
            state.get("counts", b"a").unwrap(),
            Some(b"1".to_vec()),
            "nor in the cache"
        );
        state.discard();
        assert_eq!(state.input_offset("in"), Some(10));
        drop(state);

        let state = open(dir.path());
        assert_eq!(
            state.input_offsets(),
            BTreeMap::from([("in".to_string(), 10)])
        );
        assert_eq!(
            state.committed("counts", b"b").unwrap(),
            Some(b"2".to_vec())
        );
        assert_eq!(state.producer(), Some((7, 0)));
    }

    #[test]
    fn scans_merge_pending_writes_over_committed_ones_in_key_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = open(dir.path());
        for key in ["u/1", "u/3", "u/5", "v/1"] {
            state.put("users", key.as_bytes(), b"old").unwrap();
        }
        state.commit(&[("in", 1)]).unwrap();
        state.put("users", b"u/2", b"new").unwrap();
        state.put("users", b"u/3", b"new").unwrap();
        state.delete("users", b"u/5").unwrap();
        state.put("users", b"w/1", b"new").unwrap();
        assert_eq!(
            state.scan_prefix("users", b"u/").unwrap(),
            entries(&[("u/1", "old"), ("u/2", "new"), ("u/3", "new")])
        );
        assert_eq!(
            state.range("users", b"u/2", Some(b"v/2")).unwrap(),
            entries(&[("u/2", "new"), ("u/3", "new"), ("v/1", "old")])
        );
        assert!(
            state.scan_prefix("counts", b"u/").unwrap().is_empty(),
            "stores are apart"
        );
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff, 0xff]), None);
    }

    #[test]
    fn emitted_records_become_batches_with_dense_outbox_and_producer_sequences() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = open(dir.path());
        for (i, partition) in [0, 1, 0].into_iter().enumerate() {
            state.emit("out", partition, record(&[i as u8])).unwrap();
        }
        assert_eq!(state.commit(&[("in", 3)]).unwrap(), 2);
        state.emit("out", 0, record(b"k")).unwrap();
        state.commit(&[("in", 4)]).unwrap();
        assert_eq!(
            outbox_shape(&state),
            [(0, 0, 0, 2), (1, 1, 0, 1), (2, 0, 2, 1)]
        );
        let (_, first) = &state.outbox().unwrap()[0];
        let batch = RecordBatch::parse_and_verify(&first.batch).unwrap();
        assert_eq!(batch.header().producer_id, 7);
        let records = batch.records(1 << 20).unwrap();
        let values: Vec<_> = records
            .iter()
            .map(|r| r.unwrap().value.unwrap().to_vec())
            .collect();
        assert_eq!(
            values,
            [vec![0u8], vec![2u8]],
            "emission order within a partition"
        );

        state.remove_shipped(1).unwrap();
        drop(state);
        let mut state = open(dir.path());
        assert_eq!(outbox_shape(&state), [(2, 0, 2, 1)]);
        assert_eq!(state.next_sequence("out", 0).unwrap(), 3);
        assert_eq!(state.next_sequence("out", 1).unwrap(), 1);
        // New batches continue after the last, shipped or not, also once
        // everything is shipped and removed.
        state.remove_shipped(2).unwrap();
        state.emit("out", 1, record(b"x")).unwrap();
        state.commit(&[("in", 5)]).unwrap();
        assert_eq!(outbox_shape(&state), [(3, 1, 1, 1)]);
    }

    #[test]
    fn a_full_batch_is_sealed_and_the_next_continues_its_sequences() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = open(dir.path());
        for _ in 0..OUTBOX_BATCH_RECORDS_MAX + 10 {
            state.emit("out", 0, record(b"v")).unwrap();
        }
        state.commit(&[("in", 1)]).unwrap();
        let max = OUTBOX_BATCH_RECORDS_MAX as i32;
        assert_eq!(outbox_shape(&state), [(0, 0, 0, max), (1, 0, max, 10)]);
    }

    #[test]
    fn the_outbox_is_full_before_a_partition_could_get_more_than_five_batches() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = open(dir.path());
        let full_batches = |state: &mut TaskState, partition: i32, count: usize| {
            for _ in 0..count * OUTBOX_BATCH_RECORDS_MAX {
                state.emit("out", partition, record(b"v")).unwrap();
            }
        };
        full_batches(&mut state, 0, 2);
        full_batches(&mut state, 1, 2);
        assert!(!state.outbox_full(), "4 sealed, 2 per partition");
        full_batches(&mut state, 0, 2);
        assert!(state.outbox_full(), "4 sealed for partition 0");
        state.emit("out", 0, record(b"v")).unwrap();
        state.commit(&[("in", 1)]).unwrap();
        let for_partition_0 = outbox_shape(&state).iter().filter(|b| b.1 == 0).count();
        assert_eq!(for_partition_0, OUTBOX_BATCHES_PER_PARTITION_MAX);
        assert!(!state.outbox_full());
    }

    #[test]
    fn an_empty_run_moves_only_the_offset() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = open(dir.path());
        assert_eq!(state.commit(&[("in", 4)]).unwrap(), 0);
        assert_eq!(state.input_offset("in"), Some(4));
        assert!(state.outbox().unwrap().is_empty());
        assert!(state.entries("counts").unwrap().is_empty());
    }

    #[test]
    fn the_input_offset_never_moves_back_and_names_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = open(dir.path());
        state.commit(&[("in", 7)]).unwrap();
        state.put("counts", b"x", b"1").unwrap();
        assert!(matches!(
            state.commit(&[("in", 6)]),
            Err(StateError::OffsetBackwards {
                current: 7,
                next: 6,
                ..
            })
        ));
        state.discard();
        assert_eq!(
            state.committed("counts", b"x").unwrap(),
            None,
            "nothing written"
        );
        assert!(matches!(
            state.put("nope", b"k", b"v"),
            Err(StateError::UnknownStore(..))
        ));
        drop(state);
        assert!(matches!(
            TaskState::open(dir.path(), &["meta"], false),
            Err(StateError::ReservedName(_))
        ));
    }

    #[test]
    fn read_only_opening_sees_the_stores_while_the_writer_holds_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = open(dir.path());
        state.put("users", b"u", b"1").unwrap();
        state.emit("out", 0, record(b"v")).unwrap();
        state.commit(&[("in", 1)]).unwrap();
        let reader = TaskState::open_read_only(dir.path()).unwrap();
        assert_eq!(reader.stores(), ["counts", "users"]);
        assert_eq!(reader.entries("users").unwrap(), entries(&[("u", "1")]));
        assert_eq!(reader.outbox().unwrap().len(), 1);
        assert_eq!(reader.input_offset("in"), Some(1));
    }
}
