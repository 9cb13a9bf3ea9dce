//! The seam between the log and the file system: every call that changes
//! what is on disk (creating, writing, truncating, syncing, renaming and
//! removing files and directories) goes through a [`Storage`], reached
//! through a [`Disk`] handle that adds the log's error context.
//!
//! Reads do not: the log reads, maps and `sendfile`s the real files that
//! [`Storage::open`] returns, so the fetch path is the same whatever the
//! storage. Two storages exist:
//! - [`Disk::os`], the operating system's file system, which the log runs
//!   on;
//! - [`PowerLoss`], the same file system with a record of what each fsync
//!   made durable, which can "lose power" and rebuild the directory as a
//!   machine would find it after a crash. Tests use it to prove that every
//!   acknowledged write survives, which a killed process alone cannot show
//!   (its page cache survives it).

mod appender;
mod os;
mod power_loss;

use std::fmt;
use std::fs::File;
use std::io::{self, IoSlice};
use std::path::Path;
use std::sync::Arc;

use memmap2::MmapMut;

use super::LogError;
use super::error::IoContext;

pub(crate) use appender::Appender;
pub use os::Os;
pub use power_loss::{PowerLoss, Restored};

/// How [`Storage::open`] treats an existing or missing file. Files are
/// always opened for reading and writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// The file must exist.
    Existing,
    /// Created empty if missing; kept as it is otherwise.
    Create,
    /// Created empty; fails if the file exists.
    CreateNew,
    /// Created if missing, emptied if not.
    Truncate,
}

/// What the log asks of a file system, one call per durable effect.
pub trait Storage: Send + Sync + fmt::Debug {
    /// Opens `path` for reading and writing.
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<File>;
    /// Writes every byte of `slices`, in order, at `offset`.
    fn write_at(&self, file: &File, slices: &mut [IoSlice<'_>], offset: u64) -> io::Result<()>;
    /// Cuts or extends (with zeros) the file to `len` bytes.
    fn set_len(&self, file: &File, len: u64) -> io::Result<()>;
    /// Allocates disk blocks for `offset..offset + len` (extending the file
    /// with zeros if it is shorter), so writes there cannot meet a full disk.
    fn allocate(&self, file: &File, offset: u64, len: u64) -> io::Result<()>;
    /// fdatasync: the file's data and size are durable when it returns.
    fn sync(&self, file: &File) -> io::Result<()>;
    /// Maps the whole file for reading and writing.
    ///
    /// # Safety
    /// The file must not be shrunk below the map while it lives, nor
    /// written but through the map, and its blocks must be allocated (a
    /// store into a hole on a full disk is a SIGBUS, not an error).
    unsafe fn map_mut(&self, file: &File) -> io::Result<MmapMut>;
    /// Writes back a writable map of `file` and waits for it (msync).
    fn sync_map(&self, file: &File, map: &MmapMut) -> io::Result<()>;
    /// fsync of a directory: names created, renamed or removed in it are
    /// durable when it returns.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    fn remove_dir_all(&self, dir: &Path) -> io::Result<()>;
}

/// The storage a log runs on, shared by its partitions, segments and
/// indexes. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Disk(Arc<dyn Storage>);

impl Default for Disk {
    fn default() -> Self {
        Self::os()
    }
}

impl Disk {
    /// The operating system's file system.
    pub fn os() -> Self {
        Self(Arc::new(Os))
    }

    pub fn new(storage: Arc<dyn Storage>) -> Self {
        Self(storage)
    }

    pub fn storage(&self) -> &dyn Storage {
        self.0.as_ref()
    }

    /// Opens `path`; errors name the file and `what` was being done.
    pub fn open(&self, path: &Path, mode: OpenMode, what: &str) -> Result<File, LogError> {
        self.0
            .open(path, mode)
            .context(|| format!("{what} {}", path.display()))
    }

    /// Writes `bytes` at `offset` of `file`.
    pub(crate) fn write_at(&self, file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_at(file, &mut [IoSlice::new(bytes)], offset)
    }

    /// fdatasync of `file` (at `path`, which errors name).
    pub fn sync(&self, file: &File, path: &Path) -> Result<(), LogError> {
        self.0
            .sync(file)
            .context(|| format!("fdatasync of {}", path.display()))
    }

    /// fsync of a directory, so a created or removed file's name is durable.
    pub fn sync_dir(&self, dir: &Path) -> Result<(), LogError> {
        self.0
            .sync_dir(dir)
            .context(|| format!("fsync of directory {}", dir.display()))
    }

    pub fn create_dir_all(&self, dir: &Path) -> Result<(), LogError> {
        self.0
            .create_dir_all(dir)
            .context(|| format!("creating {}", dir.display()))
    }

    pub fn rename(&self, from: &Path, to: &Path) -> Result<(), LogError> {
        self.0
            .rename(from, to)
            .context(|| format!("renaming {} to {}", from.display(), to.display()))
    }

    pub(crate) fn remove_file(&self, path: &Path) -> Result<(), LogError> {
        self.0
            .remove_file(path)
            .context(|| format!("removing {}", path.display()))
    }

    pub fn remove_dir_all(&self, dir: &Path) -> Result<(), LogError> {
        self.0
            .remove_dir_all(dir)
            .context(|| format!("removing {}", dir.display()))
    }

    /// Removes a file; a file already gone is fine.
    pub fn remove_if_exists(&self, path: &Path) -> Result<(), LogError> {
        match self.0.remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                Err(LogError::io(format!("deleting {}", path.display()), e))
            }
            _ => Ok(()),
        }
    }

    /// Creates `path` (which must not exist) holding `bytes`, fsynced. Its
    /// name is durable once the caller syncs the directory.
    pub(crate) fn write_new(&self, path: &Path, bytes: &[u8]) -> Result<(), LogError> {
        let file = self.open(path, OpenMode::CreateNew, "creating")?;
        self.write_at(&file, bytes, 0)
            .context(|| format!("writing {}", path.display()))?;
        self.sync(&file, path)
    }

    /// Replaces `path` with `bytes` durably and whole: written to `tmp` (in
    /// the same directory), fsynced, renamed over `path`, the directory
    /// fsynced.
    pub fn replace_durably(&self, path: &Path, tmp: &Path, bytes: &[u8]) -> Result<(), LogError> {
        let file = self.open(tmp, OpenMode::Truncate, "writing")?;
        self.write_at(&file, bytes, 0)
            .and_then(|()| self.0.sync(&file))
            .and_then(|()| self.0.rename(tmp, path))
            .context(|| format!("writing {}", path.display()))?;
        self.sync_dir(path.parent().unwrap_or(Path::new(".")))
    }
}
