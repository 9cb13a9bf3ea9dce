//! `rebuild --from-checkpoint`: a task's rebuild seeded from the live
//! task's newest checkpoint (table files hard-linked: they never change;
//! the rest copied), built aside and renamed into place, so a cut copy is
//! never taken for a state.

use std::path::Path;

use strata_log::storage::{Disk, OpenMode};

use crate::error::RuntimeError;
use crate::layout::{self, checkpoints};
use crate::topology::ProcessorSpec;

/// Starts a task's rebuild from the live task's newest checkpoint: its
/// table files hard-linked (they never change), the rest copied.
pub(super) fn seed_from_checkpoint(
    root: &Path,
    spec: &ProcessorSpec,
    partition: i32,
    rebuilt: &Path,
) -> Result<(), RuntimeError> {
    let dir = layout::checkpoint_dir(root, &spec.name, partition);
    let io = |context: String| move |error| RuntimeError::Io { context, error };
    let newest = checkpoints(&dir)
        .map_err(io(format!("listing {}", dir.display())))?
        .pop()
        .ok_or_else(|| RuntimeError::NoCheckpoint {
            task: format!("{}/{partition}", spec.name),
            wanted: "to start from".into(),
        })?;
    // Removals, renames and syncs go through the log's storage calls, the
    // one place that syncs.
    let disk = Disk::os();
    if rebuilt.exists() {
        disk.remove_dir_all(rebuilt)?;
    }
    // Copied aside and renamed into place: a cut copy is never taken for a
    // state.
    let seeding = layout::beside(rebuilt, ".seeding");
    if seeding.exists() {
        disk.remove_dir_all(&seeding)?;
    }
    disk.create_dir_all(&seeding)?;
    let files = layout::copied_files(&newest.1, &seeding)
        .map_err(io(format!("listing {}", newest.1.display())))?;
    for (from, to) in files {
        let linked =
            from.extension().is_some_and(|e| e == "sst") && std::fs::hard_link(&from, &to).is_ok();
        // A linked table file is the checkpoint's, synced when it was
        // made; a copy is new and synced here.
        if !linked {
            std::fs::copy(&from, &to).map_err(io(format!("copying {}", from.display())))?;
            let copy = disk.open(&to, OpenMode::Existing, "syncing")?;
            disk.sync(&copy, &to)?;
        }
    }
    disk.sync_dir(&seeding)?;
    disk.rename(&seeding, rebuilt)?;
    if let Some(parent) = rebuilt.parent() {
        disk.sync_dir(parent)?;
    }
    Ok(())
}
