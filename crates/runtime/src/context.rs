//! [`Context`]: what a processor sees besides the record: the record's
//! position, its stores (through [`Store`] handles) and `emit` to derived
//! topics (through [`Topic`] handles), and timers (`schedule`, `cancel`;
//! see `timer`). Everything goes into the task's current run (see
//! `state`) and is committed with the input offsets.
//!
//! Nothing here awaits: a store read that misses the task's tables reads
//! RocksDB on the task's own (blocking) thread.

use std::borrow::Borrow;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

use serde::Serialize;
use serde::de::DeserializeOwned;

use strata_client::partitioner::partition_for_key;
use strata_record::codec::{Codec, Part};
use strata_record::{Header, NewRecord};

use super::handles::{Store, Topic};
use super::position::Position;
use super::process_error::ProcessError;
use super::provenance::{self, Origin};
use super::record::RecordHeader;
use super::spec::{StoreSpec, TopicOutput};
use super::state::{EncodeBuffers, TaskState, prefix_end};
use super::task_metrics::{KeySampler, TaskMetrics};
use super::timer::{TIMER_KEY_BYTES_MAX, TimeDomain};

pub struct Context<'c> {
    pub(crate) state: &'c mut TaskState,
    pub(crate) stores: &'c [StoreSpec],
    pub(crate) outputs: &'c [TopicOutput],
    /// Mutable so that a run of records shares one context, moved from
    /// record to record (see `ErasedProcessor::process_run`).
    pub(crate) position: &'c mut Position,
    pub(crate) processor: &'c str,
    /// The task's counters, for [`Context::dropped`] and the keys written.
    pub(crate) metrics: &'c TaskMetrics,
    /// Which `put`s have their keys counted (see `task_metrics`); none
    /// with the task's metrics off.
    pub(crate) written: Option<&'c mut KeySampler>,
    /// False in a rebuild: the derived topics already hold what the
    /// processor emits, so emits are checked and dropped.
    pub(crate) emits: bool,
    /// Who emits, for an output with provenance.
    pub(crate) origin: Origin<'c>,
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

