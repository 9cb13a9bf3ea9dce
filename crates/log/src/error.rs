//! Errors of the segment log, each carrying the topic, partition, file or
//! offset it concerns. The broker maps them to Kafka error codes in one place.

use std::path::PathBuf;

use strata_record::RecordError;

/// Why a log operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The OS error is part of the message (not a separate source), so it
    /// is printed once however the error is formatted.
    #[error("{context}: {error}")]
    Io {
        context: String,
        error: std::io::Error,
    },
    #[error("invalid record batch: {0}")]
    InvalidBatch(#[from] RecordError),
    #[error(
        "offset {offset} is out of range for {partition} (log start {log_start_offset}, log end {log_end_offset})"
    )]
    OffsetOutOfRange {
        partition: String,
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    #[error("{partition} is read-only: {reason}")]
    ReadOnly { partition: String, reason: String },
    #[error("{partition} is corrupt from offset {offset} ({path}, position {position}): {reason}")]
    Corrupt {
        partition: String,
        offset: i64,
        path: PathBuf,
        position: u64,
        reason: String,
    },
    #[error("topic '{0}' does not exist")]
    UnknownTopic(String),
    #[error("partition {partition} of topic '{topic}' does not exist")]
    UnknownPartition { topic: String, partition: i32 },
    #[error("topic '{0}' already exists")]
    TopicExists(String),
    #[error("invalid topic name '{name}': {reason}")]
    InvalidTopicName { name: String, reason: String },
    #[error("invalid config {key}={value}: {reason}")]
    InvalidConfig {
        key: String,
        value: String,
        reason: String,
    },
    #[error("invalid partition count {0}: must be between 1 and {max}", max = super::limits::PARTITIONS_MAX)]
    InvalidPartitionCount(i32),
    #[error("batch of {size} bytes exceeds max.message.bytes {limit}")]
    BatchTooLarge { size: usize, limit: usize },
    #[error("metadata file {path} is unreadable: {reason}")]
    BadMetadata { path: PathBuf, reason: String },
    #[error(
        "producer {producer_id} of {partition} is fenced: epoch {epoch} is older than its current epoch {current_epoch}"
    )]
    InvalidProducerEpoch {
        partition: String,
        producer_id: i64,
        epoch: i16,
        current_epoch: i16,
    },
    #[error(
        "out-of-order sequence from producer {producer_id} (epoch {epoch}) in {partition}: batch starts at sequence {first_sequence}, expected {expected_sequence}"
    )]
    OutOfOrderSequence {
        partition: String,
        producer_id: i64,
        epoch: i16,
        first_sequence: i32,
        expected_sequence: i32,
    },
    #[error(
        "duplicate sequence from producer {producer_id} (epoch {epoch}) in {partition}: sequences {first_sequence}..={last_sequence} were appended before (last appended {last_appended}) but are no longer among the batches remembered with their offsets"
    )]
    DuplicateSequence {
        partition: String,
        producer_id: i64,
        epoch: i16,
        first_sequence: i32,
        last_sequence: i32,
        last_appended: i32,
    },
    #[error(
        "{partition} is a compacted topic's partition and refuses a record without a key (offset {offset} of the batch): give every record a key"
    )]
    UnkeyedRecord { partition: String, offset: i64 },
    #[error("{producer} is fenced: epoch {epoch} is not its current epoch {current_epoch}")]
    ProducerFenced {
        producer: String,
        epoch: i16,
        current_epoch: i16,
    },
    #[error("invalid transactional id: {reason}")]
    InvalidTransactionalId { reason: String },
    #[error("{limit} transactional ids are in use, the most this broker maps")]
    TransactionalIdsFull { limit: usize },
    #[error("every producer id has been handed out")]
    ProducerIdsExhausted,
}

impl LogError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            error: source,
        }
    }
}

/// Attaches a description to I/O errors.
pub(crate) trait IoContext<T> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T, LogError>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T, LogError> {
        self.map_err(|source| LogError::io(context(), source))
    }
}
