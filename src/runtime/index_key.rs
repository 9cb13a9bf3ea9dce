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
