//! A memory-mapped file of fixed-size entries, the storage under
//! [`OffsetIndex`](super::OffsetIndex) and [`TimeIndex`](super::TimeIndex).
//!
//! While its segment is active the file is pre-sized to the configured
//! maximum (a sparse file) so entries can be appended through the map without
//! remapping; sealing trims it to the entries written. The number of valid
//! entries lives in memory; after a crash the file is not trusted (see
//! `recovery`). Not thread-safe on its own: the owning partition serializes
//! access.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use super::LogError;
use super::error::IoContext;

pub(crate) struct IndexFile {
    path: PathBuf,
    file: File,
    map: Option<MmapMut>,
    entry_bytes: usize,
    entries: usize,
    capacity: usize,
}

impl IndexFile {
    /// Opens or creates the file. Existing content is taken as entries (the
    /// caller validates them); a length that is not a whole number of entries
    /// is reported as `Err(Some(len))` through [`IndexFile::open_checked`].
    pub fn open(path: &Path, entry_bytes: usize, capacity_bytes: u64) -> Result<Self, LogError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .context(|| format!("opening index {}", path.display()))?;
        let len = file
            .metadata()
            .context(|| format!("reading size of {}", path.display()))?
            .len();
        let entries = usize::try_from(len).unwrap_or(usize::MAX) / entry_bytes;
        let mut index = Self {
            path: path.to_path_buf(),
            file,
            map: None,
            entry_bytes,
            entries,
            capacity: 0,
        };
        if len % entry_bytes as u64 != 0 {
            // A partial entry: the caller rebuilds the index from the log.
            index.entries = 0;
        }
        index.resize(capacity_bytes.max(len))?;
        Ok(index)
    }

    /// Whether the file on disk held a whole number of entries when opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_full(&self) -> bool {
        self.entries >= self.capacity
    }

    pub fn entry(&self, i: usize) -> &[u8] {
        debug_assert!(i < self.entries);
        let map = self.map.as_ref().expect("an index with entries is mapped");
        &map[i * self.entry_bytes..(i + 1) * self.entry_bytes]
    }

    /// Appends one entry; the caller checks `is_full` first.
    pub fn push(&mut self, entry: &[u8]) {
        assert_eq!(entry.len(), self.entry_bytes);
        assert!(!self.is_full(), "index {} is full", self.path.display());
        let at = self.entries * self.entry_bytes;
        let map = self.map.as_mut().expect("an index with capacity is mapped");
        map[at..at + self.entry_bytes].copy_from_slice(entry);
        self.entries += 1;
    }

    /// Forgets every entry from `n` on.
    pub fn truncate(&mut self, n: usize) {
        self.entries = self.entries.min(n);
    }

    /// Sets the file to exactly the written entries and maps only those.
    pub fn seal(&mut self) -> Result<(), LogError> {
        let len = (self.entries * self.entry_bytes) as u64;
        self.resize(len)?;
        self.flush()
    }

    /// Grows the file back to `capacity_bytes` so more entries fit.
    pub fn unseal(&mut self, capacity_bytes: u64) -> Result<(), LogError> {
        let len = (self.entries * self.entry_bytes) as u64;
        self.resize(capacity_bytes.max(len))
    }

    /// Writes the mapped entries back to the file.
    pub fn flush(&self) -> Result<(), LogError> {
        if let Some(map) = &self.map {
            map.flush()
                .context(|| format!("flushing index {}", self.path.display()))?;
        }
        Ok(())
    }

    fn resize(&mut self, len: u64) -> Result<(), LogError> {
        let len = len - len % self.entry_bytes as u64;
        self.map = None;
        self.file
            .set_len(len)
            .context(|| format!("resizing index {} to {len} bytes", self.path.display()))?;
        self.capacity = usize::try_from(len).unwrap_or(usize::MAX) / self.entry_bytes;
        if len > 0 {
            // SAFETY: the file is owned by this partition's segment and only
            // written through this map; nothing truncates it while mapped
            // (resize drops the map first).
            let map = unsafe { MmapMut::map_mut(&self.file) }
                .context(|| format!("mapping index {}", self.path.display()))?;
            self.map = Some(map);
        }
        Ok(())
    }

    /// Deletes the file.
    pub fn delete(self) -> Result<(), LogError> {
        let path = self.path.clone();
        drop(self);
        remove_if_exists(&path)
    }
}

pub(crate) fn remove_if_exists(path: &Path) -> Result<(), LogError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(LogError::io(format!("deleting {}", path.display()), e))
        }
        _ => Ok(()),
    }
}
