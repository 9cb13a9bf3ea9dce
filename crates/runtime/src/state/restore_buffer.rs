//! The entries of a restore, held in log order until they are written.
//!
//! A changelog's records come in log order and in no key order, so a
//! RocksDB write of them searches the memtable once per record: the cost
//! of a large restore. Held here instead, a large run of them is cut to
//! the latest entry per key (a later record of a key replaces an earlier
//! one, a tombstone included) through hash tables (see `latest_table`),
//! the keys left are sorted once, and written as one sorted table file
//! RocksDB takes in whole (see [`Restoring`]).
//!
//! ```text
//! bytes:   key₀ value₀ key₁ value₁ …      keys and values back to back
//! entries: (key prefix, start, key length, value length or TOMBSTONE)
//!          per record, in log order
//! ```
//!
//! [`Restoring`]: super::Restoring

use super::latest_table::{BITS_MAX, Latest, LatestKey, LatestTable, PARTITIONS};

/// A value length that stands for a tombstone.
const TOMBSTONE: u32 = u32::MAX;

/// Most bytes held (see [`RestoreBuffer::size`]): a run is written before
/// it grows past this, so an entry's start and lengths, and its position,
/// fit in `u32`.
pub(super) const HELD_BYTES_MAX: usize = 1 << 31;

/// What an entry costs, counted against [`HELD_BYTES_MAX`] (and the
/// caller's smaller limit): its [`Entry`], and what finding the latest
/// entries makes of it while the run is written (its [`Latest`], its tag,
/// its position among the latest). On top, one hash partition's table at
/// a time (at most twice the partition's keys in slots).
const ENTRY_BYTES: usize = size_of::<Entry>() + size_of::<Latest>() + 2 * size_of::<u32>();

// A partition's table (up to twice its entries in slots) fits the slots
// a tag can place, even with every entry of a run in one partition.
const _: () = assert!(2 * (HELD_BYTES_MAX / ENTRY_BYTES) <= 1 << BITS_MAX);

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
            self.size() + added + ENTRY_BYTES <= HELD_BYTES_MAX,
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

    /// Bytes held, keys and values, plus [`ENTRY_BYTES`] per entry.
    pub fn size(&self) -> usize {
        self.bytes.len() + self.entries.len() * ENTRY_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The held entries in log order.
    pub fn in_log_order(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.entries.iter().map(|e| self.entry(e))
    }

    /// The latest entry of each key, in key order: what the run leaves.
    pub fn latest_by_key(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        let mut latest = self.latest_entries();
        // Unstable is enough: no two of them have the same key.
        let (bytes, entries) = (&self.bytes, &self.entries);
        latest.sort_unstable_by(|&a, &b| {
            compare_keys(bytes, &entries[a as usize], &entries[b as usize])
        });
        latest
            .into_iter()
            .map(move |at| self.entry(&self.entries[at as usize]))
    }

    /// The position of each key's latest entry, in no order. A changelog
    /// holds many records per key (one per commit that changed it), so
    /// only the keys left are sorted, not every record.
    ///
    /// The entries are spread over [`PARTITIONS`] hash partitions (in log
    /// order within each: a first pass counts them, a second places them
    /// in one buffer), then each partition goes through a
    /// [`LatestTable`]. A partition's table stays in the CPU's cache; one
    /// table for all the keys did not (measured: about 2.5× the time over
    /// a million records of 100,000 keys).
    fn latest_entries(&self) -> Vec<u32> {
        let mut tags = Vec::with_capacity(self.entries.len());
        let mut counts = [0usize; PARTITIONS];
        for entry in &self.entries {
            let tag = LatestKey::tag_for(key_of(&self.bytes, entry));
            counts[LatestKey::partition(tag)] += 1;
            tags.push(tag);
        }
        let mut next = [0usize; PARTITIONS];
        for p in 1..PARTITIONS {
            next[p] = next[p - 1] + counts[p - 1];
        }
        let starts = next;
        let mut spread = vec![Latest::default(); self.entries.len()];
        for (at, (entry, &tag)) in self.entries.iter().zip(&tags).enumerate() {
            let partition = LatestKey::partition(tag);
            let key = LatestKey::tagged(key_of(&self.bytes, entry), tag);
            spread[next[partition]] = Latest { key, at: at as u32 };
            next[partition] += 1;
        }
        drop(tags);
        let mut table = LatestTable::default();
        let mut latest = Vec::new();
        for (start, end) in starts.into_iter().zip(next) {
            table.clear_for(end - start);
            for &Latest { key, at } in &spread[start..end] {
                let same = |held: u32| self.key_at(held) == self.key_at(at);
                table.set(key, at, same);
            }
            latest.extend(table.positions());
        }
        latest
    }

    fn key_at(&self, at: u32) -> &[u8] {
        key_of(&self.bytes, &self.entries[at as usize])
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
        /// of the prefix and the 24 matched by their words, zero bytes
        /// beside the padding).
        #[test]
        fn latest_by_key_is_the_log_applied_in_order(
            records in proptest::collection::vec(
                (proptest::collection::vec(0u8..3, 0..30),
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

    /// Keys enough that each hash partition's table grows (5,000 keys are
    /// about 78 per partition, past a first table of 64 slots half used):
    /// each key's latest value survives, for short keys (matched by their
    /// words) and long ones (by their bytes).
    #[test]
    fn latest_by_key_keeps_the_last_of_each_key_across_table_growth() {
        let short = |k: u32| format!("key-{k:06}").into_bytes();
        let long = |k: u32| format!("a-long-key-shared-by-the-whole-run-{k:06}").into_bytes();
        for key in [&short as &dyn Fn(u32) -> Vec<u8>, &long] {
            let mut buffer = RestoreBuffer::default();
            for round in 0u8..3 {
                for k in 0..5_000u32 {
                    let value = [round];
                    let deleted = round == 2 && k % 7 == 0;
                    buffer.push(&key(k), (!deleted).then_some(&value[..]));
                }
            }
            let latest: Vec<_> = buffer.latest_by_key().collect();
            assert_eq!(latest.len(), 5_000);
            for (k, (held, value)) in latest.into_iter().enumerate() {
                assert_eq!(held, key(k as u32));
                let expected = (k % 7 != 0).then_some(&[2u8][..]);
                assert_eq!(value, expected, "key {k}");
            }
        }
    }
}
