//! [`Context`]: what a processor sees besides the record: the record's
//! position, the processor's typed stores ([`Store`]) and `emit` to derived
//! topics. Everything goes into the task's current run (see `state`).

use std::any::TypeId;
use std::borrow::Borrow;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::client::partitioner::partition_for_key;
use crate::record::{Header, NewRecord};

use super::processor::{ProcessError, RecordHeader};
use super::state::{EncodeBuffers, TaskState, prefix_end};
use super::topology::{OutputSpec, StoreSpec};

/// A derived topic as a task emits to it: its spec and partition count.
#[derive(Clone)]
pub(crate) struct Output {
    pub spec: OutputSpec,
    /// The topic's name in the log (with the version's suffix).
    pub log_topic: String,
    pub partitions: i32,
}

/// The record being processed, but for its key and value (offset -1 and no
/// headers in `init` and `close`).
#[derive(Debug, Clone)]
pub(crate) struct Position {
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub headers: Vec<RecordHeader>,
}

pub struct Context<'c> {
    pub(crate) state: &'c mut TaskState,
    pub(crate) stores: &'c [StoreSpec],
    pub(crate) outputs: &'c [Output],
    pub(crate) position: &'c Position,
    pub(crate) processor: &'c str,
    /// False in a rebuild: the derived topics already hold what the
    /// processor emits, so emits are checked and dropped.
    pub(crate) emits: bool,
}

/// How to emit a record besides its topic, key and value.
#[derive(Debug, Clone, Default)]
pub struct EmitOptions {
    /// The partition; by default the key's (Java-compatible murmur2).
    pub partition: Option<i32>,
    pub headers: Vec<RecordHeader>,
    /// Milliseconds since the Unix epoch; by default the input record's.
    pub timestamp: Option<i64>,
}

impl EmitOptions {
    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    pub fn header(mut self, name: impl Into<String>, value: Option<&[u8]>) -> Self {
        self.headers.push((name.into(), value.map(<[u8]>::to_vec)));
        self
    }

    pub fn timestamp(mut self, timestamp_ms: i64) -> Self {
        self.timestamp = Some(timestamp_ms);
        self
    }
}

impl<'c> Context<'c> {
    /// The input topic of the record being processed.
    pub fn topic(&self) -> &str {
        &self.position.topic
    }

    pub fn partition(&self) -> i32 {
        self.position.partition
    }

    /// The record's offset (-1 in `init` and `close`).
    pub fn offset(&self) -> i64 {
        self.position.offset
    }

    /// The record's timestamp, ms since the Unix epoch.
    pub fn timestamp(&self) -> i64 {
        self.position.timestamp
    }

    /// The record's headers, in order (none in `init` and `close`).
    pub fn headers(&self) -> &[RecordHeader] {
        &self.position.headers
    }

    /// The name of the running processor.
    pub fn processor(&self) -> &str {
        self.processor
    }

