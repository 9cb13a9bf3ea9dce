//! Putting a rebuilt state in place of a task's live one.
//!
//! A rebuild builds a task's state afresh in `<state>/rebuild/<processor>/
//! <partition>` (see `rebuild`). When it is close to the live task's input
//! offsets, the two meet through three files beside the rebuilt directory:
//!
//! 1. the rebuild writes `<partition>.ready`, holding its process id (a
//!    `.ready` whose process is gone is stale: removed, not answered);
//! 2. the live task (it looks between fetches) commits and ships all it
//!    holds, writes its input offsets to `<partition>.hold` and waits;
//! 3. the rebuild processes exactly up to those offsets, commits, closes its
//!    state and writes the same offsets to `<partition>.caught-up`;
//! 4. the live task checks the rebuilt state is at its offsets, has it take
//!    over its bookkeeping (producer identity, sequences, outbox), closes
//!    both, renames its directory to `<partition>.old` and the rebuilt one
//!    into its place, removes the old one and the files, and goes on with
//!    the rebuilt state.
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
}

impl Handover {
    pub fn beside(rebuilt: &Path) -> Self {
        let with = |suffix: &str| {
            let mut name = rebuilt.file_name().unwrap_or_default().to_os_string();
            name.push(suffix);
            rebuilt.with_file_name(name)
        };
        Self {
            ready: with(".ready"),
            hold: with(".hold"),
            caught_up: with(".caught-up"),
        }
    }

    pub fn clear(&self) -> Result<(), RuntimeError> {
        for path in [&self.caught_up, &self.hold, &self.ready] {
            remove_file(path)?;
        }
        Ok(())
    }

    /// Marks the rebuild ready, as this process.
    pub fn announce(&self) -> Result<(), RuntimeError> {
        write_whole(&self.ready, &std::process::id().to_string())
    }

    /// Whether a rebuild is ready and its process still runs (a stale
    /// `.ready` is cleared with the other files).
    pub fn rebuild_ready(&self) -> Result<bool, RuntimeError> {
        let Ok(text) = std::fs::read_to_string(&self.ready) else {
            return Ok(false);
        };
        // Linux: a running process has /proc/<pid>.
        let alive = text
            .trim()
            .parse::<u32>()
            .is_ok_and(|pid| Path::new("/proc").join(pid.to_string()).exists());
        if !alive {
            self.clear()?;
        }
        Ok(alive)
    }
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
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(RuntimeError::Io {
            context: format!("removing {}", path.display()),
            error,
        }),
        _ => Ok(()),
    }
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
    if !rebuilt.exists() {
        Handover::beside(rebuilt).clear()?;
    }
    Ok(())
}

/// The input offsets of a rebuilt state, if it has committed any.
pub(crate) fn rebuilt_offsets(
    rebuilt: &Path,
) -> Result<Option<BTreeMap<String, i64>>, RuntimeError> {
    match TaskState::open_read_only(rebuilt) {
        Ok(state) => Ok(Some(state.input_offsets()?)),
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
    {
        let mut fresh = TaskState::open(rebuilt, stores, sync)?;
        if fresh.input_offsets()? != live_state.input_offsets()? {
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
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::File::open(parent)
        .and_then(|dir| dir.sync_all())
        .map_err(|error| RuntimeError::Io {
            context: format!("syncing {}", parent.display()),
            error,
        })
}
