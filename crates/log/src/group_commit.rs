//! Group commit: appenders that need durability share one fdatasync.
//!
//! At most one sync runs at a time. A caller that needs offsets up to `target`
//! durable either finds them durable already, waits for the running sync and
//! checks again, or becomes the leader and syncs everything appended so far,
//! covering every caller that arrived meanwhile. Under load, N concurrent
//! producers cost about one fsync per fsync-duration instead of N.
//!
//! A failed sync is never retried: the page cache may have dropped the dirty
//! pages, so a retry that succeeds proves nothing. The failure is sticky and
//! the partition turns read-only.

use std::sync::{Condvar, Mutex, MutexGuard};

use super::LogError;

#[derive(Debug)]
struct State {
    durable_offset: i64,
    syncing: bool,
    failed: Option<String>,
}

#[derive(Debug)]
pub(crate) struct GroupCommit {
    state: Mutex<State>,
    synced: Condvar,
}

/// What a caller of [`GroupCommit::begin`] must do.
pub(crate) enum Turn {
    /// Already durable.
    Done(i64),
    /// This caller leads: sync, then call [`GroupCommit::finish`].
    Lead,
}

impl GroupCommit {
    pub fn new(durable_offset: i64) -> Self {
        Self {
            state: Mutex::new(State {
                durable_offset,
                syncing: false,
                failed: None,
            }),
            synced: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock leaves only plain integers behind.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Waits until `target` is durable or this caller should lead a sync.
    pub fn begin(&self, target: i64, partition: &str) -> Result<Turn, LogError> {
        let mut state = self.lock();
        loop {
            if let Some(reason) = &state.failed {
                return Err(LogError::ReadOnly {
                    partition: partition.to_string(),
                    reason: reason.clone(),
                });
            }
            if state.durable_offset >= target {
                return Ok(Turn::Done(state.durable_offset));
            }
            if !state.syncing {
                state.syncing = true;
                return Ok(Turn::Lead);
            }
            state = self.synced.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Ends a sync led by this caller: on success everything below `synced_to`
    /// is durable; on failure the partition is read-only from now on.
    pub fn finish(&self, result: Result<i64, String>) {
        let mut state = self.lock();
        state.syncing = false;
        match result {
            Ok(synced_to) => state.durable_offset = state.durable_offset.max(synced_to),
            Err(reason) => {
                state.failed.get_or_insert(reason);
            }
        }
        drop(state);
        self.synced.notify_all();
    }

    /// Records durability achieved outside a group sync (a segment roll).
    pub fn advance(&self, durable_offset: i64) {
        let mut state = self.lock();
        state.durable_offset = state.durable_offset.max(durable_offset);
    }

    /// Marks the partition read-only without a sync (a failed roll or write).
    pub fn fail(&self, reason: String) {
        self.lock().failed.get_or_insert(reason);
        self.synced.notify_all();
    }

    pub fn durable_offset(&self) -> i64 {
        self.lock().durable_offset
    }

    pub fn failure(&self) -> Option<String> {
        self.lock().failed.clone()
    }
}
