//! Records piped into the driver: encoded with their topic's codecs,
//! placed in a partition, queued, and appended to the log before the next
//! run, with every topic the run reads or writes made first (and kept
//! from time retention).

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use strata_client::partitioner::partition_for_key;
use strata_log::{LogConfig, LogManager};
use strata_record::codec::{Codec, Part};
use strata_record::{BatchBuilder, Compression, Header, NewRecord};

use crate::context::EmitOptions;
use crate::handles::Topic;
use crate::log_access::LogAccess;
use crate::ops::open::{ensure_changelogs, resolve};
use crate::record::RecordHeader;
use crate::topology::App;

use super::{PIPED_BATCH_RECORDS, RETENTION_MS, TestDriver, TestError};

/// A record piped and not yet in the log.
pub(super) struct Piped {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    timestamp: i64,
    headers: Vec<RecordHeader>,
}

impl TestDriver {
    /// Gives an input topic `count` partitions (1 unless set), before
    /// the first record is piped to it.
    pub fn partitions<K, V>(&mut self, topic: Topic<K, V>, count: i32) -> Result<(), TestError> {
        let name = topic.name();
        self.check_input(name)?;
        if count < 1 {
            return Err(TestError::PartitionCount {
                topic: name.to_string(),
                asked: count,
            });
        }
        let piped = self.piped.keys().any(|(t, _)| t == name);
        let fixed = match self.in_log(name) {
            Some(has) => Some(has),
            None => piped.then(|| self.partitions[name]),
        };
        match fixed {
            Some(has) if has != count => Err(TestError::Partitions {
                topic: name.to_string(),
                has,
                asked: count,
            }),
            _ => {
                self.partitions.insert(name.to_string(), count);
                Ok(())
            }
        }
    }

    /// Pipes a record with `key` and `value` into `topic`, stamped with
    /// the clock's time.
    pub fn pipe<K, V, Q, W>(
        &mut self,
        topic: Topic<K, V>,
        key: &Q,
        value: &W,
    ) -> Result<(), TestError>
    where
        K: Borrow<Q>,
        V: Borrow<W>,
        Q: Serialize + ?Sized,
        W: Serialize + ?Sized,
    {
        self.pipe_with(topic, key, value, EmitOptions::default())
    }

    /// Pipes a record with its partition, headers or timestamp given by
    /// `options`.
    pub fn pipe_with<K, V, Q, W>(
        &mut self,
        topic: Topic<K, V>,
        key: &Q,
        value: &W,
        options: EmitOptions,
    ) -> Result<(), TestError>
    where
        K: Borrow<Q>,
        V: Borrow<W>,
        Q: Serialize + ?Sized,
        W: Serialize + ?Sized,
    {
        let key = encode(topic.key_codec(), key, topic.name(), Part::Key)?;
        let value = encode(topic.value_codec(), value, topic.name(), Part::Value)?;
        self.push(topic.name(), Some(key), Some(value), options)
    }

    /// Pipes a tombstone (a record without a value) for `key`.
    pub fn pipe_tombstone<K, V, Q>(
        &mut self,
        topic: Topic<K, V>,
        key: &Q,
        options: EmitOptions,
    ) -> Result<(), TestError>
    where
        K: Borrow<Q>,
        Q: Serialize + ?Sized,
    {
        let key = encode(topic.key_codec(), key, topic.name(), Part::Key)?;
        self.push(topic.name(), Some(key), None, options)
    }

    /// Pipes a record without a key.
    pub fn pipe_keyless<K, V, W>(
        &mut self,
        topic: Topic<K, V>,
        value: &W,
        options: EmitOptions,
    ) -> Result<(), TestError>
    where
        V: Borrow<W>,
        W: Serialize + ?Sized,
    {
        let value = encode(topic.value_codec(), value, topic.name(), Part::Value)?;
        self.push(topic.name(), None, Some(value), options)
    }

