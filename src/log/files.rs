//! Small file-system helpers shared by the log: listing, removing and
//! syncing directories, each error naming the path.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::LogError;
use super::error::IoContext;

/// The paths of the entries of `dir`.
pub(crate) fn list_dir(dir: &Path) -> Result<Vec<PathBuf>, LogError> {
    std::fs::read_dir(dir)
        .and_then(|entries| entries.map(|entry| entry.map(|e| e.path())).collect())
        .context(|| format!("listing {}", dir.display()))
}

/// Removes a file; a file already gone is fine.
pub(crate) fn remove_if_exists(path: &Path) -> Result<(), LogError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(LogError::io(format!("deleting {}", path.display()), e))
        }
        _ => Ok(()),
    }
}

/// fsync of a directory, so a created or removed file's name is durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .context(|| format!("fsync of directory {}", dir.display()))
}
