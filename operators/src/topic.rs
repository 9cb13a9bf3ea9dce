//! [`Topic`]: a topic of the log with its key and value types and codecs,
//! named once and used where a pipeline reads (`from`), writes (`to`) or
//! repartitions (`through`).

use std::marker::PhantomData;

use strata_record::codec::Codec;
use strata_runtime::Output;

/// A topic of `K` → `V` records, keys and values encoded with the raw
/// codec by default (bytes and strings as they are, `()` as no bytes).
pub struct Topic<K, V> {
    name: &'static str,
    key_codec: Codec,
    value_codec: Codec,
    types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Topic<K, V> {
    pub const fn new(name: &'static str) -> Self {
        Self {
            name,
            key_codec: Codec::Raw,
            value_codec: Codec::Raw,
            types: PhantomData,
        }
    }

    /// A topic whose name is known only at run time (a flag).
    pub fn named(name: &str) -> Self {
        Self::new(Output::<K, V>::named(name).topic())
    }

    /// The codecs of the records' keys and values.
    pub const fn codecs(mut self, key: Codec, value: Codec) -> Self {
        self.key_codec = key;
        self.value_codec = value;
        self
    }

    pub const fn name(&self) -> &'static str {
        self.name
    }

    pub const fn key_codec(&self) -> Codec {
        self.key_codec
    }

    pub const fn value_codec(&self) -> Codec {
        self.value_codec
    }

    /// The runtime's handle of this topic as an output.
    pub(crate) fn output(&self) -> Output<K, V> {
        Output::<K, V>::new(self.name).codecs(self.key_codec, self.value_codec)
    }
}

// Copy and Clone for any K and V (a derive would ask them of K and V).
impl<K, V> Clone for Topic<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, V> Copy for Topic<K, V> {}

impl<K, V> std::fmt::Debug for Topic<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topic")
            .field("name", &self.name)
            .field("key", &std::any::type_name::<K>())
            .field("value", &std::any::type_name::<V>())
            .finish()
    }
}
