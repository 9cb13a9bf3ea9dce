//! Changelogs: a store's writes as records of a compacted topic, one
//! partition per task, and the way back from such a topic into a store.
//!
//! Every commit emits each key the run wrote, with its new value (a null
//! value for a delete: a tombstone), to the store's changelog partition,
//! as outbox batches of that same commit. So the changelog holds exactly
//! the committed writes, in commit order, and its latest record per key
//! is the committed value: compaction may drop older ones without losing
//! anything a restore needs. A restore puts the records back in log order
//! (a later record of a key replaces an earlier one, a tombstone deletes),
//! unsynced and in bounded batches, each with the changelog offset it
//! reaches (`restored/<store>` in `meta`), so a restore cut short, or a
//! standby copy kept warm on another instance, goes on from there; the
//! restore ends with [`finish_restore`](super::TaskState::finish_restore),
//! one synced write, which drops those positions.

use rocksdb::WriteBatch;

use crate::record::NewRecord;

use super::meta::{RESTORED_PREFIX, topic_key};
use super::slot_table::DirtyEntries;
use super::{META, StateError, TaskState};

/// Bytes of restored entries put in one (unsynced) write batch.
const RESTORE_BATCH_BYTES_MAX: usize = 4 << 20;

impl TaskState {
    /// Emits the run's writes (`writes`: per store index, the entries taken
    /// from its table) to the changelogs of the stores that have one.
    pub(super) fn emit_changelogs(
        &mut self,
        writes: &[(usize, Vec<u8>)],
    ) -> Result<(), StateError> {
        if self.changelogs.iter().all(Option::is_none) {
            return Ok(());
        }
        let timestamp = crate::time::now_ms();
        for (index, entries) in writes {
            let Some((topic, partition)) = self.changelogs.get(*index).cloned().flatten() else {
                continue;
            };
            for (key, value) in DirtyEntries::new(entries) {
                let record = NewRecord {
                    key: Some(key),
                    value,
                    timestamp,
                    headers: &[],
                };
                self.emit(&topic, partition, record)?;
            }
        }
        Ok(())
    }

    /// Starts putting a restored store back: see [`Restoring`].
    pub fn restoring(&self, store: &str) -> Result<Restoring<'_>, StateError> {
        self.index(store)?;
        Ok(Restoring {
            state: self,
            store: store.to_string(),
            batch: WriteBatch::default(),
            position: None,
        })
    }
}

/// A store being restored from its changelog, record by record in log
/// order; written in batches of [`RESTORE_BATCH_BYTES_MAX`], unsynced (the
/// synced [`finish_restore`](TaskState::finish_restore) ends the restore).
pub struct Restoring<'s> {
    state: &'s TaskState,
    store: String,
    batch: WriteBatch,
    /// The changelog offset reached since the last flush, written with it.
    position: Option<i64>,
}

impl Restoring<'_> {
    /// A changelog record: the key's value, or its deletion (`None`).
    pub fn put(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), StateError> {
        let family = self.state.cf(&self.store)?;
        match value {
            Some(value) => self.batch.put_cf(family, key, value),
            None => self.batch.delete_cf(family, key),
        }
        if self.batch.size_in_bytes() >= RESTORE_BATCH_BYTES_MAX {
            self.flush()?;
        }
        Ok(())
    }

    /// Notes that the changelog has been read up to `next` (exclusive):
    /// written with the entries read before it.
    pub fn reached(&mut self, next: i64) {
        self.position = Some(next);
    }

    /// Writes what is batched, with the position reached.
    pub fn flush(&mut self) -> Result<(), StateError> {
        if let Some(next) = self.position.take() {
            let key = topic_key(RESTORED_PREFIX, &self.store);
            self.batch
                .put_cf(self.state.cf(META)?, key, next.to_be_bytes());
        }
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        self.state.db.write(batch)?;
        Ok(())
    }
}
