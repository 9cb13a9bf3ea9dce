//! [`SlotTable`]: one store's values in a task's memory, by encoded key: a
//! value (or a known absence) and whether the run in progress wrote it.
//!
//! Built for the per-record path: open addressing with linear probing over
//! 32-byte entries aligned to 32, so a lookup usually touches one cache
//! line; a key and value that fit in 24 bytes together are held in the
//! entry itself (longer ones in a [`SpillSlab`] cell, one line more);
//! keys are compared a word at a time. And the task can ask for a key's
//! lines ahead of time ([`SlotTable::prefetch`], then
//! [`SlotTable::prefetch_spilled`] once the entry has arrived): over a
//! state larger than the CPU's caches, the first touch of each line is
//! the most expensive part of a get.

use super::cache_line;
use super::dirty_entries::push_dirty;
use super::key_words::{INLINE_BYTES, WORDS, hash, hash_words, padded_words, prefix_equal, tag_of};
use super::spill_slab::SpillSlab;

/// Fewest entries a table has.
const MIN_CAPACITY_BITS: u32 = 6;

/// Entry flags.
const DIRTY: u8 = 1;
/// The key is known to have no value (absent, or deleted by the run).
const ABSENT: u8 = 2;
/// Key and value are in the slab; `data[..4]` is their cell's index.
const HEAP: u8 = 4;

#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct Entry {
    /// The key's hash tag; 0: an empty entry.
    tag: u32,
    key_len: u8,
    value_len: u8,
    flags: u8,
    _spare: u8,
    /// Inline: the key, then the value.
    data: [u8; INLINE_BYTES],
}

/// A key's slot as the table holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot<'a> {
    /// None: the key has no value.
    pub value: Option<&'a [u8]>,
    /// Written by the run in progress, not yet committed.
    pub dirty: bool,
}

/// A key prepared for lookups: its hash tag and, when short, its bytes as
/// zero-padded little-endian words, for word comparisons.
pub(crate) struct Probe<'k> {
    key: &'k [u8],
    tag: u32,
    words: [u64; WORDS],
}

impl<'k> Probe<'k> {
    #[inline]
    pub fn new(key: &'k [u8]) -> Self {
        let (words, hash) = if key.len() <= INLINE_BYTES {
            let words = padded_words(key);
            (words, hash_words(&words, key.len()))
        } else {
            ([0; WORDS], hash(key))
        };
        Self {
            key,
            tag: tag_of(hash),
            words,
        }
    }

    /// The key's hash tag, what [`SlotTable::prefetch_spilled`] needs.
    pub fn tag(&self) -> u32 {
        self.tag
    }
}

#[derive(Default)]
pub(crate) struct SlotTable {
    entries: Vec<Entry>,
    /// log2 of `entries.len()` (0 while the table has no entries).
    bits: u32,
    len: usize,
    slab: SpillSlab,
}

impl SlotTable {
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Asks the CPU to bring `probe`'s first entry into its cache.
    pub fn prefetch(&self, probe: &Probe<'_>) {
        if self.entries.is_empty() {
            return;
        }
        cache_line::prefetch(&self.entries[self.home(probe.tag)]);
    }

    /// Asks the CPU to bring the slab cell of the key tagged `tag` into
    /// its cache, when its entry spilled: the second step after
    /// [`prefetch`](Self::prefetch), once the entry is in the cache (an
    /// entry not there yet is waited for; tag 0, no key, asks nothing).
    /// The first entry with the tag is taken for the key's: a wrong one
    /// only wastes the hint.
    pub fn prefetch_spilled(&self, tag: u32) {
        if self.entries.is_empty() || tag == 0 {
            return;
        }
        let mask = self.entries.len() - 1;
        let mut at = self.home(tag);
        loop {
            let entry = &self.entries[at];
            if entry.tag == 0 {
                return;
            }
            if entry.tag == tag {
                if entry.flags & HEAP != 0 {
                    self.slab.prefetch(slab_index(entry));
                }
                return;
            }
            at = (at + 1) & mask;
        }
    }