    /// The store `name` with key type `K` and value type `V`, as declared on
    /// the app builder. An undeclared name or other types fail at the first
    /// call on the store.
    pub fn store<K, V>(&mut self, name: &str) -> Store<'_, K, V>
    where
        K: Serialize + DeserializeOwned + 'static,
        V: Serialize + DeserializeOwned + 'static,
    {
        // A task's state holds its stores in the order they are declared.
        let found = self.stores.iter().enumerate().find(|(_, s)| s.name == name);
        let checked = match found {
            None => Err(format!(
                "no store {name:?} declared for processor {:?} (declared: {})",
                self.processor,
                self.stores
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Some((_, spec))
                if spec.key_type != TypeId::of::<K>() || spec.value_type != TypeId::of::<V>() =>
            {
                Err(format!(
                    "store {name:?} holds {} → {}, not {} → {}",
                    spec.key_type_name,
                    spec.value_type_name,
                    std::any::type_name::<K>(),
                    std::any::type_name::<V>()
                ))
            }
            Some((index, spec)) => {
                debug_assert_eq!(self.state.stores()[index], spec.name);
                Ok((spec, index))
            }
        };
        Store {
            state: self.state,
            spec: checked,
            types: PhantomData,
        }
    }

    /// Emits `key` → `value` to the derived topic `topic` (declared as an
    /// output of this processor), partitioned by key, with the input
    /// record's timestamp.
    pub fn emit<K, V>(&mut self, topic: &str, key: &K, value: &V) -> Result<(), ProcessError>
    where
        K: Serialize + ?Sized,
        V: Serialize + ?Sized,
    {
        self.emit_with(topic, Some(key), value, EmitOptions::default())
    }

    /// Emits with an explicit partition, headers or timestamp, or without a
    /// key (`key` None: the record goes to the input's partition number,
    /// modulo the topic's partitions, so a replay places it the same).
    pub fn emit_with<K, V>(
        &mut self,
        topic: &str,
        key: Option<&K>,
        value: &V,
        options: EmitOptions,
    ) -> Result<(), ProcessError>
    where
        K: Serialize + ?Sized,
        V: Serialize + ?Sized,
    {
        let output = self
            .outputs
            .iter()
            .find(|o| o.spec.topic == topic)
            .ok_or_else(|| {
                ProcessError::msg(format!(
                    "processor {:?} emits to {topic:?}, which is not one of its outputs (declare it with .output({topic:?}))",
                    self.processor
                ))
            })?;
        // Encoded into the task's reused buffers: no allocation per emit.
        let (position, emits) = (self.position, self.emits);
        self.state.with_buffers(|state, buffers| {
            let record = (key, value, options);
            emit_encoded(state, position, emits, output, record, buffers)
        })
    }
}

/// Encodes a record for `output` into `buffers` and, when `emits`, adds it
/// to the run's batch of its partition.
fn emit_encoded<K, V>(
    state: &mut TaskState,
    position: &Position,
    emits: bool,
    output: &Output,
    (key, value, options): (Option<&K>, &V, EmitOptions),
    buffers: &mut EncodeBuffers,
) -> Result<(), ProcessError>
where
    K: Serialize + ?Sized,
    V: Serialize + ?Sized,
{
    let topic = &output.spec.topic;
    let key = match key {
        Some(k) => {
            output.spec.key_codec.encode_into(k, &mut buffers.key)?;
            Some(&buffers.key[..])
        }
        None => None,
    };
    output
        .spec
        .value_codec
        .encode_into(value, &mut buffers.value)?;
    let value = &buffers.value[..];
    let partition = match (options.partition, key) {
        (Some(p), _) if (0..output.partitions).contains(&p) => p,
        (Some(p), _) => {
            return Err(ProcessError::msg(format!(
                "partition {p} of {topic:?}, which has {} partitions",
                output.partitions
            )));
        }
        (None, Some(key)) => partition_for_key(key, output.partitions),
        (None, None) => position.partition.rem_euclid(output.partitions),
    };
    let headers: Vec<Header<'_>> = options
        .headers
        .iter()
        .map(|(k, v)| Header {
            key: k.as_bytes(),
            value: v.as_deref(),
        })
        .collect();
    let record = NewRecord {
        key,
        value: Some(value),
        timestamp: options.timestamp.unwrap_or(position.timestamp),
        headers: &headers,
    };
    if emits {
        state.emit(&output.log_topic, partition, record)?;
    }
    Ok(())
}

/// A typed view of one state store. Keys and values are encoded with the
/// store's codecs; reads see the writes made earlier in the same run.
/// Ordered scans follow the order of the encoded keys (with the raw and
/// utf8 codecs, the order of the bytes).
pub struct Store<'s, K, V> {
    state: &'s mut TaskState,
    /// The store's declaration and its position in the task's state.
    spec: Result<(&'s StoreSpec, usize), String>,
    types: PhantomData<fn(K, V)>,
}

impl<K, V> Store<'_, K, V>
where
    K: Serialize + DeserializeOwned + 'static,
    V: Serialize + DeserializeOwned + 'static,
{
    pub fn get<Q>(&mut self, key: &Q) -> Result<Option<V>, ProcessError>
    where
        K: Borrow<Q>,
        Q: Serialize + ?Sized,
    {
        let (spec, index) = checked(&self.spec)?;
        let read = self.state.with_buffers(|state, buffers| {
            spec.key_codec.encode_into(key, &mut buffers.key)?;
            let decode = |raw: Option<&[u8]>| raw.map(|raw| spec.value_codec.decode(raw));
            Ok::<_, ProcessError>(state.read_at(index, &buffers.key, decode)?)
        })?;
        Ok(read.transpose()?)
    }

    pub fn put<Q>(&mut self, key: &Q, value: &V) -> Result<(), ProcessError>
    where
        K: Borrow<Q>,
        Q: Serialize + ?Sized,
    {
        let (spec, index) = checked(&self.spec)?;
        self.state.with_buffers(|state, buffers| {
            spec.key_codec.encode_into(key, &mut buffers.key)?;
            spec.value_codec.encode_into(value, &mut buffers.value)?;
            state.put_at(index, &buffers.key, &buffers.value);
            Ok(())
        })
    }

    pub fn delete<Q>(&mut self, key: &Q) -> Result<(), ProcessError>
    where
        K: Borrow<Q>,
        Q: Serialize + ?Sized,
    {
        let (spec, index) = checked(&self.spec)?;
        self.state.with_buffers(|state, buffers| {
            spec.key_codec.encode_into(key, &mut buffers.key)?;
            state.delete_at(index, &buffers.key);
            Ok(())
        })
    }

    /// Entries with `from <= key < to` (`to` None: to the end), in order.
    pub fn range(&mut self, from: &K, to: Option<&K>) -> Result<Vec<(K, V)>, ProcessError> {
        let (spec, _) = checked(&self.spec)?;
        let from = spec.key_codec.encode(from)?;
        let to = to.map(|t| spec.key_codec.encode(t)).transpose()?;
        let entries = self.state.range(&spec.name, &from, to.as_deref())?;
        self.decode_all(entries)
    }

    /// Entries whose encoded key starts with the encoded `prefix` (meaningful
    /// with the raw and utf8 key codecs, where a string prefix is a byte
    /// prefix), in order.
    pub fn prefix<Q>(&mut self, prefix: &Q) -> Result<Vec<(K, V)>, ProcessError>
    where
        Q: Serialize + ?Sized,
    {
        let (spec, _) = checked(&self.spec)?;
        let prefix = spec.key_codec.encode(prefix)?;
        let end = prefix_end(&prefix);
        let entries = self.state.range(&spec.name, &prefix, end.as_deref())?;
        self.decode_all(entries)
    }

    fn decode_all(&self, entries: Vec<(Vec<u8>, Vec<u8>)>) -> Result<Vec<(K, V)>, ProcessError> {
        let (spec, _) = checked(&self.spec)?;
        entries
            .into_iter()
            .map(|(k, v)| Ok((spec.key_codec.decode(&k)?, spec.value_codec.decode(&v)?)))
            .collect()
    }
}

#[inline]
fn checked<'a>(
    spec: &Result<(&'a StoreSpec, usize), String>,
) -> Result<(&'a StoreSpec, usize), ProcessError> {
    match spec {
        Ok(found) => Ok(*found),
        Err(message) => Err(ProcessError::msg(message)),
    }
}
