//! strata-record: Kafka v2 record batches, the unit that producers send,
//! the log stores and consumers fetch, byte for byte; the serde [`codec`]s
//! of processors' keys and values; the wall clock and RFC 3339 date-times
//! ([`time`]) every layer shares.
//!
//! Everything here is pure: no I/O, no async, no global state. A
//! [`RecordBatch`] is a zero-copy view over borrowed bytes; [`BatchBuilder`]
//! writes new batches. Every length read from a batch is checked against the
//! bytes available (and, for decompression, against a caller's limit) before
//! anything is allocated, so no input can make this module panic or allocate
//! without bound.

mod batch;
mod builder;
mod compression;
mod control;
mod error;
mod framing;
mod header;
mod records;
mod restamp;
mod retain;
mod sequence;
mod varint;

pub mod codec;
pub mod heavy_hitters;
pub mod hex;
pub mod time;

pub use batch::{RecordBatch, crc32c};
pub use builder::{BatchBuilder, NewRecord};
pub use compression::Compression;
pub use control::{ControlRecord, MarkerKind};
pub use error::RecordError;
pub use header::{
    BATCH_HEADER_BYTES, BatchHeader, LOG_OVERHEAD_BYTES, MAGIC_V2, NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID, NO_SEQUENCE, TimestampType, set_base_offset, set_partition_leader_epoch,
};
pub use records::{Header, Record, RecordCursor, RecordIter, Records};
pub use restamp::restamp_producer;
pub use retain::retain_records;
pub use sequence::add_sequence;

/// Result alias for this crate's batch functions.
pub type Result<T, E = RecordError> = std::result::Result<T, E>;
