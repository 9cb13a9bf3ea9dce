//! The key layout of an **index store**: entries keyed by a field's bytes
//! and then a row's key, so that the keys of one field value, of a field
//! prefix or of a range of fields are one ordered scan. Part of the public
//! API so that `strata-operators`' `index_by` and hand-written processors
//! write index stores that `query --field` and the HTTP `field` query read
//! ([`App::index_keys`](super::App::index_keys) declares one).
//!
//! ```text
//! entry key  [field: each 0x00 written 0x00 0xFF][0x00 0x00][key: the row key's codec]
//! ```
//!
//! The escape keeps byte order (field `a` sorts before `a\0` and `ab`, as
//! the fields do) and ends each field where no field continues: the
//! entries of a field value are those starting with its escaped bytes and
//! `0x00 0x00`, and the entries of the fields starting with a prefix are
//! those starting with the prefix's escaped bytes.

/// Written after a 0x00 of a field.
pub const ESCAPE: u8 = 0xFF;
/// Ends a field.
pub const END: [u8; 2] = [0x00, 0x00];

/// A field's bytes escaped (0x00 as 0x00 0xFF), appended to `out`.
pub fn escape_field(field: &[u8], out: &mut Vec<u8>) {
    for &b in field {
        out.push(b);
        if b == 0 {
            out.push(ESCAPE);
        }
    }
}

/// The bytes every entry of `field` starts with.
pub fn field_prefix(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len() + END.len());
    escape_field(field, &mut out);
    out.extend_from_slice(&END);
    out
}

/// The entry key of `key` (encoded) under `field`.
pub fn entry_key(field: &[u8], key: &[u8]) -> Vec<u8> {
    let mut out = field_prefix(field);
    out.extend_from_slice(key);
    out
}

/// The field and key bytes of an entry key, or why it is not one.
pub fn split_entry_key(bytes: &[u8]) -> Result<(Vec<u8>, &[u8]), String> {
    let mut field = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (0, Some(0)) => return Ok((field, &bytes[i + 2..])),
            (0, Some(&ESCAPE)) => {
                field.push(0);
                i += 2;
            }
            (0, _) => break,
            (b, _) => {
                field.push(b);
                i += 1;
            }
        }
    }
    Err(format!(
        "an index entry key of {} bytes is malformed",
        bytes.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        // Zeros and 0xFF often: the escape's edge cases.
        proptest::collection::vec(
            prop_oneof![Just(0u8), Just(0xFF), Just(1), any::<u8>()],
            0..8,
        )
    }

    proptest! {
        #[test]
        fn entry_keys_decode_to_what_was_encoded(field in bytes(), key in bytes()) {
            let bytes = entry_key(&field, &key);
            let (f, k) = split_entry_key(&bytes).unwrap();
            prop_assert_eq!((f, k), (field, &key[..]));
        }

        #[test]
        fn entry_keys_sort_by_field_then_key(
            a in (bytes(), bytes()),
            b in (bytes(), bytes()),
        ) {
            prop_assert_eq!(a.cmp(&b), entry_key(&a.0, &a.1).cmp(&entry_key(&b.0, &b.1)));
        }

        #[test]
        fn a_fields_entries_start_with_each_of_its_prefixes_and_no_others_do(
            field in bytes(),
            other in bytes(),
            key in bytes(),
            cut in any::<prop::sample::Index>(),
        ) {
            let prefix = &field[..cut.index(field.len() + 1)];
            let mut escaped = Vec::new();
            escape_field(prefix, &mut escaped);
            prop_assert!(entry_key(&field, &key).starts_with(&escaped));
            prop_assert_eq!(
                entry_key(&other, &key).starts_with(&escaped),
                other.starts_with(prefix)
            );
        }
    }

    #[test]
    fn a_zero_in_a_field_is_escaped_and_the_field_ends_with_two_zeros() {
        assert_eq!(entry_key(b"a\0b", b"k"), b"a\0\xFFb\0\0k");
        assert_eq!(entry_key(b"", b"k"), b"\0\0k");
    }

    #[test]
    fn an_entry_key_without_its_end_is_refused_not_misread() {
        assert!(split_entry_key(b"abc").is_err());
        assert!(split_entry_key(b"a\0").is_err());
        assert!(split_entry_key(b"a\0\x07").is_err());
    }
}
