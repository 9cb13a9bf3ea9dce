//! The `meta` column family: the task's bookkeeping.
//!
//! | key | value (big-endian) |
//! |---|---|
//! | `input_offset/<topic>` | i64: next offset to read from the input topic |
//! | `start_offset/<topic>` | i64: where the task began reading it (what a rebuild starts from) |
//! | `producer` | i64 producer id, i16 epoch |
//! | `sequence/<topic>\0<partition i32>` | i64: the partition's next sequence |
//! | `next_outbox` | u64: the next outbox sequence (kept once all are shipped) |
//! | `rate` | f64 bits: records/s while busy, smoothed (for `status`) |
//! | `lineage` | u64: this state's lineage, drawn when it was created or restored |
//! | `commit` | u64: commits written in this lineage (1 after the first) |
//! | `restored/<store>` | i64: the next changelog offset a restore (or a standby copy) reads; only while the state has no lineage |
//!
//! The producer identity and the lineage are written synced on their own,
//! once; everything else moves only with a commit.
//!
//! Lineage and commit number name a committed state among every copy of a
//! task's state, on any machine: remote, each commit's transaction commits
//! the input offsets with them (`strata/1 <lineage> <commit>` as the
//! offsets' metadata), so a task that starts knows whether its local state
//! is the one the cluster committed last, one commit behind it (its last
//! transaction did not commit: ship the outbox again), or neither (restore
//! from the changelogs). A restored state draws a new lineage: a stale copy
//! elsewhere that reached the same commit number is never taken for it.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use rocksdb::{Direction, IteratorMode, WriteBatch};

use super::{META, OUTBOX, StateError, TaskState};

pub(super) const INPUT_OFFSET_PREFIX: &[u8] = b"input_offset/";
pub(super) const START_OFFSET_PREFIX: &[u8] = b"start_offset/";
const PRODUCER: &[u8] = b"producer";
pub(super) const NEXT_OUTBOX: &[u8] = b"next_outbox";
pub(super) const RATE: &[u8] = b"rate";
const SEQUENCE_PREFIX: &[u8] = b"sequence/";
const LINEAGE: &[u8] = b"lineage";
pub(super) const COMMIT: &[u8] = b"commit";
pub(super) const RESTORED_PREFIX: &[u8] = b"restored/";

/// What a state records of itself besides its stores: the task's
/// producer, the input offsets of its last commit begun (durable once it
/// is settled), its lineage and its last commit's number.
#[derive(Debug, Default)]
pub(super) struct Meta {
    pub producer: Option<(i64, i16)>,
    pub offsets: BTreeMap<String, i64>,
    pub lineage: Option<u64>,
    pub commit_number: u64,
}

impl TaskState {
    /// The next offset to read from `topic`; `None` before the first commit.
    pub fn input_offset(&self, topic: &str) -> Option<i64> {
        self.meta.offsets.get(topic).copied()
    }

    /// Every input topic's next offset.
    pub fn input_offsets(&self) -> BTreeMap<String, i64> {
        self.meta.offsets.clone()
    }

    pub(super) fn read_input_offsets(&self) -> Result<BTreeMap<String, i64>, StateError> {
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
        self.meta.producer
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
        self.meta.producer = Some((producer_id, epoch));
        Ok(())
    }

