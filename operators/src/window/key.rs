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
//! The window key is the runtime's public window-store layout
//! (`strata_runtime::window_key`), so `query --window` reads these
//! stores; the closing list is this crate's own.
//!
//! Times are stored as `t ^ i64::MIN` big-endian, so byte order is time
//! order (negative timestamps first). The key length makes a key's
//! windows a byte prefix of no other key's (`"ab"` and `"abc"` differ in
//! their first four bytes).

use strata_runtime::window_key::{self, TIME_BYTES as TIME};
pub(crate) use strata_runtime::window_key::{split_window_key, time_bytes, window_key};

/// Bytes of a window key's length field.
const LEN: usize = 4;

/// The time written by `time_bytes` at the start of `bytes` (eight bytes).
pub(crate) fn time_of(bytes: &[u8]) -> i64 {
    let raw: [u8; TIME] = bytes.try_into().expect("eight bytes");
    window_key::time_of(raw)
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
    }

    // The window key's own properties are tested with its layout, in
    // `strata_runtime::window_key`.
    #[test]
    fn garbage_is_refused_not_misread() {
        assert!(split_window_key(&[0, 0, 0, 9, 1]).is_err());
        assert!(split_closing_key(&[1, 2, 3]).is_err());
    }
}
