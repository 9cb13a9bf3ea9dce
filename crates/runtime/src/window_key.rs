//! The key layout of a **window store**: a store whose entries belong to
//! a key and a window start, so that one key's windows are a byte prefix
//! and lie in time order. Part of the public API so that processors and
//! the `strata-operators` crate write window stores that `query --window`
//! and the HTTP `window` query can read
//! ([`App::window_keys`](super::App::window_keys) declares one).
//!
//! ```text
//! window key  [key length u32 BE][key: encoded with the store's key codec][start: time8]
//! time8       (t ^ i64::MIN) as u64, big-endian: byte order is time order,
//!             negative times first
//! ```
//!
//! The length makes a key's windows a byte prefix of no other key's (`"ab"`
//! and `"abc"` differ in their first four bytes), so
//! [`key_prefix`] selects exactly one key's windows and a range scan from
//! `window_key(k, t1)` to `window_key(k, t2)` selects those starting in
//! `[t1, t2)`.

/// Bytes of the length field.
const LEN: usize = 4;
/// Bytes of a time field.
pub const TIME_BYTES: usize = 8;

/// A time as eight bytes whose byte order is the times' order.
pub fn time_bytes(t: i64) -> [u8; TIME_BYTES] {
    ((t ^ i64::MIN) as u64).to_be_bytes()
}

/// The time written by [`time_bytes`].
pub fn time_of(bytes: [u8; TIME_BYTES]) -> i64 {
    (u64::from_be_bytes(bytes) as i64) ^ i64::MIN
}

/// The bytes every window key of `key` (encoded) starts with, written
/// into `out`.
pub fn key_prefix(key: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let len = u32::try_from(key.len()).expect("a record key is under 4 GiB");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(key);
}

/// The window key of `key` (encoded) in the window starting at `start`,
/// written into `out`.
pub fn window_key(key: &[u8], start: i64, out: &mut Vec<u8>) {
    key_prefix(key, out);
    out.extend_from_slice(&time_bytes(start));
}

/// The key bytes and start of a window key, or why it is not one.
pub fn split_window_key(bytes: &[u8]) -> Result<(&[u8], i64), String> {
    let bad = || format!("a window key of {} bytes is malformed", bytes.len());
    let len_bytes: [u8; LEN] = bytes
        .get(..LEN)
        .ok_or_else(bad)?
        .try_into()
        .map_err(|_| bad())?;
    let len = u32::from_be_bytes(len_bytes) as usize;
    if bytes.len() != LEN + len + TIME_BYTES {
        return Err(bad());
    }
    let time: [u8; TIME_BYTES] = bytes[LEN + len..].try_into().map_err(|_| bad())?;
    Ok((&bytes[LEN..LEN + len], time_of(time)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_window_key_splits_into_what_made_it(
            key in proptest::collection::vec(any::<u8>(), 0..40),
            start in any::<i64>(),
        ) {
            let mut out = Vec::new();
            window_key(&key, start, &mut out);
            prop_assert_eq!(split_window_key(&out).unwrap(), (&key[..], start));
        }

        #[test]
        fn byte_order_is_time_order(a in any::<i64>(), b in any::<i64>()) {
            prop_assert_eq!(a.cmp(&b), time_bytes(a).cmp(&time_bytes(b)));
        }

        #[test]
        fn one_keys_prefix_selects_no_other_keys_windows(
            a in proptest::collection::vec(any::<u8>(), 0..8),
            b in proptest::collection::vec(any::<u8>(), 0..8),
            start in any::<i64>(),
        ) {
            prop_assume!(a != b);
            let (mut prefix, mut other) = (Vec::new(), Vec::new());
            key_prefix(&a, &mut prefix);
            window_key(&b, start, &mut other);
            prop_assert!(!other.starts_with(&prefix));
        }
    }

    #[test]
    fn garbage_is_refused_not_misread() {
        assert!(split_window_key(&[0, 0, 0, 9, 1]).is_err());
        assert!(split_window_key(&[1, 2]).is_err());
    }
}
