//! The byte layout of an index entry's key (see the `index` module doc),
//! the runtime's public index-store layout (`strata::runtime::index_key`),
//! so that `query --field` reads these stores:
//!
//! ```text
//! entry key  [field: each 0x00 written 0x00 0xFF][0x00 0x00][key: the row key's codec]
//! ```

pub(crate) use strata::runtime::index_key::{END, entry_key, escape_field, split_entry_key};

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
