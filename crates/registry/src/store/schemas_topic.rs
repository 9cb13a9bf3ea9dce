//! SchemasTopic: the `_schemas` topic of the broker's own log, written
//! and read in process (no Kafka client, no network).
//!
//! One partition, `cleanup.policy=compact`: the latest record of each key
//! is what the registry needs, and the cleaner drops the rest. Every write
//! is one batch appended at the log end, announced to waiting fetches (a
//! consumer of `_schemas` sees it at once) and flushed to disk before the
//! caller answers its client: an acknowledged registration survives a
//! crash. Reading starts from the log start and stops at the log end seen
//! when it began.

use std::collections::BTreeMap;
use std::sync::Arc;

use strata_log::{AppendSignals, LogError, LogManager, PartitionLog, Topic};
use strata_record::{BatchBuilder, Compression, NewRecord, RecordBatch, time::now_ms};

use super::StoreError;
use super::record::Encoded;

/// The topic's name, as Confluent's registry names it.
pub const SCHEMAS_TOPIC: &str = "_schemas";
/// The largest batch the topic takes (its `max.message.bytes` when the
/// registry creates it): a soft delete of a subject writes every version's
/// text in one batch, each at most `registry::SCHEMA_BYTES_MAX`.
pub const BATCH_BYTES_MAX: usize = 16 << 20;
/// How much one read of the topic asks for: a whole batch of the largest.
const READ_BYTES_MAX: u64 = BATCH_BYTES_MAX as u64;
/// The most a batch of the topic may inflate to when read.
const DECOMPRESSED_BYTES_MAX: usize = 64 << 20;

pub struct SchemasTopic {
    topic: Arc<Topic>,
    partition: Arc<PartitionLog>,
    appends: Arc<AppendSignals>,
}

impl SchemasTopic {
    /// Opens the topic, creating it (compacted, one partition, batches up
    /// to [`BATCH_BYTES_MAX`]) if the log has none.
    pub fn open(log: &LogManager, appends: Arc<AppendSignals>) -> Result<Self, StoreError> {
        let topic = match log.topic(SCHEMAS_TOPIC) {
            Some(topic) => topic,
            None => {
                // Room for the largest batch the registry writes: a soft
                // delete of a subject holds every version's text.
                let config = BTreeMap::from([
                    ("cleanup.policy".to_string(), "compact".to_string()),
                    ("max.message.bytes".to_string(), BATCH_BYTES_MAX.to_string()),
                ]);
                match log.create_topic(SCHEMAS_TOPIC, 1, config) {
                    Ok(topic) => topic,
                    // Made meanwhile by a client's auto-creation.
                    Err(LogError::TopicExists(_)) => log
                        .topic(SCHEMAS_TOPIC)
                        .ok_or_else(|| StoreError::Missing(SCHEMAS_TOPIC.into()))?,
                    Err(error) => return Err(StoreError::log("creating", error)),
                }
            }
        };
        let partition = topic
            .partition(0)
            .ok_or_else(|| StoreError::Missing(format!("{SCHEMAS_TOPIC}-0")))?;
        if !partition.config().cleanup.compact {
            tracing::warn!(
                "the {SCHEMAS_TOPIC} topic is not compacted: its deleted schemas stay on disk \
                 until retention removes them, and retention may remove live ones too; set \
                 cleanup.policy=compact on it"
            );
        }
        Ok(Self {
            topic,
            partition,
            appends,
        })
    }

    /// Calls `each` with every record's offset, key and value (`None` for a
    /// tombstone), in offset order.
    pub fn read_all(
        &self,
        mut each: impl FnMut(i64, &[u8], Option<&[u8]>),
    ) -> Result<(), StoreError> {
        let end = self.partition.log_end_offset();
        let mut offset = self.partition.log_start_offset();
        while offset < end {
            let read = (self.partition.read(offset, READ_BYTES_MAX))
                .and_then(strata_log::LogRead::into_vec)
                .map_err(|e| StoreError::log("reading", e))?;
            if read.is_empty() {
                break;
            }
            let mut rest = &read[..];
            while !rest.is_empty() {
                let batch = RecordBatch::parse_and_verify(rest)
                    .map_err(|e| StoreError::Batch { offset, source: e })?;
                rest = &rest[batch.size_bytes()..];
                offset = batch.header().last_offset() + 1;
                if batch.header().is_control() {
                    continue;
                }
                let records =
                    (batch.records(DECOMPRESSED_BYTES_MAX)).map_err(|e| StoreError::Batch {
                        offset: batch.header().base_offset,
                        source: e,
                    })?;
                for record in records.iter() {
                    let record = record.map_err(|e| StoreError::Batch {
                        offset: batch.header().base_offset,
                        source: e,
                    })?;
                    if let Some(key) = record.key {
                        each(record.offset, key, record.value);
                    }
                }
            }
        }
        Ok(())
    }

    /// Appends `records` as one batch and waits until they are on disk.
    pub fn append(&self, records: &[Encoded]) -> Result<(), StoreError> {
        assert!(!records.is_empty(), "a change writes at least one record");
        let mut builder = BatchBuilder::new(Compression::None);
        let timestamp = now_ms();
        for (key, value) in records {
            let record = NewRecord {
                key: Some(key),
                value: value.as_deref(),
                timestamp,
                headers: &[],
            };
            builder.push(record).map_err(|e| StoreError::Batch {
                offset: -1,
                source: e,
            })?;
        }
        let batch = builder.build().map_err(|e| StoreError::Batch {
            offset: -1,
            source: e,
        })?;
        let appended =
            (self.partition.append(&batch)).map_err(|e| StoreError::log("appending to", e))?;
        let end = appended.last_offset + 1;
        self.appends.appended(self.topic.id(), 0, end);
        (self.partition.flush_to(end)).map_err(|e| StoreError::log("flushing", e))?;
        Ok(())
    }
}