impl Context<'_> {
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

    /// Counts a record the processor drops, for `reason` (`"late"`: past
    /// its window's grace, say): `/metrics` shows it as
    /// `strata_task_dropped_records_total{reason}` (Kafka Streams'
    /// dropped-records). A count for watching, not state: a batch processed
    /// again after a crash counts again.
    pub fn dropped(&mut self, reason: &'static str) {
        self.metrics.dropped(reason);
    }

    /// The record's headers, in order (none in `init` and `close`).
    pub fn headers(&self) -> &[RecordHeader] {
        &self.position.headers
    }

    /// The name of the running processor.
    pub fn processor(&self) -> &str {
        self.processor
    }

    /// Schedules a timer: the processor's `on_timer` is called once
    /// `time_ms` is reached in `domain` (see [`TimeDomain`]), with `key`.
    /// A timer is (domain, time, key): scheduling one that exists changes
    /// nothing. Committed with the run; the processor must declare
    /// `.timers()` (a function processor, `.on_timer(f)`).
    pub fn schedule(
        &mut self,
        domain: TimeDomain,
        time_ms: i64,
        key: impl AsRef<[u8]>,
    ) -> Result<(), ProcessError> {
        self.set_timer(domain, time_ms, key.as_ref(), true)
    }

    /// Cancels the timer (domain, time, key), if there is one: it does not
    /// fire (even if due in the same sweep).
    pub fn cancel(
        &mut self,
        domain: TimeDomain,
        time_ms: i64,
        key: impl AsRef<[u8]>,
    ) -> Result<(), ProcessError> {
        self.set_timer(domain, time_ms, key.as_ref(), false)
    }

    /// The task's stream time: the greatest timestamp of the records it has
    /// processed, this one included (kept with the timer store, so it
    /// survives restarts). None before the first record, and for a
    /// processor that declares no timers.
    pub fn stream_time(&self) -> Option<i64> {
        self.state.stream_time()
    }

    fn set_timer(
        &mut self,
        domain: TimeDomain,
        time_ms: i64,
        key: &[u8],
        present: bool,
    ) -> Result<(), ProcessError> {
        if key.len() > TIMER_KEY_BYTES_MAX {
            return Err(ProcessError::msg(format!(
                "processor {:?}: a timer key of {} bytes, over the {TIMER_KEY_BYTES_MAX} allowed: use a shorter key (a hash, or an id the store maps)",
                self.processor,
                key.len()
            )));
        }
        self.state
            .set_timer(domain, time_ms, key, present)
            .ok_or_else(|| {
                ProcessError::msg(format!(
                    "processor {:?} uses timers but declares none: add .timers() after .processor({:?}, ..) (a function processor, .on_timer(f))",
                    self.processor, self.processor
                ))
            })
    }

    /// The value of `key` in `store`, as this run has left it (reads see
    /// the writes made earlier in the run).
    pub fn get<K, V, Q>(&mut self, store: Store<K, V>, key: &Q) -> Result<Option<V>, ProcessError>
    where
        K: Borrow<Q> + 'static,
        V: DeserializeOwned + 'static,
        Q: Serialize + ?Sized,
    {
        let index = self.store_index(&store)?;
        let read = self.state.with_buffers(|state, buffers| {
            store.key_codec().encode_into(key, &mut buffers.key)?;
            let decode = |raw: Option<&[u8]>| raw.map(|raw| store.value_codec().decode(raw));
            Ok::<_, ProcessError>(state.read_at(index, &buffers.key, decode)?)
        })?;
        Ok(read.transpose()?)
    }

    pub fn put<K, V, Q>(
        &mut self,
        store: Store<K, V>,
        key: &Q,
        value: &V,
    ) -> Result<(), ProcessError>
    where
        K: Borrow<Q> + 'static,
        V: Serialize + 'static,
        Q: Serialize + ?Sized,
    {
        let index = self.store_index(&store)?;
        let (written, metrics) = (self.written.as_deref_mut(), self.metrics);
        self.state.with_buffers(|state, buffers| {
            store.key_codec().encode_into(key, &mut buffers.key)?;
            store.value_codec().encode_into(value, &mut buffers.value)?;
            state.put_at(index, &buffers.key, &buffers.value);
            if written.is_some_and(KeySampler::pick) {
                metrics.wrote(index, &buffers.key);
            }
            Ok(())
        })
    }

    pub fn delete<K, V, Q>(&mut self, store: Store<K, V>, key: &Q) -> Result<(), ProcessError>
    where
        K: Borrow<Q> + 'static,
        V: 'static,
        Q: Serialize + ?Sized,
    {
        let index = self.store_index(&store)?;
        self.state.with_buffers(|state, buffers| {
            store.key_codec().encode_into(key, &mut buffers.key)?;
            state.delete_at(index, &buffers.key);
            Ok(())
        })
    }

    /// The entries of `store` whose keys are in `range` (`..` for all of
    /// them), in the order of the encoded keys (with the raw and utf8
    /// codecs, the order of the bytes), as this run has left them.
    pub fn range<K, V, R>(
        &mut self,
        store: Store<K, V>,
        range: R,
    ) -> Result<Entries<K, V>, ProcessError>
    where
        K: Serialize + DeserializeOwned + 'static,
        V: DeserializeOwned + 'static,
        R: RangeBounds<K>,
    {
        self.store_index(&store)?;
        let codec = store.key_codec();
        // Bounds on encoded keys: the successor of a byte string `k` is
        // `k` followed by a zero byte.
        let after = |key: &K| -> Result<Vec<u8>, ProcessError> {
            let mut bytes = codec.encode(key)?;
            bytes.push(0);
            Ok(bytes)
        };
        let from = match range.start_bound() {
            Bound::Included(key) => codec.encode(key)?,
            Bound::Excluded(key) => after(key)?,
            Bound::Unbounded => Vec::new(),
        };
        let to = match range.end_bound() {
            Bound::Included(key) => Some(after(key)?),
            Bound::Excluded(key) => Some(codec.encode(key)?),
            Bound::Unbounded => None,
        };
        let entries = self.state.range(store.name(), &from, to.as_deref())?;
        Ok(Entries::new(entries, &store))
    }

    /// The entries of `store` whose encoded key starts with the encoded
    /// `prefix` (meaningful with the raw and utf8 key codecs, where a
    /// string prefix is a byte prefix), in order.
    pub fn prefix<K, V, Q>(
        &mut self,
        store: Store<K, V>,
        prefix: &Q,
    ) -> Result<Entries<K, V>, ProcessError>
    where
        K: DeserializeOwned + 'static,
        V: DeserializeOwned + 'static,
        Q: Serialize + ?Sized,
    {
        self.store_index(&store)?;
        let prefix = store.key_codec().encode(prefix)?;
        let end = prefix_end(&prefix);
        let entries = self.state.range(store.name(), &prefix, end.as_deref())?;
        Ok(Entries::new(entries, &store))
    }

    /// Emits `key` → `value` to `output` (declared as an output of this
    /// processor), partitioned by key, with the input record's timestamp.
    pub fn emit<K, V, Q, W>(
        &mut self,
        output: Topic<K, V>,
        key: &Q,
        value: &W,
    ) -> Result<(), ProcessError>
    where
        K: Borrow<Q> + 'static,
        V: Borrow<W> + 'static,
        Q: Serialize + ?Sized,
        W: Serialize + ?Sized,
    {
        self.emit_record(&output, Some(key), Some(value), EmitOptions::default())
    }

    /// Emits with an explicit partition, headers or timestamp.
    pub fn emit_with<K, V, Q, W>(
        &mut self,
        output: Topic<K, V>,
        key: &Q,
        value: &W,
        options: EmitOptions,
    ) -> Result<(), ProcessError>
    where
        K: Borrow<Q> + 'static,
        V: Borrow<W> + 'static,
        Q: Serialize + ?Sized,
        W: Serialize + ?Sized,
    {
        self.emit_record(&output, Some(key), Some(value), options)
    }

    /// Emits a tombstone for `key`: a record with no value, partitioned by
    /// key, which deletes the key from a compacted topic and from a table
    /// read from the topic (Kafka's null value).
    pub fn emit_tombstone<K, V, Q>(
        &mut self,
        output: Topic<K, V>,
        key: &Q,
        options: EmitOptions,
    ) -> Result<(), ProcessError>
    where
        K: Borrow<Q> + 'static,
        V: 'static,
        Q: Serialize + ?Sized,
    {
        self.emit_record::<K, V, Q, [u8]>(&output, Some(key), None, options)
    }

    /// Emits a record without a key: it goes to the options' partition, or
    /// else to the input's partition number modulo the topic's partitions,
    /// so a replay places it the same.
    pub fn emit_keyless<K, V, W>(
        &mut self,
        output: Topic<K, V>,
        value: &W,
        options: EmitOptions,
    ) -> Result<(), ProcessError>
    where
        K: 'static,
        V: Borrow<W> + 'static,
        W: Serialize + ?Sized,
    {
        self.emit_record::<K, V, [u8], W>(&output, None, Some(value), options)
    }

    fn emit_record<K: 'static, V: 'static, Q, W>(
        &mut self,
        output: &Topic<K, V>,
        key: Option<&Q>,
        value: Option<&W>,
        options: EmitOptions,
    ) -> Result<(), ProcessError>
    where
        Q: Serialize + ?Sized,
        W: Serialize + ?Sized,
    {
        let Some(declared) = self.outputs.iter().find(|o| o.spec.is(output)) else {
            return Err(self.undeclared_output(output));
        };
        // Encoded into the task's reused buffers: no allocation per emit.
        let (position, emits, origin) = (&*self.position, self.emits, self.origin);
        self.state.with_buffers(|state, buffers| {
            let record = (key, value, options);
            let from = (position, &origin);
            emit_encoded(state, from, emits, declared, record, buffers)
        })
    }

    /// The position of `store` in the task's state (which holds its
    /// stores in the order they are declared).
    #[inline]
    fn store_index<K: 'static, V: 'static>(
        &self,
        store: &Store<K, V>,
    ) -> Result<usize, ProcessError> {
        let name = store.name();
        let found = (self
            .stores
            .iter()
            .position(|s| s.handle_name.is_some_and(|h| std::ptr::eq(h, name))))
        .or_else(|| self.stores.iter().position(|s| s.name == name));
        match found {
            Some(index) if self.stores[index].holds(store) => {
                debug_assert_eq!(self.state.stores()[index], store.name());
                Ok(index)
            }
            found => Err(self.unusable_store(store, found)),
        }
    }

    /// Why `store` cannot be used: declared with other types or codecs
    /// (at `found`), or not declared. Out of line, so that every get and
    /// put does not set up room for the message.
    #[cold]
    #[inline(never)]
    fn unusable_store<K: 'static, V: 'static>(
        &self,
        store: &Store<K, V>,
        found: Option<usize>,
    ) -> ProcessError {
        let Some(index) = found else {
            return ProcessError::msg(format!(
                "no store {:?} declared for processor {:?} (declared: {}): declare it with .store(..) after .processor({:?}, ..)",
                store.name(),
                self.processor,
                self.stores
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                self.processor,
            ));
        };
        let spec = &self.stores[index];
        ProcessError::msg(format!(
            "store {:?} holds {} → {} ({} / {} codecs), not {} → {} ({} / {})",
            spec.name,
            spec.key_type_name,
            spec.value_type_name,
            spec.key_codec.name(),
            spec.value_codec.name(),
            std::any::type_name::<K>(),
            std::any::type_name::<V>(),
            store.key_codec().name(),
            store.value_codec().name(),
        ))
    }

    #[cold]
    fn undeclared_output<K, V>(&self, output: &Topic<K, V>) -> ProcessError {
        let topic = output.topic();
        if self.outputs.iter().any(|o| o.spec.topic == topic) {
            return ProcessError::msg(format!(
                "processor {:?} emits {} → {} to {topic:?}, which it declared with other types or codecs",
                self.processor,
                std::any::type_name::<K>(),
                std::any::type_name::<V>(),
            ));
        }
        ProcessError::msg(format!(
            "processor {:?} emits to {topic:?}, which is not one of its outputs (declare it with .output(..))",
            self.processor
        ))
    }
}

