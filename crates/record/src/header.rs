//! The fixed 61-byte header of a Kafka v2 record batch: its layout, the
//! decoded [`BatchHeader`], and the writers that fill or patch it in place.
//!
//! ```text
//! offset  size  field
//!      0     8  baseOffset            i64   assigned by the log; not covered by the CRC
//!      8     4  batchLength           i32   bytes after this field (total = 12 + batchLength)
//!     12     4  partitionLeaderEpoch  i32
//!     16     1  magic                 i8    always 2
//!     17     4  crc                   u32   CRC32C of bytes 21..end
//!     21     2  attributes            i16   bits 0-2 codec, 3 timestamp type,
//!                                            4 transactional, 5 control, 6 delete horizon
//!     23     4  lastOffsetDelta       i32
//!     27     8  baseTimestamp         i64
//!     35     8  maxTimestamp          i64
//!     43     8  producerId            i64
//!     51     2  producerEpoch         i16
//!     53     4  baseSequence          i32
//!     57     4  recordCount           i32
//!     61     …  records (compressed as a whole when the codec is not none)
//! ```
//!
//! All integers are big-endian. Because the CRC starts at byte 21, the log can
//! rewrite `baseOffset` (and `partitionLeaderEpoch`) without touching it.

use super::compression::Compression;
use super::{RecordError, Result};

/// Bytes before `batchLength`'s payload starts: baseOffset + batchLength.
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// Size of the fixed v2 header.
pub const BATCH_HEADER_BYTES: usize = 61;
/// The only supported magic value.
pub const MAGIC_V2: i8 = 2;
/// producerId of a batch written without idempotence.
pub const NO_PRODUCER_ID: i64 = -1;
/// producerEpoch of a batch written without idempotence.
pub const NO_PRODUCER_EPOCH: i16 = -1;
/// baseSequence of a batch written without idempotence.
pub const NO_SEQUENCE: i32 = -1;

const BASE_OFFSET_AT: usize = 0;
const LENGTH_AT: usize = 8;
const LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
pub(super) const CRC_AT: usize = 17;
pub(super) const CRC_COVERS_FROM: usize = 21;
pub(super) const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
pub(super) const PRODUCER_ID_AT: usize = 43;
pub(super) const PRODUCER_EPOCH_AT: usize = 51;
pub(super) const BASE_SEQUENCE_AT: usize = 53;
const RECORD_COUNT_AT: usize = 57;
const _: () = assert!(RECORD_COUNT_AT + 4 == BATCH_HEADER_BYTES);
const _: () = assert!(MAGIC_AT == LOG_OVERHEAD_BYTES + 4);

const TIMESTAMP_TYPE_BIT: i16 = 1 << 3;
pub(super) const TRANSACTIONAL_BIT: i16 = 1 << 4;
const CONTROL_BIT: i16 = 1 << 5;

/// How the batch's timestamps were assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// Set by the producer.
    CreateTime,
    /// Set by the broker on append.
    LogAppendTime,
}

/// The decoded fixed header of a batch. Cheap to copy; holds no bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl BatchHeader {
    /// Decodes the 61-byte header at the front of `bytes` without checking
    /// anything but that the bytes are there.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        if bytes.len() < BATCH_HEADER_BYTES {
            return Err(RecordError::Truncated {
                needed: BATCH_HEADER_BYTES,
                available: bytes.len(),
            });
        }
        Ok(Self {
            base_offset: read_i64(bytes, BASE_OFFSET_AT),
            batch_length: read_i32(bytes, LENGTH_AT),
            partition_leader_epoch: read_i32(bytes, LEADER_EPOCH_AT),
            magic: bytes[MAGIC_AT] as i8,
            crc: read_i32(bytes, CRC_AT) as u32,
            attributes: read_i16(bytes, ATTRIBUTES_AT),
            last_offset_delta: read_i32(bytes, LAST_OFFSET_DELTA_AT),
            base_timestamp: read_i64(bytes, BASE_TIMESTAMP_AT),
            max_timestamp: read_i64(bytes, MAX_TIMESTAMP_AT),
            producer_id: read_i64(bytes, PRODUCER_ID_AT),
            producer_epoch: read_i16(bytes, PRODUCER_EPOCH_AT),
            base_sequence: read_i32(bytes, BASE_SEQUENCE_AT),
            record_count: read_i32(bytes, RECORD_COUNT_AT),
        })
    }

    /// Reads just baseOffset and batchLength (the first 12 bytes), which is all
    /// a scan over a segment needs to step from batch to batch. Returns the
    /// total size of the batch, checked to be at least a header.
    pub fn peek_size(bytes: &[u8]) -> Result<(i64, usize)> {
        if bytes.len() < LOG_OVERHEAD_BYTES {
            return Err(RecordError::Truncated {
                needed: LOG_OVERHEAD_BYTES,
                available: bytes.len(),
            });
        }
        let length = read_i32(bytes, LENGTH_AT);
        let size = total_size(length)?;
        Ok((read_i64(bytes, BASE_OFFSET_AT), size))
    }

    /// Total bytes of the batch including baseOffset and batchLength.
    pub fn size_bytes(&self) -> usize {
        LOG_OVERHEAD_BYTES + self.batch_length.max(0) as usize
    }

    /// Offset of the last record (baseOffset + lastOffsetDelta).
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
    }

    /// Offset the next batch after this one starts at.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }

    /// The compression codec named by the attributes.
    pub fn compression(&self) -> Result<Compression> {
        Compression::from_attributes(self.attributes)
    }

    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    /// Checks the fields that can be checked without the payload: magic,
    /// length, counts and deltas. Does not check the CRC.
    pub fn check(&self) -> Result<()> {
        if self.magic != MAGIC_V2 {
            return Err(RecordError::UnsupportedMagic { magic: self.magic });
        }
        total_size(self.batch_length)?;
        self.compression()?;
        if self.record_count < 0 {
            return Err(RecordError::Invalid(format!(
                "negative record count {}",
                self.record_count
            )));
        }
        if self.last_offset_delta < 0 {
            return Err(RecordError::Invalid(format!(
                "negative lastOffsetDelta {}",
                self.last_offset_delta
            )));
        }
        if self.record_count > 0 && self.last_offset_delta < self.record_count - 1 {
            return Err(RecordError::Invalid(format!(
                "lastOffsetDelta {} is below recordCount {} - 1",
                self.last_offset_delta, self.record_count
            )));
        }
        Ok(())
    }
}

