//! The sparse offset index of one segment: `<base offset>.index`.
//!
//! ```text
//! entry (8 bytes, big-endian)
//!   0  4  relative offset  u32   base offset of a batch, minus the segment's base offset
//!   4  4  position         u32   byte position of that batch in the .log file
//! ```
//!
//! An entry is added for the first batch that starts at least
//! `index.interval.bytes` after the previous entry, so position 0 is never
//! indexed and entries strictly increase in both fields. A lookup returns the
//! last entry at or below an offset; the reader then scans batch headers
//! forward from there: O(log n) plus at most one interval of scanning.
//!
//! The file is derived data: after an unclean shutdown it is rebuilt from the
//! log, and on every open its entries are checked (increasing, inside the
//! log file) and it is rebuilt if they are not.

use std::path::Path;

use super::LogError;
use super::index_file::IndexFile;
use super::storage::Disk;

const ENTRY_BYTES: usize = 8;

pub struct OffsetIndex {
    file: IndexFile,
    base_offset: i64,
}

impl OffsetIndex {
    pub fn open(
        disk: &Disk,
        path: &Path,
        base_offset: i64,
        max_bytes: u64,
    ) -> Result<Self, LogError> {
        Ok(Self {
            file: IndexFile::open(disk, path, ENTRY_BYTES, max_bytes)?,
            base_offset,
        })
    }

    pub fn len(&self) -> usize {
        self.file.len()
    }

    pub fn is_empty(&self) -> bool {
        self.file.len() == 0
    }

    pub fn is_full(&self) -> bool {
        self.file.is_full()
    }

    /// Entry `i` as (absolute offset, position).
    pub fn entry(&self, i: usize) -> (i64, u64) {
        let raw = self.file.entry(i);
        let relative = u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]);
        let position = u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]]);
        (self.base_offset + i64::from(relative), u64::from(position))
    }

    /// Records that the batch starting at `offset` lies at `position`. Room
    /// must have been reserved.
    pub fn push(&mut self, offset: i64, position: u64) {
        let relative =
            u32::try_from(offset - self.base_offset).expect("segments roll before u32 offsets");
        let position = u32::try_from(position).expect("segments roll before 4 GiB");
        if let Some(last) = self.len().checked_sub(1).map(|i| self.entry(i)) {
            assert!(
                offset > last.0 && u64::from(position) > last.1,
                "index entries must increase"
            );
        }
        let mut entry = [0u8; ENTRY_BYTES];
        entry[..4].copy_from_slice(&relative.to_be_bytes());
        entry[4..].copy_from_slice(&position.to_be_bytes());
        self.file.push(&entry);
    }

    /// The last entry with offset ≤ `offset`, if any.
    pub fn lookup(&self, offset: i64) -> Option<(i64, u64)> {
        let n = self.partition_point(|(o, _)| o <= offset);
        n.checked_sub(1).map(|i| self.entry(i))
    }

    /// The last entry with position ≤ `position`, if any.
    pub fn lookup_position(&self, position: u64) -> Option<(i64, u64)> {
        let n = self.partition_point(|(_, p)| p <= position);
        n.checked_sub(1).map(|i| self.entry(i))
    }

    fn partition_point(&self, below: impl Fn((i64, u64)) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if below(self.entry(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Checks that entries strictly increase and point inside a log of
    /// `log_bytes`. A failure means the file must be rebuilt.
    pub fn check(&self, log_bytes: u64) -> Result<(), String> {
        let mut previous = (self.base_offset - 1, 0u64);
        for i in 0..self.len() {
            let (offset, position) = self.entry(i);
            if offset <= previous.0 || position <= previous.1 || position >= log_bytes {
                return Err(format!(
                    "entry {i} ({offset}, {position}) does not follow ({}, {}) inside {log_bytes} bytes",
                    previous.0, previous.1
                ));
            }
            previous = (offset, position);
        }
        Ok(())
    }

    /// Drops every entry for offsets ≥ `offset`.
    pub fn truncate_from_offset(&mut self, offset: i64) {
        let n = self.partition_point(|(o, _)| o < offset);
        self.file.truncate(n);
    }

    pub fn clear(&mut self) {
        self.file.truncate(0);
    }

    pub(crate) fn seal(&mut self) -> Result<(), LogError> {
        self.file.seal()
    }

    pub(crate) fn unseal(&mut self, max_bytes: u64) {
        self.file.unseal(max_bytes);
    }

    /// Makes room for `additional` entries ahead of an append.
    pub fn reserve(&mut self, additional: usize) -> Result<(), LogError> {
        self.file.reserve(additional)
    }

    pub(crate) fn delete(self) -> Result<(), LogError> {
        self.file.delete()
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_finds_the_last_entry_at_or_below() {
        let dir = tempfile::tempdir().unwrap();
        let mut index =
            OffsetIndex::open(&Disk::os(), &dir.path().join("0.index"), 100, 1024).unwrap();
        index.reserve(50).unwrap();
        assert_eq!(index.lookup(150), None);
        for i in 1..=50 {
            index.push(100 + i * 10, i as u64 * 4096);
        }
        assert_eq!(index.lookup(105), None);
        assert_eq!(index.lookup(110), Some((110, 4096)));
        assert_eq!(index.lookup(119), Some((110, 4096)));
        assert_eq!(index.lookup(10_000), Some((600, 50 * 4096)));
        assert_eq!(index.lookup_position(4096 * 3 + 1), Some((130, 4096 * 3)));
        index.check(1 << 30).unwrap();
        assert!(index.check(4096 * 10).is_err());
        index.truncate_from_offset(130);
        assert_eq!(index.len(), 2);
    }

    #[test]
    fn sealed_index_reopens_with_its_entries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        let mut index = OffsetIndex::open(&Disk::os(), &path, 0, 1024).unwrap();
        index.reserve(2).unwrap();
        index.push(5, 4096);
        index.push(9, 9000);
        index.seal().unwrap();
        drop(index);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 16);
        let index = OffsetIndex::open(&Disk::os(), &path, 0, 0).unwrap();
        assert_eq!((index.len(), index.entry(1)), (2, (9, 9000)));
    }

    #[test]
    fn a_zero_filled_index_fails_its_check() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        std::fs::write(&path, [0u8; 64]).unwrap();
        let index = OffsetIndex::open(&Disk::os(), &path, 0, 0).unwrap();
        assert!(index.check(1 << 20).is_err());
    }
}