    pub fn get(&self, probe: &Probe<'_>) -> Option<Slot<'_>> {
        self.find(probe).map(|at| self.slot(at))
    }

    /// Sets the key's slot; returns the slot it replaced, if the key was
    /// there: the length of its value (0 for none), and whether it was
    /// dirty.
    pub fn set(
        &mut self,
        probe: &Probe<'_>,
        value: Option<&[u8]>,
        dirty: bool,
    ) -> Option<(usize, bool)> {
        if let Some(at) = self.find(probe) {
            let old = self.slot(at);
            let replaced = (old.value.map_or(0, <[u8]>::len), old.dirty);
            let reused = self.release(at);
            self.entries[at] = self.entry(probe, value, dirty, reused);
            return Some(replaced);
        }
        if (self.len + 1) * 2 > self.entries.len() {
            self.grow();
        }
        let entry = self.entry(probe, value, dirty, None);
        self.place(entry);
        self.len += 1;
        None
    }

    /// Entries the table has room for.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Marks every slot the run wrote as committed, appending each to
    /// `out` as [`DirtyEntries`](super::dirty_entries::DirtyEntries) reads
    /// them. One pass over the table in
    /// memory order, not a lookup per key: for a run that wrote a good
    /// part of the table.
    pub fn take_dirty(&mut self, out: &mut Vec<u8>) {
        for at in 0..self.entries.len() {
            let entry = self.entries[at];
            if entry.tag != 0 && entry.flags & DIRTY != 0 {
                self.take_at(at, out);
            }
        }
    }

    /// [`take_dirty`](Self::take_dirty) for the dirty slots of `keys` (each
    /// key once), looked up one by one: for a run that wrote few.
    pub fn take_dirty_keys<'k>(&mut self, keys: impl Iterator<Item = &'k [u8]>, out: &mut Vec<u8>) {
        for key in keys {
            if let Some(at) = self.find(&Probe::new(key))
                && self.entries[at].flags & DIRTY != 0
            {
                self.take_at(at, out);
            }
        }
    }

    fn take_at(&mut self, at: usize, out: &mut Vec<u8>) {
        self.entries[at].flags &= !DIRTY;
        push_dirty(out, self.key(at), self.slot(at).value);
    }

