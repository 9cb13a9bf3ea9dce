//! Small file-system reads shared by the log, each error naming the path.
//! (What changes files goes through [`storage`](super::storage).)

use std::path::{Path, PathBuf};

use super::LogError;
use super::error::IoContext;

/// The paths of the entries of `dir`.
pub(crate) fn list_dir(dir: &Path) -> Result<Vec<PathBuf>, LogError> {
    std::fs::read_dir(dir)
        .and_then(|entries| entries.map(|entry| entry.map(|e| e.path())).collect())
        .context(|| format!("listing {}", dir.display()))
}

/// Reads a JSON file of at most `max_bytes` (its size is checked before
/// anything is read), naming the path in every error.
pub fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    max_bytes: u64,
) -> Result<T, LogError> {
    let bad = |reason: String| LogError::BadMetadata {
        path: path.to_path_buf(),
        reason,
    };
    let len = std::fs::metadata(path)
        .context(|| format!("reading {}", path.display()))?
        .len();
    if len > max_bytes {
        return Err(bad(format!(
            "{len} bytes is more than the limit of {max_bytes}"
        )));
    }
    let bytes = std::fs::read(path).context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))
}
