//! The entries of a restore, held in log order until they are written.
//!
//! A changelog's records come in log order and in no key order, so a
//! RocksDB write of them searches the memtable once per record: the cost
//! of a large restore. Held here instead, a large run of them is sorted
//! once, cut to the latest entry per key (a later record of a key
//! replaces an earlier one, a tombstone included), and written as one
//! sorted table file RocksDB takes in whole (see [`Restoring`]).
//!
//! ```text
//! bytes:   key₀ value₀ key₁ value₁ …      keys and values back to back
//! entries: (key prefix, start, key length, value length or TOMBSTONE)
//!          per record, in log order
//! ```
//!
//! [`Restoring`]: super::Restoring

/// A value length that stands for a tombstone.
const TOMBSTONE: u32 = u32::MAX;

/// Most bytes held (keys and values): a run is written before it grows past
/// this, so an entry's start and lengths fit in `u32`.
pub(super) const HELD_BYTES_MAX: usize = 1 << 31;

#[derive(Clone, Copy)]
struct Entry {
    /// The key's first 8 bytes (zero-padded) as a big-endian number: most
    /// comparisons of a sort end on it, without reading the bytes.
    prefix: u64,
    start: u32,
    key_len: u32,
    value_len: u32,
}

#[derive(Default)]
pub(super) struct RestoreBuffer {
    bytes: Vec<u8>,
    entries: Vec<Entry>,
}

impl RestoreBuffer {
    /// Holds a record: the key's value, or its deletion (`None`). The
    /// caller writes the run out before it reaches [`HELD_BYTES_MAX`].
    pub fn push(&mut self, key: &[u8], value: Option<&[u8]>) {
        let added = key.len() + value.map_or(0, <[u8]>::len);
        assert!(
            self.bytes.len() + added <= HELD_BYTES_MAX,
            "a restore run is written before it holds {HELD_BYTES_MAX} bytes"
        );
        let start = self.bytes.len() as u32;
        self.bytes.extend_from_slice(key);
        let value_len = match value {
            Some(value) => {
                self.bytes.extend_from_slice(value);
                value.len() as u32
            }
            None => TOMBSTONE,
        };
        let mut head = [0u8; 8];
        let n = key.len().min(8);
        head[..n].copy_from_slice(&key[..n]);
        self.entries.push(Entry {
            prefix: u64::from_be_bytes(head),
            start,
            key_len: key.len() as u32,
            value_len,
        });
    }

    /// Bytes held, keys and values, plus a fixed cost per entry.
    pub fn size(&self) -> usize {
        self.bytes.len() + self.entries.len() * std::mem::size_of::<Entry>()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The held entries in log order.
    pub fn in_log_order(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.entries.iter().map(|e| self.entry(e))
    }

    /// The latest entry of each key, in key order: what the run leaves.
    pub fn latest_by_key(&mut self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        // Stable: entries of one key stay in log order, the latest last.
        let bytes = &self.bytes;
        (self.entries).sort_by(|a, b| compare_keys(bytes, a, b));
        let this = &*self;
        let entries = &this.entries;
        (0..entries.len())
            .filter(move |&i| {
                (entries.get(i + 1)).is_none_or(|next| {
                    compare_keys(&this.bytes, next, &entries[i]) != std::cmp::Ordering::Equal
                })
            })
            .map(move |i| this.entry(&entries[i]))
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.entries.clear();
    }

    fn entry(&self, entry: &Entry) -> (&[u8], Option<&[u8]>) {
        let start = entry.start as usize;
        let key_end = start + entry.key_len as usize;
        let key = &self.bytes[start..key_end];
        let value = (entry.value_len != TOMBSTONE)
            .then(|| &self.bytes[key_end..key_end + entry.value_len as usize]);
        (key, value)
    }
}

fn key_of<'b>(bytes: &'b [u8], entry: &Entry) -> &'b [u8] {
    &bytes[entry.start as usize..][..entry.key_len as usize]
}

/// Two held entries' keys in byte order, read from `bytes` only when their
/// prefixes do not settle it.
fn compare_keys(bytes: &[u8], a: &Entry, b: &Entry) -> std::cmp::Ordering {
    (a.prefix.cmp(&b.prefix)).then_with(|| {
        if a.key_len <= 8 && b.key_len <= 8 {
            // The prefixes are the keys, zero-padded: of two equal ones,
            // the shorter key is the smaller.
            a.key_len.cmp(&b.key_len)
        } else {
            key_of(bytes, a).cmp(key_of(bytes, b))
        }
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::RestoreBuffer;

    proptest! {
        /// The latest entry per key, in key order, is what applying the
        /// records one by one in log order leaves (keys around the 8 bytes
        /// of the prefix, zero bytes beside the padding).
        #[test]
        fn latest_by_key_is_the_log_applied_in_order(
            records in proptest::collection::vec(
                (proptest::collection::vec(0u8..3, 0..12),
                 proptest::option::of(proptest::collection::vec(any::<u8>(), 0..3))),
                0..200,
            )
        ) {
            let mut buffer = RestoreBuffer::default();
            let mut applied: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
            for (key, value) in &records {
                buffer.push(key, value.as_deref());
                applied.insert(key.clone(), value.clone());
            }
            let logged: Vec<_> = buffer.in_log_order()
                .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                .collect();
            prop_assert_eq!(logged, records.clone());
            let latest: Vec<_> = buffer.latest_by_key()
                .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                .collect();
            prop_assert_eq!(latest, applied.into_iter().collect::<Vec<_>>());
        }
    }
}
