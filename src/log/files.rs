//! Small file-system helpers shared by the log: listing, removing and
//! syncing directories, each error naming the path; vectored positional
//! writes.

use std::fs::File;
use std::io::IoSlice;
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

/// Replaces `path` with `bytes` durably and whole: written to `tmp` (in the
/// same directory), fsynced, renamed over `path`, the directory fsynced.
pub(crate) fn replace_durably(path: &Path, tmp: &Path, bytes: &[u8]) -> Result<(), LogError> {
    std::fs::write(tmp, bytes)
        .and_then(|()| File::open(tmp)?.sync_all())
        .and_then(|()| std::fs::rename(tmp, path))
        .context(|| format!("writing {}", path.display()))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// fsync of a directory, so a created or removed file's name is durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .context(|| format!("fsync of directory {}", dir.display()))
}

/// Reads a JSON file of at most `max_bytes` (its size is checked before
/// anything is read), naming the path in every error.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
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

/// The most iovecs one `pwritev` takes (Linux's IOV_MAX).
const IOVECS_PER_WRITE: usize = 1024;

/// Writes every byte of `slices`, in order, at `offset` of `file`: one
/// `pwritev` per 1024 slices, short writes and interrupts retried. Lets a
/// caller write bytes it does not own beside small replacements (a batch's
/// assigned baseOffset) without first copying them into one buffer.
pub(crate) fn write_all_vectored_at(
    file: &File,
    mut slices: &mut [IoSlice<'_>],
    mut offset: u64,
) -> std::io::Result<()> {
    while !slices.is_empty() {
        let chunk = slices.len().min(IOVECS_PER_WRITE);
        let at = i64::try_from(offset).map_err(std::io::Error::other)?;
        match nix::sys::uio::pwritev(file, &slices[..chunk], at) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(written) => {
                offset += written as u64;
                IoSlice::advance_slices(&mut slices, written);
            }
            Err(nix::errno::Errno::EINTR) => {}
            Err(errno) => return Err(errno.into()),
        }
    }
    Ok(())
}
