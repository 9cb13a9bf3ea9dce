//! [`SpillSlab`]: the keys and values a [`SlotTable`] entry is too short
//! for, each in a cache line of its own when it fits one.
//!
//! Why cells and not a `Vec` per key: a get over a state larger than the
//! CPU's caches pays for every line it touches first. With a buffer per
//! key, a spilled slot cost two dependent misses past its entry (the
//! slab's element, then the buffer it points to); in the join's benchmark
//! (100,000 table rows of 25 bytes) those two were about 40% of the task's
//! time. A cell holds up to [`CELL_BYTES`] of key and value itself, so a
//! spilled slot is one line past its entry, and one the task can ask for
//! ahead of time ([`SlotTable::prefetch_spilled`]). Longer ones keep a
//! buffer of their own. With both, the join's benchmark went from 1.15 M
//! to 1.97 M records/s (release, one run each).
//!
//! [`SlotTable`]: super::slot_table::SlotTable
//! [`SlotTable::prefetch_spilled`]: super::slot_table::SlotTable::prefetch_spilled

use super::cache_line;

/// Key and value bytes a cell holds itself.
pub(super) const CELL_BYTES: usize = 48;

#[repr(C, align(64))]
struct Cell {
    key_len: u32,
    bytes: CellBytes,
}

const _: () = assert!(
    std::mem::size_of::<Cell>() == 64,
    "a cell is one cache line"
);

enum CellBytes {
    /// The first `len` bytes: the key, then the value.
    Inline { len: u8, bytes: [u8; CELL_BYTES] },
    /// The key, then the value.
    Heap(Vec<u8>),
}

impl CellBytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            Self::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Self::Heap(bytes) => bytes,
        }
    }
}

/// A free cell's `key_len`: no key is that long (keys are shorter than
/// 4 GiB), and a read of a free cell is caught in debug builds.
const FREED: u32 = u32::MAX;

const EMPTY: CellBytes = CellBytes::Inline {
    len: 0,
    bytes: [0; CELL_BYTES],
};

/// Cells by index; a freed cell's index is reused before the slab grows.
#[derive(Default)]
pub(super) struct SpillSlab {
    cells: Vec<Cell>,
    free: Vec<u32>,
}

impl SpillSlab {
    /// Holds `key` then `value`, in the cell at `reused` when given (a
    /// long one keeps its buffer's capacity), else in a free or new cell;
    /// returns the cell's index.
    pub fn put(&mut self, key: &[u8], value: &[u8], reused: Option<u32>) -> u32 {
        let index = match reused.or_else(|| self.free.pop()) {
            Some(index) => index,
            None => {
                self.cells.push(Cell {
                    key_len: 0,
                    bytes: EMPTY,
                });
                u32::try_from(self.cells.len() - 1).expect("fewer than 2^32 spilled slots")
            }
        };
        let cell = &mut self.cells[index as usize];
        cell.key_len = u32::try_from(key.len()).expect("a key shorter than 4 GiB");
        let len = key.len() + value.len();
        if len <= CELL_BYTES {
            let mut bytes = [0; CELL_BYTES];
            bytes[..key.len()].copy_from_slice(key);
            bytes[key.len()..len].copy_from_slice(value);
            let len = len as u8;
            cell.bytes = CellBytes::Inline { len, bytes };
        } else {
            if !matches!(cell.bytes, CellBytes::Heap(_)) {
                cell.bytes = CellBytes::Heap(Vec::with_capacity(len));
            }
            let CellBytes::Heap(buffer) = &mut cell.bytes else {
                unreachable!("made a heap cell above");
            };
            buffer.clear();
            buffer.extend_from_slice(key);
            buffer.extend_from_slice(value);
        }
        index
    }

    /// The key and the value held at `index`.
    pub fn get(&self, index: u32) -> (&[u8], &[u8]) {
        let cell = &self.cells[index as usize];
        debug_assert_ne!(cell.key_len, FREED, "a freed cell read");
        cell.bytes.as_slice().split_at(cell.key_len as usize)
    }

    /// Frees the cell at `index` (and its buffer, if it has one).
    pub fn free(&mut self, index: u32) {
        let cell = &mut self.cells[index as usize];
        debug_assert_ne!(cell.key_len, FREED, "a cell freed twice");
        cell.key_len = FREED;
        cell.bytes = EMPTY;
        self.free.push(index);
    }

    /// Asks the CPU to bring the cell at `index` into its cache.
    pub fn prefetch(&self, index: u32) {
        if let Some(cell) = self.cells.get(index as usize) {
            cache_line::prefetch(cell);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_hold_short_and_long_slots_and_are_reused_once_freed() {
        let mut slab = SpillSlab::default();
        let short = slab.put(b"key", &[1; CELL_BYTES - 3], None);
        let long = slab.put(b"key", &[2; CELL_BYTES], None);
        assert_eq!(slab.get(short), (&b"key"[..], &[1; CELL_BYTES - 3][..]));
        assert_eq!(slab.get(long), (&b"key"[..], &[2; CELL_BYTES][..]));

        // Replaced in place: long over short and short over long.
        assert_eq!(slab.put(b"k", &[3; 100], Some(short)), short);
        assert_eq!(slab.put(b"", b"", Some(long)), long);
        assert_eq!(slab.get(short), (&b"k"[..], &[3; 100][..]));
        assert_eq!(slab.get(long), (&b""[..], &b""[..]));

        slab.free(short);
        assert_eq!(slab.put(b"again", b"v", None), short);
        assert_eq!(slab.get(short), (&b"again"[..], &b"v"[..]));
        assert_eq!(slab.put(b"new", b"v", None), 2);
    }
}
