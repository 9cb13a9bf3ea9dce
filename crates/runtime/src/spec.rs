//! What the builder records of a processor's stores and outputs, taken from
//! their typed handles, and what a task makes of an output (its name in the
//! log, its partition count). Shared by the builder, the context and the
//! operations, so none of them imports another for these.

use std::any::TypeId;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use strata_record::codec::Codec;

use super::handles::{Output, Store};
use super::store_text::StoreText;
use super::timer::{Timer, render_key, render_value};

/// Renders an encoded store key or value for `dump-state` and `diff`.
pub(crate) type Render = Arc<dyn Fn(&[u8]) -> String + Send + Sync>;

#[derive(Clone)]
pub(crate) struct StoreSpec {
    pub name: String,
    /// The name as the declaring handle holds it: a handle copied from the
    /// same declaration points at the same bytes, so finding a store for a
    /// get or put mostly compares two pointers, not two names. None for a
    /// store no handle names (the timers').
    pub handle_name: Option<&'static str>,
    pub key_codec: Codec,
    pub value_codec: Codec,
    pub key_type: TypeId,
    pub value_type: TypeId,
    pub key_type_name: &'static str,
    pub value_type_name: &'static str,
    pub render_key: Render,
    pub render_value: Render,
    /// Keys from text and entries as JSON, for queries.
    pub text: StoreText,
    /// A window store's keys (`App::window_keys`), as far as the task
    /// can compute them from a record it has not processed yet.
    pub window_keys: Option<WindowKeys>,
}

/// What a task knows of a window store's keys ([`super::window_key`]
/// layout) before its processor runs: enough, with a record's key and
/// timestamp, to name the window the record falls in, and ask the CPU for
/// its entry a few records ahead (see `task::prefetch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WindowKeys {
    /// The codec of the keys inside the window keys.
    pub key_codec: Codec,
    /// Windows start at every multiple of this since the epoch
    /// (`App::windows_start_every`); None if not declared.
    pub advance_ms: Option<i64>,
}

impl StoreSpec {
    pub fn of<K, V>(store: Store<K, V>) -> Self
    where
        K: Serialize + DeserializeOwned + 'static,
        V: Serialize + DeserializeOwned + 'static,
    {
        Self {
            name: store.name().to_string(),
            handle_name: Some(store.name()),
            key_codec: store.key_codec(),
            value_codec: store.value_codec(),
            key_type: TypeId::of::<K>(),
            value_type: TypeId::of::<V>(),
            key_type_name: std::any::type_name::<K>(),
            value_type_name: std::any::type_name::<V>(),
            render_key: render::<K>(store.key_codec()),
            render_value: render::<V>(store.value_codec()),
            text: StoreText::of::<K, V>(store.key_codec(), store.value_codec()),
            window_keys: None,
        }
    }

    /// A processor's timer store (see `runtime::timer`): no handle names
    /// it, so no processor reads or writes it as a store.
    pub fn timers(name: String) -> Self {
        Self {
            name,
            handle_name: None,
            key_codec: Codec::Raw,
            value_codec: Codec::Raw,
            key_type: TypeId::of::<Timer>(),
            value_type: TypeId::of::<Timer>(),
            key_type_name: "timer",
            value_type_name: "nothing (the stream time for its entry)",
            render_key: Arc::new(render_key),
            render_value: Arc::new(render_value),
            // Queried as raw bytes, shown as `dump-state` shows them.
            text: StoreText {
                key_json: Arc::new(|key| render_key(key).into()),
                value_json: Arc::new(|value| render_value(value).into()),
                ..StoreText::of::<Vec<u8>, Vec<u8>>(Codec::Raw, Codec::Raw)
            },
            window_keys: None,
        }
    }

    /// Whether `store`, of this declaration's name, has its types and
    /// codecs.
    #[inline]
    pub fn holds<K: 'static, V: 'static>(&self, store: &Store<K, V>) -> bool {
        self.key_type == TypeId::of::<K>()
            && self.value_type == TypeId::of::<V>()
            && self.key_codec == store.key_codec()
            && self.value_codec == store.value_codec()
    }
}

#[derive(Debug, Clone)]
pub(crate) struct OutputSpec {
    pub topic: String,
    /// Partitions to create the topic with; by default the input's.
    pub partitions: Option<i32>,
    pub key_codec: Codec,
    pub value_codec: Codec,
    pub key_type: TypeId,
    pub value_type: TypeId,
    /// Whether each record emitted carries headers naming the input record
    /// it came from (see `provenance`).
    pub provenance: bool,
}

impl OutputSpec {
    pub fn of<K: 'static, V: 'static>(output: Output<K, V>) -> Self {
        Self {
            topic: output.topic().to_string(),
            partitions: output.partition_count(),
            key_codec: output.key_codec(),
            value_codec: output.value_codec(),
            key_type: TypeId::of::<K>(),
            value_type: TypeId::of::<V>(),
            provenance: false,
        }
    }

    /// Whether `output` is this declaration: same topic, types and codecs.
    #[inline]
    pub fn is<K: 'static, V: 'static>(&self, output: &Output<K, V>) -> bool {
        self.topic == output.topic()
            && self.key_type == TypeId::of::<K>()
            && self.value_type == TypeId::of::<V>()
            && self.key_codec == output.key_codec()
            && self.value_codec == output.value_codec()
    }
}

/// A derived topic as a task emits to it: its spec and partition count.
#[derive(Clone)]
pub(crate) struct TopicOutput {
    pub spec: OutputSpec,
    /// The topic's name in the log (with the version's suffix).
    pub log_topic: String,
    pub partitions: i32,
}

/// Decodes with `codec` as `T` and writes the value readably: strings as
/// they are, anything else as compact JSON; bytes that do not decode as hex.
fn render<T: Serialize + DeserializeOwned + 'static>(codec: Codec) -> Render {
    Arc::new(move |bytes: &[u8]| match codec.decode::<T>(bytes) {
        Ok(value) => match serde_json::to_value(&value) {
            Ok(serde_json::Value::String(text)) => text,
            Ok(other) => other.to_string(),
            Err(_) => hex(bytes),
        },
        Err(_) => hex(bytes),
    })
}

fn hex(bytes: &[u8]) -> String {
    format!("0x{}", strata_record::hex::hex(bytes))
}
