//! What the wordcount example's `word-counts` topic must hold.

use std::collections::BTreeMap;

/// Checks that, per word, the counts of `records` (word, count) are 1, 2,
/// …, N in order, as one partition of `word-counts` holds them; returns N
/// per word.
pub fn counts_in_order(records: &[(String, String)]) -> BTreeMap<String, u64> {
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    for (word, count) in records {
        let count: u64 = count.parse().expect("a decimal count");
        let previous = last.insert(word.clone(), count).unwrap_or(0);
        assert_eq!(
            count,
            previous + 1,
            "word {word:?}: {count} after {previous}"
        );
    }
    last
}
