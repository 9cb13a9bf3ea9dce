//! A memory-mapped file of fixed-size entries, the storage under
//! [`OffsetIndex`](super::OffsetIndex) and [`TimeIndex`](super::TimeIndex).
//!
//! While its segment is active the file grows in steps, each with its disk
//! blocks allocated (`posix_fallocate`), up to the configured maximum;
//! entries are written through the map. Sealing trims it to the entries
//! written. The number of valid
//! entries lives in memory; after a crash the file is not trusted (see
//! `recovery`). Not thread-safe on its own: the owning partition serializes
//! access.

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use super::LogError;
use super::error::IoContext;
use super::storage::{Disk, OpenMode};

pub(crate) struct IndexFile {
    disk: Disk,
    path: PathBuf,
    file: File,
    map: Option<MmapMut>,
    entry_bytes: usize,
    entries: usize,
    /// Entries the file currently has room for (all of it is mapped).
    capacity: usize,
    /// Entries the file may grow to.
    entries_max: usize,
}

/// Entries added to the file at a time: growth is rare, and each step
/// reserves real disk blocks so that writing through the map can never hit
/// a full disk (which would be a SIGBUS, not an error).
const GROW_ENTRIES: usize = 8192;

impl IndexFile {
    /// Opens or creates the file; existing content is taken as entries (the
    /// caller validates them). A length that is not a whole number of
    /// entries yields an empty index, which the caller's checks then rebuild.
    pub fn open(
        disk: &Disk,
        path: &Path,
        entry_bytes: usize,
        max_bytes: u64,
    ) -> Result<Self, LogError> {
        let file = disk.open(path, OpenMode::Create, "opening index")?;
        let len = file
            .metadata()
            .context(|| format!("reading size of {}", path.display()))?
            .len();
        let whole = len % entry_bytes as u64 == 0;
        let entries = if whole {
            usize::try_from(len).unwrap_or(usize::MAX) / entry_bytes
        } else {
            0
        };
        let mut index = Self {
            disk: disk.clone(),
            path: path.to_path_buf(),
            file,
            map: None,
            entry_bytes,
            entries,
            capacity: 0,
            entries_max: 0,
        };
        index.set_max(max_bytes);
        index.resize(entries)?;
        Ok(index)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether the file has reached its maximum size.
    pub fn is_full(&self) -> bool {
        self.entries >= self.entries_max
    }

    pub fn entry(&self, i: usize) -> &[u8] {
        debug_assert!(i < self.entries);
        let map = self.map.as_ref().expect("an index with entries is mapped");
        &map[i * self.entry_bytes..(i + 1) * self.entry_bytes]
    }

    /// Makes room for `additional` more entries (up to the maximum), with disk
    /// blocks allocated, so the pushes that follow cannot fail.
    pub fn reserve(&mut self, additional: usize) -> Result<(), LogError> {
        let needed = (self.entries + additional).min(self.entries_max);
        if needed <= self.capacity {
            return Ok(());
        }
        let target = needed
            .max(self.capacity + GROW_ENTRIES)
            .min(self.entries_max);
        self.resize(target)
    }

    /// Appends one entry into reserved room.
    pub fn push(&mut self, entry: &[u8]) {
        assert_eq!(entry.len(), self.entry_bytes);
        assert!(
            self.entries < self.capacity,
            "index {} has no reserved room",
            self.path.display()
        );
        let at = self.entries * self.entry_bytes;
        let map = self.map.as_mut().expect("an index with capacity is mapped");
        map[at..at + self.entry_bytes].copy_from_slice(entry);
        self.entries += 1;
    }

    /// Makes room for one entry past the maximum: the final entry a sealed
    /// segment must record even when its index filled up.
    pub fn reserve_final(&mut self) -> Result<(), LogError> {
        self.entries_max = self.entries_max.max(self.entries + 1);
        self.reserve(1)
    }

    /// Forgets every entry from `n` on.
    pub fn truncate(&mut self, n: usize) {
        self.entries = self.entries.min(n);
    }

    /// Sets the file to exactly the written entries; no more may be added.
    pub fn seal(&mut self) -> Result<(), LogError> {
        self.entries_max = self.entries;
        self.resize(self.entries)?;
        self.flush()
    }

    /// Lets a sealed index grow again, up to `max_bytes`.
    pub fn unseal(&mut self, max_bytes: u64) {
        self.set_max(max_bytes);
    }

    fn set_max(&mut self, max_bytes: u64) {
        let max = usize::try_from(max_bytes).unwrap_or(usize::MAX) / self.entry_bytes;
        self.entries_max = max.max(self.entries);
    }

    /// Writes the mapped entries back to the file.
    pub fn flush(&self) -> Result<(), LogError> {
        if let Some(map) = &self.map {
            self.disk
                .storage()
                .sync_map(&self.file, map)
                .context(|| format!("flushing index {}", self.path.display()))?;
        }
        Ok(())
    }

    /// Sets the file to `entries` entries and maps all of it. On failure the
    /// index keeps its previous size and map, so it stays readable.
    fn resize(&mut self, entries: usize) -> Result<(), LogError> {
        let old_len = (self.capacity * self.entry_bytes) as u64;
        let len = (entries * self.entry_bytes) as u64;
        if len > old_len {
            // Growing under a live map is safe: its pages stay valid.
            self.grow_file(old_len, len)?;
        } else {
            // Shrinking: no map may cover the bytes being cut.
            self.map = None;
            self.capacity = 0;
            if let Err(error) = self.disk.storage().set_len(&self.file, len) {
                self.remap(old_len)?;
                self.capacity = self.capacity_of(old_len);
                return Err(LogError::io(
                    format!("resizing index {} to {len} bytes", self.path.display()),
                    error,
                ));
            }
        }
        self.remap(len)?;
        self.capacity = entries;
        Ok(())
    }

    fn grow_file(&mut self, old_len: u64, len: u64) -> Result<(), LogError> {
        let storage = self.disk.storage();
        storage
            .set_len(&self.file, len)
            .context(|| format!("resizing index {} to {len} bytes", self.path.display()))?;
        if let Err(error) = storage.allocate(&self.file, old_len, len - old_len) {
            // Give back what was added; the old map never covered it.
            let _ = storage.set_len(&self.file, old_len);
            return Err(LogError::io(
                format!("reserving {len} bytes for index {}", self.path.display()),
                error,
            ));
        }
        Ok(())
    }

    fn remap(&mut self, len: u64) -> Result<(), LogError> {
        if len == 0 {
            self.map = None;
            return Ok(());
        }
        // SAFETY: the file belongs to this segment and is only written
        // through this map; it is never shrunk while mapped (shrinking drops
        // the map first), and its blocks are allocated (`grow_file`), so
        // stores cannot fault on a full disk.
        let map = unsafe { self.disk.storage().map_mut(&self.file) }
            .context(|| format!("mapping index {}", self.path.display()))?;
        self.map = Some(map);
        Ok(())
    }

    fn capacity_of(&self, len: u64) -> usize {
        usize::try_from(len).unwrap_or(usize::MAX) / self.entry_bytes
    }

    /// Deletes the file.
    pub fn delete(self) -> Result<(), LogError> {
        let (disk, path) = (self.disk.clone(), self.path.clone());
        drop(self);
        disk.remove_if_exists(&path)
    }
}
