//! The keys seen most often in a stream, in bounded memory: the
//! Space-Saving algorithm (Metwally, Agrawal, El Abbadi, 2005), for the
//! hot-key reports (`strata topics skew`, an app's `status --keys`).
//!
//! At most `capacity` keys are counted. A key not counted, once the table
//! is full, takes the place of the key with the smallest count and starts
//! from that count (the overestimate it may carry, kept as its `error`).
//! What this guarantees, for `n` keys offered:
//!
//! - every key offered more than `n / capacity` times is in the table;
//! - a key's count is at least its true count and at most `error` more,
//!   and `error` is at most `n / capacity`.
//!
//! Keys longer than [`KEY_BYTES_MAX`] are counted by their first
//! [`KEY_BYTES_MAX`] bytes, so the table's memory is bounded whatever the
//! keys.

use std::hash::BuildHasher;

use foldhash::quality::RandomState;

/// Bytes of a key kept; longer keys are counted by this prefix.
pub const KEY_BYTES_MAX: usize = 256;

/// A key's count in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counter {
    count: u64,
    /// How much of `count` may belong to keys it replaced.
    error: u64,
    /// When (ms) the key entered the table.
    since_ms: i64,
}

/// One of the keys seen most often.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotKey {
    pub key: Vec<u8>,
    /// Times seen: at least the truth, at most `error` more.
    pub count: u64,
    pub error: u64,
    /// When the key entered the table: it has been counted since then.
    pub since_ms: i64,
}

/// One place of the table: a key (its first [`KEY_BYTES_MAX`] bytes, in a
/// buffer the next key to take the place reuses) and its counter.
#[derive(Debug, Clone)]
struct Slot {
    key: Vec<u8>,
    counter: Counter,
}

/// The table.
///
/// Measured reason for its shape (`measurement::offer_cost` below,
/// release, 10-byte keys one after another as a batch holds them, a table
/// of 64): over 100,000 uniform keys a key not counted comes with nearly
/// every offer, and a `HashMap<Box<[u8]>, Counter>` scanned for its
/// smallest count, allocating each new key, took 283–294 ns per offer
/// (the runtime offers one record's key in 16: `make bench-runtime` had
/// the task metrics costing 9% of a pass-through's throughput). This
/// shape takes 47–56 ns; a key already counted costs the same 21–27 ns
/// in both, with std's SipHash. Half of a counted key's cost was that
/// hash: in a later run on a busier machine (three alternating rounds of
/// each), SipHash took 64–90 ns (uniform) and 27–45 ns (50 keys), foldhash
/// (its `quality` hasher, seeded per table) 45–63 ns and 11–15 ns. The
/// keys live in buffers that the key taking a place reuses (nothing is
/// allocated once the table is full, but for a key longer than any its
/// place held); a key is found by its 64-bit hash (two keys of one hash,
/// about a 2^-64 chance for keys not crafted against the table's random
/// seed, are counted as one: a report merges them) in an open-addressed
/// index of slot numbers at most a quarter full, whose entries are
/// removed by shifting back (no tombstones to sweep); and the places with
/// the smallest count are found by one scan, then given up one by one
/// until they are used up.
#[derive(Debug, Clone)]
pub struct HeavyHitters {
    capacity: usize,
    slots: Vec<Slot>,
    /// Each slot's key's hash, in the order of `slots`.
    hashes: Vec<u64>,
    /// Open addressing by the hash's low bits: a slot's number plus one
    /// (0: empty); a power of two at least four times `capacity` long.
    index: Vec<u32>,
    hasher: RandomState,
    /// Places whose count was the smallest (`floor`) at the last scan, to
    /// give up next (one counted since is passed over).
    at_floor: Vec<usize>,
    floor: u64,
    offered: u64,
}