    pub(super) fn read_producer(&self) -> Result<Option<(i64, i16)>, StateError> {
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

    /// This state's lineage (see the module docs), once drawn.
    pub fn lineage(&self) -> Option<u64> {
        self.meta.lineage
    }

    /// Draws the state's lineage if it has none yet (synced).
    pub fn ensure_lineage(&mut self) -> Result<u64, StateError> {
        if let Some(lineage) = self.meta.lineage {
            return Ok(lineage);
        }
        let lineage = new_lineage();
        let mut options = rocksdb::WriteOptions::default();
        options.set_sync(true);
        self.db
            .put_cf_opt(self.cf(META)?, LINEAGE, lineage.to_be_bytes(), &options)?;
        self.meta.lineage = Some(lineage);
        Ok(lineage)
    }

    /// Commits written in this lineage: the number of the last commit
    /// begun (0 before the first).
    pub fn commit_number(&self) -> u64 {
        self.meta.commit_number
    }

    pub(super) fn read_lineage(&self) -> Result<(Option<u64>, u64), StateError> {
        let meta = self.cf(META)?;
        let lineage = match self.db.get_cf(meta, LINEAGE)? {
            None => None,
            Some(raw) => Some(decode_u64(&raw)?),
        };
        let commit = match self.db.get_cf(meta, COMMIT)? {
            None => 0,
            Some(raw) => decode_u64(&raw)?,
        };
        Ok((lineage, commit))
    }

    /// Writes what a restore ends with, synced, in one batch: the input
    /// offsets and commit number of the state restored, a new lineage and
    /// the producer identity. Until this lands the state has no lineage,
    /// so a restore cut short is started again.
    pub fn finish_restore(
        &mut self,
        next_input_offsets: &[(&str, i64)],
        commit: u64,
        producer: (i64, i16),
    ) -> Result<u64, StateError> {
        let meta = self.cf(META)?;
        let lineage = new_lineage();
        let mut batch = WriteBatch::default();
        for (topic, next) in next_input_offsets {
            batch.put_cf(
                meta,
                topic_key(INPUT_OFFSET_PREFIX, topic),
                next.to_be_bytes(),
            );
        }
        batch.put_cf(meta, COMMIT, commit.to_be_bytes());
        batch.put_cf(meta, LINEAGE, lineage.to_be_bytes());
        // The restore is over: from now on the task's own commits move the
        // state, and a changelog position would lie about it.
        for store in &self.stores {
            batch.delete_cf(meta, topic_key(RESTORED_PREFIX, store));
        }
        let mut identity = producer.0.to_be_bytes().to_vec();
        identity.extend_from_slice(&producer.1.to_be_bytes());
        batch.put_cf(meta, PRODUCER, identity);
        let mut options = rocksdb::WriteOptions::default();
        options.set_sync(true);
        self.db.write_opt(batch, &options)?;
        self.meta.offsets = self.read_input_offsets()?;
        self.meta.commit_number = commit;
        self.meta.lineage = Some(lineage);
        self.meta.producer = Some(producer);
        Ok(lineage)
    }

    /// Where a restore (or a standby copy) of `store` reads its changelog
    /// next, if one has begun.
    pub fn restored_position(&self, store: &str) -> Result<Option<i64>, StateError> {
        Ok(self.restored(store)?.map(|restored| restored.next))
    }

    /// How far a restore (or a standby copy) of `store` read its changelog,
    /// if one has begun.
    pub fn restored(&self, store: &str) -> Result<Option<Restored>, StateError> {
        let meta = self.cf(META)?;
        match self.db.get_cf(meta, topic_key(RESTORED_PREFIX, store))? {
            None => Ok(None),
            Some(raw) => Restored::decode(&raw).map(Some),
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
        self.meta.producer = self.read_producer()?;
        self.meta.offsets = self.read_input_offsets()?;
        (self.meta.lineage, self.meta.commit_number) = self.read_lineage()?;
        self.outbox.next = from.outbox.next;
        // The outbox is `from`'s now, and so is the floor below it: this
        // state's own, raised over batches of its own, could lie above
        // `from`'s unshipped ones and hide them.
        (self.outbox.floor).store(from.outbox.floor.load(Ordering::Relaxed), Ordering::Relaxed);
        Ok(())
    }
}

/// A `meta` key `<prefix><topic>` (read back by `read_prefixed`).
pub(super) fn topic_key(prefix: &[u8], topic: &str) -> Vec<u8> {
    let mut key = prefix.to_vec();
    key.extend_from_slice(topic.as_bytes());
    key
}

pub(super) fn sequence_key(topic: &str, partition: i32) -> Vec<u8> {
    let mut key = SEQUENCE_PREFIX.to_vec();
    key.extend_from_slice(topic.as_bytes());
    key.push(0);
    key.extend_from_slice(&partition.to_be_bytes());
    key
}

/// How far a copy of a store read its changelog: `restored/<store>` in
/// `meta`, three big-endian i64s (`next`, `unread_after_ms`, `began_ms`;
/// a copy written before the two times holds `next` alone, and reads
/// back with both unknown: [`i64::MIN`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restored {
    /// The changelog offset read up to (exclusive).
    pub next: i64,
    /// Every changelog record past `next` was written after this (wall
    /// clock): the greatest timestamp among the records read (a changelog
    /// record carries its commit's wall clock), or when the copy last
    /// found itself at the changelog's end.
    pub unread_after_ms: i64,
    /// When this copy began reading (wall clock): every entry it holds
    /// was read since.
    pub began_ms: i64,
}

impl Restored {
    pub(super) fn encode(&self) -> [u8; 24] {
        let mut raw = [0; 24];
        raw[..8].copy_from_slice(&self.next.to_be_bytes());
        raw[8..16].copy_from_slice(&self.unread_after_ms.to_be_bytes());
        raw[16..].copy_from_slice(&self.began_ms.to_be_bytes());
        raw
    }

    fn decode(raw: &[u8]) -> Result<Self, StateError> {
        if raw.len() == 8 {
            return Ok(Self {
                next: decode_i64(raw)?,
                unread_after_ms: i64::MIN,
                began_ms: i64::MIN,
            });
        }
        if raw.len() != 24 {
            return Err(StateError::Corrupt(format!(
                "{} bytes for a restored position",
                raw.len()
            )));
        }
        Ok(Self {
            next: decode_i64(&raw[..8])?,
            unread_after_ms: decode_i64(&raw[8..16])?,
            began_ms: decode_i64(&raw[16..])?,
        })
    }

    /// The earliest wall-clock time the cleaner may drop a tombstone this
    /// copy has not read, given the changelog's `delete.retention.ms`. A
    /// tombstone outlives by the retention both its own writing (after
    /// `unread_after_ms`) and the first cleaning that saw it, which came
    /// after the copy read the key's earlier value (else that value would
    /// be gone, and the copy would not hold it), so after `began_ms`.
    pub fn tombstones_kept_until(&self, delete_retention_ms: i64) -> i64 {
        (self.unread_after_ms.max(self.began_ms)).saturating_add(delete_retention_ms)
    }
}

pub(super) fn decode_i64(raw: &[u8]) -> Result<i64, StateError> {
    let bytes: [u8; 8] = raw
        .try_into()
        .map_err(|_| StateError::Corrupt(format!("{} bytes for an i64", raw.len())))?;
    Ok(i64::from_be_bytes(bytes))
}

pub(super) fn decode_u64(raw: &[u8]) -> Result<u64, StateError> {
    Ok(decode_i64(raw)? as u64)
}

/// A lineage drawn at random: two states never share one by chance.
fn new_lineage() -> u64 {
    uuid::Uuid::new_v4().as_u64_pair().0
}
