//! [`StateMemory`]: the one memory budget every task state of a process
//! shares (`run --state-memory`), so that memory does not grow with the
//! number of tasks.
//!
//! Opened with RocksDB's defaults, each task's database would have a block
//! cache and memtables of its own (tens of MiB per store), and each store
//! a write cache of its own of up to [`STORE_CACHE_BYTES_MAX`]: an instance
//! given 600 tasks would grow past any machine. Instead:
//!
//! | share | what | held to it by |
//! |---|---|---|
//! | 1/2 | RocksDB: one LRU block cache for every database, memtables charged to it | the cache's capacity (LRU, not strict: a block in use stays); a write-buffer manager of 1/4 flushes memtables past it (no stall) |
//! | 1/2 | the stores' write caches (`StoreMap`) | divided among the stores open, each between [`STORE_CACHE_BYTES_MIN`] and [`STORE_CACHE_BYTES_MAX`] |
//!
//! A store's share is taken when its task opens and at every commit, so it
//! shrinks as tasks arrive and grows back as they go. The run's own writes
//! stay in memory until their commit whatever the share: `--commit-records`
//! bounds them. Outside the budget: each task's fetch buffers
//! (`--fetch-bytes` per input), its outbox until shipped, RocksDB's
//! per-database structures (about 1 MiB each) and the threads' stacks.
//!
//! The budget is set once per process, before the first state opens
//! ([`configure`]); a process that never sets it gets
//! [`STATE_MEMORY_DEFAULT`]. Like Kafka Streams' bounded-memory
//! `RocksDBConfigSetter`, it is process-wide: the cache and the
//! write-buffer manager are shared by every database opened.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The budget when none is given.
pub const STATE_MEMORY_DEFAULT: usize = 512 << 20;
/// The smallest budget taken: below it RocksDB's own floor dominates.
pub const STATE_MEMORY_MIN: usize = 16 << 20;
/// The most one store caches, however much room there is (more rarely
/// saves a read: the cache is emptied whole when full).
pub(super) const STORE_CACHE_BYTES_MAX: usize = 64 << 20;
/// The least one store caches, however many there are.
pub(super) const STORE_CACHE_BYTES_MIN: usize = 256 << 10;

/// The process's budget and what shares it.
pub struct StateMemory {
    budget: usize,
    cache: rocksdb::Cache,
    buffers: rocksdb::WriteBufferManager,
    /// Stores open now (their write caches share half the budget).
    open_stores: AtomicUsize,
}

static SHARED: OnceLock<StateMemory> = OnceLock::new();

/// Sets the process's budget, before any state opens. False when one was
/// set (or taken by default) already, and differs.
pub fn configure(budget: usize) -> bool {
    SHARED.get_or_init(|| StateMemory::new(budget)).budget == budget.max(STATE_MEMORY_MIN)
}

/// The process's budget (the default one if none was configured).
pub fn shared() -> &'static StateMemory {
    SHARED.get_or_init(|| StateMemory::new(STATE_MEMORY_DEFAULT))
}

impl StateMemory {
    fn new(budget: usize) -> Self {
        let budget = budget.max(STATE_MEMORY_MIN);
        let cache = rocksdb::Cache::new_lru_cache(budget / 2);
        // Memtables are charged to the cache: together they stay within
        // its capacity. No stall: past the buffer size, flushes.
        let buffers = rocksdb::WriteBufferManager::new_write_buffer_manager_with_cache(
            budget / 4,
            false,
            cache.clone(),
        );
        Self {
            budget,
            cache,
            buffers,
            open_stores: AtomicUsize::new(0),
        }
    }

    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Bytes in the shared block cache now (memtables included).
    pub fn cache_usage(&self) -> usize {
        self.cache.get_usage()
    }

    /// Bytes of memtables now, across every database.
    pub fn memtable_usage(&self) -> usize {
        self.buffers.get_usage()
    }

    /// Bytes the stores' write caches hold in all, at most (each store's
    /// share times the stores open).
    pub fn store_caches_bound(&self) -> usize {
        self.open_stores.load(Ordering::Relaxed) * self.store_cache_bytes()
    }

    /// One store's share of the write caches' half of the budget.
    pub(super) fn store_cache_bytes(&self) -> usize {
        let open = self.open_stores.load(Ordering::Relaxed).max(1);
        (self.budget / 2 / open).clamp(STORE_CACHE_BYTES_MIN, STORE_CACHE_BYTES_MAX)
    }

    /// Puts a database's options on the shared write buffers.
    pub(super) fn apply_to_database(&self, options: &mut rocksdb::Options) {
        options.set_write_buffer_manager(&self.buffers);
    }

    /// Puts a column family's options on the shared block cache.
    pub(super) fn apply_to_family(&self, options: &mut rocksdb::Options) {
        let mut table = rocksdb::BlockBasedOptions::default();
        table.set_block_cache(&self.cache);
        // Index and filter blocks in the cache too, within the budget.
        table.set_cache_index_and_filter_blocks(true);
        options.set_block_based_table_factory(&table);
    }

    /// Counts a store open until the returned guard drops.
    pub(super) fn open_store(&'static self) -> OpenStore {
        self.open_stores.fetch_add(1, Ordering::Relaxed);
        OpenStore { memory: self }
    }
}

/// A store counted open (see [`StateMemory::open_store`]).
pub(super) struct OpenStore {
    memory: &'static StateMemory,
}

impl Drop for OpenStore {
    fn drop(&mut self) {
        self.memory.open_stores.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stores_share_shrinks_as_stores_open_within_its_bounds() {
        let memory = Box::leak(Box::new(StateMemory::new(64 << 20)));
        let one = memory.open_store();
        assert_eq!(memory.store_cache_bytes(), 32 << 20);
        let many: Vec<OpenStore> = (0..1_000).map(|_| memory.open_store()).collect();
        assert_eq!(memory.store_cache_bytes(), STORE_CACHE_BYTES_MIN);
        drop(many);
        drop(one);
        let big = Box::leak(Box::new(StateMemory::new(1 << 30)));
        let _one = big.open_store();
        assert_eq!(big.store_cache_bytes(), STORE_CACHE_BYTES_MAX);
    }

    #[test]
    fn a_budget_below_the_floor_is_raised_to_it() {
        assert_eq!(StateMemory::new(1).budget(), STATE_MEMORY_MIN);
    }
}
