//! Putting a rebuilt state in place of a task's live one.
//!
//! A rebuild builds a task's state afresh in `<state>/rebuild/<processor>/
//! <partition>` (see `rebuild`). When it is close to the live task's input
//! offsets, the two meet through four files beside the rebuilt directory:
//!
//! 1. the rebuild writes `<partition>.ready` (it holds `rebuild/.lock` all
//!    along: a `.ready` with no rebuild holding the lock is stale, removed
//!    and not answered);
//! 2. the live task (it looks between fetches) commits and ships all it
//!    holds, writes its input offsets to `<partition>.hold` and waits;
//! 3. the rebuild processes exactly up to those offsets, commits, closes its
//!    state and writes the same offsets to `<partition>.caught-up`;
//! 4. the live task checks the rebuilt state is at its offsets, has it take
//!    over its bookkeeping (producer identity, sequences, outbox), closes
//!    both, renames its directory to `<partition>.old` and the rebuilt one
//!    into its place, removes the old one and the files, and goes on with
//!    the rebuilt state, writing `<partition>.outcome`: `swapped`, or
//!    `refused: <why>`, which the rebuild reports.
//!
//! When the app is not running, the rebuild does step 4 itself, holding the
//! app's run lock. A crash between the two renames is finished when the
//! task opens next ([`recover`]): the rebuilt state is complete before the
//! first rename.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::error::RuntimeError;
use super::state::TaskState;

/// The files through which a rebuild and the live task meet.
pub(crate) struct Handover {
    pub ready: PathBuf,
    pub hold: PathBuf,
    pub caught_up: PathBuf,
    pub outcome: PathBuf,
    /// Held by a running rebuild (see `rebuild`).
    lock: PathBuf,
}

/// What `.outcome` says after a swap.
pub(crate) const SWAPPED: &str = "swapped";

