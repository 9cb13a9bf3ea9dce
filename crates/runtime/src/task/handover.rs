//! The rebuild handover: how a rebuild and the live task meet, through
//! four files beside the rebuilt directory (paths from `layout`):
//!
//! 1. the rebuild writes `<partition>.ready` (it holds `rebuild/.lock` all
//!    along: a `.ready` with no rebuild holding the lock is stale, removed
//!    and not answered);
//! 2. the live task (it looks between fetches) commits and ships all it
//!    holds, writes its input offsets to `<partition>.hold` and waits;
//! 3. the rebuild processes exactly up to those offsets, commits, closes its
//!    state and writes the same offsets to `<partition>.caught-up`;
//! 4. the live task checks the rebuilt state is at its offsets and swaps it
//!    in (`swap`), writing `<partition>.outcome`: `swapped`, or
//!    `refused: <why>`, which the rebuild reports.
//!
//! `.hold` and `.caught-up` hold the input offsets as a JSON object
//! (`{"topic": next offset, …}`), written whole (aside, then renamed).
//! Their decoder, [`decode_offsets`], takes anything: what it does not
//! read as offsets is no answer (it is fuzzed:
//! `fuzz/fuzz_targets/handover_offsets.rs`).
//!
//! The task never stops for the handover's own troubles: it withdraws its
//! hold and asks again [`HOLD_MAX`] later.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::error::RuntimeError;
use crate::layout::{self, write_whole};

use super::Task;
use crate::state::{StateError, TaskState};

/// How long a task waits, its input held, for a rebuild to reach it.
pub(crate) const HOLD_MAX: Duration = Duration::from_secs(60);
/// How often a task holding its input looks for the rebuild's answer.
const ANSWER_CHECK_EVERY: Duration = Duration::from_millis(10);

/// The files through which a rebuild and the live task meet.
pub(crate) struct Handover {
    pub ready: PathBuf,
    pub hold: PathBuf,
    pub caught_up: PathBuf,
    pub outcome: PathBuf,
    /// Held by a running rebuild (see `ops::rebuild`).
    lock: PathBuf,
}

/// What `.outcome` says after a swap.
pub(crate) const SWAPPED: &str = "swapped";

impl Handover {
    pub fn beside(rebuilt: &Path) -> Self {
        Self {
            ready: layout::beside(rebuilt, ".ready"),
            hold: layout::beside(rebuilt, ".hold"),
            caught_up: layout::beside(rebuilt, ".caught-up"),
            outcome: layout::beside(rebuilt, ".outcome"),
            lock: layout::rebuild_lock(layout::state_dir_of_rebuild(rebuilt)),
        }
    }

    /// Ends a handover: the live task's side of the files.
    pub fn clear(&self) -> Result<(), RuntimeError> {
        for path in [&self.caught_up, &self.hold, &self.ready] {
            remove_file(path)?;
        }
        Ok(())
    }

    /// Every file, the outcome too (a rebuild starting afresh).
    pub fn clear_all(&self) -> Result<(), RuntimeError> {
        self.clear()?;
        remove_file(&self.outcome)
    }

    /// The live task's word on the handover, for the rebuild to report.
    pub fn report(&self, outcome: &str) -> Result<(), RuntimeError> {
        Ok(write_whole(&self.outcome, outcome)?)
    }

    /// Whether a rebuild process holds the rebuild lock now.
    pub fn rebuild_running(&self) -> bool {
        layout::is_locked(&self.lock)
    }

    /// Marks the rebuild ready, as this process.
    pub fn announce(&self) -> Result<(), RuntimeError> {
        Ok(write_whole(&self.ready, &std::process::id().to_string())?)
    }

    /// Whether a rebuild is ready and still running (a stale `.ready` is
    /// cleared with the other files).
    pub fn rebuild_ready(&self) -> Result<bool, RuntimeError> {
        if !self.ready.exists() {
            return Ok(false);
        }
        let running = self.rebuild_running();
        if !running {
            self.clear()?;
        }
        Ok(running)
    }
}

/// Input offsets as the handover files carry them.
pub(crate) fn encode_offsets(offsets: &BTreeMap<String, i64>) -> String {
    serde_json::to_string(offsets).expect("plain data")
}

/// The input offsets of a handover file's text; None for anything that is
/// not a JSON object of topic → offset.
#[doc(hidden)]
pub fn decode_offsets(text: &str) -> Option<BTreeMap<String, i64>> {
    serde_json::from_str(text).ok()
}

