//! Typed handles: a state store or a topic declared once, with its key and
//! value types and codecs, and used both on the [`App`] builder
//! (`.store(COUNTS)`, `.input(WORDS)`, `.output(WORD_COUNTS)`) and in the
//! processor (`ctx.get(COUNTS, &word)`, `ctx.emit(WORD_COUNTS, &word, &n)`):
//!
//! ```
//! use strata_record::codec::Codec;
//! use strata_runtime::{Store, Topic};
//!
//! const COUNTS: Store<String, u64> = Store::new("counts");
//! const CHANGES: Topic<String, u64> = Topic::new("changes").codecs(Codec::Raw, Codec::Json);
//! ```
//!
//! The compiler checks the types at every use. The builder checks a topic
//! read through its handle against the processor's record types and
//! against the processors that write it (see `input`); the runtime checks,
//! at the first use in a task, that the processor declared the store or
//! output it uses (one of the same name with other types or codecs is
//! refused there too).
//!
//! Handles are `Copy`: a name chosen at run time (a topic given on the
//! command line) makes one with [`Topic::named`] or [`Store::named`],
//! which keep one copy of each distinct name for the life of the process.
//!
//! [`App`]: super::App

use std::collections::BTreeSet;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Mutex;

use strata_record::codec::Codec;

/// A state store holding `K` → `V`: a RocksDB column family of the task,
/// keys encoded with the raw codec by default (byte order is string
/// order), values with postcard.
pub struct Store<K, V> {
    name: &'static str,
    key_codec: Codec,
    value_codec: Codec,
    types: PhantomData<fn() -> (K, V)>,
}

/// A topic of records `K` → `V`, keys and values encoded with the raw
/// codec by default (bytes and strings as they are, `()` as no bytes): a
/// processor's input (`App::input`) or output (`App::output`,
/// `Context::emit`). An output is created when missing, with as many
/// partitions as the processor's input.
pub struct Topic<K, V> {
    name: &'static str,
    key_codec: Codec,
    value_codec: Codec,
    partitions: Option<i32>,
    types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Store<K, V> {
    pub const fn new(name: &'static str) -> Self {
        Self {
            name,
            key_codec: Codec::Raw,
            value_codec: Codec::Postcard,
            types: PhantomData,
        }
    }

    /// A store whose name is known only at run time.
    pub fn named(name: &str) -> Self {
        Self::new(intern(name))
    }

    /// The codecs of the store's keys and values.
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
}

impl<K, V> Topic<K, V> {
    pub const fn new(topic: &'static str) -> Self {
        Self {
            name: topic,
            key_codec: Codec::Raw,
            value_codec: Codec::Raw,
            partitions: None,
            types: PhantomData,
        }
    }

    /// A topic whose name is known only at run time.
    pub fn named(topic: &str) -> Self {
        Self::new(intern(topic))
    }

    /// The codecs of the records' keys and values.
    pub const fn codecs(mut self, key: Codec, value: Codec) -> Self {
        self.key_codec = key;
        self.value_codec = value;
        self
    }

    /// The partitions to create the topic with, when it does not exist
    /// (by default the input's).
    pub const fn partitions(mut self, partitions: i32) -> Self {
        self.partitions = Some(partitions);
        self
    }

    /// The topic's name as the processors know it (a replayed version's
    /// topics carry a suffix in the log).
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The topic's name (as [`Topic::name`]).
    pub const fn topic(&self) -> &'static str {
        self.name
    }

    pub const fn key_codec(&self) -> Codec {
        self.key_codec
    }

    pub const fn value_codec(&self) -> Codec {
        self.value_codec
    }

    pub(crate) const fn partition_count(&self) -> Option<i32> {
        self.partitions
    }
}

/// A topic a processor writes: the name [`Topic`] had before topics could
/// be inputs too, kept for the apps written with it.
pub type Output<K, V> = Topic<K, V>;

// Copy and Clone for any K and V (a derive would ask them of K and V).
impl<K, V> Clone for Store<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, V> Copy for Store<K, V> {}

impl<K, V> Clone for Topic<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, V> Copy for Topic<K, V> {}

impl<K, V> fmt::Debug for Store<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("name", &self.name)
            .field("key", &std::any::type_name::<K>())
            .field("value", &std::any::type_name::<V>())
            .finish()
    }
}

impl<K, V> fmt::Debug for Topic<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Topic")
            .field("topic", &self.name)
            .field("key", &std::any::type_name::<K>())
            .field("value", &std::any::type_name::<V>())
            .finish()
    }
}

/// The one `'static` copy of `name`: names made at run time are few (the
/// topics and stores of an app), so they are kept, once each, for the
/// life of the process.
fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut names = NAMES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(known) = names.get(name) {
        return known;
    }
    let kept: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(kept);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_made_at_run_time_is_kept_once() {
        let a = Topic::<String, String>::named(&format!("topic-{}", 7));
        let b = Topic::<String, u64>::named("topic-7");
        assert_eq!(a.topic(), "topic-7");
        assert!(std::ptr::eq(a.topic(), b.topic()));
    }

    #[test]
    fn handles_default_to_the_runtime_codecs() {
        const COUNTS: Store<String, u64> = Store::new("counts");
        const OUT: Output<String, String> = Output::new("out").partitions(3);
        assert_eq!(
            (COUNTS.key_codec(), COUNTS.value_codec()),
            (Codec::Raw, Codec::Postcard)
        );
        assert_eq!(
            (OUT.key_codec(), OUT.value_codec()),
            (Codec::Raw, Codec::Raw)
        );
        assert_eq!(OUT.partition_count(), Some(3));
    }
}
