//! `dump-state`: every store entry of every task, rendered with the
//! store's codecs and sorted; or, with `at`, as of an input offset, from
//! each task's newest checkpoint at or below it. Read-only: works while the
//! app runs.

use std::path::{Path, PathBuf};

use crate::error::RuntimeError;
use crate::layout::{self, checkpoints, task_dirs};
use crate::location::Location;
use crate::state::{StateError, TaskState};
use crate::topology::App;

/// Every store's entries of every task (`only`: of that store), rendered
/// and sorted as `store<TAB>key<TAB>value` lines.
pub fn dump_state(
    app: &App,
    location: &Location,
    only: Option<&str>,
) -> Result<Vec<String>, RuntimeError> {
    dump_state_at(app, location, only, None)
}

/// As [`dump_state`], or, with `at`, as of input offset `at`:
/// each task's newest checkpoint at or below it (an error names a task
/// that has none).
pub fn dump_state_at(
    app: &App,
    location: &Location,
    only: Option<&str>,
    at: Option<i64>,
) -> Result<Vec<String>, RuntimeError> {
    let mut lines = Vec::new();
    for spec in &app.processors {
        let stores: Vec<_> = spec
            .stores
            .iter()
            .filter(|s| only.is_none_or(|o| o == s.name))
            .collect();
        if stores.is_empty() {
            continue;
        }
        for (partition, dir) in task_dirs(&layout::processor_dir(location.state_dir(), &spec.name))?
        {
            let dir = match at {
                None => dir,
                Some(at) => checkpoint_at(location.state_dir(), &spec.name, partition, at)?.1,
            };
            let Some(state) = open_committed(&dir)? else {
                continue;
            };
            for store in &stores {
                if !state.stores().contains(&store.name) {
                    continue;
                }
                for (key, value) in state.entries(&store.name)? {
                    lines.push(format!(
                        "{}\t{}\t{}",
                        store.name,
                        (store.render_key)(&key),
                        (store.render_value)(&value)
                    ));
                }
            }
        }
    }
    let declared: Vec<&str> = app
        .processors
        .iter()
        .flat_map(|p| &p.stores)
        .map(|s| s.name.as_str())
        .collect();
    if let Some(only) = only
        && !declared.contains(&only)
    {
        return Err(RuntimeError::UnknownStore {
            store: only.to_string(),
            declared: declared.join(", "),
        });
    }
    lines.sort();
    Ok(lines)
}

/// A task's newest checkpoint at or below input offset `at`.
pub(crate) fn checkpoint_at(
    state_dir: &Path,
    processor: &str,
    partition: i32,
    at: i64,
) -> Result<(i64, PathBuf), RuntimeError> {
    let dir = layout::checkpoint_dir(state_dir, processor, partition);
    let all = checkpoints(&dir).map_err(RuntimeError::io(format!("listing {}", dir.display())))?;
    let offsets: Vec<String> = all.iter().map(|(o, _)| o.to_string()).collect();
    all.into_iter()
        .rev()
        .find(|(offset, _)| *offset <= at)
        .ok_or_else(|| RuntimeError::NoCheckpoint {
            task: format!("{processor}/{partition}"),
            wanted: format!(
                "at or below offset {at} (checkpoints at: {})",
                if offsets.is_empty() {
                    "none".to_string()
                } else {
                    offsets.join(", ")
                }
            ),
        })
}

/// Opens a running task's state read only at most this many times: its
/// own process may flush or compact while the files are listed and
/// opened, and a file gone in between fails the open.
const OPEN_ATTEMPTS: usize = 5;
/// The pause before the next attempt.
const OPEN_RETRY_DELAY: std::time::Duration = std::time::Duration::from_millis(20);

/// A task's state for reading, or None if it never finished its first
/// open (and so never committed anything). Works while the task's own
/// process runs it: an open that meets a file removed meanwhile lists the
/// files again.
pub(crate) fn open_committed(dir: &Path) -> Result<Option<TaskState>, RuntimeError> {
    let mut attempt = 1;
    loop {
        match TaskState::open_read_only(dir) {
            Ok(state) => return Ok(Some(state)),
            Err(StateError::NeverOpened(_)) => return Ok(None),
            Err(_) if attempt < OPEN_ATTEMPTS => {
                attempt += 1;
                std::thread::sleep(OPEN_RETRY_DELAY);
            }
            Err(error) => return Err(error.into()),
        }
    }
}
