//! [`Pending`]: what a task's run holds since its last commit, and when
//! the run is due to be committed.

use std::time::Instant;

use crate::topology::TaskConfig;

/// What the current run holds since its last commit.
pub(super) struct Pending {
    pub records: u64,
    pub bytes: u64,
    pub since: Instant,
    /// Whether anything moved (records, or offsets past skipped batches).
    pub moved: bool,
    /// Whether the run is to be committed after the record in hand,
    /// however small (a failure diverted: see `dead_letters`).
    pub full: bool,
}

impl Pending {
    pub fn new() -> Self {
        Self {
            records: 0,
            bytes: 0,
            since: Instant::now(),
            moved: false,
            full: false,
        }
    }

    pub fn due(&self, config: &TaskConfig) -> bool {
        self.moved
            && (self.records >= config.commit.records
                || self.bytes >= config.commit.bytes
                || self.since.elapsed() >= config.commit.interval)
    }
}
