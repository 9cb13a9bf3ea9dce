//! Putting a rebuilt state in place of a task's live one, whole or not at
//! all.
//!
//! The rebuilt state first takes over the live state's bookkeeping
//! (producer identity, sequences, outbox: see
//! `TaskState::adopt_bookkeeping`), synced; then the live directory is
//! renamed to `<partition>.old`, the rebuilt one into its place, and the old
//! one removed. The rebuilt state is complete before the first rename, so a
//! crash between the two renames is finished when the task next opens
//! ([`recover`]). Until the first rename the old state is untouched.
//!
//! A live task swaps during the handover (see `handover`); when the app is
//! not running, the rebuild swaps itself, holding the app's run lock.

use std::path::Path;

use crate::error::RuntimeError;
use crate::layout::{self, replaced_state_dir, sync_parent};
use crate::state::TaskState;

use super::handover::{Handover, SWAPPED};

/// Finishes a swap a crash interrupted: the live directory renamed away
/// but the rebuilt one not yet in its place; then drops the old state, and
/// the handover files once no rebuilt state is left to hand over.
pub(crate) fn recover(live: &Path, rebuilt: &Path) -> Result<(), RuntimeError> {
    let old = replaced_state_dir(live);
    let io = |context: String| move |error| RuntimeError::Io { context, error };
    if !live.exists() && old.exists() {
        let from = if rebuilt.exists() { rebuilt } else { &old };
        std::fs::rename(from, live).map_err(io(format!("renaming {}", from.display())))?;
        sync_parent(live)?;
    }
    if old.exists() {
        std::fs::remove_dir_all(&old).map_err(io(format!("removing {}", old.display())))?;
    }
    let files = Handover::beside(rebuilt);
    if !rebuilt.exists() && files.ready.exists() {
        // The rebuilt state went in before a crash cut the handover short.
        files.report(SWAPPED)?;
        files.clear()?;
    }
    Ok(())
}

/// Puts the rebuilt state in place of `live_state` (open on `live`, which
/// the caller owns); returns the rebuilt state opened in the live place.
pub(crate) fn swap_in(
    live: &Path,
    live_state: TaskState,
    rebuilt: &Path,
    stores: &[&str],
    sync: bool,
) -> Result<TaskState, RuntimeError> {
    let task = || rebuilt.display().to_string();
    if !layout::has_database(rebuilt) {
        return Err(RuntimeError::Rebuild {
            task: task(),
            reason: "no rebuilt state there; not swapped (run rebuild again)".into(),
        });
    }
    let mut live_state = live_state;
    live_state.settle()?;
    {
        let mut fresh = TaskState::open(rebuilt, stores, sync)?;
        if fresh.input_offsets() != live_state.input_offsets() {
            return Err(RuntimeError::Rebuild {
                task: task(),
                reason:
                    "the rebuilt state is not at the live offsets; not swapped (run rebuild again)"
                        .into(),
            });
        }
        fresh.adopt_bookkeeping(&live_state)?;
    }
    drop(live_state);
    let old = replaced_state_dir(live);
    let io = |context: String| move |error| RuntimeError::Io { context, error };
    std::fs::rename(live, &old).map_err(io(format!("renaming {}", live.display())))?;
    std::fs::rename(rebuilt, live).map_err(io(format!("renaming {}", rebuilt.display())))?;
    sync_parent(live)?;
    sync_parent(rebuilt)?;
    std::fs::remove_dir_all(&old).map_err(io(format!("removing {}", old.display())))?;
    Ok(TaskState::open(live, stores, sync)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_swap_cut_between_its_renames_is_finished_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("count/0");
        let rebuilt = dir.path().join("rebuild/count/0");
        std::fs::create_dir_all(replaced_state_dir(&live)).unwrap();
        std::fs::create_dir_all(&rebuilt).unwrap();
        std::fs::write(rebuilt.join("marker"), "rebuilt").unwrap();
        let files = Handover::beside(&rebuilt);
        files.announce().unwrap();
        recover(&live, &rebuilt).unwrap();
        assert_eq!(
            std::fs::read_to_string(live.join("marker")).unwrap(),
            "rebuilt"
        );
        assert!(!replaced_state_dir(&live).exists() && !rebuilt.exists());
        assert_eq!(std::fs::read_to_string(&files.outcome).unwrap(), SWAPPED);
        assert!(!files.ready.exists());

        // No rebuilt state beside it: the old one is put back.
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("count/0");
        std::fs::create_dir_all(replaced_state_dir(&live)).unwrap();
        std::fs::write(replaced_state_dir(&live).join("marker"), "old").unwrap();
        recover(&live, &dir.path().join("rebuild/count/0")).unwrap();
        assert_eq!(std::fs::read_to_string(live.join("marker")).unwrap(), "old");
    }
}
