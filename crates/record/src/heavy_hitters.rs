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

use std::collections::HashMap;

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

/// The table.
#[derive(Debug, Clone)]
pub struct HeavyHitters {
    capacity: usize,
    counters: HashMap<Box<[u8]>, Counter>,
    offered: u64,
}

impl HeavyHitters {
    /// A table counting at most `capacity` keys (at least 1).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            counters: HashMap::with_capacity(capacity.max(1)),
            offered: 0,
        }
    }

    /// Counts `key`, seen at `now_ms`, `times` times.
    pub fn offer(&mut self, key: &[u8], times: u64, now_ms: i64) {
        let key = &key[..key.len().min(KEY_BYTES_MAX)];
        self.offered += times;
        if let Some(counter) = self.counters.get_mut(key) {
            counter.count += times;
            return;
        }
        if self.counters.len() < self.capacity {
            let counter = Counter {
                count: times,
                error: 0,
                since_ms: now_ms,
            };
            self.counters.insert(key.into(), counter);
            return;
        }
        // The smallest count gives its place up: a linear scan, over a
        // table of a few dozen keys, only when an uncounted key comes.
        let smallest = (self.counters.iter())
            .min_by_key(|(_, c)| c.count)
            .map(|(k, c)| (k.clone(), c.count));
        if let Some((evicted, floor)) = smallest {
            self.counters.remove(&evicted);
            let counter = Counter {
                count: floor + times,
                error: floor,
                since_ms: now_ms,
            };
            self.counters.insert(key.into(), counter);
        }
    }

    /// Keys offered, counting repeats.
    pub fn offered(&self) -> u64 {
        self.offered
    }

    /// The `n` keys counted most, most first (ties by key).
    pub fn top(&self, n: usize) -> Vec<HotKey> {
        let mut keys: Vec<HotKey> = (self.counters.iter())
            .map(|(key, c)| HotKey {
                key: key.to_vec(),
                count: c.count,
                error: c.error,
                since_ms: c.since_ms,
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
