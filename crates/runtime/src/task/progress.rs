//! [`TaskProgress`]: what a run's tasks count together (records
//! processed, towards their targets, store writes, the crash point), and
//! how a task counts into it, taking back what a run processed again.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::Task;

/// Counters a running task shares with the app.
///
/// `done` and `total` count the same records, so a progress bar never
/// passes 100%: a task adds to `total` what it has to go when it learns
/// its targets (at start for external inputs, once the writers stopped for
/// derived ones), and to `done` only the records it processes after that.
/// `records` counts every record processed (derived topics' too).
#[derive(Default)]
pub(crate) struct TaskProgress {
    pub records: AtomicU64,
    /// Set by the first task to see `records` reach the run's
    /// `crash_after`; every task then ends as crashed at its next check.
    pub crashed: AtomicBool,
    /// Store entries the tasks' commits wrote to their databases.
    pub store_writes: AtomicU64,
    /// Records the tasks that know their targets have to process, from
    /// where they stood when they learned them.
    pub total: AtomicU64,
    /// Records processed towards `total`.
    pub done: AtomicU64,
}

impl Task {
    /// Counts `records` processed in the progress; towards the total when
    /// the task had counted what it has to go.
    pub(super) fn count_progress(&mut self, records: u64) {
        let progress = &self.setup.progress;
        progress.records.fetch_add(records, Ordering::Relaxed);
        self.run_progress.0 += records;
        if self.counted {
            progress.done.fetch_add(records, Ordering::Relaxed);
            self.run_progress.1 += records;
        }
    }
}
