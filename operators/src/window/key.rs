//! The byte layouts of a window store's keys.
//!
//! A window's aggregate is kept under its **window key**; the windows not
//! yet closed are listed, by end, under **closing keys**, so that closing
//! every window that ended before the watermark is one range scan from
//! the start of the closing store:
//!
//! ```text
//! window key   [key length u32 BE][key: the stream's key codec][start u64 BE]
//! closing key  [end u64 BE][window key]
//! ```
//!
//! Times are stored as `t ^ i64::MIN` big-endian, so byte order is time
//! order (negative timestamps first). The key length makes a key's
//! windows a byte prefix of no other key's (`"ab"` and `"abc"` differ in
//! their first four bytes).

const LEN: usize = 4;
const TIME: usize = 8;

pub(crate) fn time_bytes(t: i64) -> [u8; TIME] {
    ((t ^ i64::MIN) as u64).to_be_bytes()
}

pub(crate) fn time_of(bytes: &[u8]) -> i64 {
    let raw: [u8; TIME] = bytes.try_into().expect("eight bytes");
    (u64::from_be_bytes(raw) as i64) ^ i64::MIN
}

/// The window key of `key` (encoded) in the window starting at `start`,
/// written into `out`.
pub(crate) fn window_key(key: &[u8], start: i64, out: &mut Vec<u8>) {
    out.clear();
    let len = u32::try_from(key.len()).expect("a record key is under 4 GiB");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&time_bytes(start));
}

/// The key bytes and start of a window key, or why it is not one.
pub(crate) fn split_window_key(bytes: &[u8]) -> Result<(&[u8], i64), String> {
    let bad = || format!("a window key of {} bytes is malformed", bytes.len());
    let len_bytes: [u8; LEN] = bytes.get(..LEN).ok_or_else(bad)?.try_into().expect("4");
    let len = u32::from_be_bytes(len_bytes) as usize;
    if bytes.len() != LEN + len + TIME {
        return Err(bad());
    }
    Ok((&bytes[LEN..LEN + len], time_of(&bytes[LEN + len..])))
}

pub(crate) fn closing_key(end: i64, window_key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(TIME + window_key.len());
    out.extend_from_slice(&time_bytes(end));
    out.extend_from_slice(window_key);
    out
}

/// The end and window key of a closing key.
pub(crate) fn split_closing_key(bytes: &[u8]) -> Result<(i64, &[u8]), String> {
    if bytes.len() < TIME + LEN + TIME {
        return Err(format!(
            "a closing key of {} bytes is malformed",
            bytes.len()
        ));
    }
    Ok((time_of(&bytes[..TIME]), &bytes[TIME..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn keys_decode_to_what_was_encoded(
            key in proptest::collection::vec(any::<u8>(), 0..40),
            start in any::<i64>(),
            end in any::<i64>(),
        ) {
            let mut wk = Vec::new();
            window_key(&key, start, &mut wk);
            prop_assert_eq!(split_window_key(&wk).unwrap(), (&key[..], start));
            let ck = closing_key(end, &wk);
            prop_assert_eq!(split_closing_key(&ck).unwrap(), (end, &wk[..]));
        }

        #[test]
        fn byte_order_is_time_order(a in any::<i64>(), b in any::<i64>()) {
            prop_assert_eq!(a.cmp(&b), time_bytes(a).cmp(&time_bytes(b)));
        }

        #[test]
        fn one_keys_windows_are_no_prefix_of_anothers(
            a in proptest::collection::vec(any::<u8>(), 0..8),
            b in proptest::collection::vec(any::<u8>(), 0..8),
            start in any::<i64>(),
        ) {
            prop_assume!(a != b);
            let (mut ka, mut kb) = (Vec::new(), Vec::new());
            window_key(&a, start, &mut ka);
            window_key(&b, start, &mut kb);
            let prefix = |k: &[u8]| k[..k.len() - TIME].to_vec();
            prop_assert!(!kb.starts_with(&prefix(&ka)));
        }
    }

    #[test]
    fn garbage_is_refused_not_misread() {
        assert!(split_window_key(&[0, 0, 0, 9, 1]).is_err());
        assert!(split_closing_key(&[1, 2, 3]).is_err());
    }
}