/// Encodes a record for `output` into `buffers` and, when `emits`, adds it
/// to the run's batch of its partition.
fn emit_encoded<Q, W>(
    state: &mut TaskState,
    (position, origin): (&Position, &Origin<'_>),
    emits: bool,
    output: &TopicOutput,
    (key, value, options): (Option<&Q>, Option<&W>, EmitOptions),
    buffers: &mut EncodeBuffers,
) -> Result<(), ProcessError>
where
    Q: Serialize + ?Sized,
    W: Serialize + ?Sized,
{
    let topic = &output.spec.topic;
    let key = match key {
        Some(k) => {
            (output.spec.key_codec).encode_record_into(topic, Part::Key, k, &mut buffers.key)?;
            Some(&buffers.key[..])
        }
        None => None,
    };
    let value = match value {
        Some(v) => {
            let buffer = &mut buffers.value;
            (output.spec.value_codec).encode_record_into(topic, Part::Value, v, buffer)?;
            Some(&buffers.value[..])
        }
        None => None,
    };
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
    // Not in a rebuild, which drops what it emits.
    let from = match output.spec.provenance && emits {
        true => provenance::headers(
            origin,
            (&position.topic, position.partition, position.offset),
        ),
        false => Vec::new(),
    };
    let mut headers = Header::from_pairs(&options.headers);
    if !from.is_empty() && !headers.is_empty() {
        // Headers copied from the input name what made the input.
        headers.retain(|h| !h.key.starts_with(provenance::PREFIX.as_bytes()));
    }
    headers.extend(from.iter().map(|(name, value)| Header {
        key: name.as_bytes(),
        value: Some(value.as_bytes()),
    }));
    let record = NewRecord {
        key,
        value,
        timestamp: options.timestamp.unwrap_or(position.timestamp),
        headers: &headers,
    };
    if emits {
        state.emit(&output.log_topic, partition, record)?;
    }
    Ok(())
}

/// The entries of a range or prefix scan, in key order, each decoded as it
/// is taken.
pub struct Entries<K, V> {
    entries: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
    key_codec: Codec,
    value_codec: Codec,
    types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Entries<K, V> {
    fn new(entries: Vec<(Vec<u8>, Vec<u8>)>, store: &Store<K, V>) -> Self {
        Self {
            entries: entries.into_iter(),
            key_codec: store.key_codec(),
            value_codec: store.value_codec(),
            types: PhantomData,
        }
    }
}

impl<K, V> Iterator for Entries<K, V>
where
    K: DeserializeOwned + 'static,
    V: DeserializeOwned + 'static,
{
    type Item = Result<(K, V), ProcessError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (key, value) = self.entries.next()?;
        let decoded = (|| {
            Ok((
                self.key_codec.decode(&key)?,
                self.value_codec.decode(&value)?,
            ))
        })();
        Some(decoded)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl<K, V> ExactSizeIterator for Entries<K, V>
where
    K: DeserializeOwned + 'static,
    V: DeserializeOwned + 'static,
{
}