    pub fn remove(&mut self, probe: &Probe<'_>) {
        let Some(mut hole) = self.find(probe) else {
            return;
        };
        if let Some(index) = self.release(hole) {
            self.slab.free(index);
        }
        self.len -= 1;
        // Backward-shift deletion: later entries of the same probe run move
        // up, so no lookup ever stops at the hole before reaching them.
        let mask = self.entries.len() - 1;
        let mut next = (hole + 1) & mask;
        while self.entries[next].tag != 0 {
            let home = self.home(self.entries[next].tag);
            // Movable unless its home lies cyclically in (hole, next].
            let stays = if hole <= next {
                hole < home && home <= next
            } else {
                hole < home || home <= next
            };
            if !stays {
                self.entries[hole] = self.entries[next];
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.entries[hole] = Entry::default();
    }

    /// Drops every slot the run did not write.
    pub fn retain_dirty(&mut self) {
        let old = std::mem::take(&mut self.entries);
        self.entries = vec![Entry::default(); old.len()];
        self.len = 0;
        for entry in old.into_iter().filter(|e| e.tag != 0) {
            if entry.flags & DIRTY != 0 {
                self.place(entry);
                self.len += 1;
            } else if entry.flags & HEAP != 0 {
                self.slab.free(slab_index(&entry));
            }
        }
    }

    /// Every key with its slot, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], Slot<'_>)> {
        (0..self.entries.len())
            .filter(|at| self.entries[*at].tag != 0)
            .map(|at| (self.key(at), self.slot(at)))
    }

    fn home(&self, tag: u32) -> usize {
        (tag >> (32 - self.bits)) as usize
    }

    fn find(&self, probe: &Probe<'_>) -> Option<usize> {
        if self.entries.is_empty() {
            return None;
        }
        let mask = self.entries.len() - 1;
        let mut at = self.home(probe.tag);
        loop {
            let entry = &self.entries[at];
            if entry.tag == 0 {
                return None;
            }
            if entry.tag == probe.tag && self.holds(entry, probe) {
                return Some(at);
            }
            at = (at + 1) & mask;
        }
    }

    fn holds(&self, entry: &Entry, probe: &Probe<'_>) -> bool {
        if entry.flags & HEAP != 0 {
            return self.slab.get(slab_index(entry)).0 == probe.key;
        }
        usize::from(entry.key_len) == probe.key.len()
            && prefix_equal(&entry.data, &probe.words, probe.key.len())
    }

    fn key(&self, at: usize) -> &[u8] {
        let entry = &self.entries[at];
        if entry.flags & HEAP != 0 {
            return self.slab.get(slab_index(entry)).0;
        }
        &entry.data[..usize::from(entry.key_len)]
    }

    fn slot(&self, at: usize) -> Slot<'_> {
        let entry = &self.entries[at];
        let dirty = entry.flags & DIRTY != 0;
        if entry.flags & ABSENT != 0 {
            return Slot { value: None, dirty };
        }
        let value = if entry.flags & HEAP != 0 {
            self.slab.get(slab_index(entry)).1
        } else {
            let key_len = usize::from(entry.key_len);
            &entry.data[key_len..key_len + usize::from(entry.value_len)]
        };
        Slot {
            value: Some(value),
            dirty,
        }
    }

    /// An entry for the key and value; a long one's bytes go to the slab,
    /// into `reused` (the cell of the entry it replaces) when given.
    fn entry(
        &mut self,
        probe: &Probe<'_>,
        value: Option<&[u8]>,
        dirty: bool,
        reused: Option<u32>,
    ) -> Entry {
        let key = probe.key;
        let mut flags = if dirty { DIRTY } else { 0 };
        if value.is_none() {
            flags |= ABSENT;
        }
        let value = value.unwrap_or_default();
        let mut entry = Entry {
            tag: probe.tag,
            flags,
            ..Entry::default()
        };
        if key.len() + value.len() <= INLINE_BYTES {
            if let Some(index) = reused {
                self.slab.free(index);
            }
            entry.key_len = key.len() as u8;
            entry.value_len = value.len() as u8;
            for (word, chunk) in probe.words.iter().zip(entry.data.chunks_exact_mut(8)) {
                chunk.copy_from_slice(&word.to_le_bytes());
            }
            entry.data[key.len()..key.len() + value.len()].copy_from_slice(value);
            return entry;
        }
        let index = self.slab.put(key, value, reused);
        entry.flags |= HEAP;
        entry.data[..4].copy_from_slice(&index.to_le_bytes());
        entry
    }

    /// The slab cell of the entry at `at`, if it has one, for the entry
    /// replacing it to reuse (or free).
    fn release(&self, at: usize) -> Option<u32> {
        let entry = &self.entries[at];
        (entry.flags & HEAP != 0).then(|| slab_index(entry))
    }

    /// Puts an entry in the first empty place of its probe run.
    fn place(&mut self, entry: Entry) {
        let mask = self.entries.len() - 1;
        let mut at = self.home(entry.tag);
        while self.entries[at].tag != 0 {
            at = (at + 1) & mask;
        }
        self.entries[at] = entry;
    }

    fn grow(&mut self) {
        let bits = (self.bits + 1).max(MIN_CAPACITY_BITS);
        let old = std::mem::replace(&mut self.entries, vec![Entry::default(); 1 << bits]);
        self.bits = bits;
        for entry in old.into_iter().filter(|e| e.tag != 0) {
            self.place(entry);
        }
    }
}

