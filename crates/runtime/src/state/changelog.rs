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

use crate::layout;
use strata_record::NewRecord;

use super::dirty_entries::DirtyEntries;
use super::meta::{RESTORED_PREFIX, Restored, topic_key};
use super::restore_buffer::{HELD_BYTES_MAX, RestoreBuffer};
use super::{META, StateError, TaskState};

/// Most bytes of restored entries held before they are written.
const HELD_BYTES_RUN: usize = 64 << 20;
/// How far a standby copy idle at its changelog's end lets the time its
/// position was current lag before writing it again (see
/// [`Restoring::reached`]).
const UNREAD_AFTER_STEP_MS: i64 = 1_000;
/// Held bytes from which a run is written as a table file rather than a
/// write batch (a table file costs a few file operations and a sync).
const TABLE_FILE_BYTES_MIN: usize = 1 << 20;
const _: () = assert!(HELD_BYTES_RUN <= HELD_BYTES_MAX);

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
        let timestamp = strata_record::time::now_ms();
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
        let restored = self.restored(store)?;
        Ok(Restoring {
            state: self,
            store: store.to_string(),
            held: RestoreBuffer::default(),
            position: None,
            written: restored.map(|r| r.next),
            unread_after_ms: restored.map_or(i64::MIN, |r| r.unread_after_ms),
            began_ms: restored.map_or_else(strata_record::time::now_ms, |r| r.began_ms),
        })
    }
}

/// A store being restored from its changelog, record by record in log
/// order. Records are held until [`flush`](Self::flush) (or until they
/// fill [`HELD_BYTES_RUN`]): a short run is written as one write batch with
/// the position it reaches; a long one is cut to the latest entry per key,
/// sorted and written as a table file that RocksDB takes in whole
/// (`ingest`), which spares the memtable a search per record; its position
/// is written right after. A crash between the two leaves entries past
/// the position, which the restore reads again from there: putting a
/// stretch of the log back a second time, in order, leaves what once does.
/// Unsynced; the synced [`finish_restore`](TaskState::finish_restore)
/// ends the restore.
pub struct Restoring<'s> {
    state: &'s TaskState,
    store: String,
    held: RestoreBuffer,
    /// The changelog offset reached since the last flush, written with it.
    position: Option<i64>,
    /// The position last written (or found).
    written: Option<i64>,
    /// See [`Restored`].
    unread_after_ms: i64,
    began_ms: i64,
}

impl Restoring<'_> {
    /// A changelog record: the key's value, or its deletion (`None`).
    pub fn put(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), StateError> {
        if self.held.size() + key.len() + value.map_or(0, <[u8]>::len) > HELD_BYTES_RUN {
            let batch = self.write_held()?;
            self.state.db.write(batch)?;
        }
        self.held.push(key, value);
        Ok(())
    }

    /// Notes that the changelog has been read up to `next` (exclusive),
    /// every record past it written after `unread_after_ms` (see
    /// [`Restored`]): written with the entries read before it.
    /// A copy idle at the end moves its time on at most every
    /// [`UNREAD_AFTER_STEP_MS`], not with every fetch.
    pub fn reached(&mut self, next: i64, unread_after_ms: i64) {
        let moved = self.written != Some(next)
            || unread_after_ms >= self.unread_after_ms.saturating_add(UNREAD_AFTER_STEP_MS);
        if moved {
            self.position = Some(next);
            self.unread_after_ms = self.unread_after_ms.max(unread_after_ms);
        }
    }

    /// Whether enough is held that a flush now writes a table file.
    pub fn full(&self) -> bool {
        self.held.size() >= HELD_BYTES_RUN / 2
    }

    /// Writes what is held, with the position reached.
    pub fn flush(&mut self) -> Result<(), StateError> {
        let mut batch = self.write_held()?;
        if let Some(next) = self.position.take() {
            self.written = Some(next);
            let key = topic_key(RESTORED_PREFIX, &self.store);
            let restored = Restored {
                next,
                unread_after_ms: self.unread_after_ms,
                began_ms: self.began_ms,
            };
            batch.put_cf(self.state.cf(META)?, key, restored.encode());
        }
        if !batch.is_empty() {
            self.state.db.write(batch)?;
        }
        Ok(())
    }

    /// Writes a long held run as a table file; a short one comes back as
    /// a write batch for the caller to write (with the position, if any).
    fn write_held(&mut self) -> Result<WriteBatch, StateError> {
        let mut batch = WriteBatch::default();
        if self.held.is_empty() {
            return Ok(batch);
        }
        let family = self.state.cf(&self.store)?;
        if self.held.size() < TABLE_FILE_BYTES_MIN {
            for (key, value) in self.held.in_log_order() {
                match value {
                    Some(value) => batch.put_cf(family, key, value),
                    None => batch.delete_cf(family, key),
                }
            }
        } else {
            let path = layout::restore_table(self.state.db.path(), &self.store);
            let options = rocksdb::Options::default();
            let mut table = rocksdb::SstFileWriter::create(&options);
            table.open(&path)?;
            for (key, value) in self.held.latest_by_key() {
                match value {
                    Some(value) => table.put(key, value)?,
                    None => table.delete(key)?,
                }
            }
            table.finish()?;
            let mut ingest = rocksdb::IngestExternalFileOptions::default();
            ingest.set_move_files(true);
            (self.state.db).ingest_external_file_cf_opts(family, &ingest, vec![&path])?;
        }
        self.held.clear();
        Ok(batch)
    }
}
