//! The entries of a restore, held in log order until they are written.
//!
//! A changelog's records come in log order and in no key order, so a
//! RocksDB write of them searches the memtable once per record: the cost
//! of a large restore. Held here instead, a large run of them is cut to
//! the latest entry per key (a later record of a key replaces an earlier
//! one, a tombstone included) through a hash table, the keys left are
//! sorted once, and written as one sorted table file RocksDB takes in
//! whole (see [`Restoring`]).
//!
//! ```text
//! bytes:   key₀ value₀ key₁ value₁ …      keys and values back to back
//! entries: (key prefix, start, key length, value length or TOMBSTONE)
//!          per record, in log order
//! ```
//!
//! [`Restoring`]: super::Restoring

use super::key_words::{INLINE_BYTES, WORDS, hash, padded_words, tag_of};

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

    /// Bytes held, keys and values, plus a fixed cost per entry: its
    /// [`Entry`] and the [`Latest`] a flush makes of it.
    pub fn size(&self) -> usize {
        let per_entry = std::mem::size_of::<Entry>() + std::mem::size_of::<Latest>();
        self.bytes.len() + self.entries.len() * per_entry
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
    /// Two passes: the entries are spread over [`PARTITIONS`] runs by
    /// their key's hash (in log order within each), then each run goes
    /// through an open-addressing table of keys, where a later entry of a
    /// key overwrites the position. A run's table stays in the CPU's
    /// cache; one table for all the keys did not (measured: about 2.5×
    /// the time over a million records of 100,000 keys).
    fn latest_entries(&self) -> Vec<u32> {
        let per_partition = self.entries.len() / PARTITIONS * 5 / 4 + 16;
        let mut partitions: Vec<Vec<Latest>> = (0..PARTITIONS)
            .map(|_| Vec::with_capacity(per_partition))
            .collect();
        for (at, entry) in self.entries.iter().enumerate() {
            let key = LatestKey::of(key_of(&self.bytes, entry));
            partitions[key.partition()].push(Latest { key, at: at as u32 });
        }
        let mut table = LatestTable::default();
        let mut latest = Vec::new();
        for partition in partitions {
            table.clear();
            for Latest { key, at } in partition {
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

/// A key as [`LatestTable`] compares it: its hash tag (never 0), its
/// length and, when it is short, its bytes as words, so the table finds
/// a short key without reading the held bytes (far apart in memory, a
/// cache miss each).
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct LatestKey {
    tag: u32,
    len: u32,
    /// The key when it has at most `INLINE_BYTES`; zero otherwise.
    words: [u64; WORDS],
}

impl LatestKey {
    fn of(key: &[u8]) -> Self {
        let words = match key.len() <= INLINE_BYTES {
            true => padded_words(key),
            false => [0; WORDS],
        };
        Self {
            tag: tag_of(hash(key)),
            len: key.len() as u32,
            words,
        }
    }

    /// Its run in [`RestoreBuffer::latest_entries`]: the tag's top bits.
    fn partition(&self) -> usize {
        (self.tag >> (32 - PARTITION_BITS)) as usize
    }

    /// Whether the key is all in `words`.
    fn inline(&self) -> bool {
        self.len as usize <= INLINE_BYTES
    }
}

/// A slot of [`LatestTable`]: a key (tag 0: an empty slot) and the
/// position of its latest entry.
#[derive(Clone, Copy, Default)]
struct Latest {
    key: LatestKey,
    at: u32,
}

/// Runs (as a power of two) a flush spreads its entries over by hash.
const PARTITION_BITS: u32 = 6;
const PARTITIONS: usize = 1 << PARTITION_BITS;

/// Fewest slots (as a power of two) a [`LatestTable`] starts with.
const LATEST_BITS_MIN: u32 = 6;

/// Keys of one run to their latest entries, kept at most half full
/// (linear probing); a slot's home is its tag's bits below the run's
/// (which every key of the run shares), so growing needs no key again.
struct LatestTable {
    slots: Vec<Latest>,
    bits: u32,
    used: usize,
}

impl Default for LatestTable {
    fn default() -> Self {
        Self {
            slots: vec![Latest::default(); 1 << LATEST_BITS_MIN],
            bits: LATEST_BITS_MIN,
            used: 0,
        }
    }
}

impl LatestTable {
    /// Makes `at` the latest entry of `key`; `same` tells whether a held
    /// position has the key (asked only of a long key whose tag and
    /// length match).
    fn set(&mut self, key: LatestKey, at: u32, same: impl Fn(u32) -> bool) {
        if (self.used + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut home = self.home(key.tag);
        loop {
            let slot = &mut self.slots[home];
            if slot.key.tag == 0 {
                *slot = Latest { key, at };
                self.used += 1;
                return;
            }
            if slot.key == key && (key.inline() || same(slot.at)) {
                slot.at = at;
                return;
            }
            home = (home + 1) & mask;
        }
    }

    fn home(&self, tag: u32) -> usize {
        ((tag << PARTITION_BITS) >> (32 - self.bits)) as usize
    }

    /// Empties the table, keeping its size for the next run.
    fn clear(&mut self) {
        self.slots.fill(Latest::default());
        self.used = 0;
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        self.bits += 1;
        self.slots = vec![Latest::default(); 1 << self.bits];
        let mask = self.slots.len() - 1;
        for slot in old.into_iter().filter(|s| s.key.tag != 0) {
            let mut home = self.home(slot.key.tag);
            while self.slots[home].key.tag != 0 {
                home = (home + 1) & mask;
            }
            self.slots[home] = slot;
        }
    }

    fn positions(&self) -> impl Iterator<Item = u32> {
        let held = self.slots.iter().filter(|s| s.key.tag != 0);
        held.map(|s| s.at)
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

    /// Past a run's first table size (64 slots, half of them used; 5,000
    /// keys make about 78 per run), so the table grows while it holds
    /// keys: each key's latest value survives,
    /// for keys held in the table's slots (short) and keys compared in
    /// the buffer (long, alike in their first 24 bytes).
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
