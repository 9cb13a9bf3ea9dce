//! Checkpoints a task takes: on the app's policy (records or time since
//! the last), or when `checkpoint` asks through the version's request file
//! (a fresh token), answered by writing the same token to the task's
//! `ANSWERED` file once the checkpoint is taken.
//!
//! The request file is looked at every [`REQUEST_CHECK_EVERY`], and read
//! only when its modification time changed.

use std::time::{Duration, Instant};

use crate::error::RuntimeError;
use crate::layout;

use super::{Checkpoints, Task};

/// How often a task looks at the checkpoint request file (at commits and
/// while idle).
pub(super) const REQUEST_CHECK_EVERY: Duration = Duration::from_millis(100);

impl Task {
    /// Takes a checkpoint when the policy says so, or when `checkpoint`
    /// asked (the request file's token is not yet the task's answer, also
    /// a request made while the task was starting); then answers it with
    /// the token in the task's checkpoint directory. True when it took one
    /// (settling the commit in flight first: its records are then due to
    /// be shipped).
    pub(super) fn checkpoint_if_due(&mut self) -> Result<bool, RuntimeError> {
        let Some(paths) = &self.setup.checkpoints else {
            return Ok(false);
        };
        if self.setup.spec.stores.is_empty() {
            return Ok(false);
        }
        let policy = self.setup.config.checkpoints;
        let (since, records) = self.checkpointed;
        let due = policy.records.is_some_and(|n| records >= n)
            || policy
                .interval
                .is_some_and(|t| since.elapsed() >= t && records > 0);
        // A request is open while its token is not the task's answer
        // (the request file is looked at every REQUEST_CHECK_EVERY, and
        // read only when it changed).
        let request = if Instant::now() >= self.request_check_at {
            self.request_check_at = Instant::now() + REQUEST_CHECK_EVERY;
            requested_at(paths)
        } else {
            self.request_seen
        };
        let mut token = None;
        if request.is_some() && request != self.request_seen {
            let asked = std::fs::read(&paths.request).unwrap_or_default();
            let answered = std::fs::read(layout::checkpoint_answer(&paths.dir)).unwrap_or_default();
            if asked == answered {
                self.request_seen = request;
            } else {
                token = Some(asked);
            }
        }
        if !due && token.is_none() {
            return Ok(false);
        }
        let offset = self.inputs[0].next;
        self.state
            .checkpoint(&paths.dir, offset, policy.keep.max(1))?;
        self.checkpointed = (Instant::now(), 0);
        if let Some(token) = token {
            let answer = layout::checkpoint_answer(&paths.dir);
            std::fs::write(&answer, token).map_err(|error| RuntimeError::Io {
                context: format!("writing {}", answer.display()),
                error,
            })?;
            self.request_seen = request;
        }
        Ok(true)
    }
}

/// When the checkpoint request file was last written, if it exists.
fn requested_at(paths: &Checkpoints) -> Option<std::time::SystemTime> {
    std::fs::metadata(&paths.request)
        .and_then(|m| m.modified())
        .ok()
}
