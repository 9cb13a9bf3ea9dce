//! The byte layout of an index entry's key (see the `index` module doc),
//! the runtime's public index-store layout (`strata_runtime::index_key`),
//! so that `query --field` reads these stores:
//!
//! ```text
//! entry key  [field: each 0x00 written 0x00 0xFF][0x00 0x00][key: the row key's codec]
//! ```

pub(crate) use strata_runtime::index_key::{
    entry_key, escape_field, field_prefix, split_entry_key,
};
