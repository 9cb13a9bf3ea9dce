//! The sparse time index of one segment: `<base offset>.timeindex`.
//!
//! ```text
//! entry (12 bytes, big-endian)
//!   0  8  timestamp        i64   largest record timestamp in the segment up to here
//!   8  4  relative offset  u32   last offset of the batch where that was reached
//! ```
//!
//! Entry (T, L) promises: every record at an offset ≤ L in this segment has
//! timestamp ≤ T. Entries strictly increase in T, so to find the first record
//! with timestamp ≥ ts a reader takes the last entry with T < ts and scans
//! from offset L + 1. Sealing appends a final entry for the segment's largest
//! timestamp, which is how retention learns a segment's age without reading
//! it. Derived data, checked and rebuilt like the offset index.

use std::path::Path;

use super::LogError;
use super::index_file::IndexFile;
use super::storage::Disk;

const ENTRY_BYTES: usize = 12;

pub struct TimeIndex {
    file: IndexFile,
    base_offset: i64,
}

impl TimeIndex {
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

    /// Entry `i` as (timestamp, absolute offset).
    pub fn entry(&self, i: usize) -> (i64, i64) {
        let raw = self.file.entry(i);
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&raw[..8]);
        let relative = u32::from_be_bytes([raw[8], raw[9], raw[10], raw[11]]);
        (
            i64::from_be_bytes(ts),
            self.base_offset + i64::from(relative),
        )
    }

    pub fn last(&self) -> Option<(i64, i64)> {
        self.len().checked_sub(1).map(|i| self.entry(i))
    }

    /// Appends (timestamp, offset) if the timestamp is newer than the last
    /// entry's; older timestamps add nothing.
    pub fn maybe_push(&mut self, timestamp: i64, offset: i64) {
        // Callers reserve room first; a full index just stops growing (and
        // the segment rolls).
        if self.last().is_some_and(|(t, _)| t >= timestamp) || self.is_full() {
            return;
        }
        let relative =
            u32::try_from(offset - self.base_offset).expect("segments roll before u32 offsets");
        let mut entry = [0u8; ENTRY_BYTES];
        entry[..8].copy_from_slice(&timestamp.to_be_bytes());
        entry[8..].copy_from_slice(&relative.to_be_bytes());
        self.file.push(&entry);
    }

    /// The last entry with timestamp < `timestamp`.
    pub fn lookup_before(&self, timestamp: i64) -> Option<(i64, i64)> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.entry(mid).0 < timestamp {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1).map(|i| self.entry(i))
    }

    /// Checks that timestamps strictly increase and offsets do not decrease
    /// and stay below `next_offset`.
    pub fn check(&self, next_offset: i64) -> Result<(), String> {
        let mut previous: Option<(i64, i64)> = None;
        for i in 0..self.len() {
            let (ts, offset) = self.entry(i);
            let bad_order = previous.is_some_and(|(pt, po)| ts <= pt || offset < po);
            if bad_order || offset >= next_offset {
                return Err(format!("entry {i} ({ts}, {offset}) is out of order"));
            }
            previous = Some((ts, offset));
        }
        Ok(())
    }

    pub fn clear(&mut self) {
        self.file.truncate(0);
    }

    /// Drops every entry for offsets ≥ `offset`.
    pub fn truncate_from_offset(&mut self, offset: i64) {
        let keep = (0..self.len())
            .take_while(|&i| self.entry(i).1 < offset)
            .count();
        self.file.truncate(keep);
    }

    pub(crate) fn seal(&mut self) -> Result<(), LogError> {
        self.file.seal()
    }

    pub(crate) fn unseal(&mut self, max_bytes: u64) {
        self.file.unseal(max_bytes);
    }

    /// Records the segment's final largest timestamp, even past the maximum
    /// size, so that a reopened segment knows its age.
    pub(crate) fn push_final(&mut self, timestamp: i64, offset: i64) -> Result<(), LogError> {
        if self.last().is_some_and(|(t, _)| t >= timestamp) {
            return Ok(());
        }
        self.file.reserve_final()?;
        self.maybe_push(timestamp, offset);
        Ok(())
    }

    /// Makes room for `additional` entries ahead of an append.
    pub fn reserve(&mut self, additional: usize) -> Result<(), LogError> {
        self.file.reserve(additional)
    }

    pub(crate) fn delete(self) -> Result<(), LogError> {
        self.file.delete()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_before_returns_the_last_older_entry() {
        let dir = tempfile::tempdir().unwrap();
        let mut index =
            TimeIndex::open(&Disk::os(), &dir.path().join("0.timeindex"), 0, 1200).unwrap();
        index.reserve(3).unwrap();
        index.maybe_push(100, 9);
        index.maybe_push(90, 12); // older: ignored
        index.maybe_push(200, 19);
        assert_eq!(index.len(), 2);
        assert_eq!(index.lookup_before(100), None);
        assert_eq!(index.lookup_before(101), Some((100, 9)));
        assert_eq!(index.lookup_before(1_000), Some((200, 19)));
        index.check(20).unwrap();
        assert!(index.check(15).is_err());
    }
}
