//! The cleaner's map from each key of the dirty section to the offset of
//! its latest record, bounded in memory: when the next segment's keys might
//! not fit, the clean stops at the segment before (the rest waits for the
//! next pass).

use std::collections::HashMap;

/// Bytes an entry costs besides its key (the map's own overhead, roughly).
const ENTRY_OVERHEAD_BYTES: usize = 48;

pub(crate) struct OffsetMap {
    latest: HashMap<Box<[u8]>, i64>,
    bytes: usize,
    bytes_max: usize,
}

impl OffsetMap {
    pub fn new(bytes_max: usize) -> Self {
        Self {
            latest: HashMap::new(),
            bytes: 0,
            bytes_max,
        }
    }

    /// Records `offset` as the latest of `key` (offsets arrive in order).
    pub fn put(&mut self, key: &[u8], offset: i64) {
        match self.latest.get_mut(key) {
            Some(latest) => *latest = offset,
            None => {
                self.bytes += key.len() + ENTRY_OVERHEAD_BYTES;
                self.latest.insert(key.into(), offset);
            }
        }
    }

    /// The offset of the latest record of `key` in the mapped section.
    pub fn latest(&self, key: &[u8]) -> Option<i64> {
        self.latest.get(key).copied()
    }

    /// Whether the map is past its budget.
    pub fn is_full(&self) -> bool {
        self.bytes >= self.bytes_max
    }

    pub fn len(&self) -> usize {
        self.latest.len()
    }
}
