//! strata-log: the segment log, topics, partitions and segment files on disk.
//!
//! Synchronous and network-free. A [`LogManager`] owns a data directory of
//! topics; each partition is a [`PartitionLog`] of [`Segment`]s, each a
//! `.log` file of Kafka v2 batches (byte for byte as on the wire) plus sparse
//! [`OffsetIndex`] and [`TimeIndex`] files. This module is the only place
//! that calls fsync, and every change it makes to files goes through
//! [`storage`].

mod append_signals;
mod cleaner;
mod config;
mod decompression_slots;
mod error;
mod file_slice;
pub mod files;
mod group_commit;
mod header_walk;
mod index_file;
mod limits;
mod log_manager;
mod offset_index;
mod partition_log;
mod peek;
mod producer_ids;
mod producer_state;
mod recovery;
mod segment;
mod segment_swap;
pub mod storage;
mod time_index;
mod transaction_index;

pub use append_signals::{AppendSignals, AppendWatch};
pub use cleaner::{CleanOutcome, CleanerConfig, Throttle, clean_partition};
pub use config::{CONFIG_KEYS, CleanupPolicy, LogConfig, SEGMENT_BYTES_MAX, SEGMENT_BYTES_MIN};
pub use error::LogError;
pub use file_slice::FileSlice;
pub use header_walk::ProducerStateLoad;
pub use limits::{DECOMPRESSIONS_AT_ONCE_MAX, PARTITIONS_MAX};
pub use log_manager::{LogManager, Topic, TopicMetadata, peek_topic_metadata, validate_topic_name};
pub use offset_index::OffsetIndex;
pub use partition_log::{
    ActiveProducer, AppendInfo, CleanView, CleanedSegment, Isolation, LogRead, PartitionLog,
    RetentionOutcome, SegmentSnapshot, flush_together,
};
pub use peek::{
    peek_batch_holding, peek_batches, peek_log_end_offset, peek_log_start_offset,
    peek_segment_max_timestamp,
};
pub use producer_ids::{
    PRODUCER_ID_BLOCK, ProducerIdAndEpoch, ProducerIds, TRANSACTIONAL_ID_BYTES_MAX,
    TRANSACTIONAL_IDS_MAX, epoch_exhausted,
};
pub use producer_state::{
    BATCHES_PER_PRODUCER, BatchMetadata, PRODUCER_EXPIRATION_MS, PRODUCERS_PER_PARTITION_MAX,
};
pub use recovery::{Corruption, RecoveryReport, Truncation};
pub use segment::{Segment, file_name};
/// The clock lives in [`strata_record::time`]; this path stays for existing callers.
pub use strata_record::time::now_ms;
pub use time_index::TimeIndex;
pub use transaction_index::{AbortedTransaction, OpenTransaction};