/// The input offsets of a rebuilt state, if it has committed any.
pub(crate) fn rebuilt_offsets(
    rebuilt: &Path,
) -> Result<Option<BTreeMap<String, i64>>, RuntimeError> {
    match TaskState::open_read_only(rebuilt) {
        Ok(state) => Ok(Some(state.input_offsets())),
        Err(StateError::NeverOpened(_)) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

fn remove_file(path: &Path) -> Result<(), RuntimeError> {
    Ok(strata_log::storage::Disk::os().remove_if_exists(path)?)
}

impl Task {
    /// When a rebuild of this task is ready to take over: commits and ships
    /// everything, holds its input at the offsets it tells the rebuild, and
    /// waits for the rebuild to reach them. True when it did; false when no
    /// rebuild is ready, or it did not come within [`HOLD_MAX`] (the task
    /// goes on and asks again later).
    pub(super) async fn hold_for_rebuild(&mut self) -> Result<bool, RuntimeError> {
        let Some(rebuilt) = self.setup.rebuild.clone() else {
            return Ok(false);
        };
        let files = Handover::beside(&rebuilt);
        match files.rebuild_ready() {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(error) => {
                tracing::warn!(task = %self.setup.name(), "looking for a rebuild: {error}");
                return Ok(false);
            }
        }
        if self.setup.changelogs.iter().any(Option::is_some) {
            // The changelogs hold the live state's writes: a state swapped
            // in would not be the one they restore.
            files.report(
                "refused: the task writes its stores to changelogs, which a rebuilt state would not match; restore a task by deleting its state directory (it is restored from the changelogs), or run without changelogs",
            )?;
            files.clear()?;
            self.handover_check_at = Instant::now() + HOLD_MAX;
            return Ok(false);
        }
        self.pending.moved = true;
        self.commit().await?;
        self.settle().await?;
        match self.await_rebuild(&rebuilt, &files).await {
            Ok(true) => return Ok(true),
            Ok(false) => {}
            // The handover's own troubles never stop the task.
            Err(error) => tracing::warn!(task = %self.setup.name(), "handover: {error}"),
        }
        let _ = std::fs::remove_file(&files.hold);
        self.handover_check_at = Instant::now() + HOLD_MAX;
        Ok(false)
    }

    /// Holds at the committed offsets until the rebuild has reached them.
    async fn await_rebuild(&self, rebuilt: &Path, files: &Handover) -> Result<bool, RuntimeError> {
        let offsets = self.state.input_offsets();
        let token = encode_offsets(&offsets);
        write_whole(&files.hold, &token)?;
        let deadline = Instant::now() + HOLD_MAX;
        loop {
            let answer = std::fs::read_to_string(&files.caught_up).ok();
            if answer.as_deref() == Some(token.as_str()) {
                // Only a rebuilt state exactly at these offsets goes in.
                if rebuilt_offsets(rebuilt)?.as_ref() == Some(&offsets) {
                    return Ok(true);
                }
                files.report("refused: its committed offsets are not the ones held")?;
                files.clear()?;
                return Ok(false);
            }
            let gone = !files.ready.exists() || !files.rebuild_running();
            if gone || Instant::now() > deadline || self.setup.stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            tokio::time::sleep(ANSWER_CHECK_EVERY).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn lock(path: &Path) -> layout::Lock {
        layout::lock_exclusive(path, String::new).unwrap()
    }

    #[test]
    fn a_ready_rebuild_is_one_whose_process_holds_the_rebuild_lock() {
        let dir = tempfile::tempdir().unwrap();
        let rebuilt = dir.path().join("rebuild/count/0");
        std::fs::create_dir_all(&rebuilt).unwrap();
        let files = Handover::beside(&rebuilt);
        assert!(!files.rebuild_ready().unwrap(), "nothing announced");
        files.announce().unwrap();
        write_whole(&files.hold, "{}").unwrap();
        assert!(!files.rebuild_running());
        assert!(!files.rebuild_ready().unwrap(), "no process holds the lock");
        assert!(
            !files.ready.exists() && !files.hold.exists(),
            "stale files cleared"
        );

        let held = lock(&layout::rebuild_lock(dir.path()));
        files.announce().unwrap();
        assert!(files.rebuild_running());
        assert!(files.rebuild_ready().unwrap());
        drop(held);
        assert!(!files.rebuild_running(), "a killed rebuild lets go of it");
    }

    proptest! {
        /// What the fuzz target `handover_offsets` checks, on arbitrary text.
        #[test]
        fn any_text_decodes_to_nothing_or_to_offsets_that_encode_back(text in ".{0,64}") {
            if let Some(offsets) = decode_offsets(&text) {
                prop_assert_eq!(decode_offsets(&encode_offsets(&offsets)), Some(offsets));
            }
        }

        #[test]
        fn offsets_round_trip(offsets in proptest::collection::btree_map("[a-z.-]{1,20}", any::<i64>(), 0..6)) {
            prop_assert_eq!(decode_offsets(&encode_offsets(&offsets)), Some(offsets));
        }
    }
}