    fn push(
        &mut self,
        topic: &str,
        key: Option<Vec<u8>>,
        value: Option<Vec<u8>>,
        options: EmitOptions,
    ) -> Result<(), TestError> {
        self.check_input(topic)?;
        let count = match self.partitions.get(topic) {
            Some(count) => *count,
            None => {
                let count = self.in_log(topic).unwrap_or(1);
                self.partitions.insert(topic.to_string(), count);
                count
            }
        };
        let partition = match (options.partition, &key) {
            (Some(partition), _) => partition,
            (None, Some(key)) => partition_for_key(key, count),
            (None, None) => {
                let next = self.next_keyless.entry(topic.to_string()).or_insert(0);
                let partition = *next % count;
                *next = (partition + 1) % count;
                partition
            }
        };
        if !(0..count).contains(&partition) {
            return Err(TestError::NoSuchPartition {
                topic: topic.to_string(),
                partition,
                has: count,
            });
        }
        let piped = Piped {
            key,
            value,
            timestamp: options.timestamp.unwrap_or_else(|| self.clock.now_ms()),
            headers: options.headers,
        };
        let queue = self.piped.entry((topic.to_string(), partition));
        queue.or_default().push(piped);
        self.up_to_date = false;
        Ok(())
    }

    /// A topic's partition count in the log, if the log has it.
    pub(super) fn in_log(&self, topic: &str) -> Option<i32> {
        let count = crate::topic_read::partition_count(self.data_dir(), topic);
        (count > 0).then_some(count)
    }

    /// Refuses a topic the app does not read from outside.
    pub(super) fn check_input(&self, topic: &str) -> Result<(), TestError> {
        match self.inputs.iter().any(|t| t == topic) {
            true => Ok(()),
            false => Err(TestError::Unknown {
                kind: "input topic",
                name: topic.to_string(),
                declared: self.inputs.join(", "),
            }),
        }
    }

    /// Appends the piped records to the log and forgets them; before,
    /// makes every topic `app` (the app, or a replay's) reads and writes,
    /// each keeping its records for ever.
    pub(super) fn prepare_log(&mut self, app: &App) -> Result<(), TestError> {
        let log = Arc::new(LogManager::open(self.data_dir(), LogConfig::default())?);
        for topic in app.external_inputs() {
            if log.topic(&topic).is_none() {
                let count = self.partitions.get(&topic).copied().unwrap_or(1);
                log.create_topic(&topic, count, BTreeMap::new())?;
            }
        }
        let access = LogAccess::Embedded(Arc::clone(&log), Arc::default());
        self.runtime.block_on(async {
            let partitions = resolve(app, &access).await?;
            ensure_changelogs(app, &access, &partitions).await
        })?;
        drop(access);
        keep_records(&log)?;
        for ((topic, partition), records) in std::mem::take(&mut self.piped) {
            let partition = log.partition(&topic, partition)?;
            for chunk in records.chunks(PIPED_BATCH_RECORDS) {
                partition.append(&batch_of(chunk)?)?;
            }
        }
        let log = Arc::into_inner(log).expect("the driver's log is its own");
        Ok(log.close()?)
    }
}

/// Turns time retention off on every topic of the log: a test's records
/// carry the clock's time or times of the test's choosing, which retention
/// (7 days by default, against the machine's clock) would delete at the
/// first run.
fn keep_records(log: &LogManager) -> Result<(), TestError> {
    let forever = BTreeMap::from([(RETENTION_MS.to_string(), Some("-1".to_string()))]);
    for topic in log.topics() {
        if topic.config.retention_ms != -1 {
            log.alter_topic_config(topic.name(), &forever, false)?;
        }
    }
    Ok(())
}

/// One batch of piped records.
fn batch_of(records: &[Piped]) -> Result<Vec<u8>, TestError> {
    let mut builder = BatchBuilder::new(Compression::None);
    for record in records {
        let headers = Header::from_pairs(&record.headers);
        builder
            .push(NewRecord {
                key: record.key.as_deref(),
                value: record.value.as_deref(),
                timestamp: record.timestamp,
                headers: &headers,
            })
            .map_err(strata_log::LogError::from)?;
    }
    Ok(builder.build().map_err(strata_log::LogError::from)?)
}

fn encode<T: Serialize + ?Sized>(
    codec: Codec,
    value: &T,
    topic: &str,
    part: Part,
) -> Result<Vec<u8>, TestError> {
    let mut out = Vec::new();
    (codec.encode_record_into(topic, part, value, &mut out)).map_err(|error| TestError::Codec {
        what: format!(
            "topic {topic:?}: a piped record's {}",
            match part {
                Part::Key => "key",
                Part::Value => "value",
            }
        ),
        error,
    })?;
    Ok(out)
}