impl Handover {
    pub fn beside(rebuilt: &Path) -> Self {
        let with = |suffix: &str| {
            let mut name = rebuilt.file_name().unwrap_or_default().to_os_string();
            name.push(suffix);
            rebuilt.with_file_name(name)
        };
        let rebuild_root = rebuilt.parent().and_then(Path::parent).unwrap_or(rebuilt);
        Self {
            ready: with(".ready"),
            hold: with(".hold"),
            caught_up: with(".caught-up"),
            outcome: with(".outcome"),
            lock: rebuild_lock(rebuild_root),
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
        write_whole(&self.outcome, outcome)
    }

    /// Whether a rebuild process holds the rebuild lock now.
    pub fn rebuild_running(&self) -> bool {
        super::runner::is_locked(&self.lock)
    }

    /// Marks the rebuild ready, as this process.
    pub fn announce(&self) -> Result<(), RuntimeError> {
        write_whole(&self.ready, &std::process::id().to_string())
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

/// The lock a running rebuild holds, in the version's `rebuild` directory.
pub(crate) fn rebuild_lock(rebuild_root: &Path) -> PathBuf {
    rebuild_root.join(".lock")
}

/// Input offsets as the handover files carry them.
pub(crate) fn encode_offsets(offsets: &BTreeMap<String, i64>) -> String {
    serde_json::to_string(offsets).expect("plain data")
}

pub(crate) fn decode_offsets(text: &str) -> Option<BTreeMap<String, i64>> {
    serde_json::from_str(text).ok()
}

/// Writes a small file whole: aside, then renamed into place.
pub(crate) fn write_whole(path: &Path, contents: &str) -> Result<(), RuntimeError> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    let partial = path.with_file_name(name);
    std::fs::write(&partial, contents)
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|error| RuntimeError::Io {
            context: format!("writing {}", path.display()),
            error,
        })
}

fn remove_file(path: &Path) -> Result<(), RuntimeError> {
    Ok(crate::log::files::remove_if_exists(path)?)
}

fn old_dir(live: &Path) -> PathBuf {
    let mut name = live.file_name().unwrap_or_default().to_os_string();
    name.push(".old");
    live.with_file_name(name)
}

/// Finishes a swap a crash interrupted: the live directory renamed away
/// but the rebuilt one not yet in its place; then drops the old state, and
/// the handover files once no rebuilt state is left to hand over.
pub(crate) fn recover(live: &Path, rebuilt: &Path) -> Result<(), RuntimeError> {
    let old = old_dir(live);
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

/// The input offsets of a rebuilt state, if it has committed any.
pub(crate) fn rebuilt_offsets(
    rebuilt: &Path,
) -> Result<Option<BTreeMap<String, i64>>, RuntimeError> {
    match TaskState::open_read_only(rebuilt) {
        Ok(state) => Ok(Some(state.input_offsets())),
        Err(super::state::StateError::NeverOpened(_)) => Ok(None),
        Err(error) => Err(error.into()),
    }
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
    if !rebuilt.join("CURRENT").exists() {
        return Err(RuntimeError::Config(format!(
            "no rebuilt state in {}; not swapped",
            rebuilt.display()
        )));
    }
    let mut live_state = live_state;
    live_state.settle()?;
    {
        let mut fresh = TaskState::open(rebuilt, stores, sync)?;
        if fresh.input_offsets() != live_state.input_offsets() {
            return Err(RuntimeError::Config(format!(
                "the rebuilt state in {} is not at the live offsets; not swapped",
                rebuilt.display()
            )));
        }
        fresh.adopt_bookkeeping(&live_state)?;
    }
    drop(live_state);
    let old = old_dir(live);
    let io = |context: String| move |error| RuntimeError::Io { context, error };
    std::fs::rename(live, &old).map_err(io(format!("renaming {}", live.display())))?;
    std::fs::rename(rebuilt, live).map_err(io(format!("renaming {}", rebuilt.display())))?;
    sync_parent(live)?;
    sync_parent(rebuilt)?;
    std::fs::remove_dir_all(&old).map_err(io(format!("removing {}", old.display())))?;
    Ok(TaskState::open(live, stores, sync)?)
}

fn sync_parent(path: &Path) -> Result<(), RuntimeError> {
    Ok(crate::log::files::sync_dir(
        path.parent().unwrap_or(Path::new(".")),
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(path: &Path) -> nix::fcntl::Flock<std::fs::File> {
        super::super::runner::lock_exclusive(path, String::new).unwrap()
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

        let held = lock(&rebuild_lock(&dir.path().join("rebuild")));
        files.announce().unwrap();
        assert!(files.rebuild_running());
        assert!(files.rebuild_ready().unwrap());
        drop(held);
        assert!(!files.rebuild_running(), "a killed rebuild lets go of it");
    }

    #[test]
    fn a_swap_cut_between_its_renames_is_finished_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("count/0");
        let rebuilt = dir.path().join("rebuild/count/0");
        std::fs::create_dir_all(old_dir(&live)).unwrap();
        std::fs::create_dir_all(&rebuilt).unwrap();
        std::fs::write(rebuilt.join("marker"), "rebuilt").unwrap();
        let files = Handover::beside(&rebuilt);
        files.announce().unwrap();
        recover(&live, &rebuilt).unwrap();
        assert_eq!(
            std::fs::read_to_string(live.join("marker")).unwrap(),
            "rebuilt"
        );
        assert!(!old_dir(&live).exists() && !rebuilt.exists());
        assert_eq!(std::fs::read_to_string(&files.outcome).unwrap(), SWAPPED);
        assert!(!files.ready.exists());

        // No rebuilt state beside it: the old one is put back.
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("count/0");
        std::fs::create_dir_all(old_dir(&live)).unwrap();
        std::fs::write(old_dir(&live).join("marker"), "old").unwrap();
        recover(&live, &dir.path().join("rebuild/count/0")).unwrap();
        assert_eq!(std::fs::read_to_string(live.join("marker")).unwrap(), "old");
    }
}
