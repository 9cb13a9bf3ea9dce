//! What RocksDB says of a task's state, for `/metrics`: the bytes of its
//! SST files, the bytes compaction is behind by, and whether writes are
//! stopped. RocksDB's properties, read per column family (a store each)
//! and summed; each read is a lookup in memory, so a commit can take them.

use super::TaskState;

const SST_BYTES: &str = "rocksdb.total-sst-files-size";
const PENDING_COMPACTION_BYTES: &str = "rocksdb.estimate-pending-compaction-bytes";
const WRITES_STOPPED: &str = "rocksdb.is-write-stopped";

/// A task state's size and compaction, now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DbStats {
    pub sst_bytes: u64,
    pub pending_compaction_bytes: u64,
    pub writes_stopped: bool,
}

impl TaskState {
    /// The state's size and compaction, summed over its stores (a
    /// property RocksDB does not give reads as 0).
    pub fn db_stats(&self) -> DbStats {
        let mut stats = DbStats::default();
        for store in &self.stores {
            let Some(family) = self.db.cf_handle(store) else {
                continue;
            };
            let read = |name: &str| {
                (self.db.property_int_value_cf(&family, name))
                    .ok()
                    .flatten()
                    .unwrap_or(0)
            };
            stats.sst_bytes += read(SST_BYTES);
            stats.pending_compaction_bytes += read(PENDING_COMPACTION_BYTES);
        }
        let stopped = self.db.property_int_value(WRITES_STOPPED).ok().flatten();
        stats.writes_stopped = stopped.is_some_and(|v| v != 0);
        stats
    }
}
