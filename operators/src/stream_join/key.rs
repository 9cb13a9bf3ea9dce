//! The byte layout of a buffered record's key in a stream–stream join's
//! side stores:
//!
//! ```text
//! buffer key  [key length u32 BE][key: the join's key codec][t u64 BE: t ^ i64::MIN][seq u64 BE]
//! ```
//!
//! A key's records are one byte range ordered by time, then by `seq`; the
//! key length makes no key's range overlap another's (`"ab"` and `"abc"`
//! differ in their first four bytes).

use crate::window::key::{time_bytes, time_of};

const LEN: usize = 4;
const TIME: usize = 8;
const SEQ: usize = 8;

/// The buffer key of `key` (encoded) at `t`, number `seq`, into `out`.
pub(crate) fn buffer_key(key: &[u8], t: i64, seq: u64, out: &mut Vec<u8>) {
    out.clear();
    let len = u32::try_from(key.len()).expect("a record key is under 4 GiB");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&time_bytes(t));
    out.extend_from_slice(&seq.to_be_bytes());
}

/// The key bytes, timestamp and number of a buffer key.
pub(crate) fn split_buffer_key(bytes: &[u8]) -> Result<(&[u8], i64, u64), String> {
    let bad = || format!("a buffer key of {} bytes is malformed", bytes.len());
    let len_bytes: [u8; LEN] = bytes.get(..LEN).ok_or_else(bad)?.try_into().expect("4");
    let len = u32::from_be_bytes(len_bytes) as usize;
    if bytes.len() != LEN + len + TIME + SEQ {
        return Err(bad());
    }
    let (key, rest) = bytes[LEN..].split_at(len);
    let seq: [u8; SEQ] = rest[TIME..].try_into().expect("8");
    Ok((key, time_of(&rest[..TIME]), u64::from_be_bytes(seq)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn buffer_keys_decode_to_what_was_encoded(
            key in proptest::collection::vec(any::<u8>(), 0..40),
            t in any::<i64>(),
            seq in any::<u64>(),
        ) {
            let mut bytes = Vec::new();
            buffer_key(&key, t, seq, &mut bytes);
            prop_assert_eq!(split_buffer_key(&bytes).unwrap(), (&key[..], t, seq));
        }

        #[test]
        fn a_keys_buffer_keys_sort_by_time_then_seq(
            key in proptest::collection::vec(any::<u8>(), 0..8),
            a in (any::<i64>(), any::<u64>()),
            b in (any::<i64>(), any::<u64>()),
        ) {
            let (mut ka, mut kb) = (Vec::new(), Vec::new());
            buffer_key(&key, a.0, a.1, &mut ka);
            buffer_key(&key, b.0, b.1, &mut kb);
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        }

        #[test]
        fn no_keys_time_range_holds_another_keys_records(
            a in proptest::collection::vec(any::<u8>(), 0..8),
            b in proptest::collection::vec(any::<u8>(), 0..8),
            t in any::<i64>(),
            from in any::<i64>(),
            to in any::<i64>(),
        ) {
            prop_assume!(a != b && from <= to);
            let (mut lo, mut hi, mut other) = (Vec::new(), Vec::new(), Vec::new());
            buffer_key(&a, from, 0, &mut lo);
            buffer_key(&a, to, u64::MAX, &mut hi);
            buffer_key(&b, t, 7, &mut other);
            prop_assert!(!(lo <= other && other <= hi));
        }
    }

    #[test]
    fn a_malformed_buffer_key_is_refused_not_misread() {
        assert!(split_buffer_key(&[0, 0, 0, 2, 1]).is_err());
        assert!(split_buffer_key(&[]).is_err());
    }
}
