//! How an app's tasks read and commit: [`TaskConfig`], with its commit
//! interval ([`CommitInterval`]) and checkpoint policy
//! ([`CheckpointPolicy`]); the `App` builder sets them (see `topology`).

use std::time::Duration;

/// When a task commits its run: whichever limit is reached first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitInterval {
    pub records: u64,
    pub bytes: u64,
    pub interval: Duration,
}

impl Default for CommitInterval {
    fn default() -> Self {
        Self {
            records: 100_000,
            bytes: 16 << 20,
            interval: Duration::from_millis(100),
        }
    }
}

/// When a task takes a checkpoint of its state on its own (after a
/// commit): every `records` records or `interval`, whichever comes first;
/// neither set, only when asked (`checkpoint`). The newest `keep` stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointPolicy {
    pub records: Option<u64>,
    pub interval: Option<Duration>,
    pub keep: usize,
}

impl Default for CheckpointPolicy {
    fn default() -> Self {
        Self {
            records: None,
            interval: None,
            keep: 3,
        }
    }
}

/// Tunables of every task of an app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskConfig {
    pub commit: CommitInterval,
    /// Bytes asked for per fetch.
    pub fetch_bytes: u32,
    /// fsync the state's WAL at every commit, and the embedded log's derived
    /// partitions before their outbox entries are dropped.
    pub sync: bool,
    pub checkpoints: CheckpointPolicy,
    /// Embedded: also write every store's changes to its changelog topic
    /// (`<app>-<store>-changelog`) with each commit. Remote apps always do:
    /// their state travels through the changelogs.
    pub changelogs: bool,
    /// Repeated writes of one key within a commit merged into one database
    /// write (on by default; see [`App::write_cache`]).
    pub write_cache: bool,
    /// How long a task with several inputs waits for one that is caught
    /// up and has nothing buffered before it processes the others without
    /// it (see [`App::max_task_idle`]).
    pub max_task_idle: Duration,
    /// The threads an instance's tasks share (0: one per core; see
    /// `task::threads`).
    pub task_threads: usize,
    /// Each batch counted for `/metrics` (on by default; see
    /// [`App::task_metrics`]).
    pub metrics: bool,
}

impl TaskConfig {
    /// How many task threads to start: the setting, or one per core.
    pub fn task_thread_count(&self) -> usize {
        match self.task_threads {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            threads => threads,
        }
    }
}

impl Default for TaskConfig {
    fn default() -> Self {
        Self {
            commit: CommitInterval::default(),
            fetch_bytes: 4 << 20,
            sync: true,
            checkpoints: CheckpointPolicy::default(),
            changelogs: false,
            write_cache: true,
            max_task_idle: Duration::ZERO,
            task_threads: 0,
            metrics: true,
        }
    }
}
