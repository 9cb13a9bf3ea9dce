//! A run's dirty slots as bytes: what [`SlotTable::take_dirty`] hands
//! the commit, one entry after another, and [`DirtyEntries`] reads back.
//!
//! An entry: the key's length (u32, little-endian) and the key; then 0 for
//! a delete, or 1, the value's length (u32) and the value. The bytes never
//! leave the process, so they carry no version and no checksum.
//!
//! [`SlotTable::take_dirty`]: super::slot_table::SlotTable::take_dirty

/// Appends an entry for `key` (`value` None: a delete) to `out`.
pub(super) fn push_dirty(out: &mut Vec<u8>, key: &[u8], value: Option<&[u8]>) {
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    match value {
        None => out.push(0),
        Some(value) => {
            out.push(1);
            out.extend_from_slice(&(value.len() as u32).to_le_bytes());
            out.extend_from_slice(value);
        }
    }
}

/// Reads back what [`push_dirty`] wrote: (key, value or None for a
/// delete).
pub(crate) struct DirtyEntries<'a> {
    rest: &'a [u8],
}

impl<'a> DirtyEntries<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        head
    }

    fn length(&mut self) -> usize {
        u32::from_le_bytes(self.take(4).try_into().expect("4 bytes")) as usize
    }
}

impl<'a> Iterator for DirtyEntries<'a> {
    type Item = (&'a [u8], Option<&'a [u8]>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let key_len = self.length();
        let key = self.take(key_len);
        let value = match self.take(1)[0] {
            0 => None,
            _ => {
                let value_len = self.length();
                Some(self.take(value_len))
            }
        };
        Some((key, value))
    }
}