fn slab_index(entry: &Entry) -> u32 {
    u32::from_le_bytes(entry.data[..4].try_into().expect("4 bytes"))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::state::dirty_entries::DirtyEntries;

    fn set(table: &mut SlotTable, key: &[u8], value: Option<&[u8]>, dirty: bool) {
        table.set(&Probe::new(key), value, dirty);
    }

    fn get<'t>(table: &'t SlotTable, key: &[u8]) -> Option<Slot<'t>> {
        table.get(&Probe::new(key))
    }

    #[test]
    fn word_hash_is_the_byte_hash() {
        let bytes: Vec<u8> = (1..=24).collect();
        for len in 0..=24 {
            let key = &bytes[..len];
            let words = padded_words(key);
            let mut expected = [0u8; INLINE_BYTES];
            expected[..len].copy_from_slice(key);
            for (at, word) in words.iter().enumerate() {
                assert_eq!(
                    word.to_le_bytes(),
                    expected[at * 8..at * 8 + 8],
                    "{len} bytes"
                );
            }
            assert_eq!(hash_words(&words, len), hash(key), "{len} bytes");
        }
    }

    #[test]
    fn entries_are_half_a_cache_line() {
        assert_eq!(std::mem::size_of::<Entry>(), 32);
        assert_eq!(std::mem::align_of::<Entry>(), 32);
    }

    #[test]
    fn short_long_absent_and_dirty_slots_read_back() {
        let mut table = SlotTable::default();
        let long_key = vec![7u8; 40];
        let long_value = vec![9u8; 100];
        set(&mut table, b"", Some(b"empty key"), false);
        set(&mut table, b"k", Some(b""), true);
        set(&mut table, b"gone", None, true);
        set(&mut table, &long_key, Some(b"v"), false);
        set(&mut table, b"short", Some(&long_value), true);
        set(&mut table, &[1u8; 24], Some(b""), false);
        type Read = Option<(Option<Vec<u8>>, bool)>;
        fn read(table: &SlotTable, key: &[u8]) -> Read {
            get(table, key).map(|s| (s.value.map(<[u8]>::to_vec), s.dirty))
        }
        assert_eq!(
            read(&table, b""),
            Some((Some(b"empty key".to_vec()), false))
        );
        assert_eq!(read(&table, b"k"), Some((Some(Vec::new()), true)));
        assert_eq!(read(&table, b"gone"), Some((None, true)));
        assert_eq!(read(&table, &long_key), Some((Some(b"v".to_vec()), false)));
        assert_eq!(
            read(&table, b"short"),
            Some((Some(long_value.clone()), true))
        );
        assert_eq!(read(&table, &[1u8; 24]), Some((Some(Vec::new()), false)));
        assert_eq!(read(&table, b"shor"), None);
        assert_eq!(read(&table, b"short\0"), None);
        assert_eq!(table.len(), 6);

        assert_eq!(
            table.set(&Probe::new(b"short"), Some(b"x"), false),
            Some((100, true))
        );
        assert_eq!(read(&table, b"short"), Some((Some(b"x".to_vec()), false)));
        let mut taken = Vec::new();
        table.take_dirty(&mut taken);
        let mut taken: Vec<_> = DirtyEntries::new(&taken).collect();
        taken.sort();
        let expected: Vec<(&[u8], Option<&[u8]>)> = vec![(b"gone", None), (b"k", Some(b""))];
        assert_eq!(taken, expected);
        assert_eq!(read(&table, b"k"), Some((Some(Vec::new()), false)));
        set(&mut table, b"k", Some(b"again"), true);
        table.retain_dirty();
        assert_eq!(table.len(), 1);
        assert_eq!(read(&table, b"k"), Some((Some(b"again".to_vec()), true)));
        assert_eq!(read(&table, &long_key), None);
    }

    /// The two prefetch steps are hints: over every kind of slot, a freed
    /// cell, an empty table and tag 0, they change nothing a get sees.
    #[test]
    fn prefetching_any_key_or_tag_changes_nothing() {
        let mut table = SlotTable::default();
        let keys: Vec<Vec<u8>> = (0..200)
            .map(|n| format!("key-{n:03}").into_bytes())
            .collect();
        for probe in keys.iter().map(|k| Probe::new(k)) {
            table.prefetch(&probe);
            table.prefetch_spilled(probe.tag());
        }
        table.prefetch_spilled(0);
        for (n, key) in keys.iter().enumerate() {
            let value = vec![b'v'; n % 70];
            set(
                &mut table,
                key,
                (n % 7 != 0).then_some(&value[..]),
                n % 2 == 0,
            );
        }
        for key in keys.iter().step_by(3) {
            table.remove(&Probe::new(key));
        }
        let before: Vec<_> = keys.iter().map(|k| get(&table, k)).collect();
        for probe in keys.iter().map(|k| Probe::new(k)) {
            table.prefetch(&probe);
            table.prefetch_spilled(probe.tag());
        }
        for tag in [0, 1, u32::MAX] {
            table.prefetch_spilled(tag);
        }
        let after: Vec<_> = keys.iter().map(|k| get(&table, k)).collect();
        assert_eq!(before, after);
    }

    /// Random sets and removes over a small key space (so probe runs
    /// collide and wrap), checked against a `HashMap` after every step.
    #[test]
    fn behaves_like_a_hash_map() {
        let mut table = SlotTable::default();
        let mut model: HashMap<Vec<u8>, (Option<Vec<u8>>, bool)> = HashMap::new();
        let mut state = 0x9e37_79b9_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for step in 0..20_000 {
            let n = next();
            let key_len = [3, 10, 24, 25, 60][(n % 5) as usize];
            let key: Vec<u8> = format!("{:0width$}", n % 700, width = key_len).into_bytes();
            match (n >> 8) % 8 {
                0 | 1 => {
                    table.remove(&Probe::new(&key));
                    model.remove(&key);
                }
                2 => {
                    table.retain_dirty();
                    model.retain(|_, (_, dirty)| *dirty);
                }
                3 if (n >> 12) % 8 == 0 => {
                    let mut taken = Vec::new();
                    if (n >> 15) % 2 == 0 {
                        table.take_dirty(&mut taken);
                    } else {
                        let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
                        table.take_dirty_keys(keys.iter().map(Vec::as_slice), &mut taken);
                    }
                    let mut taken: Vec<(Vec<u8>, Option<Vec<u8>>)> = DirtyEntries::new(&taken)
                        .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                        .collect();
                    taken.sort();
                    let mut expected: Vec<(Vec<u8>, Option<Vec<u8>>)> = model
                        .iter()
                        .filter(|(_, (_, dirty))| *dirty)
                        .map(|(k, (v, _))| (k.clone(), v.clone()))
                        .collect();
                    expected.sort();
                    assert_eq!(taken, expected, "step {step}");
                    model.values_mut().for_each(|(_, dirty)| *dirty = false);
                }
                _ => {
                    let value = ((n >> 16) % 4 != 0).then(|| vec![b'v'; (n >> 20) as usize % 30]);
                    let dirty = (n >> 40) % 2 == 0;
                    table.set(&Probe::new(&key), value.as_deref(), dirty);
                    model.insert(key.clone(), (value, dirty));
                }
            }
            assert_eq!(table.len(), model.len(), "step {step}");
            if step % 97 == 0 {
                for (key, (value, dirty)) in &model {
                    let slot = get(&table, key).expect("present");
                    assert_eq!(slot.value, value.as_deref(), "step {step}");
                    assert_eq!(slot.dirty, *dirty);
                }
                let listed: HashMap<Vec<u8>, (Option<Vec<u8>>, bool)> = table
                    .iter()
                    .map(|(k, s)| (k.to_vec(), (s.value.map(<[u8]>::to_vec), s.dirty)))
                    .collect();
                assert_eq!(listed, model, "step {step}");
            }
        }
    }
}
