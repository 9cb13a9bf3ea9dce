//! A short key as 8-byte words: zero-padded loads, word-at-a-time
//! comparison with an entry's inline bytes, and the hash that places it in
//! a [`SlotTable`](super::slot_table::SlotTable) (the same for its words as
//! for its bytes, so a long key and a short one hash alike).

/// Bytes of key and value held inside an entry.
pub(super) const INLINE_BYTES: usize = 24;
/// `INLINE_BYTES` in 8-byte words.
pub(super) const WORDS: usize = INLINE_BYTES / 8;
const _: () = assert!(
    INLINE_BYTES.is_multiple_of(8),
    "inline bytes are whole words"
);

/// Whether the first `len` (≤ 24) bytes of `data` are those of `words`
/// (zero beyond `len`), a word at a time.
pub(super) fn prefix_equal(data: &[u8; INLINE_BYTES], words: &[u64; WORDS], len: usize) -> bool {
    let mut differ = 0u64;
    for (at, word) in words.iter().enumerate() {
        let held = u64::from_le_bytes(data[at * 8..at * 8 + 8].try_into().expect("8 bytes"));
        let bits = (len.saturating_sub(at * 8).min(8) * 8) as u32;
        let mask = u64::MAX.checked_shr(64 - bits).unwrap_or(0);
        differ |= (held ^ word) & mask;
    }
    differ == 0
}

/// A key of at most 24 bytes as little-endian words, zero-padded, read a
/// word at a time (a short tail with overlapping loads, no byte loop).
#[inline]
pub(super) fn padded_words(key: &[u8]) -> [u64; WORDS] {
    let read8 = |at: usize| u64::from_le_bytes(key[at..at + 8].try_into().expect("8 bytes"));
    let read4 = |at: usize| {
        u64::from(u32::from_le_bytes(
            key[at..at + 4].try_into().expect("4 bytes"),
        ))
    };
    let len = key.len();
    let mut words = [0u64; WORDS];
    let full = len / 8;
    for (at, word) in words.iter_mut().enumerate().take(full) {
        *word = read8(at * 8);
    }
    let tail = len % 8;
    if tail > 0 {
        words[full] = if len >= 8 {
            read8(len - 8) >> (8 * (8 - tail))
        } else if len >= 4 {
            read4(0) | (read4(len - 4) << (8 * (len - 4)))
        } else {
            let byte = |at: usize| u64::from(key[at]) << (8 * at);
            byte(0) | byte(len / 2) | byte(len - 1)
        };
    }
    words
}

const HASH_K: u64 = 0xf135_7aea_2e62_a9c5;

/// A 64-bit hash of a key: a multiply-rotate pass over its words (as in
/// rustc's FxHash), then a final mix so the high bits (the table index)
/// depend on every byte.
pub(super) fn hash(bytes: &[u8]) -> u64 {
    let mut h = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        h = (h.rotate_left(26) ^ word).wrapping_mul(HASH_K);
    }
    let tail = padded_words(chunks.remainder())[0];
    finish((h.rotate_left(26) ^ tail).wrapping_mul(HASH_K))
}

/// [`hash`] of a key of `len` ≤ 24 bytes given as its padded words.
#[inline]
pub(super) fn hash_words(words: &[u64; WORDS], len: usize) -> u64 {
    let mut h = len as u64;
    for word in &words[..len / 8] {
        h = (h.rotate_left(26) ^ word).wrapping_mul(HASH_K);
    }
    let tail = words.get(len / 8).copied().unwrap_or(0);
    finish((h.rotate_left(26) ^ tail).wrapping_mul(HASH_K))
}

fn finish(mut h: u64) -> u64 {
    h ^= h >> 32;
    h = h.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (h >> 29)
}

/// The tag kept in an entry: the hash's high half, never 0 (an empty
/// entry). Its top bits are the key's home in the table.
pub(super) fn tag_of(hash: u64) -> u32 {
    ((hash >> 32) as u32).max(1)
}
