//! [`StoreMap`]: one store's values in a task's memory: the run's writes
//! (dirty, until the commit) and a bounded cache of committed values
//! (clean, emptied when full; the database stays the truth), in one
//! [`SlotTable`].
//!
//! Invariant: while a commit is in flight nothing is evicted (the values it
//! writes, clean in the table, may not be in the database yet).

use super::inline_bytes::InlineBytes;
use super::memory::{self, OpenStore};
use super::slot_table::{Probe, SlotTable};

/// One store's values in memory: the run's writes and a cache of committed
/// values, in one table.
#[derive(Default)]
pub(super) struct StoreMap {
    pub slots: SlotTable,
    /// The keys the run wrote, each once.
    pub dirty: Vec<InlineBytes>,
    /// About how many bytes the slots hold.
    pub bytes: usize,
    /// Gets since [`TaskState::take_reads`] last asked.
    pub reads: u64,
    /// Above this many bytes the clean slots are dropped: the cache's
    /// bound, raised past what the run's own writes hold (those stay until
    /// the commit), so eviction is never repeated for nothing.
    pub limit: usize,
    /// The store's share of the process's state memory (see `memory`),
    /// taken again at every commit.
    pub cache_max: usize,
    /// Counts the store among those sharing the memory while it is open.
    _open: Option<OpenStore>,
}

impl StoreMap {
    /// A store's map, counted among those sharing the process's state
    /// memory.
    pub fn open() -> Self {
        let memory = memory::shared();
        let open = memory.open_store();
        Self {
            cache_max: memory.store_cache_bytes(),
            _open: Some(open),
            ..Self::default()
        }
    }

    /// Takes the store's share of the state memory again.
    pub fn reshare(&mut self) {
        self.cache_max = memory::shared().store_cache_bytes();
    }

    /// Room for a new slot of `added` bytes: when the cache is full, the
    /// clean slots go (the run's writes stay), unless a commit is in
    /// flight: the values it writes, clean in the table, may not be in the
    /// database yet.
    pub fn make_room(&mut self, added: usize, committing: bool) {
        self.bytes += added;
        if self.bytes > self.limit.max(self.cache_max) && !committing {
            self.slots.retain_dirty();
            self.bytes = self.slots.iter().map(|(k, s)| slot_bytes(k, s.value)).sum();
            self.limit = self.bytes + self.cache_max / 2;
        }
    }

    pub fn write(&mut self, key: &[u8], value: Option<&[u8]>, committing: bool) {
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
    pub fn discard(&mut self) {
        for key in self.dirty.drain(..) {
            self.slots.remove(&Probe::new(&key));
        }
    }
}

pub(super) fn slot_bytes(key: &[u8], value: Option<&[u8]>) -> usize {
    key.len() + value.map_or(0, <[u8]>::len) + 48
}
