//! Secondary indexes: [`Table::index_by`] and [`Stream::index_by`] keep,
//! per task, the keys of the rows by one or more fields of their values,
//! in a store whose keys sort by field and then by key, so the keys of a
//! field value, a field prefix or a range of fields are one scan; an
//! [`Index`] is the handle that queries it from a processor's
//! [`Context`].
//!
//! Two stores, named after the index (`stored_as` is the index's name):
//!
//! - `<name>`: one entry per (field, key), its value empty:
//!
//!   ```text
//!   entry key  [field: each 0x00 written 0x00 0xFF][0x00 0x00][key: the row key's codec]
//!   ```
//!
//!   The escape keeps byte order (field `a` sorts before `a\0` and `ab`,
//!   as the fields do) and ends each field where no field continues, so
//!   the entries of a field value are those starting with its escaped
//!   bytes and `0x00 0x00`, and the entries of fields starting with a
//!   prefix those starting with the prefix's escaped bytes. With the raw
//!   and utf8 key codecs a field's keys come in the keys' byte order.
//! - `<name>-fields`: per row key, the fields it is indexed under, so a
//!   row that changes field (or is deleted: a tombstone, `None`) has its
//!   old entries removed.
//!
//! Invariant: `(f, k)` is in `<name>` exactly when `f` is in
//! `<name>-fields[k]`; both are written in the same run, committed with
//! the input offsets. Each task indexes the rows of its partitions.

mod build;
mod key;

use std::ops::{Bound, RangeBounds};

use serde::Serialize;
use serde::de::DeserializeOwned;
use strata_record::codec::Codec;
use strata_runtime::{Context, ProcessError, Store};

use crate::item::Data;

pub use build::Found;
use key::{escape_field, field_prefix, split_entry_key};

/// A secondary index: the queries over its stores (see the module doc).
/// Use it from a processor that declares its stores: a step of the
/// pipeline that built it, or a hand-written processor declaring
/// [`Index::entries_store`] and [`Index::fields_store`].
pub struct Index<K: 'static> {
    entries: Store<Vec<u8>, ()>,
    fields: Store<K, Vec<Vec<u8>>>,
    key_codec: Codec,
    /// The pipeline (its graph's address) and node that build the index,
    /// for `lookup_index`; none for a handle made with `named`.
    built: Option<(usize, usize)>,
}

/// A question to an index: the keys of one field value, of the fields
/// starting with a prefix, or of a range of fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexQuery {
    Field(Vec<u8>),
    Prefix(Vec<u8>),
    Range(Bound<Vec<u8>>, Bound<Vec<u8>>),
}

impl IndexQuery {
    pub fn field(field: impl AsRef<[u8]>) -> Self {
        Self::Field(field.as_ref().to_vec())
    }

    pub fn prefix(prefix: impl AsRef<[u8]>) -> Self {
        Self::Prefix(prefix.as_ref().to_vec())
    }

    /// The fields in `fields` (`"a".."n"`, `..=b"k"`).
    pub fn range<F: AsRef<[u8]>>(fields: impl RangeBounds<F>) -> Self {
        let own = |b: Bound<&F>| b.map(|f| f.as_ref().to_vec());
        Self::Range(own(fields.start_bound()), own(fields.end_bound()))
    }
}

// Copy for any K (a derive would ask it of K).
impl<K> Clone for Index<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Index<K> {}

impl<K> Index<K>
where
    K: Data + Serialize + DeserializeOwned,
{
    /// The index named `name` over keys encoded with `key_codec`: the
    /// handle a pipeline's `index_by` returns, made anywhere.
    pub fn named(name: &str, key_codec: Codec) -> Self {
        Self {
            entries: Store::named(name).codecs(Codec::Raw, Codec::Postcard),
            fields: Store::named(&format!("{name}-fields")).codecs(key_codec, Codec::Postcard),
            key_codec,
            built: None,
        }
    }

    pub fn name(&self) -> &'static str {
        self.entries.name()
    }

    /// The store of the entries, by entry key (see the module doc).
    pub fn entries_store(&self) -> Store<Vec<u8>, ()> {
        self.entries
    }

    /// The store of each key's fields.
    pub fn fields_store(&self) -> Store<K, Vec<Vec<u8>>> {
        self.fields
    }

    /// The keys indexed under `field`, in the order of their encoding.
    pub fn keys(
        &self,
        ctx: &mut Context<'_>,
        field: impl AsRef<[u8]>,
    ) -> Result<Vec<K>, ProcessError> {
        let entries = self.query(ctx, &IndexQuery::field(field))?;
        Ok(entries.into_iter().map(|(_, key)| key).collect())
    }

    /// The (field, key) entries whose field starts with `prefix`, in
    /// field order.
    pub fn with_prefix(
        &self,
        ctx: &mut Context<'_>,
        prefix: impl AsRef<[u8]>,
    ) -> Result<Vec<(Vec<u8>, K)>, ProcessError> {
        let mut escaped = Vec::new();
        escape_field(prefix.as_ref(), &mut escaped);
        self.scan(ctx, &escaped)
    }

    /// The (field, key) entries whose field is in `fields` (`"a".."n"`,
    /// `..=b"k"`), in field order.
    pub fn in_range<F, R>(
        &self,
        ctx: &mut Context<'_>,
        fields: R,
    ) -> Result<Vec<(Vec<u8>, K)>, ProcessError>
    where
        F: AsRef<[u8]>,
        R: RangeBounds<F>,
    {
        self.query(ctx, &IndexQuery::range(fields))
    }

    /// The (field, key) entries `query` asks for, in field order.
    pub fn query(
        &self,
        ctx: &mut Context<'_>,
        query: &IndexQuery,
    ) -> Result<Vec<(Vec<u8>, K)>, ProcessError> {
        let (from, to) = match query {
            IndexQuery::Field(field) => return self.scan(ctx, &field_prefix(field)),
            IndexQuery::Prefix(prefix) => return self.with_prefix(ctx, prefix),
            IndexQuery::Range(from, to) => (from, to),
        };
        let escaped = |f: &Vec<u8>| {
            let mut out = Vec::new();
            escape_field(f, &mut out);
            out
        };
        // A field's entries lie between its escaped bytes and the same
        // followed by 0x00 0x01.
        let past = |f: &Vec<u8>| {
            let mut out = escaped(f);
            out.extend_from_slice(&[0x00, 0x01]);
            out
        };
        let from = match from {
            Bound::Included(f) => Bound::Included(escaped(f)),
            Bound::Excluded(f) => Bound::Included(past(f)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let to = match to {
            Bound::Included(f) => Bound::Excluded(past(f)),
            Bound::Excluded(f) => Bound::Excluded(escaped(f)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let entries = ctx.range(self.entries, (from, to))?;
        self.decode(entries.map(|e| e.map(|(k, ())| k)))
    }

    fn scan(
        &self,
        ctx: &mut Context<'_>,
        prefix: &[u8],
    ) -> Result<Vec<(Vec<u8>, K)>, ProcessError> {
        let entries = ctx.prefix(self.entries, prefix)?;
        self.decode(entries.map(|e| e.map(|(k, ())| k)))
    }

    fn decode(
        &self,
        entries: impl Iterator<Item = Result<Vec<u8>, ProcessError>>,
    ) -> Result<Vec<(Vec<u8>, K)>, ProcessError> {
        entries
            .map(|entry| {
                let bytes = entry?;
                let (field, key) = split_entry_key(&bytes).map_err(ProcessError::msg)?;
                Ok((field, self.key_codec.decode(key)?))
            })
            .collect()
    }
}
