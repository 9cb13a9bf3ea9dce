//! Putting a cleaned segment in place of the original so that a crash at
//! any moment leaves one of the two, whole, never both and never neither.
//!
//! Files of segment `B` during a clean:
//!
//! 1. `B.log.cleaned` is written and fsynced. Crash: on open the file is
//!    deleted; `B.log` is untouched.
//! 2. Under the partition's write lock, once `B` is known to be still
//!    there as it was read (retention or DeleteRecords may have deleted it
//!    meanwhile, and the cleaned copy must not bring it back), it is
//!    renamed to `B.log.swap` and the directory fsynced: the cleaned file
//!    is complete. From here on open finishes the swap (steps 3–5).
//! 3. The marker `B.compacted` is created (offsets of `B` may have gaps
//!    from now on; the original has none, so it satisfies it too).
//! 4. `B.index` and `B.timeindex` are deleted: they describe the original.
//!    The original without them is rebuilt by a scan, like any segment
//!    whose indexes are missing. The directory is fsynced, so 3 and 4 are
//!    durable before 5.
//! 5. `B.log.swap` is renamed over `B.log` (atomically replacing it), and
//!    the directory fsynced. The new indexes are built by scanning it.
//!
//! Every step is idempotent, so recovery repeats 3–5 whenever a `.swap`
//! file is found beside its `B.log`, whatever step the crash came at. A
//! `.swap` without a `B.log` (a segment deleted after step 2, before a
//! crash) is discarded.

use std::path::{Path, PathBuf};

use crate::LogError;
use crate::files::list_dir;
use crate::segment::{COMPACTED_EXTENSION, file_name};
use crate::storage::{Disk, OpenMode};

const CLEANED_SUFFIX: &str = ".cleaned";
const SWAP_SUFFIX: &str = ".swap";

/// Where the cleaned copy of segment `base_offset` is written (step 1).
pub(crate) fn cleaned_path(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(format!("{}{CLEANED_SUFFIX}", file_name(base_offset, "log")))
}

fn swap_path(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(format!("{}{SWAP_SUFFIX}", file_name(base_offset, "log")))
}

/// Step 2: the fsynced `.cleaned` file becomes the `.swap` file (the
/// caller holds the partition's write lock and has checked that the
/// segment is still there).
pub(crate) fn seal_cleaned(disk: &Disk, dir: &Path, base_offset: i64) -> Result<PathBuf, LogError> {
    let from = cleaned_path(dir, base_offset);
    let to = swap_path(dir, base_offset);
    disk.rename(&from, &to)?;
    disk.sync_dir(dir)?;
    Ok(to)
}

/// Steps 3–5 for segment `base_offset` (the caller holds the partition's
/// write lock, then opens the new segment).
pub(crate) fn install(disk: &Disk, dir: &Path, base_offset: i64) -> Result<(), LogError> {
    let marker = dir.join(file_name(base_offset, COMPACTED_EXTENSION));
    disk.open(&marker, OpenMode::Truncate, "creating")?;
    disk.remove_if_exists(&dir.join(file_name(base_offset, "index")))?;
    disk.remove_if_exists(&dir.join(file_name(base_offset, "timeindex")))?;
    disk.sync_dir(dir)?;
    let from = swap_path(dir, base_offset);
    let to = dir.join(file_name(base_offset, "log"));
    disk.rename(&from, &to)?;
    disk.sync_dir(dir)
}

/// Drops a cleaned file that will not be installed.
pub(crate) fn discard(disk: &Disk, path: &Path) -> Result<(), LogError> {
    disk.remove_if_exists(path)
}

/// At open, before the segments are listed: deletes unfinished `.cleaned`
/// files and finishes the swap of every `.swap` file.
pub(crate) fn recover(disk: &Disk, dir: &Path, partition: &str) -> Result<(), LogError> {
    if !dir.exists() {
        return Ok(());
    }
    let mut changed = false;
    for path in list_dir(dir)? {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.ends_with(CLEANED_SUFFIX) {
            tracing::info!(partition, file = name, "discarding an unfinished clean");
            disk.remove_if_exists(&path)?;
            changed = true;
        } else if let Some(log_name) = name.strip_suffix(SWAP_SUFFIX)
            && let Some(base) = log_name
                .strip_suffix(".log")
                .and_then(|stem| stem.parse::<i64>().ok())
        {
            if dir.join(file_name(base, "log")).exists() {
                tracing::info!(
                    partition,
                    file = name,
                    "finishing the swap of a cleaned segment"
                );
                install(disk, dir, base)?;
            } else {
                tracing::info!(
                    partition,
                    file = name,
                    "discarding the cleaned copy of a deleted segment"
                );
                disk.remove_if_exists(&path)?;
            }
            changed = true;
        }
    }
    if changed {
        disk.sync_dir(dir)?;
    }
    Ok(())
}