fn total_size(batch_length: i32) -> Result<usize> {
    let minimum = BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES;
    if batch_length < 0 || (batch_length as usize) < minimum {
        return Err(RecordError::InvalidLength {
            length: batch_length,
            minimum,
        });
    }
    Ok(LOG_OVERHEAD_BYTES + batch_length as usize)
}

/// Overwrites baseOffset of the batch at the front of `bytes`. The CRC does not
/// cover it, so the batch stays valid.
pub fn set_base_offset(bytes: &mut [u8], base_offset: i64) {
    bytes[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Overwrites partitionLeaderEpoch (also outside the CRC).
pub fn set_partition_leader_epoch(bytes: &mut [u8], epoch: i32) {
    bytes[LEADER_EPOCH_AT..LEADER_EPOCH_AT + 4].copy_from_slice(&epoch.to_be_bytes());
}

pub(super) fn attributes_for(compression: Compression, transactional: bool, control: bool) -> i16 {
    let mut attributes = compression.id();
    if transactional {
        attributes |= TRANSACTIONAL_BIT;
    }
    if control {
        attributes |= CONTROL_BIT;
    }
    attributes
}

pub(super) struct HeaderFields {
    pub base_offset: i64,
    pub batch_length: i32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

pub(super) fn write_header(out: &mut [u8], fields: &HeaderFields) {
    out[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&fields.base_offset.to_be_bytes());
    out[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&fields.batch_length.to_be_bytes());
    out[LEADER_EPOCH_AT..LEADER_EPOCH_AT + 4].copy_from_slice(&(-1i32).to_be_bytes());
    out[MAGIC_AT] = MAGIC_V2 as u8;
    out[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&fields.attributes.to_be_bytes());
    out[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]
        .copy_from_slice(&fields.last_offset_delta.to_be_bytes());
    out[BASE_TIMESTAMP_AT..BASE_TIMESTAMP_AT + 8]
        .copy_from_slice(&fields.base_timestamp.to_be_bytes());
    out[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8]
        .copy_from_slice(&fields.max_timestamp.to_be_bytes());
    out[PRODUCER_ID_AT..PRODUCER_ID_AT + 8].copy_from_slice(&fields.producer_id.to_be_bytes());
    out[PRODUCER_EPOCH_AT..PRODUCER_EPOCH_AT + 2]
        .copy_from_slice(&fields.producer_epoch.to_be_bytes());
    out[BASE_SEQUENCE_AT..BASE_SEQUENCE_AT + 4]
        .copy_from_slice(&fields.base_sequence.to_be_bytes());
    out[RECORD_COUNT_AT..RECORD_COUNT_AT + 4].copy_from_slice(&fields.record_count.to_be_bytes());
}

fn read_i64(bytes: &[u8], at: usize) -> i64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[at..at + 8]);
    i64::from_be_bytes(raw)
}

fn read_i32(bytes: &[u8], at: usize) -> i32 {
    let mut raw = [0u8; 4];
    raw.copy_from_slice(&bytes[at..at + 4]);
    i32::from_be_bytes(raw)
}

fn read_i16(bytes: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([bytes[at], bytes[at + 1]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_shorter_than_61_bytes_are_truncated_errors() {
        assert!(matches!(
            BatchHeader::parse(&[0u8; 60]),
            Err(RecordError::Truncated {
                needed: 61,
                available: 60
            })
        ));
        assert!(BatchHeader::peek_size(&[0u8; 11]).is_err());
    }

    #[test]
    fn magic_other_than_two_is_unsupported() {
        let mut raw = [0u8; BATCH_HEADER_BYTES];
        raw[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&49i32.to_be_bytes());
        raw[MAGIC_AT] = 1;
        let header = BatchHeader::parse(&raw).unwrap();
        assert_eq!(
            header.check(),
            Err(RecordError::UnsupportedMagic { magic: 1 })
        );
    }
}
