//! A task's durable state: one RocksDB with a column family per state
//! store, `meta` (the next input offset, the next producer sequence of
//! every derived partition) and `outbox` (records to ship to derived
//! topics, keyed by a dense u64 sequence).
//!
//! A [`Run`] buffers the writes of one run of records: reads see the
//! run's own earlier writes (point reads and ordered scans merge them over
//! the database), and [`Run::commit`] writes the state changes, the outbox
//! entries, the producer sequences and the next input offset in ONE write
//! batch, so none of them moves without the others. The input offset never
//! moves backwards. Dropping a run without committing leaves nothing
//! behind.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;

use rocksdb::{ColumnFamilyDescriptor, DB, Direction, IteratorMode, Options, WriteBatch};
use serde::{Deserialize, Serialize};

/// Column family of the runtime's own bookkeeping.
const META: &str = "meta";
/// Column family of records waiting to be shipped.
const OUTBOX: &str = "outbox";
/// `meta` key of the next input offset.
const INPUT_OFFSET: &[u8] = b"input_offset";
/// `meta` key of the next outbox sequence (kept, so sequences never repeat
/// even once every entry is shipped and removed).
const NEXT_OUTBOX: &[u8] = b"next_outbox";
/// `meta` key prefix of a derived partition's next producer sequence.
const SEQUENCE_PREFIX: &[u8] = b"sequence/";

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
    #[error("the input offset may not move back from {current} to {next}")]
    OffsetBackwards { current: i64, next: i64 },
    #[error("corrupt state entry: {0}")]
    Corrupt(String),
}

/// A record to append to a derived topic, fixed at commit: its partition
/// and producer sequence, so shipping it again after a crash is recognised
/// by the log as the same append.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxEntry {
    pub topic: String,
    pub partition: i32,
    pub sequence: i32,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: i64,
}

pub struct TaskState {
    db: DB,
    stores: Vec<String>,
    /// fsync the WAL with every commit.
    sync: bool,
}

impl TaskState {
    /// Opens (creating if missing) the state of one task with the given
    /// stores.
    pub fn open(dir: &Path, stores: &[&str], sync: bool) -> Result<Self, StateError> {
        for store in stores {
            if *store == META || *store == OUTBOX || store.is_empty() {
                return Err(StateError::ReservedName(store.to_string()));
            }
        }
        let mut options = Options::default();
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        let families = stores
            .iter()
            .copied()
            .chain([META, OUTBOX])
            .map(|name| ColumnFamilyDescriptor::new(name, Options::default()));
        let db = DB::open_cf_descriptors(&options, dir, families)?;
        Ok(Self {
            db,
            stores: stores.iter().map(|s| s.to_string()).collect(),
            sync,
        })
    }

    pub fn stores(&self) -> &[String] {
        &self.stores
    }

    /// The next input offset to read; `None` before the first commit.
    pub fn input_offset(&self) -> Result<Option<i64>, StateError> {
        let meta = self.cf(META)?;
        match self.db.get_cf(meta, INPUT_OFFSET)? {
            None => Ok(None),
            Some(raw) => decode_i64(&raw).map(Some),
        }
    }

    /// The next producer sequence of a derived partition (0 before any).
    pub fn next_sequence(&self, topic: &str, partition: i32) -> Result<i32, StateError> {
        let meta = self.cf(META)?;
        match self.db.get_cf(meta, sequence_key(topic, partition))? {
            None => Ok(0),
            Some(raw) => Ok(decode_i64(&raw)? as i32),
        }
    }

    /// Outbox entries not yet shipped, oldest first, with their outbox
    /// sequence.
    pub fn outbox(&self) -> Result<Vec<(u64, OutboxEntry)>, StateError> {
        let cf = self.cf(OUTBOX)?;
        let mut entries = Vec::new();
        for item in self.db.iterator_cf(cf, IteratorMode::Start) {
            let (key, value) = item?;
            let seq = decode_u64(&key)?;
            let entry = postcard::from_bytes(&value)
                .map_err(|e| StateError::Corrupt(format!("outbox entry {seq}: {e}")))?;
            entries.push((seq, entry));
        }
        Ok(entries)
    }