impl HeavyHitters {
    /// A table counting at most `capacity` keys (at least 1).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            capacity,
            slots: Vec::with_capacity(capacity),
            hashes: Vec::with_capacity(capacity),
            index: vec![0; (capacity * 4).next_power_of_two()],
            hasher: RandomState::default(),
            at_floor: Vec::new(),
            floor: 0,
            offered: 0,
        }
    }

    /// Counts `key`, seen at `now_ms`, `times` times.
    pub fn offer(&mut self, key: &[u8], times: u64, now_ms: i64) {
        let key = &key[..key.len().min(KEY_BYTES_MAX)];
        self.offered += times;
        let hash = self.hasher.hash_one(key);
        let (bucket, found) = self.find(hash);
        if let Some(at) = found {
            self.slots[at].counter.count += times;
            return;
        }
        if self.slots.len() < self.capacity {
            self.index[bucket] = self.slots.len() as u32 + 1;
            self.hashes.push(hash);
            self.slots.push(Slot {
                key: key.to_vec(),
                counter: Counter {
                    count: times,
                    error: 0,
                    since_ms: now_ms,
                },
            });
            return;
        }
        // The smallest count gives its place up.
        let at = self.smallest();
        self.unlink(self.hashes[at]);
        let slot = &mut self.slots[at];
        let floor = slot.counter.count;
        slot.key.clear();
        slot.key.extend_from_slice(key);
        slot.counter = Counter {
            count: floor + times,
            error: floor,
            since_ms: now_ms,
        };
        self.hashes[at] = hash;
        let (bucket, _) = self.find(hash);
        self.index[bucket] = at as u32 + 1;
    }

    /// Where `hash` is in the index: its bucket and slot, or the empty
    /// bucket it would take.
    fn find(&self, hash: u64) -> (usize, Option<usize>) {
        let mask = self.index.len() - 1;
        let mut bucket = hash as usize & mask;
        loop {
            match self.index[bucket] {
                0 => return (bucket, None),
                entry => {
                    let at = entry as usize - 1;
                    if self.hashes[at] == hash {
                        return (bucket, Some(at));
                    }
                }
            }
            bucket = (bucket + 1) & mask;
        }
    }

    /// Takes `hash` out of the index, moving back each entry after it that
    /// may take its bucket (so no probe ever stops short of its entry).
    fn unlink(&mut self, hash: u64) {
        let mask = self.index.len() - 1;
        let (mut hole, found) = self.find(hash);
        if found.is_none() {
            return;
        }
        let mut next = (hole + 1) & mask;
        while self.index[next] != 0 {
            let home = self.hashes[self.index[next] as usize - 1] as usize & mask;
            // The entry at `next` may move back to `hole` if its home is
            // not between them (cyclically).
            if next.wrapping_sub(home) & mask >= next.wrapping_sub(hole) & mask {
                self.index[hole] = self.index[next];
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.index[hole] = 0;
    }

    /// The place with the smallest count: the next of the last scan's
    /// still at its floor, else a new scan's first.
    fn smallest(&mut self) -> usize {
        while let Some(at) = self.at_floor.pop() {
            if self.slots[at].counter.count == self.floor {
                return at;
            }
        }
        self.floor = (self.slots.iter())
            .map(|slot| slot.counter.count)
            .min()
            .unwrap_or(0);
        self.at_floor = (0..self.slots.len())
            .rev()
            .filter(|&at| self.slots[at].counter.count == self.floor)
            .collect();
        self.at_floor.pop().unwrap_or(0)
    }

    /// Checks the index against the slots: each slot found by its hash,
    /// nothing else in the index, no two slots of one hash.
    #[cfg(test)]
    fn check_index(&self) {
        for (at, &hash) in self.hashes.iter().enumerate() {
            assert_eq!(
                self.find(hash).1,
                Some(at),
                "slot {at} is found by its hash"
            );
        }
        let entries = self.index.iter().filter(|&&e| e != 0).count();
        assert_eq!(entries, self.slots.len(), "one index entry per slot");
        let mut hashes = self.hashes.clone();
        hashes.sort_unstable();
        hashes.dedup();
        assert_eq!(hashes.len(), self.slots.len(), "no two slots of one hash");
    }

    /// Keys offered, counting repeats.
    pub fn offered(&self) -> u64 {
        self.offered
    }

    /// The `n` keys counted most, most first (ties by key).
    pub fn top(&self, n: usize) -> Vec<HotKey> {
        let mut keys: Vec<HotKey> = (self.slots.iter())
            .map(|slot| HotKey {
                key: slot.key.clone(),
                count: slot.counter.count,
                error: slot.counter.error,
                since_ms: slot.counter.since_ms,
            })
            .collect();
        keys.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        keys.truncate(n);
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn a_key_carrying_half_the_stream_is_found_among_many() {
        let mut table = HeavyHitters::new(32);
        for i in 0..100_000u64 {
            let key = if i % 2 == 0 {
                "hot".to_string()
            } else {
                format!("k{}", i % 9_973)
            };
            table.offer(key.as_bytes(), 1, i as i64);
        }
        let top = table.top(1);
        assert_eq!(top[0].key, b"hot");
        assert!(top[0].count >= 50_000 && top[0].count - top[0].error <= 50_000);
        assert_eq!(top[0].since_ms, 0, "counted from its first appearance");
        assert_eq!(table.offered(), 100_000);
    }

    proptest! {
        #[test]
        fn frequent_keys_are_counted_and_counts_are_bounded(
            keys in prop::collection::vec(0u8..40, 1..2_000),
            capacity in 1usize..24,
        ) {
            let mut table = HeavyHitters::new(capacity);
            let mut truth: HashMap<u8, u64> = HashMap::new();
            for (at, key) in keys.iter().enumerate() {
                table.offer(&[*key], 1, at as i64);
                *truth.entry(*key).or_default() += 1;
            }
            let n = keys.len() as u64;
            let counted = table.top(capacity);
            for (key, count) in &truth {
                let found = counted.iter().find(|h| h.key == [*key]);
                if *count * capacity as u64 > n {
                    prop_assert!(found.is_some(), "key {key} seen {count} of {n} times is missing");
                }
                if let Some(hot) = found {
                    prop_assert!(hot.count >= *count && hot.count - hot.error <= *count);
                    prop_assert!(hot.error * capacity as u64 <= n);
                }
            }
        }
    }

    proptest! {
        #[test]
        fn the_index_finds_every_key_counted_through_any_replacements(
            keys in prop::collection::vec(0u16..300, 1..3_000),
            capacity in 1usize..70,
        ) {
            let mut table = HeavyHitters::new(capacity);
            for (at, key) in keys.iter().enumerate() {
                table.offer(&key.to_be_bytes(), 1, at as i64);
                table.check_index();
            }
            prop_assert_eq!(table.offered(), keys.len() as u64);
        }
    }

    #[test]
    fn long_keys_are_counted_by_their_prefix() {
        let mut table = HeavyHitters::new(4);
        let long = vec![b'x'; KEY_BYTES_MAX + 10];
        let longer = vec![b'x'; KEY_BYTES_MAX + 20];
        table.offer(&long, 1, 0);
        table.offer(&longer, 1, 0);
        assert_eq!(table.top(4).len(), 1);
        assert_eq!(table.top(1)[0].key.len(), KEY_BYTES_MAX);
    }
}

/// The measurement behind the table's shape (`cargo test --release -p
/// strata-record offer_cost -- --ignored --nocapture`).
#[cfg(test)]
mod measurement {
    use std::time::Instant;

    /// Keys as a batch holds them: one after another in one buffer.
    fn keys(n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|i| format!("key-{i:06}").into_bytes())
            .collect()
    }

    #[test]
    #[ignore = "a measurement, not a check: run it in release"]
    fn offer_cost() {
        const KEY: usize = 10;
        const OFFERS: usize = 5_000_000;
        for (case, distinct) in [("uniform over 100,000 keys", 100_000), ("50 keys", 50)] {
            let keys = keys(distinct);
            let mut table = super::HeavyHitters::new(64);
            let mut x = 7u64;
            let started = Instant::now();
            for _ in 0..OFFERS {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x % distinct as u64) as usize * KEY;
                table.offer(&keys[at..at + KEY], 1, 0);
            }
            let nanos = started.elapsed().as_nanos() as f64 / OFFERS as f64;
            eprintln!("{case}: {nanos:.1} ns per offer");
        }
    }
}
