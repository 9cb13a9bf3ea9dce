//! A task's stores as the processor sees them: point reads and writes
//! through each store's [`StoreMap`](super::store_map), ordered scans that
//! merge the run's writes over the database, and the committed entries
//! (`dump-state`, `diff`).

use std::collections::BTreeMap;

use rocksdb::{Direction, IteratorMode};

use super::slot_table::Probe;
use super::store_map::slot_bytes;
use super::{Entry, StateError, TaskState};

/// Buffers a store call encodes into, kept between calls.
#[derive(Default)]
pub(crate) struct EncodeBuffers {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

impl TaskState {
    /// A committed value of a store (the run in progress not included).
    pub fn committed(&self, store: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        let cf = self.store_cf(store)?;
        Ok(self.db.get_cf(cf, key)?)
    }

    /// Every committed (key, value) of a store, in key order.
    pub fn entries(&self, store: &str) -> Result<Vec<Entry>, StateError> {
        self.committed_range(store, &[], None, usize::MAX)
    }

    /// Committed (key, value) pairs with `from <= key < to` (`to` None: to
    /// the end), in key order, at most `limit` of them.
    pub fn committed_range(
        &self,
        store: &str,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Entry>, StateError> {
        let cf = self.store_cf(store)?;
        let mut entries = Vec::new();
        let iter = self
            .db
            .iterator_cf(cf, IteratorMode::From(from, Direction::Forward));
        for item in iter {
            let (key, value) = item?;
            if entries.len() == limit || to.is_some_and(|end| &key[..] >= end) {
                break;
            }
            entries.push((key.to_vec(), value.to_vec()));
        }
        Ok(entries)
    }

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
        let committing = self.pipeline.in_flight.is_some();
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
    /// into its cache, ahead of a get; returns the key's tag, for
    /// [`prefetch_spilled`](Self::prefetch_spilled) a little later.
    pub(crate) fn prefetch(&self, key: &[u8], stores: &[usize]) -> u32 {
        let probe = Probe::new(key);
        for index in stores {
            self.maps[*index].slots.prefetch(&probe);
        }
        probe.tag()
    }

    /// The second step of [`prefetch`](Self::prefetch), once the entries
    /// have arrived: asks for the slab cells of those that spilled.
    pub(crate) fn prefetch_spilled(&self, tag: u32, stores: &[usize]) {
        for index in stores {
            self.maps[*index].slots.prefetch_spilled(tag);
        }
    }

    /// How many gets the store had since the last call.
    pub(crate) fn take_reads(&mut self, index: usize) -> u64 {
        std::mem::take(&mut self.maps[index].reads)
    }

    pub(crate) fn put_at(&mut self, index: usize, key: &[u8], value: &[u8]) {
        let committing = self.pipeline.in_flight.is_some();
        self.maps[index].write(key, Some(value), committing);
        if let Some(journal) = &mut self.journal {
            journal.push((index, key.to_vec(), Some(value.to_vec())));
        }
    }

    pub(crate) fn delete_at(&mut self, index: usize, key: &[u8]) {
        let committing = self.pipeline.in_flight.is_some();
        self.maps[index].write(key, None, committing);
        if let Some(journal) = &mut self.journal {
            journal.push((index, key.to_vec(), None));
        }
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