    /// Removes shipped outbox entries, up to and including `seq`.
    pub fn remove_shipped(&self, through: u64) -> Result<(), StateError> {
        let cf = self.cf(OUTBOX)?;
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(cf, 0u64.to_be_bytes(), (through + 1).to_be_bytes());
        self.write(batch)
    }

    /// A committed value of a store (outside any run).
    pub fn get(&self, store: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
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

    /// Starts buffering a run of writes.
    pub fn run(&self) -> Run<'_> {
        Run {
            state: self,
            writes: vec![BTreeMap::new(); self.stores.len()],
            outbox: Vec::new(),
            sequences: BTreeMap::new(),
        }
    }

    fn store_cf(&self, store: &str) -> Result<&rocksdb::ColumnFamily, StateError> {
        if !self.stores.iter().any(|s| s == store) {
            return Err(StateError::UnknownStore(
                store.to_string(),
                self.stores.join(", "),
            ));
        }
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

    fn next_outbox_seq(&self) -> Result<u64, StateError> {
        match self.db.get_cf(self.cf(META)?, NEXT_OUTBOX)? {
            None => Ok(0),
            Some(raw) => decode_u64(&raw),
        }
    }
}

/// The buffered writes of one run of records.
pub struct Run<'a> {
    state: &'a TaskState,
    /// Per store: key → new value, or `None` for a delete.
    writes: Vec<BTreeMap<Vec<u8>, Option<Vec<u8>>>>,
    outbox: Vec<OutboxEntry>,
    /// Next producer sequence of the derived partitions this run emitted to.
    sequences: BTreeMap<(String, i32), i32>,
}

