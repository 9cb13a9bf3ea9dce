//! [`LatestTable`]: the position of each key's latest entry among one hash
//! partition of a restore's held entries (see `restore_buffer`), found in
//! one pass in log order: a later entry of a key overwrites the position.
//!
//! A slot holds the key's hash tag (never 0: 0 marks an empty slot), its
//! length and, when it has at most 24 bytes, its bytes as words, so a
//! short key is matched without reading the held bytes (far apart in
//! memory, a cache miss each); a long key whose tag and length match is
//! compared byte for byte by the caller.
//!
//! Open addressing with linear probing, kept at most half full, nothing
//! ever deleted (so every probe ends at an empty slot). A slot's home is
//! its tag's bits below the partition's, which every key of the partition
//! shares, so growing needs no key again.

use super::key_words::{INLINE_BYTES, WORDS, hash, padded_words, tag_of};

/// Hash partitions (as a power of two) a restore's held entries are
/// spread over before their latest entries are found, so that each
/// partition's table stays in the CPU's cache.
pub(super) const PARTITION_BITS: u32 = 6;
pub(super) const PARTITIONS: usize = 1 << PARTITION_BITS;

/// Fewest slots (as a power of two) a table has.
const BITS_MIN: u32 = 6;
/// Most slots (as a power of two): a slot's home is among the tag's bits
/// below the partition's.
pub(super) const BITS_MAX: u32 = 32 - PARTITION_BITS;

/// A key as the table compares it.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct LatestKey {
    tag: u32,
    len: u32,
    /// The key when it has at most `INLINE_BYTES`; zero otherwise.
    words: [u64; WORDS],
}

impl LatestKey {
    /// The key's tag alone (its partition's, and its home's, bits).
    pub fn tag_for(key: &[u8]) -> u32 {
        tag_of(hash(key))
    }

    /// The key with its tag already known (from [`tag_for`](Self::tag_for)).
    pub fn tagged(key: &[u8], tag: u32) -> Self {
        let words = match key.len() <= INLINE_BYTES {
            true => padded_words(key),
            false => [0; WORDS],
        };
        Self {
            tag,
            len: key.len() as u32,
            words,
        }
    }

    /// The hash partition of a key tagged `tag`: the tag's top bits.
    pub fn partition(tag: u32) -> usize {
        (tag >> (32 - PARTITION_BITS)) as usize
    }

    /// Whether the key is all in `words`.
    fn inline(&self) -> bool {
        self.len as usize <= INLINE_BYTES
    }
}

/// A slot: a key (tag 0: an empty slot) and the position of its latest
/// entry.
#[derive(Clone, Copy, Default)]
pub(super) struct Latest {
    pub key: LatestKey,
    pub at: u32,
}

/// The keys of one hash partition to their latest entries.
pub(super) struct LatestTable {
    slots: Vec<Latest>,
    bits: u32,
    used: usize,
}

impl Default for LatestTable {
    fn default() -> Self {
        Self {
            slots: vec![Latest::default(); 1 << BITS_MIN],
            bits: BITS_MIN,
            used: 0,
        }
    }
}

impl LatestTable {
    /// Makes `at` the latest entry of `key`; `same` tells whether the
    /// entry at a held position has the key (asked only of a long key
    /// whose tag and length match).
    pub fn set(&mut self, key: LatestKey, at: u32, same: impl Fn(u32) -> bool) {
        debug_assert!(key.tag != 0, "a key's tag is never 0");
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

    /// Empties the table for a partition of `entries` entries. Its size
    /// is kept, as the partitions before had about as many keys, unless
    /// it is larger than those entries could need (each a key of its
    /// own): then it shrinks to that.
    pub fn clear_for(&mut self, entries: usize) {
        let needed = (entries.max(1) * 2).next_power_of_two();
        let bits = needed.trailing_zeros().clamp(BITS_MIN, BITS_MAX);
        if bits < self.bits {
            self.slots = vec![Latest::default(); 1 << bits];
            self.bits = bits;
        } else {
            self.slots.fill(Latest::default());
        }
        self.used = 0;
    }

    /// The latest position of each key held, in no order.
    pub fn positions(&self) -> impl Iterator<Item = u32> {
        let held = self.slots.iter().filter(|s| s.key.tag != 0);
        held.map(|s| s.at)
    }

    fn home(&self, tag: u32) -> usize {
        ((tag << PARTITION_BITS) >> (32 - self.bits)) as usize
    }

    fn grow(&mut self) {
        assert!(
            self.bits < BITS_MAX,
            "a partition holds fewer than 2^{} keys",
            BITS_MAX - 1
        );
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
}

#[cfg(test)]
mod tests {
    use super::{LatestKey, LatestTable};

    /// Long keys of one length whose tags are made equal, as two keys'
    /// hashes may be: only the caller's comparison tells them apart.
    #[test]
    fn long_keys_alike_in_tag_and_length_are_told_apart_by_their_bytes() {
        let keys: Vec<Vec<u8>> = (0..4u8)
            .map(|k| {
                let mut key = vec![b'x'; 40];
                key[39] = k;
                key
            })
            .collect();
        let log = [0usize, 1, 2, 0, 3, 1, 0];
        let mut table = LatestTable::default();
        for (at, &k) in log.iter().enumerate() {
            let key = LatestKey::tagged(&keys[k], 0x1234_5678);
            table.set(key, at as u32, |held| keys[log[held as usize]] == keys[k]);
        }
        let mut positions: Vec<u32> = table.positions().collect();
        positions.sort_unstable();
        // The latest of key 0 is at 6, of 1 at 5, of 2 at 2, of 3 at 4.
        assert_eq!(positions, vec![2, 4, 5, 6]);
    }

    #[test]
    fn short_keys_alike_in_tag_and_length_are_told_apart_by_their_words() {
        let keys = [b"key-a".as_slice(), b"key-b"];
        let mut table = LatestTable::default();
        for (at, key) in [keys[0], keys[1], keys[0]].into_iter().enumerate() {
            let never_asked = |_| panic!("a short key is matched by its words");
            table.set(LatestKey::tagged(key, 7 << 20), at as u32, never_asked);
        }
        let mut positions: Vec<u32> = table.positions().collect();
        positions.sort_unstable();
        assert_eq!(positions, vec![1, 2]);
    }

    /// Keys enough to grow the table several times, then a smaller
    /// partition: each key's latest position survives, and the table
    /// shrinks for it.
    #[test]
    fn a_table_grows_to_its_keys_and_shrinks_for_a_smaller_partition() {
        let mut table = LatestTable::default();
        let key = |k: u32| format!("key-{k:06}").into_bytes();
        for round in 0..2u32 {
            for k in 0..3_000u32 {
                let at = round * 3_000 + k;
                let key = key(k);
                let tagged = LatestKey::tagged(&key, LatestKey::tag_for(&key));
                table.set(tagged, at, |_| unreachable!());
            }
        }
        let mut positions: Vec<u32> = table.positions().collect();
        positions.sort_unstable();
        assert_eq!(positions, (3_000..6_000).collect::<Vec<_>>());
        let grown = table.slots.len();
        assert!(grown >= 6_000);
        table.clear_for(10);
        assert!(table.slots.len() < grown);
        assert_eq!(table.positions().count(), 0);
    }
}