impl Run<'_> {
    fn index(&self, store: &str) -> Result<usize, StateError> {
        self.state
            .stores
            .iter()
            .position(|s| s == store)
            .ok_or_else(|| {
                StateError::UnknownStore(store.to_string(), self.state.stores.join(", "))
            })
    }

    /// The value of `key`, as this run has left it.
    pub fn get(&self, store: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        let index = self.index(store)?;
        if let Some(pending) = self.writes[index].get(key) {
            return Ok(pending.clone());
        }
        self.state.get(store, key)
    }

    pub fn put(&mut self, store: &str, key: &[u8], value: &[u8]) -> Result<(), StateError> {
        let index = self.index(store)?;
        self.writes[index].insert(key.to_vec(), Some(value.to_vec()));
        Ok(())
    }

    pub fn delete(&mut self, store: &str, key: &[u8]) -> Result<(), StateError> {
        let index = self.index(store)?;
        self.writes[index].insert(key.to_vec(), None);
        Ok(())
    }

    /// (key, value) pairs with `from <= key < to` (`to` None: to the end),
    /// in key order, as this run has left them.
    pub fn range(
        &self,
        store: &str,
        from: &[u8],
        to: Option<&[u8]>,
    ) -> Result<Vec<Entry>, StateError> {
        let index = self.index(store)?;
        let cf = self.state.store_cf(store)?;
        let below_end = |key: &[u8]| to.is_none_or(|end| key < end);
        let mut merged: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        let iter = self
            .state
            .db
            .iterator_cf(cf, IteratorMode::From(from, Direction::Forward));
        for item in iter {
            let (key, value) = item?;
            if !below_end(&key) {
                break;
            }
            merged.insert(key.to_vec(), Some(value.to_vec()));
        }
        let upper = match to {
            Some(end) => Bound::Excluded(end.to_vec()),
            None => Bound::Unbounded,
        };
        for (key, value) in self.writes[index].range((Bound::Included(from.to_vec()), upper)) {
            merged.insert(key.clone(), value.clone());
        }
        Ok(merged
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect())
    }

    /// (key, value) pairs whose key starts with `prefix`, in key order.
    pub fn scan_prefix(&self, store: &str, prefix: &[u8]) -> Result<Vec<Entry>, StateError> {
        let end = prefix_end(prefix);
        self.range(store, prefix, end.as_deref())
    }

    /// Queues a record for a derived partition, taking that partition's
    /// next producer sequence.
    pub fn emit(
        &mut self,
        topic: &str,
        partition: i32,
        key: Option<Vec<u8>>,
        value: Option<Vec<u8>>,
        headers: Vec<(String, Option<Vec<u8>>)>,
        timestamp: i64,
    ) -> Result<(), StateError> {
        let slot = (topic.to_string(), partition);
        let sequence = match self.sequences.get(&slot) {
            Some(next) => *next,
            None => self.state.next_sequence(topic, partition)?,
        };
        self.sequences
            .insert(slot, sequence.wrapping_add(1) & i32::MAX);
        self.outbox.push(OutboxEntry {
            topic: topic.to_string(),
            partition,
            sequence,
            key,
            value,
            headers,
            timestamp,
        });
        Ok(())
    }

    /// Writes everything of the run and `next_input_offset` in one write
    /// batch.
    pub fn commit(self, next_input_offset: i64) -> Result<(), StateError> {
        if let Some(current) = self.state.input_offset()?
            && next_input_offset < current
        {
            return Err(StateError::OffsetBackwards {
                current,
                next: next_input_offset,
            });
        }
        let mut batch = WriteBatch::default();
        for (index, writes) in self.writes.iter().enumerate() {
            let cf = self.state.cf(&self.state.stores[index])?;
            for (key, value) in writes {
                match value {
                    Some(value) => batch.put_cf(cf, key, value),
                    None => batch.delete_cf(cf, key),
                }
            }
        }
        let outbox = self.state.cf(OUTBOX)?;
        let first = self.state.next_outbox_seq()?;
        for (seq, entry) in (first..).zip(&self.outbox) {
            let encoded = postcard::to_stdvec(entry)
                .map_err(|e| StateError::Corrupt(format!("encoding an outbox entry: {e}")))?;
            batch.put_cf(outbox, seq.to_be_bytes(), encoded);
        }
        let meta = self.state.cf(META)?;
        if !self.outbox.is_empty() {
            let next = first + self.outbox.len() as u64;
            batch.put_cf(meta, NEXT_OUTBOX, next.to_be_bytes());
        }
        for ((topic, partition), next) in &self.sequences {
            batch.put_cf(
                meta,
                sequence_key(topic, *partition),
                i64::from(*next).to_be_bytes(),
            );
        }
        batch.put_cf(meta, INPUT_OFFSET, next_input_offset.to_be_bytes());
        self.state.write(batch)
    }
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
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
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
        TaskState::open(dir, &["counts", "users"], false).unwrap()
    }

    fn entries(pairs: &[(&str, &str)]) -> Vec<Entry> {
        pairs
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn a_run_reads_its_own_writes_and_commits_them_with_the_offset() {
        let dir = tempfile::tempdir().unwrap();
        let state = open(dir.path());
        assert_eq!(state.input_offset().unwrap(), None);
        let mut run = state.run();
        run.put("counts", b"a", b"1").unwrap();
        run.put("counts", b"b", b"2").unwrap();
        assert_eq!(run.get("counts", b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(
            state.get("counts", b"a").unwrap(),
            None,
            "not before commit"
        );
        run.commit(10).unwrap();

        let mut run = state.run();
        run.put("counts", b"a", b"5").unwrap();
        run.delete("counts", b"b").unwrap();
        run.put("counts", b"c", b"3").unwrap();
        assert_eq!(run.get("counts", b"b").unwrap(), None, "the delete is seen");
        assert_eq!(
            run.range("counts", b"", None).unwrap(),
            entries(&[("a", "5"), ("c", "3")])
        );
        drop(run);
        assert_eq!(
            state.entries("counts").unwrap(),
            entries(&[("a", "1"), ("b", "2")]),
            "a dropped run leaves nothing"
        );
        assert_eq!(state.input_offset().unwrap(), Some(10));
        drop(state);

        let state = open(dir.path());
        assert_eq!(state.input_offset().unwrap(), Some(10));
        assert_eq!(state.get("counts", b"b").unwrap(), Some(b"2".to_vec()));
    }

    #[test]
    fn scans_merge_pending_writes_over_committed_ones_in_key_order() {
        let dir = tempfile::tempdir().unwrap();
        let state = open(dir.path());
        let mut run = state.run();
        for key in ["u/1", "u/3", "u/5", "v/1"] {
            run.put("users", key.as_bytes(), b"old").unwrap();
        }
        run.commit(1).unwrap();
        let mut run = state.run();
        run.put("users", b"u/2", b"new").unwrap();
        run.put("users", b"u/3", b"new").unwrap();
        run.delete("users", b"u/5").unwrap();
        run.put("users", b"w/1", b"new").unwrap();
        assert_eq!(
            run.scan_prefix("users", b"u/").unwrap(),
            entries(&[("u/1", "old"), ("u/2", "new"), ("u/3", "new")])
        );
        assert_eq!(
            run.range("users", b"u/2", Some(b"v/2")).unwrap(),
            entries(&[("u/2", "new"), ("u/3", "new"), ("v/1", "old")])
        );
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff, 0xff]), None);
    }

    #[test]
    fn emitted_records_are_committed_with_dense_outbox_and_producer_sequences() {
        let dir = tempfile::tempdir().unwrap();
        let state = open(dir.path());
        let mut run = state.run();
        for (i, partition) in [0, 1, 0].into_iter().enumerate() {
            run.emit("out", partition, None, Some(vec![i as u8]), vec![], 100)
                .unwrap();
        }
        run.commit(3).unwrap();
        let mut run = state.run();
        run.emit("out", 0, Some(b"k".to_vec()), None, vec![], 101)
            .unwrap();
        run.commit(4).unwrap();

        let outbox = state.outbox().unwrap();
        let seqs: Vec<(u64, i32, i32)> = outbox
            .iter()
            .map(|(seq, e)| (*seq, e.partition, e.sequence))
            .collect();
        assert_eq!(seqs, [(0, 0, 0), (1, 1, 0), (2, 0, 1), (3, 0, 2)]);
        state.remove_shipped(1).unwrap();
        drop(state);
        let state = open(dir.path());
        let left: Vec<u64> = state.outbox().unwrap().iter().map(|(s, _)| *s).collect();
        assert_eq!(left, [2, 3]);
        assert_eq!(state.next_sequence("out", 0).unwrap(), 3);
        assert_eq!(state.next_sequence("out", 1).unwrap(), 1);
        // New entries continue after the last, shipped or not.
        let mut run = state.run();
        run.emit("out", 1, None, None, vec![], 102).unwrap();
        run.commit(5).unwrap();
        assert_eq!(state.outbox().unwrap().last().unwrap().0, 4);
        // Also once everything is shipped and removed.
        state.remove_shipped(4).unwrap();
        assert!(state.outbox().unwrap().is_empty());
        let mut run = state.run();
        run.emit("out", 1, None, None, vec![], 103).unwrap();
        run.commit(6).unwrap();
        assert_eq!(state.outbox().unwrap()[0].0, 5);
    }

    #[test]
    fn the_input_offset_never_moves_back_and_names_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let state = open(dir.path());
        state.run().commit(7).unwrap();
        let mut run = state.run();
        run.put("counts", b"x", b"1").unwrap();
        assert!(matches!(
            run.commit(6),
            Err(StateError::OffsetBackwards {
                current: 7,
                next: 6
            })
        ));
        assert_eq!(state.get("counts", b"x").unwrap(), None, "nothing written");
        assert!(matches!(
            state.run().put("nope", b"k", b"v"),
            Err(StateError::UnknownStore(..))
        ));
        drop(state);
        assert!(matches!(
            TaskState::open(dir.path(), &["meta"], false),
            Err(StateError::ReservedName(_))
        ));
    }
}
